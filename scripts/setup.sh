#!/usr/bin/env bash
# Installs what the project needs on a fresh machine (Debian, root or sudo). Idempotent.
set -euo pipefail
need=()
command -v cargo >/dev/null || { echo "setup: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
# Go 1.21 or newer (it fetches the 1.26 toolchain the modules name); Debian 12's golang-go
# (1.19) cannot build the binding, so it is not installed from apt.
go_bin="$(command -v go || true)"
[ -n "$go_bin" ] || { [ -x /usr/local/go/bin/go ] && go_bin=/usr/local/go/bin/go; }
go_minor="$([ -n "$go_bin" ] && "$go_bin" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
if [ -z "$go_minor" ] || [ "$go_minor" -lt 21 ]; then
  echo "setup: Go 1.21 or newer is required (found: ${go_bin:-none}): https://go.dev/dl" >&2
  exit 1
fi
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v valgrind >/dev/null || need+=(valgrind)
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
# The engine-event tests' Python side (fixture generator, ZMQ publishers): Debian's packages,
# never pip (Debian 12's Python refuses pip installs: externally-managed-environment).
bash "$(dirname "$0")/python.sh" >/dev/null 2>&1 || need+=(python3 python3-msgpack python3-zmq)
# The Python binding's tests run in virtual environments on Debian's Python (python3-venv).
/usr/bin/python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
# The JetStream bridge's tests start a real nats-server (Debian 12: 2.9.x, in /usr/sbin).
command -v nats-server >/dev/null || [ -x /usr/sbin/nats-server ] || need+=(nats-server)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
for component in clippy rustfmt; do
  rustup component list --installed 2>/dev/null | grep -q "^$component" || rustup component add "$component"
done
