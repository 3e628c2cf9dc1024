//! Predicted blocks: chains a router credits to the worker it routed a request to, before the
//! engine's events arrive (or in place of them), each until its time to live runs out or
//! events settle it. See `docs/contract.md`, "Predicted depth".
//!
//! Predictions live beside the index, never in it: the confirmed answers
//! ([`crate::Indexer::find_matches`]) are computed as if none existed. One lock guards an
//! indexer's predictions; an indexer that never predicts never takes it (lookups and events
//! check an atomic count first). Expiry is lazy: expired blocks stop counting at once, and
//! are dropped by later predictions (from the least recently predicted end) or by the byte
//! bound; no thread runs in the background.

mod clock;
mod settle;
mod store;
mod table;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::RwLock;

pub use clock::Clock;
pub(crate) use clock::{saturating_nanos, RunningClock};
use store::Store;

use crate::identity::identities_into;
use crate::model::{Match, PredictedMatch, Worker};
use crate::scratch::with_scratch;

/// Bytes of predictions an indexer holds when [`PredictionConfig::max_bytes`] is 0.
pub const DEFAULT_PREDICTION_BYTES: usize = 64 << 20;

/// How an indexer keeps predictions ([`crate::Indexer::predict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PredictionConfig {
    /// Bytes all predictions of the indexer may take, counted by
    /// [`PredictionStats::bytes`]; the least recently predicted blocks are dropped first to
    /// stay within it. 0 means [`DEFAULT_PREDICTION_BYTES`].
    pub max_bytes: usize,
    /// Predicted blocks each worker may hold; beyond it, that worker's least recently
    /// predicted blocks are dropped first (approximating the engine's own cache, for an
    /// event-free indexer). 0: no per-worker bound.
    pub worker_capacity: usize,
    /// The clock predictions expire by.
    pub clock: Clock,
}

/// The state of an indexer's predictions ([`crate::Indexer::prediction_stats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PredictionStats {
    /// Predicted blocks held, one per (worker, block), expired ones not yet dropped included.
    pub blocks: u64,
    /// Workers with at least one predicted block held.
    pub workers: u64,
    /// Bytes the predictions take (the capacities of their structures); at most the
    /// configured bound.
    pub bytes: u64,
    /// Blocks dropped, least recently predicted first, to stay within the byte bound.
    pub dropped_for_bytes: u64,
    /// Blocks dropped, a worker's least recently predicted first, for its capacity.
    pub dropped_for_capacity: u64,
    /// Expired blocks dropped.
    pub expired: u64,
    /// Blocks confirmed by a Stored of the same worker and block (the prediction dropped).
    pub confirmed: u64,
    /// Blocks dropped by a Removed, a Cleared or a worker's removal.
    pub dropped_by_events: u64,
}

/// An indexer's predictions, their clock and the count that lets an indexer without
/// predictions skip them.
#[derive(Debug)]
pub(crate) struct Predictions {
    store: RwLock<Store>,
    /// Blocks held: 0 lets lookups and events skip the lock.
    held: AtomicUsize,
    clock: RunningClock,
}

thread_local! {
    static IDENTITIES: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    static CANDIDATES: std::cell::RefCell<Vec<Match>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Predictions {
    pub(crate) fn new(config: PredictionConfig) -> Self {
        let max_bytes = if config.max_bytes == 0 {
            DEFAULT_PREDICTION_BYTES
        } else {
            config.max_bytes
        };
        Self {
            store: RwLock::new(Store::new(max_bytes, config.worker_capacity)),
            held: AtomicUsize::new(0),
            clock: RunningClock::start(config.clock),
        }
    }

    pub(crate) fn clock(&self) -> &RunningClock {
        &self.clock
    }

    /// Whether any block is predicted (expired ones not yet dropped included).
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.held.load(Ordering::Acquire) > 0
    }

    /// Credits `worker` with the chain of `local_hashes` for `ttl` from now.
    pub(crate) fn predict(&self, worker: Worker, local_hashes: &[u64], ttl: Duration) {
        if local_hashes.is_empty() || ttl.is_zero() {
            return;
        }
        with_scratch(&IDENTITIES, |ids: &mut Vec<u64>| {
            identities_into(local_hashes, ids);
            let now = self.clock.now_nanos();
            let expires = now.saturating_add(saturating_nanos(ttl));
            self.write(|store| store.predict(worker, ids, expires, now));
        });
    }

    /// Drops the worker's predictions of these identities (`confirmed`: by a Stored).
    pub(crate) fn settle(&self, worker: Worker, identities: &[u64], confirmed: bool) {
        if self.any() {
            self.write(|store| store.drop_identities(worker, identities, confirmed));
        }
    }

    /// Drops every prediction of one worker (a Cleared or its removal).
    pub(crate) fn drop_worker(&self, worker: Worker) {
        if self.any() {
            self.write(|store| store.drop_worker(worker));
        }
    }

    /// Drops every prediction of every dp rank of a worker id.
    pub(crate) fn drop_worker_id(&self, worker_id: u64) {
        if self.any() {
            self.write(|store| store.drop_worker_id(worker_id));
        }
    }

    /// The counters.
    pub(crate) fn stats(&self) -> PredictionStats {
        let store = self.store.read();
        let drops = store.drops;
        PredictionStats {
            blocks: store.len() as u64,
            workers: store.workers() as u64,
            bytes: store.bytes() as u64,
            dropped_for_bytes: drops.for_bytes,
            dropped_for_capacity: drops.for_capacity,
            expired: drops.expired,
            confirmed: drops.confirmed,
            dropped_by_events: drops.by_events,
        }
    }

    /// The predicted answer from the confirmed one (`confirmed`, in the contract's order):
    /// each confirmed worker, and each worker predicted to hold the query's first block,
    /// with the longest prefix of the query whose every block it holds within its confirmed
    /// depth or is predicted (unexpired) to hold.
    pub(crate) fn answer(
        &self,
        local_hashes: &[u64],
        confirmed: &[Match],
        out: &mut Vec<PredictedMatch>,
    ) {
        out.clear();
        out.extend(confirmed.iter().map(|m| PredictedMatch {
            worker_id: m.worker_id,
            dp_rank: m.dp_rank,
            depth: m.depth,
            predicted_depth: m.depth,
        }));
        if !self.any() || local_hashes.is_empty() {
            return;
        }
        with_scratch(&IDENTITIES, |ids: &mut Vec<u64>| {
            identities_into(local_hashes, ids);
            let now = self.clock.now_nanos();
            let store = self.store.read();
            with_scratch(&CANDIDATES, |extra: &mut Vec<Match>| {
                extra.clear();
                store.holders(ids[0], now, |worker| {
                    if !confirmed.iter().any(|m| m.worker() == worker) {
                        extra.push(Match {
                            worker_id: worker.worker_id,
                            dp_rank: worker.dp_rank,
                            depth: 0,
                        });
                    }
                });
                out.extend(extra.iter().map(|m| PredictedMatch {
                    worker_id: m.worker_id,
                    dp_rank: m.dp_rank,
                    depth: 0,
                    predicted_depth: 0,
                }));
            });
            for m in out.iter_mut() {
                let worker = Worker::new(m.worker_id, m.dp_rank);
                let reach = store.extend(worker, ids, m.depth as usize, now);
                m.predicted_depth = reach.min(u32::MAX as usize) as u32;
            }
        });
        out.retain(|m| m.predicted_depth > 0);
        out.sort_unstable_by(|a, b| {
            (b.predicted_depth, b.depth)
                .cmp(&(a.predicted_depth, a.depth))
                .then((a.worker_id, a.dp_rank).cmp(&(b.worker_id, b.dp_rank)))
        });
    }

    fn write<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let mut store = self.store.write();
        let result = f(&mut store);
        self.held.store(store.len(), Ordering::Release);
        result
    }
}
