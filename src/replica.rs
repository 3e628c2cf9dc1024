//! Offset batches and watermarks: exactly-once application when a range of a stream is
//! replayed (docs/contract.md section 5).

use std::collections::HashMap;

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{kvidx_event, kvidx_indexer, kvidx_replica_stats, kvidx_status};
use kvidx_core::{BatchOutcome, Event, Worker};

/// Applies or queues `n` events as offset batches: the events of each worker named in the
/// array, in array order, form one batch at `offset` (>= 1). When a batch is applied (in its
/// worker's order), it is skipped whole if `offset` is at or below the worker's watermark;
/// otherwise all its events are applied under one hold of the worker's lock (no lookup or
/// snapshot sees part of it) and the watermark becomes `offset`. A batch at an offset makes
/// its worker known, even if empty or rejected.
///
/// Every event's shape is checked first (as `kvidx_apply_events`); `offset == 0` is
/// `KVIDX_ERR_INVALID_ARGUMENT`; then nothing is applied or queued. Synchronous mode returns
/// `KVIDX_ERR_PARENT_NOT_FOUND` when a STORED of an applied batch was rejected (the rest of the
/// batch still applies); a skipped batch is `KVIDX_OK` (see `kvidx_get_replica_stats`).
/// `(NULL, 0)` is a valid empty array (nothing happens).
///
/// # Safety
/// `indexer` is NULL or a live handle; `events` is NULL or points to `n` readable events whose
/// arrays are readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn kvidx_apply_events_at(
    indexer: *const kvidx_indexer,
    events: *const kvidx_event,
    n: usize,
    offset: u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: the caller guarantees `n` readable events at `events`.
        let events = unsafe { args::input(events, n) }?;
        let events = events
            .iter()
            // SAFETY: the caller guarantees each event's arrays are readable for their lengths.
            .map(|event| unsafe { c_convert::event(event) })
            .collect::<Result<Vec<_>, _>>()?;
        if offset == 0 {
            return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
        }
        // Batches in the order their workers first appear; found by worker in one lookup.
        let mut batches: Vec<(Worker, Vec<Event>)> = Vec::new();
        let mut batch_of: HashMap<Worker, usize> = HashMap::new();
        for event in events {
            let at = *batch_of.entry(event.worker).or_insert_with(|| {
                batches.push((event.worker, Vec::new()));
                batches.len() - 1
            });
            batches[at].1.push(event);
        }
        let mut first = Ok(());
        for (worker, batch) in batches {
            let status = match ix.apply_batch_at(worker, offset, batch) {
                Ok(BatchOutcome::Applied { rejected }) if rejected > 0 => {
                    Err(kvidx_status::KVIDX_ERR_PARENT_NOT_FOUND)
                }
                Ok(_) => Ok(()),
                Err(e) => Err(c_convert::status_of(e)),
            };
            if first.is_ok() {
                first = status;
            }
            if first == Err(kvidx_status::KVIDX_ERR_SHUT_DOWN) {
                break;
            }
        }
        first
    })
}

/// Writes to `*out` the watermark of `(worker_id, dp_rank)`: the offset of the last batch
/// applied to it (or restored from a snapshot); 0 when the worker is unknown or has none. With
/// event threads, `kvidx_flush` first to include every batch accepted.
///
/// # Safety
/// `indexer` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_watermark(
    indexer: *const kvidx_indexer,
    worker_id: u64,
    dp_rank: u32,
    out: *mut u64,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out)?;
        let watermark = ix.watermark(Worker::new(worker_id, dp_rank)).unwrap_or(0);
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(watermark) };
        Ok(())
    })
}

/// Copies the offset batch counters to `*out`.
///
/// # Safety
/// `indexer` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_get_replica_stats(
    indexer: *const kvidx_indexer,
    out: *mut kvidx_replica_stats,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out)?;
        let stats = c_convert::replica_stats(ix.replica_stats());
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(stats) };
        Ok(())
    })
}
