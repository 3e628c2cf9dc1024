//! The replay client: asks an engine's ROUTER replay socket for every buffered batch from a
//! sequence number on, as a DEALER (`["", start_seq]`), and reads the replies until the end
//! marker. Understands both reply layouts: vLLM >= 0.26 / SGLang `["", topic, seq, payload]`
//! and older vLLM `["", seq, payload]`.
//!
//! A reply is bounded in batches, bytes and time ([`ReplayLimits`]): a replay socket that
//! never ends its reply (or sends more than an engine's replay buffer could hold) makes the
//! fetch fail instead of growing memory without bound. After a failed fetch the DEALER may
//! still receive the rest of that reply, so the caller drops it and connects a new one.

use std::time::{Duration, Instant};

use bytes::Bytes;
use kvidx::engine::{parse_seq_frame, REPLAY_END_SEQ};

use crate::zmtp::Connection;

/// One replayed batch: its sequence number and payload.
pub struct Replayed {
    /// The batch's sequence number.
    pub seq: u64,
    /// The msgpack payload.
    pub payload: Bytes,
}

/// Bounds on one replay reply.
#[derive(Debug, Clone, Copy)]
pub struct ReplayLimits {
    /// Most batches one reply may carry (vLLM buffers 10,000 by default).
    pub max_batches: usize,
    /// Most bytes (all frames of all messages) one reply may carry.
    pub max_bytes: usize,
    /// Longest wait for each message of the reply.
    pub wait: Duration,
    /// Longest time for the whole reply, end marker included.
    pub total: Duration,
}

impl Default for ReplayLimits {
    fn default() -> Self {
        Self {
            max_batches: 10_000,
            max_bytes: 64 << 20,
            wait: Duration::from_secs(2),
            total: Duration::from_secs(10),
        }
    }
}

/// Requests the batches from `start_seq` on and returns them in the order received.
/// The replay may start later than asked (the buffer no longer holds the range): the
/// caller checks the first sequence number. Fails, keeping nothing, when the reply exceeds a
/// limit, a message does not arrive in time, or a message is not a replay reply.
pub async fn fetch(
    dealer: &mut Connection,
    start_seq: u64,
    limits: &ReplayLimits,
) -> Result<Vec<Replayed>, String> {
    let deadline = Instant::now() + limits.total;
    let request: [&[u8]; 2] = [b"", &start_seq.to_be_bytes()];
    tokio::time::timeout(limits.wait, dealer.send(&request))
        .await
        .map_err(|_| "replay request: not sent in time".to_string())?
        .map_err(|e| format!("replay request: {e}"))?;
    let mut out = Vec::new();
    let mut bytes = 0usize;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let reply = tokio::time::timeout(limits.wait.min(left), dealer.recv())
            .await
            .map_err(|_| {
                if left <= limits.wait {
                    format!("replay: no end marker within {:?}", limits.total)
                } else {
                    "replay: no end marker in time".to_string()
                }
            })?
            .map_err(|e| format!("replay: {e}"))?;
        bytes = bytes.saturating_add(reply.iter().map(|f| f.len()).sum::<usize>());
        let mut frames = reply;
        if bytes > limits.max_bytes {
            return Err(format!(
                "replay: reply larger than {} bytes (--replay-max-bytes)",
                limits.max_bytes
            ));
        }
        if frames.first().is_some_and(|f| f.is_empty()) {
            frames.remove(0);
        }
        let (seq_frame, payload) = match frames.len() {
            3 => (frames[1].clone(), frames[2].clone()),
            2 => (frames[0].clone(), frames[1].clone()),
            n => return Err(format!("replay: reply of {n} frames")),
        };
        let seq = parse_seq_frame(&seq_frame).ok_or("replay: sequence frame is not 8 bytes")?;
        if seq == REPLAY_END_SEQ {
            return Ok(out);
        }
        if out.len() == limits.max_batches {
            return Err(format!(
                "replay: more than {} batches (--replay-max-batches)",
                limits.max_batches
            ));
        }
        out.push(Replayed { seq, payload });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zmtp::{Limits, SocketType};
    use zeromq::{RouterSocket, Socket, SocketRecv, SocketSend, ZmqMessage};

    /// A ROUTER that answers the first request with `batches` batches of `size` bytes, one
    /// every `every`, and then (if `end`) the end marker; it returns its endpoint.
    async fn replay_server(batches: u64, size: usize, every: Duration, end: bool) -> String {
        let mut router = RouterSocket::new();
        let endpoint = router.bind("tcp://127.0.0.1:0").await.unwrap().to_string();
        tokio::spawn(async move {
            let request = router.recv().await.unwrap().into_vec();
            let identity = request[0].clone();
            let payload = Bytes::from(vec![0x90u8; size]);
            let frames = |seq: u64, payload: Bytes| {
                let mut m = ZmqMessage::from(identity.clone());
                m.push_back(Bytes::new());
                m.push_back(Bytes::copy_from_slice(&seq.to_be_bytes()));
                m.push_back(payload);
                m
            };
            for seq in 0..batches {
                if router.send(frames(seq, payload.clone())).await.is_err() {
                    return; // the client went away
                }
                if !every.is_zero() {
                    tokio::time::sleep(every).await;
                }
            }
            if end {
                let _ = router.send(frames(REPLAY_END_SEQ, Bytes::new())).await;
            }
            tokio::time::sleep(Duration::from_secs(30)).await; // keep the socket open
        });
        endpoint
    }

    async fn dealer(endpoint: &str) -> Connection {
        let limits = Limits::default();
        Connection::connect(endpoint, SocketType::Dealer, limits, Duration::from_secs(5))
            .await
            .unwrap()
    }

    fn limits(max_batches: usize, max_bytes: usize, total: Duration) -> ReplayLimits {
        ReplayLimits {
            max_batches,
            max_bytes,
            wait: Duration::from_secs(2),
            total,
        }
    }

    #[tokio::test]
    async fn a_complete_reply_is_returned_in_order() {
        let endpoint = replay_server(5, 16, Duration::ZERO, true).await;
        let mut d = dealer(&endpoint).await;
        let got = fetch(&mut d, 0, &limits(5, 1 << 20, Duration::from_secs(5)))
            .await
            .unwrap();
        let seqs: Vec<u64> = got.iter().map(|b| b.seq).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
    }

    #[tokio::test]
    async fn a_reply_that_never_ends_stops_at_the_batch_limit() {
        // 1M batches without an end marker: the fetch must stop at 100.
        let endpoint = replay_server(1_000_000, 64, Duration::ZERO, false).await;
        let mut d = dealer(&endpoint).await;
        let start = Instant::now();
        let err = fetch(&mut d, 0, &limits(100, 1 << 30, Duration::from_secs(20)))
            .await
            .err()
            .expect("an endless replay must fail");
        assert!(err.contains("more than 100 batches"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[tokio::test]
    async fn a_reply_that_never_ends_stops_at_the_byte_limit() {
        let endpoint = replay_server(1_000_000, 4096, Duration::ZERO, false).await;
        let mut d = dealer(&endpoint).await;
        let err = fetch(
            &mut d,
            0,
            &limits(1_000_000, 256 << 10, Duration::from_secs(20)),
        )
        .await
        .err()
        .expect("an endless replay must fail");
        assert!(err.contains("larger than 262144 bytes"), "{err}");
    }

    #[tokio::test]
    async fn a_slow_reply_that_never_ends_stops_at_the_deadline() {
        // One small batch every 20 ms forever: no limit in count or bytes is reached.
        let endpoint = replay_server(1_000_000, 16, Duration::from_millis(20), false).await;
        let mut d = dealer(&endpoint).await;
        let start = Instant::now();
        let err = fetch(
            &mut d,
            0,
            &limits(1_000_000, 1 << 30, Duration::from_millis(500)),
        )
        .await
        .err()
        .expect("an endless replay must fail");
        assert!(err.contains("no end marker within 500ms"), "{err}");
        let took = start.elapsed();
        assert!(
            took >= Duration::from_millis(450) && took < Duration::from_secs(5),
            "{took:?}"
        );
    }
}
