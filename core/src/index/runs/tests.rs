//! The runs backend's own structure: how runs are shared, extended, hung and reclaimed.
//! (Its answers are checked against the reference model by the crate's integration tests.)

use super::*;
use crate::index::worker_blocks::tests::chain;
use crate::index::Backend;
use crate::model::{Event, Match, Worker};

impl RunsIndex {
    /// Runs reachable from the root (the root excluded) and their blocks in all.
    fn shape(&self) -> (usize, usize) {
        let mut stack = vec![Arc::clone(&self.root)];
        let (mut runs, mut blocks) = (0, 0);
        while let Some(run) = stack.pop() {
            let state = run.state.read();
            for child in state.children.values() {
                runs += 1;
                blocks += child.state.read().locals.len();
                stack.push(Arc::clone(child));
            }
        }
        (runs, blocks)
    }
}

fn apply(index: &RunsIndex, event: Event) -> Outcome {
    index.apply(event.worker, &event.data)
}

fn find(index: &RunsIndex, q: &[u64]) -> Vec<Match> {
    let mut out = Vec::new();
    index.find_matches_into(q, &mut out);
    out
}

const W0: Worker = Worker::new(0, 0);
const W1: Worker = Worker::new(1, 0);
const X: [u64; 10] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];

#[test]
fn workers_share_one_run_and_tail_evictions_do_not_split_it() {
    let index = RunsIndex::new();
    apply(&index, chain(W0, &X, 100));
    apply(&index, chain(W1, &X, 200));
    assert_eq!(index.shape(), (1, 10));
    // W1 evicts its tail, leaf first: still one run, W1 holds its first 6 blocks.
    for name in (206..210).rev() {
        apply(&index, Event::removed(W1, 0, vec![name]));
    }
    assert_eq!(index.shape(), (1, 10));
    let got = find(&index, &X);
    assert_eq!(got[0].depth, 10);
    assert_eq!(got[1].depth, 6);
    // A hole in the middle is a cleared bit, not a split.
    apply(&index, Event::removed(W0, 0, vec![103]));
    assert_eq!(index.shape(), (1, 10));
    assert_eq!(find(&index, &X)[0].depth, 6);
}

#[test]
fn a_divergence_hangs_a_run_and_a_continuation_extends_one() {
    let index = RunsIndex::new();
    apply(&index, chain(W0, &X, 100));
    let mut y = X;
    y[4] = 50; // diverges at position 4
    apply(&index, chain(W1, &y, 200));
    assert_eq!(index.shape(), (2, 16));
    // W1 continues its own chain: its run grows, no new run.
    let more = Event::stored(W1, 0, Some(209), vec![Block::new(11, 210)]);
    assert!(matches!(apply(&index, more), Outcome::Applied { .. }));
    assert_eq!(index.shape(), (2, 17));
    let mut q = y.to_vec();
    q.push(11);
    assert_eq!(find(&index, &q)[0].depth, 11);
    assert_eq!(find(&index, &X)[0].depth, 10);
}

#[test]
fn removing_everything_reclaims_every_run() {
    let index = RunsIndex::new();
    apply(&index, chain(W0, &X, 100));
    let mut y = X;
    y[4] = 50;
    apply(&index, chain(W1, &y, 200));
    // W0 goes: the shared run is trimmed to what W1 holds, W1's hung run stays.
    apply(&index, Event::removed(W0, 0, (100..110).rev().collect()));
    assert_eq!(index.shape(), (2, 4 + 6));
    // Scrambled removals of W1's blocks free everything.
    let order = [209u64, 200, 207, 201, 208, 202, 206, 203, 204, 205];
    apply(&index, Event::removed(W1, 0, order.to_vec()));
    assert_eq!(index.shape(), (0, 0));
    apply(&index, chain(W0, &X, 100));
    index.remove_worker(0);
    assert_eq!(index.shape(), (0, 0));
    assert_eq!(index.worker_blocks(), 0);
}

#[test]
fn twins_and_renamed_names_keep_holds_exact() {
    let index = RunsIndex::new();
    apply(&index, chain(W0, &X, 100));
    // Twins: names 300.. for the same prefix; dropping the first names keeps the blocks.
    apply(&index, chain(W0, &X, 300));
    apply(&index, Event::removed(W0, 0, (100..110).collect()));
    assert_eq!(find(&index, &X)[0].depth, 10);
    // Name 305 now means a block under another prefix: position 5 of X is gone.
    apply(
        &index,
        Event::stored(W0, 0, None, vec![Block::new(77, 400), Block::new(9, 305)]),
    );
    assert_eq!(find(&index, &X)[0].depth, 5);
    apply(&index, Event::cleared(W0, 0));
    assert_eq!(index.shape(), (0, 0));
}

#[test]
fn a_query_through_four_runs_finds_each_worker_where_it_stops() {
    // R1 = X; R2 hangs after 3 blocks of R1, R3 after 2 of R2, R4 after 1 of R3. The query
    // follows all four: the first is read under the root's lock, the others through
    // references.
    let index = RunsIndex::new();
    let w = |id| Worker::new(id, 0);
    apply(&index, chain(w(0), &X, 100));
    apply(&index, chain(w(1), &[1, 2, 3, 11, 12, 13], 200));
    apply(&index, chain(w(2), &[1, 2, 3, 11, 12, 21, 22], 300));
    apply(&index, chain(w(3), &[1, 2, 3, 11, 12, 21, 31, 32], 400));
    apply(&index, chain(w(4), &[1, 2], 500));
    assert_eq!(index.shape(), (4, 17));
    let got = find(&index, &[1, 2, 3, 11, 12, 21, 31, 32, 33]);
    let depths: Vec<(u64, u32)> = got.iter().map(|m| (m.worker_id, m.depth)).collect();
    assert_eq!(depths, vec![(3, 8), (2, 6), (1, 5), (0, 3), (4, 2)]);
    // Queries that end in the second and third runs, and one that leaves the first run
    // for no child.
    let depths = |q: &[u64]| -> Vec<(u64, u32)> {
        find(&index, q)
            .iter()
            .map(|m| (m.worker_id, m.depth))
            .collect()
    };
    assert_eq!(
        depths(&[1, 2, 3, 11]),
        vec![(1, 4), (2, 4), (3, 4), (0, 3), (4, 2)]
    );
    assert_eq!(
        depths(&[1, 2, 3, 11, 12, 21]),
        vec![(2, 6), (3, 6), (1, 5), (0, 3), (4, 2)]
    );
    assert_eq!(
        depths(&[1, 2, 3, 99]),
        vec![(0, 3), (1, 3), (2, 3), (3, 3), (4, 2)]
    );
}

#[test]
fn deeply_nested_runs_are_walked_and_dropped_in_a_loop() {
    // Every block of W0's chain is a branching point, so the chain spans one run per block
    // pair; a recursive drop or walk would overflow this thread's small stack.
    const DEPTH: u64 = 20_000;
    let handle = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(|| {
            let index = RunsIndex::new();
            let w = W0;
            let mut query = vec![0u64];
            apply(&index, chain(w, &[0], 1_000_000));
            let mut parent = 1_000_000u64;
            for p in 1..DEPTH {
                // A decoy first, then the block the query follows, hung beside it.
                let decoy = Event::stored(
                    w,
                    0,
                    Some(parent),
                    vec![Block::new(u64::MAX, 5_000_000 + p)],
                );
                apply(&index, decoy);
                let block = Event::stored(w, 0, Some(parent), vec![Block::new(p, 1_000_000 + p)]);
                apply(&index, block);
                parent = 1_000_000 + p;
                query.push(p);
            }
            assert!(index.shape().0 as u64 >= DEPTH - 1);
            assert_eq!(find(&index, &query)[0].depth as u64, DEPTH);
        })
        .unwrap();
    handle.join().unwrap();
}

/// The name worker `w` gives position `p` of variant `v` (`twin` selects a second name).
fn name_of(w: u64, v: u64, p: u64, twin: bool) -> u64 {
    u64::from(twin) << 48 | w << 40 | v << 32 | p
}

/// Variant 1 of the long chain leaves variant 0 past a run's length.
fn local_of(v: u64, p: u64) -> u64 {
    const SPLIT: u64 = run::MAX_RUN as u64 + 400;
    if v == 1 && p >= SPLIT {
        p + 1_000_000
    } else {
        p
    }
}

#[test]
fn chains_longer_than_a_run_match_the_reference_and_survive_snapshots() {
    use crate::test_rng::Lcg;
    use crate::{BackendKind, Config, Indexer};
    let long = 2 * u64::from(run::MAX_RUN) + 500;
    let config = |backend| Config {
        backend,
        event_threads: 0,
        ..Config::default()
    };
    let runs = Indexer::new(config(BackendKind::Runs)).unwrap();
    let model = Indexer::new(config(BackendKind::Reference)).unwrap();
    let queries: Vec<Vec<u64>> = (0..2u64)
        .map(|v| (0..long).map(|p| local_of(v, p)).collect())
        .collect();
    let deepest = std::cell::Cell::new(0);
    let check = |ix: &Indexer, what: &str| {
        for q in &queries {
            for end in [q.len(), 4097, 8193] {
                let want = model.find_matches(&q[..end]);
                assert_eq!(ix.find_matches(&q[..end]), want, "{what}, query of {end}");
                deepest.set(want.iter().map(|m| m.depth).fold(deepest.get(), u32::max));
            }
        }
    };
    let mut rng = Lcg(7);
    for step in 0..80 {
        let r = rng.next() >> 33;
        let (w, v, twin) = (r % 3, r / 3 % 2, r / 6 % 4 == 0);
        let event = match r / 24 % 8 {
            0..=3 => {
                let start = (rng.next() >> 33) % long;
                let start = if r / 200 % 3 == 0 { 0 } else { start };
                let len = 1 + (rng.next() >> 33) % (long - start);
                let parent = (start > 0).then(|| name_of(w, v, start - 1, twin));
                let blocks = (start..start + len)
                    .map(|p| Block::new(local_of(v, p), name_of(w, v, p, twin)))
                    .collect();
                Event::stored(Worker::new(w, 0), 0, parent, blocks)
            }
            4 => {
                // The tail, evicted leaf first.
                let from = (rng.next() >> 33) % long;
                let names = (from..long).rev().map(|p| name_of(w, v, p, twin)).collect();
                Event::removed(Worker::new(w, 0), 0, names)
            }
            5 | 6 => {
                let names = (0..20)
                    .map(|_| name_of(w, v, (rng.next() >> 33) % long, twin))
                    .collect();
                Event::removed(Worker::new(w, 0), 0, names)
            }
            _ if r % 5 == 0 => Event::cleared(Worker::new(w, 0), 0),
            _ => continue,
        };
        assert_eq!(
            runs.apply_event(event.clone()).is_ok(),
            model.apply_event(event).is_ok(),
            "step {step}"
        );
        check(&runs, &format!("step {step}"));
        assert_eq!(runs.stats().worker_blocks, model.stats().worker_blocks);
    }
    assert!(
        deepest.get() > 2 * run::MAX_RUN,
        "chains spanning three runs were matched"
    );
    let mut bytes = Vec::new();
    runs.write_snapshot(&mut bytes).unwrap();
    for backend in [
        BackendKind::Runs,
        BackendKind::Positional,
        BackendKind::Radix,
    ] {
        let copy = Indexer::new(config(backend)).unwrap();
        copy.restore_snapshot(bytes.as_slice()).unwrap();
        check(&copy, &format!("restored into {backend:?}"));
    }
}

/// A query that leaves the first run with few workers still in the race and goes on to a
/// run held by many more (they hold it past a hole): those few are found among the many,
/// and so are all of them while the race is wide.
#[test]
fn a_narrow_race_meets_a_widely_held_run() {
    let index = RunsIndex::new();
    let workers: Vec<Worker> = (0..12).map(|w| Worker::new(w, 0)).collect();
    for (at, &w) in workers.iter().enumerate() {
        let base = 1_000 * (at as u64 + 1);
        apply(&index, chain(w, &X, base));
        let below = Event::stored(w, 0, Some(base + 3), vec![Block::new(50, base + 500)]);
        assert!(matches!(apply(&index, below), Outcome::Applied { .. }));
    }
    let q = [1, 2, 3, 4, 50];
    let got = find(&index, &q);
    assert_eq!(got.len(), 12);
    assert!(got.iter().all(|m| m.depth == 5));
    // All but W0 drop their third block: the race leaves the first run with W0 alone.
    for at in 1..12u64 {
        apply(
            &index,
            Event::removed(workers[at as usize], 0, vec![1_000 * (at + 1) + 2]),
        );
    }
    let got = find(&index, &q);
    assert_eq!(
        got[0],
        Match {
            worker_id: 0,
            dp_rank: 0,
            depth: 5
        }
    );
    assert_eq!(got.len(), 12);
    for (at, m) in got[1..].iter().enumerate() {
        assert_eq!((m.worker_id, m.depth), (at as u64 + 1, 2));
    }
}
