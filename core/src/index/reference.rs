//! The reference model of docs/contract.md section 1: the simplest obviously-correct index.
//!
//! Per worker, a map from engine name to `(position, identity, tiers)`; queries scan every
//! worker. It is the oracle that every backend is tested against, and the naive baseline of
//! the benchmarks. It is thread-safe through one mutex, and slow on purpose of clarity.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;

use crate::identity::{identities, mix, IDENTITY_SEED};
use crate::index::Backend;
use crate::model::{
    chain_fits, fastest, sort_matches, sort_tiered_matches, Block, EventData, Match, Outcome,
    RejectReason, Tier, TierMask, TieredMatch, Worker, TIERS,
};

/// One held block: where it sits in its chain, which prefix it names, and the tiers it is on
/// (never empty).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Held {
    position: u32,
    identity: u64,
    tiers: TierMask,
}

type Blocks = HashMap<u64, Held>;

/// The reference model (see the module docs).
#[derive(Debug, Default)]
pub struct ReferenceIndex {
    workers: Mutex<Workers>,
}

/// Every known worker's blocks and watermark (0: none).
#[derive(Debug, Default)]
struct Workers {
    blocks: BTreeMap<Worker, Blocks>,
    watermarks: HashMap<Worker, u64>,
}

impl ReferenceIndex {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    fn store(blocks_of: &mut Blocks, parent: Option<u64>, blocks: &[Block], tier: Tier) -> Outcome {
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
            // The same name for the same prefix gains the tier; anything else is (re)named.
            let tiers = match blocks_of.get(&block.seq_hash) {
                Some(held) if held.identity == identity => held.tiers | tier.bit(),
                _ => tier.bit(),
            };
            let held = Held {
                position: position as u32,
                identity,
                tiers,
            };
            blocks_of.insert(block.seq_hash, held);
            position += 1;
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    /// Drops `name`, or only its `tier`; false if the worker does not hold it (on that tier).
    fn remove(blocks_of: &mut Blocks, name: u64, tier: Option<Tier>) -> bool {
        let Some(held) = blocks_of.get_mut(&name) else {
            return false;
        };
        let Some(tier) = tier else {
            blocks_of.remove(&name);
            return true;
        };
        if held.tiers & tier.bit() == 0 {
            return false;
        }
        held.tiers &= !tier.bit();
        if held.tiers == 0 {
            blocks_of.remove(&name);
        }
        true
    }

    /// The worker's cumulative depth per tier for the query's identities (all 0: no match).
    fn tier_depths(blocks_of: &Blocks, query: &[u64]) -> [u32; TIERS] {
        // Each identity the worker holds, on the union of its names' tiers.
        let mut on: HashMap<u64, TierMask> = HashMap::new();
        for held in blocks_of.values() {
            *on.entry(held.identity).or_default() |= held.tiers;
        }
        let mut depths = [0u32; TIERS];
        for (t, depth) in depths.iter_mut().enumerate() {
            *depth = query
                .iter()
                .take_while(|q| on.get(q).is_some_and(|&mask| fastest(mask) <= t))
                .count() as u32;
        }
        depths
    }
}

impl ReferenceIndex {
    /// One event, under the model's lock.
    fn apply_locked(
        workers: &mut BTreeMap<Worker, Blocks>,
        worker: Worker,
        data: &EventData,
    ) -> Outcome {
        match data {
            // `store` checks everything before it changes anything, so a rejected event
            // changes nothing; only a worker that must already hold the parent is not created.
            EventData::Stored {
                parent: Some(parent),
                blocks,
                tier,
            } if !blocks.is_empty() => match workers.get_mut(&worker) {
                Some(blocks_of) => Self::store(blocks_of, Some(*parent), blocks, *tier),
                None => Outcome::Rejected(RejectReason::ParentNotFound),
            },
            EventData::Stored {
                parent,
                blocks,
                tier,
            } => Self::store(workers.entry(worker).or_default(), *parent, blocks, *tier),
            EventData::Removed { seq_hashes, tier } => {
                let blocks_of = workers.entry(worker).or_default();
                let unknown = seq_hashes
                    .iter()
                    .filter(|&&name| !Self::remove(blocks_of, name, *tier))
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
}

impl Backend for ReferenceIndex {
    fn identity_of(&self, worker: Worker, name: u64) -> Option<u64> {
        let workers = self.workers.lock();
        Some(workers.blocks.get(&worker)?.get(&name)?.identity)
    }

    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        Self::apply_locked(&mut self.workers.lock().blocks, worker, data)
    }

    fn apply_batch(
        &self,
        worker: Worker,
        offset: Option<u64>,
        events: &[EventData],
        outcome: &mut dyn FnMut(Outcome),
    ) -> bool {
        let mut workers = self.workers.lock();
        if let Some(offset) = offset {
            if workers
                .watermarks
                .get(&worker)
                .is_some_and(|&w| offset <= w)
            {
                return false;
            }
        }
        for data in events {
            outcome(Self::apply_locked(&mut workers.blocks, worker, data));
        }
        if let Some(offset) = offset {
            workers.blocks.entry(worker).or_default();
            workers.watermarks.insert(worker, offset);
        }
        true
    }

    fn watermark(&self, worker: Worker) -> Option<u64> {
        let workers = self.workers.lock();
        workers.watermarks.get(&worker).copied().filter(|&w| w > 0)
    }

    fn remove_worker(&self, worker_id: u64) {
        let mut workers = self.workers.lock();
        workers.blocks.retain(|w, _| w.worker_id != worker_id);
        workers.watermarks.retain(|w, _| w.worker_id != worker_id);
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        let mut workers = self.workers.lock();
        workers.blocks.remove(&worker);
        workers.watermarks.remove(&worker);
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        let mut tiered = Vec::new();
        self.find_matches_tiered_into(local_hashes, &mut tiered);
        out.clear();
        out.extend(tiered.iter().map(TieredMatch::to_match));
        sort_matches(out);
    }

    fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        out.clear();
        let query = identities(local_hashes);
        let workers = self.workers.lock();
        for (worker, blocks_of) in workers.blocks.iter() {
            let tier_depths = Self::tier_depths(blocks_of, &query);
            let depth = tier_depths[TIERS - 1];
            if depth > 0 {
                out.push(TieredMatch {
                    worker_id: worker.worker_id,
                    dp_rank: worker.dp_rank,
                    depth,
                    tier_depths,
                });
            }
        }
        sort_tiered_matches(out);
    }

    fn workers(&self) -> u64 {
        self.workers.lock().blocks.len() as u64
    }

    fn worker_blocks(&self) -> u64 {
        self.workers
            .lock()
            .blocks
            .values()
            .map(|b| b.len() as u64)
            .sum()
    }
}
