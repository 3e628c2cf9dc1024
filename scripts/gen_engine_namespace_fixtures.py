#!/usr/bin/env python3
"""Writes engine KV-event payloads of salted, LoRA and multimodal requests, made by the engines'
own code, to tests/fixtures/engine-namespaces/ (or --out DIR).

Everything that decides a payload's bytes is the engines' published code, loaded from the
`vllm` 0.33.0 and `sglang` 0.5.23 wheels with only their heavy imports stood in for (run it
with the Python of scripts/vllm-venv.sh):

- vLLM: a request's block hashes come from `get_request_block_hasher` (the scheduler's own
  hasher, `sha256` of pickle, vLLM's default, `NONE_HASH` from the fixed seed), published as
  `maybe_convert_block_hash` does; each block's `extra_keys` from
  `generate_block_hash_extra_keys` and `to_event_extra_keys` (LoRA name on every block, one
  `(identifier, offset)` per overlapping image, the salt on block 0); the events are
  `vllm.distributed.kv_events` classes, encoded with msgspec as its ZmqEventPublisher does.
- SGLang: `sglang.srt.disaggregation.kv_events` classes; the published hashes are namespaced
  with its own `kv_event_namespace_seed` and `namespaced_block_hash`; every store of the salted
  request carries `cache_salt`.

Every fixture is one request of tokens 1..12 in blocks of 4, published as two stores (blocks
0-1, then block 2 with its parent), so a continuation is covered. `namespaces.json` lists,
per fixture, the request (LoRA name, salt, multimodal spans) and the engine's block hashes:
what core/tests/engine_namespaces.rs queries with (through kvidx::namespace::hash_request).

Usage: $(bash scripts/vllm-venv.sh) scripts/gen_engine_namespace_fixtures.py [--out DIR]
"""

import argparse
import importlib.util
import json
import os
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "zmq-subscriber"))

import msgspec  # noqa: E402

BLOCK = 4
TOKENS = list(range(1, 13))
# (name, LoRA name, cache salt, multimodal items as (identifier, offset, length))
VLLM_CASES = [
    ("vllm_salt", None, "salt-a", []),
    ("vllm_lora", "lora-l", None, []),
    ("vllm_image", None, None, [("image-i", 5, 4)]),
    ("vllm_all", "lora-l", "salt-a", [("image-i", 5, 4)]),
]
SGLANG_CASES = [("sglang_lora_salt", "lora-l", "salt-a")]


def wheel_root(package):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"gen_engine_namespace_fixtures.py: the {package} wheel is not installed: use the "
                 "Python that scripts/vllm-venv.sh prints")
    return list(spec.submodule_search_locations)[0]


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def stand_in(name, **attributes):
    module = sys.modules.get(name) or types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__path__ = []
    sys.modules[name] = module
    return module


def load_vllm():
    """vLLM's kv_events module and its kv_cache_utils and hashing, heavy imports stood in for."""
    root = wheel_root("vllm")
    from vllm_engine import load_kv_events

    kv, _ = load_kv_events()
    stand_in("cbor2")  # only the *_cbor hash functions use it; these fixtures use sha256
    stand_in("vllm.envs", VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=True)
    stand_in("vllm.config", VllmConfig=object)
    stand_in("vllm.multimodal")
    stand_in("vllm.multimodal.utils", get_mm_features_in_window=None)  # used past block 0 only
    hashing = load("vllm.utils.hashing", os.path.join(root, "utils", "hashing.py"))
    stand_in("vllm.utils.math_utils", cdiv=lambda a, b: -(-a // b))
    stand_in("vllm.v1.kv_cache_interface", KVCacheConfig=object, KVCacheGroupSpec=object,
             KVCacheSpec=object, MambaSpec=object, UniformTypeKVCacheSpecs=object,
             iter_layer_specs=None)
    stand_in("vllm.v1.kv_cache_spec_registry", KVCacheSpecRegistry=object)
    stand_in("vllm.v1.request", Request=object)
    stand_in("vllm.v1.utils", tensor_data=None)
    utils = load("kvidx_gen.vllm_kv_cache_utils",
                 os.path.join(root, "v1", "core", "kv_cache_utils.py"))
    os.environ.pop("PYTHONHASHSEED", None)  # the fixed default seed, "vllm-none-hash"
    utils.init_none_hash(hashing.sha256)
    return kv, utils, hashing


def load_sglang():
    root = wheel_root("sglang")
    stand_in("pydantic", BaseModel=object)
    stand_in("sglang.srt.runtime_context", get_parallel=lambda: None)
    stand_in("sglang.srt.utils.network", NetworkAddress=object)
    return load("kvidx_gen.sglang_kv_events", os.path.join(root, "srt", "disaggregation", "kv_events.py"))


def vllm_request(lora, salt, items):
    """The fields of a vLLM Request that its block hasher and extra-key functions read."""
    mm = [types.SimpleNamespace(identifier=i, mm_position=types.SimpleNamespace(offset=o, length=n))
          for i, o, n in items]
    lora_request = types.SimpleNamespace(lora_name=lora, lora_path=f"/adapters/{lora}") if lora else None
    return types.SimpleNamespace(
        block_hashes=[], num_tokens=len(TOKENS), all_token_ids=TOKENS, mm_features=mm,
        lora_request=lora_request, cache_salt=salt, prompt_embeds=None,
        _prompt_embeds_per_block_hashes={})


def vllm_fixture(kv, utils, hashing, lora, salt, items):
    request = vllm_request(lora, salt, items)
    digests = utils.get_request_block_hasher(BLOCK, hashing.sha256)(request)
    hashes = [utils.maybe_convert_block_hash(d) for d in digests]
    keys, mm_idx = [], 0
    for start in range(0, len(TOKENS), BLOCK):
        block_keys, mm_idx = utils.generate_block_hash_extra_keys(request, start, start + BLOCK, mm_idx)
        keys.append(block_keys)
    event_keys = utils.to_event_extra_keys(keys)

    def stored(first, last, parent):
        return kv.BlockStored(
            block_hashes=hashes[first:last], parent_block_hash=parent,
            token_ids=TOKENS[first * BLOCK:last * BLOCK], block_size=BLOCK,
            lora_id=1 if lora else None, medium="GPU", lora_name=lora,
            extra_keys=event_keys[first:last] if event_keys else None, group_idx=0,
            kv_cache_spec_kind="full_attention")

    batch = kv.KVEventBatch(ts=1.0, events=[stored(0, 2, None), stored(2, 3, hashes[1])],
                            data_parallel_rank=0)
    return msgspec.msgpack.Encoder().encode(batch), hashes


def sglang_fixture(sg, lora, salt):
    seed = sg.kv_event_namespace_seed(extra_key=lora, cache_salt=salt)
    hashes = [sg.namespaced_block_hash(h, namespace_seed=seed) for h in (11, 12, 13)]

    def stored(first, last, parent):
        return sg.BlockStored(
            block_hashes=hashes[first:last], parent_block_hash=parent,
            token_ids=TOKENS[first * BLOCK:last * BLOCK], block_size=BLOCK, lora_id=None,
            medium="GPU", cache_salt=salt, lora_name=lora)

    batch = sg.KVEventBatch(ts=1.0, events=[stored(0, 2, None), stored(2, 3, hashes[1])],
                            attn_dp_rank=0)
    return msgspec.msgpack.Encoder().encode(batch), hashes


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "engine-namespaces"))
    args = parser.parse_args()
    kv, utils, hashing = load_vllm()
    sg = load_sglang()
    os.makedirs(args.out, exist_ok=True)
    manifest = {}
    for name, lora, salt, items in VLLM_CASES:
        payload, hashes = vllm_fixture(kv, utils, hashing, lora, salt, items)
        manifest[name] = dict(format="vllm", lora_name=lora, cache_salt=salt,
                              spans=[dict(identifier=i, start=o, end=o + n) for i, o, n in items],
                              engine_hashes=hashes)
        with open(os.path.join(args.out, name + ".msgpack"), "wb") as f:
            f.write(payload)
    for name, lora, salt in SGLANG_CASES:
        payload, hashes = sglang_fixture(sg, lora, salt)
        manifest[name] = dict(format="sglang", lora_name=lora, cache_salt=salt, spans=[],
                              engine_hashes=hashes)
        with open(os.path.join(args.out, name + ".msgpack"), "wb") as f:
            f.write(payload)
    head = dict(tokens=TOKENS, block_size=BLOCK, vllm_hash="sha256", vllm_none_hash_seed="vllm-none-hash")
    with open(os.path.join(args.out, "namespaces.json"), "w") as f:
        json.dump(dict(head, fixtures=manifest), f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(manifest)} fixtures to {args.out}")


if __name__ == "__main__":
    main()
