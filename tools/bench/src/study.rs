//! Routing before the events arrive: the kv-cost router under each view of the caches
//! (events only, events and predictions, predictions only, the oracle), at each event delay,
//! on a trace and on its bursty variant.

use serde::Serialize;

use crate::burst::bursty;
use crate::sim::{simulate, Routing, SimConfig, View};
use crate::trace::Request;

/// The event delays the main job studies by default (ms).
pub const DEFAULT_DELAYS_MS: [u64; 3] = [0, 50, 500];

/// The delay at which the study's targets are read (ms).
pub const TARGET_DELAY_MS: u64 = 50;

/// Which trace a row was simulated on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The trace as given.
    Trace,
    /// Its bursty variant (`burst.rs`).
    Bursty,
}

impl Variant {
    /// The variant's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Trace => "trace",
            Variant::Bursty => "bursty",
        }
    }
}

/// One simulation of the study.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StudyRow {
    pub variant: Variant,
    pub delay_ms: u64,
    pub view: View,
    pub routing: Routing,
}

/// How the study's bursts are made.
#[derive(Debug, Clone, Copy)]
pub struct Bursts {
    /// Requests per burst.
    pub size: u32,
    /// The time one burst spreads over (ms).
    pub window_ms: u64,
}

/// Simulates `base` (its policy; view and delay replaced) on `trace` and its bursty variant,
/// under every view in `views` at every delay in `delays`. A view that does not read events
/// (predictions only, the oracle) routes the same at every delay: it is simulated once per
/// variant and its row repeated at each delay. `done` is told of each simulation.
pub fn run(
    trace: &[Request],
    base: &SimConfig,
    delays: &[u64],
    views: &[View],
    bursts: Bursts,
    mut done: impl FnMut(&StudyRow),
) -> Vec<StudyRow> {
    let burst_trace = bursty(trace, bursts.size, bursts.window_ms);
    let mut rows = Vec::new();
    for (variant, requests) in [
        (Variant::Trace, trace),
        (Variant::Bursty, burst_trace.as_slice()),
    ] {
        let mut once: Vec<(View, Routing)> = Vec::new();
        for &delay_ms in delays {
            for &view in views {
                let routing = match once.iter().find(|(v, _)| *v == view) {
                    Some((_, r)) => *r,
                    None => {
                        let cfg = SimConfig {
                            view,
                            event_delay_ms: delay_ms,
                            ..*base
                        };
                        let r = simulate(requests, &cfg).routing;
                        if !view.reads_events() {
                            once.push((view, r));
                        }
                        r
                    }
                };
                let row = StudyRow {
                    variant,
                    delay_ms,
                    view,
                    routing,
                };
                done(&row);
                rows.push(row);
            }
        }
    }
    rows
}

/// What the study says against its targets, for one variant at one delay.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Targets {
    pub variant: Variant,
    pub delay_ms: u64,
    /// Hit rates of events-only and the oracle.
    pub events_only: f64,
    pub oracle: f64,
    /// Of the hit-rate gap between events-only and the oracle, the share events+predictions
    /// recovers (target: at least 0.5); `None` without that view or without a gap.
    pub gap_recovered: Option<f64>,
    /// Predictions-only's hit rate over events-only's (target: at least 0.8); `None` without
    /// that view.
    pub event_free_ratio: Option<f64>,
}

/// The targets of each variant at `delay_ms`, from the rows that have events-only and the
/// oracle.
pub fn targets(rows: &[StudyRow], delay_ms: u64) -> Vec<Targets> {
    let mut out = Vec::new();
    for variant in [Variant::Trace, Variant::Bursty] {
        let rate = |view: View| {
            rows.iter()
                .find(|r| r.variant == variant && r.delay_ms == delay_ms && r.view == view)
                .map(|r| r.routing.hit_rate())
        };
        let (Some(events_only), Some(oracle)) = (rate(View::EventsOnly), rate(View::Oracle)) else {
            continue;
        };
        let gap = oracle - events_only;
        out.push(Targets {
            variant,
            delay_ms,
            events_only,
            oracle,
            gap_recovered: rate(View::EventsPredictions)
                .filter(|_| gap > 0.0)
                .map(|r| (r - events_only) / gap),
            event_free_ratio: rate(View::PredictionsOnly)
                .filter(|_| events_only > 0.0)
                .map(|r| r / events_only),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ttl::DEFAULT_EVENT_FREE_TTL;

    fn row(variant: Variant, delay_ms: u64, view: View, hit: u64) -> StudyRow {
        StudyRow {
            variant,
            delay_ms,
            view,
            routing: Routing {
                prompt_blocks: 100,
                hit_blocks: hit,
                ..Routing::default()
            },
        }
    }

    #[test]
    fn targets_are_read_at_the_delay_asked_per_variant() {
        let rows = [
            row(Variant::Trace, 0, View::EventsOnly, 60),
            row(Variant::Trace, 0, View::Oracle, 60),
            row(Variant::Trace, 50, View::EventsOnly, 40),
            row(Variant::Trace, 50, View::Oracle, 60),
            row(Variant::Bursty, 50, View::EventsOnly, 10),
        ];
        let t = targets(&rows, 50);
        assert_eq!(t.len(), 1, "bursty has no oracle row: no targets");
        assert_eq!((t[0].variant, t[0].delay_ms), (Variant::Trace, 50));
        assert_eq!((t[0].events_only, t[0].oracle), (0.4, 0.6));
        assert!(targets(&rows, 500).is_empty());
    }

    #[test]
    fn views_that_ignore_events_are_simulated_once_per_variant() {
        let trace: Vec<Request> = (0..6)
            .map(|i| Request {
                timestamp: i * 3,
                input_length: 1024,
                output_length: 4,
                hash_ids: vec![0, i + 1],
            })
            .collect();
        let base = SimConfig {
            workers: 3,
            blocks_per_worker: 64,
            length_factor: 2,
            duplication: 1,
            seed: 5,
            policy: crate::sim::Policy::KvCost,
            router_index: crate::sim::RouterIndex::Positional,
            decode_ms_per_token: 1.0,
            engine_hash: crate::sim::EngineHash::Shared,
            host_blocks_per_worker: 0,
            host_weight: 0.8,
            view: View::EventsOnly,
            event_delay_ms: 0,
            predict_ttl_ms: 1000,
            event_free_ttl: DEFAULT_EVENT_FREE_TTL,
        };
        let mut simulated = 0;
        let bursts = Bursts {
            size: 3,
            window_ms: 2,
        };
        let rows = run(&trace, &base, &[0, 50], &View::ALL, bursts, |_| {
            simulated += 1
        });
        assert_eq!(
            simulated,
            2 * 2 * View::ALL.len(),
            "one row per combination"
        );
        let keys: Vec<(Variant, u64, View)> = rows
            .iter()
            .map(|r| (r.variant, r.delay_ms, r.view))
            .collect();
        assert_eq!(keys[0], (Variant::Trace, 0, View::EventsOnly));
        assert_eq!(*keys.last().unwrap(), (Variant::Bursty, 50, View::Oracle));
        let oracle: Vec<&StudyRow> = rows.iter().filter(|r| r.view == View::Oracle).collect();
        assert_eq!(
            oracle[0].routing, oracle[1].routing,
            "trace: same at 0 and 50"
        );
        assert_eq!(oracle[2].routing.requests, 18, "bursty: 3 per request");
        // Each row is what a simulation of its own settings gives.
        for r in &rows {
            let requests = match r.variant {
                Variant::Trace => trace.clone(),
                Variant::Bursty => bursty(&trace, 3, 2),
            };
            let cfg = SimConfig {
                view: r.view,
                event_delay_ms: r.delay_ms,
                ..base
            };
            assert_eq!(simulate(&requests, &cfg).routing, r.routing, "{r:?}");
        }
    }
}
