//! Typed reads of msgpack values (parsed by `rmpv`) into the shapes the engines publish:
//! hashes folded to `u64`, bounded integers, strings, and field lookup by name over either
//! the positional (array) or the tagged-map encoding of an event.

use rmpv::ValueRef;

use super::error::DecodeError;

/// Folds an engine hash to `u64`: unsigned ints as they are, signed ints as two's complement,
/// bin (a raw digest) as its last 8 bytes read big-endian (shorter digests are zero-extended).
pub(crate) fn fold_hash(value: &ValueRef<'_>) -> Option<u64> {
    match value {
        ValueRef::Integer(int) => int.as_u64().or_else(|| int.as_i64().map(|v| v as u64)),
        ValueRef::Binary(bytes) => {
            let tail = &bytes[bytes.len().saturating_sub(8)..];
            Some(tail.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
        }
        _ => None,
    }
}

/// A view of one event's fields, whichever encoding it came in.
pub(crate) enum Fields<'v, 'a> {
    /// Positional: element 0 is the tag, then the fields in `layout` order.
    Array {
        items: &'v [ValueRef<'a>],
        layout: &'static [&'static str],
    },
    /// Tagged map: `"type"` plus fields by name; unknown keys are ignored.
    Map(&'v [(ValueRef<'a>, ValueRef<'a>)]),
}

impl<'v, 'a> Fields<'v, 'a> {
    /// The field's value, `None` when absent or nil (the wire's "None").
    pub(crate) fn get(&self, name: &str) -> Option<&'v ValueRef<'a>> {
        let value = match self {
            Fields::Array { items, layout } => layout
                .iter()
                .position(|field| *field == name)
                .and_then(|pos| items.get(pos + 1)),
            Fields::Map(entries) => entries
                .iter()
                .find(|(key, _)| key_is(key, name))
                .map(|(_, value)| value),
        }?;
        (!matches!(value, ValueRef::Nil)).then_some(value)
    }
}

/// Whether a map key is the string `name`.
pub(crate) fn key_is(key: &ValueRef<'_>, name: &str) -> bool {
    matches!(key, ValueRef::String(s) if s.as_str() == Some(name))
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

pub(crate) fn hash(value: &ValueRef<'_>, at: At) -> Result<u64, DecodeError> {
    fold_hash(value).ok_or_else(|| at.err("an int or bin hash"))
}

pub(crate) fn array<'v, 'a>(
    value: &'v ValueRef<'a>,
    at: At,
) -> Result<&'v [ValueRef<'a>], DecodeError> {
    match value {
        ValueRef::Array(items) => Ok(items),
        _ => Err(at.err("an array")),
    }
}

pub(crate) fn hashes(value: &ValueRef<'_>, at: At) -> Result<Vec<u64>, DecodeError> {
    array(value, at)?.iter().map(|v| hash(v, at)).collect()
}

pub(crate) fn u32_of(value: &ValueRef<'_>, at: At) -> Result<u32, DecodeError> {
    match value {
        ValueRef::Integer(int) => int
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| at.err("an int in 0..2^32")),
        _ => Err(at.err("an int in 0..2^32")),
    }
}

pub(crate) fn u64_of(value: &ValueRef<'_>, at: At) -> Result<u64, DecodeError> {
    match value {
        ValueRef::Integer(int) => int.as_u64().ok_or_else(|| at.err("a non-negative int")),
        _ => Err(at.err("a non-negative int")),
    }
}

pub(crate) fn i64_of(value: &ValueRef<'_>, at: At) -> Result<i64, DecodeError> {
    match value {
        ValueRef::Integer(int) => int.as_i64().ok_or_else(|| at.err("an int64")),
        _ => Err(at.err("an int64")),
    }
}

pub(crate) fn tokens(value: &ValueRef<'_>, at: At) -> Result<Vec<u32>, DecodeError> {
    array(value, at)?.iter().map(|v| u32_of(v, at)).collect()
}

pub(crate) fn string(value: &ValueRef<'_>, at: At) -> Result<String, DecodeError> {
    match value {
        ValueRef::String(s) => s
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| at.err("a UTF-8 string")),
        _ => Err(at.err("a string")),
    }
}

/// Reads an optional field with `read`, `None` when absent or nil.
pub(crate) fn opt<T>(
    fields: &Fields<'_, '_>,
    event: usize,
    field: &'static str,
    read: impl FnOnce(&ValueRef<'_>, At) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    fields
        .get(field)
        .map(|value| read(value, At { event, field }))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(bytes: &[u8]) -> ValueRef<'_> {
        rmpv::decode::read_value_ref(&mut &bytes[..]).unwrap()
    }

    #[test]
    fn hashes_fold_to_u64() {
        // uint64 max, int64 -1, positive fixint.
        let max = [0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(fold_hash(&value(&max)), Some(u64::MAX));
        assert_eq!(fold_hash(&value(&[0xff])), Some(u64::MAX));
        let neg = [0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(fold_hash(&value(&neg)), Some(1 << 63));
        assert_eq!(fold_hash(&value(&[0x07])), Some(7));
        // bin: last 8 bytes big-endian; shorter digests zero-extended; empty is 0.
        let mut digest = vec![0xc4, 32];
        digest.extend(0..32u8);
        let want = u64::from_be_bytes([24, 25, 26, 27, 28, 29, 30, 31]);
        assert_eq!(fold_hash(&value(&digest)), Some(want));
        assert_eq!(fold_hash(&value(&[0xc4, 2, 1, 2])), Some(0x0102));
        assert_eq!(fold_hash(&value(&[0xc4, 0])), Some(0));
        // Not a hash: float, string, nil.
        assert_eq!(fold_hash(&value(&[0xcb, 0, 0, 0, 0, 0, 0, 0, 0])), None);
        assert_eq!(fold_hash(&value(&[0xa1, b'x'])), None);
        assert_eq!(fold_hash(&value(&[0xc0])), None);
    }

    #[test]
    fn map_and_array_fields_treat_nil_as_absent() {
        let map = value(&[0x82, 0xa1, b'a', 0xc0, 0xa1, b'b', 0x05]);
        let ValueRef::Map(entries) = &map else {
            panic!("a map")
        };
        let fields = Fields::Map(entries);
        assert!(fields.get("a").is_none());
        assert!(matches!(fields.get("b"), Some(ValueRef::Integer(_))));
        assert!(fields.get("c").is_none());
        let array = value(&[0x93, 0xa1, b't', 0xc0, 0x09]);
        let ValueRef::Array(items) = &array else {
            panic!("an array")
        };
        let fields = Fields::Array {
            items,
            layout: &["x", "y", "z"],
        };
        assert!(fields.get("x").is_none());
        assert!(matches!(fields.get("y"), Some(ValueRef::Integer(_))));
        assert!(fields.get("z").is_none(), "shorter arrays: missing = None");
    }
}
