package kvidx

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// The committed payloads of tests/fixtures/engine, written by scripts/gen_engine_fixtures.py
// (contents in its fixtures() function; decoded field by field in tests/engine_decode.rs).
const (
	// One vLLM store (12-field array generation): tokens 1..4 as one block of 4, engine
	// hash 2^64-1; envelope dp rank 0.
	fixOneBlock = "vllm_annotated_array_gen12"
	// TensorRT-LLM publisher: a store of tokens 1..8 (2 blocks), a store of tokens 9..12
	// continuing it, a removal of the first block; envelope dp rank 0.
	fixTRTLLM = "trtllm_map"
	// vLLM 0.33 maps: a store of tokens 1..8 with bin digests, a multimodal store
	// (unhashable), a CPU store and a group-1 store (filtered), an unknown tag, a removal of
	// the first digest; envelope dp rank 3.
	fixVLLMFull = "vllm_map_0_33_full"
	// SGLang maps: a GPU store, a medium-less store after it, a CPU_PINNED store (filtered),
	// a salted store (unhashable), a removal, a clear; envelope dp rank 1.
	fixSGLang = "sglang_map"
)

// fixture returns the bytes of tests/fixtures/engine/NAME.msgpack.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "tests", "fixtures", "engine", name+".msgpack"))
	if err != nil {
		t.Fatalf("fixture %s: %v", name, err)
	}
	return b
}

// tokenQuery returns the local hashes of tokens first..last in blocks of 4 (the fixtures'
// block size).
func tokenQuery(t testing.TB, first, last uint32) []uint64 {
	t.Helper()
	var tokens []uint32
	for tok := first; tok <= last; tok++ {
		tokens = append(tokens, tok)
	}
	q, err := HashTokens(tokens, 4)
	if err != nil || len(q) == 0 {
		t.Fatalf("HashTokens: %v, %v", q, err)
	}
	return q
}

// seqFrame is the 8-byte big-endian sequence frame engines send before each payload.
func seqFrame(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func wantResult(t testing.TB, got, want EngineBatchResult) {
	t.Helper()
	if got != want {
		t.Fatalf("batch result:\n got %+v\nwant %+v", got, want)
	}
}

func TestApplyEngineBatchIndexesTheFixtures(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		wantMatches(t, mustFind(t, ix, tokenQuery(t, 1, 4)))

		r, err := ix.ApplyEngineBatch(EngineVLLM, 7, DPRankFromBatch, fixture(t, fixOneBlock))
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, EngineBatchResult{EventsDecoded: 1, EventsSubmitted: 1, DpRank: 0, Seq: SeqUntracked})
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, tokenQuery(t, 1, 4)), m(7, 0, 1))
		wantMatches(t, mustFind(t, ix, tokenQuery(t, 5, 8)))

		// A chain of two stores then the removal of its first block, on an explicit rank:
		// positions 1 and 2 stay, so a query from token 1 only finds worker 7.
		r, err = ix.ApplyEngineBatch(EngineTRTLLM, 8, 3, fixture(t, fixTRTLLM))
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, EngineBatchResult{EventsDecoded: 3, EventsSubmitted: 3, DpRank: 3})
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, tokenQuery(t, 1, 12)), m(7, 0, 1))
		if s := mustStats(t, ix); s.Workers != 2 || s.WorkerBlocks != 3 {
			t.Fatalf("stats %+v, want 2 workers holding 1 + 2 blocks", s)
		}

		// Skip reasons; the rank comes from the envelope.
		r, err = ix.ApplyEngineBatch(EngineVLLM, 9, DPRankFromBatch, fixture(t, fixVLLMFull))
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, r, EngineBatchResult{EventsDecoded: 6, EventsSubmitted: 2, SkippedUnknownTag: 1,
			SkippedFiltered: 2, SkippedUnhashable: 1, DpRank: 3})

		// SGLang's signed hashes link the second store to the first; the batch ends cleared.
		r, err = ix.ApplyEngineBatch(EngineSGLang, 10, 5, fixture(t, fixSGLang))
		if err != nil {
			t.Fatal(err)
		}
		// The salted store is indexed under its salt.
		wantResult(t, r, EngineBatchResult{EventsDecoded: 6, EventsSubmitted: 5, SkippedFiltered: 1,
			DpRank: 5})
		mustFlush(t, ix)
		if s := mustStats(t, ix); s.Workers != 4 || s.WorkerBlocks != 4 || s.EventsRejected != 0 {
			t.Fatalf("stats %+v, want 4 workers holding 1 + 2 + 1 + 0 blocks", s)
		}
	})
}

func TestMalformedEnginePayloadChangesNothing(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		good := fixture(t, fixOneBlock)
		if _, err := ix.ApplyEngineBatch(EngineVLLM, 1, 0, good); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, ix)
		before := mustStats(t, ix)

		truncated := good[:len(good)-1]
		bad := map[string][]byte{
			"truncated":      truncated,
			"trailing bytes": append(append([]byte(nil), good...), 0xc0),
			"not msgpack":    {0xc1},
			"nil":            nil,
			"empty":          {},
		}
		for name, payload := range bad {
			r, err := ix.ApplyEngineBatch(EngineVLLM, 2, 0, payload)
			wantErr(t, err, ErrMalformed)
			var se *StatusError
			if !errors.As(err, &se) || se.Op != "ApplyEngineBatch" || errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%s: error %#v", name, err)
			}
			wantResult(t, r, EngineBatchResult{})
		}
		// An unknown format is an argument error, checked before the payload.
		_, err := ix.ApplyEngineBatch(EngineFormat(9), 2, 0, good)
		wantErr(t, err, ErrInvalidArgument)
		_, err = ix.ApplyEngineBatch(EngineFormat(9), 2, 0, truncated)
		wantErr(t, err, ErrInvalidArgument)

		mustFlush(t, ix)
		if after := mustStats(t, ix); after != before {
			t.Fatalf("stats changed by malformed payloads:\n before %+v\n after  %+v", before, after)
		}
		wantMatches(t, mustFind(t, ix, tokenQuery(t, 1, 4)), m(1, 0, 1))
	})
}

// markWorker stores two blocks (local hashes 1000, 1001) for a worker directly, so that a
// clear by the feed shows.
func markWorker(t testing.TB, ix *Indexer, worker uint64, rank uint32) {
	t.Helper()
	mustApply(t, ix, StoredEvent(worker, rank, 100, chain([]uint64{1000, 1001}, 5000)))
}

func mustFeed(t testing.TB, format EngineFormat, flags FeedFlags) *EngineFeed {
	t.Helper()
	f, err := NewEngineFeed(format, flags)
	if err != nil {
		t.Fatalf("NewEngineFeed(%v, %d): %v", format, flags, err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func mustFeedApply(t testing.TB, f *EngineFeed, ix *Indexer, worker uint64, rank uint32, frame, payload []byte) EngineBatchResult {
	t.Helper()
	r, err := f.Apply(ix, worker, rank, frame, payload)
	if err != nil {
		t.Fatalf("EngineFeed.Apply(worker %d, frame %x): %v", worker, frame, err)
	}
	return r
}

func TestEngineFeedDetectsGapsAndRestartsAndClearsTheWorker(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	feed := mustFeed(t, EngineVLLM, 0)
	payload := fixture(t, fixOneBlock)
	marker := []uint64{1000, 1001}
	one := EngineBatchResult{EventsDecoded: 1, EventsSubmitted: 1}

	want := one
	want.Seq = SeqFirst
	wantResult(t, mustFeedApply(t, feed, ix, 5, 0, seqFrame(0), payload), want)
	want.Seq = SeqInOrder
	wantResult(t, mustFeedApply(t, feed, ix, 5, 0, seqFrame(1), payload), want)

	// Batches 2, 3, 4 are lost: the worker is cleared, then the batch is applied.
	markWorker(t, ix, 5, 0)
	wantMatches(t, mustFind(t, ix, marker), m(5, 0, 2))
	want = one
	want.Seq, want.SeqExpected, want.BatchesMissed, want.WorkerCleared = SeqGap, 2, 3, true
	wantResult(t, mustFeedApply(t, feed, ix, 5, 0, seqFrame(5), payload), want)
	wantMatches(t, mustFind(t, ix, marker))
	wantMatches(t, mustFind(t, ix, tokenQuery(t, 1, 4)), m(5, 0, 1))

	// The sequence goes backwards: the publisher restarted.
	markWorker(t, ix, 5, 0)
	want = one
	want.Seq, want.SeqExpected, want.WorkerCleared = SeqRestart, 6, true
	wantResult(t, mustFeedApply(t, feed, ix, 5, 0, seqFrame(0), payload), want)
	wantMatches(t, mustFind(t, ix, marker))

	// A malformed batch applies nothing and is not recorded; a frame that is not 8 bytes is
	// refused before the payload is read.
	markWorker(t, ix, 5, 0)
	before := mustStats(t, ix)
	_, err := feed.Apply(ix, 5, 0, seqFrame(1), []byte{0x93, 0x01})
	wantErr(t, err, ErrMalformed)
	_, err = feed.Apply(ix, 5, 0, seqFrame(1)[:7], payload)
	wantErr(t, err, ErrInvalidArgument)
	if after := mustStats(t, ix); after != before {
		t.Fatalf("index stats changed:\n before %+v\n after  %+v", before, after)
	}
	wantMatches(t, mustFind(t, ix, marker), m(5, 0, 2))
	// So batch 2 reveals batch 1 as missed.
	want = one
	want.Seq, want.SeqExpected, want.BatchesMissed, want.WorkerCleared = SeqGap, 1, 1, true
	wantResult(t, mustFeedApply(t, feed, ix, 5, 0, seqFrame(2), payload), want)

	// No frame: untracked.
	wantResult(t, mustFeedApply(t, feed, ix, 5, 0, nil, payload), one)

	st, err := feed.Stats()
	if err != nil {
		t.Fatal(err)
	}
	wantStats := EngineStats{Batches: 6, BatchesMalformed: 1, EventsDecoded: 6, EventsSubmitted: 6,
		Gaps: 2, BatchesMissed: 4, Restarts: 1, WorkersCleared: 3}
	if st != wantStats {
		t.Fatalf("feed stats:\n got %+v\nwant %+v", st, wantStats)
	}
}

func TestEngineFeedFlagsAndPublishers(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	payload := fixture(t, fixOneBlock)
	feed := mustFeed(t, EngineVLLM, FeedNoClearOnGap|FeedNoClearOnRestart)

	mustFeedApply(t, feed, ix, 5, 0, seqFrame(10), payload)
	markWorker(t, ix, 5, 0)
	if r := mustFeedApply(t, feed, ix, 5, 0, seqFrame(13), payload); r.Seq != SeqGap ||
		r.BatchesMissed != 2 || r.WorkerCleared {
		t.Fatalf("gap without clearing: %+v", r)
	}
	if r := mustFeedApply(t, feed, ix, 5, 0, seqFrame(0), payload); r.Seq != SeqRestart || r.WorkerCleared {
		t.Fatalf("restart without clearing: %+v", r)
	}
	wantMatches(t, mustFind(t, ix, []uint64{1000, 1001}), m(5, 0, 2))

	// Each (worker, rank) has its own sequence; the rank may come from the envelope.
	if r := mustFeedApply(t, feed, ix, 5, 1, seqFrame(7), payload); r.Seq != SeqFirst || r.DpRank != 1 {
		t.Fatalf("second rank: %+v", r)
	}
	if r := mustFeedApply(t, feed, ix, 6, DPRankFromBatch, seqFrame(3), payload); r.Seq != SeqFirst || r.DpRank != 0 {
		t.Fatalf("second worker: %+v", r)
	}
	if r := mustFeedApply(t, feed, ix, 5, 0, seqFrame(1), payload); r.Seq != SeqInOrder {
		t.Fatalf("first publisher after the others: %+v", r)
	}
	if st, err := feed.Stats(); err != nil || st.Gaps != 1 || st.Restarts != 1 || st.WorkersCleared != 0 || st.Batches != 6 {
		t.Fatalf("feed stats %+v, %v", st, err)
	}

	// Filter flags: every medium, every group and stores with extra keys are indexed.
	wide := mustFeed(t, EngineVLLM, FeedAllMedia|FeedAllGroups|FeedHashTokensOnly)
	r := mustFeedApply(t, wide, ix, 9, 0, nil, fixture(t, fixVLLMFull))
	wantResult(t, r, EngineBatchResult{EventsDecoded: 6, EventsSubmitted: 5, SkippedUnknownTag: 1})
	if st, err := wide.Stats(); err != nil || st.EventsSkipped != 1 || st.EventsSubmitted != 5 {
		t.Fatalf("wide feed stats %+v, %v", st, err)
	}
}

func TestEngineFeedArgumentsAndClose(t *testing.T) {
	_, err := NewEngineFeed(EngineFormat(3), 0)
	wantErr(t, err, ErrInvalidArgument)
	_, err = NewEngineFeed(EngineVLLM, FeedSkipExtras<<1)
	wantErr(t, err, ErrInvalidArgument)

	payload := fixture(t, fixOneBlock)
	feed := mustFeed(t, EngineVLLM, 0)
	_, err = feed.Apply(nil, 1, 0, nil, payload)
	wantErr(t, err, ErrNullPointer)

	closedIx, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	_ = closedIx.Close()
	_, err = feed.Apply(closedIx, 1, 0, nil, payload)
	wantErr(t, err, ErrClosed)
	_, err = closedIx.ApplyEngineBatch(EngineVLLM, 1, 0, payload)
	wantErr(t, err, ErrClosed)

	ix := mustNew(t, Config{})
	if err := feed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := feed.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	_, err = feed.Apply(ix, 1, 0, nil, payload)
	wantErr(t, err, ErrClosed)
	if !strings.Contains(err.Error(), "EngineFeed.Apply") {
		t.Fatalf("error %q does not name the operation", err)
	}
	_, err = feed.Stats()
	wantErr(t, err, ErrClosed)
	wantMatches(t, mustFind(t, ix, tokenQuery(t, 1, 4)))
}

// A feed dropped without Close is freed by its cleanup.
func TestDroppedEngineFeedIsFreed(t *testing.T) {
	before := feedsFreed.Load()
	func() {
		if _, err := NewEngineFeed(EngineSGLang, 0); err != nil {
			t.Fatal(err)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for feedsFreed.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("the dropped feed was never freed")
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// Many publishers through one feed from many goroutines, with readers, then Close racing
// with the appliers.
func TestEngineFeedConcurrentPublishers(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 2})
	feed := mustFeed(t, EngineVLLM, 0)
	payload := fixture(t, fixOneBlock)
	const publishers, batches = 4, 50
	var wg sync.WaitGroup
	errs := make(chan error, publishers+1)
	for w := range uint64(publishers) {
		wg.Go(func() {
			for seq := range uint64(batches) {
				r, err := feed.Apply(ix, w, 0, seqFrame(seq), payload)
				if err == nil && seq > 0 && r.Seq != SeqInOrder {
					err = fmt.Errorf("publisher %d batch %d: %v", w, seq, r.Seq)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	query := tokenQuery(t, 1, 4)
	wg.Go(func() {
		for range batches {
			if _, err := ix.FindMatches(query); err != nil {
				errs <- err
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st, err := feed.Stats(); err != nil || st.Batches != publishers*batches || st.Gaps != 0 || st.Restarts != 0 {
		t.Fatalf("feed stats %+v, %v", st, err)
	}
	mustFlush(t, ix)
	if got := mustFind(t, ix, tokenQuery(t, 1, 4)); len(got) != publishers {
		t.Fatalf("matches %v, want the %d publishers", got, publishers)
	}

	// Close waits for calls in flight; later calls get ErrClosed.
	var racing sync.WaitGroup
	for w := range uint64(publishers) {
		racing.Go(func() {
			for seq := uint64(batches); seq < 2*batches; seq++ {
				if _, err := feed.Apply(ix, w, 0, seqFrame(seq), payload); err != nil {
					if !errors.Is(err, ErrClosed) {
						t.Error(err)
					}
					return
				}
			}
		})
	}
	racing.Go(func() { _ = feed.Close() })
	racing.Wait()
}

func TestEngineCallsAllocateNothingInSteadyState(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	feed := mustFeed(t, EngineVLLM, 0)
	payload := fixture(t, fixOneBlock)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := ix.ApplyEngineBatch(EngineVLLM, 1, 0, payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != hotPathAllocs {
		t.Fatalf("ApplyEngineBatch allocates %.1f times per call on the %s back end, want %d",
			allocs, backendName, hotPathAllocs)
	}
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := feed.Apply(ix, 1, 0, nil, payload); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != hotPathAllocs {
		t.Fatalf("EngineFeed.Apply allocates %.1f times per call on the %s back end, want %d",
			allocs, backendName, hotPathAllocs)
	}
}

func TestEngineStrings(t *testing.T) {
	if EngineTRTLLM.String() != "trtllm" || EngineFormat(7).String() != "EngineFormat(7)" ||
		SeqInOrder.String() != "in order" || SeqStatus(9).String() != "SeqStatus(9)" {
		t.Fatal("String methods")
	}
	err := check("ApplyEngineBatch", StatusMalformed)
	if got := err.Error(); got != "kvidx: ApplyEngineBatch: malformed input (engine payload or snapshot), nothing applied (status 8)" {
		t.Fatalf("Error() = %q", got)
	}
	if s := libStatusStr(uint32(StatusMalformed)); !strings.Contains(s, "MALFORMED") {
		t.Fatalf("library text for status 8: %q", s)
	}
}

// Decoding and applying a 3-event TensorRT-LLM batch (stores of 2 and 1 blocks, a removal),
// synchronously, directly and through a feed with in-order sequence frames.
func BenchmarkApplyEngineBatch(b *testing.B) {
	payload := fixture(b, fixTRTLLM)
	b.Run("direct", func(b *testing.B) {
		ix := mustNew(b, Config{EventThreads: 0})
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ix.ApplyEngineBatch(EngineTRTLLM, 1, 0, payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)*3/b.Elapsed().Seconds(), "events/s")
	})
	b.Run("feed", func(b *testing.B) {
		ix := mustNew(b, Config{EventThreads: 0})
		feed := mustFeed(b, EngineTRTLLM, 0)
		frame := make([]byte, 8)
		var seq uint64
		b.ReportAllocs()
		for b.Loop() {
			binary.BigEndian.PutUint64(frame, seq)
			seq++
			if _, err := feed.Apply(ix, 1, 0, frame, payload); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)*3/b.Elapsed().Seconds(), "events/s")
	})
}

func TestEngineFeedForgetsPublishersAndRemovedWorkers(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	payload := fixture(t, fixOneBlock)
	feed := mustFeed(t, EngineVLLM, 0)
	for _, p := range [][2]uint64{{1, 0}, {1, 1}, {2, 0}} {
		mustFeedApply(t, feed, ix, p[0], uint32(p[1]), seqFrame(0), payload)
	}
	if n, err := feed.Publishers(); err != nil || n != 3 {
		t.Fatalf("Publishers() = %d, %v", n, err)
	}
	if known, err := feed.Forget(2, 0); err != nil || !known {
		t.Fatalf("Forget(2, 0) = %v, %v", known, err)
	}
	if known, err := feed.Forget(2, 0); err != nil || known {
		t.Fatalf("forgetting an unknown publisher: %v, %v", known, err)
	}
	// A forgotten publisher starts over.
	if r := mustFeedApply(t, feed, ix, 2, 0, seqFrame(9), payload); r.Seq != SeqFirst {
		t.Fatalf("after Forget: %+v", r)
	}
	// Removing worker 1 through the feed drops both of its ranks here and in the index.
	if err := feed.RemoveWorker(ix, 1); err != nil {
		t.Fatal(err)
	}
	if n, _ := feed.Publishers(); n != 1 {
		t.Fatalf("after RemoveWorker: %d publishers", n)
	}
	if err := feed.RemoveWorkerDpRank(ix, 2, 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := feed.Publishers(); n != 0 {
		t.Fatalf("after RemoveWorkerDpRank: %d publishers", n)
	}
	if st := mustStats(t, ix); st.Workers != 0 {
		t.Fatalf("index still has %d workers", st.Workers)
	}
	wantErr(t, feed.RemoveWorker(nil, 1), ErrNullPointer)
	_ = feed.Close()
	_, err := feed.Forget(1, 0)
	wantErr(t, err, ErrClosed)
	_, err = feed.Publishers()
	wantErr(t, err, ErrClosed)
	wantErr(t, feed.RemoveWorker(ix, 1), ErrClosed)
}

func TestEnginePayloadAboveTheMaximumIsTooLarge(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 0})
	big := make([]byte, MaxEnginePayload+1)
	copy(big, fixture(t, fixOneBlock))
	_, err := ix.ApplyEngineBatch(EngineVLLM, 1, 0, big)
	wantErr(t, err, ErrTooLarge)
	feed := mustFeed(t, EngineVLLM, 0)
	_, err = feed.Apply(ix, 1, 0, seqFrame(0), big)
	wantErr(t, err, ErrTooLarge)
	if st, err := feed.Stats(); err != nil || st.BatchesMalformed != 1 || st.Batches != 0 {
		t.Fatalf("feed stats %+v, %v", st, err)
	}
	if st := mustStats(t, ix); st.EventsApplied != 0 {
		t.Fatalf("applied %d events", st.EventsApplied)
	}
}

func TestQueueLimitsAreValidated(t *testing.T) {
	for _, capacity := range []uint64{1 << 31, math.MaxUint64, 1<<20 + 1} {
		_, err := New(Config{EventThreads: 2, QueueCapacity: capacity})
		wantErr(t, err, ErrInvalidArgument)
	}
	// A one-event, one-byte budget still accepts and applies every event, one at a time.
	ix := mustNew(t, Config{EventThreads: 2, QueueCapacity: 1, QueueBytes: 1})
	for w := uint64(0); w < 40; w++ {
		if err := ix.ApplyEvent(StoredEvent(w, 0, 0, []Block{{LocalHash: 5, SeqHash: 50}})); err != nil {
			t.Fatal(err)
		}
	}
	if err := ix.Flush(); err != nil {
		t.Fatal(err)
	}
	if st := mustStats(t, ix); st.Workers != 40 {
		t.Fatalf("workers %d", st.Workers)
	}
}
