//! Reading an indexer: prefix matches and counters.

use std::cell::RefCell;

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{kvidx_indexer, kvidx_match, kvidx_stats, kvidx_status};
use kvidx_core::scratch::with_scratch;
use kvidx_core::Match;

/// Scratch vectors larger than this (in matches) are shrunk back after a query.
const SCRATCH_KEEP: usize = 4096;

thread_local! {
    /// Each calling thread's reusable result vector: queries allocate nothing once it is warm.
    static SCRATCH: RefCell<Vec<Match>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's scratch vector, shrinking it back after an unusually large answer.
fn with_match_scratch<R>(f: impl FnOnce(&mut Vec<Match>) -> R) -> R {
    with_scratch(&SCRATCH, |scratch| {
        let result = f(scratch);
        if scratch.capacity() > SCRATCH_KEEP {
            scratch.clear();
            scratch.shrink_to(SCRATCH_KEEP);
        }
        result
    })
}

/// Finds the workers holding a prefix of the query (`num_hashes` local hashes), deepest first,
/// then by `worker_id`, then by `dp_rank`; workers with depth 0 are not reported.
///
/// On `KVIDX_OK`, `out[0 .. *out_len]` holds the matches. If more than `out_cap` matches exist,
/// returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the count needed in `*out_len` and `out` untouched.
/// `(NULL, 0)` is valid for both arrays. Runs on the caller's thread, allocates nothing the
/// caller must free, and may run on any number of threads at once, also during writes.
///
/// # Safety
/// `indexer` is NULL or a live handle; `local_hashes` is readable for `num_hashes` entries;
/// `out` is writable for `out_cap` entries; `out_len` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_find_matches(
    indexer: *const kvidx_indexer,
    local_hashes: *const u64,
    num_hashes: usize,
    out: *mut kvidx_match,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out_len)?;
        args::check_array(out, out_cap)?;
        // SAFETY: the caller guarantees `num_hashes` readable entries at `local_hashes`.
        let query = unsafe { args::input(local_hashes, num_hashes) }?;
        with_match_scratch(|matches| {
            ix.find_matches_into(query, matches);
            let needed = matches.len();
            if needed > out_cap {
                // SAFETY: `out_len` is non-NULL and aligned (checked) and writable (caller).
                unsafe { out_len.write(needed) };
                return Err(kvidx_status::KVIDX_ERR_BUFFER_TOO_SMALL);
            }
            if needed > 0 {
                // SAFETY: `kvidx_match` and `Match` have the same layout (asserted in `types`);
                // `out` is non-NULL, aligned and writable for `out_cap >= needed` entries, and
                // cannot overlap the library's own scratch vector.
                unsafe {
                    std::ptr::copy_nonoverlapping(matches.as_ptr().cast::<kvidx_match>(), out, needed)
                };
            }
            // SAFETY: as above.
            unsafe { out_len.write(needed) };
            Ok(())
        })
    })
}

/// Writes the indexer's counters to `*out`. In pooled mode call `kvidx_flush` first for
/// figures that include every accepted event.
///
/// # Safety
/// `indexer` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_get_stats(
    indexer: *const kvidx_indexer,
    out: *mut kvidx_stats,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        args::required(out)?;
        let stats = c_convert::stats(ix.stats());
        // SAFETY: `out` is non-NULL and aligned (checked) and writable (caller).
        unsafe { out.write(stats) };
        Ok(())
    })
}
