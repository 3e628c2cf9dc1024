"""Predicted depth (docs/contract.md section 6) on a manual clock: expiry, settling by events
and by a worker's removal, confirmed depths unchanged, the bounds and the settings."""

from typing import List, Tuple

import pytest

import kvidx

QUERY = kvidx.hash_tokens(list(range(1, 17)), 4)  # four blocks
SEQ = kvidx.seq_hashes(QUERY)


def chain(n: int) -> List[Tuple[int, int]]:
    """The (local hash, sequence hash) pairs of the query's first n blocks."""
    return [(QUERY[i], SEQ[i]) for i in range(n)]


def predicted(index: kvidx.Indexer) -> List[Tuple[int, ...]]:
    """The predicted answer for the whole query, as (worker_id, dp_rank, depth, predicted_depth)."""
    return [tuple(m) for m in index.find_matches_predicted(QUERY)]


@pytest.fixture(params=[0, 2], ids=["sync", "pooled"])
def index(request: pytest.FixtureRequest) -> kvidx.Indexer:
    return kvidx.Indexer(event_threads=request.param, manual_clock=True)


def test_a_prediction_counts_until_it_expires_on_the_manual_clock(index: kvidx.Indexer) -> None:
    with index:
        index.predict(1, 0, QUERY[:3], 10.0)
        assert predicted(index) == [(1, 0, 0, 3)]
        match = index.find_matches_predicted(QUERY)[0]
        assert (match.worker_id, match.dp_rank, match.depth, match.predicted_depth) == (1, 0, 0, 3)
        assert match == kvidx.PredictedMatch(1, 0, 0, 3)
        index.advance_time(9.5)
        assert index.now() == 9.5 and predicted(index) == [(1, 0, 0, 3)]
        index.set_time(10.0)  # a lookup at the expiry instant no longer sees it
        assert predicted(index) == []
        assert index.prediction_stats().blocks == 3  # held until dropped
        with pytest.raises(kvidx.InvalidArgument):
            index.set_time(5.0)  # never back


def test_predictions_leave_confirmed_depths_unchanged(index: kvidx.Indexer) -> None:
    with index:
        index.apply_event(kvidx.Stored(2, 1, chain(2)))
        index.predict(2, 0, QUERY, 60)
        index.predict(3, 1, QUERY[:1], 60)
        index.flush()
        assert [tuple(m) for m in index.find_matches(QUERY)] == [(2, 0, 2)]
        assert predicted(index) == [(2, 0, 2, 4), (3, 1, 0, 1)]
        assert index.find_matches_predicted(QUERY[:0]) == []


def test_a_stored_confirms_a_prediction(index: kvidx.Indexer) -> None:
    with index:
        index.predict(4, 0, QUERY, 60)
        index.apply_event(kvidx.Stored(4, 1, chain(2)))
        index.flush()
        stats = index.prediction_stats()
        assert (stats.confirmed, stats.blocks, stats.workers) == (2, 2, 1)
        assert predicted(index) == [(4, 0, 2, 4)]
        index.advance_time(60)  # the rest expires; the confirmed blocks stay held
        assert predicted(index) == [(4, 0, 2, 2)]


def test_removed_cleared_and_remove_worker_drop_predictions(index: kvidx.Indexer) -> None:
    with index:
        index.apply_event(kvidx.Stored(5, 1, chain(3)))
        index.flush()
        index.predict(5, 0, QUERY, 60)  # held blocks may be predicted too
        index.apply_event(kvidx.Removed(5, 2, [SEQ[2]]))
        index.flush()
        assert predicted(index) == [(5, 0, 2, 2)]  # the removed block's prediction is gone
        assert index.prediction_stats().dropped_by_events == 1
        index.apply_event(kvidx.Cleared(5, 3))
        index.flush()
        assert predicted(index) == [] and index.prediction_stats().blocks == 0
        assert index.prediction_stats().dropped_by_events == 4
        index.predict(6, 0, QUERY, 60)
        index.predict(6, 1, QUERY, 60)
        index.predict(7, 0, QUERY, 60)
        index.remove_worker(6, dp_rank=1)
        index.flush()  # with event threads, a removal applies in the worker's order
        assert predicted(index) == [(6, 0, 0, 4), (7, 0, 0, 4)]
        index.remove_worker(6)
        index.flush()
        assert predicted(index) == [(7, 0, 0, 4)]
        assert index.prediction_stats().dropped_by_events == 4 + 8


def test_a_worker_holds_at_most_its_capacity() -> None:
    with kvidx.Indexer(event_threads=0, manual_clock=True, prediction_worker_capacity=2) as index:
        index.predict(1, 0, QUERY, 60)
        stats = index.prediction_stats()
        assert (stats.blocks, stats.dropped_for_capacity) == (2, 2)
        assert predicted(index) == [(1, 0, 0, 2)]  # the chain's deepest blocks go first


def test_expired_predictions_are_dropped_by_later_predictions() -> None:
    with kvidx.Indexer(event_threads=0, manual_clock=True) as index:
        index.predict(1, 0, QUERY, 1)
        index.advance_time(2)
        index.predict(2, 0, QUERY, 1)
        stats = index.prediction_stats()
        assert (stats.expired, stats.blocks) == (4, 4)
        assert predicted(index) == [(2, 0, 0, 4)]


def test_prediction_settings_and_refusals() -> None:
    with kvidx.Indexer(prediction_bytes=1 << 20, prediction_worker_capacity=8, manual_clock=True) as index:
        assert (index.prediction_bytes, index.prediction_worker_capacity, index.clock) == (1 << 20, 8, "manual")
        with pytest.raises(kvidx.InvalidArgument):
            index.predict(1, 0, QUERY, -1.0)
        with pytest.raises(kvidx.InvalidArgument):
            index.advance_time(float("nan"))
        index.predict(1, 0, QUERY, 0)  # a zero TTL predicts nothing
        assert index.prediction_stats().blocks == 0
    with kvidx.Indexer() as index:
        assert (index.clock, index.prediction_bytes) == ("monotonic", 64 << 20)
        with pytest.raises(kvidx.InvalidArgument):
            index.set_time(1.0)
        with pytest.raises(kvidx.InvalidArgument):
            index.advance_time(1.0)
    closed = kvidx.Indexer(manual_clock=True)
    closed.close()
    with pytest.raises(kvidx.ShutDown):
        closed.predict(1, 0, QUERY, 1)
