#!/usr/bin/env bash
# Installs what the project needs on a fresh machine (Debian, root or sudo). Idempotent.
set -euo pipefail
need=()
command -v cargo >/dev/null || { echo "setup: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v valgrind >/dev/null || need+=(valgrind)
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v make >/dev/null || need+=(make)
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
# The engine-event tests' Python side (fixture generator, ZMQ publishers): Debian's packages,
# never pip (Debian 12's Python refuses pip installs: externally-managed-environment).
bash "$(dirname "$0")/python.sh" >/dev/null 2>&1 || need+=(python3 python3-msgpack python3-zmq)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
