//! The few CBOR items (RFC 8949) that engine and router block hashes serialise, in the
//! canonical (shortest) form: unsigned and negative integers, byte and text strings, arrays
//! and null. Python's `cbor2.dumps(..., canonical=True)` and Go's
//! `fxamacker/cbor` canonical mode write exactly these bytes for such values.

/// Appends canonical CBOR items to a byte buffer.
#[derive(Debug, Default, Clone)]
pub(crate) struct CborWriter {
    bytes: Vec<u8>,
}

impl CborWriter {
    /// An empty writer.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Empties the buffer, keeping its capacity.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
    }

    /// The bytes written so far.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The head of an item: major type and argument, in the shortest form.
    fn head(&mut self, major: u8, arg: u64) {
        let major = major << 5;
        if arg < 24 {
            self.bytes.push(major | arg as u8);
        } else if arg <= u64::from(u8::MAX) {
            self.bytes.extend_from_slice(&[major | 24, arg as u8]);
        } else if arg <= u64::from(u16::MAX) {
            self.bytes.push(major | 25);
            self.bytes.extend_from_slice(&(arg as u16).to_be_bytes());
        } else if arg <= u64::from(u32::MAX) {
            self.bytes.push(major | 26);
            self.bytes.extend_from_slice(&(arg as u32).to_be_bytes());
        } else {
            self.bytes.push(major | 27);
            self.bytes.extend_from_slice(&arg.to_be_bytes());
        }
    }

    /// An unsigned integer.
    pub(crate) fn uint(&mut self, value: u64) {
        self.head(0, value);
    }

    /// A signed integer.
    pub(crate) fn int(&mut self, value: i64) {
        if value >= 0 {
            self.head(0, value as u64);
        } else {
            // -1 - n is encoded as n with major type 1.
            self.head(1, !(value as u64));
        }
    }

    /// A byte string.
    pub(crate) fn bytes_item(&mut self, value: &[u8]) {
        self.head(2, value.len() as u64);
        self.bytes.extend_from_slice(value);
    }

    /// A text string.
    pub(crate) fn text(&mut self, value: &str) {
        self.head(3, value.len() as u64);
        self.bytes.extend_from_slice(value.as_bytes());
    }

    /// The head of an array of `len` items (the items follow).
    pub(crate) fn array(&mut self, len: usize) {
        self.head(4, len as u64);
    }

    /// An array of unsigned integers.
    pub(crate) fn uint_array(&mut self, values: &[u32]) {
        self.array(values.len());
        for &value in values {
            self.uint(u64::from(value));
        }
    }

    /// `null`.
    pub(crate) fn null(&mut self) {
        self.bytes.push(0xf6);
    }
}

#[cfg(test)]
mod tests {
    use super::CborWriter;

    fn encoded(f: impl FnOnce(&mut CborWriter)) -> Vec<u8> {
        let mut w = CborWriter::new();
        f(&mut w);
        w.bytes().to_vec()
    }

    #[test]
    fn integers_take_the_shortest_head() {
        // RFC 8949 appendix A.
        assert_eq!(encoded(|w| w.uint(0)), [0x00]);
        assert_eq!(encoded(|w| w.uint(23)), [0x17]);
        assert_eq!(encoded(|w| w.uint(24)), [0x18, 0x18]);
        assert_eq!(encoded(|w| w.uint(1000)), [0x19, 0x03, 0xe8]);
        assert_eq!(
            encoded(|w| w.uint(1_000_000)),
            [0x1a, 0x00, 0x0f, 0x42, 0x40]
        );
        assert_eq!(
            encoded(|w| w.uint(u64::MAX)),
            [0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(encoded(|w| w.int(-1)), [0x20]);
        assert_eq!(encoded(|w| w.int(-100)), [0x38, 0x63]);
        assert_eq!(encoded(|w| w.int(i64::MIN)), {
            let mut v = vec![0x3b];
            v.extend_from_slice(&(i64::MAX as u64).to_be_bytes());
            v
        });
    }

    #[test]
    fn strings_arrays_and_null() {
        assert_eq!(encoded(|w| w.text("IETF")), b"\x64IETF");
        assert_eq!(encoded(|w| w.bytes_item(&[1, 2, 3, 4])), [0x44, 1, 2, 3, 4]);
        assert_eq!(encoded(|w| w.uint_array(&[1, 2, 3])), [0x83, 1, 2, 3]);
        assert_eq!(encoded(|w| w.null()), [0xf6]);
        let mut long = vec![0x98, 0x19];
        long.extend((1..=25u8).map(|i| if i < 24 { i } else { 0 }));
        let got = encoded(|w| w.uint_array(&(1..=25).collect::<Vec<u32>>()));
        assert_eq!(&got[..2], &long[..2]);
        assert_eq!(&got[got.len() - 4..], [0x18, 0x18, 0x18, 0x19]);
    }
}
