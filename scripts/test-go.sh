#!/usr/bin/env bash
# Go binding and example router: installs the C library (scripts/install.sh), then runs go vet
# and every Go test in both back ends (cgo with dynamic and static linking; purego with
# CGO_ENABLED=0), under the race detector and under GOEXPERIMENT=cgocheck2, and checks what
# each binary links. The engine-ingestion tests read the committed payloads of
# tests/fixtures/engine/; the router's --zmq end-to-end test (TestZMQFromVLLMsPublisher) runs
# vLLM's own ZmqEventPublisher from the venv of scripts/vllm-venv.sh (made on first use).
# Exits non-zero on the first failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# Go: the machine's toolchain, else Debian's; go.mod's "go 1.26" line makes an older go fetch
# the 1.26 toolchain from the Go module proxy (GOTOOLCHAIN=auto).
if ! command -v go >/dev/null; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "test-go: installing golang-go and pkg-config"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq golang-go pkg-config >/dev/null
fi
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"

prefix="$root/build/prefix"
bash scripts/install.sh "$prefix"
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KVIDX_LIBRARY_PATH="$prefix/lib/libkvidx.so.0"
# The go build cache does not see a rebuilt libkvidx or header; a define naming their hash
# makes cgo builds (and their cached test results) follow the library.
lib_id="$(cat "$prefix/include/kvidx.h" "$prefix/lib/libkvidx.a" "$prefix/lib/libkvidx.so.0" | sha256sum | cut -c1-16)"
export CGO_CFLAGS="-O2 -g -DKVIDX_LIB_ID=0x$lib_id"
go version
# vLLM's publisher class for the router's --zmq end-to-end test.
KVIDX_VLLM_PYTHON="$(bash scripts/vllm-venv.sh)"
export KVIDX_VLLM_PYTHON

log="$(mktemp)"
trap 'rm -f "$log" /tmp/kvidx-go-$$-*.test' EXIT
# run MODULE_DIR LABEL go-test-args...: runs go test -v, prints its summary lines.
run() {
  local dir="$1" label="$2"; shift 2
  echo "== go test ($label) in $dir"
  if ! (cd "$dir" && go test -count=1 -v "$@" ./... >"$log" 2>&1); then
    grep -E -- '^(--- FAIL|FAIL|panic:|ok )|_test\.go:[0-9]+:' "$log" | head -60
    echo "test-go: go test ($label) failed in $dir" >&2
    exit 1
  fi
  grep -E '^(ok|PASS|FAIL)[[:space:]]|back end (cgo|purego), library|routed to a cached prefix|zmq e2e:' "$log" | sed 's/^ *//' || true
  passed=$((passed + $(grep -c -- '^--- PASS' "$log" || true)))
}
passed=0

for dir in bindings/go examples/go-router; do
  echo "== go vet (cgo, purego) in $dir"
  (cd "$dir" && go vet ./... && CGO_ENABLED=0 go vet ./... && test -z "$(gofmt -l .)")
done

for dir in bindings/go examples/go-router; do
  run "$dir" "cgo, dynamic"
  CGO_ENABLED=0 run "$dir" "purego, CGO_ENABLED=0"
  run "$dir" "cgo, -race" -race
done
GOEXPERIMENT=cgocheck2 run bindings/go "cgo, GOEXPERIMENT=cgocheck2"
run bindings/go "cgo, static (-tags kvidx_static)" -tags kvidx_static
CGO_ENABLED=0 run bindings/go "purego, benchmarks once" -run '^$' -bench . -benchtime 1x
run bindings/go "cgo, benchmarks once" -run '^$' -bench . -benchtime 1x

echo "== linking: the static binary runs without libkvidx.so, the dynamic one needs it"
(cd bindings/go &&
  go test -c -tags kvidx_static -o "/tmp/kvidx-go-$$-static.test" . &&
  go test -c -o "/tmp/kvidx-go-$$-dynamic.test" . &&
  CGO_ENABLED=0 go test -c -o "/tmp/kvidx-go-$$-purego.test" .)
if readelf -d "/tmp/kvidx-go-$$-static.test" | grep -q 'NEEDED.*libkvidx'; then
  echo "test-go: the kvidx_static test binary still needs libkvidx.so" >&2; exit 1
fi
readelf -d "/tmp/kvidx-go-$$-dynamic.test" | grep -q 'NEEDED.*libkvidx.so.0' ||
  { echo "test-go: the dynamic test binary does not link libkvidx.so.0" >&2; exit 1; }
if readelf -d "/tmp/kvidx-go-$$-purego.test" 2>/dev/null | grep -q 'NEEDED.*libkvidx'; then
  echo "test-go: the purego test binary links libkvidx at build time" >&2; exit 1
fi
(cd bindings/go && env -u LD_LIBRARY_PATH "/tmp/kvidx-go-$$-static.test" -test.count=1 \
  -test.run 'TestStoreAndFind|TestHashTokensGolden' 2>&1 | tail -1)

echo "go tests: $passed passed, 0 failed"
