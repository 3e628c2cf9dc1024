"""find_matches reads its query from lists, tuples, arrays and other sequences alike, and
answers exactly whatever the input type."""

import array
import random
from typing import Any, List, Sequence

import pytest

import kvidx

HASHES = [random.Random(5).getrandbits(64) for _ in range(12)]


def index_with_depths(depths: Sequence[int], first_worker: int = 0) -> kvidx.Indexer:
    """An indexer where worker `first_worker + i` holds the first `depths[i]` HASHES."""
    index = kvidx.Indexer(event_threads=0)
    names = kvidx.seq_hashes(HASHES)
    for i, depth in enumerate(depths):
        blocks = list(zip(HASHES[:depth], names[:depth]))
        index.apply_event(kvidx.Stored(first_worker + i, 0, blocks))
    return index


class Hash:
    """An object that is not an int but converts to one through `__index__`."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


class HashList(List[int]):
    pass


def test_every_kind_of_sequence_gives_the_same_answer() -> None:
    with index_with_depths([3, 12, 7]) as index:
        expected = [(1, 0, 12), (2, 0, 7), (0, 0, 3)]
        queries: List[Sequence[int]] = [
            HASHES,
            tuple(HASHES),
            array.array("Q", HASHES),
            HashList(HASHES),
            [True if h == 1 else h for h in HASHES],
        ]
        for query in queries:
            assert [tuple(m) for m in index.find_matches(query)] == expected, type(query)
            assert [m.to_match() for m in index.find_matches_tiered(query)] == index.find_matches(query)
        assert [tuple(m) for m in index.find_matches(HASHES[:5])] == [(1, 0, 5), (2, 0, 5), (0, 0, 3)]
        assert [tuple(m) for m in index.find_matches(array.array("Q", HASHES[:2]))] == [
            (0, 0, 2), (1, 0, 2), (2, 0, 2)]
        assert index.find_matches(array.array("Q")) == []
        assert index.find_matches(()) == []


def test_ints_of_every_size_read_exactly_from_lists_and_tuples() -> None:
    # Around every digit boundary of CPython's ints (30-bit digits) and of the signed and
    # unsigned 64-bit ranges, in every position of a query.
    edges = [0, 1, 2, (1 << 30) - 1, 1 << 30, (1 << 31) + 5, (1 << 32) - 1, 1 << 32, (1 << 60) + 3,
             (1 << 63) - 1, 1 << 63, (1 << 63) + 1, (1 << 64) - 2, (1 << 64) - 1]
    index = kvidx.Indexer(event_threads=0)
    with index:
        names = kvidx.seq_hashes(edges)
        index.apply_event(kvidx.Stored(4, 0, list(zip(edges, names))))
        for query in (edges, tuple(edges), array.array("Q", edges), HashList(edges)):
            assert [tuple(m) for m in index.find_matches(query)] == [(4, 0, len(edges))], type(query)
        # One hash off by one anywhere cuts the match there.
        for i, hash_ in enumerate(edges):
            off = list(edges)
            off[i] = hash_ + 1 if hash_ < (1 << 64) - 1 else hash_ - 1
            want = [(4, 0, i)] if i else []
            assert [tuple(m) for m in index.find_matches(off)] == want
            assert [tuple(m) for m in index.find_matches(tuple(off))] == want


def test_long_queries_answer_as_short_ones() -> None:
    hashes = [random.Random(9).getrandbits(64) for _ in range(300)]
    index = kvidx.Indexer(event_threads=0)
    with index:
        names = kvidx.seq_hashes(hashes)
        index.apply_event(kvidx.Stored(1, 0, list(zip(hashes, names))))
        index.apply_event(kvidx.Stored(2, 0, list(zip(hashes[:260], names[:260]))))
        for length in (255, 256, 257, 259, 260, 261, 300):
            want = [(1, 0, length), (2, 0, min(length, 260))]
            assert [tuple(m) for m in index.find_matches(hashes[:length])] == want
            tiered = index.find_matches_tiered(array.array("Q", hashes[:length]))
            assert [tuple(m.to_match()) for m in tiered] == want


def test_other_arrays_and_index_objects_convert_item_by_item() -> None:
    with index_with_depths([2]) as index:
        small = [1, 2, 3]
        with index_with_depths([]) as empty:
            assert empty.find_matches(array.array("L", small)) == []
            assert empty.find_matches(array.array("q", small)) == []
            assert empty.find_matches(array.array("B", small)) == []
            with pytest.raises(OverflowError):
                empty.find_matches(array.array("q", [1, -1]))
        # Objects with __index__ are accepted too (outside the stubs' Sequence[int]).
        by_index: Any = [Hash(h) for h in HASHES]
        assert [tuple(m) for m in index.find_matches(by_index)] == [(0, 0, 2)]
        by_index = (Hash(HASHES[0]), HASHES[1])
        assert [tuple(m) for m in index.find_matches(by_index)] == [(0, 0, 2)]


def test_bad_items_of_lists_and_tuples_raise_like_any_sequence() -> None:
    with index_with_depths([2]) as index:
        for bad in ([1, "2"], (1, None), [1.5], (1, b"x"), ["1"] * 300, [object()]):
            with pytest.raises(TypeError):
                index.find_matches(bad)  # type: ignore[arg-type]
        out_of_range: List[Any] = [[1, -1], (1 << 64,), [Hash(-3)], [-(1 << 64)], (1 << 200, 1),
                                   [1 << 64] * 300]
        for query in out_of_range:
            with pytest.raises(OverflowError):
                index.find_matches(query)
        # A failed call leaves nothing behind for the next one.
        assert [tuple(m) for m in index.find_matches(HASHES[:1])] == [(0, 0, 1)]


def test_a_query_read_during_another_gets_its_own_buffer() -> None:
    with index_with_depths([4, 2]) as index:
        inner: List[List[kvidx.Match]] = []

        class Reentrant:
            def __index__(self) -> int:
                inner.append(index.find_matches(HASHES[:3]))
                return HASHES[1]

        got = index.find_matches([HASHES[0], Reentrant(), HASHES[2], HASHES[3]])  # type: ignore[list-item]
        assert [tuple(m) for m in got] == [(0, 0, 4), (1, 0, 2)]
        assert [[tuple(m) for m in answer] for answer in inner] == [[(0, 0, 3), (1, 0, 2)]]


def test_many_distinct_answers_stay_exact() -> None:
    # Many (worker, depth) pairs: every answer is exactly the workers and depths held.
    depths = [1 + i % 12 for i in range(300)]
    with index_with_depths(depths, first_worker=1000) as index:
        for length in range(1, 13):
            for _ in range(2):
                got = [tuple(m) for m in index.find_matches(HASHES[:length])]
                want = sorted(
                    ((1000 + i, 0, min(d, length)) for i, d in enumerate(depths)),
                    key=lambda m: (-m[2], m[0]),
                )
                assert got == want
