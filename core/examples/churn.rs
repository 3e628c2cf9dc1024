//! The audit's churn recipe, counted: a writer loops `store(worker 1, chain X);
//! store(worker 2, chain Y); remove_worker(1); remove_worker(2)` while readers query X. An
//! answer is wrong if it names worker 2 (which never holds X) or names a worker twice; it is
//! torn if it names worker 1 at a depth other than the full chain (a store seen half applied:
//! never a state worker 1 was in, since one event is one change).
//!
//! The run is sized by work, not time: the writer goes on until the reader has given at least
//! ANSWERS answers and the writer has made at least ANSWERS / 100 rounds, so a slow or loaded
//! machine checks as many answers as a fast one.
//!
//! `cargo run --release -p kvidx --example churn [ANSWERS] [positional|radix|runs] [EVENT_THREADS]`

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kvidx::{BackendKind, Block, Config, Event, Indexer, Worker};

const DEPTH: u64 = 32;

fn chain(worker: Worker, offset: u64) -> Event {
    let blocks = (0..DEPTH)
        .map(|p| Block::new(offset + p, offset * 1000 + p))
        .collect();
    Event::stored(worker, 0, None, blocks)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let min_answers: u64 = args
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let min_rounds = (min_answers / 100).max(1);
    let backend = match args.next().as_deref() {
        Some("radix") => BackendKind::Radix,
        Some("runs") => BackendKind::Runs,
        _ => BackendKind::Positional,
    };
    let event_threads: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let index = Arc::new(
        Indexer::new(Config {
            backend,
            event_threads,
            ..Config::default()
        })
        .expect("valid config"),
    );
    let x: Vec<u64> = (0..DEPTH).map(|p| 1 + p).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (answers, wrong, torn) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let reader = {
        let (index, stop, answers, wrong, torn) = (
            Arc::clone(&index),
            Arc::clone(&stop),
            Arc::clone(&answers),
            Arc::clone(&wrong),
            Arc::clone(&torn),
        );
        std::thread::spawn(move || {
            let mut out = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                index.find_matches_into(&x, &mut out);
                // Worker 1 is the only one that ever holds X: more than one entry is a
                // duplicate or names worker 2.
                let named_wrongly = out.len() > 1 || out.iter().any(|m| m.worker_id == 2);
                let partial = out
                    .iter()
                    .any(|m| m.worker_id == 1 && m.depth != DEPTH as u32);
                answers.fetch_add(1, Ordering::Relaxed);
                if named_wrongly {
                    wrong.fetch_add(1, Ordering::Relaxed);
                }
                if partial {
                    torn.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let (w1, w2) = (Worker::new(1, 0), Worker::new(2, 0));
    let started = Instant::now();
    let mut rounds = 0u64;
    while rounds < min_rounds || answers.load(Ordering::Relaxed) < min_answers {
        index.apply_event(chain(w1, 1)).unwrap();
        index.apply_event(chain(w2, 5000)).unwrap();
        index.remove_worker(1).unwrap();
        index.remove_worker(2).unwrap();
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let seconds = started.elapsed().as_secs_f64();
    let answers = answers.load(Ordering::Relaxed).max(1);
    let (wrong, torn) = (wrong.load(Ordering::Relaxed), torn.load(Ordering::Relaxed));
    let share = |n: u64| 100.0 * n as f64 / answers as f64;
    println!(
        "{backend:?}, {event_threads} event threads, {seconds:.1} s: {rounds} rounds, {answers} \
         answers: {wrong} name a wrong worker ({:.4}%), {torn} torn ({:.4}%)",
        share(wrong),
        share(torn)
    );
}
