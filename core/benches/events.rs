//! Cost per block of storing and removing, for each fast backend (synchronous mode, so the
//! figure is the index's own work, not queueing). Throughput is reported per block. The
//! spread removal measures the same with state far larger than the caches, each event on
//! another worker. `remove_per_block_apply_events` hands the same removals over in calls of 64
//! events (`apply_events`, which groups a worker's consecutive events into few changes).

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kvidx::{BackendKind, Block, Config, Event, Indexer, Worker};

const CHAIN: usize = 1024;

fn indexer(backend: BackendKind) -> Indexer {
    Indexer::new(Config {
        backend,
        event_threads: 0,
        ..Config::default()
    })
    .expect("valid config")
}

/// A synchronous indexer where `worker` holds `blocks` (one Stored).
fn holding(backend: BackendKind, worker: Worker, blocks: &[Block]) -> Indexer {
    let idx = indexer(backend);
    idx.apply_event(Event::stored(worker, 0, None, blocks.to_vec()))
        .expect("valid event");
    idx
}

/// Blocks of these local hashes, with the contract's sequence hashes.
fn blocks_of(locals: &[u64]) -> Vec<Block> {
    let seqs = kvidx::hashing::seq_hashes(locals);
    locals
        .iter()
        .zip(seqs)
        .map(|(l, s)| Block::new(*l, s))
        .collect()
}

fn chain() -> Vec<Block> {
    let locals: Vec<u64> = (0..CHAIN as u64)
        .map(|i| i.wrapping_mul(0x2545_f491) ^ 7)
        .collect();
    blocks_of(&locals)
}

fn store_and_remove(c: &mut Criterion) {
    let blocks = chain();
    let worker = Worker::new(1, 0);
    for backend in [BackendKind::Positional, BackendKind::Radix] {
        let mut group = c.benchmark_group(format!("events/{backend:?}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(1))
            .throughput(Throughput::Elements(CHAIN as u64));
        // One Stored per block, each continuing the previous one (as an engine announces a
        // growing sequence).
        group.bench_function("store_per_block", |b| {
            b.iter_batched(
                || indexer(backend),
                |idx| {
                    let mut parent = None;
                    for (i, block) in blocks.iter().enumerate() {
                        idx.apply_event(Event::stored(worker, i as u64, parent, vec![*block]))
                            .expect("valid event");
                        parent = Some(block.seq_hash);
                    }
                    black_box(idx)
                },
                BatchSize::LargeInput,
            )
        });
        // One single-block Removed per block, tail first (as LRU eviction does).
        group.bench_function("remove_per_block", |b| {
            b.iter_batched(
                || holding(backend, worker, &blocks),
                |idx| {
                    for (i, block) in blocks.iter().enumerate().rev() {
                        idx.apply_event(Event::removed(worker, i as u64 + 1, vec![block.seq_hash]))
                            .expect("valid event");
                    }
                    black_box(idx)
                },
                BatchSize::LargeInput,
            )
        });
        // The same removals handed over 64 at a time through `apply_events`, which applies
        // consecutive events of one worker a few per change.
        group.bench_function("remove_per_block_apply_events", |b| {
            b.iter_batched(
                || {
                    let idx = holding(backend, worker, &blocks);
                    // The calls are built outside the timing (the one-by-one loop builds
                    // one event per call inside it, as a caller would).
                    let events: Vec<Event> = blocks
                        .iter()
                        .enumerate()
                        .rev()
                        .map(|(i, block)| {
                            Event::removed(worker, i as u64 + 1, vec![block.seq_hash])
                        })
                        .collect();
                    let calls: Vec<Vec<Event>> = events.chunks(64).map(<[Event]>::to_vec).collect();
                    (idx, calls)
                },
                |(idx, calls)| {
                    for call in calls {
                        idx.apply_events(call).expect("valid events");
                    }
                    black_box(idx)
                },
                BatchSize::LargeInput,
            )
        });
        group.finish();
    }
}

/// Workers and blocks of the spread removal: far more state than the caches hold (about half
/// a million held pairs), as in a fleet where each eviction lands on another worker.
const SPREAD_WORKERS: u64 = 256;
const SPREAD_CHAIN: usize = 2048;

/// One single-block Removed per event, round-robin over 256 workers each holding its own
/// 2,048-block chain, tail first: every removal touches another worker's state, cold.
fn remove_spread(c: &mut Criterion) {
    let chains: Vec<Vec<Block>> = (0..SPREAD_WORKERS)
        .map(|w| {
            let locals: Vec<u64> = (0..SPREAD_CHAIN as u64)
                .map(|i| (w << 32 | i).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 7)
                .collect();
            blocks_of(&locals)
        })
        .collect();
    for backend in [BackendKind::Positional, BackendKind::Radix] {
        let mut group = c.benchmark_group(format!("events_spread/{backend:?}"));
        group
            .sample_size(10)
            .warm_up_time(Duration::from_millis(200))
            .measurement_time(Duration::from_secs(2))
            .throughput(Throughput::Elements(SPREAD_WORKERS * SPREAD_CHAIN as u64));
        group.bench_function("remove_per_block_256_workers", |b| {
            b.iter_batched(
                || {
                    let idx = indexer(backend);
                    for (w, blocks) in chains.iter().enumerate() {
                        idx.apply_event(Event::stored(
                            Worker::new(w as u64, 0),
                            0,
                            None,
                            blocks.clone(),
                        ))
                        .expect("valid event");
                    }
                    idx
                },
                |idx| {
                    for i in (0..SPREAD_CHAIN).rev() {
                        for (w, blocks) in chains.iter().enumerate() {
                            idx.apply_event(Event::removed(
                                Worker::new(w as u64, 0),
                                1,
                                vec![blocks[i].seq_hash],
                            ))
                            .expect("valid event");
                        }
                    }
                    black_box(idx)
                },
                BatchSize::PerIteration,
            )
        });
        group.finish();
    }
}

criterion_group!(benches, store_and_remove, remove_spread);
criterion_main!(benches);
