//! The reference model of docs/contract.md section 1: the simplest obviously-correct index.
//!
//! Per worker, a map from engine name to `(position, identity)`; queries scan every worker.
//! It is the oracle that every backend is tested against, and the naive baseline of the
//! benchmarks. It is thread-safe through one mutex, and slow on purpose of clarity.

use std::collections::{BTreeMap, HashMap, HashSet};

use parking_lot::Mutex;

use crate::identity::{identities, mix, IDENTITY_SEED};
use crate::index::Backend;
use crate::model::{
    chain_fits, sort_matches, Block, EventData, Match, Outcome, RejectReason, Worker,
};

/// One held block: where it sits in its chain and which prefix it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    position: u32,
    identity: u64,
}

/// The reference model (see the module docs).
#[derive(Debug, Default)]
pub struct ReferenceIndex {
    workers: Mutex<BTreeMap<Worker, HashMap<u64, Held>>>,
}

impl ReferenceIndex {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    fn store(blocks_of: &mut HashMap<u64, Held>, parent: Option<u64>, blocks: &[Block]) -> Outcome {
        if blocks.is_empty() {
            return Outcome::Applied {
                unknown_removals: 0,
            };
        }
        let (mut position, mut identity) = match parent {
            None => (0u64, IDENTITY_SEED),
            Some(name) => match blocks_of.get(&name) {
                None => return Outcome::Rejected(RejectReason::ParentNotFound),
                Some(held) => (u64::from(held.position) + 1, held.identity),
            },
        };
        if !chain_fits(position, blocks.len()) {
            return Outcome::Rejected(RejectReason::PositionOverflow);
        }
        for block in blocks {
            identity = mix(identity, block.local_hash);
            let held = Held {
                position: position as u32,
                identity,
            };
            blocks_of.insert(block.seq_hash, held);
            position += 1;
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }
}

impl Backend for ReferenceIndex {
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        let mut workers = self.workers.lock();
        match data {
            // `store` checks everything before it changes anything, so a rejected event
            // changes nothing; only a worker that must already hold the parent is not created.
            EventData::Stored {
                parent: Some(parent),
                blocks,
            } if !blocks.is_empty() => match workers.get_mut(&worker) {
                Some(blocks_of) => Self::store(blocks_of, Some(*parent), blocks),
                None => Outcome::Rejected(RejectReason::ParentNotFound),
            },
            EventData::Stored { parent, blocks } => {
                Self::store(workers.entry(worker).or_default(), *parent, blocks)
            }
            EventData::Removed { seq_hashes } => {
                let blocks_of = workers.entry(worker).or_default();
                let unknown = seq_hashes
                    .iter()
                    .filter(|name| blocks_of.remove(name).is_none())
                    .count();
                Outcome::Applied {
                    unknown_removals: unknown as u64,
                }
            }
            EventData::Cleared => {
                workers.entry(worker).or_default().clear();
                Outcome::Applied {
                    unknown_removals: 0,
                }
            }
        }
    }

    fn remove_worker(&self, worker_id: u64) {
        self.workers.lock().retain(|w, _| w.worker_id != worker_id);
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        self.workers.lock().remove(&worker);
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
        let query = identities(local_hashes);
        let workers = self.workers.lock();
        for (worker, blocks_of) in workers.iter() {
            let held: HashSet<u64> = blocks_of.values().map(|h| h.identity).collect();
            let depth = query.iter().take_while(|q| held.contains(q)).count();
            if depth > 0 {
                out.push(Match {
                    worker_id: worker.worker_id,
                    dp_rank: worker.dp_rank,
                    depth: depth as u32,
                });
            }
        }
        sort_matches(out);
    }

    fn workers(&self) -> u64 {
        self.workers.lock().len() as u64
    }

    fn worker_blocks(&self) -> u64 {
        self.workers.lock().values().map(|b| b.len() as u64).sum()
    }
}
