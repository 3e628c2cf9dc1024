//! How an indexer applies writes: inline on the caller's thread, or through event threads.
//! Either way every [`Write`] goes through [`Writer::submit`] and reaches the index in
//! [`Applier::apply`].

use std::sync::Arc;

use crate::applier::Applier;
use crate::model::{BatchOutcome, EventData, Outcome, RejectReason, Worker, Write};
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
    pub(crate) fn submit(&self, write: Write) -> Result<(), Error> {
        match self {
            Writer::Pooled(pool) => pool.submit(write),
            Writer::Inline(applier) => match applier.apply(&write) {
                Outcome::Applied { .. } => Ok(()),
                Outcome::Rejected(RejectReason::ParentNotFound) => Err(Error::ParentNotFound),
                Outcome::Rejected(RejectReason::PositionOverflow) => Err(Error::InvalidArgument(
                    "the chain passes the largest position (u32::MAX)",
                )),
            },
        }
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
