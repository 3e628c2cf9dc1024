//! Query-side hashing of namespaced and multimodal requests (docs/contract.md section 3.1):
//! `kvidx_hash_request` computes the local hashes a router queries with so that it reaches
//! exactly the blocks engines stored for the same LoRA adapter, cache salt and multimodal
//! inputs.

use super::args;
use super::boundary::export;
use super::c_types::kvidx_status;
use super::hashing::blocks_fitting;
use kvidx_core::namespace::{hash_request_into, MultimodalSpan, Namespace};

/// A request's namespace: its LoRA adapter's name and its cache salt, opaque bytes each
/// (`(NULL, 0)` or any empty array: none). The LoRA name seeds every block; the salt folds
/// into the first block.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvidx_namespace {
    /// The adapter's name as the engine publishes it (`lora_name`), UTF-8 bytes.
    pub lora_name: *const u8,
    /// Bytes in `lora_name`.
    pub lora_name_len: usize,
    /// The request's cache salt.
    pub cache_salt: *const u8,
    /// Bytes in `cache_salt`.
    pub cache_salt_len: usize,
}

/// A multimodal item of a request: its identifier (opaque bytes: the engine's `mm_hash`)
/// and the token span `[start, end)` of its placeholder tokens. It folds into every block
/// the span overlaps; a span with `end <= start` overlaps none.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvidx_mm_span {
    /// The item's identifier bytes.
    pub identifier: *const u8,
    /// Bytes in `identifier`.
    pub identifier_len: usize,
    /// Index of the item's first token.
    pub start: u64,
    /// Index one past the item's last token.
    pub end: u64,
}

/// Defined (1) when the library hashes namespaced and multimodal requests:
/// `kvidx_namespace`, `kvidx_mm_span`, `kvidx_hash_request` and the
/// `KVIDX_FEED_SKIP_EXTRAS` feed flag (additions to ABI v1).
pub const KVIDX_HAS_NAMESPACES: u32 = 1;

/// Computes the local hash of every full block of `block_size` tokens of a request under its
/// namespace (`NULL`: none) and multimodal spans (docs/contract.md section 3.1). With no
/// namespace and no spans it equals `kvidx_hash_tokens`.
///
/// On `KVIDX_OK`, `out[0 .. *out_len]` holds `num_tokens / block_size` hashes. If `out_cap` is
/// smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count in `*out_len` and `out`
/// untouched. `block_size == 0` is `KVIDX_ERR_INVALID_ARGUMENT`; a NULL array with a length
/// above 0 (tokens, spans, a namespace field, an identifier) is `KVIDX_ERR_NULL_POINTER`.
/// Thread-safe; no state.
///
/// # Safety
/// `tokens` is readable for `num_tokens` entries, `spans` for `num_spans`; `namespace` is NULL
/// or readable, and each byte array it or a span points to is readable for its length; `out`
/// is writable for `out_cap` entries; `out_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_hash_request(
    tokens: *const u32,
    num_tokens: usize,
    block_size: u32,
    namespace: *const kvidx_namespace,
    spans: *const kvidx_mm_span,
    num_spans: usize,
    out: *mut u64,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(status, {
        args::required(out_len)?;
        args::check_array(out, out_cap)?;
        // SAFETY: readable for `num_tokens` entries (caller), unchanged during the call.
        let tokens = unsafe { args::input(tokens, num_tokens) }?;
        // SAFETY: NULL or readable (caller).
        let namespace = match unsafe { args::optional(namespace) }? {
            None => Namespace::NONE,
            Some(ns) => Namespace {
                // SAFETY: readable for `lora_name_len` bytes (caller).
                lora_name: unsafe { args::input(ns.lora_name, ns.lora_name_len) }?,
                // SAFETY: readable for `cache_salt_len` bytes (caller).
                cache_salt: unsafe { args::input(ns.cache_salt, ns.cache_salt_len) }?,
            },
        };
        // SAFETY: readable for `num_spans` entries (caller).
        let c_spans = unsafe { args::input(spans, num_spans) }?;
        let mut spans = Vec::with_capacity(c_spans.len());
        for span in c_spans {
            spans.push(MultimodalSpan {
                // SAFETY: readable for `identifier_len` bytes (caller).
                identifier: unsafe { args::input(span.identifier, span.identifier_len) }?,
                start: span.start,
                end: span.end,
            });
        }
        // SAFETY: `out_len` is non-NULL and aligned (checked) and writable (caller).
        let needed = unsafe { blocks_fitting(num_tokens, block_size, out_cap, out_len) }?;
        let mut hashes = vec![0u64; needed];
        hash_request_into(tokens, block_size as usize, &namespace, &spans, &mut hashes);
        // SAFETY: `needed <= out_cap`; `out` is non-NULL when `needed > 0`, aligned (checked)
        // and writable (caller); `hashes` is our own vector, so the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(hashes.as_ptr(), out, needed) };
        // SAFETY: as above.
        unsafe { out_len.write(needed) };
        Ok(())
    })
}
