//! The one generic handle behind every opaque C type, and the one way handles are created,
//! borrowed and freed.
//!
//! A [`Handle<T>`] is a value plus a poison flag. Each opaque C type ([`kvidx_indexer`],
//! [`kvidx_engine_feed`]) is a `Handle` of its value under the C name ([`Opaque`]). A panic
//! caught while running a body on a handle poisons that handle only; every later call on it
//! returns `KVIDX_ERR_POISONED`, except its free function. What a refused or panicking call
//! returns is chosen by the function's return type ([`Fallback`]).
//!
//! [`kvidx_indexer`]: crate::c_types::kvidx_indexer
//! [`kvidx_engine_feed`]: crate::c_types::kvidx_engine_feed

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use super::args;
use super::boundary::discard;
use super::c_types::kvidx_status;

/// A value shared with C plus its poison flag.
pub struct Handle<T> {
    poisoned: AtomicBool,
    value: T,
}

/// An opaque C type: a [`Handle`] of `Value` under a C name.
pub(crate) trait Opaque: Sized {
    /// What the handle holds.
    type Value;
    /// Wraps a new handle.
    fn wrap(handle: Handle<Self::Value>) -> Self;
    /// The handle inside.
    fn handle(&self) -> &Handle<Self::Value>;
}

/// What an exported function returns when the boundary does not run its body (a poisoned
/// handle) or catches a panic in it: chosen by the function's return type.
pub(crate) trait Fallback {
    /// The handle was poisoned by an earlier panic.
    fn poisoned() -> Self;
    /// The body panicked (the handle is now poisoned).
    fn panicked() -> Self;
}

impl Fallback for kvidx_status {
    fn poisoned() -> Self {
        kvidx_status::KVIDX_ERR_POISONED
    }
    fn panicked() -> Self {
        kvidx_status::KVIDX_ERR_PANIC
    }
}

impl Fallback for () {
    fn poisoned() -> Self {}
    fn panicked() -> Self {}
}

impl<T> Handle<T> {
    /// Whether a panic was caught on this handle.
    pub(crate) fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Acquire)
    }

    fn poison(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// Runs `body` on the value unless the handle is poisoned; a panic in `body` poisons the
    /// handle and returns `R::panicked()`.
    pub(crate) fn run<R: Fallback>(&self, body: impl FnOnce(&T) -> R) -> R {
        if self.is_poisoned() {
            return R::poisoned();
        }
        // AssertUnwindSafe: after a panic the handle is poisoned, so no later call observes
        // state the panic may have left half-updated; only the free function still touches it.
        match catch_unwind(AssertUnwindSafe(|| body(&self.value))) {
            Ok(out) => out,
            Err(payload) => {
                self.poison();
                discard(payload);
                R::panicked()
            }
        }
    }

    /// Runs `body` on the value for a caller that is itself inside another handle's
    /// boundary: a panic poisons this handle and then continues unwinding, so the outer
    /// handle is poisoned too. Returns `None` when this handle was already poisoned.
    pub(crate) fn run_nested<R>(&self, body: impl FnOnce(&T) -> R) -> Option<R> {
        if self.is_poisoned() {
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| body(&self.value))) {
            Ok(out) => Some(out),
            Err(payload) => {
                self.poison();
                resume_unwind(payload)
            }
        }
    }
}

/// Allocates a handle for `value` and stores it in `*out`. Release it with [`free`].
///
/// # Safety
/// `out` has passed `args::required` and is writable.
pub(crate) unsafe fn create<H: Opaque>(value: H::Value, out: *mut *mut H) {
    let handle = Box::into_raw(Box::new(H::wrap(Handle {
        poisoned: AtomicBool::new(false),
        value,
    })));
    // SAFETY: the caller guarantees `out` is non-NULL, aligned and writable.
    unsafe { out.write(handle) };
}

/// Releases a handle from [`create`]; NULL is a no-op, a poisoned handle is freed too.
///
/// # Safety
/// `ptr` is NULL or came from [`create`] with the same type, is not freed yet, and no other
/// call is using it.
pub(crate) unsafe fn free<H: Opaque>(ptr: *mut H) {
    if !ptr.is_null() {
        // SAFETY: the caller guarantees the pointer came from `Box::into_raw` in `create`,
        // is not freed yet, and is not used by any other call.
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// Borrows the handle behind a C pointer: NULL is `KVIDX_ERR_NULL_POINTER`, a misaligned
/// pointer `KVIDX_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `ptr` is NULL or points to a live handle from [`create`] that stays alive for `'a`.
pub(crate) unsafe fn borrow<'a, H: Opaque + 'a>(
    ptr: *const H,
) -> Result<&'a Handle<H::Value>, kvidx_status> {
    args::required(ptr)?;
    // SAFETY: non-NULL and aligned (checked); the caller guarantees a live handle for 'a.
    Ok(unsafe { &*ptr }.handle())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Counter(Handle<u32>);

    impl Opaque for Counter {
        type Value = u32;
        fn wrap(handle: Handle<u32>) -> Self {
            Self(handle)
        }
        fn handle(&self) -> &Handle<u32> {
            &self.0
        }
    }

    #[test]
    fn one_path_creates_runs_poisons_and_frees() {
        let mut ptr: *mut Counter = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; the handle is freed once below.
        unsafe { create(7u32, &mut ptr) };
        // SAFETY: a live handle until `free`.
        let handle = unsafe { borrow(ptr as *const Counter) }.unwrap();
        assert_eq!(handle.run_nested(|v| *v), Some(7));
        let status: kvidx_status = handle.run(|_| panic!("deliberate"));
        assert_eq!(status, kvidx_status::KVIDX_ERR_PANIC);
        assert!(handle.is_poisoned());
        let status: kvidx_status = handle.run(|_| kvidx_status::KVIDX_OK);
        assert_eq!(status, kvidx_status::KVIDX_ERR_POISONED);
        assert_eq!(handle.run_nested(|v| *v), None);
        // SAFETY: created above, freed once; NULL is a no-op.
        unsafe {
            free(ptr);
            free::<Counter>(std::ptr::null_mut());
            assert_eq!(
                borrow::<Counter>(std::ptr::null()).err(),
                Some(kvidx_status::KVIDX_ERR_NULL_POINTER)
            );
        }
    }

    #[test]
    fn a_nested_panic_poisons_the_inner_and_the_outer_handle() {
        let (mut outer, mut inner): (*mut Counter, *mut Counter) =
            (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: valid out-pointers; both handles are freed once below.
        unsafe {
            create(1u32, &mut outer);
            create(2u32, &mut inner);
        }
        // SAFETY: live handles until `free`.
        let (o, i) = unsafe {
            (
                borrow(outer as *const Counter).unwrap(),
                borrow(inner as *const Counter).unwrap(),
            )
        };
        let status: kvidx_status = o.run(|_| {
            i.run_nested(|_| -> () { panic!("inside the inner value") });
            kvidx_status::KVIDX_OK
        });
        assert_eq!(status, kvidx_status::KVIDX_ERR_PANIC);
        assert!(o.is_poisoned() && i.is_poisoned());
        // SAFETY: created above, freed once.
        unsafe {
            free(outer);
            free(inner);
        }
    }
}
