//! `find_matches` latency by query depth (16/128/1024/4096 blocks) and workers (1/16/256),
//! for each fast backend. Every worker holds the whole queried chain, so every worker matches
//! at full depth: the most work a query can cause for its size. `find_matches_spread` has 256
//! workers, registered in an order unrelated to their ids, each holding a prefix of its own
//! length of one 128-block chain: answers of many depths that must be ordered by depth, then
//! worker.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use kvidx::{BackendKind, Block, Config, Event, Indexer, Worker};

const DEPTHS: [usize; 4] = [16, 128, 1024, 4096];
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
    for backend in [BackendKind::Positional, BackendKind::Radix] {
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
    for backend in [BackendKind::Positional, BackendKind::Radix] {
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

criterion_group!(benches, find_matches, find_matches_spread);
criterion_main!(benches);
