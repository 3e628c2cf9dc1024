//! An engine feed's per-publisher tracking state through the C ABI: saved as bytes beside a
//! snapshot of the index at the same stream position, restored into a new feed, so the
//! restored feed classifies every publisher's next batch exactly as the saved one would.

use super::args;
use super::boundary::export;
use super::c_types::{kvidx_engine_feed, kvidx_status};
use super::engine::lock;
use kvidx_core::engine::FeedStateError;

/// Writes a feed's per-publisher tracking state (each publisher's next expected sequence,
/// engine epoch and next event id; 40 bytes per publisher plus 20) to `out[0 .. *out_len]`.
/// If `out_cap` is smaller, returns `KVIDX_ERR_BUFFER_TOO_SMALL` with the size needed in
/// `*out_len` and `out` untouched (`out` may then be NULL with `out_cap == 0`). The counters
/// are not included. Save it while no call applies a batch through the feed, at the position
/// the index's snapshot is taken for (a replica: the stream sequence of the last message fed).
///
/// Returns `KVIDX_ERR_NULL_POINTER` for a NULL `feed` or `out_len`, `KVIDX_ERR_POISONED` if an
/// earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `out` is writable for `out_cap` bytes; `out_len` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_save_state(
    feed: *const kvidx_engine_feed,
    out: *mut u8,
    out_cap: usize,
    out_len: *mut usize,
) -> kvidx_status {
    export!(handle feed, |feed| {
        args::required(out_len)?;
        args::check_array(out, out_cap)?;
        let state = lock(feed)?.save_state();
        // SAFETY: `out_len` is non-NULL and aligned (checked) and writable (caller).
        unsafe { out_len.write(state.len()) };
        if state.len() > out_cap {
            return Err(kvidx_status::KVIDX_ERR_BUFFER_TOO_SMALL);
        }
        // SAFETY: `out` is writable for `out_cap >= state.len()` bytes (caller; checked non-NULL
        // when `out_cap > 0`), and a fresh `Vec` never overlaps it.
        unsafe { std::ptr::copy_nonoverlapping(state.as_ptr(), out, state.len()) };
        Ok(())
    })
}

/// Replaces a feed's per-publisher tracking state with bytes `kvidx_engine_feed_save_state`
/// wrote for a feed of the same format; the counters are kept.
///
/// Returns `KVIDX_ERR_MALFORMED` for bytes that are not a saved feed state (then nothing
/// changes), `KVIDX_ERR_INVALID_ARGUMENT` for the state of a feed of another format,
/// `KVIDX_ERR_NULL_POINTER` for a NULL `feed` (or a NULL `state` with `len > 0`),
/// `KVIDX_ERR_POISONED` if an earlier call on this feed panicked.
///
/// # Safety
/// `feed` is NULL or a live feed; `state` is readable for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn kvidx_engine_feed_restore_state(
    feed: *const kvidx_engine_feed,
    state: *const u8,
    len: usize,
) -> kvidx_status {
    export!(handle feed, |feed| {
        // SAFETY: the caller guarantees `state` is readable for `len` bytes.
        let state = unsafe { args::input(state, len) }?;
        lock(feed)?.restore_state(state).map_err(|e| match e {
            FeedStateError::OtherFormat => kvidx_status::KVIDX_ERR_INVALID_ARGUMENT,
            FeedStateError::Malformed(_) => kvidx_status::KVIDX_ERR_MALFORMED,
        })
    })
}
