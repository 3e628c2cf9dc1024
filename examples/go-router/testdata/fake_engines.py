#!/usr/bin/env python3
"""Fake inference engines for the chain test (TestChainEnginesBridgeReplicas in chain_test.go):
N engine publishers on loopback, each a libzmq (pyzmq) socket sending vLLM's 3-frame KV-event
message: topic, the 8-byte big-endian sequence number, the msgpack batch.

Usage: python3 fake_engines.py BATCHES N

BATCHES holds the batches to send, in sending order, each as a record: engine index (u32
big-endian, 0..N-1), sequence number (u64 big-endian), payload length (u32 big-endian), the
payload (written by the Go test, which made the payloads from a bench workload).

Protocol on stdout, one JSON object per line:
  {"endpoints": [...]}   the N tcp:// endpoints, bound on 127.0.0.1 (random ports)
  {"subscribed": [...]}  every engine has seen its subscriber's subscription; sending starts
  {"sent": [...], "seconds": S}  batches sent per engine, and the time the sending took
Then it waits for stdin to close (the test has read the stream back) and exits.

Slow joiners: a ZMQ PUB drops what it sends before a subscriber's subscription has reached
it. The sockets are XPUBs (a PUB that also hands the application the subscriptions it gets;
the same ZMTP wire, which the bridge accepts like vLLM's PUB), so each engine waits until its
subscriber has subscribed and sends nothing before: no batch is lost to the start-up race.
"""

import json
import struct
import sys
import time

try:
    import zmq
except ImportError:
    sys.exit("fake_engines.py needs pyzmq: run bash scripts/setup.sh (Debian's python3-zmq), "
             "or use the Python that scripts/python.sh prints")

TOPIC = b"kv@127.0.0.1:8000@fake-model"
HWM = 100_000  # vLLM's send high-water mark for its KV-event PUB
SUBSCRIBE_TIMEOUT_S = 60


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def read_batches(path, n):
    with open(path, "rb") as f:
        data = f.read()
    out, at = [], 0
    while at < len(data):
        engine, seq, size = struct.unpack_from(">IQI", data, at)
        at += 16
        if engine >= n or at + size > len(data):
            sys.exit(f"fake_engines.py: bad record at byte {at - 16} of {path}")
        out.append((engine, seq, data[at:at + size]))
        at += size
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n = int(sys.argv[2])
    batches = read_batches(sys.argv[1], n)
    ctx = zmq.Context()
    sockets, endpoints = [], []
    for _ in range(n):
        s = ctx.socket(zmq.XPUB)
        s.setsockopt(zmq.SNDHWM, HWM)
        s.setsockopt(zmq.LINGER, 0)
        port = s.bind_to_random_port("tcp://127.0.0.1")
        sockets.append(s)
        endpoints.append(f"tcp://127.0.0.1:{port}")
    say({"endpoints": endpoints})

    # Wait for one subscription on every engine (first byte 1 = subscribe, then the prefix).
    poller = zmq.Poller()
    for s in sockets:
        poller.register(s, zmq.POLLIN)
    subscribed = [None] * n
    deadline = time.monotonic() + SUBSCRIBE_TIMEOUT_S
    while None in subscribed:
        left = deadline - time.monotonic()
        if left <= 0:
            sys.exit(f"fake_engines.py: no subscription after {SUBSCRIBE_TIMEOUT_S} s: {subscribed}")
        for s, _ in poller.poll(timeout=int(left * 1000) + 1):
            msg = s.recv()
            if msg[:1] == b"\x01" and TOPIC.startswith(msg[1:]):
                subscribed[sockets.index(s)] = msg[1:].decode(errors="replace")
    say({"subscribed": subscribed})

    sent = [0] * n
    start = time.monotonic()
    for engine, seq, payload in batches:
        sockets[engine].send_multipart([TOPIC, struct.pack(">Q", seq), payload], copy=False)
        sent[engine] += 1
    say({"sent": sent, "seconds": time.monotonic() - start})

    sys.stdin.read()  # until the test closes it
    for s in sockets:
        s.close()
    ctx.term()


if __name__ == "__main__":
    main()
