//go:build !cgo

package kvidx

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// backendName names the back end compiled in: "purego" here, "cgo" with cgo.
const backendName = "purego"

// hotPathAllocs is the number of heap allocations of one FindMatchesInto call with room in
// dst, and of one ApplyEngineBatch or EngineFeed.Apply call: purego.SyscallN's variadic
// argument slice escapes to the heap (8 bytes per argument: 48 bytes for FindMatchesInto).
const hotPathAllocs = 1

// LibraryPathEnv names the environment variable holding the path of the shared library the
// purego back end loads; when it is empty the loader's search is used (see the package doc).
const LibraryPathEnv = "KVIDX_LIBRARY_PATH"

// handle is the library's opaque indexer pointer, held as an integer (C memory).
type handle = uintptr

var nilHandle handle

// feedHandle is the library's opaque engine feed pointer, held as an integer (C memory).
type feedHandle = uintptr

var nilFeed feedHandle

// lib holds the addresses of the C functions, resolved once by load.
var lib struct {
	new, free, applyEvent, applyEvents, removeWorker, removeWorkerDpRank, flush uintptr
	findMatches, getStats, hashTokens, seqHashes, debugPanic                    uintptr
	applyEngineBatch, feedNew, feedFree, feedApply, feedStats                   uintptr
	newWithLimits, feedForget, feedRemoveWorker, feedRemoveWorkerDpRank         uintptr
	feedPublishers                                                              uintptr
	applyEventOnTier, applyEventsOnTiers, findMatchesTiered, tieredScore        uintptr
	applyEventsAt, applyEngineBatchAt, feedApplyAt, watermark, getReplicaStats  uintptr
	snapshotWrite, snapshotRestore                                              uintptr
	feedApplyEpochAt, feedSaveState, feedRestoreState                           uintptr
	feedNextSeq, feedStartStats                                                 uintptr
	feedSetHashCheck, feedClearHashCheck, feedHashCheckStats                    uintptr
	feedHashCheckTotals, llmdRequestKeys, feedSetLlmdKeys                       uintptr
	newWithPredictions, predict, findMatchesPredicted, now, setTime             uintptr
	advanceTime, getPredictionStats                                             uintptr
	hashRequest                                                                 uintptr
	configDefault                                                               func() cConfig
	statusStr                                                                   func(uint32) string
	version                                                                     func() string
	abiVersion                                                                  func() uint32
}

// lenCell is a heap cell for a size_t out-parameter; pooled so hot calls allocate nothing.
type lenCell struct{ n uintptr }

var lenPool = sync.Pool{New: func() any { return new(lenCell) }}

// resultPool holds heap cells for the engine batch result out-parameter.
var resultPool = sync.Pool{New: func() any { return new(cBatchResult) }}

var loadOnce = sync.OnceValue(func() error {
	if err := openLibrary(libraryCandidates()); err != nil {
		return fmt.Errorf("%w: %v", ErrLibraryUnavailable, err)
	}
	return nil
})

// load opens the shared library and resolves its symbols, once.
func load() error { return loadOnce() }

// libraryCandidates lists the paths tried, in order.
func libraryCandidates() []string {
	if p := os.Getenv(LibraryPathEnv); p != "" {
		return []string{p}
	}
	if runtime.GOOS == "darwin" {
		return []string{"libkvidx.0.dylib", "libkvidx.dylib"}
	}
	return []string{"libkvidx.so.0", "libkvidx.so"}
}

// openLibrary loads the first candidate that opens and resolves every symbol into lib.
func openLibrary(candidates []string) (err error) {
	var h uintptr
	var errs []error
	for _, p := range candidates {
		if h, err = purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL); err == nil {
			break
		}
		errs = append(errs, err)
	}
	if h == 0 {
		return fmt.Errorf("cannot load libkvidx (set %s): %w", LibraryPathEnv, errors.Join(errs...))
	}
	for _, s := range []struct {
		name string
		dst  *uintptr
	}{
		{"kvidx_new", &lib.new}, {"kvidx_free", &lib.free},
		{"kvidx_apply_event", &lib.applyEvent}, {"kvidx_apply_events", &lib.applyEvents},
		{"kvidx_remove_worker", &lib.removeWorker},
		{"kvidx_remove_worker_dp_rank", &lib.removeWorkerDpRank},
		{"kvidx_flush", &lib.flush}, {"kvidx_find_matches", &lib.findMatches},
		{"kvidx_get_stats", &lib.getStats}, {"kvidx_hash_tokens", &lib.hashTokens},
		{"kvidx_seq_hashes", &lib.seqHashes}, {"kvidx_debug_panic", &lib.debugPanic},
		{"kvidx_apply_engine_batch", &lib.applyEngineBatch},
		{"kvidx_engine_feed_new", &lib.feedNew}, {"kvidx_engine_feed_free", &lib.feedFree},
		{"kvidx_engine_feed_apply", &lib.feedApply}, {"kvidx_engine_feed_stats", &lib.feedStats},
		{"kvidx_new_with_limits", &lib.newWithLimits},
		{"kvidx_engine_feed_forget", &lib.feedForget},
		{"kvidx_engine_feed_remove_worker", &lib.feedRemoveWorker},
		{"kvidx_engine_feed_remove_worker_dp_rank", &lib.feedRemoveWorkerDpRank},
		{"kvidx_engine_feed_publishers", &lib.feedPublishers},
	} {
		if *s.dst, err = purego.Dlsym(h, s.name); err != nil {
			return err
		}
	}
	// Additions to ABI v1 (KVIDX_HAS_TIERS): a library without them still loads, and the
	// tier methods fail with ErrLibraryUnavailable (see libHasTiers).
	for _, s := range []struct {
		name string
		dst  *uintptr
	}{
		{"kvidx_apply_event_on_tier", &lib.applyEventOnTier},
		{"kvidx_apply_events_on_tiers", &lib.applyEventsOnTiers},
		{"kvidx_find_matches_tiered", &lib.findMatchesTiered},
		{"kvidx_tiered_score", &lib.tieredScore},
		// KVIDX_HAS_SNAPSHOTS: without them the methods fail with ErrLibraryUnavailable (see
		// libHasSnapshots).
		{"kvidx_apply_events_at", &lib.applyEventsAt},
		{"kvidx_apply_engine_batch_at", &lib.applyEngineBatchAt},
		{"kvidx_engine_feed_apply_at", &lib.feedApplyAt},
		{"kvidx_watermark", &lib.watermark},
		{"kvidx_get_replica_stats", &lib.getReplicaStats},
		{"kvidx_snapshot_write", &lib.snapshotWrite},
		{"kvidx_snapshot_restore", &lib.snapshotRestore},
		// KVIDX_HAS_FEED_STATE: without them the methods fail with ErrLibraryUnavailable (see
		// libHasFeedState).
		{"kvidx_engine_feed_apply_epoch_at", &lib.feedApplyEpochAt},
		{"kvidx_engine_feed_save_state", &lib.feedSaveState},
		{"kvidx_engine_feed_restore_state", &lib.feedRestoreState},
		// KVIDX_HAS_FEED_START: without them the methods fail with ErrLibraryUnavailable (see
		// libHasFeedStart).
		{"kvidx_engine_feed_next_seq", &lib.feedNextSeq},
		{"kvidx_engine_feed_start_stats", &lib.feedStartStats},
		// KVIDX_HAS_HASH_CHECK and KVIDX_HAS_LLMD_KEYS: without them the methods fail with
		// ErrLibraryUnavailable (see libHasHashCheck, libHasLlmdKeys).
		{"kvidx_engine_feed_set_hash_check", &lib.feedSetHashCheck},
		{"kvidx_engine_feed_clear_hash_check", &lib.feedClearHashCheck},
		{"kvidx_engine_feed_hash_check_stats", &lib.feedHashCheckStats},
		{"kvidx_engine_feed_hash_check_totals", &lib.feedHashCheckTotals},
		{"kvidx_llmd_request_keys", &lib.llmdRequestKeys},
		{"kvidx_engine_feed_set_llmd_keys", &lib.feedSetLlmdKeys},
		// KVIDX_HAS_PREDICTIONS: without them the methods fail with ErrLibraryUnavailable
		// (see libHasPredictions).
		{"kvidx_new_with_predictions", &lib.newWithPredictions},
		{"kvidx_predict", &lib.predict},
		{"kvidx_find_matches_predicted", &lib.findMatchesPredicted},
		{"kvidx_now", &lib.now},
		{"kvidx_set_time", &lib.setTime},
		{"kvidx_advance_time", &lib.advanceTime},
		{"kvidx_get_prediction_stats", &lib.getPredictionStats},
		// KVIDX_HAS_NAMESPACES: without it HashRequest fails with ErrLibraryUnavailable.
		{"kvidx_hash_request", &lib.hashRequest},
	} {
		if *s.dst, err = purego.Dlsym(h, s.name); err != nil {
			*s.dst = 0
		}
	}
	for _, s := range []struct {
		name string
		fn   any
	}{
		{"kvidx_config_default", &lib.configDefault}, {"kvidx_status_str", &lib.statusStr},
		{"kvidx_version", &lib.version}, {"kvidx_abi_version", &lib.abiVersion},
	} {
		sym, err := purego.Dlsym(h, s.name)
		if err != nil {
			return err
		}
		purego.RegisterFunc(s.fn, sym)
	}
	if v := lib.abiVersion(); v != ABIVersion {
		return fmt.Errorf("library ABI version %d, binding needs %d", v, ABIVersion)
	}
	return nil
}

// status converts the result of a C function returning kvidx_status. Pointer arguments must be
// converted to uintptr in the SyscallN call expression itself, so SyscallN keeps them alive.
func status(r1, _, _ uintptr) Status { return Status(uint32(r1)) }

func libConfigDefault() Config {
	c := lib.configDefault()
	return Config{Backend: Backend(c.backend), EventThreads: c.eventThreads, JumpSize: c.jumpSize}
}

func libNew(c *cConfig, l *cQueueLimits) (handle, Status) {
	out := new(uintptr)
	st := status(purego.SyscallN(lib.newWithLimits, uintptr(unsafe.Pointer(c)),
		uintptr(unsafe.Pointer(l)), uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libFree(h handle) { purego.SyscallN(lib.free, h) }

func libApplyEvent(h handle, e *cEvent) Status {
	return status(purego.SyscallN(lib.applyEvent, h, uintptr(unsafe.Pointer(e))))
}

func libApplyEvents(h handle, e *cEvent, n int) Status {
	return status(purego.SyscallN(lib.applyEvents, h, uintptr(unsafe.Pointer(e)), uintptr(n)))
}

func libRemoveWorker(h handle, id uint64) Status {
	return status(purego.SyscallN(lib.removeWorker, h, uintptr(id)))
}

func libRemoveWorkerDpRank(h handle, id uint64, rank uint32) Status {
	return status(purego.SyscallN(lib.removeWorkerDpRank, h, uintptr(id), uintptr(rank)))
}

func libFlush(h handle) Status { return status(purego.SyscallN(lib.flush, h)) }

func libFindMatches(h handle, q *uint64, n int, out *Match, outCap int) (Status, int) {
	cell := lenPool.Get().(*lenCell)
	st := status(purego.SyscallN(lib.findMatches, h, uintptr(unsafe.Pointer(q)), uintptr(n),
		uintptr(unsafe.Pointer(out)), uintptr(outCap), uintptr(unsafe.Pointer(&cell.n))))
	got := int(cell.n)
	lenPool.Put(cell)
	return st, got
}

// libHasTiers says whether the loaded library has the storage-tier functions.
func libHasTiers() bool {
	return lib.applyEventOnTier != 0 && lib.applyEventsOnTiers != 0 && lib.findMatchesTiered != 0 &&
		lib.tieredScore != 0
}

func libApplyEventOnTier(h handle, e *cEvent, tier uint32) Status {
	return status(purego.SyscallN(lib.applyEventOnTier, h, uintptr(unsafe.Pointer(e)), uintptr(tier)))
}

func libApplyEventsOnTiers(h handle, e *cEvent, tiers *uint32, n int) Status {
	return status(purego.SyscallN(lib.applyEventsOnTiers, h, uintptr(unsafe.Pointer(e)),
		uintptr(unsafe.Pointer(tiers)), uintptr(n)))
}

func libFindMatchesTiered(h handle, q *uint64, n int, out *TieredMatch, outCap int) (Status, int) {
	cell := lenPool.Get().(*lenCell)
	st := status(purego.SyscallN(lib.findMatchesTiered, h, uintptr(unsafe.Pointer(q)), uintptr(n),
		uintptr(unsafe.Pointer(out)), uintptr(outCap), uintptr(unsafe.Pointer(&cell.n))))
	got := int(cell.n)
	lenPool.Put(cell)
	return st, got
}

// libTieredScore is the library's kvidx_tiered_score (tests compare TieredMatch.Score with it).
func libTieredScore(m *TieredMatch, w *[NumTiers]float64) (float64, Status) {
	out := new(float64)
	st := status(purego.SyscallN(lib.tieredScore, uintptr(unsafe.Pointer(m)),
		uintptr(unsafe.Pointer(&w[0])), uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libStats(h handle, out *Stats) Status {
	return status(purego.SyscallN(lib.getStats, h, uintptr(unsafe.Pointer(out))))
}

func libHashTokens(t *uint32, n int, bs uint32, out *uint64, outCap int) (Status, int) {
	cell := new(lenCell)
	st := status(purego.SyscallN(lib.hashTokens, uintptr(unsafe.Pointer(t)), uintptr(n), uintptr(bs),
		uintptr(unsafe.Pointer(out)), uintptr(outCap), uintptr(unsafe.Pointer(&cell.n))))
	return st, int(cell.n)
}

func libSeqHashes(l *uint64, n int, out *uint64) Status {
	return status(purego.SyscallN(lib.seqHashes, uintptr(unsafe.Pointer(l)), uintptr(n),
		uintptr(unsafe.Pointer(out))))
}

func libStatusStr(s uint32) string { return lib.statusStr(s) }

func libVersion() string { return lib.version() }

func libABIVersion() uint32 { return lib.abiVersion() }

func libDebugPanic(h handle) Status { return status(purego.SyscallN(lib.debugPanic, h)) }

func libApplyEngineBatch(h handle, format uint32, worker uint64, rank uint32, p *byte, n int) (Status, cBatchResult) {
	cell := resultPool.Get().(*cBatchResult)
	*cell = cBatchResult{}
	st := status(purego.SyscallN(lib.applyEngineBatch, h, uintptr(format), uintptr(worker),
		uintptr(rank), uintptr(unsafe.Pointer(p)), uintptr(n), uintptr(unsafe.Pointer(cell))))
	r := *cell
	resultPool.Put(cell)
	return st, r
}

func libFeedNew(format, flags uint32) (feedHandle, Status) {
	out := new(uintptr)
	st := status(purego.SyscallN(lib.feedNew, uintptr(format), uintptr(flags), uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libFeedFree(f feedHandle) { purego.SyscallN(lib.feedFree, f) }

func libFeedApply(f feedHandle, h handle, worker uint64, rank uint32, seq *byte, seqLen int, p *byte, n int) (Status, cBatchResult) {
	cell := resultPool.Get().(*cBatchResult)
	*cell = cBatchResult{}
	st := status(purego.SyscallN(lib.feedApply, f, h, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(seq)), uintptr(seqLen), uintptr(unsafe.Pointer(p)), uintptr(n),
		uintptr(unsafe.Pointer(cell))))
	r := *cell
	resultPool.Put(cell)
	return st, r
}

func libFeedStats(f feedHandle, out *EngineStats) Status {
	return status(purego.SyscallN(lib.feedStats, f, uintptr(unsafe.Pointer(out))))
}

func libFeedForget(f feedHandle, worker uint64, rank uint32) (bool, Status) {
	known := new(uint8)
	st := status(purego.SyscallN(lib.feedForget, f, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(known))))
	return *known != 0, st
}

func libFeedRemoveWorker(f feedHandle, h handle, worker uint64) Status {
	return status(purego.SyscallN(lib.feedRemoveWorker, f, h, uintptr(worker)))
}

func libFeedRemoveWorkerDpRank(f feedHandle, h handle, worker uint64, rank uint32) Status {
	return status(purego.SyscallN(lib.feedRemoveWorkerDpRank, f, h, uintptr(worker), uintptr(rank)))
}

func libFeedPublishers(f feedHandle) (uint64, Status) {
	out := new(uint64)
	st := status(purego.SyscallN(lib.feedPublishers, f, uintptr(unsafe.Pointer(out))))
	return *out, st
}

// libHasSnapshots says whether the loaded library has the offset-batch and snapshot
// functions (KVIDX_HAS_SNAPSHOTS).
func libHasSnapshots() bool {
	return lib.applyEventsAt != 0 && lib.applyEngineBatchAt != 0 && lib.feedApplyAt != 0 &&
		lib.watermark != 0 && lib.getReplicaStats != 0 && lib.snapshotWrite != 0 && lib.snapshotRestore != 0
}

func libApplyEventsAt(h handle, e *cEvent, n int, offset uint64) Status {
	return status(purego.SyscallN(lib.applyEventsAt, h, uintptr(unsafe.Pointer(e)), uintptr(n), uintptr(offset)))
}

func libApplyEngineBatchAt(h handle, format uint32, worker uint64, rank uint32, p *byte, n int, offset uint64) (Status, cBatchResult) {
	cell := resultPool.Get().(*cBatchResult)
	*cell = cBatchResult{}
	st := status(purego.SyscallN(lib.applyEngineBatchAt, h, uintptr(format), uintptr(worker),
		uintptr(rank), uintptr(unsafe.Pointer(p)), uintptr(n), uintptr(offset), uintptr(unsafe.Pointer(cell))))
	r := *cell
	resultPool.Put(cell)
	return st, r
}

func libFeedApplyAt(f feedHandle, h handle, worker uint64, rank uint32, seq *byte, seqLen int, p *byte, n int, offset uint64) (Status, cBatchResult) {
	cell := resultPool.Get().(*cBatchResult)
	*cell = cBatchResult{}
	st := status(purego.SyscallN(lib.feedApplyAt, f, h, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(seq)), uintptr(seqLen), uintptr(unsafe.Pointer(p)), uintptr(n),
		uintptr(offset), uintptr(unsafe.Pointer(cell))))
	r := *cell
	resultPool.Put(cell)
	return st, r
}

// libHasFeedState says whether the loaded library has engine epochs and feed state
// (KVIDX_HAS_FEED_STATE).
func libHasFeedState() bool {
	return lib.feedApplyEpochAt != 0 && lib.feedSaveState != 0 && lib.feedRestoreState != 0
}

func libFeedApplyEpochAt(f feedHandle, h handle, worker uint64, rank uint32, epoch uint64, seq *byte, seqLen int, p *byte, n int, offset uint64) (Status, cBatchResult) {
	cell := resultPool.Get().(*cBatchResult)
	*cell = cBatchResult{}
	ep := new(uint64)
	*ep = epoch
	st := status(purego.SyscallN(lib.feedApplyEpochAt, f, h, uintptr(worker), uintptr(rank),
		uintptr(unsafe.Pointer(ep)), uintptr(unsafe.Pointer(seq)), uintptr(seqLen),
		uintptr(unsafe.Pointer(p)), uintptr(n), uintptr(offset), uintptr(unsafe.Pointer(cell))))
	r := *cell
	resultPool.Put(cell)
	return st, r
}

func libFeedSaveState(f feedHandle, out *byte, n int) (int, Status) {
	cell := lenPool.Get().(*lenCell)
	cell.n = 0
	st := status(purego.SyscallN(lib.feedSaveState, f, uintptr(unsafe.Pointer(out)), uintptr(n),
		uintptr(unsafe.Pointer(&cell.n))))
	got := int(cell.n)
	lenPool.Put(cell)
	return got, st
}

func libFeedRestoreState(f feedHandle, p *byte, n int) Status {
	return status(purego.SyscallN(lib.feedRestoreState, f, uintptr(unsafe.Pointer(p)), uintptr(n)))
}

func libWatermark(h handle, worker uint64, rank uint32) (uint64, Status) {
	out := new(uint64)
	st := status(purego.SyscallN(lib.watermark, h, uintptr(worker), uintptr(rank), uintptr(unsafe.Pointer(out))))
	return *out, st
}

func libReplicaStats(h handle, out *ReplicaStats) Status {
	return status(purego.SyscallN(lib.getReplicaStats, h, uintptr(unsafe.Pointer(out))))
}

// The snapshot callbacks: two C function pointers made once by purego.NewCallback (which
// never frees them, so they are made once for the process), dispatching on the stream id
// passed as the user pointer.
var snapshotCallbacks = sync.OnceValues(func() (sink, source uintptr) {
	sink = purego.NewCallback(func(id uintptr, data *byte, n uintptr) int32 {
		var b []byte
		if n > 0 {
			b = unsafe.Slice(data, int(n))
		}
		return snapshotSink(id, b)
	})
	source = purego.NewCallback(func(id uintptr, buf *byte, capacity uintptr, got *uintptr) int32 {
		var b []byte
		if capacity > 0 {
			b = unsafe.Slice(buf, int(capacity))
		}
		n, st := snapshotSource(id, b)
		*got = uintptr(n)
		return st
	})
	return sink, source
})

func libSnapshotWrite(h handle, id uintptr, out *SnapshotInfo) Status {
	sink, _ := snapshotCallbacks()
	return status(purego.SyscallN(lib.snapshotWrite, h, sink, id, uintptr(unsafe.Pointer(out))))
}

func libSnapshotRestore(h handle, id uintptr, out *SnapshotInfo) Status {
	_, source := snapshotCallbacks()
	return status(purego.SyscallN(lib.snapshotRestore, h, source, id, uintptr(unsafe.Pointer(out))))
}
