"""Engine payloads for the tests: a minimal msgpack writer and vLLM's array-tagged events."""

import struct
from typing import List, Optional, Sequence, Union

Value = Union[None, bool, int, float, str, bytes, Sequence["Value"]]


def pack(value: Value) -> bytes:
    """The msgpack encoding of nil, bools, ints, floats, strings, bytes and arrays."""
    if value is None:
        return b"\xc0"
    if value is True or value is False:
        return b"\xc3" if value else b"\xc2"
    if isinstance(value, int):
        if 0 <= value < 128:
            return bytes([value])
        if value >= 0:
            return b"\xcf" + struct.pack(">Q", value)
        return b"\xd3" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"\xcb" + struct.pack(">d", value)
    if isinstance(value, str):
        data = value.encode()
        return b"\xd9" + bytes([len(data)]) + data if len(data) < 256 else b"\xda" + struct.pack(">H", len(data)) + data
    if isinstance(value, bytes):
        return b"\xc4" + bytes([len(value)]) + value
    items = list(value)
    return b"\xdd" + struct.pack(">I", len(items)) + b"".join(pack(v) for v in items)


def stored(block_hashes: List[int], parent: Optional[int], tokens: List[int], block_size: int) -> List[Value]:
    """A vLLM BlockStored event (array-tagged, six fields: GPU medium, no LoRA)."""
    return ["BlockStored", block_hashes, parent, tokens, block_size, None, "GPU"]


def removed(block_hashes: List[int]) -> List[Value]:
    """A vLLM BlockRemoved event on the GPU."""
    return ["BlockRemoved", block_hashes, "GPU"]


def batch(*events: List[Value]) -> bytes:
    """A KVEventBatch envelope `[ts, events]`."""
    return pack([1.5, list(events)])
