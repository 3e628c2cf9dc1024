//! One engine's sockets on loopback: a PUB endpoint sending `[topic, seq (8 bytes BE),
//! batch]`, as vLLM and SGLang do, and a ROUTER replay endpoint answering a DEALER's
//! `["", start]` with `["", topic, seq, batch]` for every batch sent from `start` on, then
//! `["", topic, 0xFF x 8, ""]` (the >= 0.26 layout).
//!
//! The PUB reads one subscription per connection (the first message after the handshake) and
//! then only sends; a subscriber that falls 100,000 messages behind (vLLM's high-water mark)
//! misses the batches it lagged by, as with an engine. Batches are sent only once a first
//! subscriber is in (an XPUB that waits for its subscription), so the first subscriber misses
//! none.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, Notify};

use crate::zmtp::{Connection, Limits, SocketType};

/// The end marker of a replay reply.
const REPLAY_END: [u8; 8] = [0xFF; 8];
/// Messages queued per subscriber before it misses some (vLLM's high-water mark).
const HIGH_WATER_MARK: usize = 100_000;
/// Longest wait for a peer's handshake.
const HANDSHAKE: Duration = Duration::from_secs(5);

/// What one engine publishes, shared by its sockets.
pub struct Engine {
    /// The topic frame of every message.
    pub topic: Vec<u8>,
    /// Its batches; batch `i` has sequence `i`.
    pub batches: Vec<Arc<Vec<u8>>>,
    /// How many batches were sent so far (the replay socket holds those).
    pub sent: AtomicUsize,
    live: broadcast::Sender<u64>,
    subscribed: Notify,
}

impl Engine {
    /// An engine about to publish `batches` under `topic`.
    pub fn new(topic: Vec<u8>, batches: Vec<Vec<u8>>) -> Arc<Self> {
        Arc::new(Engine {
            topic,
            batches: batches.into_iter().map(Arc::new).collect(),
            sent: AtomicUsize::new(0),
            live: broadcast::channel(HIGH_WATER_MARK).0,
            subscribed: Notify::new(),
        })
    }

    /// Waits for a first subscriber.
    pub async fn first_subscriber(&self) {
        if self.live.receiver_count() == 0 {
            self.subscribed.notified().await;
        }
    }

    /// Sends the next batch to the subscribers; false when all were sent.
    pub fn send_next(&self) -> bool {
        let seq = self.sent.load(Ordering::SeqCst);
        if seq >= self.batches.len() {
            return false;
        }
        self.sent.store(seq + 1, Ordering::SeqCst);
        let _ = self.live.send(seq as u64); // no subscriber: the batch is not sent, as with PUB
        true
    }
}

/// Binds `endpoint` (`tcp://host:port`).
pub async fn bind(endpoint: &str) -> Result<TcpListener, String> {
    let address = endpoint
        .strip_prefix("tcp://")
        .ok_or(format!("{endpoint}: not a tcp://host:port endpoint"))?;
    TcpListener::bind(address)
        .await
        .map_err(|e| format!("{endpoint}: bind: {e}"))
}

/// Accepts subscribers on `listener` for ever.
pub async fn serve_pub(listener: TcpListener, engine: Arc<Engine>) {
    serve(
        listener,
        engine,
        "subscriber",
        |stream, engine| async move { subscriber(stream, &engine).await },
    )
    .await
}

/// Answers replay requests on `listener` for ever.
pub async fn serve_replay(listener: TcpListener, engine: Arc<Engine>) {
    serve(listener, engine, "replay", |stream, engine| async move {
        replayer(stream, &engine).await
    })
    .await
}

/// Accepts connections for ever, each served by `peer` in its own task.
async fn serve<F, Fut>(listener: TcpListener, engine: Arc<Engine>, what: &'static str, peer: F)
where
    F: Fn(TcpStream, Arc<Engine>) -> Fut,
    Fut: std::future::Future<Output = Result<(), String>> + Send + 'static,
{
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let served = peer(stream, Arc::clone(&engine));
        tokio::spawn(async move {
            if let Err(e) = served.await {
                eprintln!("publish: {what}: {e}");
            }
        });
    }
}

async fn subscriber(stream: TcpStream, engine: &Engine) -> Result<(), String> {
    let mut c = Connection::accept(stream, SocketType::Pub, Limits::default(), HANDSHAKE).await?;
    let first = c.recv().await?;
    let topic = match first.first().map(|f| f.split_first()) {
        Some(Some((1, topic))) => topic.to_vec(),
        _ => return Err("expected a subscription".into()),
    };
    if !engine.topic.starts_with(&topic) {
        // Nothing this engine sends matches: keep the connection, send nothing, as a PUB.
        while c.recv().await.is_ok() {}
        return Ok(());
    }
    let mut live = engine.live.subscribe();
    engine.subscribed.notify_one(); // a permit if nobody waits yet
    loop {
        let seq = match live.recv().await {
            Ok(seq) => seq,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                eprintln!("publish: a subscriber missed {n} batches (high-water mark)");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        };
        let batch = &engine.batches[seq as usize];
        c.send(&[&engine.topic, &seq.to_be_bytes(), batch]).await?;
    }
}

async fn replayer(stream: TcpStream, engine: &Engine) -> Result<(), String> {
    let mut c =
        Connection::accept(stream, SocketType::Router, Limits::default(), HANDSHAKE).await?;
    loop {
        let request = c.recv().await?;
        let start = match request.as_slice() {
            [empty, start] if empty.is_empty() && start.len() == 8 => {
                u64::from_be_bytes(start[..].try_into().unwrap())
            }
            _ => return Err("a replay request is [\"\", 8-byte start]".into()),
        };
        let sent = engine.sent.load(Ordering::SeqCst) as u64;
        for seq in start..sent {
            let batch = &engine.batches[seq as usize];
            c.send(&[b"", &engine.topic, &seq.to_be_bytes(), batch])
                .await?;
        }
        c.send(&[b"", &engine.topic, &REPLAY_END, b""]).await?;
    }
}
