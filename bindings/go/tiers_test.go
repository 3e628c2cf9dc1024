package kvidx

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func tm(worker uint64, rank, depth uint32, tiers ...uint32) TieredMatch {
	m := TieredMatch{WorkerID: worker, DpRank: rank, Depth: depth}
	copy(m.TierDepths[:], tiers)
	return m
}

// consistent says whether m's fields agree as a lookup reports them: tier depths that never
// decrease, the last one equal to the depth.
func consistent(m TieredMatch) bool {
	for t := 1; t < NumTiers; t++ {
		if m.TierDepths[t] < m.TierDepths[t-1] {
			return false
		}
	}
	return m.TierDepths[NumTiers-1] == m.Depth
}

func mustFindTiered(t testing.TB, ix *Indexer, q []uint64) []TieredMatch {
	t.Helper()
	got, err := ix.FindMatchesTiered(q)
	if err != nil {
		t.Fatalf("FindMatchesTiered(%v): %v", q, err)
	}
	// The tiered answer has the same workers, depths and order as the plain one.
	plain := mustFind(t, ix, q)
	if len(plain) != len(got) {
		t.Fatalf("tiered %v, plain %v", got, plain)
	}
	for i := range got {
		if got[i].Match() != plain[i] {
			t.Fatalf("tiered %v, plain %v", got, plain)
		}
	}
	return got
}

func wantTiered(t testing.TB, got []TieredMatch, want ...TieredMatch) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("tiered matches:\n got %v\nwant %v", got, want)
	}
}

func mustApplyOnTier(t testing.TB, ix *Indexer, e Event, tier Tier) {
	t.Helper()
	if err := ix.ApplyEventOnTier(e, tier); err != nil {
		t.Fatalf("ApplyEventOnTier(%v, %v): %v", e, tier, err)
	}
}

// A worker offloads its prefix to host memory, then evicts part of it from the device: the
// prefix stays held (depth on any tier), the device depth shrinks.
func TestTiersOffloadThenEvict(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		q := []uint64{1, 2, 3, 4}
		mustApplyOnTier(t, ix, StoredEvent(1, 0, 0, chain(q, 100)), TierDevice)
		mustApplyOnTier(t, ix, StoredEvent(1, 0, 1, chain(q, 100)), TierHost)
		mustApplyOnTier(t, ix, RemovedEvent(1, 0, 2, []uint64{102, 103}), TierDevice)
		// Worker 2 has the first two blocks on disk only; worker 3 on the device (plain
		// ApplyEvent stores on the device).
		mustApplyOnTier(t, ix, StoredEvent(2, 0, 0, chain(q[:2], 200)), TierDisk)
		mustApply(t, ix, StoredEvent(3, 0, 0, chain(q[:1], 300)))
		mustFlush(t, ix)
		wantTiered(t, mustFindTiered(t, ix, q),
			tm(1, 0, 4, 2, 4, 4, 4), tm(2, 0, 2, 0, 0, 2, 2), tm(3, 0, 1, 1, 1, 1, 1))

		// Dropping block 103 from host memory too leaves it on no tier: depth 3. Removing a
		// name that is not on the tier counts as an unknown removal.
		before := mustStats(t, ix).UnknownRemovals
		if err := ix.ApplyEventsOnTiers(
			[]Event{RemovedEvent(1, 0, 3, []uint64{103}), RemovedEvent(2, 0, 1, []uint64{201})},
			[]Tier{TierHost, TierHost}); err != nil {
			t.Fatal(err)
		}
		mustFlush(t, ix)
		wantTiered(t, mustFindTiered(t, ix, q),
			tm(1, 0, 3, 2, 3, 3, 3), tm(2, 0, 2, 0, 0, 2, 2), tm(3, 0, 1, 1, 1, 1, 1))
		if got := mustStats(t, ix).UnknownRemovals - before; got != 1 {
			t.Fatalf("unknown removals +%d, want +1 (201 is not in host memory)", got)
		}

		// A removal on every tier (and plain ApplyEvent's removal) drops the block outright.
		mustApplyOnTier(t, ix, RemovedEvent(1, 0, 4, []uint64{101}), TierAll)
		mustApply(t, ix, RemovedEvent(2, 0, 2, []uint64{201}))
		mustFlush(t, ix)
		wantTiered(t, mustFindTiered(t, ix, q),
			tm(1, 0, 1, 1, 1, 1, 1), tm(2, 0, 1, 0, 0, 1, 1), tm(3, 0, 1, 1, 1, 1, 1))

		// A cleared event drops every tier.
		mustApplyOnTier(t, ix, ClearedEvent(1, 0, 5), TierHost)
		mustFlush(t, ix)
		wantTiered(t, mustFindTiered(t, ix, q), tm(2, 0, 1, 0, 0, 1, 1), tm(3, 0, 1, 1, 1, 1, 1))
		wantTiered(t, mustFindTiered(t, ix, []uint64{9}))
		wantTiered(t, mustFindTiered(t, ix, nil))
	})
}

func TestTiersRejectBadArguments(t *testing.T) {
	forEachConfig(t, func(t *testing.T, ix *Indexer, _ Config) {
		st := StoredEvent(1, 0, 0, chain([]uint64{1, 2}, 100))
		for _, bad := range []Tier{4, 5, 254, math.MaxUint32} {
			wantErr(t, ix.ApplyEventOnTier(st, bad), ErrInvalidArgument)
			wantErr(t, ix.ApplyEventOnTier(RemovedEvent(1, 0, 0, []uint64{100}), bad), ErrInvalidArgument)
		}
		err := ix.ApplyEventOnTier(st, TierAll)
		wantErr(t, err, ErrInvalidArgument)
		var se *StatusError
		if !errors.As(err, &se) || se.Op != "ApplyEventOnTier" {
			t.Fatalf("error %#v is not a StatusError for ApplyEventOnTier", err)
		}
		wantErr(t, ix.ApplyEventOnTier(Event{Kind: 7, WorkerID: 1}, TierHost), ErrInvalidArgument)

		// One bad tier in a batch: nothing of the batch is applied.
		err = ix.ApplyEventsOnTiers([]Event{st, StoredEvent(2, 0, 0, chain([]uint64{1}, 200))},
			[]Tier{TierHost, 9})
		wantErr(t, err, ErrInvalidArgument)
		// Lengths that differ: an error before any library call.
		err = ix.ApplyEventsOnTiers([]Event{st}, []Tier{TierHost, TierDisk})
		wantErr(t, err, ErrInvalidArgument)
		if errors.As(err, &se) || !strings.Contains(err.Error(), "ApplyEventsOnTiers: invalid argument: 1 events but 2 tiers") {
			t.Fatalf("length mismatch error %q", err)
		}
		wantErr(t, ix.ApplyEventsOnTiers(nil, []Tier{TierHost}), ErrInvalidArgument)
		if err := ix.ApplyEventsOnTiers(nil, nil); err != nil {
			t.Fatalf("empty batch: %v", err)
		}
		mustFlush(t, ix)
		wantTiered(t, mustFindTiered(t, ix, []uint64{1, 2}))
		if s := mustStats(t, ix); s != (Stats{}) {
			t.Fatalf("stats %+v after rejected calls", s)
		}
	})
	ix := mustNew(t, Config{})
	_ = ix.Close()
	wantErr(t, ix.ApplyEventOnTier(ClearedEvent(1, 0, 0), TierAll), ErrClosed)
	wantErr(t, ix.ApplyEventsOnTiers([]Event{ClearedEvent(1, 0, 0)}, []Tier{TierAll}), ErrClosed)
	dst := []TieredMatch{tm(9, 9, 9)}
	got, err := ix.FindMatchesTieredInto([]uint64{1}, dst)
	wantErr(t, err, ErrClosed)
	if len(got) != 1 || got[0] != dst[0] {
		t.Fatalf("dst changed on error: %v", got)
	}
}

func TestFindMatchesTieredIntoGrowsAndAppends(t *testing.T) {
	ix := mustNew(t, Config{})
	for w := uint64(1); w <= 20; w++ {
		mustApplyOnTier(t, ix, StoredEvent(w, 0, 0, chain([]uint64{1, 2}, 100)), Tier(w%4))
	}
	prefix := tm(99, 9, 9, 1, 2, 3, 9)
	for _, spare := range []int{0, 3, 19, 20, 64} {
		dst := make([]TieredMatch, 1, 1+spare)
		dst[0] = prefix
		got, err := ix.FindMatchesTieredInto([]uint64{1, 2}, dst)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 21 || got[0] != prefix || got[1] != tm(1, 0, 2, 0, 2, 2, 2) ||
			got[4] != tm(4, 0, 2, 2, 2, 2, 2) || got[20] != tm(20, 0, 2, 2, 2, 2, 2) {
			t.Fatalf("spare %d: got %v", spare, got)
		}
		if spare >= 20 && &got[0] != &dst[0] {
			t.Fatalf("spare %d: dst had room but was reallocated", spare)
		}
	}
}

func TestFindMatchesTieredIntoAllocatesNothing(t *testing.T) {
	ix := mustNew(t, Config{EventThreads: 1})
	for w := uint64(0); w < 256; w++ {
		mustApplyOnTier(t, ix, StoredEvent(w, 0, 0, chain([]uint64{1, 2, 3, 4}, 100)), Tier(w%4))
	}
	mustFlush(t, ix)
	q := []uint64{1, 2, 3, 4}
	dst := make([]TieredMatch, 0, 256)
	allocs := testing.AllocsPerRun(200, func() {
		var err error
		dst, err = ix.FindMatchesTieredInto(q, dst[:0])
		if err != nil || len(dst) != 256 {
			t.Fatalf("FindMatchesTieredInto: %d matches, %v", len(dst), err)
		}
	})
	if allocs != hotPathAllocs {
		t.Fatalf("FindMatchesTieredInto allocates %.1f times per call on the %s back end, want %d",
			allocs, backendName, hotPathAllocs)
	}
}

func TestTieredScoreEqualsTheLibrary(t *testing.T) {
	if err := load(); err != nil {
		t.Fatal(err)
	}
	matches := []TieredMatch{
		tm(1, 0, 4, 4, 4, 4, 4),
		tm(1, 0, 4, 0, 4, 4, 4),
		tm(2, 3, 7, 1, 3, 6, 7),
		tm(3, 0, 9, 0, 0, 0, 9),
		tm(4, 0, 1000, 10, 200, 999, 1000),
		tm(5, 0, 0),
		// Not a library answer (depths decrease): the library refuses it.
		tm(6, 0, 5, 5, 2, 4, 5),
		// Not a library answer either (the last tier depth is not the depth).
		tm(8, 0, 5, 1, 2, 3, 4),
		tm(7, 0, math.MaxUint32, math.MaxUint32/3, math.MaxUint32/2, math.MaxUint32/2, math.MaxUint32),
	}
	weights := [][NumTiers]float64{
		{1, 0.8, 0.5, 0.2}, {1, 1, 1, 1}, {0, 0, 0, 0}, {1, 0, 0, 0}, {0.3, 0.1, 0.7, 1e-9},
		{-1, 2.5, math.Pi, 1e300}, {math.NaN(), 1, 1, 1}, {1, 1, 1, math.Inf(-1)},
	}
	for _, m := range matches {
		for _, w := range weights {
			c, st := libTieredScore(&m, &w)
			g := m.Score(w)
			if !consistent(m) || math.IsNaN(g) || math.IsInf(g, 0) {
				// Contradictory fields, or weights without a finite score: refused.
				if st != StatusInvalidArgument {
					t.Errorf("kvidx_tiered_score(%v, %v) = %v, %v; want %v", m, w, c, st,
						StatusInvalidArgument)
				}
				continue
			}
			if st != StatusOK {
				t.Fatalf("kvidx_tiered_score(%v, %v): %v", m, w, st)
			}
			if g != c {
				t.Errorf("Score(%v, %v) = %v, library %v", m, w, g, c)
			}
		}
	}
	if got := tm(1, 0, 4, 2, 3, 3, 4).Score([NumTiers]float64{1, 0.8, 0.5, 0.2}); math.Abs(got-3.0) > 1e-12 {
		t.Fatalf("score %v, want 2*1 + 0.8 + 0.2 = 3", got)
	}
	m := tm(1, 0, 9, 2, 3, 7, 9)
	var per []uint32
	for tier := TierDevice; tier <= TierExternal; tier++ {
		per = append(per, m.BlocksOn(tier))
	}
	if !slices.Equal(per, []uint32{2, 1, 4, 2}) || m.BlocksOn(TierAll) != 0 {
		t.Fatalf("BlocksOn %v", per)
	}
}

func TestTierAndTieredMatchStrings(t *testing.T) {
	for tier, want := range map[Tier]string{
		TierDevice: "device", TierHost: "host", TierDisk: "disk", TierExternal: "external",
		TierAll: "all", 4: "Tier(4)",
	} {
		if got := tier.String(); got != want {
			t.Errorf("Tier(%d).String() = %q, want %q", uint32(tier), got, want)
		}
	}
	m := tm(7, 1, 4, 2, 3, 3, 4)
	want := "{WorkerID:7 DpRank:1 Depth:4 TierDepths:[2 3 3 4]}"
	if got := fmt.Sprint(m); got != want {
		t.Errorf("TieredMatch prints %q, want %q", got, want)
	}
	if got := fmt.Sprintf("%+v", []TieredMatch{m}); got != "["+want+"]" {
		t.Errorf("[]TieredMatch prints %q", got)
	}
	if got := (FeedAllMedia | FeedUnknownMediumHost).String(); got != "FeedAllMedia|FeedUnknownMediumHost" {
		t.Errorf("feed flags print %q", got)
	}
}

func TestFeedUnknownMediumFlags(t *testing.T) {
	for _, f := range []FeedFlags{FeedUnknownMediumDevice, FeedUnknownMediumHost, FeedUnknownMediumDisk} {
		feed, err := NewEngineFeed(EngineVLLM, FeedAllMedia|f)
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		_ = feed.Close()
	}
	_, err := NewEngineFeed(EngineVLLM, FeedAllMedia|FeedUnknownMediumHost|FeedUnknownMediumDisk)
	wantErr(t, err, ErrInvalidArgument)
}
