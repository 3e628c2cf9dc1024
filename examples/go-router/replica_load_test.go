package main

import (
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// TestReplicasShareTheIndexNotTheLoad pins down what docs/replicas.md says is identical
// across replicas and what is not: two routers over indexes with the same content give the
// same overlap for every worker, but each adds its own in-flight requests (-load-weight), so
// a request in flight on one replica only can make the replicas pick different workers;
// with nothing in flight they pick the same.
func TestReplicasShareTheIndexNotTheLoad(t *testing.T) {
	routers := make([]*Router, 2)
	for i := range routers {
		ix, err := kvidx.New(kvidx.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ix.Close() })
		// Workers 1 and 2 hold the same 4-block chain.
		for _, w := range []uint64{1, 2} {
			blocks := []kvidx.Block{{LocalHash: 11, SeqHash: 11}, {LocalHash: 12, SeqHash: 12},
				{LocalHash: 13, SeqHash: 13}, {LocalHash: 14, SeqHash: 14}}
			if err := ix.ApplyEvent(kvidx.Event{Kind: kvidx.EventStored, WorkerID: w, Blocks: blocks}); err != nil {
				t.Fatal(err)
			}
		}
		if routers[i], err = NewRouter(ix, defaultOptions().loadWeight, DefaultLimits()); err != nil {
			t.Fatal(err)
		}
		if _, err := routers[i].Register([]workerKey{{1, 0}, {2, 0}}); err != nil {
			t.Fatal(err)
		}
	}
	q := []uint64{11, 12, 13, 14, 15, 16}
	route := func(r *Router) Decision {
		t.Helper()
		d, ok, err := r.Route(q)
		if err != nil || !ok {
			t.Fatalf("route: %v %v", ok, err)
		}
		return d
	}
	a, b := route(routers[0]), route(routers[1])
	routers[0].Done(a.RequestID)
	routers[1].Done(b.RequestID)
	if a.WorkerID != b.WorkerID || a.OverlapBlocks != 4 || b.OverlapBlocks != 4 {
		t.Fatalf("nothing in flight: %+v and %+v; want the same worker, overlap 4", a, b)
	}
	// One request stays in flight on replica 0 only: the replicas now differ in the worker,
	// never in the overlap the index gives.
	first := route(routers[0])
	a, b = route(routers[0]), route(routers[1])
	if a.WorkerID == b.WorkerID || a.OverlapBlocks != b.OverlapBlocks || first.WorkerID != b.WorkerID {
		t.Fatalf("one request in flight on replica 0: %+v and %+v; want other workers, the same overlap", a, b)
	}
}
