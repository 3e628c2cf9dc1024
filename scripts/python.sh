#!/usr/bin/env bash
# Prints the path of a Python 3 that can import msgpack and zmq (the engine-event tests need
# both): `python3` on PATH if it has them, else Debian's /usr/bin/python3 (scripts/setup.sh
# installs python3-msgpack and python3-zmq for it). Fails with a hint when neither has them.
# Nothing is ever installed with pip: Debian 12's Python is externally managed.
set -euo pipefail
for py in "${KVIDX_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if command -v "$py" >/dev/null && "$py" -c 'import msgpack, zmq' 2>/dev/null; then
    command -v "$py"
    exit 0
  fi
done
echo "python.sh: no Python 3 with msgpack and pyzmq; run: bash scripts/setup.sh" \
  "(installs Debian's python3-msgpack and python3-zmq)" >&2
exit 1
