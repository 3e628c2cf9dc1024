package kvidx

import (
	"fmt"
	"testing"
)

// benchLocals are the local hashes the Rust criterion bench (benches/find_matches.rs) queries,
// so the two measure the same call: locals[i] = i*0x9e3779b9 ^ 0x55.
func benchLocals(depth int) []uint64 {
	out := make([]uint64, depth)
	for i := range out {
		out[i] = uint64(i)*0x9e3779b9 ^ 0x55
	}
	return out
}

// loadedIndexer is a synchronous indexer where workers workers hold the same chain of depth
// blocks (every worker matches at full depth: the most work a query of that size can cause).
func loadedIndexer(b *testing.B, backend Backend, workers, depth int) (*Indexer, []uint64) {
	b.Helper()
	ix := mustNew(b, Config{Backend: backend})
	locals := benchLocals(depth)
	seqs, err := SeqHashes(locals)
	if err != nil {
		b.Fatal(err)
	}
	blocks := make([]Block, depth)
	for i := range blocks {
		blocks[i] = Block{LocalHash: locals[i], SeqHash: seqs[i]}
	}
	for w := range workers {
		mustApply(b, ix, StoredEvent(uint64(w), 0, 0, blocks))
	}
	return ix, locals
}

// BenchmarkFindMatches: 256 workers, query depths 16/128/1024, both backends, one goroutine.
// Compare with `cargo bench --bench find_matches -- workers256` for the per-call overhead.
func BenchmarkFindMatches(b *testing.B) {
	for _, backend := range []Backend{BackendPositional, BackendRadix} {
		for _, depth := range []int{16, 128, 1024} {
			b.Run(fmt.Sprintf("%s/workers256/depth%d", backend, depth), func(b *testing.B) {
				ix, q := loadedIndexer(b, backend, 256, depth)
				dst := make([]Match, 0, 256)
				b.ReportAllocs()
				for b.Loop() {
					dst, _ = ix.FindMatchesInto(q, dst[:0])
				}
				if len(dst) != 256 {
					b.Fatalf("%d matches", len(dst))
				}
			})
		}
	}
}

// BenchmarkFindMatchesParallel: the same query from GOMAXPROCS goroutines at once.
func BenchmarkFindMatchesParallel(b *testing.B) {
	ix, q := loadedIndexer(b, BackendPositional, 256, 128)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		dst := make([]Match, 0, 256)
		for pb.Next() {
			dst, _ = ix.FindMatchesInto(q, dst[:0])
		}
	})
}

// BenchmarkCallOverhead: the cheapest useful query (one worker, one block), i.e. the floor of
// one FindMatchesInto call through the binding.
func BenchmarkCallOverhead(b *testing.B) {
	ix, q := loadedIndexer(b, BackendPositional, 1, 1)
	dst := make([]Match, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = ix.FindMatchesInto(q, dst[:0])
	}
	if len(dst) != 1 {
		b.Fatalf("%d matches", len(dst))
	}
}

// BenchmarkApplyEvents: batched ingest through event threads. Each batch of 64 events stores
// 4-block chains for 32 workers and removes them again, so the index stays the same size.
func BenchmarkApplyEvents(b *testing.B) {
	for _, threads := range []uint32{0, 2} {
		b.Run(fmt.Sprintf("batch64/threads%d", threads), func(b *testing.B) {
			ix := mustNew(b, Config{EventThreads: threads})
			batch := make([]Event, 0, 64)
			for w := range uint64(32) {
				blocks := chain([]uint64{1, 2, 3, 4}, w*10)
				batch = append(batch, StoredEvent(w, 0, 0, blocks))
			}
			for w := range uint64(32) {
				batch = append(batch, RemovedEvent(w, 0, 1, []uint64{w * 10, w*10 + 1, w*10 + 2, w*10 + 3}))
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := ix.ApplyEvents(batch); err != nil {
					b.Fatal(err)
				}
			}
			mustFlush(b, ix)
			b.ReportMetric(float64(b.N*len(batch))/b.Elapsed().Seconds(), "events/s")
		})
	}
}
