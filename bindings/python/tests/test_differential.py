"""The binding against a pure-Python model of the contract and the core's reference backend,
on random event streams."""

import random
from typing import Dict, List, Literal, Optional, Sequence, Tuple

import pytest

import kvidx
from model import Model

LOCALS = range(1, 7)  # few local hashes: workers share prefixes and holes appear


def name_of(worker: Tuple[int, int], path: Tuple[int, ...]) -> int:
    """A block name determined by its worker and identity, as engines name blocks by content."""
    return hash((worker, path)) & ((1 << 63) - 1)


def random_stream(rng: random.Random, length: int) -> List[kvidx.Event]:
    events: List[kvidx.Event] = []
    paths: Dict[Tuple[int, int], List[Tuple[int, ...]]] = {}
    event_ids: Dict[Tuple[int, int], int] = {}
    for _ in range(length):
        worker = (rng.randrange(4), rng.randrange(2))
        held = paths.setdefault(worker, [])
        event_id = event_ids[worker] = event_ids.get(worker, 0) + 1
        kind = rng.random()
        if kind < 0.6:
            base: Tuple[int, ...] = rng.choice(held) if held and rng.random() < 0.7 else ()
            if rng.random() < 0.05:
                base = (99,)  # a parent the worker never held: rejected whole
            parent = name_of(worker, base) if base else None
            blocks = []
            path = base
            for _ in range(rng.randrange(0, 6)):
                path = path + (rng.choice(LOCALS),)
                blocks.append((path[-1], name_of(worker, path)))
                held.append(path)
            events.append(kvidx.Stored(worker[0], event_id, blocks, parent, dp_rank=worker[1]))
        elif kind < 0.9:
            names = [name_of(worker, rng.choice(held)) for _ in range(rng.randrange(1, 4))] if held else []
            names.append(rng.getrandbits(63))  # unknown: skipped and counted
            events.append(kvidx.Removed(worker[0], event_id, names, dp_rank=worker[1]))
        else:
            events.append(kvidx.Cleared(worker[0], event_id, dp_rank=worker[1]))
    return events


def apply_to_model(model: Model, events: Sequence[kvidx.Event]) -> None:
    for event in events:
        worker = (event.worker_id, event.dp_rank)
        if isinstance(event, kvidx.Stored):
            model.stored(worker, event.parent, event.blocks)
        elif isinstance(event, kvidx.Removed):
            model.removed(worker, event.seq_hashes)
        else:
            model.cleared(worker)


def apply_all(index: kvidx.Indexer, events: Sequence[kvidx.Event]) -> None:
    """Applies in chunks; synchronous mode raises ParentNotFound for a rejected Stored (the
    other events of the chunk are still applied)."""
    for start in range(0, len(events), 7):
        try:
            index.apply_events(events[start : start + 7])
        except kvidx.ParentNotFound:
            assert index.event_threads == 0
    index.flush()


def queries(rng: random.Random, count: int) -> List[List[int]]:
    return [[rng.choice(LOCALS) for _ in range(rng.randrange(1, 9))] for _ in range(count)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("backend,threads", [("positional", 0), ("positional", 2), ("radix", 0), ("radix", 3), ("runs", 0), ("runs", 2)])
def test_random_streams_answer_like_the_model_and_the_reference(
    seed: int, backend: Literal["positional", "radix", "runs"], threads: int
) -> None:
    rng = random.Random(seed)
    events = random_stream(rng, 300)
    model = Model()
    with kvidx.Indexer(backend, event_threads=threads) as index, kvidx.Indexer("reference", event_threads=0) as ref:
        # Three rounds: events, then a removed worker, then more events.
        for round_events in (events[:150], None, events[150:]):
            if round_events is None:
                for i in (index, ref):
                    i.remove_worker(1)
                    i.remove_worker(2, dp_rank=0)
                    i.flush()
                model.remove_worker(1)
                model.workers.pop((2, 0), None)
            else:
                apply_all(index, round_events)
                apply_all(ref, round_events)
                apply_to_model(model, round_events)
            for query in queries(rng, 60):
                got = index.find_matches(query)
                as_tuples = [tuple(m) for m in got]
                assert as_tuples == model.find_matches(query), query
                assert got == ref.find_matches(query)
                tiered = index.find_matches_tiered(query)
                assert [t.to_match() for t in tiered] == got
                assert all(t.tier_depths == (t.depth,) * 4 for t in tiered)
            stats, ref_stats = index.stats(), ref.stats()
            assert stats == ref_stats
            assert stats.worker_blocks == model.worker_blocks()


def test_tiers_answer_like_the_reference() -> None:
    rng = random.Random(7)
    tiers = kvidx.TIERS
    removal_tiers: List[Optional[Literal["device", "host", "disk", "external"]]] = [*tiers, None]
    with kvidx.Indexer(event_threads=0) as index, kvidx.Indexer("reference", event_threads=0) as ref:
        for step in range(400):
            worker = rng.randrange(3)
            path = tuple(rng.choice(LOCALS) for _ in range(rng.randrange(1, 5)))
            if rng.random() < 0.7:
                blocks = [(path[i], name_of((worker, 0), path[: i + 1])) for i in range(len(path))]
                event: kvidx.Event = kvidx.Stored(worker, step, blocks, tier=rng.choice(tiers))
            else:
                event = kvidx.Removed(worker, step, [name_of((worker, 0), path)], tier=rng.choice(removal_tiers))
            index.apply_event(event)
            ref.apply_event(event)
        for query in queries(rng, 200):
            got = index.find_matches_tiered(query)
            assert got == ref.find_matches_tiered(query)
            for t in got:
                depths = t.tier_depths
                assert list(depths) == sorted(depths) and depths[3] == t.depth
                assert sum(t.blocks_on(tier) for tier in tiers) == t.depth


def test_answers_are_sorted_by_depth_then_worker_then_rank() -> None:
    with kvidx.Indexer(event_threads=0) as index:
        for worker_id, dp_rank, depth in [(5, 1, 2), (5, 0, 2), (3, 0, 1), (9, 0, 3), (1, 2, 2)]:
            blocks = [(local, 100 + local) for local in range(1, depth + 1)]
            index.apply_event(kvidx.Stored(worker_id, 0, blocks, dp_rank=dp_rank))
        got = [tuple(m) for m in index.find_matches([1, 2, 3])]
        assert got == [(9, 0, 3), (1, 2, 2), (5, 0, 2), (5, 1, 2), (3, 0, 1)]


def test_hash_tokens_follows_the_hashing_contract() -> None:
    # The golden value of the core's hashing tests: one block of tokens 1..4.
    assert kvidx.hash_tokens([1, 2, 3, 4, 5], 4) == [14643705804678351452]
    assert kvidx.hash_tokens([1, 2, 3], 4) == []
    assert kvidx.hash_tokens([1, 2, 3, 4], 4, lora_name="adapter") != kvidx.hash_tokens([1, 2, 3, 4], 4)
    locals_ = kvidx.hash_tokens(list(range(64)), 16)
    assert len(kvidx.seq_hashes(locals_)) == 4
