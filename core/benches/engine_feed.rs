//! The engine-event path for unsalted, adapter-less traffic: an [`EngineFeed`] decoding vLLM
//! batches (one `BlockStored` of 16 blocks with their tokens and one `BlockRemoved` of the
//! worker's previous store, as vLLM 0.33 publishes them: array events, `extra_keys` one nil
//! per block) and applying them, for 64 workers in turn, each with its own batch sequence.
//! `feed_to_sink` hands the converted events to a sink that drops them, so it times the
//! feed's own work (decoding, local hashes, conversion); `feed_to_indexer` applies them to a
//! synchronous indexer, whose state stays bounded (each store replaces the worker's previous
//! one). Then the local hashes of a 4,096-token request at block size 16, as a router
//! computes them per query.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput};
use kvidx::engine::{EngineFeed, EventSink, FeedConfig, Format};
use kvidx::hashing::hash_tokens;
use kvidx::namespace::{hash_request, Namespace};
use kvidx::{Config, Error, Event, Indexer};
use rmpv::Value;

const WORKERS: u64 = 64;
/// Batches per worker before the payloads repeat.
const ROUNDS: u64 = 32;
/// Distinct prompts, shared between workers (as a router's workers share popular prefixes).
const PROMPTS: u64 = 48;
const BLOCKS: u64 = 16;
const BLOCK_SIZE: u64 = 16;
const REQUEST_TOKENS: u32 = 4096;

/// The engine hash of block `block` of prompt `prompt` (the same on every worker, as vLLM's
/// hashes depend on the tokens only).
fn engine_hash(prompt: u64, block: u64) -> u64 {
    let mut x = (prompt * BLOCKS + block + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x.wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

fn hashes(prompt: u64) -> Value {
    Value::Array(
        (0..BLOCKS)
            .map(|b| Value::from(engine_hash(prompt, b)))
            .collect(),
    )
}

/// `["BlockStored", hashes, parent, token_ids, block_size, lora_id, medium, lora_name,
/// extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]`.
fn stored(prompt: u64) -> Value {
    let first = (prompt * BLOCKS * BLOCK_SIZE) as u32;
    let tokens = (0..(BLOCKS * BLOCK_SIZE) as u32).map(|t| Value::from(first + t));
    Value::Array(vec![
        Value::from("BlockStored"),
        hashes(prompt),
        Value::Nil,
        Value::Array(tokens.collect()),
        Value::from(BLOCK_SIZE),
        Value::Nil,
        Value::from("GPU"),
        Value::Nil,
        Value::Array(vec![Value::Nil; BLOCKS as usize]),
        Value::from(0),
        Value::from("full_attention"),
        Value::Nil,
    ])
}

/// `["BlockRemoved", hashes, medium, group_idx]`.
fn removed(prompt: u64) -> Value {
    Value::Array(vec![
        Value::from("BlockRemoved"),
        hashes(prompt),
        Value::from("GPU"),
        Value::from(0),
    ])
}

/// The prompt a worker stores in a round: consecutive rounds differ, workers overlap.
fn prompt_of(worker: u64, round: u64) -> u64 {
    (worker * 7 + round) % PROMPTS
}

/// `(worker_id, payload)` in publishing order: round by round, every worker once per round.
fn batches() -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    for round in 0..ROUNDS {
        for worker in 0..WORKERS {
            let previous = prompt_of(worker, (round + ROUNDS - 1) % ROUNDS);
            let batch = Value::Array(vec![
                Value::F64(1.0),
                Value::Array(vec![stored(prompt_of(worker, round)), removed(previous)]),
                Value::from(0),
            ]);
            let mut payload = Vec::new();
            rmpv::encode::write_value(&mut payload, &batch).expect("encodes");
            out.push((worker, payload));
        }
    }
    out
}

/// Takes the converted events and drops them.
struct DropSink;

impl EventSink for DropSink {
    fn apply_event(&self, event: Event) -> Result<(), Error> {
        black_box(event);
        Ok(())
    }

    fn apply_events(&self, events: Vec<Event>) -> Result<u64, Error> {
        black_box(events);
        Ok(0)
    }
}

/// An [`EngineFeed`] over the batches, applying them in turn, each publisher's sequence in
/// order.
struct FeedRun {
    batches: Vec<(u64, Vec<u8>)>,
    feed: EngineFeed,
    seqs: Vec<u64>,
    next: usize,
}

impl FeedRun {
    fn new() -> Self {
        Self {
            batches: batches(),
            feed: EngineFeed::new(FeedConfig::new(Format::Vllm)),
            seqs: vec![0; WORKERS as usize],
            next: 0,
        }
    }

    /// Applies the next batch; panics unless both events became index events.
    fn step<S: EventSink>(&mut self, sink: &S) {
        let (worker, payload) = &self.batches[self.next];
        self.next = (self.next + 1) % self.batches.len();
        let seq = &mut self.seqs[*worker as usize];
        let report = self
            .feed
            .apply_message(sink, *worker, None, Some(*seq), payload)
            .expect("a valid batch");
        *seq += 1;
        assert!(
            report.events_submitted == 2 && report.events_rejected == 0 && !report.cleared_worker,
            "{report:?}"
        );
    }
}

fn sync_indexer() -> Indexer {
    Indexer::new(Config {
        event_threads: 0,
        ..Config::default()
    })
    .expect("valid config")
}

fn request_tokens() -> Vec<u32> {
    (0..REQUEST_TOKENS)
        .map(|t| t.wrapping_mul(2_654_435_761))
        .collect()
}

fn feed_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("engine_feed");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(BLOCKS));
    let mut run = FeedRun::new();
    group.bench_function("feed_to_sink", |b| b.iter(|| run.step(&DropSink)));
    let (mut run, indexer) = (FeedRun::new(), sync_indexer());
    group.bench_function("feed_to_indexer", |b| b.iter(|| run.step(&indexer)));
    group.finish();
}

fn request_hashes_group(c: &mut Criterion) {
    let tokens = request_tokens();
    let mut group = c.benchmark_group("request_hashes_4096");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(u64::from(REQUEST_TOKENS)));
    group.bench_function("hash_tokens", |b| b.iter(|| hash_tokens_16(&tokens)));
    group.bench_function("hash_request_no_namespace", |b| {
        b.iter(|| hash_request_16(&tokens))
    });
    group.finish();
}

fn hash_tokens_16(tokens: &[u32]) -> Vec<u64> {
    hash_tokens(black_box(tokens), BLOCK_SIZE as usize)
}

fn hash_request_16(tokens: &[u32]) -> Vec<u64> {
    hash_request(
        black_box(tokens),
        BLOCK_SIZE as usize,
        &Namespace::NONE,
        &[],
    )
}

/// Runs one workload `iters` times outside criterion, for counting its instructions
/// (`perf stat`); workload `setup` builds the inputs only, to subtract.
fn fixed(workload: &str, iters: u64) {
    let (mut run, indexer, tokens) = (FeedRun::new(), sync_indexer(), request_tokens());
    for _ in 0..iters {
        match workload {
            "feed_to_sink" => run.step(&DropSink),
            "feed_to_indexer" => run.step(&indexer),
            "hash_tokens" => drop(black_box(hash_tokens_16(&tokens))),
            "hash_request_no_namespace" => drop(black_box(hash_request_16(&tokens))),
            "setup" => {}
            other => panic!("unknown workload {other}"),
        }
    }
}

/// `cargo bench --bench engine_feed`, or with `ENGINE_FEED_FIXED=<workload>:<iterations>`
/// a fixed number of iterations of one workload.
fn main() {
    if let Ok(spec) = std::env::var("ENGINE_FEED_FIXED") {
        let (workload, iters) = spec.split_once(':').expect("<workload>:<iterations>");
        fixed(workload, iters.parse().expect("iterations"));
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    feed_group(&mut c);
    request_hashes_group(&mut c);
    c.final_summary();
}
