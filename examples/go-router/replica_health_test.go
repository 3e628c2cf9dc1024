package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go/jetstream"
)

// gatedReplica is a replica without NATS behind the router's HTTP API, with one worker
// holding one block, for the routing gate; created is its stream's creation time.
func gatedReplica(t *testing.T, o natsOptions, created time.Time) (*replica, http.Handler) {
	t.Helper()
	ix, err := kvidx.New(kvidx.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	router, err := NewRouter(ix, 4, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	api := newAPI(router, ix, e2eBlockSize, 1<<20, 1<<24, kvidx.TierExternal)
	r := &replica{o: o, router: router, streamCreated: created.UnixNano(), consumeFrom: time.Now()}
	r.streamApplier = newStreamApplier(ix, func(k workerKey) { _, _ = router.Register([]workerKey{k}) })
	t.Cleanup(r.resetFeeds)
	if err := r.handleMsg(engineBatchMsg(t, 1, 3, 0, 0, "1", "0", 0, 1)); err != nil {
		t.Fatal(err)
	}
	api.replica = r
	return r, api.handler()
}

// routeOnce posts one /route and returns the recorder.
func routeOnce(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/route", strings.NewReader(`{"local_hashes": [1, 2]}`)))
	return rec
}

// wantRefused checks a 503 with Retry-After and the router's JSON error naming want.
func wantRefused(t *testing.T, rec *httptest.ResponseRecorder, want string) {
	t.Helper()
	var e errorResponse
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
		rec.Header().Get("Content-Type") != "application/json" || json.Unmarshal(rec.Body.Bytes(), &e) != nil ||
		!strings.Contains(e.Error, want) {
		t.Fatalf("/route: %d, Retry-After %q, %s; want 503 with Retry-After and an error naming %q",
			rec.Code, rec.Header().Get("Retry-After"), rec.Body, want)
	}
}

// TestAReplicaRoutesOnlyOnceCaughtUp: before the consumer has reached the end of the stream
// once, /route answers 503 with Retry-After (the index is partial); an empty stream at start
// counts as caught up; --serve-while-behind routes meanwhile and says so in a header.
func TestAReplicaRoutesOnlyOnceCaughtUp(t *testing.T) {
	created := time.Unix(1700000000, 0)
	r, h := gatedReplica(t, natsOptions{}, created)
	r.streamTop.Store(200000)
	wantRefused(t, routeOnce(h), "catching up with the stream KVIDX_EVENTS (applied 1 of 200000)")
	rep, err := r.report()
	if err != nil || rep.Routing || rep.CaughtUp != nil {
		t.Fatalf("report while behind: routing %v, caught up %v (%v)", rep.Routing, rep.CaughtUp, err)
	}
	// The stream's last message is applied: caught up, routing.
	r.observeStream(r.applied.Load(), &jetstream.StreamInfo{Created: created, State: jetstream.StreamState{LastSeq: 1}}, nil)
	if rec := routeOnce(h); rec.Code != http.StatusOK {
		t.Fatalf("/route once caught up: %d %s", rec.Code, rec.Body)
	}
	if rep, _ := r.report(); !rep.Routing || rep.CaughtUp == nil {
		t.Fatalf("report once caught up: routing %v, caught up %v", rep.Routing, rep.CaughtUp)
	}

	// An empty stream at start: caught up at the first look at the stream.
	empty, _ := gatedReplica(t, natsOptions{}, created)
	empty.applied.Store(0)
	empty.observeStream(0, &jetstream.StreamInfo{Created: created}, nil)
	if !empty.isCaughtUp() {
		t.Fatal("a replica of an empty stream is not caught up")
	}

	behind, hb := gatedReplica(t, natsOptions{serveBehind: true}, created)
	behind.streamTop.Store(51)
	rec := routeOnce(hb)
	if rec.Code != http.StatusOK || rec.Header().Get("Kvidx-Replica-Behind") != "50" {
		t.Fatalf("--serve-while-behind: %d, Kvidx-Replica-Behind %q; want 200 and 50", rec.Code, rec.Header().Get("Kvidx-Replica-Behind"))
	}
}

// TestAReplicaStopsRoutingWhenItsStreamIsRecreated: a stream deleted, or recreated (another
// creation time, or a last sequence below the applied one), stops routing for good (also
// with --serve-while-behind), stops applying, and shows in the report: the lag is the new
// stream's last sequence, never 0 by clamping.
func TestAReplicaStopsRoutingWhenItsStreamIsRecreated(t *testing.T) {
	created := time.Unix(1700000000, 0)
	for _, c := range []struct {
		name   string
		in     *jetstream.StreamInfo
		err    error
		reason string
		lag    uint64
	}{
		{"deleted (not found twice in a row)", nil, jetstream.ErrStreamNotFound, "was deleted", 0},
		{"new creation time", &jetstream.StreamInfo{Created: created.Add(time.Second), State: jetstream.StreamState{LastSeq: 1500}}, nil, "was recreated", 1500},
		{"last sequence went back", &jetstream.StreamInfo{Created: created, State: jetstream.StreamState{LastSeq: 0}}, nil, "went back to 0", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, h := gatedReplica(t, natsOptions{serveBehind: true}, created)
			r.observeStream(1, &jetstream.StreamInfo{Created: created, State: jetstream.StreamState{LastSeq: 1}}, nil)
			if rec := routeOnce(h); rec.Code != http.StatusOK {
				t.Fatalf("/route before: %d", rec.Code)
			}
			r.observeStream(1, c.in, c.err)
			if c.err != nil {
				// "Not found" once may be a server loading its streams: still routing.
				if rec := routeOnce(h); rec.Code != http.StatusOK {
					t.Fatalf("/route after one \"not found\": %d", rec.Code)
				}
				r.observeStream(1, c.in, c.err)
			}
			wantRefused(t, routeOnce(h), c.reason)
			rep, err := r.report()
			if err != nil || rep.Routing || !strings.Contains(rep.StreamReset, c.reason) || rep.Lag != c.lag {
				t.Fatalf("report: routing %v, reset %q, lag %d (%v); want not routing, %q, lag %d", rep.Routing, rep.StreamReset, rep.Lag, err, c.reason, c.lag)
			}
			var metrics strings.Builder
			r.writeMetrics(&metrics)
			if !strings.Contains(metrics.String(), "\nrouter_stream_reset 1\n") || !strings.Contains(metrics.String(), "\nrouter_replica_routing 0\n") {
				t.Fatalf("metrics:\n%s", metrics.String())
			}
		})
	}
}
