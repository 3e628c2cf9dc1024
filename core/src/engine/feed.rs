//! Applies engine payloads to an [`Indexer`]: decode and convert every event, then apply, so
//! a malformed batch changes nothing. Events are converted one at a time as they are decoded
//! ([`BatchEvents`]), so the memory held besides the payload is the index events themselves
//! plus one decoded event. [`EngineFeed`] adds per-publisher sequence tracking with the
//! recommended reaction to gaps and restarts, keeps its own (saturating) counters, and
//! forgets a publisher on request or when its worker is removed through it.

use std::collections::HashMap;

use crate::indexer::check_offset;
use crate::model::{BatchOutcome, Event, Worker};
use crate::{Error, Indexer};

use super::batch::{DecodedBatch, Format};
use super::decode::BatchEvents;
use super::error::DecodeError;
use super::feed_hooks::{BatchHooks, FeedHooks};
use super::feed_state::{self, FeedStateError, PublisherState};
use super::seq::{SeqStatus, SeqTracker};
use super::to_index::{to_events, ApplyOptions, Conversion, SkipCounts};

/// Where converted index events go: an [`Indexer`], or a caller's wrapper around one (the C
/// ABI wraps it to tell a panic inside the indexer from one inside the feed).
pub trait EventSink {
    /// Applies or queues one event, like [`Indexer::apply_event`].
    fn apply_event(&self, event: Event) -> Result<(), Error>;

    /// Applies or queues events in order, like [`Indexer::apply_events`]; returns how many
    /// were rejected (always 0 when they are queued). Every event is tried; only
    /// [`Error::ShutDown`] stops early. The default applies them one by one.
    fn apply_events(&self, events: Vec<Event>) -> Result<u64, Error> {
        let mut rejected = 0;
        for event in events {
            match self.apply_event(event) {
                Ok(()) => {}
                Err(Error::ShutDown) => return Err(Error::ShutDown),
                Err(_) => rejected += 1,
            }
        }
        Ok(rejected)
    }

    /// Applies or queues one worker's events as one batch at `offset`, like
    /// [`Indexer::apply_batch_at`]. The default refuses ([`Error::InvalidArgument`]): a sink
    /// that is not an indexer must implement it to take offset batches.
    fn apply_batch_at(
        &self,
        worker: Worker,
        offset: u64,
        events: Vec<Event>,
    ) -> Result<BatchOutcome, Error> {
        let _ = (worker, offset, events);
        Err(Error::InvalidArgument(
            "this event sink does not take offset batches",
        ))
    }
}

impl EventSink for Indexer {
    fn apply_event(&self, event: Event) -> Result<(), Error> {
        Indexer::apply_event(self, event)
    }

    fn apply_events(&self, events: Vec<Event>) -> Result<u64, Error> {
        match self.writer().submit_events(events) {
            (_, Err(Error::ShutDown)) => Err(Error::ShutDown),
            (rejected, _) => Ok(rejected),
        }
    }

    fn apply_batch_at(
        &self,
        worker: Worker,
        offset: u64,
        events: Vec<Event>,
    ) -> Result<BatchOutcome, Error> {
        Indexer::apply_batch_at(self, worker, offset, events)
    }
}

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
    /// Whether the worker was cleared before the batch (gap or restart reaction; in an offset
    /// batch, the clear is part of the batch and skipped with it).
    pub cleared_worker: bool,
    /// Synchronous mode, offset batches: the batch was skipped whole because its offset was at
    /// or below the worker's watermark (nothing applied; `events_submitted` counts its events).
    pub batch_skipped: bool,
    /// The publisher's first batch tracked was above 0: the batches it published before
    /// (`0 .. seq`, a publisher's sequence starts at 0), which this feed never saw ("missed
    /// from the start"); 0 otherwise. The worker is not cleared for them (the feed applied
    /// nothing of this publisher yet); a caller with a replay socket asks it from
    /// [`EngineFeed::next_expected`] before applying the batch.
    pub missed_from_start: u64,
}

/// Applies an already decoded batch to `worker`, numbering index events from
/// `first_event_id`. Every event is tried; only [`Error::ShutDown`] stops early.
pub fn apply_batch<S: EventSink + ?Sized>(
    indexer: &S,
    batch: &DecodedBatch,
    worker: Worker,
    first_event_id: u64,
    options: &ApplyOptions,
) -> Result<BatchReport, Error> {
    let conversion = to_events(batch, worker, first_event_id, options);
    submit(
        indexer,
        conversion,
        worker,
        batch.events.len() as u64,
        None,
        None,
    )
}

/// Submits converted events in order; every event is tried, only [`Error::ShutDown`] stops.
/// With an `offset`, the events (after `clear`, if given) are one batch at that offset.
fn submit<S: EventSink + ?Sized>(
    indexer: &S,
    conversion: Conversion,
    worker: Worker,
    events_decoded: u64,
    offset: Option<u64>,
    clear: Option<Event>,
) -> Result<BatchReport, Error> {
    let mut report = BatchReport {
        dp_rank: worker.dp_rank,
        events_decoded,
        skipped: conversion.skipped,
        ..BatchReport::default()
    };
    if let Some(offset) = offset {
        let submitted = conversion.events.len() as u64;
        let events = clear.into_iter().chain(conversion.events).collect();
        match indexer.apply_batch_at(worker, offset, events)? {
            BatchOutcome::Skipped => report.batch_skipped = true,
            BatchOutcome::Applied { rejected } => report.events_rejected = rejected,
            BatchOutcome::Queued => {}
        }
        report.events_submitted = submitted;
        return Ok(report);
    }
    if let Some(clear) = clear {
        indexer.apply_event(clear)?;
    }
    report.events_submitted = conversion.events.len() as u64;
    report.events_rejected = indexer.apply_events(conversion.events)?;
    Ok(report)
}

/// A payload decoded and converted for one worker, nothing applied yet.
struct Converted {
    worker: Worker,
    events_decoded: u64,
    conversion: Conversion,
    /// The hooks' staged changes, when the feed has hooks.
    hooks: Option<BatchHooks>,
}

/// Decodes `payload` one event at a time, converting each for the worker `(worker_id,
/// dp_rank or the envelope's rank or 0)`; `first_id` gives the first index event id once the
/// worker is known. A decode error anywhere returns it and nothing else.
fn convert_payload(
    format: Format,
    payload: &[u8],
    worker_id: u64,
    dp_rank: Option<u32>,
    options: &ApplyOptions,
    first_id: impl FnOnce(Worker) -> u64,
    mut hooks: Option<&mut FeedHooks>,
) -> Result<Converted, DecodeError> {
    let events = BatchEvents::open(format, payload)?;
    let mut events = match &hooks {
        Some(hooks) if hooks.needs_full_events() => events,
        _ => events.for_index(),
    };
    let rank = match dp_rank {
        Some(rank) => rank,
        // u32::MAX is the C ABI's "rank from the batch": no batch may claim it as its rank.
        None if events.dp_rank() == Some(u32::MAX) => {
            return Err(DecodeError::Envelope(
                "dp_rank 4294967295 is reserved for \"rank from the batch\"",
            ))
        }
        None => events.dp_rank().unwrap_or(0),
    };
    let worker = Worker::new(worker_id, rank);
    let first = first_id(worker);
    let mut conversion = Conversion::default();
    let mut events_decoded = 0u64;
    let mut staged = hooks.as_ref().map(|_| BatchHooks::default());
    for event in &mut events {
        match (hooks.as_deref_mut(), staged.as_mut()) {
            (Some(hooks), Some(staged)) => {
                hooks.convert(staged, event?, &mut conversion, worker, first, options)
            }
            _ => conversion.push_owned(event?, worker, first, options),
        }
        events_decoded += 1;
    }
    Ok(Converted {
        worker,
        events_decoded,
        conversion,
        hooks: staged,
    })
}

/// Decodes `payload` and applies it to `(worker_id, dp_rank)`; `dp_rank: None` takes the
/// envelope's rank (0 when absent). Without sequence tracking; see [`EngineFeed`].
pub fn apply_payload<S: EventSink + ?Sized>(
    indexer: &S,
    format: Format,
    worker_id: u64,
    dp_rank: Option<u32>,
    payload: &[u8],
    options: &ApplyOptions,
) -> Result<BatchReport, FeedError> {
    apply_payload_with(indexer, format, worker_id, dp_rank, payload, options, None)
}

/// Like [`apply_payload`], the decoded batch applied as one offset batch
/// ([`Indexer::apply_batch_at`]): skipped whole when `offset` (>= 1) is at or below the
/// worker's watermark.
pub fn apply_payload_at<S: EventSink + ?Sized>(
    indexer: &S,
    format: Format,
    worker_id: u64,
    dp_rank: Option<u32>,
    payload: &[u8],
    options: &ApplyOptions,
    offset: u64,
) -> Result<BatchReport, FeedError> {
    check_offset(offset).map_err(FeedError::Index)?;
    apply_payload_with(
        indexer,
        format,
        worker_id,
        dp_rank,
        payload,
        options,
        Some(offset),
    )
}

fn apply_payload_with<S: EventSink + ?Sized>(
    indexer: &S,
    format: Format,
    worker_id: u64,
    dp_rank: Option<u32>,
    payload: &[u8],
    options: &ApplyOptions,
    offset: Option<u64>,
) -> Result<BatchReport, FeedError> {
    let converted = convert_payload(format, payload, worker_id, dp_rank, options, |_| 0, None)
        .map_err(FeedError::Decode)?;
    submit(
        indexer,
        converted.conversion,
        converted.worker,
        converted.events_decoded,
        offset,
        None,
    )
    .map_err(FeedError::Index)
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

/// Counters of an [`EngineFeed`]; every one saturates at `u64::MAX` instead of wrapping.
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
    /// Publishers whose first batch tracked was above 0 ([`BatchReport::missed_from_start`]).
    pub late_starts: u64,
    /// Batches those publishers sent before their first batch tracked, summed.
    pub batches_missed_from_start: u64,
}

/// Decodes and applies engine messages with per-publisher sequence tracking.
///
/// The publisher key is the resolved worker `(worker_id, dp_rank)`: one publisher per DP rank.
#[derive(Debug, Clone)]
pub struct EngineFeed {
    config: FeedConfig,
    tracker: SeqTracker<Worker>,
    event_ids: HashMap<Worker, u64>,
    epochs: HashMap<Worker, u64>,
    stats: EngineStats,
    /// The hash check and the llm-d keys scheme, when enabled (`feed_hooks.rs`).
    pub(super) hooks: FeedHooks,
}

impl EngineFeed {
    /// A feed with no publisher seen yet.
    pub fn new(config: FeedConfig) -> Self {
        Self {
            config,
            tracker: SeqTracker::new(),
            event_ids: HashMap::new(),
            epochs: HashMap::new(),
            stats: EngineStats::default(),
            hooks: FeedHooks::default(),
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

    /// The next sequence expected from the publisher `worker`: after its last tracked batch,
    /// or 0 when none was tracked (a publisher's sequence starts at 0). A batch above it
    /// follows missing batches, the publisher's first batch included: that is where a caller
    /// with the engine's replay socket asks it from before applying the batch.
    pub fn next_expected(&self, worker: Worker) -> u64 {
        self.tracker.next_expected(&worker)
    }

    /// Publishers `(worker_id, dp_rank)` the feed holds state for (sequence, event ids).
    pub fn publishers(&self) -> usize {
        self.event_ids.len()
    }

    /// Forgets one publisher: its tracked sequence (its next batch is `First` again) and its
    /// event-id counter. Returns whether the feed knew it.
    pub fn forget(&mut self, worker: Worker) -> bool {
        self.hooks.forget(worker);
        let tracked = self.tracker.forget(&worker);
        let epoch = self.epochs.remove(&worker).is_some();
        self.event_ids.remove(&worker).is_some() || tracked || epoch
    }

    /// Forgets every dp rank of a worker; returns how many publishers were forgotten.
    pub fn forget_worker(&mut self, worker_id: u64) -> usize {
        self.hooks.forget_worker(worker_id);
        self.tracker.retain(|w| w.worker_id != worker_id);
        self.epochs.retain(|w, _| w.worker_id != worker_id);
        let before = self.event_ids.len();
        self.event_ids.retain(|w, _| w.worker_id != worker_id);
        before - self.event_ids.len()
    }

    /// Removes every dp rank of a worker from the indexer ([`Indexer::remove_worker`]) and
    /// forgets its publishers here, so a worker that is gone costs the feed nothing.
    pub fn remove_worker(&mut self, indexer: &Indexer, worker_id: u64) -> Result<(), Error> {
        indexer.remove_worker(worker_id)?;
        self.forget_worker(worker_id);
        Ok(())
    }

    /// Removes one `(worker_id, dp_rank)` from the indexer
    /// ([`Indexer::remove_worker_dp_rank`]) and forgets that publisher here.
    pub fn remove_worker_dp_rank(
        &mut self,
        indexer: &Indexer,
        worker: Worker,
    ) -> Result<(), Error> {
        indexer.remove_worker_dp_rank(worker)?;
        self.forget(worker);
        Ok(())
    }

    /// Decodes `payload` and applies it to `(worker_id, dp_rank)` (`None`: the envelope's
    /// rank, 0 when absent). With `seq`, tracks the publisher's sequence first: after a gap
    /// or a restart the worker is cleared (as configured) before the batch is applied.
    /// A malformed payload changes nothing, not even the tracked sequence.
    pub fn apply_message<S: EventSink + ?Sized>(
        &mut self,
        indexer: &S,
        worker_id: u64,
        dp_rank: Option<u32>,
        seq: Option<u64>,
        payload: &[u8],
    ) -> Result<BatchReport, FeedError> {
        self.apply_message_with(indexer, worker_id, dp_rank, None, seq, payload, None)
    }

    /// Like [`EngineFeed::apply_message`], the decoded batch (with the clear a gap or restart
    /// calls for, first) applied as one offset batch ([`Indexer::apply_batch_at`]): skipped
    /// whole, clear included, when `offset` (>= 1) is at or below the worker's watermark.
    /// The sequence is tracked either way. An offset of 0 is [`Error::InvalidArgument`]
    /// (nothing applied or recorded).
    pub fn apply_message_at<S: EventSink + ?Sized>(
        &mut self,
        indexer: &S,
        worker_id: u64,
        dp_rank: Option<u32>,
        seq: Option<u64>,
        payload: &[u8],
        offset: u64,
    ) -> Result<BatchReport, FeedError> {
        self.apply_message_in_epoch_at(indexer, worker_id, dp_rank, None, seq, payload, offset)
    }

    /// Like [`EngineFeed::apply_message_at`], with the engine epoch the batch came in (the
    /// bridge's id of one engine connection; `None`: not known). A publisher whose epoch
    /// differs from the one of its previous batch restarted: the batch is a
    /// [`SeqStatus::Restart`] (the worker is cleared first, as configured), and its sequence
    /// tracking starts afresh at this batch, so a sequence of the new epoch never counts as
    /// filling a gap of the old one. A batch without an epoch keeps the publisher's epoch.
    #[allow(clippy::too_many_arguments)]
    pub fn apply_message_in_epoch_at<S: EventSink + ?Sized>(
        &mut self,
        indexer: &S,
        worker_id: u64,
        dp_rank: Option<u32>,
        epoch: Option<u64>,
        seq: Option<u64>,
        payload: &[u8],
        offset: u64,
    ) -> Result<BatchReport, FeedError> {
        check_offset(offset).map_err(FeedError::Index)?;
        self.apply_message_with(
            indexer,
            worker_id,
            dp_rank,
            epoch,
            seq,
            payload,
            Some(offset),
        )
    }

    /// Every publisher's tracking state (next sequence, epoch, next event id) as bytes
    /// (`feed_state`'s layout), for [`EngineFeed::restore_state`]. Counters are not included.
    pub fn save_state(&self) -> Vec<u8> {
        let states = self
            .event_ids
            .iter()
            .map(|(&worker, &next_event_id)| PublisherState {
                worker,
                next_seq: self.tracker.expected(&worker),
                epoch: self.epochs.get(&worker).copied(),
                next_event_id,
            })
            .collect();
        feed_state::encode(self.config.format, states)
    }

    /// Replaces every publisher's tracking state with what [`EngineFeed::save_state`] wrote
    /// (of a feed of the same format); the counters are kept. Bytes that are not such a
    /// state change nothing.
    pub fn restore_state(&mut self, bytes: &[u8]) -> Result<(), FeedStateError> {
        let states = feed_state::decode(self.config.format, bytes)?;
        self.tracker.retain(|_| false);
        self.hooks.forget_chains();
        self.event_ids.clear();
        self.epochs.clear();
        for p in states {
            self.event_ids.insert(p.worker, p.next_event_id);
            if let Some(next) = p.next_seq {
                self.tracker.set_expected(&p.worker, next);
            }
            if let Some(epoch) = p.epoch {
                self.epochs.insert(p.worker, epoch);
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_message_with<S: EventSink + ?Sized>(
        &mut self,
        indexer: &S,
        worker_id: u64,
        dp_rank: Option<u32>,
        epoch: Option<u64>,
        seq: Option<u64>,
        payload: &[u8],
        offset: Option<u64>,
    ) -> Result<BatchReport, FeedError> {
        // Decide the reaction from the state before the batch; record nothing until the
        // whole payload has decoded.
        let mut plan = (None, false, false);
        let (tracker, event_ids, epochs, config) =
            (&self.tracker, &self.event_ids, &self.epochs, &self.config);
        let hooks = self.hooks.any().then_some(&mut self.hooks);
        let converted = convert_payload(
            config.format,
            payload,
            worker_id,
            dp_rank,
            &config.options,
            |worker| {
                let new_epoch = match (epoch, epochs.get(&worker)) {
                    (Some(epoch), Some(&old)) => epoch != old,
                    _ => false,
                };
                let status = if new_epoch {
                    Some(SeqStatus::Restart {
                        expected: tracker.expected(&worker).unwrap_or(0),
                        got: seq.unwrap_or(0),
                    })
                } else {
                    seq.map(|seq| tracker.check(&worker, seq))
                };
                let clear = match status {
                    Some(SeqStatus::Gap { .. }) => config.clear_on_gap,
                    Some(SeqStatus::Restart { .. }) => config.clear_on_restart,
                    _ => false,
                };
                plan = (status, clear, new_epoch);
                let next = event_ids.get(&worker).copied().unwrap_or(0);
                next.wrapping_add(u64::from(clear))
            },
            hooks,
        );
        let converted = match converted {
            Ok(converted) => converted,
            Err(e) => {
                self.stats.batches_malformed = self.stats.batches_malformed.saturating_add(1);
                return Err(FeedError::Decode(e));
            }
        };
        let (status, clear, new_epoch) = plan;
        let worker = converted.worker;
        if new_epoch {
            self.tracker.forget(&worker);
        }
        if let Some(epoch) = epoch {
            self.epochs.insert(worker, epoch);
        }
        let recorded = seq.map(|seq| (seq, self.tracker.record(&worker, seq)));
        let missed_from_start = match recorded {
            Some((seq, SeqStatus::First)) => seq,
            _ => 0,
        };
        let stats = &mut self.stats;
        if missed_from_start > 0 {
            stats.late_starts = stats.late_starts.saturating_add(1);
            stats.batches_missed_from_start = stats
                .batches_missed_from_start
                .saturating_add(missed_from_start);
        }
        match status {
            Some(s @ SeqStatus::Gap { .. }) => {
                stats.gaps = stats.gaps.saturating_add(1);
                stats.batches_missed = stats.batches_missed.saturating_add(s.missed());
            }
            Some(SeqStatus::Restart { .. }) => stats.restarts = stats.restarts.saturating_add(1),
            _ => {}
        }
        let next_id = self.event_ids.entry(worker).or_insert(0);
        let clear_event = clear.then(|| Event::cleared(worker, *next_id));
        if clear {
            *next_id = next_id.wrapping_add(1);
            stats.workers_cleared = stats.workers_cleared.saturating_add(1);
        }
        let staged = converted.hooks;
        let mut report = submit(
            indexer,
            converted.conversion,
            worker,
            converted.events_decoded,
            offset,
            clear_event,
        )
        .map_err(FeedError::Index)?;
        if let Some(staged) = staged {
            // A skipped offset batch was applied before (the index holds it): its names still
            // serve the chains that continue it, but it is not counted again.
            let applied = !report.batch_skipped;
            self.hooks.commit(worker, staged, clear && applied, applied);
        }
        *next_id = next_id.wrapping_add(report.events_submitted);
        report.seq = status;
        report.cleared_worker = clear;
        report.missed_from_start = missed_from_start;
        stats.batches = stats.batches.saturating_add(1);
        stats.events_decoded = stats.events_decoded.saturating_add(report.events_decoded);
        stats.events_submitted = stats
            .events_submitted
            .saturating_add(report.events_submitted);
        stats.events_rejected = stats.events_rejected.saturating_add(report.events_rejected);
        stats.events_skipped = stats.events_skipped.saturating_add(report.skipped.total());
        Ok(report)
    }
}
