//! How a worker's events settle its predictions: a Stored confirms the blocks it stores (the
//! prediction is dropped, the block is held), a Removed drops the blocks it names, a Cleared
//! drops all of the worker's. Events of a worker without predictions cost one atomic load,
//! or one map lookup under a read lock while any worker has predictions.

use crate::identity::{mix, IDENTITY_SEED};
use crate::index::Backend;
use crate::model::{EventData, Worker};

use super::Predictions;

/// The identities a worker's Removed events name, read before they are applied (while the
/// worker still holds them).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    removed: Vec<u64>,
}

impl Predictions {
    /// Before applying `events` of `worker`: `None` when it has no predictions (nothing to
    /// settle afterwards), else the identities its Removed events name.
    /// (Inlined: with no prediction held, the common case, it is one load on the event
    /// thread, not a call per event.)
    #[inline]
    pub(crate) fn before_events(
        &self,
        backend: &dyn Backend,
        worker: Worker,
        events: &[EventData],
    ) -> Option<Pending> {
        if !self.any() {
            return None;
        }
        self.before_events_held(backend, worker, events)
    }

    /// [`Predictions::before_events`] once some prediction is held.
    fn before_events_held(
        &self,
        backend: &dyn Backend,
        worker: Worker,
        events: &[EventData],
    ) -> Option<Pending> {
        if !self.store.read().has_worker(worker) {
            return None;
        }
        let mut pending = Pending::default();
        for data in events {
            if let EventData::Removed { seq_hashes, .. } = data {
                pending.removed.extend(
                    seq_hashes
                        .iter()
                        .filter_map(|&name| backend.identity_of(worker, name)),
                );
            }
        }
        Some(pending)
    }

    /// After applying `events` of `worker` (given what [`Predictions::before_events`]
    /// returned): drops what they settled. A Stored whose parent the worker no longer holds
    /// (rejected, or removed by a later event of the same batch) confirms nothing.
    pub(crate) fn after_events(
        &self,
        backend: &dyn Backend,
        worker: Worker,
        events: &[EventData],
        pending: Pending,
    ) {
        if events.iter().any(|e| matches!(e, EventData::Cleared)) {
            self.drop_worker(worker);
        }
        self.settle(worker, &pending.removed, false);
        let mut stored = Vec::new();
        for data in events {
            let EventData::Stored { parent, blocks, .. } = data else {
                continue;
            };
            let prefix = match parent {
                None => Some(IDENTITY_SEED),
                Some(name) => backend.identity_of(worker, *name),
            };
            let Some(mut identity) = prefix else {
                continue;
            };
            for block in blocks {
                identity = mix(identity, block.local_hash);
                stored.push(identity);
            }
        }
        self.settle(worker, &stored, true);
    }
}
