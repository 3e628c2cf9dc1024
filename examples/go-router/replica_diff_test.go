package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"

	kvidx "github.com/kvidx/kvidx/bindings/go"
	"github.com/nats-io/nats.go"
)

// diffPublisher is one engine publisher of the generated stream: its engine state (epoch,
// next sequence) and the blocks it holds (local ids of tokensFor, engine hash = local id).
type diffPublisher struct {
	id         uint64
	headerRank uint32 // the Kvidx-Dp-Rank header: rankFromBatch for the batch's own rank
	batchRank  uint32 // the rank in the batch envelope
	epoch      uint64
	seq        uint64
	chain      []uint64 // the current chain, root first
	nextBlock  uint64
}

// rankFromBatch is the Kvidx-Dp-Rank that takes the rank from the batch.
const rankFromBatch = math.MaxUint32

// diffStream generates a stream of n messages over a few publishers mixing in-order
// batches, engine sequence gaps, restarts (sequence back to 0), new epochs (with the
// sequence going on or back to 0), missing sequence and epoch headers, a format switch
// (sglang among vllm), rank-from-batch, and hostile messages (a subject that does not match,
// unparsable headers, an unknown format, a malformed payload, a batch claiming rank
// 4294967295). It returns the messages and the chains stored (the queries).
func diffStream(t *testing.T, rng *rand.Rand, n int) ([]streamMsg, [][]uint64) {
	pubs := []*diffPublisher{
		{id: 1, headerRank: 0, batchRank: 0},
		{id: 1, headerRank: 1, batchRank: 1},
		{id: 2, headerRank: 0, batchRank: 0},
		{id: 7, headerRank: rankFromBatch, batchRank: 2},
	}
	for i, p := range pubs {
		p.epoch = 1000 + uint64(i)
		p.nextBlock = uint64(i+1) << 32
	}
	var msgs []streamMsg
	var chains [][]uint64
	seq := uint64(0)
	for len(msgs) < n {
		seq += 1 + uint64(rng.IntN(20)/19) // now and then a stream sequence deleted
		p := pubs[rng.IntN(len(pubs))]
		// The engine side: a lost batch, a restart, a new connection (epoch).
		switch r := rng.IntN(100); {
		case r < 8:
			p.seq += 1 + uint64(rng.IntN(3))
		case r < 12:
			p.seq = 0
		case r < 16:
			p.epoch += 1 + uint64(rng.IntN(5))
			if rng.IntN(2) == 0 {
				p.seq = 0
			}
		}
		ops := diffOps(rng, p)
		for _, op := range ops {
			if op.Op == "stored" {
				chains = append(chains, slices.Clone(p.chain))
			}
		}
		h := nats.Header{}
		h.Set(hdrWorkerID, strconv.FormatUint(p.id, 10))
		h.Set(hdrDpRank, strconv.FormatUint(uint64(p.headerRank), 10))
		h.Set(hdrFormat, "vllm")
		if rng.IntN(12) > 0 {
			h.Set(hdrEngineSeq, strconv.FormatUint(p.seq, 10))
		}
		if rng.IntN(10) > 0 {
			h.Set(hdrEngineEpoch, strconv.FormatUint(p.epoch, 10))
		}
		if rng.IntN(10) == 0 {
			h.Set(hdrFormat, "sglang")
		}
		m := streamMsg{seq: seq, subject: fmt.Sprintf("kvidx.events.%d.%d", p.id, p.headerRank), header: h,
			data: vllmPayload(t, ops, p.batchRank, float64(seq))}
		p.seq++
		if rng.IntN(12) == 0 {
			hostile(rng, &m)
		}
		msgs = append(msgs, m)
	}
	return msgs, chains
}

// diffOps returns one batch of a publisher: stores extending its chain (or a new root) and
// removals of its last blocks.
func diffOps(rng *rand.Rand, p *diffPublisher) []workloadOp {
	var ops []workloadOp
	for range 1 + rng.IntN(3) {
		if len(p.chain) > 0 && rng.IntN(3) == 0 {
			k := 1 + rng.IntN(min(3, len(p.chain)))
			removed := slices.Clone(p.chain[len(p.chain)-k:])
			p.chain = p.chain[:len(p.chain)-k]
			ops = append(ops, workloadOp{Op: "removed", SeqHashes: removed})
			continue
		}
		if rng.IntN(8) == 0 {
			p.chain = nil // a new root
		}
		op := workloadOp{Op: "stored"}
		if len(p.chain) > 0 {
			parent := p.chain[len(p.chain)-1]
			op.Parent = &parent
		}
		for range 1 + rng.IntN(3) {
			p.nextBlock++
			op.Blocks = append(op.Blocks, [2]uint64{p.nextBlock, p.nextBlock})
			p.chain = append(p.chain, p.nextBlock)
		}
		ops = append(ops, op)
	}
	return ops
}

// hostile turns a message into one a replica must refuse or survive.
func hostile(rng *rand.Rand, m *streamMsg) {
	switch rng.IntN(6) {
	case 0:
		m.subject += "9" // the subject does not match the headers
	case 1:
		m.header.Set(hdrEngineSeq, "x")
	case 2:
		m.header.Set(hdrFormat, "tgi")
	case 3:
		m.data = m.data[:len(m.data)/2] // truncated: malformed
	case 4:
		m.header.Set(hdrEngineEpoch, "-3")
	case 5:
		// A batch that claims the reserved rank itself.
		m.header.Set(hdrDpRank, strconv.FormatUint(rankFromBatch, 10))
		m.subject = fmt.Sprintf("kvidx.events.%s.%d", m.header.Get(hdrWorkerID), uint64(rankFromBatch))
		m.data = append(m.data[:len(m.data)-1], 0xce, 0xff, 0xff, 0xff, 0xff)
	}
}

// diffReplica is a replica's applier over its own index.
type diffReplica struct {
	streamApplier
	registered []workerKey
}

func newDiffReplica(t *testing.T, threads uint32) *diffReplica {
	ix, err := kvidx.New(kvidx.Config{EventThreads: threads})
	if err != nil {
		t.Fatal(err)
	}
	r := &diffReplica{}
	r.streamApplier = newStreamApplier(ix, func(k workerKey) { r.registered = append(r.registered, k) })
	t.Cleanup(func() { r.resetFeeds(); _ = ix.Close() })
	return r
}

// savedSnapshot is a snapshot object written by the never-stopped replica.
type savedSnapshot struct {
	seq   uint64
	bytes []byte
}

// TestRestoredReplicasAgreeWithANeverStoppedOne is the randomized differential of the
// replica's apply, snapshot and restore: one replica applies a generated stream from start
// to end; at random points it checkpoints (S and the feed states), applies a few more
// messages (so sections are taken at higher watermarks, as a write concurrent with the
// consumer does) and writes the snapshot; a fresh replica restores each snapshot and applies
// the messages after S. Every restored replica must then equal the never-stopped one:
// routing candidates, per-publisher watermarks, block counts, the answer to every chain
// stored, and the engine feeds' state (so the next batch of every publisher is classified
// alike).
func TestRestoredReplicasAgreeWithANeverStoppedOne(t *testing.T) {
	cases := 60
	if s := os.Getenv("KVIDX_REPLICA_DIFF_CASES"); s != "" {
		cases, _ = strconv.Atoi(s)
	}
	for c := range cases {
		seed := uint64(c)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x6b766964))
			msgs, chains := diffStream(t, rng, 60+rng.IntN(140))
			threads := uint32(seed % 3)
			ref := newDiffReplica(t, threads)
			var snaps []savedSnapshot
			points := map[int]int{} // message index -> messages applied between checkpoint and write
			for range 1 + rng.IntN(4) {
				points[rng.IntN(len(msgs)+1)] = rng.IntN(6)
			}
			type pending struct {
				env   envelope
				write int
			}
			var open []pending
			for i := 0; i <= len(msgs); i++ {
				if extra, ok := points[i]; ok {
					env, err := ref.checkpoint(42)
					if err != nil {
						t.Fatal(err)
					}
					open = append(open, pending{env: env, write: min(i+extra, len(msgs))})
				}
				for k := 0; k < len(open); k++ {
					if open[k].write != i {
						continue
					}
					var b bytes.Buffer
					if err := ref.ix.Flush(); err != nil {
						t.Fatal(err)
					}
					if err := open[k].env.write(&b); err != nil {
						t.Fatal(err)
					}
					if _, err := ref.ix.WriteSnapshot(&b); err != nil {
						t.Fatal(err)
					}
					snaps = append(snaps, savedSnapshot{seq: open[k].env.seq, bytes: b.Bytes()})
					open = slices.Delete(open, k, k+1)
					k--
				}
				if i < len(msgs) {
					if err := ref.handleMsg(msgs[i]); errors.Is(err, errIndexUnusable) {
						t.Fatal(err)
					}
				}
			}
			for _, s := range snaps {
				got := newDiffReplica(t, uint32(rng.IntN(3)))
				r := bufio.NewReader(bytes.NewReader(s.bytes))
				env, err := readEnvelope(r)
				if err != nil {
					t.Fatal(err)
				}
				if err := got.restoreFeeds(env); err != nil {
					t.Fatal(err)
				}
				if _, err := got.ix.RestoreSnapshot(r); err != nil {
					t.Fatal(err)
				}
				got.adopt(env)
				for _, m := range msgs {
					if m.seq > env.seq {
						if err := got.handleMsg(m); errors.Is(err, errIndexUnusable) {
							t.Fatal(err)
						}
					}
				}
				compareReplicas(t, fmt.Sprintf("restored at S=%d", s.seq), ref, got, chains)
			}
		})
	}
}

// compareReplicas fails unless got equals want: candidates, watermarks, stats, answers and
// the engine feeds' state.
func compareReplicas(t *testing.T, label string, want, got *diffReplica, chains [][]uint64) {
	t.Helper()
	for _, r := range []*diffReplica{want, got} {
		if err := r.ix.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if w, g := want.publishers(), got.publishers(); !slices.Equal(w, g) {
		t.Fatalf("%s: publishers %v, want %v", label, g, w)
	}
	for _, p := range want.publishers() {
		if p.key.DpRank == rankFromBatch {
			t.Fatalf("%s: publisher %v registered with the rank-from-batch value", label, p.key)
		}
	}
	if w, g := want.watermarks(), got.watermarks(); !slices.Equal(w, g) {
		t.Fatalf("%s: watermarks %v, want %v", label, g, w)
	}
	ws, err := want.ix.Stats()
	if err != nil {
		t.Fatal(err)
	}
	gs, err := got.ix.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if ws.Workers != gs.Workers || ws.WorkerBlocks != gs.WorkerBlocks {
		t.Fatalf("%s: %d workers, %d blocks; want %d, %d", label, gs.Workers, gs.WorkerBlocks, ws.Workers, ws.WorkerBlocks)
	}
	hashes := localHashCache{}
	for _, chain := range chains {
		q := make([]uint64, len(chain))
		for i, l := range chain {
			q[i] = hashes.get(t, l)
		}
		wm, err := want.ix.FindMatches(q)
		if err != nil {
			t.Fatal(err)
		}
		gm, err := got.ix.FindMatches(q)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(wm, gm) {
			t.Fatalf("%s: chain %v: matches %+v, want %+v", label, chain, gm, wm)
		}
	}
	we, err := want.checkpoint(0)
	if err != nil {
		t.Fatal(err)
	}
	ge, err := got.checkpoint(0)
	if err != nil {
		t.Fatal(err)
	}
	if we.seq != ge.seq || len(we.feeds) != len(ge.feeds) {
		t.Fatalf("%s: position %d with %d feeds, want %d with %d", label, ge.seq, len(ge.feeds), we.seq, len(we.feeds))
	}
	for i := range we.feeds {
		if we.feeds[i].format != ge.feeds[i].format || !bytes.Equal(we.feeds[i].state, ge.feeds[i].state) {
			t.Fatalf("%s: feed state of format %d differs:\n got  %x\n want %x", label, we.feeds[i].format, ge.feeds[i].state, we.feeds[i].state)
		}
	}
}
