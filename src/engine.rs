//! Engine KV events through the C ABI: decode the msgpack `KVEventBatch` payloads that vLLM,
//! SGLang and TensorRT-LLM publish and apply them to an indexer ([`kvidx_core::engine`]).
//!
//! - `kvidx_apply_engine_batch`: one payload, no sequence tracking, default filters.
//! - `kvidx_engine_feed_*`: a feed handle that tracks each publisher's 8-byte big-endian
//!   batch sequence, reports gaps and restarts, clears the worker on them (unless told not
//!   to, e.g. because the caller fetches the missing range from the engine's replay socket)
//!   and keeps counters.
//!
//! Status split: the arguments (format, flags, the sequence frame's length, pointers)
//! are checked first; a bad one is `KVIDX_ERR_INVALID_ARGUMENT` (or `KVIDX_ERR_NULL_POINTER`).
//! Only then are the payload bytes decoded: bytes that are not a valid `KVEventBatch` of the
//! given format (the empty payload included) are `KVIDX_ERR_MALFORMED`. Either way nothing is
//! applied and a feed's tracked sequence is unchanged.

use std::sync::{Mutex, MutexGuard};

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{
    kvidx_engine_feed, kvidx_engine_format, kvidx_feed_flag, kvidx_indexer, kvidx_seq_status,
    kvidx_status,
};
use super::handle::{self, Handle};
use kvidx_core::engine::{
    self, ApplyOptions, BatchReport, DecodeError, EngineFeed, EngineStats, EventSink, ExtrasPolicy,
    FeedConfig, FeedError, Format, MediaFilter, SeqStatus,
};
use kvidx_core::{BatchOutcome, Error, Event, Indexer, Tier, Worker};

/// `dp_rank` argument: take the rank from the batch envelope (0 when the envelope has none).
/// A sentinel, not an enum value: `UINT32_MAX` does not fit a C enum before C23.
pub const KVIDX_DP_RANK_FROM_BATCH: u32 = u32::MAX;

/// The largest engine payload accepted, in bytes (32 MiB); a larger one is
/// `KVIDX_ERR_TOO_LARGE` and nothing of it is read.
pub const KVIDX_ENGINE_MAX_PAYLOAD: usize = 32 << 20;

const _: () = assert!(KVIDX_ENGINE_MAX_PAYLOAD == engine::MAX_PAYLOAD_BYTES);

/// Every `kvidx_feed_flag` bit.
const KNOWN_FLAGS: u32 = kvidx_feed_flag::KVIDX_FEED_NO_CLEAR_ON_GAP as u32
    | kvidx_feed_flag::KVIDX_FEED_NO_CLEAR_ON_RESTART as u32
    | kvidx_feed_flag::KVIDX_FEED_ALL_MEDIA as u32
    | kvidx_feed_flag::KVIDX_FEED_ALL_GROUPS as u32
    | kvidx_feed_flag::KVIDX_FEED_HASH_TOKENS_ONLY as u32
    | kvidx_feed_flag::KVIDX_FEED_SKIP_EXTRAS as u32
    | UNKNOWN_MEDIUM_FLAGS;

/// The flags that say what to do with stores with extra keys (at most one of them).
const EXTRAS_FLAGS: u32 = kvidx_feed_flag::KVIDX_FEED_HASH_TOKENS_ONLY as u32
    | kvidx_feed_flag::KVIDX_FEED_SKIP_EXTRAS as u32;

/// The flags that say which tier an unknown medium is on (at most one of them).
const UNKNOWN_MEDIUM_FLAGS: u32 = kvidx_feed_flag::KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE as u32
    | kvidx_feed_flag::KVIDX_FEED_UNKNOWN_MEDIUM_HOST as u32
    | kvidx_feed_flag::KVIDX_FEED_UNKNOWN_MEDIUM_DISK as u32;

/// What applying one engine batch did.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct kvidx_engine_batch_result {
    /// Engine events in the batch.
    pub events_decoded: u64,
    /// Index events applied (synchronous mode) or queued (pooled mode).
    pub events_submitted: u64,
    /// Synchronous mode: submitted STORED events rejected for a missing parent.
    pub events_rejected: u64,
    /// Engine events with an unknown tag (skipped).
    pub skipped_unknown_tag: u64,
    /// Engine events filtered out by medium or KV-cache group.
    pub skipped_filtered: u64,
    /// STORED events whose local hashes cannot be computed (no tokens, token count not
    /// `block_size * blocks`, LoRA id without a name, extra keys no query can name, or any
    /// extra keys under `KVIDX_FEED_SKIP_EXTRAS`).
    pub skipped_unhashable: u64,
    /// GAP and RESTART: the sequence number that was expected.
    pub seq_expected: u64,
    /// GAP: how many batches were missed.
    pub batches_missed: u64,
    /// The dp rank the events were applied to.
    pub dp_rank: u32,
    /// A `KVIDX_SEQ_*` value.
    pub seq_status: u32,
    /// 1 if the worker was cleared before the batch (gap or restart reaction), else 0.
    pub worker_cleared: u8,
}

/// Counters of an engine feed.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct kvidx_engine_stats {
    /// Batches decoded and applied.
    pub batches: u64,
    /// Batches refused as malformed (nothing applied, sequence not recorded).
    pub batches_malformed: u64,
    /// Engine events decoded.
    pub events_decoded: u64,
    /// Index events submitted.
    pub events_submitted: u64,
    /// Synchronous mode: submitted STORED events the index rejected.
    pub events_rejected: u64,
    /// Engine events skipped (unknown tag, filtered, unhashable).
    pub events_skipped: u64,
    /// Sequence gaps seen.
    pub gaps: u64,
    /// Batches missed, summed over gaps.
    pub batches_missed: u64,
    /// Publisher restarts seen.
    pub restarts: u64,
    /// Workers cleared as a reaction to a gap or restart.
    pub workers_cleared: u64,
}

/// The format of a `kvidx_engine_format` value.
fn format_of(value: u32) -> Result<Format, kvidx_status> {
    use kvidx_engine_format::*;
    match value {
        v if v == KVIDX_ENGINE_VLLM as u32 => Ok(Format::Vllm),
        v if v == KVIDX_ENGINE_SGLANG as u32 => Ok(Format::Sglang),
        v if v == KVIDX_ENGINE_TRTLLM as u32 => Ok(Format::TrtLlm),
        _ => Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
    }
}

fn rank_of(dp_rank: u32) -> Option<u32> {
    (dp_rank != KVIDX_DP_RANK_FROM_BATCH).then_some(dp_rank)
}

fn feed_error(error: FeedError) -> kvidx_status {
    match error {
        FeedError::Decode(DecodeError::TooLarge { .. }) => kvidx_status::KVIDX_ERR_TOO_LARGE,
        FeedError::Decode(_) => kvidx_status::KVIDX_ERR_MALFORMED,
        FeedError::Index(e) => c_convert::status_of(e),
    }
}

fn result_of(r: &BatchReport) -> kvidx_engine_batch_result {
    use kvidx_seq_status::*;
    let (seq_status, seq_expected) = match r.seq {
        None => (KVIDX_SEQ_UNTRACKED, 0),
        Some(SeqStatus::First) => (KVIDX_SEQ_FIRST, 0),
        Some(SeqStatus::InOrder) => (KVIDX_SEQ_IN_ORDER, 0),
        Some(SeqStatus::Gap { expected, .. }) => (KVIDX_SEQ_GAP, expected),
        Some(SeqStatus::Restart { expected, .. }) => (KVIDX_SEQ_RESTART, expected),
    };
    kvidx_engine_batch_result {
        events_decoded: r.events_decoded,
        events_submitted: r.events_submitted,
        events_rejected: r.events_rejected,
        skipped_unknown_tag: r.skipped.unknown_tag,
        skipped_filtered: r.skipped.filtered,
        skipped_unhashable: r.skipped.unhashable,
        seq_expected,
        batches_missed: r.seq.map_or(0, |s| s.missed()),
        dp_rank: r.dp_rank,
        seq_status: seq_status as u32,
        worker_cleared: u8::from(r.cleared_worker),
    }
}

fn stats_of(s: EngineStats) -> kvidx_engine_stats {
    kvidx_engine_stats {
        batches: s.batches,
        batches_malformed: s.batches_malformed,
        events_decoded: s.events_decoded,
        events_submitted: s.events_submitted,
        events_rejected: s.events_rejected,
        events_skipped: s.events_skipped,
        gaps: s.gaps,
        batches_missed: s.batches_missed,
        restarts: s.restarts,
        workers_cleared: s.workers_cleared,
    }
}

/// The indexer as the feed's event sink, called from inside the feed's boundary: a panic
/// inside the indexer poisons the indexer handle (and, unwinding on, the feed's), while a
/// panic in the feed's own decoding or bookkeeping poisons the feed only.
struct IndexerSink<'a>(&'a Handle<Indexer>);

impl EventSink for IndexerSink<'_> {
    fn apply_event(&self, event: Event) -> Result<(), Error> {
        // A poisoned indexer refuses further events, like a stopped one.
        self.0
            .run_nested(|ix| ix.apply_event(event))
            .unwrap_or(Err(Error::ShutDown))
    }

    fn apply_events(&self, events: Vec<Event>) -> Result<u64, Error> {
        self.0
            .run_nested(|ix| EventSink::apply_events(ix, events))
            .unwrap_or(Err(Error::ShutDown))
    }

    fn apply_batch_at(
        &self,
        worker: Worker,
        offset: u64,
        events: Vec<Event>,
    ) -> Result<BatchOutcome, Error> {
        self.0
            .run_nested(|ix| ix.apply_batch_at(worker, offset, events))
            .unwrap_or(Err(Error::ShutDown))
    }
}

/// The indexer handle a feed call writes to: NULL and poison are checked before the payload.
///
/// # Safety
/// `indexer` is NULL or a live handle for the whole call.
unsafe fn indexer_for_feed<'a>(
    indexer: *const kvidx_indexer,
) -> Result<&'a Handle<Indexer>, kvidx_status> {
    // SAFETY: the caller guarantees a NULL or live handle.
    let handle = unsafe { handle::borrow(indexer) }?;
    if handle.is_poisoned() {
        return Err(kvidx_status::KVIDX_ERR_POISONED);
    }
    Ok(handle)
}

/// Removes a worker from the indexer (`remove`, inside the indexer's handle) and then, if that
/// succeeded, forgets it in the feed (`forget`), holding the feed's lock throughout.
///
/// # Safety
/// `indexer` is NULL or a live handle for the whole call.
unsafe fn remove_through_feed(
    feed: &Mutex<EngineFeed>,
    indexer: *const kvidx_indexer,
    remove: impl FnOnce(&Indexer) -> Result<(), Error>,
    forget: impl FnOnce(&mut EngineFeed),
) -> Result<(), kvidx_status> {
    // SAFETY: the caller guarantees `indexer` is NULL or live for the whole call.
    let ix = unsafe { indexer_for_feed(indexer) }?;
    let mut feed = lock(feed)?;
    ix.run_nested(remove)
        .ok_or(kvidx_status::KVIDX_ERR_POISONED)?
        .map_err(c_convert::status_of)?;
    forget(&mut feed);
    Ok(())
}

/// The feed behind the lock (a feed whose lock a panic poisoned is itself poisoned, and
/// never gets here).
pub(crate) fn lock(feed: &Mutex<EngineFeed>) -> Result<MutexGuard<'_, EngineFeed>, kvidx_status> {
    feed.lock().map_err(|_| kvidx_status::KVIDX_ERR_POISONED)
}

/// Decodes one engine payload (the third frame of the engine's ZMQ message) completely, then
/// applies its events to `(worker_id, dp_rank)`; `dp_rank == KVIDX_DP_RANK_FROM_BATCH` takes
/// the envelope's rank. Only the GPU medium and KV-cache group 0 are indexed; local hashes
/// come from the published tokens (see docs/engine-events.md). No sequence tracking: use a
/// feed (`kvidx_engine_feed_apply`) for that. Decoding holds, besides the payload, the index
/// events it produces and one decoded event at a time.
///
/// Returns `KVIDX_ERR_MALFORMED` when the bytes are not a valid batch of `format` (not
/// msgpack, truncated, trailing bytes, a bad envelope, event or field type; also an empty
/// payload), `KVIDX_ERR_TOO_LARGE` when `len > KVIDX_ENGINE_MAX_PAYLOAD`: nothing is applied.
/// Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `format` (checked before the payload is
/// read), `KVIDX_ERR_NULL_POINTER` for a NULL handle or `out`, or NULL `payload` with
/// `len > 0`. In synchronous mode a STORED whose parent is missing is counted in
/// `out->events_rejected` and the call still returns `KVIDX_OK`.
///
/// # Safety
/// `indexer` is NULL or a live handle; `payload` is readable for `len` bytes; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_engine_batch(
    indexer: *const kvidx_indexer,
    format: u32,
    worker_id: u64,
    dp_rank: u32,
    payload: *const u8,
    len: usize,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: the caller guarantees what `apply_batch` requires (the same `# Safety`).
        unsafe { apply_batch(ix, format, worker_id, dp_rank, payload, len, None, out) }
    })
}

/// Like `kvidx_apply_engine_batch`, the decoded batch applied as one offset batch at `offset`
/// (>= 1; see `kvidx_apply_events_at`): skipped whole when `offset` is at or below the
/// worker's watermark, else applied under one hold of the worker's lock and the watermark
/// becomes `offset`. `offset == 0` is `KVIDX_ERR_INVALID_ARGUMENT` (checked before the payload
/// is read). A skipped batch returns `KVIDX_OK` (see `kvidx_get_replica_stats`).
///
/// # Safety
/// As `kvidx_apply_engine_batch`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvidx_apply_engine_batch_at(
    indexer: *const kvidx_indexer,
    format: u32,
    worker_id: u64,
    dp_rank: u32,
    payload: *const u8,
    len: usize,
    offset: u64,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: the caller guarantees what `apply_batch` requires (the same `# Safety`).
        unsafe { apply_batch(ix, format, worker_id, dp_rank, payload, len, Some(offset), out) }
    })
}

/// The body of `kvidx_apply_engine_batch` (`offset` `None`) and `kvidx_apply_engine_batch_at`
/// (`Some(offset)`; `Some(0)` is `KVIDX_ERR_INVALID_ARGUMENT`, checked before the payload is
/// read).
///
/// # Safety
/// As `kvidx_apply_engine_batch` (`ix` is the value behind its live handle).
#[allow(clippy::too_many_arguments)]
unsafe fn apply_batch(
    ix: &Indexer,
    format: u32,
    worker_id: u64,
    dp_rank: u32,
    payload: *const u8,
    len: usize,
    offset: Option<u64>,
    out: *mut kvidx_engine_batch_result,
) -> Result<(), kvidx_status> {
    args::required(out)?;
    let format = format_of(format)?;
    if offset == Some(0) {
        return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: the caller guarantees `payload` is readable for `len` bytes.
    let payload = unsafe { args::input(payload, len) }?;
    let (options, rank) = (ApplyOptions::default(), rank_of(dp_rank));
    let report = match offset {
        None => engine::apply_payload(ix, format, worker_id, rank, payload, &options),
        Some(offset) => {
            engine::apply_payload_at(ix, format, worker_id, rank, payload, &options, offset)
        }
    }
    .map_err(feed_error)?;
    // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
    unsafe { out.write(result_of(&report)) };
    Ok(())
}

/// Creates an engine feed for one wire format (a `kvidx_engine_format` value). `flags` is 0
/// (the recommended reaction without a replay socket: clear the worker on gaps and on
/// restarts; GPU medium and group 0 only; stores with extra keys indexed under their
/// namespace, docs/contract.md section 3.1) or a bitwise OR of `kvidx_feed_flag` values.
///
/// Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `format` or flag bit, or two flags that
/// exclude each other (two `KVIDX_FEED_UNKNOWN_MEDIUM_*`; `KVIDX_FEED_HASH_TOKENS_ONLY` with
/// `KVIDX_FEED_SKIP_EXTRAS`),
/// `KVIDX_ERR_NULL_POINTER` for a NULL `out`. Release the feed with `kvidx_engine_feed_free`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_new(
    format: u32,
    flags: u32,
    out: *mut *mut kvidx_engine_feed,
) -> kvidx_status {
    export!(status, {
        use kvidx_feed_flag::*;
        args::required(out)?;
        let format = format_of(format)?;
        if flags & !KNOWN_FLAGS != 0
            || (flags & UNKNOWN_MEDIUM_FLAGS).count_ones() > 1
            || (flags & EXTRAS_FLAGS).count_ones() > 1
        {
            return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
        }
        let on = |flag: kvidx_feed_flag| flags & flag as u32 != 0;
        let mut config = FeedConfig::new(format);
        config.clear_on_gap = !on(KVIDX_FEED_NO_CLEAR_ON_GAP);
        config.clear_on_restart = !on(KVIDX_FEED_NO_CLEAR_ON_RESTART);
        if on(KVIDX_FEED_ALL_MEDIA) {
            config.options.media = MediaFilter::All;
        }
        if on(KVIDX_FEED_ALL_GROUPS) {
            config.options.group = None;
        }
        if on(KVIDX_FEED_HASH_TOKENS_ONLY) {
            config.options.extras = ExtrasPolicy::HashTokensOnly;
        }
        if on(KVIDX_FEED_SKIP_EXTRAS) {
            config.options.extras = ExtrasPolicy::Skip;
        }
        for (flag, tier) in [
            (KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE, Tier::Device),
            (KVIDX_FEED_UNKNOWN_MEDIUM_HOST, Tier::Host),
            (KVIDX_FEED_UNKNOWN_MEDIUM_DISK, Tier::Disk),
        ] {
            if on(flag) {
                config.options.unknown_medium = tier;
            }
        }
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { handle::create::<kvidx_engine_feed>(Mutex::new(EngineFeed::new(config)), out) };
        Ok(())
    })
}

/// Releases a feed. NULL is a no-op; a poisoned feed is freed too. Must not overlap any other
/// call on the same feed.
///
/// # Safety
/// `feed` is NULL or a feed from `kvidx_engine_feed_new` not freed yet.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_free(feed: *mut kvidx_engine_feed) {
    export!(free feed)
}

/// Like `kvidx_apply_engine_batch`, through a feed that tracks the publisher's batch sequence:
/// `seq_frame` is the second ZMQ frame (exactly 8 bytes, big-endian), or `(NULL, 0)` for no
/// tracking. After a gap or a restart the worker is cleared first (unless the feed's flags say
/// otherwise); `out->seq_status` tells which. A malformed payload applies nothing and leaves
/// the tracked sequence unchanged, so the next batch reports a gap.
///
/// Returns `KVIDX_ERR_MALFORMED` for a payload that is not a valid batch of the feed's format
/// and `KVIDX_ERR_TOO_LARGE` for one above `KVIDX_ENGINE_MAX_PAYLOAD` (both counted in
/// `batches_malformed`); `KVIDX_ERR_INVALID_ARGUMENT` for a `seq_frame` that is not 8 bytes
/// (checked before the payload is read; counted nowhere); `KVIDX_ERR_NULL_POINTER` for NULL
/// `feed`, `indexer` or `out`; `KVIDX_ERR_POISONED` if an earlier call on this feed, or on
/// the indexer, panicked. A panic while decoding poisons the feed only; a panic inside the
/// indexer poisons the indexer and the feed. Calls on one feed are serialised.
///
/// # Safety
/// `feed` and `indexer` are NULL or live handles; `seq_frame` is readable for `seq_len`
/// bytes, `payload` for `len` bytes; `out` is NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvidx_engine_feed_apply(
    feed: *const kvidx_engine_feed,
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    seq_frame: *const u8,
    seq_len: usize,
    payload: *const u8,
    len: usize,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle feed, |feed| {
        // SAFETY: the caller guarantees what `feed_apply` requires (the same `# Safety`).
        unsafe {
            feed_apply(
                feed, indexer, worker_id, dp_rank, seq_frame, seq_len, payload, len, None, None,
                out,
            )
        }
    })
}

/// Like `kvidx_engine_feed_apply`, the decoded batch, with the clear a gap or restart calls
/// for first, applied as one offset batch at `offset` (>= 1; see `kvidx_apply_events_at`):
/// skipped whole, clear included, when `offset` is at or below the worker's watermark. The
/// sequence is tracked either way. `offset == 0` is `KVIDX_ERR_INVALID_ARGUMENT` (checked
/// before the payload is read; nothing recorded). A replica consuming a stream passes each
/// message's stream sequence as `offset`, so replaying an overlapping range is idempotent.
///
/// # Safety
/// As `kvidx_engine_feed_apply`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvidx_engine_feed_apply_at(
    feed: *const kvidx_engine_feed,
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    seq_frame: *const u8,
    seq_len: usize,
    payload: *const u8,
    len: usize,
    offset: u64,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle feed, |feed| {
        // SAFETY: the caller guarantees what `feed_apply` requires (the same `# Safety`).
        unsafe {
            feed_apply(
                feed,
                indexer,
                worker_id,
                dp_rank,
                seq_frame,
                seq_len,
                payload,
                len,
                Some(offset),
                None,
                out,
            )
        }
    })
}

/// Like `kvidx_engine_feed_apply_at`, with the engine epoch the batch came in (`*epoch`: the
/// bridge's id of one engine connection, the `Kvidx-Engine-Epoch` header; `epoch == NULL`:
/// not known). A publisher whose epoch differs from the one of its previous batch restarted:
/// `out->seq_status` is `KVIDX_SEQ_RESTART`, the worker is cleared first (unless the feed's
/// flags say otherwise; in the offset batch, so skipped with it), and the publisher's
/// sequence tracking starts afresh at this batch, so no sequence of the new epoch is taken
/// for a batch of the old one. A batch without an epoch keeps the publisher's epoch.
///
/// Statuses as `kvidx_engine_feed_apply_at`.
///
/// # Safety
/// As `kvidx_engine_feed_apply`; `epoch` is NULL or readable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvidx_engine_feed_apply_epoch_at(
    feed: *const kvidx_engine_feed,
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    epoch: *const u64,
    seq_frame: *const u8,
    seq_len: usize,
    payload: *const u8,
    len: usize,
    offset: u64,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle feed, |feed| {
        // SAFETY: the caller guarantees `epoch` is NULL or readable.
        let epoch = unsafe { args::optional(epoch) }?;
        // SAFETY: the caller guarantees what `feed_apply` requires (the same `# Safety`).
        unsafe {
            feed_apply(
                feed,
                indexer,
                worker_id,
                dp_rank,
                seq_frame,
                seq_len,
                payload,
                len,
                Some(offset),
                epoch,
                out,
            )
        }
    })
}

/// The body of `kvidx_engine_feed_apply` (`offset` `None`), `kvidx_engine_feed_apply_at`
/// (`Some(offset)`; `Some(0)` is `KVIDX_ERR_INVALID_ARGUMENT`, checked before the payload is
/// read) and `kvidx_engine_feed_apply_epoch_at` (an `epoch`; only with an offset).
///
/// # Safety
/// As `kvidx_engine_feed_apply` (`feed` is the value behind its live handle).
#[allow(clippy::too_many_arguments)]
unsafe fn feed_apply(
    feed: &Mutex<EngineFeed>,
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    seq_frame: *const u8,
    seq_len: usize,
    payload: *const u8,
    len: usize,
    offset: Option<u64>,
    epoch: Option<u64>,
    out: *mut kvidx_engine_batch_result,
) -> Result<(), kvidx_status> {
    // SAFETY: the caller guarantees `indexer` is NULL or live for the whole call.
    let ix = unsafe { indexer_for_feed(indexer) }?;
    args::required(out)?;
    // SAFETY: the caller guarantees `seq_frame` is readable for `seq_len` bytes.
    let seq_frame = unsafe { args::input(seq_frame, seq_len) }?;
    let seq = match seq_frame {
        [] => None,
        frame => {
            Some(engine::parse_seq_frame(frame).ok_or(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)?)
        }
    };
    if offset == Some(0) {
        return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: the caller guarantees `payload` is readable for `len` bytes.
    let payload = unsafe { args::input(payload, len) }?;
    let mut feed = lock(feed)?;
    let (sink, rank) = (IndexerSink(ix), rank_of(dp_rank));
    let report = match offset {
        None => feed.apply_message(&sink, worker_id, rank, seq, payload),
        Some(offset) => {
            feed.apply_message_in_epoch_at(&sink, worker_id, rank, epoch, seq, payload, offset)
        }
    }
    .map_err(feed_error)?;
    // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
    unsafe { out.write(result_of(&report)) };
    Ok(())
}

/// Copies a feed's counters to `*out`. Every counter saturates at `UINT64_MAX`.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_POISONED` if an
/// earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_stats(
    feed: *const kvidx_engine_feed,
    out: *mut kvidx_engine_stats,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out)?;
        let stats = stats_of(lock(feed)?.stats());
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(stats) };
        Ok(())
    })
}

/// Forgets one publisher `(worker_id, dp_rank)` in a feed: its tracked sequence (its next
/// batch reports `KVIDX_SEQ_FIRST`) and its event-id counter, about 100 bytes. The index is
/// not touched. Writes to `*out_known` (may be NULL) 1 if the feed knew the publisher, else 0.
/// Forgetting an unknown publisher is a valid no-op.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed`, `KVIDX_ERR_POISONED` if an earlier call
/// on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out_known` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_forget(
    feed: *const kvidx_engine_feed,
    worker_id: u64,
    dp_rank: u32,
    out_known: *mut u8,
) -> kvidx_status {
    export!(handle feed, |feed| {
        if !out_known.is_null() {
            args::required(out_known)?;
        }
        let known = lock(feed)?.forget(Worker::new(worker_id, dp_rank));
        if !out_known.is_null() {
            // SAFETY: non-NULL and aligned (checked); the caller guarantees it is writable.
            unsafe { out_known.write(u8::from(known)) };
        }
        Ok(())
    })
}

/// Removes every dp rank of a worker from the indexer (exactly `kvidx_remove_worker`) and
/// forgets its publishers in the feed, so a worker that is gone costs the feed nothing. Use it
/// instead of `kvidx_remove_worker` for workers fed through this feed.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `indexer`; `KVIDX_ERR_POISONED` if
/// either was poisoned by an earlier panic (then nothing is removed or forgotten); otherwise
/// what `kvidx_remove_worker` returns (the feed forgets the worker only on `KVIDX_OK`).
///
/// # Safety
/// `feed` and `indexer` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_remove_worker(
    feed: *const kvidx_engine_feed,
    indexer: *const kvidx_indexer,
    worker_id: u64,
) -> kvidx_status {
    export!(handle feed, |feed| {
        // SAFETY: the caller guarantees `indexer` is NULL or live for the whole call.
        unsafe {
            remove_through_feed(
                feed,
                indexer,
                |ix| ix.remove_worker(worker_id),
                |feed| {
                    feed.forget_worker(worker_id);
                },
            )
        }
    })
}

/// Removes one `(worker_id, dp_rank)` from the indexer (exactly `kvidx_remove_worker_dp_rank`)
/// and forgets that publisher in the feed. Statuses as `kvidx_engine_feed_remove_worker`.
///
/// # Safety
/// `feed` and `indexer` are NULL or live handles.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_remove_worker_dp_rank(
    feed: *const kvidx_engine_feed,
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
) -> kvidx_status {
    export!(handle feed, |feed| {
        let worker = Worker::new(worker_id, dp_rank);
        // SAFETY: the caller guarantees `indexer` is NULL or live for the whole call.
        unsafe {
            remove_through_feed(
                feed,
                indexer,
                |ix| ix.remove_worker_dp_rank(worker),
                |feed| {
                    feed.forget(worker);
                },
            )
        }
    })
}

/// Writes to `*out` the number of publishers `(worker_id, dp_rank)` the feed holds state for
/// (each about 100 bytes): every publisher it applied a batch for and has not forgotten.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_POISONED` if an
/// earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_publishers(
    feed: *const kvidx_engine_feed,
    out: *mut u64,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out)?;
        let publishers = lock(feed)?.publishers() as u64;
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(publishers) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::c_types::kvidx_config;
    use crate::{kvidx_free, kvidx_new};
    use kvidx_core::hashing::hash_tokens;

    const KVIDX_ENGINE_VLLM: u32 = kvidx_engine_format::KVIDX_ENGINE_VLLM as u32;
    const KVIDX_ENGINE_TRTLLM: u32 = kvidx_engine_format::KVIDX_ENGINE_TRTLLM as u32;
    const KVIDX_SEQ_UNTRACKED: u32 = kvidx_seq_status::KVIDX_SEQ_UNTRACKED as u32;
    const KVIDX_SEQ_FIRST: u32 = kvidx_seq_status::KVIDX_SEQ_FIRST as u32;
    const KVIDX_SEQ_GAP: u32 = kvidx_seq_status::KVIDX_SEQ_GAP as u32;
    const KVIDX_SEQ_RESTART: u32 = kvidx_seq_status::KVIDX_SEQ_RESTART as u32;

    /// Runs `f` on the indexer behind a live handle.
    fn with_indexer<R>(ix: *mut kvidx_indexer, f: impl FnOnce(&Indexer) -> R) -> R {
        // SAFETY: `ix` is a live handle from `kvidx_new`.
        let handle = unsafe { handle::borrow(ix as *const kvidx_indexer) }.unwrap();
        handle.run_nested(f).expect("not poisoned")
    }

    const ANNOTATED: &[u8] = include_bytes!("../tests/fixtures/engine/vllm_annotated_0_33.msgpack");
    const TRT: &[u8] = include_bytes!("../tests/fixtures/engine/trtllm_map.msgpack");

    fn sync_indexer() -> *mut kvidx_indexer {
        let config = kvidx_config {
            backend: 0,
            event_threads: 0,
            jump_size: 0,
        };
        let mut ix = std::ptr::null_mut();
        // SAFETY: valid config and out pointers.
        let status = unsafe { kvidx_new(&config, &mut ix) };
        assert_eq!(status, kvidx_status::KVIDX_OK);
        ix
    }

    fn depth(ix: *mut kvidx_indexer, worker_id: u64) -> u32 {
        let query = hash_tokens(&(1..=12).collect::<Vec<u32>>(), 4);
        with_indexer(ix, |ix| {
            ix.find_matches(&query)
                .iter()
                .find(|m| m.worker_id == worker_id)
                .map_or(0, |m| m.depth)
        })
    }

    fn index_stats(ix: *mut kvidx_indexer) -> kvidx_core::Stats {
        with_indexer(ix, |ix| ix.stats())
    }

    #[test]
    fn apply_engine_batch_decodes_applies_and_refuses_malformed() {
        let ix = sync_indexer();
        let mut out = kvidx_engine_batch_result::default();
        // SAFETY: live handle, payload readable for its length, `out` writable.
        let status = unsafe {
            kvidx_apply_engine_batch(
                ix,
                KVIDX_ENGINE_TRTLLM,
                3,
                KVIDX_DP_RANK_FROM_BATCH,
                TRT.as_ptr(),
                TRT.len(),
                &mut out,
            )
        };
        assert_eq!(status, kvidx_status::KVIDX_OK);
        assert_eq!(
            (out.events_decoded, out.events_submitted, out.dp_rank),
            (3, 3, 0)
        );
        assert_eq!(out.seq_status, KVIDX_SEQ_UNTRACKED);
        assert_eq!(depth(ix, 3), 0, "block 0 removed by the batch");
        // Malformed payloads: truncated, trailing bytes, empty (also as NULL, 0); then bad
        // arguments: unknown format (checked before the payload), NULL payload with a length,
        // NULL out.
        let before = out;
        let stats_before = index_stats(ix);
        let mut trailing = TRT.to_vec();
        trailing.push(0xc0);
        // SAFETY: as above (the lengths given are within the buffers).
        unsafe {
            let short = &ANNOTATED[..ANNOTATED.len() - 1];
            for bad in [short, &trailing[..], &[][..]] {
                assert_eq!(
                    kvidx_apply_engine_batch(ix, 0, 3, 0, bad.as_ptr(), bad.len(), &mut out),
                    kvidx_status::KVIDX_ERR_MALFORMED
                );
            }
            assert_eq!(
                kvidx_apply_engine_batch(ix, 0, 3, 0, std::ptr::null(), 0, &mut out),
                kvidx_status::KVIDX_ERR_MALFORMED
            );
            assert_eq!(
                kvidx_apply_engine_batch(ix, 9, 3, 0, TRT.as_ptr(), TRT.len(), &mut out),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                kvidx_apply_engine_batch(ix, 9, 3, 0, short.as_ptr(), short.len(), &mut out),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT,
                "a bad format wins over a malformed payload"
            );
            assert_eq!(
                kvidx_apply_engine_batch(ix, 0, 3, 0, std::ptr::null(), 5, &mut out),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
            assert_eq!(
                kvidx_apply_engine_batch(
                    ix,
                    0,
                    3,
                    0,
                    TRT.as_ptr(),
                    TRT.len(),
                    std::ptr::null_mut()
                ),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
            assert_eq!(
                kvidx_apply_engine_batch(
                    std::ptr::null_mut(),
                    0,
                    3,
                    0,
                    TRT.as_ptr(),
                    TRT.len(),
                    &mut out
                ),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
        }
        assert_eq!(out, before, "out written only on success");
        assert_eq!(
            index_stats(ix),
            stats_before,
            "nothing applied by refused calls"
        );
        // SAFETY: live handle, freed once.
        unsafe { kvidx_free(ix) };
    }

    #[test]
    fn feed_tracks_sequence_gaps_and_restarts() {
        let ix = sync_indexer();
        let mut feed = std::ptr::null_mut();
        let mut out = kvidx_engine_batch_result::default();
        let mut stats = kvidx_engine_stats::default();
        // SAFETY: valid pointers throughout; the feed and handle are freed once at the end.
        unsafe {
            assert_eq!(
                kvidx_engine_feed_new(0, 512, &mut feed),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                kvidx_engine_feed_new(0, 16 | 256, &mut feed),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT,
                "tokens only and skip"
            );
            assert_eq!(
                kvidx_engine_feed_new(0, 32 | 128, &mut feed),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT,
                "two tiers for unknown media"
            );
            assert_eq!(
                kvidx_engine_feed_new(7, 0, &mut feed),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, 0, &mut feed),
                kvidx_status::KVIDX_OK
            );
            let send = |seq: u64, out: &mut kvidx_engine_batch_result| {
                let frame = seq.to_be_bytes();
                kvidx_engine_feed_apply(
                    feed,
                    ix,
                    5,
                    0,
                    frame.as_ptr(),
                    8,
                    TRT.as_ptr(),
                    TRT.len(),
                    out,
                )
            };
            assert_eq!(send(0, &mut out), kvidx_status::KVIDX_OK);
            assert_eq!(out.seq_status, KVIDX_SEQ_FIRST);
            assert_eq!(send(4, &mut out), kvidx_status::KVIDX_OK);
            assert_eq!(
                (
                    out.seq_status,
                    out.seq_expected,
                    out.batches_missed,
                    out.worker_cleared
                ),
                (KVIDX_SEQ_GAP, 1, 3, 1)
            );
            assert_eq!(send(0, &mut out), kvidx_status::KVIDX_OK);
            assert_eq!(
                (out.seq_status, out.seq_expected, out.worker_cleared),
                (KVIDX_SEQ_RESTART, 5, 1)
            );
            let bad_frame = [0u8; 7];
            assert_eq!(
                kvidx_engine_feed_apply(
                    feed,
                    ix,
                    5,
                    0,
                    bad_frame.as_ptr(),
                    7,
                    TRT.as_ptr(),
                    TRT.len(),
                    &mut out
                ),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
            );
            let short = &TRT[..10];
            assert_eq!(
                kvidx_engine_feed_apply(
                    feed,
                    ix,
                    5,
                    0,
                    std::ptr::null(),
                    0,
                    short.as_ptr(),
                    short.len(),
                    &mut out
                ),
                kvidx_status::KVIDX_ERR_MALFORMED
            );
            // A bad frame is reported before the payload is read, and counts nowhere.
            assert_eq!(
                kvidx_engine_feed_apply(
                    feed,
                    ix,
                    5,
                    0,
                    bad_frame.as_ptr(),
                    7,
                    short.as_ptr(),
                    short.len(),
                    &mut out
                ),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
            );
            assert_eq!(
                kvidx_engine_feed_stats(feed, &mut stats),
                kvidx_status::KVIDX_OK
            );
            assert_eq!(
                (
                    stats.batches,
                    stats.batches_malformed,
                    stats.gaps,
                    stats.batches_missed,
                    stats.restarts,
                    stats.workers_cleared
                ),
                (3, 1, 1, 3, 1, 2)
            );
            assert_eq!(
                kvidx_engine_feed_stats(std::ptr::null(), &mut stats),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
            kvidx_engine_feed_free(feed);
            kvidx_engine_feed_free(std::ptr::null_mut());
            kvidx_free(ix);
        }
    }

    fn new_feed(flags: u32) -> *mut kvidx_engine_feed {
        let mut feed = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let status = unsafe { kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, flags, &mut feed) };
        assert_eq!(status, kvidx_status::KVIDX_OK);
        feed
    }

    /// Applies the TRT fixture through `feed` for `(worker, rank)` with sequence `seq`.
    fn send(
        feed: *mut kvidx_engine_feed,
        ix: *mut kvidx_indexer,
        worker: u64,
        rank: u32,
        seq: u64,
    ) -> (kvidx_status, kvidx_engine_batch_result) {
        let frame = seq.to_be_bytes();
        let mut out = kvidx_engine_batch_result::default();
        // SAFETY: live handles, readable frame and payload, writable `out`.
        let status = unsafe {
            kvidx_engine_feed_apply(
                feed,
                ix,
                worker,
                rank,
                frame.as_ptr(),
                8,
                TRT.as_ptr(),
                TRT.len(),
                &mut out,
            )
        };
        (status, out)
    }

    fn publishers(feed: *mut kvidx_engine_feed) -> u64 {
        let mut n = u64::MAX;
        // SAFETY: a live feed, a writable `n`.
        let status = unsafe { kvidx_engine_feed_publishers(feed, &mut n) };
        assert_eq!(status, kvidx_status::KVIDX_OK);
        n
    }

    #[test]
    fn feed_state_is_forgotten_on_request_and_with_the_worker() {
        let ix = sync_indexer();
        let feed = new_feed(0);
        for (worker, rank) in [(1, 0), (1, 1), (2, 0)] {
            assert_eq!(send(feed, ix, worker, rank, 0).0, kvidx_status::KVIDX_OK);
        }
        assert_eq!(publishers(feed), 3);
        // SAFETY: live handles and valid out-pointers throughout; freed once at the end.
        unsafe {
            let mut known = 9u8;
            assert_eq!(
                kvidx_engine_feed_forget(feed, 2, 0, &mut known),
                kvidx_status::KVIDX_OK
            );
            assert_eq!((known, publishers(feed)), (1, 2));
            assert_eq!(
                kvidx_engine_feed_forget(feed, 2, 0, &mut known),
                kvidx_status::KVIDX_OK
            );
            assert_eq!(known, 0, "forgetting an unknown publisher is a no-op");
            assert_eq!(
                kvidx_engine_feed_forget(feed, 2, 0, std::ptr::null_mut()),
                kvidx_status::KVIDX_OK
            );
            // A forgotten publisher starts over: FIRST, not a restart or gap.
            let (status, out) = send(feed, ix, 2, 0, 7);
            assert_eq!(
                (status, out.seq_status),
                (kvidx_status::KVIDX_OK, KVIDX_SEQ_FIRST)
            );
            // Removing worker 1 through the feed drops both ranks here and in the index.
            assert_eq!(
                kvidx_engine_feed_remove_worker(feed, ix, 1),
                kvidx_status::KVIDX_OK
            );
            assert_eq!(publishers(feed), 1);
            assert_eq!(index_stats(ix).workers, 1);
            assert_eq!(
                kvidx_engine_feed_remove_worker_dp_rank(feed, ix, 2, 0),
                kvidx_status::KVIDX_OK
            );
            assert_eq!((publishers(feed), index_stats(ix).workers), (0, 0));
            // NULL arguments.
            assert_eq!(
                kvidx_engine_feed_remove_worker(feed, std::ptr::null(), 1),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
            assert_eq!(
                kvidx_engine_feed_forget(std::ptr::null(), 1, 0, &mut known),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
            assert_eq!(
                kvidx_engine_feed_publishers(feed, std::ptr::null_mut()),
                kvidx_status::KVIDX_ERR_NULL_POINTER
            );
            kvidx_engine_feed_free(feed);
            kvidx_free(ix);
        }
    }

    #[test]
    fn payloads_above_the_maximum_are_too_large_and_apply_nothing() {
        let ix = sync_indexer();
        let feed = new_feed(0);
        let mut big = TRT.to_vec();
        big.resize(KVIDX_ENGINE_MAX_PAYLOAD + 1, 0);
        let mut out = kvidx_engine_batch_result::default();
        // SAFETY: live handles, readable payload, writable `out`; freed once at the end.
        unsafe {
            assert_eq!(
                kvidx_apply_engine_batch(ix, 0, 1, 0, big.as_ptr(), big.len(), &mut out),
                kvidx_status::KVIDX_ERR_TOO_LARGE
            );
            assert_eq!(
                kvidx_engine_feed_apply(
                    feed,
                    ix,
                    1,
                    0,
                    std::ptr::null(),
                    0,
                    big.as_ptr(),
                    big.len(),
                    &mut out
                ),
                kvidx_status::KVIDX_ERR_TOO_LARGE
            );
            let mut stats = kvidx_engine_stats::default();
            assert_eq!(
                kvidx_engine_feed_stats(feed, &mut stats),
                kvidx_status::KVIDX_OK
            );
            assert_eq!((stats.batches, stats.batches_malformed), (0, 1));
            assert_eq!(index_stats(ix).events_applied, 0);
            // At the maximum itself the payload is read (and here malformed: trailing bytes).
            big.truncate(KVIDX_ENGINE_MAX_PAYLOAD);
            assert_eq!(
                kvidx_apply_engine_batch(ix, 0, 1, 0, big.as_ptr(), big.len(), &mut out),
                kvidx_status::KVIDX_ERR_MALFORMED
            );
            kvidx_engine_feed_free(feed);
            kvidx_free(ix);
        }
    }

    #[test]
    fn a_panic_in_a_feed_poisons_the_feed_not_the_indexer() {
        /// A function with the same boundary as the feed's, whose body panics.
        unsafe fn panicking_feed_call(feed: *const kvidx_engine_feed) -> kvidx_status {
            export!(handle feed, |_feed| { panic!("a deliberate panic inside a feed") })
        }
        let ix = sync_indexer();
        let feed = new_feed(0);
        assert_eq!(send(feed, ix, 1, 0, 0).0, kvidx_status::KVIDX_OK);
        // SAFETY: live handles; freed once at the end.
        unsafe {
            assert_eq!(panicking_feed_call(feed), kvidx_status::KVIDX_ERR_PANIC);
            assert_eq!(send(feed, ix, 1, 0, 1).0, kvidx_status::KVIDX_ERR_POISONED);
            let mut stats = kvidx_engine_stats::default();
            assert_eq!(
                kvidx_engine_feed_stats(feed, &mut stats),
                kvidx_status::KVIDX_ERR_POISONED
            );
            // The indexer is untouched and usable, also by a new feed.
            assert_eq!(depth(ix, 1), 0);
            assert_eq!(crate::kvidx_flush(ix), kvidx_status::KVIDX_OK);
            let other = new_feed(0);
            assert_eq!(send(other, ix, 2, 0, 0).0, kvidx_status::KVIDX_OK);
            // A poisoned indexer refuses feed calls before the payload is read.
            assert_eq!(crate::kvidx_debug_panic(ix), kvidx_status::KVIDX_ERR_PANIC);
            assert_eq!(send(other, ix, 2, 0, 1).0, kvidx_status::KVIDX_ERR_POISONED);
            assert_eq!(
                kvidx_engine_feed_remove_worker(other, ix, 2),
                kvidx_status::KVIDX_ERR_POISONED
            );
            assert_eq!(publishers(other), 1, "the feed itself is still healthy");
            kvidx_engine_feed_free(feed);
            kvidx_engine_feed_free(other);
            kvidx_free(ix);
        }
    }
}
