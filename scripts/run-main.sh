#!/usr/bin/env bash
# The main job: builds kvidx-bench (release) and runs it. With no arguments it runs the full
# conversation trace shipped in data/ (12,031 requests, 256 workers x 4,096 blocks, length
# factor 4, median of 3 closed-loop runs: the published measurement, about 6 minutes on 2
# cores) through the mock engine fleet under every routing policy, prints routing quality and
# the study of routing before the events arrive (every view at 0, 50 and 500 ms of event
# delay, on the trace and its bursty variant), replays the kv-cost workload against every
# index side by side and writes plots and
# results.json (with the commit, machine and command) to target/kvidx-bench/main/.
#   bash scripts/run-main.sh --quick     # the 400-request sample, seconds; figures indicative
# Other arguments go to kvidx-bench (`bash scripts/run-main.sh --help` lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo >/dev/null || { echo "run-main: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
if [ ! -x target/release/kvidx-bench ]; then
  echo "run-main: building kvidx-bench (release); the first build takes 1-3 minutes on 2 cores" >&2
fi
cargo build --release -p kvidx-bench
exec target/release/kvidx-bench "$@"
