//! The decoded form of an engine's `KVEventBatch`: plain data, nothing dropped that the wire
//! format defines (medium, group, LoRA, extra keys, ...), hashes already folded to `u64`.

use crate::model::Tier;

use super::store_keys::StoreKeys;

/// Which engine published a payload. Decides the positional layout of array-encoded events;
/// map-encoded events are decoded by field name for every engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// vLLM, every generation (array-tagged before PR #42892, map-tagged after).
    Vllm,
    /// SGLang: its own field positions after index 6, hashes published as signed int64.
    Sglang,
    /// TensorRT-LLM's vLLM-compatible ZMQ publisher (decoded like vLLM).
    TrtLlm,
}

/// Where an engine says a block lives. Compared case-insensitively on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Medium {
    /// Accelerator memory (`"GPU"`): the cache the engine's scheduler hits directly.
    Gpu,
    /// Host memory (`"CPU"`, vLLM offload connectors).
    Cpu,
    /// Pinned host memory (`"CPU_PINNED"`, SGLang).
    CpuPinned,
    /// Local disk (`"DISK"`, SGLang).
    Disk,
    /// Storage tier (`"STORAGE"`, vLLM offload connectors).
    Storage,
    /// External store (`"EXTERNAL"`, SGLang).
    External,
    /// Any other name, upper-cased.
    Other(String),
}

impl Medium {
    /// The storage tier of blocks on this medium: GPU on the device; CPU and pinned CPU in
    /// host memory; DISK and STORAGE on disk; EXTERNAL external; any other name on `unknown`.
    pub fn tier(&self, unknown: Tier) -> Tier {
        match self {
            Self::Gpu => Tier::Device,
            Self::Cpu | Self::CpuPinned => Tier::Host,
            Self::Disk | Self::Storage => Tier::Disk,
            Self::External => Tier::External,
            Self::Other(_) => unknown,
        }
    }

    /// Parses a medium name, ignoring ASCII case.
    pub fn parse(name: &str) -> Self {
        let upper = name.to_ascii_uppercase();
        match upper.as_str() {
            "GPU" => Self::Gpu,
            "CPU" => Self::Cpu,
            "CPU_PINNED" => Self::CpuPinned,
            "DISK" => Self::Disk,
            "STORAGE" => Self::Storage,
            "EXTERNAL" => Self::External,
            _ => Self::Other(upper),
        }
    }
}

/// One element of a block's published `extra_keys` list (vLLM 0.33, untagged form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtraKey {
    /// A bare string: the LoRA name (equal to the event's `lora_name`) or the cache salt.
    Text(String),
    /// A multimodal item overlapping the block: identifier and offset of the item start
    /// relative to the block start (some versions published the identifier alone: offset 0).
    Multimodal {
        /// The item's identifier (its content hash).
        identifier: String,
        /// Offset of the item's start relative to the block's start, in tokens.
        offset: i64,
    },
    /// A prompt-embeds digest (bin).
    Digest(Vec<u8>),
    /// Anything else (kept opaque, so an unknown shape is not fatal).
    Other,
}

/// A decoded `BlockStored` event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockStored {
    /// The engine's hashes of the newly stored blocks, in chain order, folded to `u64`.
    pub block_hashes: Vec<u64>,
    /// The engine's hash of the block before `block_hashes[0]`; `None` starts a sequence.
    pub parent_block_hash: Option<u64>,
    /// Tokens of exactly these blocks (may be empty, e.g. for offload connector events).
    pub token_ids: Vec<u32>,
    /// Tokens per block.
    pub block_size: u32,
    /// Deprecated integer adapter id.
    pub lora_id: Option<i64>,
    /// Where the blocks live; `None` when the engine did not say (older engines: GPU).
    pub medium: Option<Medium>,
    /// Adapter name; the local hashes use the LoRA seed when it is set (both engines).
    pub lora_name: Option<String>,
    /// Per-block hash inputs (vLLM 0.33: LoRA name, multimodal items, salt, embeds digests),
    /// as published. `None` when absent, and when decoded for the index only (see `keys`).
    pub extra_keys: Option<Vec<Option<Vec<ExtraKey>>>>,
    /// `extra_keys` reduced to what the index folds into local hashes, set instead of
    /// `extra_keys` when a payload is decoded for the index only (the apply path); `None`
    /// otherwise, in which case the conversion derives it from `extra_keys`
    /// ([`StoreKeys::of_extra_keys`]).
    pub keys: Option<StoreKeys>,
    /// KV-cache group (hybrid memory allocator); `None` when not published.
    pub group_idx: Option<u32>,
    /// KV-cache spec kind of the group (`full_attention`, `sliding_window`, ...).
    pub kv_cache_spec_kind: Option<String>,
    /// Sliding window in tokens, for sliding-window groups.
    pub kv_cache_spec_sliding_window: Option<u64>,
    /// `LOCAL` / `REMOTE` relative to the publisher (vLLM 0.33).
    pub locality: Option<String>,
    /// Secondary offload tier id (vLLM 0.33).
    pub ownership: Option<String>,
    /// Request session attribution (vLLM 0.33, SGLang).
    pub session_id: Option<String>,
    /// Tokens beyond each block mixed into its hash (vLLM 0.33 lookahead hashing).
    pub lookahead_token_ids: Option<Vec<Vec<u32>>>,
    /// SGLang's cache salt: every store of a salted request carries it; its hashes live in
    /// the salt's namespace.
    pub cache_salt: Option<String>,
}

/// A decoded `BlockRemoved` event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BlockRemoved {
    /// The engine's hashes of the evicted blocks, folded to `u64`.
    pub block_hashes: Vec<u64>,
    /// Where the blocks were evicted from; `None` when the engine did not say.
    pub medium: Option<Medium>,
    /// KV-cache group; `None` when not published.
    pub group_idx: Option<u32>,
    /// `LOCAL` / `REMOTE` relative to the publisher (vLLM 0.33).
    pub locality: Option<String>,
    /// Secondary offload tier id (vLLM 0.33).
    pub ownership: Option<String>,
}

/// One decoded engine event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineEvent {
    /// Blocks became full and cached (boxed: by far the largest variant).
    BlockStored(Box<BlockStored>),
    /// Blocks were evicted (boxed too, so an event takes little more than a pointer).
    BlockRemoved(Box<BlockRemoved>),
    /// The engine dropped its whole prefix cache (`reset_prefix_cache`).
    AllBlocksCleared,
    /// An event whose tag this decoder does not know; kept so it can be counted as skipped.
    Unknown {
        /// The tag as published (empty if the event had none that could be read).
        tag: String,
    },
}

/// A fully decoded `KVEventBatch` payload.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedBatch {
    /// Publication time (seconds since the epoch) as the engine wrote it.
    pub ts: f64,
    /// The events, in order.
    pub events: Vec<EngineEvent>,
    /// The data-parallel rank in the envelope; `None` when absent (2-element envelope) or nil.
    pub dp_rank: Option<u32>,
}
