//! The hashing contract for C callers: token blocks to local hashes, local to sequence hashes.

use super::args;
use super::boundary::export;
use super::c_types::kvidx_status;
use kvidx_core::hashing::{local_hash, next_in_chain};

/// Computes the local hash of every full block of `block_size` tokens (XXH3-64, seed 1337,
/// over the tokens as little-endian bytes); trailing tokens that do not fill a block are
/// ignored, so fewer tokens than one block gives 0 hashes.
///
/// On `KVIDX_OK`, `out[0 .. *out_len]` holds `num_tokens / block_size` hashes. If `out_cap` is
/// smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count in `*out_len` and `out`
/// untouched. `block_size == 0` is `KVIDX_ERR_INVALID_ARGUMENT`. Thread-safe; no state.
///
/// # Safety
/// `tokens` is readable for `num_tokens` entries; `out` is writable for `out_cap` entries;
/// `out_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_hash_tokens(
    tokens: *const u32,
    num_tokens: usize,
    block_size: u32,
    out: *mut u64,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(status, {
        args::required(out_len)?;
        args::check_array(tokens, num_tokens)?;
        args::check_array(out, out_cap)?;
        let block = block_size as usize;
        // SAFETY: `out_len` is non-NULL and aligned (checked) and writable (caller).
        let needed = unsafe { blocks_fitting(num_tokens, block_size, out_cap, out_len) }?;
        for i in 0..needed {
            // SAFETY: block `i` lies inside the `num_tokens` readable tokens (i * block + block
            // <= num_tokens); the slice ends before `out` is written, so overlap is harmless.
            let hash = local_hash(unsafe { args::input(tokens.add(i * block), block) }?);
            // SAFETY: `i < needed <= out_cap`; `out` is non-NULL and aligned (checked).
            unsafe { out.add(i).write(hash) };
        }
        // SAFETY: as above.
        unsafe { out_len.write(needed) };
        Ok(())
    })
}

/// Computes the sequence hashes of `n` local hashes into `out[0 .. n]`:
/// `seq[0] = local[0]`, `seq[i] = XXH3-64(le64(seq[i-1]) ++ le64(local[i]), seed 1337)`.
///
/// `out` may be the same array as `local_hashes` (computed in place). `(NULL, 0)` is valid.
/// Thread-safe; no state.
///
/// # Safety
/// `local_hashes` is readable and `out` writable for `n` entries.
#[no_mangle]
pub unsafe extern "C" fn kvidx_seq_hashes(
    local_hashes: *const u64,
    n: usize,
    out: *mut u64,
) -> kvidx_status {
    export!(status, {
        args::check_array(local_hashes, n)?;
        args::check_array(out, n)?;
        let mut prev = None;
        for i in 0..n {
            // SAFETY: `i < n`; both arrays are non-NULL, aligned and valid for `n` entries.
            // Entry `i` is read before it is written, so `out == local_hashes` works in place
            // (which is why this reads and writes pointers instead of building slices).
            let local = unsafe { local_hashes.add(i).read() };
            let seq = next_in_chain(prev, local);
            // SAFETY: as above.
            unsafe { out.add(i).write(seq) };
            prev = Some(seq);
        }
        Ok(())
    })
}

/// The number of full blocks of `block_size` in `num_tokens` tokens, checked against an output
/// array of `out_cap` hashes: `KVIDX_ERR_INVALID_ARGUMENT` for `block_size == 0`,
/// `KVIDX_ERR_BUFFER_TOO_SMALL` with the count written to `*out_len` when it exceeds `out_cap`.
///
/// # Safety
/// `out_len` is non-NULL, aligned and writable.
pub(crate) unsafe fn blocks_fitting(
    num_tokens: usize,
    block_size: u32,
    out_cap: usize,
    out_len: *mut usize,
) -> Result<usize, kvidx_status> {
    if block_size == 0 {
        return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
    }
    let needed = num_tokens / block_size as usize;
    if needed > out_cap {
        // SAFETY: non-NULL, aligned and writable (caller).
        unsafe { out_len.write(needed) };
        return Err(kvidx_status::KVIDX_ERR_BUFFER_TOO_SMALL);
    }
    Ok(needed)
}
