//! An engine feed's hash check through the C ABI (`KVIDX_HAS_HASH_CHECK`): the feed recomputes
//! the engine's own block hashes from what its stores publish and counts, per publisher, the
//! blocks it reproduced, those it did not and those it could not recompute.

use super::args;
use super::boundary::export;
use super::c_types::{kvidx_engine_feed, kvidx_status};
use super::engine::lock;
use super::llmd::utf8;
use kvidx_core::engine::{HashAlgorithm, HashCheckConfig, HashCheckCounts};
use kvidx_core::Worker;

/// The engine's block hash algorithm for `kvidx_engine_feed_set_hash_check` (passed as
/// `uint32_t`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum kvidx_hash_algorithm {
    /// vLLM `--prefix-caching-hash-algo sha256_cbor`.
    KVIDX_HASH_VLLM_SHA256_CBOR = 0,
    /// vLLM `--prefix-caching-hash-algo xxhash_cbor`.
    KVIDX_HASH_VLLM_XXHASH_CBOR = 1,
    /// SGLang 0.5.23's per-page SHA-256 chain.
    KVIDX_HASH_SGLANG_SHA256 = 2,
}

/// The hash check's counts of blocks, by outcome; every counter saturates at `UINT64_MAX`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct kvidx_hash_check_stats {
    /// Blocks whose published name the check reproduced.
    pub matched: u64,
    /// Blocks whose published name differs from the one recomputed (another algorithm, seed
    /// or block size than the check was given).
    pub mismatched: u64,
    /// Blocks the check could not recompute (no tokens, a parent it never saw, a LoRA
    /// adapter's unpublished path, lookahead tokens).
    pub unverifiable: u64,
}

impl From<HashCheckCounts> for kvidx_hash_check_stats {
    fn from(c: HashCheckCounts) -> Self {
        Self {
            matched: c.matched,
            mismatched: c.mismatched,
            unverifiable: c.unverifiable,
        }
    }
}

fn algorithm(value: u32) -> Result<HashAlgorithm, kvidx_status> {
    use kvidx_hash_algorithm::*;
    match value {
        v if v == KVIDX_HASH_VLLM_SHA256_CBOR as u32 => Ok(HashAlgorithm::VllmSha256Cbor),
        v if v == KVIDX_HASH_VLLM_XXHASH_CBOR as u32 => Ok(HashAlgorithm::VllmXxhashCbor),
        v if v == KVIDX_HASH_SGLANG_SHA256 as u32 => Ok(HashAlgorithm::SglangSha256),
        _ => Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT),
    }
}

/// Turns the feed's hash check on (off by default), replacing any earlier check and its
/// counts. `algorithm` is a `kvidx_hash_algorithm`; `seed[0 .. seed_len]` (UTF-8) is vLLM's
/// `NONE_HASH` seed: the engine's `PYTHONHASHSEED`, or `"vllm-none-hash"` for the sha256
/// algorithms when it is unset (SGLang ignores it); `block_size` is the router's block size
/// (0: each store's own). The check changes nothing in what the feed indexes; while it is on,
/// the feed decodes every field of each event (up to 32 bytes of memory per payload byte).
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or a NULL `seed` with `seed_len > 0`,
/// `KVIDX_ERR_INVALID_ARGUMENT` for an unknown algorithm or a seed that is not UTF-8,
/// `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `seed` is readable for `seed_len` bytes.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_set_hash_check(
    feed: *const kvidx_engine_feed,
    algorithm: u32,
    seed: *const u8,
    seed_len: usize,
    block_size: u32,
) -> kvidx_status {
    export!(handle feed, |feed| {
        let algorithm = self::algorithm(algorithm)?;
        // SAFETY: the caller guarantees `seed_len` readable bytes at `seed` (checked for NULL).
        let seed = utf8(unsafe { args::input(seed, seed_len) }?)?;
        let config = HashCheckConfig {
            algorithm,
            seed: seed.to_owned(),
            block_size: (block_size > 0).then_some(block_size),
        };
        lock(feed)?.set_hash_check(Some(config));
        Ok(())
    })
}

/// Turns the feed's hash check off and drops its state and counts.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed`, `KVIDX_ERR_POISONED` if an earlier
/// call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_clear_hash_check(
    feed: *const kvidx_engine_feed,
) -> kvidx_status {
    export!(handle feed, |feed| {
        lock(feed)?.set_hash_check(None);
        Ok(())
    })
}

/// Copies the hash check's counts for the publisher `(worker_id, dp_rank)` (zeros for one it
/// saw no store of) to `*out`.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_INVALID_ARGUMENT`
/// when the check is off, `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_hash_check_stats(
    feed: *const kvidx_engine_feed,
    worker_id: u64,
    dp_rank: u32,
    out: *mut kvidx_hash_check_stats,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out)?;
        let counts = lock(feed)?
            .hash_check_counts(Worker::new(worker_id, dp_rank))
            .ok_or(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)?;
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(counts.into()) };
        Ok(())
    })
}

/// Copies the hash check's counts summed over every publisher (those forgotten or removed
/// through the feed included) to `*out`.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out`, `KVIDX_ERR_INVALID_ARGUMENT`
/// when the check is off, `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_hash_check_totals(
    feed: *const kvidx_engine_feed,
    out: *mut kvidx_hash_check_stats,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out)?;
        let counts = lock(feed)?
            .hash_check_totals()
            .ok_or(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)?;
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(counts.into()) };
        Ok(())
    })
}
