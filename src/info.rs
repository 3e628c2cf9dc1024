//! Static information: status texts, the library version, the ABI version.

use std::ffi::{c_char, CStr};

use super::boundary::export;
use super::c_types::kvidx_status;
use super::KVIDX_ABI_VERSION;

/// The library version with its terminating NUL.
const VERSION: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(version) => version,
        Err(_) => panic!("the package version contains a NUL byte"),
    };

/// The text of a status code (from the one list in `c_types`), or of an unknown code.
fn status_text(status: u32) -> &'static CStr {
    kvidx_status::ALL
        .iter()
        .find(|known| **known as u32 == status)
        .map_or(UNKNOWN_STATUS, |known| known.text())
}

const UNKNOWN_STATUS: &CStr = c"unknown kvidx status code";

/// Returns a static, NUL-terminated description of a status code; never NULL, also for
/// unknown codes. The caller must not free it.
#[no_mangle]
pub extern "C" fn kvidx_status_str(status: u32) -> *const c_char {
    export!(value, UNKNOWN_STATUS.as_ptr(), {
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
