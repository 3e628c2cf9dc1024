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

use std::sync::Mutex;

use super::args;
use super::boundary::export;
use super::convert;
use super::types::{kvidx_indexer, kvidx_status};
use kvidx_core::engine::{
    self, ApplyOptions, BatchReport, EngineFeed, EngineStats, ExtrasPolicy, FeedConfig, FeedError,
    Format, MediaFilter, SeqStatus,
};

/// `format` argument: vLLM, every generation (tagged arrays and tagged maps).
pub const KVIDX_ENGINE_VLLM: u32 = 0;
/// `format` argument: SGLang (its own array positions; signed hashes).
pub const KVIDX_ENGINE_SGLANG: u32 = 1;
/// `format` argument: TensorRT-LLM's vLLM-compatible ZMQ publisher.
pub const KVIDX_ENGINE_TRTLLM: u32 = 2;

/// `seq_status`: no sequence was given.
pub const KVIDX_SEQ_UNTRACKED: u32 = 0;
/// `seq_status`: the first batch seen from this publisher.
pub const KVIDX_SEQ_FIRST: u32 = 1;
/// `seq_status`: the expected next batch.
pub const KVIDX_SEQ_IN_ORDER: u32 = 2;
/// `seq_status`: batches `seq_expected ..` were missed (`batches_missed` of them).
pub const KVIDX_SEQ_GAP: u32 = 3;
/// `seq_status`: the sequence went backwards (the publisher restarted).
pub const KVIDX_SEQ_RESTART: u32 = 4;

/// `dp_rank` argument: take the rank from the batch envelope (0 when the envelope has none).
pub const KVIDX_DP_RANK_FROM_BATCH: u32 = u32::MAX;

/// Feed flag: do not clear the worker after a gap (the caller replays the missing range).
pub const KVIDX_FEED_NO_CLEAR_ON_GAP: u32 = 1;
/// Feed flag: do not clear the worker when its publisher restarts.
pub const KVIDX_FEED_NO_CLEAR_ON_RESTART: u32 = 2;
/// Feed flag: index every medium (CPU, storage tiers...), not only the GPU cache.
pub const KVIDX_FEED_ALL_MEDIA: u32 = 4;
/// Feed flag: index every KV-cache group, not only group 0.
pub const KVIDX_FEED_ALL_GROUPS: u32 = 8;
/// Feed flag: index stores whose engine hashes include extra keys by their tokens alone.
pub const KVIDX_FEED_HASH_TOKENS_ONLY: u32 = 16;

const KNOWN_FLAGS: u32 = 31;

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
    /// `block_size * blocks`, LoRA id without a name, extra keys in the engine hash).
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

/// An opaque engine feed: sequence tracking and counters per publisher `(worker_id, dp_rank)`.
pub struct kvidx_engine_feed {
    feed: Mutex<EngineFeed>,
}

/// The format of a `KVIDX_ENGINE_*` value.
fn format_of(value: u32) -> Result<Format, kvidx_status> {
    match value {
        KVIDX_ENGINE_VLLM => Ok(Format::Vllm),
        KVIDX_ENGINE_SGLANG => Ok(Format::Sglang),
        KVIDX_ENGINE_TRTLLM => Ok(Format::TrtLlm),
        _ => Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
    }
}

fn rank_of(dp_rank: u32) -> Option<u32> {
    (dp_rank != KVIDX_DP_RANK_FROM_BATCH).then_some(dp_rank)
}

fn feed_error(error: FeedError) -> kvidx_status {
    match error {
        FeedError::Decode(_) => kvidx_status::KVIDX_ERR_MALFORMED,
        FeedError::Index(e) => convert::status_of(e),
    }
}

fn result_of(r: &BatchReport) -> kvidx_engine_batch_result {
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
        seq_status,
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

/// Decodes one engine payload (the third frame of the engine's ZMQ message) completely, then
/// applies its events to `(worker_id, dp_rank)`; `dp_rank == KVIDX_DP_RANK_FROM_BATCH` takes
/// the envelope's rank. Only the GPU medium and KV-cache group 0 are indexed; local hashes
/// come from the published tokens (see docs/engine-events.md). No sequence tracking: use a
/// feed (`kvidx_engine_feed_apply`) for that.
///
/// Returns `KVIDX_ERR_MALFORMED` when the bytes are not a valid batch of `format` (not
/// msgpack, truncated, trailing bytes, a bad envelope, event or field type; also an empty
/// payload): nothing is applied. Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `format`
/// (checked before the payload is read), `KVIDX_ERR_NULL_POINTER` for a NULL handle or `out`,
/// or NULL `payload` with `len > 0`. In synchronous mode a STORED whose parent is missing is counted
/// in `out->events_rejected` and the call still returns `KVIDX_OK`.
///
/// # Safety
/// `indexer` is NULL or a live handle; `payload` is readable for `len` bytes; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_engine_batch(
    indexer: *mut kvidx_indexer,
    format: u32,
    worker_id: u64,
    dp_rank: u32,
    payload: *const u8,
    len: usize,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out)?;
        let format = format_of(format)?;
        // SAFETY: the caller guarantees `payload` is readable for `len` bytes.
        let payload = unsafe { args::input(payload, len) }?;
        let options = ApplyOptions::default();
        let report = engine::apply_payload(ix, format, worker_id, rank_of(dp_rank), payload, &options)
            .map_err(feed_error)?;
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(result_of(&report)) };
        Ok(())
    })
}

/// Creates an engine feed for one wire format. `flags` is 0 (the recommended reaction without
/// a replay socket: clear the worker on gaps and on restarts; GPU medium and group 0 only;
/// stores with extra keys skipped) or a bitwise OR of the `KVIDX_FEED_*` flags.
///
/// Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `format` or flag bit,
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
        args::required(out)?;
        let format = format_of(format)?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
        }
        let on = |flag: u32| flags & flag != 0;
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
        let feed = Box::into_raw(Box::new(kvidx_engine_feed {
            feed: Mutex::new(EngineFeed::new(config)),
        }));
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(feed) };
        Ok(())
    })
}

/// Releases a feed. NULL is a no-op. Must not overlap any other call on the same feed.
///
/// # Safety
/// `feed` is NULL or a feed from `kvidx_engine_feed_new` not freed yet.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_free(feed: *mut kvidx_engine_feed) {
    export!(value, (), {
        if !feed.is_null() {
            // SAFETY: the caller guarantees the feed came from `Box::into_raw` in
            // `kvidx_engine_feed_new`, is not freed yet, and that no other call is using it.
            drop(unsafe { Box::from_raw(feed) });
        }
    })
}

/// Like `kvidx_apply_engine_batch`, through a feed that tracks the publisher's batch sequence:
/// `seq_frame` is the second ZMQ frame (exactly 8 bytes, big-endian), or `(NULL, 0)` for no
/// tracking. After a gap or a restart the worker is cleared first (unless the feed's flags say
/// otherwise); `out->seq_status` tells which. A malformed payload applies nothing and leaves
/// the tracked sequence unchanged, so the next batch reports a gap.
///
/// Returns `KVIDX_ERR_MALFORMED` for a payload that is not a valid batch of the feed's format
/// (counted in `batches_malformed`); `KVIDX_ERR_INVALID_ARGUMENT` for a `seq_frame` that is
/// not 8 bytes (checked before the payload is read; counted nowhere);
/// `KVIDX_ERR_NULL_POINTER` for NULL `feed`, `indexer` or `out`; `KVIDX_ERR_POISONED` if an
/// earlier call on this feed panicked. Calls on one feed are serialised.
///
/// # Safety
/// `feed` and `indexer` are NULL or live handles; `seq_frame` is readable for `seq_len`
/// bytes, `payload` for `len` bytes; `out` is NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvidx_engine_feed_apply(
    feed: *mut kvidx_engine_feed,
    indexer: *mut kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    seq_frame: *const u8,
    seq_len: usize,
    payload: *const u8,
    len: usize,
    out: *mut kvidx_engine_batch_result,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(feed)?;
        args::required(out)?;
        // SAFETY: the caller guarantees `seq_frame` is readable for `seq_len` bytes.
        let seq_frame = unsafe { args::input(seq_frame, seq_len) }?;
        let seq = match seq_frame {
            [] => None,
            frame => Some(
                engine::parse_seq_frame(frame).ok_or(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)?,
            ),
        };
        // SAFETY: the caller guarantees `payload` is readable for `len` bytes.
        let payload = unsafe { args::input(payload, len) }?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees a live feed.
        let feed = unsafe { &*feed };
        let mut feed = feed.feed.lock().map_err(|_| kvidx_status::KVIDX_ERR_POISONED)?;
        let report = feed
            .apply_message(ix, worker_id, rank_of(dp_rank), seq, payload)
            .map_err(feed_error)?;
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(result_of(&report)) };
        Ok(())
    })
}

/// Copies a feed's counters to `*out`.
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
    export!(status, {
        args::required(feed)?;
        args::required(out)?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees a live feed.
        let feed = unsafe { &*feed };
        let stats = feed
            .feed
            .lock()
            .map_err(|_| kvidx_status::KVIDX_ERR_POISONED)?
            .stats();
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(stats_of(stats)) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::kvidx_config;
    use crate::{kvidx_free, kvidx_new};
    use kvidx_core::hashing::hash_tokens;

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
        // SAFETY: `ix` is a live handle from `kvidx_new`.
        let ix = unsafe { &*ix };
        ix.indexer
            .find_matches(&query)
            .iter()
            .find(|m| m.worker_id == worker_id)
            .map_or(0, |m| m.depth)
    }

    fn index_stats(ix: *mut kvidx_indexer) -> kvidx_core::Stats {
        // SAFETY: `ix` is a live handle from `kvidx_new`.
        unsafe { &*ix }.indexer.stats()
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
                kvidx_engine_feed_new(0, 64, &mut feed),
                kvidx_status::KVIDX_ERR_INVALID_ARGUMENT
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
}
