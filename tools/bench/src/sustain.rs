//! Sustained rate: the highest offered block-op rate an index keeps up with.
//!
//! A probe replays the whole workload in open loop at one offered rate, in a fresh process
//! (`kvidx-bench probe`), against a fresh index. The index *sustains* the rate when the run
//! achieved at least [`ACHIEVED_SHARE`] of it (operations over the time to the end of the
//! drain) and the feeder stayed on schedule: it never issued an operation more than
//! [`LAG_SHARE`] of the run's scheduled length after the operation was due (an index that
//! blocks its feeder through backpressure falls behind). The search starts at the
//! closed-loop rate (itself a probe) and doubles or halves the offered rate until one probe
//! passes and one fails, then bisects (geometrically) between the highest sustained rate and
//! the lowest failing one above it until they are within the tolerance. See docs/bench.md.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::cli::{ProbeArgs, SustainArgs};
use crate::jobs::{out_dir_of, phase, repo_dir, run_child, WorkloadInfo};
use crate::meta::{load_average, RunMeta};
use crate::replay::{self, Load, Queries, RunResult};
use crate::report::{self, rate};
use crate::target::Subject;
use crate::workload::{read_workload, Counts};

/// Share of the offered rate a probe must achieve for the rate to count as sustained.
pub const ACHIEVED_SHARE: f64 = 0.99;

/// How late the feeder may issue an operation, as a share of the run's scheduled length
/// (the time at which its last operation is due), for the rate to count as sustained.
pub const LAG_SHARE: f64 = 0.01;

/// One open-loop probe: what was offered, what was achieved, and the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Offered block operations per second.
    pub offered_block_ops_per_s: f64,
    /// Offered operations (events and queries) per second.
    pub offered_ops_per_s: f64,
    /// Achieved block operations per second (drain included).
    pub achieved_block_ops_per_s: f64,
    /// Achieved operations per second (drain included).
    pub achieved_ops_per_s: f64,
    /// When the last operation was due, seconds after the first.
    pub scheduled_s: f64,
    /// How late the feeder issued an operation, at worst, in seconds.
    pub feeder_lag_s: f64,
    /// Whether the index sustained the offered rate.
    pub sustained: bool,
}

impl Probe {
    /// The verdict on an open-loop run (`run.offered` is set).
    pub fn of(run: &RunResult) -> Self {
        let offered = run.offered.expect("an open-loop run");
        let scheduled_s = run.ops.saturating_sub(1) as f64 / offered;
        let achieved = run.ops_per_s();
        Probe {
            offered_block_ops_per_s: offered * run.block_ops as f64 / run.ops as f64,
            offered_ops_per_s: offered,
            achieved_block_ops_per_s: run.block_ops_per_s(),
            achieved_ops_per_s: achieved,
            scheduled_s,
            feeder_lag_s: run.feeder_lag_s,
            sustained: achieved >= ACHIEVED_SHARE * offered
                && run.feeder_lag_s <= LAG_SHARE * scheduled_s,
        }
    }
}

/// Where a search ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Search {
    /// Every probe, in the order run.
    pub probes: Vec<Probe>,
    /// The highest offered block-op rate sustained; `None` if no probe passed.
    pub sustained_block_ops_per_s: Option<f64>,
    /// The lowest offered block-op rate above it that was not; `None` if none failed.
    pub failed_block_ops_per_s: Option<f64>,
    /// Whether the two are within the tolerance (else the probes ran out first).
    pub bracketed: bool,
}

/// The highest sustained offered rate among `probes`, and the lowest failing one above it.
fn bracket(probes: &[Probe]) -> (Option<f64>, Option<f64>) {
    let sustained = probes
        .iter()
        .filter(|p| p.sustained)
        .map(|p| p.offered_block_ops_per_s)
        .max_by(f64::total_cmp);
    let failed = probes
        .iter()
        .filter(|p| !p.sustained && sustained.map_or(true, |s| p.offered_block_ops_per_s > s))
        .map(|p| p.offered_block_ops_per_s)
        .min_by(f64::total_cmp);
    (sustained, failed)
}

/// Searches for the highest offered block-op rate `probe` sustains, starting at `start`
/// (block ops/s, > 0): doubling while every probe passes, halving while every probe fails,
/// then bisecting geometrically until the lowest failing rate is at most `1 + tolerance`
/// times the highest sustained one, or `max_probes` probes have run. A probe that cannot
/// run ends the search with its error.
pub fn search<E>(
    start: f64,
    tolerance: f64,
    max_probes: usize,
    mut probe: impl FnMut(f64) -> Result<Probe, E>,
) -> Result<Search, E> {
    let mut probes = Vec::new();
    let mut offered = start;
    let (mut lo, mut hi) = (None, None);
    while probes.len() < max_probes {
        probes.push(probe(offered)?);
        (lo, hi) = bracket(&probes);
        offered = match (lo, hi) {
            (Some(l), Some(h)) if h <= l * (1.0 + tolerance) => break,
            (Some(l), Some(h)) => (l * h).sqrt(),
            (Some(l), None) => l * 2.0,
            (None, Some(h)) => h / 2.0,
            (None, None) => unreachable!("a probe either passes or fails"),
        };
    }
    let bracketed = matches!((lo, hi), (Some(l), Some(h)) if h <= l * (1.0 + tolerance));
    Ok(Search {
        probes,
        sustained_block_ops_per_s: lo,
        failed_block_ops_per_s: hi,
        bracketed,
    })
}

/// One index's search and its closed-loop probe.
#[derive(Debug, Serialize)]
struct IndexSustained {
    name: String,
    /// The closed-loop run the search started from.
    closed: RunResult,
    /// The sustained rate in operations per second (events and queries): the block-op rate
    /// times the workload's operations per block op.
    sustained_ops_per_s: Option<f64>,
    #[serde(flatten)]
    search: Search,
}

/// The settings of a search, as `results.json` gives them.
#[derive(Serialize)]
struct Settings {
    event_threads: usize,
    query_threads: usize,
    tolerance: f64,
    max_probes: u32,
    achieved_share: f64,
    lag_share: f64,
}

/// What `sustain` writes to `results.json`.
#[derive(Serialize)]
struct Results<'a> {
    run: &'a RunMeta,
    workload: WorkloadInfo,
    sustain: Settings,
    load_average_at_end: f64,
    /// The cross-core round trip after the last probe, in ns (see [`crate::cross_core`]).
    cross_core_round_trip_ns_at_end: Option<f64>,
    indicative: Option<String>,
    indexes: &'a [IndexSustained],
}

/// `kvidx-bench probe` (internal): one run, JSON on stdout.
pub fn probe(args: &ProbeArgs) -> Result<(), String> {
    let ops = read_workload(&args.index.workload)?;
    let load = match args.rate {
        Some(r) if r > 0.0 && r.is_finite() => Load::Open(r),
        Some(r) => return Err(format!("--rate {r} is not a positive rate")),
        None => Load::Closed,
    };
    let run = replay::run(
        &ops,
        args.index.subject,
        args.index.threads(),
        load,
        Queries::Plain,
    );
    println!(
        "{}",
        serde_json::to_string(&run).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Runs one probe of `subject` in a fresh process: at `rate` ops/s, or closed loop.
fn probe_in_child(
    args: &SustainArgs,
    subject: Subject,
    rate: Option<f64>,
) -> Result<RunResult, String> {
    let mut argv: Vec<OsString> = vec!["probe".into(), "--workload".into()];
    argv.push(args.workload.clone().into());
    for (flag, value) in [
        ("--subject", subject.name().to_string()),
        ("--event-threads", args.event_threads.to_string()),
        ("--query-threads", args.query_threads.to_string()),
    ] {
        argv.extend([flag.into(), value.into()]);
    }
    if let Some(r) = rate {
        argv.extend(["--rate".into(), r.to_string().into()]);
    }
    run_child(&argv, &format!("probing {}", subject.name()))
}

/// Searches one index's sustained rate, each probe in a fresh process.
fn sustain_one(
    args: &SustainArgs,
    subject: Subject,
    ops_per_block_op: f64,
) -> Result<IndexSustained, String> {
    let name = subject.name();
    let closed = probe_in_child(args, subject, None)?;
    phase(&format!(
        "{name}: closed loop {} block ops/s",
        rate(closed.block_ops_per_s())
    ));
    let search =
        search(
            closed.block_ops_per_s(),
            args.tolerance,
            args.max_probes as usize - 1,
            |offered| {
                let run = probe_in_child(args, subject, Some(offered * ops_per_block_op))?;
                let probe = Probe::of(&run);
                phase(&format!(
                "{name}: offered {} block ops/s, achieved {}, feeder at worst {:.1} ms late: {}",
                rate(probe.offered_block_ops_per_s),
                rate(probe.achieved_block_ops_per_s),
                probe.feeder_lag_s * 1e3,
                if probe.sustained { "sustained" } else { "not sustained" }
            ));
                Ok::<_, String>(probe)
            },
        )?;
    Ok(IndexSustained {
        name: name.to_string(),
        closed,
        sustained_ops_per_s: search
            .sustained_block_ops_per_s
            .map(|r| r * ops_per_block_op),
        search,
    })
}

/// The sustained-rate table: one row per index.
fn table(indexes: &[IndexSustained]) -> String {
    let or_none = |r: Option<f64>| r.map_or_else(|| "-".to_string(), rate);
    let rows: Vec<Vec<String>> = indexes
        .iter()
        .map(|i| {
            vec![
                i.name.clone(),
                or_none(i.search.sustained_block_ops_per_s),
                or_none(i.sustained_ops_per_s),
                or_none(i.search.failed_block_ops_per_s),
                rate(i.closed.block_ops_per_s()),
                rate(i.closed.ops_per_s()),
                format!(
                    "{}{}",
                    i.search.probes.len() + 1,
                    if i.search.bracketed { "" } else { " (open)" }
                ),
            ]
        })
        .collect();
    report::table(
        &[
            "index",
            "sustained block ops/s",
            "sustained ops/s",
            "not sustained at",
            "closed block ops/s",
            "closed ops/s",
            "probes",
        ],
        &rows,
    )
}

/// `kvidx-bench sustain`.
pub fn run(args: &SustainArgs) -> Result<(), String> {
    if args.subjects.is_empty() {
        return Err("--subjects is empty".into());
    }
    if !(args.tolerance > 0.0 && args.tolerance.is_finite()) {
        return Err(format!("--tolerance {} is not positive", args.tolerance));
    }
    let meta = RunMeta::collect(&repo_dir());
    let ops = read_workload(&args.workload)?;
    let counts = Counts::of(&ops);
    if counts.block_ops == 0 {
        return Err("the workload has no block operations".into());
    }
    let ops_per_block_op = counts.ops() as f64 / counts.block_ops as f64;
    let workload = WorkloadInfo::of_file(&args.workload, &ops);
    drop(ops);
    let dir = out_dir_of(args.out_dir.as_deref(), "sustain")?;
    println!("run: {}", meta.line());
    println!("sustain: {}", report::workload_line(&counts));
    let indexes = args
        .subjects
        .iter()
        .map(|&subject| sustain_one(args, subject, ops_per_block_op))
        .collect::<Result<Vec<_>, String>>()?;
    let load_at_end = load_average();
    let round_trip_at_end = crate::cross_core::round_trip_ns();
    println!(
        "\nsustained rate: the highest offered rate achieved to {:.0}% with the feeder at most \
         {:.0}% of the run's length behind schedule, bracketed to {:.0}% (a fresh process per \
         probe; {} event thread(s), {} query thread(s); load average {:.2} at start, \
         {load_at_end:.2} at end, {} cores):",
        ACHIEVED_SHARE * 100.0,
        LAG_SHARE * 100.0,
        args.tolerance * 100.0,
        args.event_threads,
        args.query_threads,
        meta.machine.load_average,
        meta.machine.cores
    );
    print!("{}", table(&indexes));
    let indicative = report::load_reason(meta.machine.load_average, meta.machine.cores);
    if let Some(why) = &indicative {
        println!("figures are INDICATIVE only: {why}");
    }
    println!("{}", meta.measured_line(load_at_end, round_trip_at_end));
    println!("command: {}", meta.command);
    let results = Results {
        run: &meta,
        workload,
        sustain: Settings {
            event_threads: args.event_threads,
            query_threads: args.query_threads,
            tolerance: args.tolerance,
            max_probes: args.max_probes,
            achieved_share: ACHIEVED_SHARE,
            lag_share: LAG_SHARE,
        },
        load_average_at_end: load_at_end,
        cross_core_round_trip_ns_at_end: round_trip_at_end,
        indicative,
        indexes: &indexes,
    };
    let json: PathBuf = dir.join("results.json");
    let text = serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?;
    std::fs::write(&json, text).map_err(|e| format!("cannot write {}: {e}", json.display()))?;
    println!("figures: {}", json.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Operations and block operations of the fake workload.
    const OPS: u64 = 10_000;
    const BLOCK_OPS: u64 = 40_000;

    /// The open-loop run of a fake subject that applies at most `capacity` ops/s, offered
    /// `offered` ops/s: below its capacity it keeps pace (the run lasts the schedule plus a
    /// drain of one operation), above it backpressure holds the feeder back, so the run lasts
    /// as long as the subject needs and the feeder falls behind by the difference.
    fn fake_run(offered: f64, capacity: f64) -> RunResult {
        let scheduled = (OPS - 1) as f64 / offered;
        let needed = OPS as f64 / capacity;
        let seconds = scheduled.max(needed) + 1.0 / capacity;
        RunResult {
            offered: Some(offered),
            ops: OPS,
            block_ops: BLOCK_OPS,
            seconds,
            p50_ns: 1,
            p99_ns: 1,
            p999_ns: 1,
            max_ns: 1,
            queries: 0,
            feeder_lag_s: (needed - scheduled).max(0.0),
        }
    }

    /// The fake subject as a probe of offered block-op rates.
    fn fake(capacity_block_ops: f64) -> impl FnMut(f64) -> Result<Probe, String> {
        let per_block = OPS as f64 / BLOCK_OPS as f64;
        move |offered| {
            Ok(Probe::of(&fake_run(
                offered * per_block,
                capacity_block_ops * per_block,
            )))
        }
    }

    fn run_with(offered: f64, seconds: f64, feeder_lag_s: f64) -> RunResult {
        RunResult {
            seconds,
            feeder_lag_s,
            ..fake_run(offered, f64::INFINITY)
        }
    }

    #[test]
    fn a_rate_is_sustained_when_99_percent_is_achieved_on_schedule() {
        // 10,000 ops at 1,000/s are due over 9.999 s.
        let on_time = Probe::of(&run_with(1000.0, 10.0, 0.0));
        assert!(on_time.sustained, "{on_time:?}");
        assert_eq!(on_time.offered_block_ops_per_s, 4000.0);
        assert_eq!(on_time.achieved_block_ops_per_s, 4000.0);
        assert!((on_time.scheduled_s - 9.999).abs() < 1e-9);
        // 99.5% achieved: sustained; 98.9%: not.
        assert!(Probe::of(&run_with(1000.0, 10.0 / 0.995, 0.0)).sustained);
        assert!(!Probe::of(&run_with(1000.0, 10.0 / 0.989, 0.0)).sustained);
        // Achieved, but the feeder fell more than 1% of 9.999 s behind: not sustained.
        assert!(Probe::of(&run_with(1000.0, 10.0, 0.099)).sustained);
        assert!(!Probe::of(&run_with(1000.0, 10.0, 0.101)).sustained);
    }

    #[test]
    fn the_search_brackets_a_known_capacity_within_the_tolerance() {
        for capacity in [1.0e3, 7.3e5, 2.0e6, 5.5e7] {
            for start in [capacity * 1.4, capacity, capacity * 0.9, capacity * 0.01] {
                let s = search(start, 0.10, 30, fake(capacity)).unwrap();
                let lo = s.sustained_block_ops_per_s.expect("a sustained rate");
                let hi = s.failed_block_ops_per_s.expect("a failing rate");
                assert!(s.bracketed, "{capacity} from {start}: {s:?}");
                assert!(lo <= capacity && capacity < hi, "{capacity}: {lo}..{hi}");
                assert!(hi <= lo * 1.10, "{capacity}: {lo}..{hi}");
                assert!(s.probes.len() <= 12, "{} probes", s.probes.len());
                for p in &s.probes {
                    assert_eq!(p.sustained, p.offered_block_ops_per_s <= capacity);
                }
            }
        }
    }

    #[test]
    fn the_search_halves_then_bisects_geometrically() {
        let s = search(100.0, 0.10, 30, fake(70.0)).unwrap();
        let offered: Vec<String> = s
            .probes
            .iter()
            .map(|p| format!("{:.2}", p.offered_block_ops_per_s))
            .collect();
        // 100 fails, 50 passes, then the geometric middles: 70.71 fails, 59.46 and 64.84
        // pass, and 70.71 / 64.84 is within 10%.
        assert_eq!(offered, ["100.00", "50.00", "70.71", "59.46", "64.84"]);
        assert_eq!(
            (s.sustained_block_ops_per_s, s.failed_block_ops_per_s),
            (
                Some(50.0f64.powf(0.25) * 5000f64.sqrt().powf(0.75)),
                Some(5000f64.sqrt())
            )
        );
        // Doubling from below.
        let up = search(10.0, 0.10, 30, fake(70.0)).unwrap();
        let first: Vec<f64> = up.probes[..4]
            .iter()
            .map(|p| p.offered_block_ops_per_s)
            .collect();
        assert_eq!(first, [10.0, 20.0, 40.0, 80.0]);
    }

    #[test]
    fn a_noisy_failure_makes_the_figure_conservative_never_inconsistent() {
        // Capacity 70, but the probe at 50 fails (a noisy moment): the search goes on below
        // it and brackets what it saw, a sustained rate below the lowest failure above it.
        let mut subject = fake(70.0);
        let s = search(100.0, 0.10, 30, |offered| {
            let mut p = subject(offered)?;
            p.sustained &= offered != 50.0;
            Ok::<_, String>(p)
        })
        .unwrap();
        let offered: Vec<String> = s
            .probes
            .iter()
            .map(|p| format!("{:.2}", p.offered_block_ops_per_s))
            .collect();
        assert_eq!(
            offered,
            ["100.00", "50.00", "25.00", "35.36", "42.04", "45.85"]
        );
        assert_eq!(s.failed_block_ops_per_s, Some(50.0));
        assert!(s.bracketed && s.sustained_block_ops_per_s.unwrap() > 50.0 / 1.1);
        // A spurious pass above the capacity is kept too: 100 fails, 50 and 70.71 pass.
        let mut subject = fake(65.0);
        let s = search(100.0, 0.10, 30, |offered| {
            let mut p = subject(offered)?;
            p.sustained |= (offered - 5000f64.sqrt()).abs() < 1e-9;
            Ok::<_, String>(p)
        })
        .unwrap();
        let (lo, hi) = (s.sustained_block_ops_per_s, s.failed_block_ops_per_s);
        assert_eq!(lo, Some(5000f64.sqrt()));
        assert!(s.bracketed && hi.unwrap() <= lo.unwrap() * 1.1 && hi > lo);
    }

    #[test]
    fn the_search_stops_at_its_probe_limit_and_on_an_error() {
        let none = search(100.0, 0.10, 5, fake(0.001)).unwrap();
        assert_eq!(none.probes.len(), 5);
        assert_eq!(none.sustained_block_ops_per_s, None);
        assert_eq!(none.failed_block_ops_per_s, Some(100.0 / 16.0));
        assert!(!none.bracketed);
        let mut left = 2;
        let mut subject = fake(70.0);
        let err = search(100.0, 0.10, 30, |offered| {
            if left == 0 {
                return Err("the child failed".to_string());
            }
            left -= 1;
            subject(offered)
        });
        assert_eq!(err, Err("the child failed".to_string()));
    }

    #[test]
    fn the_table_gives_block_ops_beside_ops() {
        let s = search(100.0, 0.10, 30, fake(70.0)).unwrap();
        let closed = RunResult {
            offered: None,
            feeder_lag_s: 0.0,
            ..fake_run(1.0, f64::INFINITY)
        };
        let row = IndexSustained {
            name: "fake".into(),
            closed,
            sustained_ops_per_s: s.sustained_block_ops_per_s.map(|r| r / 4.0),
            search: s,
        };
        let t = table(&[row]);
        let header = t.lines().next().unwrap();
        assert!(
            header.starts_with("index  sustained block ops/s  sustained ops/s"),
            "{t}"
        );
        let cells: Vec<&str> = t.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(cells, ["fake", "65", "16", "71", "4", "1", "6"], "{t}");
    }
}
