package kvidx

import (
	"testing"
	"unsafe"
)

// EngineStartStats mirrors kvidx_engine_start_stats (the purego back end relies on it).
func TestEngineStartStatsLayout(t *testing.T) {
	if unsafe.Sizeof(EngineStartStats{}) != 16 || unsafe.Offsetof(EngineStartStats{}.BatchesMissedFromStart) != 8 {
		t.Fatal("EngineStartStats layout")
	}
}

// A publisher's sequence starts at 0: its first batch above 0 follows batches the feed
// never saw. NextSeq says where the feed expects each publisher from (0 before its first
// batch: where a caller asks the replay socket from); StartStats counts the late publishers
// and the batches they sent before; the worker is not cleared for them.
func TestEngineFeedReportsBatchesMissedFromTheStart(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	payload := fixture(t, fixOneBlock)
	feed := mustFeed(t, EngineVLLM, 0)
	next := func(rank uint32) uint64 {
		t.Helper()
		n, err := feed.NextSeq(5, rank)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := next(0); n != 0 {
		t.Fatalf("a publisher not seen yet: NextSeq %d, want 0", n)
	}
	if r := mustFeedApply(t, feed, ix, 5, 0, seqFrame(5), payload); r.Seq != SeqFirst || r.WorkerCleared {
		t.Fatalf("first batch at 5: %+v", r)
	}
	if n := next(0); n != 6 {
		t.Fatalf("after 5: NextSeq %d, want 6", n)
	}
	mustFeedApply(t, feed, ix, 5, 1, seqFrame(0), payload)
	if n := next(1); n != 1 {
		t.Fatalf("rank 1 after 0: NextSeq %d, want 1", n)
	}
	st, err := feed.StartStats()
	if err != nil {
		t.Fatal(err)
	}
	if want := (EngineStartStats{LateStarts: 1, BatchesMissedFromStart: 5}); st != want {
		t.Fatalf("start stats:\n got %+v\nwant %+v", st, want)
	}
	if es, err := feed.Stats(); err != nil || es.Gaps != 0 || es.WorkersCleared != 0 {
		t.Fatalf("feed stats %+v, %v: a late start is not a gap", es, err)
	}
	if err := feed.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := feed.NextSeq(5, 0); err == nil {
		t.Fatal("NextSeq on a closed feed")
	}
	if _, err := feed.StartStats(); err == nil {
		t.Fatal("StartStats on a closed feed")
	}
}
