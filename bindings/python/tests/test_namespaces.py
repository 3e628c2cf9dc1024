"""Namespaces (docs/contract.md section 3.1): hash_request's golden values, and engine stores
of salted, adapter and multimodal requests reached only by queries of the same namespace."""

import json
import pathlib
from typing import Any, Dict, List, Literal, Optional, Tuple

import pytest

import kvidx
from payloads import Value, batch

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "engine-namespaces"
MANIFEST: Dict[str, Any] = json.loads((FIXTURES / "namespaces.json").read_text())
TOKENS = list(range(1, 13))
IMAGE = [(b"image-1", 2, 6)]


@pytest.mark.parametrize(
    "lora_name, cache_salt, spans, expected",
    [
        (None, None, [], [14643705804678351452, 16777012769546811212, 483935686894639516]),
        (None, "tenant-a", [], [1461199381953589153, 16777012769546811212, 483935686894639516]),
        ("adapter-a", None, [], [11381080598872079209, 5698110331184095209, 10923852707342720619]),
        (None, None, IMAGE, [1978177322621556195, 10355098053434598600, 483935686894639516]),
        ("adapter-a", "tenant-a", IMAGE, [7859937575092783861, 15422904220237451310, 10923852707342720619]),
    ],
)
def test_hash_request_golden_values(
    lora_name: Optional[str], cache_salt: Optional[str], spans: List[Tuple[bytes, int, int]], expected: List[int]
) -> None:
    assert kvidx.hash_request(TOKENS, 4, lora_name=lora_name, cache_salt=cache_salt, mm_spans=spans) == expected


def test_hash_request_takes_text_or_bytes_and_defaults_to_hash_tokens() -> None:
    assert kvidx.hash_request(TOKENS, 4) == kvidx.hash_tokens(TOKENS, 4)
    assert kvidx.hash_request(TOKENS, 4, cache_salt="") == kvidx.hash_tokens(TOKENS, 4)
    as_text = kvidx.hash_request(TOKENS, 4, lora_name="adapter-a", cache_salt="tenant-a", mm_spans=[("image-1", 2, 6)])
    as_bytes = kvidx.hash_request(TOKENS, 4, lora_name=b"adapter-a", cache_salt=bytearray(b"tenant-a"),
                                  mm_spans=((b"image-1", 2, 6),))
    assert as_text == as_bytes
    assert kvidx.hash_request(TOKENS, 4, lora_name="adapter-a") == kvidx.hash_tokens(TOKENS, 4, lora_name="adapter-a")
    assert kvidx.hash_request(TOKENS[:11], 4, cache_salt="tenant-a") == kvidx.hash_request(TOKENS, 4, cache_salt="tenant-a")[:2]


def test_hash_request_refuses_bad_arguments() -> None:
    with pytest.raises(kvidx.InvalidArgument):
        kvidx.hash_request(TOKENS, 0)
    with pytest.raises(kvidx.InvalidArgument):
        kvidx.hash_request(TOKENS, 4, cache_salt=7)  # type: ignore[arg-type]
    with pytest.raises(kvidx.InvalidArgument):
        kvidx.hash_request(TOKENS, 4, mm_spans=[(b"image-1", 2)])  # type: ignore[list-item]
    with pytest.raises(kvidx.InvalidArgument):
        kvidx.hash_request(TOKENS, 4, mm_spans=[(b"image-1", -1, 6)])


def namespace_query(fixture: Dict[str, Any], **changes: Any) -> List[int]:
    """The query of a fixture's request, with `changes` to its namespace."""
    spans = [(s["identifier"], s["start"], s["end"]) for s in fixture["spans"]]
    args: Dict[str, Any] = dict(lora_name=fixture["lora_name"], cache_salt=fixture["cache_salt"], mm_spans=spans)
    args.update(changes)
    return kvidx.hash_request(MANIFEST["tokens"], MANIFEST["block_size"], **args)


def apply_fixture(name: str, **feed_options: Any) -> Tuple[kvidx.Indexer, kvidx.BatchReport]:
    fmt: Literal["vllm", "sglang"] = MANIFEST["fixtures"][name]["format"]
    index = kvidx.Indexer(event_threads=0)
    feed = kvidx.EngineFeed(fmt, **feed_options)
    report = feed.apply_message(index, 5, (FIXTURES / f"{name}.msgpack").read_bytes())
    return index, report


@pytest.mark.parametrize("name", sorted(MANIFEST["fixtures"]))
def test_an_engine_store_is_reached_by_its_own_namespace_only(name: str) -> None:
    fixture = MANIFEST["fixtures"][name]
    index, report = apply_fixture(name)
    with index:
        assert report.events_skipped == 0
        assert [tuple(m) for m in index.find_matches(namespace_query(fixture))] == [(5, 0, 3)]
        assert index.find_matches(namespace_query(fixture, lora_name="another-adapter")) == []
        if fixture["cache_salt"]:
            assert index.find_matches(namespace_query(fixture, cache_salt="another-salt")) == []
            assert index.find_matches(namespace_query(fixture, cache_salt=None)) == []
        if fixture["spans"]:
            assert [tuple(m) for m in index.find_matches(namespace_query(fixture, mm_spans=[]))] == [(5, 0, 1)]


def test_a_salted_store_is_skipped_with_skip_extras_and_hashed_by_tokens_with_hash_extras() -> None:
    fixture = MANIFEST["fixtures"]["vllm_salt"]
    index, report = apply_fixture("vllm_salt", skip_extras=True)
    with index:
        # The salted first store is skipped; the continuation after it has no parent held.
        assert (report.events_decoded, report.events_skipped, report.events_rejected) == (2, 1, 1)
        assert index.find_matches(namespace_query(fixture)) == []
    index, report = apply_fixture("vllm_salt", hash_extras=True)
    with index:
        assert [tuple(m) for m in index.find_matches(namespace_query(fixture, cache_salt=None))] == [(5, 0, 3)]
        assert index.find_matches(namespace_query(fixture)) == []
    with pytest.raises(kvidx.InvalidArgument):
        kvidx.EngineFeed("vllm", skip_extras=True, hash_extras=True)


def salted_store(salt: str) -> bytes:
    """A vLLM BlockStored of tokens 1..8 (block size 4) whose first block carries a cache salt
    in `extra_keys`, positionally as vLLM 0.33 publishes it."""
    extra_keys: List[Value] = [[salt], None]
    return batch(["BlockStored", [11, 12], None, list(range(1, 9)), 4, None, "GPU", None, extra_keys])


def test_a_salted_payload_is_reached_by_the_same_salt_and_not_another() -> None:
    with kvidx.Indexer(event_threads=0) as index:
        kvidx.EngineFeed("vllm").apply_message(index, 9, salted_store("tenant-a"))
        tokens = list(range(1, 9))
        assert [tuple(m) for m in index.find_matches(kvidx.hash_request(tokens, 4, cache_salt="tenant-a"))] == [(9, 0, 2)]
        assert index.find_matches(kvidx.hash_request(tokens, 4, cache_salt="tenant-b")) == []
        assert index.find_matches(kvidx.hash_tokens(tokens, 4)) == []
