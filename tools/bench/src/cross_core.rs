//! The time a cache line takes to go from one core to another and back, measured beside the
//! figures.
//!
//! Under concurrent ingest, a lookup reads lines the event thread has just written, and each
//! such read waits for the line to come from the other core. On a virtual machine how long
//! that takes depends on where the host has placed the two virtual CPUs (on cores that share
//! a cache or not), and the host may move them while the figures are taken: on the machine
//! the project measures on, the round trip moved between about 60 and 630 ns over minutes,
//! and the find latencies of every index moved with it. The bench prints this round trip at
//! the start and the end of a run and before each round, so that latencies are read beside
//! it, and compared only within a round.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Round trips per batch.
const BATCH: u64 = 10_000;

/// Batches measured; the median batch is reported.
const BATCHES: usize = 5;

/// Spins on an unchanged line before a side yields its core (with one core, or a busy one,
/// the other side must get to run).
const SPINS_BEFORE_YIELD: u32 = 4_096;

/// The measurement stops after this long, whatever it has measured by then.
const BUDGET: Duration = Duration::from_millis(250);

/// Round trips between two looks at the clock for [`BUDGET`]: a clock read costs a few
/// tens of ns, as much as a fraction of the trip it would otherwise be timed with.
const BUDGET_EVERY: u64 = 64;

/// One counter alone on its cache lines (two lines: the adjacent-line prefetcher pairs them).
#[repr(align(128))]
#[derive(Default)]
struct Line(AtomicU64);

/// The two lines the sides write: the measuring side writes `ping`, the partner `pong`.
#[derive(Default)]
struct Lines {
    ping: Line,
    pong: Line,
    stop: AtomicBool,
}

/// Waits until `line` holds `value` (or `stop` is set); false if stopped.
fn wait_for(line: &Line, value: u64, stop: &AtomicBool) -> bool {
    let mut spins = 0u32;
    while line.0.load(Ordering::Acquire) != value {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        spins += 1;
        if spins == SPINS_BEFORE_YIELD {
            spins = 0;
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    true
}

/// The median over [`BATCHES`] batches of the mean time of one round trip of a cache line
/// between this thread and another, in nanoseconds; `None` when this process may use only
/// one core, or when not one batch finished within [`BUDGET`].
pub fn round_trip_ns() -> Option<f64> {
    measure(BATCH, BUDGET)
}

/// [`round_trip_ns`] with `batch` round trips per batch, stopping after `budget`.
fn measure(batch: u64, budget: Duration) -> Option<f64> {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        return None;
    }
    let lines = Arc::new(Lines::default());
    let partner = {
        let lines = Arc::clone(&lines);
        std::thread::spawn(move || {
            let mut round = 1u64;
            while wait_for(&lines.ping, round, &lines.stop) {
                lines.pong.0.store(round, Ordering::Release);
                round += 1;
            }
        })
    };
    let began = Instant::now();
    let mut batches = Vec::with_capacity(BATCHES);
    let mut round = 1u64;
    'batches: for _ in 0..BATCHES {
        let start = Instant::now();
        for _ in 0..batch {
            lines.ping.0.store(round, Ordering::Release);
            if !wait_for(&lines.pong, round, &lines.stop) {
                break 'batches;
            }
            round += 1;
            if round % BUDGET_EVERY == 0 && began.elapsed() > budget {
                break 'batches;
            }
        }
        batches.push(start.elapsed().as_nanos() as f64 / batch as f64);
    }
    lines.stop.store(true, Ordering::Relaxed);
    partner.join().ok()?;
    batches.sort_by(f64::total_cmp);
    batches.get(batches.len() / 2).copied()
}

/// `round_trip_ns` for the console: "112 ns", or "n/a".
pub fn shown(round_trip: Option<f64>) -> String {
    round_trip.map_or_else(|| "n/a".to_string(), |ns| format!("{ns:.0} ns"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// With two cores or more (as on CI) the round trip is measured, and it is a time. The
    /// budget is one no machine's speed reaches for a few batches of a hundred trips, however
    /// busy its cores: the test does not depend on how fast they are.
    #[test]
    fn a_round_trip_is_measured_with_two_cores() {
        let measured = measure(100, Duration::from_secs(600));
        if cores() < 2 {
            assert_eq!(measured, None);
            return;
        }
        let ns = measured.expect("two cores: measured");
        assert!(ns.is_finite() && ns > 0.0, "{ns}");
    }

    /// A spent budget stops the measurement before its first batch ends (the budget is
    /// looked at every [`BUDGET_EVERY`] trips, well within a batch), and nothing is reported.
    #[test]
    fn a_spent_budget_reports_nothing() {
        assert_eq!(measure(100 * BUDGET_EVERY, Duration::ZERO), None);
    }

    #[test]
    fn shown_names_a_missing_figure() {
        assert_eq!(shown(None), "n/a");
        assert_eq!(shown(Some(111.6)), "112 ns");
    }
}
