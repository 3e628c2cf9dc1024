//! One engine publisher (one DP rank): a SUB socket on its PUB endpoint, an optional DEALER
//! on its replay endpoint, and an [`EngineFeed`] that applies its batches to the shared index.
//!
//! Reaction to sequence anomalies (see docs/engine-events.md):
//! - gap with a replay socket: fetch from the first missing sequence, apply in order, then
//!   drop the live batches the replay already covered;
//! - gap without replay, or a replay that no longer covers the range: the feed clears the
//!   worker before applying (the index must not keep blocks whose removal may be lost);
//! - restart (sequence going backwards): the feed clears the worker.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvidx::engine::{parse_seq_frame, EngineFeed, FeedConfig, Format, SeqStatus};
use kvidx::{Indexer, Worker};
use zeromq::{DealerSocket, Socket, SocketRecv, SubSocket};

use crate::replay;

/// Where one publisher is and who it is.
#[derive(Debug, Clone)]
pub struct Source {
    /// The PUB endpoint (`tcp://host:port`).
    pub endpoint: String,
    /// The ROUTER replay endpoint, if the engine has one.
    pub replay: Option<String>,
    /// The worker its batches are applied to.
    pub worker: Worker,
}

/// What happened on one publisher.
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Live messages that were not 3 frames with an 8-byte sequence.
    pub bad_frames: u64,
    /// Gaps seen on the live stream (each answered by a replay request when possible).
    pub gaps_detected: u64,
    /// Batches obtained from the replay socket and applied.
    pub replayed: u64,
    /// Live batches dropped because a replay had already applied them.
    pub duplicates: u64,
    /// Replay requests that failed (the feed then cleared the worker).
    pub replay_failures: u64,
    /// The feed's counters.
    pub stats: kvidx::engine::EngineStats,
}

/// Timing of the loop.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Stop after this long without a message (once one was received).
    pub idle: Duration,
    /// Stop at this instant in any case.
    pub deadline: Instant,
}

/// Subscribes and applies batches until idle or the deadline.
pub async fn run(
    source: Source,
    topic: String,
    format: Format,
    indexer: Arc<Indexer>,
    timing: Timing,
) -> Result<Report, String> {
    let mut sub = SubSocket::new();
    sub.connect(&source.endpoint)
        .await
        .map_err(|e| format!("{}: {e}", source.endpoint))?;
    sub.subscribe(&topic).await.map_err(|e| e.to_string())?;
    let mut dealer = match &source.replay {
        Some(endpoint) => {
            let mut d = DealerSocket::new();
            d.connect(endpoint)
                .await
                .map_err(|e| format!("{endpoint}: {e}"))?;
            Some(d)
        }
        None => None,
    };
    let mut feed = EngineFeed::new(FeedConfig::new(format));
    let worker = source.worker;
    let mut report = Report::default();
    // Live sequences in (lo, hi] were already applied from the replay socket.
    let mut covered: Option<(u64, u64)> = None;
    let mut seen_any = false;
    loop {
        let now = Instant::now();
        if now >= timing.deadline {
            break;
        }
        let wait = if seen_any {
            timing.idle
        } else {
            timing.deadline - now
        };
        let message = match tokio::time::timeout(wait, sub.recv()).await {
            Err(_) => break,
            Ok(Err(e)) => return Err(format!("{}: {e}", source.endpoint)),
            Ok(Ok(m)) => m,
        };
        seen_any = true;
        let frames = message.into_vec();
        let seq = match frames.as_slice() {
            [_topic, seq, _payload] => parse_seq_frame(seq),
            _ => None,
        };
        let Some(seq) = seq else {
            report.bad_frames += 1;
            continue;
        };
        if let Some((lo, hi)) = covered {
            if seq > lo && seq <= hi {
                report.duplicates += 1;
                continue;
            }
            covered = None;
        }
        let status = feed.tracker().check(&worker, seq);
        if matches!(status, SeqStatus::Gap { .. }) && dealer.is_none() {
            report.gaps_detected += 1;
        }
        if let (SeqStatus::Gap { expected, got }, Some(d)) = (status, dealer.as_mut()) {
            report.gaps_detected += 1;
            match replay::fetch(d, expected, Duration::from_secs(2)).await {
                Ok(batches) => {
                    let mut last = None;
                    for batch in batches.into_iter().filter(|b| b.seq >= expected) {
                        apply(&mut feed, &indexer, worker, batch.seq, &batch.payload);
                        report.replayed += 1;
                        last = Some(batch.seq);
                    }
                    if let Some(last) = last.filter(|&last| last >= got) {
                        covered = Some((got, last));
                        continue;
                    }
                }
                Err(e) => {
                    eprintln!("dp_rank {}: {e}", worker.dp_rank);
                    report.replay_failures += 1;
                }
            }
        }
        apply(&mut feed, &indexer, worker, seq, &frames[2]);
    }
    indexer.flush().map_err(|e| e.to_string())?;
    report.stats = feed.stats();
    Ok(report)
}

fn apply(feed: &mut EngineFeed, indexer: &Indexer, worker: Worker, seq: u64, payload: &[u8]) {
    match feed.apply_message(
        indexer,
        worker.worker_id,
        Some(worker.dp_rank),
        Some(seq),
        payload,
    ) {
        Ok(r) => eprintln!(
            "dp_rank {} seq {seq}: {:?}{}, {} events, {} skipped",
            worker.dp_rank,
            r.seq.unwrap_or(SeqStatus::First),
            if r.cleared_worker {
                " (worker cleared)"
            } else {
                ""
            },
            r.events_submitted,
            r.skipped.total()
        ),
        Err(e) => eprintln!("dp_rank {} seq {seq}: {e}", worker.dp_rank),
    }
}
