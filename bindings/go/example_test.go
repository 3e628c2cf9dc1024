package kvidx_test

import (
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
