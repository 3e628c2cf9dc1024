//! Checks of the pointer-and-length arguments C callers pass.
//!
//! `(NULL, 0)` is a valid empty array; NULL with a length > 0 is `KVIDX_ERR_NULL_POINTER`;
//! a misaligned pointer, or a length whose byte size does not fit in `isize`, is
//! `KVIDX_ERR_INVALID_ARGUMENT` (building a Rust slice from either would be undefined).

use std::mem::{align_of, size_of};

use super::c_types::kvidx_status;

/// Checks an array's pointer and length without reading it.
pub(crate) fn check_array<T>(ptr: *const T, len: usize) -> Result<(), kvidx_status> {
    if len == 0 {
        return Ok(());
    }
    if ptr.is_null() {
        return Err(kvidx_status::KVIDX_ERR_NULL_POINTER);
    }
    if (ptr as usize) % align_of::<T>() != 0 {
        return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
    }
    if len > isize::MAX as usize / size_of::<T>().max(1) {
        return Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT);
    }
    Ok(())
}

/// An input array as a slice, after [`check_array`].
///
/// # Safety
/// When `len > 0` and `ptr` passes the checks, `ptr` must point to `len` initialised values
/// that nobody writes while the returned slice is used.
pub(crate) unsafe fn input<'a, T>(ptr: *const T, len: usize) -> Result<&'a [T], kvidx_status> {
    check_array(ptr, len)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: non-NULL, aligned, size fits in isize (checked above); the caller guarantees
    // `len` readable, initialised values that stay unchanged while the slice lives.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Checks that a required pointer is not NULL.
pub(crate) fn required<T>(ptr: *const T) -> Result<(), kvidx_status> {
    if ptr.is_null() {
        Err(kvidx_status::KVIDX_ERR_NULL_POINTER)
    } else if (ptr as usize) % align_of::<T>() != 0 {
        Err(kvidx_status::KVIDX_ERR_INVALID_ARGUMENT)
    } else {
        Ok(())
    }
}

/// Reads an optional input struct: NULL is `None`.
///
/// # Safety
/// `ptr` is NULL or points to a readable, initialised `T`.
pub(crate) unsafe fn optional<T: Copy>(ptr: *const T) -> Result<Option<T>, kvidx_status> {
    if ptr.is_null() {
        return Ok(None);
    }
    required(ptr)?;
    // SAFETY: non-NULL and aligned (checked); the caller guarantees it is readable.
    Ok(Some(unsafe { ptr.read() }))
}

/// Writes `values` to `out[0 .. values.len()]` and their count to `*out_len`; when
/// `out_cap` is smaller, writes only the count and returns `KVIDX_ERR_BUFFER_TOO_SMALL`.
/// Checks `out_len` (required) and `out` (an array of `out_cap`) first.
///
/// # Safety
/// `out` is writable for `out_cap` entries and does not overlap `values`; `out_len` is NULL
/// or writable.
pub(crate) unsafe fn output<T: Copy>(
    values: &[T],
    out: *mut T,
    out_cap: usize,
    out_len: *mut usize,
) -> Result<(), kvidx_status> {
    required(out_len)?;
    check_array(out, out_cap)?;
    // SAFETY: `out_len` is non-NULL and aligned (checked) and writable (caller).
    unsafe { out_len.write(values.len()) };
    if values.len() > out_cap {
        return Err(kvidx_status::KVIDX_ERR_BUFFER_TOO_SMALL);
    }
    if !values.is_empty() {
        // SAFETY: `out` is non-NULL and aligned (checked, `out_cap >= values.len() > 0`),
        // writable for `out_cap` entries (caller) and does not overlap `values` (caller).
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), out, values.len()) };
    }
    Ok(())
}
