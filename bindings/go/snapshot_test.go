package kvidx

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// offsetBatch is one worker's events at one offset (a stream message, for a replica).
type offsetBatch struct {
	offset uint64
	events []Event
}

// randomBatches returns n random offset batches (offsets 1..n, small alphabets so prefixes
// are shared, names collide and parents are often missing), over 3 workers x 2 ranks.
func randomBatches(seed uint64, n int) []offsetBatch {
	rng := rand.New(rand.NewPCG(seed, 99))
	out := make([]offsetBatch, n)
	id := uint64(0)
	for i := range out {
		worker, rank := uint64(rng.IntN(3)), uint32(rng.IntN(2))
		evs := make([]Event, 1+rng.IntN(3))
		for j := range evs {
			id++
			switch r := rng.IntN(20); {
			case r < 13:
				blocks := make([]Block, 1+rng.IntN(4))
				for k := range blocks {
					blocks[k] = Block{LocalHash: uint64(1 + rng.IntN(3)), SeqHash: uint64(rng.IntN(40))}
				}
				evs[j] = StoredEvent(worker, rank, id, blocks)
				if rng.IntN(2) == 0 {
					evs[j] = evs[j].WithParent(uint64(rng.IntN(40)))
				}
			case r < 19:
				evs[j] = RemovedEvent(worker, rank, id, []uint64{uint64(rng.IntN(40)), uint64(rng.IntN(40))})
			default:
				evs[j] = ClearedEvent(worker, rank, id)
			}
		}
		out[i] = offsetBatch{offset: uint64(i + 1), events: evs}
	}
	return out
}

// applyAt applies batches at their offsets (a rejected parent is not a failure).
func applyAt(t testing.TB, ix *Indexer, batches []offsetBatch) {
	t.Helper()
	for _, b := range batches {
		if err := ix.ApplyEventsAt(b.events, b.offset); err != nil && !errors.Is(err, ErrParentNotFound) {
			t.Fatalf("ApplyEventsAt(%d): %v", b.offset, err)
		}
	}
}

// sameAnswers compares two indexers on every query of a small alphabet (all chains of
// length <= 4 over 1..3) and on every worker's watermark.
func sameAnswers(t testing.TB, a, b *Indexer, what string) {
	t.Helper()
	mustFlush(t, a)
	mustFlush(t, b)
	var q []uint64
	var walk func()
	walk = func() {
		if len(q) > 0 {
			if ga, gb := mustFind(t, a, q), mustFind(t, b, q); !equalMatches(ga, gb) {
				t.Fatalf("%s: query %v:\n got %v\nwant %v", what, q, gb, ga)
			}
		}
		if len(q) == 4 {
			return
		}
		for l := uint64(1); l <= 3; l++ {
			q = append(q, l)
			walk()
			q = q[:len(q)-1]
		}
	}
	walk()
	for w := range uint64(3) {
		for r := range uint32(2) {
			if wa, wb := a.Watermark(w, r), b.Watermark(w, r); wa != wb {
				t.Fatalf("%s: worker %d rank %d watermark %d, want %d", what, w, r, wb, wa)
			}
		}
	}
	if sa, sb := mustStats(t, a), mustStats(t, b); sa.Workers != sb.Workers || sa.WorkerBlocks != sb.WorkerBlocks {
		t.Fatalf("%s: stats %+v, want %+v", what, sb, sa)
	}
}

// TestSnapshotRoundTripAndReplay: a snapshot restores to the same answers and watermarks,
// and replaying the whole log into the restored indexer (every batch at or below a
// watermark skipped) then ends where the original ends: exactly once.
func TestSnapshotRoundTripAndReplay(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, cfg Config) {
		batches := randomBatches(uint64(cfg.Backend)*10+uint64(cfg.EventThreads), 600)
		applyAt(t, ix, batches[:400])
		mustFlush(t, ix)
		var buf bytes.Buffer
		info, err := ix.WriteSnapshot(&buf)
		if err != nil {
			t.Fatal(err)
		}
		st := mustStats(t, ix)
		if info.Bytes != uint64(buf.Len()) || info.Workers != st.Workers || info.Blocks != st.WorkerBlocks || info.MaxWatermark > 400 || info.MaxWatermark == 0 {
			t.Fatalf("snapshot info %+v: %d bytes written, stats %+v", info, buf.Len(), st)
		}
		restored := mustNew(t, cfg)
		rinfo, err := restored.RestoreSnapshot(bytes.NewReader(buf.Bytes()))
		if err != nil || rinfo != info {
			t.Fatalf("RestoreSnapshot: %+v, %v; wrote %+v", rinfo, err, info)
		}
		sameAnswers(t, ix, restored, "restored")
		rs, err := restored.ReplicaStats()
		if err != nil || rs != (ReplicaStats{}) {
			t.Fatalf("replica stats after restore: %+v, %v", rs, err)
		}
		// Replay everything into the restored indexer: the first 400 are all skipped.
		applyAt(t, restored, batches)
		applyAt(t, ix, batches[400:])
		sameAnswers(t, ix, restored, "after the replay")
		mustFlush(t, restored)
		rs, _ = restored.ReplicaStats()
		var skippedEvents uint64
		for _, b := range batches[:400] {
			skippedEvents += uint64(len(b.events))
		}
		if rs != (ReplicaStats{BatchesApplied: 200, BatchesSkipped: 400, EventsSkipped: skippedEvents}) {
			t.Fatalf("replica stats after the replay: %+v (want 200 applied, 400 skipped, %d events)", rs, skippedEvents)
		}
	})
}

// TestSnapshotWhileApplying writes snapshots while another goroutine applies batches; each
// restored snapshot plus a replay of the whole log must end exactly where the original does.
func TestSnapshotWhileApplying(t *testing.T) {
	for _, cfg := range []Config{{Backend: BackendPositional, EventThreads: 2}, {Backend: BackendRadix, EventThreads: 0}} {
		t.Run(configName(cfg), func(t *testing.T) {
			ix := mustNew(t, cfg)
			batches := randomBatches(7, 3000)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				applyAt(t, ix, batches)
			}()
			var snaps [][]byte
			for range 5 {
				var buf bytes.Buffer
				if _, err := ix.WriteSnapshot(&buf); err != nil {
					t.Error(err)
					break
				}
				snaps = append(snaps, buf.Bytes())
			}
			wg.Wait()
			for i, s := range snaps {
				r := mustNew(t, cfg)
				if _, err := r.RestoreSnapshot(bytes.NewReader(s)); err != nil {
					t.Fatalf("snapshot %d: %v", i, err)
				}
				applyAt(t, r, batches)
				sameAnswers(t, ix, r, "snapshot taken while applying, then the replay")
			}
		})
	}
}

func TestOffsetBatchesSkipAtOrBelowTheWatermark(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, cfg Config) {
		store := StoredEvent(4, 1, 1, chain([]uint64{1, 2}, 100))
		if err := ix.ApplyEventsAt([]Event{store}, 0); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("offset 0: %v", err)
		}
		if err := ix.ApplyEventsAt([]Event{store}, 10); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, ix)
		if w := ix.Watermark(4, 1); w != 10 {
			t.Fatalf("watermark %d, want 10", w)
		}
		if w := ix.Watermark(4, 0); w != 0 {
			t.Fatalf("unknown worker's watermark %d, want 0", w)
		}
		// At and below the watermark: skipped whole (the clear would have emptied it).
		for _, off := range []uint64{10, 3} {
			if err := ix.ApplyEventsAt([]Event{ClearedEvent(4, 1, 2), RemovedEvent(4, 1, 3, []uint64{100})}, off); err != nil {
				t.Fatal(err)
			}
		}
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, []uint64{1, 2}), m(4, 1, 2))
		rs, err := ix.ReplicaStats()
		if err != nil || rs != (ReplicaStats{BatchesApplied: 1, BatchesSkipped: 2, EventsSkipped: 4}) {
			t.Fatalf("replica stats %+v, %v", rs, err)
		}
		if err := ix.ApplyEventsAt([]Event{RemovedEvent(4, 1, 4, []uint64{101})}, 11); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, ix)
		wantMatches(t, mustFind(t, ix, []uint64{1, 2}), m(4, 1, 1))
		if err := ix.RemoveWorker(4); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, ix)
		if w := ix.Watermark(4, 1); w != 0 {
			t.Fatalf("watermark %d after RemoveWorker, want 0 (forgotten)", w)
		}
		if err := ix.ApplyEventsAt(nil, 5); err != nil {
			t.Fatalf("no events: %v", err)
		}
	})
}

func TestEngineBatchesAtOffsets(t *testing.T) {
	ix := mustNew(t, Config{})
	payload := fixture(t, fixOneBlock)
	q := tokenQuery(t, 1, 4)
	if _, err := ix.ApplyEngineBatchAt(EngineVLLM, 7, 0, payload, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("offset 0: %v", err)
	}
	if _, err := ix.ApplyEngineBatchAt(EngineVLLM, 7, 0, payload, 5); err != nil {
		t.Fatal(err)
	}
	wantMatches(t, mustFind(t, ix, q), m(7, 0, 1))
	if _, err := ix.ApplyEngineBatchAt(EngineVLLM, 7, 0, payload, 5); err != nil {
		t.Fatal(err)
	}
	if w := ix.Watermark(7, 0); w != 5 {
		t.Fatalf("watermark %d", w)
	}

	// Through a feed: a skipped batch still records its sequence, so the batch after it is
	// in order (no gap, no clear) on a replica that replays an overlapping range.
	feed := mustFeed(t, EngineVLLM, 0)
	r2 := mustNew(t, Config{})
	for seq, off := range []uint64{1, 2, 3} {
		if _, err := feed.ApplyAt(r2, 9, 0, seqFrame(uint64(seq)), payload, off); err != nil {
			t.Fatal(err)
		}
	}
	var snap bytes.Buffer
	if _, err := r2.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	r3 := mustNew(t, Config{})
	if _, err := r3.RestoreSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	feed3 := mustFeed(t, EngineVLLM, 0)
	res, err := feed3.ApplyAt(r3, 9, 0, seqFrame(2), payload, 3) // the message at the watermark
	if err != nil || res.Seq != SeqFirst {
		t.Fatalf("priming at the watermark: %+v, %v", res, err)
	}
	res, err = feed3.ApplyAt(r3, 9, 0, seqFrame(3), payload, 4)
	if err != nil || res.Seq != SeqInOrder || res.WorkerCleared {
		t.Fatalf("the next batch after the primed one: %+v, %v", res, err)
	}
	rs, _ := r3.ReplicaStats()
	if rs != (ReplicaStats{BatchesApplied: 1, BatchesSkipped: 1, EventsSkipped: 1}) {
		t.Fatalf("replica stats %+v", rs)
	}
	if _, err := feed3.ApplyAt(r3, 9, 0, seqFrame(4), payload, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("offset 0: %v", err)
	}
}

// failingIO fails after n bytes, or panics when told to.
type failingIO struct {
	n     int
	panic bool
}

var errBroken = errors.New("broken pipe (test)")

func (f *failingIO) Write(p []byte) (int, error) {
	if f.panic {
		panic("writer panic (test)")
	}
	if len(p) > f.n {
		return 0, errBroken
	}
	f.n -= len(p)
	return len(p), nil
}

func TestSnapshotIOErrorsAndMalformedInput(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, cfg Config) {
		applyAt(t, ix, randomBatches(3, 300))
		mustFlush(t, ix)
		var good bytes.Buffer
		if _, err := ix.WriteSnapshot(&good); err != nil {
			t.Fatal(err)
		}
		raw := good.Bytes()

		_, err := ix.WriteSnapshot(&failingIO{n: 10})
		if !errors.Is(err, ErrIO) || !errors.Is(err, errBroken) || !strings.Contains(err.Error(), "broken pipe") {
			t.Fatalf("failing writer: %v", err)
		}
		func() {
			defer func() {
				if p := recover(); p != "writer panic (test)" {
					t.Fatalf("panic %v, want the writer's panic re-raised", p)
				}
			}()
			_, _ = ix.WriteSnapshot(&failingIO{panic: true})
		}()
		if _, err := ix.Stats(); err != nil {
			t.Fatalf("the indexer after a writer's panic: %v", err)
		}
		if _, err := ix.WriteSnapshot(nil); !errors.Is(err, ErrNullPointer) {
			t.Fatalf("nil writer: %v", err)
		}

		r := mustNew(t, cfg)
		check := func(what string, in io.Reader, want error) {
			t.Helper()
			if _, err := r.RestoreSnapshot(in); !errors.Is(err, want) {
				t.Fatalf("%s: %v, want %v", what, err, want)
			}
			if st := mustStats(t, r); st.Workers != 0 || st.WorkerBlocks != 0 {
				t.Fatalf("%s: the indexer is not empty: %+v", what, st)
			}
		}
		check("truncated", bytes.NewReader(raw[:len(raw)-1]), ErrMalformed)
		check("half", bytes.NewReader(raw[:len(raw)/2]), ErrMalformed)
		check("empty", bytes.NewReader(nil), ErrMalformed)
		check("foreign", strings.NewReader("this is not a kvidx snapshot at all, not even close"), ErrMalformed)
		for _, i := range []int{0, 5, len(raw) / 3, len(raw) / 2, len(raw) - 3} {
			c := bytes.Clone(raw)
			c[i] ^= 0x01
			check("one bit flipped", bytes.NewReader(c), ErrMalformed)
		}
		check("trailing bytes", io.MultiReader(bytes.NewReader(raw), strings.NewReader("x")), ErrMalformed)
		check("failing reader", io.MultiReader(bytes.NewReader(raw[:20]), iotestErrReader{}), ErrIO)
		if _, err := r.RestoreSnapshot(nil); !errors.Is(err, ErrNullPointer) {
			t.Fatalf("nil reader: %v", err)
		}
		// Still usable: the good snapshot restores and answers as the original.
		if _, err := r.RestoreSnapshot(&oneByteReader{b: raw}); err != nil {
			t.Fatal(err)
		}
		sameAnswers(t, ix, r, "restored after failures")
		// Restoring into a non-empty indexer is refused.
		if _, err := r.RestoreSnapshot(bytes.NewReader(raw)); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("restore into a non-empty indexer: %v", err)
		}
	})
}

// iotestErrReader always fails.
type iotestErrReader struct{}

func (iotestErrReader) Read([]byte) (int, error) { return 0, errBroken }

// oneByteReader hands out one byte per Read, with an empty read between bytes.
type oneByteReader struct {
	b     []byte
	empty bool
}

func (r *oneByteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if r.empty = !r.empty; r.empty {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

func TestSnapshotToAFileAndAcrossBackends(t *testing.T) {
	for _, from := range []Backend{BackendPositional, BackendRadix, BackendRuns} {
		ix := mustNew(t, Config{Backend: from, EventThreads: 2})
		applyAt(t, ix, randomBatches(11, 200))
		mustFlush(t, ix)
		path := filepath.Join(t.TempDir(), "snap.kvidx")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ix.WriteSnapshot(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		for _, to := range []Backend{BackendPositional, BackendRadix, BackendRuns} {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			r := mustNew(t, Config{Backend: to})
			got, err := r.RestoreSnapshot(f)
			f.Close()
			switch {
			case err == nil && got == info:
				sameAnswers(t, ix, r, from.String()+" snapshot restored into "+to.String())
			case from == BackendPositional && to != BackendPositional && errors.Is(err, ErrInvalidArgument):
				// Documented: positional orphans known only by identity have no radix or runs form.
				if st := mustStats(t, r); st.Workers != 0 {
					t.Fatalf("refused restore left %+v", st)
				}
			default:
				t.Fatalf("%s snapshot into %s: %+v, %v (wrote %+v)", from, to, got, err, info)
			}
		}
	}
}

func TestSnapshotCallsOnAClosedIndexer(t *testing.T) {
	ix := mustNew(t, Config{})
	_ = ix.Close()
	if _, err := ix.WriteSnapshot(io.Discard); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := ix.RestoreSnapshot(strings.NewReader("")); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := ix.ApplyEventsAt(nil, 1); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := ix.ReplicaStats(); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, err := ix.ApplyEngineBatchAt(EngineVLLM, 1, 0, nil, 1); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if w := ix.Watermark(1, 0); w != 0 {
		t.Fatal(w)
	}
	if StatusIO.String() == "" || !errors.Is(&StatusError{Op: "x", Status: StatusIO}, ErrIO) {
		t.Fatal("StatusIO")
	}
}
