//! Conversions between the C types (`c_types`) and the core's Rust API, validating
//! everything C sends.

use super::args;
use super::c_types::{
    kvidx_backend, kvidx_config, kvidx_event, kvidx_event_kind, kvidx_queue_limits,
    kvidx_replica_stats, kvidx_snapshot_info, kvidx_stats, kvidx_status, kvidx_tier,
};
use super::predictions::{kvidx_clock, kvidx_prediction_config};
use kvidx_core::{
    BackendKind, Block, Clock, Config, Error, Event, EventData, PredictionConfig, ReplicaStats,
    SnapshotInfo, Stats, Tier, Worker,
};

/// The status of a Rust API error.
pub(crate) fn status_of(error: Error) -> kvidx_status {
    match error {
        Error::InvalidArgument(_) => kvidx_status::KVIDX_ERR_INVALID_ARGUMENT,
        Error::ParentNotFound => kvidx_status::KVIDX_ERR_PARENT_NOT_FOUND,
        Error::ShutDown => kvidx_status::KVIDX_ERR_SHUT_DOWN,
        Error::Malformed(_) => kvidx_status::KVIDX_ERR_MALFORMED,
        Error::Io(_) => kvidx_status::KVIDX_ERR_IO,
    }
}

/// The configuration `kvidx_config_default()` returns.
pub(crate) const DEFAULT_CONFIG: kvidx_config = kvidx_config {
    backend: kvidx_backend::KVIDX_BACKEND_RUNS as u32,
    event_threads: 1,
    jump_size: 0,
};

/// The queue limits `kvidx_queue_limits_default()` returns: the library's defaults.
pub(crate) const DEFAULT_LIMITS: kvidx_queue_limits = kvidx_queue_limits {
    queue_capacity: 0,
    queue_bytes: 0,
};

/// A size from C: one the library cannot represent is `KVIDX_ERR_INVALID_ARGUMENT`.
fn size(v: u64) -> Result<usize, kvidx_status> {
    usize::try_from(v).map_err(|_| kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)
}

/// The Rust prediction settings of C ones: an unknown clock or an unrepresentable number is
/// `KVIDX_ERR_INVALID_ARGUMENT`.
pub(crate) fn prediction_config(
    c: &kvidx_prediction_config,
) -> Result<PredictionConfig, kvidx_status> {
    let clock = match c.clock {
        v if v == kvidx_clock::KVIDX_CLOCK_MONOTONIC as u32 => Clock::Monotonic,
        v if v == kvidx_clock::KVIDX_CLOCK_MANUAL as u32 => Clock::Manual,
        _ => return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
    };
    Ok(PredictionConfig {
        max_bytes: size(c.max_bytes)?,
        worker_capacity: size(c.worker_capacity)?,
        clock,
    })
}

/// The Rust configuration of a C one, validated (`Config::validate`): an unknown backend or
/// any number out of range is `KVIDX_ERR_INVALID_ARGUMENT`.
pub(crate) fn config(
    c: &kvidx_config,
    limits: &kvidx_queue_limits,
) -> Result<Config, kvidx_status> {
    let backend = match c.backend {
        b if b == kvidx_backend::KVIDX_BACKEND_POSITIONAL as u32 => BackendKind::Positional,
        b if b == kvidx_backend::KVIDX_BACKEND_RADIX as u32 => BackendKind::Radix,
        b if b == kvidx_backend::KVIDX_BACKEND_RUNS as u32 => BackendKind::Runs,
        _ => return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
    };
    let config = Config {
        backend,
        event_threads: size(c.event_threads.into())?,
        jump_size: size(c.jump_size.into())?,
        queue_capacity: size(limits.queue_capacity)?,
        queue_bytes: size(limits.queue_bytes)?,
        predictions: PredictionConfig::default(),
    };
    config.validate().map_err(status_of)?;
    Ok(config)
}

/// A Rust event copied out of a C one, after checking its shape.
///
/// # Safety
/// The arrays the event's kind uses must be readable for their lengths (or be `(NULL, 0)`).
pub(crate) unsafe fn event(c: &kvidx_event) -> Result<Event, kvidx_status> {
    let worker = Worker::new(c.worker_id, c.dp_rank);
    match c.kind {
        k if k == kvidx_event_kind::KVIDX_EVENT_STORED as u32 => {
            let parent = match c.has_parent {
                0 => None,
                1 => Some(c.parent_seq_hash),
                _ => return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
            };
            // SAFETY: the caller guarantees `blocks` is readable for `num_blocks` entries.
            let blocks = unsafe { args::input(c.blocks, c.num_blocks) }?;
            let blocks = blocks
                .iter()
                .map(|b| Block::new(b.local_hash, b.seq_hash))
                .collect();
            Ok(Event::stored(worker, c.event_id, parent, blocks))
        }
        k if k == kvidx_event_kind::KVIDX_EVENT_REMOVED as u32 => {
            // SAFETY: the caller guarantees `seq_hashes` is readable for `num_seq_hashes`.
            let names = unsafe { args::input(c.seq_hashes, c.num_seq_hashes) }?;
            Ok(Event::removed(worker, c.event_id, names.to_vec()))
        }
        k if k == kvidx_event_kind::KVIDX_EVENT_CLEARED as u32 => {
            Ok(Event::cleared(worker, c.event_id))
        }
        _ => Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
    }
}

/// A `tier` argument: `Some(tier)`, or `None` for `KVIDX_TIER_ALL`; anything else is
/// `KVIDX_ERR_INVALID_ARGUMENT`.
pub(crate) fn tier(value: u32) -> Result<Option<Tier>, kvidx_status> {
    if value == kvidx_tier::KVIDX_TIER_ALL as u32 {
        return Ok(None);
    }
    Tier::from_index(value)
        .map(Some)
        .ok_or(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)
}

/// Puts a checked event on a tier: a STORED lands on it (`KVIDX_TIER_ALL` is
/// `KVIDX_ERR_INVALID_ARGUMENT`: a block is stored on one tier), a REMOVED leaves it (all of
/// them with `KVIDX_TIER_ALL`), a CLEARED drops every tier whatever the value.
pub(crate) fn on_tier(mut event: Event, tier: Option<Tier>) -> Result<Event, kvidx_status> {
    match &mut event.data {
        EventData::Stored { tier: stored, .. } => {
            *stored = tier.ok_or(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)?;
        }
        EventData::Removed { tier: removed, .. } => *removed = tier,
        EventData::Cleared => {}
    }
    Ok(event)
}

/// The C view of the counters.
pub(crate) fn stats(s: Stats) -> kvidx_stats {
    kvidx_stats {
        events_applied: s.events_applied,
        events_rejected: s.events_rejected,
        unknown_removals: s.unknown_removals,
        workers: s.workers,
        worker_blocks: s.worker_blocks,
    }
}

/// The C view of the offset batch counters.
pub(crate) fn replica_stats(s: ReplicaStats) -> kvidx_replica_stats {
    kvidx_replica_stats {
        batches_applied: s.batches_applied,
        batches_skipped: s.batches_skipped,
        events_skipped: s.events_skipped,
    }
}

/// The C view of a snapshot's totals.
pub(crate) fn snapshot_info(s: SnapshotInfo) -> kvidx_snapshot_info {
    kvidx_snapshot_info {
        workers: s.workers,
        blocks: s.blocks,
        bytes: s.bytes,
        min_watermark: s.min_watermark,
        max_watermark: s.max_watermark,
    }
}
