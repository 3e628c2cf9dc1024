#!/usr/bin/env bash
# Router replicas on NATS JetStream (docs/replicas.md), end to end against a real nats-server:
# generates a small workload with kvidx-bench (8 workers x 512 blocks, the first 1,200 requests
# of data/conversation_trace.jsonl: ~112k events, 1,200 queries), then runs
# examples/go-router's TestReplicasOnJetStream, which starts nats-server (ephemeral port,
# temporary JetStream directory) and three router replicas in --nats mode (built with -race; a
# data race in their logs fails the test), publishes the
# workload as vLLM engine batches exactly as the bridge does, and checks convergence through
# a kill -9 of a replica, a nats-server restart and a corrupted snapshot, then once more with
# the replicas built with CGO_ENABLED=0 (purego). It prints the bootstrap time and the
# catch-up rate. Then the whole chain with real processes (TestChainEnginesBridgeReplicas):
# fake engines (pyzmq) sending the same workload as vLLM batches on ZMQ -> one
# `kvidx-zmq-subscriber bridge` -> nats-server -> two replicas; it checks the stream holds
# exactly one message per batch sent and the replicas' answers, and prints the end-to-end
# events/s. Without nats-server (or, for the chain test, without python3-zmq) the tests fail
# under CI=true and are skipped (with a message) otherwise; scripts/setup.sh installs Debian's
# nats-server and python3-zmq.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

if ! command -v go >/dev/null; then
  [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"
fi
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"
if ! command -v nats-server >/dev/null && [ ! -x /usr/sbin/nats-server ]; then
  if [ "${CI:-}" = "true" ]; then
    echo "test-replicas: nats-server is not installed (run scripts/setup.sh)" >&2
    exit 1
  fi
  echo "test-replicas: SKIPPED: nats-server is not installed (apt-get install nats-server, or scripts/setup.sh)" >&2
  exit 0
fi

prefix="$root/build/prefix"
bash scripts/install.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
lib_id="$(cat "$prefix/include/kvidx.h" "$prefix/lib/libkvidx.so.0" | sha256sum | cut -c1-16)"
export CGO_CFLAGS="-O2 -g -DKVIDX_LIB_ID=0x$lib_id"

# show_failure LOG: the end of a failed go test log, then the test's own lines again (its
# errors among them) so they come last even when replica log tails fill the end.
show_failure() {
  tail -200 "$1"
  echo "-- test-replicas: the test's own lines in $(basename "$1"):"
  grep -E '^ {4}[a-z_]+_test\.go:[0-9]+: ' "$1" | grep -v ' log tail:$' | cut -c1-400 || true
}

echo "== test-replicas: workload (kvidx-bench generate)"
cargo build -q --release -p kvidx-bench
target_dir="${CARGO_TARGET_DIR:-$root/target}"
case "$target_dir" in /*) ;; *) target_dir="$root/$target_dir" ;; esac
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$target_dir/release/kvidx-bench" generate --trace data/conversation_trace.jsonl --limit 1200 \
  --workers 8 --blocks-per-worker 512 --out "$tmp/workload.jsonl" 2>&1 | sed 's/^/  /'

echo "== test-replicas: go test -run TestReplicasOnJetStream (examples/go-router)"
(cd examples/go-router &&
  KVIDX_REPLICA_E2E=1 KVIDX_REPLICA_RACE=1 KVIDX_REPLICA_WORKLOAD="$tmp/workload.jsonl" \
    go test -count=1 -v -timeout 170s -run 'TestReplicasOnJetStream|TestReplicasSharePredictions|TestReplicaRefusesAStreamGap|TestReplicaFollowsItsOwnStreamOnly|TestARestoredReplicaClassifiesTheNextBatchLikeANeverStoppedOne|TestSnapshotEnvelope|TestSnapshotNames|TestParseStreamHeaders' . \
    >"$tmp/go-test.log" 2>&1) || true
grep -E '^(--- |PASS|FAIL|ok )|replicas_test.go' "$tmp/go-test.log" | grep -vE '^\s+[0-9]{4}/[0-9]{2}/[0-9]{2} ' || true
if ! grep -q '^--- PASS: TestReplicasOnJetStream' "$tmp/go-test.log"; then
  if grep -q '^--- SKIP: TestReplicasOnJetStream' "$tmp/go-test.log" && [ "${CI:-}" != "true" ]; then
    echo "test-replicas: SKIPPED (see above)"; exit 0
  fi
  show_failure "$tmp/go-test.log"
  echo "test-replicas: FAILED" >&2
  exit 1
fi
grep -q '^--- PASS: TestReplicaRefusesAStreamGap' "$tmp/go-test.log" &&
  grep -q '^ok ' "$tmp/go-test.log" || { show_failure "$tmp/go-test.log"; echo "test-replicas: FAILED" >&2; exit 1; }

# The same end to end with the replicas built without cgo (purego: the snapshot streams go
# through purego callbacks).
echo "== test-replicas: the same with CGO_ENABLED=0 (purego replicas)"
(cd examples/go-router &&
  CGO_ENABLED=0 KVIDX_LIBRARY_PATH="$prefix/lib/libkvidx.so.0" KVIDX_REPLICA_E2E=1 \
    KVIDX_REPLICA_WORKLOAD="$tmp/workload.jsonl" \
    go test -count=1 -v -timeout 170s -run 'TestReplicasOnJetStream' . >"$tmp/go-test-purego.log" 2>&1) || true
grep -E '^(--- |ok )|bootstrap from' "$tmp/go-test-purego.log" || true
grep -q '^--- PASS: TestReplicasOnJetStream' "$tmp/go-test-purego.log" ||
  { show_failure "$tmp/go-test-purego.log"; echo "test-replicas: FAILED (purego)" >&2; exit 1; }

# The whole chain: fake engines (libzmq through pyzmq) -> the bridge -> nats-server -> two
# replicas (docs/replicas.md, "The chain test").
echo "== test-replicas: the whole chain: engines (ZMQ) -> bridge -> JetStream -> 2 replicas"
if py="$(bash scripts/python.sh 2>/dev/null)"; then
  cargo build -q --manifest-path examples/zmq-subscriber/Cargo.toml --target-dir "$target_dir"
  (cd examples/go-router &&
    KVIDX_CHAIN_E2E=1 KVIDX_PYTHON="$py" KVIDX_BRIDGE_BIN="$target_dir/debug/kvidx-zmq-subscriber" \
      KVIDX_REPLICA_WORKLOAD="$tmp/workload.jsonl" \
      go test -count=1 -v -timeout 150s -run 'TestChainEnginesBridgeReplicas' . >"$tmp/go-test-chain.log" 2>&1) || true
  grep -E '^(--- |ok )|chain_test.go' "$tmp/go-test-chain.log" || true
  grep -q '^--- PASS: TestChainEnginesBridgeReplicas' "$tmp/go-test-chain.log" ||
    { show_failure "$tmp/go-test-chain.log"; echo "test-replicas: FAILED (chain)" >&2; exit 1; }
elif [ "${CI:-}" = "true" ]; then
  bash scripts/python.sh || true
  echo "test-replicas: FAILED: the chain test needs a Python 3 with pyzmq (run scripts/setup.sh)" >&2
  exit 1
else
  echo "test-replicas: SKIPPED the chain test: no Python 3 with pyzmq and msgpack" \
    "(apt-get install python3-zmq python3-msgpack, or scripts/setup.sh)" >&2
fi
echo "test-replicas: passed"

