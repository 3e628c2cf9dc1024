//! Writing to an indexer: events, worker removal, the flush barrier.

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{kvidx_event, kvidx_indexer, kvidx_status};
use kvidx_core::Worker;

/// Applies one event (synchronous mode) or checks its shape, copies it and queues it behind
/// the earlier events of its worker (pooled mode; blocks while that queue is full).
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL handle or event, or a NULL array with a
/// length above 0; `KVIDX_ERR_INVALID_ARGUMENT` for an unknown `kind` or a `has_parent` other than 0/1.
/// Such an event is refused whole and counts nowhere. Synchronous mode returns
/// `KVIDX_ERR_PARENT_NOT_FOUND` for a rejected STORED (counted in `events_rejected`); pooled
/// mode reports semantic outcomes only in `kvidx_get_stats` after `kvidx_flush`.
///
/// # Safety
/// `indexer` is NULL or a live handle; `event` is NULL or points to a readable `kvidx_event`
/// whose arrays are readable for their lengths. Nothing is kept after the call returns.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_event(
    indexer: *const kvidx_indexer,
    event: *const kvidx_event,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(event)?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees a readable event whose
        // arrays are readable for their lengths.
        let event = unsafe { c_convert::event(&*event) }?;
        ix.apply_event(event).map_err(c_convert::status_of)
    })
}

/// Applies or queues `n` events in order, after checking the shape of all of them first: if
/// any is malformed, none is applied or queued and that event's status is returned.
///
/// Otherwise the same as `kvidx_apply_event` on each in order; returns `KVIDX_OK` or the
/// first non-OK status (in synchronous mode a rejected STORED does not stop later events).
/// Consecutive events of one worker are applied a few at a time as one change of that worker:
/// a concurrent lookup sees the worker as it was before or after each such group.
/// `(NULL, 0)` is a valid empty batch.
///
/// # Safety
/// `indexer` is NULL or a live handle; `events` is NULL or points to `n` readable events whose
/// arrays are readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_events(
    indexer: *const kvidx_indexer,
    events: *const kvidx_event,
    n: usize,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: the caller guarantees `n` readable events at `events`.
        let events = unsafe { args::input(events, n) }?;
        let events = events
            .iter()
            // SAFETY: the caller guarantees each event's arrays are readable for their lengths.
            .map(|event| unsafe { c_convert::event(event) })
            .collect::<Result<Vec<_>, _>>()?;
        ix.apply_events(events).map_err(c_convert::status_of)
    })
}

/// Drops and forgets every dp_rank of a worker, ordered after every event of that worker
/// accepted before this call. An unknown worker is a valid no-op. Not counted in
/// `events_applied`.
///
/// # Safety
/// `indexer` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn kvidx_remove_worker(
    indexer: *const kvidx_indexer,
    worker_id: u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        ix.remove_worker(worker_id).map_err(c_convert::status_of)
    })
}

/// Drops and forgets one `(worker_id, dp_rank)`, ordered like `kvidx_remove_worker`. An unknown
/// worker or rank is a valid no-op.
///
/// # Safety
/// `indexer` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn kvidx_remove_worker_dp_rank(
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        ix.remove_worker_dp_rank(Worker::new(worker_id, dp_rank))
            .map_err(c_convert::status_of)
    })
}

/// A barrier: returns once every event (and worker removal) accepted before the call has been
/// applied. Immediate in synchronous mode.
///
/// # Safety
/// `indexer` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn kvidx_flush(indexer: *const kvidx_indexer) -> kvidx_status {
    export!(handle indexer, |ix| { ix.flush().map_err(c_convert::status_of) })
}

/// Like `kvidx_apply_event`, on a storage tier (a `kvidx_tier` value): a STORED puts its
/// blocks on `tier` (a block the worker already holds gains it); a REMOVED takes `tier` off
/// each named block, which stays held while it is on another tier (`KVIDX_TIER_ALL`: every
/// tier, as `kvidx_apply_event`; a name not on `tier` counts in `unknown_removals`); a
/// CLEARED drops every tier. An unknown `tier`, or `KVIDX_TIER_ALL` on a STORED, is
/// `KVIDX_ERR_INVALID_ARGUMENT` and nothing is applied.
///
/// # Safety
/// As `kvidx_apply_event`.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_event_on_tier(
    indexer: *const kvidx_indexer,
    event: *const kvidx_event,
    tier: u32,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(event)?;
        let tier = c_convert::tier(tier)?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees a readable event whose
        // arrays are readable for their lengths.
        let event = unsafe { c_convert::event(&*event) }?;
        let event = c_convert::on_tier(event, tier)?;
        ix.apply_event(event).map_err(c_convert::status_of)
    })
}

/// Like `kvidx_apply_events`, each event on the tier at the same index of `tiers` (see
/// `kvidx_apply_event_on_tier`). Every event and tier is checked before anything is applied:
/// if one is malformed, none is applied or queued and that status is returned. `(NULL, 0)`
/// for both arrays is a valid empty batch.
///
/// # Safety
/// `indexer` is NULL or a live handle; `events` and `tiers` are NULL or readable for `n`
/// entries; each event's arrays are readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_events_on_tiers(
    indexer: *const kvidx_indexer,
    events: *const kvidx_event,
    tiers: *const u32,
    n: usize,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: the caller guarantees `n` readable events at `events`.
        let events = unsafe { args::input(events, n) }?;
        // SAFETY: the caller guarantees `n` readable tiers at `tiers`.
        let tiers = unsafe { args::input(tiers, n) }?;
        let events = events
            .iter()
            .zip(tiers)
            .map(|(event, &tier)| {
                let tier = c_convert::tier(tier)?;
                // SAFETY: the caller guarantees each event's arrays are readable.
                let event = unsafe { c_convert::event(event) }?;
                c_convert::on_tier(event, tier)
            })
            .collect::<Result<Vec<_>, _>>()?;
        ix.apply_events(events).map_err(c_convert::status_of)
    })
}
