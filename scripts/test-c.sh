#!/usr/bin/env bash
# Tests the C ABI from C against the INSTALLED header and libraries (scripts/install.sh into
# build/prefix, found through pkg-config): the header alone as C11 and C++17, the test programs
# of tests/c/ linked shared and static under ASan+UBSan (LeakSanitizer on), the example, a
# program linking libkvidx.a next to another Rust static library, and one valgrind run.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

need=()
command -v cc >/dev/null || need+=(gcc)
command -v c++ >/dev/null || need+=(g++)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v valgrind >/dev/null || need+=(valgrind)
command -v readelf >/dev/null || need+=(binutils)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "test-c: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

prefix="$root/build/prefix"
out="$root/build/c-tests"
bash scripts/install.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
libdir="$(pkg-config --variable=libdir kvidx)"
rm -rf "$out"
mkdir -p "$out"

passed=0
failed=0
step() { # step NAME COMMAND...: runs a check, counts it, keeps going
  local name="$1"; shift
  if "$@"; then
    passed=$((passed + 1)); echo "test-c: ok     $name"
  else
    failed=$((failed + 1)); echo "test-c: FAILED $name"
  fi
}

# --- the installed artifacts -------------------------------------------------------------
soname_is_versioned() {
  readelf -d "$libdir/libkvidx.so" | grep -q 'Library soname: \[libkvidx.so.0\]' &&
    [ "$(readlink "$libdir/libkvidx.so.0")" = "libkvidx.so.$(pkg-config --modversion kvidx)" ]
}
exports_are_the_header_functions() {
  local declared exported
  declared="$(grep -E '^[a-z].*[ *]kvidx_[a-z_]+\(' "$prefix/include/kvidx.h" |
    grep -oE 'kvidx_[a-z_]+\(' | tr -d '(' | sort)"
  exported="$(nm -D --defined-only "$libdir/libkvidx.so" | awk '{print $3}' | sort)"
  [ -n "$declared" ] && [ "$declared" = "$exported" ] ||
    { diff <(echo "$declared") <(echo "$exported") || true; return 1; }
}
static_libs_are_listed() {
  local private
  private="$(pkg-config --libs-only-l --static kvidx | sed 's/-lkvidx//')"
  [ -n "$private" ] && pkg-config --libs kvidx-static | grep -q -- "$libdir/libkvidx.a"
}
step "SONAME libkvidx.so.0 and symlinks" soname_is_versioned
step "exported symbols are exactly the header's functions" exports_are_the_header_functions
step "pkg-config lists the static archive's system libraries" static_libs_are_listed

# --- the header alone ----------------------------------------------------------------------
warn=(-Wall -Wextra -Werror -pedantic)
step "header compiles alone as C11" \
  cc -std=c11 "${warn[@]}" $(pkg-config --cflags kvidx) -c tests/c/header_c11.c -o "$out/header_c11.o"
step "header compiles alone as C++17" \
  c++ -std=c++17 "${warn[@]}" $(pkg-config --cflags kvidx) -c tests/c/header_cpp17.cpp -o "$out/header_cpp17.o"

# --- test programs under sanitizers, shared and static ------------------------------------
san=(-std=c11 "${warn[@]}" -g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined
  -fno-sanitize-recover=all)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export RUST_BACKTRACE=0 # the deliberate panics print one line each
build_and_run() { # NAME LINKAGE: compile tests/c/NAME.c, link it LINKAGE-ly, run it
  local name="$1" linkage="$2" exe="$out/$1-$2"
  if [ "$linkage" = shared ]; then
    cc "${san[@]}" $(pkg-config --cflags kvidx) "tests/c/$name.c" -o "$exe" \
      $(pkg-config --libs kvidx) -Wl,-rpath,"$libdir" -pthread || return 1
    readelf -d "$exe" | grep -q 'NEEDED.*libkvidx.so.0' || { echo "$exe: no NEEDED libkvidx.so.0"; return 1; }
  else
    cc "${san[@]}" $(pkg-config --cflags kvidx) "tests/c/$name.c" -o "$exe" \
      $(pkg-config --libs kvidx-static) -pthread || return 1
    ! readelf -d "$exe" | grep -q 'NEEDED.*libkvidx' || { echo "$exe: links libkvidx dynamically"; return 1; }
  fi
  "$exe"
}
for name in test_api test_semantics test_threads test_snapshots test_feed_state test_feed_start \
  test_hash_check test_predictions test_namespaces; do
  for linkage in shared static; do
    step "$name ($linkage, ASan+UBSan+LSan)" build_and_run "$name" "$linkage"
  done
done

# --- the example, built exactly as the header says ----------------------------------------
example() {
  cc examples/c/router.c $(pkg-config --cflags --libs kvidx) -o "$out/router" &&
    LD_LIBRARY_PATH="$libdir" "$out/router" | tee "$out/router.txt" &&
    grep -q '^route to worker 2$' "$out/router.txt" &&
    cc examples/c/router.c $(pkg-config --cflags --libs kvidx-static) -o "$out/router-static" &&
    "$out/router-static" | grep -q '^route to worker 2$'
}
step "examples/c/router.c (cc prog.c \$(pkg-config --cflags --libs kvidx))" example

# --- libkvidx.a next to another Rust static library ---------------------------------------
two_rust_libs() {
  cargo build --quiet --release --manifest-path tests/c/other-rust-lib/Cargo.toml \
    --target-dir "$root/build/other-rust-lib" || return 1
  cc "${san[@]}" $(pkg-config --cflags kvidx) tests/c/test_two_rust_libs.c -o "$out/two_rust_libs" \
    "$root/build/other-rust-lib/release/libother_rust_lib.a" $(pkg-config --libs kvidx-static) \
    -pthread && "$out/two_rust_libs"
}
step "libkvidx.a linked with another Rust staticlib" two_rust_libs

# --- valgrind memcheck (no sanitizers: they cannot share a process with valgrind) ----------
memcheck() {
  cc -std=c11 "${warn[@]}" -g -O1 $(pkg-config --cflags kvidx) tests/c/test_api.c -o "$out/test_api-plain" \
    $(pkg-config --libs kvidx) -Wl,-rpath,"$libdir" -pthread &&
    valgrind --quiet --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect,possible \
      --suppressions=tests/c/valgrind.supp "$out/test_api-plain"
}
step "valgrind memcheck of test_api (no errors, no leaks)" memcheck

echo "test-c: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
