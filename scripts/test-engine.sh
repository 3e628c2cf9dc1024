#!/usr/bin/env bash
# Engine KV events (core/src/engine): the fixture generators reproduce the committed byte fixtures
# (the salted, LoRA and multimodal ones from vLLM's and SGLang's own code, with the venv of
# scripts/vllm-venv.sh),
# the decoder/apply tests pass, decoding memory stays within its per-byte bounds (and the largest
# payload decodes under a 2 GiB address-space limit), the fuzz properties hold under a 1 GiB limit
# (an allocation sized by a hostile length prefix would abort), and the ZMQ subscriber example
# passes the loopback end-to-end test (pyzmq publishers with gaps, replay and a restart),
# with and without replay sockets, and with hostile endpoints (raw TCP junk, a replay that
# never ends), and its JetStream bridge passes its end-to-end tests against a real nats-server
# (started by the tests on 127.0.0.1: order, headers, de-duplication, a server restart and a
# frozen server mid-stream, the byte cap, a late bridge and an engine restart with vLLM's own
# publisher; under CI=true a missing nats-server fails them).
# Python with msgpack and pyzmq: see scripts/python.sh (scripts/setup.sh installs Debian's
# python3-msgpack, python3-zmq and nats-server); vLLM's publisher: scripts/vllm-venv.sh (a
# venv under target/ with the vllm wheel, made on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target="${CARGO_TARGET_DIR:-$root/target}"

py=$(bash scripts/python.sh)

echo "== engine: fixtures regenerate byte-identically"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" scripts/gen_engine_fixtures.py --out "$tmp/fixtures"
diff -r "$tmp/fixtures" tests/fixtures/engine
echo "fixtures: $(ls tests/fixtures/engine | wc -l) identical"
echo "== engine: salted, LoRA and multimodal fixtures regenerate byte-identically from the engines' code"
vllm_python=$(bash scripts/vllm-venv.sh)
"$vllm_python" scripts/gen_engine_namespace_fixtures.py --out "$tmp/namespaces"
diff -r "$tmp/namespaces" tests/fixtures/engine-namespaces
echo "fixtures: $(ls tests/fixtures/engine-namespaces | wc -l) identical"

echo "== engine: decoder and apply tests (namespaces end to end included)"
cargo test -q -p kvidx --test engine_decode --test engine_apply --test engine_namespaces 2>&1 |
  grep -E '^test result|FAILED|panicked'

echo "== engine: fuzz (proptest, ${ENGINE_FUZZ_CASES:-2000} cases per property, 1 GiB limit)"
fuzz_bin=$(cargo test -q -p kvidx --no-run --test engine_fuzz --message-format=json 2>/dev/null |
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

echo "== engine: decoding memory (peak heap per payload byte; largest payload under a 2 GiB limit)"
ENGINE_MEMORY_REPORT=1 cargo test -q -p kvidx --test engine_memory -- --test-threads 1 --nocapture 2>&1 |
  grep -E 'B/B|^test result|FAILED|panicked'
memory_bin=$(cargo test -q -p kvidx --no-run --test engine_memory --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "engine_memory" and m.get("executable"):
        print(m["executable"])')
test -x "$memory_bin"
(
  ulimit -v 2097152
  "$memory_bin" --exact largest_payload_decodes_under_an_address_space_limit 2>&1 |
    grep -E '^test |test result|panicked'
)

echo "== engine: C ABI (kvidx_apply_engine_batch, kvidx_engine_feed_*) from C"
cargo build -q --lib
cat >"$tmp/engine_abi.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvidx.h"

static int failed = 0, passed = 0;
#define CHECK(cond) do { if (cond) passed++; else { failed++; \
  fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #cond); } } while (0)

static unsigned char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static unsigned char buf[65536];
  *len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  return buf;
}

int main(int argc, char **argv) {
  size_t len = 0;
  const unsigned char *payload = argc > 1 ? slurp(argv[1], &len) : NULL;
  CHECK(payload != NULL && len > 0);
  kvidx_config config = kvidx_config_default();
  config.event_threads = 0;
  kvidx_indexer *ix = NULL;
  CHECK(kvidx_new(&config, &ix) == KVIDX_OK);
  kvidx_engine_batch_result r;
  CHECK(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, KVIDX_DP_RANK_FROM_BATCH, payload,
                                 len, &r) == KVIDX_OK);
  CHECK(r.events_decoded == 3 && r.events_submitted == 3 && r.dp_rank == 0);
  kvidx_stats before, after;
  CHECK(kvidx_get_stats(ix, &before) == KVIDX_OK);
  CHECK(kvidx_apply_engine_batch(ix, KVIDX_ENGINE_VLLM, 1, 0, payload, len - 1, &r) ==
        KVIDX_ERR_MALFORMED); /* truncated: not a batch */
  CHECK(kvidx_apply_engine_batch(ix, 7, 1, 0, payload, len, &r) == KVIDX_ERR_INVALID_ARGUMENT);
  CHECK(kvidx_get_stats(ix, &after) == KVIDX_OK);
  CHECK(after.events_applied == before.events_applied && after.workers == before.workers &&
        after.worker_blocks == before.worker_blocks); /* refused calls apply nothing */
  kvidx_engine_feed *feed = NULL;
  CHECK(kvidx_engine_feed_new(KVIDX_ENGINE_VLLM, KVIDX_FEED_NO_CLEAR_ON_GAP, &feed) == KVIDX_OK);
  const unsigned char seq0[8] = {0, 0, 0, 0, 0, 0, 0, 0}, seq9[8] = {0, 0, 0, 0, 0, 0, 0, 9};
  CHECK(kvidx_engine_feed_apply(feed, ix, 2, 0, seq0, 8, payload, len, &r) == KVIDX_OK);
  CHECK(r.seq_status == KVIDX_SEQ_FIRST);
  CHECK(kvidx_engine_feed_apply(feed, ix, 2, 0, seq9, 8, payload, len, &r) == KVIDX_OK);
  CHECK(r.seq_status == KVIDX_SEQ_GAP && r.seq_expected == 1 && r.batches_missed == 8);
  CHECK(r.worker_cleared == 0);
  CHECK(kvidx_engine_feed_apply(feed, ix, 2, 0, seq9, 7, payload, len, &r) ==
        KVIDX_ERR_INVALID_ARGUMENT); /* a sequence frame is 8 bytes */
  CHECK(kvidx_engine_feed_apply(feed, ix, 2, 0, seq9, 8, payload, len - 1, &r) ==
        KVIDX_ERR_MALFORMED);
  kvidx_engine_stats st;
  CHECK(kvidx_engine_feed_stats(feed, &st) == KVIDX_OK);
  CHECK(st.batches == 2 && st.gaps == 1 && st.batches_missed == 8 && st.batches_malformed == 1);
  kvidx_stats s;
  CHECK(kvidx_get_stats(ix, &s) == KVIDX_OK && s.workers == 2 && s.events_applied == 9);
  kvidx_engine_feed_free(feed);
  kvidx_free(ix);
  CHECK(strncmp(kvidx_status_str(KVIDX_ERR_MALFORMED), "KVIDX_ERR_MALFORMED", 19) == 0);
  printf("c-abi engine: %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
C
cc -std=c11 -Wall -Wextra -Werror -Iinclude "$tmp/engine_abi.c" -L"$target/debug" -lkvidx \
  -o "$tmp/engine_abi"
ln -s "$target/debug/libkvidx.so" "$tmp/libkvidx.so.0" # the SONAME the linker recorded
LD_LIBRARY_PATH="$tmp" "$tmp/engine_abi" tests/fixtures/engine/vllm_annotated_0_33.msgpack

echo "== engine: zmq subscriber example (build, clippy, fmt, tests: replay limits, reconnects)"
manifest=examples/zmq-subscriber/Cargo.toml
cargo fmt --manifest-path "$manifest" -- --check
cargo clippy -q --manifest-path "$manifest" --target-dir "$target" --all-targets -- -D warnings
cargo build -q --manifest-path "$manifest" --target-dir "$target"
cargo test -q --manifest-path "$manifest" --target-dir "$target" --bins 2>&1 | grep -E '^test result|FAILED|panicked'
echo "== engine: command lines (--help on stdout, exit 0) and the publish mode seen by zeromq peers"
cargo test -q --manifest-path "$manifest" --target-dir "$target" --test cli --test publish 2>&1 | grep -E '^test result|FAILED|panicked'

echo "== engine: JetStream bridge against a real nats-server (order, headers, dedup, restart, freeze, lost ack, byte cap, replay, vLLM's publisher)"
KVIDX_VLLM_PYTHON="$vllm_python" \
  cargo test -q --manifest-path "$manifest" --target-dir "$target" --test bridge -- --nocapture 2>&1 |
  grep -E '^test result|FAILED|panicked|SKIPPED|every_batch_once:|nats restart:|frozen server:|byte cap:|lost ack:|replay:|late bridge:|engine restart:'
subscriber="$target/debug/kvidx-zmq-subscriber"

echo "== engine: end-to-end on loopback (with replay)"
"$py" examples/zmq-subscriber/e2e.py "$subscriber" 2>"$tmp/e2e.log" || { cat "$tmp/e2e.log"; exit 1; }
echo "== engine: end-to-end on loopback (no replay: clear on gaps)"
"$py" examples/zmq-subscriber/e2e.py "$subscriber" --no-replay 2>"$tmp/e2e.log" ||
  { cat "$tmp/e2e.log"; exit 1; }
echo "== engine: end-to-end on loopback (hostile: raw TCP junk, a replay that never ends)"
"$py" examples/zmq-subscriber/e2e.py "$subscriber" --hostile 2>"$tmp/e2e.log" ||
  { cat "$tmp/e2e.log"; exit 1; }
echo "== engine: replay soak (${ENGINE_SOAK_SECONDS:-3} s of a reply that never ends; peak RSS < 128 MiB)"
"$py" examples/zmq-subscriber/e2e.py "$subscriber" --soak "${ENGINE_SOAK_SECONDS:-3}"
echo "engine: all passed"
