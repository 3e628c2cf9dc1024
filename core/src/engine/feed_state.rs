//! An [`EngineFeed`](super::EngineFeed)'s per-publisher tracking state as bytes, so a replica
//! can save it beside a snapshot of the index at the same stream position and restore it: a
//! restored feed then classifies every publisher's next batch exactly as the feed that was
//! saved would have.
//!
//! Layout, little-endian:
//!
//! ```text
//! magic "KVFS" | version u32 (1) | format u32 | n u64 |
//! n x (worker_id u64, dp_rank u32, flags u32, next_seq u64, epoch u64, next_event_id u64)
//! ```
//!
//! `flags`: bit 0 set when `next_seq` is tracked, bit 1 when `epoch` is known; every other
//! bit is 0. Publishers are written in ascending `(worker_id, dp_rank)` order, each once.

use crate::model::Worker;

use super::batch::Format;

const MAGIC: &[u8; 4] = b"KVFS";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 20;
const ENTRY_BYTES: usize = 40;
const HAS_NEXT_SEQ: u32 = 1;
const HAS_EPOCH: u32 = 2;

/// One publisher's tracking state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublisherState {
    /// The publisher `(worker_id, dp_rank)`.
    pub worker: Worker,
    /// The next engine sequence expected, when one was recorded.
    pub next_seq: Option<u64>,
    /// The engine epoch (the bridge's connection id) of its last batch, when given.
    pub epoch: Option<u64>,
    /// The id the feed gives its next index event.
    pub next_event_id: u64,
}

/// Why saved feed state was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedStateError {
    /// The bytes are not a saved feed state (bad magic, version, length, flags or order).
    Malformed(&'static str),
    /// The state was saved by a feed of another wire format.
    OtherFormat,
}

impl std::fmt::Display for FeedStateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeedStateError::Malformed(what) => write!(f, "not a saved feed state: {what}"),
            FeedStateError::OtherFormat => {
                write!(f, "the feed state was saved by a feed of another format")
            }
        }
    }
}

impl std::error::Error for FeedStateError {}

fn format_code(format: Format) -> u32 {
    match format {
        Format::Vllm => 0,
        Format::Sglang => 1,
        Format::TrtLlm => 2,
    }
}

/// Encodes publishers' state (any order; written sorted).
pub(super) fn encode(format: Format, mut publishers: Vec<PublisherState>) -> Vec<u8> {
    publishers.sort_by_key(|p| (p.worker.worker_id, p.worker.dp_rank));
    let mut out = Vec::with_capacity(HEADER_BYTES + ENTRY_BYTES * publishers.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&format_code(format).to_le_bytes());
    out.extend_from_slice(&(publishers.len() as u64).to_le_bytes());
    for p in &publishers {
        let flags = if p.next_seq.is_some() {
            HAS_NEXT_SEQ
        } else {
            0
        } | if p.epoch.is_some() { HAS_EPOCH } else { 0 };
        out.extend_from_slice(&p.worker.worker_id.to_le_bytes());
        out.extend_from_slice(&p.worker.dp_rank.to_le_bytes());
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&p.next_seq.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&p.epoch.unwrap_or(0).to_le_bytes());
        out.extend_from_slice(&p.next_event_id.to_le_bytes());
    }
    out
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Decodes what [`encode`] wrote for a feed of `format`, checking all of it.
pub(super) fn decode(format: Format, bytes: &[u8]) -> Result<Vec<PublisherState>, FeedStateError> {
    use FeedStateError::Malformed;
    if bytes.len() < HEADER_BYTES || &bytes[..4] != MAGIC {
        return Err(Malformed("bad magic"));
    }
    if u32_at(bytes, 4) != VERSION {
        return Err(Malformed("unknown version"));
    }
    if u32_at(bytes, 8) != format_code(format) {
        return Err(FeedStateError::OtherFormat);
    }
    let n = u64_at(bytes, 12);
    let body = &bytes[HEADER_BYTES..];
    if body.len() % ENTRY_BYTES != 0 || (body.len() / ENTRY_BYTES) as u64 != n {
        return Err(Malformed("length does not match the publisher count"));
    }
    let mut out: Vec<PublisherState> = Vec::with_capacity(body.len() / ENTRY_BYTES);
    for e in body.chunks_exact(ENTRY_BYTES) {
        let flags = u32_at(e, 12);
        if flags & !(HAS_NEXT_SEQ | HAS_EPOCH) != 0 {
            return Err(Malformed("unknown flags"));
        }
        let p = PublisherState {
            worker: Worker::new(u64_at(e, 0), u32_at(e, 8)),
            next_seq: (flags & HAS_NEXT_SEQ != 0).then(|| u64_at(e, 16)),
            epoch: (flags & HAS_EPOCH != 0).then(|| u64_at(e, 24)),
            next_event_id: u64_at(e, 32),
        };
        if let Some(prev) = out.last() {
            let key = |p: &PublisherState| (p.worker.worker_id, p.worker.dp_rank);
            if key(prev) >= key(&p) {
                return Err(Malformed("publishers out of order or repeated"));
            }
        }
        out.push(p);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(id: u64, next_seq: Option<u64>, epoch: Option<u64>) -> PublisherState {
        PublisherState {
            worker: Worker::new(id, 2),
            next_seq,
            epoch,
            next_event_id: id * 10,
        }
    }

    #[test]
    fn round_trips_sorted_and_refuses_anything_else() {
        let states = vec![state(9, None, Some(5)), state(1, Some(3), None)];
        let bytes = encode(Format::Sglang, states.clone());
        let back = decode(Format::Sglang, &bytes).unwrap();
        assert_eq!(back, vec![states[1], states[0]]);
        assert_eq!(
            decode(Format::Vllm, &bytes),
            Err(FeedStateError::OtherFormat)
        );
        assert!(decode(Format::Sglang, &bytes[..bytes.len() - 1]).is_err());
        let mut flags = bytes.clone();
        flags[HEADER_BYTES + 12] = 4;
        assert!(decode(Format::Sglang, &flags).is_err());
        let twice = encode(
            Format::Vllm,
            vec![state(1, None, None), state(1, None, None)],
        );
        assert!(decode(Format::Vllm, &twice).is_err());
        let mut count = encode(Format::Vllm, vec![state(1, None, None)]);
        count[12] = 2;
        assert!(decode(Format::Vllm, &count).is_err());
        assert!(decode(Format::Vllm, b"KVFS").is_err());
        assert_eq!(
            decode(Format::Vllm, &encode(Format::Vllm, vec![])),
            Ok(vec![])
        );
    }
}
