#!/usr/bin/env bash
# The audit's two process-level recipes, as checks (release builds, a few seconds each):
#  - churn: a writer stores, removes and re-creates workers (recycling their slots) while
#    readers query; no answer may name a wrong worker or a half-applied store, on every
#    backend, synchronous and with an event thread (docs/contract.md section 1.1);
#  - queue memory: 3,000 Stored events of 20,000 blocks sent faster than one event thread
#    applies them; queues bounded by bytes keep the process's peak RSS small (section 1.2).
# Usage: bash scripts/test-churn.sh [ANSWERS per churn run, default 2000000]
# (each churn run lasts until that many answers were checked, however fast the machine is)
set -euo pipefail
cd "$(dirname "$0")/.."
answers="${1:-2000000}"
cargo build --release -q -p kvidx --example churn --example queue_memory
bin=target/release/examples
pass=0
fail() { echo "test-churn: FAIL: $*" >&2; exit 1; }

for backend in positional radix runs; do
  for threads in 0 1; do
    line="$("$bin/churn" "$answers" "$backend" "$threads")"
    echo "$line"
    [[ "$line" =~ ([0-9]+)\ answers:\ 0\ name\ a\ wrong\ worker.*,\ 0\ torn ]] ||
      fail "$backend with $threads event threads: wrong or torn answers"
    [ "${BASH_REMATCH[1]}" -ge "$answers" ] || fail "$backend with $threads event threads: stopped early"
    pass=$((pass + 1))
  done
done

# Peak RSS bound: the queue's byte budget (32 MiB) plus the index and the process; the same
# burst with queues bounded only by count reached 355 MiB.
line="$("$bin/queue_memory" 3000 20000)"
echo "$line"
[[ "$line" =~ 3000\ applied.*peak\ RSS\ ([0-9]+)\. ]] || fail "queue_memory printed: $line"
[ "${BASH_REMATCH[1]}" -lt 128 ] || fail "peak RSS ${BASH_REMATCH[1]} MiB with byte-bounded queues"
pass=$((pass + 1))
line="$("$bin/queue_memory" threads 1024)"
echo "$line"
[[ "$line" =~ peak\ RSS\ ([0-9]+)\. ]] || fail "queue_memory printed: $line"
[ "${BASH_REMATCH[1]}" -lt 96 ] || fail "1,024 idle event threads take ${BASH_REMATCH[1]} MiB"
pass=$((pass + 1))
echo "test-churn: $pass passed, 0 failed"
