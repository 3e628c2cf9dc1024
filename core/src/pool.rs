//! Event threads: sticky routing per worker, queues bounded in count and bytes, a true flush
//! barrier.
//!
//! Every write of a `worker_id` (all its dp ranks) goes to one thread, chosen by hashing the
//! id, so a worker's events and its removal are applied in the order they were accepted.
//! Each queue holds at most `capacity` writes and `budget` bytes of them
//! ([`Write::queued_bytes`]); when a thread falls behind, senders block until there is room.
//! A write larger than the whole budget is still accepted, once its queue is empty, so
//! nothing is ever refused for its size. `flush` puts a barrier in every queue and waits until
//! every thread has passed it. A thread takes what is queued a few dozen jobs at a time and
//! applies consecutive events of one worker a few per change (see [`Run`]).

use std::hash::{BuildHasher, Hash};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::{Condvar, Mutex};

use crate::applier::{Applier, Run};
use crate::model::Write;
use crate::Error;

/// One unit of work for an event thread.
enum Job {
    /// A write and the bytes it counts against its queue's budget.
    Write(Write, usize),
    /// Acknowledged once every job queued before it on this thread is applied.
    Barrier(Sender<Result<(), Error>>),
}

/// The bounds of one queue, shared by its senders and its thread.
///
/// Lock-free while there is room: senders and the thread only add to and subtract from two
/// counters. A sender that finds the queue full waits on a condition variable; the thread
/// wakes waiters only when there are some, and only once the queue has drained to half its
/// bounds, so that a woken sender can queue many writes before it waits again (one wake-up
/// per write would cost more than applying the write). (Both sides use sequentially consistent operations
/// on the counters and on `waiting`, so a sender that registers as waiting either sees the
/// room the thread just made or is seen by the thread and woken.) Two senders racing for the
/// last room may both get in: the bound is exceeded by at most one write per concurrent sender.
struct Bound {
    writes: AtomicUsize,
    bytes: AtomicUsize,
    waiting: AtomicUsize,
    lock: Mutex<()>,
    room: Condvar,
    capacity: usize,
    budget: usize,
}

impl Bound {
    fn new(capacity: usize, budget: usize) -> Self {
        Self {
            writes: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            room: Condvar::new(),
            capacity: capacity.max(1),
            budget,
        }
    }

    /// Whether `bytes` more fit now (an empty queue takes anything).
    fn fits(&self, bytes: usize) -> bool {
        let writes = self.writes.load(Ordering::SeqCst);
        writes == 0
            || (writes < self.capacity
                && self.bytes.load(Ordering::SeqCst).saturating_add(bytes) <= self.budget)
    }

    /// Blocks until `bytes` more fit (or the queue is empty), then counts them.
    fn acquire(&self, bytes: usize) {
        if !self.fits(bytes) {
            let mut guard = self.lock.lock();
            self.waiting.fetch_add(1, Ordering::SeqCst);
            while !self.fits(bytes) {
                self.room.wait(&mut guard);
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(bytes, Ordering::SeqCst);
    }

    /// Returns the room of one write that was never queued.
    fn release(&self, bytes: usize) {
        self.release_many(1, bytes);
    }

    /// Returns the room of `writes` applied writes of `bytes` bytes in all.
    fn release_many(&self, writes: usize, bytes: usize) {
        let bytes_left = self.bytes.fetch_sub(bytes, Ordering::SeqCst) - bytes;
        let writes_left = self.writes.fetch_sub(writes, Ordering::SeqCst) - writes;
        let drained =
            writes_left == 0 || (writes_left <= self.capacity / 2 && bytes_left <= self.budget / 2);
        if drained && self.waiting.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock.lock();
            self.room.notify_all();
        }
    }

    /// Senders waiting for room.
    #[cfg(test)]
    fn waiters(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Writes and bytes in use.
    #[cfg(test)]
    fn usage(&self) -> (usize, usize) {
        (
            self.writes.load(Ordering::SeqCst),
            self.bytes.load(Ordering::SeqCst),
        )
    }
}

/// A queue's sending side.
struct Queue {
    jobs: Sender<Job>,
    bound: Arc<Bound>,
}

/// A fixed set of event threads fed through bounded queues.
pub(crate) struct EventPool {
    queues: Vec<Queue>,
    threads: Vec<JoinHandle<()>>,
    failed: Arc<AtomicBool>,
}

impl EventPool {
    /// Starts `threads` event threads (> 0), each with a queue of at most `capacity` writes
    /// and `budget` bytes. Nothing is preallocated per queue.
    pub(crate) fn start(
        applier: Arc<Applier>,
        threads: usize,
        capacity: usize,
        budget: usize,
    ) -> Result<Self, Error> {
        let failed = Arc::new(AtomicBool::new(false));
        let mut pool = Self {
            queues: Vec::with_capacity(threads),
            threads: Vec::with_capacity(threads),
            failed,
        };
        for index in 0..threads {
            let (tx, rx) = unbounded();
            let bound = Arc::new(Bound::new(capacity, budget));
            let applier = Arc::clone(&applier);
            let failed = Arc::clone(&pool.failed);
            let thread_bound = Arc::clone(&bound);
            let handle = std::thread::Builder::new()
                .name(format!("kvidx-events-{index}"))
                .spawn(move || run_thread(&applier, &rx, &thread_bound, &failed))
                // Dropping `pool` disconnects and joins the threads already started.
                .map_err(|_| Error::ShutDown)?;
            pool.queues.push(Queue { jobs: tx, bound });
            pool.threads.push(handle);
        }
        Ok(pool)
    }

    fn queue_of(&self, worker_id: u64) -> &Queue {
        let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
        worker_id.hash(&mut hasher);
        let hash = std::hash::Hasher::finish(&hasher);
        // The high bits of an Fx hash are the well-mixed ones.
        &self.queues[((hash >> 32) % self.queues.len() as u64) as usize]
    }

    /// Queues a write behind the earlier writes of its worker id; blocks while its queue is
    /// full (in count or bytes).
    pub(crate) fn submit(&self, write: Write) -> Result<(), Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let queue = self.queue_of(write.worker_id());
        let bytes = write.queued_bytes();
        queue.bound.acquire(bytes);
        queue.jobs.send(Job::Write(write, bytes)).map_err(|_| {
            queue.bound.release(bytes);
            Error::ShutDown
        })
    }

    /// Returns once every job accepted before the call has been applied.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let (ack_tx, ack_rx) = unbounded();
        for queue in &self.queues {
            queue
                .jobs
                .send(Job::Barrier(ack_tx.clone()))
                .map_err(|_| Error::ShutDown)?;
        }
        drop(ack_tx);
        for _ in 0..self.queues.len() {
            // A thread that is gone drops its barrier: recv fails instead of hanging.
            ack_rx.recv().map_err(|_| Error::ShutDown)??;
        }
        Ok(())
    }
}

impl Drop for EventPool {
    /// Disconnects the queues, lets every thread drain what was accepted, and joins them.
    fn drop(&mut self) {
        self.queues.clear();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Jobs an event thread takes from its queue before it applies what it has gathered.
const DRAIN: usize = 64;

/// The run an event thread has gathered from its queue, and the queued writes and bytes it
/// stands for, returned to the queue's bound once it is applied.
#[derive(Default)]
struct Pending {
    run: Run,
    writes: usize,
    bytes: usize,
}

/// Applies `f` unless the pool has failed; a panic in it marks the pool failed (a bug that
/// broke the index: refuse to build on it, keep answering barriers).
fn guarded(failed: &AtomicBool, f: impl FnOnce()) {
    if !failed.load(Ordering::Acquire) && catch_unwind(AssertUnwindSafe(f)).is_err() {
        failed.store(true, Ordering::Release);
    }
}

/// Applies and empties the pending run, then returns its room to the bound.
fn apply_pending(applier: &Applier, pending: &mut Pending, bound: &Bound, failed: &AtomicBool) {
    if pending.run.is_empty() {
        return;
    }
    guarded(failed, || {
        applier.apply_run(&pending.run);
    });
    pending.run.clear();
    bound.release_many(
        std::mem::take(&mut pending.writes),
        std::mem::take(&mut pending.bytes),
    );
}

/// An event thread: takes up to [`DRAIN`] jobs at a time from its queue and applies them in
/// order, consecutive events of one worker as one [`Run`] (see [`Run::takes`]).
fn run_thread(applier: &Applier, jobs: &Receiver<Job>, bound: &Bound, failed: &AtomicBool) {
    let mut pending = Pending::default();
    while let Ok(first) = jobs.recv() {
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(job) = next.take() {
            match job {
                Job::Write(Write::Event(event), bytes) => {
                    if !pending.run.takes(event.worker) {
                        apply_pending(applier, &mut pending, bound, failed);
                    }
                    pending.run.push(event);
                    pending.writes += 1;
                    pending.bytes += bytes;
                }
                Job::Write(write, bytes) => {
                    apply_pending(applier, &mut pending, bound, failed);
                    guarded(failed, || {
                        applier.apply(&write);
                    });
                    drop(write);
                    bound.release_many(1, bytes);
                }
                Job::Barrier(ack) => {
                    apply_pending(applier, &mut pending, bound, failed);
                    let status = if failed.load(Ordering::Acquire) {
                        Err(Error::ShutDown)
                    } else {
                        Ok(())
                    };
                    let _ = ack.send(status);
                }
            }
            taken += 1;
            if taken < DRAIN {
                next = jobs.try_recv().ok();
            }
        }
        apply_pending(applier, &mut pending, bound, failed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Backend;
    use crate::model::{Block, Event, EventData, Match, Outcome, Worker};

    /// A backend with a bug: it panics on every Cleared event, and it can be held still.
    #[derive(Default)]
    struct Scripted {
        gate: Arc<parking_lot::RwLock<()>>,
    }

    impl Backend for Scripted {
        fn apply(&self, _: Worker, data: &EventData) -> Outcome {
            let _held = self.gate.read();
            assert!(!matches!(data, EventData::Cleared), "injected bug");
            Outcome::Applied {
                unknown_removals: 0,
            }
        }
        fn remove_worker(&self, _: u64) {}
        fn remove_worker_dp_rank(&self, _: Worker) {}
        fn find_matches_into(&self, _: &[u64], out: &mut Vec<Match>) {
            out.clear();
        }
        fn find_matches_tiered_into(&self, _: &[u64], out: &mut Vec<crate::TieredMatch>) {
            out.clear();
        }
        fn workers(&self) -> u64 {
            0
        }
        fn worker_blocks(&self) -> u64 {
            0
        }
    }

    fn event(w: Worker, blocks: usize) -> Write {
        Write::Event(Event::stored(w, 0, None, vec![Block::new(1, 2); blocks]))
    }

    #[test]
    fn a_panic_on_an_event_thread_shuts_the_pool_down_without_hanging() {
        let applier = Arc::new(Applier::new(Box::new(Scripted::default())));
        let pool = EventPool::start(Arc::clone(&applier), 2, 1, 1 << 20).unwrap();
        let w = Worker::new(3, 0);
        pool.submit(Write::Event(Event::removed(w, 0, vec![])))
            .unwrap();
        pool.flush().unwrap();
        assert_eq!(applier.stats().events_applied, 1);

        pool.submit(Write::Event(Event::cleared(w, 1))).unwrap();
        // The barrier is answered, with the failure, instead of waiting forever.
        assert_eq!(pool.flush(), Err(Error::ShutDown));
        assert_eq!(
            pool.submit(Write::Event(Event::removed(w, 2, vec![]))),
            Err(Error::ShutDown)
        );
        assert_eq!(pool.submit(Write::RemoveWorker(3)), Err(Error::ShutDown));
        drop(pool); // joins the threads: none is stuck
        assert_eq!(applier.stats().events_applied, 1);
    }

    /// Usage of the one queue of a one-thread pool.
    fn usage(pool: &EventPool) -> (usize, usize) {
        pool.queues[0].bound.usage()
    }

    #[test]
    fn queues_are_bounded_by_bytes_and_an_oversized_write_goes_alone() {
        let backend = Scripted::default();
        let gate = Arc::clone(&backend.gate);
        let closed = gate.write(); // the event thread blocks in its first apply
        let applier = Arc::new(Applier::new(Box::new(backend)));
        let w = Worker::new(1, 0);
        let one = event(w, 100).queued_bytes();
        let pool = Arc::new(EventPool::start(Arc::clone(&applier), 1, 1000, 3 * one).unwrap());
        for _ in 0..3 {
            pool.submit(event(w, 100)).unwrap();
        }
        assert_eq!(usage(&pool), (3, 3 * one), "three writes fill the budget");
        let sender = |blocks: usize| {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || pool.submit(event(w, blocks)))
        };
        let small = sender(100);
        let huge = sender(100_000);
        // Until both senders wait for room, neither may get in. (The gate is opened before
        // any assertion: a failure must not leave the event thread blocked at the join.)
        let mut seen = usage(&pool);
        while seen == (3, 3 * one) && pool.queues[0].bound.waiters() < 2 {
            std::thread::yield_now();
            seen = usage(&pool);
        }
        let waiting = usage(&pool);
        drop(closed);
        assert_eq!(
            (seen, waiting),
            ((3, 3 * one), (3, 3 * one)),
            "both senders wait for room"
        );
        small.join().unwrap().unwrap();
        huge.join().unwrap().unwrap();
        pool.flush().unwrap();
        assert_eq!(usage(&pool), (0, 0));
        assert_eq!(applier.stats().events_applied, 5);
    }
}
