package kvidx

import (
	"fmt"
	"structs"
)

// EngineStartStats count an [EngineFeed]'s publishers that it first saw above sequence 0
// ("missed from the start"). Its layout is that of the C struct kvidx_engine_start_stats.
type EngineStartStats struct {
	_ structs.HostLayout
	// LateStarts counts the publishers whose first batch tracked was above 0 (reported
	// [SeqFirst] with a sequence above 0: they had published before).
	LateStarts uint64
	// BatchesMissedFromStart sums the batches those publishers sent before their first batch
	// tracked (its sequence).
	BatchesMissedFromStart uint64
}

// NextSeq returns the next sequence the feed expects from the publisher (workerID, dpRank),
// the rank its batches were applied to: one past its last tracked batch, or 0 for a publisher
// the feed has not tracked (a publisher's sequence starts at 0). A batch whose sequence is
// above it follows missing batches, the publisher's first batch included: a caller with the
// engine's replay socket asks it from NextSeq before applying the batch (with
// [FeedNoClearOnGap]). It changes nothing.
func (f *EngineFeed) NextSeq(workerID uint64, dpRank uint32) (uint64, error) {
	const op = "EngineFeed.NextSeq"
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return 0, closedError(op)
	}
	if !libHasFeedStart() {
		return 0, noFeedStartError(op)
	}
	next, st := libFeedNextSeq(f.h, workerID, dpRank)
	return next, check(op, st)
}

// StartStats returns the feed's counters of publishers first seen above sequence 0. Such a
// publisher's first batch reports [SeqFirst]; its sequence is the number of batches missed
// from the start. The worker is not cleared for them.
func (f *EngineFeed) StartStats() (EngineStartStats, error) {
	const op = "EngineFeed.StartStats"
	f.mu.RLock()
	defer f.mu.RUnlock()
	var s EngineStartStats
	if f.h == nilFeed {
		return s, closedError(op)
	}
	if !libHasFeedStart() {
		return s, noFeedStartError(op)
	}
	return s, check(op, libFeedStartStats(f.h, &s))
}

// noFeedStartError reports a method called with a library older than the feed's
// missed-from-the-start report (purego back end only: the cgo back end does not build
// against such a library).
func noFeedStartError(op string) error {
	return &opError{op: op, err: fmt.Errorf("%w: the library has no missed-from-the-start report (KVIDX_HAS_FEED_START)",
		ErrLibraryUnavailable)}
}
