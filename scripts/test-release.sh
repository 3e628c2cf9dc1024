#!/usr/bin/env bash
# The core suites whose threads race each other, run again in a release build: optimized code
# interleaves differently from the debug build of `cargo test --workspace`, so a check that
# only held at debug speed fails here. Also the long-chain stack test at its full length
# (1,048,576 blocks on a 64 KiB stack; 65,536 in debug builds).
#  - concurrency: readers during writes, backpressure, flushes and removals;
#  - consistency: every answer during churn is a state each worker passed through;
#  - snapshots: round trips, idempotent replays, a snapshot taken mid-stream;
#  - deep_chains: store, find, remove, clear, remove_worker, snapshot and drop of one chain.
set -euo pipefail
cd "$(dirname "$0")/.."
# One test at a time: each already runs its own reader and writer threads, and several at
# once on 2 cores mostly wait for each other. The churn streams at half their debug length:
# this pass is for the other interleavings, the debug pass already ran the full streams.
KVIDX_CONSISTENCY_WRITES="${KVIDX_CONSISTENCY_WRITES:-750}" \
  KVIDX_OFFLOAD_ROUNDS="${KVIDX_OFFLOAD_ROUNDS:-1500}" \
  cargo test --release -q -p kvidx --test concurrency --test consistency --test snapshots \
  --test deep_chains -- --test-threads=1
