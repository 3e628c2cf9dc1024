//! An engine feed's "missed from the start" through the C ABI. A publisher's sequence starts
//! at 0, so a publisher's first batch above 0 follows batches the feed never saw: the caller
//! asks where the feed expects a publisher from (`kvidx_engine_feed_next_seq`: 0 for one not
//! seen yet) before applying a batch, and reads how many publishers started late and how many
//! batches they had sent before (`kvidx_engine_feed_start_stats`).

use super::args;
use super::boundary::export;
use super::c_types::{kvidx_engine_feed, kvidx_status};
use super::engine::lock;
use kvidx_core::Worker;

/// Counters of an engine feed's publishers that it first saw above sequence 0.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct kvidx_engine_start_stats {
    /// Publishers whose first batch tracked was above 0 (reported `KVIDX_SEQ_FIRST` with a
    /// sequence above 0: they had published before).
    pub late_starts: u64,
    /// Batches those publishers sent before their first batch tracked (its sequence), summed.
    pub batches_missed_from_start: u64,
}

/// Writes to `*out_next` the next sequence the feed expects from the publisher
/// `(worker_id, dp_rank)` (the rank the batches were applied to): one past its last tracked
/// batch, or 0 for a publisher it has not tracked (a publisher's sequence starts at 0). A batch
/// whose sequence is above it follows missing batches, the publisher's first batch included:
/// a caller with the engine's replay socket asks it from `*out_next` before applying the
/// batch (with `KVIDX_FEED_NO_CLEAR_ON_GAP`). Changes nothing.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out_next`, `KVIDX_ERR_POISONED` if
/// an earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out_next` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_next_seq(
    feed: *const kvidx_engine_feed,
    worker_id: u64,
    dp_rank: u32,
    out_next: *mut u64,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out_next)?;
        let next = lock(feed)?.next_expected(Worker::new(worker_id, dp_rank));
        // SAFETY: `out_next` is non-NULL and aligned (checked); the caller guarantees it is
        // writable.
        unsafe { out_next.write(next) };
        Ok(())
    })
}

/// Copies a feed's counters of publishers first seen above sequence 0 to `*out`. Every
/// counter saturates at `UINT64_MAX`. The batch itself reports `KVIDX_SEQ_FIRST`; its
/// sequence is the number of batches missed from the start. The worker is not cleared for
/// them (the feed applied nothing of that publisher before).
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_POISONED` if an
/// earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_start_stats(
    feed: *const kvidx_engine_feed,
    out: *mut kvidx_engine_start_stats,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out)?;
        let s = lock(feed)?.stats();
        let stats = kvidx_engine_start_stats {
            late_starts: s.late_starts,
            batches_missed_from_start: s.batches_missed_from_start,
        };
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(stats) };
        Ok(())
    })
}
