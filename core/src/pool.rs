//! Event threads: sticky routing per worker, queues bounded in count and bytes, a true flush
//! barrier.
//!
//! Every write of a `worker_id` (all its dp ranks) goes to one thread, chosen by hashing the
//! id, so a worker's events and its removal are applied in the order they were accepted.
//! Each queue holds at most `capacity` writes and `budget` bytes of them
//! ([`Write::queued_bytes`]), counted from acceptance until applied; when a thread falls
//! behind, senders block until there is room. A write larger than the whole budget is still
//! accepted, once its queue is empty, so nothing is ever refused for its size. `flush` puts a
//! barrier in every queue and waits until every thread has passed it. A thread takes
//! everything queued at once and applies consecutive events of one worker a few per change
//! (see [`Run`]).
//!
//! The handoff is one lock per write on the sender's side (one per up to [`HOLD_EVENTS`]
//! events of a call that queues several) and one per batch on the thread's:
//! senders append to vectors the thread swaps for its own empty ones (all keep their
//! capacity, so a steady stream allocates nothing): events as themselves, reserved for before
//! they are moved, so that an event is moved once, into its place, and once out of it by the
//! thread as it applies it; other writes and barriers beside them, by position (see
//! [`Jobs`]). The bounds are plain counters under the same lock; the thread returns the room
//! of applied writes when it takes its next batch (and every [`RELEASE_EVERY`] writes while a
//! sender waits for room). Between batches the thread watches a hint the senders publish
//! (a plain load, not the lock): it takes the queue at once when a barrier is queued or a
//! sender waits; otherwise it lets [`TAKE_AT`] jobs gather, or fewer once the senders pause
//! ([`PAUSED_FOR`]) or after [`GATHER_FOR`]; with nothing queued it spins and yields a few
//! rounds, then sleeps, and a sender wakes it only then. A sender that finds the queue full
//! spins and yields a few rounds (the thread returns room every [`RELEASE_EVERY`] writes
//! while a sender waits) before it sleeps until the queue has drained to half its bounds.
//!
//! The two sides are kept apart in memory as well as in time: the thread takes large
//! batches, and it hands a drained vector back to the senders only once it has drained
//! [`REUSE_DISTANCE`] bytes of events since (meanwhile the senders fill new vectors; at most
//! [`MAX_SPARES`] drained vectors are kept). A sender that writes an event into memory the
//! thread has just read takes each of its cache lines from the other core, and the lock
//! released after each write waits for them: on cores that share no cache below the last
//! level, a handoff that did so took four times as long per event as the senders alone.

use std::hash::{BuildHasher, Hash};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Sender};
use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::applier::{Applier, Run, Tally};
use crate::model::{Event, Write};
use crate::Error;

/// A unit of work for an event thread other than an engine event (events, the common
/// write, are queued as themselves: see [`Jobs`]).
enum Job {
    /// A write other than [`Write::Event`] (it counts [`Write::queued_bytes`] against its queue's budget: computed again
    /// when it is applied, which is cheaper than carrying the figure).
    Write(Write),
    /// Acknowledged once every job queued before it on this thread is applied.
    Barrier(Sender<Result<(), Error>>),
}

/// Applied writes an event thread returns to its queue's bounds at once, at most, while a
/// sender waits for room (a quarter of a short queue): room comes back while a batch is
/// applied, at one lock per this many writes (each such lock taken from a sender that is
/// retrying the lock as it waits). Otherwise room is returned when the thread takes its next
/// batch.
const RELEASE_EVERY: usize = 256;

/// Rounds of waiting (spinning, then yielding) before an idle event thread sleeps.
const IDLE_ROUNDS: u32 = 9;

/// Tries of the lock by an event thread that wants to take its batch before it waits on the
/// lock: the first [`SPIN_ROUNDS`] after spins, the others after yields of the core.
const TAKE_TRIES: u32 = 64;

/// The first idle rounds, which spin (the later ones yield the core).
const SPIN_ROUNDS: u32 = 7;

/// Jobs an event thread lets gather before it takes them while its senders are still
/// queueing (see [`BoundedQueue::wait_for_batch`]). A thread that keeps up with its senders
/// and takes a few dozen jobs at a time hands the senders back, batch after batch, vectors
/// whose lines are still in its own caches: every event a sender writes then takes a line
/// from the other core, and the handoff runs at a fraction of the senders' own speed. Taking
/// a thousand or more at a time keeps the two sides apart.
const TAKE_AT: usize = 1024;

/// The senders publish the number of jobs queued (the hint) every this many jobs, so that a
/// gathering thread sees the queue grow (a plain store, at most once per this many jobs).
const HINT_EVERY: usize = 64;

/// A gathering thread takes what is queued once the hint has not moved for this long (the
/// senders have paused)...
const PAUSED_FOR: Duration = Duration::from_micros(3);

/// ...and at the latest this long after it began to gather.
const GATHER_FOR: Duration = Duration::from_micros(100);

/// Bytes of events an event thread drains before it hands a drained vector back to the
/// senders (it keeps the vectors it has drained until then, [`MAX_SPARES`] at most, and
/// gives the senders a new one meanwhile): a vector refilled sooner is still in the thread's
/// caches, and each event a sender writes into it waits for a line from the other core.
const REUSE_DISTANCE: usize = 768 << 10;

/// Drained vectors an event thread keeps at most (the oldest is handed back when more are
/// drained, however near): with batches of [`TAKE_AT`] jobs or more, the distance is reached
/// first.
const MAX_SPARES: usize = 16;

/// The hint that tells an event thread to take what is queued at once: a barrier is queued, a
/// sender waits for room, or the pool is closing.
const URGENT: usize = usize::MAX;

/// Jobs in order: the events, as themselves (each counts [`Event::queued_bytes`], as a
/// [`Write::Event`] does), and every other job with the number of events queued before it.
/// An event is moved once into its place, never wrapped in an enum on its way there (each
/// rewrap is a copy of the whole event).
#[derive(Default)]
struct Jobs {
    events: Vec<Event>,
    /// Other jobs, each after the first `.0` events (ascending).
    others: Vec<(usize, Job)>,
}

impl Jobs {
    fn len(&self) -> usize {
        self.events.len() + self.others.len()
    }

    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.others.is_empty()
    }
}

/// What a queue's senders and its thread share, under one lock.
#[derive(Default)]
struct Shared {
    /// Jobs accepted and not yet taken by the thread, in order.
    jobs: Jobs,
    /// Barriers among `jobs`.
    barriers: usize,
    /// Writes accepted and not yet applied, and their bytes: what the bounds limit.
    writes: usize,
    bytes: usize,
    /// Senders waiting for room.
    waiting: usize,
    /// The thread sleeps until a job comes.
    idle: bool,
    /// The pool is going: the thread applies what is queued and exits.
    closed: bool,
    /// The thread has exited: nothing is accepted any more.
    gone: bool,
}

/// A value on cache lines of its own: the hint an idle thread reads in a loop must not share
/// a line with the lock every sender writes.
#[repr(align(128))]
#[derive(Default)]
struct OwnLines<T>(T);

/// One queue: its jobs and its bounds, shared by its senders and its thread.
///
/// A sender that finds the queue full waits for room: it spins and yields a few rounds, then
/// sleeps; the thread wakes sleepers only once the queue has drained to half its bounds, so
/// that a woken sender can queue many writes before it waits again (one wake-up per write
/// would cost more than applying the write). Every check and change of the counters is made
/// under the lock, so the bounds are exact.
struct BoundedQueue {
    shared: OwnLines<Mutex<Shared>>,
    /// What an idle thread watches (a plain load) instead of taking the lock from the senders
    /// to look: 0 when nothing is queued, else the number of jobs queued when it was last
    /// written (by a sender, under the lock, as the count reaches 1, each multiple of
    /// [`HINT_EVERY`] and `take_at`), or
    /// [`URGENT`].
    ready: OwnLines<AtomicUsize>,
    /// Signalled when a job comes for an idle thread (or the pool closes).
    work: Condvar,
    /// Signalled when room comes for waiting senders (or the thread is gone).
    room: Condvar,
    capacity: usize,
    budget: usize,
    /// Jobs an idle thread waits for before it takes them ([`TAKE_AT`], fewer for a short
    /// queue).
    take_at: usize,
    /// Applied writes the thread returns at once while a sender waits for room
    /// ([`RELEASE_EVERY`], fewer for a short queue, so that senders and the thread overlap).
    release_every: usize,
}

impl BoundedQueue {
    fn new(capacity: usize, budget: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            shared: OwnLines::default(),
            ready: OwnLines::default(),
            work: Condvar::new(),
            room: Condvar::new(),
            capacity,
            budget,
            take_at: (capacity / 2).clamp(1, TAKE_AT),
            release_every: (capacity / 4).clamp(1, RELEASE_EVERY),
        }
    }

    /// Whether `bytes` more fit now (an empty queue takes anything).
    fn fits(&self, shared: &Shared, bytes: usize) -> bool {
        shared.writes == 0
            || (shared.writes < self.capacity && shared.bytes.saturating_add(bytes) <= self.budget)
    }

    /// Publishes the hint for the jobs now queued and wakes the thread if it sleeps (a job
    /// was just added under `shared`).
    #[inline]
    fn queued(&self, shared: MutexGuard<'_, Shared>) {
        let wake = self.hint(&shared);
        drop(shared);
        if wake {
            self.work.notify_one();
        }
    }

    /// Publishes the hint for the jobs queued in `shared` (a job was just added); whether the
    /// thread sleeps and must be woken.
    #[inline]
    fn hint(&self, shared: &Shared) -> bool {
        let queued = shared.jobs.len();
        if shared.barriers > 0 {
            self.ready.0.store(URGENT, Ordering::Relaxed);
        } else if queued == 1 || queued % HINT_EVERY == 0 || queued == self.take_at {
            self.ready.0.store(queued, Ordering::Relaxed);
        }
        shared.idle
    }

    /// Blocks until `bytes` more fit (or the queue is empty), then counts a write of `bytes`
    /// and returns the lock for the caller to queue it (then [`BoundedQueue::queued`]);
    /// refused once the thread is gone. The caller moves the write straight into the queue:
    /// no copy of it waits for the lock.
    #[inline]
    fn reserve(&self, bytes: usize) -> Result<MutexGuard<'_, Shared>, Error> {
        let mut shared = self.shared.0.lock();
        self.reserve_held(&mut shared, bytes)?;
        Ok(shared)
    }

    /// [`BoundedQueue::reserve`] with the lock already held (released while waiting). A
    /// thread asleep is woken before the sender waits: the jobs that filled the queue may
    /// have been queued under this very hold of the lock.
    #[inline]
    fn reserve_held(&self, shared: &mut MutexGuard<'_, Shared>, bytes: usize) -> Result<(), Error> {
        let mut round = 0;
        while !shared.gone && !self.fits(shared, bytes) {
            shared.waiting += 1;
            self.ready.0.store(URGENT, Ordering::Relaxed);
            if shared.idle {
                self.work.notify_one();
            }
            if round < IDLE_ROUNDS {
                // The thread returns room every `release_every` writes while a sender
                // waits: most waits end within these rounds, without a sleep and a wake-up.
                MutexGuard::unlocked(shared, || idle_wait(round));
                round += 1;
            } else {
                self.room.wait(shared);
            }
            shared.waiting -= 1;
        }
        if shared.gone {
            return Err(Error::ShutDown);
        }
        shared.writes += 1;
        shared.bytes += bytes;
        Ok(())
    }

    /// Queues a job other than an event; a write blocks until its `bytes` fit.
    fn send_other(&self, job: Job, bytes: usize) -> Result<(), Error> {
        let mut shared = match job {
            Job::Write(_) => self.reserve(bytes)?,
            Job::Barrier(_) => {
                let shared = self.shared.0.lock();
                if shared.gone {
                    return Err(Error::ShutDown);
                }
                shared
            }
        };
        let Shared { jobs, barriers, .. } = &mut *shared;
        if matches!(job, Job::Barrier(_)) {
            *barriers += 1;
        }
        jobs.others.push((jobs.events.len(), job));
        self.queued(shared);
        Ok(())
    }

    /// Queues a barrier (it takes no room).
    fn send_barrier(&self, ack: Sender<Result<(), Error>>) -> Result<(), Error> {
        self.send_other(Job::Barrier(ack), 0)
    }

    /// Returns the room of applied writes (under the lock).
    fn release_locked(&self, shared: &mut Shared, applied: Applied) {
        if applied.writes == 0 {
            return;
        }
        shared.writes -= applied.writes;
        shared.bytes -= applied.bytes;
        let drained = shared.writes == 0
            || (shared.writes <= self.capacity / 2 && shared.bytes <= self.budget / 2);
        if drained && shared.waiting > 0 {
            self.room.notify_all();
        }
    }

    /// Returns the room of applied writes.
    fn release(&self, applied: Applied) {
        if applied.writes > 0 {
            self.release_locked(&mut self.shared.0.lock(), applied);
        }
    }

    /// Waits until the hint says a batch is worth taking: urgent, or
    /// [`BoundedQueue::take_at`] jobs queued, or fewer once the senders have paused (the
    /// hint has not moved for [`PAUSED_FOR`]) or after [`GATHER_FOR`], spinning meanwhile (a
    /// yield on a busy machine can give the core away for a whole time slice). With nothing
    /// queued it waits for a first job through [`IDLE_ROUNDS`] rounds of spinning and yielding
    /// at most. Returns the last hint read.
    fn wait_for_batch(&self) -> usize {
        let mut ready = self.ready.0.load(Ordering::Relaxed);
        let mut round = 0;
        while ready == 0 && round < IDLE_ROUNDS {
            idle_wait(round);
            round += 1;
            ready = self.ready.0.load(Ordering::Relaxed);
        }
        if ready == 0 || ready >= self.take_at {
            return ready;
        }
        let start = Instant::now();
        let (mut seen, mut seen_at) = (ready, start);
        let mut round = 0;
        while ready < self.take_at {
            idle_wait(round);
            round = (round + 1).min(SPIN_ROUNDS - 1);
            ready = self.ready.0.load(Ordering::Relaxed);
            let now = Instant::now();
            if ready != seen {
                (seen, seen_at) = (ready, now);
            } else if now - seen_at >= PAUSED_FOR || now - start >= GATHER_FOR {
                break;
            }
        }
        ready
    }

    /// The lock, for the thread to take its batch. A sender queueing event after event holds
    /// the lock much of the time: the thread tries it, and between tries waits as it waits
    /// for a batch (spinning, then yielding), rather than spinning on the lock's line and then
    /// sleeping on the lock, which takes the line from the sender at every try and makes
    /// each unlock wake the thread. After [`TAKE_TRIES`] tries it waits on the lock.
    fn lock_to_take(&self) -> MutexGuard<'_, Shared> {
        for round in 0..TAKE_TRIES {
            if let Some(shared) = self.shared.0.try_lock() {
                return shared;
            }
            idle_wait(round.min(IDLE_ROUNDS - 1));
        }
        self.shared.0.lock()
    }

    /// Whether the thread should act now: a barrier is queued, a sender waits for room or
    /// the pool is closing.
    fn urgent(&self) -> bool {
        self.ready.0.load(Ordering::Relaxed) == URGENT
    }

    /// The thread's side: waits for a batch worth taking, returns the room of `applied`
    /// (under the same lock) and swaps every job queued into `batch` (empty). With nothing
    /// queued it waits through its idle rounds once more (the first wait may have ended on a
    /// stale urgent hint), then sleeps. `false` once the pool is closed and nothing is left.
    fn take(&self, batch: &mut Jobs, applied: Applied) -> bool {
        debug_assert!(batch.is_empty());
        self.wait_for_batch();
        let mut shared = self.lock_to_take();
        self.release_locked(&mut shared, applied);
        let mut waited_again = false;
        while shared.jobs.is_empty() {
            if shared.closed {
                return false;
            }
            // Everything applied is returned and nothing is queued: waiting senders, if any,
            // have been woken.
            self.ready.0.store(0, Ordering::Relaxed);
            if waited_again {
                shared.idle = true;
                self.work.wait(&mut shared);
                shared.idle = false;
            } else {
                waited_again = true;
                MutexGuard::unlocked(&mut shared, || {
                    self.wait_for_batch();
                });
            }
        }
        std::mem::swap(&mut shared.jobs, batch);
        shared.barriers = 0;
        // A sender still waiting for room keeps the hint urgent, so that the thread returns
        // room as it applies this batch and takes the next one without idling first.
        let hint = if shared.waiting > 0 { URGENT } else { 0 };
        self.ready.0.store(hint, Ordering::Relaxed);
        true
    }

    /// Tells the thread to finish what is queued and exit.
    fn close(&self) {
        self.shared.0.lock().closed = true;
        self.ready.0.store(URGENT, Ordering::Relaxed);
        self.work.notify_one();
    }

    /// Senders waiting for room.
    #[cfg(test)]
    fn waiters(&self) -> usize {
        self.shared.0.lock().waiting
    }

    /// Writes and bytes in use.
    #[cfg(test)]
    fn usage(&self) -> (usize, usize) {
        let shared = self.shared.0.lock();
        (shared.writes, shared.bytes)
    }
}

/// One round of an idle thread's wait: a few spins, longer each round, then yields of the
/// core (a sleep and a wake-up cost microseconds; most gaps are shorter).
fn idle_wait(round: u32) {
    if round < SPIN_ROUNDS {
        for _ in 0..1u32 << round {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
}

/// Marks its queue's thread gone when the thread exits, however it exits: the jobs still
/// queued are dropped (a barrier among them fails its `flush` instead of hanging it) and
/// waiting senders are refused.
struct Departure<'a>(&'a BoundedQueue);

impl Drop for Departure<'_> {
    fn drop(&mut self) {
        let mut shared = self.0.shared.0.lock();
        shared.gone = true;
        let left = std::mem::take(&mut shared.jobs);
        self.0.ready.0.store(0, Ordering::Relaxed);
        drop(shared);
        self.0.room.notify_all();
        drop(left);
    }
}

/// A queue's sending side.
struct Queue {
    bound: Arc<BoundedQueue>,
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
            let bound = Arc::new(BoundedQueue::new(capacity, budget));
            let applier = Arc::clone(&applier);
            let failed = Arc::clone(&pool.failed);
            let thread_bound = Arc::clone(&bound);
            let handle = std::thread::Builder::new()
                .name(format!("kvidx-events-{index}"))
                .spawn(move || run_thread(&applier, &thread_bound, &failed))
                // Dropping `pool` closes and joins the threads already started.
                .map_err(|_| Error::ShutDown)?;
            pool.queues.push(Queue { bound });
            pool.threads.push(handle);
        }
        Ok(pool)
    }

    #[inline]
    fn queue_of(&self, worker_id: u64) -> &Queue {
        if let [only] = self.queues.as_slice() {
            return only; // one event thread (the default): nothing to route
        }
        let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
        worker_id.hash(&mut hasher);
        let hash = std::hash::Hasher::finish(&hasher);
        // The high bits of an Fx hash are the well-mixed ones: scaled to the number of
        // queues by a multiplication (a division costs more than the rest of a submit).
        &self.queues[(((hash >> 32) * self.queues.len() as u64) >> 32) as usize]
    }

    /// Queues a write behind the earlier writes of its worker id; blocks while its queue is
    /// full (in count or bytes).
    #[inline]
    pub(crate) fn submit(&self, write: Write) -> Result<(), Error> {
        let write = match write {
            Write::Event(event) => return self.submit_event(event),
            write => write,
        };
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let queue = self.queue_of(write.worker_id());
        let bytes = write.queued_bytes();
        queue.bound.send_other(Job::Write(write), bytes)
    }

    /// Queues an event as [`EventPool::submit`] queues a [`Write::Event`].
    ///
    /// The room is reserved (and the lock taken) with the event still where the caller put
    /// it, and the event is then moved once, into the queue: moved before, through the
    /// atomics of the lock, it would be copied on the stack at each step.
    #[inline]
    pub(crate) fn submit_event(&self, event: Event) -> Result<(), Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let queue = &self.queue_of(event.worker.worker_id).bound;
        let mut shared = queue.reserve(event.queued_bytes())?;
        shared.jobs.events.push(event);
        queue.queued(shared);
        Ok(())
    }

    /// Queues events in order, each as [`EventPool::submit_event`] queues it (counted, and
    /// waiting for room, one by one), taking a queue's lock once for up to [`HOLD_EVENTS`]
    /// consecutive events routed to it instead of once per event.
    pub(crate) fn submit_events(
        &self,
        events: impl IntoIterator<Item = Event>,
    ) -> Result<(), Error> {
        let mut hold: Option<Hold<'_>> = None;
        for event in events {
            if self.failed.load(Ordering::Acquire) {
                return Err(Error::ShutDown);
            }
            let queue = &self.queue_of(event.worker.worker_id).bound;
            let hold = match &mut hold {
                Some(held) if std::ptr::eq(held.queue, &**queue) && held.events < HOLD_EVENTS => {
                    held
                }
                _ => {
                    drop(hold.take()); // wakes its thread if it sleeps
                    hold.insert(Hold {
                        queue,
                        shared: queue.shared.0.lock(),
                        events: 0,
                    })
                }
            };
            queue.reserve_held(&mut hold.shared, event.queued_bytes())?;
            hold.shared.jobs.events.push(event);
            hold.events += 1;
            queue.hint(&hold.shared);
        }
        Ok(())
    }

    /// Returns once every job accepted before the call has been applied.
    pub(crate) fn flush(&self) -> Result<(), Error> {
        if self.failed.load(Ordering::Acquire) {
            return Err(Error::ShutDown);
        }
        let (ack_tx, ack_rx) = unbounded();
        for queue in &self.queues {
            queue.bound.send_barrier(ack_tx.clone())?;
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
    /// Closes the queues, lets every thread drain what was accepted, and joins them.
    fn drop(&mut self) {
        for queue in self.queues.drain(..) {
            queue.bound.close();
        }
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
    }
}

/// Events a sender of several events queues at most under one hold of a queue's lock
/// ([`EventPool::submit_events`]): the lock is taken once per this many events rather than
/// per event, and the event thread, which may want the lock to take its batch, is kept from
/// it for a few hundred nanoseconds at most.
const HOLD_EVENTS: usize = 64;

/// A queue's lock held by a sender queueing several events; when it is let go, the queue's
/// thread is woken if it sleeps (the jobs queued under the hold are for it).
struct Hold<'a> {
    queue: &'a BoundedQueue,
    shared: MutexGuard<'a, Shared>,
    /// Events queued under this hold.
    events: usize,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if self.shared.idle {
            self.queue.work.notify_one();
        }
    }
}

/// Writes applied and bytes they counted, not yet returned to their queue's bounds.
#[derive(Default, Clone, Copy)]
struct Applied {
    writes: usize,
    bytes: usize,
}

impl Applied {
    fn add(&mut self, writes: usize, bytes: usize) {
        self.writes += writes;
        self.bytes += bytes;
    }
}

/// The run an event thread has gathered from its batch, and the queued writes and bytes it
/// stands for; and the outcomes of the runs applied since the counters were last updated.
#[derive(Default)]
struct Pending {
    run: Run,
    writes: usize,
    bytes: usize,
    tally: Tally,
}

/// Adds the outcomes of the runs applied to the counters: once per batch taken and before
/// a barrier is acknowledged (one shared write per counter then, not per run).
fn count_applied(applier: &Applier, pending: &mut Pending) {
    applier.add(std::mem::take(&mut pending.tally));
}

/// Applies `f` unless the pool has failed; a panic in it marks the pool failed (a bug that
/// broke the index: refuse to build on it, keep answering barriers).
fn guarded(failed: &AtomicBool, f: impl FnOnce()) {
    if !failed.load(Ordering::Acquire) && catch_unwind(AssertUnwindSafe(f)).is_err() {
        failed.store(true, Ordering::Release);
    }
}

/// Applies and empties the pending run, counting it as applied.
fn apply_pending(
    applier: &Applier,
    pending: &mut Pending,
    applied: &mut Applied,
    failed: &AtomicBool,
) {
    if pending.run.is_empty() {
        return;
    }
    guarded(failed, || {
        applier.apply_run_tallied(&pending.run, &mut pending.tally);
    });
    pending.run.clear();
    applied.add(
        std::mem::take(&mut pending.writes),
        std::mem::take(&mut pending.bytes),
    );
}

/// An event thread: takes every job queued at once and applies them in order, consecutive
/// events of one worker as one [`Run`] (see [`Run::takes`]).
fn run_thread(applier: &Applier, queue: &BoundedQueue, failed: &AtomicBool) {
    let _departure = Departure(queue);
    let mut batch = Jobs::default();
    let mut spares = Spares::default();
    let mut pending = Pending::default();
    let mut applied = Applied::default();
    loop {
        batch = spares.swap(batch);
        if !queue.take(&mut batch, std::mem::take(&mut applied)) {
            break;
        }
        spares.count(batch.events.len());
        let Jobs { events, others } = &mut batch;
        let mut others = Others::new(others);
        // Each event is moved out once, as it is applied (a run of one is applied by
        // reference and dropped, so its memory goes as its room is returned); an event that
        // joins a run is moved into the run.
        let mut events = events.drain(..);
        let mut at = 0;
        while let Some(event) = events.next() {
            let bytes = event.queued_bytes();
            let Event { worker, data, .. } = event;
            while let Some(job) = others.next_before(at) {
                apply_job(applier, queue, job, &mut pending, &mut applied, failed);
                release_if_urgent(queue, &mut applied);
            }
            at += 1;
            if !pending.run.takes(worker) {
                apply_pending(applier, &mut pending, &mut applied, failed);
            }
            let joined = others.at != at
                && (events.as_slice().first()).is_some_and(|next| next.worker == worker);
            if pending.run.is_empty() && !joined {
                guarded(failed, || {
                    applier.apply_event_tallied(worker, &data, &mut pending.tally);
                });
                drop(data);
                applied.add(1, bytes);
            } else {
                pending.run.push_data(worker, data);
                pending.writes += 1;
                pending.bytes += bytes;
            }
            release_if_urgent(queue, &mut applied);
        }
        drop(events);
        while let Some(job) = others.next_before(usize::MAX) {
            apply_job(applier, queue, job, &mut pending, &mut applied, failed);
            release_if_urgent(queue, &mut applied);
        }
        apply_pending(applier, &mut pending, &mut applied, failed);
        count_applied(applier, &mut pending);
    }
}

/// The vectors an event thread has drained and not yet handed back to its senders (see
/// [`REUSE_DISTANCE`]), oldest first, each with the number of events the thread had drained
/// when it was emptied.
#[derive(Default)]
struct Spares {
    drained: std::collections::VecDeque<(usize, Jobs)>,
    /// Events drained so far (wrapping).
    events: usize,
}

impl Spares {
    /// Keeps `emptied` (just drained) and returns the vectors for the senders to fill next:
    /// the oldest kept, once far enough behind, else new ones.
    fn swap(&mut self, emptied: Jobs) -> Jobs {
        debug_assert!(emptied.is_empty());
        let distance = REUSE_DISTANCE / std::mem::size_of::<Event>().max(1);
        self.drained.push_back((self.events, emptied));
        let far = |&(at, _): &(usize, Jobs)| self.events.wrapping_sub(at) >= distance;
        if self.drained.len() > MAX_SPARES || self.drained.front().is_some_and(far) {
            if let Some((_, jobs)) = self.drained.pop_front() {
                return jobs;
            }
        }
        Jobs::default()
    }

    /// Counts the events of a batch as drained.
    fn count(&mut self, events: usize) {
        self.events = self.events.wrapping_add(events);
    }
}

/// The jobs of a batch other than events, taken in order as the thread reaches their place.
struct Others<'a> {
    jobs: std::vec::Drain<'a, (usize, Job)>,
    next: Option<Job>,
    /// The number of events queued before `next` (`usize::MAX` after the last job): the one
    /// figure the thread compares per event.
    at: usize,
}

impl<'a> Others<'a> {
    fn new(jobs: &'a mut Vec<(usize, Job)>) -> Self {
        let mut others = Self {
            jobs: jobs.drain(..),
            next: None,
            at: usize::MAX,
        };
        others.advance();
        others
    }

    fn advance(&mut self) {
        (self.at, self.next) = match self.jobs.next() {
            Some((at, job)) => (at, Some(job)),
            None => (usize::MAX, None),
        };
    }

    /// The next job if it was queued before event `event` (`usize::MAX`: any job left).
    #[inline]
    fn next_before(&mut self, event: usize) -> Option<Job> {
        if self.next.is_none() || (self.at > event && event != usize::MAX) {
            return None;
        }
        let job = self.next.take();
        self.advance();
        job
    }
}

/// Returns the room of applied writes while a sender waits for it, every
/// [`BoundedQueue::release_every`] writes.
fn release_if_urgent(queue: &BoundedQueue, applied: &mut Applied) {
    if applied.writes >= queue.release_every && queue.urgent() {
        queue.release(std::mem::take(applied));
    }
}

/// Applies a job other than an event, after the pending run: a write, or a barrier it then
/// acknowledges (having added the counters and returned the room of everything applied).
fn apply_job(
    applier: &Applier,
    queue: &BoundedQueue,
    job: Job,
    pending: &mut Pending,
    applied: &mut Applied,
    failed: &AtomicBool,
) {
    apply_pending(applier, pending, applied, failed);
    match job {
        Job::Write(write) => {
            let bytes = write.queued_bytes();
            guarded(failed, || {
                applier.apply(&write);
            });
            drop(write);
            applied.add(1, bytes);
        }
        Job::Barrier(ack) => {
            count_applied(applier, pending);
            queue.release(std::mem::take(applied));
            let status = if failed.load(Ordering::Acquire) {
                Err(Error::ShutDown)
            } else {
                Ok(())
            };
            let _ = ack.send(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Backend;
    use crate::model::{Block, EventData, Match, Outcome, Worker};
    use crate::predictions::Predictions;

    fn test_predictions() -> Predictions {
        Predictions::new(Default::default())
    }

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

    /// Jobs whose event vector has room for `events` (to tell vectors apart).
    fn jobs_with_room(events: usize) -> Jobs {
        Jobs {
            events: Vec::with_capacity(events),
            others: Vec::new(),
        }
    }

    #[test]
    fn a_drained_vector_goes_back_to_the_senders_only_once_far_behind() {
        let distance = REUSE_DISTANCE / std::mem::size_of::<Event>();
        let mut spares = Spares::default();
        assert_eq!(spares.swap(jobs_with_room(7)).events.capacity(), 0);
        spares.count(distance - 1);
        let refilled = spares.swap(Jobs::default());
        assert_eq!(refilled.events.capacity(), 0, "still near: a new vector");
        spares.count(1);
        let refilled = spares.swap(Jobs::default());
        assert!(
            refilled.events.capacity() >= 7,
            "far enough: the oldest comes back"
        );

        // However near, no more than MAX_SPARES drained vectors are kept.
        let mut spares = Spares::default();
        spares.swap(jobs_with_room(7));
        for _ in 1..MAX_SPARES {
            assert_eq!(spares.swap(Jobs::default()).events.capacity(), 0);
        }
        assert!(spares.swap(Jobs::default()).events.capacity() >= 7);
    }

    #[test]
    fn a_panic_on_an_event_thread_shuts_the_pool_down_without_hanging() {
        let applier = Arc::new(Applier::new(
            Box::new(Scripted::default()),
            test_predictions(),
        ));
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

    /// A one-thread pool whose queue holds three events of 100 blocks (in bytes), over a
    /// [`Scripted`] backend; its gate, and the bytes of one such event.
    #[allow(clippy::type_complexity)]
    fn pool_of_three() -> (
        Arc<parking_lot::RwLock<()>>,
        Arc<Applier>,
        Arc<EventPool>,
        usize,
    ) {
        let backend = Scripted::default();
        let gate = Arc::clone(&backend.gate);
        let applier = Arc::new(Applier::new(Box::new(backend), test_predictions()));
        let one = event(Worker::new(1, 0), 100).queued_bytes();
        let pool = Arc::new(EventPool::start(Arc::clone(&applier), 1, 1000, 3 * one).unwrap());
        (gate, applier, pool, one)
    }

    #[test]
    fn queues_are_bounded_by_bytes_and_an_oversized_write_goes_alone() {
        let (gate, applier, pool, one) = pool_of_three();
        let closed = gate.write(); // the event thread blocks in its first apply
        let w = Worker::new(1, 0);
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

    #[test]
    fn a_batch_counts_each_event_against_the_bounds_as_it_is_queued() {
        let (gate, applier, pool, one) = pool_of_three();
        let closed = gate.write(); // the event thread blocks in its first apply
        let w = Worker::new(1, 0);
        let batch = {
            let pool = Arc::clone(&pool);
            std::thread::spawn(move || {
                pool.submit_events(
                    (0..5).map(|i| Event::stored(w, i, None, vec![Block::new(1, 2); 100])),
                )
            })
        };
        // The batch fills the budget, then waits for room with three events counted (the
        // thread holds the first and has returned nothing). (The gate is opened before any
        // assertion: a failure must not leave the event thread blocked at the join.)
        while pool.queues[0].bound.waiters() == 0 {
            std::thread::yield_now();
        }
        let waiting = usage(&pool);
        drop(closed);
        assert_eq!(waiting, (3, 3 * one), "three events fill the budget");
        batch.join().unwrap().unwrap();
        pool.flush().unwrap();
        assert_eq!(usage(&pool), (0, 0));
        assert_eq!(applier.stats().events_applied, 5);
    }

    #[test]
    fn a_batch_wakes_a_sleeping_thread_without_a_flush() {
        let applier = Arc::new(Applier::new(
            Box::new(Scripted::default()),
            test_predictions(),
        ));
        let pool = EventPool::start(Arc::clone(&applier), 1, 1000, 1 << 20).unwrap();
        while !pool.queues[0].bound.shared.0.lock().idle {
            std::thread::yield_now(); // until the thread sleeps
        }
        let w = Worker::new(1, 0);
        pool.submit_events((0..2).map(|i| Event::removed(w, i, vec![i])))
            .unwrap();
        // Applied with nothing else sent: a thread left asleep would never apply them (the
        // watchdog fails the test instead of hanging it).
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        let watched = Arc::clone(&applier);
        std::thread::spawn(move || {
            while watched.stats().events_applied < 2 {
                std::thread::yield_now();
            }
            let _ = done_tx.send(());
        });
        let woken = done_rx.recv_timeout(std::time::Duration::from_secs(60));
        assert!(
            woken.is_ok(),
            "the batch was not applied: the thread sleeps"
        );
    }

    /// A backend that records what it is given, in order, and can be held still.
    #[derive(Default)]
    struct Recording {
        gate: Arc<parking_lot::RwLock<()>>,
        seen: Arc<Mutex<Vec<(u64, u64)>>>,
    }

    impl Backend for Recording {
        fn apply(&self, w: Worker, data: &EventData) -> Outcome {
            let _held = self.gate.read();
            let tag = match data {
                EventData::Removed { seq_hashes, .. } => seq_hashes[0],
                _ => u64::MAX,
            };
            self.seen.lock().push((w.worker_id, tag));
            Outcome::Applied {
                unknown_removals: 0,
            }
        }
        fn remove_worker(&self, worker_id: u64) {
            self.seen.lock().push((worker_id, 0));
        }
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

    #[test]
    fn writes_of_every_kind_queued_between_events_keep_their_order() {
        let backend = Recording::default();
        let (gate, seen) = (Arc::clone(&backend.gate), Arc::clone(&backend.seen));
        let applier = Arc::new(Applier::new(Box::new(backend), test_predictions()));
        let pool = EventPool::start(Arc::clone(&applier), 1, 1000, 1 << 20).unwrap();
        let removed = |worker: u64, tag: u64| {
            Write::Event(Event::removed(Worker::new(worker, 0), tag, vec![tag]))
        };
        // The first event holds the thread in its apply, so that the rest is taken as one
        // batch: runs of one and of several events, writes of other kinds between and after
        // events (and first in the batch), a batch write.
        let closed = gate.write();
        pool.submit(removed(1, 1)).unwrap();
        while !pool.queues[0].bound.shared.0.lock().jobs.is_empty() {
            std::thread::yield_now(); // until the thread has taken the first event
        }
        pool.submit(Write::RemoveWorker(2)).unwrap();
        pool.submit(removed(1, 2)).unwrap();
        pool.submit(removed(1, 3)).unwrap();
        pool.submit(Write::RemoveWorker(2)).unwrap();
        pool.submit(removed(3, 4)).unwrap();
        pool.submit(removed(1, 5)).unwrap();
        pool.submit(Write::Batch {
            worker: Worker::new(1, 0),
            offset: None,
            events: vec![EventData::Removed {
                seq_hashes: vec![6],
                tier: None,
            }],
        })
        .unwrap();
        pool.submit(removed(1, 7)).unwrap();
        drop(closed);
        pool.flush().unwrap();
        let expected = [
            (1, 1),
            (2, 0),
            (1, 2),
            (1, 3),
            (2, 0),
            (3, 4),
            (1, 5),
            (1, 6),
            (1, 7),
        ];
        assert_eq!(*seen.lock(), expected);
        assert_eq!(usage(&pool), (0, 0));
    }
}
