"""Payloads made by SGLang's own kv_events classes (the sglang 0.5.23 wheel,
sglang/srt/disaggregation/kv_events.py, its imports of the serving stack stood in for), encoded
as its ZmqEventPublisher encodes them, applied through kvidx.EngineFeed("sglang")."""

import importlib.util
import os
import sys
import types
from typing import Any, List

import msgspec

import kvidx

BLOCK = 16


def stand_in(name: str, **attributes: Any) -> None:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__path__ = []  # type: ignore[attr-defined]
    sys.modules.setdefault(name, module)


def load_kv_events() -> Any:
    """sglang.srt.disaggregation.kv_events from the installed wheel, alone."""
    spec = importlib.util.find_spec("sglang")
    assert spec is not None and spec.submodule_search_locations, "the sglang wheel is not installed"
    path = os.path.join(list(spec.submodule_search_locations)[0], "srt", "disaggregation", "kv_events.py")
    stand_in("pydantic", BaseModel=object)
    stand_in("sglang.srt.runtime_context", get_parallel=lambda: None)
    stand_in("sglang.srt.utils.network", NetworkAddress=object)
    module_spec = importlib.util.spec_from_file_location("sglang_kv_events", path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


KV = load_kv_events()
ENCODER = msgspec.msgpack.Encoder()  # what ZmqEventPublisher packs batches with


def payload(*events: Any, dp_rank: Any = None) -> bytes:
    return ENCODER.encode(KV.KVEventBatch(ts=1.0, events=list(events), attn_dp_rank=dp_rank))


def stored(hashes: List[int], parent: Any, tokens: List[int], **more: Any) -> Any:
    return KV.BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens,
                          block_size=BLOCK, lora_id=None, medium=more.pop("medium", "GPU"), **more)


def test_sglang_batches_route_by_their_tokens() -> None:
    tokens = list(range(1, 3 * BLOCK + 1))
    query = kvidx.hash_tokens(tokens, BLOCK)
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("sglang")
        # SGLang publishes hashes as signed int64: negative ones included.
        report = feed.apply_message(index, 4, payload(stored([-5, 6], None, tokens[: 2 * BLOCK]), dp_rank=1), seq=0)
        assert (report.dp_rank, report.events_submitted, report.seq_status) == (1, 1, "first")
        feed.apply_message(index, 4, payload(stored([7], 6, tokens[2 * BLOCK:]), dp_rank=1), seq=1)
        assert [tuple(m) for m in index.find_matches(query)] == [(4, 1, 3)]
        feed.apply_message(index, 4, payload(KV.BlockRemoved(block_hashes=[-5], medium="GPU"), dp_rank=1), seq=2)
        assert index.find_matches(query) == []
        feed.apply_message(index, 4, payload(KV.AllBlocksCleared(), dp_rank=1), seq=3)
        assert index.stats().worker_blocks == 0 and feed.stats().batches == 4


def test_sglang_offloaded_blocks_land_on_their_tier() -> None:
    tokens = list(range(1, BLOCK + 1))
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("sglang", all_media=True)
        feed.apply_message(index, 2, payload(stored([1], None, tokens, medium=KV.StorageMedium.CPU.value)))
        (match,) = index.find_matches_tiered(kvidx.hash_tokens(tokens, BLOCK))
        assert match.tier_depths == (0, 1, 1, 1) and match.blocks_on("host") == 1


def test_a_salted_sglang_store_is_reached_by_its_salt_only() -> None:
    tokens = list(range(1, 2 * BLOCK + 1))
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("sglang")
        feed.apply_message(index, 6, payload(stored([-3, 4], None, tokens, cache_salt="tenant-a")))
        reached = kvidx.hash_request(tokens, BLOCK, cache_salt="tenant-a")
        assert [tuple(m) for m in index.find_matches(reached)] == [(6, 0, 2)]
        assert index.find_matches(kvidx.hash_request(tokens, BLOCK, cache_salt="tenant-b")) == []
        assert index.find_matches(kvidx.hash_tokens(tokens, BLOCK)) == []
    with kvidx.Indexer(event_threads=0) as index:
        report = kvidx.EngineFeed("sglang", skip_extras=True).apply_message(
            index, 6, payload(stored([-3, 4], None, tokens, cache_salt="tenant-a")))
        assert (report.events_skipped, index.stats().worker_blocks) == (1, 0)
