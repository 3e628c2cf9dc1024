//! Engine KV events: the msgpack `KVEventBatch` payloads that vLLM, SGLang and TensorRT-LLM
//! publish over ZMQ, decoded and applied to an [`Indexer`](crate::Indexer).
//!
//! - [`decode_batch`] decodes one payload (both event encodings of vLLM, every generation of
//!   field lists, SGLang's positions, envelopes of 2 or 3 elements or a map) into a
//!   [`DecodedBatch`]; engine hashes (unsigned, signed or bin) are folded to `u64`.
//! - [`to_events`] turns it into index events: local hashes from the published tokens with
//!   [`crate::hashing`] (LoRA seed when `lora_name` is set) and, by default, the store's cache
//!   salt and multimodal keys folded in ([`crate::namespace`], [`StoreKeys`],
//!   [`ExtrasPolicy`]), engine hashes as opaque names, filtered by medium and KV-cache group
//!   ([`ApplyOptions`]).
//! - [`apply_payload`] / [`EngineFeed::apply_message`] decode fully, then apply: a malformed
//!   batch leaves the index unchanged. [`EngineFeed`] tracks each publisher's 8-byte
//!   big-endian batch sequence ([`SeqTracker`]) and reports gaps and restarts.
//!
//! - Optionally, [`EngineFeed::set_hash_check`] recomputes the engine's own block hashes
//!   ([`hash_check`]) and counts matches per publisher, and [`EngineFeed::set_llmd_keys`]
//!   indexes stores under llm-d's request keys ([`crate::llmd`]) instead of local hashes.
//!
//! Recommended reaction to a gap: ask the engine's replay socket for the missing range
//! (`start_seq` = the first missing sequence) and apply it before the batch that revealed the
//! gap; if there is no replay socket or it no longer holds the range, clear the worker. A
//! publisher's sequence starts at 0, so its first batch above 0 is missing batches too
//! ([`BatchReport::missed_from_start`], [`EngineFeed::next_expected`]): ask the replay socket
//! from 0. To a restart: clear the worker (the restarted engine's cache is empty).

mod batch;
mod chain_names;
mod decode;
mod error;
mod feed;
mod feed_hooks;
mod feed_state;
pub mod hash_check;
mod llmd_keys;
mod msgpack;
mod seq;
mod store_keys;
mod to_index;
mod wire;

pub use batch::{BlockRemoved, BlockStored, DecodedBatch, EngineEvent, ExtraKey, Format, Medium};
pub use decode::{decode_batch, BatchEvents, MAX_PAYLOAD_BYTES};
pub use error::DecodeError;
pub use feed::{
    apply_batch, apply_payload, apply_payload_at, BatchReport, EngineFeed, EngineStats, EventSink,
    FeedConfig, FeedError,
};
pub use feed_state::{FeedStateError, PublisherState};
pub use hash_check::{HashAlgorithm, HashCheckConfig, HashCheckCounts};
pub use llmd_keys::LlmdKeysConfig;
pub use msgpack::MAX_DEPTH;
pub use seq::{parse_seq_frame, SeqCounters, SeqStatus, SeqTracker, REPLAY_END_SEQ};
pub use store_keys::{StoreKeys, StoreKeysBuilder};
pub use to_index::{to_events, ApplyOptions, Conversion, ExtrasPolicy, MediaFilter, SkipCounts};
