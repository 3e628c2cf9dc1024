//! Predicted blocks through the C ABI (`KVIDX_HAS_PREDICTIONS`): an indexer built with
//! prediction settings (`kvidx_new_with_predictions`), predictions (`kvidx_predict`), the
//! predicted lookup (`kvidx_find_matches_predicted`), the clock predictions expire by
//! (`kvidx_now`, and for a manual clock `kvidx_set_time` / `kvidx_advance_time`) and the
//! counters (`kvidx_get_prediction_stats`).

use std::cell::RefCell;
use std::time::Duration;

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{kvidx_config, kvidx_indexer, kvidx_queue_limits, kvidx_status};
use super::lifecycle::new_indexer;
use super::queries::find_answer;
use kvidx_core::{PredictedMatch, Worker};

/// The clock an indexer's predictions expire by (`kvidx_prediction_config.clock`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_clock {
    /// The system's monotonic clock; time 0 is when the indexer was created.
    KVIDX_CLOCK_MONOTONIC = 0,
    /// Starts at 0 and moves only by `kvidx_set_time` and `kvidx_advance_time` (tests and
    /// simulations drive time without sleeping).
    KVIDX_CLOCK_MANUAL = 1,
}

/// How an indexer keeps predictions (`kvidx_new_with_predictions`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_prediction_config {
    /// Bytes all predictions of the indexer may take (`kvidx_prediction_stats.bytes`); the
    /// least recently predicted blocks are dropped first to stay within it. 0 = the default
    /// (64 MiB). A value the library cannot represent is `KVIDX_ERR_INVALID_ARGUMENT`.
    pub max_bytes: u64,
    /// Predicted blocks each worker may hold; beyond it that worker's least recently
    /// predicted blocks are dropped first (the event-free mode's stand-in for the engine's
    /// cache). 0 = no per-worker bound.
    pub worker_capacity: u64,
    /// A `kvidx_clock` value; anything else is `KVIDX_ERR_INVALID_ARGUMENT`.
    pub clock: u32,
}

/// One worker's answer to a predicted lookup (`kvidx_find_matches_predicted`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_predicted_match {
    /// The worker's engine instance.
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    pub dp_rank: u32,
    /// The confirmed depth: what `kvidx_find_matches` reports for the worker (0 when it holds
    /// no prefix of the query, or is not in that answer).
    pub depth: u32,
    /// The predicted depth: the longest prefix of the query whose every block the worker
    /// holds within its confirmed depth or is predicted (unexpired) to hold; `>= depth` and
    /// always > 0.
    pub predicted_depth: u32,
}

/// The state and counters of an indexer's predictions (`kvidx_get_prediction_stats`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct kvidx_prediction_stats {
    /// Predicted blocks held, one per (worker, block), expired ones not yet dropped included.
    pub blocks: u64,
    /// Workers with at least one predicted block held.
    pub workers: u64,
    /// Bytes the predictions take; at most `kvidx_prediction_config.max_bytes`.
    pub bytes: u64,
    /// Blocks dropped, least recently predicted first, to stay within the byte bound.
    pub dropped_for_bytes: u64,
    /// Blocks dropped, a worker's least recently predicted first, for its capacity.
    pub dropped_for_capacity: u64,
    /// Expired blocks dropped.
    pub expired: u64,
    /// Blocks confirmed by a STORED of the same worker and block (the prediction dropped).
    pub confirmed: u64,
    /// Blocks dropped by a REMOVED, a CLEARED or a worker's removal.
    pub dropped_by_events: u64,
}

const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<kvidx_predicted_match>() == size_of::<PredictedMatch>());
    assert!(align_of::<kvidx_predicted_match>() == align_of::<PredictedMatch>());
    assert!(offset_of!(kvidx_predicted_match, worker_id) == offset_of!(PredictedMatch, worker_id));
    assert!(offset_of!(kvidx_predicted_match, dp_rank) == offset_of!(PredictedMatch, dp_rank));
    assert!(offset_of!(kvidx_predicted_match, depth) == offset_of!(PredictedMatch, depth));
    assert!(
        offset_of!(kvidx_predicted_match, predicted_depth)
            == offset_of!(PredictedMatch, predicted_depth)
    );
};

/// The prediction settings `kvidx_prediction_config_default()` returns.
const DEFAULT_PREDICTIONS: kvidx_prediction_config = kvidx_prediction_config {
    max_bytes: 0,
    worker_capacity: 0,
    clock: kvidx_clock::KVIDX_CLOCK_MONOTONIC as u32,
};

thread_local! {
    static SCRATCH: RefCell<Vec<PredictedMatch>> = const { RefCell::new(Vec::new()) };
}

/// Returns the default prediction settings: `{0, 0, KVIDX_CLOCK_MONOTONIC}` (64 MiB, no
/// per-worker bound, the system's monotonic clock).
#[no_mangle]
pub extern "C" fn kvidx_prediction_config_default() -> kvidx_prediction_config {
    export!(value, DEFAULT_PREDICTIONS, { DEFAULT_PREDICTIONS })
}

/// Like `kvidx_new_with_limits`, with prediction settings. `config`, `limits` and
/// `predictions` may each be NULL for their defaults (`kvidx_new` and
/// `kvidx_new_with_limits` use the default prediction settings).
///
/// Returns `KVIDX_ERR_INVALID_ARGUMENT` for an unknown clock, a number the library cannot
/// represent, and everything `kvidx_new_with_limits` checks; otherwise as `kvidx_new`.
/// `*out` is written only on success; release the handle with `kvidx_free`.
///
/// # Safety
/// `config`, `limits` and `predictions` are each NULL or readable; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_new_with_predictions(
    config: *const kvidx_config,
    limits: *const kvidx_queue_limits,
    predictions: *const kvidx_prediction_config,
    out: *mut *mut kvidx_indexer,
) -> kvidx_status {
    export!(status, {
        // SAFETY: the caller guarantees `predictions` is NULL or readable.
        let settings = unsafe { args::optional(predictions) }?.unwrap_or(DEFAULT_PREDICTIONS);
        let predictions = c_convert::prediction_config(&settings)?;
        // SAFETY: the caller guarantees what `new_indexer` needs (see `# Safety`).
        unsafe { new_indexer(config, limits, predictions, out) }
    })
}

/// Credits `(worker_id, dp_rank)` with the chain of `num_hashes` local hashes (a request's
/// blocks from its first) for `ttl_ns` nanoseconds from now on the indexer's clock: until
/// then, or until events settle it, `kvidx_find_matches_predicted` counts these blocks for
/// the worker; `kvidx_find_matches` never sees them. Blocks already predicted for the worker
/// are refreshed. A STORED of the worker holding a predicted block confirms it (the
/// prediction is dropped, the block is held); a REMOVED of it, a CLEARED of the worker and
/// the worker's removal drop it. Applied before the call returns, even with event threads.
/// Bounded by the settings' `max_bytes` and `worker_capacity` (least recently predicted
/// dropped first). An empty chain or a zero TTL credits nothing.
///
/// # Safety
/// `indexer` is NULL or a live handle; `local_hashes` is readable for `num_hashes` entries.
#[no_mangle]
pub unsafe extern "C" fn kvidx_predict(
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    local_hashes: *const u64,
    num_hashes: usize,
    ttl_ns: u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: the caller guarantees `num_hashes` readable entries at `local_hashes`.
        let chain = unsafe { args::input(local_hashes, num_hashes) }?;
        ix.predict(
            Worker::new(worker_id, dp_rank),
            chain,
            Duration::from_nanos(ttl_ns),
        )
        .map_err(c_convert::status_of)
    })
}

/// Finds the workers holding or predicted to hold a prefix of the query, with both depths
/// (`kvidx_predicted_match`): every worker of `kvidx_find_matches` with the same confirmed
/// depth, and every worker predicted to hold the query's first block; ordered by predicted
/// depth, deepest first, then confirmed depth, deepest first, then `worker_id`, then
/// `dp_rank`. With no prediction held it costs what `kvidx_find_matches` costs.
///
/// Buffers as `kvidx_find_matches`: on `KVIDX_OK`, `out[0 .. *out_len]` holds the matches;
/// if more exist than `out_cap`, `KVIDX_ERR_BUFFER_TOO_SMALL` with the count needed in
/// `*out_len` and `out` untouched.
///
/// # Safety
/// As `kvidx_find_matches`, with `out` writable for `out_cap` `kvidx_predicted_match` entries.
#[no_mangle]
pub unsafe extern "C" fn kvidx_find_matches_predicted(
    indexer: *const kvidx_indexer,
    local_hashes: *const u64,
    num_hashes: usize,
    out: *mut kvidx_predicted_match,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: `kvidx_predicted_match` has `PredictedMatch`'s layout (asserted above); the
        // rest is this function's own contract.
        unsafe {
            find_answer(&SCRATCH, local_hashes, num_hashes, out, out_cap, out_len, |q, m| {
                ix.find_matches_predicted_into(q, m)
            })
        }
    })
}

/// Writes to `*out_ns` the time on the indexer's clock, in nanoseconds: since the indexer
/// was created (monotonic) or as last set (manual).
///
/// # Safety
/// `indexer` is NULL or a live handle; `out_ns` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_now(
    indexer: *const kvidx_indexer,
    out_ns: *mut u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out_ns)?;
        let now = u64::try_from(ix.now().as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: `out_ns` is non-NULL and aligned (checked); the caller guarantees it is
        // writable.
        unsafe { out_ns.write(now) };
        Ok(())
    })
}

/// Sets a manual clock to `now_ns` nanoseconds. `KVIDX_ERR_INVALID_ARGUMENT` with the
/// monotonic clock or for a time before the clock's current one (it never goes back).
///
/// # Safety
/// `indexer` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn kvidx_set_time(
    indexer: *const kvidx_indexer,
    now_ns: u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        ix.set_time(Duration::from_nanos(now_ns))
            .map_err(c_convert::status_of)
    })
}

/// Moves a manual clock forward by `by_ns` nanoseconds (saturating).
/// `KVIDX_ERR_INVALID_ARGUMENT` with the monotonic clock.
///
/// # Safety
/// `indexer` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn kvidx_advance_time(
    indexer: *const kvidx_indexer,
    by_ns: u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        ix.advance_time(Duration::from_nanos(by_ns))
            .map_err(c_convert::status_of)
    })
}

/// Copies the state and counters of the indexer's predictions to `*out`.
///
/// # Safety
/// `indexer` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_get_prediction_stats(
    indexer: *const kvidx_indexer,
    out: *mut kvidx_prediction_stats,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out)?;
        let s = ix.prediction_stats();
        let stats = kvidx_prediction_stats {
            blocks: s.blocks,
            workers: s.workers,
            bytes: s.bytes,
            dropped_for_bytes: s.dropped_for_bytes,
            dropped_for_capacity: s.dropped_for_capacity,
            expired: s.expired,
            confirmed: s.confirmed,
            dropped_by_events: s.dropped_by_events,
        };
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(stats) };
        Ok(())
    })
}
