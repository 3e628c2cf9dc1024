#!/usr/bin/env python3
"""Writes tests/fixtures/hash_check: engine payloads whose block hashes come from the engines'
own hashing code, for the feed's hash check (core/tests/engine_hash_check.rs).

vLLM 0.33.0: the wheel's `vllm/utils/hashing.py` (sha256_cbor, xxhash_cbor) and, from
`vllm/v1/core/kv_cache_utils.py`, the functions that hash a request's blocks
(`get_request_block_hasher`, `hash_block_tokens`, `init_none_hash`, the extra keys and their
untagged event form, `maybe_convert_block_hash`), executed as published with the rest of that
module's imports (torch, the config, the scheduler) left out; the events are the wheel's
`kv_events` classes, msgpack-encoded with msgspec as its publisher does.

Each scenario is a list of batches (`<scenario>_<n>.msgpack`); `manifest.txt` lists, per
scenario, the engine format, the algorithm and seed the engine hashed with, its block size,
the number of batches and the blocks the check must find matched and unverifiable.

Run with the Python of scripts/vllm-venv.sh: python scripts/gen_hash_check_fixtures.py --out DIR
"""
import __future__
import argparse
import ast
import hashlib
import importlib.util
import logging
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "zmq-subscriber"))
import vllm_engine  # noqa: E402  (loads the wheel's kv_events with its heavy imports stood in for)


def vllm_root():
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("gen_hash_check_fixtures.py: run with the Python of scripts/vllm-venv.sh")
    return list(spec.submodule_search_locations)[0]


def load_hashing(root):
    """vllm/utils/hashing.py as published (it needs cbor2 and xxhash only)."""
    spec = importlib.util.spec_from_file_location("vllm_hashing", os.path.join(root, "utils", "hashing.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HASHER_FUNCTIONS = [
    "resolve_none_hash_seed", "init_none_hash", "maybe_convert_block_hash",
    "_gen_mm_extra_hash_keys", "_gen_lora_extra_hash_keys", "_gen_prompt_embeds_extra_hash_keys",
    "generate_block_hash_extra_keys", "to_event_extra_keys", "hash_block_tokens",
    "get_request_block_hasher",
]
HASHER_CONSTANTS = ["DEFAULT_NONE_HASH_SEED", "_NON_CRYPTO_HASH_FUNCTIONS", "_NONE_HASH_SEED"]


def load_block_hasher(root, hashing):
    """The block-hashing functions of kv_cache_utils.py, their source executed unchanged."""
    path = os.path.join(root, "v1", "core", "kv_cache_utils.py")
    tree = ast.parse(open(path, encoding="utf-8").read())
    wanted = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in HASHER_FUNCTIONS:
            wanted.append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in HASHER_CONSTANTS for t in targets):
                wanted.append(node)
    found = {n.name for n in wanted if isinstance(n, ast.FunctionDef)}
    missing = set(HASHER_FUNCTIONS) - found
    if missing:
        sys.exit(f"gen_hash_check_fixtures.py: {path} lacks {sorted(missing)}")
    module = ast.Module(body=wanted, type_ignores=[])
    namespace = {
        "__name__": "vllm_kv_cache_utils",
        "os": os, "hashlib": hashlib, "logger": logging.getLogger("vllm"),
        "xxhash": hashing.xxhash, "xxhash_cbor": hashing.xxhash_cbor,
        "BlockHash": bytes, "envs": types.SimpleNamespace(VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=True),
        "get_mm_features_in_window": None, "tensor_data": None,
    }
    # The module's annotations name types left out here: keep them unevaluated.
    flags = __future__.annotations.compiler_flag
    exec(compile(module, path, "exec", flags=flags, dont_inherit=True), namespace)
    return namespace


class Request:
    """The attributes of vllm.v1.request.Request that the block hasher reads."""

    def __init__(self, tokens, mm=(), lora=None, cache_salt=None):
        self.all_token_ids = list(tokens)
        self.num_tokens = len(tokens)
        self.block_hashes = []
        self.mm_features = [
            types.SimpleNamespace(identifier=ident,
                                  mm_position=types.SimpleNamespace(offset=offset, length=length))
            for ident, offset, length in mm
        ]
        self.lora_request = None if lora is None else types.SimpleNamespace(
            lora_name=lora[0], lora_path=lora[1])
        self.cache_salt = cache_salt
        self.prompt_embeds = None
        self._prompt_embeds_per_block_hashes = {}


class Engine:
    """One vLLM engine's block hashing and event publishing, for fixtures."""

    def __init__(self, kv, utils, hash_fn, block_size):
        self.kv, self.utils, self.block_size = kv, utils, block_size
        self.hasher = utils["get_request_block_hasher"](block_size, hash_fn)

    def store(self, request, first_block, lora=None):
        """A BlockStored of the request's blocks from `first_block` on (hashing new ones)."""
        request.block_hashes.extend(self.hasher(request))
        u = self.utils
        size = self.block_size
        hashes = request.block_hashes[first_block:]
        extra = []
        for i in range(first_block, len(request.block_hashes)):
            keys, _ = u["generate_block_hash_extra_keys"](request, i * size, (i + 1) * size, 0)
            extra.append(keys)
        parent = request.block_hashes[first_block - 1] if first_block > 0 else None
        convert = u["maybe_convert_block_hash"]
        return self.kv.BlockStored(
            block_hashes=[convert(h) for h in hashes],
            parent_block_hash=None if parent is None else convert(parent),
            token_ids=request.all_token_ids[first_block * size:len(request.block_hashes) * size],
            block_size=size, lora_id=None, medium="GPU", lora_name=lora,
            extra_keys=u["to_event_extra_keys"](extra), group_idx=0,
            kv_cache_spec_kind="full_attention")

    def removed(self, request, blocks):
        convert = self.utils["maybe_convert_block_hash"]
        return self.kv.BlockRemoved(
            block_hashes=[convert(request.block_hashes[i]) for i in blocks], medium="GPU", group_idx=0)

    def batch(self, ts, events):
        return vllm_engine_encoder.encode(self.kv.KVEventBatch(ts=ts, events=events, data_parallel_rank=0))


vllm_engine_encoder = None


def vllm_scenarios(kv, root):
    """(name, algorithm, seed, block size, batches, matched, unverifiable) per scenario."""
    hashing = load_hashing(root)
    out = []
    for algorithm, seed in [("sha256_cbor", None), ("sha256_cbor", "0"), ("xxhash_cbor", "0")]:
        if seed is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = seed
        utils = load_block_hasher(root, hashing)
        hash_fn = getattr(hashing, algorithm)
        utils["init_none_hash"](hash_fn)
        engine = Engine(kv, utils, hash_fn, 16)
        prompt = list(range(1000, 1064))  # 4 blocks
        first = Request(prompt + list(range(1, 17)))  # 5 blocks
        second = Request(prompt + list(range(50, 82)))  # shares 4 blocks, then 2 of its own
        salted = Request(prompt, cache_salt="tenant-a")
        image = Request(list(range(2000, 2048)), mm=[("img-7f3a", 10, 20)])
        adapter = Request(prompt, lora=("sql-adapter", "/adapters/sql"))
        batches = [
            engine.batch(1.0, [engine.store(first, 0)]),
            engine.batch(2.0, [engine.store(second, 4), engine.store(salted, 0)]),
            engine.batch(3.0, [engine.removed(first, [4]), engine.store(image, 0)]),
            engine.batch(4.0, [engine.store(adapter, 0, lora="sql-adapter")]),
        ]
        name = f"vllm_{algorithm}_{'default' if seed is None else 'seed' + seed}"
        # first 5, second 2 (after first's 4), salted 4, image 3; the adapter's 4 need its path.
        out.append((name, algorithm, seed or "vllm-none-hash", 16, batches, 5 + 2 + 4 + 3, 4))
    os.environ.pop("PYTHONHASHSEED", None)
    return out


def main():
    global vllm_engine_encoder
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "hash_check"))
    args = parser.parse_args()
    import msgspec

    vllm_engine_encoder = msgspec.msgpack.Encoder()
    root = vllm_root()
    kv, _ = vllm_engine.load_kv_events()
    os.makedirs(args.out, exist_ok=True)
    manifest = ["# scenario format algorithm seed block_size batches matched unverifiable"]
    for name, algorithm, seed, size, batches, matched, unverifiable in vllm_scenarios(kv, root):
        for i, payload in enumerate(batches):
            with open(os.path.join(args.out, f"{name}_{i}.msgpack"), "wb") as f:
                f.write(payload)
        manifest.append(f"{name} vllm {algorithm} {seed} {size} {len(batches)} {matched} {unverifiable}")
    with open(os.path.join(args.out, "manifest.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
