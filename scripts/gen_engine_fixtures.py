#!/usr/bin/env python3
"""Writes byte-exact engine KV-event payloads to tests/fixtures/engine/ (or --out DIR).

Each fixture is one msgpack `KVEventBatch` as an engine publishes it, built from the field
lists of docs/engine-events.md ("Wire formats"): vLLM array-tagged events of every generation
(6/7/8/9/10/12 fields for BlockStored, 2/3/4 for BlockRemoved), vLLM map-tagged events
(0.26, 0.33 with every optional field, bin digests), SGLang arrays and maps, the TensorRT-LLM
vLLM-compatible publisher, a map envelope, and the annotated example payload of docs/engine-events.md.

Encoding rules copied from msgspec (array_like structs, tagged unions): ints minimal, floats
float64, strings str, digests bin, nil for None in arrays; in maps, fields with a default of
None are omitted when None and the header is map16 when the struct declares more than 15
fields (msgspec reserves the header before it knows how many fields it omits).

Usage: python3 scripts/gen_engine_fixtures.py [--out DIR]
"""

import argparse
import os
import struct
import sys

try:
    import msgpack
except ImportError:
    sys.exit("gen_engine_fixtures.py needs msgpack: run bash scripts/setup.sh (Debian's "
             "python3-msgpack), or use the Python that scripts/python.sh prints")

MISSING = object()  # a field this generation does not declare


def pack(value):
    """One msgpack value, msgspec-style (bin for bytes, float64, minimal ints)."""
    return msgpack.packb(value, use_bin_type=True, use_single_float=False)


# Field lists, declaration order (after the tag), with "required" = no default in the struct.
VLLM_STORED = [
    ("block_hashes", True), ("parent_block_hash", True), ("token_ids", True),
    ("block_size", True), ("lora_id", True), ("medium", True), ("lora_name", True),
    ("extra_keys", False), ("group_idx", False), ("kv_cache_spec_kind", False),
    ("kv_cache_spec_sliding_window", False), ("locality", False), ("ownership", False),
    ("session_id", False), ("lookahead_token_ids", False),
]
VLLM_REMOVED = [
    ("block_hashes", True), ("medium", True), ("group_idx", False), ("locality", False),
    ("ownership", False),
]
SGLANG_STORED = [
    ("block_hashes", True), ("parent_block_hash", True), ("token_ids", True),
    ("block_size", True), ("lora_id", True), ("medium", False), ("cache_salt", False),
    ("session_id", False), ("lora_name", False),
]
SGLANG_REMOVED = [("block_hashes", True), ("medium", False)]


def encode_array_event(tag, fields, values, generation, extra_trailing=()):
    """Array-tagged event: tag, the first `generation` fields (None as nil), then extras."""
    items = [tag] + [values.get(name) for name, _ in fields[:generation]] + list(extra_trailing)
    return pack(items)


def encode_map_event(tag, fields, values, extra=()):
    """Map-tagged event: "type" first, required fields always, defaults omitted when None."""
    pairs = [("type", tag)]
    for name, required in fields:
        value = values.get(name)
        if value is None and not required:
            continue
        pairs.append((name, value))
    pairs.extend(extra)
    if len(fields) + 1 > 15:
        header = b"\xde" + struct.pack(">H", len(pairs))
    else:
        header = pack({k: None for k, _ in pairs})[:1]  # fixmap with the right count
    return header + b"".join(pack(k) + pack(v) for k, v in pairs)


def envelope(ts, encoded_events, dp_rank=MISSING):
    """`[ts, events]` or `[ts, events, dp_rank]` with already encoded events."""
    n = 2 if dp_rank is MISSING else 3
    out = bytes([0x90 | n]) + pack(float(ts))
    count = len(encoded_events)
    out += bytes([0x90 | count]) if count < 16 else b"\xdc" + struct.pack(">H", count)
    out += b"".join(encoded_events)
    if dp_rank is not MISSING:
        out += pack(dp_rank)
    return out


# --- shared content -------------------------------------------------------------------------
# Chain A: tokens 1..8 in two blocks of 4, then tokens 9..12 continuing it; block hashes use
# the published sha256_cbor test vectors of docs/engine-events.md and edge values.
H1, H2, H3 = 8866452693264111234, 807986237951177663, 2**64 - 1
NEG = -8070450532247928832  # a Python hash() of vLLM <= 0.10.1 (negative int64)


def stored_a(**more):
    values = dict(block_hashes=[H1, H2], parent_block_hash=None, token_ids=list(range(1, 9)),
                  block_size=4, lora_id=None, medium="GPU", lora_name=None)
    values.update(more)
    return values


def stored_b(**more):
    values = dict(block_hashes=[H3], parent_block_hash=H2, token_ids=[9, 10, 11, 12],
                  block_size=4, lora_id=None, medium="GPU", lora_name=None)
    values.update(more)
    return values


def removed_a(**more):
    values = dict(block_hashes=[H1], medium="GPU")
    values.update(more)
    return values


def vllm_array_generation(stored_gen, removed_gen, dp_rank=0):
    extra = {}
    if stored_gen >= 9:
        extra["extra_keys"] = [None, None]
    if stored_gen >= 10:
        extra["group_idx"] = 0
    if stored_gen >= 12:
        extra["kv_cache_spec_kind"] = "full_attention"
    events = [
        encode_array_event("BlockStored", VLLM_STORED, stored_a(**extra), stored_gen - 1),
        encode_array_event("BlockStored", VLLM_STORED, stored_b(), stored_gen - 1),
        encode_array_event("BlockRemoved", VLLM_REMOVED, removed_a(group_idx=0), removed_gen - 1),
        pack(["AllBlocksCleared"]),
    ]
    return envelope(1.5, events, dp_rank)


def fixtures():
    out = {}
    # vLLM before ~0.9.1: 6-field stores, 2-field removals, 2-element envelope, hash() ints.
    out["vllm_array_gen6_env2"] = envelope(1.25, [
        encode_array_event("BlockStored", VLLM_STORED,
                           stored_a(block_hashes=[NEG, 42]), 5),
        encode_array_event("BlockStored", VLLM_STORED,
                           stored_b(parent_block_hash=42, block_hashes=[-1]), 5),
        encode_array_event("BlockRemoved", VLLM_REMOVED, removed_a(block_hashes=[NEG]), 1),
        pack(["AllBlocksCleared"]),
    ])
    out["vllm_array_gen7"] = vllm_array_generation(7, 3)
    # gen 8 adds lora_name: one LoRA store of its own chain.
    out["vllm_array_gen8_lora"] = envelope(2.0, [
        encode_array_event("BlockStored", VLLM_STORED,
                           stored_a(lora_id=3, lora_name="adapter-a"), 7),
        encode_array_event("BlockRemoved", VLLM_REMOVED, removed_a(), 2),
    ], 1)
    out["vllm_array_gen9"] = vllm_array_generation(9, 3)
    out["vllm_array_gen10"] = vllm_array_generation(10, 4)
    out["vllm_array_gen12"] = vllm_array_generation(12, 4)
    # A future generation: longer arrays than any known one (trailing fields ignored).
    out["vllm_array_longer"] = envelope(3.0, [
        encode_array_event("BlockStored", VLLM_STORED, stored_a(), 7,
                           extra_trailing=[None, 0, "full_attention", None, "LOCAL", None,
                                           "sess", None, "future", 99]),
        encode_array_event("BlockRemoved", VLLM_REMOVED, removed_a(), 5,
                           extra_trailing=["future"]),
    ], 0)
    # vLLM 0.26 map encoding (kind added, no 0.33 fields).
    out["vllm_map_0_26"] = envelope(4.5, [
        encode_map_event("BlockStored", VLLM_STORED[:11],
                         stored_a(extra_keys=[None, None], group_idx=0,
                                  kv_cache_spec_kind="full_attention")),
        encode_map_event("BlockStored", VLLM_STORED[:11], stored_b(group_idx=0)),
        encode_map_event("BlockRemoved", VLLM_REMOVED[:3], removed_a(group_idx=0)),
        encode_map_event("AllBlocksCleared", [], {}),
    ], 0)
    # vLLM 0.33, VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0: 32-byte digests as bin; every
    # optional field; a multimodal store, an offloaded CPU store, a sliding-window group,
    # an unknown event tag and an unknown field.
    d1 = bytes(range(32))
    d2 = bytes(range(100, 132))
    out["vllm_map_0_33_full"] = envelope(5.75, [
        encode_map_event("BlockStored", VLLM_STORED, stored_a(
            block_hashes=[d1, d2], extra_keys=[None, None], group_idx=0,
            kv_cache_spec_kind="full_attention", locality="LOCAL", session_id="s-1"),
            extra=[("future_field", [1, 2, 3])]),
        encode_map_event("BlockStored", VLLM_STORED, dict(
            block_hashes=[77], parent_block_hash=None, token_ids=[5, 5, 5, 5], block_size=4,
            lora_id=None, medium="GPU", lora_name=None,
            extra_keys=[[["mmhash-1", -2], "salt-x", b"\x01" * 32]],
            group_idx=0, kv_cache_spec_kind="full_attention")),
        encode_map_event("BlockStored", VLLM_STORED, stored_b(
            block_hashes=[88], parent_block_hash=None, medium="cpu", ownership="tier-2")),
        encode_map_event("BlockStored", VLLM_STORED, stored_b(
            block_hashes=[99], parent_block_hash=None, group_idx=1,
            kv_cache_spec_kind="sliding_window", kv_cache_spec_sliding_window=128,
            lookahead_token_ids=[[13, 14]])),
        encode_map_event("BlockUpdated", [], {}, extra=[("block_hashes", [1])]),
        encode_map_event("BlockRemoved", VLLM_REMOVED, dict(
            block_hashes=[d1], medium="GPU", group_idx=0, locality="LOCAL", ownership="o")),
    ], 3)
    # The annotated example of docs/engine-events.md, byte for byte.
    out["vllm_annotated_0_33"] = envelope(1.5, [
        encode_map_event("BlockStored", VLLM_STORED, dict(
            block_hashes=[2**64 - 1], parent_block_hash=None, token_ids=[1, 2, 3, 4],
            block_size=4, lora_id=None, medium="GPU", lora_name=None, extra_keys=[None],
            group_idx=0, kv_cache_spec_kind="full_attention")),
        encode_map_event("BlockRemoved", VLLM_REMOVED,
                         dict(block_hashes=[7], medium="GPU", group_idx=0)),
        encode_map_event("AllBlocksCleared", [], {}),
    ], 0)
    # Its old array form (12-field generation), as printed in docs/engine-events.md.
    out["vllm_annotated_array_gen12"] = envelope(1.5, [
        encode_array_event("BlockStored", VLLM_STORED, dict(
            block_hashes=[2**64 - 1], parent_block_hash=None, token_ids=[1, 2, 3, 4],
            block_size=4, lora_id=None, medium="GPU", lora_name=None, extra_keys=[None],
            group_idx=0, kv_cache_spec_kind="full_attention"), 11),
    ], 0)
    # The map envelope one main-branch commit had.
    out["vllm_map_envelope"] = (
        b"\x83" + pack("ts") + pack(6.0) + pack("events") + b"\x92"
        + encode_map_event("BlockStored", VLLM_STORED, stored_a())
        + pack(["AllBlocksCleared"])
        + pack("data_parallel_rank") + pack(2))
    # SGLang 0.5.23: tagged maps, signed first-8-bytes hashes, its own optional fields.
    out["sglang_map"] = envelope(7.5, [
        encode_map_event("BlockStored", SGLANG_STORED, stored_a(
            block_hashes=[NEG, -2], medium="GPU", session_id="sess-9")),
        encode_map_event("BlockStored", SGLANG_STORED, stored_b(
            block_hashes=[-3], parent_block_hash=-2, medium=None)),
        encode_map_event("BlockStored", SGLANG_STORED, stored_b(
            block_hashes=[-4], parent_block_hash=None, medium="CPU_PINNED")),
        encode_map_event("BlockStored", SGLANG_STORED, stored_b(
            block_hashes=[-5], parent_block_hash=None, cache_salt="salty")),
        encode_map_event("BlockRemoved", SGLANG_REMOVED, dict(block_hashes=[NEG])),
        encode_map_event("AllBlocksCleared", [], {}),
    ], 1)
    # Older SGLang: positional arrays (cache_salt, session_id, lora_name after medium).
    out["sglang_array"] = envelope(8.0, [
        encode_array_event("BlockStored", SGLANG_STORED, stored_a(
            block_hashes=[NEG, -2], lora_id=5, lora_name="sg-lora", session_id="sess-1"), 9),
        encode_array_event("BlockRemoved", SGLANG_REMOVED, dict(
            block_hashes=[-2], medium="GPU"), 2),
    ], 0)
    # TensorRT-LLM's vLLM-compatible publisher: vLLM envelope, map events, locality.
    out["trtllm_map"] = envelope(9.25, [
        encode_map_event("BlockStored", VLLM_STORED, stored_a(locality="LOCAL")),
        encode_map_event("BlockStored", VLLM_STORED, stored_b(locality="LOCAL")),
        encode_map_event("BlockRemoved", VLLM_REMOVED, removed_a(locality="LOCAL")),
    ], 0)
    return out


# The annotated payload as printed in the "Annotated example" of docs/engine-events.md.
ANNOTATED_HEX = (
    "93 cb3ff8000000000000 93"
    " de000b a474797065 ab426c6f636b53746f726564"
    " ac626c6f636b5f686173686573 91 cfffffffffffffffff"
    " b1706172656e745f626c6f636b5f68617368 c0"
    " a9746f6b656e5f696473 94 01020304"
    " aa626c6f636b5f73697a65 04"
    " a76c6f72615f6964 c0"
    " a66d656469756d a3475055"
    " a96c6f72615f6e616d65 c0"
    " aa65787472615f6b657973 91 c0"
    " a967726f75705f696478 00"
    " b26b765f63616368655f737065635f6b696e64 ae66756c6c5f617474656e74696f6e"
    " 84 a474797065 ac426c6f636b52656d6f766564 ac626c6f636b5f686173686573 91 07"
    " a66d656469756d a3475055 a967726f75705f696478 00"
    " 81 a474797065 b0416c6c426c6f636b73436c6561726564"
    " 00"
)
# The old array form of the same BlockStored (12-field generation), section 2.9.
ANNOTATED_ARRAY_EVENT_HEX = (
    "9c ab426c6f636b53746f726564 91 cfffffffffffffffff c0 94 01020304 04 c0 a3475055 c0"
    " 91 c0 00 ae66756c6c5f617474656e74696f6e c0"
)


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.join(root, "tests", "fixtures", "engine"))
    args = parser.parse_args()
    payloads = fixtures()
    annotated = bytes.fromhex(ANNOTATED_HEX.replace(" ", ""))
    if payloads["vllm_annotated_0_33"] != annotated:
        sys.exit("generator drifted from docs/engine-events.md's annotated payload")
    old = bytes.fromhex(ANNOTATED_ARRAY_EVENT_HEX.replace(" ", ""))
    if old not in payloads["vllm_annotated_array_gen12"]:
        sys.exit("generator drifted from docs/engine-events.md's old array form")
    os.makedirs(args.out, exist_ok=True)
    for name, payload in sorted(payloads.items()):
        msgpack.unpackb(payload, raw=False, strict_map_key=False)  # well-formed
        with open(os.path.join(args.out, name + ".msgpack"), "wb") as f:
            f.write(payload)
    print(f"wrote {len(payloads)} fixtures to {args.out}")


if __name__ == "__main__":
    main()
