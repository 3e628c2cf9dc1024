//! Read consistency during writes (docs/contract.md, "Reads during writes"): while one thread
//! applies a random stream of writes (stores, holes, clears, worker removals and re-creations
//! that recycle slots), reader threads query continuously, and every answer is checked
//! against the states each worker passed through during the call:
//! - a worker reported with depth `d` had depth exactly `d` in one of those states;
//! - a worker left out had depth 0 in one of those states;
//! - no worker is reported twice.
//!
//! A second stream moves blocks between storage tiers (stores on several tiers, copies of a
//! held chain onto another tier, removals from one tier) and its readers ask for tiered
//! answers: each worker's whole tier-depth vector must be one it had.
//!
//! The writer publishes how many writes are applied; a call that saw `before` at its start and
//! `after` at its end can only have met the states `before..=after + k`, where `k` is how
//! many writes the writer hands over in one call (the next call may be half applied). With
//! event threads the writer submits one write and flushes (`k = 1`); synchronously it hands
//! consecutive events over [`EVENTS_PER_CALL`] at a time through `apply_events`, which applies
//! a worker's consecutive events a few per change. The states come from the reference model,
//! replayed write by write.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use common::{configs, reference_indexer};
use kvidx::{Block, Event, Indexer, Tier, Worker, Write};

/// Events per `apply_events` call of the synchronous writer: more than the few that one
/// change of a worker takes, so calls hold several changes.
const EVENTS_PER_CALL: usize = 6;

/// A small deterministic generator (SplitMix64), so a failure can be replayed by its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORKERS: [Worker; 4] = [
    Worker::new(1, 0),
    Worker::new(1, 1),
    Worker::new(2, 0),
    Worker::new(3, 0),
];

/// Query chains: two templates that share a prefix, and their variants.
fn queries() -> Vec<Vec<u64>> {
    let a: Vec<u64> = (0..40).map(|p| p % 5).collect();
    let mut b = a.clone();
    for l in b.iter_mut().skip(17) {
        *l += 10;
    }
    vec![a.clone(), b.clone(), a[..9].to_vec(), b[..25].to_vec()]
}

/// What the writer has stored so far, to aim removals and tier copies at.
#[derive(Default)]
struct Stored {
    /// Every name stored, with its worker.
    names: Vec<(Worker, u64)>,
    /// Every chain stored, with its worker (copies onto another tier reuse it).
    chains: Vec<(Worker, Vec<Block>)>,
}

fn random_tier(rng: &mut Rng) -> Tier {
    Tier::ALL[rng.below(4) as usize]
}

/// The next random write. Names are unique per store so removals can target any block.
/// With `tiered`, stores land on random tiers, held chains are copied onto other tiers, and
/// half the removals take one tier only.
fn random_write(
    rng: &mut Rng,
    queries: &[Vec<u64>],
    next_name: &mut u64,
    stored: &mut Stored,
    tiered: bool,
) -> Write {
    let worker = WORKERS[rng.below(WORKERS.len() as u64) as usize];
    let tier = if tiered {
        random_tier(rng)
    } else {
        Tier::Device
    };
    match rng.below(20) {
        0..=3 if tiered && !stored.chains.is_empty() => {
            // The same blocks (same names) onto another tier: they gain it.
            let (owner, blocks) = &stored.chains[rng.below(stored.chains.len() as u64) as usize];
            Write::Event(Event::stored_on(*owner, 0, None, blocks.clone(), tier))
        }
        0..=8 => {
            // A prefix of a query chain (sometimes continued from a held block's position).
            let chain = &queries[rng.below(2) as usize];
            let len = 1 + rng.below(chain.len() as u64) as usize;
            let blocks: Vec<Block> = chain[..len]
                .iter()
                .map(|&l| {
                    *next_name += 1;
                    stored.names.push((worker, *next_name));
                    Block::new(l, *next_name)
                })
                .collect();
            stored.chains.push((worker, blocks.clone()));
            Write::Event(Event::stored_on(worker, 0, None, blocks, tier))
        }
        9..=15 => {
            // Holes: a few names this worker may hold.
            let mine: Vec<u64> = stored
                .names
                .iter()
                .filter(|(w, _)| *w == worker)
                .map(|&(_, n)| n)
                .collect();
            let count = if mine.is_empty() { 0 } else { 1 + rng.below(3) };
            let names = (0..count)
                .map(|_| mine[rng.below(mine.len() as u64) as usize])
                .collect();
            if tiered && rng.below(2) == 0 {
                Write::Event(Event::removed_from(worker, 0, names, tier))
            } else {
                Write::Event(Event::removed(worker, 0, names))
            }
        }
        16 => Write::Event(Event::cleared(worker, 0)),
        17 | 18 => Write::RemoveWorkerDpRank(worker),
        _ => Write::RemoveWorker(worker.worker_id),
    }
}

/// A worker's part of an answer: its depth, then its tier depths (zeros in plain answers).
type Depths = [u32; 5];

/// An answer as `(worker, depths)` pairs.
type Answer = Vec<(Worker, Depths)>;

fn depth_in(answer: &[(Worker, Depths)], worker: Worker) -> Depths {
    answer
        .iter()
        .find(|(w, _)| *w == worker)
        .map_or([0; 5], |&(_, d)| d)
}

/// Checks one answer against the reference answers of the states it may have met.
fn check(answer: &[(Worker, Depths)], states: &[Answer], name: &str, q: usize) {
    let mut seen = Vec::new();
    for (worker, depths) in answer {
        assert!(
            !seen.contains(worker),
            "{name}: query {q}: {worker:?} {depths:?} twice in {answer:?}"
        );
        seen.push(*worker);
    }
    for worker in WORKERS {
        let got = depth_in(answer, worker);
        assert!(
            states.iter().any(|state| depth_in(state, worker) == got),
            "{name}: query {q}: {worker:?} at depths {got:?}, never its depths in the {} states met: {:?}",
            states.len(),
            states.iter().map(|s| depth_in(s, worker)).collect::<Vec<_>>()
        );
    }
}

/// One query's answer: plain (depths only) or tiered.
fn ask(indexer: &Indexer, query: &[u64], tiered: bool) -> Answer {
    if tiered {
        indexer
            .find_matches_tiered(query)
            .iter()
            .map(|m| {
                let t = m.tier_depths;
                (m.worker(), [m.depth, t[0], t[1], t[2], t[3]])
            })
            .collect()
    } else {
        indexer
            .find_matches(query)
            .iter()
            .map(|m| (m.worker(), [m.depth, 0, 0, 0, 0]))
            .collect()
    }
}

fn run(
    name: &str,
    indexer: Arc<Indexer>,
    seed: u64,
    writes: usize,
    readers: usize,
    tiered: bool,
) -> usize {
    let queries = Arc::new(queries());
    let mut rng = Rng(seed);
    let mut next_name = 0u64;
    let mut stored = Stored::default();
    let stream: Vec<Write> = (0..writes)
        .map(|_| random_write(&mut rng, &queries, &mut next_name, &mut stored, tiered))
        .collect();
    // states[k][q]: the reference answer to query q after k writes.
    let reference = reference_indexer();
    let mut states = vec![queries
        .iter()
        .map(|q| ask(&reference, q, tiered))
        .collect::<Vec<_>>()];
    for write in &stream {
        let _ = reference.submit(write.clone());
        states.push(queries.iter().map(|q| ask(&reference, q, tiered)).collect());
    }
    let states = Arc::new(states);
    let applied = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicUsize::new(0));
    let pooled = indexer.config().event_threads > 0;
    let per_call = if pooled { 1 } else { EVENTS_PER_CALL };
    let handles: Vec<_> = (0..readers)
        .map(|r| {
            let (indexer, queries, states) = (
                Arc::clone(&indexer),
                Arc::clone(&queries),
                Arc::clone(&states),
            );
            let (applied, done, checked) = (
                Arc::clone(&applied),
                Arc::clone(&done),
                Arc::clone(&checked),
            );
            let name = name.to_string();
            std::thread::spawn(move || {
                let mut i = r;
                while !done.load(Ordering::Acquire) {
                    let q = i % queries.len();
                    i += 1;
                    let before = applied.load(Ordering::SeqCst);
                    let out = ask(&indexer, &queries[q], tiered);
                    let after = applied.load(Ordering::SeqCst);
                    let met: Vec<Answer> = states
                        [before..=(after + per_call).min(states.len() - 1)]
                        .iter()
                        .map(|s| s[q].clone())
                        .collect();
                    check(&out, &met, &name, q);
                    checked.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // The readers are running before the first write (on a loaded machine a short stream
    // could otherwise be written before any reader is scheduled, and nothing checked).
    while checked.load(Ordering::Relaxed) < readers {
        std::thread::yield_now();
    }
    let mut stream = stream.into_iter().peekable();
    while let Some(write) = stream.next() {
        match write {
            Write::Event(first) if !pooled => {
                let mut call = vec![first];
                while call.len() < EVENTS_PER_CALL {
                    match stream.next_if(|w| matches!(w, Write::Event(_))) {
                        Some(Write::Event(event)) => call.push(event),
                        _ => break,
                    }
                }
                let n = call.len();
                let _ = indexer.apply_events(call);
                applied.fetch_add(n, Ordering::SeqCst);
            }
            write => {
                let _ = indexer.submit(write);
                if pooled {
                    indexer.flush().expect("event threads alive");
                }
                applied.fetch_add(1, Ordering::SeqCst);
            }
        }
    }
    done.store(true, Ordering::Release);
    for handle in handles {
        handle
            .join()
            .expect("a reader found an inconsistent answer");
    }
    // After the stream, answers are exact.
    for (q, query) in queries.iter().enumerate() {
        assert_eq!(
            ask(&indexer, query, tiered),
            states[states.len() - 1][q],
            "{name}: final"
        );
    }
    checked.load(Ordering::Relaxed)
}

/// A count from the environment variable `var`, or `default`.
fn count_from_env(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes per configuration: `KVIDX_CONSISTENCY_WRITES` (default 1500).
fn writes() -> usize {
    count_from_env("KVIDX_CONSISTENCY_WRITES", 1500)
}

/// Two reader threads that call `ask` until `done` is set, counting each call in `asked` (a
/// reader that finds a fault panics: its panic is reported when it is joined).
fn spawn_readers(
    done: &Arc<AtomicBool>,
    asked: &Arc<AtomicUsize>,
    ask: impl Fn() + Clone + Send + 'static,
) -> Vec<JoinHandle<()>> {
    (0..2)
        .map(|_| {
            let (done, asked, ask) = (Arc::clone(done), Arc::clone(asked), ask.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Acquire) {
                    ask();
                    asked.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect()
}

/// Waits until the readers' counter `count` moves (or a reader has stopped on a fault), so
/// that the writer and the readers interleave.
fn wait_for_a_reader(count: &AtomicUsize, readers: &[JoinHandle<()>]) {
    let before = count.load(Ordering::SeqCst);
    while count.load(Ordering::SeqCst) == before && !readers.iter().any(|r| r.is_finished()) {
        std::thread::yield_now();
    }
}

#[test]
fn every_answer_during_churn_is_one_each_worker_had() {
    let mut total = 0;
    for (seed, (name, config)) in configs().into_iter().enumerate() {
        let indexer = Arc::new(Indexer::new(config).expect("valid config"));
        let checked = run(&name, indexer, 0xC0FFEE + seed as u64, writes(), 2, false);
        assert!(checked > 0, "{name}: no answer was checked");
        total += checked;
    }
    eprintln!("{total} answers checked during churn");
}

#[test]
fn every_tiered_answer_during_tier_churn_is_one_each_worker_had() {
    let mut total = 0;
    for (seed, (name, config)) in configs().into_iter().enumerate() {
        let indexer = Arc::new(Indexer::new(config).expect("valid config"));
        let checked = run(&name, indexer, 0x71E2 + seed as u64, writes(), 2, true);
        assert!(checked > 0, "{name}: no answer was checked");
        total += checked;
    }
    eprintln!("{total} tiered answers checked during churn");
}

/// Rounds of the offload test: `KVIDX_OFFLOAD_ROUNDS` (default 3000).
fn offload_rounds() -> usize {
    count_from_env("KVIDX_OFFLOAD_ROUNDS", 3000)
}

/// A worker whose blocks only ever live on the host: one thread stores its chain there and
/// drops it again (by removal, clear or worker removal) while readers ask for tiered answers.
/// No answer may put any of its blocks on the device, even while a drop is half done (a
/// drop forgets a block's tier before the index lets go of the block). Every 50 rounds the
/// writer waits for a reader to see the stored chain, so the check is never vacuous.
#[test]
fn offloaded_blocks_never_appear_on_the_device_while_dropped() {
    let worker = Worker::new(7, 0);
    let chain: Vec<u64> = (0..9).collect();
    for (name, config) in configs() {
        let indexer = Arc::new(Indexer::new(config).expect("valid config"));
        let done = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicUsize::new(0));
        let asked = Arc::new(AtomicUsize::new(0));
        let readers = spawn_readers(&done, &asked, {
            let (indexer, seen, chain, name) = (
                Arc::clone(&indexer),
                Arc::clone(&seen),
                chain.clone(),
                name.clone(),
            );
            move || {
                for m in indexer.find_matches_tiered(&chain) {
                    assert_eq!(m.worker(), worker, "{name}: a stranger in {m:?}");
                    assert_eq!(m.tier_depths[0], 0, "{name}: on the device: {m:?}");
                    assert!(
                        m.tier_depths[1..].iter().all(|&d| d == m.depth),
                        "{name}: host blocks missing from {m:?}"
                    );
                    seen.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        let mut next_name = 0u64;
        for round in 0..offload_rounds() {
            let blocks: Vec<Block> = chain
                .iter()
                .map(|&l| {
                    next_name += 1;
                    Block::new(l, next_name)
                })
                .collect();
            let names: Vec<u64> = blocks.iter().map(|b| b.seq_hash).collect();
            let _ = indexer.submit(Write::Event(Event::stored_on(
                worker,
                0,
                None,
                blocks,
                Tier::Host,
            )));
            if round % 50 == 0 {
                indexer.flush().expect("event threads alive");
                // Until a reader has seen the chain stored.
                wait_for_a_reader(&seen, &readers);
            }
            let drop = match round % 3 {
                0 => Write::Event(Event::removed(worker, 0, names)),
                1 => Write::Event(Event::cleared(worker, 0)),
                _ => Write::RemoveWorkerDpRank(worker),
            };
            let _ = indexer.submit(drop);
        }
        indexer.flush().expect("event threads alive");
        done.store(true, Ordering::Release);
        for reader in readers {
            reader.join().expect("a reader saw a block on the device");
        }
        assert!(indexer.find_matches(&chain).is_empty(), "{name}: final");
    }
}

/// Batches applied for the offset-batch test: `KVIDX_OFFSET_BATCHES` (default 3000).
fn offset_batches() -> usize {
    count_from_env("KVIDX_OFFSET_BATCHES", 3000)
}

/// A batch at an offset is seen whole or not at all (docs/contract.md, offset batches), even
/// by a lookup that waits for its worker (plain batches may then end their change early).
/// Each batch stores a chain, stores other chains in several more events, and drops the
/// first chain again: between batches the worker holds none of the queried chain, so a
/// lookup that reports the worker at all saw part of a batch. Every 50 batches the writer
/// waits for a reader to finish a lookup, so readers and batches interleave.
#[test]
fn a_batch_at_an_offset_is_never_seen_in_part() {
    let worker = Worker::new(9, 0);
    let chain: Vec<u64> = (100..112).collect();
    for (name, config) in configs() {
        let indexer = Arc::new(Indexer::new(config).expect("valid config"));
        let done = Arc::new(AtomicBool::new(false));
        let asked = Arc::new(AtomicUsize::new(0));
        let readers = spawn_readers(&done, &asked, {
            let (indexer, chain, name) = (Arc::clone(&indexer), chain.clone(), name.clone());
            move || {
                let answer = indexer.find_matches(&chain);
                assert!(answer.is_empty(), "{name}: part of a batch: {answer:?}");
            }
        });
        let mut next_name = 0u64;
        let mut blocks_of = |locals: &[u64]| -> Vec<Block> {
            locals
                .iter()
                .map(|&l| {
                    next_name += 1;
                    Block::new(l, next_name)
                })
                .collect()
        };
        for batch in 0..offset_batches() {
            let stored = blocks_of(&chain);
            let names: Vec<u64> = stored.iter().map(|b| b.seq_hash).collect();
            let mut events = vec![Event::stored(worker, 0, None, stored)];
            let mut others = Vec::new();
            for other in 0..6u64 {
                let blocks = blocks_of(&[1_000 + other, 2_000 + batch as u64]);
                others.extend(blocks.iter().map(|b| b.seq_hash));
                events.push(Event::stored(worker, 0, None, blocks));
            }
            events.push(Event::removed(worker, 0, names));
            events.push(Event::removed(worker, 0, others));
            let offset = batch as u64 + 1;
            indexer
                .apply_batch_at(worker, offset, events)
                .expect("a valid batch");
            if batch % 50 == 0 {
                wait_for_a_reader(&asked, &readers);
            }
        }
        indexer.flush().expect("event threads alive");
        done.store(true, Ordering::Release);
        for reader in readers {
            reader.join().expect("a reader saw part of a batch");
        }
        assert!(
            asked.load(Ordering::SeqCst) > 0,
            "{name}: nothing was asked"
        );
    }
}
