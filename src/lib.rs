//! The C ABI v1 (`include/kvidx.h`, generated from this module by cbindgen in `build.rs`).
//!
//! Every `unsafe` line of the crate lives here. Each exported function's body is one
//! [`boundary`] `export!` invocation, which contains panics (`KVIDX_ERR_PANIC`, then
//! `KVIDX_ERR_POISONED` on that handle) so no unwinding ever crosses into C. Values from C
//! (`kind`, `backend`, `has_parent`, pointers and lengths) are validated before use.
//!
//! Files: [`types`] (the C structs and enums), [`boundary`] (the export macro), `args`
//! (pointer checks), `convert` (C <-> Rust), and one file per group of functions.

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod boundary;
pub mod types;

// Declared in the order the header lists their functions.
mod lifecycle;

mod events;

mod queries;

mod hashing;

mod info;

mod engine;

mod args;
mod convert;

/// The version of the C ABI this library implements; the header defines the same macro.
pub const KVIDX_ABI_VERSION: u32 = 1;

pub use events::{
    kvidx_apply_event, kvidx_apply_events, kvidx_flush, kvidx_remove_worker,
    kvidx_remove_worker_dp_rank,
};
pub use hashing::{kvidx_hash_tokens, kvidx_seq_hashes};
pub use info::{kvidx_abi_version, kvidx_status_str, kvidx_version};
pub use lifecycle::{kvidx_config_default, kvidx_debug_panic, kvidx_free, kvidx_new};
pub use queries::{kvidx_find_matches, kvidx_get_stats};
pub use types::{
    kvidx_backend, kvidx_block, kvidx_config, kvidx_event, kvidx_event_kind, kvidx_indexer,
    kvidx_match, kvidx_stats, kvidx_status,
};

#[cfg(test)]
mod tests;
