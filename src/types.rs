//! The C types of ABI v1, laid out exactly as `include/kvidx.h` declares them.
//!
//! Values that arrive from C (`kind`, `backend`, `has_parent`) are plain integers here, never
//! Rust enums, so that any bit pattern a caller passes is a valid value to validate.

use std::sync::atomic::AtomicBool;

use kvidx_core::Indexer;

/// The result of every fallible function. Values are never renumbered or reused.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_status {
    /// Success.
    KVIDX_OK = 0,
    /// A required pointer was NULL (or an array was NULL with a length > 0).
    KVIDX_ERR_NULL_POINTER = 1,
    /// A bad enum value, a bad config value or inconsistent fields (also: an array whose
    /// pointer is misaligned or whose byte size exceeds PTRDIFF_MAX).
    KVIDX_ERR_INVALID_ARGUMENT = 2,
    /// `*out_len` holds the count needed; nothing else was written.
    KVIDX_ERR_BUFFER_TOO_SMALL = 3,
    /// Synchronous mode only: a STORED event was rejected because the worker does not hold
    /// its parent; nothing of it was applied.
    KVIDX_ERR_PARENT_NOT_FOUND = 4,
    /// The indexer's event threads are gone.
    KVIDX_ERR_SHUT_DOWN = 5,
    /// An internal bug was caught at the boundary; the handle is now poisoned.
    KVIDX_ERR_PANIC = 6,
    /// A panic happened earlier on this handle; the only valid call left is `kvidx_free`.
    KVIDX_ERR_POISONED = 7,
    /// Engine ingestion only: the payload is not a valid engine event batch of the given
    /// format (not msgpack, truncated, trailing bytes, a bad envelope, event or field type);
    /// nothing was applied.
    KVIDX_ERR_MALFORMED = 8,
}

/// The index structures an indexer can use (values of `kvidx_config.backend`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_backend {
    /// Per-position maps with exact jump search (the default).
    KVIDX_BACKEND_POSITIONAL = 0,
    /// A concurrent radix tree over local hashes.
    KVIDX_BACKEND_RADIX = 1,
}

/// How to build an indexer. Start from `kvidx_config_default()` and change what you need.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_config {
    /// A `kvidx_backend` value; anything else: `KVIDX_ERR_INVALID_ARGUMENT`.
    pub backend: u32,
    /// Event threads (at most 1024); 0: events are applied synchronously on the caller's thread.
    pub event_threads: u32,
    /// Jump size of the positional backend; 0 = the library's default (32).
    pub jump_size: u32,
}

/// The kinds of engine events (values of `kvidx_event.kind`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_event_kind {
    /// Blocks were cached (`blocks`, optionally continuing `parent_seq_hash`).
    KVIDX_EVENT_STORED = 0,
    /// Blocks were evicted (`seq_hashes`).
    KVIDX_EVENT_REMOVED = 1,
    /// Every block of the worker was dropped.
    KVIDX_EVENT_CLEARED = 2,
}

/// One block of a STORED event.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_block {
    /// Hash of the block's own tokens (see `kvidx_hash_tokens`).
    pub local_hash: u64,
    /// The engine's sequence hash of the block: its name, opaque to the index.
    pub seq_hash: u64,
}

/// An engine event for one worker `(worker_id, dp_rank)`.
///
/// Only the fields of the event's kind are read: `has_parent`, `parent_seq_hash`, `blocks`
/// and `num_blocks` for STORED; `seq_hashes` and `num_seq_hashes` for REMOVED; none for
/// CLEARED. Fields of other kinds are ignored whatever they hold.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvidx_event {
    /// A `kvidx_event_kind` value; anything else: `KVIDX_ERR_INVALID_ARGUMENT`.
    pub kind: u32,
    /// The engine instance.
    pub worker_id: u64,
    /// The data-parallel rank inside that instance.
    pub dp_rank: u32,
    /// Per `(worker_id, dp_rank)`, increasing; recorded for diagnostics.
    pub event_id: u64,
    /// STORED: 0 = the blocks start at position 0, 1 = they continue `parent_seq_hash`;
    /// anything else: `KVIDX_ERR_INVALID_ARGUMENT`.
    pub has_parent: u8,
    /// STORED with `has_parent == 1`: the sequence hash of a block the worker holds.
    pub parent_seq_hash: u64,
    /// STORED: the new blocks in chain order (may be NULL when `num_blocks == 0`).
    pub blocks: *const kvidx_block,
    /// STORED: the number of entries in `blocks`.
    pub num_blocks: usize,
    /// REMOVED: the sequence hashes of the removed blocks (may be NULL when 0 of them).
    pub seq_hashes: *const u64,
    /// REMOVED: the number of entries in `seq_hashes`.
    pub num_seq_hashes: usize,
}

/// One worker's answer to a query: how many leading blocks of the query it holds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_match {
    /// The worker's engine instance.
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    pub dp_rank: u32,
    /// The length of the longest prefix of the query the worker holds (always > 0).
    pub depth: u32,
}

/// The counters of an indexer.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_stats {
    /// Events fully applied (a REMOVED with unknown names still counts once).
    pub events_applied: u64,
    /// STORED events rejected for a missing parent, or otherwise invalid.
    pub events_rejected: u64,
    /// Names in REMOVED events that the worker did not hold.
    pub unknown_removals: u64,
    /// Known `(worker_id, dp_rank)` pairs.
    pub workers: u64,
    /// Sum over workers of the blocks they hold.
    pub worker_blocks: u64,
}

/// The opaque handle C callers hold: an indexer plus its poison flag.
pub struct kvidx_indexer {
    /// Set when a panic was caught during a call on this handle.
    pub(crate) poisoned: AtomicBool,
    /// The Rust indexer behind the handle.
    pub(crate) indexer: Indexer,
}

// The C structs that mirror Rust model types must keep the same layout, so that results can
// be copied out without conversion.
const _: () = {
    use std::mem::{align_of, offset_of, size_of};
    assert!(size_of::<kvidx_match>() == size_of::<kvidx_core::Match>());
    assert!(align_of::<kvidx_match>() == align_of::<kvidx_core::Match>());
    assert!(offset_of!(kvidx_match, worker_id) == offset_of!(kvidx_core::Match, worker_id));
    assert!(offset_of!(kvidx_match, dp_rank) == offset_of!(kvidx_core::Match, dp_rank));
    assert!(offset_of!(kvidx_match, depth) == offset_of!(kvidx_core::Match, depth));
    assert!(size_of::<kvidx_block>() == size_of::<kvidx_core::Block>());
    assert!(align_of::<kvidx_block>() == align_of::<kvidx_core::Block>());
    assert!(offset_of!(kvidx_block, local_hash) == offset_of!(kvidx_core::Block, local_hash));
    assert!(offset_of!(kvidx_block, seq_hash) == offset_of!(kvidx_core::Block, seq_hash));
};
