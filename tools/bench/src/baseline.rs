//! The naive baseline: the nested map of the design story, `worker -> {local hash -> seq
//! hash}`, as a kvidx [`Backend`]: replays run it behind the very write path of kvidx
//! ([`kvidx::Indexer::with_backend`]: the same event threads, sticky routing, bounded queues
//! and flush barrier), so that only the data structure differs.
//!
//! It is **inexact** on purpose, as the story's first version is: it keys blocks by local hash
//! alone, ignoring position and parent, so a worker holding the same local hash in another
//! chain (or at another position) over-counts, and two chains sharing a local hash overwrite
//! each other (under-counts after a removal). A reverse map `seq -> local` makes removal
//! O(1) instead of the story's linear scan, which would only make the baseline slower.
//! Queries scan every worker: O(workers x depth).

use std::sync::Arc;

use kvidx::model::sort_matches;
use kvidx::{Backend, EventData, Match, Outcome, TieredMatch, Worker, TIERS};
use parking_lot::RwLock;
use rustc_hash::FxHashMap;

/// One worker's blocks, both ways.
#[derive(Debug, Default)]
struct WorkerBlocks {
    by_local: FxHashMap<u64, u64>,
    by_seq: FxHashMap<u64, u64>,
}

/// The nested map itself.
#[derive(Debug, Default)]
pub struct NestedMap {
    workers: RwLock<FxHashMap<Worker, Arc<RwLock<WorkerBlocks>>>>,
}

impl NestedMap {
    fn worker(&self, worker: Worker) -> Arc<RwLock<WorkerBlocks>> {
        if let Some(w) = self.workers.read().get(&worker) {
            return Arc::clone(w);
        }
        Arc::clone(self.workers.write().entry(worker).or_default())
    }

    /// Applies one event. Returns the number of removed names that were not held.
    fn apply_data(&self, worker: Worker, data: &EventData) -> u64 {
        let entry = self.worker(worker);
        let mut blocks = entry.write();
        match data {
            EventData::Stored { blocks: new, .. } => {
                for b in new {
                    blocks.by_local.insert(b.local_hash, b.seq_hash);
                    blocks.by_seq.insert(b.seq_hash, b.local_hash);
                }
                0
            }
            // Tiers are not tracked: a removal from one tier drops the block (inexact, like
            // the rest of this baseline).
            EventData::Removed { seq_hashes, .. } => {
                let mut unknown = 0;
                for seq in seq_hashes {
                    match blocks.by_seq.remove(seq) {
                        Some(local) => {
                            if blocks.by_local.get(&local) == Some(seq) {
                                blocks.by_local.remove(&local);
                            }
                        }
                        None => unknown += 1,
                    }
                }
                unknown
            }
            EventData::Cleared => {
                blocks.by_local.clear();
                blocks.by_seq.clear();
                0
            }
        }
    }
}

impl Backend for NestedMap {
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        Outcome::Applied {
            unknown_removals: self.apply_data(worker, data),
        }
    }

    fn remove_worker(&self, worker_id: u64) {
        self.workers.write().retain(|w, _| w.worker_id != worker_id);
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        self.workers.write().remove(&worker);
    }

    fn workers(&self) -> u64 {
        self.workers.read().len() as u64
    }

    /// Per worker, how many leading local hashes of the query it holds; deepest first.
    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
        let workers = self.workers.read();
        for (worker, blocks) in workers.iter() {
            let blocks = blocks.read();
            let depth = local_hashes
                .iter()
                .take_while(|l| blocks.by_local.contains_key(l))
                .count();
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

    /// The plain answer with every tier depth equal to the depth (tiers are not tracked).
    fn find_matches_tiered_into(&self, local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        let mut plain = Vec::new();
        self.find_matches_into(local_hashes, &mut plain);
        out.clear();
        out.extend(plain.iter().map(|m| TieredMatch {
            worker_id: m.worker_id,
            dp_rank: m.dp_rank,
            depth: m.depth,
            tier_depths: [m.depth; TIERS],
        }));
    }

    /// Names held, summed over workers.
    fn worker_blocks(&self) -> u64 {
        let workers = self.workers.read();
        workers.values().map(|b| b.read().by_seq.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Subject;
    use kvidx::{Block, Event};

    #[test]
    fn matches_prefixes_and_applies_after_flush() {
        let idx = Subject::Baseline.build(2);
        let w = |id| Worker::new(id, 0);
        idx.submit(Event::stored(
            w(1),
            0,
            None,
            vec![Block::new(1, 10), Block::new(2, 20)],
        ));
        idx.submit(Event::stored(w(2), 0, None, vec![Block::new(1, 10)]));
        idx.submit(Event::removed(w(1), 1, vec![20, 99]));
        idx.flush();
        let mut out = Vec::new();
        idx.find_matches_into(&[1, 2], &mut out);
        assert_eq!(
            out,
            vec![
                Match {
                    worker_id: 1,
                    dp_rank: 0,
                    depth: 1
                },
                Match {
                    worker_id: 2,
                    dp_rank: 0,
                    depth: 1
                }
            ]
        );
        assert_eq!(idx.worker_blocks(), 2);
        assert_eq!(idx.anomalies(), (0, 1));
    }

    #[test]
    fn over_counts_a_local_hash_held_in_another_chain() {
        // The worker holds local 2 only as the start of another chain, yet the baseline
        // reports depth 2 for the query [1, 2]; the exact answer is 1.
        let map = NestedMap::default();
        let w = Worker::new(0, 0);
        let stored = |blocks| Event::stored(w, 0, None, blocks).data;
        map.apply(w, &stored(vec![Block::new(1, 10)]));
        map.apply(w, &stored(vec![Block::new(2, 2)]));
        let mut out = Vec::new();
        map.find_matches_into(&[1, 2], &mut out);
        assert_eq!(out[0].depth, 2);
    }
}
