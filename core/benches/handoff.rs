//! Cost per event of handing an event stream from one thread to another, in the same run:
//!
//! - `spsc_ring`: a plain single-producer, single-consumer ring written here, as bounded as
//!   the pool's queue: positions on cache lines of their own, each side's view of the other's
//!   position cached, the tail published once per segment of 64 slots and the head once per
//!   batch taken, the consumer taking every event published at once (safe Rust: a segment's
//!   slots are behind a lock that each side takes once per segment, never contended in the
//!   steady state);
//! - `event_pool`: kvidx's event threads (one thread, default bounds), through
//!   `Indexer::apply_event` and a final `flush`;
//! - `event_pool_apply_events`: the same through `Indexer::apply_events` in calls of 64
//!   events (as a batch of engine events is applied), which takes the queue's lock once per
//!   call instead of once per event.
//!
//! Both consumers give every event to the same do-nothing backend and drop it, so the
//! difference is the handoff: queueing, bounds, wake-ups, run gathering and the event
//! counters. Each iteration hands over a fresh copy of the same stream (copied outside the
//! clock) and waits until the consumer has taken all of it.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kvidx::{
    Backend, Block, Config, Event, EventData, Indexer, Match, Outcome, TieredMatch, Worker,
    DEFAULT_QUEUE_CAPACITY,
};
use parking_lot::{Mutex, MutexGuard};

/// Events per iteration.
const EVENTS: usize = 1 << 16;
/// Events per `apply_events` call of `event_pool_apply_events`.
const EVENTS_PER_CALL: usize = 64;
/// Workers the stream cycles through.
const WORKERS: u64 = 64;

/// The stream: per worker, a Stored of four blocks then three single-block Removed (the
/// mix of a mock-engine workload: most events are single-block evictions).
fn stream() -> Vec<Event> {
    (0..EVENTS as u64)
        .map(|i| {
            let worker = Worker::new(i % WORKERS, 0);
            let id = i / WORKERS;
            if id % 4 == 0 {
                let blocks = (0..4).map(|b| Block::new(id * 4 + b, i * 4 + b)).collect();
                Event::stored(worker, id, None, blocks)
            } else {
                Event::removed(worker, id, vec![i])
            }
        })
        .collect()
}

/// A backend that only counts what it is given (on a cache line of its own).
#[repr(align(128))]
#[derive(Default)]
struct Counting(AtomicU64);

impl Backend for Counting {
    fn apply(&self, _: Worker, data: &EventData) -> Outcome {
        black_box(data);
        self.0.fetch_add(1, Ordering::Relaxed);
        Outcome::Applied {
            unknown_removals: 0,
        }
    }
    fn remove_worker(&self, _: u64) {}
    fn remove_worker_dp_rank(&self, _: Worker) {}
    fn find_matches_into(&self, _: &[u64], out: &mut Vec<Match>) {
        out.clear();
    }
    fn find_matches_tiered_into(&self, _: &[u64], out: &mut Vec<TieredMatch>) {
        out.clear();
    }
    fn workers(&self) -> u64 {
        0
    }
    fn worker_blocks(&self) -> u64 {
        0
    }
}

/// A position on a cache line of its own, so the two sides' positions never share one.
#[repr(align(128))]
#[derive(Default)]
struct Position(AtomicUsize);

/// A flag on a cache line of its own: a side is asleep, waiting for the other to move.
#[repr(align(128))]
#[derive(Default)]
struct Asleep(AtomicBool);

/// Slots of one segment of the ring: the unit in which the producer publishes its tail and
/// each side takes a segment's lock (once per segment, so about 1/64 of a lock per event).
const SEGMENT: usize = 64;

/// One segment's slots, on cache lines of their own. The lock is how safe Rust hands the
/// slots from one side to the other; it is never contended in the steady state, since each
/// side only takes a segment the positions give it.
#[repr(align(128))]
struct Segment(Mutex<Vec<Option<Event>>>);

/// Rounds of waiting before a side sleeps: the first [`SPIN_ROUNDS`] spin (longer each
/// round), the others yield the core; as the event pool's threads wait.
const WAIT_ROUNDS: u32 = 9;
const SPIN_ROUNDS: u32 = 7;

/// The ring: `segments.len() * SEGMENT` events at most in flight, as many as the pool's
/// queue holds by default.
///
/// A plain single-producer, single-consumer ring with batched publication: the producer
/// fills the slots of a segment under its lock and publishes its tail once per segment (or
/// when it must wait, or drains); the consumer takes every published event at once and
/// publishes its head once per batch. Each side caches the other's position and reads it
/// again only when that cached view says it must wait. A side that must wait spins, then
/// yields, then sleeps; a side that publishes wakes the other if it sleeps (the flag is
/// read after the position is written, both sequentially consistent, once per
/// publication).
struct Ring {
    segments: Box<[Segment]>,
    /// Events taken by the consumer (written by the consumer only).
    head: Position,
    /// Events published by the producer (written by the producer only).
    tail: Position,
    producer_asleep: Asleep,
    consumer_asleep: Asleep,
    stop: AtomicBool,
}

impl Ring {
    fn new() -> Self {
        Self {
            segments: (0..DEFAULT_QUEUE_CAPACITY / SEGMENT)
                .map(|_| Segment(Mutex::new((0..SEGMENT).map(|_| None).collect())))
                .collect(),
            head: Position::default(),
            tail: Position::default(),
            producer_asleep: Asleep::default(),
            consumer_asleep: Asleep::default(),
            stop: AtomicBool::new(false),
        }
    }

    fn capacity(&self) -> usize {
        self.segments.len() * SEGMENT
    }

    fn segment(&self, position: usize) -> &Mutex<Vec<Option<Event>>> {
        &self.segments[(position / SEGMENT) % self.segments.len()].0
    }
}

/// Waits until `ready` returns a value: spins, then yields, then sleeps until woken (after
/// raising `asleep` and reading once more, so that a wake-up is never missed).
fn wait_until<T>(asleep: &Asleep, mut ready: impl FnMut() -> Option<T>) -> T {
    for round in 0..WAIT_ROUNDS {
        if let Some(value) = ready() {
            return value;
        }
        if round < SPIN_ROUNDS {
            for _ in 0..1u32 << round {
                std::hint::spin_loop();
            }
        } else {
            std::thread::yield_now();
        }
    }
    loop {
        asleep.0.store(true, Ordering::SeqCst);
        if let Some(value) = ready() {
            asleep.0.store(false, Ordering::Relaxed);
            return value;
        }
        std::thread::park();
        asleep.0.store(false, Ordering::Relaxed);
    }
}

/// Publishes `value` at `position` and wakes `sleeper` if it sleeps.
fn publish(position: &Position, value: usize, asleep: &Asleep, sleeper: &Thread) {
    position.0.store(value, Ordering::SeqCst);
    if asleep.0.load(Ordering::SeqCst) {
        sleeper.unpark();
    }
}

/// The producer's side of the ring.
struct Producer<'a> {
    ring: &'a Ring,
    consumer: Thread,
    /// Events written, published or not.
    tail: usize,
    /// The tail last published.
    published: usize,
    /// The consumer's head as last read.
    seen_head: usize,
    /// The segment being filled (held from its first write until the tail is published).
    open: Option<MutexGuard<'a, Vec<Option<Event>>>>,
}

impl<'a> Producer<'a> {
    fn new(ring: &'a Ring, consumer: Thread) -> Self {
        Self {
            ring,
            consumer,
            tail: 0,
            published: 0,
            seen_head: 0,
            open: None,
        }
    }

    fn push(&mut self, event: Event) {
        let at = self.tail % SEGMENT;
        if self.open.is_none() {
            // The whole segment must be free (emptied by the consumer on the last lap)
            // before it is locked: the consumer takes a segment's lock to empty it.
            let free_from = self.tail - at + SEGMENT;
            let capacity = self.ring.capacity();
            self.wait_for_head(|head| free_from - head <= capacity);
            self.open = Some(self.ring.segment(self.tail).lock());
        }
        let slots = self.open.as_mut().expect("an open segment");
        slots[at] = Some(event);
        self.tail += 1;
        if self.tail % SEGMENT == 0 {
            self.publish();
        }
    }

    /// Unlocks the open segment and publishes every event written.
    fn publish(&mut self) {
        self.open = None;
        if self.published != self.tail {
            self.published = self.tail;
            let ring = self.ring;
            publish(&ring.tail, self.tail, &ring.consumer_asleep, &self.consumer);
        }
    }

    /// Waits until `ok(head)` holds, publishing first (the consumer may be waiting for
    /// those very events).
    fn wait_for_head(&mut self, ok: impl Fn(usize) -> bool) {
        if ok(self.seen_head) {
            return;
        }
        self.publish();
        let head = &self.ring.head.0;
        self.seen_head = wait_until(&self.ring.producer_asleep, || {
            let seen = head.load(Ordering::SeqCst);
            ok(seen).then_some(seen)
        });
    }

    /// Publishes every event written and returns once the consumer has taken them all.
    fn drain(&mut self) {
        let tail = self.tail;
        self.wait_for_head(|head| head == tail);
    }
}

/// The ring's consumer: takes every event published since it last looked, a segment's lock
/// at a time, applies each to the backend and drops it, then publishes its new head; until
/// `stop`.
fn consume(ring: &Ring, backend: &Counting, producer: &Thread) {
    let mut head = 0;
    loop {
        let tail = wait_until(&ring.consumer_asleep, || {
            let tail = ring.tail.0.load(Ordering::SeqCst);
            (tail != head || ring.stop.load(Ordering::SeqCst)).then_some(tail)
        });
        if tail == head {
            return; // stopped
        }
        while head < tail {
            let end = tail.min(head - head % SEGMENT + SEGMENT);
            let mut slots = ring.segment(head).lock();
            for slot in &mut slots[head % SEGMENT..head % SEGMENT + (end - head)] {
                let event = slot.take().expect("a published event");
                backend.apply(event.worker, &event.data);
            }
            drop(slots);
            head = end;
        }
        publish(&ring.head, head, &ring.producer_asleep, producer);
    }
}

/// The time `hand` takes over `iters` fresh copies of `events` (each copied outside the
/// clock), handing every event over and waiting until it is taken.
fn timed(iters: u64, events: &[Event], mut hand: impl FnMut(Vec<Event>)) -> Duration {
    let mut spent = Duration::ZERO;
    for _ in 0..iters {
        let copy = events.to_vec();
        let start = Instant::now();
        hand(copy);
        spent += start.elapsed();
    }
    spent
}

/// An indexer with one event thread and the default bounds over a [`Counting`] backend.
fn one_thread_pool() -> Indexer {
    Indexer::with_backend(
        Box::new(Counting::default()),
        Config {
            event_threads: 1,
            ..Config::default()
        },
    )
    .expect("valid config")
}

/// Hands `copy` through the ring and waits until the consumer has taken it all.
fn through_ring(producer: &mut Producer<'_>, copy: Vec<Event>) {
    copy.into_iter().for_each(|event| producer.push(event));
    producer.drain();
}

/// Hands `copy` to the pool one event per call and waits until it is applied.
fn through_pool(pool: &Indexer, copy: Vec<Event>) {
    copy.into_iter()
        .for_each(|event| pool.apply_event(event).expect("the pool is alive"));
    pool.flush().expect("the pool is alive");
}

/// The pairs asked for by `HANDOFF_PAIRS` (see [`paired`]).
fn pairs_requested() -> Option<usize> {
    let pairs = std::env::var("HANDOFF_PAIRS").ok()?;
    Some(pairs.parse().expect("HANDOFF_PAIRS is a number of pairs"))
}

/// Times `pairs` iterations of the ring and of the pool (`event_pool`) alternately, one
/// of each per pair, and prints the quartiles of each time and of the ratio within each
/// pair: both sides then run in the same state of the machine (which cores the threads
/// share, what else runs), which criterion, timing one subject seconds after the other,
/// cannot promise.
fn paired(pairs: usize, events: &[Event]) {
    let ring = Ring::new();
    let backend = Counting::default();
    let pool = one_thread_pool();
    let mut times = Vec::with_capacity(pairs);
    std::thread::scope(|scope| {
        let main = std::thread::current();
        let (ring, backend) = (&ring, &backend);
        let consumer = scope.spawn(move || consume(ring, backend, &main));
        let mut producer = Producer::new(ring, consumer.thread().clone());
        for _ in 0..pairs {
            let by_ring = timed(1, events, |copy| through_ring(&mut producer, copy));
            let by_pool = timed(1, events, |copy| through_pool(&pool, copy));
            times.push([by_ring, by_pool].map(|time| time.as_secs_f64() * 1e3));
        }
        ring.stop.store(true, Ordering::SeqCst);
        consumer.thread().unpark();
    });
    let quartiles = |figure: &dyn Fn(&[f64; 2]) -> f64| {
        let mut figures: Vec<f64> = times.iter().map(figure).collect();
        figures.sort_by(f64::total_cmp);
        let at = |q: usize| figures[(figures.len() - 1) * q / 4];
        format!("{:.3} {:.3} {:.3}", at(1), at(2), at(3))
    };
    println!(
        "{pairs} pairs, quartiles: spsc_ring {} ms, event_pool {} ms, event_pool / spsc_ring {}",
        quartiles(&|pair| pair[0]),
        quartiles(&|pair| pair[1]),
        quartiles(&|pair| pair[1] / pair[0]),
    );
}

fn handoff(c: &mut Criterion) {
    let events = stream();
    if let Some(pairs) = pairs_requested() {
        return paired(pairs.max(1), &events);
    }
    let mut group = c.benchmark_group("handoff");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(EVENTS as u64));

    let ring_backend = Counting::default();
    let ring = Ring::new();
    std::thread::scope(|scope| {
        let main = std::thread::current();
        let (ring, backend) = (&ring, &ring_backend);
        let consumer = scope.spawn(move || consume(ring, backend, &main));
        let mut producer = Producer::new(ring, consumer.thread().clone());
        group.bench_function("spsc_ring", |b| {
            b.iter_custom(|iters| timed(iters, &events, |copy| through_ring(&mut producer, copy)))
        });
        ring.stop.store(true, Ordering::SeqCst);
        consumer.thread().unpark();
    });

    let pool = one_thread_pool();
    group.bench_function("event_pool", |b| {
        b.iter_custom(|iters| timed(iters, &events, |copy| through_pool(&pool, copy)))
    });
    let batched = one_thread_pool();
    group.bench_function("event_pool_apply_events", |b| {
        b.iter_custom(|iters| {
            timed(iters, &events, |copy| {
                let mut copy = copy.into_iter();
                while copy.len() > 0 {
                    let call = copy.by_ref().take(EVENTS_PER_CALL);
                    batched.apply_events(call).expect("the pool is alive");
                }
                batched.flush().expect("the pool is alive");
            })
        })
    });
    group.finish();
    // The events each side was handed, for CPU figures per event (`perf stat` of a run).
    eprintln!(
        "handed: spsc_ring {} events, event_pool {} events, event_pool_apply_events {} events",
        ring_backend.0.load(Ordering::Relaxed),
        pool.stats().events_applied,
        batched.stats().events_applied
    );
    // Both consumers applied every event they were handed.
    assert_eq!(
        ring_backend.0.load(Ordering::Relaxed) % EVENTS as u64,
        0,
        "the ring lost events"
    );
    assert_eq!(pool.stats().events_applied % EVENTS as u64, 0);
    assert_eq!(batched.stats().events_applied % EVENTS as u64, 0);
}

criterion_group!(benches, handoff);
criterion_main!(benches);
