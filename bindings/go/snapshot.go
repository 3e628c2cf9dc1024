package kvidx

import (
	"fmt"
	"io"
	"runtime"
	"structs"
	"sync"
	"sync/atomic"
)

// SnapshotInfo describes a snapshot written or restored. Its layout is that of the C struct
// kvidx_snapshot_info.
type SnapshotInfo struct {
	_ structs.HostLayout
	// Workers counts the (worker id, dp rank) sections.
	Workers uint64
	// Blocks counts the held (worker, block name) pairs.
	Blocks uint64
	// Bytes is the snapshot's size.
	Bytes uint64
	// MinWatermark and MaxWatermark are the lowest and highest worker watermarks (0 without
	// workers).
	MinWatermark uint64
	// MaxWatermark is the highest worker watermark.
	MaxWatermark uint64
}

// String formats the info as {Workers:N Blocks:N ...}.
func (s SnapshotInfo) String() string { return fieldsString(s) }

// ReplicaStats count the offset batches an indexer was given ([Indexer.ApplyEventsAt],
// [Indexer.ApplyEngineBatchAt], [EngineFeed.ApplyAt]). Its layout is that of the C struct
// kvidx_replica_stats.
type ReplicaStats struct {
	_ structs.HostLayout
	// BatchesApplied counts the batches above their worker's watermark, applied.
	BatchesApplied uint64
	// BatchesSkipped counts the batches at or below their worker's watermark, skipped whole.
	BatchesSkipped uint64
	// EventsSkipped counts the events of the skipped batches.
	EventsSkipped uint64
}

// String formats the counters as {BatchesApplied:N ...}.
func (s ReplicaStats) String() string { return fieldsString(s) }

// ApplyEventsAt applies events as offset batches: every worker named in events gets its
// events, in order, as one batch at offset (>= 1; 0 fails with [ErrInvalidArgument]). A
// worker's batch is skipped whole, and counted in [ReplicaStats], when offset is at or
// below the worker's watermark; otherwise its events are applied under the worker's
// exclusion (a concurrent snapshot sees all of them or none) and the watermark becomes
// offset. Offsets are typically a log's positions (a JetStream stream sequence), so that
// replaying an overlapping range of the log is idempotent.
func (ix *Indexer) ApplyEventsAt(events []Event, offset uint64) error {
	const op = "ApplyEventsAt"
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError(op)
	}
	if !libHasSnapshots() {
		return noSnapshotsError(op)
	}
	if len(events) == 0 {
		if offset == 0 {
			return check(op, StatusInvalidArgument)
		}
		return nil
	}
	b := newBatch(events)
	st := libApplyEventsAt(h, b.first(), len(b.events), offset)
	b.release()
	return check(op, st)
}

// Watermark returns the offset of the last batch applied to (workerID, dpRank) — 0 when the
// worker is unknown or never got an offset batch. With event threads, call [Indexer.Flush]
// first to see every batch accepted so far. A closed indexer gives 0.
func (ix *Indexer) Watermark(workerID uint64, dpRank uint32) uint64 {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return 0
	}
	if !libHasSnapshots() {
		return 0
	}
	w, st := libWatermark(h, workerID, dpRank)
	if st != StatusOK {
		return 0
	}
	return w
}

// ReplicaStats returns the offset-batch counters. With event threads, call [Indexer.Flush]
// first.
func (ix *Indexer) ReplicaStats() (ReplicaStats, error) {
	h := ix.enter()
	defer ix.leave()
	var s ReplicaStats
	if h == nilHandle {
		return s, closedError("ReplicaStats")
	}
	if !libHasSnapshots() {
		return s, noSnapshotsError("ReplicaStats")
	}
	st := libReplicaStats(h, &s)
	return s, check("ReplicaStats", st)
}

// ApplyEngineBatchAt is [Indexer.ApplyEngineBatch] as one offset batch at offset (see
// [Indexer.ApplyEventsAt]): skipped whole when offset is at or below the worker's watermark.
func (ix *Indexer) ApplyEngineBatchAt(format EngineFormat, workerID uint64, dpRank uint32, payload []byte, offset uint64) (EngineBatchResult, error) {
	const op = "ApplyEngineBatchAt"
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return EngineBatchResult{}, closedError(op)
	}
	if !libHasSnapshots() {
		return EngineBatchResult{}, noSnapshotsError(op)
	}
	st, r := libApplyEngineBatchAt(h, uint32(format), workerID, dpRank, bytesPtr(payload), len(payload), offset)
	runtime.KeepAlive(payload)
	if err := check(op, st); err != nil {
		return EngineBatchResult{}, err
	}
	return r.result(), nil
}

// ApplyAt is [EngineFeed.Apply] as one offset batch at offset (see [Indexer.ApplyEventsAt]):
// the decoded batch, including the Cleared event of a gap or restart reaction, is skipped
// whole when offset is at or below the worker's watermark. Sequence tracking is that of
// Apply.
func (f *EngineFeed) ApplyAt(ix *Indexer, workerID uint64, dpRank uint32, seqFrame, payload []byte, offset uint64) (EngineBatchResult, error) {
	return f.apply("EngineFeed.ApplyAt", ix, workerID, dpRank, seqFrame, payload, true, offset, nil)
}

// WriteSnapshot streams the index's state to w while events keep being applied: each
// worker's section is taken under that worker's exclusion and carries its watermark, and
// the library holds about one worker's state at a time. The format is versioned and
// checksummed (docs/snapshots.md). A failing w stops the write: the error matches [ErrIO]
// and wraps w's error. A panic in w is re-raised once the library call has returned.
func (ix *Indexer) WriteSnapshot(w io.Writer) (SnapshotInfo, error) {
	return ix.snapshotCall("WriteSnapshot", &snapshotStream{w: w}, w == nil, libSnapshotWrite)
}

// RestoreSnapshot reads a snapshot written by [Indexer.WriteSnapshot] into this indexer,
// which must be empty (it never applied anything, or every worker was removed), else
// [ErrInvalidArgument]. Truncated, corrupted, foreign or newer-version input fails with
// [ErrMalformed] and leaves the indexer empty and usable; a failing r gives an error
// matching [ErrIO] that wraps r's error. Afterwards every restored worker has its
// watermark, so offset batches at or below it are skipped.
func (ix *Indexer) RestoreSnapshot(r io.Reader) (SnapshotInfo, error) {
	return ix.snapshotCall("RestoreSnapshot", &snapshotStream{r: r}, r == nil, libSnapshotRestore)
}

// snapshotCall is the body of [Indexer.WriteSnapshot] and [Indexer.RestoreSnapshot]: with
// the indexer held open, it registers s for the library's callbacks and runs call (the
// library's write or restore) on the indexer with the stream's id. A closed indexer gives
// [ErrClosed], a library without snapshots its error, a missing writer or reader (noStream)
// [ErrNullPointer].
func (ix *Indexer) snapshotCall(op string, s *snapshotStream, noStream bool, call func(handle, uintptr, *SnapshotInfo) Status) (SnapshotInfo, error) {
	h := ix.enter()
	defer ix.leave()
	var info SnapshotInfo
	if h == nilHandle {
		return info, closedError(op)
	}
	if !libHasSnapshots() {
		return info, noSnapshotsError(op)
	}
	if noStream {
		return info, check(op, StatusNullPointer)
	}
	s.gate = &ix.calls
	id := streams.add(s)
	st := call(h, id, &info)
	streams.remove(id)
	return info, s.finish(op, st)
}

// snapshotStream is the Go side of one snapshot write or restore: the library calls back
// (sink or source trampoline, by the id it was given) into w or r.
type snapshotStream struct {
	w io.Writer
	r io.Reader
	// gate is the indexer's: a running w or r is reported to it, so Close never waits for a
	// call that w or r (or what they wait for) may be making.
	gate  *callGate
	err   error // the first error of w or r
	panic any   // a panic of w or r, re-raised by finish
	// panicked says that panic holds a recovered value (which may itself be nil).
	panicked bool
}

// sink writes data (C memory, valid during the call) to w; nonzero aborts the write.
func (s *snapshotStream) sink(data []byte) int32 {
	if s.w == nil || s.err != nil || s.panicked {
		return 1
	}
	s.gate.callbackBegin()
	defer s.gate.callbackEnd()
	defer s.recover()
	for len(data) > 0 {
		n, err := s.w.Write(data)
		if err == nil && n < len(data) {
			err = io.ErrShortWrite
		}
		if err != nil {
			s.err = err
			return 1
		}
		data = data[n:]
	}
	return 0
}

// source fills buf (C memory) from r and returns the count; 0 bytes with 0 is the end of
// input, nonzero a failure.
func (s *snapshotStream) source(buf []byte) (int, int32) {
	if s.r == nil || s.err != nil || s.panicked {
		return 0, 1
	}
	s.gate.callbackBegin()
	defer s.gate.callbackEnd()
	defer s.recover()
	for range 100 {
		n, err := s.r.Read(buf)
		if n > 0 {
			if err != nil && err != io.EOF {
				s.err = err // reported at the next call
			}
			return n, 0
		}
		switch {
		case err == io.EOF:
			return 0, 0
		case err != nil:
			s.err = err
			return 0, 1
		}
	}
	s.err = io.ErrNoProgress
	return 0, 1
}

// recover turns a panic of w or r into a failure of the callback (a panic must not unwind
// through the library's frames).
func (s *snapshotStream) recover() {
	if p := recover(); p != nil {
		s.panic, s.panicked = p, true
	}
}

// finish re-raises a callback's panic, then turns the status into the call's error.
func (s *snapshotStream) finish(op string, st Status) error {
	if s.panicked {
		panic(s.panic)
	}
	if st == StatusIO && s.err != nil {
		return &ioError{op: op, err: s.err}
	}
	return check(op, st)
}

// ioError is a snapshot call that failed because its writer or reader did: it matches
// [ErrIO] and wraps the cause.
type ioError struct {
	op  string
	err error
}

func (e *ioError) Error() string {
	return fmt.Sprintf("kvidx: %s: %s (status %d): %v", e.op, StatusIO.String(), uint32(StatusIO), e.err)
}

func (e *ioError) Unwrap() []error { return []error{&StatusError{Op: e.op, Status: StatusIO}, e.err} }

// streamTable maps the ids given to the library as callback user data to the streams in
// flight (Go pointers must not be kept by C).
type streamTable struct {
	mu   sync.Mutex
	next atomic.Uintptr
	m    map[uintptr]*snapshotStream
}

var streams = streamTable{m: map[uintptr]*snapshotStream{}}

func (t *streamTable) add(s *snapshotStream) uintptr {
	id := t.next.Add(1)
	t.mu.Lock()
	t.m[id] = s
	t.mu.Unlock()
	return id
}

func (t *streamTable) get(id uintptr) *snapshotStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

func (t *streamTable) remove(id uintptr) {
	t.mu.Lock()
	delete(t.m, id)
	t.mu.Unlock()
}

// snapshotSink is the body of the sink trampolines of both back ends.
func snapshotSink(id uintptr, data []byte) int32 {
	s := streams.get(id)
	if s == nil {
		return 1
	}
	return s.sink(data)
}

// snapshotSource is the body of the source trampolines of both back ends.
func snapshotSource(id uintptr, buf []byte) (int, int32) {
	s := streams.get(id)
	if s == nil {
		return 0, 1
	}
	return s.source(buf)
}

// noSnapshotsError reports a snapshot or offset-batch method called with a library older
// than snapshots (purego back end only: the cgo back end does not build against such a
// library).
func noSnapshotsError(op string) error {
	return &opError{op: op, err: fmt.Errorf("%w: the library has no offset batches or snapshots (KVIDX_HAS_SNAPSHOTS)",
		ErrLibraryUnavailable)}
}
