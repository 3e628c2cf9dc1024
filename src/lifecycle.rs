//! Creating and releasing indexers, and the test hook that panics inside the boundary.

use std::sync::atomic::AtomicBool;

use super::args;
use super::boundary::export;
use super::convert;
use super::types::{kvidx_config, kvidx_indexer, kvidx_status};
use kvidx_core::Indexer;

/// Returns the default configuration: positional backend, 1 event thread, default jump size.
#[no_mangle]
pub extern "C" fn kvidx_config_default() -> kvidx_config {
    export!(value, convert::DEFAULT_CONFIG, { convert::DEFAULT_CONFIG })
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
        args::required(out)?;
        let settings = if config.is_null() {
            convert::DEFAULT_CONFIG
        } else {
            args::required(config)?;
            // SAFETY: non-NULL and aligned (checked); the caller guarantees it is readable.
            unsafe { config.read() }
        };
        let indexer = Indexer::new(convert::config(&settings)?).map_err(convert::status_of)?;
        let handle = Box::into_raw(Box::new(kvidx_indexer {
            poisoned: AtomicBool::new(false),
            indexer,
        }));
        // SAFETY: `out` is non-NULL and aligned (checked); the caller guarantees it is writable.
        unsafe { out.write(handle) };
        Ok(())
    })
}

/// Releases an indexer: applies every event already accepted, joins the event threads and
/// frees the handle. NULL is a no-op; a poisoned handle is freed too.
///
/// Must not overlap any other call on the same handle; the handle is invalid afterwards.
///
/// # Safety
/// `indexer` is NULL or a handle from `kvidx_new` not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvidx_free(indexer: *mut kvidx_indexer) {
    export!(value, (), {
        if !indexer.is_null() {
            // SAFETY: the caller guarantees the handle came from `Box::into_raw` in `kvidx_new`,
            // is not freed yet, and that no other call is using it.
            drop(unsafe { Box::from_raw(indexer) });
        }
    })
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
pub unsafe extern "C" fn kvidx_debug_panic(indexer: *mut kvidx_indexer) -> kvidx_status {
    export!(handle indexer, |_ix| {
        panic!("kvidx_debug_panic: a deliberate panic inside the C boundary")
    })
}
