package kvidx

import (
	"fmt"
	"runtime"
	"strconv"
	"structs"
)

// Tier is a storage tier of a KV block, fastest first (the C enum kvidx_tier). A worker may
// hold one block on several tiers at once: in GPU memory and offloaded to host memory, say.
type Tier uint32

const (
	// TierDevice is accelerator (GPU) memory.
	TierDevice Tier = 0
	// TierHost is host (CPU) memory, pinned or not.
	TierHost Tier = 1
	// TierDisk is a local disk or storage medium.
	TierDisk Tier = 2
	// TierExternal is a remote or shared store, and any medium the engine names that kvidx
	// does not know.
	TierExternal Tier = 3
	// TierAll names every tier at once; it is valid only for removed and cleared events
	// (what [Indexer.ApplyEvent] does).
	TierAll Tier = 255
)

// NumTiers is the number of storage tiers (the length of [TieredMatch.TierDepths]).
const NumTiers = 4

// String returns "device", "host", "disk", "external", "all" or "Tier(N)".
func (t Tier) String() string {
	switch t {
	case TierDevice:
		return "device"
	case TierHost:
		return "host"
	case TierDisk:
		return "disk"
	case TierExternal:
		return "external"
	case TierAll:
		return "all"
	default:
		return "Tier(" + strconv.FormatUint(uint64(t), 10) + ")"
	}
}

// TieredMatch is one worker's answer to a tiered query ([Indexer.FindMatchesTiered]). Its
// layout is that of the C struct kvidx_tiered_match (uint64, uint32, uint32, uint32[4]).
type TieredMatch struct {
	_ structs.HostLayout
	// WorkerID and DpRank name the worker.
	WorkerID uint64
	// DpRank is the worker's data-parallel rank.
	DpRank uint32
	// Depth is the longest query prefix the worker holds on any tier (at least 1): the depth
	// [Indexer.FindMatches] reports.
	Depth uint32
	// TierDepths[t] is the longest query prefix whose every block the worker holds on tier t
	// or a faster one (indexes are Tier values). They never decrease with t, and
	// TierDepths[TierExternal] == Depth.
	TierDepths [NumTiers]uint32
}

// String formats the match as {WorkerID:N DpRank:N Depth:N TierDepths:[D H K E]}.
func (m TieredMatch) String() string { return fieldsString(m) }

// Match returns the plain match (the depth on any tier).
func (m TieredMatch) Match() Match {
	return Match{WorkerID: m.WorkerID, DpRank: m.DpRank, Depth: m.Depth}
}

// BlocksOn returns the number of blocks of the matched prefix whose fastest tier is t (0 for
// TierAll or an unknown tier).
func (m TieredMatch) BlocksOn(t Tier) uint32 {
	if t >= NumTiers {
		return 0
	}
	var below uint32
	if t > 0 {
		below = m.TierDepths[t-1]
	}
	if m.TierDepths[t] < below {
		return 0
	}
	return m.TierDepths[t] - below
}

// Score is a weighted hit score: each block of the matched prefix counts weights[t] for the
// fastest tier t it is on (e.g. {1, 0.8, 0.5, 0.2}: a block in host memory is worth 80% of
// one on the device). It is computed in Go and equals the C kvidx_tiered_score wherever that
// succeeds: for a match whose fields agree (tier depths that never decrease, the last one equal
// to Depth, as every lookup reports them) and weights giving a finite score; the C function
// refuses the others with ErrInvalidArgument.
func (m TieredMatch) Score(weights [NumTiers]float64) float64 {
	var s float64
	for t := Tier(0); t < NumTiers; t++ {
		s += weights[t] * float64(m.BlocksOn(t))
	}
	return s
}

// ApplyEventOnTier is [Indexer.ApplyEvent] on a storage tier: a stored event puts its blocks
// on t (a block the worker already holds gains t); a removed event takes t off each named
// block, which stays held while it is on another tier (TierAll: every tier, as ApplyEvent; a
// name not on t counts in [Stats].UnknownRemovals); a cleared event drops every tier. An
// unknown tier, or TierAll on a stored event, fails with [ErrInvalidArgument] and applies
// nothing.
func (ix *Indexer) ApplyEventOnTier(ev Event, t Tier) error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("ApplyEventOnTier")
	}
	if !libHasTiers() {
		return noTiersError("ApplyEventOnTier")
	}
	b := newBatch([]Event{ev})
	st := libApplyEventOnTier(h, b.first(), uint32(t))
	b.release()
	return check("ApplyEventOnTier", st)
}

// ApplyEventsOnTiers is [Indexer.ApplyEvents] with each event on the tier at the same index
// of tiers (see [Indexer.ApplyEventOnTier]), in one library call. Every event and tier is
// checked before anything is applied: if one is malformed, none is applied. Slices of
// different lengths fail with an error wrapping [ErrInvalidArgument] without calling the
// library.
func (ix *Indexer) ApplyEventsOnTiers(events []Event, tiers []Tier) error {
	if len(events) != len(tiers) {
		return &opError{op: "ApplyEventsOnTiers", err: fmt.Errorf("%w: %d events but %d tiers",
			ErrInvalidArgument, len(events), len(tiers))}
	}
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("ApplyEventsOnTiers")
	}
	if !libHasTiers() {
		return noTiersError("ApplyEventsOnTiers")
	}
	if len(events) == 0 {
		return nil
	}
	b := newBatch(events)
	st := libApplyEventsOnTiers(h, b.first(), (*uint32)(&tiers[0]), len(b.events))
	b.release()
	runtime.KeepAlive(tiers)
	return check("ApplyEventsOnTiers", st)
}

// FindMatchesTiered is [Indexer.FindMatches] with each worker's depth per storage tier: the
// same workers, depths and order. When no worker holds a block off the device it costs what
// FindMatches costs.
func (ix *Indexer) FindMatchesTiered(localHashes []uint64) ([]TieredMatch, error) {
	return ix.FindMatchesTieredInto(localHashes, nil)
}

// FindMatchesTieredInto is FindMatchesTiered appending into dst (like append), as
// [Indexer.FindMatchesInto]: when dst has room it allocates nothing on the cgo back end. On
// error dst is returned unchanged.
func (ix *Indexer) FindMatchesTieredInto(localHashes []uint64, dst []TieredMatch) ([]TieredMatch, error) {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return dst, closedError("FindMatchesTiered")
	}
	if !libHasTiers() {
		return dst, noTiersError("FindMatchesTiered")
	}
	return findInto(h, "FindMatchesTiered", localHashes, dst, libFindMatchesTiered)
}

// noTiersError reports a tier method called with a library older than storage tiers (purego
// back end only: the cgo back end does not build against such a library).
func noTiersError(op string) error {
	return &opError{op: op, err: fmt.Errorf("%w: the library has no storage tiers (KVIDX_HAS_TIERS)",
		ErrLibraryUnavailable)}
}
