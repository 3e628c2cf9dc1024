//! An engine's full block digest (32 bytes for SHA-256, 16 for XXH3-128) and the name events
//! carry for it.

/// A block digest of up to 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Digest {
    bytes: [u8; 32],
    len: u8,
}

impl Digest {
    /// A SHA-256 digest.
    pub(crate) fn sha256(bytes: [u8; 32]) -> Self {
        Self { bytes, len: 32 }
    }

    /// An XXH3-128 digest, in its canonical (big-endian) byte order.
    pub(crate) fn xxh3_128(value: u128) -> Self {
        let mut bytes = [0u8; 32];
        bytes[..16].copy_from_slice(&value.to_be_bytes());
        Self { bytes, len: 16 }
    }

    /// The digest's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// vLLM's published name: the last 8 bytes, big-endian.
    pub(crate) fn last_u64(&self) -> u64 {
        let bytes = self.as_bytes();
        let mut tail = [0u8; 8];
        tail.copy_from_slice(&bytes[bytes.len() - 8..]);
        u64::from_be_bytes(tail)
    }

    /// SGLang's published name: the first 8 bytes, big-endian (sent as a signed int64).
    pub(crate) fn first_u64(&self) -> u64 {
        let mut head = [0u8; 8];
        head.copy_from_slice(&self.bytes[..8]);
        u64::from_be_bytes(head)
    }
}
