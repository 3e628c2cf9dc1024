//! How an indexer applies writes: inline on the caller's thread, or through event threads.
//! Either way every [`Write`] goes through [`Writer::submit`] and reaches the index in
//! [`Applier::apply`].

use std::sync::Arc;

use crate::applier::{Applier, Run};
use crate::model::{BatchOutcome, Event, EventData, Outcome, RejectReason, Worker, Write};
use crate::pool::EventPool;
use crate::Error;

/// The write side of an indexer.
pub(crate) enum Writer {
    /// Writes are applied before `submit` returns; outcomes are returned.
    Inline(Arc<Applier>),
    /// Writes are queued to event threads; outcomes show in the counters after a flush.
    Pooled(EventPool),
}

impl Writer {
    /// An inline writer for `threads == 0`, else a pool of `threads` event threads whose
    /// queues hold at most `capacity` writes and `budget` bytes each.
    pub(crate) fn start(
        applier: &Arc<Applier>,
        threads: usize,
        capacity: usize,
        budget: usize,
    ) -> Result<Self, Error> {
        Ok(if threads == 0 {
            Writer::Inline(Arc::clone(applier))
        } else {
            Writer::Pooled(EventPool::start(
                Arc::clone(applier),
                threads,
                capacity,
                budget,
            )?)
        })
    }

    /// Applies (inline) or queues (pooled) one write.
    #[inline]
    pub(crate) fn submit(&self, write: Write) -> Result<(), Error> {
        match self {
            Writer::Pooled(pool) => pool.submit(write),
            Writer::Inline(applier) => match applier.apply(&write) {
                Outcome::Applied { .. } => Ok(()),
                Outcome::Rejected(reason) => rejection(Some(reason)),
            },
        }
    }

    /// Applies (inline) or queues (pooled) one event, as [`Writer::submit`] does a
    /// [`Write::Event`] (queued as itself: one move less than wrapped in a [`Write`]).
    #[inline]
    pub(crate) fn submit_event(&self, event: Event) -> Result<(), Error> {
        match self {
            Writer::Pooled(pool) => pool.submit_event(event),
            Writer::Inline(applier) => match applier.apply_event(&event) {
                Outcome::Applied { .. } => Ok(()),
                Outcome::Rejected(reason) => rejection(Some(reason)),
            },
        }
    }

    /// Applies (inline) or queues (pooled) events in order; every event is tried. Returns
    /// how many were rejected (inline; queued ones are never counted here) and the first
    /// error. Inline, consecutive events of one worker are gathered into [`Run`]s, each
    /// applied as one change; pooled, the event threads do the same.
    pub(crate) fn submit_events(
        &self,
        events: impl IntoIterator<Item = Event>,
    ) -> (u64, Result<(), Error>) {
        let mut first_error = Ok(());
        let mut rejected = 0;
        match self {
            Writer::Pooled(pool) => {
                // Only a shut-down pool refuses.
                first_error = pool.submit_events(events);
            }
            Writer::Inline(applier) => {
                let mut run = Run::default();
                let mut apply = |run: &mut Run| {
                    let (refused, reason) = applier.apply_run(run);
                    run.clear();
                    rejected += refused;
                    if first_error.is_ok() {
                        first_error = rejection(reason);
                    }
                };
                for event in events {
                    if !run.takes(event.worker) {
                        apply(&mut run);
                    }
                    run.push(event);
                }
                apply(&mut run);
            }
        }
        (rejected, first_error)
    }

    /// Applies (inline) or queues (pooled) one batch of a worker's events.
    pub(crate) fn submit_batch(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: Vec<EventData>,
    ) -> Result<BatchOutcome, Error> {
        match self {
            Writer::Pooled(pool) => pool
                .submit(Write::Batch {
                    worker,
                    offset,
                    events,
                })
                .map(|()| BatchOutcome::Queued),
            Writer::Inline(applier) => Ok(applier.apply_batch(worker, offset, &events)),
        }
    }

    /// Returns once every write accepted before the call has been applied.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        match self {
            Writer::Pooled(pool) => pool.flush(),
            Writer::Inline(_) => Ok(()),
        }
    }
}

/// The error of an event refused for `reason` (none: applied).
fn rejection(reason: Option<RejectReason>) -> Result<(), Error> {
    match reason {
        None => Ok(()),
        Some(RejectReason::ParentNotFound) => Err(Error::ParentNotFound),
        Some(RejectReason::PositionOverflow) => Err(Error::InvalidArgument(
            "the chain passes the largest position (u32::MAX)",
        )),
    }
}
