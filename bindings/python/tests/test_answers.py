"""Answers are independent values: whatever the caller keeps of an answer (the list, one
Match, a Match in a set or dict) never changes when later queries are answered, while
answers dropped before the next query are rebuilt exactly."""

import random
from typing import Dict, List, Set, Tuple

import kvidx

HASHES = [random.Random(11).getrandbits(64) for _ in range(16)]


def index_with_depths(depths: List[int]) -> kvidx.Indexer:
    """Worker `i` holds the first `depths[i]` HASHES."""
    index = kvidx.Indexer(event_threads=0)
    names = kvidx.seq_hashes(HASHES)
    for worker, depth in enumerate(depths):
        index.apply_event(kvidx.Stored(worker, 0, list(zip(HASHES[:depth], names[:depth]))))
    return index


def tuples(answer: List[kvidx.Match]) -> List[Tuple[int, int, int]]:
    return [(m.worker_id, m.dp_rank, m.depth) for m in answer]


def test_kept_answers_and_matches_never_change() -> None:
    with index_with_depths([16, 9, 4, 1]) as index:
        kept = index.find_matches(HASHES)
        best = index.find_matches(HASHES[:12])[0]  # the list is dropped, one Match kept
        as_set: Set[kvidx.Match] = set(index.find_matches(HASHES[:3]))
        as_key: Dict[kvidx.Match, str] = {m: "x" for m in index.find_matches(HASHES[:2])}
        snapshot = (tuples(kept), (best.worker_id, best.dp_rank, best.depth))
        # Many later answers, of other sizes and values, some kept and some dropped.
        later = []
        for length in range(16, 0, -1):
            for _ in range(3):
                index.find_matches(HASHES[:length])
            later.append((length, index.find_matches(HASHES[:length])))
        assert (tuples(kept), (best.worker_id, best.dp_rank, best.depth)) == snapshot
        assert snapshot[0] == [(0, 0, 16), (1, 0, 9), (2, 0, 4), (3, 0, 1)]
        assert snapshot[1] == (0, 0, 12)
        assert sorted(tuple(m) for m in as_set) == [(0, 0, 3), (1, 0, 3), (2, 0, 3), (3, 0, 1)]
        assert all(m in as_set for m in index.find_matches(HASHES[:3]))
        assert sorted(tuple(m) for m in as_key) == [(0, 0, 2), (1, 0, 2), (2, 0, 2), (3, 0, 1)]
        assert all(as_key[m] == "x" for m in index.find_matches(HASHES[:2]))
        for length, answer in later:
            want = [(w, 0, min(d, length)) for w, d in enumerate([16, 9, 4, 1])]
            assert tuples(answer) == sorted(want, key=lambda m: (-m[2], m[0]))
        # No Match object appears in two answers still held.
        held = [kept, *(answer for _, answer in later)]
        assert len({id(m) for answer in held for m in answer}) == sum(len(a) for a in held)


def test_dropped_answers_are_rebuilt_exactly() -> None:
    rng = random.Random(3)
    depths = [rng.randrange(1, 17) for _ in range(40)]
    with index_with_depths(depths) as index:
        for _ in range(300):
            length = rng.randrange(0, 17)
            want = sorted(((w, 0, min(d, length)) for w, d in enumerate(depths) if length),
                          key=lambda m: (-m[2], m[0]))
            assert tuples(index.find_matches(HASHES[:length])) == want
            assert [tuple(m) for m in index.find_matches(tuple(HASHES[:length]))] == want
