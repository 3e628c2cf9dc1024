//! Decodes a `KVEventBatch` payload into a [`DecodedBatch`], fully, before anything is applied.
//!
//! Bounded by construction: `rmpv` parses into borrowed values without preallocating from
//! length prefixes (every element costs at least one payload byte) and with a nesting limit,
//! so a hostile prefix can neither allocate beyond a small multiple of the payload size nor
//! overflow the stack.

use rmpv::ValueRef;

use super::error::DecodeError;
use super::types::{
    BlockRemoved, BlockStored, DecodedBatch, EngineEvent, ExtraKey, Format, Medium,
};
use super::wire::{self, At, Fields};

/// Nesting limit passed to the msgpack parser: the deepest legitimate shape is
/// envelope / events / event / extra_keys / block / item / identifier (7).
pub const MAX_DEPTH: usize = 32;

/// vLLM `BlockStored` fields after the tag, in declaration order (all generations).
const VLLM_STORED: &[&str] = &[
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
    "locality",
    "ownership",
    "session_id",
    "lookahead_token_ids",
];
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
    let mut rest = payload;
    let root = rmpv::decode::read_value_ref_with_max_depth(&mut rest, MAX_DEPTH)
        .map_err(|e| DecodeError::Msgpack(e.to_string()))?;
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes(rest.len()));
    }
    let (ts, events, dp_rank) = envelope(&root)?;
    let events = wire::array(
        events,
        At {
            event: 0,
            field: "events",
        },
    )
    .map_err(|_| DecodeError::Envelope("events is not an array"))?
    .iter()
    .enumerate()
    .map(|(i, event)| decode_event(format, i, event))
    .collect::<Result<Vec<_>, _>>()?;
    Ok(DecodedBatch {
        ts,
        events,
        dp_rank,
    })
}

type Envelope<'v, 'a> = (f64, &'v ValueRef<'a>, Option<u32>);

fn envelope<'v, 'a>(root: &'v ValueRef<'a>) -> Result<Envelope<'v, 'a>, DecodeError> {
    let (ts, events, rank) = match root {
        ValueRef::Array(items) if items.len() >= 2 => (Some(&items[0]), &items[1], items.get(2)),
        ValueRef::Array(_) => return Err(DecodeError::Envelope("fewer than 2 elements")),
        ValueRef::Map(entries) => {
            let find = |name: &str| {
                entries
                    .iter()
                    .find(|(k, _)| wire::key_is(k, name))
                    .map(|(_, v)| v)
            };
            let events = find("events").ok_or(DecodeError::Envelope("map without events"))?;
            let rank = find("data_parallel_rank").or_else(|| find("attn_dp_rank"));
            (find("ts"), events, rank)
        }
        _ => return Err(DecodeError::Envelope("not an array or map")),
    };
    let ts = match ts {
        None | Some(ValueRef::Nil) => 0.0,
        Some(ValueRef::F64(v)) => *v,
        Some(ValueRef::F32(v)) => f64::from(*v),
        Some(ValueRef::Integer(i)) => i.as_f64().unwrap_or(0.0),
        Some(_) => return Err(DecodeError::Envelope("ts is not a number")),
    };
    let dp_rank = match rank {
        None | Some(ValueRef::Nil) => None,
        Some(ValueRef::Integer(i)) => Some(
            i.as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or(DecodeError::Envelope("data_parallel_rank out of range"))?,
        ),
        Some(_) => return Err(DecodeError::Envelope("data_parallel_rank is not an int")),
    };
    Ok((ts, events, dp_rank))
}

/// The two encodings of an event.
#[derive(Clone, Copy)]
enum Shape<'v, 'a> {
    Array(&'v [ValueRef<'a>]),
    Map(&'v [(ValueRef<'a>, ValueRef<'a>)]),
}

fn decode_event(
    format: Format,
    i: usize,
    event: &ValueRef<'_>,
) -> Result<EngineEvent, DecodeError> {
    let bad = |reason| DecodeError::Event { event: i, reason };
    let (tag, shape) = match event {
        ValueRef::Array(items) => match items.first() {
            Some(ValueRef::String(s)) => (
                s.as_str().ok_or(bad("tag is not UTF-8"))?,
                Shape::Array(items),
            ),
            _ => return Err(bad("array event without a string tag")),
        },
        ValueRef::Map(entries) => {
            let tag = entries
                .iter()
                .find(|(k, _)| wire::key_is(k, "type"))
                .and_then(|(_, v)| match v {
                    ValueRef::String(s) => s.as_str(),
                    _ => None,
                })
                .ok_or(bad("map event without a string \"type\""))?;
            (tag, Shape::Map(entries))
        }
        _ => return Err(bad("not an array or map")),
    };
    let fields = |layout: &'static [&'static str]| match shape {
        Shape::Array(items) => Fields::Array { items, layout },
        Shape::Map(entries) => Fields::Map(entries),
    };
    let sglang = format == Format::Sglang;
    match tag {
        "BlockStored" => {
            let layout = if sglang { SGLANG_STORED } else { VLLM_STORED };
            block_stored(&fields(layout), i).map(|s| EngineEvent::BlockStored(Box::new(s)))
        }
        "BlockRemoved" => {
            let layout = if sglang { SGLANG_REMOVED } else { VLLM_REMOVED };
            block_removed(&fields(layout), i).map(EngineEvent::BlockRemoved)
        }
        "AllBlocksCleared" => Ok(EngineEvent::AllBlocksCleared),
        other => Ok(EngineEvent::Unknown {
            tag: other.to_owned(),
        }),
    }
}

fn medium(value: &ValueRef<'_>, at: At) -> Result<Medium, DecodeError> {
    wire::string(value, at).map(|name| Medium::parse(&name))
}

fn block_stored(f: &Fields<'_, '_>, i: usize) -> Result<BlockStored, DecodeError> {
    let block_hashes =
        wire::opt(f, i, "block_hashes", wire::hashes)?.ok_or(DecodeError::Field {
            event: i,
            field: "block_hashes",
            expected: "present",
        })?;
    Ok(BlockStored {
        block_hashes,
        parent_block_hash: wire::opt(f, i, "parent_block_hash", wire::hash)?,
        token_ids: wire::opt(f, i, "token_ids", wire::tokens)?.unwrap_or_default(),
        block_size: wire::opt(f, i, "block_size", wire::u32_of)?.unwrap_or(0),
        lora_id: wire::opt(f, i, "lora_id", wire::i64_of)?,
        medium: wire::opt(f, i, "medium", medium)?,
        lora_name: wire::opt(f, i, "lora_name", wire::string)?,
        extra_keys: wire::opt(f, i, "extra_keys", extra_keys)?,
        group_idx: wire::opt(f, i, "group_idx", wire::u32_of)?,
        kv_cache_spec_kind: wire::opt(f, i, "kv_cache_spec_kind", wire::string)?,
        kv_cache_spec_sliding_window: wire::opt(
            f,
            i,
            "kv_cache_spec_sliding_window",
            wire::u64_of,
        )?,
        locality: wire::opt(f, i, "locality", wire::string)?,
        ownership: wire::opt(f, i, "ownership", wire::string)?,
        session_id: wire::opt(f, i, "session_id", wire::string)?,
        lookahead_token_ids: wire::opt(f, i, "lookahead_token_ids", |v, at| {
            wire::array(v, at)?
                .iter()
                .map(|block| wire::tokens(block, at))
                .collect()
        })?,
        cache_salt: wire::opt(f, i, "cache_salt", wire::string)?,
    })
}

fn block_removed(f: &Fields<'_, '_>, i: usize) -> Result<BlockRemoved, DecodeError> {
    let block_hashes =
        wire::opt(f, i, "block_hashes", wire::hashes)?.ok_or(DecodeError::Field {
            event: i,
            field: "block_hashes",
            expected: "present",
        })?;
    Ok(BlockRemoved {
        block_hashes,
        medium: wire::opt(f, i, "medium", medium)?,
        group_idx: wire::opt(f, i, "group_idx", wire::u32_of)?,
        locality: wire::opt(f, i, "locality", wire::string)?,
        ownership: wire::opt(f, i, "ownership", wire::string)?,
    })
}

/// `extra_keys`: one entry per block, nil or a list of keys.
fn extra_keys(value: &ValueRef<'_>, at: At) -> Result<Vec<Option<Vec<ExtraKey>>>, DecodeError> {
    Ok(wire::array(value, at)?
        .iter()
        .map(|block| match block {
            ValueRef::Nil => None,
            ValueRef::Array(keys) => Some(keys.iter().map(extra_key).collect()),
            other => Some(vec![extra_key(other)]),
        })
        .collect())
}

fn extra_key(value: &ValueRef<'_>) -> ExtraKey {
    match value {
        ValueRef::String(s) => match s.as_str() {
            Some(text) => ExtraKey::Text(text.to_owned()),
            None => ExtraKey::Other,
        },
        ValueRef::Binary(bytes) => ExtraKey::Digest(bytes.to_vec()),
        ValueRef::Array(pair) => match pair.as_slice() {
            [ValueRef::String(id), ValueRef::Integer(offset)] => {
                match (id.as_str(), offset.as_i64()) {
                    (Some(identifier), Some(offset)) => ExtraKey::Multimodal {
                        identifier: identifier.to_owned(),
                        offset,
                    },
                    _ => ExtraKey::Other,
                }
            }
            _ => ExtraKey::Other,
        },
        _ => ExtraKey::Other,
    }
}
