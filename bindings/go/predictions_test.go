package kvidx

import (
	"errors"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// PredictedMatch, PredictionStats and cPredictionConfig mirror the C structs (the purego back
// end relies on it).
func TestPredictionLayouts(t *testing.T) {
	var m PredictedMatch
	if unsafe.Sizeof(m) != 24 || unsafe.Offsetof(m.DpRank) != 8 || unsafe.Offsetof(m.Depth) != 12 ||
		unsafe.Offsetof(m.PredictedDepth) != 16 {
		t.Fatalf("PredictedMatch layout: size %d", unsafe.Sizeof(m))
	}
	if unsafe.Sizeof(PredictionStats{}) != 64 || unsafe.Sizeof(cPredictionConfig{}) != 24 {
		t.Fatal("PredictionStats or cPredictionConfig layout")
	}
}

// manualIndexer is a synchronous indexer whose predictions expire by a manual clock.
func manualIndexer(t *testing.T, p PredictionConfig) *Indexer {
	t.Helper()
	p.Clock = ClockManual
	return mustNew(t, Config{Backend: BackendPositional, EventThreads: 0, Predictions: p})
}

func mustPredict(t *testing.T, ix *Indexer, worker uint64, locals []uint64, ttl time.Duration) {
	t.Helper()
	if err := ix.Predict(worker, 0, locals, ttl); err != nil {
		t.Fatal(err)
	}
}

func mustPredicted(t *testing.T, ix *Indexer, q []uint64) []PredictedMatch {
	t.Helper()
	got, err := ix.FindMatchesPredicted(q)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A prediction extends the predicted depth only; FindMatches is unchanged; it expires on the
// indexer's clock.
func TestPredictionsExtendThePredictedDepthUntilTheyExpire(t *testing.T) {
	ix := manualIndexer(t, PredictionConfig{})
	if err := ix.ApplyEvent(StoredEvent(1, 0, 0, chain([]uint64{1, 2}, 100))); err != nil {
		t.Fatal(err)
	}
	q := []uint64{1, 2, 3, 4}
	mustPredict(t, ix, 1, q, 100*time.Millisecond)
	mustPredict(t, ix, 2, q[:3], 100*time.Millisecond)
	plain, err := ix.FindMatches(q)
	if err != nil || !slices.Equal(plain, []Match{{WorkerID: 1, Depth: 2}}) {
		t.Fatalf("FindMatches %v, %v", plain, err)
	}
	want := []PredictedMatch{{WorkerID: 1, Depth: 2, PredictedDepth: 4}, {WorkerID: 2, PredictedDepth: 3}}
	if got := mustPredicted(t, ix, q); !slices.Equal(got, want) {
		t.Fatalf("predicted:\n got %v\nwant %v", got, want)
	}
	if err := ix.AdvanceTime(99 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got := mustPredicted(t, ix, q); len(got) != 2 {
		t.Fatalf("before the TTL: %v", got)
	}
	if err := ix.SetTime(100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	want = []PredictedMatch{{WorkerID: 1, Depth: 2, PredictedDepth: 2}}
	if got := mustPredicted(t, ix, q); !slices.Equal(got, want) {
		t.Fatalf("at the TTL:\n got %v\nwant %v", got, want)
	}
	if now, err := ix.Now(); err != nil || now != 100*time.Millisecond {
		t.Fatalf("Now %v, %v", now, err)
	}
	if err := ix.SetTime(time.Millisecond); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("a manual clock going back: %v", err)
	}
}

// Events settle predictions: a Stored confirms, a Removed, a Cleared and a removal drop.
func TestEventsSettlePredictions(t *testing.T) {
	ix := manualIndexer(t, PredictionConfig{})
	q := []uint64{1, 2, 3}
	mustPredict(t, ix, 1, q, time.Second)
	mustPredict(t, ix, 2, q, time.Second)
	blocks := chain([]uint64{1, 2}, 100)
	if err := ix.ApplyEvents([]Event{
		StoredEvent(1, 0, 0, blocks),
		RemovedEvent(1, 0, 0, []uint64{blocks[1].SeqHash}),
		ClearedEvent(2, 0, 0),
	}); err != nil {
		t.Fatal(err)
	}
	want := []PredictedMatch{{WorkerID: 1, Depth: 1, PredictedDepth: 1}}
	if got := mustPredicted(t, ix, q); !slices.Equal(got, want) {
		t.Fatalf("settled:\n got %v\nwant %v", got, want)
	}
	s, err := ix.PredictionStats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Confirmed != 2 || s.DroppedByEvents != 3 || s.Blocks != 1 || s.Workers != 1 {
		t.Fatalf("stats %+v", s)
	}
	if err := ix.RemoveWorker(1); err != nil {
		t.Fatal(err)
	}
	if got := mustPredicted(t, ix, q); len(got) != 0 {
		t.Fatalf("after removal: %v", got)
	}
}

// The byte bound and the per-worker capacity hold.
func TestPredictionBounds(t *testing.T) {
	ix := manualIndexer(t, PredictionConfig{WorkerCapacity: 2})
	mustPredict(t, ix, 1, []uint64{1, 2, 3}, time.Second)
	if got := mustPredicted(t, ix, []uint64{1, 2, 3}); len(got) != 1 || got[0].PredictedDepth != 2 {
		t.Fatalf("capacity 2: %v", got)
	}
	const maxBytes = 64 << 10
	ix = manualIndexer(t, PredictionConfig{MaxBytes: maxBytes})
	for i := uint64(0); i < 20000; i++ {
		mustPredict(t, ix, i%7, []uint64{i * 4, i*4 + 1, i*4 + 2, i*4 + 3}, time.Second)
	}
	s, err := ix.PredictionStats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Bytes > maxBytes || s.Blocks == 0 || s.Blocks+s.DroppedForBytes != 80000 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPredictionArgumentsAreChecked(t *testing.T) {
	if _, err := New(Config{Predictions: PredictionConfig{Clock: 9}}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("unknown clock: %v", err)
	}
	ix := mustNew(t, DefaultConfig())
	if err := ix.SetTime(time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("SetTime on the monotonic clock: %v", err)
	}
	if err := ix.Predict(1, 0, []uint64{1}, -time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative ttl: %v", err)
	}
	if err := ix.Predict(1, 0, nil, time.Second); err != nil {
		t.Fatalf("empty chain: %v", err)
	}
	mustPredict(t, ix, 1, []uint64{5}, time.Hour)
	dst := make([]PredictedMatch, 0, 4)
	got, err := ix.FindMatchesPredictedInto([]uint64{5}, dst)
	if err != nil || len(got) != 1 || got[0].PredictedDepth != 1 || &got[:1][0] != &dst[:1][0] {
		t.Fatalf("into dst: %v, %v", got, err)
	}
	_ = ix.Close()
	if err := ix.Predict(1, 0, []uint64{1}, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if _, err := ix.FindMatchesPredicted([]uint64{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}
