//! Shared harness: every backend configuration, run in lockstep with the reference model.
#![allow(dead_code)]

pub mod ops;

use kvidx::{BackendKind, Block, Config, Event, Indexer, Match, Tier, TieredMatch, Worker, Write};

/// The configurations every semantic test runs: each backend, synchronous and pooled, and
/// several jump sizes (1 = no jumps; odd sizes land jumps on odd positions).
pub fn configs() -> Vec<(String, Config)> {
    let mut out = Vec::new();
    for threads in [0usize, 2] {
        for jump in [1usize, 2, 3, 8, 32] {
            out.push((
                format!("positional(jump={jump},threads={threads})"),
                Config {
                    backend: BackendKind::Positional,
                    event_threads: threads,
                    jump_size: jump,
                    queue_capacity: 4,
                    queue_bytes: 0,
                    ..Config::default()
                },
            ));
        }
        out.push((
            format!("radix(threads={threads})"),
            Config {
                backend: BackendKind::Radix,
                event_threads: threads,
                jump_size: 0,
                queue_capacity: 4,
                queue_bytes: 0,
                ..Config::default()
            },
        ));
        out.push((
            format!("runs(threads={threads})"),
            Config {
                backend: BackendKind::Runs,
                event_threads: threads,
                jump_size: 0,
                queue_capacity: 4,
                queue_bytes: 0,
                ..Config::default()
            },
        ));
    }
    out
}

/// Configurations of one backend only.
pub fn configs_of(kind: BackendKind) -> Vec<(String, Config)> {
    configs()
        .into_iter()
        .filter(|(_, c)| c.backend == kind)
        .collect()
}

/// One step of a test scenario: a write, or a query checked against the reference model.
#[derive(Debug, Clone)]
pub enum Op {
    Write(Write),
    Query(Vec<u64>),
}

/// The reference model behind the same write path and counters as every indexer.
pub fn reference_indexer() -> Indexer {
    Indexer::new(Config {
        backend: BackendKind::Reference,
        event_threads: 0,
        ..Config::default()
    })
    .expect("valid config")
}

/// Applies ops to an indexer and to the reference model, comparing every query answer and,
/// after every op, the stats. Panics with the failing step on the first difference.
pub struct Lockstep {
    pub name: String,
    pub indexer: Indexer,
    pub reference: Indexer,
    step: usize,
}

impl Lockstep {
    pub fn new(name: &str, config: Config) -> Self {
        Self {
            name: name.to_string(),
            indexer: Indexer::new(config).expect("valid config"),
            reference: reference_indexer(),
            step: 0,
        }
    }

    pub fn run(&mut self, op: &Op) {
        self.step += 1;
        match op {
            Op::Write(write) => {
                let want = self.reference.submit(write.clone());
                let result = self.indexer.submit(write.clone());
                if self.indexer.config().event_threads == 0 {
                    assert_eq!(
                        result, want,
                        "{}: step {}: outcome of {write:?}",
                        self.name, self.step
                    );
                } else {
                    result.expect("pooled apply accepts well-formed events");
                }
            }
            Op::Query(q) => {
                self.indexer.flush().unwrap();
                let got = self.indexer.find_matches(q);
                let want = self.expected(q);
                assert_eq!(got, want, "{}: step {}: query {q:?}", self.name, self.step);
                let got = self.indexer.find_matches_tiered(q);
                let want = self.reference.find_matches_tiered(q);
                assert_eq!(
                    got, want,
                    "{}: step {}: tiered query {q:?}",
                    self.name, self.step
                );
            }
        }
        self.check_stats();
    }

    pub fn expected(&self, q: &[u64]) -> Vec<Match> {
        self.reference.find_matches(q)
    }

    pub fn check_stats(&mut self) {
        self.indexer.flush().unwrap();
        assert_eq!(
            self.indexer.stats(),
            self.reference.stats(),
            "{}: stats after step {}",
            self.name,
            self.step
        );
    }
}

/// Runs a scenario against every configuration.
pub fn run_everywhere(ops: &[Op]) {
    for (name, config) in configs() {
        let mut lockstep = Lockstep::new(&name, config);
        for op in ops {
            lockstep.run(op);
        }
    }
}

// Small constructors that keep scenarios readable.

pub const W0: Worker = Worker::new(0, 0);
pub const W1: Worker = Worker::new(1, 0);
pub const W0R1: Worker = Worker::new(0, 1);

/// A write of an event.
pub fn event(event: Event) -> Op {
    Op::Write(Write::Event(event))
}

/// The removal of every dp rank of a worker id.
pub fn remove_worker(worker_id: u64) -> Op {
    Op::Write(Write::RemoveWorker(worker_id))
}

/// The removal of one worker.
pub fn remove_worker_dp_rank(worker: Worker) -> Op {
    Op::Write(Write::RemoveWorkerDpRank(worker))
}

/// A Stored event whose blocks are `(local, name)` pairs.
pub fn stored(worker: Worker, parent: Option<u64>, blocks: &[(u64, u64)]) -> Op {
    event(Event::stored(
        worker,
        0,
        parent,
        blocks.iter().map(|&(l, s)| Block::new(l, s)).collect(),
    ))
}

/// A Stored chain whose names are `base + position` and locals `locals[i]`, from `first`.
pub fn chain(worker: Worker, locals: &[u64], first: usize, len: usize, base: u64) -> Op {
    let parent = (first > 0).then(|| base + first as u64 - 1);
    let blocks: Vec<(u64, u64)> = (first..first + len)
        .map(|p| (locals[p], base + p as u64))
        .collect();
    stored(worker, parent, &blocks)
}

pub fn removed(worker: Worker, names: &[u64]) -> Op {
    event(Event::removed(worker, 0, names.to_vec()))
}

pub fn cleared(worker: Worker) -> Op {
    event(Event::cleared(worker, 0))
}

pub fn query(locals: &[u64]) -> Op {
    Op::Query(locals.to_vec())
}

/// A query answer built by hand: `(worker, depth)` pairs in the contract's order.
pub fn answer(pairs: &[(Worker, u32)]) -> Vec<Match> {
    pairs
        .iter()
        .map(|&(w, depth)| Match {
            worker_id: w.worker_id,
            dp_rank: w.dp_rank,
            depth,
        })
        .collect()
}

/// Applies ops to every configuration and checks one query's answer against a hand-written
/// expectation (on top of the lockstep comparison with the reference model).
pub fn expect_everywhere(ops: &[Op], q: &[u64], want: &[Match]) {
    query_everywhere(ops, q, |reference| {
        assert_eq!(
            reference.find_matches(q),
            want,
            "reference model disagrees with the test"
        )
    });
}

/// Runs `ops` then the query `q` in lockstep on every configuration, and hands the reference
/// model to `check` each time.
fn query_everywhere(ops: &[Op], q: &[u64], check: impl Fn(&Indexer)) {
    for (name, config) in configs() {
        let mut lockstep = Lockstep::new(&name, config);
        for op in ops {
            lockstep.run(op);
        }
        lockstep.run(&Op::Query(q.to_vec()));
        check(&lockstep.reference);
    }
}

/// A Stored event on a tier, with blocks as `(local, name)` pairs.
pub fn stored_on(worker: Worker, parent: Option<u64>, blocks: &[(u64, u64)], tier: Tier) -> Op {
    event(Event::stored_on(
        worker,
        0,
        parent,
        blocks.iter().map(|&(l, s)| Block::new(l, s)).collect(),
        tier,
    ))
}

/// A Removed event for one tier.
pub fn removed_from(worker: Worker, names: &[u64], tier: Tier) -> Op {
    event(Event::removed_from(worker, 0, names.to_vec(), tier))
}

/// A tiered answer built by hand: `(worker, [device, host, disk, external])` in the
/// contract's order.
pub fn tiered_answer(rows: &[(Worker, [u32; 4])]) -> Vec<TieredMatch> {
    rows.iter()
        .map(|&(w, tier_depths)| TieredMatch {
            worker_id: w.worker_id,
            dp_rank: w.dp_rank,
            depth: tier_depths[3],
            tier_depths,
        })
        .collect()
}

/// Like [`expect_everywhere`], for a tiered query.
pub fn expect_tiered_everywhere(ops: &[Op], q: &[u64], want: &[TieredMatch]) {
    query_everywhere(ops, q, |reference| {
        assert_eq!(
            reference.find_matches_tiered(q),
            want,
            "reference model disagrees with the test"
        )
    });
}
