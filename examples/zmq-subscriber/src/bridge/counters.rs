//! The bridge's counters (shared by the ZMQ and NATS sides of each publisher) and the summary
//! JSON printed when it stops.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one engine publisher; every field is a running total.
#[derive(Debug, Default)]
pub struct Counters {
    /// Batches taken from ZMQ (3 frames, 8-byte sequence; live or replayed) and queued for
    /// publishing.
    pub received: AtomicU64,
    /// Their payload bytes.
    pub received_bytes: AtomicU64,
    /// Messages that were not 3 frames with an 8-byte sequence (not published).
    pub bad_frames: AtomicU64,
    /// Batches the engine feed's decoder refuses (published all the same: the stream carries
    /// what the engine sent; a replica's feed counts them).
    pub malformed: AtomicU64,
    /// Batches obtained from the replay socket for a gap (and queued like the others).
    pub replayed: AtomicU64,
    /// Replay requests that failed (the gap stays).
    pub replay_failures: AtomicU64,
    /// Sequence gaps left in what was queued, per epoch from sequence 0 (batches the PUB
    /// dropped or sent before the epoch's connection was up, and the replay, if any, did not
    /// have).
    pub gaps: AtomicU64,
    /// Batches missing in those gaps (never queued).
    pub missed: AtomicU64,
    /// Sequences going backwards (an engine restart).
    pub restarts: AtomicU64,
    /// Epochs begun (one per ZMQ connection and per restart seen inside one).
    pub epochs: AtomicU64,
    /// ZMQ connections made.
    pub connects: AtomicU64,
    /// ZMQ connection attempts that failed.
    pub connect_failures: AtomicU64,
    /// ZMQ connections lost.
    pub disconnects: AtomicU64,
    /// Times reading stopped because the buffer was at `--max-buffer-bytes`.
    pub stalls: AtomicU64,
    /// Milliseconds spent stopped so.
    pub stall_ms: AtomicU64,
    /// Batches JetStream acknowledged as new messages.
    pub published: AtomicU64,
    /// Batches JetStream acknowledged as duplicates (a retry of a batch it already had).
    pub duplicates: AtomicU64,
    /// Batches whose acknowledgement was lost and that were then found stored (the last
    /// message of their subject carries their `Nats-Msg-Id`), so not published again.
    pub found_stored: AtomicU64,
    /// Attempts after the first (after an error or a missing acknowledgement).
    pub retries: AtomicU64,
    /// Batches larger than the server's `max_payload` (dropped: JetStream cannot take them).
    pub too_large: AtomicU64,
    /// Batches taken from ZMQ but not acknowledged when the bridge stopped.
    pub undelivered: AtomicU64,
    /// Acknowledged batches whose stream sequence was not above the previous one's (0 unless
    /// the server broke the per-publisher order).
    pub out_of_order: AtomicU64,
    /// The engine sequence of the last batch received (`u64::MAX`: none yet).
    pub last_seq: AtomicU64,
    /// The stream sequence of the last batch acknowledged (0: none yet).
    pub last_stream_seq: AtomicU64,
}

/// Adds `n` to a counter.
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Reads a counter.
pub fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

impl Counters {
    /// New counters (no batch seen).
    pub fn new() -> Self {
        let c = Self::default();
        c.last_seq.store(u64::MAX, Ordering::Relaxed);
        c
    }

    /// The counters as a JSON object's fields.
    pub fn json_fields(&self) -> String {
        let fields: [(&str, &AtomicU64); 23] = [
            ("received", &self.received),
            ("received_bytes", &self.received_bytes),
            ("bad_frames", &self.bad_frames),
            ("malformed", &self.malformed),
            ("replayed", &self.replayed),
            ("replay_failures", &self.replay_failures),
            ("gaps", &self.gaps),
            ("missed", &self.missed),
            ("restarts", &self.restarts),
            ("epochs", &self.epochs),
            ("connects", &self.connects),
            ("connect_failures", &self.connect_failures),
            ("disconnects", &self.disconnects),
            ("stalls", &self.stalls),
            ("stall_ms", &self.stall_ms),
            ("published", &self.published),
            ("duplicates", &self.duplicates),
            ("found_stored", &self.found_stored),
            ("retries", &self.retries),
            ("too_large", &self.too_large),
            ("undelivered", &self.undelivered),
            ("out_of_order", &self.out_of_order),
            ("last_stream_seq", &self.last_stream_seq),
        ];
        let mut out: Vec<String> = fields
            .iter()
            .map(|(name, c)| format!("\"{name}\":{}", get(c)))
            .collect();
        let last = get(&self.last_seq);
        out.push(if last == u64::MAX {
            "\"last_seq\":null".to_string()
        } else {
            format!("\"last_seq\":{last}")
        });
        out.join(",")
    }
}

/// Counters of the bridge as a whole.
#[derive(Debug, Default)]
pub struct BridgeCounters {
    /// NATS connections made (the first included).
    pub nats_connects: AtomicU64,
    /// NATS connections lost.
    pub nats_disconnects: AtomicU64,
    /// Most payload bytes held at once.
    pub buffer_peak: AtomicU64,
}

impl BridgeCounters {
    /// Records that `held` bytes are held now.
    pub fn note_buffer(&self, held: u64) {
        self.buffer_peak.fetch_max(held, Ordering::Relaxed);
    }
}
