package kvidx

import (
	"math"
	"runtime"
	"strconv"
	"structs"
	"sync"
	"sync/atomic"
)

// EngineFormat is the wire format of an engine's KV event payloads (the last frame of the
// engine's ZMQ message: a msgpack KVEventBatch). See docs/engine-events.md.
type EngineFormat uint32

const (
	// EngineVLLM is vLLM, every generation (tagged arrays and tagged maps).
	EngineVLLM EngineFormat = 0
	// EngineSGLang is SGLang (its own field positions; signed hashes).
	EngineSGLang EngineFormat = 1
	// EngineTRTLLM is TensorRT-LLM's vLLM-compatible ZMQ publisher.
	EngineTRTLLM EngineFormat = 2
)

// String returns "vllm", "sglang", "trtllm" or "EngineFormat(N)".
func (f EngineFormat) String() string {
	switch f {
	case EngineVLLM:
		return "vllm"
	case EngineSGLang:
		return "sglang"
	case EngineTRTLLM:
		return "trtllm"
	default:
		return "EngineFormat(" + strconv.FormatUint(uint64(f), 10) + ")"
	}
}

// MaxEnginePayload is the largest engine payload accepted, in bytes (32 MiB); a larger one
// fails with [ErrTooLarge] and nothing of it is read or applied.
const MaxEnginePayload = 32 << 20

// DPRankFromBatch, passed as the dp rank of [Indexer.ApplyEngineBatch] or [EngineFeed.Apply],
// takes the rank from the batch's envelope (0 when the envelope has none).
const DPRankFromBatch uint32 = math.MaxUint32

// SeqStatus says how a batch's sequence number relates to its publisher's previous one.
type SeqStatus uint32

const (
	// SeqUntracked: no sequence frame was given (always so for [Indexer.ApplyEngineBatch]).
	SeqUntracked SeqStatus = 0
	// SeqFirst: the first batch seen from this publisher.
	SeqFirst SeqStatus = 1
	// SeqInOrder: the expected next batch.
	SeqInOrder SeqStatus = 2
	// SeqGap: batches SeqExpected.. were missed (BatchesMissed of them).
	SeqGap SeqStatus = 3
	// SeqRestart: the sequence went backwards, the publisher restarted.
	SeqRestart SeqStatus = 4
)

// String returns "untracked", "first", "in order", "gap", "restart" or "SeqStatus(N)".
func (s SeqStatus) String() string {
	switch s {
	case SeqUntracked:
		return "untracked"
	case SeqFirst:
		return "first"
	case SeqInOrder:
		return "in order"
	case SeqGap:
		return "gap"
	case SeqRestart:
		return "restart"
	default:
		return "SeqStatus(" + strconv.FormatUint(uint64(s), 10) + ")"
	}
}

// FeedFlags are the options of an [EngineFeed]; combine them with |. The zero value is the
// recommended reaction without a replay socket: clear the worker on gaps and on restarts,
// index the GPU medium and KV-cache group 0 only, index stores whose engine hashes mix in
// a cache salt or multimodal items under their namespace (see [HashRequest]).
type FeedFlags uint32

const (
	// FeedNoClearOnGap keeps the worker after a gap (the caller replays the missed batches).
	FeedNoClearOnGap FeedFlags = 1
	// FeedNoClearOnRestart keeps the worker when its publisher restarts.
	FeedNoClearOnRestart FeedFlags = 2
	// FeedAllMedia indexes every medium (CPU, storage tiers...), not only the GPU cache.
	FeedAllMedia FeedFlags = 4
	// FeedAllGroups indexes every KV-cache group, not only group 0.
	FeedAllGroups FeedFlags = 8
	// FeedHashTokensOnly indexes stores whose engine hashes include extra keys by their
	// tokens alone (default: under their namespace, see [HashRequest]).
	FeedHashTokensOnly FeedFlags = 16
	// FeedUnknownMediumDevice, with FeedAllMedia, puts the blocks of a medium the decoder does
	// not know on [TierDevice] (the default is [TierExternal]). At most one FeedUnknownMedium*
	// flag may be set; more fail [NewEngineFeed] with [ErrInvalidArgument].
	FeedUnknownMediumDevice FeedFlags = 32
	// FeedUnknownMediumHost, with FeedAllMedia, puts an unknown medium on [TierHost].
	FeedUnknownMediumHost FeedFlags = 64
	// FeedUnknownMediumDisk, with FeedAllMedia, puts an unknown medium on [TierDisk].
	FeedUnknownMediumDisk FeedFlags = 128
	// FeedSkipExtras skips every store whose engine hashes include extra keys (cache salt,
	// multimodal items, ...) instead of indexing it under its namespace. Not with
	// FeedHashTokensOnly ([ErrInvalidArgument]). Needs KVIDX_HAS_NAMESPACES.
	FeedSkipExtras FeedFlags = 256
)

// EngineBatchResult says what applying one engine batch did.
type EngineBatchResult struct {
	// EventsDecoded counts the engine events in the batch.
	EventsDecoded uint64
	// EventsSubmitted counts the index events applied (synchronous mode) or queued (with
	// event threads; their outcome shows in [Indexer.Stats] after [Indexer.Flush]).
	EventsSubmitted uint64
	// EventsRejected counts, in synchronous mode, submitted stores rejected for a missing
	// parent (the call still succeeds).
	EventsRejected uint64
	// SkippedUnknownTag counts engine events with an unknown tag.
	SkippedUnknownTag uint64
	// SkippedFiltered counts engine events filtered out by medium or KV-cache group.
	SkippedFiltered uint64
	// SkippedUnhashable counts stores whose local hashes cannot be computed (no tokens, a
	// token count that is not block size times blocks, a LoRA id without a name, extra keys
	// no query can name, or any extra keys with [FeedSkipExtras]).
	SkippedUnhashable uint64
	// SeqExpected is, for [SeqGap] and [SeqRestart], the sequence number that was expected.
	SeqExpected uint64
	// BatchesMissed is, for [SeqGap], the number of batches missed.
	BatchesMissed uint64
	// DpRank is the dp rank the events were applied to (the envelope's with
	// [DPRankFromBatch]).
	DpRank uint32
	// Seq classifies the batch's sequence number ([SeqUntracked] without a sequence frame).
	Seq SeqStatus
	// WorkerCleared says that the worker was cleared before the batch was applied (the
	// reaction to a gap or a restart).
	WorkerCleared bool
}

// cBatchResult mirrors the C struct kvidx_engine_batch_result (layout checked in tests and,
// on the cgo back end, at compile time). WorkerCleared is a uint8 here: C writes 0 or 1, and
// the conversion to a Go bool does not rely on that.
type cBatchResult struct {
	_                 structs.HostLayout
	eventsDecoded     uint64
	eventsSubmitted   uint64
	eventsRejected    uint64
	skippedUnknownTag uint64
	skippedFiltered   uint64
	skippedUnhashable uint64
	seqExpected       uint64
	batchesMissed     uint64
	dpRank            uint32
	seqStatus         uint32
	workerCleared     uint8
}

// result converts the C result to the Go one.
func (c *cBatchResult) result() EngineBatchResult {
	return EngineBatchResult{
		EventsDecoded:     c.eventsDecoded,
		EventsSubmitted:   c.eventsSubmitted,
		EventsRejected:    c.eventsRejected,
		SkippedUnknownTag: c.skippedUnknownTag,
		SkippedFiltered:   c.skippedFiltered,
		SkippedUnhashable: c.skippedUnhashable,
		SeqExpected:       c.seqExpected,
		BatchesMissed:     c.batchesMissed,
		DpRank:            c.dpRank,
		Seq:               SeqStatus(c.seqStatus),
		WorkerCleared:     c.workerCleared != 0,
	}
}

// EngineStats are the counters of an [EngineFeed]. Its layout is that of the C struct
// kvidx_engine_stats.
type EngineStats struct {
	_ structs.HostLayout
	// Batches counts the batches decoded and applied.
	Batches uint64
	// BatchesMalformed counts the batches refused as malformed (nothing applied, sequence
	// not recorded).
	BatchesMalformed uint64
	// EventsDecoded counts the engine events decoded.
	EventsDecoded uint64
	// EventsSubmitted counts the index events submitted.
	EventsSubmitted uint64
	// EventsRejected counts, in synchronous mode, submitted stores the index rejected.
	EventsRejected uint64
	// EventsSkipped counts the engine events skipped (unknown tag, filtered, unhashable).
	EventsSkipped uint64
	// Gaps counts the sequence gaps seen.
	Gaps uint64
	// BatchesMissed sums the batches missed over the gaps.
	BatchesMissed uint64
	// Restarts counts the publisher restarts seen.
	Restarts uint64
	// WorkersCleared counts the workers cleared as a reaction to a gap or restart.
	WorkersCleared uint64
}

// bytesPtr returns the address of b's first byte, or nil for an empty slice.
func bytesPtr(b []byte) *byte {
	if len(b) == 0 {
		return nil
	}
	return &b[0]
}

// ApplyEngineBatch decodes one engine payload (the last frame of the engine's ZMQ message)
// completely, then applies its events to (workerID, dpRank); pass [DPRankFromBatch] to take
// the envelope's rank. The GPU medium and KV-cache group 0 are indexed; local hashes come
// from the published tokens. There is no sequence tracking: use an [EngineFeed] for that.
//
// Bytes that are not a batch of format (including an empty payload) fail with
// [ErrMalformed], a payload above [MaxEnginePayload] bytes with [ErrTooLarge]; either way
// nothing changes. An unknown format fails with [ErrInvalidArgument]. In
// synchronous mode a store whose parent is missing is counted in EventsRejected and the call
// still succeeds. The library keeps no reference to payload.
func (ix *Indexer) ApplyEngineBatch(format EngineFormat, workerID uint64, dpRank uint32, payload []byte) (EngineBatchResult, error) {
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return EngineBatchResult{}, closedError("ApplyEngineBatch")
	}
	st, r := libApplyEngineBatch(h, uint32(format), workerID, dpRank, bytesPtr(payload), len(payload))
	runtime.KeepAlive(payload)
	if err := check("ApplyEngineBatch", st); err != nil {
		return EngineBatchResult{}, err
	}
	return r.result(), nil
}

// EngineFeed applies engine payloads while tracking each publisher's (worker id, dp rank)
// 8-byte batch sequence: it detects gaps and restarts, reacts to them as its [FeedFlags] say
// and keeps [EngineStats]. One feed serves any number of indexers and publishers, and its
// methods may be called from any number of goroutines at once (the library serialises the
// calls on one feed). [EngineFeed.Close] waits for calls in flight; a feed that becomes
// unreachable without Close is freed by a cleanup function as a safety net.
type EngineFeed struct {
	mu      sync.RWMutex // read-held by every call, write-held by Close
	h       feedHandle   // nilFeed once closed
	cleanup runtime.Cleanup
}

// NewEngineFeed creates a feed for one wire format. flags is 0 (the recommended reaction
// without a replay socket) or a combination of the FeedFlags constants; an unknown format
// or flag bit fails with [ErrInvalidArgument].
func NewEngineFeed(format EngineFormat, flags FeedFlags) (*EngineFeed, error) {
	if err := load(); err != nil {
		return nil, err
	}
	h, st := libFeedNew(uint32(format), uint32(flags))
	if err := check("NewEngineFeed", st); err != nil {
		return nil, err
	}
	f := &EngineFeed{h: h}
	f.cleanup = runtime.AddCleanup(f, freeFeed, h)
	return f, nil
}

// feedsFreed counts freed feeds (by Close or by the cleanup), for tests.
var feedsFreed atomic.Uint64

// freeFeed frees a library feed.
func freeFeed(h feedHandle) {
	libFeedFree(h)
	feedsFreed.Add(1)
}

// Close frees the feed. It waits for calls in flight; calling it again is a no-op. It always
// returns nil.
func (f *EngineFeed) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.h == nilFeed {
		return nil
	}
	f.cleanup.Stop()
	freeFeed(f.h)
	f.h = nilFeed
	return nil
}

// Apply is [Indexer.ApplyEngineBatch] through the feed, with the publisher's sequence frame:
// the message's second frame, exactly 8 bytes, big-endian (binary.BigEndian.AppendUint64),
// or empty for no tracking. After a gap or a restart the worker is cleared before the batch
// is applied, unless the feed's flags say otherwise; the result's Seq and WorkerCleared tell.
//
// A payload that is not a batch fails with [ErrMalformed] (above [MaxEnginePayload] bytes:
// [ErrTooLarge]): nothing is applied and the sequence is not recorded, so the next batch
// reports a gap. A sequence frame that is not 8
// bytes fails with [ErrInvalidArgument] (checked first, counted nowhere). A closed feed or
// indexer gives [ErrClosed], a nil indexer [ErrNullPointer].
func (f *EngineFeed) Apply(ix *Indexer, workerID uint64, dpRank uint32, seqFrame, payload []byte) (EngineBatchResult, error) {
	return f.apply("EngineFeed.Apply", ix, workerID, dpRank, seqFrame, payload, false, 0, nil)
}

// apply is the body of [EngineFeed.Apply] (at false), [EngineFeed.ApplyAt] (at true, as
// one offset batch at offset) and [EngineFeed.ApplyInEpochAt] (at true with an epoch): it
// holds the feed and the indexer open while the library applies the payload. A closed feed
// or indexer gives [ErrClosed], a nil indexer [ErrNullPointer]; ApplyAt also needs a library
// with snapshots (offset batches), ApplyInEpochAt one with feed state.
func (f *EngineFeed) apply(op string, ix *Indexer, workerID uint64, dpRank uint32, seqFrame, payload []byte, at bool, offset uint64, epoch *uint64) (EngineBatchResult, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return EngineBatchResult{}, closedError(op)
	}
	if ix == nil {
		return EngineBatchResult{}, check(op, StatusNullPointer)
	}
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return EngineBatchResult{}, closedError(op)
	}
	if at && !libHasSnapshots() {
		return EngineBatchResult{}, noSnapshotsError(op)
	}
	if epoch != nil && !libHasFeedState() {
		return EngineBatchResult{}, noFeedStateError(op)
	}
	var st Status
	var r cBatchResult
	if epoch != nil {
		st, r = libFeedApplyEpochAt(f.h, h, workerID, dpRank, *epoch, bytesPtr(seqFrame), len(seqFrame),
			bytesPtr(payload), len(payload), offset)
	} else if at {
		st, r = libFeedApplyAt(f.h, h, workerID, dpRank, bytesPtr(seqFrame), len(seqFrame),
			bytesPtr(payload), len(payload), offset)
	} else {
		st, r = libFeedApply(f.h, h, workerID, dpRank, bytesPtr(seqFrame), len(seqFrame),
			bytesPtr(payload), len(payload))
	}
	runtime.KeepAlive(seqFrame)
	runtime.KeepAlive(payload)
	if err := check(op, st); err != nil {
		return EngineBatchResult{}, err
	}
	return r.result(), nil
}

// Stats returns the feed's counters.
func (f *EngineFeed) Stats() (EngineStats, error) {
	const op = "EngineFeed.Stats"
	f.mu.RLock()
	defer f.mu.RUnlock()
	var s EngineStats
	if f.h == nilFeed {
		return s, closedError(op)
	}
	st := libFeedStats(f.h, &s)
	return s, check(op, st)
}

// Forget drops the feed's state for one publisher (workerID, dpRank): its tracked sequence
// (its next batch reports [SeqFirst]) and its event-id counter, about 100 bytes. The index is
// not touched. It reports whether the feed knew the publisher; forgetting an unknown one is
// a no-op.
func (f *EngineFeed) Forget(workerID uint64, dpRank uint32) (bool, error) {
	const op = "EngineFeed.Forget"
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return false, closedError(op)
	}
	known, st := libFeedForget(f.h, workerID, dpRank)
	return known, check(op, st)
}

// RemoveWorker removes every dp rank of workerID from ix (as [Indexer.RemoveWorker]) and
// forgets its publishers in the feed, so a worker that is gone costs the feed nothing. Use
// it instead of [Indexer.RemoveWorker] for workers fed through this feed.
func (f *EngineFeed) RemoveWorker(ix *Indexer, workerID uint64) error {
	return f.remove("EngineFeed.RemoveWorker", ix, func(fh feedHandle, h handle) Status {
		return libFeedRemoveWorker(fh, h, workerID)
	})
}

// RemoveWorkerDpRank removes one (workerID, dpRank) from ix (as
// [Indexer.RemoveWorkerDpRank]) and forgets that publisher in the feed.
func (f *EngineFeed) RemoveWorkerDpRank(ix *Indexer, workerID uint64, dpRank uint32) error {
	return f.remove("EngineFeed.RemoveWorkerDpRank", ix, func(fh feedHandle, h handle) Status {
		return libFeedRemoveWorkerDpRank(fh, h, workerID, dpRank)
	})
}

// remove runs a feed-and-indexer removal with both handles held open.
func (f *EngineFeed) remove(op string, ix *Indexer, call func(feedHandle, handle) Status) error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return closedError(op)
	}
	if ix == nil {
		return check(op, StatusNullPointer)
	}
	h := ix.enter()
	defer ix.leave()
	if h == nilHandle {
		return closedError(op)
	}
	return check(op, call(f.h, h))
}

// Publishers returns how many publishers (worker id, dp rank) the feed holds state for:
// every one it applied a batch for and has not forgotten.
func (f *EngineFeed) Publishers() (uint64, error) {
	const op = "EngineFeed.Publishers"
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.h == nilFeed {
		return 0, closedError(op)
	}
	n, st := libFeedPublishers(f.h)
	return n, check(op, st)
}
