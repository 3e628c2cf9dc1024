"""The cost of find_matches from Python next to the same call made from Rust, in one run.

Usage: python bench.py [--workers N] [--calls N] [--array]   (with the kvidx wheel installed)
Prints the time per 64-block query both ways and the difference: the binding's overhead
(argument conversion, the GIL released and taken back, the Match objects built). The query is
a list of ints, or with --array an array.array("Q").
"""

import argparse
import array
import random
import timeit

import kvidx

BLOCKS = 64


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--array", action="store_true", help='pass the query as array.array("Q")')
    args = parser.parse_args()
    rng = random.Random(1)
    query = [rng.getrandbits(64) for _ in range(BLOCKS)]
    with kvidx.Indexer(event_threads=0) as index:
        for worker in range(args.workers):
            depth = rng.randrange(1, BLOCKS + 1)
            names = kvidx.seq_hashes(query[:depth])
            index.apply_event(kvidx.Stored(worker, 0, list(zip(query[:depth], names))))
        assert len(index.find_matches(query)) == args.workers
        rust = min(kvidx._time_find_matches(index, query, args.calls) for _ in range(5))
        arg = array.array("Q", query) if args.array else query
        python = min(timeit.repeat(lambda: index.find_matches(arg), number=args.calls, repeat=5)) / args.calls
    kind = "array.array('Q')" if args.array else "list"
    print(f"find_matches, {BLOCKS}-block query ({kind}), {args.workers} workers matching")
    print(f"  from Rust:   {rust * 1e9:8.0f} ns")
    print(f"  from Python: {python * 1e9:8.0f} ns")
    print(f"  overhead:    {(python - rust) * 1e9:8.0f} ns")


if __name__ == "__main__":
    main()
