//! Applies writes to a backend and keeps the event counters of the contract: the one place
//! where a [`Write`] of any kind meets the index.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::index::Backend;
use crate::model::{
    BatchOutcome, Event, EventData, Outcome, RejectReason, ReplicaStats, Stats, Worker, Write,
};
use crate::predictions::Predictions;

/// Consecutive events of one worker applied as one change at most ([`Applier::apply_run`]):
/// one lock of the worker and one change of its slot for several events. A reader that meets
/// the change in progress waits for it only if it touched a block the reader read, and then
/// for the event in progress only (the change ends there for a waiting reader); a run of
/// single-name removals fits the slot's touch records.
pub(crate) const MAX_RUN: usize = 16;

/// Consecutive events of one worker gathered to be applied as one change
/// ([`Applier::apply_run`]), at most [`MAX_RUN`] of them.
#[derive(Debug, Default)]
pub(crate) struct Run {
    worker: Option<Worker>,
    events: Vec<EventData>,
}

impl Run {
    /// Whether an event of `worker` may join: the run is empty, or of that worker with room
    /// left. When it may not, the caller applies and clears the run first.
    pub(crate) fn takes(&self, worker: Worker) -> bool {
        match self.worker {
            None => true,
            Some(w) => w == worker && self.events.len() < MAX_RUN,
        }
    }

    /// Adds an event the run [`takes`](Run::takes).
    pub(crate) fn push(&mut self, event: Event) {
        self.push_data(event.worker, event.data);
    }

    /// Adds what an event of `worker` does, as [`Run::push`] adds the event.
    pub(crate) fn push_data(&mut self, worker: Worker, data: EventData) {
        debug_assert!(self.takes(worker));
        self.worker = Some(worker);
        self.events.push(data);
    }

    /// Whether the run has no event.
    pub(crate) fn is_empty(&self) -> bool {
        self.worker.is_none()
    }

    /// Empties the run, keeping its buffer.
    pub(crate) fn clear(&mut self) {
        self.worker = None;
        self.events.clear();
    }
}

/// Outcomes of a batch's events, counted before they are added to the shared counters.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    applied: u64,
    rejected: u64,
    unknown_removals: u64,
}

impl Tally {
    fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Applied { unknown_removals } => {
                self.applied += 1;
                self.unknown_removals += unknown_removals;
            }
            Outcome::Rejected(_) => self.rejected += 1,
        }
    }
}

/// A backend plus the counters that every way of applying writes shares.
pub(crate) struct Applier {
    backend: Box<dyn Backend>,
    predictions: Predictions,
    events_applied: AtomicU64,
    events_rejected: AtomicU64,
    unknown_removals: AtomicU64,
    batches_applied: AtomicU64,
    batches_skipped: AtomicU64,
    events_skipped: AtomicU64,
}

impl Applier {
    pub(crate) fn new(backend: Box<dyn Backend>, predictions: Predictions) -> Self {
        Self {
            backend,
            predictions,
            events_applied: AtomicU64::new(0),
            events_rejected: AtomicU64::new(0),
            unknown_removals: AtomicU64::new(0),
            batches_applied: AtomicU64::new(0),
            batches_skipped: AtomicU64::new(0),
            events_skipped: AtomicU64::new(0),
        }
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    /// The predicted blocks kept beside the index.
    pub(crate) fn predictions(&self) -> &Predictions {
        &self.predictions
    }

    /// Applies one write; events are counted by their outcome (worker removals always apply).
    pub(crate) fn apply(&self, write: &Write) -> Outcome {
        match write {
            Write::Event(event) => self.apply_event(event),
            Write::RemoveWorker(worker_id) => {
                self.backend.remove_worker(*worker_id);
                self.predictions.drop_worker_id(*worker_id);
                Outcome::Applied {
                    unknown_removals: 0,
                }
            }
            Write::RemoveWorkerDpRank(worker) => {
                self.backend.remove_worker_dp_rank(*worker);
                self.predictions.drop_worker(*worker);
                Outcome::Applied {
                    unknown_removals: 0,
                }
            }
            Write::Batch {
                worker,
                offset,
                events,
            } => {
                let rejected = match self.apply_batch(*worker, *offset, events) {
                    BatchOutcome::Applied { rejected } => rejected,
                    _ => 0,
                };
                if rejected > 0 {
                    Outcome::Rejected(RejectReason::ParentNotFound)
                } else {
                    Outcome::Applied {
                        unknown_removals: 0,
                    }
                }
            }
        }
    }

    /// Applies one event, counted by its outcome.
    pub(crate) fn apply_event(&self, event: &Event) -> Outcome {
        let mut tally = Tally::default();
        let outcome = self.apply_event_tallied(event.worker, &event.data, &mut tally);
        self.add(tally);
        outcome
    }

    /// Applies one event (what `data` does to `worker`) as [`Applier::apply_event`] does, adding its outcome to `tally`
    /// instead of the counters (see [`Applier::apply_run_tallied`]): a run of one event,
    /// applied without moving it into a [`Run`]. (Inlined: the event thread calls it per
    /// event.)
    #[inline]
    pub(crate) fn apply_event_tallied(
        &self,
        worker: Worker,
        data: &EventData,
        tally: &mut Tally,
    ) -> Outcome {
        let events = std::slice::from_ref(data);
        let pending = self
            .predictions
            .before_events(self.backend(), worker, events);
        let outcome = self.backend.apply(worker, data);
        if let Some(pending) = pending {
            self.predictions
                .after_events(self.backend(), worker, events, pending);
        }
        tally.add(outcome);
        outcome
    }

    /// Applies one batch of a worker as one unit (skipped whole at or below its watermark
    /// when it has an offset), counting its events and, with an offset, the batch.
    pub(crate) fn apply_batch(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: &[EventData],
    ) -> BatchOutcome {
        let (applied, rejected, _) = self.apply_counted(worker, offset, events);
        if offset.is_none() {
            return BatchOutcome::Applied { rejected };
        }
        if applied {
            self.batches_applied.fetch_add(1, Ordering::Relaxed);
            BatchOutcome::Applied { rejected }
        } else {
            self.batches_skipped.fetch_add(1, Ordering::Relaxed);
            self.events_skipped
                .fetch_add(events.len() as u64, Ordering::Relaxed);
            BatchOutcome::Skipped
        }
    }

    /// Applies a run as one plain batch (one change of its worker), counting its events: how
    /// many were rejected, and the first rejection's reason (nothing for an empty run). The
    /// run is left as it was; the caller clears it.
    pub(crate) fn apply_run(&self, run: &Run) -> (u64, Option<RejectReason>) {
        let mut tally = Tally::default();
        let first = self.apply_run_tallied(run, &mut tally);
        self.add(tally);
        (tally.rejected, first)
    }

    /// Applies a run as [`Applier::apply_run`] does, adding its outcomes to `tally` instead
    /// of the counters (the caller adds the tally with [`Applier::add`], once for many runs:
    /// one shared write per counter then, not per run). Returns the first rejection's reason.
    pub(crate) fn apply_run_tallied(&self, run: &Run, tally: &mut Tally) -> Option<RejectReason> {
        let worker = run.worker?;
        let (_, first) = self.apply_tallied(worker, None, &run.events, tally);
        first
    }

    /// The backend's batch, counted: whether it was applied, how many events were rejected
    /// and the first rejection's reason.
    fn apply_counted(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: &[EventData],
    ) -> (bool, u64, Option<RejectReason>) {
        let mut tally = Tally::default();
        let (applied, first) = self.apply_tallied(worker, offset, events, &mut tally);
        self.add(tally);
        (applied, tally.rejected, first)
    }

    /// The backend's batch, its outcomes added to `tally`: whether it was applied and the
    /// first rejection's reason.
    fn apply_tallied(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: &[EventData],
        tally: &mut Tally,
    ) -> (bool, Option<RejectReason>) {
        let mut first = None;
        let pending = self
            .predictions
            .before_events(self.backend(), worker, events);
        let applied = self
            .backend
            .apply_batch(worker, offset, events, &mut |outcome| {
                if let Outcome::Rejected(reason) = outcome {
                    first = first.or(Some(reason));
                }
                tally.add(outcome);
            });
        if let Some(pending) = pending.filter(|_| applied) {
            self.predictions
                .after_events(self.backend(), worker, events, pending);
        }
        (applied, first)
    }

    /// Adds a tally to the counters: one shared write per counter per batch, not per event.
    pub(crate) fn add(&self, tally: Tally) {
        for (counter, value) in [
            (&self.events_applied, tally.applied),
            (&self.events_rejected, tally.rejected),
            (&self.unknown_removals, tally.unknown_removals),
        ] {
            if value > 0 {
                counter.fetch_add(value, Ordering::Relaxed);
            }
        }
    }

    /// The counters of offset batches.
    pub(crate) fn replica_stats(&self) -> ReplicaStats {
        ReplicaStats {
            batches_applied: self.batches_applied.load(Ordering::Relaxed),
            batches_skipped: self.batches_skipped.load(Ordering::Relaxed),
            events_skipped: self.events_skipped.load(Ordering::Relaxed),
        }
    }

    pub(crate) fn stats(&self) -> Stats {
        Stats {
            events_applied: self.events_applied.load(Ordering::Relaxed),
            events_rejected: self.events_rejected.load(Ordering::Relaxed),
            unknown_removals: self.unknown_removals.load(Ordering::Relaxed),
            workers: self.backend.workers(),
            worker_blocks: self.backend.worker_blocks(),
        }
    }
}
