"""Many Python threads querying while others apply events: every answer well-formed, the
final state exact."""

import threading
from typing import List

import pytest

import kvidx

WORKERS = 16
DEPTH = 24


@pytest.mark.parametrize("threads", [0, 2])
def test_queries_during_writes(threads: int) -> None:
    query = list(range(1, DEPTH + 1))
    errors: List[BaseException] = []
    done = threading.Event()

    with kvidx.Indexer(event_threads=threads) as index:

        def writer(first: int) -> None:
            try:
                for round_ in range(30):
                    for worker in range(first, WORKERS, 2):
                        depth = 1 + (worker + round_) % DEPTH
                        blocks = [(local, worker * 1000 + local) for local in query[:depth]]
                        index.apply_events([kvidx.Cleared(worker, 2 * round_), kvidx.Stored(worker, 2 * round_ + 1, blocks)])
                # The last round: every worker at its final depth.
                for worker in range(first, WORKERS, 2):
                    blocks = [(local, worker * 1000 + local) for local in query[: 1 + worker]]
                    index.apply_events([kvidx.Cleared(worker, 100), kvidx.Stored(worker, 101, blocks)])
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        def reader() -> None:
            try:
                while not done.is_set():
                    got = index.find_matches(query)
                    keys = [(-m.depth, m.worker_id, m.dp_rank) for m in got]
                    assert keys == sorted(keys)
                    assert len({m.worker_id for m in got}) == len(got)
                    assert all(0 <= m.worker_id < WORKERS and 1 <= m.depth <= DEPTH for m in got)
                    tiered = index.find_matches_tiered(query[:8])
                    assert all(t.depth <= 8 for t in tiered)
            except BaseException as e:
                errors.append(e)

        readers = [threading.Thread(target=reader) for _ in range(8)]
        writers = [threading.Thread(target=writer, args=(first,)) for first in (0, 1)]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join()
        done.set()
        for t in readers:
            t.join()
        assert not errors, errors
        index.flush()
        got = [tuple(m) for m in index.find_matches(query)]
        expected = sorted(((w, 0, min(1 + w, DEPTH)) for w in range(WORKERS)), key=lambda m: (-m[2], m[0]))
        assert got == expected
        assert index.stats().workers == WORKERS


def test_close_while_other_threads_use_the_indexer() -> None:
    index = kvidx.Indexer(event_threads=2)
    outcomes: List[str] = []

    def user() -> None:
        for i in range(2000):
            try:
                index.apply_event(kvidx.Stored(i % 5, i, [(1, 1)]))
                index.find_matches([1])
            except kvidx.ShutDown:
                outcomes.append("closed")
                return
        outcomes.append("finished")

    users = [threading.Thread(target=user) for _ in range(4)]
    for t in users:
        t.start()
    index.close()
    for t in users:
        t.join()
    assert len(outcomes) == 4 and set(outcomes) <= {"closed", "finished"}
    assert index.closed
    with pytest.raises(kvidx.ShutDown):
        index.find_matches([1])
