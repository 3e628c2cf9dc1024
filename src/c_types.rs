//! The C types of ABI v1, laid out exactly as `include/kvidx.h` declares them.
//!
//! Values that arrive from C (`kind`, `backend`, `has_parent`) are plain integers here, never
//! Rust enums, so that any bit pattern a caller passes is a valid value to validate.

use std::ffi::CStr;
use std::sync::Mutex;

use kvidx_core::engine::EngineFeed;
use kvidx_core::Indexer;

use super::handle::{Handle, Opaque};

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
    /// Engine ingestion: the payload is not a valid engine event batch of the given
    /// format (not msgpack, truncated, trailing bytes, a bad envelope, event or field type);
    /// nothing was applied. Snapshots: the input is not a valid kvidx snapshot (truncated,
    /// corrupted, foreign, a newer format version); the indexer was left empty.
    KVIDX_ERR_MALFORMED = 8,
    /// Engine ingestion only: the payload is larger than `KVIDX_ENGINE_MAX_PAYLOAD`; nothing
    /// was read or applied.
    KVIDX_ERR_TOO_LARGE = 9,
    /// Snapshots only: a sink or source callback reported failure, or a file could not be
    /// opened, read or written.
    KVIDX_ERR_IO = 10,
}

/// Defines, from one list, every status's text (`"NAME: description"`) and the list of all
/// statuses; the `match` is exhaustive, so a new status does not compile without its text.
macro_rules! status_texts {
    ($($name:ident: $text:literal,)*) => {
        impl kvidx_status {
            /// Every status, in the order of the list.
            pub(crate) const ALL: &'static [kvidx_status] = &[$(kvidx_status::$name,)*];

            /// The status's static text, `"NAME: description"`.
            pub(crate) fn text(self) -> &'static CStr {
                match self {
                    $(kvidx_status::$name => const_cstr(
                        concat!(stringify!($name), ": ", $text, "\0"),
                    ),)*
                }
            }
        }
    };
}

/// A NUL-terminated literal as a `CStr` (checked at compile time where it is used in a const,
/// and by the status-text unit test).
const fn const_cstr(text: &'static str) -> &'static CStr {
    match CStr::from_bytes_with_nul(text.as_bytes()) {
        Ok(text) => text,
        Err(_) => c"kvidx: a status text contains a NUL byte",
    }
}

status_texts! {
    KVIDX_OK: "success",
    KVIDX_ERR_NULL_POINTER: "a required pointer was NULL",
    KVIDX_ERR_INVALID_ARGUMENT: "a bad enum value, config value or inconsistent fields",
    KVIDX_ERR_BUFFER_TOO_SMALL: "*out_len holds the count needed",
    KVIDX_ERR_PARENT_NOT_FOUND: "the worker does not hold the parent block",
    KVIDX_ERR_SHUT_DOWN: "the indexer's event threads are gone",
    KVIDX_ERR_PANIC: "an internal bug was caught at the boundary",
    KVIDX_ERR_POISONED: "a panic happened earlier on this handle; free it",
    KVIDX_ERR_MALFORMED: "the payload is not a valid engine event batch; nothing was applied",
    KVIDX_ERR_TOO_LARGE: "the payload is larger than KVIDX_ENGINE_MAX_PAYLOAD; nothing was applied",
    KVIDX_ERR_IO: "a snapshot sink or source callback failed, or a file could not be used",
}

/// The index structures an indexer can use (values of `kvidx_config.backend`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_backend {
    /// Per-position maps with exact jump search.
    KVIDX_BACKEND_POSITIONAL = 0,
    /// A concurrent radix tree over local hashes.
    KVIDX_BACKEND_RADIX = 1,
    /// A tree of runs: consecutive blocks stored once for all the workers holding them (the
    /// default of `kvidx_config_default()`).
    KVIDX_BACKEND_RUNS = 2,
}

/// How to build an indexer. Start from `kvidx_config_default()` and change what you need.
/// Queue limits are set with `kvidx_new_with_limits` (`kvidx_queue_limits`).
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

/// Storage tiers, fastest first (values of the `tier` arguments of
/// `kvidx_apply_event_on_tier` and `kvidx_apply_events_on_tiers`, and indexes of
/// `kvidx_tiered_match.tier_depths`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_tier {
    /// The accelerator's own memory (GPU): where blocks of plain events are.
    KVIDX_TIER_DEVICE = 0,
    /// Host memory (CPU DRAM).
    KVIDX_TIER_HOST = 1,
    /// Local disk.
    KVIDX_TIER_DISK = 2,
    /// A remote or shared store.
    KVIDX_TIER_EXTERNAL = 3,
    /// REMOVED and CLEARED only: every tier (what `kvidx_apply_event` does).
    KVIDX_TIER_ALL = 255,
}

/// One worker's answer to a tiered query (`kvidx_find_matches_tiered`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_tiered_match {
    /// The worker's engine instance.
    pub worker_id: u64,
    /// The worker's data-parallel rank.
    pub dp_rank: u32,
    /// The longest prefix of the query the worker holds on any tier (always > 0): the depth
    /// `kvidx_find_matches` reports.
    pub depth: u32,
    /// `tier_depths[t]`: the longest prefix whose every block the worker holds on tier `t` or
    /// a faster one (indexes are `kvidx_tier` values), so they never decrease with `t` and
    /// `tier_depths[KVIDX_TIER_EXTERNAL] == depth`.
    pub tier_depths: [u32; 4],
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

/// Counters of offset batches (`kvidx_apply_events_at`, `kvidx_apply_engine_batch_at`,
/// `kvidx_engine_feed_apply_at`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_replica_stats {
    /// Offset batches applied.
    pub batches_applied: u64,
    /// Offset batches skipped whole because their offset was at or below their worker's
    /// watermark.
    pub batches_skipped: u64,
    /// Events in the skipped batches (counted nowhere else).
    pub events_skipped: u64,
}

/// What a snapshot holds (`kvidx_snapshot_write`, `kvidx_snapshot_restore`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_snapshot_info {
    /// Workers `(worker_id, dp_rank)` in the snapshot, empty ones included.
    pub workers: u64,
    /// Held `(worker, name)` pairs.
    pub blocks: u64,
    /// Bytes of the snapshot.
    pub bytes: u64,
    /// The smallest watermark of any worker (0 if one has none, or there is no worker).
    pub min_watermark: u64,
    /// The largest watermark of any worker.
    pub max_watermark: u64,
}

/// Receives the bytes of a snapshot being written, in order: `len` bytes at `data`, valid
/// only during the call. Returns 0 to go on; anything else stops the write with
/// `KVIDX_ERR_IO`. It must return normally (no `longjmp`, no C++ exception through it).
pub type kvidx_snapshot_sink =
    Option<unsafe extern "C" fn(user: *mut std::ffi::c_void, data: *const u8, len: usize) -> i32>;

/// Supplies the bytes of a snapshot being restored: writes up to `cap` bytes to `buf` and
/// their count to `*got` (`*got == 0`: the end of the input). Returns 0 on success; anything
/// else stops the restore with `KVIDX_ERR_IO`. It must return normally (no `longjmp`, no C++
/// exception through it).
pub type kvidx_snapshot_source = Option<
    unsafe extern "C" fn(
        user: *mut std::ffi::c_void,
        buf: *mut u8,
        cap: usize,
        got: *mut usize,
    ) -> i32,
>;

/// Queue limits of an indexer with event threads (an addition to `kvidx_config`, whose
/// layout is fixed). Start from `kvidx_queue_limits_default()`; pass to
/// `kvidx_new_with_limits`. Ignored when `event_threads == 0`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct kvidx_queue_limits {
    /// Events each event thread may have queued before apply calls block; 0 = the default
    /// (4096); at most 1048576, more is `KVIDX_ERR_INVALID_ARGUMENT`.
    pub queue_capacity: u64,
    /// Bytes of queued work (events with their blocks and hashes) each event thread may
    /// hold before apply calls block; 0 = the default (32 MiB). An event larger than the
    /// budget is still accepted, alone in an otherwise empty queue. A value the library
    /// cannot represent or accept is `KVIDX_ERR_INVALID_ARGUMENT`.
    pub queue_bytes: u64,
}

/// The engine formats (values of the `format` argument of the engine functions).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_engine_format {
    /// vLLM, every generation (tagged arrays and tagged maps).
    KVIDX_ENGINE_VLLM = 0,
    /// SGLang (its own array positions; signed hashes).
    KVIDX_ENGINE_SGLANG = 1,
    /// TensorRT-LLM's vLLM-compatible ZMQ publisher.
    KVIDX_ENGINE_TRTLLM = 2,
}

/// How a batch's sequence number related to its publisher's previous one (values of
/// `kvidx_engine_batch_result.seq_status`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_seq_status {
    /// No sequence was given.
    KVIDX_SEQ_UNTRACKED = 0,
    /// The first batch seen from this publisher (or since it was forgotten).
    KVIDX_SEQ_FIRST = 1,
    /// The expected next batch.
    KVIDX_SEQ_IN_ORDER = 2,
    /// Batches `seq_expected ..` were missed (`batches_missed` of them).
    KVIDX_SEQ_GAP = 3,
    /// The sequence went backwards (the publisher restarted).
    KVIDX_SEQ_RESTART = 4,
}

/// Flags of `kvidx_engine_feed_new` (bits, combined with `|`; pass the result as `uint32_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_feed_flag {
    /// Do not clear the worker after a gap (the caller replays the missing range).
    KVIDX_FEED_NO_CLEAR_ON_GAP = 1,
    /// Do not clear the worker when its publisher restarts.
    KVIDX_FEED_NO_CLEAR_ON_RESTART = 2,
    /// Index every medium (CPU, storage tiers...), not only the GPU cache.
    KVIDX_FEED_ALL_MEDIA = 4,
    /// Index every KV-cache group, not only group 0.
    KVIDX_FEED_ALL_GROUPS = 8,
    /// Index stores whose engine hashes include extra keys by their tokens alone (default:
    /// under their namespace, or skipped when no query can name their keys).
    KVIDX_FEED_HASH_TOKENS_ONLY = 16,
    /// With `KVIDX_FEED_ALL_MEDIA`: a medium the decoder does not know is on the device
    /// (default: on `KVIDX_TIER_EXTERNAL`). At most one `KVIDX_FEED_UNKNOWN_MEDIUM_*` flag.
    KVIDX_FEED_UNKNOWN_MEDIUM_DEVICE = 32,
    /// With `KVIDX_FEED_ALL_MEDIA`: a medium the decoder does not know is in host memory.
    KVIDX_FEED_UNKNOWN_MEDIUM_HOST = 64,
    /// With `KVIDX_FEED_ALL_MEDIA`: a medium the decoder does not know is on disk.
    KVIDX_FEED_UNKNOWN_MEDIUM_DISK = 128,
    /// Skip every store whose engine hashes include extra keys (cache salt, multimodal items,
    /// ...) instead of indexing it under its namespace (the default, docs/contract.md section
    /// 3.1). Not with `KVIDX_FEED_HASH_TOKENS_ONLY`. `KVIDX_HAS_NAMESPACES`.
    KVIDX_FEED_SKIP_EXTRAS = 256,
}

/// The opaque handle of an indexer (`kvidx_new`, `kvidx_free`).
pub struct kvidx_indexer(Handle<Indexer>);

/// An opaque engine feed: sequence tracking and counters per publisher `(worker_id, dp_rank)`
/// (`kvidx_engine_feed_new`, `kvidx_engine_feed_free`). Calls on one feed are serialised.
pub struct kvidx_engine_feed(Handle<Mutex<EngineFeed>>);

impl Opaque for kvidx_indexer {
    type Value = Indexer;
    fn wrap(handle: Handle<Indexer>) -> Self {
        Self(handle)
    }
    fn handle(&self) -> &Handle<Indexer> {
        &self.0
    }
}

impl Opaque for kvidx_engine_feed {
    type Value = Mutex<EngineFeed>;
    fn wrap(handle: Handle<Mutex<EngineFeed>>) -> Self {
        Self(handle)
    }
    fn handle(&self) -> &Handle<Mutex<EngineFeed>> {
        &self.0
    }
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
    assert!(size_of::<kvidx_tiered_match>() == size_of::<kvidx_core::TieredMatch>());
    assert!(align_of::<kvidx_tiered_match>() == align_of::<kvidx_core::TieredMatch>());
    assert!(
        offset_of!(kvidx_tiered_match, worker_id) == offset_of!(kvidx_core::TieredMatch, worker_id)
    );
    assert!(
        offset_of!(kvidx_tiered_match, dp_rank) == offset_of!(kvidx_core::TieredMatch, dp_rank)
    );
    assert!(offset_of!(kvidx_tiered_match, depth) == offset_of!(kvidx_core::TieredMatch, depth));
    assert!(
        offset_of!(kvidx_tiered_match, tier_depths)
            == offset_of!(kvidx_core::TieredMatch, tier_depths)
    );
    assert!(size_of::<kvidx_block>() == size_of::<kvidx_core::Block>());
    assert!(align_of::<kvidx_block>() == align_of::<kvidx_core::Block>());
    assert!(offset_of!(kvidx_block, local_hash) == offset_of!(kvidx_core::Block, local_hash));
    assert!(offset_of!(kvidx_block, seq_hash) == offset_of!(kvidx_core::Block, seq_hash));
};
