#!/usr/bin/env python3
"""An engine's KV-event side, made of vLLM's own publisher: `ZmqEventPublisher` from
`vllm/distributed/kv_events.py` of the installed `vllm` wheel (scripts/vllm-venv.sh), one per
DP rank, with its replay socket. Only the imports that would pull in the rest of vLLM (torch,
its configuration, its logger) are replaced by small stand-ins; the publisher class, its
sequence numbering, its msgspec encoding, its PUB and ROUTER sockets and its replay buffer
are vLLM's.

Usage: python vllm_engine.py --endpoint tcp://*:5557 --replay tcp://*:5567 [--ranks 2]
    [--topic kv@pod@model] [--hash-base 1000] [--rank-token-offset 0]

Rank r binds `endpoint` and `replay` with the port + r (vLLM's own offset). Then it reads
commands from stdin, one a line, and answers each on stdout once done:
    publish RANK    -> "sent RANK SEQ HASH": the next block of rank RANK's chain (one
                       BlockStored of 16 tokens whose block hash is hash-base + 1000 * RANK +
                       SEQ, its parent the previous block), handed to the socket; block SEQ's
                       tokens are rank-token-offset * RANK + 16 * SEQ + 1 .. + 16
    exit            -> shuts the publishers down and exits 0
It prints "ready" once every socket is bound.
"""

import argparse
import dataclasses
import importlib.util
import logging
import os
import sys
import types


def stand_in(name, **attributes):
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__path__ = []  # a package, so that submodules can be registered under it
    sys.modules[name] = module
    return module


@dataclasses.dataclass
class KVEventsConfig:
    """What vllm.config.kv_events.KVEventsConfig holds (the publisher only stores it)."""

    enable_kv_cache_events: bool = False
    publisher: str = "null"
    endpoint: str = "tcp://*:5557"
    replay_endpoint: str | None = None
    buffer_steps: int = 10_000
    hwm: int = 100_000
    max_queue_size: int = 100_000
    topic: str = ""


def load_kv_events():
    """vllm.distributed.kv_events from the installed wheel, its heavy imports stood in for."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("vllm_engine.py: the vllm wheel is not installed: run bash scripts/vllm-venv.sh "
                 "and use the Python it prints")
    root = list(spec.submodule_search_locations)[0]
    path = os.path.join(root, "distributed", "kv_events.py")
    stand_in("vllm")
    stand_in("vllm.config")
    stand_in("vllm.config.kv_events", KVEventsConfig=KVEventsConfig)
    stand_in("vllm.logger", init_logger=logging.getLogger)
    stand_in("vllm.utils")
    stand_in("vllm.utils.network_utils", get_ip=lambda: "127.0.0.1",
             get_tcp_uri=lambda ip, port: f"tcp://{ip}:{port}",
             is_valid_ipv6_address=lambda ip: ":" in ip,
             split_zmq_path=lambda path: tuple(path.replace("//", "").split(":")))
    stand_in("vllm.v1")
    stand_in("vllm.v1.core")
    stand_in("vllm.v1.core.kv_cache_utils", ExternalBlockHash=bytes | int)
    stand_in("vllm.distributed")
    spec = importlib.util.spec_from_file_location("vllm.distributed.kv_events", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module, path


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--replay", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--topic", default="kv@10.0.0.7:8000@llama")
    parser.add_argument("--hash-base", type=int, default=1000)
    parser.add_argument("--rank-token-offset", type=int, default=0)
    args = parser.parse_args()
    kv, path = load_kv_events()
    print(f"vllm_engine.py: {kv.ZmqEventPublisher.__module__} from {path}", file=sys.stderr)
    publishers = [
        kv.ZmqEventPublisher(data_parallel_rank=rank, endpoint=args.endpoint,
                             replay_endpoint=args.replay, topic=args.topic)
        for rank in range(args.ranks)
    ]
    parents = [None] * args.ranks
    sent = [0] * args.ranks
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if words == ["exit"]:
            break
        if len(words) != 2 or words[0] != "publish":
            sys.exit(f"vllm_engine.py: unknown command {line!r}")
        rank = int(words[1])
        block = args.hash_base + 1000 * rank + sent[rank]
        first = args.rank_token_offset * rank + 16 * sent[rank] + 1
        tokens = list(range(first, first + 16))
        stored = kv.BlockStored(block_hashes=[block], parent_block_hash=parents[rank],
                                token_ids=tokens, block_size=16, lora_id=None, medium="GPU",
                                lora_name=None)
        publisher = publishers[rank]
        publisher.publish(kv.KVEventBatch(ts=1.0 + sent[rank], events=[stored]))
        publisher._event_queue.join()  # the publisher thread has sent it (and buffered it)
        print(f"sent {rank} {sent[rank]} {block}", flush=True)
        parents[rank] = block
        sent[rank] += 1
    for publisher in publishers:
        publisher.shutdown()


if __name__ == "__main__":
    main()
