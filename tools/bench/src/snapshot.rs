//! `kvidx-bench snapshot`: the snapshot figures of docs/bench.md. Applies a workload's events
//! to each backend (synchronously), then times writing the final state as a snapshot into
//! memory and restoring it into a fresh indexer, reports bytes per held (worker, block), and
//! checks that the restored index answers the workload's queries exactly as the original.

use std::time::{Duration, Instant};

use kvidx::{BackendKind, Config, Indexer};

use crate::cli::SnapshotArgs;
use crate::workload::{read_workload, Op, TimedOp};

/// Runs `kvidx-bench snapshot`.
pub fn run(args: &SnapshotArgs) -> Result<(), String> {
    let ops = read_workload(&args.workload)?;
    let queries: Vec<&Vec<u64>> = ops
        .iter()
        .filter_map(|op| match &op.op {
            Op::Match(q) => Some(q),
            Op::Event(_) => None,
        })
        .collect();
    let step = (queries.len() / args.check_queries.max(1)).max(1);
    let checked: Vec<&Vec<u64>> = queries.iter().step_by(step).copied().collect();
    println!(
        "workload {}: {} ops; median of {} runs each",
        args.workload.display(),
        ops.len(),
        args.repeat
    );
    println!(
        "{:<11} {:>8} {:>10} {:>12} {:>10} {:>10} {:>11} {:>13} {:>9}",
        "backend",
        "workers",
        "pairs",
        "bytes",
        "bytes/pair",
        "write ms",
        "restore ms",
        "cross-restore",
        "answers"
    );
    for &kind in &args.backends {
        let kind = backend(kind)?;
        let original = build(kind, &ops)?;
        let mut bytes = Vec::new();
        let mut info = None;
        let mut writes = Vec::new();
        for _ in 0..args.repeat.max(1) {
            bytes = Vec::with_capacity(bytes.capacity());
            let start = Instant::now();
            info = Some(
                original
                    .write_snapshot(&mut bytes)
                    .map_err(|e| e.to_string())?,
            );
            writes.push(start.elapsed());
        }
        let info = info.expect("at least one run");
        let mut restores = Vec::new();
        let mut restored = None;
        for _ in 0..args.repeat.max(1) {
            drop(restored.take());
            let fresh = indexer(kind)?;
            let start = Instant::now();
            fresh
                .restore_snapshot(bytes.as_slice())
                .map_err(|e| e.to_string())?;
            restores.push(start.elapsed());
            restored = Some(fresh);
        }
        let restored = restored.expect("at least one run");
        let same = checked
            .iter()
            .filter(|q| original.find_matches(q) == restored.find_matches(q))
            .count();
        let other = match kind {
            BackendKind::Radix => BackendKind::Positional,
            _ => BackendKind::Radix,
        };
        let (cross, refusal) = match indexer(other)?.restore_snapshot(bytes.as_slice()) {
            Ok(_) => ("ok", None),
            Err(e) => ("refused", Some(e)),
        };
        println!(
            "{:<11} {:>8} {:>10} {:>12} {:>10.2} {:>10.1} {:>11.1} {:>13} {:>9}",
            format!("{kind:?}").to_lowercase(),
            info.workers,
            info.blocks,
            info.bytes,
            info.bytes as f64 / info.blocks.max(1) as f64,
            median_ms(&mut writes),
            median_ms(&mut restores),
            cross,
            format!("{same}/{}", checked.len()),
        );
        if let Some(e) = refusal {
            println!("  (into {other:?}: {e})");
        }
        if same != checked.len() {
            return Err(format!("{kind:?}: restored answers differ"));
        }
    }
    Ok(())
}

fn backend(name: crate::target::Subject) -> Result<BackendKind, String> {
    match name {
        crate::target::Subject::Positional => Ok(BackendKind::Positional),
        crate::target::Subject::Radix => Ok(BackendKind::Radix),
        crate::target::Subject::Runs => Ok(BackendKind::Runs),
        other => Err(format!("{other:?} has no snapshots")),
    }
}

fn indexer(kind: BackendKind) -> Result<Indexer, String> {
    Indexer::new(Config {
        backend: kind,
        event_threads: 0,
        ..Config::default()
    })
    .map_err(|e| e.to_string())
}

/// An indexer holding the final state of the workload's events.
fn build(kind: BackendKind, ops: &[TimedOp]) -> Result<Indexer, String> {
    let index = indexer(kind)?;
    for op in ops {
        if let Op::Event(event) = &op.op {
            // A rejected Stored is part of the workload; only the final state matters here.
            let _ = index.apply_event(event.clone());
        }
    }
    Ok(index)
}

fn median_ms(times: &mut [Duration]) -> f64 {
    times.sort_unstable();
    times[times.len() / 2].as_secs_f64() * 1e3
}
