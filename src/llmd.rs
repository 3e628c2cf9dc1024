//! llm-d's request keys through the C ABI (`KVIDX_HAS_LLMD_KEYS`): computed from tokens for
//! a query, and as the keys an engine feed indexes stores under.

use super::args;
use super::boundary::export;
use super::c_types::{kvidx_engine_feed, kvidx_status};
use super::engine::lock;
use kvidx_core::engine::LlmdKeysConfig;
use kvidx_core::llmd;

/// A C string argument as UTF-8.
pub(crate) fn utf8(bytes: &[u8]) -> Result<&str, kvidx_status> {
    std::str::from_utf8(bytes).map_err(|_| kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)
}

/// Computes llm-d's request keys of every full block of `block_size` tokens: FNV-64a over
/// the canonical CBOR of `[parent, block tokens, null]`, chained from the root key
/// `FNV-64a(CBOR [FNV-64a(seed), null, model])`. `seed[0 .. seed_len]` is llm-d's
/// `HashSeed` (UTF-8; llm-d's default is empty), `model[0 .. model_len]` the model or LoRA
/// adapter name (UTF-8). Trailing tokens that do not fill a block are ignored.
///
/// On `KVIDX_OK`, `out[0 .. *out_len]` holds `num_tokens / block_size` keys. If `out_cap` is
/// smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count in `*out_len` and `out`
/// untouched. `block_size == 0` or a seed or model that is not UTF-8 is
/// `KVIDX_ERR_INVALID_ARGUMENT`. Thread-safe; no state.
///
/// # Safety
/// `tokens` is readable for `num_tokens` entries, `seed` for `seed_len` bytes, `model` for
/// `model_len` bytes; `out` is writable for `out_cap` entries; `out_len` is NULL or writable.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvidx_llmd_request_keys(
    tokens: *const u32,
    num_tokens: usize,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    model: *const u8,
    model_len: usize,
    out: *mut u64,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(status, {
        args::required(out_len)?;
        args::check_array(out, out_cap)?;
        // SAFETY: the caller guarantees the lengths readable at each pointer (NULL checked).
        let (tokens, seed, model) = unsafe {
            (
                args::input(tokens, num_tokens)?,
                args::input(seed, seed_len)?,
                args::input(model, model_len)?,
            )
        };
        let (seed, model) = (utf8(seed)?, utf8(model)?);
        if block_size == 0 {
            return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
        }
        let keys = llmd::request_keys(tokens, block_size as usize, seed, model);
        // SAFETY: `out` is writable for `out_cap` entries and `out_len` writable (caller); a
        // fresh `Vec` never overlaps `out`.
        unsafe { args::output(&keys, out, out_cap, out_len) }
    })
}

/// Sets the keys the feed indexes stores under: llm-d's request keys with llm-d's
/// `seed[0 .. seed_len]` and the model name `model[0 .. model_len]` (a store with a LoRA
/// adapter roots at the adapter's name), instead of kvidx's local hashes (the default). A
/// store those keys cannot express (a cache salt, multimodal items, prompt embeddings,
/// lookahead tokens) or whose parent the feed never saw is skipped (`skipped_unhashable`).
/// Set it before the feed's first batch.
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed`, or a NULL `seed` or `model` with a
/// length > 0, `KVIDX_ERR_INVALID_ARGUMENT` for a seed or model that is not UTF-8,
/// `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `seed` and `model` are readable for their lengths.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_set_llmd_keys(
    feed: *const kvidx_engine_feed,
    seed: *const u8,
    seed_len: usize,
    model: *const u8,
    model_len: usize,
) -> kvidx_status {
    export!(handle feed, |feed| {
        // SAFETY: the caller guarantees the lengths readable at each pointer (NULL checked).
        let (seed, model) = unsafe { (args::input(seed, seed_len)?, args::input(model, model_len)?) };
        let config = LlmdKeysConfig {
            seed: utf8(seed)?.to_owned(),
            model: utf8(model)?.to_owned(),
        };
        lock(feed)?.set_llmd_keys(Some(config));
        Ok(())
    })
}
