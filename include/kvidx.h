/*
 * kvidx.h: C ABI v1 of kvidx, a global index of the KV blocks cached by LLM inference workers.
 *
 * Engines publish events (blocks stored, removed, cleared) per worker (worker_id, dp_rank);
 * kvidx_find_matches() tells, for a request's local block hashes, how deep a prefix of them
 * each worker holds.
 *
 * Build and link:  cc prog.c $(pkg-config --cflags --libs kvidx)          (shared)
 *                  cc prog.c $(pkg-config --cflags --libs kvidx-static)   (static)
 *
 * Error protocol: every fallible function returns a kvidx_status; KVIDX_OK (0) is success.
 *   Out-parameters are written only on success, except that KVIDX_ERR_BUFFER_TOO_SMALL writes
 *   the count needed to *out_len and nothing else. NULL never crashes: a required pointer
 *   that is NULL gives KVIDX_ERR_NULL_POINTER, and an array given as (NULL, 0) is a valid
 *   empty array. Integers that encode enums (kind, backend, format, flags, has_parent) are
 *   validated: an unknown value is KVIDX_ERR_INVALID_ARGUMENT. No function reads past the
 *   lengths given.
 *   Panics never cross the boundary: an internal bug returns KVIDX_ERR_PANIC and poisons the
 *   handle, after which every call on it returns KVIDX_ERR_POISONED; free it and make a new one.
 *   Engine payloads (kvidx_apply_engine_batch, kvidx_engine_feed_apply) that do not decode give
 *   KVIDX_ERR_MALFORMED, and payloads above KVIDX_ENGINE_MAX_PAYLOAD bytes KVIDX_ERR_TOO_LARGE;
 *   either way nothing is applied. Snapshots that do not decode give KVIDX_ERR_MALFORMED and a
 *   failing snapshot callback or file KVIDX_ERR_IO; either way a restore leaves the indexer
 *   empty. kvidx_status_str() describes any code.
 *
 * Ownership: the library keeps no caller pointer after a call returns (event arrays are
 *   copied). A handle from kvidx_new() or kvidx_new_with_limits() is released with
 *   kvidx_free() exactly once, and a feed from kvidx_engine_feed_new() with
 *   kvidx_engine_feed_free() exactly once. Strings returned are static and must not be freed.
 *   Nothing else is allocated for the caller.
 *
 * Handles: kvidx_indexer and kvidx_engine_feed are opaque; each holds a poison flag. A panic
 *   caught during a call poisons the handle whose code panicked (a panic while a feed decodes
 *   poisons the feed, not the indexer it writes to; one inside the indexer poisons both).
 *
 * Thread-safety and const: a handle parameter declared const (const kvidx_indexer *,
 *   const kvidx_engine_feed *) may be used by any number of threads at once, in any mix of
 *   such calls. A handle parameter that is not const (only kvidx_free() and
 *   kvidx_engine_feed_free()) needs exclusive access: no other call on that handle may
 *   overlap it, and the handle is invalid afterwards. Calls on one feed are serialised inside.
 *   kvidx_find_matches() runs on the caller's thread, also while events are being applied.
 *   With event_threads > 0, apply calls copy and queue events (one worker's events stay in
 *   order) and their outcomes show in kvidx_get_stats() after kvidx_flush(); with
 *   event_threads == 0, events are applied before the call returns.
 *
 * Enums and macros: every set of named values is a C enum (kvidx_status, kvidx_backend,
 *   kvidx_event_kind, kvidx_engine_format, kvidx_seq_status, kvidx_feed_flag); struct fields and
 *   arguments that carry them are uint32_t, so any value a caller passes is validated.
 *   Macros are kept for single values only: versions, KVIDX_DP_RANK_FROM_BATCH (UINT32_MAX,
 *   which a C enum cannot hold before C23) and KVIDX_ENGINE_MAX_PAYLOAD.
 *
 * Versions: KVIDX_VERSION is the library release; KVIDX_ABI_VERSION (1) is this header's ABI,
 *   compare it with kvidx_abi_version() at run time. ABI v1 grows by additions only: values
 *   are never renumbered or reused, struct layouts never change. Each addition comes with a
 *   KVIDX_HAS_<FEATURE> macro (KVIDX_HAS_TIERS: storage tiers, kvidx_tier,
 *   kvidx_tiered_match and the *_tier* functions; KVIDX_HAS_SNAPSHOTS: offset batches,
 *   watermarks and snapshots, the *_at and kvidx_snapshot_* functions; KVIDX_HAS_FEED_STATE:
 *   engine epochs and saved feed state, kvidx_engine_feed_apply_epoch_at and
 *   kvidx_engine_feed_save_state / _restore_state; KVIDX_HAS_FEED_START: publishers first
 *   seen above sequence 0, kvidx_engine_feed_next_seq and kvidx_engine_feed_start_stats;
 *   KVIDX_HAS_HASH_CHECK: an engine feed's check of the engines' block hashes,
 *   kvidx_hash_algorithm, kvidx_hash_check_stats and the kvidx_engine_feed_*hash_check*
 *   functions; KVIDX_HAS_LLMD_KEYS: llm-d's request keys, kvidx_llmd_request_keys and
 *   kvidx_engine_feed_set_llmd_keys; KVIDX_HAS_PREDICTIONS: predicted blocks, kvidx_predict,
 *   kvidx_find_matches_predicted, kvidx_new_with_predictions and the clock they expire by;
 *   KVIDX_HAS_NAMESPACES: namespaced and multimodal requests, kvidx_hash_request and
 *   KVIDX_FEED_SKIP_EXTRAS), so a program can test for it with #ifdef;
 *   a library older than the header lacks the new symbols, which the dynamic linker reports
 *   when the program starts. A change that breaks the ABI would raise KVIDX_ABI_VERSION and
 *   the SONAME (libkvidx.so.1).
 */

#ifndef KVIDX_H
#define KVIDX_H

/* Generated by cbindgen from src; do not edit. Refresh: KVIDX_REFRESH_HEADER=1 cargo build */

#include <stddef.h>
#include <stdint.h>
#define KVIDX_VERSION_MAJOR 0
#define KVIDX_VERSION_MINOR 1
#define KVIDX_VERSION_PATCH 0
#define KVIDX_VERSION "0.1.0"

/**
 * The version of the C ABI this library implements; the header defines the same macro.
 */
#define KVIDX_ABI_VERSION 1

/**
 * Defined (1) when the library has storage tiers: `kvidx_tier`, `kvidx_tiered_match`,
 * `kvidx_apply_event_on_tier`, `kvidx_apply_events_on_tiers`, `kvidx_find_matches_tiered`,
 * `kvidx_tiered_score` and the `KVIDX_FEED_UNKNOWN_MEDIUM_*` flags (additions to ABI v1).
 */
#define KVIDX_HAS_TIERS 1

/**
 * Defined (1) when the library has offset batches, watermarks and snapshots:
 * `KVIDX_ERR_IO`, `kvidx_apply_events_at`, `kvidx_apply_engine_batch_at`,
 * `kvidx_engine_feed_apply_at`, `kvidx_watermark`, `kvidx_replica_stats` with
 * `kvidx_get_replica_stats`, and `kvidx_snapshot_info`, `kvidx_snapshot_sink`,
 * `kvidx_snapshot_source` with `kvidx_snapshot_write(_file)` and
 * `kvidx_snapshot_restore(_file)` (additions to ABI v1).
 */
#define KVIDX_HAS_SNAPSHOTS 1

/**
 * Defined (1) when engine feeds take engine epochs and save their tracking state:
 * `kvidx_engine_feed_apply_epoch_at`, `kvidx_engine_feed_save_state` and
 * `kvidx_engine_feed_restore_state` (additions to ABI v1).
 */
#define KVIDX_HAS_FEED_STATE 1

/**
 * Defined (1) when engine feeds report publishers first seen above sequence 0 ("missed from
 * the start"): `kvidx_engine_feed_next_seq`, `kvidx_engine_start_stats` with
 * `kvidx_engine_feed_start_stats` (additions to ABI v1).
 */
#define KVIDX_HAS_FEED_START 1

/**
 * Defined (1) when engine feeds can check the engines' block hashes:
 * `kvidx_hash_algorithm`, `kvidx_hash_check_stats`, `kvidx_engine_feed_set_hash_check`,
 * `kvidx_engine_feed_clear_hash_check`, `kvidx_engine_feed_hash_check_stats` and
 * `kvidx_engine_feed_hash_check_totals` (additions to ABI v1).
 */
#define KVIDX_HAS_HASH_CHECK 1

/**
 * Defined (1) when the library computes llm-d's request keys and engine feeds index under
 * them: `kvidx_llmd_request_keys` and `kvidx_engine_feed_set_llmd_keys` (additions to ABI
 * v1).
 */
#define KVIDX_HAS_LLMD_KEYS 1

/**
 * Defined (1) when the library keeps predicted blocks: `kvidx_clock`,
 * `kvidx_prediction_config` with `kvidx_prediction_config_default` and
 * `kvidx_new_with_predictions`, `kvidx_predict`, `kvidx_predicted_match` with
 * `kvidx_find_matches_predicted`, `kvidx_now`, `kvidx_set_time`, `kvidx_advance_time`, and
 * `kvidx_prediction_stats` with `kvidx_get_prediction_stats` (additions to ABI v1).
 */
#define KVIDX_HAS_PREDICTIONS 1

/**
 * Defined (1) when the library hashes namespaced and multimodal requests:
 * `kvidx_namespace`, `kvidx_mm_span`, `kvidx_hash_request` and the
 * `KVIDX_FEED_SKIP_EXTRAS` feed flag (additions to ABI v1).
 */
#define KVIDX_HAS_NAMESPACES 1

/**
 * `dp_rank` argument: take the rank from the batch envelope (0 when the envelope has none).
 * A sentinel, not an enum value: `UINT32_MAX` does not fit a C enum before C23.
 */
#define KVIDX_DP_RANK_FROM_BATCH UINT32_MAX

/**
 * The largest engine payload accepted, in bytes (32 MiB); a larger one is
 * `KVIDX_ERR_TOO_LARGE` and nothing of it is read.
 */
#define KVIDX_ENGINE_MAX_PAYLOAD (32 << 20)

/**
 * The result of every fallible function. Values are never renumbered or reused.
 */
typedef enum kvidx_status {
    /**
     * Success.
     */
    KVIDX_OK = 0,
    /**
     * A required pointer was NULL (or an array was NULL with a length > 0).
     */
    KVIDX_ERR_NULL_POINTER = 1,
    /**
     * A bad enum value, a bad config value or inconsistent fields (also: an array whose
     * pointer is misaligned or whose byte size exceeds PTRDIFF_MAX).
     */
    KVIDX_ERR_INVALID_ARGUMENT = 2,
    /**
     * `*out_len` holds the count needed; nothing else was written.
     */
    KVIDX_ERR_BUFFER_TOO_SMALL = 3,
    /**
     * Synchronous mode only: a STORED event was rejected because the worker does not hold
     * its parent; nothing of it was applied.
     */
    KVIDX_ERR_PARENT_NOT_FOUND = 4,
    /**
     * The indexer's event threads are gone.
     */
    KVIDX_ERR_SHUT_DOWN = 5,
    /**
     * An internal bug was caught at the boundary; the handle is now poisoned.
     */
    KVIDX_ERR_PANIC = 6,
    /**
     * A panic happened earlier on this handle; the only valid call left is `kvidx_free`.
     */
    KVIDX_ERR_POISONED = 7,
    /**
     * Engine ingestion: the payload is not a valid engine event batch of the given
     * format (not msgpack, truncated, trailing bytes, a bad envelope, event or field type);
     * nothing was applied. Snapshots: the input is not a valid kvidx snapshot (truncated,
     * corrupted, foreign, a newer format version); the indexer was left empty.
     */
    KVIDX_ERR_MALFORMED = 8,
    /**
     * Engine ingestion only: the payload is larger than `KVIDX_ENGINE_MAX_PAYLOAD`; nothing
     * was read or applied.
     */
    KVIDX_ERR_TOO_LARGE = 9,
    /**
     * Snapshots only: a sink or source callback reported failure, or a file could not be
     * opened, read or written.
     */
    KVIDX_ERR_IO = 10,
} kvidx_status;

/**
 * The index structures an indexer can use (values of `kvidx_config.backend`).
 */
typedef enum kvidx_backend {
    /**
     * Per-position maps with exact jump search.
     */
    KVIDX_BACKEND_POSITIONAL = 0,
    /**
     * A concurrent radix tree over local hashes.
     */
    KVIDX_BACKEND_RADIX = 1,
    /**
     * A tree of runs: consecutive blocks stored once for all the workers holding them (the
     * default of `kvidx_config_default()`).
     */
    KVIDX_BACKEND_RUNS = 2,
} kvidx_backend;

/**
 * The kinds of engine events (values of `kvidx_event.kind`).
 */
typedef enum kvidx_event_kind {
    /**
     * Blocks were cached (`blocks`, optionally continuing `parent_seq_hash`).
     */
    KVIDX_EVENT_STORED = 0,
    /**
     * Blocks were evicted (`seq_hashes`).
     */
    KVIDX_EVENT_REMOVED = 1,
    /**
     * Every block of the worker was dropped.
     */
    KVIDX_EVENT_CLEARED = 2,
} kvidx_event_kind;

/**
 * The engine formats (values of the `format` argument of the engine functions).
 */
typedef enum kvidx_engine_format {
    /**
     * vLLM, every generation (tagged arrays and tagged maps).
     */
    KVIDX_ENGINE_VLLM = 0,
    /**
     * SGLang (its own array positions; signed hashes).
     */
    KVIDX_ENGINE_SGLANG = 1,
    /**
     * TensorRT-LLM's vLLM-compatible ZMQ publisher.
     */
    KVIDX_ENGINE_TRTLLM = 2,
} kvidx_engine_format;

/**
 * How a batch's sequence number related to its publisher's previous one (values of
 * `kvidx_engine_batch_result.seq_status`).
 */
typedef enum kvidx_seq_status {
    /**
     * No sequence was given.
     */
    KVIDX_SEQ_UNTRACKED = 0,
    /**
     * The first batch seen from this publisher (or since it was forgotten).
     */
    KVIDX_SEQ_FIRST = 1,
    /**
     * The expected next batch.
     */
    KVIDX_SEQ_IN_ORDER = 2,
    /**
     * Batches `seq_expected ..` were missed (`batches_missed` of them).
     */
    KVIDX_SEQ_GAP = 3,
    /**
     * The sequence went backwards (the publisher restarted).
     */
    KVIDX_SEQ_RESTART = 4,
} kvidx_seq_status;

/**
 * Flags of `kvidx_engine_feed_new` (bits, combined with `|`; pass the result as `uint32_t`).
 */
typedef enum kvidx_feed_flag {
    /**
     * Do not clear the worker after a gap (the caller replays the missing range).
     */
    KVIDX_FEED_NO_CLEAR_ON_GAP = 1,
    /**
     * Do not clear the worker when its publisher restarts.
     */
    KVIDX_FEED_NO_CLEAR_ON_RESTART = 2,
    /**
     * Index every medium (CPU, storage tiers...), not only the GPU cache.
     */
    KVIDX_FEED_ALL_MEDIA = 4,
    /**
     * Index every KV-cache group, not only group 0.
     */
    KVIDX_FEED_ALL_GROUPS = 8,
    /**
     * Index stores whose engine hashes include extra keys by their tokens alone (default:
     * under their namespace, or skipped when no query can name their keys).
     */
    KVIDX_FEED_HASH_TOKENS_ONLY = 16,
    /**
     * With `KVIDX_FEED_ALL_MEDIA`: a medium the decoder does not know is on the device
     * (default: on `KVIDX_TIER_EXTERNAL`). At most one `KVIDX_FEED_UNKNOWN_MEDIUM_*` flag.
     */
    KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE = 32,
    /**
     * With `KVIDX_FEED_ALL_MEDIA`: a medium the decoder does not know is in host memory.
     */
    KVIDX_FEED_UNKNOWN_MEDIUM_HOST = 64,
    /**
     * With `KVIDX_FEED_ALL_MEDIA`: a medium the decoder does not know is on disk.
     */
    KVIDX_FEED_UNKNOWN_MEDIUM_DISK = 128,
    /**
     * Skip every store whose engine hashes include extra keys (cache salt, multimodal items,
     * ...) instead of indexing it under its namespace (the default, docs/contract.md section
     * 3.1). Not with `KVIDX_FEED_HASH_TOKENS_ONLY`. `KVIDX_HAS_NAMESPACES`.
     */
    KVIDX_FEED_SKIP_EXTRAS = 256,
} kvidx_feed_flag;

/**
 * Storage tiers, fastest first (values of the `tier` arguments of
 * `kvidx_apply_event_on_tier` and `kvidx_apply_events_on_tiers`, and indexes of
 * `kvidx_tiered_match.tier_depths`).
 */
typedef enum kvidx_tier {
    /**
     * The accelerator's own memory (GPU): where blocks of plain events are.
     */
    KVIDX_TIER_DEVICE = 0,
    /**
     * Host memory (CPU DRAM).
     */
    KVIDX_TIER_HOST = 1,
    /**
     * Local disk.
     */
    KVIDX_TIER_DISK = 2,
    /**
     * A remote or shared store.
     */
    KVIDX_TIER_EXTERNAL = 3,
    /**
     * REMOVED and CLEARED only: every tier (what `kvidx_apply_event` does).
     */
    KVIDX_TIER_ALL = 255,
} kvidx_tier;

/**
 * The engine's block hash algorithm for `kvidx_engine_feed_set_hash_check` (passed as
 * `uint32_t`).
 */
typedef enum kvidx_hash_algorithm {
    /**
     * vLLM `--prefix-caching-hash-algo sha256_cbor`.
     */
    KVIDX_HASH_VLLM_SHA256_CBOR = 0,
    /**
     * vLLM `--prefix-caching-hash-algo xxhash_cbor`.
     */
    KVIDX_HASH_VLLM_XXHASH_CBOR = 1,
    /**
     * SGLang 0.5.23's per-page SHA-256 chain.
     */
    KVIDX_HASH_SGLANG_SHA256 = 2,
} kvidx_hash_algorithm;

/**
 * The clock an indexer's predictions expire by (`kvidx_prediction_config.clock`).
 */
typedef enum kvidx_clock {
    /**
     * The system's monotonic clock; time 0 is when the indexer was created.
     */
    KVIDX_CLOCK_MONOTONIC = 0,
    /**
     * Starts at 0 and moves only by `kvidx_set_time` and `kvidx_advance_time` (tests and
     * simulations drive time without sleeping).
     */
    KVIDX_CLOCK_MANUAL = 1,
} kvidx_clock;

/**
 * An opaque engine feed: sequence tracking and counters per publisher `(worker_id, dp_rank)`
 * (`kvidx_engine_feed_new`, `kvidx_engine_feed_free`). Calls on one feed are serialised.
 */
typedef struct kvidx_engine_feed kvidx_engine_feed;

/**
 * The opaque handle of an indexer (`kvidx_new`, `kvidx_free`).
 */
typedef struct kvidx_indexer kvidx_indexer;

/**
 * How to build an indexer. Start from `kvidx_config_default()` and change what you need.
 * Queue limits are set with `kvidx_new_with_limits` (`kvidx_queue_limits`).
 */
typedef struct kvidx_config {
    /**
     * A `kvidx_backend` value; anything else: `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint32_t backend;
    /**
     * Event threads (at most 1024); 0: events are applied synchronously on the caller's thread.
     */
    uint32_t event_threads;
    /**
     * Jump size of the positional backend; 0 = the library's default (32).
     */
    uint32_t jump_size;
} kvidx_config;

/**
 * Queue limits of an indexer with event threads (an addition to `kvidx_config`, whose
 * layout is fixed). Start from `kvidx_queue_limits_default()`; pass to
 * `kvidx_new_with_limits`. Ignored when `event_threads == 0`.
 */
typedef struct kvidx_queue_limits {
    /**
     * Events each event thread may have queued before apply calls block; 0 = the default
     * (4096); at most 1048576, more is `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint64_t queue_capacity;
    /**
     * Bytes of queued work (events with their blocks and hashes) each event thread may
     * hold before apply calls block; 0 = the default (32 MiB). An event larger than the
     * budget is still accepted, alone in an otherwise empty queue. A value the library
     * cannot represent or accept is `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint64_t queue_bytes;
} kvidx_queue_limits;

/**
 * One block of a STORED event.
 */
typedef struct kvidx_block {
    /**
     * Hash of the block's own tokens (see `kvidx_hash_tokens`).
     */
    uint64_t local_hash;
    /**
     * The engine's sequence hash of the block: its name, opaque to the index.
     */
    uint64_t seq_hash;
} kvidx_block;

/**
 * An engine event for one worker `(worker_id, dp_rank)`.
 *
 * Only the fields of the event's kind are read: `has_parent`, `parent_seq_hash`, `blocks`
 * and `num_blocks` for STORED; `seq_hashes` and `num_seq_hashes` for REMOVED; none for
 * CLEARED. Fields of other kinds are ignored whatever they hold.
 */
typedef struct kvidx_event {
    /**
     * A `kvidx_event_kind` value; anything else: `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint32_t kind;
    /**
     * The engine instance.
     */
    uint64_t worker_id;
    /**
     * The data-parallel rank inside that instance.
     */
    uint32_t dp_rank;
    /**
     * Per `(worker_id, dp_rank)`, increasing; recorded for diagnostics.
     */
    uint64_t event_id;
    /**
     * STORED: 0 = the blocks start at position 0, 1 = they continue `parent_seq_hash`;
     * anything else: `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint8_t has_parent;
    /**
     * STORED with `has_parent == 1`: the sequence hash of a block the worker holds.
     */
    uint64_t parent_seq_hash;
    /**
     * STORED: the new blocks in chain order (may be NULL when `num_blocks == 0`).
     */
    const struct kvidx_block *blocks;
    /**
     * STORED: the number of entries in `blocks`.
     */
    size_t num_blocks;
    /**
     * REMOVED: the sequence hashes of the removed blocks (may be NULL when 0 of them).
     */
    const uint64_t *seq_hashes;
    /**
     * REMOVED: the number of entries in `seq_hashes`.
     */
    size_t num_seq_hashes;
} kvidx_event;

/**
 * One worker's answer to a query: how many leading blocks of the query it holds.
 */
typedef struct kvidx_match {
    /**
     * The worker's engine instance.
     */
    uint64_t worker_id;
    /**
     * The worker's data-parallel rank.
     */
    uint32_t dp_rank;
    /**
     * The length of the longest prefix of the query the worker holds (always > 0).
     */
    uint32_t depth;
} kvidx_match;

/**
 * One worker's answer to a tiered query (`kvidx_find_matches_tiered`).
 */
typedef struct kvidx_tiered_match {
    /**
     * The worker's engine instance.
     */
    uint64_t worker_id;
    /**
     * The worker's data-parallel rank.
     */
    uint32_t dp_rank;
    /**
     * The longest prefix of the query the worker holds on any tier (always > 0): the depth
     * `kvidx_find_matches` reports.
     */
    uint32_t depth;
    /**
     * `tier_depths[t]`: the longest prefix whose every block the worker holds on tier `t` or
     * a faster one (indexes are `kvidx_tier` values), so they never decrease with `t` and
     * `tier_depths[KVIDX_TIER_EXTERNAL] == depth`.
     */
    uint32_t tier_depths[4];
} kvidx_tiered_match;

/**
 * The counters of an indexer.
 */
typedef struct kvidx_stats {
    /**
     * Events fully applied (a REMOVED with unknown names still counts once).
     */
    uint64_t events_applied;
    /**
     * STORED events rejected for a missing parent, or otherwise invalid.
     */
    uint64_t events_rejected;
    /**
     * Names in REMOVED events that the worker did not hold.
     */
    uint64_t unknown_removals;
    /**
     * Known `(worker_id, dp_rank)` pairs.
     */
    uint64_t workers;
    /**
     * Sum over workers of the blocks they hold.
     */
    uint64_t worker_blocks;
} kvidx_stats;

/**
 * A request's namespace: its LoRA adapter's name and its cache salt, opaque bytes each
 * (`(NULL, 0)` or any empty array: none). The LoRA name seeds every block; the salt folds
 * into the first block.
 */
typedef struct kvidx_namespace {
    /**
     * The adapter's name as the engine publishes it (`lora_name`), UTF-8 bytes.
     */
    const uint8_t *lora_name;
    /**
     * Bytes in `lora_name`.
     */
    size_t lora_name_len;
    /**
     * The request's cache salt.
     */
    const uint8_t *cache_salt;
    /**
     * Bytes in `cache_salt`.
     */
    size_t cache_salt_len;
} kvidx_namespace;

/**
 * A multimodal item of a request: its identifier (opaque bytes: the engine's `mm_hash`)
 * and the token span `[start, end)` of its placeholder tokens. It folds into every block
 * the span overlaps; a span with `end <= start` overlaps none.
 */
typedef struct kvidx_mm_span {
    /**
     * The item's identifier bytes.
     */
    const uint8_t *identifier;
    /**
     * Bytes in `identifier`.
     */
    size_t identifier_len;
    /**
     * Index of the item's first token.
     */
    uint64_t start;
    /**
     * Index one past the item's last token.
     */
    uint64_t end;
} kvidx_mm_span;

/**
 * What applying one engine batch did.
 */
typedef struct kvidx_engine_batch_result {
    /**
     * Engine events in the batch.
     */
    uint64_t events_decoded;
    /**
     * Index events applied (synchronous mode) or queued (pooled mode).
     */
    uint64_t events_submitted;
    /**
     * Synchronous mode: submitted STORED events rejected for a missing parent.
     */
    uint64_t events_rejected;
    /**
     * Engine events with an unknown tag (skipped).
     */
    uint64_t skipped_unknown_tag;
    /**
     * Engine events filtered out by medium or KV-cache group.
     */
    uint64_t skipped_filtered;
    /**
     * STORED events whose local hashes cannot be computed (no tokens, token count not
     * `block_size * blocks`, LoRA id without a name, extra keys no query can name, or any
     * extra keys under `KVIDX_FEED_SKIP_EXTRAS`).
     */
    uint64_t skipped_unhashable;
    /**
     * GAP and RESTART: the sequence number that was expected.
     */
    uint64_t seq_expected;
    /**
     * GAP: how many batches were missed.
     */
    uint64_t batches_missed;
    /**
     * The dp rank the events were applied to.
     */
    uint32_t dp_rank;
    /**
     * A `KVIDX_SEQ_*` value.
     */
    uint32_t seq_status;
    /**
     * 1 if the worker was cleared before the batch (gap or restart reaction), else 0.
     */
    uint8_t worker_cleared;
} kvidx_engine_batch_result;

/**
 * Counters of an engine feed.
 */
typedef struct kvidx_engine_stats {
    /**
     * Batches decoded and applied.
     */
    uint64_t batches;
    /**
     * Batches refused as malformed (nothing applied, sequence not recorded).
     */
    uint64_t batches_malformed;
    /**
     * Engine events decoded.
     */
    uint64_t events_decoded;
    /**
     * Index events submitted.
     */
    uint64_t events_submitted;
    /**
     * Synchronous mode: submitted STORED events the index rejected.
     */
    uint64_t events_rejected;
    /**
     * Engine events skipped (unknown tag, filtered, unhashable).
     */
    uint64_t events_skipped;
    /**
     * Sequence gaps seen.
     */
    uint64_t gaps;
    /**
     * Batches missed, summed over gaps.
     */
    uint64_t batches_missed;
    /**
     * Publisher restarts seen.
     */
    uint64_t restarts;
    /**
     * Workers cleared as a reaction to a gap or restart.
     */
    uint64_t workers_cleared;
} kvidx_engine_stats;

/**
 * Counters of offset batches (`kvidx_apply_events_at`, `kvidx_apply_engine_batch_at`,
 * `kvidx_engine_feed_apply_at`).
 */
typedef struct kvidx_replica_stats {
    /**
     * Offset batches applied.
     */
    uint64_t batches_applied;
    /**
     * Offset batches skipped whole because their offset was at or below their worker's
     * watermark.
     */
    uint64_t batches_skipped;
    /**
     * Events in the skipped batches (counted nowhere else).
     */
    uint64_t events_skipped;
} kvidx_replica_stats;

/**
 * Receives the bytes of a snapshot being written, in order: `len` bytes at `data`, valid
 * only during the call. Returns 0 to go on; anything else stops the write with
 * `KVIDX_ERR_IO`. It must return normally (no `longjmp`, no C++ exception through it).
 */
typedef int32_t (*kvidx_snapshot_sink)(void *user, const uint8_t *data, size_t len);

/**
 * What a snapshot holds (`kvidx_snapshot_write`, `kvidx_snapshot_restore`).
 */
typedef struct kvidx_snapshot_info {
    /**
     * Workers `(worker_id, dp_rank)` in the snapshot, empty ones included.
     */
    uint64_t workers;
    /**
     * Held `(worker, name)` pairs.
     */
    uint64_t blocks;
    /**
     * Bytes of the snapshot.
     */
    uint64_t bytes;
    /**
     * The smallest watermark of any worker (0 if one has none, or there is no worker).
     */
    uint64_t min_watermark;
    /**
     * The largest watermark of any worker.
     */
    uint64_t max_watermark;
} kvidx_snapshot_info;

/**
 * Supplies the bytes of a snapshot being restored: writes up to `cap` bytes to `buf` and
 * their count to `*got` (`*got == 0`: the end of the input). Returns 0 on success; anything
 * else stops the restore with `KVIDX_ERR_IO`. It must return normally (no `longjmp`, no C++
 * exception through it).
 */
typedef int32_t (*kvidx_snapshot_source)(void *user, uint8_t *buf, size_t cap, size_t *got);

/**
 * Counters of an engine feed's publishers that it first saw above sequence 0.
 */
typedef struct kvidx_engine_start_stats {
    /**
     * Publishers whose first batch tracked was above 0 (reported `KVIDX_SEQ_FIRST` with a
     * sequence above 0: they had published before).
     */
    uint64_t late_starts;
    /**
     * Batches those publishers sent before their first batch tracked (its sequence), summed.
     */
    uint64_t batches_missed_from_start;
} kvidx_engine_start_stats;

/**
 * The hash check's counts of blocks, by outcome; every counter saturates at `UINT64_MAX`.
 */
typedef struct kvidx_hash_check_stats {
    /**
     * Blocks whose published name the check reproduced.
     */
    uint64_t matched;
    /**
     * Blocks whose published name differs from the one recomputed (another algorithm, seed
     * or block size than the check was given).
     */
    uint64_t mismatched;
    /**
     * Blocks the check could not recompute (no tokens, a parent it never saw, a LoRA
     * adapter's unpublished path, lookahead tokens).
     */
    uint64_t unverifiable;
} kvidx_hash_check_stats;

/**
 * How an indexer keeps predictions (`kvidx_new_with_predictions`).
 */
typedef struct kvidx_prediction_config {
    /**
     * Bytes all predictions of the indexer may take (`kvidx_prediction_stats.bytes`); the
     * least recently predicted blocks are dropped first to stay within it. 0 = the default
     * (64 MiB). A value the library cannot represent is `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint64_t max_bytes;
    /**
     * Predicted blocks each worker may hold; beyond it that worker's least recently
     * predicted blocks are dropped first (the event-free mode's stand-in for the engine's
     * cache). 0 = no per-worker bound.
     */
    uint64_t worker_capacity;
    /**
     * A `kvidx_clock` value; anything else is `KVIDX_ERR_INVALID_ARGUMENT`.
     */
    uint32_t clock;
} kvidx_prediction_config;

/**
 * One worker's answer to a predicted lookup (`kvidx_find_matches_predicted`).
 */
typedef struct kvidx_predicted_match {
    /**
     * The worker's engine instance.
     */
    uint64_t worker_id;
    /**
     * The worker's data-parallel rank.
     */
    uint32_t dp_rank;
    /**
     * The confirmed depth: what `kvidx_find_matches` reports for the worker (0 when it holds
     * no prefix of the query, or is not in that answer).
     */
    uint32_t depth;
    /**
     * The predicted depth: the longest prefix of the query whose every block the worker
     * holds within its confirmed depth or is predicted (unexpired) to hold; `>= depth` and
     * always > 0.
     */
    uint32_t predicted_depth;
} kvidx_predicted_match;

/**
 * The state and counters of an indexer's predictions (`kvidx_get_prediction_stats`).
 */
typedef struct kvidx_prediction_stats {
    /**
     * Predicted blocks held, one per (worker, block), expired ones not yet dropped included.
     */
    uint64_t blocks;
    /**
     * Workers with at least one predicted block held.
     */
    uint64_t workers;
    /**
     * Bytes the predictions take; at most `kvidx_prediction_config.max_bytes`.
     */
    uint64_t bytes;
    /**
     * Blocks dropped, least recently predicted first, to stay within the byte bound.
     */
    uint64_t dropped_for_bytes;
    /**
     * Blocks dropped, a worker's least recently predicted first, for its capacity.
     */
    uint64_t dropped_for_capacity;
    /**
     * Expired blocks dropped.
     */
    uint64_t expired;
    /**
     * Blocks confirmed by a STORED of the same worker and block (the prediction dropped).
     */
    uint64_t confirmed;
    /**
     * Blocks dropped by a REMOVED, a CLEARED or a worker's removal.
     */
    uint64_t dropped_by_events;
} kvidx_prediction_stats;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

/**
 * Returns the default configuration: runs backend, 1 event thread, default jump size.
 */
struct kvidx_config kvidx_config_default(void);

/**
 * Creates an indexer and stores its handle in `*out`.
 *
 * `config` may be NULL for `kvidx_config_default()`. Returns `KVIDX_ERR_NULL_POINTER` if `out`
 * is NULL, `KVIDX_ERR_INVALID_ARGUMENT` for an unknown backend or `event_threads > 1024`,
 * `KVIDX_ERR_SHUT_DOWN` if the event threads could not be started. `*out` is written only on
 * success; release the handle with `kvidx_free`.
 *
 * # Safety
 * `config` is NULL or points to a readable `kvidx_config`; `out` is NULL or writable.
 */
enum kvidx_status kvidx_new(const struct kvidx_config *config, struct kvidx_indexer **out);

/**
 * Returns the default queue limits: `{0, 0}`, the library's defaults (4096 events and
 * 32 MiB of queued work per event thread).
 */
struct kvidx_queue_limits kvidx_queue_limits_default(void);

/**
 * Like `kvidx_new`, with queue limits for the event threads. `config` and `limits` may each
 * be NULL for their defaults; `limits` is ignored when `event_threads == 0`.
 *
 * Returns `KVIDX_ERR_INVALID_ARGUMENT` for any setting out of range (`queue_capacity` above
 * 1048576, a `queue_bytes` the library cannot represent or accept, and everything `kvidx_new`
 * checks), never aborting; otherwise as `kvidx_new`. `*out` is written only on success.
 *
 * # Safety
 * `config` is NULL or readable, `limits` is NULL or readable, `out` is NULL or writable.
 */
enum kvidx_status kvidx_new_with_limits(const struct kvidx_config *config,
                                        const struct kvidx_queue_limits *limits,
                                        struct kvidx_indexer **out);

/**
 * Releases an indexer (from `kvidx_new` or `kvidx_new_with_limits`): applies every event
 * already accepted, joins the event threads and frees the handle. NULL is a no-op; a poisoned handle is freed too.
 *
 * Must not overlap any other call on the same handle; the handle is invalid afterwards.
 *
 * # Safety
 * `indexer` is NULL or a handle from `kvidx_new` not freed before.
 */
void kvidx_free(struct kvidx_indexer *indexer);

/**
 * Test hook: panics inside the boundary on purpose. Returns `KVIDX_ERR_PANIC` and poisons the
 * handle, so every later call on it returns `KVIDX_ERR_POISONED` (free it with `kvidx_free`).
 * NULL gives `KVIDX_ERR_NULL_POINTER`, an already poisoned handle `KVIDX_ERR_POISONED`.
 *
 * The panic message is printed to standard error by Rust's default panic hook.
 *
 * # Safety
 * `indexer` is NULL or a live handle from `kvidx_new`.
 */
enum kvidx_status kvidx_debug_panic(const struct kvidx_indexer *indexer);

/**
 * Applies one event (synchronous mode) or checks its shape, copies it and queues it behind
 * the earlier events of its worker (pooled mode; blocks while that queue is full).
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL handle or event, or a NULL array with a
 * length above 0; `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `kind` or a `has_parent` other than 0/1.
 * Such an event is refused whole and counts nowhere. Synchronous mode returns
 * `KVIDX_ERR_PARENT_NOT_FOUND` for a rejected STORED (counted in `events_rejected`); pooled
 * mode reports semantic outcomes only in `kvidx_get_stats` after `kvidx_flush`.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `event` is NULL or points to a readable `kvidx_event`
 * whose arrays are readable for their lengths. Nothing is kept after the call returns.
 */
enum kvidx_status kvidx_apply_event(const struct kvidx_indexer *indexer,
                                    const struct kvidx_event *event);

/**
 * Applies or queues `n` events in order, after checking the shape of all of them first: if
 * any is malformed, none is applied or queued and that event's status is returned.
 *
 * Otherwise the same as `kvidx_apply_event` on each in order; returns `KVIDX_OK` or the
 * first non-OK status (in synchronous mode a rejected STORED does not stop later events).
 * Consecutive events of one worker are applied a few at a time as one change of that worker:
 * a concurrent lookup sees the worker as it was before or after each such group.
 * `(NULL, 0)` is a valid empty batch.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `events` is NULL or points to `n` readable events whose
 * arrays are readable for their lengths.
 */
enum kvidx_status kvidx_apply_events(const struct kvidx_indexer *indexer,
                                     const struct kvidx_event *events,
                                     size_t n);

/**
 * Drops and forgets every dp_rank of a worker, ordered after every event of that worker
 * accepted before this call. An unknown worker is a valid no-op. Not counted in
 * `events_applied`.
 *
 * # Safety
 * `indexer` is NULL or a live handle.
 */
enum kvidx_status kvidx_remove_worker(const struct kvidx_indexer *indexer, uint64_t worker_id);

/**
 * Drops and forgets one `(worker_id, dp_rank)`, ordered like `kvidx_remove_worker`. An unknown
 * worker or rank is a valid no-op.
 *
 * # Safety
 * `indexer` is NULL or a live handle.
 */
enum kvidx_status kvidx_remove_worker_dp_rank(const struct kvidx_indexer *indexer,
                                              uint64_t worker_id,
                                              uint32_t dp_rank);

/**
 * A barrier: returns once every event (and worker removal) accepted before the call has been
 * applied. Immediate in synchronous mode.
 *
 * # Safety
 * `indexer` is NULL or a live handle.
 */
enum kvidx_status kvidx_flush(const struct kvidx_indexer *indexer);

/**
 * Like `kvidx_apply_event`, on a storage tier (a `kvidx_tier` value): a STORED puts its
 * blocks on `tier` (a block the worker already holds gains it); a REMOVED takes `tier` off
 * each named block, which stays held while it is on another tier (`KVIDX_TIER_ALL`: every
 * tier, as `kvidx_apply_event`; a name not on `tier` counts in `unknown_removals`); a
 * CLEARED drops every tier. An unknown `tier`, or `KVIDX_TIER_ALL` on a STORED, is
 * `KVIDX_ERR_INVALID_ARGUMENT` and nothing is applied.
 *
 * # Safety
 * As `kvidx_apply_event`.
 */
enum kvidx_status kvidx_apply_event_on_tier(const struct kvidx_indexer *indexer,
                                            const struct kvidx_event *event,
                                            uint32_t tier);

/**
 * Like `kvidx_apply_events`, each event on the tier at the same index of `tiers` (see
 * `kvidx_apply_event_on_tier`). Every event and tier is checked before anything is applied:
 * if one is malformed, none is applied or queued and that status is returned. `(NULL, 0)`
 * for both arrays is a valid empty batch.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `events` and `tiers` are NULL or readable for `n`
 * entries; each event's arrays are readable for their lengths.
 */
enum kvidx_status kvidx_apply_events_on_tiers(const struct kvidx_indexer *indexer,
                                              const struct kvidx_event *events,
                                              const uint32_t *tiers,
                                              size_t n);

/**
 * Finds the workers holding a prefix of the query (`num_hashes` local hashes), deepest first,
 * then by `worker_id`, then by `dp_rank`; workers with depth 0 are not reported.
 *
 * On `KVIDX_OK`, `out[0 .. *out_len]` holds the matches. If more than `out_cap` matches exist,
 * returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count needed in `*out_len` and `out` untouched.
 * `(NULL, 0)` is valid for both arrays. Runs on the caller's thread, allocates nothing the
 * caller must free, and may run on any number of threads at once, also during writes.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `local_hashes` is readable for `num_hashes` entries;
 * `out` is writable for `out_cap` entries; `out_len` is NULL or writable.
 */
enum kvidx_status kvidx_find_matches(const struct kvidx_indexer *indexer,
                                     const uint64_t *local_hashes,
                                     size_t num_hashes,
                                     struct kvidx_match *out,
                                     size_t out_cap,
                                     size_t *out_len);

/**
 * Like `kvidx_find_matches`, with each worker's depth per storage tier
 * (`kvidx_tiered_match`): the same workers, depths and order. When no worker holds a block
 * off the device this costs what `kvidx_find_matches` costs; otherwise each reported
 * worker's tiers are read under that worker's lock (a walk of its prefix), briefly delaying
 * its writers.
 *
 * # Safety
 * As `kvidx_find_matches`, with `out` writable for `out_cap` `kvidx_tiered_match` entries.
 */
enum kvidx_status kvidx_find_matches_tiered(const struct kvidx_indexer *indexer,
                                            const uint64_t *local_hashes,
                                            size_t num_hashes,
                                            struct kvidx_tiered_match *out,
                                            size_t out_cap,
                                            size_t *out_len);

/**
 * Writes to `*out` a weighted hit score of one tiered match: each block of its prefix
 * counts the weight of the fastest tier it is on (`weights[t]` for `kvidx_tier` `t`; e.g.
 * `{1.0, 0.8, 0.5, 0.2}`). Routers compare workers by it. Weights are any finite numbers
 * (a negative one counts a tier's blocks against the worker); the score is always finite.
 *
 * Returns `KVIDX_ERR_INVALID_ARGUMENT` (nothing written) when the match's fields contradict
 * each other (`tier_depths` decrease from device to external, or
 * `tier_depths[KVIDX_TIER_EXTERNAL] != depth`), when a weight is NaN or infinite, or when
 * the weights are too large for a finite score; `KVIDX_ERR_NULL_POINTER` for a NULL
 * argument.
 *
 * # Safety
 * `tiered_match` is NULL or readable; `weights` is NULL or readable for 4 entries; `out` is
 * NULL or writable.
 */
enum kvidx_status kvidx_tiered_score(const struct kvidx_tiered_match *tiered_match,
                                     const double *weights,
                                     double *out);

/**
 * Writes the indexer's counters to `*out`. In pooled mode call `kvidx_flush` first for
 * figures that include every accepted event.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `out` is NULL or writable.
 */
enum kvidx_status kvidx_get_stats(const struct kvidx_indexer *indexer, struct kvidx_stats *out);

/**
 * Computes the local hash of every full block of `block_size` tokens (XXH3-64, seed 1337,
 * over the tokens as little-endian bytes); trailing tokens that do not fill a block are
 * ignored, so fewer tokens than one block gives 0 hashes.
 *
 * On `KVIDX_OK`, `out[0 .. *out_len]` holds `num_tokens / block_size` hashes. If `out_cap` is
 * smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count in `*out_len` and `out`
 * untouched. `block_size == 0` is `KVIDX_ERR_INVALID_ARGUMENT`. Thread-safe; no state.
 *
 * # Safety
 * `tokens` is readable for `num_tokens` entries; `out` is writable for `out_cap` entries;
 * `out_len` is NULL or writable.
 */
enum kvidx_status kvidx_hash_tokens(const uint32_t *tokens,
                                    size_t num_tokens,
                                    uint32_t block_size,
                                    uint64_t *out,
                                    size_t out_cap,
                                    size_t *out_len);

/**
 * Computes the sequence hashes of `n` local hashes into `out[0 .. n]`:
 * `seq[0] = local[0]`, `seq[i] = XXH3-64(le64(seq[i-1]) ++ le64(local[i]), seed 1337)`.
 *
 * `out` may be the same array as `local_hashes` (computed in place). `(NULL, 0)` is valid.
 * Thread-safe; no state.
 *
 * # Safety
 * `local_hashes` is readable and `out` writable for `n` entries.
 */
enum kvidx_status kvidx_seq_hashes(const uint64_t *local_hashes, size_t n, uint64_t *out);

/**
 * Computes the local hash of every full block of `block_size` tokens of a request under its
 * namespace (`NULL`: none) and multimodal spans (docs/contract.md section 3.1). With no
 * namespace and no spans it equals `kvidx_hash_tokens`.
 *
 * On `KVIDX_OK`, `out[0 .. *out_len]` holds `num_tokens / block_size` hashes. If `out_cap` is
 * smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count in `*out_len` and `out`
 * untouched. `block_size == 0` is `KVIDX_ERR_INVALID_ARGUMENT`; a NULL array with a length
 * above 0 (tokens, spans, a namespace field, an identifier) is `KVIDX_ERR_NULL_POINTER`.
 * Thread-safe; no state.
 *
 * # Safety
 * `tokens` is readable for `num_tokens` entries, `spans` for `num_spans`; `namespace` is NULL
 * or readable, and each byte array it or a span points to is readable for its length; `out`
 * is writable for `out_cap` entries; `out_len` is NULL or writable.
 */
enum kvidx_status kvidx_hash_request(const uint32_t *tokens,
                                     size_t num_tokens,
                                     uint32_t block_size,
                                     const struct kvidx_namespace *namespace_,
                                     const struct kvidx_mm_span *spans,
                                     size_t num_spans,
                                     uint64_t *out,
                                     size_t out_cap,
                                     size_t *out_len);

/**
 * Returns a static, NUL-terminated description of a status code; never NULL, also for
 * unknown codes. The caller must not free it.
 */
const char *kvidx_status_str(uint32_t status);

/**
 * Returns the library version as a static string such as "0.1.0" (the same as the header's
 * `KVIDX_VERSION` when header and library match). The caller must not free it.
 */
const char *kvidx_version(void);

/**
 * Returns the ABI version of the library: 1. Compare it with the header's `KVIDX_ABI_VERSION`.
 */
uint32_t kvidx_abi_version(void);

/**
 * Decodes one engine payload (the third frame of the engine's ZMQ message) completely, then
 * applies its events to `(worker_id, dp_rank)`; `dp_rank == KVIDX_DP_RANK_FROM_BATCH` takes
 * the envelope's rank. Only the GPU medium and KV-cache group 0 are indexed; local hashes
 * come from the published tokens (see docs/engine-events.md). No sequence tracking: use a
 * feed (`kvidx_engine_feed_apply`) for that. Decoding holds, besides the payload, the index
 * events it produces and one decoded event at a time.
 *
 * Returns `KVIDX_ERR_MALFORMED` when the bytes are not a valid batch of `format` (not
 * msgpack, truncated, trailing bytes, a bad envelope, event or field type; also an empty
 * payload), `KVIDX_ERR_TOO_LARGE` when `len > KVIDX_ENGINE_MAX_PAYLOAD`: nothing is applied.
 * Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `format` (checked before the payload is
 * read), `KVIDX_ERR_NULL_POINTER` for a NULL handle or `out`, or NULL `payload` with
 * `len > 0`. In synchronous mode a STORED whose parent is missing is counted in
 * `out->events_rejected` and the call still returns `KVIDX_OK`.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `payload` is readable for `len` bytes; `out` is NULL or
 * writable.
 */
enum kvidx_status kvidx_apply_engine_batch(const struct kvidx_indexer *indexer,
                                           uint32_t format,
                                           uint64_t worker_id,
                                           uint32_t dp_rank,
                                           const uint8_t *payload,
                                           size_t len,
                                           struct kvidx_engine_batch_result *out);

/**
 * Like `kvidx_apply_engine_batch`, the decoded batch applied as one offset batch at `offset`
 * (>= 1; see `kvidx_apply_events_at`): skipped whole when `offset` is at or below the
 * worker's watermark, else applied under one hold of the worker's lock and the watermark
 * becomes `offset`. `offset == 0` is `KVIDX_ERR_INVALID_ARGUMENT` (checked before the payload
 * is read). A skipped batch returns `KVIDX_OK` (see `kvidx_get_replica_stats`).
 *
 * # Safety
 * As `kvidx_apply_engine_batch`.
 */
enum kvidx_status kvidx_apply_engine_batch_at(const struct kvidx_indexer *indexer,
                                              uint32_t format,
                                              uint64_t worker_id,
                                              uint32_t dp_rank,
                                              const uint8_t *payload,
                                              size_t len,
                                              uint64_t offset,
                                              struct kvidx_engine_batch_result *out);

/**
 * Creates an engine feed for one wire format (a `kvidx_engine_format` value). `flags` is 0
 * (the recommended reaction without a replay socket: clear the worker on gaps and on
 * restarts; GPU medium and group 0 only; stores with extra keys indexed under their
 * namespace, docs/contract.md section 3.1) or a bitwise OR of `kvidx_feed_flag` values.
 *
 * Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `format` or flag bit, or two flags that
 * exclude each other (two `KVIDX_FEED_UNKNOWN_MEDIUM_*`; `KVIDX_FEED_HASH_TOKENS_ONLY` with
 * `KVIDX_FEED_SKIP_EXTRAS`),
 * `KVIDX_ERR_NULL_POINTER` for a NULL `out`. Release the feed with `kvidx_engine_feed_free`.
 *
 * # Safety
 * `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_new(uint32_t format,
                                        uint32_t flags,
                                        struct kvidx_engine_feed **out);

/**
 * Releases a feed. NULL is a no-op; a poisoned feed is freed too. Must not overlap any other
 * call on the same feed.
 *
 * # Safety
 * `feed` is NULL or a feed from `kvidx_engine_feed_new` not freed yet.
 */
void kvidx_engine_feed_free(struct kvidx_engine_feed *feed);

/**
 * Like `kvidx_apply_engine_batch`, through a feed that tracks the publisher's batch sequence:
 * `seq_frame` is the second ZMQ frame (exactly 8 bytes, big-endian), or `(NULL, 0)` for no
 * tracking. After a gap or a restart the worker is cleared first (unless the feed's flags say
 * otherwise); `out->seq_status` tells which. A malformed payload applies nothing and leaves
 * the tracked sequence unchanged, so the next batch reports a gap.
 *
 * Returns `KVIDX_ERR_MALFORMED` for a payload that is not a valid batch of the feed's format
 * and `KVIDX_ERR_TOO_LARGE` for one above `KVIDX_ENGINE_MAX_PAYLOAD` (both counted in
 * `batches_malformed`); `KVIDX_ERR_INVALID_ARGUMENT` for a `seq_frame` that is not 8 bytes
 * (checked before the payload is read; counted nowhere); `KVIDX_ERR_NULL_POINTER` for NULL
 * `feed`, `indexer` or `out`; `KVIDX_ERR_POISONED` if an earlier call on this feed, or on
 * the indexer, panicked. A panic while decoding poisons the feed only; a panic inside the
 * indexer poisons the indexer and the feed. Calls on one feed are serialised.
 *
 * # Safety
 * `feed` and `indexer` are NULL or live handles; `seq_frame` is readable for `seq_len`
 * bytes, `payload` for `len` bytes; `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_apply(const struct kvidx_engine_feed *feed,
                                          const struct kvidx_indexer *indexer,
                                          uint64_t worker_id,
                                          uint32_t dp_rank,
                                          const uint8_t *seq_frame,
                                          size_t seq_len,
                                          const uint8_t *payload,
                                          size_t len,
                                          struct kvidx_engine_batch_result *out);

/**
 * Like `kvidx_engine_feed_apply`, the decoded batch, with the clear a gap or restart calls
 * for first, applied as one offset batch at `offset` (>= 1; see `kvidx_apply_events_at`):
 * skipped whole, clear included, when `offset` is at or below the worker's watermark. The
 * sequence is tracked either way. `offset == 0` is `KVIDX_ERR_INVALID_ARGUMENT` (checked
 * before the payload is read; nothing recorded). A replica consuming a stream passes each
 * message's stream sequence as `offset`, so replaying an overlapping range is idempotent.
 *
 * # Safety
 * As `kvidx_engine_feed_apply`.
 */
enum kvidx_status kvidx_engine_feed_apply_at(const struct kvidx_engine_feed *feed,
                                             const struct kvidx_indexer *indexer,
                                             uint64_t worker_id,
                                             uint32_t dp_rank,
                                             const uint8_t *seq_frame,
                                             size_t seq_len,
                                             const uint8_t *payload,
                                             size_t len,
                                             uint64_t offset,
                                             struct kvidx_engine_batch_result *out);

/**
 * Like `kvidx_engine_feed_apply_at`, with the engine epoch the batch came in (`*epoch`: the
 * bridge's id of one engine connection, the `Kvidx-Engine-Epoch` header; `epoch == NULL`:
 * not known). A publisher whose epoch differs from the one of its previous batch restarted:
 * `out->seq_status` is `KVIDX_SEQ_RESTART`, the worker is cleared first (unless the feed's
 * flags say otherwise; in the offset batch, so skipped with it), and the publisher's
 * sequence tracking starts afresh at this batch, so no sequence of the new epoch is taken
 * for a batch of the old one. A batch without an epoch keeps the publisher's epoch.
 *
 * Statuses as `kvidx_engine_feed_apply_at`.
 *
 * # Safety
 * As `kvidx_engine_feed_apply`; `epoch` is NULL or readable.
 */
enum kvidx_status kvidx_engine_feed_apply_epoch_at(const struct kvidx_engine_feed *feed,
                                                   const struct kvidx_indexer *indexer,
                                                   uint64_t worker_id,
                                                   uint32_t dp_rank,
                                                   const uint64_t *epoch,
                                                   const uint8_t *seq_frame,
                                                   size_t seq_len,
                                                   const uint8_t *payload,
                                                   size_t len,
                                                   uint64_t offset,
                                                   struct kvidx_engine_batch_result *out);

/**
 * Copies a feed's counters to `*out`. Every counter saturates at `UINT64_MAX`.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_POISONED` if an
 * earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_stats(const struct kvidx_engine_feed *feed,
                                          struct kvidx_engine_stats *out);

/**
 * Forgets one publisher `(worker_id, dp_rank)` in a feed: its tracked sequence (its next
 * batch reports `KVIDX_SEQ_FIRST`) and its event-id counter, about 100 bytes. The index is
 * not touched. Writes to `*out_known` (may be NULL) 1 if the feed knew the publisher, else 0.
 * Forgetting an unknown publisher is a valid no-op.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed`, `KVIDX_ERR_POISONED` if an earlier call
 * on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out_known` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_forget(const struct kvidx_engine_feed *feed,
                                           uint64_t worker_id,
                                           uint32_t dp_rank,
                                           uint8_t *out_known);

/**
 * Removes every dp rank of a worker from the indexer (exactly `kvidx_remove_worker`) and
 * forgets its publishers in the feed, so a worker that is gone costs the feed nothing. Use it
 * instead of `kvidx_remove_worker` for workers fed through this feed.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `indexer`; `KVIDX_ERR_POISONED` if
 * either was poisoned by an earlier panic (then nothing is removed or forgotten); otherwise
 * what `kvidx_remove_worker` returns (the feed forgets the worker only on `KVIDX_OK`).
 *
 * # Safety
 * `feed` and `indexer` are NULL or live handles.
 */
enum kvidx_status kvidx_engine_feed_remove_worker(const struct kvidx_engine_feed *feed,
                                                  const struct kvidx_indexer *indexer,
                                                  uint64_t worker_id);

/**
 * Removes one `(worker_id, dp_rank)` from the indexer (exactly `kvidx_remove_worker_dp_rank`)
 * and forgets that publisher in the feed. Statuses as `kvidx_engine_feed_remove_worker`.
 *
 * # Safety
 * `feed` and `indexer` are NULL or live handles.
 */
enum kvidx_status kvidx_engine_feed_remove_worker_dp_rank(const struct kvidx_engine_feed *feed,
                                                          const struct kvidx_indexer *indexer,
                                                          uint64_t worker_id,
                                                          uint32_t dp_rank);

/**
 * Writes to `*out` the number of publishers `(worker_id, dp_rank)` the feed holds state for
 * (each about 100 bytes): every publisher it applied a batch for and has not forgotten.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_POISONED` if an
 * earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_publishers(const struct kvidx_engine_feed *feed, uint64_t *out);

/**
 * Writes a feed's per-publisher tracking state (each publisher's next expected sequence,
 * engine epoch and next event id; 40 bytes per publisher plus 20) to `out[0 .. *out_len]`.
 * If `out_cap` is smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the size needed in
 * `*out_len` and `out` untouched (`out` may then be NULL with `out_cap == 0`). The counters
 * are not included. Save it while no call applies a batch through the feed, at the position
 * the index's snapshot is taken for (a replica: the stream sequence of the last message fed).
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out_len`, `KVIDX_ERR_POISONED` if an
 * earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out` is writable for `out_cap` bytes; `out_len` is NULL or
 * writable.
 */
enum kvidx_status kvidx_engine_feed_save_state(const struct kvidx_engine_feed *feed,
                                               uint8_t *out,
                                               size_t out_cap,
                                               size_t *out_len);

/**
 * Replaces a feed's per-publisher tracking state with bytes `kvidx_engine_feed_save_state`
 * wrote for a feed of the same format; the counters are kept.
 *
 * Returns `KVIDX_ERR_MALFORMED` for bytes that are not a saved feed state (then nothing
 * changes), `KVIDX_ERR_INVALID_ARGUMENT` for the state of a feed of another format,
 * `KVIDX_ERR_NULL_POINTER` for a NULL `feed` (or a NULL `state` with `len > 0`),
 * `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `state` is readable for `len` bytes.
 */
enum kvidx_status kvidx_engine_feed_restore_state(const struct kvidx_engine_feed *feed,
                                                  const uint8_t *state,
                                                  size_t len);

/**
 * Applies or queues `n` events as offset batches: the events of each worker named in the
 * array, in array order, form one batch at `offset` (>= 1). When a batch is applied (in its
 * worker's order), it is skipped whole if `offset` is at or below the worker's watermark;
 * otherwise all its events are applied under one hold of the worker's lock (no lookup or
 * snapshot sees part of it) and the watermark becomes `offset`. A batch at an offset makes
 * its worker known, even if empty or rejected.
 *
 * Every event's shape is checked first (as `kvidx_apply_events`); `offset == 0` is
 * `KVIDX_ERR_INVALID_ARGUMENT`; then nothing is applied or queued. Synchronous mode returns
 * `KVIDX_ERR_PARENT_NOT_FOUND` when a STORED of an applied batch was rejected (the rest of the
 * batch still applies); a skipped batch is `KVIDX_OK` (see `kvidx_get_replica_stats`).
 * `(NULL, 0)` is a valid empty array (nothing happens).
 *
 * # Safety
 * `indexer` is NULL or a live handle; `events` is NULL or points to `n` readable events whose
 * arrays are readable for their lengths.
 */
enum kvidx_status kvidx_apply_events_at(const struct kvidx_indexer *indexer,
                                        const struct kvidx_event *events,
                                        size_t n,
                                        uint64_t offset);

/**
 * Writes to `*out` the watermark of `(worker_id, dp_rank)`: the offset of the last batch
 * applied to it (or restored from a snapshot); 0 when the worker is unknown or has none. With
 * event threads, `kvidx_flush` first to include every batch accepted.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `out` is NULL or writable.
 */
enum kvidx_status kvidx_watermark(const struct kvidx_indexer *indexer,
                                  uint64_t worker_id,
                                  uint32_t dp_rank,
                                  uint64_t *out);

/**
 * Copies the offset batch counters to `*out`.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `out` is NULL or writable.
 */
enum kvidx_status kvidx_get_replica_stats(const struct kvidx_indexer *indexer,
                                          struct kvidx_replica_stats *out);

/**
 * Writes the indexer's state as a snapshot to `sink` (called with `user` and consecutive
 * chunks of the stream, in order) while events keep being applied: each worker's section is
 * taken under that worker's lock, so it is one state of the worker (never part of a batch),
 * with its watermark. Memory: one worker's section at a time. With event threads,
 * `kvidx_flush` first to include every event accepted. `*out` (if `out` is not NULL) gets
 * the snapshot's totals.
 *
 * Returns `KVIDX_ERR_IO` when the sink returns nonzero (the stream is then incomplete),
 * `KVIDX_ERR_NULL_POINTER` for a NULL handle or sink.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `sink` may be called with `user` from the calling
 * thread and must return normally; `out` is NULL or writable.
 */
enum kvidx_status kvidx_snapshot_write(const struct kvidx_indexer *indexer,
                                       kvidx_snapshot_sink sink,
                                       void *user,
                                       struct kvidx_snapshot_info *out);

/**
 * Restores a snapshot read from `source` into the indexer, which must be empty (it never
 * knew a worker, or every worker was removed; else `KVIDX_ERR_INVALID_ARGUMENT`). Afterwards
 * it answers and behaves exactly as the indexer that wrote the snapshot, watermarks
 * included. Apply no event while it runs (lookups are fine). `*out` (if not NULL) gets the
 * snapshot's totals.
 *
 * Returns `KVIDX_ERR_MALFORMED` for input that is not a valid snapshot (truncated, corrupted,
 * foreign, a newer format version, a section claiming more than it holds) and `KVIDX_ERR_IO`
 * only when the source returns nonzero: either way the indexer is left empty and usable.
 * Memory: the index it builds plus a constant; what the input claims is never read ahead or
 * allocated. `KVIDX_ERR_INVALID_ARGUMENT` also when a
 * positional snapshot with orphans known only by identity is restored into the radix backend
 * (docs/snapshots.md).
 *
 * # Safety
 * `indexer` is NULL or a live handle; `source` may be called with `user` from the calling
 * thread and must return normally; `out` is NULL or writable.
 */
enum kvidx_status kvidx_snapshot_restore(const struct kvidx_indexer *indexer,
                                         kvidx_snapshot_source source,
                                         void *user,
                                         struct kvidx_snapshot_info *out);

/**
 * `kvidx_snapshot_write` to a file created (or truncated) at `path`. `KVIDX_ERR_IO` when it
 * cannot be created or written (a partial file may be left behind).
 *
 * # Safety
 * `indexer` is NULL or a live handle; `path` is NULL or a NUL-terminated string; `out` is NULL
 * or writable.
 */
enum kvidx_status kvidx_snapshot_write_file(const struct kvidx_indexer *indexer,
                                            const char *path,
                                            struct kvidx_snapshot_info *out);

/**
 * `kvidx_snapshot_restore` from the file at `path`. `KVIDX_ERR_IO` when it cannot be opened
 * or read.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `path` is NULL or a NUL-terminated string; `out` is NULL
 * or writable.
 */
enum kvidx_status kvidx_snapshot_restore_file(const struct kvidx_indexer *indexer,
                                              const char *path,
                                              struct kvidx_snapshot_info *out);

/**
 * Writes to `*out_next` the next sequence the feed expects from the publisher
 * `(worker_id, dp_rank)` (the rank the batches were applied to): one past its last tracked
 * batch, or 0 for a publisher it has not tracked (a publisher's sequence starts at 0). A batch
 * whose sequence is above it follows missing batches, the publisher's first batch included:
 * a caller with the engine's replay socket asks it from `*out_next` before applying the
 * batch (with `KVIDX_FEED_NO_CLEAR_ON_GAP`). Changes nothing.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out_next`, `KVIDX_ERR_POISONED` if
 * an earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out_next` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_next_seq(const struct kvidx_engine_feed *feed,
                                             uint64_t worker_id,
                                             uint32_t dp_rank,
                                             uint64_t *out_next);

/**
 * Copies a feed's counters of publishers first seen above sequence 0 to `*out`. Every
 * counter saturates at `UINT64_MAX`. The batch itself reports `KVIDX_SEQ_FIRST`; its
 * sequence is the number of batches missed from the start. The worker is not cleared for
 * them (the feed applied nothing of that publisher before).
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_POISONED` if an
 * earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_start_stats(const struct kvidx_engine_feed *feed,
                                                struct kvidx_engine_start_stats *out);

/**
 * Turns the feed's hash check on (off by default), replacing any earlier check and its
 * counts. `algorithm` is a `kvidx_hash_algorithm`; `seed[0 .. seed_len]` (UTF-8) is vLLM's
 * `NONE_HASH` seed: the engine's `PYTHONHASHSEED`, or `"vllm-none-hash"` for the sha256
 * algorithms when it is unset (SGLang ignores it); `block_size` is the router's block size
 * (0: each store's own). The check changes nothing in what the feed indexes; while it is on,
 * the feed decodes every field of each event (up to 32 bytes of memory per payload byte).
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or a NULL `seed` with `seed_len > 0`,
 * `KVIDX_ERR_INVALID_ARGUMENT` for an unknown algorithm or a seed that is not UTF-8,
 * `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `seed` is readable for `seed_len` bytes.
 */
enum kvidx_status kvidx_engine_feed_set_hash_check(const struct kvidx_engine_feed *feed,
                                                   uint32_t algorithm,
                                                   const uint8_t *seed,
                                                   size_t seed_len,
                                                   uint32_t block_size);

/**
 * Turns the feed's hash check off and drops its state and counts.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed`, `KVIDX_ERR_POISONED` if an earlier
 * call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed.
 */
enum kvidx_status kvidx_engine_feed_clear_hash_check(const struct kvidx_engine_feed *feed);

/**
 * Copies the hash check's counts for the publisher `(worker_id, dp_rank)` (zeros for one it
 * saw no store of) to `*out`.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_INVALID_ARGUMENT`
 * when the check is off, `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_hash_check_stats(const struct kvidx_engine_feed *feed,
                                                     uint64_t worker_id,
                                                     uint32_t dp_rank,
                                                     struct kvidx_hash_check_stats *out);

/**
 * Copies the hash check's counts summed over every publisher (those forgotten or removed
 * through the feed included) to `*out`.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_INVALID_ARGUMENT`
 * when the check is off, `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `out` is NULL or writable.
 */
enum kvidx_status kvidx_engine_feed_hash_check_totals(const struct kvidx_engine_feed *feed,
                                                      struct kvidx_hash_check_stats *out);

/**
 * Computes llm-d's request keys of every full block of `block_size` tokens: FNV-64a over
 * the canonical CBOR of `[parent, block tokens, null]`, chained from the root key
 * `FNV-64a(CBOR [FNV-64a(seed), null, model])`. `seed[0 .. seed_len]` is llm-d's
 * `HashSeed` (UTF-8; llm-d's default is empty), `model[0 .. model_len]` the model or LoRA
 * adapter name (UTF-8). Trailing tokens that do not fill a block are ignored.
 *
 * On `KVIDX_OK`, `out[0 .. *out_len]` holds `num_tokens / block_size` keys. If `out_cap` is
 * smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count in `*out_len` and `out`
 * untouched. `block_size == 0` or a seed or model that is not UTF-8 is
 * `KVIDX_ERR_INVALID_ARGUMENT`. Thread-safe; no state.
 *
 * # Safety
 * `tokens` is readable for `num_tokens` entries, `seed` for `seed_len` bytes, `model` for
 * `model_len` bytes; `out` is writable for `out_cap` entries; `out_len` is NULL or writable.
 */
enum kvidx_status kvidx_llmd_request_keys(const uint32_t *tokens,
                                          size_t num_tokens,
                                          uint32_t block_size,
                                          const uint8_t *seed,
                                          size_t seed_len,
                                          const uint8_t *model,
                                          size_t model_len,
                                          uint64_t *out,
                                          size_t out_cap,
                                          size_t *out_len);

/**
 * Sets the keys the feed indexes stores under: llm-d's request keys with llm-d's
 * `seed[0 .. seed_len]` and the model name `model[0 .. model_len]` (a store with a LoRA
 * adapter roots at the adapter's name), instead of kvidx's local hashes (the default). A
 * store those keys cannot express (a cache salt, multimodal items, prompt embeddings,
 * lookahead tokens) or whose parent the feed never saw is skipped (`skipped_unhashable`).
 * Set it before the feed's first batch.
 *
 * Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed`, or a NULL `seed` or `model` with a
 * length > 0, `KVIDX_ERR_INVALID_ARGUMENT` for a seed or model that is not UTF-8,
 * `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
 *
 * # Safety
 * `feed` is NULL or a live feed; `seed` and `model` are readable for their lengths.
 */
enum kvidx_status kvidx_engine_feed_set_llmd_keys(const struct kvidx_engine_feed *feed,
                                                  const uint8_t *seed,
                                                  size_t seed_len,
                                                  const uint8_t *model,
                                                  size_t model_len);

/**
 * Returns the default prediction settings: `{0, 0, KVIDX_CLOCK_MONOTONIC}` (64 MiB, no
 * per-worker bound, the system's monotonic clock).
 */
struct kvidx_prediction_config kvidx_prediction_config_default(void);

/**
 * Like `kvidx_new_with_limits`, with prediction settings. `config`, `limits` and
 * `predictions` may each be NULL for their defaults (`kvidx_new` and
 * `kvidx_new_with_limits` use the default prediction settings).
 *
 * Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown clock, a number the library cannot
 * represent, and everything `kvidx_new_with_limits` checks; otherwise as `kvidx_new`.
 * `*out` is written only on success; release the handle with `kvidx_free`.
 *
 * # Safety
 * `config`, `limits` and `predictions` are each NULL or readable; `out` is NULL or writable.
 */
enum kvidx_status kvidx_new_with_predictions(const struct kvidx_config *config,
                                             const struct kvidx_queue_limits *limits,
                                             const struct kvidx_prediction_config *predictions,
                                             struct kvidx_indexer **out);

/**
 * Credits `(worker_id, dp_rank)` with the chain of `num_hashes` local hashes (a request's
 * blocks from its first) for `ttl_ns` nanoseconds from now on the indexer's clock: until
 * then, or until events settle it, `kvidx_find_matches_predicted` counts these blocks for
 * the worker; `kvidx_find_matches` never sees them. Blocks already predicted for the worker
 * are refreshed. A STORED of the worker holding a predicted block confirms it (the
 * prediction is dropped, the block is held); a REMOVED of it, a CLEARED of the worker and
 * the worker's removal drop it. Applied before the call returns, even with event threads.
 * Bounded by the settings' `max_bytes` and `worker_capacity` (least recently predicted
 * dropped first). An empty chain or a zero TTL credits nothing.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `local_hashes` is readable for `num_hashes` entries.
 */
enum kvidx_status kvidx_predict(const struct kvidx_indexer *indexer,
                                uint64_t worker_id,
                                uint32_t dp_rank,
                                const uint64_t *local_hashes,
                                size_t num_hashes,
                                uint64_t ttl_ns);

/**
 * Finds the workers holding or predicted to hold a prefix of the query, with both depths
 * (`kvidx_predicted_match`): every worker of `kvidx_find_matches` with the same confirmed
 * depth, and every worker predicted to hold the query's first block; ordered by predicted
 * depth, deepest first, then confirmed depth, deepest first, then `worker_id`, then
 * `dp_rank`. With no prediction held it costs what `kvidx_find_matches` costs.
 *
 * Buffers as `kvidx_find_matches`: on `KVIDX_OK`, `out[0 .. *out_len]` holds the matches;
 * if more exist than `out_cap`, `KVIDX_ERR_BUFFER_TOO_SMALL` with the count needed in
 * `*out_len` and `out` untouched.
 *
 * # Safety
 * As `kvidx_find_matches`, with `out` writable for `out_cap` `kvidx_predicted_match` entries.
 */
enum kvidx_status kvidx_find_matches_predicted(const struct kvidx_indexer *indexer,
                                               const uint64_t *local_hashes,
                                               size_t num_hashes,
                                               struct kvidx_predicted_match *out,
                                               size_t out_cap,
                                               size_t *out_len);

/**
 * Writes to `*out_ns` the time on the indexer's clock, in nanoseconds: since the indexer
 * was created (monotonic) or as last set (manual).
 *
 * # Safety
 * `indexer` is NULL or a live handle; `out_ns` is NULL or writable.
 */
enum kvidx_status kvidx_now(const struct kvidx_indexer *indexer, uint64_t *out_ns);

/**
 * Sets a manual clock to `now_ns` nanoseconds. `KVIDX_ERR_INVALID_ARGUMENT` with the
 * monotonic clock or for a time before the clock's current one (it never goes back).
 *
 * # Safety
 * `indexer` is NULL or a live handle.
 */
enum kvidx_status kvidx_set_time(const struct kvidx_indexer *indexer, uint64_t now_ns);

/**
 * Moves a manual clock forward by `by_ns` nanoseconds (saturating).
 * `KVIDX_ERR_INVALID_ARGUMENT` with the monotonic clock.
 *
 * # Safety
 * `indexer` is NULL or a live handle.
 */
enum kvidx_status kvidx_advance_time(const struct kvidx_indexer *indexer, uint64_t by_ns);

/**
 * Copies the state and counters of the indexer's predictions to `*out`.
 *
 * # Safety
 * `indexer` is NULL or a live handle; `out` is NULL or writable.
 */
enum kvidx_status kvidx_get_prediction_stats(const struct kvidx_indexer *indexer,
                                             struct kvidx_prediction_stats *out);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* KVIDX_H */
