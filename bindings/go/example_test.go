package kvidx_test

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

// Index two workers' KV events and ask which holds the longest prefix of a request.
func Example() {
	ix, err := kvidx.New(kvidx.Config{Backend: kvidx.BackendPositional, EventThreads: 1})
	if err != nil {
		panic(err)
	}
	defer ix.Close()

	// Local hashes of the request's blocks (normally from HashTokens) and the engines' own
	// sequence hashes that name the stored blocks.
	request := []uint64{11, 12, 13}
	_ = ix.ApplyEvents([]kvidx.Event{
		kvidx.StoredEvent(1, 0, 0, []kvidx.Block{{LocalHash: 11, SeqHash: 901}, {LocalHash: 12, SeqHash: 902}}),
		kvidx.StoredEvent(2, 0, 0, []kvidx.Block{{LocalHash: 11, SeqHash: 901}}),
	})
	_ = ix.Flush() // with event threads, wait until the events are applied

	matches, _ := ix.FindMatches(request)
	for _, m := range matches {
		fmt.Printf("worker %d rank %d holds %d blocks\n", m.WorkerID, m.DpRank, m.Depth)
	}
	// Output:
	// worker 1 rank 0 holds 2 blocks
	// worker 2 rank 0 holds 1 blocks
}

// Hash a request's tokens into local block hashes, as Dynamo-compatible engines do.
func ExampleHashTokens() {
	local, _ := kvidx.HashTokens([]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 4) // 2 full blocks
	seq, _ := kvidx.SeqHashes(local)
	fmt.Println(local)
	fmt.Println(seq)
	// Output:
	// [14643705804678351452 16777012769546811212]
	// [14643705804678351452 4945711292740353085]
}

// The hot path: reuse one slice across requests so FindMatchesInto allocates nothing.
func ExampleIndexer_FindMatchesInto() {
	ix, _ := kvidx.New(kvidx.Config{}) // synchronous: events apply before the call returns
	defer ix.Close()
	_ = ix.ApplyEvent(kvidx.StoredEvent(7, 0, 0, []kvidx.Block{{LocalHash: 5, SeqHash: 50}}))

	buf := make([]kvidx.Match, 0, 64)
	for range 3 {
		buf, _ = ix.FindMatchesInto([]uint64{5, 6}, buf[:0])
	}
	fmt.Println(len(buf), buf[0].WorkerID, buf[0].Depth)
	// Output: 1 7 1
}

// Failures wrap a status code; test them with errors.Is.
func ExampleStatusError() {
	ix, _ := kvidx.New(kvidx.Config{})
	defer ix.Close()
	ev := kvidx.StoredEvent(1, 0, 0, []kvidx.Block{{LocalHash: 1, SeqHash: 2}}).WithParent(12345)
	err := ix.ApplyEvent(ev)
	fmt.Println(errors.Is(err, kvidx.ErrParentNotFound))
	fmt.Println(err)
	// Output:
	// true
	// kvidx: ApplyEvent: parent block not found (status 4)
}

// vllmBatch is a KVEventBatch as vLLM publishes it (the array form of the facts file's
// annotated example): one BlockStored of tokens 1-4 as one block of 4, on dp rank 0.
const vllmBatch = "93cb3ff8000000000000919cab426c6f636b53746f72656491cfffffffffffffffffc0" +
	"940102030404c0a3475055c091c000ae66756c6c5f617474656e74696f6ec000"

// Apply the bytes an engine publishes (the last frame of its ZMQ message) without decoding
// them in Go.
func ExampleIndexer_ApplyEngineBatch() {
	ix, _ := kvidx.New(kvidx.Config{}) // synchronous
	defer ix.Close()
	payload, _ := hex.DecodeString(vllmBatch)

	r, err := ix.ApplyEngineBatch(kvidx.EngineVLLM, 7, kvidx.DPRankFromBatch, payload)
	fmt.Println(r.EventsDecoded, r.EventsSubmitted, r.DpRank, err)

	local, _ := kvidx.HashTokens([]uint32{1, 2, 3, 4}, 4)
	matches, _ := ix.FindMatches(local)
	fmt.Printf("worker %d holds %d block(s)\n", matches[0].WorkerID, matches[0].Depth)

	_, err = ix.ApplyEngineBatch(kvidx.EngineVLLM, 7, 0, payload[:10])
	fmt.Println(errors.Is(err, kvidx.ErrMalformed))
	// Output:
	// 1 1 0 <nil>
	// worker 7 holds 1 block(s)
	// true
}

// Track each publisher's batch sequence (the 8-byte big-endian second frame of its ZMQ
// messages): a gap or a restart clears the worker before the batch is applied.
func ExampleEngineFeed() {
	ix, _ := kvidx.New(kvidx.Config{})
	defer ix.Close()
	feed, err := kvidx.NewEngineFeed(kvidx.EngineVLLM, 0) // 0: clear on gaps and restarts
	if err != nil {
		panic(err)
	}
	defer feed.Close()
	payload, _ := hex.DecodeString(vllmBatch)

	for _, seq := range []uint64{0, 1, 4, 2} {
		frame := binary.BigEndian.AppendUint64(nil, seq)
		r, err := feed.Apply(ix, 7, kvidx.DPRankFromBatch, frame, payload)
		if err != nil {
			panic(err)
		}
		fmt.Printf("seq %d: %v, expected %d, missed %d, worker cleared %v\n",
			seq, r.Seq, r.SeqExpected, r.BatchesMissed, r.WorkerCleared)
	}
	st, _ := feed.Stats()
	fmt.Printf("%d batches, %d gap(s), %d restart(s)\n", st.Batches, st.Gaps, st.Restarts)
	// Output:
	// seq 0: first, expected 0, missed 0, worker cleared false
	// seq 1: in order, expected 0, missed 0, worker cleared false
	// seq 4: gap, expected 2, missed 2, worker cleared true
	// seq 2: restart, expected 5, missed 0, worker cleared true
	// 4 batches, 1 gap(s), 1 restart(s)
}

// Storage tiers: a worker offloads its prefix to host memory and evicts part of it from the
// GPU; the tiered query reports how deep the prefix is on each tier, and Score weighs it.
func ExampleIndexer_FindMatchesTiered() {
	ix, _ := kvidx.New(kvidx.Config{}) // synchronous
	defer ix.Close()
	blocks := []kvidx.Block{{LocalHash: 11, SeqHash: 901}, {LocalHash: 12, SeqHash: 902}, {LocalHash: 13, SeqHash: 903}}
	_ = ix.ApplyEventsOnTiers([]kvidx.Event{
		kvidx.StoredEvent(1, 0, 0, blocks),              // on the GPU
		kvidx.StoredEvent(1, 0, 1, blocks),              // offloaded: also in host memory
		kvidx.RemovedEvent(1, 0, 2, []uint64{902, 903}), // evicted from the GPU only
		kvidx.StoredEvent(2, 0, 0, blocks[:2]),          // another worker, on disk
	}, []kvidx.Tier{kvidx.TierDevice, kvidx.TierHost, kvidx.TierDevice, kvidx.TierDisk})

	matches, _ := ix.FindMatchesTiered([]uint64{11, 12, 13})
	for _, m := range matches {
		fmt.Printf("worker %d: depth %d, by tier %v, score %.1f\n",
			m.WorkerID, m.Depth, m.TierDepths, m.Score([4]float64{1, 0.8, 0.5, 0.2}))
	}
	// Output:
	// worker 1: depth 3, by tier [1 3 3 3], score 2.6
	// worker 2: depth 2, by tier [0 0 2 2], score 1.0
}
