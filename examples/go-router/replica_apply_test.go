package main

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
)

// engineBatchMsg is a stream message of one vLLM batch storing blocks (local ids, each
// its own engine hash) after parent (0: a root), with the bridge's headers; an empty epoch
// or sequence leaves its header out.
func engineBatchMsg(t *testing.T, seq uint64, worker uint64, headerRank, batchRank uint32, epoch, engineSeq string, parent uint64, blocks ...uint64) streamMsg {
	op := workloadOp{Op: "stored"}
	if parent != 0 {
		op.Parent = &parent
	}
	for _, b := range blocks {
		op.Blocks = append(op.Blocks, [2]uint64{b, b})
	}
	h := nats.Header{}
	h.Set(hdrWorkerID, strconv.FormatUint(worker, 10))
	h.Set(hdrDpRank, strconv.FormatUint(uint64(headerRank), 10))
	h.Set(hdrFormat, "vllm")
	if engineSeq != "" {
		h.Set(hdrEngineSeq, engineSeq)
	}
	if epoch != "" {
		h.Set(hdrEngineEpoch, epoch)
	}
	return streamMsg{seq: seq, subject: fmt.Sprintf("kvidx.events.%d.%d", worker, headerRank), header: h,
		data: vllmPayload(t, []workloadOp{op}, batchRank, 1)}
}

// depthOf is the depth worker k holds of the chain of local ids.
func depthOf(t *testing.T, ix *kvidx.Indexer, k workerKey, chain ...uint64) uint32 {
	t.Helper()
	hashes := localHashCache{}
	q := make([]uint64, len(chain))
	for i, l := range chain {
		q[i] = hashes.get(t, l)
	}
	ms, err := ix.FindMatches(q)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if (workerKey{m.WorkerID, m.DpRank}) == k {
			return m.Depth
		}
	}
	return 0
}

// TestANewEngineEpochIsARestart: the dead engine's chain A (sequences 0..2 of epoch 100),
// then a new engine's batches spliced on as 3.. of epoch 200 (the bridge filled the "gap"
// from the new engine's replay socket): the first batch of the new epoch clears the worker,
// so the dead engine's blocks are not routed to, and the new epoch's sequence goes on from
// its own first batch (4 after 3 is in order: nothing more is cleared).
func TestANewEngineEpochIsARestart(t *testing.T) {
	r := newDiffReplica(t, 0)
	w := workerKey{7, 0}
	msgs := []streamMsg{
		engineBatchMsg(t, 1, 7, 0, 0, "100", "0", 0, 1),
		engineBatchMsg(t, 2, 7, 0, 0, "100", "1", 1, 2),
		engineBatchMsg(t, 3, 7, 0, 0, "100", "2", 2, 3),
		engineBatchMsg(t, 4, 7, 0, 0, "200", "3", 0, 11),
		engineBatchMsg(t, 5, 7, 0, 0, "200", "4", 11, 12),
	}
	for i, m := range msgs {
		if err := r.handleMsg(m); err != nil {
			t.Fatal(err)
		}
		if i == 2 && depthOf(t, r.ix, w, 1, 2, 3) != 3 {
			t.Fatal("chain A not stored")
		}
	}
	if err := r.ix.Flush(); err != nil {
		t.Fatal(err)
	}
	if d := depthOf(t, r.ix, w, 1, 2, 3); d != 0 {
		t.Fatalf("worker 7 still holds %d blocks of the dead engine's chain after the new epoch", d)
	}
	if d := depthOf(t, r.ix, w, 11, 12); d != 2 {
		t.Fatalf("worker 7 holds %d blocks of the new engine's chain, want 2", d)
	}
}

// TestRankFromBatchRegistersTheBatchRank: Kvidx-Dp-Rank 4294967295 takes the rank from the
// batch (2): the routing candidate and the watermark are (7, 2), never (7, 4294967295); a
// batch that claims 4294967295 itself is refused and registers nothing.
func TestRankFromBatchRegistersTheBatchRank(t *testing.T) {
	r := newDiffReplica(t, 0)
	if err := r.handleMsg(engineBatchMsg(t, 1, 7, rankFromBatch, 2, "1", "0", 0, 1)); err != nil {
		t.Fatal(err)
	}
	bad := engineBatchMsg(t, 2, 8, rankFromBatch, 0, "1", "0", 0, 1)
	bad.data = append(bad.data[:len(bad.data)-1], 0xce, 0xff, 0xff, 0xff, 0xff) // batch rank 4294967295
	if err := r.handleMsg(bad); err == nil {
		t.Fatal("a batch claiming rank 4294967295 was applied")
	}
	want := []workerKey{{7, 2}}
	if !slices.Equal(r.registered, want) {
		t.Fatalf("routing candidates %v, want %v", r.registered, want)
	}
	if wm := r.ix.Watermark(7, 2); wm != 1 {
		t.Fatalf("watermark of (7, 2) = %d, want 1", wm)
	}
	if st, _ := r.ix.Stats(); st.Workers != 1 {
		t.Fatalf("%d workers in the index, want 1", st.Workers)
	}
}
