//! Applies engine payloads to an [`Indexer`]: decode fully, convert, then apply, so a
//! malformed batch changes nothing. [`EngineFeed`] adds per-publisher sequence tracking with
//! the recommended reaction to gaps and restarts, and keeps its own counters.

use std::collections::HashMap;

use crate::model::{Event, Worker};
use crate::{Error, Indexer};

use super::convert::{to_events, ApplyOptions, SkipCounts};
use super::decode::decode_batch;
use super::error::DecodeError;
use super::seq::{SeqStatus, SeqTracker};
use super::types::{DecodedBatch, Format};

/// Why a payload was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedError {
    /// The payload is malformed; nothing was applied.
    Decode(DecodeError),
    /// The indexer refused events (its event threads are gone).
    Index(Error),
}

impl std::fmt::Display for FeedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeedError::Decode(e) => write!(f, "malformed engine batch: {e}"),
            FeedError::Index(e) => write!(f, "indexer error: {e}"),
        }
    }
}

impl std::error::Error for FeedError {}

/// What applying one batch did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BatchReport {
    /// The dp rank the events were applied to.
    pub dp_rank: u32,
    /// Engine events in the batch.
    pub events_decoded: u64,
    /// Index events submitted (applied, or queued in pooled mode).
    pub events_submitted: u64,
    /// Synchronous mode: submitted Stored events rejected for a missing parent (or overflow).
    pub events_rejected: u64,
    /// Engine events that did not become index events.
    pub skipped: SkipCounts,
    /// How the batch's sequence number related to the publisher's previous one, when given.
    pub seq: Option<SeqStatus>,
    /// Whether the worker was cleared before the batch (gap or restart reaction).
    pub cleared_worker: bool,
}

/// Applies an already decoded batch to `worker`, numbering index events from
/// `first_event_id`. Every event is tried; only [`Error::ShutDown`] stops early.
pub fn apply_batch(
    indexer: &Indexer,
    batch: &DecodedBatch,
    worker: Worker,
    first_event_id: u64,
    options: &ApplyOptions,
) -> Result<BatchReport, Error> {
    let conversion = to_events(batch, worker, first_event_id, options);
    let mut report = BatchReport {
        dp_rank: worker.dp_rank,
        events_decoded: batch.events.len() as u64,
        skipped: conversion.skipped,
        ..BatchReport::default()
    };
    for event in conversion.events {
        match indexer.apply_event(event) {
            Ok(()) => report.events_submitted += 1,
            Err(Error::ShutDown) => return Err(Error::ShutDown),
            Err(_) => {
                report.events_submitted += 1;
                report.events_rejected += 1;
            }
        }
    }
    Ok(report)
}

/// Decodes `payload` and applies it to `(worker_id, dp_rank)`; `dp_rank: None` takes the
/// envelope's rank (0 when absent). Without sequence tracking; see [`EngineFeed`].
pub fn apply_payload(
    indexer: &Indexer,
    format: Format,
    worker_id: u64,
    dp_rank: Option<u32>,
    payload: &[u8],
    options: &ApplyOptions,
) -> Result<BatchReport, FeedError> {
    let batch = decode_batch(format, payload).map_err(FeedError::Decode)?;
    let worker = Worker::new(worker_id, dp_rank.or(batch.dp_rank).unwrap_or(0));
    apply_batch(indexer, &batch, worker, 0, options).map_err(FeedError::Index)
}

/// How an [`EngineFeed`] decodes and reacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeedConfig {
    /// The engine's wire format.
    pub format: Format,
    /// Filtering and hashing of decoded events.
    pub options: ApplyOptions,
    /// Clear the worker before applying a batch that follows a gap (use `false` when the
    /// caller fetches the missing range from the engine's replay socket first).
    pub clear_on_gap: bool,
    /// Clear the worker before applying the first batch of a restarted publisher.
    pub clear_on_restart: bool,
}

impl FeedConfig {
    /// The recommended setup without a replay socket: clear on gaps and on restarts.
    pub fn new(format: Format) -> Self {
        Self {
            format,
            options: ApplyOptions::default(),
            clear_on_gap: true,
            clear_on_restart: true,
        }
    }
}

/// Counters of an [`EngineFeed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineStats {
    /// Batches decoded and applied.
    pub batches: u64,
    /// Batches refused as malformed (nothing applied, sequence not recorded).
    pub batches_malformed: u64,
    /// Engine events decoded.
    pub events_decoded: u64,
    /// Index events submitted.
    pub events_submitted: u64,
    /// Synchronous mode: submitted Stored events the index rejected.
    pub events_rejected: u64,
    /// Engine events skipped (unknown tag, filtered, unhashable).
    pub events_skipped: u64,
    /// Sequence gaps seen.
    pub gaps: u64,
    /// Batches missed, summed over gaps.
    pub batches_missed: u64,
    /// Publisher restarts seen (sequence going backwards).
    pub restarts: u64,
    /// Workers cleared as a reaction to a gap or restart.
    pub workers_cleared: u64,
}

/// Decodes and applies engine messages with per-publisher sequence tracking.
///
/// The publisher key is the resolved worker `(worker_id, dp_rank)`: one publisher per DP rank.
#[derive(Debug, Clone)]
pub struct EngineFeed {
    config: FeedConfig,
    tracker: SeqTracker<Worker>,
    event_ids: HashMap<Worker, u64>,
    stats: EngineStats,
}

impl EngineFeed {
    /// A feed with no publisher seen yet.
    pub fn new(config: FeedConfig) -> Self {
        Self {
            config,
            tracker: SeqTracker::new(),
            event_ids: HashMap::new(),
            stats: EngineStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FeedConfig {
        &self.config
    }

    /// The counters so far.
    pub fn stats(&self) -> EngineStats {
        self.stats
    }

    /// The sequence tracker (e.g. for the next expected sequence of a publisher).
    pub fn tracker(&self) -> &SeqTracker<Worker> {
        &self.tracker
    }

    /// Forgets a publisher's sequence (call with `Indexer::remove_worker_dp_rank`).
    pub fn forget(&mut self, worker: Worker) {
        self.tracker.forget(&worker);
        self.event_ids.remove(&worker);
    }

    /// Decodes `payload` and applies it to `(worker_id, dp_rank)` (`None`: the envelope's
    /// rank, 0 when absent). With `seq`, tracks the publisher's sequence first: after a gap
    /// or a restart the worker is cleared (as configured) before the batch is applied.
    /// A malformed payload changes nothing, not even the tracked sequence.
    pub fn apply_message(
        &mut self,
        indexer: &Indexer,
        worker_id: u64,
        dp_rank: Option<u32>,
        seq: Option<u64>,
        payload: &[u8],
    ) -> Result<BatchReport, FeedError> {
        let batch = match decode_batch(self.config.format, payload) {
            Ok(batch) => batch,
            Err(e) => {
                self.stats.batches_malformed += 1;
                return Err(FeedError::Decode(e));
            }
        };
        let worker = Worker::new(worker_id, dp_rank.or(batch.dp_rank).unwrap_or(0));
        let status = seq.map(|seq| self.tracker.record(&worker, seq));
        let clear = match status {
            Some(SeqStatus::Gap { .. }) => self.config.clear_on_gap,
            Some(SeqStatus::Restart { .. }) => self.config.clear_on_restart,
            _ => false,
        };
        match status {
            Some(s @ SeqStatus::Gap { .. }) => {
                self.stats.gaps += 1;
                self.stats.batches_missed += s.missed();
            }
            Some(SeqStatus::Restart { .. }) => self.stats.restarts += 1,
            _ => {}
        }
        let next_id = self.event_ids.entry(worker).or_insert(0);
        if clear {
            indexer
                .apply_event(Event::cleared(worker, *next_id))
                .map_err(FeedError::Index)?;
            *next_id += 1;
            self.stats.workers_cleared += 1;
        }
        let mut report = apply_batch(indexer, &batch, worker, *next_id, &self.config.options)
            .map_err(FeedError::Index)?;
        *next_id += report.events_submitted;
        report.seq = status;
        report.cleared_worker = clear;
        self.stats.batches += 1;
        self.stats.events_decoded += report.events_decoded;
        self.stats.events_submitted += report.events_submitted;
        self.stats.events_rejected += report.events_rejected;
        self.stats.events_skipped += report.skipped.total();
        Ok(report)
    }
}
