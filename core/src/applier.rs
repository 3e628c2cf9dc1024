//! Applies events to a backend and keeps the event counters of the contract.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::index::Backend;
use crate::model::{Event, Outcome, Stats};

/// A backend plus the counters that every way of applying events shares.
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

    /// Applies one event and counts its outcome.
    pub(crate) fn apply(&self, event: &Event) -> Outcome {
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
