//! What the positional and radix backends share: per-worker state kept in a [`Registry`], and
//! the dispatch of every event onto three operations (store a chain, drop one name, clear).
//!
//! A type implementing [`WorkerBlocks`] is a [`Backend`]: the blanket implementation below
//! applies events, removes workers and sorts query answers the same way for every backend.

use super::registry::{Entry, Registry};
use super::Backend;
use crate::model::{sort_matches, Block, EventData, Match, Outcome, RejectReason, Worker};

/// A backend whose writes are per-worker operations on its own structure.
pub(crate) trait WorkerBlocks: Send + Sync + 'static {
    /// One worker's record of its blocks.
    type State: Default + Send + 'static;

    /// The workers and their states.
    fn registry(&self) -> &Registry<Self::State>;

    /// Stores a chain of blocks after `parent` (a name the worker holds) or at position 0.
    fn store(
        &self,
        state: &mut Self::State,
        slot: u32,
        parent: Option<u64>,
        blocks: &[Block],
    ) -> Outcome;

    /// Drops one name; false if the worker did not hold it.
    fn remove_name(&self, state: &mut Self::State, slot: u32, name: u64) -> bool;

    /// Drops every block of the worker.
    fn clear(&self, state: &mut Self::State, slot: u32);

    /// Writes the unsorted answer of a query into `out` (already cleared).
    fn search(&self, local_hashes: &[u64], out: &mut Vec<Match>);

    /// Wraps every change to one worker; by default it just runs it.
    fn around_change<R>(
        &self,
        entry: &mut Entry<Self::State>,
        change: impl FnOnce(&mut Self::State, u32) -> R,
    ) -> R {
        change(&mut entry.state, entry.slot)
    }
}

impl<B: WorkerBlocks> Backend for B {
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        // Only a Stored with a parent (and blocks) needs the worker to exist already.
        let create =
            !matches!(data, EventData::Stored { parent: Some(_), blocks } if !blocks.is_empty());
        let outcome = self.registry().with_worker(worker, create, |entry| {
            self.around_change(entry, |state, slot| match data {
                // A Stored with no blocks is a no-op, whatever its parent.
                EventData::Stored { blocks, .. } if blocks.is_empty() => Outcome::Applied {
                    unknown_removals: 0,
                },
                EventData::Stored { parent, blocks } => self.store(state, slot, *parent, blocks),
                EventData::Removed { seq_hashes } => {
                    let unknown = seq_hashes
                        .iter()
                        .filter(|&&name| !self.remove_name(state, slot, name))
                        .count();
                    Outcome::Applied {
                        unknown_removals: unknown as u64,
                    }
                }
                EventData::Cleared => {
                    self.clear(state, slot);
                    Outcome::Applied {
                        unknown_removals: 0,
                    }
                }
            })
        });
        // An unknown worker cannot hold the parent.
        outcome.unwrap_or(Outcome::Rejected(RejectReason::ParentNotFound))
    }

    fn remove_worker(&self, worker_id: u64) {
        for worker in self.registry().workers_with_id(worker_id) {
            self.remove_worker_dp_rank(worker);
        }
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        self.registry()
            .remove(worker, |entry| self.clear(&mut entry.state, entry.slot));
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
        self.search(local_hashes, out);
        sort_matches(out);
    }

    fn workers(&self) -> u64 {
        self.registry().len()
    }

    fn worker_blocks(&self) -> u64 {
        self.registry().worker_blocks()
    }
}

/// Appends a worker's match unless its depth is 0.
pub(crate) fn push_match(out: &mut Vec<Match>, worker: Worker, depth: usize) {
    if depth > 0 {
        out.push(Match {
            worker_id: worker.worker_id,
            dp_rank: worker.dp_rank,
            depth: depth as u32,
        });
    }
}
