//! What one held batch costs in memory, charged against `--max-buffer-bytes`.
//!
//! A batch read from ZMQ and not yet acknowledged by JetStream is held as a [`Batch`] in its
//! publisher's queue (a tokio unbounded channel). Besides its payload it costs:
//!
//! - its slot in the queue: `size_of::<Batch>()` (64 bytes on 64-bit targets), plus the
//!   queue's per-slot share of its blocks (tokio allocates slots 32 at a time, each block with
//!   a 32-byte header and the allocator's 16-byte chunk header: 1.5 bytes a slot, counted 2);
//! - the payload's own allocation: it is copied into a buffer of exactly its length, which
//!   the allocator rounds up (glibc on x86-64: to a multiple of 16 with an 8-byte header, 32
//!   bytes at least), so at most 32 bytes more than the payload (nothing for an empty one);
//! - once the payload is shared with a publish attempt, the `bytes` crate's control block
//!   (24 bytes, a 32-byte chunk).
//!
//! So a held batch of `n` payload bytes takes at most `n` + [`HELD_BATCH_OVERHEAD`] bytes,
//! and the bytes charged for all held batches stay within the cap whatever their size, an
//! empty payload included. What is not per batch (a queue's partly filled block, each
//! publisher's message being read, a replay reply, the NATS client's buffers) is outside the
//! cap and bounded separately (docs/bridge.md).

use std::mem::size_of;

use super::source::Batch;

/// The queue's share of its block headers per slot (32-byte header and 16-byte allocator
/// header over 32 slots), rounded up.
const QUEUE_SLOT_SHARE: usize = 2;
/// The most the allocator adds to one payload allocation (header and rounding).
const PAYLOAD_ALLOCATION_SLACK: usize = 32;
/// The payload's shared control block once a publish attempt holds a clone of it.
const SHARED_CONTROL_BLOCK: usize = 32;

/// Bytes a held batch costs besides its payload bytes.
pub const HELD_BATCH_OVERHEAD: usize =
    size_of::<Batch>() + QUEUE_SLOT_SHARE + PAYLOAD_ALLOCATION_SLACK + SHARED_CONTROL_BLOCK;

/// Bytes charged against the cap for a held batch of `payload_len` bytes.
pub fn charge(payload_len: usize) -> u64 {
    payload_len as u64 + HELD_BATCH_OVERHEAD as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_batch_is_charged_its_overhead() {
        assert_eq!(charge(0), HELD_BATCH_OVERHEAD as u64);
        assert_eq!(charge(12), 12 + HELD_BATCH_OVERHEAD as u64);
        // The queue slot holds the whole batch: sequence, epoch, payload handle, cap permit.
        assert!(size_of::<Batch>() >= 2 * 8 + size_of::<bytes::Bytes>());
        #[cfg(target_pointer_width = "64")]
        assert_eq!(HELD_BATCH_OVERHEAD, 130);
    }
}
