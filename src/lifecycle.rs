//! Creating and releasing indexers, and the test hook that panics inside the boundary.

use super::args;
use super::boundary::export;
use super::c_convert;
use super::c_types::{kvidx_config, kvidx_indexer, kvidx_queue_limits, kvidx_status};
use super::handle;
use kvidx_core::{Indexer, PredictionConfig};

/// Returns the default configuration: runs backend, 1 event thread, default jump size.
#[no_mangle]
pub extern "C" fn kvidx_config_default() -> kvidx_config {
    export!(value, c_convert::DEFAULT_CONFIG, {
        c_convert::DEFAULT_CONFIG
    })
}

/// Creates an indexer and stores its handle in `*out`.
///
/// `config` may be NULL for `kvidx_config_default()`. Returns `KVIDX_ERR_NULL_POINTER` if `out`
/// is NULL, `KVIDX_ERR_INVALID_ARGUMENT` for an unknown backend or `event_threads > 1024`,
/// `KVIDX_ERR_SHUT_DOWN` if the event threads could not be started. `*out` is written only on
/// success; release the handle with `kvidx_free`.
///
/// # Safety
/// `config` is NULL or points to a readable `kvidx_config`; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_new(
    config: *const kvidx_config,
    out: *mut *mut kvidx_indexer,
) -> kvidx_status {
    export!(status, {
        // SAFETY: the caller guarantees what `new_indexer` needs (see `# Safety`).
        unsafe { new_indexer(config, std::ptr::null(), PredictionConfig::default(), out) }
    })
}

/// Returns the default queue limits: `{0, 0}`, the library's defaults (4096 events and
/// 32 MiB of queued work per event thread).
#[no_mangle]
pub extern "C" fn kvidx_queue_limits_default() -> kvidx_queue_limits {
    export!(value, c_convert::DEFAULT_LIMITS, {
        c_convert::DEFAULT_LIMITS
    })
}

/// Like `kvidx_new`, with queue limits for the event threads. `config` and `limits` may each
/// be NULL for their defaults; `limits` is ignored when `event_threads == 0`.
///
/// Returns `KVIDX_ERR_INVALID_ARGUMENT` for any setting out of range (`queue_capacity` above
/// 1048576, a `queue_bytes` the library cannot represent or accept, and everything `kvidx_new`
/// checks), never aborting; otherwise as `kvidx_new`. `*out` is written only on success.
///
/// # Safety
/// `config` is NULL or readable, `limits` is NULL or readable, `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn kvidx_new_with_limits(
    config: *const kvidx_config,
    limits: *const kvidx_queue_limits,
    out: *mut *mut kvidx_indexer,
) -> kvidx_status {
    export!(status, {
        // SAFETY: the caller guarantees what `new_indexer` needs (see `# Safety`).
        unsafe { new_indexer(config, limits, PredictionConfig::default(), out) }
    })
}

/// The body of `kvidx_new`, `kvidx_new_with_limits` and `kvidx_new_with_predictions`:
/// validates everything, then creates the handle.
///
/// # Safety
/// `config` and `limits` are each NULL or readable; `out` is NULL or writable.
pub(crate) unsafe fn new_indexer(
    config: *const kvidx_config,
    limits: *const kvidx_queue_limits,
    predictions: PredictionConfig,
    out: *mut *mut kvidx_indexer,
) -> Result<(), kvidx_status> {
    args::required(out)?;
    // SAFETY: the caller guarantees `config` is NULL or readable.
    let settings = unsafe { args::optional(config) }?.unwrap_or(c_convert::DEFAULT_CONFIG);
    // SAFETY: the caller guarantees `limits` is NULL or readable.
    let limits = unsafe { args::optional(limits) }?.unwrap_or(c_convert::DEFAULT_LIMITS);
    let mut config = c_convert::config(&settings, &limits)?;
    config.predictions = predictions;
    let indexer = Indexer::new(config).map_err(c_convert::status_of)?;
    // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
    unsafe { handle::create(indexer, out) };
    Ok(())
}

/// Releases an indexer (from `kvidx_new` or `kvidx_new_with_limits`): applies every event
/// already accepted, joins the event threads and frees the handle. NULL is a no-op; a poisoned handle is freed too.
///
/// Must not overlap any other call on the same handle; the handle is invalid afterwards.
///
/// # Safety
/// `indexer` is NULL or a handle from `kvidx_new` not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvidx_free(indexer: *mut kvidx_indexer) {
    export!(free indexer)
}

/// Test hook: panics inside the boundary on purpose. Returns `KVIDX_ERR_PANIC` and poisons the
/// handle, so every later call on it returns `KVIDX_ERR_POISONED` (free it with `kvidx_free`).
/// NULL gives `KVIDX_ERR_NULL_POINTER`, an already poisoned handle `KVIDX_ERR_POISONED`.
///
/// The panic message is printed to standard error by Rust's default panic hook.
///
/// # Safety
/// `indexer` is NULL or a live handle from `kvidx_new`.
#[no_mangle]
pub unsafe extern "C" fn kvidx_debug_panic(indexer: *const kvidx_indexer) -> kvidx_status {
    export!(handle indexer, |_ix| {
        panic!("kvidx_debug_panic: a deliberate panic inside the C boundary")
    })
}
