package kvidx

import (
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestStoreAndFindOrdersByDepthThenWorker(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		mustApply(t, ix,
			StoredEvent(7, 0, 0, chain([]uint64{1, 2, 3}, 100)),
			StoredEvent(3, 1, 0, chain([]uint64{1, 2}, 200)),
			StoredEvent(3, 0, 0, chain([]uint64{1, 2}, 300)),
			StoredEvent(5, 0, 0, chain([]uint64{9}, 400)),
		)
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, []uint64{1, 2, 3, 4}), m(7, 0, 3), m(3, 0, 2), m(3, 1, 2))
		wantMatches(t, mustFind(t, ix, []uint64{9, 1}), m(5, 0, 1))
		wantMatches(t, mustFind(t, ix, []uint64{2, 3}))
		wantMatches(t, mustFind(t, ix, nil))
		s := mustStats(t, ix)
		if s != (Stats{EventsApplied: 4, Workers: 4, WorkerBlocks: 8}) {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestParentContinuesChain(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		mustApply(t, ix,
			StoredEvent(1, 0, 0, chain([]uint64{10, 11}, 100)),
			StoredEvent(1, 0, 1, chain([]uint64{12, 13}, 102)).WithParent(101),
		)
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, []uint64{10, 11, 12, 13, 14}), m(1, 0, 4))
		// The same local hashes at position 0 are another prefix: no match.
		wantMatches(t, mustFind(t, ix, []uint64{12, 13}))
	})
}

func TestMissingParentRejectsWholeEvent(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, cfg Config) {
		ev := StoredEvent(1, 0, 0, chain([]uint64{10, 11}, 100)).WithParent(999)
		err := ix.ApplyEvent(ev)
		if cfg.EventThreads == 0 {
			wantErr(t, err, ErrParentNotFound)
			var se *StatusError
			if !errors.As(err, &se) || se.Status != StatusParentNotFound || se.Op != "ApplyEvent" {
				t.Fatalf("error %#v is not a StatusError for ApplyEvent", err)
			}
		} else if err != nil {
			t.Fatalf("queued ApplyEvent: %v", err)
		}
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, []uint64{10}))
		if s := mustStats(t, ix); s != (Stats{EventsRejected: 1}) {
			t.Fatalf("stats %+v: want one rejected event and no known worker", s)
		}
	})
}

func TestRemovedSkipsUnknownNamesAndLeavesHoles(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		q := []uint64{1, 2, 3, 4}
		mustApply(t, ix, StoredEvent(1, 0, 0, chain(q, 100)))
		// 555 is unknown: it is counted, and 102 after it is still removed.
		mustApply(t, ix, RemovedEvent(1, 0, 1, []uint64{555, 102}))
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, q), m(1, 0, 2))
		s := mustStats(t, ix)
		if s.UnknownRemovals != 1 || s.WorkerBlocks != 3 || s.EventsApplied != 2 {
			t.Fatalf("stats %+v", s)
		}
		// Storing the missing block again restores the full depth.
		mustApply(t, ix, StoredEvent(1, 0, 2, chain(q[2:3], 102)).WithParent(101))
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, q), m(1, 0, 4))
	})
}

func TestClearedKeepsWorkerKnown(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		mustApply(t, ix, StoredEvent(4, 2, 0, chain([]uint64{1, 2}, 100)), ClearedEvent(4, 2, 1))
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, []uint64{1, 2}))
		if s := mustStats(t, ix); s.Workers != 1 || s.WorkerBlocks != 0 || s.EventsApplied != 2 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestRemoveWorkerAndDpRank(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		q := []uint64{1, 2}
		for _, w := range []struct {
			id   uint64
			rank uint32
		}{{1, 0}, {1, 1}, {2, 0}, {2, 1}} {
			mustApply(t, ix, StoredEvent(w.id, w.rank, 0, chain(q, 100)))
		}
		if err := ix.RemoveWorker(1); err != nil {
			t.Fatal(err)
		}
		if err := ix.RemoveWorkerDpRank(2, 1); err != nil {
			t.Fatal(err)
		}
		if err := ix.RemoveWorker(12345); err != nil { // unknown worker: a no-op
			t.Fatal(err)
		}
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, q), m(2, 0, 2))
		if s := mustStats(t, ix); s.Workers != 1 || s.WorkerBlocks != 2 || s.EventsApplied != 4 {
			t.Fatalf("stats %+v", s)
		}
	})
}

func TestBadInput(t *testing.T) {
	t.Run("unknown backend", func(t *testing.T) {
		_, err := New(Config{Backend: 7})
		wantErr(t, err, ErrInvalidArgument)
	})
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		wantErr(t, ix.ApplyEvent(Event{Kind: 9, WorkerID: 1}), ErrInvalidArgument)
		// One malformed event in a batch: nothing of the batch is applied.
		err := ix.ApplyEvents([]Event{
			StoredEvent(1, 0, 0, chain([]uint64{1}, 100)),
			{Kind: 3, WorkerID: 2},
		})
		wantErr(t, err, ErrInvalidArgument)
		// Empty events are valid no-ops that make the worker known.
		mustApply(t, ix, StoredEvent(5, 0, 0, nil), RemovedEvent(6, 0, 0, nil))
		if err := ix.ApplyEvents(nil); err != nil {
			t.Fatalf("ApplyEvents(nil): %v", err)
		}
		mustFlush(t, ix)
		if s := mustStats(t, ix); s != (Stats{EventsApplied: 2, Workers: 2}) {
			t.Fatalf("stats %+v: the malformed batch must not count", s)
		}
	})
}

func TestCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	ix, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	mustApply(t, ix, StoredEvent(1, 0, 0, chain([]uint64{1}, 100)))
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = ix.FindMatches([]uint64{1})
	wantErr(t, err, ErrClosed)
	if !strings.Contains(err.Error(), "FindMatches") {
		t.Fatalf("error %q does not name the operation", err)
	}
	wantErr(t, ix.ApplyEvent(ClearedEvent(1, 0, 1)), ErrClosed)
	wantErr(t, ix.ApplyEvents([]Event{ClearedEvent(1, 0, 1)}), ErrClosed)
	wantErr(t, ix.RemoveWorker(1), ErrClosed)
	wantErr(t, ix.RemoveWorkerDpRank(1, 0), ErrClosed)
	wantErr(t, ix.Flush(), ErrClosed)
	_, err = ix.Stats()
	wantErr(t, err, ErrClosed)
}

// An indexer dropped without Close is freed by its cleanup (after queued events are applied).
func TestUnreachableIndexerIsFreed(t *testing.T) {
	before := handlesFreed.Load()
	func() {
		ix, err := New(Config{EventThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		mustApply(t, ix, StoredEvent(1, 0, 0, chain([]uint64{1}, 100)))
	}()
	deadline := time.Now().Add(5 * time.Second)
	for handlesFreed.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the dropped indexer was never freed")
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPanicIsCaughtAndPoisonsTheIndexer(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	wantErr(t, ix.debugPanic(), ErrPanic)
	_, err := ix.FindMatches([]uint64{1})
	wantErr(t, err, ErrPoisoned)
	wantErr(t, ix.ApplyEvent(ClearedEvent(1, 0, 0)), ErrPoisoned)
	// A fresh indexer is unaffected.
	other := mustNew(t, Config{})
	mustApply(t, other, StoredEvent(1, 0, 0, chain([]uint64{1}, 100)))
	wantMatches(t, mustFind(t, other, []uint64{1}), m(1, 0, 1))
}

func TestFindMatchesIntoAppends(t *testing.T) {
	ix := mustNew(t, Config{})
	for w := uint64(1); w <= 20; w++ {
		mustApply(t, ix, StoredEvent(w, 0, 0, chain([]uint64{1, 2}, 100)))
	}
	prefix := []Match{m(99, 9, 9)}
	// No spare capacity at all, then too little: the binding grows dst and keeps the prefix.
	for _, spare := range []int{0, 3, 64} {
		dst := make([]Match, 1, 1+spare)
		copy(dst, prefix)
		got, err := ix.FindMatchesInto([]uint64{1, 2}, dst)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 21 || got[0] != prefix[0] || got[1] != m(1, 0, 2) || got[20] != m(20, 0, 2) {
			t.Fatalf("spare %d: got %v", spare, got)
		}
		if spare == 64 && &got[0] != &dst[0] {
			t.Fatalf("dst had room but was reallocated")
		}
	}
}

func TestFindMatchesIntoAllocatesNothing(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 1})
	for w := uint64(0); w < 256; w++ {
		mustApply(t, ix, StoredEvent(w, 0, 0, chain([]uint64{1, 2, 3, 4}, 100)))
	}
	mustFlush(t, ix)
	q := []uint64{1, 2, 3, 4}
	dst := make([]Match, 0, 256)
	allocs := testing.AllocsPerRun(200, func() {
		var err error
		dst, err = ix.FindMatchesInto(q, dst[:0])
		if err != nil || len(dst) != 256 {
			t.Fatalf("FindMatchesInto: %d matches, %v", len(dst), err)
		}
	})
	if allocs != hotPathAllocs {
		t.Fatalf("FindMatchesInto allocates %.1f times per call on the %s back end, want %d",
			allocs, backendName, hotPathAllocs)
	}
}

func TestApplyEventsAllocatesNothingInSteadyState(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 1})
	evs := make([]Event, 32)
	for i := range evs {
		evs[i] = StoredEvent(uint64(i), 0, 0, chain([]uint64{1, 2, 3, 4}, 100))
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := ix.ApplyEvents(evs); err != nil {
			t.Fatal(err)
		}
	})
	// The pooled batch may be dropped by a GC during the run; anything above that is a leak of
	// per-call allocations.
	if allocs > 1 {
		t.Fatalf("ApplyEvents allocates %.1f times per call", allocs)
	}
}

func TestConfigAndVersion(t *testing.T) {
	// The lib* helpers assume a loaded library (purego loads it on first use of the API).
	if err := load(); err != nil {
		t.Fatal(err)
	}
	if got := libConfigDefault(); got != DefaultConfig() {
		t.Fatalf("DefaultConfig %+v, library default %+v", DefaultConfig(), got)
	}
	if v := libABIVersion(); v != ABIVersion {
		t.Fatalf("library ABI %d", v)
	}
	v, err := Version()
	if err != nil || v == "" || strings.Count(v, ".") < 2 {
		t.Fatalf("Version() = %q, %v", v, err)
	}
	// The library's status list (src/c_types.rs) is the one list: Go names exactly the
	// statuses the library knows, and no other.
	const unknown = "unknown kvidx status code"
	for s := StatusOK; s <= StatusIO+8; s++ {
		libKnows := libStatusStr(uint32(s)) != unknown
		goKnows := !strings.HasPrefix(s.String(), "unknown status")
		if libKnows != goKnows {
			t.Fatalf("status %d: library text %q, Go text %q", s, libStatusStr(uint32(s)), s.String())
		}
	}
	if libStatusStr(uint32(StatusIO)) == unknown {
		t.Fatal("the library does not know StatusIO")
	}
	t.Logf("back end %s, library %s", backendName, v)
}

func TestStatusErrors(t *testing.T) {
	err := check("Flush", StatusShutDown)
	wantErr(t, err, ErrShutDown)
	if errors.Is(err, ErrPanic) {
		t.Fatal("a shut-down error matches ErrPanic")
	}
	if got := err.Error(); got != "kvidx: Flush: event threads shut down (status 5)" {
		t.Fatalf("Error() = %q", got)
	}
	if check("Flush", StatusOK) != nil {
		t.Fatal("StatusOK is an error")
	}
	if Status(42).String() != "unknown status 42" || BackendRadix.String() != "radix" ||
		BackendRuns.String() != "runs" ||
		EventKind(9).String() != "EventKind(9)" {
		t.Fatal("String methods")
	}
}
