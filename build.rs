//! Build script: sets the shared library's SONAME, and generates the C header from `src`
//! with cbindgen, failing the build when it differs from the checked-in `include/kvidx.h`.
//!
//! Refresh the checked-in header after changing the C ABI: `KVIDX_REFRESH_HEADER=1 cargo build`.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-changed=include/kvidx.h");
    println!("cargo:rerun-if-env-changed=KVIDX_REFRESH_HEADER");
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("CARGO_PKG_VERSION_MAJOR");
    set_soname(&major);
    warn_unless_unwind();
    check_header(&root);
}

/// The C boundary contains panics with `catch_unwind`, which needs `panic = "unwind"`: with
/// `abort`, an internal bug would end the caller's process instead of returning
/// `KVIDX_ERR_PANIC`.
fn warn_unless_unwind() {
    if env::var("CARGO_CFG_PANIC").is_ok_and(|strategy| strategy != "unwind") {
        println!(
            "cargo:warning=kvidx is built with panic=abort: the C ABI cannot contain panics \
             (KVIDX_ERR_PANIC); keep panic = \"unwind\" in every profile that builds the libraries"
        );
    }
}

/// Gives the cdylib (only) its SONAME / install name, libkvidx.so.MAJOR.
fn set_soname(major: &str) {
    match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") | Ok("ios") => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libkvidx.{major}.dylib")
        }
        Ok("windows") => {}
        _ => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkvidx.so.{major}"),
    }
}

/// The version macros placed after the includes of the header.
fn version_macros() -> String {
    let part = |name: &str| env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    format!(
        "#define KVIDX_VERSION_MAJOR {}\n#define KVIDX_VERSION_MINOR {}\n\
         #define KVIDX_VERSION_PATCH {}\n#define KVIDX_VERSION \"{}\"",
        part("CARGO_PKG_VERSION_MAJOR"),
        part("CARGO_PKG_VERSION_MINOR"),
        part("CARGO_PKG_VERSION_PATCH"),
        part("CARGO_PKG_VERSION"),
    )
}

/// Generates the header into OUT_DIR and compares it with (or, on request, writes it to)
/// `include/kvidx.h`.
fn check_header(root: &Path) {
    let mut config = cbindgen::Config::from_file(root.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("cbindgen.toml: {e}"));
    config.after_includes = Some(version_macros());
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/lib.rs"))
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen could not generate the C header: {e}"));
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let fresh = out_dir.join("kvidx.h");
    fs::write(&fresh, &generated).expect("writing the generated header to OUT_DIR");

    let checked_in = root.join("include/kvidx.h");
    let refresh = env::var("KVIDX_REFRESH_HEADER").is_ok_and(|v| !v.is_empty() && v != "0");
    if refresh {
        fs::create_dir_all(root.join("include")).expect("creating include/");
        fs::write(&checked_in, &generated).expect("writing include/kvidx.h");
        println!("cargo:warning=refreshed include/kvidx.h from src");
        return;
    }
    if fs::read(&checked_in).ok().as_deref() != Some(generated.as_slice()) {
        panic!(
            "include/kvidx.h is missing or out of date with src (the generated header is \
             {}).\nRefresh it with: KVIDX_REFRESH_HEADER=1 cargo build\nthen review and \
             commit include/kvidx.h.",
            fresh.display()
        );
    }
}
