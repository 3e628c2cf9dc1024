//! Snapshots and watermarks against the reference model.
//!
//! - Differential: a random stream (the differential tests' operations: collisions, several
//!   names per block, orphans, tiers, removals; events applied plainly or as offset batches)
//!   -> snapshot mid-stream -> restore into a fresh indexer of each backend, synchronous and
//!   pooled -> the same answers, counts and watermarks as the reference, and the same
//!   behaviour under more random operations. A snapshot of the restored index is the same
//!   bytes as the original (same backend).
//! - Idempotence: replaying an overlapping range of offset batches (directly, or after a
//!   restore) gives the state of applying each once, and counts exactly the replayed batches
//!   as skipped.
//! - Concurrency: a snapshot written while another thread applies batches restores to
//!   exactly the state after each worker's batches at or below its watermark.
//!
//! Cases per property: `KVIDX_PROPTEST_CASES` (default 24).

mod common;

use common::ops::{op_strategy, template_local, MAX_CHAIN};
use common::{reference_indexer, Op};
use kvidx::{
    BackendKind, BatchOutcome, Block, Config, Error, Event, EventData, Indexer, Worker, Write,
};
use proptest::prelude::*;
use std::sync::mpsc;

fn cases() -> u32 {
    std::env::var("KVIDX_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

fn config(backend: BackendKind, event_threads: usize, jump_size: usize) -> Config {
    Config {
        backend,
        event_threads,
        jump_size,
        queue_capacity: 4,
        queue_bytes: 0,
        ..Config::default()
    }
}

/// Sources and targets of the round trips: both backends, synchronous and pooled.
fn configs() -> Vec<(&'static str, Config)> {
    vec![
        (
            "positional(jump=3,sync)",
            config(BackendKind::Positional, 0, 3),
        ),
        (
            "positional(jump=32,threads=2)",
            config(BackendKind::Positional, 2, 32),
        ),
        ("radix(sync)", config(BackendKind::Radix, 0, 0)),
        ("radix(threads=2)", config(BackendKind::Radix, 2, 0)),
        ("runs(sync)", config(BackendKind::Runs, 0, 0)),
        ("runs(threads=2)", config(BackendKind::Runs, 2, 0)),
    ]
}

/// Every worker the operations name.
fn all_workers() -> Vec<Worker> {
    (0..3u64)
        .flat_map(|id| (0..2u32).map(move |rank| Worker::new(id, rank)))
        .collect()
}

/// The queries every comparison asks: every template prefix, every short query.
fn sweep() -> Vec<Vec<u64>> {
    let mut out: Vec<Vec<u64>> = (0..3)
        .map(|t| (0..MAX_CHAIN).map(|p| template_local(t, p)).collect())
        .collect();
    for a in 0..3 {
        out.push(vec![a]);
        for b in 0..3 {
            out.push(vec![a, b]);
            out.push(vec![a, b, (a + b) % 3]);
        }
    }
    out
}

/// Applies operation `i` of a stream: events at positions not divisible by 3 as one-event
/// offset batches at offset `i + 1`, the others plainly. Returns the synchronous outcome.
fn apply_op(ix: &Indexer, i: usize, op: &Op) -> Option<Result<bool, Error>> {
    let Op::Write(write) = op else {
        return None;
    };
    Some(match write {
        Write::Event(event) if i % 3 != 0 => ix
            .apply_batch_at(event.worker, i as u64 + 1, vec![event.clone()])
            .map(|o| {
                matches!(
                    o,
                    BatchOutcome::Applied { rejected: 0 } | BatchOutcome::Queued
                )
            }),
        other => ix.submit(other.clone()).map(|()| true),
    })
}

/// Asserts that `ix` answers exactly as the reference `model`: counts, watermarks, plain and
/// tiered answers over the sweep.
fn assert_same(ix: &Indexer, model: &Indexer, what: &str) {
    ix.flush().unwrap();
    let (got, want) = (ix.stats(), model.stats());
    assert_eq!(
        (got.workers, got.worker_blocks),
        (want.workers, want.worker_blocks),
        "{what}: counts"
    );
    for w in all_workers() {
        assert_eq!(
            ix.watermark(w),
            model.watermark(w),
            "{what}: watermark of {w:?}"
        );
    }
    for q in sweep() {
        assert_eq!(ix.find_matches(&q), model.find_matches(&q), "{what}: {q:?}");
        assert_eq!(
            ix.find_matches_tiered(&q),
            model.find_matches_tiered(&q),
            "{what}: tiered {q:?}"
        );
    }
}

fn round_trip(before: &[Op], after: &[Op]) {
    for (source_name, source_config) in configs() {
        let source = Indexer::new(source_config).unwrap();
        let model = reference_indexer();
        for (i, op) in before.iter().enumerate() {
            apply_op(&source, i, op);
            apply_op(&model, i, op);
        }
        source.flush().unwrap();
        let mut bytes = Vec::new();
        let info = source.write_snapshot(&mut bytes).unwrap();
        let stats = source.stats();
        assert_eq!(
            (info.workers, info.blocks),
            (stats.workers, stats.worker_blocks)
        );
        assert_eq!(info.bytes, bytes.len() as u64);
        let mut again = Vec::new();
        source.write_snapshot(&mut again).unwrap();
        assert_eq!(
            bytes, again,
            "{source_name}: snapshots of one state are the same bytes"
        );
        for (target_name, target_config) in configs() {
            let what = format!("{source_name} -> {target_name}");
            let target = Indexer::new(target_config).unwrap();
            match target.restore_snapshot(bytes.as_slice()) {
                Ok(restored) => assert_eq!(restored, info, "{what}"),
                Err(Error::InvalidArgument(_))
                    if source_config.backend == BackendKind::Positional
                        && matches!(
                            target_config.backend,
                            BackendKind::Radix | BackendKind::Runs
                        ) =>
                {
                    // Orphans known by identity only: refused whole, nothing restored.
                    assert_eq!(target.stats().workers, 0, "{what}");
                    continue;
                }
                Err(e) => panic!("{what}: {e}"),
            }
            assert_same(&target, &model, &format!("{what}: restored"));
            if target_config.backend == source_config.backend {
                let mut copy = Vec::new();
                target.write_snapshot(&mut copy).unwrap();
                assert_eq!(
                    copy, bytes,
                    "{what}: a restored state writes the same bytes"
                );
            }
            // The same behaviour afterwards: a second reference continues from the same ops.
            let model = reference_indexer();
            for (i, op) in before.iter().enumerate() {
                apply_op(&model, i, op);
            }
            for (i, op) in after.iter().enumerate() {
                let at = before.len() + i;
                let got = apply_op(&target, at, op);
                let want = apply_op(&model, at, op);
                if target_config.event_threads == 0 {
                    assert_eq!(got, want, "{what}: outcome of {op:?}");
                }
                if let Op::Query(q) = op {
                    target.flush().unwrap();
                    assert_eq!(
                        target.find_matches(q),
                        model.find_matches(q),
                        "{what}: {q:?}"
                    );
                }
            }
            assert_same(&target, &model, &format!("{what}: after more operations"));
        }
    }
}

/// Offset batches of several events of one worker, from a stream of operations: events are
/// grouped in runs of up to `group` consecutive events of one worker (removals dropped: they
/// are not part of a replayed stream).
fn batches_of(ops: &[Op], group: usize) -> Vec<(Worker, Vec<Event>)> {
    let mut out: Vec<(Worker, Vec<Event>)> = Vec::new();
    for op in ops {
        let Op::Write(Write::Event(event)) = op else {
            continue;
        };
        match out.last_mut() {
            Some((w, events)) if *w == event.worker && events.len() < group => {
                events.push(event.clone())
            }
            _ => out.push((event.worker, vec![event.clone()])),
        }
    }
    out
}

fn apply_batches(ix: &Indexer, batches: &[(Worker, Vec<Event>)], range: std::ops::Range<usize>) {
    for at in range {
        let (worker, events) = &batches[at];
        ix.apply_batch_at(*worker, at as u64 + 1, events.clone())
            .unwrap();
    }
    ix.flush().unwrap();
}

fn idempotent_replay(ops: &[Op], group: usize, cut: f64, back: f64) {
    let batches = batches_of(ops, group);
    let n = batches.len();
    let k = ((n as f64) * cut) as usize;
    let j = ((k as f64) * (1.0 - back)) as usize;
    let model = reference_indexer();
    apply_batches(&model, &batches, 0..n);
    for (name, config) in configs() {
        // Directly: 0..k, then j..n again.
        let ix = Indexer::new(config).unwrap();
        apply_batches(&ix, &batches, 0..k);
        apply_batches(&ix, &batches, j..n);
        assert_same(
            &ix,
            &model,
            &format!("{name}: replayed {j}..{n} after 0..{k}"),
        );
        let replica = ix.replica_stats();
        assert_eq!(replica.batches_skipped, (k - j) as u64, "{name}");
        assert_eq!(replica.batches_applied, n as u64, "{name}");
        let skipped_events: usize = batches[j..k].iter().map(|(_, e)| e.len()).sum();
        assert_eq!(replica.events_skipped, skipped_events as u64, "{name}");
        // Through a snapshot taken after 0..k: a new replica replays j..n.
        let mut bytes = Vec::new();
        let prefix = Indexer::new(config).unwrap();
        apply_batches(&prefix, &batches, 0..k);
        prefix.write_snapshot(&mut bytes).unwrap();
        let replica = Indexer::new(config).unwrap();
        replica.restore_snapshot(bytes.as_slice()).unwrap();
        apply_batches(&replica, &batches, j..n);
        assert_same(
            &replica,
            &model,
            &format!("{name}: restored after 0..{k}, replayed {j}..{n}"),
        );
        assert_eq!(replica.replica_stats().batches_skipped, (k - j) as u64);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn a_restored_snapshot_answers_and_behaves_as_the_original(
        before in prop::collection::vec(op_strategy(), 1..60),
        after in prop::collection::vec(op_strategy(), 0..40),
    ) {
        round_trip(&before, &after);
    }

    #[test]
    fn replaying_an_overlapping_range_of_batches_is_idempotent(
        ops in prop::collection::vec(op_strategy(), 1..80),
        group in 1usize..4,
        cut in 0.0f64..=1.0,
        back in 0.0f64..=1.0,
    ) {
        idempotent_replay(&ops, group, cut, back);
    }
}

#[test]
fn a_positional_snapshot_with_single_holes_restores_into_radix() {
    // A hole in the middle and the front block evicted: both parents are written as paths.
    let w = Worker::new(1, 0);
    let blocks: Vec<Block> = (0..8).map(|p| Block::new(10 + p, 100 + p)).collect();
    let positional = Indexer::new(config(BackendKind::Positional, 0, 0)).unwrap();
    positional
        .apply_event(Event::stored(w, 0, None, blocks.clone()))
        .unwrap();
    positional
        .apply_event(Event::removed(w, 1, vec![104, 100]))
        .unwrap();
    let mut bytes = Vec::new();
    positional.write_snapshot(&mut bytes).unwrap();
    let radix = Indexer::new(config(BackendKind::Radix, 0, 0)).unwrap();
    radix.restore_snapshot(bytes.as_slice()).unwrap();
    // Both behave as the original once the holes are filled again.
    for ix in [&positional, &radix] {
        assert!(ix.find_matches(&[10, 11, 12]).is_empty());
        ix.apply_event(Event::stored(w, 2, None, vec![blocks[0]]))
            .unwrap();
        assert_eq!(ix.find_matches(&[10, 11, 12, 13, 14, 15])[0].depth, 4);
        ix.apply_event(Event::stored(w, 3, Some(103), vec![blocks[4]]))
            .unwrap();
        assert_eq!(
            ix.find_matches(&[10, 11, 12, 13, 14, 15, 16, 17])[0].depth,
            8
        );
    }
    // The radix copy writes the same snapshot as a fresh positional one of the same history.
    let mut again = Vec::new();
    radix.write_snapshot(&mut again).unwrap();
    let mut original = Vec::new();
    positional.write_snapshot(&mut original).unwrap();
    assert_eq!(again, original);
}

#[test]
fn a_positional_orphan_without_a_known_path_is_refused_by_radix_only() {
    // Front eviction of two blocks: the third is an orphan whose parent's path is lost.
    let w = Worker::new(1, 0);
    let blocks: Vec<Block> = (0..4).map(|p| Block::new(10 + p, 100 + p)).collect();
    let positional = Indexer::new(config(BackendKind::Positional, 0, 0)).unwrap();
    positional
        .apply_event(Event::stored(w, 0, None, blocks))
        .unwrap();
    positional
        .apply_event(Event::removed(w, 1, vec![100]))
        .unwrap();
    positional
        .apply_event(Event::removed(w, 2, vec![101]))
        .unwrap();
    let mut bytes = Vec::new();
    positional.write_snapshot(&mut bytes).unwrap();
    let radix = Indexer::new(config(BackendKind::Radix, 0, 0)).unwrap();
    assert!(matches!(
        radix.restore_snapshot(bytes.as_slice()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(radix.stats().workers, 0);
    let copy = Indexer::new(config(BackendKind::Positional, 0, 1)).unwrap();
    copy.restore_snapshot(bytes.as_slice()).unwrap();
    // The orphans are kept: repairing the front restores the full depth.
    for ix in [&positional, &copy] {
        let front: Vec<Block> = (0..2).map(|p| Block::new(10 + p, 100 + p)).collect();
        ix.apply_event(Event::stored(w, 3, None, front)).unwrap();
        assert_eq!(ix.find_matches(&[10, 11, 12, 13])[0].depth, 4);
    }
    // The radix backend's own snapshot of the same history restores into either backend.
    let radix = Indexer::new(config(BackendKind::Radix, 0, 0)).unwrap();
    let blocks: Vec<Block> = (0..4).map(|p| Block::new(10 + p, 100 + p)).collect();
    radix
        .apply_event(Event::stored(w, 0, None, blocks))
        .unwrap();
    radix
        .apply_event(Event::removed(w, 1, vec![100, 101]))
        .unwrap();
    let mut bytes = Vec::new();
    radix.write_snapshot(&mut bytes).unwrap();
    for kind in [
        BackendKind::Positional,
        BackendKind::Radix,
        BackendKind::Runs,
    ] {
        let ix = Indexer::new(config(kind, 0, 0)).unwrap();
        ix.restore_snapshot(bytes.as_slice()).unwrap();
        assert!(ix.find_matches(&[10, 11, 12, 13]).is_empty());
        let front: Vec<Block> = (0..2).map(|p| Block::new(10 + p, 100 + p)).collect();
        ix.apply_event(Event::stored(w, 3, None, front)).unwrap();
        assert_eq!(ix.find_matches(&[10, 11, 12, 13])[0].depth, 4, "{kind:?}");
    }
}

#[test]
fn restore_needs_an_empty_indexer_and_bad_input_leaves_it_empty() {
    let w = Worker::new(3, 1);
    let source = Indexer::new(config(BackendKind::Positional, 0, 0)).unwrap();
    let blocks: Vec<Block> = (0..6).map(|p| Block::new(p, 50 + p)).collect();
    source
        .apply_batch_at(w, 9, vec![Event::stored(w, 0, None, blocks)])
        .unwrap();
    let mut bytes = Vec::new();
    source.write_snapshot(&mut bytes).unwrap();
    assert!(matches!(
        source.restore_snapshot(bytes.as_slice()),
        Err(Error::InvalidArgument(_))
    ));
    for kind in [
        BackendKind::Positional,
        BackendKind::Radix,
        BackendKind::Runs,
    ] {
        let ix = Indexer::new(config(kind, 1, 0)).unwrap();
        for cut in 0..bytes.len() {
            let result = ix.restore_snapshot(&bytes[..cut]);
            assert!(
                matches!(result, Err(Error::Malformed(_))),
                "{cut}: {result:?}"
            );
            assert_eq!(ix.stats().workers, 0);
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            let result = ix.restore_snapshot(bad.as_slice());
            assert!(
                matches!(result, Err(Error::Malformed(_))),
                "{at}: {result:?}"
            );
            assert_eq!((ix.stats().workers, ix.stats().worker_blocks), (0, 0));
        }
        // A reader that fails is an I/O error; the indexer stays empty and usable.
        struct Failing;
        impl std::io::Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("gone"))
            }
        }
        assert!(matches!(ix.restore_snapshot(Failing), Err(Error::Io(_))));
        ix.restore_snapshot(bytes.as_slice()).unwrap();
        assert_eq!(ix.watermark(w), Some(9));
        assert_eq!(ix.find_matches(&[0, 1, 2])[0].depth, 3);
        // Everything removed: empty again.
        ix.remove_worker(3).unwrap();
        ix.restore_snapshot(bytes.as_slice()).unwrap();
    }
    // The reference model has no snapshots.
    assert!(matches!(
        reference_indexer().write_snapshot(Vec::new()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_batch_is_checked_whole_and_makes_its_worker_known() {
    let ix = Indexer::new(config(BackendKind::Radix, 0, 0)).unwrap();
    let (w, other) = (Worker::new(1, 0), Worker::new(2, 0));
    assert!(matches!(
        ix.apply_batch_at(w, 0, vec![]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        ix.apply_batch_at(w, 1, vec![Event::cleared(other, 0)]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(ix.stats().workers, 0);
    // A rejected Stored (no parent) in an applied batch: counted, the worker known anyway.
    let orphan = Event::stored(w, 0, Some(7), vec![Block::new(1, 2)]);
    assert_eq!(
        ix.apply_batch_at(w, 4, vec![orphan]),
        Ok(BatchOutcome::Applied { rejected: 1 })
    );
    assert_eq!(ix.watermark(w), Some(4));
    assert_eq!((ix.stats().workers, ix.stats().events_rejected), (1, 1));
    assert_eq!(ix.apply_batch_at(w, 4, vec![]), Ok(BatchOutcome::Skipped));
    assert_eq!(ix.replica_stats().batches_skipped, 1);
}

/// A deterministic generator for the concurrency test.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

/// Batches over 6 workers: chains stored with parents, removals at any position, clears;
/// several events per batch, so a half-applied batch would show.
fn concurrent_batches(count: usize, seed: u64) -> Vec<(Worker, Vec<EventData>)> {
    let mut rng = Lcg(seed);
    (0..count)
        .map(|_| {
            let w = Worker::new(rng.next(3), rng.next(2) as u32);
            let events = (0..1 + rng.next(3))
                .map(|_| {
                    let template = rng.next(3);
                    let first = rng.next(40);
                    match rng.next(10) {
                        0 => EventData::Cleared,
                        1..=3 => EventData::Removed {
                            seq_hashes: (0..1 + rng.next(4))
                                .map(|_| (template << 16) | rng.next(60))
                                .collect(),
                            tier: None,
                        },
                        _ => EventData::Stored {
                            parent: (first > 0).then(|| (template << 16) | (first - 1)),
                            blocks: (first..first + 1 + rng.next(20))
                                .map(|p| {
                                    Block::new(template_local(template, p), (template << 16) | p)
                                })
                                .collect(),
                            tier: kvidx::Tier::Device,
                        },
                    }
                })
                .collect();
            (w, events)
        })
        .collect()
}

fn as_events(worker: Worker, data: &[EventData]) -> Vec<Event> {
    data.iter()
        .map(|d| Event {
            worker,
            event_id: 0,
            data: d.clone(),
        })
        .collect()
}

/// A snapshot's destination that pauses the snapshot once a worker's section has reached it
/// (that worker is taken): it says so on `paused`, then waits for `resume`.
struct PausingSink {
    bytes: Vec<u8>,
    paused: Option<mpsc::Sender<()>>,
    resume: mpsc::Receiver<()>,
}

/// Bytes of a snapshot's header: what reaches the sink before the first section.
const HEADER_BYTES: usize = 16;

impl std::io::Write for PausingSink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.bytes.len() + data.len() > HEADER_BYTES {
            if let Some(paused) = self.paused.take() {
                paused.send(()).unwrap();
                // An error: the writes ended without resuming; the overlap check reports it.
                let _ = self.resume.recv();
            }
        }
        self.bytes.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_snapshot_written_during_writes_holds_each_worker_at_its_watermark() {
    for (name, cfg) in configs() {
        for round in 0..4u64 {
            let what = format!("{name}, round {round}");
            let batches = concurrent_batches(3000, round * 7 + 1);
            let before = 200 + 300 * round as usize;
            let ix = std::sync::Arc::new(Indexer::new(cfg).unwrap());
            let (applied_tx, applied) = mpsc::channel();
            let (paused_tx, paused) = mpsc::channel();
            let (resume, resume_rx) = mpsc::channel();
            // The first batches, then (once the snapshot has taken a worker and waits) the rest.
            let writer = {
                let ix = std::sync::Arc::clone(&ix);
                let batches = batches.clone();
                std::thread::spawn(move || {
                    for (at, (w, data)) in batches.iter().enumerate() {
                        if at == before {
                            ix.flush().unwrap();
                            applied_tx.send(()).unwrap();
                            // An error: the snapshot never paused; the overlap check reports it.
                            let _ = paused.recv();
                        }
                        ix.apply_batch_at(*w, at as u64 + 1, as_events(*w, data))
                            .unwrap();
                    }
                    ix.flush().unwrap();
                    let _ = resume.send(());
                })
            };
            applied.recv().unwrap();
            let mut sink = PausingSink {
                bytes: Vec::new(),
                paused: Some(paused_tx),
                resume: resume_rx,
            };
            ix.write_snapshot(&mut sink).unwrap();
            let bytes = std::mem::take(&mut sink.bytes);
            drop(sink);
            writer.join().unwrap();
            let restored = Indexer::new(config(BackendKind::Positional, 0, 2)).unwrap();
            restored.restore_snapshot(bytes.as_slice()).unwrap();
            // The expected state: every worker's batches at or below its watermark.
            let model = reference_indexer();
            let mut last_offset = std::collections::HashMap::new();
            for (at, (w, data)) in batches.iter().enumerate() {
                let offset = at as u64 + 1;
                last_offset.insert(*w, offset);
                if restored.watermark(*w).is_some_and(|wm| offset <= wm) {
                    model
                        .apply_batch_at(*w, offset, as_events(*w, data))
                        .unwrap();
                }
            }
            assert_same(&restored, &model, &what);
            assert!(restored.stats().workers > 0, "{what}: no worker restored");
            // The worker taken before the pause got batches after its section: the snapshot
            // holds it at a watermark below its last one.
            let overlapped = last_offset
                .iter()
                .any(|(w, &last)| restored.watermark(*w).is_some_and(|wm| wm < last));
            assert!(overlapped, "{what}: no worker was taken mid-stream");
        }
    }
}
