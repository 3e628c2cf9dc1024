"""The cost of find_matches from Python next to the same call made from Rust, in one run.

Usage: python bench.py [--calls N]   (with the kvidx wheel installed)
For 1, 8 and 32 workers matching a 64-block query, prints the time per call from Rust (a loop
inside the module) and from Python, with the difference: the binding's overhead (argument
conversion, the answer built as a list of Match objects and dropped again, the call itself).
From Python: the query as a list of ints, each answer dropped before the next call (as a
router does); the same with each answer kept until the next call returns (no Match object
reusable); the query as an array.array("Q"). Each figure is the
fastest of bursts of BURST calls (N calls in all), so that other processes on the machine
inflate it as little as possible; Rust and Python are timed the same way.
"""

import argparse
import array
import random
import time
from typing import Callable, List, Tuple

import kvidx

BLOCKS = 64
WORKERS = (1, 8, 32)
BURST = 500


def fastest(burst: Callable[[], float], calls: int) -> float:
    """The fastest of `calls // BURST` bursts, each returning its seconds per call."""
    return min(burst() for _ in range(max(1, calls // BURST)))


def python_burst(call: Callable[[], List[kvidx.Match]]) -> Callable[[], float]:
    """Seconds per call of `call`, each answer dropped before the next call."""

    def burst() -> float:
        start = time.perf_counter()
        for _ in range(BURST):
            call()
        return (time.perf_counter() - start) / BURST

    return burst


def python_burst_keeping(call: Callable[[], List[kvidx.Match]]) -> Callable[[], float]:
    """Seconds per call of `call`, each answer kept until the next call has returned (so
    none of its Match objects can be reused: the pool's worst case)."""

    def burst() -> float:
        kept = call()
        start = time.perf_counter()
        for _ in range(BURST):
            kept = call()
        del kept
        return (time.perf_counter() - start) / BURST

    return burst


def indexer_with(workers: int) -> Tuple[kvidx.Indexer, List[int]]:
    """The query, and an indexer where each of `workers` workers holds a prefix of it of a
    random depth (the same workers and depths on every run)."""
    rng = random.Random(1)
    query = [rng.getrandbits(64) for _ in range(BLOCKS)]
    index = kvidx.Indexer(event_threads=0)
    for worker in range(workers):
        depth = rng.randrange(1, BLOCKS + 1)
        names = kvidx.seq_hashes(query[:depth])
        index.apply_event(kvidx.Stored(worker, 0, list(zip(query[:depth], names))))
    return index, query


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000, help="calls per figure")
    args = parser.parse_args()
    print(f"find_matches, {BLOCKS}-block query, ns per call (fastest burst of {BURST} calls)")
    print(f"{'':>16} {'list':>17} {'list, kept':>17} {'array':>17}")
    print(f"{'workers':>7} {'Rust':>8}" + f" {'call':>7} {'overhead':>9}" * 3)
    for workers in WORKERS:
        index, query = indexer_with(workers)
        as_array = array.array("Q", query)
        with index:
            assert len(index.find_matches(query)) == workers
            rust = fastest(lambda: kvidx._time_find_matches(index, query, BURST), args.calls)
            figures = [
                fastest(python_burst(lambda: index.find_matches(query)), args.calls),
                fastest(python_burst_keeping(lambda: index.find_matches(query)), args.calls),
                fastest(python_burst(lambda: index.find_matches(as_array)), args.calls),
            ]
        line = f"{workers:>7} {rust * 1e9:>8.0f}"
        for python in figures:
            line += f" {python * 1e9:>7.0f} {(python - rust) * 1e9:>9.0f}"
        print(line)


if __name__ == "__main__":
    main()
