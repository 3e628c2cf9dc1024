//! One engine publisher (one DP rank): a SUB socket on its PUB endpoint, an optional DEALER
//! on its replay endpoint, and an [`EngineFeed`] that applies its batches to the shared index.
//!
//! Reaction to sequence anomalies (see docs/engine-events.md):
//! - gap with a replay socket: fetch from the first missing sequence (0 when the publisher's
//!   first batch is above 0: it published before the subscriber connected), apply in order,
//!   then drop the live batches the replay already covered;
//! - gap without replay, or a replay that no longer covers the range: the feed clears the
//!   worker before applying (the index must not keep blocks whose removal may be lost);
//! - restart (sequence going backwards): the feed clears the worker.
//!
//! Connections: the PUB endpoint is connected to again (50 ms backoff, doubling) after a
//! failed connection or a lost one, the replay endpoint after a failed replay.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::replay::{self, ReplayLimits};
use crate::zmtp::{self, Connection, SocketType};
use kvidx::engine::{parse_seq_frame, EngineFeed, FeedConfig, Format, SeqStatus};
use kvidx::{Indexer, Worker};

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
    /// Gaps seen on the live stream, a first batch above 0 included (each answered by a
    /// replay request when possible).
    pub gaps_detected: u64,
    /// Batches obtained from the replay socket and applied.
    pub replayed: u64,
    /// Live batches dropped because a replay had already applied them.
    pub duplicates: u64,
    /// Replay requests that failed (the feed then cleared the worker).
    pub replay_failures: u64,
    /// Connections made to the PUB endpoint (the first one included).
    pub connects: u64,
    /// Attempts to connect to the PUB endpoint that failed (refused, not ZMTP, timed out).
    pub connect_failures: u64,
    /// Live connections lost (a receive error); each is followed by a new connection.
    pub disconnects: u64,
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
    /// Longest wait for one connection (TCP and ZMTP handshake) to an endpoint.
    pub connect_timeout: Duration,
    /// Longest wait between two attempts to connect (the wait doubles from 50 ms up to it).
    pub max_backoff: Duration,
}

/// Connects to a PUB endpoint and subscribes to `topic`, within `timeout`.
pub(crate) async fn connect_sub(
    endpoint: &str,
    topic: &str,
    limits: zmtp::Limits,
    timeout: Duration,
) -> Result<Connection, String> {
    let mut sub = Connection::connect(endpoint, SocketType::Sub, limits, timeout).await?;
    sub.subscribe(topic.as_bytes())
        .await
        .map_err(|e| format!("{endpoint}: subscribe: {e}"))?;
    Ok(sub)
}

/// Subscribes and applies batches until idle or the deadline. A PUB endpoint that refuses
/// the connection, answers with something other than ZMTP (raw TCP junk) or drops the
/// connection is connected to again, with a backoff, until the deadline; so is the replay
/// endpoint, at the next gap, after a failed replay.
pub async fn run(
    source: Source,
    topic: String,
    format: Format,
    indexer: Arc<Indexer>,
    timing: Timing,
    limits: zmtp::Limits,
    replay_limits: ReplayLimits,
) -> Result<Report, String> {
    let mut sub: Option<Connection> = None;
    let mut dealer: Option<Connection> = None;
    let mut backoff = INITIAL_BACKOFF;
    let mut feed = EngineFeed::new(FeedConfig::new(format));
    let worker = source.worker;
    let mut report = Report::default();
    // Live sequences in (lo, hi] were already applied from the replay socket.
    let mut covered: Option<(u64, u64)> = None;
    let mut last_message: Option<Instant> = None;
    loop {
        let now = Instant::now();
        // Stop at the deadline, or after `idle` without a message once one was received.
        let stop = match last_message {
            Some(t) => timing.deadline.min(t + timing.idle),
            None => timing.deadline,
        };
        if now >= stop {
            break;
        }
        let Some(socket) = sub.as_mut() else {
            match connect_sub(&source.endpoint, &topic, limits, timing.connect_timeout).await {
                Ok(s) => {
                    sub = Some(s);
                    report.connects += 1;
                }
                Err(e) => {
                    eprintln!("dp_rank {}: {e}; connecting again", worker.dp_rank);
                    report.connect_failures += 1;
                    let pause = backoff.min(stop.saturating_duration_since(Instant::now()));
                    tokio::time::sleep(pause).await;
                    backoff = (backoff * 2).min(timing.max_backoff);
                }
            }
            continue;
        };
        let message = match tokio::time::timeout(stop - now, socket.recv()).await {
            Err(_) => break,
            Ok(Err(e)) => {
                eprintln!(
                    "dp_rank {}: {}: {e}; connecting again",
                    worker.dp_rank, source.endpoint
                );
                report.disconnects += 1;
                sub = None; // dropping it closes the connection
                            // A peer that handshakes and then fails at once is not retried in a tight loop.
                let pause = backoff.min(stop.saturating_duration_since(Instant::now()));
                tokio::time::sleep(pause).await;
                backoff = (backoff * 2).min(timing.max_backoff);
                continue;
            }
            Ok(Ok(m)) => m,
        };
        last_message = Some(Instant::now());
        backoff = INITIAL_BACKOFF; // the connection works
        let frames = message;
        if !frames[0].starts_with(topic.as_bytes()) {
            continue; // a publisher need not filter
        }
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
        // A publisher's sequence starts at 0: a first batch above 0 is missing batches too.
        let (expected, got) = (feed.next_expected(worker), seq);
        if got > expected {
            report.gaps_detected += 1;
            if let Some(endpoint) = &source.replay {
                if dealer.is_none() {
                    let connected = Connection::connect(
                        endpoint,
                        SocketType::Dealer,
                        limits,
                        timing.connect_timeout,
                    );
                    match connected.await {
                        Ok(d) => dealer = Some(d),
                        Err(e) => eprintln!("dp_rank {}: replay {e}", worker.dp_rank),
                    }
                }
                let fetched = match dealer.as_mut() {
                    Some(d) => replay::fetch(d, expected, &replay_limits).await,
                    None => Err("replay: not connected".to_string()),
                };
                match fetched {
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
                        // The rest of a failed reply may still come: use a new socket next time.
                        dealer = None;
                    }
                }
            }
        }
        apply(&mut feed, &indexer, worker, seq, &frames[2]);
    }
    indexer.flush().map_err(|e| e.to_string())?;
    report.stats = feed.stats();
    Ok(report)
}

/// The first wait before connecting again to an endpoint (after a failed or lost connection;
/// it doubles up to `Timing::max_backoff` until a message arrives).
const INITIAL_BACKOFF: Duration = Duration::from_millis(50);

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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use kvidx::Config;
    use std::io::Write;
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use zeromq::{PubSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

    /// A vLLM 0.33 batch of 3 events (the committed engine fixture).
    const BATCH: &[u8] =
        include_bytes!("../../../tests/fixtures/engine/vllm_annotated_0_33.msgpack");

    /// Copies bytes both ways between two connections until either ends.
    fn splice(a: TcpStream, b: TcpStream) {
        let (mut a2, mut b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
        let (mut a, mut b) = (a, b);
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut a2, &mut b2);
            let _ = b2.shutdown(Shutdown::Both);
        });
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut b, &mut a);
            let _ = a.shutdown(Shutdown::Both);
        });
    }

    /// The endpoint answers raw TCP junk to the first connections, then carries the ZMTP
    /// stream of a real publisher, cuts that connection once, and carries it again: the
    /// subscriber must connect again each time and apply batches after the cut.
    #[tokio::test]
    async fn connects_again_after_raw_tcp_junk_and_a_cut() {
        let mut publisher = PubSocket::new();
        let upstream = publisher
            .bind("tcp://127.0.0.1:0")
            .await
            .unwrap()
            .to_string();
        let upstream = upstream.trim_start_matches("tcp://").to_string();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let front = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let cut_done = Arc::clone(&cut);
        const JUNK_CONNECTIONS: usize = 3;
        std::thread::spawn(move || {
            for (i, conn) in listener.incoming().take(50).enumerate() {
                let Ok(mut conn) = conn else { continue };
                if i < JUNK_CONNECTIONS {
                    let _ =
                        conn.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n\xff\x00\x13junk junk");
                    continue; // dropped: closed
                }
                let up = TcpStream::connect(&upstream).unwrap();
                if i == JUNK_CONNECTIONS {
                    let (c, u) = (conn.try_clone().unwrap(), up.try_clone().unwrap());
                    let cut_done = Arc::clone(&cut_done);
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_millis(500));
                        let _ = c.shutdown(Shutdown::Both);
                        let _ = u.shutdown(Shutdown::Both);
                        cut_done.store(true, Ordering::SeqCst);
                    });
                }
                splice(conn, up);
            }
        });

        let indexer = Arc::new(Indexer::new(Config::default()).unwrap());
        let timing = Timing {
            idle: Duration::from_secs(2),
            deadline: Instant::now() + Duration::from_secs(30),
            connect_timeout: Duration::from_secs(1),
            max_backoff: Duration::from_millis(200),
        };
        let source = Source {
            endpoint: format!("tcp://{front}"),
            replay: None,
            worker: Worker::new(7, 0),
        };
        let task = tokio::spawn(run(
            source,
            String::new(),
            Format::Vllm,
            Arc::clone(&indexer),
            timing,
            zmtp::Limits::default(),
            ReplayLimits::default(),
        ));
        // Publish a batch every 20 ms until batches are applied after the cut (at most 20 s).
        let start = Instant::now();
        let mut applied_at_cut = None;
        let mut seq = 0u64;
        while start.elapsed() < Duration::from_secs(20) {
            let mut m = ZmqMessage::from(Bytes::from_static(b"kv@pod@model"));
            m.push_back(Bytes::copy_from_slice(&seq.to_be_bytes()));
            m.push_back(Bytes::from_static(BATCH));
            publisher.send(m).await.unwrap();
            seq += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
            indexer.flush().unwrap();
            let applied = indexer.stats().events_applied;
            if cut.load(Ordering::SeqCst) {
                match applied_at_cut {
                    None => applied_at_cut = Some(applied),
                    Some(at_cut) if applied >= at_cut + 6 => break,
                    Some(_) => {}
                }
            }
        }
        let report = task
            .await
            .unwrap()
            .expect("the subscriber must not give up");
        let at_cut = applied_at_cut.expect("the connection was never cut");
        assert!(
            indexer.stats().events_applied >= at_cut + 6,
            "no batch applied after the cut: {report:?}"
        );
        assert!(
            report.connect_failures >= JUNK_CONNECTIONS as u64,
            "{report:?}"
        );
        assert!(
            report.connects >= 1 && report.stats.batches >= 4,
            "{report:?}"
        );
    }

    /// A PUB socket on a free port and its endpoint.
    async fn engine_pub() -> (PubSocket, String) {
        let mut publisher = PubSocket::new();
        let endpoint = publisher.bind("tcp://127.0.0.1:0").await.unwrap();
        (publisher, endpoint.to_string())
    }

    /// A ROUTER replay socket on a free port and its endpoint.
    async fn replay_router() -> (zeromq::RouterSocket, String) {
        let mut router = zeromq::RouterSocket::new();
        let endpoint = router.bind("tcp://127.0.0.1:0").await.unwrap();
        (router, endpoint.to_string())
    }

    /// One replay reply to the DEALER `id`, in vLLM's older layout `["", seq, payload]`.
    fn replay_reply(id: &Bytes, seq: u64, payload: &'static [u8]) -> ZmqMessage {
        let mut m = ZmqMessage::from(id.clone());
        m.push_back(Bytes::new());
        m.push_back(Bytes::copy_from_slice(&seq.to_be_bytes()));
        m.push_back(Bytes::from_static(payload));
        m
    }

    /// One live batch `seq` (the fixture) on the PUB.
    fn live(seq: u64) -> ZmqMessage {
        let mut m = ZmqMessage::from(Bytes::from_static(b"kv@pod@model"));
        m.push_back(Bytes::copy_from_slice(&seq.to_be_bytes()));
        m.push_back(Bytes::from_static(BATCH));
        m
    }

    /// Runs the subscriber for worker 7 rank 0 on `endpoint` with the replay socket `replay`
    /// until 1 s without a message.
    fn subscriber(
        endpoint: String,
        replay: String,
        indexer: &Arc<Indexer>,
        limits: ReplayLimits,
    ) -> tokio::task::JoinHandle<Result<Report, String>> {
        let timing = Timing {
            idle: Duration::from_secs(1),
            deadline: Instant::now() + Duration::from_secs(30),
            connect_timeout: Duration::from_secs(1),
            max_backoff: Duration::from_millis(200),
        };
        let source = Source {
            endpoint,
            replay: Some(replay),
            worker: Worker::new(7, 0),
        };
        tokio::spawn(run(
            source,
            String::new(),
            Format::Vllm,
            Arc::clone(indexer),
            timing,
            zmtp::Limits::default(),
            limits,
        ))
    }

    /// The publisher sent batches before the subscriber connected: its first batch seen is
    /// above 0, so the subscriber asks the replay socket from 0 and applies every batch.
    #[tokio::test]
    async fn a_first_batch_above_0_is_replayed_from_0() {
        let (mut publisher, endpoint) = engine_pub().await;
        let (mut router, replay_endpoint) = replay_router().await;
        const HELD: u64 = 40; // the engine's replay buffer: batches 0-39
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let asked = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok(request) = router.recv().await {
                let request = request.into_vec();
                let start = u64::from_be_bytes(request[2][..8].try_into().unwrap());
                asked.lock().unwrap().push(start);
                for seq in start..HELD {
                    let _ = router.send(replay_reply(&request[0], seq, BATCH)).await;
                }
                let _ = router.send(replay_reply(&request[0], u64::MAX, b"")).await;
            }
        });
        let indexer = Arc::new(Indexer::new(Config::default()).unwrap());
        let task = subscriber(endpoint, replay_endpoint, &indexer, ReplayLimits::default());
        // Batches 0-4 went out before the subscriber was there; 5, 6, ... until one arrives.
        let mut seq = 5u64;
        let start = Instant::now();
        while indexer.stats().events_applied == 0 && start.elapsed() < Duration::from_secs(10) {
            publisher.send(live(seq)).await.unwrap();
            seq += 1;
            assert!(seq < HELD, "no batch arrived");
            tokio::time::sleep(Duration::from_millis(50)).await;
            indexer.flush().unwrap();
        }
        let report = task.await.unwrap().unwrap();
        assert_eq!(requests.lock().unwrap()[..], [0], "{report:?}");
        assert_eq!(report.gaps_detected, 1, "{report:?}");
        assert_eq!(
            report.replayed, HELD,
            "every batch the replay held: {report:?}"
        );
        let s = report.stats;
        assert_eq!(
            (s.batches, s.gaps, s.late_starts),
            (HELD, 0, 0),
            "{report:?}"
        );
        assert_eq!(s.workers_cleared, 0, "{report:?}");
    }

    /// A replay endpoint that never ends its reply: the replay fails at the batch limit, the
    /// worker is cleared as without replay, and the next gap is replayed on a new connection.
    #[tokio::test]
    async fn a_replay_that_never_ends_fails_and_the_next_one_works() {
        let (mut publisher, endpoint) = engine_pub().await;
        let (mut router, replay_endpoint) = replay_router().await;
        // First request: batches without end (bounded at 100k). Second: one batch and the end.
        tokio::spawn(async move {
            let request = router.recv().await.unwrap().into_vec();
            for seq in 0..100_000u64 {
                if router
                    .send(replay_reply(&request[0], seq, BATCH))
                    .await
                    .is_err()
                {
                    break;
                }
            }
            let request = router.recv().await.unwrap().into_vec();
            let start = u64::from_be_bytes(request[2][..8].try_into().unwrap());
            let _ = router.send(replay_reply(&request[0], start, BATCH)).await;
            let _ = router.send(replay_reply(&request[0], u64::MAX, b"")).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        let indexer = Arc::new(Indexer::new(Config::default()).unwrap());
        let limits = ReplayLimits {
            max_batches: 50,
            ..ReplayLimits::default()
        };
        let task = subscriber(endpoint, replay_endpoint, &indexer, limits);
        // Sequences 0 (until the subscription is in), then 2 (gap: endless replay), 3, 5 (gap:
        // a good replay of 4).
        let start = Instant::now();
        while indexer.stats().events_applied == 0 && start.elapsed() < Duration::from_secs(10) {
            publisher.send(live(0)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
            indexer.flush().unwrap();
        }
        for seq in [2, 3, 5] {
            publisher.send(live(seq)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let report = task.await.unwrap().unwrap();
        assert_eq!(report.gaps_detected, 2, "{report:?}");
        assert_eq!(report.replay_failures, 1, "{report:?}");
        assert_eq!(report.replayed, 1, "{report:?}");
        assert_eq!(report.stats.workers_cleared, 1, "{report:?}");
    }
}
