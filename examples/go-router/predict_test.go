package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// predictingRouter is a router over an empty indexer with a manual prediction clock and
// workers 1, 2 and 3, recording routes as predictions for ttl (0: off).
func predictingRouter(t *testing.T, ttl time.Duration) (*Router, *kvidx.Indexer) {
	t.Helper()
	ix, err := kvidx.New(kvidx.Config{Predictions: kvidx.PredictionConfig{Clock: kvidx.ClockManual}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	r, err := NewRouter(ix, defaultOptions().loadWeight, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register([]workerKey{{1, 0}, {2, 0}, {3, 0}}); err != nil {
		t.Fatal(err)
	}
	r.PredictRoutes(ttl)
	return r, ix
}

// tenBlocks is a 10-block query: more blocks to prefill than the default load weight (4)
// of one request in flight.
var tenBlocks = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}

// TestPredictionsKeepABurstOnOneWorkerBeforeItsEvents: with -predict-ttl a burst of the
// same prompt follows the first request to its worker before any event arrives (the
// predicted depth outweighs one request of load), until the TTL passes; without it the
// router sees no cache and spreads the burst by load.
func TestPredictionsKeepABurstOnOneWorkerBeforeItsEvents(t *testing.T) {
	r, ix := predictingRouter(t, time.Second)
	first := mustRoute(t, r, tenBlocks)
	if first.PredictedBlocks != 0 || first.OverlapBlocks != 0 {
		t.Fatalf("first route %+v: nothing predicted or held yet", first)
	}
	ids := []uint64{first.RequestID}
	for range 2 {
		d := mustRoute(t, r, tenBlocks)
		if d.WorkerID != first.WorkerID || d.PredictedBlocks != 10 || d.OverlapBlocks != 0 || d.HitBlocks != 10 {
			t.Fatalf("burst %+v: want worker %d, 10 predicted blocks, none confirmed", d, first.WorkerID)
		}
		ids = append(ids, d.RequestID)
	}
	for _, id := range ids {
		r.Done(id)
	}
	// The worker's events confirm the first 6 blocks: its predicted depth stays 10, 6 of
	// them confirmed.
	blocks := make([]kvidx.Block, 6)
	for i := range blocks {
		blocks[i] = kvidx.Block{LocalHash: tenBlocks[i], SeqHash: 100 + uint64(i)}
	}
	if err := ix.ApplyEvent(kvidx.Event{Kind: kvidx.EventStored, WorkerID: first.WorkerID, Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
	// Expired: the 4 blocks only predicted no longer count; the confirmed 6 do.
	if err := ix.AdvanceTime(time.Second); err != nil {
		t.Fatal(err)
	}
	d := mustRoute(t, r, tenBlocks)
	if d.WorkerID != first.WorkerID || d.OverlapBlocks != 6 || d.PredictedBlocks != 6 {
		t.Fatalf("after the TTL %+v: want 6 confirmed blocks and nothing more predicted", d)
	}
	if ps, err := ix.PredictionStats(); err != nil || ps.Confirmed == 0 {
		t.Fatalf("prediction stats %+v (%v): the Stored confirmed predicted blocks", ps, err)
	}

	// Without predictions the burst is spread: no cache is seen anywhere.
	r, _ = predictingRouter(t, 0)
	var got []uint64
	for range 3 {
		d := mustRoute(t, r, tenBlocks)
		if d.PredictedBlocks != 0 {
			t.Fatalf("predictions off: %+v", d)
		}
		got = append(got, d.WorkerID)
	}
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("predictions off: the burst went to %v, want one request per worker", got)
	}
}

// TestSharedRoutesCarryPredictions: replicas that predict send a route's blocks with it, and
// the others credit them to its worker, so a burst split over two replicas stays together.
func TestSharedRoutesCarryPredictions(t *testing.T) {
	a, _ := predictingRouter(t, time.Minute)
	b, _ := predictingRouter(t, time.Minute)
	a.share = directShare{"a", []*Router{b}}
	b.share = directShare{"b", []*Router{a}}
	first := mustRoute(t, a, tenBlocks)
	d := mustRoute(t, b, tenBlocks)
	if d.WorkerID != first.WorkerID || d.PredictedBlocks != 10 || d.InFlight != 1 {
		t.Fatalf("on the other replica: %+v; want worker %d with 10 predicted blocks and a's request in flight", d, first.WorkerID)
	}
}

// TestEventFreeMode: -event-free routes among -worker-ids from its own decisions only,
// refuses events, and bounds each worker's predicted blocks with -predict-worker-capacity.
func TestEventFreeMode(t *testing.T) {
	o := testOptions()
	o.predictions.eventFree, o.predictions.workerIDs, o.predictions.workerCapacity = true, "4,5:1,6", 3
	s := startServer(t, o)
	if code, body := s.do("POST", "/events", []kvEvent{{WorkerID: 4, Cleared: &struct{}{}}}); code != 409 || !strings.Contains(string(body), "-event-free") {
		t.Fatalf("POST /events: %d %s, want 409", code, body)
	}
	// Each request is done before the next, so load never weighs against the prediction.
	route := func(q []uint64) Decision {
		t.Helper()
		d := s.route(routeRequest{LocalHashes: q})
		s.mustDo("DELETE", fmt.Sprintf("/requests/%d", d.RequestID), nil, http.StatusNoContent)
		return d
	}
	first := route(tenBlocks[:3])
	d := route(tenBlocks[:3])
	if d.WorkerID != first.WorkerID || d.PredictedBlocks != 3 || d.OverlapBlocks != 0 {
		t.Fatalf("second route %+v: want worker %d, its 3 predicted blocks", d, first.WorkerID)
	}
	// A longer prompt on the same worker: its capacity of 3 keeps the chain's first 3.
	d = route(tenBlocks)
	if d.WorkerID != first.WorkerID || d.PredictedBlocks != 3 {
		t.Fatalf("longer prompt %+v: want worker %d, 3 predicted", d, first.WorkerID)
	}
	d = route(tenBlocks)
	if d.PredictedBlocks != 3 {
		t.Fatalf("after a 10-block prediction on a 3-block capacity: %+v, want 3 predicted", d)
	}
	// One worker's capacity of predicted blocks; the 3 workers of -worker-ids.
	for _, name := range []string{"kvidx_predicted_blocks", "router_workers"} {
		if got := s.metric(name); got != "3" {
			t.Fatalf("%s %s, want 3", name, got)
		}
	}
}

// TestEventFreeCapacityForgetsTheLeastRecentlyRoutedFirst: an -event-free router with the
// default TTL keeps a prompt across a pause of minutes and forgets a worker's blocks by its
// capacity, least recently routed first; the TTL still ends what nothing routed again.
func TestEventFreeCapacityForgetsTheLeastRecentlyRoutedFirst(t *testing.T) {
	p, err := predictionOptions{eventFree: true, workerIDs: "4", workerCapacity: 6}.resolve(false)
	if err != nil {
		t.Fatal(err)
	}
	// As the command line builds it (main.go), on a manual clock.
	ix, err := kvidx.New(kvidx.Config{Predictions: kvidx.PredictionConfig{WorkerCapacity: p.workerCapacity, Clock: kvidx.ClockManual}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	r, err := NewRouter(ix, defaultOptions().loadWeight, DefaultLimits())
	if err == nil {
		_, err = r.Register(p.workers)
	}
	if err != nil {
		t.Fatal(err)
	}
	r.PredictRoutes(p.ttl)
	advance := func(d time.Duration) {
		t.Helper()
		if err := ix.AdvanceTime(d); err != nil {
			t.Fatal(err)
		}
	}
	// Three 3-block prompts on the one worker, whose capacity holds two of them.
	a, b, c := []uint64{1, 2, 3}, []uint64{11, 12, 13}, []uint64{21, 22, 23}
	predicted := func(q []uint64) uint32 {
		t.Helper()
		d := mustRoute(t, r, q)
		r.Done(d.RequestID)
		return d.PredictedBlocks
	}
	predicted(a)
	predicted(b)
	advance(10 * time.Minute) // a conversation's pause, beyond the 2 minutes of old
	if got := predicted(a); got != 3 {
		t.Fatalf("a after 10 minutes: %d predicted blocks, want 3", got)
	}
	// c needs room: b, routed before a was again, leaves; a stays.
	if got := predicted(c); got != 0 {
		t.Fatalf("c, never routed: %d predicted blocks", got)
	}
	if got := predicted(a); got != 3 {
		t.Fatalf("a, routed after b: %d predicted blocks, want 3", got)
	}
	if got := predicted(b); got != 0 {
		t.Fatalf("b, the least recently routed: %d predicted blocks, want 0 (forgotten for the capacity)", got)
	}
	if ps, err := ix.PredictionStats(); err != nil || ps.DroppedForCapacity < 3 || ps.Expired != 0 {
		t.Fatalf("prediction stats %+v (%v): want b's 3 blocks dropped for the capacity, nothing expired", ps, err)
	}
	// The safety net: an hour after its last route, nothing counts.
	advance(defaultEventFreeTTL)
	if got := predicted(a); got != 0 {
		t.Fatalf("a an hour after its last route: %d predicted blocks, want 0", got)
	}
}

func TestPredictionFlags(t *testing.T) {
	for _, c := range []struct {
		p       predictionOptions
		replica bool
		err     string
	}{
		{predictionOptions{ttl: -1}, false, "negative"},
		{predictionOptions{workerIDs: "1"}, false, "-worker-ids is for -event-free"},
		{predictionOptions{eventFree: true}, false, "needs the routing candidates"},
		{predictionOptions{eventFree: true, workerIDs: "1"}, true, "does not go together"},
		{predictionOptions{eventFree: true, workerIDs: "1,x"}, false, `"x" is not a worker id`},
		{predictionOptions{eventFree: true, workerIDs: "1:2,1:2"}, false, "appears twice"},
		{predictionOptions{eventFree: true, workerIDs: "1"}, false, "needs -predict-worker-capacity"},
	} {
		if _, err := c.p.resolve(c.replica); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.err)
		}
	}
	p, err := predictionOptions{eventFree: true, workerIDs: " 7, 8:3 ,", workerCapacity: 4096}.resolve(false)
	if err != nil || p.ttl != defaultEventFreeTTL || !slices.Equal(p.workers, []workerKey{{7, 0}, {8, 3}}) {
		t.Fatalf("resolved %+v, %v", p, err)
	}
	// The capacity approximates the engine's cache; the TTL is a safety net, an hour.
	if defaultEventFreeTTL != time.Hour {
		t.Fatalf("default event-free TTL %v, want 1h", defaultEventFreeTTL)
	}
	o, _, done := parseCommandLine([]string{"-predict-ttl", "300ms", "-event-free", "-worker-ids", "1,2", "-predict-worker-capacity", "4096", "-predict-max-bytes", "1048576"}, nil, nil)
	if done || o.predictions.ttl != 300*time.Millisecond || !o.predictions.eventFree || o.predictions.workerIDs != "1,2" ||
		o.predictions.workerCapacity != 4096 || o.predictions.maxBytes != 1<<20 {
		t.Fatalf("parsed %+v", o.predictions)
	}
}
