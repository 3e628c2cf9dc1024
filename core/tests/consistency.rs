//! Read consistency during writes (docs/contract.md, "Reads during writes"): while one thread
//! applies a random stream of writes (stores, holes, clears, worker removals and re-creations
//! that recycle slots), reader threads query continuously, and every answer is checked
//! against the states each worker passed through during the call:
//! - a worker reported with depth `d` had depth exactly `d` in one of those states;
//! - a worker left out had depth 0 in one of those states;
//! - no worker is reported twice.
//!
//! The writer publishes how many writes are applied; a call that saw `before` at its start and
//! `after` at its end can only have met the states `before..=after + 1` (the next write may
//! be half applied). The states come from the reference model, replayed write by write.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use common::{configs, reference_indexer};
use kvidx::{Block, Event, Indexer, Match, Worker, Write};

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

/// The next random write. Names are unique per store so removals can target any block.
fn random_write(
    rng: &mut Rng,
    queries: &[Vec<u64>],
    next_name: &mut u64,
    held: &mut Vec<(Worker, u64)>,
) -> Write {
    let worker = WORKERS[rng.below(WORKERS.len() as u64) as usize];
    match rng.below(20) {
        0..=8 => {
            // A prefix of a query chain (sometimes continued from a held block's position).
            let chain = &queries[rng.below(2) as usize];
            let len = 1 + rng.below(chain.len() as u64) as usize;
            let blocks: Vec<Block> = chain[..len]
                .iter()
                .map(|&l| {
                    *next_name += 1;
                    held.push((worker, *next_name));
                    Block::new(l, *next_name)
                })
                .collect();
            Write::Event(Event::stored(worker, 0, None, blocks))
        }
        9..=15 => {
            // Holes: a few names this worker may hold.
            let mine: Vec<u64> = held
                .iter()
                .filter(|(w, _)| *w == worker)
                .map(|&(_, n)| n)
                .collect();
            let count = if mine.is_empty() { 0 } else { 1 + rng.below(3) };
            let names = (0..count)
                .map(|_| mine[rng.below(mine.len() as u64) as usize])
                .collect();
            Write::Event(Event::removed(worker, 0, names))
        }
        16 => Write::Event(Event::cleared(worker, 0)),
        17 | 18 => Write::RemoveWorkerDpRank(worker),
        _ => Write::RemoveWorker(worker.worker_id),
    }
}

fn depth_in(answer: &[Match], worker: Worker) -> u32 {
    answer
        .iter()
        .find(|m| m.worker() == worker)
        .map_or(0, |m| m.depth)
}

/// Checks one answer against the reference answers of the states it may have met.
fn check(answer: &[Match], states: &[Vec<Match>], name: &str, q: usize) {
    let mut seen = Vec::new();
    for m in answer {
        assert!(
            !seen.contains(&m.worker()),
            "{name}: query {q}: {m:?} twice in {answer:?}"
        );
        seen.push(m.worker());
    }
    for worker in WORKERS {
        let got = depth_in(answer, worker);
        assert!(
            states.iter().any(|state| depth_in(state, worker) == got),
            "{name}: query {q}: {worker:?} at depth {got}, never its depth in the {} states met: {:?}",
            states.len(),
            states.iter().map(|s| depth_in(s, worker)).collect::<Vec<_>>()
        );
    }
}

fn run(name: &str, indexer: Arc<Indexer>, seed: u64, writes: usize, readers: usize) -> usize {
    let queries = Arc::new(queries());
    let mut rng = Rng(seed);
    let mut next_name = 0u64;
    let mut held = Vec::new();
    let stream: Vec<Write> = (0..writes)
        .map(|_| random_write(&mut rng, &queries, &mut next_name, &mut held))
        .collect();
    // states[k][q]: the reference answer to query q after k writes.
    let reference = reference_indexer();
    let mut states = vec![queries
        .iter()
        .map(|q| reference.find_matches(q))
        .collect::<Vec<_>>()];
    for write in &stream {
        let _ = reference.submit(write.clone());
        states.push(queries.iter().map(|q| reference.find_matches(q)).collect());
    }
    let states = Arc::new(states);
    let applied = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicUsize::new(0));
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
                let mut out = Vec::new();
                let mut i = r;
                while !done.load(Ordering::Acquire) {
                    let q = i % queries.len();
                    i += 1;
                    let before = applied.load(Ordering::SeqCst);
                    indexer.find_matches_into(&queries[q], &mut out);
                    let after = applied.load(Ordering::SeqCst);
                    let met: Vec<Vec<Match>> = states[before..=(after + 1).min(states.len() - 1)]
                        .iter()
                        .map(|s| s[q].clone())
                        .collect();
                    check(&out, &met, &name, q);
                    checked.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let pooled = indexer.config().event_threads > 0;
    for write in stream {
        let _ = indexer.submit(write);
        if pooled {
            indexer.flush().expect("event threads alive");
        }
        applied.fetch_add(1, Ordering::SeqCst);
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
            indexer.find_matches(query),
            states[states.len() - 1][q],
            "{name}: final"
        );
    }
    checked.load(Ordering::Relaxed)
}

/// Writes per configuration: `KVIDX_CONSISTENCY_WRITES` (default 1500).
fn writes() -> usize {
    std::env::var("KVIDX_CONSISTENCY_WRITES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500)
}

#[test]
fn every_answer_during_churn_is_one_each_worker_had() {
    let mut total = 0;
    for (seed, (name, config)) in configs().into_iter().enumerate() {
        let indexer = Arc::new(Indexer::new(config).expect("valid config"));
        let checked = run(&name, indexer, 0xC0FFEE + seed as u64, writes(), 2);
        assert!(checked > 0, "{name}: no answer was checked");
        total += checked;
    }
    eprintln!("{total} answers checked during churn");
}
