//! Cost per event of handing an event stream from one thread to another, in the same run:
//!
//! - `spsc_ring`: a minimal single-producer, single-consumer ring written here (safe Rust:
//!   slots behind uncontended locks, acquire/release positions, the consumer taking every
//!   event published at once), as bounded as the pool's queue;
//! - `event_pool`: kvidx's event threads (one thread, default bounds), through
//!   `Indexer::apply_event` and a final `flush`.
//!
//! Both consumers give every event to the same do-nothing backend and drop it, so the
//! difference is the handoff: queueing, bounds, wake-ups, run gathering and the event
//! counters. Each iteration hands over a fresh copy of the same stream (copied outside the
//! clock) and waits until the consumer has taken all of it.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kvidx::{
    Backend, Block, Config, Event, EventData, Indexer, Match, Outcome, TieredMatch, Worker,
    DEFAULT_QUEUE_CAPACITY,
};
use parking_lot::Mutex;

/// Events per iteration.
const EVENTS: usize = 1 << 16;
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

/// A backend that only counts what it is given.
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

/// The minimal ring: `slots.len()` (a power of two) events at most in flight.
struct Ring {
    slots: Box<[Mutex<Option<Event>>]>,
    /// Events taken by the consumer (written by the consumer only).
    head: Position,
    /// Events published by the producer (written by the producer only).
    tail: Position,
    stop: AtomicBool,
}

/// Waits a little: spins first, then yields the core (the machine may have two).
fn backoff(step: &mut u32) {
    if *step < 6 {
        for _ in 0..1u32 << *step {
            std::hint::spin_loop();
        }
    } else {
        std::thread::yield_now();
    }
    *step = (*step + 1).min(10);
}

/// The ring and its consumer thread.
struct RingHandoff {
    ring: Arc<Ring>,
    /// The consumer's head as last read (the producer's cached view).
    seen_head: usize,
    consumer: Option<JoinHandle<()>>,
}

impl RingHandoff {
    fn start(backend: Arc<Counting>) -> Self {
        let ring = Arc::new(Ring {
            slots: (0..DEFAULT_QUEUE_CAPACITY)
                .map(|_| Mutex::new(None))
                .collect(),
            head: Position::default(),
            tail: Position::default(),
            stop: AtomicBool::new(false),
        });
        let shared = Arc::clone(&ring);
        let consumer = std::thread::spawn(move || consume(&shared, &backend));
        Self {
            ring,
            seen_head: 0,
            consumer: Some(consumer),
        }
    }

    fn push(&mut self, event: Event) {
        let ring = &*self.ring;
        let mask = ring.slots.len() - 1;
        let tail = ring.tail.0.load(Ordering::Relaxed);
        let mut step = 0;
        while tail - self.seen_head > mask {
            self.seen_head = ring.head.0.load(Ordering::Acquire);
            if tail - self.seen_head > mask {
                backoff(&mut step);
            }
        }
        *ring.slots[tail & mask].lock() = Some(event);
        ring.tail.0.store(tail + 1, Ordering::Release);
    }

    /// Returns once the consumer has taken every event pushed.
    fn drain(&mut self) {
        let tail = self.ring.tail.0.load(Ordering::Relaxed);
        let mut step = 0;
        while self.ring.head.0.load(Ordering::Acquire) != tail {
            backoff(&mut step);
        }
        self.seen_head = tail;
    }
}

impl Drop for RingHandoff {
    fn drop(&mut self) {
        self.ring.stop.store(true, Ordering::Release);
        if let Some(consumer) = self.consumer.take() {
            consumer.join().expect("the ring's consumer finished");
        }
    }
}

/// The ring's consumer: takes every event published since it last looked, applies each to
/// the backend and drops it, then publishes its new head.
fn consume(ring: &Ring, backend: &Counting) {
    let mask = ring.slots.len() - 1;
    let mut head = 0;
    let mut step = 0;
    loop {
        let tail = ring.tail.0.load(Ordering::Acquire);
        if tail == head {
            if ring.stop.load(Ordering::Acquire) {
                return;
            }
            backoff(&mut step);
            continue;
        }
        step = 0;
        for at in head..tail {
            let event = ring.slots[at & mask]
                .lock()
                .take()
                .expect("a published event");
            backend.apply(event.worker, &event.data);
        }
        head = tail;
        ring.head.0.store(head, Ordering::Release);
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

fn handoff(c: &mut Criterion) {
    let events = stream();
    let mut group = c.benchmark_group("handoff");
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(EVENTS as u64));

    let ring_backend = Arc::new(Counting::default());
    let mut ring = RingHandoff::start(Arc::clone(&ring_backend));
    group.bench_function("spsc_ring", |b| {
        b.iter_custom(|iters| {
            timed(iters, &events, |copy| {
                copy.into_iter().for_each(|event| ring.push(event));
                ring.drain();
            })
        })
    });
    drop(ring);

    let pool = Indexer::with_backend(
        Box::new(Counting::default()),
        Config {
            event_threads: 1,
            ..Config::default()
        },
    )
    .expect("valid config");
    group.bench_function("event_pool", |b| {
        b.iter_custom(|iters| {
            timed(iters, &events, |copy| {
                for event in copy {
                    pool.apply_event(event).expect("the pool is alive");
                }
                pool.flush().expect("the pool is alive");
            })
        })
    });
    group.finish();
    // Both consumers applied every event they were handed.
    assert_eq!(
        ring_backend.0.load(Ordering::Relaxed) % EVENTS as u64,
        0,
        "the ring lost events"
    );
    assert_eq!(pool.stats().events_applied % EVENTS as u64, 0);
}

criterion_group!(benches, handoff);
criterion_main!(benches);
