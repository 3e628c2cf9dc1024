package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/kvidx/kvidx/bindings/go/zmqfeed"
)

func TestZMQFlags(t *testing.T) {
	o, exit, done := parseCommandLine([]string{
		"--zmq", "tcp://10.0.0.7:5557=7,replay=tcp://10.0.0.7:5567",
		"--zmq", "tcp://10.0.0.7:5558=7:1", "--zmq-format", "SGLang", "--zmq-topic", "kv@"}, io.Discard, io.Discard)
	if done {
		t.Fatalf("exit %d", exit)
	}
	want := []zmqfeed.Source{
		{Endpoint: "tcp://10.0.0.7:5557", Replay: "tcp://10.0.0.7:5567", WorkerID: 7},
		{Endpoint: "tcp://10.0.0.7:5558", WorkerID: 7, DpRank: 1},
	}
	if len(o.zmq.sources) != 2 || o.zmq.sources[0] != want[0] || o.zmq.sources[1] != want[1] ||
		o.zmq.format != kvidx.EngineSGLang || o.zmq.topic != "kv@" {
		t.Fatalf("%+v", o.zmq)
	}
	if o = defaultOptions(); o.zmq.format != kvidx.EngineVLLM || len(o.zmq.sources) != 0 {
		t.Fatalf("defaults %+v", o.zmq)
	}
}

// In --zmq mode the engines are the index's only source: POST /events and DELETE /workers
// answer 409, the sources' workers are routing candidates from the start, /metrics has each
// publisher's counters; two publishers for one (worker, rank) are refused.
func TestZMQModeServer(t *testing.T) {
	o := testOptions()
	o.zmq.sources = []zmqfeed.Source{{Endpoint: "tcp://127.0.0.1:9", WorkerID: 7}, {Endpoint: "tcp://127.0.0.1:9", WorkerID: 7, DpRank: 1}}
	ctx, cancel := context.WithCancel(context.Background())
	srv, ix, stop, err := newFedServer(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); stop(); _ = ix.Close() }()
	for _, req := range [][2]string{{"POST", "/events"}, {"DELETE", "/workers/7"}} {
		rec := serve(srv.Handler, req[0], req[1], `{"worker_id":7,"cleared":{}}`)
		if rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "--zmq") {
			t.Errorf("%s %s: %d %s, want 409 naming --zmq", req[0], req[1], rec.Code, rec.Body)
		}
	}
	rec := serve(srv.Handler, "GET", "/metrics", "")
	for _, want := range []string{"router_workers 2\n", `router_zmq_gaps_total{worker_id="7",dp_rank="1"} 0`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	o.zmq.sources[1].DpRank = 0
	if _, _, _, err := newFedServer(ctx, o); err == nil || !strings.Contains(err.Error(), "two publishers") {
		t.Errorf("two publishers for one worker: %v", err)
	}
}

// serve answers one request with h.
func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec
}
