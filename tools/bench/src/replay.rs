//! Replaying a workload against one index, honestly.
//!
//! - Throughput counts an event only once it is **applied**: the clock stops after the final
//!   flush (the drain) and after every query has been answered.
//! - Closed loop issues operations as fast as the index takes them; open loop issues
//!   operation `i` at `i / rate` seconds (falling behind when the index cannot keep up), the
//!   feeder sleeping (not spinning) between operations.
//! - Events are submitted in workload order from one feeder thread to the index's event
//!   threads; queries are handed to `Q` query threads, each timing every `find_matches`
//!   call (service time) into an HDR histogram, so queries run while events are applied.
//!   With `Q = 0` the feeder answers each query itself, in workload order, timing it the
//!   same way (no query thread is started).
//! - Memory is measured in a separate, untimed pass (see [`measure_memory`]).
//! - A workload with tiered events (a host tier) is also run with `find_matches_tiered`
//!   queries instead ([`Queries::Tiered`]), closed loop, so the cost of tiered lookups is
//!   measured under the same ingest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::bounded;
use hdrhistogram::Histogram;
use kvidx::{Event, Match, TieredMatch};
use serde::{Deserialize, Serialize};

use crate::progress;
use crate::rss;
use crate::target::{Subject, Target};
use crate::workload::{Counts, Op, TimedOp};

/// How operations are issued.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// As fast as possible.
    Closed,
    /// At a fixed offered rate, in operations per second.
    Open(f64),
}

/// Which query the query threads time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queries {
    /// `find_matches`.
    Plain,
    /// `find_matches_tiered` (the depth per storage tier).
    Tiered,
}

/// Thread counts of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads {
    /// The index's event threads.
    pub events: usize,
    /// Query threads; 0: the feeder answers each query itself, in order.
    pub queries: usize,
}

/// The figures of one timed run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Offered rate in ops/s; `None` for closed loop.
    pub offered: Option<f64>,
    /// Events plus queries.
    pub ops: u64,
    /// Blocks stored plus names removed.
    pub block_ops: u64,
    /// Wall time from the first operation to the end of the drain.
    pub seconds: f64,
    /// `find_matches` service time percentiles, nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// Slowest query.
    pub max_ns: u64,
    /// Queries answered.
    pub queries: u64,
    /// Open loop: how late the feeder issued its latest operation, at worst (seconds after
    /// the operation was due); 0 for closed loop.
    #[serde(default)]
    pub feeder_lag_s: f64,
}

impl RunResult {
    /// Achieved operations per second (drain included).
    pub fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.seconds
    }

    /// Achieved block operations per second (drain included).
    pub fn block_ops_per_s(&self) -> f64 {
        self.block_ops as f64 / self.seconds
    }
}

/// The figures of the memory pass.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryResult {
    /// Resident bytes added by building the index from the whole workload.
    pub index_bytes: u64,
    /// (worker, block) pairs held at the end.
    pub worker_blocks: u64,
    /// Stored events the index rejected (0 for a valid workload).
    pub rejected: u64,
    /// Removed names the index did not hold (0 for a valid workload).
    pub unknown_removals: u64,
}

impl MemoryResult {
    /// Resident bytes per held (worker, block).
    pub fn bytes_per_block(&self) -> f64 {
        if self.worker_blocks == 0 {
            0.0
        } else {
            self.index_bytes as f64 / self.worker_blocks as f64
        }
    }
}

/// Builds the index from every event, cloning each just before it is submitted (so freed
/// event buffers are not mistaken for index memory), and reports the resident-memory delta.
pub fn measure_memory(ops: &[TimedOp], subject: Subject, threads: Threads) -> MemoryResult {
    let before = rss::current();
    let target = subject.build(threads.events);
    for op in ops {
        if let Op::Event(e) = &op.op {
            target.submit(e.clone());
        }
    }
    target.flush();
    let after = rss::current();
    let (rejected, unknown_removals) = target.anomalies();
    MemoryResult {
        index_bytes: after.saturating_sub(before),
        worker_blocks: target.worker_blocks(),
        rejected,
        unknown_removals,
    }
}

/// An operation ready to issue (events owned, so the timed loop does not copy them).
enum Ready {
    Event(Event),
    Match(Vec<u64>),
}

fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Waits until `due` after `start` by sleeping, never spinning: on a machine with few cores
/// a spinning feeder would take a core from the index it measures. Linux sleeps last at
/// least ~50 us, so at high rates the operations due meanwhile go out back to back on waking:
/// the offered rate holds on average, in bursts of at most a sleep's length. Returns how late
/// the feeder already was (zero when it had to wait).
fn wait_until(start: Instant, due: Duration) -> Duration {
    let now = start.elapsed();
    if due > now {
        std::thread::sleep(due - now);
    }
    now.saturating_sub(due)
}

/// Answers queries one at a time, timing each call into a histogram (a query thread's, or
/// the feeder's with no query thread).
struct Answerer {
    queries: Queries,
    plain: Vec<Match>,
    tiered: Vec<TieredMatch>,
    hist: Histogram<u64>,
}

impl Answerer {
    fn new(queries: Queries) -> Self {
        Self {
            queries,
            plain: Vec::new(),
            tiered: Vec::new(),
            hist: new_histogram(),
        }
    }

    /// Answers one query with the query kind of this run, timing the call.
    fn answer(&mut self, target: &dyn Target, query: &[u64]) {
        let t0 = match self.queries {
            Queries::Plain => {
                let t0 = Instant::now();
                target.find_matches_into(query, &mut self.plain);
                t0
            }
            Queries::Tiered => {
                let t0 = Instant::now();
                target.find_matches_tiered_into(query, &mut self.tiered);
                t0
            }
        };
        let ns = t0.elapsed().as_nanos() as u64;
        self.hist.record(ns.max(1)).expect("in histogram range");
    }
}

/// A query thread: answers every query it receives with `queries`, timing each call.
fn answer_queries(
    rx: crossbeam_channel::Receiver<Vec<u64>>,
    target: &dyn Target,
    queries: Queries,
) -> Histogram<u64> {
    let mut answerer = Answerer::new(queries);
    for query in rx {
        answerer.answer(target, &query);
    }
    answerer.hist
}

/// One timed run of a workload against a fresh index, its queries answered by `queries`.
pub fn run(
    ops: &[TimedOp],
    subject: Subject,
    threads: Threads,
    load: Load,
    queries: Queries,
) -> RunResult {
    let target: Arc<dyn Target> = Arc::from(subject.build(threads.events));
    run_on(ops, target, subject.name(), threads.queries, load, queries)
}

/// One timed run of a workload against `target` (fresh), named `name` on the progress bar,
/// with `query_threads` query threads (0: the feeder answers).
fn run_on(
    ops: &[TimedOp],
    target: Arc<dyn Target>,
    name: &str,
    query_threads: usize,
    load: Load,
    queries: Queries,
) -> RunResult {
    let counts = Counts::of(ops);
    let ready: Vec<Ready> = ops
        .iter()
        .map(|op| match &op.op {
            Op::Event(e) => Ready::Event(e.clone()),
            Op::Match(q) => Ready::Match(q.clone()),
        })
        .collect();
    let (qtx, qrx) = bounded::<Vec<u64>>(1024);
    let mut feeder_answers = (query_threads == 0).then(|| Answerer::new(queries));
    let workers: Vec<_> = (0..query_threads)
        .map(|_| {
            let rx = qrx.clone();
            let target = Arc::clone(&target);
            std::thread::spawn(move || answer_queries(rx, target.as_ref(), queries))
        })
        .collect();
    drop(qrx);
    let label = match (load, queries) {
        (Load::Closed, Queries::Plain) => format!("{name} closed"),
        (Load::Closed, Queries::Tiered) => format!("{name} closed, tiered"),
        (Load::Open(r), _) => format!("{name} @{r:.0}/s"),
    };
    let bar = progress::bar(ready.len() as u64, &label);
    let mut lag = Duration::ZERO;
    let start = Instant::now();
    for (i, op) in ready.into_iter().enumerate() {
        if let Load::Open(rate) = load {
            lag = lag.max(wait_until(start, Duration::from_secs_f64(i as f64 / rate)));
        }
        match op {
            Ready::Event(e) => target.submit(e),
            Ready::Match(q) => match feeder_answers.as_mut() {
                Some(answerer) => answerer.answer(target.as_ref(), &q),
                None => qtx.send(q).expect("query threads alive"),
            },
        }
        if i % 4096 == 0 {
            bar.set_position(i as u64);
        }
    }
    target.flush();
    drop(qtx);
    let mut hist = feeder_answers.map_or_else(new_histogram, |answerer| answerer.hist);
    for w in workers {
        hist.add(w.join().expect("query thread finished"))
            .expect("same histogram bounds");
    }
    let seconds = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    RunResult {
        offered: match load {
            Load::Closed => None,
            Load::Open(r) => Some(r),
        },
        ops: counts.ops(),
        block_ops: counts.block_ops,
        seconds,
        p50_ns: hist.value_at_quantile(0.5),
        p99_ns: hist.value_at_quantile(0.99),
        p999_ns: hist.value_at_quantile(0.999),
        max_ns: hist.max(),
        queries: hist.len(),
        feeder_lag_s: lag.as_secs_f64(),
    }
}

/// Everything measured for one index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubjectReport {
    /// The index's report name.
    pub name: String,
    /// The memory pass.
    pub memory: MemoryResult,
    /// Peak resident memory of the process that measured this index (workload included).
    pub peak_rss: u64,
    /// The closed-loop run.
    pub closed: RunResult,
    /// Open-loop runs, by increasing offered rate.
    pub open: Vec<RunResult>,
    /// The closed-loop run with `find_matches_tiered` queries (the median of as many runs as
    /// the plain closed loop): only for a workload with tiered events, on kvidx's indexes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tiered: Option<RunResult>,
    /// Which workload this is, when a run compares two (`"single-tier"`, `"host tier"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
}

#[cfg(test)]
impl SubjectReport {
    /// A report of `name` with these runs and nothing else (no memory figures, no tiers, no
    /// workload label), for tests of what reads reports.
    pub fn of_runs(name: &str, closed: RunResult, open: Vec<RunResult>) -> Self {
        SubjectReport {
            name: name.to_string(),
            memory: MemoryResult {
                index_bytes: 0,
                worker_blocks: 0,
                rejected: 0,
                unknown_removals: 0,
            },
            peak_rss: 0,
            closed,
            open,
            tiered: None,
            workload: None,
        }
    }
}

/// What to run for each index besides the memory pass.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Open-loop offered rates as fractions of the index's closed-loop rate.
    pub fractions: Vec<f64>,
    /// Open-loop offered rates in ops/s.
    pub rates: Vec<f64>,
    /// Closed-loop runs; the median by throughput is reported.
    pub repeat: usize,
}

/// `repeat` closed-loop runs; the median by throughput.
fn median_closed(
    ops: &[TimedOp],
    subject: Subject,
    threads: Threads,
    repeat: usize,
    queries: Queries,
) -> RunResult {
    let mut closed: Vec<RunResult> = (0..repeat.max(1))
        .map(|_| run(ops, subject, threads, Load::Closed, queries))
        .collect();
    closed.sort_by(|a, b| a.ops_per_s().total_cmp(&b.ops_per_s()));
    closed[closed.len() / 2]
}

/// Measures one index: memory pass, closed loop (`plan.repeat` times, keeping the median
/// run), then, for a workload with tiered events on an index that answers tiered queries,
/// the closed loop again with `find_matches_tiered` queries, then open loop at each
/// fraction of the plain closed-loop rate and at each absolute rate.
pub fn measure(ops: &[TimedOp], subject: Subject, threads: Threads, plan: &Plan) -> SubjectReport {
    let memory = measure_memory(ops, subject, threads);
    let closed = median_closed(ops, subject, threads, plan.repeat, Queries::Plain);
    let tiered = (Counts::of(ops).tiered > 0 && subject.answers_tiers())
        .then(|| median_closed(ops, subject, threads, plan.repeat, Queries::Tiered));
    let mut offered: Vec<f64> = plan
        .fractions
        .iter()
        .map(|f| f * closed.ops_per_s())
        .chain(plan.rates.iter().copied())
        .filter(|r| *r > 0.0 && r.is_finite())
        .collect();
    offered.sort_by(f64::total_cmp);
    let open = offered
        .into_iter()
        .map(|r| run(ops, subject, threads, Load::Open(r), Queries::Plain))
        .collect();
    SubjectReport {
        name: subject.name().to_string(),
        memory,
        peak_rss: rss::peak(),
        closed,
        open,
        tiered,
        workload: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvidx::{Block, Worker};

    /// Two workers storing chains, one eviction each, and a query after each event.
    fn tiny() -> Vec<TimedOp> {
        let mut ops = Vec::new();
        for w in 0..2u64 {
            let worker = Worker::new(w, 0);
            let blocks = vec![
                Block::new(1, 11),
                Block::new(2, 12),
                Block::new(3 + w, 13 + w),
            ];
            ops.push(Op::Event(Event::stored(worker, 0, None, blocks)));
            ops.push(Op::Match(vec![1, 2, 3]));
            ops.push(Op::Event(Event::removed(worker, 1, vec![13 + w])));
            ops.push(Op::Match(vec![1, 2, 3]));
        }
        ops.into_iter().map(|op| TimedOp { t: 0, op }).collect()
    }

    const ONE_EACH: Threads = Threads {
        events: 1,
        queries: 1,
    };

    #[test]
    fn closed_loop_counts_every_operation_and_query() {
        for subject in [
            Subject::Positional,
            Subject::Radix,
            Subject::Runs,
            Subject::Baseline,
        ] {
            let r = run(&tiny(), subject, ONE_EACH, Load::Closed, Queries::Plain);
            assert_eq!(
                (r.ops, r.block_ops, r.queries),
                (8, 8, 4),
                "{}",
                subject.name()
            );
            assert!(r.seconds > 0.0 && r.p50_ns <= r.p99_ns && r.p99_ns <= r.max_ns);
        }
    }

    /// An index that notes which thread answered each query.
    struct AnsweredOn {
        index: Box<dyn Target>,
        threads: parking_lot::Mutex<Vec<std::thread::ThreadId>>,
    }

    impl Target for AnsweredOn {
        fn submit(&self, event: Event) {
            self.index.submit(event);
        }
        fn flush(&self) {
            self.index.flush();
        }
        fn find_matches_into(&self, local_hashes: &[u64], out: &mut Vec<Match>) {
            self.threads.lock().push(std::thread::current().id());
            self.index.find_matches_into(local_hashes, out);
        }
        fn worker_blocks(&self) -> u64 {
            self.index.worker_blocks()
        }
        fn anomalies(&self) -> (u64, u64) {
            self.index.anomalies()
        }
    }

    #[test]
    fn with_no_query_thread_the_feeder_answers() {
        let feeder = std::thread::current().id();
        for query_threads in [0, 1, 2] {
            let target = Arc::new(AnsweredOn {
                index: Subject::Positional.build(1),
                threads: parking_lot::Mutex::new(Vec::new()),
            });
            let r = run_on(
                &tiny(),
                Arc::clone(&target) as Arc<dyn Target>,
                "answered-on",
                query_threads,
                Load::Closed,
                Queries::Plain,
            );
            assert_eq!((r.ops, r.queries), (8, 4), "{query_threads} query threads");
            let threads = target.threads.lock();
            assert_eq!(threads.len(), 4);
            let on_feeder = threads.iter().filter(|&&t| t == feeder).count();
            let expected = if query_threads == 0 { 4 } else { 0 };
            assert_eq!(on_feeder, expected, "{query_threads} query threads");
        }
    }

    #[test]
    fn open_loop_keeps_the_offered_pace() {
        // 8 operations at 200/s: the last is issued 35 ms after the first.
        let r = run(
            &tiny(),
            Subject::Radix,
            ONE_EACH,
            Load::Open(200.0),
            Queries::Plain,
        );
        assert!(r.seconds >= 0.035, "took {} s", r.seconds);
        assert_eq!(r.offered, Some(200.0));
        let closed = run(
            &tiny(),
            Subject::Radix,
            ONE_EACH,
            Load::Closed,
            Queries::Plain,
        );
        assert_eq!(closed.feeder_lag_s, 0.0, "closed loop has no schedule");
    }

    #[test]
    fn memory_pass_sees_the_final_state() {
        let m = measure_memory(&tiny(), Subject::Positional, ONE_EACH);
        assert_eq!((m.worker_blocks, m.rejected, m.unknown_removals), (4, 0, 0));
        let report = measure(
            &tiny(),
            Subject::Baseline,
            Threads {
                events: 2,
                queries: 2,
            },
            &Plan {
                fractions: vec![0.5],
                rates: vec![1000.0],
                repeat: 3,
            },
        );
        assert_eq!(report.memory.worker_blocks, 4);
        assert_eq!(report.open.len(), 2);
        assert!(report.open[0].offered <= report.open[1].offered);
        assert!(report.peak_rss > 0);
    }

    /// One worker's chain, a query, its tail moved to host memory, the query again.
    fn tiered() -> Vec<TimedOp> {
        let w = Worker::new(0, 0);
        let blocks = vec![Block::new(1, 11), Block::new(2, 12)];
        [
            Op::Event(Event::stored(w, 0, None, blocks.clone())),
            Op::Match(vec![1, 2]),
            Op::Event(Event::stored_on(
                w,
                1,
                Some(11),
                vec![blocks[1]],
                kvidx::Tier::Host,
            )),
            Op::Event(Event::removed_from(w, 2, vec![12], kvidx::Tier::Device)),
            Op::Match(vec![1, 2]),
        ]
        .into_iter()
        .map(|op| TimedOp { t: 0, op })
        .collect()
    }

    #[test]
    fn tiered_workloads_also_time_tiered_queries() {
        let plan = Plan {
            fractions: vec![],
            rates: vec![],
            repeat: 1,
        };
        for subject in [Subject::Positional, Subject::Radix, Subject::Baseline] {
            let r = measure(&tiered(), subject, ONE_EACH, &plan);
            let t = r.tiered.expect("a tiered run");
            assert_eq!((t.ops, t.queries, t.offered), (5, 2, None));
            assert_eq!(r.closed.queries, 2);
            assert!(r.open.is_empty() && r.workload.is_none());
        }
        let r = run(
            &tiered(),
            Subject::Positional,
            ONE_EACH,
            Load::Closed,
            Queries::Tiered,
        );
        assert!(r.p50_ns <= r.max_ns);
        // No tiered events: no tiered run.
        assert!(measure(&tiny(), Subject::Radix, ONE_EACH, &plan)
            .tiered
            .is_none());
    }
}
