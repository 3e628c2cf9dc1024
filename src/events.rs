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
