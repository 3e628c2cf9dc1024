"""EngineFeed's hash check (the engines' own block hashes recomputed and counted per
publisher) and llm-d's request keys (docs/contract.md section 3.2), on the project's
fixtures written by the engines' own code and by an independent Go implementation."""

import pathlib
import shlex
from typing import Dict, List, Literal, NamedTuple

import pytest

import kvidx

FIXTURES = pathlib.Path(__file__).resolve().parents[3] / "tests" / "fixtures"
CHECKS = FIXTURES / "hash_check"

Algorithm = Literal["vllm_sha256_cbor", "vllm_xxhash_cbor", "sglang_sha256"]


class Scenario(NamedTuple):
    name: str
    format: Literal["vllm", "sglang"]
    algorithm: Algorithm
    seed: str
    block_size: int
    batches: int
    matched: int
    unverifiable: int


ALGORITHMS: Dict[str, Algorithm] = {
    "sha256_cbor": "vllm_sha256_cbor",
    "xxhash_cbor": "vllm_xxhash_cbor",
    "sglang_sha256": "sglang_sha256",
}


def scenarios() -> List[Scenario]:
    """The scenarios of tests/fixtures/hash_check/manifest.txt."""
    found = []
    for line in (CHECKS / "manifest.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, fmt, algorithm, seed, block_size, batches, matched, unverifiable = line.split()
        found.append(Scenario(name, "sglang" if fmt == "sglang" else "vllm", ALGORITHMS[algorithm], seed,
                              int(block_size), int(batches), int(matched), int(unverifiable)))
    return found


SCENARIOS = scenarios()


def batch(s: Scenario, i: int) -> bytes:
    return (CHECKS / f"{s.name}_{i}.msgpack").read_bytes()


def test_the_manifest_is_found() -> None:
    assert len(SCENARIOS) >= 3


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_the_engines_own_hashes_all_match(s: Scenario) -> None:
    for block_size in (s.block_size, None):
        with kvidx.Indexer(event_threads=0) as index:
            feed = kvidx.EngineFeed(s.format)
            feed.set_hash_check(s.algorithm, s.seed, block_size)
            assert feed.hash_check == (s.algorithm, s.seed, block_size)
            for i in range(s.batches):
                feed.apply_message(index, 3, batch(s, i), dp_rank=0, seq=i)
            counts = feed.hash_check_counts(3)
            assert counts is not None
            assert (counts.matched, counts.mismatched, counts.unverifiable) == (s.matched, 0, s.unverifiable)


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_a_wrong_seed_or_block_size_mismatches(s: Scenario) -> None:
    wrong = [(s.seed, s.block_size * 2), (s.seed, s.block_size // 2)]
    if s.format == "vllm":
        wrong.append((s.seed + "-other", s.block_size))
    for seed, block_size in wrong:
        with kvidx.Indexer(event_threads=0) as index:
            feed = kvidx.EngineFeed(s.format)
            feed.set_hash_check(s.algorithm, seed, block_size)
            feed.apply_message(index, 3, batch(s, 0), dp_rank=0, seq=0)
            counts = feed.hash_check_counts(3)
            assert counts is not None and counts.matched == 0 and counts.mismatched > 0, (seed, block_size)


def test_counts_are_per_publisher_and_off_by_default() -> None:
    s = SCENARIOS[0]
    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed(s.format)
        assert feed.hash_check is None and feed.hash_check_counts(3) is None
        assert feed.hash_check_totals() is None and feed.hash_check_workers() == {}
        feed.set_hash_check(s.algorithm, s.seed, s.block_size)
        zeros = feed.hash_check_counts(9)  # no store of it yet
        assert zeros is not None and (zeros.matched, zeros.mismatched, zeros.unverifiable) == (0, 0, 0)
        feed.apply_message(index, 3, batch(s, 0), dp_rank=0, seq=0)
        feed.apply_message(index, 4, batch(s, 0), dp_rank=1, seq=0)
        one = feed.hash_check_counts(3)
        assert one is not None and one.matched > 0
        assert feed.hash_check_counts(4, dp_rank=1) == one
        assert feed.hash_check_workers() == {(3, 0): one, (4, 1): one}
        totals = feed.hash_check_totals()
        assert totals is not None and totals.matched == 2 * one.matched
        feed.remove_worker(index, 4)  # a removed publisher's counts stay in the totals
        assert list(feed.hash_check_workers()) == [(3, 0)]
        assert feed.hash_check_totals() == totals
        feed.clear_hash_check()
        assert feed.hash_check is None and feed.hash_check_counts(3) is None
        with pytest.raises(kvidx.InvalidArgument):
            feed.set_hash_check("md5", s.seed)  # type: ignore[arg-type]
        with pytest.raises(kvidx.InvalidArgument):
            feed.set_hash_check(s.algorithm, s.seed, 0)
    assert kvidx.VLLM_DEFAULT_SEED == "vllm-none-hash"


def llmd_cases() -> List[List[str]]:
    lines = (FIXTURES / "llmd_keys.txt").read_text(encoding="utf-8").splitlines()
    return [shlex.split(line) for line in lines if line.strip() and not line.startswith("#")]


LLMD = llmd_cases()


@pytest.mark.parametrize("case", LLMD, ids=lambda c: f"{c[1][:12]}-{c[2]}-{c[3]}")
def test_llmd_request_keys_match_the_golden_values(case: List[str]) -> None:
    seed, model, block_size, first, count, keys = case
    tokens = list(range(int(first), int(first) + int(count)))
    want = [int(k, 16) for k in keys.split(",")]
    assert kvidx.llmd_request_keys(tokens, int(block_size), seed, model) == want


def test_the_llmd_fixture_is_found() -> None:
    assert len(LLMD) >= 3


def test_an_llmd_feed_answers_llmd_request_keys() -> None:
    # vLLM's default sha256 scenario: batch 0 stores 5 blocks of prompt ++ 1..=16, batch 1
    # continues them with 2 blocks of 50..=81 and stores a salted prompt, batch 2 removes
    # the fifth block and stores an image request, batch 3 a LoRA store of the prompt.
    s = next(s for s in SCENARIOS if s.name == "vllm_sha256_cbor_default")
    prompt = list(range(1000, 1064))

    def depth(index: kvidx.Indexer, keys: List[int]) -> int:
        return max((m.depth for m in index.find_matches(keys)), default=0)

    with kvidx.Indexer(event_threads=0) as index:
        feed = kvidx.EngineFeed("vllm")
        feed.set_llmd_keys("", "base-model")
        assert feed.llmd_keys == ("", "base-model")
        for i in range(s.batches):
            feed.apply_message(index, 3, batch(s, i), dp_rank=0, seq=i)
        assert depth(index, kvidx.llmd_request_keys(prompt + list(range(1, 17)), 16, "", "base-model")) == 4
        assert depth(index, kvidx.llmd_request_keys(prompt + list(range(50, 82)), 16, "", "base-model")) == 6
        assert depth(index, kvidx.llmd_request_keys(prompt + list(range(50, 82)), 16, "", "other-model")) == 0
        assert depth(index, kvidx.llmd_request_keys(prompt, 16, "0", "base-model")) == 0
        assert depth(index, kvidx.llmd_request_keys(prompt, 16, "", "sql-adapter")) == 4
        assert depth(index, kvidx.hash_tokens(prompt, 16)) == 0
        feed.clear_llmd_keys()
        assert feed.llmd_keys is None
    with pytest.raises(kvidx.InvalidArgument):
        kvidx.llmd_request_keys(prompt, 0, "", "m")
