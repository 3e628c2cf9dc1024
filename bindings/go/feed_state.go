package kvidx

import (
	"fmt"
	"runtime"
)

// ApplyInEpochAt is [EngineFeed.ApplyAt] with the engine epoch the batch came in (the
// bridge's id of one engine connection, its Kvidx-Engine-Epoch header). A publisher whose
// epoch differs from the one of its previous batch restarted: the result's Seq is
// [SeqRestart], the worker is cleared first (in the offset batch, unless the feed's flags say
// otherwise) and the publisher's sequence tracking starts afresh at this batch, so no
// sequence of the new epoch is taken for one of the old. Use [EngineFeed.ApplyAt] for a
// batch whose epoch is not known (the publisher keeps its epoch). Needs a library with feed
// state (KVIDX_HAS_FEED_STATE), else [ErrLibraryUnavailable].
func (f *EngineFeed) ApplyInEpochAt(ix *Indexer, workerID uint64, dpRank uint32, epoch uint64, seqFrame, payload []byte, offset uint64) (EngineBatchResult, error) {
	return f.apply("EngineFeed.ApplyInEpochAt", ix, workerID, dpRank, seqFrame, payload, true, offset, &epoch)
}

// SaveState returns the feed's per-publisher tracking state (each publisher's next expected
// sequence, epoch and next event id; 40 bytes per publisher plus 20), for
// [EngineFeed.RestoreState]; the counters are not included. Save it while no batch is being
// applied through the feed, at the position a snapshot of the index is taken for (a replica:
// the stream sequence of the last message fed): a feed restored from it then classifies
// every publisher's next batch exactly as this one would.
func (f *EngineFeed) SaveState() ([]byte, error) {
	const op = "EngineFeed.SaveState"
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return nil, closedError(op)
	}
	if !libHasFeedState() {
		return nil, noFeedStateError(op)
	}
	n, st := libFeedSaveState(f.h, nil, 0)
	for st == StatusBufferTooSmall {
		buf := make([]byte, n)
		n, st = libFeedSaveState(f.h, &buf[0], len(buf))
		runtime.KeepAlive(buf)
		if st == StatusOK {
			return buf[:n], nil
		}
	}
	if err := check(op, st); err != nil {
		return nil, err
	}
	return []byte{}, nil
}

// RestoreState replaces the feed's per-publisher tracking state with what
// [EngineFeed.SaveState] returned for a feed of the same format (the counters are kept).
// Bytes that are not a saved state fail with [ErrMalformed], the state of a feed of another
// format with [ErrInvalidArgument]; either way nothing changes.
func (f *EngineFeed) RestoreState(state []byte) error {
	const op = "EngineFeed.RestoreState"
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return closedError(op)
	}
	if !libHasFeedState() {
		return noFeedStateError(op)
	}
	st := libFeedRestoreState(f.h, bytesPtr(state), len(state))
	runtime.KeepAlive(state)
	return check(op, st)
}

func noFeedStateError(op string) error {
	return &opError{op: op, err: fmt.Errorf("%w: the library has no engine epochs or feed state (KVIDX_HAS_FEED_STATE)",
		ErrLibraryUnavailable)}
}
