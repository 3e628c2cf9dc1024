package kvidx

import (
	"fmt"
	"runtime"
	"strconv"
	"structs"
	"time"
)

// Clock says which clock an indexer's predictions expire by ([PredictionConfig.Clock]).
type Clock uint32

const (
	// ClockMonotonic is the system's monotonic clock; time 0 is when the indexer was built.
	ClockMonotonic Clock = 0
	// ClockManual starts at 0 and moves only by [Indexer.SetTime] and [Indexer.AdvanceTime]
	// (tests and simulations drive time without sleeping).
	ClockManual Clock = 1
)

// String names the clock: "monotonic", "manual", or Clock(N) for another value.
func (c Clock) String() string {
	switch c {
	case ClockMonotonic:
		return "monotonic"
	case ClockManual:
		return "manual"
	default:
		return "Clock(" + strconv.FormatUint(uint64(c), 10) + ")"
	}
}

// PredictionConfig says how an indexer keeps predicted blocks ([Indexer.Predict]). The zero
// value is the library's defaults.
type PredictionConfig struct {
	// MaxBytes bounds the bytes all predictions of the indexer take
	// ([PredictionStats].Bytes); the least recently predicted blocks are dropped first to
	// stay within it. 0 means the library's default (64 MiB).
	MaxBytes uint64
	// WorkerCapacity bounds the predicted blocks each worker holds; beyond it that worker's
	// least recently predicted blocks are dropped first (the event-free mode's stand-in for
	// the engine's cache). 0 means no per-worker bound.
	WorkerCapacity uint64
	// Clock is the clock predictions expire by; any value other than the Clock constants
	// makes [New] fail with [ErrInvalidArgument].
	Clock Clock
}

// String formats the settings as {MaxBytes:N WorkerCapacity:N Clock:monotonic}.
func (c PredictionConfig) String() string { return fieldsString(c) }

// cPredictionConfig mirrors kvidx_prediction_config.
type cPredictionConfig struct {
	_              structs.HostLayout
	maxBytes       uint64
	workerCapacity uint64
	clock          uint32
}

// PredictedMatch is one worker's answer to a predicted lookup
// ([Indexer.FindMatchesPredicted]). Its layout is that of the C struct
// kvidx_predicted_match (uint64, uint32, uint32, uint32).
type PredictedMatch struct {
	_ structs.HostLayout
	// WorkerID names the worker's engine instance.
	WorkerID uint64
	// DpRank is the worker's data-parallel rank.
	DpRank uint32
	// Depth is the confirmed depth: what [Indexer.FindMatches] reports for the worker (0 when
	// it holds no prefix of the query).
	Depth uint32
	// PredictedDepth is the longest query prefix whose every block the worker holds within
	// its confirmed depth or is predicted (unexpired) to hold: at least Depth, at least 1.
	PredictedDepth uint32
}

// String formats the match as its fields.
func (m PredictedMatch) String() string { return fieldsString(m) }

// PredictionStats are the state and counters of an indexer's predictions. Its layout is
// that of the C struct kvidx_prediction_stats.
type PredictionStats struct {
	_ structs.HostLayout
	// Blocks counts predicted blocks held, one per (worker, block), expired ones not yet
	// dropped included.
	Blocks uint64
	// Workers counts workers with at least one predicted block held.
	Workers uint64
	// Bytes is what the predictions take; at most [PredictionConfig].MaxBytes.
	Bytes uint64
	// DroppedForBytes counts blocks dropped, least recently predicted first, for the bound.
	DroppedForBytes uint64
	// DroppedForCapacity counts blocks dropped, a worker's least recently predicted first,
	// for its capacity.
	DroppedForCapacity uint64
	// Expired counts expired blocks dropped.
	Expired uint64
	// Confirmed counts blocks confirmed by a Stored of the same worker and block (the
	// prediction dropped: the block is held).
	Confirmed uint64
	// DroppedByEvents counts blocks dropped by a Removed, a Cleared or a worker's removal.
	DroppedByEvents uint64
}

// String formats the counters as {Blocks:N ...}.
func (s PredictionStats) String() string { return fieldsString(s) }

// Predict credits (workerID, dpRank) with the chain of localHashes (a request's blocks from
// its first) for ttl from now on the indexer's clock: until then, or until events settle it,
// [Indexer.FindMatchesPredicted] counts these blocks for the worker; [Indexer.FindMatches]
// never sees them. Blocks already predicted for the worker are refreshed. A Stored of the
// worker holding a predicted block confirms it (the prediction is dropped, the block is
// held); a Removed of it, a Cleared of the worker and the worker's removal drop it. It
// applies before returning, even with event threads, within the indexer's
// [PredictionConfig] bounds. An empty chain or a ttl of 0 credits nothing; a negative ttl
// is [ErrInvalidArgument].
func (ix *Indexer) Predict(workerID uint64, dpRank uint32, localHashes []uint64, ttl time.Duration) error {
	const op = "Predict"
	h, err := ix.predictionCall(op)
	defer ix.leave()
	if err != nil {
		return err
	}
	if ttl < 0 {
		return check(op, StatusInvalidArgument)
	}
	var q *uint64
	if len(localHashes) > 0 {
		q = &localHashes[0]
	}
	st := libPredict(h, workerID, dpRank, q, len(localHashes), uint64(ttl))
	runtime.KeepAlive(localHashes)
	return check(op, st)
}

// FindMatchesPredicted returns the workers holding or predicted to hold a prefix of the
// query, with both depths: every worker of [Indexer.FindMatches] with the same (confirmed)
// depth, and every worker predicted to hold the query's first block; ordered by predicted
// depth, deepest first, then confirmed depth, deepest first, then worker id and dp rank.
// With no prediction held it costs what FindMatches costs.
func (ix *Indexer) FindMatchesPredicted(localHashes []uint64) ([]PredictedMatch, error) {
	return ix.FindMatchesPredictedInto(localHashes, nil)
}

// FindMatchesPredictedInto is FindMatchesPredicted appending into dst (like append), as
// [Indexer.FindMatchesInto]. On error dst is returned unchanged.
func (ix *Indexer) FindMatchesPredictedInto(localHashes []uint64, dst []PredictedMatch) ([]PredictedMatch, error) {
	const op = "FindMatchesPredicted"
	h, err := ix.predictionCall(op)
	defer ix.leave()
	if err != nil {
		return dst, err
	}
	return findInto(h, op, localHashes, dst, libFindMatchesPredicted)
}

// Now returns the time on the indexer's clock: since the indexer was built
// ([ClockMonotonic]) or as last set ([ClockManual]).
func (ix *Indexer) Now() (time.Duration, error) {
	const op = "Now"
	h, err := ix.predictionCall(op)
	defer ix.leave()
	if err != nil {
		return 0, err
	}
	now, st := libNow(h)
	return time.Duration(min(now, uint64(1<<63-1))), check(op, st)
}

// SetTime sets a manual clock to now. It is [ErrInvalidArgument] with the monotonic clock,
// or for a time before the clock's current one (a manual clock never goes back).
func (ix *Indexer) SetTime(now time.Duration) error {
	return ix.moveClock("SetTime", now, libSetTime)
}

// AdvanceTime moves a manual clock forward by d. It is [ErrInvalidArgument] with the
// monotonic clock or for a negative d.
func (ix *Indexer) AdvanceTime(d time.Duration) error {
	return ix.moveClock("AdvanceTime", d, libAdvanceTime)
}

// moveClock runs SetTime or AdvanceTime.
func (ix *Indexer) moveClock(op string, d time.Duration, move func(handle, uint64) Status) error {
	h, err := ix.predictionCall(op)
	defer ix.leave()
	if err != nil {
		return err
	}
	if d < 0 {
		return check(op, StatusInvalidArgument)
	}
	return check(op, move(h, uint64(d)))
}

// PredictionStats returns the state and counters of the indexer's predictions.
func (ix *Indexer) PredictionStats() (PredictionStats, error) {
	const op = "PredictionStats"
	h, err := ix.predictionCall(op)
	defer ix.leave()
	var s PredictionStats
	if err != nil {
		return s, err
	}
	return s, check(op, libPredictionStats(h, &s))
}

// predictionCall begins a call of a predictions method (the caller defers ix.leave): the
// handle, or an error when the indexer is closed or the library has no predictions.
func (ix *Indexer) predictionCall(op string) (handle, error) {
	h := ix.enter()
	if h == nilHandle {
		return h, closedError(op)
	}
	if !libHasPredictions() {
		return h, noPredictionsError(op)
	}
	return h, nil
}

// noPredictionsError reports a predictions method (or a Config with predictions) used with a
// library older than predictions (purego back end only: the cgo back end does not build
// against such a library).
func noPredictionsError(op string) error {
	return &opError{op: op, err: fmt.Errorf("%w: the library has no predictions (KVIDX_HAS_PREDICTIONS)",
		ErrLibraryUnavailable)}
}
