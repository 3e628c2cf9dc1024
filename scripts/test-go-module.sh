#!/usr/bin/env bash
# The Go module as a user consumes it (docs/go.md, "Using the module from your own module"):
# a fresh module in a temporary directory outside the repository requires
# github.com/kvidx/kvidx/bindings/go through a `replace` line, and another through a go.work
# file; each is built and run in three modes, with no LD_LIBRARY_PATH at run time:
#   cgo, dynamic: libkvidx.so.0 found through the rpath set with CGO_LDFLAGS (checked with readelf)
#   cgo, static (-tags kvidx_static): no libkvidx at run time at all
#   purego (CGO_ENABLED=0): libkvidx.so.0 loaded from $KVIDX_LIBRARY_PATH; without it (and
#   nothing on the loader's path) the program gets ErrLibraryUnavailable naming that variable.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
command -v go >/dev/null || { echo "test-go-module: go is required (see README)" >&2; exit 1; }
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"
unset LD_LIBRARY_PATH KVIDX_LIBRARY_PATH

prefix="$root/build/prefix"
bash scripts/install.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
lib_id="$(cat "$prefix/include/kvidx.h" "$prefix/lib/libkvidx.so.0" | sha256sum | cut -c1-16)"
export CGO_CFLAGS="-O2 -DKVIDX_LIB_ID=0x$lib_id" # rebuild when the library changes

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0
ok() { pass=$((pass + 1)); echo "ok - $*"; }
fail() { echo "test-go-module: FAIL: $*" >&2; exit 1; }

write_main() {
  cat >"$1/main.go" <<'GO'
package main

import (
	"errors"
	"fmt"
	"os"

	kvidx "github.com/kvidx/kvidx/bindings/go"
)

func main() {
	ix, err := kvidx.New(kvidx.Config{Backend: kvidx.BackendPositional})
	if errors.Is(err, kvidx.ErrLibraryUnavailable) {
		fmt.Println("library unavailable:", err)
		os.Exit(3)
	}
	if err != nil {
		panic(err)
	}
	defer ix.Close()
	local, err := kvidx.HashTokens([]uint32{1, 2, 3, 4, 5, 6, 7, 8}, 4)
	if err != nil {
		panic(err)
	}
	seq, err := kvidx.SeqHashes(local)
	if err != nil {
		panic(err)
	}
	blocks := []kvidx.Block{{LocalHash: local[0], SeqHash: seq[0]}, {LocalHash: local[1], SeqHash: seq[1]}}
	if err := ix.ApplyEvent(kvidx.StoredEvent(7, 0, 1, blocks)); err != nil {
		panic(err)
	}
	matches, err := ix.FindMatches(local)
	if err != nil {
		panic(err)
	}
	fmt.Println(matches, seq[1])
}
GO
}

# 1. `replace` in the consumer's go.mod (with what `go mod tidy` adds: the binding's purego
# requirement; its go.sum copied, so nothing is downloaded).
mod="$tmp/replace"
bash scripts/go-consumer-module.sh "$mod" example.com/router
write_main "$mod"

# 2. A go.work file naming both modules; the consumer's go.mod needs no line for kvidx.
work="$tmp/work"
mkdir -p "$work/app"
cat >"$work/app/go.mod" <<EOF
module example.com/router

go 1.26
EOF
write_main "$work/app"
(cd "$work" && go work init ./app "$root/bindings/go")

want="[{WorkerID:7 DpRank:0 Depth:2}] 4945711292740353085"
check_run() { # LABEL BINARY [env...]: runs BINARY with no LD_LIBRARY_PATH, checks its line
  local label="$1" bin="$2"; shift 2
  local got
  got="$(env -u LD_LIBRARY_PATH "$@" "$bin")" || fail "$label: exit $? ($got)"
  [ "$got" = "$want" ] || fail "$label: printed '$got', want '$want'"
  ok "$label"
}

for dir in "$mod" "$work/app"; do
  how=$([ "$dir" = "$mod" ] && echo "replace" || echo "go.work")
  (cd "$dir" && go vet . >/dev/null)
  (cd "$dir" && CGO_LDFLAGS="-Wl,-rpath,$prefix/lib" go build -o "$tmp/dyn" .)
  readelf -d "$tmp/dyn" | grep -Eq "(RUNPATH|RPATH).*$prefix/lib" || fail "$how: no rpath in the cgo binary"
  readelf -d "$tmp/dyn" | grep -q 'NEEDED.*libkvidx.so.0' || fail "$how: cgo binary does not link libkvidx.so.0"
  check_run "$how, cgo dynamic, library found through the rpath" "$tmp/dyn"
  (cd "$dir" && go build -tags kvidx_static -o "$tmp/static" .)
  if readelf -d "$tmp/static" | grep -q 'NEEDED.*libkvidx'; then fail "$how: static binary needs libkvidx"; fi
  check_run "$how, cgo static (-tags kvidx_static), no libkvidx at run time" "$tmp/static"
  (cd "$dir" && CGO_ENABLED=0 go build -o "$tmp/pure" .)
  if readelf -d "$tmp/pure" 2>/dev/null | grep -q 'NEEDED.*libkvidx'; then fail "$how: purego binary links libkvidx"; fi
  check_run "$how, CGO_ENABLED=0, library from KVIDX_LIBRARY_PATH" "$tmp/pure" \
    KVIDX_LIBRARY_PATH="$prefix/lib/libkvidx.so.0"
done

# Without KVIDX_LIBRARY_PATH and with the library on no loader path, purego says what to set
# (skipped only if a libkvidx.so.0 is installed system-wide, which the message then says).
if ldconfig -p 2>/dev/null | grep -q 'libkvidx.so.0'; then
  echo "note: a system-wide libkvidx.so.0 is installed; the unavailable-library case is not reachable here"
else
  set +e
  out="$(env -u LD_LIBRARY_PATH -u KVIDX_LIBRARY_PATH "$tmp/pure" 2>&1)"
  code=$?
  set -e
  [ "$code" -eq 3 ] && echo "$out" | grep -q 'KVIDX_LIBRARY_PATH' ||
    fail "purego without a library: exit $code, '$out'"
  ok "CGO_ENABLED=0 without the library: ErrLibraryUnavailable naming KVIDX_LIBRARY_PATH"
fi
echo "test-go-module: $pass passed, 0 failed"
