package kvidx

import (
	"runtime"
	"sync/atomic"
)

// Indexer is a handle on one library index. Every method may be called from any number of
// goroutines at once, and from inside a snapshot's io.Writer or io.Reader. [Indexer.Close]
// waits for calls in flight and makes later calls return [ErrClosed]. An Indexer that becomes
// unreachable without Close is freed by a cleanup function as a safety net, but Close should
// be called: freeing drains queued events and joins the event threads.
type Indexer struct {
	calls   callGate
	cleanup runtime.Cleanup
}

// New builds an indexer. It loads the library if needed (purego back end), checks that the
// library's ABI version is [ABIVersion], and fails with [ErrInvalidArgument] for a bad Config
// (any setting out of range, never a crash).
func New(cfg Config) (*Indexer, error) {
	if err := load(); err != nil {
		return nil, err
	}
	c := cConfig{backend: uint32(cfg.Backend), eventThreads: cfg.EventThreads, jumpSize: cfg.JumpSize}
	l := cQueueLimits{queueCapacity: cfg.QueueCapacity, queueBytes: cfg.QueueBytes}
	var h handle
	var st Status
	if cfg.Predictions == (PredictionConfig{}) {
		h, st = libNew(&c, &l)
	} else {
		if !libHasPredictions() {
			return nil, noPredictionsError("New")
		}
		p := cPredictionConfig{maxBytes: cfg.Predictions.MaxBytes,
			workerCapacity: cfg.Predictions.WorkerCapacity, clock: uint32(cfg.Predictions.Clock)}
		h, st = libNewWithPredictions(&c, &l, &p)
	}
	if err := check("New", st); err != nil {
		return nil, err
	}
	ix := &Indexer{}
	ix.calls.h = h
	ix.calls.changed.L = &ix.calls.mu
	ix.cleanup = runtime.AddCleanup(ix, freeHandle, h)
	return ix, nil
}

// handlesFreed counts freed handles (by Close or by the cleanup), for tests.
var handlesFreed atomic.Uint64

// freeHandle frees a library handle.
func freeHandle(h handle) {
	libFree(h)
	handlesFreed.Add(1)
}

// Close frees the indexer: queued events are applied, the event threads are joined. Calls
// that begin after it return [ErrClosed]. It waits for calls in flight, except while a
// snapshot call is running its io.Writer or io.Reader (which may be what called Close): then
// it returns at once and the indexer is freed when the last call in flight returns. Calling
// it again is a no-op; it always returns nil.
func (ix *Indexer) Close() error {
	if ix.calls.close() {
		ix.cleanup.Stop()
	}
	return nil
}

// enter begins a call on the indexer and returns the handle, nilHandle once closed; every
// enter is paired with a deferred leave.
func (ix *Indexer) enter() handle { return ix.calls.enter() }

// leave ends a call begun by enter.
func (ix *Indexer) leave() { ix.calls.leave() }

// ApplyEvent applies (or, with event threads, validates and queues) one event. In synchronous
// mode a stored event whose parent the worker does not hold fails with [ErrParentNotFound] and
// changes nothing.
func (ix *Indexer) ApplyEvent(ev Event) error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("ApplyEvent")
	}
	b := newBatch([]Event{ev})
	st := libApplyEvent(h, b.first())
	b.release()
	return check("ApplyEvent", st)
}

// ApplyEvents applies events in order with one library call. If any event is malformed (a bad
// kind), none is applied and the error is returned. Otherwise the result is that of
// ApplyEvent on each in order: nil or the first failure (in synchronous mode a rejected stored
// event does not stop the events after it). A worker's consecutive events are applied a few at
// a time as one change of that worker, which makes one call cheaper per event than ApplyEvent
// in a loop; a concurrent lookup sees the worker before or after each such group.
func (ix *Indexer) ApplyEvents(events []Event) error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("ApplyEvents")
	}
	if len(events) == 0 {
		return nil
	}
	b := newBatch(events)
	st := libApplyEvents(h, b.first(), len(b.events))
	b.release()
	return check("ApplyEvents", st)
}

// RemoveWorker drops and forgets every dp rank of a worker, after the worker's events already
// accepted. Removing an unknown worker is not an error.
func (ix *Indexer) RemoveWorker(workerID uint64) error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("RemoveWorker")
	}
	return check("RemoveWorker", libRemoveWorker(h, workerID))
}

// RemoveWorkerDpRank drops and forgets one dp rank of a worker.
func (ix *Indexer) RemoveWorkerDpRank(workerID uint64, dpRank uint32) error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("RemoveWorkerDpRank")
	}
	return check("RemoveWorkerDpRank", libRemoveWorkerDpRank(h, workerID, dpRank))
}

// Flush returns once every event accepted before it has been applied (a barrier).
func (ix *Indexer) Flush() error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("Flush")
	}
	return check("Flush", libFlush(h))
}

// FindMatches returns, for each worker holding at least the first block of the query, the
// number of leading query blocks it holds; deepest first, then by worker id and dp rank.
// The query is a request's local block hashes (see [HashTokens]). It returns an empty slice
// when no worker matches.
func (ix *Indexer) FindMatches(localHashes []uint64) ([]Match, error) {
	return ix.FindMatchesInto(localHashes, nil)
}

// FindMatchesInto is FindMatches appending into dst (like append): it returns dst extended by
// the matches. When dst has room for them it allocates nothing, so a caller that reuses
// dst[:0] across requests runs allocation-free. On error dst is returned unchanged.
func (ix *Indexer) FindMatchesInto(localHashes []uint64, dst []Match) ([]Match, error) {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return dst, closedError("FindMatches")
	}
	return findInto(h, "FindMatches", localHashes, dst, libFindMatches)
}

// findInto runs a find call of the library into dst's spare capacity, growing dst and
// calling again while the answer does not fit (events applied meanwhile may change its
// size). The caller is inside ix.enter and has checked the handle. On error dst is returned
// unchanged.
func findInto[M Match | TieredMatch | PredictedMatch](h handle, op string, localHashes []uint64, dst []M,
	find func(h handle, q *uint64, n int, out *M, outCap int) (Status, int)) ([]M, error) {
	var q *uint64
	if len(localHashes) > 0 {
		q = &localHashes[0]
	}
	if cap(dst) == len(dst) {
		dst = growMatches(dst, 8)
	}
	for {
		spare := dst[len(dst):cap(dst)]
		st, n := find(h, q, len(localHashes), &spare[0], len(spare))
		switch st {
		case StatusOK:
			runtime.KeepAlive(localHashes)
			return dst[:len(dst)+n], nil
		case StatusBufferTooSmall:
			dst = growMatches(dst, max(n, 8))
		default:
			return dst, check(op, st)
		}
	}
}

// growMatches returns dst with room for at least extra more matches.
func growMatches[M Match | TieredMatch | PredictedMatch](dst []M, extra int) []M {
	out := make([]M, len(dst), len(dst)+extra+extra/4)
	copy(out, dst)
	return out
}

// Stats returns the indexer's counters. With event threads, call [Indexer.Flush] first to see
// the outcome of every event accepted so far.
func (ix *Indexer) Stats() (Stats, error) {
	h := ix.enter()
	defer ix.leave()
	var s Stats
	if h == nilHandle {
		return s, closedError("Stats")
	}
	st := libStats(h, &s)
	return s, check("Stats", st)
}

// debugPanic makes the library panic inside its boundary (tests only): it returns
// [ErrPanic], and every later call on the indexer fails with [ErrPoisoned].
func (ix *Indexer) debugPanic() error {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError("debugPanic")
	}
	return check("debugPanic", libDebugPanic(h))
}
