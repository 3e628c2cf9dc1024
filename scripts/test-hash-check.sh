#!/usr/bin/env bash
# The engine feeds' hash check (core/src/engine/hash_check): the fixtures of
# tests/fixtures/hash_check regenerate byte-identically from the engines' own hashing code
# (scripts/gen_hash_check_fixtures.py: vLLM 0.33.0's block hasher with sha256_cbor and
# xxhash_cbor, SGLang 0.5.23's event recorder and native page hash), and the check finds every
# block those payloads let it recompute matched, and a wrong seed, block size or algorithm
# mismatched in the first batch (core/tests/engine_hash_check.rs).
# Python: the venv of scripts/vllm-venv.sh, which gains the sglang wheel (no dependencies),
# vLLM's hashing dependencies cbor2 and xxhash, and pybind11 (to build SGLang's page hash);
# a C++ compiler and OpenSSL's headers (libssl-dev) build that extension.
set -euo pipefail
cd "$(dirname "$0")/.."

# SGLang's page hash is a C++ extension: a compiler, OpenSSL's and Python's headers.
need=()
command -v c++ >/dev/null || need+=(g++)
[ -f /usr/include/openssl/sha.h ] || need+=(libssl-dev)
python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' ||
  need+=(python3-dev)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "test-hash-check: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

py=$(bash scripts/vllm-venv.sh)
"$py" -m pip install -q --disable-pip-version-check --no-deps sglang==0.5.23 cbor2==6.3.0 \
  xxhash==4.1.0 pybind11==3.1.0

echo "== hash check: fixtures regenerate byte-identically from the engines' code"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" scripts/gen_hash_check_fixtures.py --out "$tmp/fixtures"
diff -r "$tmp/fixtures" tests/fixtures/hash_check
echo "fixtures: $(ls tests/fixtures/hash_check | wc -l) identical"

echo "== hash check: feeds recompute the engines' hashes"
cargo test -q -p kvidx --test engine_hash_check 2>&1 | grep -E '^test result|FAILED|panicked'
cargo test -q -p kvidx --lib -- hash_check cbor chain_names 2>&1 | grep -E '^test result|FAILED|panicked'
