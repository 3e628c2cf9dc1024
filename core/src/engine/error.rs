//! Why a payload could not be decoded.

/// A payload that is not a well-formed `KVEventBatch`. Nothing of such a batch is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes are not one msgpack value (truncated, bad marker, nested too deeply).
    Msgpack(String),
    /// The payload is larger than [`MAX_PAYLOAD_BYTES`](super::MAX_PAYLOAD_BYTES); nothing of
    /// it was read.
    TooLarge {
        /// The payload's size in bytes.
        len: usize,
        /// The largest size accepted.
        max: usize,
    },
    /// Bytes follow the batch's msgpack value.
    TrailingBytes(usize),
    /// The envelope is not `[ts, events]`, `[ts, events, dp_rank]` or the equivalent map.
    Envelope(&'static str),
    /// An event is not a tagged array or a tagged map.
    Event {
        /// Index of the event in the batch.
        event: usize,
        /// What was wrong.
        reason: &'static str,
    },
    /// A known field of an event has the wrong type.
    Field {
        /// Index of the event in the batch.
        event: usize,
        /// The field's name.
        field: &'static str,
        /// What the field should have been.
        expected: &'static str,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Msgpack(what) => write!(f, "not a msgpack value: {what}"),
            DecodeError::TooLarge { len, max } => {
                write!(f, "payload of {len} bytes is larger than the maximum {max}")
            }
            DecodeError::TrailingBytes(n) => write!(f, "{n} bytes after the batch"),
            DecodeError::Envelope(what) => write!(f, "bad batch envelope: {what}"),
            DecodeError::Event { event, reason } => write!(f, "event {event}: {reason}"),
            DecodeError::Field {
                event,
                field,
                expected,
            } => write!(f, "event {event}: field `{field}` should be {expected}"),
        }
    }
}

impl std::error::Error for DecodeError {}
