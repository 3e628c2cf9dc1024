//! Rounds of a side-by-side comparison, and the ratios taken within them.
//!
//! On a shared machine the same index's closed-loop rate moves by tens of percent from one
//! minute to the next, and it moves for every index alike. A ratio of two indexes measured one
//! after the other, minutes apart, carries that drift; measured in the same round (every index
//! once, in turn, seconds apart) it mostly cancels. With `--rounds N` the replay measures every
//! index once per round and reports, for each index, the median and range over the rounds of
//! its rate divided by each reference index's rate in the same round, and, when the `null`
//! subject is measured, of its time per operation beyond null's (what the index itself costs).
//! Each index's closed-loop find p50 and p99 are reported the same way: their median and range
//! over the rounds, and the p50 over each reference index's (other than `null`) in the same
//! round.

use serde::Serialize;

use crate::replay::SubjectReport;
use crate::target::Subject;

/// Indexes every other is compared with, when measured: the naive baseline, the harness's own
/// ceiling and the public peer's indexes.
pub fn is_reference(name: &str) -> bool {
    name == Subject::Baseline.name() || name == Subject::Null.name() || name.starts_with("peer-")
}

/// A figure taken once per round: its median and range over the rounds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Spread {
    /// Median over the rounds.
    pub median: f64,
    /// Smallest of a round.
    pub min: f64,
    /// Largest of a round.
    pub max: f64,
    /// Every round's figure, in round order.
    pub rounds: Vec<f64>,
}

impl Spread {
    /// The spread of one figure per round; `None` without rounds.
    pub fn of(rounds: Vec<f64>) -> Option<Spread> {
        Some(Spread {
            median: median(&rounds)?,
            min: rounds.iter().copied().fold(f64::INFINITY, f64::min),
            max: rounds.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            rounds,
        })
    }
}

/// One index's rate over another's, round by round.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PairedRatio {
    /// The index measured.
    pub subject: String,
    /// The reference index it is divided by.
    pub against: String,
    /// The ratio over the rounds.
    #[serde(flatten)]
    pub ratio: Spread,
}

/// One index's time per operation beyond the harness's own: `1 / rate - 1 / null's rate` in
/// the same round, in nanoseconds. The `null` subject pays for the feeder, the queues and the
/// event threads and for nothing else, so this is what the index itself costs per operation
/// (on the event thread, and the answers' share of the query thread) as far as it shows in
/// the closed-loop rate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BeyondHarness {
    /// The index measured.
    pub subject: String,
    /// Nanoseconds per operation over the rounds.
    #[serde(flatten)]
    pub ns_per_op: Spread,
}

/// One index's closed-loop find latency over the rounds, in nanoseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RoundLatency {
    /// The index measured.
    pub subject: String,
    /// Its find p50 over the rounds.
    pub p50_ns: Spread,
    /// Its find p99 over the rounds.
    pub p99_ns: Spread,
}

/// The median of `values` (the mean of the two middle ones for an even count); `None` if empty.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// One figure of each index in each round (the closed-loop rate in ops/s, or the find p50):
/// `rounds[r][i]` is index `i` of `names` in round `r`. Returns every (index, reference)
/// pair's ratios, in the order of `names` (indexes, then references).
pub fn paired_ratios(names: &[String], rounds: &[Vec<f64>]) -> Vec<PairedRatio> {
    let mut out = Vec::new();
    for (s, subject) in names.iter().enumerate() {
        for (a, against) in names.iter().enumerate() {
            if s == a || !is_reference(against) {
                continue;
            }
            let ratios = rounds.iter().map(|rates| rates[s] / rates[a]).collect();
            if let Some(ratio) = Spread::of(ratios) {
                out.push(PairedRatio {
                    subject: subject.clone(),
                    against: against.clone(),
                    ratio,
                });
            }
        }
    }
    out
}

/// With the rates of [`paired_ratios`]: every other index's time per operation beyond the
/// `null` subject's, in the order of `names`; empty when `null` was not measured.
pub fn beyond_harness(names: &[String], rounds: &[Vec<f64>]) -> Vec<BeyondHarness> {
    let Some(null) = names.iter().position(|n| n == Subject::Null.name()) else {
        return Vec::new();
    };
    names
        .iter()
        .enumerate()
        .filter(|&(s, _)| s != null)
        .filter_map(|(s, subject)| {
            let extra = rounds
                .iter()
                .map(|rates| 1e9 / rates[s] - 1e9 / rates[null])
                .collect();
            Some(BeyondHarness {
                subject: subject.clone(),
                ns_per_op: Spread::of(extra)?,
            })
        })
        .collect()
}

/// The closed-loop find p50 and p99 of each index in each round (`p50s[r][i]`, `p99s[r][i]`,
/// nanoseconds, as in [`paired_ratios`]): each index's spreads over the rounds, and its p50
/// over each reference's in the same round (not over `null`'s, which answers nothing). An
/// index with a p50 of 0 in some round answered no query there (every answer is recorded as
/// at least 1 ns): it has no latency figures, and no ratio is taken over it.
pub fn latency_figures(
    names: &[String],
    p50s: &[Vec<f64>],
    p99s: &[Vec<f64>],
) -> (Vec<RoundLatency>, Vec<PairedRatio>) {
    let answered = |i: usize| p50s.iter().all(|r| r[i] > 0.0);
    let of_index =
        |rounds: &[Vec<f64>], i: usize| Spread::of(rounds.iter().map(|r| r[i]).collect());
    let spreads = names
        .iter()
        .enumerate()
        .filter(|&(i, _)| answered(i))
        .filter_map(|(i, subject)| {
            Some(RoundLatency {
                subject: subject.clone(),
                p50_ns: of_index(p50s, i)?,
                p99_ns: of_index(p99s, i)?,
            })
        })
        .collect();
    let timed = |name: &str| {
        name != Subject::Null.name() && names.iter().position(|n| n == name).is_some_and(answered)
    };
    let mut ratios = paired_ratios(names, p50s);
    ratios.retain(|r| timed(&r.subject) && timed(&r.against));
    (spreads, ratios)
}

/// Reduces the reports of several rounds (`rounds[r]`: one report per index, in the same
/// order every round) to one report per index: its round of median closed-loop rate (the
/// lower middle one for an even count), with the open-loop runs of the first round (the only
/// one that has them).
pub fn median_reports(rounds: &[Vec<SubjectReport>]) -> Vec<SubjectReport> {
    let Some(first) = rounds.first() else {
        return Vec::new();
    };
    (0..first.len())
        .map(|i| {
            let mut of_index: Vec<&SubjectReport> = rounds.iter().map(|r| &r[i]).collect();
            of_index.sort_by(|a, b| a.closed.ops_per_s().total_cmp(&b.closed.ops_per_s()));
            let mut report = of_index[(of_index.len() - 1) / 2].clone();
            report.open = first[i].open.clone();
            report
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

    #[test]
    fn ratios_are_taken_within_each_round_against_references_only() {
        let names: Vec<String> = ["positional", "radix", "nested-map", "null"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // Round 2 is twice as fast for every index: the ratios do not move.
        let rounds = vec![
            vec![1.0, 2.0, 4.0, 8.0],
            vec![2.0, 4.0, 8.0, 16.0],
            vec![1.5, 2.0, 3.0, 10.0],
        ];
        let ratios = paired_ratios(&names, &rounds);
        let pairs: Vec<(&str, &str)> = ratios
            .iter()
            .map(|r| (r.subject.as_str(), r.against.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("positional", "nested-map"),
                ("positional", "null"),
                ("radix", "nested-map"),
                ("radix", "null"),
                ("nested-map", "null"),
                ("null", "nested-map"),
            ]
        );
        let p = &ratios[0].ratio;
        assert_eq!(p.rounds, vec![0.25, 0.25, 0.5]);
        assert_eq!((p.median, p.min, p.max), (0.25, 0.25, 0.5));
        let r = &ratios[2].ratio;
        assert_eq!(r.rounds, vec![0.5, 0.5, 2.0 / 3.0]);
        assert_eq!(r.median, 0.5);
    }

    #[test]
    fn find_latencies_spread_over_rounds_and_p50s_are_divided_within_each_round_but_not_by_null() {
        let names: Vec<String> = ["runs", "null", "peer-smg"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let rounds = vec![
            vec![800.0, 30.0, 700.0],
            vec![1200.0, 40.0, 600.0],
            vec![700.0, 30.0, 1000.0],
        ];
        let p99s: Vec<Vec<f64>> = rounds
            .iter()
            .map(|r| r.iter().map(|p50| 5.0 * p50).collect())
            .collect();
        let (spreads, ratios) = latency_figures(&names, &rounds, &p99s);
        let runs = &spreads[0];
        assert_eq!(runs.subject, "runs");
        assert_eq!(runs.p50_ns.rounds, vec![800.0, 1200.0, 700.0]);
        assert_eq!(
            (runs.p50_ns.median, runs.p50_ns.min, runs.p50_ns.max),
            (800.0, 700.0, 1200.0)
        );
        assert_eq!(runs.p99_ns.rounds, vec![4000.0, 6000.0, 3500.0]);
        assert_eq!(runs.p99_ns.median, 4000.0);
        assert_eq!(spreads.len(), 3);
        let pairs: Vec<(&str, &str)> = ratios
            .iter()
            .map(|r| (r.subject.as_str(), r.against.as_str()))
            .collect();
        assert_eq!(pairs, vec![("runs", "peer-smg")]);
        // Within each round: 800/700, 1200/600, 700/1000; the median is the first.
        let r = &ratios[0].ratio;
        assert_eq!(r.rounds, vec![800.0 / 700.0, 2.0, 0.7]);
        assert_eq!(r.median, 800.0 / 700.0);
    }

    #[test]
    fn indexes_that_answered_no_query_have_no_latency_figures() {
        let names: Vec<String> = ["runs", "peer-smg"].iter().map(|s| s.to_string()).collect();
        // A workload without queries: every p50 and p99 is 0.
        let none = vec![vec![0.0, 0.0], vec![0.0, 0.0]];
        let (spreads, ratios) = latency_figures(&names, &none, &none);
        assert!(spreads.is_empty() && ratios.is_empty());
        // The peer answered none in the second round only: runs keeps its figures.
        let p50s = vec![vec![800.0, 700.0], vec![900.0, 0.0]];
        let (spreads, ratios) = latency_figures(&names, &p50s, &p50s);
        let subjects: Vec<&str> = spreads.iter().map(|s| s.subject.as_str()).collect();
        assert_eq!(subjects, vec!["runs"]);
        assert!(ratios.is_empty());
    }

    #[test]
    fn time_beyond_the_harness_is_taken_within_each_round() {
        let names: Vec<String> = ["positional", "null"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // 1e6 ops/s is 1000 ns per op; the null subject's 4e6 ops/s, 250 ns.
        let rounds = vec![vec![1e6, 4e6], vec![2e6, 4e6], vec![1e6, 2e6]];
        let beyond = beyond_harness(&names, &rounds);
        assert_eq!(beyond.len(), 1);
        assert_eq!(beyond[0].subject, "positional");
        assert_eq!(beyond[0].ns_per_op.rounds, vec![750.0, 250.0, 500.0]);
        assert_eq!(beyond[0].ns_per_op.median, 500.0);
        assert!(beyond_harness(&names[..1], &[vec![1e6]]).is_empty());
    }

    /// A report of `name` whose closed loop ran `ops` operations in one second, with
    /// `open` open-loop runs.
    fn report(name: &str, ops: u64, open: usize) -> SubjectReport {
        use crate::replay::RunResult;
        let run = RunResult {
            offered: None,
            ops,
            block_ops: ops,
            seconds: 1.0,
            p50_ns: ops,
            p99_ns: 0,
            p999_ns: 0,
            max_ns: 0,
            queries: 0,
            feeder_lag_s: 0.0,
        };
        SubjectReport::of_runs(name, run, vec![run; open])
    }

    #[test]
    fn each_index_keeps_its_median_round_and_the_first_rounds_open_loop() {
        let rounds = vec![
            vec![report("a", 30, 2), report("b", 5, 2)],
            vec![report("a", 10, 0), report("b", 7, 0)],
            vec![report("a", 20, 0), report("b", 6, 0)],
            vec![report("a", 40, 0), report("b", 8, 0)],
        ];
        let reduced = median_reports(&rounds);
        let closed: Vec<(&str, u64, usize)> = reduced
            .iter()
            .map(|r| (r.name.as_str(), r.closed.ops, r.open.len()))
            .collect();
        // Four rounds: the lower middle one (a: 10 20 30 40 -> 20; b: 5 6 7 8 -> 6).
        assert_eq!(closed, vec![("a", 20, 2), ("b", 6, 2)]);
        assert!(median_reports(&[]).is_empty());
    }
}
