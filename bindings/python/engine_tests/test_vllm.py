"""Payloads made by vLLM's own kv_events classes (the vllm 0.33.0 wheel, loaded as
examples/zmq-subscriber/vllm_engine.py loads it), encoded as its ZmqEventPublisher encodes
them, applied through kvidx.EngineFeed. Runs in the venv of scripts/vllm-venv.sh."""

import pathlib
import struct
import sys
from typing import Any, List

import msgspec

import kvidx

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "examples" / "zmq-subscriber"))
from vllm_engine import load_kv_events  # noqa: E402

KV, _ = load_kv_events()
ENCODER = msgspec.msgpack.Encoder()  # what ZmqEventPublisher encodes batches with
BLOCK = 16


def payload(*events: Any) -> bytes:
    return ENCODER.encode(KV.KVEventBatch(ts=1.0, events=list(events)))


def stored(hashes: List[int], parent: Any, tokens: List[int], **more: Any) -> Any:
    fields = dict(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=BLOCK,
                  lora_id=None, medium="GPU", lora_name=None)
    fields.update(more)
    return KV.BlockStored(**fields)


def test_vllm_batches_route_by_their_tokens() -> None:
    tokens = list(range(1, 4 * BLOCK + 1))
    query = kvidx.hash_tokens(tokens, BLOCK)
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("vllm")
        report = feed.apply_message(index, 7, payload(stored([101, 102, 103], None, tokens[: 3 * BLOCK])),
                                    seq=struct.pack(">Q", 0))
        assert (report.events_decoded, report.events_submitted, report.seq_status) == (1, 1, "first")
        feed.apply_message(index, 7, payload(stored([104], 103, tokens[3 * BLOCK:])), seq=1)
        feed.apply_message(index, 8, payload(stored([201], None, tokens[:BLOCK])), seq=0)
        assert [tuple(m) for m in index.find_matches(query)] == [(7, 0, 4), (8, 0, 1)]
        feed.apply_message(index, 7, payload(KV.BlockRemoved(block_hashes=[102], medium="GPU")), seq=2)
        assert [tuple(m) for m in index.find_matches(query)] == [(7, 0, 1), (8, 0, 1)]
        feed.apply_message(index, 8, payload(KV.AllBlocksCleared()), seq=1)
        assert [tuple(m) for m in index.find_matches(query)] == [(7, 0, 1)]
        assert feed.stats().batches == 5 and feed.stats().batches_malformed == 0


def test_a_vllm_lora_store_hashes_with_the_adapters_seed() -> None:
    tokens = list(range(1, BLOCK + 1))
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("vllm")
        feed.apply_message(index, 3, payload(stored([9], None, tokens, lora_id=1, lora_name="adapter")))
        assert index.find_matches(kvidx.hash_tokens(tokens, BLOCK)) == []
        assert [tuple(m) for m in index.find_matches(kvidx.hash_tokens(tokens, BLOCK, lora_name="adapter"))] == [(3, 0, 1)]


def test_a_salted_vllm_store_is_reached_by_its_salt_only() -> None:
    # vLLM's extra_keys: one entry per block, the cache salt on the request's first block.
    tokens = list(range(1, 2 * BLOCK + 1))
    salted = payload(stored([21, 22], None, tokens, extra_keys=[("tenant-a",), None]))
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("vllm")
        assert feed.apply_message(index, 4, salted).events_submitted == 1
        reached = kvidx.hash_request(tokens, BLOCK, cache_salt="tenant-a")
        assert [tuple(m) for m in index.find_matches(reached)] == [(4, 0, 2)]
        assert index.find_matches(kvidx.hash_request(tokens, BLOCK, cache_salt="tenant-b")) == []
        assert index.find_matches(kvidx.hash_tokens(tokens, BLOCK)) == []
    with kvidx.Indexer(event_threads=0) as index:
        report = kvidx.EngineFeed("vllm", skip_extras=True).apply_message(index, 4, salted)
        assert (report.events_skipped, index.stats().worker_blocks) == (1, 0)
