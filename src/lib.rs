//! The C ABI v1 (`include/kvidx.h`, generated from this module by cbindgen in `build.rs`).
//!
//! Every `unsafe` line of the crate lives here. Each exported function's body is one
//! [`boundary`] `export!` invocation, which contains panics (`KVIDX_ERR_PANIC`, then
//! `KVIDX_ERR_POISONED` on that handle) so no unwinding ever crosses into C. Values from C
//! (`kind`, `backend`, `has_parent`, pointers and lengths) are validated before use.
//!
//! Files: [`c_types`] (the C structs, enums and opaque handle types), [`handle`] (the one
//! generic handle behind every opaque type), [`boundary`] (the export macro), `args` (pointer
//! checks), `c_convert` (C values <-> the core's Rust API), and one file per group of
//! functions.

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod boundary;
pub mod c_types;
pub mod handle;

// Declared in the order the header lists their functions.
mod lifecycle;

mod events;

mod queries;

mod hashing;

mod request_hash;

mod info;

mod engine;

mod feed_state;

mod replica;

mod snapshots;

mod feed_start;

mod hash_check;

mod llmd;
mod predictions;

mod args;
mod c_convert;

/// The version of the C ABI this library implements; the header defines the same macro.
pub const KVIDX_ABI_VERSION: u32 = 1;

/// Defined (1) when the library has storage tiers: `kvidx_tier`, `kvidx_tiered_match`,
/// `kvidx_apply_event_on_tier`, `kvidx_apply_events_on_tiers`, `kvidx_find_matches_tiered`,
/// `kvidx_tiered_score` and the `KVIDX_FEED_UNKNOWN_MEDIUM_*` flags (additions to ABI v1).
pub const KVIDX_HAS_TIERS: u32 = 1;

/// Defined (1) when the library has offset batches, watermarks and snapshots:
/// `KVIDX_ERR_IO`, `kvidx_apply_events_at`, `kvidx_apply_engine_batch_at`,
/// `kvidx_engine_feed_apply_at`, `kvidx_watermark`, `kvidx_replica_stats` with
/// `kvidx_get_replica_stats`, and `kvidx_snapshot_info`, `kvidx_snapshot_sink`,
/// `kvidx_snapshot_source` with `kvidx_snapshot_write(_file)` and
/// `kvidx_snapshot_restore(_file)` (additions to ABI v1).
pub const KVIDX_HAS_SNAPSHOTS: u32 = 1;

/// Defined (1) when engine feeds take engine epochs and save their tracking state:
/// `kvidx_engine_feed_apply_epoch_at`, `kvidx_engine_feed_save_state` and
/// `kvidx_engine_feed_restore_state` (additions to ABI v1).
pub const KVIDX_HAS_FEED_STATE: u32 = 1;

/// Defined (1) when engine feeds report publishers first seen above sequence 0 ("missed from
/// the start"): `kvidx_engine_feed_next_seq`, `kvidx_engine_start_stats` with
/// `kvidx_engine_feed_start_stats` (additions to ABI v1).
pub const KVIDX_HAS_FEED_START: u32 = 1;

/// Defined (1) when engine feeds can check the engines' block hashes:
/// `kvidx_hash_algorithm`, `kvidx_hash_check_stats`, `kvidx_engine_feed_set_hash_check`,
/// `kvidx_engine_feed_clear_hash_check`, `kvidx_engine_feed_hash_check_stats` and
/// `kvidx_engine_feed_hash_check_totals` (additions to ABI v1).
pub const KVIDX_HAS_HASH_CHECK: u32 = 1;

/// Defined (1) when the library computes llm-d's request keys and engine feeds index under
/// them: `kvidx_llmd_request_keys` and `kvidx_engine_feed_set_llmd_keys` (additions to ABI
/// v1).
pub const KVIDX_HAS_LLMD_KEYS: u32 = 1;
/// Defined (1) when the library keeps predicted blocks: `kvidx_clock`,
/// `kvidx_prediction_config` with `kvidx_prediction_config_default` and
/// `kvidx_new_with_predictions`, `kvidx_predict`, `kvidx_predicted_match` with
/// `kvidx_find_matches_predicted`, `kvidx_now`, `kvidx_set_time`, `kvidx_advance_time`, and
/// `kvidx_prediction_stats` with `kvidx_get_prediction_stats` (additions to ABI v1).
pub const KVIDX_HAS_PREDICTIONS: u32 = 1;

pub use c_types::{
    kvidx_backend, kvidx_block, kvidx_config, kvidx_engine_feed, kvidx_engine_format, kvidx_event,
    kvidx_event_kind, kvidx_feed_flag, kvidx_indexer, kvidx_match, kvidx_queue_limits,
    kvidx_replica_stats, kvidx_seq_status, kvidx_snapshot_info, kvidx_snapshot_sink,
    kvidx_snapshot_source, kvidx_stats, kvidx_status, kvidx_tier, kvidx_tiered_match,
};
pub use engine::{
    kvidx_apply_engine_batch, kvidx_apply_engine_batch_at, kvidx_engine_batch_result,
    kvidx_engine_feed_apply, kvidx_engine_feed_apply_at, kvidx_engine_feed_apply_epoch_at,
    kvidx_engine_feed_forget, kvidx_engine_feed_free, kvidx_engine_feed_new,
    kvidx_engine_feed_publishers, kvidx_engine_feed_remove_worker,
    kvidx_engine_feed_remove_worker_dp_rank, kvidx_engine_feed_stats, kvidx_engine_stats,
    KVIDX_DP_RANK_FROM_BATCH, KVIDX_ENGINE_MAX_PAYLOAD,
};
pub use events::{
    kvidx_apply_event, kvidx_apply_events, kvidx_flush, kvidx_remove_worker,
    kvidx_remove_worker_dp_rank,
};
pub use feed_start::{
    kvidx_engine_feed_next_seq, kvidx_engine_feed_start_stats, kvidx_engine_start_stats,
};
pub use feed_state::{kvidx_engine_feed_restore_state, kvidx_engine_feed_save_state};
pub use hash_check::{
    kvidx_engine_feed_clear_hash_check, kvidx_engine_feed_hash_check_stats,
    kvidx_engine_feed_hash_check_totals, kvidx_engine_feed_set_hash_check, kvidx_hash_algorithm,
    kvidx_hash_check_stats,
};
pub use hashing::{kvidx_hash_tokens, kvidx_seq_hashes};
pub use info::{kvidx_abi_version, kvidx_status_str, kvidx_version};
pub use lifecycle::{
    kvidx_config_default, kvidx_debug_panic, kvidx_free, kvidx_new, kvidx_new_with_limits,
    kvidx_queue_limits_default,
};
pub use llmd::{kvidx_engine_feed_set_llmd_keys, kvidx_llmd_request_keys};
pub use predictions::{
    kvidx_advance_time, kvidx_clock, kvidx_find_matches_predicted, kvidx_get_prediction_stats,
    kvidx_new_with_predictions, kvidx_now, kvidx_predict, kvidx_predicted_match,
    kvidx_prediction_config, kvidx_prediction_config_default, kvidx_prediction_stats,
    kvidx_set_time,
};
pub use queries::{kvidx_find_matches, kvidx_get_stats};
pub use replica::{kvidx_apply_events_at, kvidx_get_replica_stats, kvidx_watermark};
pub use request_hash::{kvidx_hash_request, kvidx_mm_span, kvidx_namespace, KVIDX_HAS_NAMESPACES};
pub use snapshots::{
    kvidx_snapshot_restore, kvidx_snapshot_restore_file, kvidx_snapshot_write,
    kvidx_snapshot_write_file,
};

#[cfg(test)]
mod tests;
