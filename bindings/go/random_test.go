package kvidx

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// randomOps drives the indexer and the Go reference model with the same random operations
// (small alphabets, so prefixes are shared, names collide and parents are often missing) and
// compares every answer and the stats.
func TestMatchesReferenceModelOnRandomOperations(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, cfg Config) {
		rng := rand.New(rand.NewPCG(uint64(cfg.Backend)+1, uint64(cfg.EventThreads)+7))
		model := newRefModel()
		eventID := uint64(0)
		randChain := func(n int) []uint64 {
			out := make([]uint64, n)
			for i := range out {
				out[i] = uint64(1 + rng.IntN(3))
			}
			return out
		}
		compare := func(step int) {
			t.Helper()
			mustFlush(t, ix)
			for range 4 {
				q := randChain(rng.IntN(7))
				if got, want := mustFind(t, ix, q), model.find(q); !equalMatches(got, want) {
					t.Fatalf("step %d, query %v:\n got %v\nwant %v", step, q, got, want)
				}
			}
			if got, want := mustStats(t, ix), model.stats(); got != want {
				t.Fatalf("step %d: stats\n got %+v\nwant %+v", step, got, want)
			}
		}
		var batch []Event
		for step := range 1500 {
			worker, rank := uint64(rng.IntN(3)), uint32(rng.IntN(2))
			eventID++
			var ev Event
			switch r := rng.IntN(20); {
			case r < 12:
				locals := randChain(1 + rng.IntN(4))
				blocks := make([]Block, len(locals))
				for i, l := range locals {
					blocks[i] = Block{LocalHash: l, SeqHash: uint64(rng.IntN(40))}
				}
				ev = StoredEvent(worker, rank, eventID, blocks)
				if rng.IntN(2) == 0 {
					ev = ev.WithParent(uint64(rng.IntN(40)))
				}
			case r < 17:
				names := make([]uint64, rng.IntN(4))
				for i := range names {
					names[i] = uint64(rng.IntN(40))
				}
				ev = RemovedEvent(worker, rank, eventID, names)
			case r < 18:
				ev = ClearedEvent(worker, rank, eventID)
			case r < 19:
				mustApplyBatch(t, ix, cfg, model, &batch)
				if err := ix.RemoveWorkerDpRank(worker, rank); err != nil {
					t.Fatal(err)
				}
				model.removeWorkerDpRank(worker, rank)
				continue
			default:
				mustApplyBatch(t, ix, cfg, model, &batch)
				if err := ix.RemoveWorker(worker); err != nil {
					t.Fatal(err)
				}
				model.removeWorker(worker)
				continue
			}
			batch = append(batch, ev)
			if rng.IntN(4) == 0 {
				mustApplyBatch(t, ix, cfg, model, &batch)
			}
			if step%25 == 0 {
				mustApplyBatch(t, ix, cfg, model, &batch)
				compare(step)
			}
		}
		mustApplyBatch(t, ix, cfg, model, &batch)
		compare(-1)
	})
}

// mustApplyBatch sends the pending events with one ApplyEvents call and applies them to the
// model; in synchronous mode the call must report exactly the model's first rejection.
func mustApplyBatch(t *testing.T, ix *Indexer, cfg Config, model *refModel, batch *[]Event) {
	t.Helper()
	if len(*batch) == 0 {
		return
	}
	anyRejected := false
	for _, ev := range *batch {
		if model.apply(ev) {
			anyRejected = true
		}
	}
	err := ix.ApplyEvents(*batch)
	switch {
	case cfg.EventThreads == 0 && anyRejected:
		wantErr(t, err, ErrParentNotFound)
	case err != nil:
		t.Fatalf("ApplyEvents: %v", err)
	}
	*batch = (*batch)[:0]
}

func equalMatches(a, b []Match) bool { return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b)) }
