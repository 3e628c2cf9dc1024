//! Placeholder while the real backend is written: delegates to the reference model.
use crate::index::Backend;
use crate::model::{EventData, Match, Outcome, Worker};
use crate::reference::ReferenceIndex;

/// Placeholder backend.
#[derive(Debug, Default)]
pub struct PositionalIndex(ReferenceIndex);

impl PositionalIndex {
    /// Placeholder constructor.
    pub fn new(_jump: usize) -> Self {
        Self::default()
    }
}

impl Backend for PositionalIndex {
    fn apply(&self, w: Worker, d: &EventData) -> Outcome {
        self.0.apply(w, d)
    }
    fn remove_worker(&self, id: u64) {
        self.0.remove_worker(id)
    }
    fn remove_worker_dp_rank(&self, w: Worker) {
        self.0.remove_worker_dp_rank(w)
    }
    fn find_matches_into(&self, q: &[u64], out: &mut Vec<Match>) {
        self.0.find_matches_into(q, out)
    }
    fn workers(&self) -> u64 {
        self.0.workers()
    }
    fn worker_blocks(&self) -> u64 {
        self.0.worker_blocks()
    }
}
