//! Applies writes to a backend and keeps the event counters of the contract: the one place
//! where a [`Write`] of any kind meets the index.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::index::Backend;
use crate::model::{Outcome, Stats, Write};

/// A backend plus the counters that every way of applying writes shares.
pub(crate) struct Applier {
    backend: Box<dyn Backend>,
    events_applied: AtomicU64,
    events_rejected: AtomicU64,
    unknown_removals: AtomicU64,
}

impl Applier {
    pub(crate) fn new(backend: Box<dyn Backend>) -> Self {
        Self {
            backend,
            events_applied: AtomicU64::new(0),
            events_rejected: AtomicU64::new(0),
            unknown_removals: AtomicU64::new(0),
        }
    }

    pub(crate) fn backend(&self) -> &dyn Backend {
        &*self.backend
    }

    /// Applies one write; events are counted by their outcome (worker removals always apply).
    pub(crate) fn apply(&self, write: &Write) -> Outcome {
        let event = match write {
            Write::Event(event) => event,
            Write::RemoveWorker(worker_id) => {
                self.backend.remove_worker(*worker_id);
                return Outcome::Applied {
                    unknown_removals: 0,
                };
            }
            Write::RemoveWorkerDpRank(worker) => {
                self.backend.remove_worker_dp_rank(*worker);
                return Outcome::Applied {
                    unknown_removals: 0,
                };
            }
        };
        let outcome = self.backend.apply(event.worker, &event.data);
        match outcome {
            Outcome::Applied { unknown_removals } => {
                self.events_applied.fetch_add(1, Ordering::Relaxed);
                if unknown_removals > 0 {
                    self.unknown_removals
                        .fetch_add(unknown_removals, Ordering::Relaxed);
                }
            }
            Outcome::Rejected(_) => {
                self.events_rejected.fetch_add(1, Ordering::Relaxed);
            }
        }
        outcome
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
