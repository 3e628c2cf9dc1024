//! Plain-text tables of routing quality and replay figures.

use std::fmt::Write;

use crate::replay::SubjectReport;
use crate::sim::{Policy, Routing};
use crate::workload::Counts;

/// A duration in nanoseconds, humanly.
pub fn ns(v: u64) -> String {
    match v {
        0..=9_999 => format!("{v} ns"),
        10_000..=9_999_999 => format!("{:.1} us", v as f64 / 1e3),
        _ => format!("{:.1} ms", v as f64 / 1e6),
    }
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

fn table(header: &[&str], rows: &[Vec<String>]) -> String {
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

/// The routing-quality table: one row per policy.
pub fn routing_table(rows: &[(Policy, Routing)]) -> String {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|(p, r)| {
            vec![
                p.name().to_string(),
                format!("{:.1}%", 100.0 * r.hit_rate()),
                r.hit_blocks.to_string(),
                r.prompt_blocks.to_string(),
                r.requests.to_string(),
                r.stored_events.to_string(),
                r.removed_events.to_string(),
                r.max_worker_requests.to_string(),
            ]
        })
        .collect();
    table(
        &[
            "policy",
            "hit rate",
            "hit blocks",
            "prompt blocks",
            "requests",
            "stored",
            "removed",
            "busiest worker",
        ],
        &rows,
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

/// A one-line description of a workload.
pub fn workload_line(c: &Counts) -> String {
    format!(
        "{} ops: {} stored, {} removed, {} cleared events, {} match queries; {} block ops",
        c.ops(),
        c.stored,
        c.removed,
        c.cleared,
        c.matches,
        c.block_ops
    )
}

/// The side-by-side closed-loop table: one row per index.
pub fn closed_table(reports: &[SubjectReport]) -> String {
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let c = &r.closed;
            vec![
                r.name.clone(),
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
            ]
        })
        .collect();
    table(
        &[
            "index",
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
        }
    }

    #[test]
    fn short_runs_are_flagged_indicative() {
        use crate::replay::{MemoryResult, RunResult};
        let report = |seconds: f64, queries: u64| SubjectReport {
            name: "x".into(),
            memory: MemoryResult {
                index_bytes: 0,
                worker_blocks: 0,
                rejected: 0,
                unknown_removals: 0,
            },
            peak_rss: 0,
            closed: RunResult {
                offered: None,
                ops: 1,
                block_ops: 1,
                seconds,
                p50_ns: 1,
                p99_ns: 1,
                p999_ns: 1,
                max_ns: 1,
                queries,
            },
            open: vec![],
        };
        assert_eq!(indicative_reason(&[report(0.5, 12_031)]), None);
        let why = indicative_reason(&[report(0.5, 12_031), report(0.02, 12_031)]).unwrap();
        assert!(why.contains("0.020 s"), "{why}");
        assert!(indicative_reason(&[report(3.0, 400)])
            .unwrap()
            .contains("400 queries"));
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
