#!/usr/bin/env bash
# Prints the path of a Python that can import vLLM's KV-event publisher (the `vllm` wheel,
# 0.33.0) and SGLang's KV-event classes (the `sglang` wheel, 0.5.23) besides msgpack and pyzmq,
# creating it first when needed: a virtual environment
# (default target/vllm-venv, or $KVIDX_VLLM_VENV) on top of the Python of scripts/python.sh,
# whose Debian msgpack and pyzmq it sees (--system-site-packages). pip installs into that
# environment only: the `vllm` and `sglang` wheels without their dependencies (torch and the
# rest of the serving stack are not needed: examples/zmq-subscriber/vllm_engine.py and
# scripts/gen_engine_namespace_fixtures.py load the modules they use alone) and msgspec, which
# the publishers encode with. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${KVIDX_VLLM_VENV:-$(pwd)/target/vllm-venv}"
vllm_version=0.33.0
sglang_version=0.5.23
check='import importlib.metadata as m, msgspec, msgpack, zmq
assert m.version("vllm") == "'"$vllm_version"'", m.version("vllm")
assert m.version("sglang") == "'"$sglang_version"'", m.version("sglang")'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
base=$(bash scripts/python.sh)
echo "vllm-venv.sh: creating $venv (vllm $vllm_version, sglang $sglang_version, no dependencies; msgspec)" >&2
"$base" -m venv --system-site-packages "$venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-deps \
  "vllm==$vllm_version" "sglang==$sglang_version" msgspec==0.22.0 >&2
"$venv/bin/python" -c "$check"
echo "$venv/bin/python"
