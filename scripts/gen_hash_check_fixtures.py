#!/usr/bin/env python3
"""Writes tests/fixtures/hash_check: engine payloads whose block hashes come from the engines'
own hashing code, for the feed's hash check (core/tests/engine_hash_check.rs).

vLLM 0.33.0: the wheel's `vllm/utils/hashing.py` (sha256_cbor, xxhash_cbor) and, from
`vllm/v1/core/kv_cache_utils.py`, the functions that hash a request's blocks
(`get_request_block_hasher`, `hash_block_tokens`, `init_none_hash`, the extra keys and their
untagged event form, `maybe_convert_block_hash`), executed as published with the rest of that
module's imports (torch, the config, the scheduler) left out; the events are the wheel's
`kv_events` classes, msgpack-encoded with msgspec as its publisher does.

SGLang 0.5.23: the wheel's event recorder (`sglang/srt/mem_cache/events.py`,
`KVCacheEventRecorder.record_store` / `record_remove`), the node hashing of
`sglang/srt/mem_cache/utils.py` (executed as published) and its native page hash
(`cpp_utils/hash_binding.cpp`, compiled here with pybind11 and OpenSSL as SGLang's loader
would), on stand-in radix nodes; events are the wheel's `kv_events` classes, msgspec-encoded.

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
import tempfile
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "zmq-subscriber"))
import vllm_engine  # noqa: E402  (loads the wheel's kv_events with its heavy imports stood in for)


def engine_root(package):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"gen_hash_check_fixtures.py: the {package} wheel is missing: run with the Python "
                 "of scripts/vllm-venv.sh after scripts/test-hash-check.sh installed the wheels")
    return list(spec.submodule_search_locations)[0]


def vllm_root():
    return engine_root("vllm")


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
        # Prompt embeddings stand in as bytes: the hasher digests tensor_data of each block's
        # slice, and the digest is what events carry.
        "get_mm_features_in_window": None, "tensor_data": bytes,
    }
    # The module's annotations name types left out here: keep them unevaluated.
    flags = __future__.annotations.compiler_flag
    exec(compile(module, path, "exec", flags=flags, dont_inherit=True), namespace)
    return namespace


class Request:
    """The attributes of vllm.v1.request.Request that the block hasher reads."""

    def __init__(self, tokens, mm=(), lora=None, cache_salt=None, prompt_embeds=None):
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
        self.prompt_embeds = prompt_embeds
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
        embeds = Request(list(range(3000, 3032)), prompt_embeds=bytes(range(256)) * 4)
        batches = [
            engine.batch(1.0, [engine.store(first, 0)]),
            engine.batch(2.0, [engine.store(second, 4), engine.store(salted, 0)]),
            engine.batch(3.0, [engine.removed(first, [4]), engine.store(image, 0),
                               engine.store(embeds, 0)]),
            engine.batch(4.0, [engine.store(adapter, 0, lora="sql-adapter")]),
        ]
        name = f"vllm_{algorithm}_{'default' if seed is None else 'seed' + seed}"
        # first 5, second 2 (after first's 4), salted 4, image 3, embeds 2; the adapter's 4
        # need its path.
        out.append((name, algorithm, seed or "vllm-none-hash", 16, batches, 5 + 2 + 4 + 3 + 2, 4))
    os.environ.pop("PYTHONHASHSEED", None)
    return out


SGLANG_UTILS = [
    "get_hash_str", "storage_namespace_seed", "get_storage_hash_str", "hash_str_to_int64",
    "compute_node_hash_values", "compute_node_event_hash_values",
]


def stand_in(name, **attributes):
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__path__ = []
    sys.modules[name] = module
    return module


def functions_of(path, names, namespace):
    """The named top-level functions of a published source file, executed unchanged."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in wanted}
    if missing:
        sys.exit(f"gen_hash_check_fixtures.py: {path} lacks {sorted(missing)}")
    flags = __future__.annotations.compiler_flag
    exec(compile(ast.Module(body=wanted, type_ignores=[]), path, "exec", flags=flags,
                 dont_inherit=True), namespace)
    return namespace


def build_native_hash(src, build_dir):
    """SGLang's native page hash, built from the wheel's hash_binding.cpp."""
    import sysconfig
    import subprocess
    import pybind11

    name = "hicache_hash_cpp"
    out = os.path.join(build_dir, name + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run(["c++", "-O1", "-shared", "-fPIC", "-std=c++17", "-w",
                    f"-DTORCH_EXTENSION_NAME={name}", "-I" + sysconfig.get_paths()["include"],
                    "-I" + pybind11.get_include(), src, "-lcrypto", "-o", out], check=True)
    spec = importlib.util.spec_from_file_location(name, out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class RadixKey:
    """The attributes of sglang's RadixKey that the hashing and the recorder read."""

    def __init__(self, tokens, extra_key=None, cache_salt=None):
        self.token_ids, self.extra_key, self.cache_salt = list(tokens), extra_key, cache_salt
        self.is_bigram = False

    def __len__(self):
        return len(self.token_ids)


class TreeNode:
    """The attributes of sglang's TreeNode that the hashing and the recorder read."""

    def __init__(self, key, parent):
        self.key, self.parent = key, parent
        self.hash_value = None
        self.event_hash_value = None


def sglang_scenarios(root, build_dir):
    mem_cache = os.path.join(root, "srt", "mem_cache")
    stand_in("pydantic", BaseModel=object)
    stand_in("sglang.srt.runtime_context", get_parallel=lambda: None)
    stand_in("sglang.srt.utils.network", NetworkAddress=object)
    spec = importlib.util.spec_from_file_location(
        "sglang.srt.disaggregation.kv_events", os.path.join(root, "srt", "disaggregation", "kv_events.py"))
    kv = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = kv
    spec.loader.exec_module(kv)
    spec = importlib.util.spec_from_file_location(
        "sglang_native_hash", os.path.join(mem_cache, "cpp_utils", "native_hash.py"))
    native = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(native)
    compiled = build_native_hash(os.path.join(mem_cache, "cpp_utils", "hash_binding.cpp"), build_dir)
    native._load_native_hash_module = lambda: compiled
    utils = functions_of(os.path.join(mem_cache, "utils.py"), SGLANG_UTILS,
                         {"hashlib": hashlib, "get_native_hash": native.get_native_hash})
    stand_in("sglang.srt.mem_cache.utils", **{n: utils[n] for n in SGLANG_UTILS})
    spec = importlib.util.spec_from_file_location("sglang_events", os.path.join(mem_cache, "events.py"))
    events = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(events)

    page = 16
    names = events.KvEventLoraNames()
    lora_id = "0123456789abcdef0123456789abcdef"
    names.register(lora_id=lora_id, lora_name="sql-adapter")
    recorder = events.KVCacheEventRecorder(enabled=True, page_size=page, lora_names=names)
    encoder = __import__("msgspec").msgpack.Encoder()
    root_node = TreeNode(RadixKey([]), None)
    root_node.hash_value = []
    prompt = list(range(1000, 1064))  # 4 pages
    first = TreeNode(RadixKey(prompt), root_node)
    tail = TreeNode(RadixKey(range(1, 33)), first)  # 2 pages continuing it
    salted = TreeNode(RadixKey(prompt, cache_salt="tenant-a"), root_node)
    adapter = TreeNode(RadixKey(prompt, extra_key="req-" + lora_id), root_node)

    def batch(ts, *steps):
        for step in steps:
            step()
        return encoder.encode(kv.KVEventBatch(ts=ts, events=recorder.take(), attn_dp_rank=0))

    batches = [
        batch(1.0, lambda: recorder.record_store(first)),
        batch(2.0, lambda: recorder.record_store(tail), lambda: recorder.record_store(salted)),
        batch(3.0, lambda: recorder.record_remove(tail), lambda: recorder.record_store(adapter)),
    ]
    # first 4, tail 2, salted 4, and the adapter's 4: an adapter known by its id alone is
    # published without a name and hashed by its tokens (the recorder's default format).
    return [("sglang_sha256", "sglang_sha256", "-", page, batches, 4 + 2 + 4 + 4, 0)]


def main():
    global vllm_engine_encoder
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "hash_check"))
    args = parser.parse_args()
    import msgspec

    vllm_engine_encoder = msgspec.msgpack.Encoder()
    root = vllm_root()
    sglang_root = engine_root("sglang")
    kv, _ = vllm_engine.load_kv_events()
    os.makedirs(args.out, exist_ok=True)
    manifest = ["# scenario format algorithm seed block_size batches matched unverifiable"]
    scenarios = [("vllm", s) for s in vllm_scenarios(kv, root)]
    with tempfile.TemporaryDirectory() as build_dir:
        scenarios += [("sglang", s) for s in sglang_scenarios(sglang_root, build_dir)]
    for fmt, (name, algorithm, seed, size, batches, matched, unverifiable) in scenarios:
        for i, payload in enumerate(batches):
            with open(os.path.join(args.out, f"{name}_{i}.msgpack"), "wb") as f:
                f.write(payload)
        manifest.append(f"{name} {fmt} {algorithm} {seed} {size} {len(batches)} {matched} {unverifiable}")
    with open(os.path.join(args.out, "manifest.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(manifest) + "\n")


if __name__ == "__main__":
    main()
