//! The harness ceiling: an index that keeps nothing but a count of blocks per worker and
//! answers every query with no match. Replayed behind kvidx's own write path
//! ([`kvidx::Indexer::with_backend`]), it measures what the feeder, the bounded queues, the
//! event threads and the flush barrier cost on their own, so a subject's rate can be read
//! against the most any index could reach in the same harness on the same machine.

use kvidx::{Backend, EventData, Match, Outcome, TieredMatch, Worker};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

/// Blocks held per worker, counted from the events (a mock-engine workload names each block
/// once, so the counts equal what an exact index holds).
#[derive(Debug, Default)]
pub struct NullIndex {
    held: Mutex<FxHashMap<Worker, u64>>,
}

impl Backend for NullIndex {
    fn apply(&self, worker: Worker, data: &EventData) -> Outcome {
        let mut held = self.held.lock();
        let count = held.entry(worker).or_default();
        match data {
            EventData::Stored { blocks, .. } => *count += blocks.len() as u64,
            EventData::Removed { seq_hashes, .. } => {
                *count = count.saturating_sub(seq_hashes.len() as u64)
            }
            EventData::Cleared => *count = 0,
        }
        Outcome::Applied {
            unknown_removals: 0,
        }
    }

    fn remove_worker(&self, worker_id: u64) {
        self.held.lock().retain(|w, _| w.worker_id != worker_id);
    }

    fn remove_worker_dp_rank(&self, worker: Worker) {
        self.held.lock().remove(&worker);
    }

    /// No match, ever.
    fn find_matches_into(&self, _local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
    }

    /// No match, ever.
    fn find_matches_tiered_into(&self, _local_hashes: &[u64], out: &mut Vec<TieredMatch>) {
        out.clear();
    }

    fn workers(&self) -> u64 {
        self.held.lock().len() as u64
    }

    fn worker_blocks(&self) -> u64 {
        self.held.lock().values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::Subject;
    use kvidx::{Block, Event};

    #[test]
    fn counts_blocks_and_answers_nothing() {
        let idx = Subject::Null.build(1);
        let w = Worker::new(3, 0);
        idx.submit(Event::stored(
            w,
            0,
            None,
            vec![Block::new(1, 10), Block::new(2, 20)],
        ));
        idx.submit(Event::removed(w, 1, vec![20]));
        idx.flush();
        assert_eq!(idx.worker_blocks(), 1);
        let mut out = vec![Match {
            worker_id: 9,
            dp_rank: 0,
            depth: 1,
        }];
        idx.find_matches_into(&[1, 2], &mut out);
        assert!(out.is_empty());
    }
}
