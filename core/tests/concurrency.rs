//! Concurrency: readers call `find_matches` from several threads while events are applied;
//! after `flush` the answers are exact; nothing deadlocks (every test runs under a watchdog).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::configs;
use kvidx::reference::ReferenceIndex;
use kvidx::{Backend, Block, Config, Event, Indexer, Match, Worker};

/// Runs `f` on its own thread and fails the test if it does not finish in time.
fn with_watchdog(seconds: u64, f: impl FnOnce() + Send + 'static) {
    let (done_tx, done_rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        f();
        let _ = done_tx.send(());
    });
    match done_rx.recv_timeout(Duration::from_secs(seconds)) {
        Ok(()) => handle.join().expect("test thread"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The closure panicked: surface its panic.
            handle.join().expect("test thread panicked");
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: not done after {seconds}s"),
    }
}

fn locals(template: u64, len: u64) -> Vec<u64> {
    (0..len).map(|p| (template * 3 + p * 11) % 7).collect()
}

/// One round of a worker's events: a chain stored, a hole punched, sometimes re-stored or
/// cleared. Deterministic, so the reference model can replay it.
fn round_events(worker: Worker, round: u64) -> Vec<Event> {
    let mut events = Vec::new();
    let base = worker.worker_id << 32 | u64::from(worker.dp_rank) << 24;
    {
        let template = (worker.worker_id + round) % 3;
        let chain = locals(template, 64);
        let names: Vec<u64> = (0..64).map(|p| base | template << 8 | p).collect();
        let blocks = chain
            .iter()
            .zip(&names)
            .map(|(&l, &n)| Block::new(l, n))
            .collect();
        events.push(Event::stored(worker, round, None, blocks));
        let hole = (round * 13 + worker.worker_id) % 64;
        events.push(Event::removed(worker, round, vec![names[hole as usize]]));
        if round % 3 == 0 && hole > 0 {
            events.push(Event::stored(
                worker,
                round,
                Some(names[hole as usize - 1]),
                vec![Block::new(chain[hole as usize], names[hole as usize])],
            ));
        }
        if round % 7 == 6 {
            events.push(Event::cleared(worker, round));
        }
    }
    events
}

fn sane(matches: &[Match], query_len: usize) {
    for pair in matches.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.depth > b.depth
                || (a.depth == b.depth && (a.worker_id, a.dp_rank) < (b.worker_id, b.dp_rank)),
            "out of order or duplicate: {matches:?}"
        );
    }
    assert!(matches
        .iter()
        .all(|m| m.depth >= 1 && m.depth as usize <= query_len));
}

/// Joins the writers, waits until what they submitted is applied, then stops the readers,
/// each of which must have made at least 100 calls.
fn finish(
    indexer: &Indexer,
    writers: Vec<JoinHandle<()>>,
    stop: &AtomicBool,
    readers: Vec<JoinHandle<u64>>,
) {
    for writer in writers {
        writer.join().unwrap();
    }
    indexer.flush().unwrap();
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        assert!(reader.join().unwrap() >= 100);
    }
}

fn readers_during_writes(config: Config) {
    let indexer = Arc::new(Indexer::new(config).unwrap());
    let workers: Vec<Worker> = (0..6).map(|i| Worker::new(i / 2, (i % 2) as u32)).collect();
    let queries: Vec<Vec<u64>> = (0..3).map(|t| locals(t, 70)).collect();
    let stop = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (indexer, stop, queries) =
                (Arc::clone(&indexer), Arc::clone(&stop), queries.clone());
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) || calls < 100 {
                    let q = &queries[(calls as usize + r) % queries.len()];
                    indexer.find_matches_into(q, &mut out);
                    sane(&out, q.len());
                    calls += 1;
                }
                calls
            })
        })
        .collect();

    // Two writer threads, each owning half of the workers (in synchronous mode they apply
    // concurrently; in pooled mode they queue concurrently).
    let writers: Vec<_> = workers
        .chunks(3)
        .map(|mine| {
            let (indexer, mine) = (Arc::clone(&indexer), mine.to_vec());
            std::thread::spawn(move || {
                for round in 0..40 {
                    for &w in &mine {
                        for event in round_events(w, round) {
                            let _ = indexer.apply_event(event);
                        }
                    }
                }
            })
        })
        .collect();
    finish(&indexer, writers, &stop, readers);

    // Exact after flush: replay the same per-worker streams into the reference model.
    let reference = ReferenceIndex::new();
    for chunk in workers.chunks(3) {
        for round in 0..40 {
            for &w in chunk {
                for event in round_events(w, round) {
                    reference.apply(event.worker, &event.data);
                }
            }
        }
    }
    for q in &queries {
        let mut want = Vec::new();
        reference.find_matches_into(q, &mut want);
        assert_eq!(indexer.find_matches(q), want, "{config:?}");
    }
    assert_eq!(indexer.stats().worker_blocks, reference.worker_blocks());
}

#[test]
fn readers_during_writes_then_exact_after_flush() {
    for (name, config) in configs() {
        eprintln!("{name}");
        with_watchdog(120, move || readers_during_writes(config));
    }
}

#[test]
fn flush_is_a_barrier_under_backpressure() {
    // A queue of 1 per thread and a flood of events: senders block, memory stays bounded,
    // and flush returns only once everything accepted is applied (no sleeps).
    for (name, mut config) in configs().into_iter().filter(|(_, c)| c.event_threads > 0) {
        config.queue_capacity = 1;
        with_watchdog(120, move || {
            let indexer = Indexer::new(config).unwrap();
            let mut total = 0u64;
            for i in 0..2_000u64 {
                let w = Worker::new(i % 5, 0);
                indexer
                    .apply_event(Event::stored(w, i, None, vec![Block::new(i, i)]))
                    .unwrap();
                total += 1;
            }
            indexer.flush().unwrap();
            let stats = indexer.stats();
            assert_eq!(stats.events_applied, total, "{name}");
            assert_eq!(stats.worker_blocks, total, "{name}");
            assert_eq!(stats.workers, 5, "{name}");
        });
    }
}

#[test]
fn batches_larger_than_their_queue_are_applied_whole_under_backpressure() {
    // Several senders, each queueing batches of many times a queue's capacity (several
    // workers, so several queues) to event threads that fall asleep between batches: every
    // event is applied, none twice, and nothing hangs.
    for (name, mut config) in configs().into_iter().filter(|(_, c)| c.event_threads > 0) {
        for capacity in [1, 4] {
            config.queue_capacity = capacity;
            let name = name.clone();
            with_watchdog(120, move || {
                let indexer = Arc::new(Indexer::new(config).unwrap());
                let senders: Vec<_> = (0..3u64)
                    .map(|t| {
                        let indexer = Arc::clone(&indexer);
                        std::thread::spawn(move || {
                            for batch in 0..20u64 {
                                let events = (0..50u64).map(|i| {
                                    let n = (t * 20 + batch) * 50 + i;
                                    let w = Worker::new(t * 10 + i % 5, 0);
                                    Event::stored(w, n, None, vec![Block::new(n, n)])
                                });
                                indexer.apply_events(events).unwrap();
                            }
                        })
                    })
                    .collect();
                for sender in senders {
                    sender.join().unwrap();
                }
                indexer.flush().unwrap();
                let stats = indexer.stats();
                assert_eq!(stats.events_applied, 3 * 20 * 50, "{name}");
                assert_eq!(stats.worker_blocks, 3 * 20 * 50, "{name}");
                assert_eq!(stats.workers, 15, "{name}");
            });
        }
    }
}

#[test]
fn concurrent_flushes_and_removals_do_not_deadlock() {
    for (_, config) in configs() {
        with_watchdog(120, move || {
            let indexer = Arc::new(Indexer::new(config).unwrap());
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let indexer = Arc::clone(&indexer);
                    std::thread::spawn(move || {
                        for i in 0..300u64 {
                            let w = Worker::new(i % 3, (t % 2) as u32);
                            let _ = indexer.apply_event(Event::stored(
                                w,
                                i,
                                None,
                                vec![Block::new(1, i), Block::new(2, i + 1)],
                            ));
                            if i % 17 == 0 {
                                indexer.remove_worker(i % 3).unwrap();
                            }
                            if i % 29 == 0 {
                                indexer.flush().unwrap();
                            }
                            let _ = indexer.find_matches(&[1, 2]);
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
            indexer.flush().unwrap();
            for id in 0..3 {
                indexer.remove_worker(id).unwrap();
            }
            indexer.flush().unwrap();
            let stats = indexer.stats();
            assert_eq!((stats.workers, stats.worker_blocks), (0, 0));
            assert!(indexer.find_matches(&[1, 2]).is_empty());
        });
    }
}

/// Worker `w`'s name for the block at position `p` of the toggling test's query.
fn toggled_name(w: u64, p: usize) -> u64 {
    1_000 * (w + 1) + p as u64
}

/// Worker `w`'s blocks of the toggling test's query `x`, from position `from` on.
fn toggled(x: &[u64], w: u64, from: usize) -> Vec<Block> {
    (from..x.len())
        .map(|p| Block::new(x[p], toggled_name(w, p)))
        .collect()
}

/// Several writers change their own workers at once while readers query: each worker
/// toggles between holding 6 and 12 blocks of the query (its tail removed name by name from
/// the end, then stored again), never anything else between events and never none, so every
/// answer names every worker exactly once, at 6 or 12. Readers start while several changes
/// are in progress and meet changes begun during their search (the change log's paths).
#[test]
fn readers_see_each_of_several_writers_workers_at_a_depth_it_had() {
    const WORKERS: u64 = 6;
    const TOGGLES: u64 = 300;
    for (name, config) in configs() {
        with_watchdog(120, move || {
            let indexer = Arc::new(Indexer::new(config).unwrap());
            let x = locals(7, 12);
            for w in 0..WORKERS {
                let event = Event::stored(Worker::new(w, 0), 0, None, toggled(&x, w, 0));
                indexer.apply_event(event).unwrap();
            }
            indexer.flush().unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    let (indexer, stop, x) = (Arc::clone(&indexer), Arc::clone(&stop), x.clone());
                    std::thread::spawn(move || {
                        let mut out = Vec::new();
                        let mut calls = 0u64;
                        while !stop.load(Ordering::Relaxed) || calls < 100 {
                            indexer.find_matches_into(&x, &mut out);
                            let mut seen: Vec<u64> = out.iter().map(|m| m.worker_id).collect();
                            seen.sort_unstable();
                            assert_eq!(seen, (0..WORKERS).collect::<Vec<_>>(), "{out:?}");
                            assert!(out.iter().all(|m| m.depth == 6 || m.depth == 12), "{out:?}");
                            calls += 1;
                        }
                        calls
                    })
                })
                .collect();
            let writers: Vec<_> = (0..3u64)
                .map(|t| {
                    let (indexer, x) = (Arc::clone(&indexer), x.clone());
                    std::thread::spawn(move || {
                        for toggle in 1..=TOGGLES {
                            for w in [2 * t, 2 * t + 1] {
                                let worker = Worker::new(w, 0);
                                let tail = (6..12).rev().map(|p| toggled_name(w, p)).collect();
                                indexer
                                    .apply_event(Event::removed(worker, toggle, tail))
                                    .unwrap();
                                let parent = Some(toggled_name(w, 5));
                                let again =
                                    Event::stored(worker, toggle, parent, toggled(&x, w, 6));
                                indexer.apply_event(again).unwrap();
                            }
                        }
                    })
                })
                .collect();
            finish(&indexer, writers, &stop, readers);
            let mut got = indexer.find_matches(&x);
            got.sort_by_key(|m| m.worker_id);
            assert!(got.iter().all(|m| m.depth == 12), "{name}: {got:?}");
        });
    }
}
