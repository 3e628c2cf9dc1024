//! The replay plot: achieved throughput and `find_matches` latency against offered load, one
//! line per index, as a hand-written SVG (log-log axes).

use std::fmt::Write;

use crate::replay::SubjectReport;
use crate::report::{ns, rate};
use crate::sim::{Policy, Routing};

const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];
const PANEL_W: f64 = 440.0;
const PANEL_H: f64 = 300.0;
const LEFT: f64 = 70.0;
const TOP: f64 = 56.0;
const GAP: f64 = 110.0;

/// A log-scale axis over powers of ten covering `[lo, hi]`.
#[derive(Debug, Clone, Copy)]
struct LogAxis {
    lo: f64,
    hi: f64,
}

impl LogAxis {
    fn covering(values: impl Iterator<Item = f64>) -> Self {
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for v in values.filter(|v| *v > 0.0 && v.is_finite()) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if !lo.is_finite() {
            return Self { lo: 1.0, hi: 10.0 };
        }
        let lo = 10f64.powf(lo.log10().floor());
        let mut hi = 10f64.powf(hi.log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }
        Self { lo, hi }
    }

    /// 0..1 along the axis.
    fn frac(&self, v: f64) -> f64 {
        (v.max(self.lo).log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
    }

    fn ticks(&self) -> Vec<f64> {
        let mut t = Vec::new();
        let mut v = self.lo;
        while v <= self.hi * 1.0001 {
            t.push(v);
            v *= 10.0;
        }
        t
    }
}

struct Panel {
    x0: f64,
    x: LogAxis,
    y: LogAxis,
}

impl Panel {
    fn px(&self, v: f64) -> f64 {
        self.x0 + self.x.frac(v) * PANEL_W
    }

    fn py(&self, v: f64) -> f64 {
        TOP + PANEL_H - self.y.frac(v) * PANEL_H
    }

    fn frame(
        &self,
        svg: &mut String,
        title: &str,
        xlabel: &str,
        ylabel: &str,
        yfmt: fn(f64) -> String,
    ) {
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{TOP}" width="{PANEL_W}" height="{PANEL_H}" fill="none" stroke="#333"/>"##,
            self.x0
        );
        for t in self.x.ticks() {
            let x = self.px(t);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + PANEL_H,
                TOP + PANEL_H + 16.0,
                decade(t, &["", "k", "M", "G"])
            );
        }
        for t in self.y.ticks() {
            let y = self.py(t);
            let _ = write!(
                svg,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                self.x0,
                self.x0 + PANEL_W,
                self.x0 - 6.0,
                y + 4.0,
                yfmt(t)
            );
        }
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{title}</text><text x="{:.1}" y="{:.1}" text-anchor="middle">{xlabel}</text><text x="{:.1}" y="{:.1}" text-anchor="middle" transform="rotate(-90 {:.1} {:.1})">{ylabel}</text>"##,
            self.x0 + PANEL_W / 2.0,
            TOP - 14.0,
            self.x0 + PANEL_W / 2.0,
            TOP + PANEL_H + 36.0,
            self.x0 - 58.0,
            TOP + PANEL_H / 2.0,
            self.x0 - 58.0,
            TOP + PANEL_H / 2.0
        );
    }

    fn line(&self, svg: &mut String, points: &[(f64, f64)], color: &str, dashed: bool) {
        if points.is_empty() {
            return;
        }
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", self.px(*x), self.py(*y)))
            .collect();
        let dash = if dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = write!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"{dash}/>"#,
            path.join(" ")
        );
        for (x, y) in points {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                self.px(*x),
                self.py(*y)
            );
        }
    }
}

/// Renders the plot of the open-loop runs of every report.
pub fn render(reports: &[SubjectReport], title: &str) -> String {
    let offered = || {
        reports
            .iter()
            .flat_map(|r| r.open.iter().filter_map(|o| o.offered))
    };
    let achieved = reports
        .iter()
        .flat_map(|r| r.open.iter().map(|o| o.ops_per_s()));
    let x = LogAxis::covering(offered());
    let thr = Panel {
        x0: LEFT,
        x,
        y: LogAxis::covering(offered().chain(achieved)),
    };
    let lat = Panel {
        x0: LEFT + PANEL_W + GAP,
        x,
        y: LogAxis::covering(reports.iter().flat_map(|r| {
            r.open
                .iter()
                .flat_map(|o| [o.p50_ns as f64, o.p99_ns as f64])
        })),
    };
    let width = LEFT + 2.0 * PANEL_W + GAP + 30.0;
    let height = TOP + PANEL_H + 60.0 + 20.0 * reports.len() as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><text x="{:.0}" y="16" text-anchor="middle" font-size="13">{}</text>"#,
        width / 2.0,
        escape(title)
    );
    thr.frame(
        &mut svg,
        "throughput (drain included)",
        "offered ops/s",
        "achieved ops/s",
        |v| decade(v, &["", "k", "M", "G"]),
    );
    lat.frame(
        &mut svg,
        "find_matches service time",
        "offered ops/s",
        "solid p50, dashed p99",
        |v| decade(v, &[" ns", " us", " ms", " s"]),
    );
    // Ideal: achieved = offered.
    let (lo, hi) = (thr.x.lo, thr.x.hi);
    thr.line(&mut svg, &[(lo, lo), (hi, hi)], "#999", true);
    for (i, r) in reports.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts = |f: &dyn Fn(&crate::replay::RunResult) -> f64| -> Vec<(f64, f64)> {
            r.open
                .iter()
                .filter_map(|o| o.offered.map(|x| (x, f(o))))
                .collect()
        };
        thr.line(&mut svg, &pts(&|o| o.ops_per_s()), color, false);
        lat.line(&mut svg, &pts(&|o| o.p50_ns as f64), color, false);
        lat.line(&mut svg, &pts(&|o| o.p99_ns as f64), color, true);
        let y = TOP + PANEL_H + 56.0 + 20.0 * i as f64;
        let _ = write!(
            svg,
            r#"<rect x="{LEFT}" y="{:.1}" width="14" height="4" fill="{color}"/><text x="{:.1}" y="{:.1}">{} (closed loop: {} ops/s, p50 {}, p99 {})</text>"#,
            y - 4.0,
            LEFT + 20.0,
            y,
            escape(&r.name),
            rate(r.closed.ops_per_s()),
            ns(r.closed.p50_ns),
            ns(r.closed.p99_ns)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// Splits `text` into lines of at most `width` characters at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// Renders routing quality: one horizontal bar per policy, its prefix-cache hit rate, with
/// the hit blocks, evictions and busiest worker beside it; `notes` (explanations, run
/// metadata) are printed below, wrapped.
pub fn render_routing(rows: &[(Policy, Routing)], title: &str, notes: &[String]) -> String {
    const BAR_LEFT: f64 = 110.0;
    const BAR_W: f64 = 360.0;
    const ROW_H: f64 = 34.0;
    const TOP_Y: f64 = 60.0;
    let max = rows
        .iter()
        .map(|(_, r)| r.hit_rate())
        .fold(0.0f64, f64::max);
    // The axis ends at the next multiple of 10% (at least 10%).
    let scale = ((max * 10.0).ceil() / 10.0).clamp(0.1, 1.0);
    let note_lines: Vec<String> = notes.iter().flat_map(|n| wrap(n, 165)).collect();
    let width = 1100.0;
    let axis_y = TOP_Y + ROW_H * rows.len() as f64;
    let height = axis_y + 50.0 + 16.0 * note_lines.len() as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="white"/><text x="{:.0}" y="20" text-anchor="middle" font-size="14">{}</text><text x="{:.0}" y="40" text-anchor="middle">prefix-cache hit rate (hit blocks / prompt blocks) per routing policy</text>"#,
        width / 2.0,
        escape(title),
        width / 2.0,
    );
    for step in 0..=10 {
        let f = step as f64 / 10.0;
        let x = BAR_LEFT + f * BAR_W;
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{axis_y:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{:.0}%</text>"##,
            TOP_Y - 6.0,
            axis_y + 16.0,
            100.0 * f * scale
        );
    }
    for (i, (policy, r)) in rows.iter().enumerate() {
        let y = TOP_Y + ROW_H * i as f64;
        let w = BAR_W * (r.hit_rate() / scale).min(1.0);
        let color = COLORS[i % COLORS.len()];
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text><rect x="{BAR_LEFT}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}">{:.1}%: {} of {} blocks hit{}; {} evictions; busiest worker {} of {} requests</text>"#,
            BAR_LEFT - 8.0,
            y + ROW_H / 2.0 + 4.0,
            policy.name(),
            y + 6.0,
            ROW_H - 12.0,
            BAR_LEFT + w + 8.0,
            y + ROW_H / 2.0 + 4.0,
            100.0 * r.hit_rate(),
            r.hit_blocks,
            r.prompt_blocks,
            from_host(r),
            r.removed_events,
            r.max_worker_requests,
            r.requests
        );
    }
    for (i, line) in note_lines.iter().enumerate() {
        let _ = write!(
            svg,
            r##"<text x="20" y="{:.1}" fill="#444">{}</text>"##,
            axis_y + 44.0 + 16.0 * i as f64,
            escape(line)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The host part of a routing bar's label: empty without host hits.
fn from_host(r: &Routing) -> String {
    if r.host_hit_blocks == 0 {
        String::new()
    } else {
        format!(
            " ({:.1}% on the GPU, {} blocks from host memory)",
            100.0 * r.device_hit_rate(),
            r.host_hit_blocks
        )
    }
}

/// A power of ten with a unit per factor of 1000: `decade(1e4, ["", "k"])` is "10k".
fn decade(v: f64, units: &[&str]) -> String {
    let mut v = v;
    let mut unit = 0;
    while v >= 999.5 && unit + 1 < units.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.0}{}", units[unit])
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::RunResult;

    fn run(offered: Option<f64>, seconds: f64) -> RunResult {
        RunResult {
            offered,
            ops: 1000,
            block_ops: 2000,
            seconds,
            p50_ns: 500,
            p99_ns: 5000,
            p999_ns: 9000,
            max_ns: 10_000,
            queries: 10,
            feeder_lag_s: 0.0,
        }
    }

    #[test]
    fn axes_cover_values_in_decades() {
        let a = LogAxis::covering([150.0, 42_000.0].into_iter());
        assert_eq!((a.lo, a.hi), (100.0, 100_000.0));
        assert_eq!(a.ticks().len(), 4);
        assert!((a.frac(1000.0) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(decade(1e4, &["", "k", "M"]), "10k");
        assert_eq!(decade(1e6, &[" ns", " us", " ms"]), "1 ms");
        assert_eq!(decade(100.0, &[" ns", " us"]), "100 ns");
    }

    #[test]
    fn renders_one_series_per_index() {
        let report = SubjectReport::of_runs(
            "a<b",
            run(None, 0.001),
            vec![run(Some(1e5), 0.01), run(Some(1e6), 0.002)],
        );
        let svg = render(&[report.clone(), report], "t & t");
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        // Per index: throughput, p50 and p99 lines; plus the ideal line.
        assert_eq!(svg.matches("<polyline").count(), 7);
        assert!(svg.contains("a&lt;b") && svg.contains("t &amp; t"));
    }

    #[test]
    fn routing_picture_has_a_bar_per_policy_and_the_notes() {
        let r = |hit: u64| Routing {
            requests: 10,
            prompt_blocks: 100,
            hit_blocks: hit,
            stored_events: 1,
            removed_events: 2,
            max_worker_requests: 3,
            ..Routing::default()
        };
        let rows = [(Policy::Random, r(4)), (Policy::KvCost, r(31))];
        let long = "word ".repeat(60);
        let svg = render_routing(&rows, "t", &[long, "commit abc <x>".into()]);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches(r#"height="22.0" fill"#).count(), 2);
        assert!(svg.contains("31.0%: 31 of 100 blocks hit") && svg.contains("kv-cost"));
        // The axis ends at 40%, the next multiple of 10 above the best hit rate.
        assert!(svg.contains(">40%<") && !svg.contains(">50%<"));
        assert!(svg.contains("commit abc &lt;x&gt;"));
        assert_eq!(wrap(&"ab ".repeat(100), 150).len(), 2);
    }
}
