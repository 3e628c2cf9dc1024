//! The backend trait every index implements, and the backends themselves.

use crate::model::{EventData, Match, Outcome, TieredMatch, Worker};

/// An index of which worker holds which blocks, exact to the reference model.
///
/// Implementations are thread-safe: `apply` may run on several threads at once (for different
/// workers, or for the same worker, which the backend then serialises), and `find_matches_into`
/// runs on any number of threads at once, also while events are applied.
pub trait Backend: Send + Sync + 'static {
    /// Applies one event of `worker`; the worker becomes known unless the event is rejected.
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome;
    /// Drops and forgets every dp rank of `worker_id`.
    fn remove_worker(&self, worker_id: u64);
    /// Drops and forgets one worker.
    fn remove_worker_dp_rank(&self, worker: Worker);
    /// Writes the matches of a query (local hashes) into `out`, cleared first, in the
    /// contract's order.
    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>);
    /// Writes the tiered matches of a query into `out`, cleared first, in the contract's
    /// order: the same workers and depths as [`Backend::find_matches_into`], each with its
    /// cumulative depth per storage tier.
    fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>);
    /// Known workers.
    fn workers(&self) -> u64;
    /// Sum over workers of the blocks they hold.
    fn worker_blocks(&self) -> u64;

    /// Applies several events of one worker in order, as one unit: this crate's backends
    /// (and the reference model) apply them under one hold of the worker's lock, so no
    /// snapshot sees part of the batch, and no reader sees part of a batch at an offset. A
    /// plain batch (no offset) may be seen after any of its events by a lookup that waits
    /// for the worker: the change ends after the event in progress, so the lookup waits
    /// for one event, not the whole batch. `outcome` is called with each event's outcome,
    /// in order.
    ///
    /// With an `offset` (>= 1), the backend keeps the worker's watermark: a batch whose
    /// offset is at or below it is skipped whole (`false` is returned and `outcome` is never
    /// called); otherwise every event is applied, the watermark becomes `offset` and the
    /// worker is known afterwards (even if every event was rejected). Returns `true` when
    /// the batch was applied.
    ///
    /// The default applies each event with [`Backend::apply`] and keeps no watermark (every
    /// batch is applied, one event at a time): a backend outside this crate that needs
    /// exactly-once replay implements this and [`Backend::watermark`] itself.
    fn apply_batch(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: &[EventData],
        outcome: &mut dyn FnMut(Outcome),
    ) -> bool {
        let _ = offset;
        for data in events {
            outcome(self.apply(worker, data));
        }
        true
    }

    /// The worker's watermark: the offset of the last batch applied to it; `None` when the
    /// worker is unknown or has none (the default: no watermarks kept).
    fn watermark(&self, worker: Worker) -> Option<u64> {
        let _ = worker;
        None
    }

    /// The prefix identity ([`crate::identity`]) of the block the worker holds under engine
    /// name `name`; `None` when it holds no such name, or (the default) when the backend
    /// cannot tell. Predictions use it to settle the blocks a Stored (with a parent) or a
    /// Removed names; a backend answering `None` leaves those predictions to expire.
    fn identity_of(&self, worker: Worker, name: u64) -> Option<u64> {
        let _ = (worker, name);
        None
    }

    /// The backend's snapshot support ([`crate::snapshot`]); `None` (the default) when it
    /// cannot be written to or restored from a snapshot.
    fn snapshots(&self) -> Option<crate::snapshot::SnapshotHooks<'_>> {
        None
    }
}

/// Which index structure an indexer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    /// Per-position maps keyed by prefix identity, with exact jump search.
    Positional,
    /// A concurrent radix tree over local hashes.
    Radix,
    /// A tree of runs: consecutive blocks stored once for all their holders, each holder
    /// with the prefix of the run it holds (and a bitset past a gap). The default.
    #[default]
    Runs,
    /// The reference model: linear scans under one lock. For tests and baselines only.
    Reference,
}

mod change_log;
mod children;
mod level;
mod records;
mod registry;
mod segmented;
mod tiers;
mod worker_blocks;
mod worker_set;

pub mod positional;
pub mod radix;
pub mod reference;
pub mod runs;
