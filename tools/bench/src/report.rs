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
        ],
        &rows,
    )
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
}
