//! The boundary every exported function goes through: the `export!` macro.
//!
//! Each `extern "C"` function of this crate has a body that is exactly one `export!`
//! invocation (a unit test checks the sources), so none can forget to catch panics:
//!
//! - `export!(handle h, |ix| { .. })`: a NULL handle gives `KVIDX_ERR_NULL_POINTER`, a poisoned
//!   one `KVIDX_ERR_POISONED`; a panic in the body gives `KVIDX_ERR_PANIC` and poisons the handle.
//! - `export!(status, { .. })`: no handle; a panic gives `KVIDX_ERR_PANIC`.
//! - `export!(value, fallback, { .. })`: returns a plain value; a panic returns `fallback`.
//!
//! Bodies of the first two forms return `Result<(), kvidx_status>` (so `?` works on argument
//! checks); `Ok(())` becomes `KVIDX_OK`.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use super::types::{kvidx_indexer, kvidx_status};
use kvidx_core::Indexer;

/// Defines the body of an exported function; see the module documentation.
macro_rules! export {
    (handle $handle:expr, |$ix:ident| $body:block) => {{
        let handle: *const $crate::types::kvidx_indexer = $handle;
        let body =
            |$ix: &::kvidx_core::Indexer| -> ::std::result::Result<(), $crate::types::kvidx_status> {
                $body
            };
        // SAFETY: every exported function taking a handle requires (in its `# Safety` section
        // and in the header) that it is NULL or a live handle from `kvidx_new` that no
        // concurrent `kvidx_free` is releasing; `on_handle` needs exactly that.
        unsafe { $crate::boundary::on_handle(handle, body) }
    }};
    (status, $body:block) => {
        $crate::boundary::status(
            || -> ::std::result::Result<(), $crate::types::kvidx_status> { $body },
        )
    };
    (value, $fallback:expr, $body:block) => {
        $crate::boundary::value($fallback, || $body)
    };
}
pub(crate) use export;

/// Runs `body` on the indexer behind `handle`, containing panics and honouring the poison flag.
///
/// # Safety
/// `handle` is NULL or points to a live `kvidx_indexer` that stays alive during the call.
pub(crate) unsafe fn on_handle<F>(handle: *const kvidx_indexer, body: F) -> kvidx_status
where
    F: FnOnce(&Indexer) -> Result<(), kvidx_status>,
{
    // AssertUnwindSafe: after a panic the handle is poisoned, so no later call observes state
    // the panic may have left half-updated; only `kvidx_free` still touches it.
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller guarantees `handle` is NULL or valid for the whole call.
        let Some(handle) = (unsafe { handle.as_ref() }) else {
            return Err(kvidx_status::KVIDX_ERR_NULL_POINTER);
        };
        if handle.poisoned.load(Ordering::Acquire) {
            return Err(kvidx_status::KVIDX_ERR_POISONED);
        }
        body(&handle.indexer)
    }));
    match outcome {
        Ok(result) => into_status(result),
        Err(payload) => {
            // SAFETY: as above; a panic can only come from `body`, so the handle is not NULL.
            if let Some(handle) = unsafe { handle.as_ref() } {
                handle.poisoned.store(true, Ordering::Release);
            }
            discard(payload);
            kvidx_status::KVIDX_ERR_PANIC
        }
    }
}

/// Runs a function body that has no handle and returns a status, containing panics.
pub(crate) fn status<F>(body: F) -> kvidx_status
where
    F: FnOnce() -> Result<(), kvidx_status>,
{
    // AssertUnwindSafe: these bodies share no state with later calls.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(result) => into_status(result),
        Err(payload) => {
            discard(payload);
            kvidx_status::KVIDX_ERR_PANIC
        }
    }
}

/// Runs a function body that returns a plain value; a panic returns `fallback`.
pub(crate) fn value<T, F>(fallback: T, body: F) -> T
where
    F: FnOnce() -> T,
{
    // AssertUnwindSafe: these bodies share no state with later calls.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(value) => value,
        Err(payload) => {
            discard(payload);
            fallback
        }
    }
}

fn into_status(result: Result<(), kvidx_status>) -> kvidx_status {
    match result {
        Ok(()) => kvidx_status::KVIDX_OK,
        Err(status) => status,
    }
}

/// Drops a panic payload without letting a panicking destructor escape the boundary.
fn discard(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        // A payload whose destructor panicked: leak the second payload rather than risk it.
        std::mem::forget(again);
    }
}
