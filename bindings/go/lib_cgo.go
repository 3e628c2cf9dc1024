//go:build cgo

package kvidx

/*
#cgo !kvidx_static pkg-config: kvidx
#cgo kvidx_static pkg-config: kvidx-static
// The define changes nothing in the code: it makes the static build's flags differ from the
// dynamic one's, because the go build cache hashes cgo flags but not pkg-config's output.
#cgo kvidx_static CFLAGS: -DKVIDX_GO_STATIC=1
#include <string.h>
#include <kvidx.h>

// Small shims that return the out-length or the stats by value, so the Go side needs no
// heap cell for an out-parameter (a Go pointer passed to C escapes to the heap).
typedef struct kvidx_go_len { uint32_t status; size_t len; } kvidx_go_len;

static kvidx_go_len kvidx_go_find_matches(const kvidx_indexer *ix, const uint64_t *q, size_t n,
                                          kvidx_match *out, size_t cap) {
	kvidx_go_len r = {0, 0};
	r.status = (uint32_t)kvidx_find_matches(ix, q, n, out, cap, &r.len);
	return r;
}

static kvidx_go_len kvidx_go_find_matches_tiered(const kvidx_indexer *ix, const uint64_t *q,
                                                 size_t n, kvidx_tiered_match *out, size_t cap) {
	kvidx_go_len r = {0, 0};
	r.status = (uint32_t)kvidx_find_matches_tiered(ix, q, n, out, cap, &r.len);
	return r;
}

typedef struct kvidx_go_score { uint32_t status; double score; } kvidx_go_score;

static kvidx_go_score kvidx_go_tiered_score(kvidx_tiered_match m, const double *w) {
	kvidx_go_score r = {0, 0};
	r.status = (uint32_t)kvidx_tiered_score(&m, w, &r.score);
	return r;
}

static kvidx_go_len kvidx_go_hash_tokens(const uint32_t *t, size_t n, uint32_t bs, uint64_t *out,
                                         size_t cap) {
	kvidx_go_len r = {0, 0};
	r.status = (uint32_t)kvidx_hash_tokens(t, n, bs, out, cap, &r.len);
	return r;
}

typedef struct kvidx_go_stats { uint32_t status; kvidx_stats stats; } kvidx_go_stats;

static kvidx_go_stats kvidx_go_get_stats(const kvidx_indexer *ix) {
	kvidx_go_stats r;
	r.status = (uint32_t)kvidx_get_stats(ix, &r.stats);
	return r;
}

typedef struct kvidx_go_new { uint32_t status; kvidx_indexer *ix; } kvidx_go_new;

static kvidx_go_new kvidx_go_new_indexer(kvidx_config cfg, kvidx_queue_limits limits) {
	kvidx_go_new r = {0, NULL};
	r.status = (uint32_t)kvidx_new_with_limits(&cfg, &limits, &r.ix);
	return r;
}

typedef struct kvidx_go_u64 { uint32_t status; uint64_t value; } kvidx_go_u64;

static kvidx_go_u64 kvidx_go_feed_forget(const kvidx_engine_feed *feed, uint64_t worker,
                                         uint32_t rank) {
	kvidx_go_u64 r = {0, 0};
	uint8_t known = 0;
	r.status = (uint32_t)kvidx_engine_feed_forget(feed, worker, rank, &known);
	r.value = known;
	return r;
}

static kvidx_go_u64 kvidx_go_feed_publishers(const kvidx_engine_feed *feed) {
	kvidx_go_u64 r = {0, 0};
	r.status = (uint32_t)kvidx_engine_feed_publishers(feed, &r.value);
	return r;
}

// Engine ingestion: the batch result comes back by value with the status.
typedef struct kvidx_go_batch { uint32_t status; kvidx_engine_batch_result result; } kvidx_go_batch;

static kvidx_go_batch kvidx_go_apply_engine_batch(kvidx_indexer *ix, uint32_t format,
                                                  uint64_t worker, uint32_t rank,
                                                  const uint8_t *payload, size_t len) {
	kvidx_go_batch r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_apply_engine_batch(ix, format, worker, rank, payload, len,
	                                              &r.result);
	return r;
}

static kvidx_go_batch kvidx_go_feed_apply(kvidx_engine_feed *feed, kvidx_indexer *ix,
                                          uint64_t worker, uint32_t rank, const uint8_t *seq,
                                          size_t seq_len, const uint8_t *payload, size_t len) {
	kvidx_go_batch r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_engine_feed_apply(feed, ix, worker, rank, seq, seq_len, payload,
	                                             len, &r.result);
	return r;
}

static kvidx_go_batch kvidx_go_apply_engine_batch_at(kvidx_indexer *ix, uint32_t format,
                                                     uint64_t worker, uint32_t rank,
                                                     const uint8_t *payload, size_t len,
                                                     uint64_t offset) {
	kvidx_go_batch r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_apply_engine_batch_at(ix, format, worker, rank, payload, len,
	                                                 offset, &r.result);
	return r;
}

static kvidx_go_batch kvidx_go_feed_apply_at(kvidx_engine_feed *feed, kvidx_indexer *ix,
                                             uint64_t worker, uint32_t rank, const uint8_t *seq,
                                             size_t seq_len, const uint8_t *payload, size_t len,
                                             uint64_t offset) {
	kvidx_go_batch r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_engine_feed_apply_at(feed, ix, worker, rank, seq, seq_len,
	                                                payload, len, offset, &r.result);
	return r;
}

static kvidx_go_batch kvidx_go_feed_apply_epoch_at(kvidx_engine_feed *feed, kvidx_indexer *ix,
                                                   uint64_t worker, uint32_t rank,
                                                   uint64_t epoch, const uint8_t *seq,
                                                   size_t seq_len, const uint8_t *payload,
                                                   size_t len, uint64_t offset) {
	kvidx_go_batch r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_engine_feed_apply_epoch_at(feed, ix, worker, rank, &epoch, seq,
	                                                      seq_len, payload, len, offset,
	                                                      &r.result);
	return r;
}

static kvidx_go_len kvidx_go_feed_save_state(const kvidx_engine_feed *feed, uint8_t *out,
                                             size_t cap) {
	kvidx_go_len r = {0, 0};
	r.status = (uint32_t)kvidx_engine_feed_save_state(feed, out, cap, &r.len);
	return r;
}

static kvidx_go_u64 kvidx_go_watermark(const kvidx_indexer *ix, uint64_t worker, uint32_t rank) {
	kvidx_go_u64 r = {0, 0};
	r.status = (uint32_t)kvidx_watermark(ix, worker, rank, &r.value);
	return r;
}

typedef struct kvidx_go_replica_stats { uint32_t status; kvidx_replica_stats stats; } kvidx_go_replica_stats;

static kvidx_go_replica_stats kvidx_go_get_replica_stats(const kvidx_indexer *ix) {
	kvidx_go_replica_stats r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_get_replica_stats(ix, &r.stats);
	return r;
}

// Snapshots: the callbacks are the //export trampolines of snapshot_cgo.go; the user pointer
// is the id of the Go stream (an integer, never a Go pointer).
extern int32_t kvidxGoSnapshotSink(uintptr_t id, uint8_t *data, size_t len);
extern int32_t kvidxGoSnapshotSource(uintptr_t id, uint8_t *buf, size_t cap, size_t *got);

static int32_t kvidx_go_sink(void *user, const uint8_t *data, size_t len) {
	return kvidxGoSnapshotSink((uintptr_t)user, (uint8_t *)data, len);
}

static int32_t kvidx_go_source(void *user, uint8_t *buf, size_t cap, size_t *got) {
	return kvidxGoSnapshotSource((uintptr_t)user, buf, cap, got);
}

typedef struct kvidx_go_snapshot { uint32_t status; kvidx_snapshot_info info; } kvidx_go_snapshot;

static kvidx_go_snapshot kvidx_go_snapshot_write(const kvidx_indexer *ix, uintptr_t id) {
	kvidx_go_snapshot r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_snapshot_write(ix, kvidx_go_sink, (void *)id, &r.info);
	return r;
}

static kvidx_go_snapshot kvidx_go_snapshot_restore(const kvidx_indexer *ix, uintptr_t id) {
	kvidx_go_snapshot r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_snapshot_restore(ix, kvidx_go_source, (void *)id, &r.info);
	return r;
}

typedef struct kvidx_go_feed { uint32_t status; kvidx_engine_feed *feed; } kvidx_go_feed;

static kvidx_go_feed kvidx_go_feed_new(uint32_t format, uint32_t flags) {
	kvidx_go_feed r = {0, NULL};
	r.status = (uint32_t)kvidx_engine_feed_new(format, flags, &r.feed);
	return r;
}

typedef struct kvidx_go_feed_stats { uint32_t status; kvidx_engine_stats stats; } kvidx_go_feed_stats;

static kvidx_go_feed_stats kvidx_go_feed_get_stats(const kvidx_engine_feed *feed) {
	kvidx_go_feed_stats r;
	memset(&r, 0, sizeof r);
	r.status = (uint32_t)kvidx_engine_feed_stats(feed, &r.stats);
	return r;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// backendName names the back end compiled in: "cgo" here, "purego" without cgo.
const backendName = "cgo"

// hotPathAllocs is the number of heap allocations of one FindMatchesInto call with room in
// dst, and of one ApplyEngineBatch or EngineFeed.Apply call: none on the cgo back end.
const hotPathAllocs = 0

// handle is the library's opaque indexer pointer (C memory).
type handle = *C.kvidx_indexer

var nilHandle handle

// feedHandle is the library's opaque engine feed pointer (C memory).
type feedHandle = *C.kvidx_engine_feed

var nilFeed feedHandle

// Compile-time layout checks: each expression is a negative constant (a compile error) unless
// the Go mirror and the C struct have the same size.
const (
	_ = uint(unsafe.Sizeof(cEvent{}) - C.sizeof_kvidx_event)
	_ = uint(C.sizeof_kvidx_event - unsafe.Sizeof(cEvent{}))
	_ = uint(unsafe.Sizeof(Match{}) - C.sizeof_kvidx_match)
	_ = uint(C.sizeof_kvidx_match - unsafe.Sizeof(Match{}))
	_ = uint(unsafe.Sizeof(Block{}) - C.sizeof_kvidx_block)
	_ = uint(C.sizeof_kvidx_block - unsafe.Sizeof(Block{}))
	_ = uint(unsafe.Sizeof(Stats{}) - C.sizeof_kvidx_stats)
	_ = uint(C.sizeof_kvidx_stats - unsafe.Sizeof(Stats{}))
	_ = uint(unsafe.Sizeof(cConfig{}) - C.sizeof_kvidx_config)
	_ = uint(C.sizeof_kvidx_config - unsafe.Sizeof(cConfig{}))
	_ = uint(ABIVersion - C.KVIDX_ABI_VERSION)
	_ = uint(C.KVIDX_ABI_VERSION - ABIVersion)
	_ = uint(unsafe.Sizeof(cBatchResult{}) - C.sizeof_kvidx_engine_batch_result)
	_ = uint(C.sizeof_kvidx_engine_batch_result - unsafe.Sizeof(cBatchResult{}))
	_ = uint(unsafe.Sizeof(EngineStats{}) - C.sizeof_kvidx_engine_stats)
	_ = uint(C.sizeof_kvidx_engine_stats - unsafe.Sizeof(EngineStats{}))
	_ = uint(StatusMalformed - C.KVIDX_ERR_MALFORMED)
	_ = uint(C.KVIDX_ERR_MALFORMED - StatusMalformed)
	_ = uint(StatusTooLarge - C.KVIDX_ERR_TOO_LARGE)
	_ = uint(C.KVIDX_ERR_TOO_LARGE - StatusTooLarge)
	_ = uint(MaxEnginePayload - C.KVIDX_ENGINE_MAX_PAYLOAD)
	_ = uint(C.KVIDX_ENGINE_MAX_PAYLOAD - MaxEnginePayload)
	_ = uint(unsafe.Sizeof(cQueueLimits{}) - C.sizeof_kvidx_queue_limits)
	_ = uint(C.sizeof_kvidx_queue_limits - unsafe.Sizeof(cQueueLimits{}))
	_ = uint(EngineVLLM - C.KVIDX_ENGINE_VLLM)
	_ = uint(C.KVIDX_ENGINE_VLLM - EngineVLLM)
	_ = uint(EngineSGLang - C.KVIDX_ENGINE_SGLANG)
	_ = uint(C.KVIDX_ENGINE_SGLANG - EngineSGLang)
	_ = uint(EngineTRTLLM - C.KVIDX_ENGINE_TRTLLM)
	_ = uint(C.KVIDX_ENGINE_TRTLLM - EngineTRTLLM)
	_ = uint(DPRankFromBatch - C.KVIDX_DP_RANK_FROM_BATCH)
	_ = uint(C.KVIDX_DP_RANK_FROM_BATCH - DPRankFromBatch)
	_ = uint(SeqRestart - C.KVIDX_SEQ_RESTART)
	_ = uint(C.KVIDX_SEQ_RESTART - SeqRestart)
	_ = uint(FeedHashTokensOnly - C.KVIDX_FEED_HASH_TOKENS_ONLY)
	_ = uint(C.KVIDX_FEED_HASH_TOKENS_ONLY - FeedHashTokensOnly)
	_ = uint(unsafe.Sizeof(TieredMatch{}) - C.sizeof_kvidx_tiered_match)
	_ = uint(C.sizeof_kvidx_tiered_match - unsafe.Sizeof(TieredMatch{}))
	_ = uint(TierDevice - C.KVIDX_TIER_DEVICE)
	_ = uint(C.KVIDX_TIER_DEVICE - TierDevice)
	_ = uint(TierHost - C.KVIDX_TIER_HOST)
	_ = uint(C.KVIDX_TIER_HOST - TierHost)
	_ = uint(TierDisk - C.KVIDX_TIER_DISK)
	_ = uint(C.KVIDX_TIER_DISK - TierDisk)
	_ = uint(TierExternal - C.KVIDX_TIER_EXTERNAL)
	_ = uint(C.KVIDX_TIER_EXTERNAL - TierExternal)
	_ = uint(TierAll - C.KVIDX_TIER_ALL)
	_ = uint(C.KVIDX_TIER_ALL - TierAll)
	_ = uint(FeedUnknownMediumDevice - C.KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE)
	_ = uint(C.KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE - FeedUnknownMediumDevice)
	_ = uint(FeedUnknownMediumHost - C.KVIDX_FEED_UNKNOWN_MEDIUM_HOST)
	_ = uint(C.KVIDX_FEED_UNKNOWN_MEDIUM_HOST - FeedUnknownMediumHost)
	_ = uint(FeedUnknownMediumDisk - C.KVIDX_FEED_UNKNOWN_MEDIUM_DISK)
	_ = uint(C.KVIDX_FEED_UNKNOWN_MEDIUM_DISK - FeedUnknownMediumDisk)
	_ = uint(StatusIO - C.KVIDX_ERR_IO)
	_ = uint(C.KVIDX_ERR_IO - StatusIO)
	_ = uint(unsafe.Sizeof(SnapshotInfo{}) - C.sizeof_kvidx_snapshot_info)
	_ = uint(C.sizeof_kvidx_snapshot_info - unsafe.Sizeof(SnapshotInfo{}))
	_ = uint(unsafe.Sizeof(ReplicaStats{}) - C.sizeof_kvidx_replica_stats)
	_ = uint(C.sizeof_kvidx_replica_stats - unsafe.Sizeof(ReplicaStats{}))
)

// cOffsets returns the C offsets of kvidx_event's fields, for the layout test.
func cOffsets() []uintptr {
	var e C.kvidx_event
	return []uintptr{
		unsafe.Offsetof(e.kind), unsafe.Offsetof(e.worker_id), unsafe.Offsetof(e.dp_rank),
		unsafe.Offsetof(e.event_id), unsafe.Offsetof(e.has_parent),
		unsafe.Offsetof(e.parent_seq_hash), unsafe.Offsetof(e.blocks),
		unsafe.Offsetof(e.num_blocks), unsafe.Offsetof(e.seq_hashes),
		unsafe.Offsetof(e.num_seq_hashes),
	}
}

// cTieredMatchOffsets returns the C offsets of kvidx_tiered_match's fields, then its size,
// for the layout test.
func cTieredMatchOffsets() []uintptr {
	var m C.kvidx_tiered_match
	return []uintptr{
		unsafe.Offsetof(m.worker_id), unsafe.Offsetof(m.dp_rank), unsafe.Offsetof(m.depth),
		unsafe.Offsetof(m.tier_depths), unsafe.Sizeof(m),
	}
}

// cBatchResultOffsets returns the C offsets of kvidx_engine_batch_result's fields, for the
// layout test.
func cBatchResultOffsets() []uintptr {
	var r C.kvidx_engine_batch_result
	return []uintptr{
		unsafe.Offsetof(r.events_decoded), unsafe.Offsetof(r.events_submitted),
		unsafe.Offsetof(r.events_rejected), unsafe.Offsetof(r.skipped_unknown_tag),
		unsafe.Offsetof(r.skipped_filtered), unsafe.Offsetof(r.skipped_unhashable),
		unsafe.Offsetof(r.seq_expected), unsafe.Offsetof(r.batches_missed),
		unsafe.Offsetof(r.dp_rank), unsafe.Offsetof(r.seq_status),
		unsafe.Offsetof(r.worker_cleared),
	}
}

var loadOnce = sync.OnceValue(func() error {
	if v := uint32(C.kvidx_abi_version()); v != ABIVersion {
		return fmt.Errorf("%w: library ABI version %d, binding needs %d", ErrLibraryUnavailable, v, ABIVersion)
	}
	return nil
})

// load checks, once, that the linked library speaks this binding's ABI version.
func load() error { return loadOnce() }

func libConfigDefault() Config {
	c := C.kvidx_config_default()
	return Config{Backend: Backend(c.backend), EventThreads: uint32(c.event_threads), JumpSize: uint32(c.jump_size)}
}

func libNew(c *cConfig, l *cQueueLimits) (handle, Status) {
	r := C.kvidx_go_new_indexer(*(*C.kvidx_config)(unsafe.Pointer(c)),
		*(*C.kvidx_queue_limits)(unsafe.Pointer(l)))
	return r.ix, Status(r.status)
}

func libFree(h handle) { C.kvidx_free(h) }

func libApplyEvent(h handle, e *cEvent) Status {
	return Status(C.kvidx_apply_event(h, (*C.kvidx_event)(unsafe.Pointer(e))))
}

func libApplyEvents(h handle, e *cEvent, n int) Status {
	return Status(C.kvidx_apply_events(h, (*C.kvidx_event)(unsafe.Pointer(e)), C.size_t(n)))
}

func libRemoveWorker(h handle, id uint64) Status {
	return Status(C.kvidx_remove_worker(h, C.uint64_t(id)))
}

func libRemoveWorkerDpRank(h handle, id uint64, rank uint32) Status {
	return Status(C.kvidx_remove_worker_dp_rank(h, C.uint64_t(id), C.uint32_t(rank)))
}

func libFlush(h handle) Status { return Status(C.kvidx_flush(h)) }

func libFindMatches(h handle, q *uint64, n int, out *Match, outCap int) (Status, int) {
	r := C.kvidx_go_find_matches(h, (*C.uint64_t)(unsafe.Pointer(q)), C.size_t(n),
		(*C.kvidx_match)(unsafe.Pointer(out)), C.size_t(outCap))
	return Status(r.status), int(r.len)
}

// libHasTiers says whether the library has the storage-tier functions: always with cgo, where
// the header's KVIDX_HAS_TIERS functions are linked at build time.
func libHasTiers() bool { return true }

func libApplyEventOnTier(h handle, e *cEvent, tier uint32) Status {
	return Status(C.kvidx_apply_event_on_tier(h, (*C.kvidx_event)(unsafe.Pointer(e)), C.uint32_t(tier)))
}

func libApplyEventsOnTiers(h handle, e *cEvent, tiers *uint32, n int) Status {
	return Status(C.kvidx_apply_events_on_tiers(h, (*C.kvidx_event)(unsafe.Pointer(e)),
		(*C.uint32_t)(unsafe.Pointer(tiers)), C.size_t(n)))
}

func libFindMatchesTiered(h handle, q *uint64, n int, out *TieredMatch, outCap int) (Status, int) {
	r := C.kvidx_go_find_matches_tiered(h, (*C.uint64_t)(unsafe.Pointer(q)), C.size_t(n),
		(*C.kvidx_tiered_match)(unsafe.Pointer(out)), C.size_t(outCap))
	return Status(r.status), int(r.len)
}

// libTieredScore is the library's kvidx_tiered_score (tests compare TieredMatch.Score with it).
func libTieredScore(m *TieredMatch, w *[NumTiers]float64) (float64, Status) {
	r := C.kvidx_go_tiered_score(*(*C.kvidx_tiered_match)(unsafe.Pointer(m)), (*C.double)(unsafe.Pointer(&w[0])))
	return float64(r.score), Status(r.status)
}

func libStats(h handle, out *Stats) Status {
	r := C.kvidx_go_get_stats(h)
	if r.status == C.uint32_t(StatusOK) {
		*out = *(*Stats)(unsafe.Pointer(&r.stats))
	}
	return Status(r.status)
}

func libHashTokens(t *uint32, n int, bs uint32, out *uint64, outCap int) (Status, int) {
	r := C.kvidx_go_hash_tokens((*C.uint32_t)(unsafe.Pointer(t)), C.size_t(n), C.uint32_t(bs),
		(*C.uint64_t)(unsafe.Pointer(out)), C.size_t(outCap))
	return Status(r.status), int(r.len)
}

func libSeqHashes(l *uint64, n int, out *uint64) Status {
	return Status(C.kvidx_seq_hashes((*C.uint64_t)(unsafe.Pointer(l)), C.size_t(n),
		(*C.uint64_t)(unsafe.Pointer(out))))
}

func libStatusStr(s uint32) string { return C.GoString(C.kvidx_status_str(C.uint32_t(s))) }

func libVersion() string { return C.GoString(C.kvidx_version()) }

func libABIVersion() uint32 { return uint32(C.kvidx_abi_version()) }

func libDebugPanic(h handle) Status { return Status(C.kvidx_debug_panic(h)) }

func libApplyEngineBatch(h handle, format uint32, worker uint64, rank uint32, p *byte, n int) (Status, cBatchResult) {
	r := C.kvidx_go_apply_engine_batch(h, C.uint32_t(format), C.uint64_t(worker), C.uint32_t(rank),
		(*C.uint8_t)(unsafe.Pointer(p)), C.size_t(n))
	return Status(r.status), *(*cBatchResult)(unsafe.Pointer(&r.result))
}

func libFeedNew(format, flags uint32) (feedHandle, Status) {
	r := C.kvidx_go_feed_new(C.uint32_t(format), C.uint32_t(flags))
	return r.feed, Status(r.status)
}

func libFeedFree(f feedHandle) { C.kvidx_engine_feed_free(f) }

func libFeedApply(f feedHandle, h handle, worker uint64, rank uint32, seq *byte, seqLen int, p *byte, n int) (Status, cBatchResult) {
	r := C.kvidx_go_feed_apply(f, h, C.uint64_t(worker), C.uint32_t(rank),
		(*C.uint8_t)(unsafe.Pointer(seq)), C.size_t(seqLen), (*C.uint8_t)(unsafe.Pointer(p)), C.size_t(n))
	return Status(r.status), *(*cBatchResult)(unsafe.Pointer(&r.result))
}

func libFeedStats(f feedHandle, out *EngineStats) Status {
	r := C.kvidx_go_feed_get_stats(f)
	if r.status == C.uint32_t(StatusOK) {
		*out = *(*EngineStats)(unsafe.Pointer(&r.stats))
	}
	return Status(r.status)
}

func libFeedForget(f feedHandle, worker uint64, rank uint32) (bool, Status) {
	r := C.kvidx_go_feed_forget(f, C.uint64_t(worker), C.uint32_t(rank))
	return r.value != 0, Status(r.status)
}

func libFeedRemoveWorker(f feedHandle, h handle, worker uint64) Status {
	return Status(C.kvidx_engine_feed_remove_worker(f, h, C.uint64_t(worker)))
}

func libFeedRemoveWorkerDpRank(f feedHandle, h handle, worker uint64, rank uint32) Status {
	return Status(C.kvidx_engine_feed_remove_worker_dp_rank(f, h, C.uint64_t(worker), C.uint32_t(rank)))
}

func libFeedPublishers(f feedHandle) (uint64, Status) {
	r := C.kvidx_go_feed_publishers(f)
	return uint64(r.value), Status(r.status)
}

// libHasSnapshots says whether the library has the snapshot functions: always with cgo, where
// the header's KVIDX_HAS_SNAPSHOTS functions are linked at build time.
func libHasSnapshots() bool { return true }

func libApplyEventsAt(h handle, e *cEvent, n int, offset uint64) Status {
	return Status(C.kvidx_apply_events_at(h, (*C.kvidx_event)(unsafe.Pointer(e)), C.size_t(n), C.uint64_t(offset)))
}

func libApplyEngineBatchAt(h handle, format uint32, worker uint64, rank uint32, p *byte, n int, offset uint64) (Status, cBatchResult) {
	r := C.kvidx_go_apply_engine_batch_at(h, C.uint32_t(format), C.uint64_t(worker), C.uint32_t(rank),
		(*C.uint8_t)(unsafe.Pointer(p)), C.size_t(n), C.uint64_t(offset))
	return Status(r.status), *(*cBatchResult)(unsafe.Pointer(&r.result))
}

func libFeedApplyAt(f feedHandle, h handle, worker uint64, rank uint32, seq *byte, seqLen int, p *byte, n int, offset uint64) (Status, cBatchResult) {
	r := C.kvidx_go_feed_apply_at(f, h, C.uint64_t(worker), C.uint32_t(rank),
		(*C.uint8_t)(unsafe.Pointer(seq)), C.size_t(seqLen), (*C.uint8_t)(unsafe.Pointer(p)), C.size_t(n),
		C.uint64_t(offset))
	return Status(r.status), *(*cBatchResult)(unsafe.Pointer(&r.result))
}

// libHasFeedState says whether the library has engine epochs and feed state: always with
// cgo, where the header's KVIDX_HAS_FEED_STATE functions are linked at build time.
func libHasFeedState() bool { return true }

func libFeedApplyEpochAt(f feedHandle, h handle, worker uint64, rank uint32, epoch uint64, seq *byte, seqLen int, p *byte, n int, offset uint64) (Status, cBatchResult) {
	r := C.kvidx_go_feed_apply_epoch_at(f, h, C.uint64_t(worker), C.uint32_t(rank), C.uint64_t(epoch),
		(*C.uint8_t)(unsafe.Pointer(seq)), C.size_t(seqLen), (*C.uint8_t)(unsafe.Pointer(p)), C.size_t(n),
		C.uint64_t(offset))
	return Status(r.status), *(*cBatchResult)(unsafe.Pointer(&r.result))
}

func libFeedSaveState(f feedHandle, out *byte, n int) (int, Status) {
	r := C.kvidx_go_feed_save_state(f, (*C.uint8_t)(unsafe.Pointer(out)), C.size_t(n))
	return int(r.len), Status(r.status)
}

func libFeedRestoreState(f feedHandle, p *byte, n int) Status {
	return Status(C.kvidx_engine_feed_restore_state(f, (*C.uint8_t)(unsafe.Pointer(p)), C.size_t(n)))
}

func libWatermark(h handle, worker uint64, rank uint32) (uint64, Status) {
	r := C.kvidx_go_watermark(h, C.uint64_t(worker), C.uint32_t(rank))
	return uint64(r.value), Status(r.status)
}

func libReplicaStats(h handle, out *ReplicaStats) Status {
	r := C.kvidx_go_get_replica_stats(h)
	if r.status == C.uint32_t(StatusOK) {
		*out = *(*ReplicaStats)(unsafe.Pointer(&r.stats))
	}
	return Status(r.status)
}

func libSnapshotWrite(h handle, id uintptr, out *SnapshotInfo) Status {
	r := C.kvidx_go_snapshot_write(h, C.uintptr_t(id))
	*out = *(*SnapshotInfo)(unsafe.Pointer(&r.info))
	return Status(r.status)
}

func libSnapshotRestore(h handle, id uintptr, out *SnapshotInfo) Status {
	r := C.kvidx_go_snapshot_restore(h, C.uintptr_t(id))
	*out = *(*SnapshotInfo)(unsafe.Pointer(&r.info))
	return Status(r.status)
}
