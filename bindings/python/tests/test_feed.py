"""EngineFeed: engine payloads, sequence frames, gaps and restarts, offsets and watermarks,
feed states, and the project's engine fixtures."""

import pathlib
import struct
from typing import Literal

import pytest

import kvidx
from payloads import batch, removed, stored

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "engine"
TOKENS = list(range(100, 116))  # four blocks of 4 tokens


def frame(seq: int) -> bytes:
    return struct.pack(">Q", seq)


def test_a_vllm_payload_is_routed_by_its_tokens() -> None:
    locals_ = kvidx.hash_tokens(TOKENS, 4)
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("vllm")
        report = feed.apply_message(index, 7, batch(stored([901, 902, 903], None, TOKENS[:12], 4)), seq=frame(0))
        assert (report.events_decoded, report.events_submitted, report.seq_status) == (1, 1, "first")
        assert [tuple(m) for m in index.find_matches(locals_)] == [(7, 0, 3)]
        feed.apply_message(index, 7, batch(removed([902])), seq=1)
        assert [tuple(m) for m in index.find_matches(locals_)] == [(7, 0, 1)]
        assert feed.next_expected(7) == 2 and feed.publishers() == 1


def test_a_gap_and_a_restart_clear_the_worker() -> None:
    locals_ = kvidx.hash_tokens(TOKENS, 4)
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed()
        feed.apply_message(index, 1, batch(stored([1, 2], None, TOKENS[:8], 4)), seq=0)
        report = feed.apply_message(index, 1, batch(), seq=5)
        assert (report.seq_status, report.missed, report.cleared_worker) == ("gap", 4, True)
        assert index.find_matches(locals_) == []
        feed.apply_message(index, 1, batch(stored([1], None, TOKENS[:4], 4)), seq=6)
        report = feed.apply_message(index, 1, batch(), seq=0)
        assert (report.seq_status, report.cleared_worker) == ("restart", True)
        stats = feed.stats()
        assert (stats.gaps, stats.batches_missed, stats.restarts, stats.workers_cleared) == (1, 4, 1, 2)


def test_offset_batches_set_watermarks_and_replays_are_skipped() -> None:
    locals_ = kvidx.hash_tokens(TOKENS, 4)
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed()
        payload = batch(stored([1, 2], None, TOKENS[:8], 4))
        assert not feed.apply_message(index, 3, payload, seq=0, offset=10).batch_skipped
        assert index.watermark(3) == 10
        assert feed.apply_message(index, 3, batch(removed([2])), seq=1, offset=10).batch_skipped
        assert [tuple(m) for m in index.find_matches(locals_)] == [(3, 0, 2)]
        assert index.apply_batch_at(3, 11, [kvidx.Removed(3, 9, [2])]) == ("applied", 0)
        assert index.apply_batch_at(3, 11, []) == ("skipped", 0)
        assert index.replica_stats().batches_skipped == 2
        feed.remove_worker(index, 3)
        assert index.watermark(3) is None and feed.publishers() == 0


def test_feed_state_round_trips() -> None:
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed()
        feed.apply_message(index, 1, batch(), seq=41, dp_rank=2)
        state = feed.save_state()
        other = kvidx.EngineFeed()
        other.restore_state(state)
        assert other.next_expected(1, dp_rank=2) == 42
        assert other.forget(1) == 1 and other.publishers() == 0


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.msgpack")), ids=lambda p: p.stem)
def test_every_engine_fixture_decodes_and_applies(path: pathlib.Path) -> None:
    fmt: Literal["vllm", "sglang", "trtllm"] = "vllm"
    if path.stem.startswith("sglang"):
        fmt = "sglang"
    elif path.stem.startswith("trtllm"):
        fmt = "trtllm"
    with kvidx.Indexer(event_threads=2) as index:
        feed = kvidx.EngineFeed(fmt, all_media=True, group=None, hash_extras=True)
        report = feed.apply_message(index, 1, path.read_bytes(), seq=b"\x00" * 8)
        assert report.events_decoded > 0
        index.flush()
        assert index.stats().events_applied + index.stats().events_rejected == report.events_submitted


def test_fixtures_are_found() -> None:
    assert len(list(FIXTURES.glob("*.msgpack"))) >= 10
