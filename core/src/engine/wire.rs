//! Typed reads of an event's fields into the shapes the engines publish: hashes folded to
//! `u64`, bounded integers, strings, token arrays, and field lookup by name over either the
//! positional (array) or the tagged-map encoding of an event.
//!
//! Every read goes from the payload straight into its final value; vectors are sized from a
//! length that [`Reader::next`] has already checked against the bytes left.

use super::error::DecodeError;
use super::msgpack::{Reader, Value};

/// Every field name the event decoders read, in either encoding: `"type"` (a map event's
/// tag), vLLM's `BlockStored` fields in their array order ([`VLLM_STORED`]), then SGLang's
/// `cache_salt`.
const FIELD_NAMES: [&str; 17] = [
    "type",
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
    "cache_salt",
];

/// vLLM `BlockStored` fields after the tag, in declaration order (all generations): the names
/// between `"type"` and `"cache_salt"` in [`FIELD_NAMES`].
pub(crate) const VLLM_STORED: &[&str] = FIELD_NAMES.split_at(1).1.split_at(15).0;

fn field_index(name: &[u8]) -> Option<usize> {
    FIELD_NAMES
        .iter()
        .position(|field| field.as_bytes() == name)
}

/// Folds an engine hash to `u64`: unsigned ints as they are, signed ints as two's complement,
/// bin (a raw digest) as its last 8 bytes read big-endian (shorter digests are zero-extended).
pub(crate) fn fold_hash(value: &Value<'_>) -> Option<u64> {
    match *value {
        Value::Uint(v) => Some(v),
        Value::Int(v) => Some(v as u64),
        Value::Bin(bytes) => {
            let tail = &bytes[bytes.len().saturating_sub(8)..];
            Some(tail.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
        }
        _ => None,
    }
}

/// Where each known field of one event starts in the payload (first occurrence wins), so
/// fields can be read in any order whatever order they were written in.
pub(crate) struct Fields {
    offsets: [Option<usize>; FIELD_NAMES.len()],
}

impl Fields {
    /// Scans a tagged map's `len` entries (the reader is just after the map's head).
    pub(crate) fn of_map(
        r: &mut Reader<'_>,
        len: usize,
        depth: usize,
    ) -> Result<Self, DecodeError> {
        let mut offsets = [None; FIELD_NAMES.len()];
        for _ in 0..len {
            let key = r.key()?;
            if let Some(i) = key.and_then(field_index) {
                offsets[i].get_or_insert(r.pos());
            }
            r.skip(depth + 1)?;
        }
        Ok(Self { offsets })
    }

    /// Scans a positional event's `len` items after its tag (the reader is just after the
    /// tag): item `k` is the field `layout[k]`; items beyond the layout are skipped.
    pub(crate) fn of_array(
        r: &mut Reader<'_>,
        len: usize,
        layout: &[&str],
        depth: usize,
    ) -> Result<Self, DecodeError> {
        let mut offsets = [None; FIELD_NAMES.len()];
        for k in 0..len {
            if let Some(i) = layout.get(k).and_then(|name| field_index(name.as_bytes())) {
                offsets[i].get_or_insert(r.pos());
            }
            r.skip(depth + 1)?;
        }
        Ok(Self { offsets })
    }

    /// The offset of a field's value, `None` when absent or nil (the wire's "None").
    pub(crate) fn get(&self, r: &Reader<'_>, name: &str) -> Result<Option<usize>, DecodeError> {
        let Some(pos) = field_index(name.as_bytes()).and_then(|i| self.offsets[i]) else {
            return Ok(None);
        };
        Ok((r.peek_at(pos)? != Value::Nil).then_some(pos))
    }
}

/// Context for errors: which event and which field is being read.
#[derive(Clone, Copy)]
pub(crate) struct At {
    pub(crate) event: usize,
    pub(crate) field: &'static str,
}

impl At {
    pub(crate) fn err(self, expected: &'static str) -> DecodeError {
        DecodeError::Field {
            event: self.event,
            field: self.field,
            expected,
        }
    }
}

/// A reader of one field's value.
pub(crate) type Read<T> = fn(&mut Reader<'_>, At) -> Result<T, DecodeError>;

/// Reads an optional field with `read`, `None` when absent or nil.
pub(crate) fn opt<T>(
    r: &mut Reader<'_>,
    fields: &Fields,
    event: usize,
    field: &'static str,
    read: impl FnOnce(&mut Reader<'_>, At) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    match fields.get(r, field)? {
        None => Ok(None),
        Some(pos) => {
            r.seek(pos);
            read(r, At { event, field }).map(Some)
        }
    }
}

pub(crate) fn hash(r: &mut Reader<'_>, at: At) -> Result<u64, DecodeError> {
    fold_hash(&r.next()?).ok_or_else(|| at.err("an int or bin hash"))
}

/// The length of an array value.
pub(crate) fn array(r: &mut Reader<'_>, at: At) -> Result<usize, DecodeError> {
    match r.next()? {
        Value::Array(len) => Ok(len),
        _ => Err(at.err("an array")),
    }
}

/// An array of `read` values, in a vector of exactly its length.
fn array_of<T>(r: &mut Reader<'_>, at: At, read: Read<T>) -> Result<Vec<T>, DecodeError> {
    let len = array(r, at)?;
    let mut out = Vec::with_capacity(len);
    for _ in 0..len {
        out.push(read(r, at)?);
    }
    Ok(out)
}

pub(crate) fn hashes(r: &mut Reader<'_>, at: At) -> Result<Vec<u64>, DecodeError> {
    array_of(r, at, hash)
}

pub(crate) fn u32_of(r: &mut Reader<'_>, at: At) -> Result<u32, DecodeError> {
    r.next()?
        .as_u64()
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| at.err("an int in 0..2^32"))
}

pub(crate) fn u64_of(r: &mut Reader<'_>, at: At) -> Result<u64, DecodeError> {
    r.next()?
        .as_u64()
        .ok_or_else(|| at.err("a non-negative int"))
}

pub(crate) fn i64_of(r: &mut Reader<'_>, at: At) -> Result<i64, DecodeError> {
    r.next()?.as_i64().ok_or_else(|| at.err("an int64"))
}

pub(crate) fn tokens(r: &mut Reader<'_>, at: At) -> Result<Vec<u32>, DecodeError> {
    array_of(r, at, u32_of)
}

/// An array of token arrays.
pub(crate) fn token_blocks(r: &mut Reader<'_>, at: At) -> Result<Vec<Vec<u32>>, DecodeError> {
    array_of(r, at, tokens)
}

pub(crate) fn string(r: &mut Reader<'_>, at: At) -> Result<String, DecodeError> {
    match r.next()? {
        Value::Str(bytes) => std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| at.err("a UTF-8 string")),
        _ => Err(at.err("a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folded(bytes: &[u8]) -> Option<u64> {
        fold_hash(&Reader::new(bytes).next().unwrap())
    }

    #[test]
    fn vllm_stored_layout_is_the_middle_of_the_field_names() {
        assert_eq!(VLLM_STORED.len(), 15);
        assert_eq!(VLLM_STORED.first(), Some(&"block_hashes"));
        assert_eq!(VLLM_STORED.last(), Some(&"lookahead_token_ids"));
    }

    #[test]
    fn hashes_fold_to_u64() {
        // uint64 max, int64 -1, positive fixint.
        let max = [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(folded(&max), Some(u64::MAX));
        assert_eq!(folded(&[0xff]), Some(u64::MAX));
        let neg = [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(folded(&neg), Some(1 << 63));
        assert_eq!(folded(&[0x07]), Some(7));
        // bin: last 8 bytes big-endian; shorter digests zero-extended; empty is 0.
        let mut digest = vec![0xc4, 32];
        digest.extend(0..32u8);
        let want = u64::from_be_bytes([24, 25, 26, 27, 28, 29, 30, 31]);
        assert_eq!(folded(&digest), Some(want));
        assert_eq!(folded(&[0xc4, 2, 1, 2]), Some(0x0102));
        assert_eq!(folded(&[0xc4, 0]), Some(0));
        // Not a hash: float, string, nil.
        assert_eq!(folded(&[0xcb, 0, 0, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(folded(&[0xa1, b'x']), None);
        assert_eq!(folded(&[0xc0]), None);
    }

    #[test]
    fn map_and_array_fields_treat_nil_as_absent() {
        // {"lora_id": nil, "block_size": 5, "block_size": 6}: nil is absent, first wins.
        let mut map = vec![0x83, 0xa7];
        map.extend_from_slice(b"lora_id");
        map.push(0xc0);
        for v in [5, 6] {
            map.push(0xaa);
            map.extend_from_slice(b"block_size");
            map.push(v);
        }
        let mut r = Reader::new(&map);
        let Value::Map(len) = r.next().unwrap() else {
            panic!("a map")
        };
        let fields = Fields::of_map(&mut r, len, 1).unwrap();
        assert_eq!(fields.get(&r, "lora_id").unwrap(), None);
        let at = fields.get(&r, "block_size").unwrap().unwrap();
        assert_eq!(r.peek_at(at).unwrap(), Value::Uint(5));
        assert_eq!(fields.get(&r, "medium").unwrap(), None);
        // Positional: [nil, 9] for layout [lora_id, block_size, medium].
        let array = [0xc0, 0x09];
        let mut r = Reader::new(&array);
        let layout = ["lora_id", "block_size", "medium"];
        let fields = Fields::of_array(&mut r, 2, &layout, 1).unwrap();
        assert_eq!(fields.get(&r, "lora_id").unwrap(), None);
        assert!(fields.get(&r, "block_size").unwrap().is_some());
        assert_eq!(
            fields.get(&r, "medium").unwrap(),
            None,
            "shorter arrays: missing = None"
        );
    }
}
