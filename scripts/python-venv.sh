#!/usr/bin/env bash
# Prints the path of the Python of a virtual environment (default target/py-venv, or
# $KVIDX_PY_VENV) with maturin, pytest and mypy, creating it first when needed on top of
# Debian's /usr/bin/python3 (the python3-venv package of scripts/setup.sh). pip installs into
# that environment only, never into the system Python. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${KVIDX_PY_VENV:-$(pwd)/target/py-venv}"
pins=(maturin==1.16.0 pytest==9.2.0 mypy==2.4.1)
check='import importlib.metadata as m
for pin in "'"${pins[*]}"'".split():
    name, version = pin.split("==")
    assert m.version(name) == version, (name, m.version(name))'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  echo "$venv/bin/python"
  exit 0
fi
echo "python-venv.sh: creating $venv (${pins[*]})" >&2
/usr/bin/python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}" >&2
"$venv/bin/python" -c "$check"
echo "$venv/bin/python"
