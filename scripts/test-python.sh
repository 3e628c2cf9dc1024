#!/usr/bin/env bash
# The Python binding (bindings/python): fmt and clippy of its crate, its wheel built once with
# maturin and installed into a fresh virtual environment on Debian's Python, where pytest runs
# its suite and examples/python-router's end-to-end test (with pyzmq), and mypy --strict checks
# both against the wheel's type stubs; payloads made by vLLM's and SGLang's own kv_events
# classes (vllm 0.33.0, sglang 0.5.23 wheels) go through EngineFeed; then
# `pip install ./bindings/python` into a second fresh environment, as from a clone, where the
# session of docs/python.md must print what the doc shows.
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
pins=("$("$tools" -c 'import importlib.metadata as m; print("pytest==" + m.version("pytest"))')" pyzmq==27.3.0)

echo "-- fmt, clippy"
cargo fmt --manifest-path "$manifest" -- --check
cargo clippy -q --manifest-path "$manifest" --all-targets -- -D warnings

echo "-- wheel (maturin, release)"
(cd bindings/python && "$tools_bin/maturin" build -q --release --out "$tmp/wheels" -i /usr/bin/python3)
wheel=$(ls "$tmp"/wheels/kvidx-*-abi3-*.whl)
/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" "${pins[@]}"

echo "-- pytest"
(cd bindings/python/tests && "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider)
echo "-- pytest examples/python-router (pyzmq)"
(cd examples/python-router && "$tmp/venv/bin/python" -m pytest -q -p no:cacheprovider)
echo "-- mypy --strict (the wheel's stubs)"
(cd bindings/python/tests && "$tools_bin/mypy" --strict --no-incremental \
  --python-executable "$tmp/venv/bin/python" .)
(cd examples/python-router && MYPYPATH="$root/bindings/python/tests" "$tools_bin/mypy" --strict \
  --no-incremental --python-executable "$tmp/venv/bin/python" .)

echo "-- vLLM's and SGLang's own kv_events classes through EngineFeed"
# The venv of scripts/vllm-venv.sh (the vllm wheel) gains the sglang wheel, without
# dependencies: the tests load each engine's kv_events module alone.
vllm_py=$(bash scripts/vllm-venv.sh)
"$vllm_py" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$wheel"
"$vllm_py" -m pip install -q --disable-pip-version-check --no-deps sglang==0.5.23
"$vllm_py" -m pip install -q --disable-pip-version-check "${pins[0]}" # pytest with its own dependencies
(cd bindings/python/engine_tests && "$vllm_py" -m pytest -q -p no:cacheprovider)

echo "-- pip install ./bindings/python"
/usr/bin/python3 -m venv "$tmp/from-source"
"$tmp/from-source/bin/python" -m pip install -q --disable-pip-version-check ./bindings/python
# The session of docs/python.md (its first python block) prints what the doc says (the text
# block after it).
awk '/^```python$/ { f = 1; next } /^```$/ { if (f) exit } f' docs/python.md >"$tmp/session.py"
awk '/^```python$/ { p = 1 } p && /^```text$/ { f = 1; next } f && /^```$/ { exit } f' \
  docs/python.md >"$tmp/expected.txt"
(cd "$tmp" && "$tmp/from-source/bin/python" session.py >"$tmp/printed.txt")
diff -u "$tmp/expected.txt" "$tmp/printed.txt" || { echo "docs/python.md: the session printed otherwise" >&2; exit 1; }
echo "python binding: ok"
