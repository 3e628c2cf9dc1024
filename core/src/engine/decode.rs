//! Decodes a `KVEventBatch` payload, fully, before anything is applied.
//!
//! Bounded by construction: the payload is first walked once without allocating
//! ([`Reader::skip`]: syntax, nesting limit, truncation, trailing bytes), then each event is
//! read straight into its decoded form, with every vector sized from a length already checked
//! against the bytes left. No tree of msgpack values is ever built. [`BatchEvents`] hands out
//! one event at a time, so a caller that converts events as they come holds one decoded event
//! at a time; [`decode_batch`] collects them. Payloads above [`MAX_PAYLOAD_BYTES`] are refused
//! before any byte is read ([`DecodeError::TooLarge`]).

use super::batch::{
    BlockRemoved, BlockStored, DecodedBatch, EngineEvent, ExtraKey, Format, Medium,
};
use super::error::DecodeError;
use super::msgpack::{Reader, Value};
use super::store_keys::{StoreKeys, StoreKeysBuilder};
use super::wire::{self, At, Fields, VLLM_STORED};

/// The largest payload the decoder accepts (32 MiB); larger ones are
/// [`DecodeError::TooLarge`]. Engines publish batches of a few KiB to a few MiB.
pub const MAX_PAYLOAD_BYTES: usize = 32 << 20;

/// vLLM `BlockRemoved` fields after the tag.
const VLLM_REMOVED: &[&str] = &[
    "block_hashes",
    "medium",
    "group_idx",
    "locality",
    "ownership",
];
/// SGLang `BlockStored` fields after the tag: different from vLLM after `medium`.
const SGLANG_STORED: &[&str] = &[
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "cache_salt",
    "session_id",
    "lora_name",
];
/// SGLang `BlockRemoved` fields after the tag.
const SGLANG_REMOVED: &[&str] = &["block_hashes", "medium"];

/// Decodes one payload (the third frame of an engine's ZMQ message).
///
/// Unknown event tags become [`EngineEvent::Unknown`]; unknown fields and extra array
/// elements are ignored; missing optional fields are `None`. A known field of the wrong
/// type, a bad envelope or trailing bytes make the whole batch an error.
pub fn decode_batch(format: Format, payload: &[u8]) -> Result<DecodedBatch, DecodeError> {
    let mut batch = BatchEvents::open(format, payload)?;
    let mut events = Vec::with_capacity(batch.capacity_hint());
    for event in &mut batch {
        events.push(event?);
    }
    Ok(DecodedBatch {
        ts: batch.ts(),
        events,
        dp_rank: batch.dp_rank(),
    })
}

/// How much of each event the decoder keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Detail {
    /// Everything the wire format defines ([`decode_batch`], [`BatchEvents::open`]).
    Full,
    /// What the conversion to index events reads: `extra_keys` is reduced to one key digest
    /// per block ([`BlockStored::keys`]) and `lookahead_token_ids` keeps only its first
    /// non-empty entry (every entry is still read and type-checked), so a long list of tiny
    /// entries costs nothing.
    ForIndex,
}

/// A payload whose msgpack syntax and envelope are valid, decoding its events one at a time.
///
/// The iterator yields each event or the first error, then ends.
#[derive(Debug, Clone)]
pub struct BatchEvents<'a> {
    format: Format,
    detail: Detail,
    reader: Reader<'a>,
    ts: f64,
    dp_rank: Option<u32>,
    len: usize,
    next: usize,
}

impl<'a> BatchEvents<'a> {
    /// Checks the payload's size, its msgpack syntax (truncation, nesting, trailing bytes)
    /// and its envelope, and positions the reader on the first event.
    pub fn open(format: Format, payload: &'a [u8]) -> Result<Self, DecodeError> {
        if payload.len() > MAX_PAYLOAD_BYTES {
            return Err(DecodeError::TooLarge {
                len: payload.len(),
                max: MAX_PAYLOAD_BYTES,
            });
        }
        let mut reader = Reader::new(payload);
        reader.skip(1)?;
        if reader.remaining() > 0 {
            return Err(DecodeError::TrailingBytes(reader.remaining()));
        }
        reader.seek(0);
        let (ts, events, dp_rank) = envelope(&mut reader)?;
        reader.seek(events);
        let len = match reader.next()? {
            Value::Array(len) => len,
            _ => return Err(DecodeError::Envelope("events is not an array")),
        };
        Ok(Self {
            format,
            detail: Detail::Full,
            reader,
            ts,
            dp_rank,
            len,
            next: 0,
        })
    }

    /// Keeps only what the conversion to index events reads (see [`Detail::ForIndex`]).
    pub(crate) fn for_index(mut self) -> Self {
        self.detail = Detail::ForIndex;
        self
    }

    /// Publication time (seconds since the epoch) as the engine wrote it.
    pub fn ts(&self) -> f64 {
        self.ts
    }

    /// The data-parallel rank in the envelope; `None` when absent or nil.
    pub fn dp_rank(&self) -> Option<u32> {
        self.dp_rank
    }

    /// The number of events in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch has no events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A vector capacity for the events: their count, but never more than one per two
    /// payload bytes left (the smallest valid event takes two).
    fn capacity_hint(&self) -> usize {
        self.len.min(self.reader.remaining() / 2)
    }
}

impl Iterator for BatchEvents<'_> {
    type Item = Result<EngineEvent, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.len {
            return None;
        }
        let i = self.next;
        let result = decode_event(self.format, self.detail, i, &mut self.reader);
        // After an error, the iteration ends.
        self.next = if result.is_ok() { i + 1 } else { self.len };
        Some(result)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.len - self.next))
    }
}

/// The envelope: `ts`, the offset of the events value, and the dp rank.
fn envelope(r: &mut Reader<'_>) -> Result<(f64, usize, Option<u32>), DecodeError> {
    let (ts, events, rank) = match r.next()? {
        Value::Array(len) if len >= 2 => {
            let mut at = [None; 3];
            for k in 0..len {
                if let Some(slot) = at.get_mut(k) {
                    *slot = Some(r.pos());
                }
                r.skip(2)?;
            }
            (at[0], at[1].unwrap_or_default(), at[2])
        }
        Value::Array(_) => return Err(DecodeError::Envelope("fewer than 2 elements")),
        Value::Map(len) => {
            // Offsets of the first "ts", "events", "data_parallel_rank", "attn_dp_rank".
            const KEYS: [&[u8]; 4] = [b"ts", b"events", b"data_parallel_rank", b"attn_dp_rank"];
            let mut at = [None; 4];
            for _ in 0..len {
                let key = r.key()?;
                if let Some(i) = key.and_then(|k| KEYS.iter().position(|name| *name == k)) {
                    at[i].get_or_insert(r.pos());
                }
                r.skip(2)?;
            }
            let events = at[1].ok_or(DecodeError::Envelope("map without events"))?;
            (at[0], events, at[2].or(at[3]))
        }
        _ => return Err(DecodeError::Envelope("not an array or map")),
    };
    let ts = match ts.map(|pos| r.peek_at(pos)).transpose()? {
        None | Some(Value::Nil) => 0.0,
        Some(Value::F64(v)) => v,
        Some(Value::F32(v)) => f64::from(v),
        Some(Value::Uint(v)) => v as f64,
        Some(Value::Int(v)) => v as f64,
        Some(_) => return Err(DecodeError::Envelope("ts is not a number")),
    };
    let dp_rank = match rank.map(|pos| r.peek_at(pos)).transpose()? {
        None | Some(Value::Nil) => None,
        Some(v) if v.is_int() => Some(
            v.as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or(DecodeError::Envelope("data_parallel_rank out of range"))?,
        ),
        Some(_) => return Err(DecodeError::Envelope("data_parallel_rank is not an int")),
    };
    Ok((ts, events, dp_rank))
}

/// Decodes the event at the reader's position and leaves the reader after it.
fn decode_event(
    format: Format,
    detail: Detail,
    i: usize,
    r: &mut Reader<'_>,
) -> Result<EngineEvent, DecodeError> {
    let bad = |reason| DecodeError::Event { event: i, reason };
    let sglang = format == Format::Sglang;
    let (stored, removed) = if sglang {
        (SGLANG_STORED, SGLANG_REMOVED)
    } else {
        (VLLM_STORED, VLLM_REMOVED)
    };
    let (tag, fields, end) = match r.next()? {
        Value::Array(len) => {
            let tag = match (len > 0).then(|| r.next()).transpose()? {
                Some(Value::Str(tag)) => {
                    std::str::from_utf8(tag).map_err(|_| bad("tag is not UTF-8"))?
                }
                _ => return Err(bad("array event without a string tag")),
            };
            let layout: &[&str] = match tag {
                "BlockStored" => stored,
                "BlockRemoved" => removed,
                _ => &[],
            };
            let fields = Fields::of_array(r, len - 1, layout, 3)?;
            (tag, fields, r.pos())
        }
        Value::Map(len) => {
            let fields = Fields::of_map(r, len, 3)?;
            let end = r.pos();
            let tag = match fields
                .get(r, "type")?
                .map(|pos| r.peek_at(pos))
                .transpose()?
            {
                Some(Value::Str(tag)) => std::str::from_utf8(tag).ok(),
                _ => None,
            }
            .ok_or(bad("map event without a string \"type\""))?;
            (tag, fields, end)
        }
        _ => return Err(bad("not an array or map")),
    };
    let event = match tag {
        "BlockStored" => EngineEvent::BlockStored(Box::new(block_stored(r, &fields, i, detail)?)),
        "BlockRemoved" => EngineEvent::BlockRemoved(Box::new(block_removed(r, &fields, i)?)),
        "AllBlocksCleared" => EngineEvent::AllBlocksCleared,
        other => EngineEvent::Unknown {
            tag: other.to_owned(),
        },
    };
    r.seek(end);
    Ok(event)
}

fn medium(r: &mut Reader<'_>, at: At) -> Result<Medium, DecodeError> {
    wire::string(r, at).map(|name| Medium::parse(&name))
}

fn block_stored(
    r: &mut Reader<'_>,
    f: &Fields,
    i: usize,
    detail: Detail,
) -> Result<BlockStored, DecodeError> {
    let block_hashes =
        wire::opt(r, f, i, "block_hashes", wire::hashes)?.ok_or(DecodeError::Field {
            event: i,
            field: "block_hashes",
            expected: "present",
        })?;
    // Read before `extra_keys`, which `Detail::ForIndex` reduces with both.
    let lora_name = wire::opt(r, f, i, "lora_name", wire::string)?;
    let lora = lora_name.as_deref();
    let blocks = block_hashes.len();
    let (extra_keys, keys) = match wire::opt(r, f, i, "extra_keys", |r, at| {
        extra_keys(r, at, detail, blocks, lora)
    })? {
        None => (None, None),
        Some(ExtraKeys::Full(list)) => (Some(list), None),
        Some(ExtraKeys::ForIndex(keys)) => (None, Some(keys)),
    };
    Ok(BlockStored {
        block_hashes,
        parent_block_hash: wire::opt(r, f, i, "parent_block_hash", wire::hash)?,
        token_ids: wire::opt(r, f, i, "token_ids", wire::tokens)?.unwrap_or_default(),
        block_size: wire::opt(r, f, i, "block_size", wire::u32_of)?.unwrap_or(0),
        lora_id: wire::opt(r, f, i, "lora_id", wire::i64_of)?,
        medium: wire::opt(r, f, i, "medium", medium)?,
        extra_keys,
        keys,
        group_idx: wire::opt(r, f, i, "group_idx", wire::u32_of)?,
        kv_cache_spec_kind: wire::opt(r, f, i, "kv_cache_spec_kind", wire::string)?,
        kv_cache_spec_sliding_window: wire::opt(
            r,
            f,
            i,
            "kv_cache_spec_sliding_window",
            wire::u64_of,
        )?,
        locality: wire::opt(r, f, i, "locality", wire::string)?,
        ownership: wire::opt(r, f, i, "ownership", wire::string)?,
        session_id: wire::opt(r, f, i, "session_id", wire::string)?,
        lookahead_token_ids: wire::opt(r, f, i, "lookahead_token_ids", |r, at| {
            lookahead(r, at, detail)
        })?,
        cache_salt: wire::opt(r, f, i, "cache_salt", wire::string)?,
        lora_name,
    })
}

fn block_removed(r: &mut Reader<'_>, f: &Fields, i: usize) -> Result<BlockRemoved, DecodeError> {
    let block_hashes =
        wire::opt(r, f, i, "block_hashes", wire::hashes)?.ok_or(DecodeError::Field {
            event: i,
            field: "block_hashes",
            expected: "present",
        })?;
    Ok(BlockRemoved {
        block_hashes,
        medium: wire::opt(r, f, i, "medium", medium)?,
        group_idx: wire::opt(r, f, i, "group_idx", wire::u32_of)?,
        locality: wire::opt(r, f, i, "locality", wire::string)?,
        ownership: wire::opt(r, f, i, "ownership", wire::string)?,
    })
}

/// A decoded `extra_keys` field: every entry ([`Detail::Full`]) or only what the index folds.
enum ExtraKeys {
    Full(Vec<Option<Vec<ExtraKey>>>),
    ForIndex(StoreKeys),
}

/// `extra_keys`: one entry per block, nil or a list of keys (a lone key counts as a list).
/// With [`Detail::ForIndex`], the keys are reduced to [`StoreKeys`] as they are read (a store
/// of `blocks` blocks whose adapter is `lora`), so no list of keys is kept.
fn extra_keys(
    r: &mut Reader<'_>,
    at: At,
    detail: Detail,
    blocks: usize,
    lora: Option<&str>,
) -> Result<ExtraKeys, DecodeError> {
    let len = wire::array(r, at)?;
    let full = detail == Detail::Full;
    let mut out = Vec::with_capacity(if full { len } else { 0 });
    let mut builder = StoreKeysBuilder::new(blocks, lora);
    for _ in 0..len {
        let start = r.pos();
        builder.begin_entry();
        match r.next()? {
            Value::Nil if full => out.push(None),
            Value::Nil => {}
            Value::Array(keys) => {
                let mut list = Vec::with_capacity(if full { keys } else { 0 });
                for _ in 0..keys {
                    let key = extra_key(r)?;
                    if full {
                        list.push(key);
                    } else {
                        builder.key(&key);
                    }
                }
                if full {
                    out.push(Some(list));
                }
            }
            _ => {
                r.seek(start);
                let key = extra_key(r)?;
                if full {
                    out.push(Some(vec![key]));
                } else {
                    builder.key(&key);
                }
            }
        }
    }
    Ok(if full {
        ExtraKeys::Full(out)
    } else {
        ExtraKeys::ForIndex(builder.finish())
    })
}

/// `lookahead_token_ids`: one token list per block. With [`Detail::ForIndex`], only the first
/// non-empty list is kept (every list is still read and checked).
fn lookahead(r: &mut Reader<'_>, at: At, detail: Detail) -> Result<Vec<Vec<u32>>, DecodeError> {
    if detail == Detail::Full {
        return wire::token_blocks(r, at);
    }
    let len = wire::array(r, at)?;
    let mut first = Vec::new();
    for _ in 0..len {
        let tokens = wire::tokens(r, at)?;
        if first.is_empty() && !tokens.is_empty() {
            first.push(tokens);
        }
    }
    Ok(first)
}

/// Reads one whole value as an extra key; shapes that are not understood are `Other`.
fn extra_key(r: &mut Reader<'_>) -> Result<ExtraKey, DecodeError> {
    let start = r.pos();
    let key = match r.next()? {
        Value::Str(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => return Ok(ExtraKey::Text(text.to_owned())),
            Err(_) => return Ok(ExtraKey::Other),
        },
        Value::Bin(bytes) => return Ok(ExtraKey::Digest(bytes.to_vec())),
        Value::Array(2) => match (r.next()?, r.next()?) {
            (Value::Str(id), offset) => match (std::str::from_utf8(id), offset.as_i64()) {
                (Ok(identifier), Some(offset)) => Some(ExtraKey::Multimodal {
                    identifier: identifier.to_owned(),
                    offset,
                }),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    };
    if let Some(key) = key {
        return Ok(key);
    }
    // Anything else: skip the whole value from its start.
    r.seek(start);
    r.skip(5)?;
    Ok(ExtraKey::Other)
}
