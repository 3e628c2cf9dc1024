//! The ZMQ side of one engine publisher: a SUB connection (connected again with a backoff
//! when refused or lost), sequence and epoch bookkeeping, replay, and the byte cap.
//!
//! Every connection begins an epoch, and so does a sequence going back within one (an engine
//! restart behind a proxy). An engine's sequence starts at 0, so the batches of an epoch are
//! expected from 0 on: a first batch above 0 (the engine published before this connection
//! was up, or while the bridge was reconnecting) is a gap like any jump within the epoch. With
//! a replay socket the bridge asks it for the missing batches, from 0 for the first batch of an
//! epoch, and never across epochs: the engine behind a new connection may be a new process
//! whose sequence started again, and its replay socket holds only its own batches.
//!
//! Each batch read is held (its payload and its own overhead, [`held`](super::held), counted
//! against `--max-buffer-bytes`) until JetStream acknowledges it. At the cap the reader stops
//! reading: the engine's PUB then queues up to its high-water mark and drops the rest for this
//! subscriber, which the bridge sees as a sequence gap when it reads again (counted in
//! `stalls`, `stall_ms`, `gaps`, `missed`), which the replay socket fills when it is given
//! (`--replay`) and still holds the range.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use kvidx::engine::{decode_batch, parse_seq_frame, Format};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use super::counters::{add, BridgeCounters, Counters};
use super::held;
use super::options::Endpoint;
use crate::publisher::connect_sub;
use crate::replay::{self, ReplayLimits, Replayed};
use crate::zmtp::{Connection, Limits, SocketType};

/// One batch on its way to JetStream.
#[derive(Debug)]
pub struct Batch {
    /// The engine's sequence number (the ZMQ sequence frame).
    pub seq: u64,
    /// The epoch it was read in.
    pub epoch: u64,
    /// The payload, byte for byte as the engine sent it.
    pub payload: Bytes,
    /// Its share of the byte cap, given back when the batch is acknowledged or dropped.
    pub _held: OwnedSemaphorePermit,
}

/// Hands out epochs: microseconds since the Unix epoch, strictly increasing within the
/// process, so that a new connection (or a restarted bridge, given a clock that does not go
/// back by more than its run time) never reuses an epoch and so never reuses a `Nats-Msg-Id`.
#[derive(Debug, Default)]
pub struct EpochClock {
    last: AtomicU64,
}

impl EpochClock {
    /// The next epoch.
    pub fn next(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match self
                .last
                .compare_exchange(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }
}

/// What the readers share.
pub struct Shared {
    /// The ZMQ topic prefix.
    pub topic: String,
    /// The engines' format (for the malformed count).
    pub format: Format,
    /// Bounds on one message.
    pub limits: Limits,
    /// Longest wait for one connection.
    pub connect_timeout: Duration,
    /// The byte cap: one permit per byte a held batch costs (payload and overhead).
    pub buffer: Arc<Semaphore>,
    /// The cap's size in bytes.
    pub buffer_cap: u64,
    /// Epochs.
    pub epochs: EpochClock,
    /// Bridge-wide counters.
    pub bridge: Arc<BridgeCounters>,
    /// Bounds on one replay reply.
    pub replay_limits: ReplayLimits,
}

const INITIAL_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// One reader's state: where the sequence and the epoch are, and where batches go.
struct Reader {
    name: String,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    out: mpsc::UnboundedSender<Batch>,
    stop: watch::Receiver<bool>,
    epoch: u64,
    /// The last sequence taken in this epoch (`None`: nothing yet, the next expected is 0).
    epoch_last: Option<u64>,
    /// The last sequence taken in any epoch (restart counts).
    last: Option<u64>,
}

impl Reader {
    /// Begins a new epoch (a new connection, or a sequence going back within one).
    fn new_epoch(&mut self) {
        self.epoch = self.shared.epochs.next();
        self.epoch_last = None;
        add(&self.counters.epochs, 1);
    }

    /// Looks at a live batch's sequence before anything is taken: counts a restart when the
    /// sequence went back (beginning a new epoch when it went back within this one) and
    /// returns the first sequence this epoch lacks before it (0 at the start of an epoch),
    /// if any: the gap to ask the replay socket for.
    fn arrive(&mut self, seq: u64) -> Option<u64> {
        if self.last.is_some_and(|prev| seq <= prev) {
            add(&self.counters.restarts, 1);
        }
        if self.epoch_last.is_some_and(|l| seq <= l) {
            // The sequence went back without a disconnect (a restart behind a proxy):
            // a new epoch keeps the message ids unique.
            self.new_epoch();
            eprintln!(
                "bridge: {}: sequence went back to {seq}, epoch {}",
                self.name, self.epoch
            );
        }
        let expected = self.expected();
        (seq > expected).then_some(expected)
    }

    /// The next sequence this epoch expects: 0 at its start (an engine's sequence starts at 0).
    fn expected(&self) -> u64 {
        self.epoch_last.map_or(0, |l| l.saturating_add(1))
    }

    /// Takes one batch of this epoch (its sequence above the last one taken): counts the gap
    /// before it, if any, holds its bytes (waiting at the cap) and queues it. `false` when the
    /// bridge is stopping.
    async fn take(&mut self, seq: u64, payload: &[u8]) -> bool {
        let c = &self.counters;
        let expected = self.expected();
        if seq > expected {
            add(&c.gaps, 1);
            add(&c.missed, seq - expected);
        }
        self.last = Some(seq);
        self.epoch_last = Some(seq);
        if decode_batch(self.shared.format, payload).is_err() {
            add(&c.malformed, 1);
        }
        let Some(held) = hold(&self.name, &self.shared, c, payload.len(), &mut self.stop).await
        else {
            add(&c.undelivered, 1); // taken from ZMQ, stopped before it could be held
            return false;
        };
        add(&c.received, 1);
        add(&c.received_bytes, payload.len() as u64);
        c.last_seq.store(seq, Ordering::Relaxed);
        let batch = Batch {
            seq,
            epoch: self.epoch,
            // Its own allocation of exactly its length: the frames it came in, and whatever
            // slack their buffers had, are freed now (see `held`).
            payload: Bytes::copy_from_slice(payload),
            _held: held,
        };
        self.out.send(batch).is_ok() // an error: the publishing side has gone (stopping)
    }
}

/// Reads `endpoint` until `stop` turns true, queueing every batch on `out`. On a sequence
/// gap within an epoch, a first batch above 0 included, when the endpoint has a replay
/// socket, the missing batches are asked for first and queued in order before the batch that
/// revealed the gap (those the replay no longer has stay a gap). The replay socket is
/// connected again for every epoch, so a replay always comes from the engine of the epoch.
pub async fn run(
    endpoint: Endpoint,
    shared: Arc<Shared>,
    counters: Arc<Counters>,
    out: mpsc::UnboundedSender<Batch>,
    stop: watch::Receiver<bool>,
) {
    let mut r = Reader {
        name: format!(
            "worker {} dp_rank {} ({})",
            endpoint.worker_id, endpoint.dp_rank, endpoint.url
        ),
        shared: Arc::clone(&shared),
        counters: Arc::clone(&counters),
        out,
        stop,
        epoch: 0,
        epoch_last: None,
        last: None,
    };
    let mut sub: Option<Connection> = None;
    // The replay DEALER and the epoch it was connected in.
    let mut dealer: Option<(Connection, u64)> = None;
    let mut backoff = INITIAL_BACKOFF;
    while !*r.stop.borrow() {
        let Some(socket) = sub.as_mut() else {
            let connect = connect_sub(
                &endpoint.url,
                &shared.topic,
                shared.limits,
                shared.connect_timeout,
            );
            let connected = tokio::select! {
                c = connect => c,
                _ = r.stop.changed() => break,
            };
            match connected {
                Ok(s) => {
                    sub = Some(s);
                    add(&counters.connects, 1);
                    r.new_epoch();
                    eprintln!("bridge: {}: connected, epoch {}", r.name, r.epoch);
                }
                Err(e) => {
                    add(&counters.connect_failures, 1);
                    eprintln!("bridge: {}: {e}; connecting again", r.name);
                    pause(&mut backoff, &mut r.stop).await;
                }
            }
            continue;
        };
        let received = tokio::select! {
            m = socket.recv() => m,
            _ = r.stop.changed() => break,
        };
        let frames = match received {
            Ok(frames) => frames,
            Err(e) => {
                add(&counters.disconnects, 1);
                eprintln!("bridge: {}: {e}; connecting again", r.name);
                sub = None;
                pause(&mut backoff, &mut r.stop).await;
                continue;
            }
        };
        backoff = INITIAL_BACKOFF;
        if !frames[0].starts_with(shared.topic.as_bytes()) {
            continue; // a publisher need not filter
        }
        let seq = match frames.as_slice() {
            [_topic, seq, _payload] => parse_seq_frame(seq),
            _ => None,
        };
        let Some(seq) = seq else {
            add(&counters.bad_frames, 1);
            continue;
        };
        if let (Some(from), Some(url)) = (r.arrive(seq), &endpoint.replay) {
            if dealer.as_ref().is_some_and(|(_, epoch)| *epoch != r.epoch) {
                dealer = None; // connected to the engine of an earlier epoch
            }
            let fetched = tokio::select! {
                f = fetch_gap(url, &mut dealer, r.epoch, from, &shared) => f,
                _ = r.stop.changed() => break,
            };
            match fetched {
                Ok(batches) => {
                    for b in batches {
                        // Only the missing ones, in order (the reply may start later than
                        // asked; what it lacks stays a gap).
                        if b.seq < r.expected() || b.seq >= seq {
                            continue;
                        }
                        add(&counters.replayed, 1);
                        if !r.take(b.seq, &b.payload).await {
                            return;
                        }
                    }
                }
                Err(e) => {
                    add(&counters.replay_failures, 1);
                    eprintln!("bridge: {}: {e}", r.name);
                    dealer = None; // the rest of a failed reply may still come
                }
            }
        }
        if !r.take(seq, &frames[2]).await {
            break;
        }
    }
}

/// Asks the replay socket at `url` for every batch from `from` on (connecting a DEALER for
/// `epoch` when there is none).
async fn fetch_gap(
    url: &str,
    dealer: &mut Option<(Connection, u64)>,
    epoch: u64,
    from: u64,
    shared: &Shared,
) -> Result<Vec<Replayed>, String> {
    if dealer.is_none() {
        let d = Connection::connect(
            url,
            SocketType::Dealer,
            shared.limits,
            shared.connect_timeout,
        )
        .await
        .map_err(|e| format!("replay {e}"))?;
        *dealer = Some((d, epoch));
    }
    let (d, _) = dealer.as_mut().expect("connected above");
    replay::fetch(d, from, &shared.replay_limits).await
}

/// Takes a held batch's share of the cap, its `len` payload bytes and its overhead
/// ([`held::charge`]; at most the whole cap, so one batch larger than the cap still passes
/// alone), waiting while the buffer is full. `None` when told to stop first.
async fn hold(
    name: &str,
    shared: &Shared,
    counters: &Counters,
    len: usize,
    stop: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    let want = held::charge(len).min(shared.buffer_cap.min(u64::from(u32::MAX))) as u32;
    let permit = match Arc::clone(&shared.buffer).try_acquire_many_owned(want) {
        Ok(p) => p,
        Err(_) => {
            let stalls = counters.stalls.fetch_add(1, Ordering::Relaxed) + 1;
            if stalls.is_power_of_two() {
                eprintln!(
                    "bridge: {name}: buffer full ({} bytes held, --max-buffer-bytes {}): \
                     not reading until JetStream acknowledges (stall {stalls})",
                    shared.buffer_cap - shared.buffer.available_permits() as u64,
                    shared.buffer_cap
                );
            }
            let started = Instant::now();
            let acquired = tokio::select! {
                p = Arc::clone(&shared.buffer).acquire_many_owned(want) => p.ok(),
                _ = stop.changed() => None,
            };
            add(&counters.stall_ms, started.elapsed().as_millis() as u64);
            acquired?
        }
    };
    let held = shared.buffer_cap - shared.buffer.available_permits() as u64;
    shared.bridge.note_buffer(held);
    Some(permit)
}

/// Sleeps `backoff` (or until told to stop) and doubles it.
async fn pause(backoff: &mut Duration, stop: &mut watch::Receiver<bool>) {
    tokio::select! {
        _ = tokio::time::sleep(*backoff) => {}
        _ = stop.changed() => {}
    }
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_increase_strictly() {
        let clock = EpochClock::default();
        let mut prev = clock.next();
        for _ in 0..10_000 {
            let e = clock.next();
            assert!(e > prev, "{e} after {prev}");
            prev = e;
        }
    }
}
