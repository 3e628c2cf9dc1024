//! The public peer as replay subjects (cargo feature `peer`): the indexers of
//! `dynamo-kv-router` 1.6.1 behind its own thread pool (`ThreadPoolIndexer`), driven through
//! the same [`Target`] as kvidx's subjects, so the same feeder, threads and drain-inclusive
//! clock apply. See docs/bench.md, "The public peer in the same run".
//!
//! - Events: each `kvidx::Event` becomes one `RouterEvent` (worker id and dp rank kept,
//!   `Stored` with its parent and `(local, sequence)` hash pairs and no start position, so the
//!   peer derives positions from the parent as it does for engine events; `Removed` by
//!   sequence hashes; `Cleared`), queued with `enqueue_event`.
//! - Backlog: the peer's queues are unbounded, ours hold [`DEFAULT_QUEUE_CAPACITY`] events
//!   per event thread. So that the feeder cannot run ahead of the peer further than it can run
//!   ahead of kvidx, a progress barrier (`flush_and_wait`) is issued every quarter window and
//!   the feeder waits for the one issued a window ago: at most a window of events is queued.
//! - Queries: the local hashes, answered inline on the query thread by the backend's
//!   `find_matches` (what the pool's own `find_matches` does), the per-worker overlap scores
//!   turned into sorted [`Match`]es (sorting included in the timed call, as in kvidx).
//! - Rejected events: the pool only logs them, so a pooled peer reports none; a synchronous
//!   peer (the agreement check) applies each event with `apply_event_and_wait` and counts
//!   the events it did not apply.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};
use std::task::{Context, Poll, Wake, Waker};

use dynamo_kv_router::indexer::positional::SearchMode;
use dynamo_kv_router::indexer::{KvIndexerInterface, KvRouterError, SyncIndexer};
use dynamo_kv_router::protocols::{
    ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheRemoveData, KvCacheStoreData,
    KvCacheStoredBlockData, LocalBlockHash, OverlapScores, RouterEvent,
};
use dynamo_kv_router::{ConcurrentRadixTreeCompressed, PositionalIndexer, ThreadPoolIndexer};
use kvidx::{Event, EventData, Match, DEFAULT_JUMP_SIZE, DEFAULT_QUEUE_CAPACITY};
use parking_lot::Mutex;

use crate::target::Target;

/// The peer's block size argument: only used by its token-hashing entry points, which the
/// replay does not call (queries are local hashes already). 16 tokens as in our traces.
const KV_BLOCK_SIZE: u32 = 16;

/// Which of the peer's indexers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerKind {
    /// `ConcurrentRadixTreeCompressed`, its production default.
    Compressed,
    /// `PositionalIndexer` with jump size 32 (kvidx's default jump) and strided search.
    Positional,
    /// The second peer: `kv-index` 2.0.0's `ChainIndex` (see `peer_smg`).
    Smg,
}

impl PeerKind {
    /// Builds a fresh, empty peer index: with `event_threads` pool threads, or synchronous
    /// (one pool thread, every event applied and acknowledged before `submit` returns) when
    /// `event_threads` is 0.
    pub fn build(self, event_threads: usize) -> Box<dyn Target> {
        let threads = event_threads.max(1);
        match self {
            PeerKind::Smg => Box::new(crate::peer_smg::SmgIndex::new(event_threads)),
            PeerKind::Compressed => Box::new(PeerIndex::new(
                ConcurrentRadixTreeCompressed::new(),
                threads,
                event_threads == 0,
            )),
            PeerKind::Positional => Box::new(PeerIndex::new(
                PositionalIndexer::new_with_mode(DEFAULT_JUMP_SIZE, SearchMode::Strided),
                threads,
                event_threads == 0,
            )),
        }
    }
}

/// A boxed progress barrier of the peer's pool, already sent to its queues.
type Barrier = Pin<Box<dyn Future<Output = Result<(), KvRouterError>> + Send>>;

/// The feeder's side of the backlog cap.
#[derive(Default)]
struct Feed {
    /// Events submitted so far.
    submitted: u64,
    /// Barriers not yet waited for, with the number of events submitted before each.
    barriers: VecDeque<(u64, Barrier)>,
}

/// One of the peer's indexers behind its thread pool, as a replay [`Target`].
pub struct PeerIndex<T: SyncIndexer> {
    pool: Arc<ThreadPoolIndexer<T>>,
    /// Apply each event and wait for its acknowledgement (the agreement check).
    synchronous: bool,
    /// At most this many events queued (pooled mode).
    window: u64,
    /// A barrier every this many events (pooled mode).
    step: u64,
    feed: Mutex<Feed>,
    rejected: AtomicU64,
    unknown_removals: AtomicU64,
}

impl<T: SyncIndexer> PeerIndex<T> {
    /// Wraps `backend` in the peer's thread pool with `threads` threads.
    pub fn new(backend: T, threads: usize, synchronous: bool) -> Self {
        let window = (DEFAULT_QUEUE_CAPACITY * threads) as u64;
        if !synchronous {
            announce(window);
        }
        Self {
            pool: Arc::new(ThreadPoolIndexer::new(backend, threads, KV_BLOCK_SIZE)),
            synchronous,
            window,
            step: (window / 4).max(1),
            feed: Mutex::new(Feed::default()),
            rejected: AtomicU64::new(0),
            unknown_removals: AtomicU64::new(0),
        }
    }

    /// A progress barrier sent to every queue now (polled once), to be waited for later.
    fn barrier(&self) -> Barrier {
        let pool = Arc::clone(&self.pool);
        let mut barrier: Barrier = Box::pin(async move { pool.flush_and_wait().await });
        // The first poll sends the flush tasks; the barrier then completes once the queues
        // have applied everything before them.
        if let Poll::Ready(result) = poll_once(barrier.as_mut()) {
            barrier = Box::pin(std::future::ready(result));
        }
        barrier
    }
}

/// Says once per process how the peer's backlog is capped (the replay prints it).
fn announce(window: u64) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        eprintln!(
            "kvidx-bench: peer (dynamo-kv-router 1.6.1): its queues are unbounded; the feeder \
             keeps at most {window} events queued (ours: {DEFAULT_QUEUE_CAPACITY} per event \
             thread) with a flush_and_wait barrier every {} events",
            window / 4
        );
    });
}

impl<T: SyncIndexer> Target for PeerIndex<T> {
    fn submit(&self, event: Event) {
        let is_stored = matches!(event.data, EventData::Stored { .. });
        let is_removed = matches!(event.data, EventData::Removed { .. });
        let event = to_router_event(event);
        if self.synchronous {
            if block_on(self.pool.apply_event_and_wait(event)).is_err() {
                if is_removed {
                    self.unknown_removals.fetch_add(1, Ordering::Relaxed);
                } else if is_stored {
                    self.rejected.fetch_add(1, Ordering::Relaxed);
                }
            }
            return;
        }
        let mut feed = self.feed.lock();
        if feed.submitted > 0 && feed.submitted % self.step == 0 {
            let at = feed.submitted;
            let barrier = self.barrier();
            feed.barriers.push_back((at, barrier));
            // Over the next `step` events at most `window` may be queued: wait for the
            // barrier issued `window - step` events ago.
            while feed
                .barriers
                .front()
                .is_some_and(|(pos, _)| pos + self.window <= at + self.step)
            {
                let (_, barrier) = feed.barriers.pop_front().expect("a barrier");
                block_on(barrier).expect("the peer's pool is alive");
            }
        }
        self.pool
            .enqueue_event(event)
            .expect("the peer's pool is alive");
        feed.submitted += 1;
    }

    fn flush(&self) {
        let mut feed = self.feed.lock();
        while let Some((_, barrier)) = feed.barriers.pop_front() {
            block_on(barrier).expect("the peer's pool is alive");
        }
        block_on(self.pool.flush_and_wait()).expect("the peer's pool is alive");
    }

    fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
        let query: Vec<LocalBlockHash> = local_hashes.iter().map(|&h| LocalBlockHash(h)).collect();
        let scores = self.pool.backend().find_matches(&query, false);
        to_matches(&scores, out);
    }

    fn worker_blocks(&self) -> u64 {
        block_on(self.pool.shard_sizes())
            .iter()
            .map(|s| s.block_count as u64)
            .sum()
    }

    fn anomalies(&self) -> (u64, u64) {
        (
            self.rejected.load(Ordering::Relaxed),
            self.unknown_removals.load(Ordering::Relaxed),
        )
    }
}

/// The peer's form of a kvidx event (same worker, dp rank, event id and hashes). The peer
/// has no storage tiers: tiers are dropped (a removal from one tier removes the block).
pub fn to_router_event(event: Event) -> RouterEvent {
    let data = match event.data {
        EventData::Stored { parent, blocks, .. } => KvCacheEventData::Stored(KvCacheStoreData {
            parent_hash: parent.map(ExternalSequenceBlockHash),
            start_position: None,
            blocks: blocks
                .into_iter()
                .map(|b| KvCacheStoredBlockData {
                    block_hash: ExternalSequenceBlockHash(b.seq_hash),
                    tokens_hash: LocalBlockHash(b.local_hash),
                    mm_extra_info: None,
                })
                .collect(),
        }),
        EventData::Removed { seq_hashes, .. } => KvCacheEventData::Removed(KvCacheRemoveData {
            block_hashes: seq_hashes
                .into_iter()
                .map(ExternalSequenceBlockHash)
                .collect(),
        }),
        EventData::Cleared => KvCacheEventData::Cleared,
    };
    RouterEvent::new(
        event.worker.worker_id,
        KvCacheEvent {
            event_id: event.event_id,
            data,
            dp_rank: event.worker.dp_rank,
        },
    )
}

/// The peer's overlap scores as kvidx matches: workers with a positive score, by depth
/// descending, then worker id, then dp rank.
pub fn to_matches(scores: &OverlapScores, out: &mut Vec<Match>) {
    out.clear();
    out.extend(
        scores
            .scores
            .iter()
            .filter(|(_, &depth)| depth > 0)
            .map(|(w, &depth)| Match {
                worker_id: w.worker_id,
                dp_rank: w.dp_rank,
                depth,
            }),
    );
    out.sort_unstable_by_key(|m| (std::cmp::Reverse(m.depth), m.worker_id, m.dp_rank));
}

/// Wakes the thread that waits in [`block_on`].
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` once on this thread.
fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>) -> Poll<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    future.poll(&mut Context::from_waker(&waker))
}

/// Runs `future` to completion on this thread, parking between polls. The peer's barriers
/// and acknowledgements are one-shot channels answered by its pool threads, so no async
/// runtime is needed.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dynamo_kv_router::protocols::WorkerWithDpRank;
    use kvidx::{Block, Worker};

    #[test]
    fn converts_every_event_kind() {
        let w = Worker::new(7, 2);
        let stored = to_router_event(Event::stored(
            w,
            5,
            Some(99),
            vec![Block::new(1, 11), Block::new(2, 12)],
        ));
        assert_eq!((stored.worker_id, stored.event.dp_rank), (7, 2));
        assert_eq!(stored.event.event_id, 5);
        let KvCacheEventData::Stored(s) = &stored.event.data else {
            panic!("not a store: {stored:?}");
        };
        assert_eq!(s.parent_hash, Some(ExternalSequenceBlockHash(99)));
        assert_eq!(s.start_position, None);
        let pairs: Vec<(u64, u64)> = s
            .blocks
            .iter()
            .map(|b| (b.tokens_hash.0, b.block_hash.0))
            .collect();
        assert_eq!(pairs, vec![(1, 11), (2, 12)]);

        let root = to_router_event(Event::stored(w, 6, None, vec![Block::new(3, 13)]));
        let KvCacheEventData::Stored(s) = &root.event.data else {
            panic!("not a store");
        };
        assert_eq!(s.parent_hash, None);

        let removed = to_router_event(Event::removed(w, 7, vec![11, 12]));
        assert_eq!(
            removed.event.data,
            KvCacheEventData::Removed(KvCacheRemoveData {
                block_hashes: vec![ExternalSequenceBlockHash(11), ExternalSequenceBlockHash(12)],
            })
        );
        let cleared = to_router_event(Event::cleared(w, 8));
        assert_eq!(cleared.event.data, KvCacheEventData::Cleared);
        assert_eq!((cleared.worker_id, cleared.event.dp_rank), (7, 2));
    }

    #[test]
    fn scores_become_sorted_matches() {
        let mut scores = OverlapScores::new();
        for (id, rank, depth) in [(3, 0, 2), (1, 1, 5), (1, 0, 2), (9, 0, 0)] {
            scores.scores.insert(WorkerWithDpRank::new(id, rank), depth);
        }
        let mut out = Vec::new();
        to_matches(&scores, &mut out);
        let got: Vec<(u64, u32, u32)> = out
            .iter()
            .map(|m| (m.worker_id, m.dp_rank, m.depth))
            .collect();
        assert_eq!(got, vec![(1, 1, 5), (1, 0, 2), (3, 0, 2)]);
    }

    /// Contract sequence hashes of a chain of local hashes (the peer's positional index
    /// recomputes them from the query, so its tests need them).
    fn chain(locals: &[u64]) -> Vec<Block> {
        let seqs = kvidx::hashing::seq_hashes(locals);
        locals
            .iter()
            .zip(seqs)
            .map(|(&l, s)| Block::new(l, s))
            .collect()
    }

    /// Both peer indexes, pooled and synchronous, answer a small replay like kvidx.
    #[test]
    fn peers_answer_like_kvidx() {
        let ops = |w: u64| {
            let worker = Worker::new(w, 0);
            let c = chain(&[1, 2, 3 + w]);
            vec![
                Event::stored(worker, 0, None, c[..2].to_vec()),
                Event::stored(worker, 1, Some(c[1].seq_hash), c[2..].to_vec()),
                Event::removed(worker, 2, vec![c[2].seq_hash]),
            ]
        };
        let c = chain(&[1, 2, 3]);
        for kind in [PeerKind::Compressed, PeerKind::Positional] {
            for threads in [0, 1, 2] {
                let peer = kind.build(threads);
                for w in 0..3 {
                    ops(w).into_iter().for_each(|e| peer.submit(e));
                }
                let w0 = Worker::new(0, 0);
                peer.submit(Event::stored(w0, 3, Some(c[1].seq_hash), c[2..].to_vec()));
                peer.flush();
                let mut out = Vec::new();
                peer.find_matches_into(&[1, 2, 3], &mut out);
                let got: Vec<(u64, u32)> = out.iter().map(|m| (m.worker_id, m.depth)).collect();
                assert_eq!(got, vec![(0, 3), (1, 2), (2, 2)], "{kind:?} x{threads}");
                assert_eq!(peer.worker_blocks(), 7, "{kind:?} x{threads}");
                assert_eq!(peer.anomalies(), (0, 0), "{kind:?} x{threads}");
            }
        }
    }

    /// A Stored with an unknown parent is rejected by both; an unknown removal is an error
    /// for the positional index only (the compressed tree ignores it silently).
    #[test]
    fn a_synchronous_peer_counts_what_it_did_not_apply() {
        for (kind, unknown) in [(PeerKind::Compressed, 0), (PeerKind::Positional, 1)] {
            let peer = kind.build(0);
            let w = Worker::new(1, 0);
            peer.submit(Event::stored(w, 0, None, chain(&[1])));
            peer.submit(Event::removed(w, 1, vec![42]));
            peer.submit(Event::stored(w, 2, Some(77), vec![Block::new(2, 12)]));
            assert_eq!(peer.anomalies(), (1, unknown), "{kind:?}");
            assert_eq!(peer.worker_blocks(), 1, "{kind:?}");
        }
    }

    /// Many more events than the window (the first peer) or than a queue holds (the second,
    /// on two threads): the barriers or the full queues hold the feeder back, and the final
    /// flush drains everything.
    #[test]
    fn the_backlog_cap_keeps_every_event() {
        for (kind, threads) in [(PeerKind::Compressed, 1), (PeerKind::Smg, 2)] {
            let peer = kind.build(threads);
            let n = 3 * DEFAULT_QUEUE_CAPACITY as u64 + 17;
            for i in 0..n {
                let w = Worker::new(i % 8, 0);
                peer.submit(Event::stored(w, i, None, vec![Block::new(i, i)]));
            }
            peer.flush();
            assert_eq!(peer.worker_blocks(), n, "{kind:?}");
        }
    }
}
