#!/usr/bin/env bash
# Builds the release libraries and installs the C ABI of kvidx under PREFIX:
#   PREFIX/include/kvidx.h (+ kvidx.hpp when bindings/cpp/kvidx.hpp exists)
#   PREFIX/lib/libkvidx.so.X.Y.Z, libkvidx.so.X (the SONAME), libkvidx.so   (macOS: .dylib)
#   PREFIX/lib/libkvidx.a
#   PREFIX/lib/pkgconfig/kvidx.pc, kvidx-static.pc
#   PREFIX/lib/cmake/kvidx/ (every file of bindings/cpp/cmake/ when that folder exists)
# Usage: bash scripts/install.sh [PREFIX]     (default PREFIX: <repo>/build/prefix)
# Then:  PKG_CONFIG_PATH=PREFIX/lib/pkgconfig cc prog.c $(pkg-config --cflags --libs kvidx)
# Staged install (packaging): DESTDIR=/tmp/stage bash scripts/install.sh /usr writes the files
# under /tmp/stage/usr while kvidx.pc names /usr, where the package puts them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-$root/build/prefix}"
destdir="${DESTDIR:-}"
if [ -n "$destdir" ]; then
  case "$prefix" in /*) ;; *) echo "install: with DESTDIR, PREFIX must be absolute" >&2; exit 1 ;; esac
  mkdir -p "$destdir"
  destdir="$(cd "$destdir" && pwd)"
else
  mkdir -p "$prefix"
  prefix="$(cd "$prefix" && pwd)"
fi
# Where the files go; $prefix is where they will be used (the same without DESTDIR).
dest="$destdir$prefix"
cd "$root"

target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
release="$target_dir/release"

echo "install: cargo build --release --lib"
cargo build --release --lib
# The system libraries a program linking libkvidx.a needs, as rustc reports them. Building
# only the staticlib again with this flag is quick (dependencies are reused).
static_libs="$(cargo rustc --release --lib --crate-type staticlib -- --print native-static-libs 2>&1 |
  sed -n 's/.*native-static-libs: //p' | tail -n 1)"
if [ -z "$static_libs" ]; then
  echo "install: rustc did not report native-static-libs" >&2
  exit 1
fi

version="$(sed -n 's/^#define KVIDX_VERSION "\(.*\)"$/\1/p' include/kvidx.h)"
major="${version%%.*}"
[ -n "$version" ] || { echo "install: no KVIDX_VERSION in include/kvidx.h" >&2; exit 1; }

install -d "$dest/include" "$dest/lib/pkgconfig"
install -m 644 include/kvidx.h "$dest/include/kvidx.h"
if [ -f bindings/cpp/kvidx.hpp ]; then
  install -m 644 bindings/cpp/kvidx.hpp "$dest/include/kvidx.hpp"
fi

install -m 644 "$release/libkvidx.a" "$dest/lib/libkvidx.a"
if [ -f "$release/libkvidx.dylib" ]; then
  install -m 755 "$release/libkvidx.dylib" "$dest/lib/libkvidx.$major.dylib"
  ln -sfn "libkvidx.$major.dylib" "$dest/lib/libkvidx.dylib"
else
  install -m 755 "$release/libkvidx.so" "$dest/lib/libkvidx.so.$version"
  ln -sfn "libkvidx.so.$version" "$dest/lib/libkvidx.so.$major"
  ln -sfn "libkvidx.so.$major" "$dest/lib/libkvidx.so"
fi

for pc in kvidx kvidx-static; do
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@VERSION@|$version|g" -e "s|@LIBS_PRIVATE@|$static_libs|g" \
    "pkgconfig/$pc.pc.in" >"$dest/lib/pkgconfig/$pc.pc"
done

if [ -d bindings/cpp/cmake ]; then
  install -d "$dest/lib/cmake/kvidx"
  cp -R bindings/cpp/cmake/. "$dest/lib/cmake/kvidx/"
fi

echo "install: kvidx $version (C ABI $(sed -n 's/^#define KVIDX_ABI_VERSION \(.*\)$/\1/p' include/kvidx.h)) installed in $dest"
echo "install: static link needs: $static_libs"
