#!/usr/bin/env bash
# The main job: builds kvidx-bench (release) and runs it. With no arguments it runs the shipped
# sample trace through the mock engine fleet, prints routing quality per policy, replays the
# workload against every index side by side and writes a plot. Arguments go to kvidx-bench,
# e.g. `bash scripts/run-main.sh --trace ../shared/traces/conversation_trace.jsonl \
#        --workers 256 --blocks-per-worker 4096 --length-factor 4`.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "run-main: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
cargo build --release -q -p kvidx-bench
exec target/release/kvidx-bench "$@"
