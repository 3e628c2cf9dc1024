//! Plain-text tables of routing quality and replay figures.

use std::fmt::Write;

use crate::replay::SubjectReport;
use crate::rounds::{BeyondHarness, PairedRatio, RoundLatency, Spread};
use crate::sim::{Policy, Routing};
use crate::study::{StudyRow, Targets};
use crate::workload::Counts;

/// A duration in nanoseconds, humanly.
pub fn ns(v: u64) -> String {
    let (scale, unit, digits) = ns_unit(v as f64);
    format!("{:.digits$} {unit}", v as f64 / scale)
}

/// The unit [`ns`] writes a duration of `v` nanoseconds in: its size in nanoseconds, its
/// name and the decimals shown.
fn ns_unit(v: f64) -> (f64, &'static str, usize) {
    match v {
        v if v < 10_000.0 => (1.0, "ns", 0),
        v if v < 10_000_000.0 => (1e3, "us", 1),
        _ => (1e6, "ms", 1),
    }
}

/// A spread of durations in nanoseconds, humanly: `median (min-max)`, all in the unit [`ns`]
/// gives the largest.
pub fn ns_spread(t: &Spread) -> String {
    let (scale, unit, digits) = ns_unit(t.max);
    format!(
        "{:.digits$} {unit} ({:.digits$}-{:.digits$})",
        t.median / scale,
        t.min / scale,
        t.max / scale
    )
}

/// A rate, humanly.
pub fn rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// A byte count, humanly.
pub fn bytes(v: u64) -> String {
    if v >= 1 << 30 {
        format!("{:.2} GiB", v as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", v as f64 / (1u64 << 20) as f64)
    }
}

pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(out, "{cell:<w$}");
            } else {
                let _ = write!(out, "  {cell:>w$}");
            }
        }
        out.push('\n');
    };
    line(&mut out, &mut header.iter().copied());
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(&mut out, &mut rule.iter().map(String::as_str));
    for row in rows {
        line(&mut out, &mut row.iter().map(String::as_str));
    }
    out
}

/// A share as a percentage with one decimal.
fn percent(v: f64) -> String {
    format!("{:.1}%", 100.0 * v)
}

/// The routing-quality table: one row per policy. With `tiers` (a host tier), the hit rate
/// is split into GPU and host hit rates, and blocks offloaded to host memory are shown.
pub fn routing_table(rows: &[(Policy, Routing)], tiers: bool) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(p, r)| {
            let mut row = vec![p.name().to_string(), percent(r.hit_rate())];
            if tiers {
                row.extend([percent(r.device_hit_rate()), percent(r.host_hit_rate())]);
            }
            row.extend([r.hit_blocks.to_string(), r.prompt_blocks.to_string()]);
            if tiers {
                row.push(r.host_hit_blocks.to_string());
            }
            row.extend([
                r.requests.to_string(),
                r.stored_events.to_string(),
                r.removed_events.to_string(),
            ]);
            if tiers {
                row.push(r.offloaded.to_string());
            }
            row.push(r.max_worker_requests.to_string());
            row
        })
        .collect();
    let header: &[&str] = if tiers {
        &[
            "policy",
            "hit rate",
            "GPU hit rate",
            "host hit rate",
            "hit blocks",
            "prompt blocks",
            "host hit blocks",
            "requests",
            "stored",
            "removed",
            "offloaded",
            "busiest worker",
        ]
    } else {
        &[
            "policy",
            "hit rate",
            "hit blocks",
            "prompt blocks",
            "requests",
            "stored",
            "removed",
            "busiest worker",
        ]
    };
    table(header, &rows)
}

/// The table of routing before the events arrive: one row per trace variant, event delay
/// and view of the caches (kv-cost routing), with the hit rate and the tokens prefilled.
pub fn delay_table(rows: &[StudyRow]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|s| {
            let r = &s.routing;
            vec![
                s.variant.name().to_string(),
                format!("{} ms", s.delay_ms),
                s.view.name().to_string(),
                percent(r.hit_rate()),
                r.prefill_tokens.to_string(),
                r.hit_blocks.to_string(),
                r.prompt_blocks.to_string(),
                r.requests.to_string(),
                r.max_worker_requests.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "trace",
            "event delay",
            "view",
            "hit rate",
            "prefill tokens",
            "hit blocks",
            "prompt blocks",
            "requests",
            "busiest worker",
        ],
        &rows,
    )
}

/// One line per variant on the study's targets: the share of the gap to the oracle that
/// events+predictions recovers, and event-free routing's hit rate against events-only's.
pub fn target_lines(targets: &[Targets]) -> Vec<String> {
    targets
        .iter()
        .map(|t| {
            let mut line = format!(
                "{} at {} ms: events-only {}, oracle {}",
                t.variant.name(),
                t.delay_ms,
                percent(t.events_only),
                percent(t.oracle)
            );
            if t.oracle <= t.events_only {
                line.push_str("; no gap between them to recover");
            } else if let Some(g) = t.gap_recovered {
                let _ = write!(
                    line,
                    "; events+predictions recovers {} of the gap (target 50%)",
                    percent(g)
                );
            }
            if let Some(f) = t.event_free_ratio {
                let _ = write!(
                    line,
                    "; predictions-only reaches {} of events-only's hit rate (target 80%)",
                    percent(f)
                );
            }
            line
        })
        .collect()
}

/// How the tier-aware and the tier-blind kv-cost policies routed the same trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TierComparison {
    /// The tier-blind `kv-cost` run.
    pub blind: Routing,
    /// The tier-aware `kv-cost-tiered` run.
    pub aware: Routing,
    /// Requests the two sent to different workers.
    pub differ: u64,
    /// The host weight of the tier-aware policy.
    pub host_weight: f64,
}

impl TierComparison {
    /// Compares the two runs' choices (one worker per request, in order).
    pub fn of(
        blind: (Routing, &[u32]),
        aware: (Routing, &[u32]),
        host_weight: f64,
    ) -> TierComparison {
        let differ = blind.1.iter().zip(aware.1).filter(|(a, b)| a != b).count();
        TierComparison {
            blind: blind.0,
            aware: aware.0,
            differ: differ as u64,
            host_weight,
        }
    }
}

/// The line comparing tier-aware and tier-blind routing: how many requests they routed
/// differently, with their GPU and host hit rates; when they routed identically, why.
pub fn tier_note(c: &TierComparison) -> String {
    let rates = |r: &Routing| {
        format!(
            "{} = GPU {} + host {}",
            percent(r.hit_rate()),
            percent(r.device_hit_rate()),
            percent(r.host_hit_rate())
        )
    };
    if c.differ > 0 {
        return format!(
            "tier-aware vs tier-blind: kv-cost-tiered (host weight {}) routed {} of {} \
             requests differently from kv-cost; hit rate {} against {}.",
            c.host_weight,
            c.differ,
            c.aware.requests,
            rates(&c.aware),
            rates(&c.blind)
        );
    }
    let why = if c.host_weight == 1.0 {
        "the host weight is 1, so a block in host memory scores as one on the GPU and the \
         tiered score equals the plain depth"
            .to_string()
    } else if c.blind.offloaded == 0 {
        "no GPU pool evicted a block, so nothing reached host memory and every tiered score \
         equals the plain depth"
            .to_string()
    } else {
        format!(
            "weighing host blocks {} instead of 1 never changed which worker was cheapest \
             ({} of kv-cost's {} hit blocks came from host memory)",
            c.host_weight, c.blind.host_hit_blocks, c.blind.hit_blocks
        )
    };
    format!(
        "note: kv-cost-tiered routed every request as kv-cost did (hit rate {}): {why}.",
        rates(&c.aware)
    )
}

/// How concentrated the first blocks of a trace's requests are: the most common first hash
/// id, and the share of requests that start with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FirstBlock {
    /// The most common first hash id.
    pub id: u64,
    /// Share of requests (with at least one block) that start with it.
    pub share: f64,
}

impl FirstBlock {
    /// Computes it over the requests' first hash ids.
    pub fn of(first_ids: impl Iterator<Item = u64>) -> Option<Self> {
        let mut counts = std::collections::HashMap::new();
        let mut total = 0u64;
        for id in first_ids {
            *counts.entry(id).or_insert(0u64) += 1;
            total += 1;
        }
        let (id, n) = counts
            .into_iter()
            .max_by_key(|&(id, n)| (n, std::cmp::Reverse(id)))?;
        Some(Self {
            id,
            share: n as f64 / total as f64,
        })
    }
}

/// Explanations for policies whose score degenerates, one line each: kv-aware routing that
/// does no better than random (within a percentage point) is explained from the trace's
/// first blocks, the load it piles on the busiest worker and its evictions.
pub fn routing_notes(rows: &[(Policy, Routing)], first: Option<FirstBlock>) -> Vec<String> {
    let find = |p: Policy| rows.iter().find(|(q, _)| *q == p).map(|(_, r)| *r);
    let (Some(random), Some(aware)) = (find(Policy::Random), find(Policy::KvAware)) else {
        return Vec::new();
    };
    if aware.requests == 0 || aware.hit_rate() > random.hit_rate() + 0.01 {
        return Vec::new();
    }
    let mut note = format!(
        "note: kv-aware scores like random here ({:.1}% vs {:.1}%).",
        100.0 * aware.hit_rate(),
        100.0 * random.hit_rate()
    );
    if let Some(f) = first.filter(|f| f.share >= 0.5) {
        note += &format!(
            " {:.0}% of the requests start with the same block (hash id {}), so whichever \
             worker served one holds it and has the deepest overlap with nearly every request; \
             kv-aware looks at load only between equal depths, so",
            100.0 * f.share,
            f.id
        );
    } else {
        note += " Deepest-overlap routing looks at load only between equal depths, so";
    }
    let pile = if aware.max_worker_requests == aware.requests {
        format!(
            " every request went to the same worker ({} of {}; the busiest took {} under random)",
            aware.max_worker_requests, aware.requests, random.max_worker_requests
        )
    } else {
        format!(
            " requests pile onto the workers holding the common prefix (the busiest served {} \
             of {} requests, {} under random)",
            aware.max_worker_requests, aware.requests, random.max_worker_requests
        )
    };
    note += &format!(
        "{pile}, whose pool then evicts its own blocks ({} removals vs {} under random). \
         kv-cost adds each worker's load to its cost and spreads the requests.",
        aware.removed_events, random.removed_events
    );
    vec![note]
}

/// Why replay figures are only indicative, if they are: closed-loop runs shorter than 0.2 s
/// (scheduler noise on a shared machine is then a large part of the time) or fewer than
/// 10,000 queries per run (a p99.9 then rests on a handful of samples).
pub fn indicative_reason(reports: &[SubjectReport]) -> Option<String> {
    let shortest = reports
        .iter()
        .map(|r| r.closed.seconds)
        .fold(f64::INFINITY, f64::min);
    let queries = reports.iter().map(|r| r.closed.queries).min()?;
    if shortest >= 0.2 && queries >= 10_000 {
        return None;
    }
    Some(format!(
        "each closed-loop run took {shortest:.3} s and answered {queries} queries (stable \
         figures need runs of 0.2 s or more and 10,000+ queries for p99.9)"
    ))
}

/// Why figures measured on a busy machine are only indicative, if it was: the 1-minute load
/// average at the start of the run above half the cores (other work then competes for the
/// cores the index's threads and the feeder need, and moves rates by tens of percent).
pub fn load_reason(load_average: f64, cores: usize) -> Option<String> {
    let half = cores as f64 / 2.0;
    (load_average > half).then(|| {
        format!(
            "the load average was {load_average:.2} at the start, above half the {cores} \
             cores ({half}): other work competed for the cores"
        )
    })
}

/// Every reason the figures are only indicative, joined; `None` when there is none.
pub fn indicative(reasons: impl IntoIterator<Item = Option<String>>) -> Option<String> {
    let reasons: Vec<String> = reasons.into_iter().flatten().collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// A one-line description of a workload.
pub fn workload_line(c: &Counts) -> String {
    let mut line = format!(
        "{} ops: {} stored, {} removed, {} cleared events, {} match queries; {} block ops",
        c.ops(),
        c.stored,
        c.removed,
        c.cleared,
        c.matches,
        c.block_ops
    );
    if c.tiered > 0 {
        let _ = write!(line, "; {} events name a storage tier", c.tiered);
    }
    line
}

/// The side-by-side closed-loop table: one row per index (and workload, with a `workload`
/// column, when the reports compare workloads).
pub fn closed_table(reports: &[SubjectReport]) -> String {
    let by_workload = reports.iter().any(|r| r.workload.is_some());
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let c = &r.closed;
            let mut row = vec![r.name.clone()];
            if by_workload {
                row.push(r.workload.clone().unwrap_or_default());
            }
            row.extend([
                rate(c.ops_per_s()),
                rate(c.block_ops_per_s()),
                format!("{:.3} s", c.seconds),
                ns(c.p50_ns),
                ns(c.p99_ns),
                ns(c.p999_ns),
                format!("{:.1}", r.memory.bytes_per_block()),
                r.memory.worker_blocks.to_string(),
                bytes(r.peak_rss),
                format!("{}/{}", r.memory.rejected, r.memory.unknown_removals),
            ]);
            row
        })
        .collect();
    let mut header = vec!["index"];
    if by_workload {
        header.push("workload");
    }
    header.extend([
        "ops/s",
        "block ops/s",
        "time",
        "find p50",
        "find p99",
        "find p99.9",
        "B/(w,blk)",
        "held (w,blk)",
        "peak RSS",
        "rej/unk",
    ]);
    table(&header, &rows)
}

/// The paired ratios of `--rounds`: one row per index, one column per reference index, each
/// cell `median (min-max)` over the rounds (empty for an index against itself).
pub fn ratio_table(ratios: &[PairedRatio]) -> String {
    let subjects = distinct(ratios.iter().map(|r| r.subject.as_str()));
    let references = distinct(ratios.iter().map(|r| r.against.as_str()));
    let rows: Vec<Vec<String>> = subjects
        .iter()
        .map(|&subject| {
            let mut row = vec![subject.to_string()];
            row.extend(
                references
                    .iter()
                    .map(|&against| ratio_cell(ratios, subject, against)),
            );
            row
        })
        .collect();
    let headers: Vec<String> = references.iter().map(|a| format!("/ {a}")).collect();
    let mut header = vec!["index"];
    header.extend(headers.iter().map(String::as_str));
    table(&header, &rows)
}

/// Each name once, in the order of its first appearance.
fn distinct<'a>(names: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for name in names {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// `subject`'s ratio over `against` among `ratios` as `median (min-max)`; empty if there is
/// none.
fn ratio_cell(ratios: &[PairedRatio], subject: &str, against: &str) -> String {
    ratios
        .iter()
        .find(|r| r.subject == subject && r.against == against)
        .map_or(String::new(), |r| {
            let r = &r.ratio;
            format!("{:.2}x ({:.2}-{:.2})", r.median, r.min, r.max)
        })
}

/// The find latencies of `--rounds`: one row per index, its p50 and p99 and then its p50 over
/// each reference index's in the same round, each cell `median (min-max)` over the rounds.
pub fn latency_table(latency: &[RoundLatency], ratios: &[PairedRatio]) -> String {
    let references = distinct(ratios.iter().map(|r| r.against.as_str()));
    let rows: Vec<Vec<String>> = latency
        .iter()
        .map(|p| {
            let mut row = vec![
                p.subject.clone(),
                ns_spread(&p.p50_ns),
                ns_spread(&p.p99_ns),
            ];
            row.extend(
                references
                    .iter()
                    .map(|&against| ratio_cell(ratios, &p.subject, against)),
            );
            row
        })
        .collect();
    let headers: Vec<String> = references.iter().map(|a| format!("/ {a}")).collect();
    let mut header = vec!["index", "find p50", "find p99"];
    header.extend(headers.iter().map(String::as_str));
    table(&header, &rows)
}

/// The times per operation beyond the harness's of `--rounds`: one row per index,
/// `median (min-max)` over the rounds in nanoseconds.
pub fn beyond_harness_table(beyond: &[BeyondHarness]) -> String {
    let rows: Vec<Vec<String>> = beyond
        .iter()
        .map(|b| {
            let t = &b.ns_per_op;
            vec![
                b.subject.clone(),
                format!("{:.0} ns ({:.0}-{:.0})", t.median, t.min, t.max),
            ]
        })
        .collect();
    table(&["index", "ns/op beyond null"], &rows)
}

/// The closed-loop table of tiered queries: one row per index measured with
/// `find_matches_tiered` (a workload with tiered events), beside its plain `find_matches`
/// figures on the same workload.
pub fn tiered_table(reports: &[SubjectReport]) -> String {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .filter_map(|r| {
            let t = r.tiered.as_ref()?;
            Some(vec![
                r.name.clone(),
                rate(t.ops_per_s()),
                format!("{:.3} s", t.seconds),
                ns(t.p50_ns),
                ns(t.p99_ns),
                ns(t.p999_ns),
                ns(r.closed.p50_ns),
                ns(r.closed.p99_ns),
            ])
        })
        .collect();
    table(
        &[
            "index",
            "ops/s",
            "time",
            "tiered p50",
            "tiered p99",
            "tiered p99.9",
            "find p50",
            "find p99",
        ],
        &rows,
    )
}

/// The open-loop table: one row per index and offered rate.
pub fn open_table(reports: &[SubjectReport]) -> String {
    let mut rows = Vec::new();
    for r in reports {
        for o in &r.open {
            rows.push(vec![
                r.name.clone(),
                rate(o.offered.unwrap_or(0.0)),
                rate(o.ops_per_s()),
                rate(o.block_ops_per_s()),
                ns(o.p50_ns),
                ns(o.p99_ns),
                ns(o.p999_ns),
            ]);
        }
    }
    table(
        &[
            "index",
            "offered/s",
            "achieved/s",
            "block ops/s",
            "find p50",
            "find p99",
            "find p99.9",
        ],
        &rows,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_alignment() {
        assert_eq!(ns(812), "812 ns");
        assert_eq!(ns(15_300), "15.3 us");
        let spread = |median, min, max| Spread::of(vec![min, median, max]).unwrap();
        assert_eq!(
            ns_spread(&spread(842.0, 811.0, 1182.0)),
            "842 ns (811-1182)"
        );
        assert_eq!(
            ns_spread(&spread(3305.0, 3215.0, 12_040.0)),
            "3.3 us (3.2-12.0)"
        );
        assert_eq!(rate(1_400_000.0), "1.40M");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
        let t = table(&["a", "bb"], &[vec!["xyz".into(), "1".into()]]);
        assert_eq!(t, "a    bb\n---  --\nxyz   1\n");
    }

    fn routing(hit: u64, removed: u64, busiest: u64) -> Routing {
        Routing {
            requests: 100,
            prompt_blocks: 1000,
            hit_blocks: hit,
            stored_events: 10,
            removed_events: removed,
            max_worker_requests: busiest,
            ..Routing::default()
        }
    }

    #[test]
    fn routing_table_splits_hits_by_tier_only_with_a_host_tier() {
        let r = Routing {
            host_hit_blocks: 100,
            offloaded: 7,
            ..routing(300, 150, 9)
        };
        let plain = routing_table(&[(Policy::KvCost, r)], false);
        assert!(
            plain.starts_with("policy   hit rate  hit blocks"),
            "{plain}"
        );
        assert!(!plain.contains("GPU"));
        let tiered = routing_table(&[(Policy::KvCostTiered, r)], true);
        let header = tiered.lines().next().unwrap();
        assert!(header.contains("GPU hit rate  host hit rate"), "{tiered}");
        assert!(header.contains("host hit blocks") && header.contains("offloaded"));
        let row: Vec<&str> = tiered.lines().nth(2).unwrap().split_whitespace().collect();
        assert_eq!(
            row,
            [
                "kv-cost-tiered",
                "30.0%",
                "20.0%",
                "10.0%",
                "300",
                "1000",
                "100",
                "100",
                "10",
                "150",
                "7",
                "9"
            ]
        );
    }

    #[test]
    fn tier_comparison_says_how_many_requests_differ_or_why_none() {
        let blind = Routing {
            host_hit_blocks: 40,
            offloaded: 50,
            ..routing(300, 150, 9)
        };
        let aware = Routing {
            host_hit_blocks: 20,
            ..blind
        };
        let c = TierComparison::of((blind, &[0, 1, 2, 3]), (aware, &[0, 1, 3, 3]), 0.8);
        assert_eq!(c.differ, 1);
        let note = tier_note(&c);
        assert!(
            note.contains("routed 1 of 100 requests differently"),
            "{note}"
        );
        assert!(note.contains("30.0% = GPU 28.0% + host 2.0%"), "{note}");
        let same = TierComparison::of((blind, &[0, 1]), (blind, &[0, 1]), 0.8);
        let note = tier_note(&same);
        assert!(note.starts_with("note: kv-cost-tiered routed every request as kv-cost"));
        assert!(note.contains("40 of kv-cost's 300 hit blocks"), "{note}");
        let weight_one = tier_note(&TierComparison {
            host_weight: 1.0,
            ..same
        });
        assert!(weight_one.contains("the host weight is 1"), "{weight_one}");
        let no_offload = tier_note(&TierComparison {
            blind: routing(300, 150, 9),
            ..same
        });
        assert!(
            no_offload.contains("nothing reached host memory"),
            "{no_offload}"
        );
    }

    #[test]
    fn replay_tables_show_the_workload_and_the_tiered_queries_when_measured() {
        use crate::replay::RunResult;
        let run = |p50_ns: u64| RunResult {
            offered: None,
            ops: 10,
            block_ops: 10,
            seconds: 1.0,
            p50_ns,
            p99_ns: p50_ns,
            p999_ns: p50_ns,
            max_ns: p50_ns,
            queries: 1,
            feeder_lag_s: 0.0,
        };
        let report = |workload: Option<&str>, tiered: Option<RunResult>| SubjectReport {
            tiered,
            workload: workload.map(str::to_string),
            ..SubjectReport::of_runs("positional", run(800), vec![])
        };
        let plain = closed_table(&[report(None, None)]);
        assert!(!plain.contains("workload"), "{plain}");
        let both = [
            report(Some("single-tier"), None),
            report(Some("host tier"), Some(run(1500))),
        ];
        let table = closed_table(&both);
        assert!(
            table.starts_with("index          workload  ops/s"),
            "{table}"
        );
        assert!(table.contains("single-tier") && table.contains("host tier"));
        let tiered = tiered_table(&both);
        assert_eq!(tiered.lines().count(), 3, "one row: {tiered}");
        assert!(
            tiered.contains("1500 ns") && tiered.contains("800 ns"),
            "{tiered}"
        );
    }

    #[test]
    fn short_runs_are_flagged_indicative() {
        use crate::replay::RunResult;
        let report = |seconds: f64, queries: u64| {
            let closed = RunResult {
                offered: None,
                ops: 1,
                block_ops: 1,
                seconds,
                p50_ns: 1,
                p99_ns: 1,
                p999_ns: 1,
                max_ns: 1,
                queries,
                feeder_lag_s: 0.0,
            };
            SubjectReport::of_runs("x", closed, vec![])
        };
        assert_eq!(indicative_reason(&[report(0.5, 12_031)]), None);
        let why = indicative_reason(&[report(0.5, 12_031), report(0.02, 12_031)]).unwrap();
        assert!(why.contains("0.020 s"), "{why}");
        assert!(indicative_reason(&[report(3.0, 400)])
            .unwrap()
            .contains("400 queries"));
    }

    #[test]
    fn a_busy_machine_makes_figures_indicative() {
        // Above half the cores: indicative, with the load and the cores said.
        let why = load_reason(8.4, 2).expect("load 8.4 on 2 cores is busy");
        assert!(why.contains("8.40") && why.contains("2 cores"), "{why}");
        assert!(load_reason(1.01, 2).is_some());
        assert!(load_reason(2.5, 4).is_some());
        // At or under half the cores: not on that account.
        assert_eq!(load_reason(1.0, 2), None);
        assert_eq!(load_reason(0.54, 2), None);
        assert_eq!(load_reason(3.9, 8), None);
        assert_eq!(load_reason(0.0, 1), None);
        assert!(load_reason(0.6, 1).is_some());
        // Reasons are joined; none, no mark.
        assert_eq!(indicative([None, None]), None);
        let both = indicative([Some("short runs".to_string()), load_reason(8.4, 2)]).unwrap();
        assert!(
            both.starts_with("short runs; the load average was 8.40"),
            "{both}"
        );
    }

    #[test]
    fn degenerate_kv_aware_routing_is_explained() {
        let first = FirstBlock::of([0, 0, 0, 5, 0].into_iter()).unwrap();
        assert_eq!((first.id, first.share), (0, 0.8));
        let rows = [
            (Policy::Random, routing(44, 150, 9)),
            (Policy::KvAware, routing(45, 1000, 60)),
            (Policy::KvCost, routing(300, 600, 12)),
        ];
        let notes = routing_notes(&rows, Some(first));
        assert_eq!(notes.len(), 1);
        let n = &notes[0];
        for part in [
            "4.5% vs 4.4%",
            "80% of the requests",
            "hash id 0",
            "60 of 100",
            "1000 removals vs 150",
        ] {
            assert!(n.contains(part), "{part:?} missing from {n}");
        }
        // A working kv-aware policy needs no note.
        let rows = [
            (Policy::Random, routing(44, 150, 9)),
            (Policy::KvAware, routing(200, 300, 20)),
        ];
        assert!(routing_notes(&rows, Some(first)).is_empty());
    }
}
