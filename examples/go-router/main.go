// Command go-router is an example HTTP router that embeds the kvidx index the way an LLM
// request scheduler would: engines' KV events come in on POST /events, requests are routed
// on POST /route to the worker with the best mix of cached prefix and load, and the index's
// counters are exported on GET /metrics. See newHandler for the API.
//
// With --nats URL the router is a replica: it consumes engine batches from the KVIDX_EVENTS
// JetStream stream (each applied once, as the offset batch at its stream sequence), saves
// snapshots to the KVIDX_SNAPSHOTS object store and starts from the newest valid one (see
// replica.go and docs/replicas.md).
//
// With --zmq URL=WORKER[:RANK][,replay=URL] (repeatable) the router subscribes to the engines'
// ZMQ KV-event publishers itself, with no bus: each publisher's batches are applied as they
// arrive, gaps filled from its replay socket (zmq.go, package zmqfeed of the binding).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/kvidx/kvidx/bindings/go/zmqfeed"
)

// options are the command-line settings.
type options struct {
	addr         string
	backend      string
	eventThreads uint
	blockSize    uint
	loadWeight   float64
	tierWeights  tierWeights
	// unknownMedium is the tier (device, host, disk, external) of an event medium kvidx does
	// not know.
	unknownMedium string
	maxBody       int64
	// maxInflight bounds the request bytes held at once across requests (-max-inflight-bytes).
	maxInflight int64
	limits      Limits
	timeouts    timeouts
	// logLevel is the lowest level logged (-log-level): debug logs every request.
	logLevel slog.Level
	// nats is --nats mode: events come from the KVIDX_EVENTS stream (docs/replicas.md).
	nats natsOptions
	// zmq is --zmq mode: events come from the engines' ZMQ publishers directly.
	zmq zmqOptions
	// predictions are the prediction settings (-predict-ttl, -event-free, ...).
	predictions predictionOptions
}

// timeouts are the HTTP server's: a request's header must arrive within readHeader and the
// whole request within read (slow bodies get 408 and the connection is closed), a response
// must be written within write of the header's end, and a kept-alive connection with no
// request is closed after idle.
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultOptions are the command-line defaults.
func defaultOptions() options {
	return options{
		addr:          "127.0.0.1:8080",
		backend:       "runs",
		eventThreads:  2,
		blockSize:     16,
		loadWeight:    4,
		tierWeights:   DefaultTierWeights,
		unknownMedium: "external",
		maxBody:       8 << 20,
		maxInflight:   256 << 20,
		limits:        DefaultLimits(),
		logLevel:      slog.LevelInfo,
		timeouts:      timeouts{readHeader: 5 * time.Second, read: 30 * time.Second, write: 30 * time.Second, idle: 2 * time.Minute},
		nats:          defaultNATSOptions(),
		zmq:           zmqOptions{format: kvidx.EngineVLLM},
	}
}

func main() {
	o, exit, done := parseCommandLine(os.Args[1:], os.Stdout, os.Stderr)
	if done {
		os.Exit(exit)
	}
	logger := newLogger(os.Stderr, o.logLevel)
	slog.SetDefault(logger)
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, ix, stopFeed, err := newFedServer(ctx, o)
	if err != nil {
		fatal(err)
	}
	srv.Handler = logRequests(srv.Handler, logger)
	defer ix.Close()
	defer stopFeed()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	mode := "POST /events"
	switch {
	case o.nats.url != "":
		mode = "stream " + streamName + " on " + o.nats.url
	case len(o.zmq.sources) > 0:
		mode = fmt.Sprintf("ZMQ: %d engine publishers (%s)", len(o.zmq.sources), o.zmq.format)
	}
	logger.Info("go-router listening", "addr", ln.Addr().String(), "backend", o.backend, "events", mode, "log_level", o.logLevel.String())
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fatal(err)
	}
}

// fatal logs err at error level and exits with status 1.
func fatal(err error) {
	slog.Error(err.Error())
	os.Exit(1)
}

// usageHeader opens the usage text, above the flags.
const usageHeader = `Usage: go-router [flags]

An HTTP router over a kvidx index: engines' KV events come in on POST /events, or with
--zmq straight from the engines' ZMQ publishers (one router, no bus), or with --nats from the
KVIDX_EVENTS JetStream stream (replicas: the way to scale out). POST /route picks the worker
with the best mix of cached prefix and load. Every flag takes one dash or two.

  go-router --zmq tcp://10.0.0.7:5557=7,replay=tcp://10.0.0.7:5567 \
            --zmq tcp://10.0.0.7:5558=7:1,replay=tcp://10.0.0.7:5568

Flags:
`

// parseCommandLine reads the flags in args. -h, -help and --help print the usage on stdout
// (exit 0); a bad flag or a stray argument prints the error and the usage on stderr (exit 2).
// done says the program must exit with exit instead of running.
func parseCommandLine(args []string, stdout, stderr io.Writer) (o options, exit int, done bool) {
	o = defaultOptions()
	fs := flag.NewFlagSet("go-router", flag.ContinueOnError)
	fs.SetOutput(stderr) // the flag package's own messages (a bad flag's error)
	fs.Usage = func() {} // printed below, on the right stream
	fs.StringVar(&o.addr, "addr", o.addr, "listen address")
	fs.StringVar(&o.backend, "backend", o.backend, "index backend: runs (the library's default), positional or radix")
	fs.UintVar(&o.eventThreads, "event-threads", o.eventThreads, "index event threads (0: apply on the request goroutine)")
	fs.UintVar(&o.blockSize, "block-size", o.blockSize, "tokens per KV block, for token_ids in POST /route")
	fs.Float64Var(&o.loadWeight, "load-weight", o.loadWeight, "prefill blocks one in-flight request is worth (>= 0)")
	fs.Var(tierWeightsFlag{&o.tierWeights}, "tier-weights", "what a cached block is worth by its fastest tier: device,host,disk,external (each in [0, 1], non-increasing)")
	fs.StringVar(&o.unknownMedium, "unknown-medium", o.unknownMedium, "storage tier of an event medium kvidx does not know: device, host, disk or external")
	fs.Int64Var(&o.maxBody, "max-body", o.maxBody, "largest request body in bytes (larger: 413)")
	fs.Int64Var(&o.maxInflight, "max-inflight-bytes", o.maxInflight, "request bytes held at once across requests: bodies being read and the ids decoded from them (beyond: 503 with Retry-After)")
	fs.IntVar(&o.limits.MaxWorkers, "max-workers", o.limits.MaxWorkers, "workers (id, dp rank) known at once (beyond: 409)")
	fs.IntVar(&o.limits.MaxNewWorkersPerRequest, "max-new-workers", o.limits.MaxNewWorkersPerRequest, "new workers one POST /events may register (beyond: 400)")
	fs.IntVar(&o.limits.MaxRoutes, "max-routes", o.limits.MaxRoutes, "routed requests tracked as in flight (beyond: the oldest are forgotten; at least 64)")
	fs.DurationVar(&o.limits.RouteTTL, "route-ttl", o.limits.RouteTTL, "a routed request not DELETEd within this no longer counts as load")
	fs.DurationVar(&o.timeouts.readHeader, "read-header-timeout", o.timeouts.readHeader, "time to receive a request's header")
	fs.DurationVar(&o.timeouts.read, "read-timeout", o.timeouts.read, "time to receive a whole request, body included")
	fs.DurationVar(&o.timeouts.write, "write-timeout", o.timeouts.write, "time to handle a request and write its response")
	fs.DurationVar(&o.timeouts.idle, "idle-timeout", o.timeouts.idle, "time a kept-alive connection may wait for its next request")
	fs.TextVar(&o.logLevel, "log-level", o.logLevel, "lowest level logged on stderr: debug (every request: method, path, status, duration), info (start, replica progress, errors), warn or error")
	fs.DurationVar(&o.predictions.ttl, "predict-ttl", 0, "record each route's blocks as predicted for its worker for this long, scoring workers by the larger of their confirmed and predicted depth (0: off; with -event-free the default is "+defaultEventFreeTTL.String()+", a safety net for a cache lost without the router knowing: -predict-worker-capacity approximates the engine's cache)")
	fs.BoolVar(&o.predictions.eventFree, "event-free", false, "event-free mode: no engine events (POST /events answers 409); the index is fed by routing decisions only (predictions, -predict-ttl), among the workers of -worker-ids, each holding at most -predict-worker-capacity predicted blocks (required)")
	fs.StringVar(&o.predictions.workerIDs, "worker-ids", "", "-event-free: the routing candidates, comma-separated ids, each optionally id:rank (rank 0 by default)")
	fs.Uint64Var(&o.predictions.workerCapacity, "predict-worker-capacity", 0, "predicted blocks each worker may hold (least recently predicted dropped first): in -event-free mode (where it is required), about its engine's cache in blocks, what approximates that cache (0: no bound)")
	fs.Uint64Var(&o.predictions.maxBytes, "predict-max-bytes", 0, "bytes all predictions may take (least recently predicted dropped first; 0: the library's default, 64 MiB)")
	fs.StringVar(&o.nats.url, "nats", "", "NATS URL (e.g. nats://127.0.0.1:4222): consume engine batches from the KVIDX_EVENTS JetStream stream, snapshot to the KVIDX_SNAPSHOTS object store, POST /events off")
	fs.Uint64Var(&o.nats.snapshotMsgs, "snapshot-msgs", o.nats.snapshotMsgs, "--nats: save a snapshot after this many stream messages")
	fs.DurationVar(&o.nats.snapshotEvery, "snapshot-every", o.nats.snapshotEvery, "--nats: save a snapshot at least this often while messages arrive")
	fs.IntVar(&o.nats.snapshotKeep, "snapshot-keep", o.nats.snapshotKeep, "--nats: newest snapshots kept in the bucket")
	fs.BoolVar(&o.nats.saveSnapshots, "save-snapshots", o.nats.saveSnapshots, "--nats: save snapshots (false: only load them)")
	fs.BoolVar(&o.nats.serveBehind, "serve-while-behind", false, "--nats: answer /route before the replica has caught up with the stream (from a partial index; answers carry Kvidx-Replica-Behind)")
	fs.BoolVar(&o.nats.shareRoutes, "share-routes", o.nats.shareRoutes, "--nats: announce each route and each DELETE on the NATS subject "+routeSubject+" and count the other replicas' routes as load, so that the replicas' load views agree")
	fs.BoolVar(&o.nats.allowGap, "allow-stream-gap", false, "--nats: start even when the stream no longer holds every message after the newest usable snapshot (those batches are missed)")
	fs.Func("zmq", "`URL=WORKER[:RANK][,replay=URL]` (repeatable): subscribe to an engine's ZMQ KV-event publisher at URL (tcp://HOST:PORT or ipc://PATH; one per DP rank) for worker WORKER, rank RANK (default 0), filling gaps from its ROUTER replay socket; POST /events off", func(s string) error {
		src, err := zmqfeed.ParseSource(s)
		if err == nil {
			o.zmq.sources = append(o.zmq.sources, src)
		}
		return err
	})
	fs.Func("zmq-format", "--zmq: the engines' wire `format`: vllm, sglang or trtllm (default vllm)", func(s string) (err error) {
		o.zmq.format, err = parseEngineFormat(s)
		return err
	})
	fs.StringVar(&o.zmq.topic, "zmq-topic", "", "--zmq: the topic `prefix` subscribed to (default: every topic)")
	fs.Var(hashCheckFlag{&o.nats.hashCheck}, "hash-check", "--nats: recompute the engines' block hashes with these algorithms (comma-separated: vllm-sha256-cbor or vllm-xxhash-cbor, sglang-sha256) at -block-size and count matches per publisher in GET /metrics")
	fs.StringVar(&o.nats.hashCheck.seed, "hash-seed", o.nats.hashCheck.seed, "--nats -hash-check: vLLM's NONE_HASH seed (the engines' PYTHONHASHSEED; unset: vllm-none-hash)")
	usage := func(w io.Writer) {
		fmt.Fprint(w, usageHeader)
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout)
		return o, 0, true
	case err != nil:
		usage(stderr)
		return o, 2, true
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		usage(stderr)
		return o, 2, true
	case o.nats.url != "" && len(o.zmq.sources) > 0:
		fmt.Fprintln(stderr, "--zmq and --nats exclude each other: a router takes its events from the engines or from the stream")
		usage(stderr)
		return o, 2, true
	}
	return o, 0, false
}

// newServer builds the index, the router and the HTTP server for the options.
func newServer(o options) (*http.Server, *kvidx.Indexer, error) {
	srv, ix, _, err := buildServer(o)
	return srv, ix, err
}

// newFedServer is newServer plus the feed of the index other than POST /events: in --nats
// mode the replica (bootstrap from the newest snapshot, then the stream consumer), in --zmq
// mode the engines' subscribers; either runs until ctx ends or stop is called (stop waits for
// it; call it before closing the index).
func newFedServer(ctx context.Context, o options) (srv *http.Server, ix *kvidx.Indexer, stop func(), err error) {
	srv, ix, api, err := buildServer(o)
	if err != nil {
		return nil, nil, nil, err
	}
	stop = func() {}
	o.nats.hashCheck.blockSize = uint32(o.blockSize)
	switch {
	case o.nats.url != "":
		var rep *replica
		if rep, err = startReplica(ctx, o.nats, ix, api.router); err == nil {
			api.replica, stop = rep, rep.close
		}
	case len(o.zmq.sources) > 0:
		var z *zmqInput
		if z, err = startZMQ(ctx, o.zmq, ix, api.router); err == nil {
			api.zmq, stop = z, z.close
		}
	}
	if err != nil {
		_ = ix.Close()
		return nil, nil, nil, err
	}
	return srv, ix, stop, nil
}

// buildServer builds the index, the router and the HTTP server for the options, and returns
// the API's state.
func buildServer(o options) (*http.Server, *kvidx.Indexer, *server, error) {
	cfg := kvidx.Config{EventThreads: uint32(o.eventThreads)}
	switch o.backend {
	case "positional":
		cfg.Backend = kvidx.BackendPositional
	case "radix":
		cfg.Backend = kvidx.BackendRadix
	case "runs":
		cfg.Backend = kvidx.BackendRuns
	default:
		return nil, nil, nil, errors.New("unknown backend " + o.backend)
	}
	if o.blockSize == 0 || o.blockSize > 1<<20 {
		return nil, nil, nil, errors.New("block size out of range")
	}
	if o.maxBody <= 0 || o.maxInflight <= 0 {
		return nil, nil, nil, errors.New("max body and max in-flight bytes must be positive")
	}
	unknownMedium, err := parseTier(o.unknownMedium)
	if err != nil || unknownMedium == kvidx.TierAll {
		return nil, nil, nil, fmt.Errorf("unknown medium tier %q: want device, host, disk or external", o.unknownMedium)
	}
	if err := validTierWeights(o.tierWeights); err != nil {
		return nil, nil, nil, err
	}
	t := o.timeouts
	if t.readHeader <= 0 || t.read <= 0 || t.write <= 0 || t.idle <= 0 {
		return nil, nil, nil, errors.New("every timeout must be positive")
	}
	p, err := o.predictions.resolve(o.nats.url != "" || len(o.zmq.sources) > 0)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Predictions = kvidx.PredictionConfig{MaxBytes: p.maxBytes, WorkerCapacity: p.workerCapacity}
	ix, err := kvidx.New(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	r, err := NewTieredRouter(ix, o.loadWeight, o.tierWeights, o.limits)
	if err == nil {
		_, err = r.Register(p.workers)
	}
	if err != nil {
		_ = ix.Close()
		return nil, nil, nil, err
	}
	r.PredictRoutes(p.ttl)
	api := newAPI(r, ix, uint32(o.blockSize), o.maxBody, o.maxInflight, unknownMedium)
	api.eventFree = p.eventFree
	srv := &http.Server{
		Handler:           api.handler(),
		ReadHeaderTimeout: t.readHeader,
		ReadTimeout:       t.read,
		WriteTimeout:      t.write,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    64 << 10,
	}
	return srv, ix, api, nil
}

// tierWeights is the -tier-weights flag: four comma-separated numbers, the worth of a cached
// block on the device, in host memory, on disk and in an external store, each in [0, 1] and
// non-increasing.
type tierWeights = [kvidx.NumTiers]float64

// tierWeightsFlag parses -tier-weights into a tierWeights.
type tierWeightsFlag struct{ w *tierWeights }

// String formats the weights as the flag takes them ("1,0.8,0.5,0.2").
func (f tierWeightsFlag) String() string {
	if f.w == nil {
		return ""
	}
	return formatTierWeights(*f.w)
}

// Set parses and validates the flag's value.
func (f tierWeightsFlag) Set(s string) error {
	w, err := parseTierWeights(s)
	if err == nil {
		*f.w = w
	}
	return err
}

func formatTierWeights(w tierWeights) string {
	parts := make([]string, len(w))
	for i, x := range w {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// parseTierWeights reads four comma-separated numbers in [0, 1], non-increasing.
func parseTierWeights(s string) (tierWeights, error) {
	var out tierWeights
	parts := strings.Split(s, ",")
	if len(parts) != kvidx.NumTiers {
		return out, fmt.Errorf("tier weights %q: want %d comma-separated numbers (device,host,disk,external)", s, kvidx.NumTiers)
	}
	for i, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil {
			return out, fmt.Errorf("tier weights %q: %q is not a number", s, p)
		}
		out[i] = x
	}
	if err := validTierWeights(out); err != nil {
		return out, err
	}
	return out, nil
}
