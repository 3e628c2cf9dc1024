//! Reading an indexer: prefix matches (plain and per storage tier) and counters.

use std::cell::RefCell;
use std::thread::LocalKey;

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{kvidx_indexer, kvidx_match, kvidx_stats, kvidx_status, kvidx_tiered_match};
use kvidx_core::scratch::with_scratch;
use kvidx_core::{Match, TieredMatch, TIERS};

/// Scratch vectors larger than this (in matches) are shrunk back after a query.
const SCRATCH_KEEP: usize = 4096;

thread_local! {
    /// Each calling thread's reusable result vectors: queries allocate nothing once warm.
    static SCRATCH: RefCell<Vec<Match>> = const { RefCell::new(Vec::new()) };
    static TIERED_SCRATCH: RefCell<Vec<TieredMatch>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's scratch vector, shrinking it back after an unusually large answer.
fn with_match_scratch<T: 'static, R>(
    key: &'static LocalKey<RefCell<Vec<T>>>,
    f: impl FnOnce(&mut Vec<T>) -> R,
) -> R {
    with_scratch(key, |scratch| {
        let result = f(scratch);
        if scratch.capacity() > SCRATCH_KEEP {
            scratch.clear();
            scratch.shrink_to(SCRATCH_KEEP);
        }
        result
    })
}

/// Copies an answer to the caller's array: `*out_len` = the count; if it exceeds `out_cap`,
/// `KVIDX_ERR_BUFFER_TOO_SMALL` with `out` untouched.
///
/// # Safety
/// `C` has `T`'s layout (asserted in `c_types` for each pair used); `out_len` is non-NULL,
/// aligned and writable; `out` is writable for `out_cap` entries (checked non-NULL and
/// aligned when `out_cap > 0`) and does not overlap `found`.
unsafe fn write_answer<T, C>(
    found: &[T],
    out: *mut C,
    out_cap: usize,
    out_len: *mut usize,
) -> Result<(), kvidx_status> {
    let needed = found.len();
    // SAFETY: `out_len` is non-NULL, aligned and writable (this function's contract).
    unsafe { out_len.write(needed) };
    if needed > out_cap {
        return Err(kvidx_status::KVIDX_ERR_BUFFER_TOO_SMALL);
    }
    if needed > 0 {
        // SAFETY: same layout, `out` writable for `out_cap >= needed` entries, no overlap
        // (this function's contract).
        unsafe { std::ptr::copy_nonoverlapping(found.as_ptr().cast::<C>(), out, needed) };
    }
    Ok(())
}

/// The body of every find function: checks the arguments, runs `find` into this thread's
/// scratch vector `key` and copies the answer out ([`write_answer`]).
///
/// # Safety
/// `C` has `T`'s layout; `local_hashes` is readable for `num_hashes` entries; `out` is
/// writable for `out_cap` entries; `out_len` is NULL or writable.
pub(crate) unsafe fn find_answer<T: 'static, C>(
    key: &'static LocalKey<RefCell<Vec<T>>>,
    local_hashes: *const u64,
    num_hashes: usize,
    out: *mut C,
    out_cap: usize,
    out_len: *mut usize,
    find: impl FnOnce(&[u64], &mut Vec<T>),
) -> Result<(), kvidx_status> {
    args::required(out_len)?;
    args::check_array(out, out_cap)?;
    // SAFETY: the caller guarantees `num_hashes` readable entries at `local_hashes`.
    let query = unsafe { args::input(local_hashes, num_hashes) }?;
    with_match_scratch(key, |matches| {
        find(query, matches);
        // SAFETY: same layout (caller); `out_len` and `out` were checked above and are
        // writable (caller); the scratch vector is the library's own.
        unsafe { write_answer(matches, out, out_cap, out_len) }
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
        // SAFETY: `kvidx_match` has `Match`'s layout (asserted in `c_types`); the rest is
        // this function's own contract.
        unsafe {
            find_answer(&SCRATCH, local_hashes, num_hashes, out, out_cap, out_len, |q, m| {
                ix.find_matches_into(q, m)
            })
        }
    })
}

/// Like `kvidx_find_matches`, with each worker's depth per storage tier
/// (`kvidx_tiered_match`): the same workers, depths and order. When no worker holds a block
/// off the device this costs what `kvidx_find_matches` costs; otherwise each reported
/// worker's tiers are read under that worker's lock (a walk of its prefix), briefly delaying
/// its writers.
///
/// # Safety
/// As `kvidx_find_matches`, with `out` writable for `out_cap` `kvidx_tiered_match` entries.
#[no_mangle]
pub unsafe extern "C" fn kvidx_find_matches_tiered(
    indexer: *const kvidx_indexer,
    local_hashes: *const u64,
    num_hashes: usize,
    out: *mut kvidx_tiered_match,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(handle indexer, |ix| {
        // SAFETY: `kvidx_tiered_match` has `TieredMatch`'s layout (asserted in `c_types`);
        // the rest is this function's own contract.
        unsafe {
            find_answer(&TIERED_SCRATCH, local_hashes, num_hashes, out, out_cap, out_len, |q, m| {
                ix.find_matches_tiered_into(q, m)
            })
        }
    })
}

/// Writes to `*out` a weighted hit score of one tiered match: each block of its prefix
/// counts the weight of the fastest tier it is on (`weights[t]` for `kvidx_tier` `t`; e.g.
/// `{1.0, 0.8, 0.5, 0.2}`). Routers compare workers by it. Weights are any finite numbers
/// (a negative one counts a tier's blocks against the worker); the score is always finite.
///
/// Returns `KVIDX_ERR_INVALID_ARGUMENT` (nothing written) when the match's fields contradict
/// each other (`tier_depths` decrease from device to external, or
/// `tier_depths[KVIDX_TIER_EXTERNAL] != depth`), when a weight is NaN or infinite, or when
/// the weights are too large for a finite score; `KVIDX_ERR_NULL_POINTER` for a NULL
/// argument.
///
/// # Safety
/// `tiered_match` is NULL or readable; `weights` is NULL or readable for 4 entries; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_tiered_score(
    tiered_match: *const kvidx_tiered_match,
    weights: *const f64,
    out: *mut f64,
) -> kvidx_status {
    export!(status, {
        args::required(tiered_match)?;
        args::required(out)?;
        // SAFETY: the caller guarantees 4 readable weights at `weights`.
        let weights = unsafe { args::input(weights, TIERS) }?;
        let weights: [f64; TIERS] = weights
            .try_into()
            .map_err(|_| kvidx_status::KVIDX_ERR_NULL_POINTER)?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees it is readable.
        let m = unsafe { tiered_match.read() };
        let score = TieredMatch {
            worker_id: m.worker_id,
            dp_rank: m.dp_rank,
            depth: m.depth,
            tier_depths: m.tier_depths,
        }
        .score(&weights)
        .map_err(c_convert::status_of)?;
        // SAFETY: non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(score) };
        Ok(())
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
