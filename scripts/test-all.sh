#!/usr/bin/env bash
# Runs every test of the project: Rust (fmt, clippy, unit, property, integration), then each
# binding's suite. Installs missing tools first. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
echo "== cargo fmt --check"; cargo fmt --all -- --check
echo "== cargo clippy"; cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"; cargo test --workspace
for part in scripts/test-*.sh; do
  [ "$part" = scripts/test-all.sh ] && continue
  echo "== $part"; bash "$part"
done
echo "all tests passed"
