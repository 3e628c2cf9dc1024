#!/usr/bin/env bash
# llm-d's request keys (core/src/llmd.rs): an independent Go implementation written from
# llm-d's description (tests/llmd-keys: hash/fnv and fxamacker/cbor's canonical mode, its own
# module, so the Go binding's go.mod gains no dependency) agrees with its golden file
# tests/fixtures/llmd_keys.txt, and kvidx's keys agree with the same file
# (core/tests/llmd_keys.rs), as does a feed set to index under them
# (core/tests/engine_hash_check.rs, an_llmd_feed_answers_llmd_request_keys).
set -euo pipefail
cd "$(dirname "$0")/.."
# Go: as scripts/test-go.sh finds it (the module's dependency comes from the Go module proxy).
if ! command -v go >/dev/null && [ -x /usr/local/go/bin/go ]; then export PATH="/usr/local/go/bin:$PATH"; fi
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}" GOFLAGS="${GOFLAGS:-} -buildvcs=false"

echo "== llm-d keys: the independent Go implementation"
(cd tests/llmd-keys && go vet ./... && go test -count=1 ./...)

echo "== llm-d keys: kvidx's keys and an llm-d keyed feed"
cargo test -q -p kvidx --test llmd_keys 2>&1 | grep -E '^test result|FAILED|panicked'
cargo test -q -p kvidx --test engine_hash_check an_llmd 2>&1 | grep -E '^test result|FAILED|panicked'
cargo test -q -p kvidx --lib -- llmd 2>&1 | grep -E '^test result|FAILED|panicked'
