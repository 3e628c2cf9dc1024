//! The boundary every exported function goes through: the `export!` macro.
//!
//! Each `extern "C"` function of this crate has a body that is exactly one `export!`
//! invocation (a unit test checks the sources), so none can forget to catch panics:
//!
//! - `export!(handle h, |v| { .. })`: runs the body on the value behind any opaque handle
//!   ([`handle::Opaque`](crate::handle::Opaque)): a NULL handle gives
//!   `KVIDX_ERR_NULL_POINTER`, a poisoned one `KVIDX_ERR_POISONED`; a panic in the body gives
//!   `KVIDX_ERR_PANIC` and poisons that handle (and no other).
//! - `export!(free h)`: releases any opaque handle (NULL is a no-op).
//! - `export!(status, { .. })`: no handle; a panic gives `KVIDX_ERR_PANIC`.
//! - `export!(value, fallback, { .. })`: returns a plain value; a panic returns `fallback`.
//!
//! Bodies of the `handle` and `status` forms return `Result<(), kvidx_status>` (so `?` works
//! on argument checks); `Ok(())` becomes `KVIDX_OK`.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::c_types::kvidx_status;
use super::handle::{self, Fallback, Opaque};

/// Defines the body of an exported function; see the module documentation.
macro_rules! export {
    (handle $handle:expr, |$v:ident| $body:block) => {{
        let handle = $handle;
        // Built outside the `unsafe` block below, so the body's own unsafe operations still
        // need their own blocks (and SAFETY comments).
        let body = $crate::boundary::body_for(handle, |$v| $body);
        // SAFETY: every exported function taking a handle requires (in its `# Safety` section
        // and in the header) that it is NULL or a live handle that no concurrent free
        // function is releasing; `on_handle` needs exactly that.
        unsafe { $crate::boundary::on_handle(handle, body) }
    }};
    (free $handle:expr) => {{
        // SAFETY: every free function requires (in its `# Safety` section and in the header)
        // that the handle is NULL or live, not freed before, and used by no other call.
        $crate::boundary::value((), || unsafe { $crate::handle::free($handle) })
    }};
    (status, $body:block) => {
        $crate::boundary::status(
            || -> ::std::result::Result<(), $crate::c_types::kvidx_status> { $body },
        )
    };
    (value, $fallback:expr, $body:block) => {
        $crate::boundary::value($fallback, || $body)
    };
}
pub(crate) use export;

/// Types a handle body by its handle (the identity; lets the closure's argument type be
/// inferred before the body is passed to [`on_handle`]).
pub(crate) fn body_for<H: Opaque, F>(_handle: *const H, body: F) -> F
where
    F: FnOnce(&H::Value) -> Result<(), kvidx_status>,
{
    body
}

/// Runs `body` on the value behind `ptr`, containing panics and honouring the poison flag.
///
/// # Safety
/// `ptr` is NULL or points to a live handle that stays alive during the call.
pub(crate) unsafe fn on_handle<H: Opaque>(
    ptr: *const H,
    body: impl FnOnce(&H::Value) -> Result<(), kvidx_status>,
) -> kvidx_status {
    // SAFETY: the caller guarantees `ptr` is NULL or a live handle for the whole call.
    match unsafe { handle::borrow(ptr) } {
        Ok(handle) => handle.run(|value| into_status(body(value))),
        Err(status) => status,
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
            kvidx_status::panicked()
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
pub(crate) fn discard(payload: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
        // A payload whose destructor panicked: leak the second payload rather than risk it.
        std::mem::forget(again);
    }
}
