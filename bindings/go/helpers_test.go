package kvidx

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// configs are the indexer set-ups every semantic test runs on: every backend, synchronous and
// with event threads.
var configs = []Config{
	{Backend: BackendPositional, EventThreads: 0},
	{Backend: BackendPositional, EventThreads: 2, JumpSize: 4},
	{Backend: BackendRadix, EventThreads: 0},
	{Backend: BackendRadix, EventThreads: 2},
	{Backend: BackendRuns, EventThreads: 0},
	{Backend: BackendRuns, EventThreads: 2},
}

func configName(c Config) string {
	return fmt.Sprintf("%s/threads=%d/jump=%d", c.Backend, c.EventThreads, c.JumpSize)
}

// forEachConfig runs f on a fresh indexer of every config.
func forEachConfig(t *testing.T, f func(t *testing.T, ix *Indexer, cfg Config)) {
	t.Helper()
	for _, cfg := range configs {
		t.Run(configName(cfg), func(t *testing.T) {
			ix := mustNew(t, cfg)
			f(t, ix, cfg)
		})
	}
}

func mustNew(t testing.TB, cfg Config) *Indexer {
	t.Helper()
	ix, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = ix.Close() })
	return ix
}

// chain returns blocks for local hashes with sequence hashes seq0+i, an arbitrary naming: the
// index treats engine hashes as opaque.
func chain(locals []uint64, seq0 uint64) []Block {
	out := make([]Block, len(locals))
	for i, l := range locals {
		out[i] = Block{LocalHash: l, SeqHash: seq0 + uint64(i)}
	}
	return out
}

func mustApply(t testing.TB, ix *Indexer, evs ...Event) {
	t.Helper()
	if err := ix.ApplyEvents(evs); err != nil {
		t.Fatalf("ApplyEvents: %v", err)
	}
}

func mustFlush(t testing.TB, ix *Indexer) {
	t.Helper()
	if err := ix.Flush(); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

func mustFind(t testing.TB, ix *Indexer, q []uint64) []Match {
	t.Helper()
	m, err := ix.FindMatches(q)
	if err != nil {
		t.Fatalf("FindMatches(%v): %v", q, err)
	}
	return m
}

func mustStats(t testing.TB, ix *Indexer) Stats {
	t.Helper()
	s, err := ix.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	return s
}

func wantMatches(t testing.TB, got []Match, want ...Match) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("matches:\n got %v\nwant %v", got, want)
	}
}

func m(worker uint64, rank, depth uint32) Match {
	return Match{WorkerID: worker, DpRank: rank, Depth: depth}
}

func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want errors.Is %v", err, target)
	}
}
