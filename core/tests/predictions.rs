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
