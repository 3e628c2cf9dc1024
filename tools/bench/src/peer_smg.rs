//! A second public peer as a replay subject (cargo feature `peer`): `kv-index` 2.0.0's
//! `ChainIndex` (`peer-smg`), driven through the same [`Target`] as kvidx's subjects. See
//! docs/bench.md, "The second peer: `kv-index` 2.0.0 (`peer-smg`)".
//!
//! The crate has no event threads of its own (its lanes are the caller's threads), so this
//! adapter gives it kvidx's shape:
//!
//! - **Threads and routing**: `event_threads` threads, each owning the `ChainBlockMap` of
//!   every `(worker, dp_rank)` routed to it; a worker id goes to the thread kvidx's pool would
//!   pick (the same hash of the id), so a worker's events apply in order on one thread.
//! - **Queues**: one bounded queue per thread of [`DEFAULT_QUEUE_CAPACITY`] events (kvidx's
//!   per-thread bound in events; its byte budget is not applied). A full queue blocks the
//!   feeder, as kvidx's does.
//! - **Flush**: a barrier through every queue, acknowledged once everything before it is
//!   applied.
//! - **Synchronous** (`event_threads` 0, the agreement check): every event is applied on the
//!   caller's thread before `submit` returns.
//! - **Queries**: the local hashes through `score_into` (allocation-free), each reported
//!   `(interned id, depth)` pushed as a [`Match`] and the answer sorted with kvidx's own
//!   [`sort_matches`], all inside the timed call.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, Receiver, Sender};
use kv_index::{ChainBlockMap, ChainIndex, ContentHash, SequenceHash, StoredBlock};
use kvidx::model::sort_matches;
use kvidx::{Event, EventData, Match, Worker, DEFAULT_QUEUE_CAPACITY};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;

use crate::target::Target;

/// Workers the index holds at once: `ChainIndex::new()`'s default (one coverage bit each per
/// run). The default fleets (256 workers, dp rank 0) fill it exactly.
const MAX_WORKERS: usize = 256;

/// What the event threads and the query threads share: the index and, per interned id, the
/// `(worker_id, dp_rank)` it stands for (written before the id's first store, so a reader
/// that meets the id in the index finds it here).
struct Shared {
    index: ChainIndex,
    /// `worker_id` and `dp_rank` of each interned id.
    names: Box<[(AtomicU64, AtomicU64)]>,
    rejected: AtomicU64,
}

impl Shared {
    fn new() -> Self {
        Self {
            index: ChainIndex::new(),
            names: (0..MAX_WORKERS)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
            rejected: AtomicU64::new(0),
        }
    }

    /// The worker an interned id stands for.
    fn worker(&self, id: u32) -> (u64, u32) {
        let (worker_id, dp_rank) = &self.names[id as usize];
        (
            worker_id.load(Ordering::Acquire),
            dp_rank.load(Ordering::Acquire) as u32,
        )
    }
}

/// The state one event thread owns: each of its workers' interned id and block map, and
/// buffers the events are converted into (reused, so a steady stream allocates nothing here).
#[derive(Default)]
struct Lane {
    workers: FxHashMap<Worker, (u32, ChainBlockMap)>,
    stored: Vec<StoredBlock>,
    removed: Vec<SequenceHash>,
}

impl Lane {
    /// Applies one event to the index with this lane's map of its worker.
    fn apply(&mut self, shared: &Shared, event: Event) {
        let (id, map) = self.workers.entry(event.worker).or_insert_with(|| {
            let w = event.worker;
            let id = shared
                .index
                .intern_worker(&format!("{}:{}", w.worker_id, w.dp_rank))
                .unwrap_or_else(|_| {
                    panic!("peer-smg holds {MAX_WORKERS} (worker, dp rank) pairs at most")
                });
            let (worker_id, dp_rank) = &shared.names[id as usize];
            worker_id.store(w.worker_id, Ordering::Release);
            dp_rank.store(u64::from(w.dp_rank), Ordering::Release);
            (id, ChainBlockMap::new())
        });
        match event.data {
            // The index has no storage tiers: a block's tier is not kept (a removal from one
            // tier removes the block), as for the other peer.
            EventData::Stored { parent, blocks, .. } => {
                self.stored.clear();
                self.stored.extend(blocks.iter().map(|b| StoredBlock {
                    seq_hash: SequenceHash(b.seq_hash),
                    content_hash: ContentHash(b.local_hash),
                }));
                let parent = parent.map(SequenceHash);
                if shared
                    .index
                    .apply_stored(*id, &self.stored, parent, map)
                    .is_err()
                {
                    shared.rejected.fetch_add(1, Ordering::Relaxed);
                }
            }
            EventData::Removed { seq_hashes, .. } => {
                self.removed.clear();
                self.removed
                    .extend(seq_hashes.iter().map(|&h| SequenceHash(h)));
                shared.index.apply_removed(*id, &self.removed, map);
            }
            EventData::Cleared => shared.index.apply_cleared(*id, map),
        }
    }
}

/// One unit of work for an event thread.
enum Job {
    Event(Event),
    /// Acknowledged once every event queued before it is applied.
    Barrier(Sender<()>),
}

/// The thread kvidx's event pool gives a worker id (the same hash and scaling), so both
/// spread a fleet over their threads alike.
fn thread_of(worker_id: u64, threads: usize) -> usize {
    let hash = rustc_hash::FxBuildHasher.hash_one(worker_id);
    (((hash >> 32) * threads as u64) >> 32) as usize
}

/// How events reach the index.
enum Feed {
    /// Applied on the caller's thread, under a lock no one else takes.
    Synchronous(Mutex<Lane>),
    /// Queued to event threads.
    Pooled {
        queues: Vec<Sender<Job>>,
        threads: Vec<JoinHandle<()>>,
    },
}

/// `kv-index`'s `ChainIndex` as a replay [`Target`].
pub struct SmgIndex {
    shared: Arc<Shared>,
    feed: Feed,
}

impl SmgIndex {
    /// An empty index with `event_threads` event threads (0: synchronous).
    pub fn new(event_threads: usize) -> Self {
        let shared = Arc::new(Shared::new());
        if event_threads == 0 {
            return Self {
                shared,
                feed: Feed::Synchronous(Mutex::new(Lane::default())),
            };
        }
        let (queues, threads) = (0..event_threads)
            .map(|_| {
                let (tx, rx) = bounded(DEFAULT_QUEUE_CAPACITY);
                let shared = Arc::clone(&shared);
                (tx, std::thread::spawn(move || run_lane(&shared, &rx)))
            })
            .unzip();
        Self {
            shared,
            feed: Feed::Pooled { queues, threads },
        }
    }
}

/// An event thread: applies its queue's events in order and answers barriers.
fn run_lane(shared: &Shared, jobs: &Receiver<Job>) {
    let mut lane = Lane::default();
    for job in jobs {
        match job {
            Job::Event(event) => lane.apply(shared, event),
            Job::Barrier(ack) => {
                let _ = ack.send(());
            }
        }
    }
}

impl Drop for SmgIndex {
    fn drop(&mut self) {
        if let Feed::Pooled { queues, threads } = &mut self.feed {
            queues.clear();
            for thread in threads.drain(..) {
                thread.join().expect("a peer-smg event thread panicked");
            }
        }
    }
}

impl Target for SmgIndex {
    fn submit(&self, event: Event) {
        match &self.feed {
            Feed::Synchronous(lane) => lane.lock().apply(&self.shared, event),
            Feed::Pooled { queues, .. } => queues[thread_of(event.worker.worker_id, queues.len())]
                .send(Job::Event(event))
                .expect("the peer-smg event threads are alive"),
        }
    }

    fn flush(&self) {
        let Feed::Pooled { queues, .. } = &self.feed else {
            return;
        };
        let (ack, acks) = bounded(queues.len());
        for queue in queues {
            queue
                .send(Job::Barrier(ack.clone()))
                .expect("the peer-smg event threads are alive");
        }
        for _ in queues {
            acks.recv().expect("the peer-smg event threads are alive");
        }
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        out.clear();
        let shared = &*self.shared;
        shared.index.score_into(
            local_hashes,
            |&h| h,
            false,
            |id, depth| {
                let (worker_id, dp_rank) = shared.worker(id);
                out.push(Match {
                    worker_id,
                    dp_rank,
                    depth,
                });
            },
        );
        sort_matches(out);
    }

    fn worker_blocks(&self) -> u64 {
        self.shared.index.current_size() as u64
    }

    /// Stored events rejected (an unknown parent); removals of names not held are ignored by
    /// the index without a word, so they count as none.
    fn anomalies(&self) -> (u64, u64) {
        (self.shared.rejected.load(Ordering::Relaxed), 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::Block;

    /// Blocks of these local hashes with the contract's sequence hashes.
    fn chain(locals: &[u64]) -> Vec<Block> {
        let mut blocks = Vec::new();
        crate::chain::extend_chain(&mut blocks, None, locals.iter().copied());
        blocks
    }

    /// Pooled and synchronous, the index answers a small replay like kvidx, sorted.
    #[test]
    fn answers_like_kvidx_pooled_and_synchronous() {
        let c = chain(&[1, 2, 3]);
        for threads in [0, 1, 2, 3] {
            let peer = SmgIndex::new(threads);
            for w in 0..3u64 {
                let worker = Worker::new(w, (w % 2) as u32);
                let own = chain(&[1, 2, 3 + w]);
                peer.submit(Event::stored(worker, 0, None, own[..2].to_vec()));
                peer.submit(Event::stored(
                    worker,
                    1,
                    Some(own[1].seq_hash),
                    own[2..].to_vec(),
                ));
                peer.submit(Event::removed(worker, 2, vec![own[2].seq_hash]));
            }
            let w0 = Worker::new(0, 0);
            peer.submit(Event::stored(w0, 3, Some(c[1].seq_hash), c[2..].to_vec()));
            peer.flush();
            let mut out = Vec::new();
            peer.find_matches_into(&[1, 2, 3], &mut out);
            let got: Vec<(u64, u32, u32)> = out
                .iter()
                .map(|m| (m.worker_id, m.dp_rank, m.depth))
                .collect();
            assert_eq!(got, vec![(0, 0, 3), (1, 1, 2), (2, 0, 2)], "x{threads}");
            assert_eq!(peer.worker_blocks(), 7, "x{threads}");
            assert_eq!(peer.anomalies(), (0, 0), "x{threads}");
        }
    }

    /// A Stored under a parent the worker does not hold is rejected and counted; a clear
    /// empties the worker.
    #[test]
    fn counts_rejections_and_applies_clears() {
        for threads in [0, 2] {
            let peer = SmgIndex::new(threads);
            let w = Worker::new(5, 0);
            peer.submit(Event::stored(w, 0, None, chain(&[1, 2])));
            peer.submit(Event::stored(w, 1, Some(77), vec![Block::new(3, 13)]));
            peer.flush();
            assert_eq!(peer.anomalies(), (1, 0), "x{threads}");
            assert_eq!(peer.worker_blocks(), 2, "x{threads}");
            peer.submit(Event::cleared(w, 2));
            peer.flush();
            assert_eq!(peer.worker_blocks(), 0, "x{threads}");
            let mut out = vec![Match::default()];
            peer.find_matches_into(&[1, 2], &mut out);
            assert!(out.is_empty(), "x{threads}");
        }
    }

    /// The routing spreads workers like kvidx's pool and keeps each on one thread.
    #[test]
    fn routing_is_sticky_and_in_range() {
        for threads in [1, 2, 3, 7] {
            for id in 0..1000 {
                let t = thread_of(id, threads);
                assert!(t < threads);
                assert_eq!(t, thread_of(id, threads));
            }
        }
        let used: std::collections::HashSet<usize> = (0..64).map(|id| thread_of(id, 4)).collect();
        assert_eq!(used.len(), 4, "64 workers reach every one of 4 threads");
    }
}
