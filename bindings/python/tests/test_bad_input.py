# Calls with arguments of the wrong type on purpose: mypy checks everything else here.
# mypy: disable-error-code="arg-type, list-item"
"""Bad input gives exceptions, never a crash, and changes nothing."""

import random
from typing import Any, Callable

import pytest

import kvidx
from payloads import batch, pack, stored

BAD: Any = None  # values of the wrong type, typed Any so the calls below type-check


def fresh() -> kvidx.Indexer:
    return kvidx.Indexer(event_threads=0)


@pytest.mark.parametrize(
    "call",
    [
        lambda: kvidx.Stored("7", 0, []),
        lambda: kvidx.Stored(7, 0, "abc"),
        lambda: kvidx.Stored(7, 0, [(1, "2")]),
        lambda: kvidx.Stored(7, 0, BAD),
        lambda: kvidx.Removed(7, 0, [1.5]),
        lambda: kvidx.Cleared(BAD, 0),
        lambda: fresh().apply_event(BAD),
        lambda: fresh().apply_event(7),
        lambda: fresh().apply_events([kvidx.Cleared(1, 0), "event"]),
        lambda: fresh().apply_events(7),
        lambda: fresh().find_matches("abc"),
        lambda: fresh().find_matches([1, None]),
        lambda: fresh().find_matches(BAD),
        lambda: kvidx.hash_tokens(BAD, 4),
        lambda: kvidx.EngineFeed().apply_message(BAD, 1, b""),
        lambda: kvidx.EngineFeed().apply_message(fresh(), 1, BAD),
        lambda: kvidx.EngineFeed().apply_message(fresh(), 1, batch(), seq=1.5),
    ],
)
def test_wrong_types_raise_type_error(call: Callable[[], object]) -> None:
    with pytest.raises(TypeError):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: kvidx.Stored(-1, 0, []),
        lambda: kvidx.Stored(1 << 64, 0, []),
        lambda: kvidx.Stored(1, 0, [(1 << 64, 1)]),
        lambda: kvidx.Stored(1, 0, [], dp_rank=1 << 32),
        lambda: kvidx.Removed(1, 0, [-5]),
        lambda: fresh().find_matches([1, 1 << 70]),
        lambda: fresh().watermark(1, dp_rank=-1),
        lambda: kvidx.hash_tokens([1 << 32], 1),
        lambda: kvidx.hash_tokens([1], 1 << 70),
        lambda: kvidx.Indexer(event_threads=-1),
    ],
)
def test_out_of_range_integers_raise_overflow_error(call: Callable[[], object]) -> None:
    with pytest.raises(OverflowError):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: kvidx.Indexer(BAD or "btree"),
        lambda: kvidx.Indexer(event_threads=1 << 40),
        lambda: kvidx.Indexer(queue_capacity=1 << 40),
        lambda: kvidx.Stored(1, 0, [], tier=BAD or "gpu"),
        lambda: kvidx.Removed(1, 0, [], tier=BAD or "tape"),
        lambda: kvidx.hash_tokens([1, 2], 0),
        lambda: kvidx.EngineFeed(BAD or "tgi"),
        lambda: kvidx.EngineFeed().apply_message(fresh(), 1, batch(), seq=b"\x00" * 7),
        lambda: kvidx.EngineFeed().apply_message(fresh(), 1, batch(), offset=0),
        lambda: fresh().apply_batch_at(1, 0, []),
        lambda: fresh().apply_batch_at(1, 1, [kvidx.Cleared(2, 0)]),
        lambda: kvidx.Indexer("reference").snapshot(),
    ],
)
def test_out_of_range_settings_raise_invalid_argument(call: Callable[[], object]) -> None:
    with pytest.raises(kvidx.InvalidArgument):
        call()


def test_a_block_that_is_not_a_pair_raises_value_error() -> None:
    with pytest.raises(ValueError):
        kvidx.Stored(7, 0, [(1,)])
    with pytest.raises(ValueError):
        kvidx.Stored(7, 0, [(1, 2, 3)])


def test_every_error_is_a_kvidx_error() -> None:
    for cls in (kvidx.InvalidArgument, kvidx.ParentNotFound, kvidx.ShutDown, kvidx.MalformedSnapshot,
                kvidx.SnapshotIoError, kvidx.MalformedPayload, kvidx.MalformedFeedState):
        assert issubclass(cls, kvidx.KvidxError)
    assert issubclass(kvidx.KvidxError, Exception)


def test_huge_queries_and_events_are_handled() -> None:
    with fresh() as index:
        index.apply_event(kvidx.Stored(1, 0, [(i, i) for i in range(1, 100_001)]))
        assert [tuple(m) for m in index.find_matches(list(range(1, 200_001)))] == [(1, 0, 100_000)]
        assert index.find_matches([]) == []
        index.apply_event(kvidx.Removed(1, 1, list(range(500_000, 700_000))))
        assert index.stats().unknown_removals == 200_000


def test_malformed_payloads_raise_and_change_nothing() -> None:
    rng = random.Random(3)
    good = batch(stored([11, 12], None, list(range(8)), 4))
    bad = [b"", b"\xc1", good[:-1], good + b"\x00", pack([1.5]), pack([1.5, [["BlockStored", "x"]]]),
           pack([1.5, [7]]), b"\x91" * 10_000, b"\x00" * (kvidx.MAX_PAYLOAD_BYTES + 1)]
    bad += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 64))) for _ in range(300)]
    with fresh() as index:
        feed = kvidx.EngineFeed()
        for payload in bad[:9]:
            with pytest.raises(kvidx.MalformedPayload):
                feed.apply_message(index, 1, payload, seq=5)
        # Nothing of a malformed batch is recorded, not even its sequence.
        assert (feed.next_expected(1), feed.publishers(), feed.stats().batches_malformed) == (0, 0, 9)
        for payload in bad[9:]:  # random bytes: refused, or decoded as a valid batch
            try:
                feed.apply_message(index, 1, payload)
            except kvidx.MalformedPayload:
                pass
        assert feed.apply_message(index, 2, good).events_submitted == 1
        assert [tuple(m) for m in index.find_matches(kvidx.hash_tokens(list(range(8)), 4))] == [(2, 0, 2)]


def test_malformed_snapshots_and_feed_states_raise() -> None:
    rng = random.Random(5)
    with fresh() as source:
        source.apply_event(kvidx.Stored(1, 0, [(1, 1), (2, 2)]))
        snapshot = source.snapshot()
    for data in [b"", b"KVIDXSNP", snapshot[:-3], snapshot[:20], b"x" * 1000,
                 bytes(rng.getrandbits(8) for _ in range(200))]:
        with fresh() as index:
            with pytest.raises(kvidx.MalformedSnapshot):
                index.restore_snapshot(data)
            assert index.stats().workers == 0
    feed = kvidx.EngineFeed()
    for state in [b"", b"junk", bytes(200)]:
        with pytest.raises(kvidx.MalformedFeedState):
            feed.restore_state(state)
    with pytest.raises(kvidx.MalformedFeedState):
        kvidx.EngineFeed("sglang").restore_state(feed.save_state())


def test_a_closed_indexer_raises_shut_down() -> None:
    index = fresh()
    index.close()
    index.close()
    for call in (lambda: index.find_matches([1]), index.flush, index.stats, index.snapshot,
                 lambda: index.apply_event(kvidx.Cleared(1, 0))):
        with pytest.raises(kvidx.ShutDown):
            call()


def test_a_missing_parent_raises_parent_not_found_in_synchronous_mode() -> None:
    with fresh() as index:
        with pytest.raises(kvidx.ParentNotFound):
            index.apply_event(kvidx.Stored(1, 0, [(1, 1)], parent=42))
        assert index.stats().events_rejected == 1
