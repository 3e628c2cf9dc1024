#!/usr/bin/env bash
# The Python binding (bindings/python): fmt and clippy of its crate, its wheel built once with
# maturin and installed into a fresh virtual environment on Debian's Python, where pytest runs
# its suite and mypy --strict checks the suite against the wheel's type stubs; then
# `pip install ./bindings/python` into a second fresh environment, as from a clone.
# Tools come from scripts/python-venv.sh (target/py-venv); nothing is installed outside venvs.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
export PYO3_PYTHON=/usr/bin/python3
tools=$(bash scripts/python-venv.sh)
tools_bin=$(dirname "$tools")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
manifest=bindings/python/Cargo.toml
pins=$("$tools" -c 'import importlib.metadata as m; print("pytest==" + m.version("pytest"))')

echo "-- fmt, clippy"
cargo fmt --manifest-path "$manifest" -- --check
cargo clippy -q --manifest-path "$manifest" --all-targets -- -D warnings

echo "-- wheel (maturin, release)"
(cd bindings/python && "$tools_bin/maturin" build -q --release --out "$tmp/wheels" -i /usr/bin/python3)
wheel=$(ls "$tmp"/wheels/kvidx-*-abi3-*.whl)
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" "$pins"

echo "-- pytest"
(cd bindings/python/tests && "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider)
echo "-- mypy --strict (the wheel's stubs)"
(cd bindings/python/tests && "$tools_bin/mypy" --strict --no-incremental \
  --python-executable "$tmp/venv/bin/python" .)

echo "-- pip install ./bindings/python"
/usr/bin/python3 -m venv "$tmp/from-source"
"$tmp/from-source/bin/python" -m pip install -q --disable-pip-version-check ./bindings/python
(cd "$tmp" && "$tmp/from-source/bin/python" -c '
import kvidx
with kvidx.Indexer(event_threads=0) as index:
    index.apply_event(kvidx.Stored(7, 0, [(11, 11), (12, 907)]))
    assert [tuple(m) for m in index.find_matches([11, 12, 13])] == [(7, 0, 2)]
print("installed from source:", kvidx.__version__)')
echo "python binding: ok"
