//! Predicted blocks (contract, "Predicted depth"): what they add to a predicted lookup, what
//! settles them (events, expiry, bounds), and that confirmed answers never see them.

mod common;

use std::time::Duration;

use common::configs;
use kvidx::{
    Block, Clock, Config, Event, Indexer, Match, PredictedMatch, PredictionConfig, Worker,
};

const TTL: Duration = Duration::from_millis(100);

fn manual(config: Config) -> Indexer {
    Indexer::new(Config {
        predictions: PredictionConfig {
            clock: Clock::Manual,
            ..config.predictions
        },
        ..config
    })
    .expect("valid config")
}

/// A chain of blocks whose engine names are their local hashes plus 1000.
fn chain(locals: &[u64]) -> Vec<Block> {
    locals.iter().map(|&l| Block::new(l, l + 1000)).collect()
}

fn predicted(worker: Worker, depth: u32, predicted_depth: u32) -> PredictedMatch {
    PredictedMatch {
        worker_id: worker.worker_id,
        dp_rank: worker.dp_rank,
        depth,
        predicted_depth,
    }
}

#[test]
fn a_prediction_extends_the_predicted_depth_and_never_the_confirmed_one() {
    for (name, config) in configs() {
        let index = manual(config);
        let (a, b) = (Worker::new(1, 0), Worker::new(2, 0));
        index
            .apply_event(Event::stored(a, 0, None, chain(&[1, 2])))
            .unwrap();
        index.flush().unwrap();
        let before = index.find_matches(&[1, 2, 3, 4]);
        index.predict(a, &[1, 2, 3, 4], TTL).unwrap();
        index.predict(b, &[1, 2, 3], TTL).unwrap();
        index.predict(b, &[9], TTL).unwrap();
        assert_eq!(index.find_matches(&[1, 2, 3, 4]), before, "{name}");
        assert_eq!(
            before,
            vec![Match {
                worker_id: 1,
                dp_rank: 0,
                depth: 2
            }]
        );
        assert_eq!(
            index.find_matches_predicted(&[1, 2, 3, 4]),
            vec![predicted(a, 2, 4), predicted(b, 0, 3)],
            "{name}"
        );
        // Another query: only the prefix both share counts.
        assert_eq!(
            index.find_matches_predicted(&[1, 5]),
            vec![predicted(a, 1, 1), predicted(b, 0, 1)],
            "{name}"
        );
        assert_eq!(
            index.find_matches_predicted(&[9, 1]),
            vec![predicted(b, 0, 1)]
        );
        assert_eq!(index.find_matches_predicted(&[7]), vec![], "{name}");
    }
}

#[test]
fn predictions_expire_on_the_indexers_clock() {
    let index = manual(Config::default());
    let w = Worker::new(1, 0);
    index
        .predict(w, &[1, 2], Duration::from_millis(50))
        .unwrap();
    index.advance_time(Duration::from_millis(30)).unwrap();
    index
        .predict(w, &[1, 2, 3], Duration::from_millis(50))
        .unwrap();
    assert_eq!(
        index.find_matches_predicted(&[1, 2, 3]),
        vec![predicted(w, 0, 3)]
    );
    index.set_time(Duration::from_millis(79)).unwrap();
    assert_eq!(
        index.find_matches_predicted(&[1, 2, 3]),
        vec![predicted(w, 0, 3)]
    );
    index.set_time(Duration::from_millis(80)).unwrap();
    assert_eq!(index.find_matches_predicted(&[1, 2, 3]), vec![]);
    assert_eq!(index.now(), Duration::from_millis(80));
    assert!(
        index.set_time(Duration::from_millis(10)).is_err(),
        "never back"
    );
    // Expired blocks are dropped by the next prediction.
    index.predict(w, &[5], TTL).unwrap();
    let stats = index.prediction_stats();
    assert_eq!((stats.blocks, stats.expired), (1, 3));
}

#[test]
fn the_monotonic_clock_is_not_set_by_the_caller() {
    let index = Indexer::new(Config::default()).unwrap();
    assert!(index.set_time(Duration::from_secs(1)).is_err());
    assert!(index.advance_time(Duration::from_secs(1)).is_err());
    let w = Worker::new(1, 0);
    index.predict(w, &[1], Duration::from_secs(3600)).unwrap();
    assert_eq!(index.find_matches_predicted(&[1]), vec![predicted(w, 0, 1)]);
}

#[test]
fn a_stored_confirms_and_a_removed_cleared_or_removal_drops() {
    for (name, config) in configs() {
        let index = manual(config);
        let (a, b) = (Worker::new(1, 0), Worker::new(1, 1));
        index.predict(a, &[1, 2, 3, 4], TTL).unwrap();
        index.predict(b, &[1, 2, 3, 4], TTL).unwrap();
        // Stored in two events, the second after a parent: both confirm.
        index
            .apply_event(Event::stored(a, 0, None, chain(&[1, 2])))
            .unwrap();
        index
            .apply_event(Event::stored(a, 0, Some(1002), chain(&[3])))
            .unwrap();
        index.flush().unwrap();
        assert_eq!(index.prediction_stats().confirmed, 3, "{name}");
        assert_eq!(
            index.find_matches_predicted(&[1, 2, 3, 4]),
            vec![predicted(a, 3, 4), predicted(b, 0, 4)],
            "{name}"
        );
        // The confirmed blocks are held, not predicted: removing one shortens both depths.
        index.apply_event(Event::removed(a, 0, vec![1002])).unwrap();
        index.flush().unwrap();
        assert_eq!(
            index.find_matches_predicted(&[1, 2, 3, 4]),
            vec![predicted(b, 0, 4), predicted(a, 1, 1)],
            "{name}"
        );
        // A Removed of a block that was predicted drops the prediction.
        index
            .apply_event(Event::stored(a, 0, Some(1003), chain(&[4])))
            .unwrap();
        index.predict(a, &[1, 2, 3, 4, 5], TTL).unwrap();
        index.apply_event(Event::removed(a, 0, vec![1004])).unwrap();
        index.flush().unwrap();
        assert_eq!(
            index.find_matches_predicted(&[1, 2, 3, 4, 5]),
            vec![predicted(b, 0, 4), predicted(a, 1, 3)],
            "{name}"
        );
        // Cleared drops all of a worker's predictions; removal those of every dp rank.
        index.apply_event(Event::cleared(a, 0)).unwrap();
        index.flush().unwrap();
        assert_eq!(
            index.find_matches_predicted(&[1, 2, 3, 4]),
            vec![predicted(b, 0, 4)],
            "{name}"
        );
        index.predict(a, &[1], TTL).unwrap();
        index.remove_worker(1).unwrap();
        index.flush().unwrap();
        assert_eq!(
            index.find_matches_predicted(&[1, 2, 3, 4]),
            vec![],
            "{name}"
        );
        assert_eq!(index.prediction_stats().blocks, 0, "{name}");
    }
}

fn bounded(max_bytes: usize, worker_capacity: usize) -> Indexer {
    manual(Config {
        event_threads: 0,
        predictions: PredictionConfig {
            max_bytes,
            worker_capacity,
            clock: Clock::Manual,
        },
        ..Config::default()
    })
}

/// The predicted depth of `worker` for a query (0 when it is not in the answer).
fn depth_of(index: &Indexer, worker: Worker, query: &[u64]) -> u32 {
    index
        .find_matches_predicted(query)
        .iter()
        .find(|m| m.worker() == worker)
        .map_or(0, |m| m.predicted_depth)
}

#[test]
fn a_flood_of_ten_million_predicted_blocks_stays_within_the_byte_bound() {
    const MAX_BYTES: usize = 1 << 20;
    let index = bounded(MAX_BYTES, 0);
    let mut most = 0;
    // 1M predictions of 10-block chains over 64 workers: 10M predicted blocks, all distinct.
    for i in 0..1_000_000u64 {
        let worker = Worker::new(i % 64, 0);
        let first = i * 10;
        let locals: Vec<u64> = (first..first + 10).collect();
        index.predict(worker, &locals, TTL).unwrap();
        if i % 997 == 0 {
            let stats = index.prediction_stats();
            assert!(stats.bytes as usize <= MAX_BYTES, "at {i}: {stats:?}");
            most = most.max(stats.bytes);
        }
    }
    let stats = index.prediction_stats();
    assert!(stats.bytes as usize <= MAX_BYTES, "{stats:?}");
    assert!(stats.blocks > 10_000, "the bound is used: {stats:?}");
    assert_eq!(
        stats.dropped_for_bytes + stats.blocks,
        10_000_000,
        "{stats:?}"
    );
    assert!(
        most as usize > MAX_BYTES / 2,
        "grown to near the bound: {most}"
    );
    // The newest chain is whole; the oldest ones are gone.
    let last: Vec<u64> = (9_999_990..10_000_000).collect();
    assert_eq!(depth_of(&index, Worker::new(999_999 % 64, 0), &last), 10);
    assert_eq!(depth_of(&index, Worker::new(0, 0), &[0, 1]), 0);
}

#[test]
fn the_byte_bound_drops_the_least_recently_predicted_first() {
    let index = bounded(16 << 10, 0);
    let w = Worker::new(1, 0);
    let chain_of = |i: u64| [i * 1000, i * 1000 + 1, i * 1000 + 2];
    let mut i = 0;
    while index.prediction_stats().dropped_for_bytes == 0 {
        i += 1;
        index.predict(w, &chain_of(i), TTL).unwrap();
        // Chain 1 is predicted again each time: it stays the most recent.
        index.predict(w, &chain_of(1), TTL).unwrap();
    }
    // The prediction that crossed the bound dropped one block per block it added, from
    // chain 2's deepest; chain 1 (refreshed), chain 3 and the newest are whole.
    let dropped = index.prediction_stats().dropped_for_bytes;
    assert!((1..=3).contains(&dropped), "{dropped}");
    assert_eq!(depth_of(&index, w, &chain_of(2)), 3 - dropped as u32);
    assert_eq!(depth_of(&index, w, &chain_of(1)), 3);
    assert_eq!(depth_of(&index, w, &chain_of(i)), 3);
    assert_eq!(depth_of(&index, w, &chain_of(3)), 3);
}

#[test]
fn a_worker_capacity_drops_its_least_recently_routed_blocks_first() {
    let index = bounded(0, 4);
    let (a, b) = (Worker::new(1, 0), Worker::new(2, 0));
    index.predict(a, &[1, 2, 3], TTL).unwrap();
    index.predict(b, &[1, 2, 3], TTL).unwrap();
    index.predict(a, &[5, 6], TTL).unwrap();
    // Five blocks for four places: the oldest chain's deepest block goes.
    assert_eq!(depth_of(&index, a, &[1, 2, 3]), 2);
    assert_eq!(depth_of(&index, a, &[5, 6]), 2);
    index.predict(a, &[1], TTL).unwrap();
    index.predict(a, &[7, 8], TTL).unwrap();
    // Least recent first: block 2 (after 1 was routed again), then 6.
    assert_eq!(depth_of(&index, a, &[1, 2, 3]), 1);
    assert_eq!(depth_of(&index, a, &[5, 6]), 1);
    assert_eq!(depth_of(&index, a, &[7, 8]), 2);
    assert_eq!(
        depth_of(&index, b, &[1, 2, 3]),
        3,
        "other workers keep theirs"
    );
    let stats = index.prediction_stats();
    assert_eq!((stats.blocks, stats.dropped_for_capacity), (7, 3));
}

#[test]
fn an_event_free_indexer_routes_by_predictions_alone() {
    // No events at all: the predicted lookup is the whole answer, with a TTL and a capacity.
    let index = bounded(0, 3);
    let (a, b) = (Worker::new(1, 0), Worker::new(2, 0));
    index
        .predict(a, &[1, 2, 3], Duration::from_secs(120))
        .unwrap();
    index.advance_time(Duration::from_secs(60)).unwrap();
    index.predict(b, &[1, 2], Duration::from_secs(120)).unwrap();
    assert_eq!(
        index.find_matches_predicted(&[1, 2, 3]),
        vec![predicted(a, 0, 3), predicted(b, 0, 2)]
    );
    assert_eq!(index.find_matches(&[1, 2, 3]), vec![]);
    index.advance_time(Duration::from_secs(60)).unwrap();
    assert_eq!(
        index.find_matches_predicted(&[1, 2, 3]),
        vec![predicted(b, 0, 2)]
    );
}

#[test]
fn snapshots_carry_no_predictions() {
    for (name, config) in configs() {
        let index = manual(config);
        let w = Worker::new(1, 0);
        index
            .apply_event(Event::stored(w, 0, None, chain(&[1, 2])))
            .unwrap();
        index.predict(w, &[1, 2, 3], TTL).unwrap();
        index.predict(Worker::new(2, 0), &[1], TTL).unwrap();
        index.flush().unwrap();
        let mut bytes = Vec::new();
        index.write_snapshot(&mut bytes).unwrap();
        let restored = manual(config);
        restored.restore_snapshot(&bytes[..]).unwrap();
        assert_eq!(
            restored.find_matches_predicted(&[1, 2, 3]),
            vec![predicted(w, 2, 2)],
            "{name}"
        );
        assert_eq!(restored.prediction_stats().blocks, 0, "{name}");
    }
}

#[test]
fn nothing_is_credited_for_an_empty_chain_or_a_zero_ttl() {
    let index = manual(Config::default());
    let w = Worker::new(1, 0);
    index.predict(w, &[], TTL).unwrap();
    index.predict(w, &[1], Duration::ZERO).unwrap();
    assert_eq!(index.find_matches_predicted(&[1]), vec![]);
    assert_eq!(index.find_matches_predicted(&[]), vec![]);
    assert_eq!(index.prediction_stats().blocks, 0);
}

/// A small deterministic generator for the randomized histories below.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn every_backend_settles_predictions_as_the_reference_model_does() {
    for (name, config) in configs() {
        let index = manual(config);
        let model = manual(Config {
            backend: kvidx::BackendKind::Reference,
            event_threads: 0,
            ..config
        });
        let mut rng = Lcg(7);
        let workers = [Worker::new(1, 0), Worker::new(2, 0), Worker::new(2, 1)];
        // Names: a block's name is its chain's local hashes folded, so twins repeat names.
        let mut held: Vec<(Worker, Vec<u64>)> = Vec::new();
        let name_of = |locals: &[u64]| {
            locals
                .iter()
                .fold(17u64, |h, &l| h.wrapping_mul(31).wrapping_add(l + 1))
        };
        for step in 0..1500 {
            let w = workers[rng.below(3) as usize];
            let len = 1 + rng.below(6) as usize;
            let locals: Vec<u64> = (0..len).map(|_| rng.below(2)).collect();
            let event = match rng.below(12) {
                0..=2 => {
                    let blocks: Vec<Block> = (0..len)
                        .map(|i| Block::new(locals[i], name_of(&locals[..=i])))
                        .collect();
                    held.push((w, locals.clone()));
                    Some(Event::stored(w, step, None, blocks))
                }
                3..=4 if !held.is_empty() => {
                    // Extends a held chain after its last block (rejected if that is gone).
                    let (hw, mut hl) = held[rng.below(held.len() as u64) as usize].clone();
                    let parent = name_of(&hl);
                    let mut blocks = Vec::new();
                    for &l in &locals[..len.min(3)] {
                        hl.push(l);
                        blocks.push(Block::new(l, name_of(&hl)));
                    }
                    held.push((hw, hl));
                    Some(Event::stored(hw, step, Some(parent), blocks))
                }
                5..=6 if !held.is_empty() => {
                    let (hw, hl) = held[rng.below(held.len() as u64) as usize].clone();
                    let cut = 1 + rng.below(hl.len() as u64) as usize;
                    Some(Event::removed(hw, step, vec![name_of(&hl[..cut])]))
                }
                7 if rng.below(4) == 0 => Some(Event::cleared(w, step)),
                8 => {
                    index.advance_time(Duration::from_millis(7)).unwrap();
                    model.advance_time(Duration::from_millis(7)).unwrap();
                    None
                }
                _ => {
                    index.flush().unwrap();
                    index.predict(w, &locals, TTL).unwrap();
                    model.predict(w, &locals, TTL).unwrap();
                    None
                }
            };
            if let Some(event) = event {
                index.apply_event(event.clone()).ok();
                model.apply_event(event).ok();
            }
            index.flush().unwrap();
            let query: Vec<u64> = (0..8).map(|_| rng.below(2)).collect();
            assert_eq!(
                index.find_matches_predicted(&query),
                model.find_matches_predicted(&query),
                "{name}: step {step}: {query:?}"
            );
            let (got, want) = (index.prediction_stats(), model.prediction_stats());
            assert_eq!(
                (got.blocks, got.confirmed, got.dropped_by_events),
                (want.blocks, want.confirmed, want.dropped_by_events),
                "{name}: step {step}"
            );
        }
    }
}

#[test]
fn predictions_lookups_and_events_run_concurrently() {
    // Threads predict, look up and apply events at once; every answer keeps the contract's
    // shape and the byte bound holds throughout.
    const MAX_BYTES: usize = 256 << 10;
    let index = std::sync::Arc::new(
        Indexer::new(Config {
            event_threads: 2,
            predictions: PredictionConfig {
                max_bytes: MAX_BYTES,
                worker_capacity: 64,
                clock: Clock::Manual,
            },
            ..Config::default()
        })
        .unwrap(),
    );
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let index = std::sync::Arc::clone(&index);
            std::thread::spawn(move || {
                let mut rng = Lcg(t + 1);
                for step in 0..3000u64 {
                    let w = Worker::new(rng.below(8), 0);
                    let locals: Vec<u64> = (0..1 + rng.below(12)).map(|_| rng.below(4)).collect();
                    match (t, step % 4) {
                        (0, _) => {
                            let blocks = locals
                                .iter()
                                .enumerate()
                                .map(|(i, &l)| Block::new(l, (i as u64) << 8 | l))
                                .collect();
                            index
                                .apply_event(Event::stored(w, step, None, blocks))
                                .unwrap();
                            if step % 7 == 0 {
                                index.apply_event(Event::cleared(w, step)).unwrap();
                            }
                        }
                        (1, _) | (_, 0) => index.predict(w, &locals, TTL).unwrap(),
                        _ => {
                            let answer = index.find_matches_predicted(&locals);
                            for pair in answer.windows(2) {
                                let key = |m: &PredictedMatch| {
                                    (
                                        std::cmp::Reverse(m.predicted_depth),
                                        std::cmp::Reverse(m.depth),
                                        m.worker_id,
                                        m.dp_rank,
                                    )
                                };
                                assert!(key(&pair[0]) < key(&pair[1]), "{answer:?}");
                            }
                            for m in &answer {
                                assert!(m.predicted_depth >= m.depth.max(1), "{m:?}");
                                assert!(m.predicted_depth as usize <= locals.len(), "{m:?}");
                            }
                            if step % 100 == 0 {
                                index.advance_time(Duration::from_millis(1)).unwrap();
                            }
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    index.flush().unwrap();
    let stats = index.prediction_stats();
    assert!(stats.bytes as usize <= MAX_BYTES, "{stats:?}");
}
