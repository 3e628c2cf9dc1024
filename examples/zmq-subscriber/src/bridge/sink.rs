//! The NATS side: one client connection (connected again forever by the client), the stream
//! `KVIDX_EVENTS` created or found, and per publisher a loop that publishes its batches in
//! order, one at a time, each until JetStream acknowledges it.
//!
//! Order: a publisher's next batch is sent only after the previous one is acknowledged, so a
//! lost publish can never let a later batch of the same worker be stored before it. A batch
//! whose acknowledgement does not come (timeout, connection lost, stream not there yet) is
//! first looked for (the last message on its subject: found there, it was stored after all)
//! and else published again with the same `Nats-Msg-Id`: if an earlier attempt still reaches
//! the server first, JetStream answers "duplicate" and stores nothing (within the stream's
//! duplicate window).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::connection::State;
use async_nats::jetstream::context::{Context, PublishErrorKind};
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{Config, StorageType};
use async_nats::{Client, ConnectOptions, HeaderMap};
use tokio::sync::{mpsc, watch, Mutex, Semaphore};

use super::counters::{add, get, BridgeCounters, Counters};
use super::options::{format_name, BridgeOptions, Endpoint, STREAM, SUBJECT_PREFIX};
use super::source::Batch;

/// The header names (spec: the replicas read them by these names).
pub mod headers {
    /// The batch's worker id (decimal).
    pub const WORKER_ID: &str = "Kvidx-Worker-Id";
    /// The batch's DP rank (decimal).
    pub const DP_RANK: &str = "Kvidx-Dp-Rank";
    /// `vllm` or `sglang`.
    pub const FORMAT: &str = "Kvidx-Format";
    /// The ZMQ sequence frame (decimal u64).
    pub const ENGINE_SEQ: &str = "Kvidx-Engine-Seq";
    /// The bridge-chosen id of the engine connection the batch came on (decimal u64).
    pub const ENGINE_EPOCH: &str = "Kvidx-Engine-Epoch";
}

/// The `Nats-Msg-Id` of a batch: `<worker_id>.<dp_rank>.<epoch>.<seq>`.
pub fn message_id(endpoint: &Endpoint, epoch: u64, seq: u64) -> String {
    format!("{}.{}.{epoch}.{seq}", endpoint.worker_id, endpoint.dp_rank)
}

/// The JetStream connection shared by every publisher.
pub struct Nats {
    client: Client,
    context: Context,
    duplicate_window: Duration,
    /// Whether the stream is known to exist (found or created since the last "not found").
    stream_ok: Mutex<bool>,
    in_flight: Semaphore,
}

impl Nats {
    /// Starts connecting (the client keeps connecting again, forever, in the background).
    pub async fn connect(o: &BridgeOptions, bridge: Arc<BridgeCounters>) -> Result<Self, String> {
        let events = Arc::clone(&bridge);
        let client = ConnectOptions::new()
            .name("kvidx-bridge")
            .retry_on_initial_connect()
            .max_reconnects(None)
            .connection_timeout(Duration::from_secs(2))
            .reconnect_delay_callback(|attempts| {
                Duration::from_millis((50u64 << attempts.min(5)).min(1000))
            })
            .event_callback(move |event| {
                let events = Arc::clone(&events);
                async move {
                    match event {
                        async_nats::Event::Connected => add(&events.nats_connects, 1),
                        async_nats::Event::Disconnected => add(&events.nats_disconnects, 1),
                        _ => {}
                    }
                    eprintln!("bridge: nats: {event}");
                }
            })
            .connect(o.nats.as_str())
            .await
            .map_err(|e| format!("nats {}: {e}", o.nats))?;
        let mut context = async_nats::jetstream::new(client.clone());
        context.set_timeout(o.ack_timeout);
        Ok(Self {
            client,
            context,
            duplicate_window: o.duplicate_window,
            stream_ok: Mutex::new(false),
            in_flight: Semaphore::new(o.max_in_flight),
        })
    }

    /// Makes sure the stream exists (creating it with subjects `kvidx.events.>`, file storage
    /// and the duplicate window), retrying until it does or the drain deadline passes.
    async fn ensure_stream(&self, drain: &watch::Receiver<Option<Instant>>) -> bool {
        let mut ok = self.stream_ok.lock().await;
        let mut backoff = Duration::from_millis(50);
        while !*ok {
            let config = Config {
                name: STREAM.to_string(),
                subjects: vec![format!("{SUBJECT_PREFIX}.>")],
                storage: StorageType::File,
                duplicate_window: self.duplicate_window,
                ..Default::default()
            };
            match self.context.get_or_create_stream(config).await {
                Ok(stream) => {
                    let c = &stream.cached_info().config;
                    eprintln!(
                        "bridge: stream {STREAM}: subjects {:?}, duplicate window {:?}, {} messages",
                        c.subjects,
                        c.duplicate_window,
                        stream.cached_info().state.messages
                    );
                    if c.duplicate_window < Duration::from_secs(10) {
                        eprintln!(
                            "bridge: WARNING: stream {STREAM} has a duplicate window of {:?}: \
                             a publish repeated later than that after a lost acknowledgement \
                             would be stored twice",
                            c.duplicate_window
                        );
                    }
                    *ok = true;
                }
                Err(e) => {
                    eprintln!("bridge: stream {STREAM}: {e}; trying again");
                    if past(drain) {
                        return false;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            }
        }
        true
    }

    /// The stream sequence of the last message on `subject` when its `Nats-Msg-Id` is `id`:
    /// the batch whose acknowledgement was lost was stored after all. Every publisher's
    /// batches are published one at a time, so the last message on its subject is either
    /// that batch or the one before; this holds however long ago the first attempt was (the
    /// duplicate window covers only the attempts the client may still deliver after this).
    async fn stored_last(&self, subject: &str, id: &str) -> Option<u64> {
        let stream = self.context.get_stream_no_info(STREAM).await.ok()?;
        let last = stream.get_last_raw_message_by_subject(subject).await.ok()?;
        let last_id = last.headers.get("Nats-Msg-Id")?;
        (last_id.as_str() == id).then_some(last.sequence)
    }

    /// Waits for the client to be connected (or the drain deadline).
    async fn connected(&self, drain: &watch::Receiver<Option<Instant>>) -> bool {
        while self.client.connection_state() != State::Connected {
            if past(drain) {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

/// Whether the drain deadline has passed.
fn past(drain: &watch::Receiver<Option<Instant>>) -> bool {
    drain.borrow().is_some_and(|d| Instant::now() >= d)
}

/// Records the stream sequence a batch was stored at; counts a sequence not above the
/// previous batch's (the server broke the order: never expected).
fn note_stored(counters: &Counters, id: &str, stream_seq: u64) {
    let prev = counters.last_stream_seq.load(Ordering::Relaxed);
    if stream_seq <= prev {
        add(&counters.out_of_order, 1);
        eprintln!("bridge: {id}: stored at {stream_seq}, not after {prev}: out of order");
    }
    counters
        .last_stream_seq
        .store(prev.max(stream_seq), Ordering::Relaxed);
}

/// What became of one batch.
enum Outcome {
    Stored,
    Dropped,
    GaveUp,
}

/// Publishes `endpoint`'s batches from `input` in order until the input ends, or until the
/// drain deadline (set in `drain` when the bridge stops) passes: the batches left then are
/// counted as undelivered.
pub async fn run(
    endpoint: Endpoint,
    format: kvidx::engine::Format,
    nats: Arc<Nats>,
    counters: Arc<Counters>,
    mut input: mpsc::UnboundedReceiver<Batch>,
    drain: watch::Receiver<Option<Instant>>,
) {
    let subject = endpoint.subject();
    while let Some(batch) = input.recv().await {
        match publish(
            &endpoint, format, &subject, &nats, &counters, &batch, &drain,
        )
        .await
        {
            Outcome::Stored | Outcome::Dropped => {}
            Outcome::GaveUp => {
                add(&counters.undelivered, 1);
                input.close();
                while input.recv().await.is_some() {
                    add(&counters.undelivered, 1);
                }
                return;
            }
        }
    }
}

async fn publish(
    endpoint: &Endpoint,
    format: kvidx::engine::Format,
    subject: &str,
    nats: &Nats,
    counters: &Counters,
    batch: &Batch,
    drain: &watch::Receiver<Option<Instant>>,
) -> Outcome {
    let mut h = HeaderMap::new();
    h.insert(headers::WORKER_ID, endpoint.worker_id.to_string().as_str());
    h.insert(headers::DP_RANK, endpoint.dp_rank.to_string().as_str());
    h.insert(headers::FORMAT, format_name(format));
    h.insert(headers::ENGINE_SEQ, batch.seq.to_string().as_str());
    h.insert(headers::ENGINE_EPOCH, batch.epoch.to_string().as_str());
    let id = message_id(endpoint, batch.epoch, batch.seq);
    let mut backoff = Duration::from_millis(20);
    let mut attempt = 0u64;
    loop {
        if attempt > 0 {
            add(&counters.retries, 1);
            if past(drain) {
                return Outcome::GaveUp;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
        attempt += 1;
        if !nats.connected(drain).await || !nats.ensure_stream(drain).await {
            return Outcome::GaveUp;
        }
        if attempt > 1 {
            if let Some(stream_seq) = nats.stored_last(subject, &id).await {
                add(&counters.found_stored, 1);
                note_stored(counters, &id, stream_seq);
                return Outcome::Stored;
            }
        }
        let result = {
            let _slot = nats.in_flight.acquire().await.expect("never closed");
            let message = PublishMessage::build()
                .payload(batch.payload.clone())
                .headers(h.clone())
                .message_id(&id);
            match nats.context.send_publish(subject.to_owned(), message).await {
                Ok(ack) => ack.await,
                Err(e) => Err(e),
            }
        };
        match result {
            Ok(ack) => {
                if ack.duplicate {
                    add(&counters.duplicates, 1);
                } else {
                    add(&counters.published, 1);
                }
                note_stored(counters, &id, ack.sequence);
                return Outcome::Stored;
            }
            Err(e) => {
                match e.kind() {
                    PublishErrorKind::MaxPayloadExceeded => {
                        add(&counters.too_large, 1);
                        eprintln!(
                            "bridge: {id}: {} bytes: {e}; DROPPED (the replicas will see a \
                             sequence gap); raise the server's max_payload",
                            batch.payload.len()
                        );
                        return Outcome::Dropped;
                    }
                    PublishErrorKind::StreamNotFound => *nats.stream_ok.lock().await = false,
                    _ => {}
                }
                if attempt == 1 || attempt.is_power_of_two() {
                    eprintln!(
                        "bridge: {id}: attempt {attempt}: {e}; publishing again ({} retries so far)",
                        get(&counters.retries)
                    );
                }
            }
        }
    }
}
