//! Static information: status texts, the library version, the ABI version.

use std::ffi::{c_char, CStr};

use super::boundary::export;
use super::KVIDX_ABI_VERSION;

/// The library version with its terminating NUL.
const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(version) => version,
        Err(_) => panic!("the package version contains a NUL byte"),
    };

/// The text of a status code.
fn status_text(status: u32) -> &'static CStr {
    match status {
        0 => c"KVIDX_OK: success",
        1 => c"KVIDX_ERR_NULL_POINTER: a required pointer was NULL",
        2 => c"KVIDX_ERR_INVALID_ARGUMENT: a bad enum value, config value or inconsistent fields",
        3 => c"KVIDX_ERR_BUFFER_TOO_SMALL: *out_len holds the count needed",
        4 => c"KVIDX_ERR_PARENT_NOT_FOUND: the worker does not hold the parent block",
        5 => c"KVIDX_ERR_SHUT_DOWN: the indexer's event threads are gone",
        6 => c"KVIDX_ERR_PANIC: an internal bug was caught at the boundary",
        7 => c"KVIDX_ERR_POISONED: a panic happened earlier on this handle; free it",
        8 => c"KVIDX_ERR_MALFORMED: the payload is not a valid engine event batch; nothing was applied",
        _ => c"unknown kvidx status code",
    }
}

/// Returns a static, NUL-terminated description of a status code; never NULL, also for
/// unknown codes. The caller must not free it.
#[no_mangle]
pub extern "C" fn kvidx_status_str(status: u32) -> *const c_char {
    export!(value, c"unknown kvidx status code".as_ptr(), {
        status_text(status).as_ptr()
    })
}

/// Returns the library version as a static string such as "0.1.0" (the same as the header's
/// `KVIDX_VERSION` when header and library match). The caller must not free it.
#[no_mangle]
pub extern "C" fn kvidx_version() -> *const c_char {
    export!(value, VERSION.as_ptr(), { VERSION.as_ptr() })
}

/// Returns the ABI version of the library: 1. Compare it with the header's `KVIDX_ABI_VERSION`.
#[no_mangle]
pub extern "C" fn kvidx_abi_version() -> u32 {
    export!(value, KVIDX_ABI_VERSION, { KVIDX_ABI_VERSION })
}
