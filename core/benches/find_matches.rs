//! `find_matches` latency by query depth (16/128/1024/4096 blocks) and workers (1/16/256),
//! for each fast backend (runs, the default; positional; radix). Every worker holds the whole
//! queried chain, so every worker matches at full depth: the most work a query can cause for
//! its size. `find_matches_spread` has 256 workers, registered in an order unrelated to their
//! ids, each holding a prefix of its own length of one 128-block chain: answers of many
//! depths that must be ordered by depth, then worker. `find_matches_under_ingest` asks while
//! another thread applies events without pause: see [`find_matches_under_ingest`].

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use kvidx::{BackendKind, Block, Config, Event, Indexer, Worker};

const DEPTHS: [usize; 4] = [16, 128, 1024, 4096];
/// The backends timed: the default first.
const BACKENDS: [BackendKind; 3] = [
    BackendKind::Runs,
    BackendKind::Positional,
    BackendKind::Radix,
];
const WORKERS: [u64; 3] = [1, 16, 256];

/// An empty synchronous indexer.
fn indexer(backend: BackendKind) -> Indexer {
    Indexer::new(Config {
        backend,
        event_threads: 0,
        ..Config::default()
    })
    .expect("valid config")
}

/// A chain of `depth` blocks: its local hashes and its blocks (with the contract's sequence
/// hashes).
fn chain(depth: usize) -> (Vec<u64>, Vec<Block>) {
    let locals: Vec<u64> = (0..depth as u64)
        .map(|i| i.wrapping_mul(0x9e37_79b9) ^ 0x55)
        .collect();
    let seqs = kvidx::hashing::seq_hashes(&locals);
    let blocks = locals
        .iter()
        .zip(&seqs)
        .map(|(l, s)| Block::new(*l, *s))
        .collect();
    (locals, blocks)
}

/// A synchronous indexer where each of `holders` (a worker, a length) holds that many first
/// blocks of one chain of `depth` blocks, and the chain's local hashes (the query).
fn holding(
    backend: BackendKind,
    depth: usize,
    holders: impl IntoIterator<Item = (Worker, usize)>,
) -> (Indexer, Vec<u64>) {
    let indexer = indexer(backend);
    let (locals, blocks) = chain(depth);
    for (worker, len) in holders {
        indexer
            .apply_event(Event::stored(worker, 0, None, blocks[..len].to_vec()))
            .expect("valid event");
    }
    (indexer, locals)
}

/// A synchronous indexer where `workers` workers hold the same chain of `depth` blocks.
fn loaded(backend: BackendKind, workers: u64, depth: usize) -> (Indexer, Vec<u64>) {
    holding(
        backend,
        depth,
        (0..workers).map(|w| (Worker::new(w, 0), depth)),
    )
}

/// A benchmark group with this file's short timing (`samples` samples, 1 s measured).
fn group<'a>(c: &'a mut Criterion, name: String, samples: usize) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(samples)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1));
    group
}

fn find_matches(c: &mut Criterion) {
    for backend in BACKENDS {
        let mut group = group(c, format!("find_matches/{backend:?}"), 10);
        for workers in WORKERS {
            for depth in DEPTHS {
                let (indexer, query) = loaded(backend, workers, depth);
                let mut out = Vec::new();
                group.throughput(Throughput::Elements(depth as u64));
                group.bench_with_input(
                    BenchmarkId::new(format!("workers{workers}"), depth),
                    &query,
                    |b, q| {
                        b.iter(|| {
                            indexer.find_matches_into(black_box(q), &mut out);
                            black_box(out.len())
                        })
                    },
                );
            }
        }
        group.finish();
    }
}

/// 256 workers with ids in scrambled registration order, worker `w` holding the first
/// `1 + w * 37 % 128` blocks of one 128-block chain.
fn spread(backend: BackendKind) -> (Indexer, Vec<u64>) {
    holding(
        backend,
        128,
        (0..256u64).map(|w| {
            let id = w.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40; // unrelated to the slot order
            (Worker::new(id, 0), 1 + (w as usize * 37) % 128)
        }),
    )
}

fn find_matches_spread(c: &mut Criterion) {
    for backend in BACKENDS {
        let mut group = group(c, format!("find_matches_spread/{backend:?}"), 20);
        let (indexer, query) = spread(backend);
        let mut out = Vec::new();
        group.bench_function("workers256/128", |b| {
            b.iter(|| {
                indexer.find_matches_into(black_box(&query), &mut out);
                black_box(out.len())
            })
        });
        group.finish();
    }
}

/// Workers of [`find_matches_under_ingest`], and how many of them hold the queried chain.
const INGEST_WORKERS: u64 = 256;
const INGEST_HOLDERS: u64 = 48;

/// A lookup while another thread applies events to the same index without pause, as a
/// router asks while its engines publish: 256 workers, 48 of them holding a prefix of one
/// 128-block chain (most the whole chain, every fifth 100 blocks), the query that chain,
/// and one more worker, stored first, holding a chain that leaves the query's after 64
/// blocks (so that the query's path, as most real ones, forks on its way).
/// The other thread, on the other core, makes each worker in turn store one block below its
/// chain and remove it again (two single-block events, as most engine events are); the
/// holders' changes (about a fifth) are changes of workers the lookup finds, which it meets
/// in the index's change log and at those workers' slots. What this measures beyond
/// `find_matches_spread` is what a lookup pays for sharing lines with a busy writer.
fn find_matches_under_ingest(c: &mut Criterion) {
    for backend in BACKENDS {
        let mut group = group(c, format!("find_matches_under_ingest/{backend:?}"), 20);
        let id = |w: u64| w.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40; // unrelated to slots
        let (locals, blocks) = chain(128);
        let indexer = indexer(backend);
        let mut fork = blocks[..64].to_vec();
        fork.extend((64..128u64).map(|b| Block::new(!b, b | 1 << 41)));
        indexer
            .apply_event(Event::stored(Worker::new(1 << 32, 0), 0, None, fork))
            .expect("valid event");
        // Each worker's chain, stored once here; the writer hangs its blocks below the last.
        let held: Vec<Vec<Block>> = (0..INGEST_WORKERS)
            .map(|w| match w {
                w if w % 5 == 0 && w < INGEST_HOLDERS => blocks[..100].to_vec(),
                w if w < INGEST_HOLDERS => blocks.clone(),
                // A chain of its own (its first block differs from the query's).
                w => (0..1 + (w * 7) % 16)
                    .map(|b| Block::new(!(w << 16 | b), w << 16 | b | 1 << 40))
                    .collect(),
            })
            .collect();
        for (w, chain) in (0..INGEST_WORKERS).zip(&held) {
            indexer
                .apply_event(Event::stored(Worker::new(id(w), 0), 0, None, chain.clone()))
                .expect("valid event");
        }
        let stop = AtomicBool::new(false);
        let mut out = Vec::new();
        // Events the writer applied: at least one round, however short the timing (a
        // filtered-out group times nothing).
        let applied = std::thread::scope(|scope| {
            let writer = scope.spawn(|| {
                let mut events = 0u64;
                loop {
                    for (w, chain) in (0..INGEST_WORKERS).zip(&held) {
                        let worker = Worker::new(id(w), 0);
                        let parent = chain.last().expect("a chain").seq_hash;
                        let extra = 1 << 50 | w << 20 | chain.len() as u64;
                        let stored = vec![Block::new(extra ^ 0x5a5a, extra)];
                        indexer
                            .apply_event(Event::stored(worker, events, Some(parent), stored))
                            .expect("valid event");
                        indexer
                            .apply_event(Event::removed(worker, events + 1, vec![extra]))
                            .expect("valid event");
                        events += 2;
                    }
                    if stop.load(Ordering::Relaxed) {
                        return events;
                    }
                }
            });
            group.bench_function("workers256/128", |b| {
                b.iter(|| {
                    indexer.find_matches_into(black_box(&locals), &mut out);
                    black_box(out.len())
                })
            });
            stop.store(true, Ordering::Relaxed);
            writer.join().expect("the writer applies every event")
        });
        group.finish();
        // Every block the writer stored it removed again: the 48 holders and the fork's
        // worker are the answer.
        assert!(applied >= 2 * INGEST_WORKERS);
        indexer.find_matches_into(&locals, &mut out);
        assert_eq!(out.len() as u64, INGEST_HOLDERS + 1);
    }
}

criterion_group!(
    benches,
    find_matches,
    find_matches_spread,
    find_matches_under_ingest
);
criterion_main!(benches);
