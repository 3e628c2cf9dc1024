#!/usr/bin/env bash
# Engine KV events (src/engine): the fixture generator reproduces the committed byte fixtures,
# the decoder/apply tests pass, the fuzz properties hold under a 1 GiB address-space limit
# (an allocation sized by a hostile length prefix would abort), and the ZMQ subscriber example
# passes the loopback end-to-end test (pyzmq publishers with gaps, replay and a restart),
# with and without replay sockets. Installs msgpack/pyzmq for Python if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"

python3 -c 'import msgpack, zmq' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check msgpack pyzmq

echo "== engine: fixtures regenerate byte-identically"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 scripts/gen_engine_fixtures.py --out "$tmp/fixtures"
diff -r "$tmp/fixtures" tests/fixtures/engine
echo "fixtures: $(ls tests/fixtures/engine | wc -l) identical"

echo "== engine: decoder and apply tests"
cargo test -q --test engine_decode --test engine_apply 2>&1 | grep -E '^test result|FAILED|panicked'

echo "== engine: fuzz (proptest, ${ENGINE_FUZZ_CASES:-2000} cases per property, 1 GiB limit)"
fuzz_bin=$(cargo test -q --no-run --test engine_fuzz --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine_fuzz" and m.get("executable"):
        print(m["executable"])')
test -x "$fuzz_bin"
(
  ulimit -v 1048576
  cd "$root"
  ENGINE_FUZZ_CASES="${ENGINE_FUZZ_CASES:-2000}" "$fuzz_bin" --test-threads 2 2>&1 |
    grep -E '^test |test result|panicked'
)

echo "== engine: zmq subscriber example (build, clippy, fmt)"
manifest=examples/zmq-subscriber/Cargo.toml
cargo fmt --manifest-path "$manifest" -- --check
cargo clippy -q --manifest-path "$manifest" --target-dir "$target" -- -D warnings
cargo build -q --manifest-path "$manifest" --target-dir "$target"
subscriber="$target/debug/kvidx-zmq-subscriber"

echo "== engine: end-to-end on loopback (with replay)"
python3 examples/zmq-subscriber/e2e.py "$subscriber" 2>"$tmp/e2e.log" || { cat "$tmp/e2e.log"; exit 1; }
echo "== engine: end-to-end on loopback (no replay: clear on gaps)"
python3 examples/zmq-subscriber/e2e.py "$subscriber" --no-replay 2>"$tmp/e2e.log" ||
  { cat "$tmp/e2e.log"; exit 1; }
echo "engine: all passed"
