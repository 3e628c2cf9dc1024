package kvidx

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Writers extend one chain per worker while readers query it from many goroutines; the
// answers must always be well formed, and the final state exact.
func TestConcurrentWritersAndReaders(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		const workers, length, readers, minQueries = 8, 64, 8, 50
		locals := make([]uint64, length)
		for i := range locals {
			locals[i] = uint64(1000 + i)
		}
		var wg sync.WaitGroup
		var stop atomic.Bool
		start := make(chan struct{}) // released once every goroutine exists, so they overlap
		errs := make(chan error, workers+readers)
		for w := range uint64(workers) {
			wg.Go(func() {
				<-start
				// Store the chain in steps of 4 blocks, each continuing the previous step.
				for i := 0; i < length; i += 4 {
					ev := StoredEvent(w, 0, uint64(i), chain(locals[i:i+4], uint64(i)))
					if i > 0 {
						ev = ev.WithParent(uint64(i - 1))
					}
					if err := ix.ApplyEvent(ev); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		var readersWG sync.WaitGroup
		var queries atomic.Int64
		for range readers {
			readersWG.Go(func() {
				dst := make([]Match, 0, workers)
				<-start
				// At least minQueries each, then until the writers are done.
				for n := 0; n < minQueries || !stop.Load(); n++ {
					var err error
					dst, err = ix.FindMatchesInto(locals, dst[:0])
					if err != nil {
						errs <- err
						return
					}
					for i, mt := range dst {
						if mt.Depth == 0 || mt.Depth > length || mt.WorkerID >= workers ||
							(i > 0 && dst[i-1].Depth < mt.Depth) {
							errs <- errors.New("malformed answer")
							return
						}
					}
					queries.Add(1)
				}
			})
		}
		close(start)
		wg.Wait()
		mustFlush(t, ix)
		stop.Store(true)
		readersWG.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := make([]Match, workers)
		for w := range want {
			want[w] = m(uint64(w), 0, length)
		}
		wantMatches(t, mustFind(t, ix, locals), want...)
		if s := mustStats(t, ix); s.EventsApplied != workers*length/4 || s.WorkerBlocks != workers*length {
			t.Fatalf("stats %+v", s)
		}
		if q := queries.Load(); q < readers*minQueries {
			t.Fatalf("readers ran %d queries, want at least %d", q, readers*minQueries)
		}
	})
}

// Close waits for calls in flight; calls racing with it either succeed or get ErrClosed.
func TestCloseRacingWithCalls(t *testing.T) {
	for range 5 {
		ix, err := New(Config{EventThreads: 1})
		if err != nil {
			t.Fatal(err)
		}
		mustApply(t, ix, StoredEvent(1, 0, 0, chain([]uint64{1, 2}, 10)))
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 200 {
					var err error
					if g%2 == 0 {
						_, err = ix.FindMatches([]uint64{1, 2})
					} else {
						err = ix.ApplyEvent(StoredEvent(uint64(g), 0, uint64(i), chain([]uint64{1}, 5)))
					}
					if err != nil && !errors.Is(err, ErrClosed) {
						t.Errorf("call racing Close: %v", err)
						return
					}
				}
			})
		}
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
	}
}
