// Command go-router is an example HTTP router that embeds the kvidx index the way an LLM
// request scheduler would: engines' KV events come in on POST /events, requests are routed
// on POST /route to the worker with the best mix of cached prefix and load, and the index's
// counters are exported on GET /metrics. See newHandler for the API.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// options are the command-line settings.
type options struct {
	addr         string
	backend      string
	eventThreads uint
	blockSize    uint
	loadWeight   float64
}

func main() {
	var o options
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen address")
	flag.StringVar(&o.backend, "backend", "positional", "index backend: positional or radix")
	flag.UintVar(&o.eventThreads, "event-threads", 2, "index event threads (0: apply on the request goroutine)")
	flag.UintVar(&o.blockSize, "block-size", 16, "tokens per KV block, for token_ids in POST /route")
	flag.Float64Var(&o.loadWeight, "load-weight", 4, "prefill blocks one in-flight request is worth")
	flag.Parse()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		log.Fatal(err)
	}
	srv, ix, err := newServer(o)
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Printf("go-router listening on %s (backend %s)", ln.Addr(), o.backend)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

// newServer builds the index, the router and the HTTP server for the options.
func newServer(o options) (*http.Server, *kvidx.Indexer, error) {
	cfg := kvidx.Config{EventThreads: uint32(o.eventThreads)}
	switch o.backend {
	case "positional":
		cfg.Backend = kvidx.BackendPositional
	case "radix":
		cfg.Backend = kvidx.BackendRadix
	default:
		return nil, nil, errors.New("unknown backend " + o.backend)
	}
	if o.blockSize == 0 || o.blockSize > 1<<20 {
		return nil, nil, errors.New("block size out of range")
	}
	ix, err := kvidx.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	h := newHandler(NewRouter(ix, o.loadWeight), ix, uint32(o.blockSize))
	return &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ix, nil
}
