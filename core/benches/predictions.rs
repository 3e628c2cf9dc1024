//! What predictions cost. `predict` against one Stored of the same chain, for chains of 16,
//! 128 and 1024 blocks: each iteration adds a new chain for one worker to a synchronous
//! indexer where another worker already holds and is predicted another chain of that length
//! (so first allocations are behind both); and the lookups of an indexer holding no prediction:
//! `find_matches_predicted` beside `find_matches` (16 workers holding a 128-block chain); and a
//! prefix predicted for 256 workers at once (a shared system prompt): predicting it again for
//! one of them, and the predicted lookup of it.

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{
    criterion_group, criterion_main, BatchSize, BenchmarkGroup, BenchmarkId, Criterion, Throughput,
};
use kvidx::{Block, Config, Event, Indexer, Worker};

const LENGTHS: [usize; 3] = [16, 128, 1024];

fn indexer() -> Indexer {
    Indexer::new(Config {
        event_threads: 0,
        ..Config::default()
    })
    .expect("valid config")
}

/// An indexer where worker 2 holds, and is predicted, a chain of `len` blocks.
fn warm(len: usize, seed: u64) -> Indexer {
    let idx = indexer();
    let (locals, blocks) = chain(seed, len);
    let other = Worker::new(2, 0);
    idx.apply_event(Event::stored(other, 0, None, blocks))
        .expect("valid event");
    idx.predict(other, &locals, Duration::from_secs(1))
        .expect("predict");
    idx
}

/// The local hashes and blocks (with the contract's sequence hashes) of chain `seed`.
fn chain(seed: u64, len: usize) -> (Vec<u64>, Vec<Block>) {
    let locals: Vec<u64> = (0..len as u64)
        .map(|i| (seed << 20 ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect();
    let seqs = kvidx::hashing::seq_hashes(&locals);
    let blocks = locals
        .iter()
        .zip(seqs)
        .map(|(l, s)| Block::new(*l, s))
        .collect();
    (locals, blocks)
}

/// A benchmark group with this file's timing (20 samples, 2 s measured).
fn group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2));
    group
}

fn predict_vs_stored(c: &mut Criterion) {
    let worker = Worker::new(1, 0);
    let ttl = Duration::from_secs(1);
    let mut group = group(c, "predict_vs_stored");
    for len in LENGTHS {
        group.throughput(Throughput::Elements(len as u64));
        let mut seed = 0;
        group.bench_function(BenchmarkId::new("stored", len), |b| {
            b.iter_batched(
                || {
                    seed += 2;
                    (warm(len, seed + 1), chain(seed, len).1)
                },
                |(idx, blocks)| {
                    idx.apply_event(Event::stored(worker, 0, None, blocks))
                        .expect("valid event");
                    idx
                },
                BatchSize::SmallInput,
            )
        });
        group.bench_function(BenchmarkId::new("predict", len), |b| {
            b.iter_batched(
                || {
                    seed += 2;
                    (warm(len, seed + 1), chain(seed, len).0)
                },
                |(idx, locals)| {
                    idx.predict(worker, black_box(&locals), ttl)
                        .expect("predict");
                    idx
                },
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

fn lookups_without_predictions(c: &mut Criterion) {
    let idx = indexer();
    let (locals, blocks) = chain(0, 128);
    for w in 0..16 {
        idx.apply_event(Event::stored(Worker::new(w, 0), 0, None, blocks.clone()))
            .expect("valid event");
    }
    let mut group = group(c, "lookups_without_predictions");
    let mut out = Vec::new();
    group.bench_function("find_matches", |b| {
        b.iter(|| {
            idx.find_matches_into(black_box(&locals), &mut out);
            black_box(out.len())
        })
    });
    let mut predicted = Vec::new();
    group.bench_function("find_matches_predicted", |b| {
        b.iter(|| {
            idx.find_matches_predicted_into(black_box(&locals), &mut predicted);
            black_box(predicted.len())
        })
    });
    group.finish();
}

fn shared_prefix(c: &mut Criterion) {
    let idx = indexer();
    let (locals, _) = chain(7, 64);
    let ttl = Duration::from_secs(3600);
    for w in 0..256 {
        idx.predict(Worker::new(w, 0), &locals, ttl)
            .expect("predict");
    }
    let mut group = group(c, "shared_prefix_256_workers");
    group.bench_function("predict_64", |b| {
        b.iter(|| idx.predict(Worker::new(1, 0), black_box(&locals), ttl))
    });
    let mut out = Vec::new();
    group.bench_function("find_matches_predicted_64", |b| {
        b.iter(|| {
            idx.find_matches_predicted_into(black_box(&locals), &mut out);
            black_box(out.len())
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    predict_vs_stored,
    lookups_without_predictions,
    shared_prefix
);
criterion_main!(benches);
