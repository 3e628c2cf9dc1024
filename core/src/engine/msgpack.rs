//! A minimal msgpack reader over a byte slice, written for bounded decoding.
//!
//! It never builds a tree of values: [`Reader::next`] reads one value's head (a scalar, a
//! string or bin borrowed from the payload, or the length of an array or map) and the
//! decoder reads typed fields straight into their final vectors. Lengths are checked against
//! the bytes left before anything is sized from them (every array element takes at least one
//! byte, every map entry two), so a vector sized from a length prefix never holds more
//! elements than the payload has bytes. [`Reader::skip`] walks a value without allocating,
//! with a nesting limit ([`MAX_DEPTH`]) and bounded recursion.

use super::error::DecodeError;

/// Nesting limit of a payload: the deepest legitimate shape is
/// envelope / events / event / extra_keys / block / item / identifier (7).
pub const MAX_DEPTH: usize = 32;

/// The head of one msgpack value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    /// `nil` (the wire's `None`).
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// An unsigned int or positive fixint.
    Uint(u64),
    /// A signed int (any of the `int 8..64` markers, or a negative fixint).
    Int(i64),
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// A string's raw bytes (not checked for UTF-8).
    Str(&'a [u8]),
    /// A bin's bytes.
    Bin(&'a [u8]),
    /// An extension value (its contents are not used by any engine format).
    Ext,
    /// An array of this many elements (not read yet).
    Array(usize),
    /// A map of this many entries (not read yet).
    Map(usize),
}

impl Value<'_> {
    /// The value as a `u64`: unsigned ints, and signed ones that are not negative.
    pub(crate) fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Uint(v) => Some(v),
            Value::Int(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as an `i64`: signed ints, and unsigned ones up to `i64::MAX`.
    pub(crate) fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::Uint(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Whether the value is an integer.
    pub(crate) fn is_int(&self) -> bool {
        matches!(self, Value::Uint(_) | Value::Int(_))
    }
}

/// A cursor over a payload.
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

fn malformed(what: &str) -> DecodeError {
    DecodeError::Msgpack(what.to_owned())
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// The offset of the next value.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Moves to an offset returned by [`Reader::pos`] earlier.
    pub(crate) fn seek(&mut self, pos: usize) {
        self.pos = pos.min(self.bytes.len());
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(malformed("truncated value"));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A length read from `N` big-endian bytes.
    fn len<const N: usize>(&mut self) -> Result<usize, DecodeError> {
        let bytes = self.be::<N>()?;
        let len = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        usize::try_from(len).map_err(|_| malformed("length does not fit in memory"))
    }

    fn array(&mut self, len: usize) -> Result<Value<'a>, DecodeError> {
        // Every element takes at least one byte.
        if len > self.remaining() {
            return Err(malformed("array length exceeds the bytes left"));
        }
        Ok(Value::Array(len))
    }

    fn map(&mut self, len: usize) -> Result<Value<'a>, DecodeError> {
        // Every entry takes at least two bytes (a key and a value).
        if len > self.remaining() / 2 {
            return Err(malformed("map length exceeds the bytes left"));
        }
        Ok(Value::Map(len))
    }

    fn ext(&mut self, len: usize) -> Result<Value<'a>, DecodeError> {
        self.take(1 + len)?; // the type byte, then the data
        Ok(Value::Ext)
    }

    /// A bin whose length takes `N` bytes.
    fn bin<const N: usize>(&mut self) -> Result<Value<'a>, DecodeError> {
        let len = self.len::<N>()?;
        Ok(Value::Bin(self.take(len)?))
    }

    /// A string whose length takes `N` bytes.
    fn str<const N: usize>(&mut self) -> Result<Value<'a>, DecodeError> {
        let len = self.len::<N>()?;
        Ok(Value::Str(self.take(len)?))
    }

    /// An extension whose length takes `N` bytes.
    fn ext_sized<const N: usize>(&mut self) -> Result<Value<'a>, DecodeError> {
        let len = self.len::<N>()?;
        self.ext(len)
    }

    /// An array whose length takes `N` bytes.
    fn array_sized<const N: usize>(&mut self) -> Result<Value<'a>, DecodeError> {
        let len = self.len::<N>()?;
        self.array(len)
    }

    /// A map whose length takes `N` bytes.
    fn map_sized<const N: usize>(&mut self) -> Result<Value<'a>, DecodeError> {
        let len = self.len::<N>()?;
        self.map(len)
    }

    /// Reads the head of the next value; for an array or a map, only its length.
    pub(crate) fn next(&mut self) -> Result<Value<'a>, DecodeError> {
        let marker = self.take(1)?[0];
        Ok(match marker {
            0x00..=0x7f => Value::Uint(u64::from(marker)),
            0x80..=0x8f => self.map(usize::from(marker & 0x0f))?,
            0x90..=0x9f => self.array(usize::from(marker & 0x0f))?,
            0xa0..=0xbf => Value::Str(self.take(usize::from(marker & 0x1f))?),
            0xc0 => Value::Nil,
            0xc1 => return Err(malformed("reserved marker 0xc1")),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4 => self.bin::<1>()?,
            0xc5 => self.bin::<2>()?,
            0xc6 => self.bin::<4>()?,
            0xc7 => self.ext_sized::<1>()?,
            0xc8 => self.ext_sized::<2>()?,
            0xc9 => self.ext_sized::<4>()?,
            0xca => Value::F32(f32::from_be_bytes(self.be()?)),
            0xcb => Value::F64(f64::from_be_bytes(self.be()?)),
            0xcc => Value::Uint(u64::from(u8::from_be_bytes(self.be()?))),
            0xcd => Value::Uint(u64::from(u16::from_be_bytes(self.be()?))),
            0xce => Value::Uint(u64::from(u32::from_be_bytes(self.be()?))),
            0xcf => Value::Uint(u64::from_be_bytes(self.be()?)),
            0xd0 => Value::Int(i64::from(i8::from_be_bytes(self.be()?))),
            0xd1 => Value::Int(i64::from(i16::from_be_bytes(self.be()?))),
            0xd2 => Value::Int(i64::from(i32::from_be_bytes(self.be()?))),
            0xd3 => Value::Int(i64::from_be_bytes(self.be()?)),
            0xd4 => self.ext(1)?,
            0xd5 => self.ext(2)?,
            0xd6 => self.ext(4)?,
            0xd7 => self.ext(8)?,
            0xd8 => self.ext(16)?,
            0xd9 => self.str::<1>()?,
            0xda => self.str::<2>()?,
            0xdb => self.str::<4>()?,
            0xdc => self.array_sized::<2>()?,
            0xdd => self.array_sized::<4>()?,
            0xde => self.map_sized::<2>()?,
            0xdf => self.map_sized::<4>()?,
            0xe0..=0xff => Value::Int(i64::from(marker as i8)),
        })
    }

    /// Skips one whole value (containers included) without allocating. `depth` is the
    /// nesting level of the value (the payload's root is 1); a container deeper than
    /// [`MAX_DEPTH`] is an error.
    pub(crate) fn skip(&mut self, depth: usize) -> Result<(), DecodeError> {
        let count = match self.next()? {
            Value::Array(len) => len,
            Value::Map(len) => len * 2,
            _ => return Ok(()),
        };
        if depth > MAX_DEPTH {
            return Err(malformed("nested deeper than the limit"));
        }
        for _ in 0..count {
            self.skip(depth + 1)?;
        }
        Ok(())
    }

    /// Reads a map key: the string's bytes, or `None` (after skipping it) for any other key.
    pub(crate) fn key(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        let start = self.pos;
        match self.next()? {
            Value::Str(bytes) => Ok(Some(bytes)),
            Value::Array(_) | Value::Map(_) => {
                self.seek(start);
                self.skip(1)?;
                Ok(None)
            }
            _ => Ok(None),
        }
    }

    /// The head of the value at `pos`, without moving.
    pub(crate) fn peek_at(&self, pos: usize) -> Result<Value<'a>, DecodeError> {
        let mut at = self.clone();
        at.seek(pos);
        at.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(bytes: &[u8]) -> Value<'_> {
        Reader::new(bytes).next().unwrap()
    }

    #[test]
    fn scalar_heads() {
        assert_eq!(head(&[0x07]), Value::Uint(7));
        assert_eq!(head(&[0xff]), Value::Int(-1));
        assert_eq!(
            head(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            Value::Uint(u64::MAX)
        );
        assert_eq!(
            head(&[0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0]),
            Value::Int(i64::MIN)
        );
        assert_eq!(head(&[0xd0, 0x05]).as_u64(), Some(5));
        assert_eq!(head(&[0xd0, 0xfb]).as_u64(), None);
        assert_eq!(
            head(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).as_i64(),
            None
        );
        assert_eq!(head(&[0xa2, b'h', b'i']), Value::Str(b"hi"));
        assert_eq!(head(&[0xc4, 1, 9]), Value::Bin(&[9]));
        assert_eq!(head(&[0xd4, 1, 2]), Value::Ext);
        assert_eq!(head(&[0xc0]), Value::Nil);
    }

    #[test]
    fn lengths_are_checked_against_the_bytes_left() {
        // array32 of 2^32-1 in a tiny payload; map16 of 2 entries with 3 bytes left.
        let mut r = Reader::new(&[0xdd, 0xff, 0xff, 0xff, 0xff, 0, 0]);
        assert!(r.next().is_err());
        let mut r = Reader::new(&[0xde, 0, 2, 1, 2, 3]);
        assert!(r.next().is_err());
        let mut r = Reader::new(&[0xde, 0, 2, 1, 2, 3, 4]);
        assert_eq!(r.next().unwrap(), Value::Map(2));
        let mut r = Reader::new(&[0xda, 0, 5, b'a']);
        assert!(r.next().is_err(), "truncated string");
        assert!(Reader::new(&[0xc1]).next().is_err(), "reserved marker");
    }

    #[test]
    fn skip_walks_containers_and_limits_nesting() {
        let bytes = [0x92, 0x81, 0xa1, b'k', 0x91, 0x01, 0xc3, 0x05];
        let mut r = Reader::new(&bytes);
        r.skip(1).unwrap();
        assert_eq!(r.remaining(), 1);
        let deep = vec![0x91; 100];
        assert!(Reader::new(&deep).skip(1).is_err());
        let mut ok = vec![0x91; MAX_DEPTH - 1];
        ok.push(0x90);
        Reader::new(&ok).skip(1).unwrap();
    }
}
