#!/usr/bin/env python3
"""End-to-end test on loopback: two engine publishers (pyzmq, DP ranks 0 and 1) send vLLM
0.33 map-encoded batches over the 3-frame ZMQ protocol, with a deliberate gap on each and a
publisher restart on rank 1; each has a ROUTER replay socket (rank 0 answers in the >= 0.26
layout with topic, rank 1 in the older layout). The subscriber example must replay the gaps,
clear rank 1 on the restart, and answer the queries as expected.

With --no-replay the subscriber gets no replay endpoints: it must fall back to clearing the
worker on each gap (the recommended reaction without replay), which loses chain Y on rank 0.

With --hostile the endpoints misbehave: rank 0's PUB port first answers raw TCP junk, then
completes a ZMTP handshake and announces a 1 TiB frame, before the publisher binds it; its
replay socket never ends its reply. The subscriber must connect again each time (without
allocating the announced frame), give up the endless replay at --replay-max-batches (clearing
the worker) and keep applying live batches.

With --soak SECONDS (opt-in) the replay socket streams 199-block batches without an end for
that long; the subscriber's peak RSS must stay under 128 MiB (a 32 MiB reply cap) while it
keeps failing and re-requesting replays. (Before replies were bounded: 2.5 GiB in 10 s.)

Usage: python3 e2e.py PATH/TO/kvidx-zmq-subscriber [--no-replay | --hostile | --soak SECONDS]
"""

import json
import os
import socket
import subprocess
import sys
import threading
import time

try:
    import zmq
except ImportError:
    sys.exit("e2e.py needs pyzmq and msgpack: run bash scripts/setup.sh (Debian's python3-zmq "
             "and python3-msgpack), or use the Python that scripts/python.sh prints")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
from gen_engine_fixtures import (  # noqa: E402  (after the path tweak)
    VLLM_REMOVED, VLLM_STORED, encode_map_event, envelope)

TOPIC = b"kv@10.0.0.7:8000@llama"
BLOCK = 16
END_SEQ = b"\xff" * 8


def stored(hashes, first_token, parent=None):
    tokens = list(range(first_token, first_token + BLOCK * len(hashes)))
    return encode_map_event("BlockStored", VLLM_STORED, dict(
        block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=BLOCK,
        lora_id=None, medium="GPU", lora_name=None, group_idx=0,
        kv_cache_spec_kind="full_attention"))


def removed(hashes):
    return encode_map_event("BlockRemoved", VLLM_REMOVED,
                            dict(block_hashes=hashes, medium="GPU", group_idx=0))


def batch(rank, *events):
    return envelope(time.time(), list(events), rank)


class Publisher:
    """A PUB (XPUB, to see the subscription arrive) plus a ROUTER replay socket."""

    def __init__(self, ctx, rank, new_replay_layout):
        self.rank = rank
        self.new_layout = new_replay_layout
        self.pub = ctx.socket(zmq.XPUB)
        self.pub_port = self.pub.bind_to_random_port("tcp://127.0.0.1")
        self.router = ctx.socket(zmq.ROUTER)
        self.replay_port = self.router.bind_to_random_port("tcp://127.0.0.1")
        self.seq = 0
        self.buffer = []  # (seq, payload), like vLLM's replay buffer
        self.subscribed = False

    def publish(self, payload, drop=False):
        """Buffers the batch; sends it live unless `drop` (the deliberate gap)."""
        seq = self.seq.to_bytes(8, "big")
        self.buffer.append((self.seq, payload))
        if not drop:
            self.pub.send_multipart([TOPIC, seq, payload])
        self.seq += 1

    def restart(self):
        """A new engine process: sequence from 0, empty replay buffer."""
        self.seq = 0
        self.buffer = []

    def service(self):
        """Answers replay requests and notes subscriptions."""
        while self.pub.poll(0):
            if self.pub.recv().startswith(b"\x01"):
                self.subscribed = True
        while self.router.poll(0):
            frames = self.router.recv_multipart()
            identity, start = frames[0], int.from_bytes(frames[-1], "big")
            for seq, payload in self.buffer:
                if seq >= start:
                    body = [TOPIC] if self.new_layout else []
                    self.router.send_multipart(
                        [identity, b""] + body + [seq.to_bytes(8, "big"), payload])
            end = [b"", END_SEQ, b""] if self.new_layout else [END_SEQ, b""]
            self.router.send_multipart([identity, b""] + end)


def hostile(subscriber):
    """Raw TCP junk on the PUB port, then a real publisher; an endless replay reply."""
    ctx = zmq.Context()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    junk_served = []

    def serve_junk():
        conn, _ = listener.accept()  # raw TCP junk
        conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n\xff\x00junk")
        conn.close()
        conn, _ = listener.accept()  # a ZMTP 3.0 PUB handshake, then a 1 TiB frame header
        conn.sendall(b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" * 32)
        ready = b"\x05READY\x0bSocket-Type" + (3).to_bytes(4, "big") + b"PUB"
        conn.sendall(b"\x04" + bytes([len(ready)]) + ready)
        conn.sendall(b"\x02" + (1 << 40).to_bytes(8, "big") + b"x" * 64)
        time.sleep(0.5)
        conn.close()
        junk_served.append(1)
        listener.close()

    junk = threading.Thread(target=serve_junk, daemon=True)
    junk.start()
    router = ctx.socket(zmq.ROUTER)
    replay_port = router.bind_to_random_port("tcp://127.0.0.1")
    cmd = [subscriber, "--worker-id", "7", "--format", "vllm", "--topic", "kv@",
           "--block-size", str(BLOCK), "--idle-ms", "3000", "--max-seconds", "30",
           "--replay-max-batches", "100", "--endpoint", f"tcp://127.0.0.1:{port}",
           "--replay", f"tcp://127.0.0.1:{replay_port}", "--query", "X=1-48", "--query", "W=301-348"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    junk.join(timeout=20)
    if junk.is_alive():
        proc.kill()
        sys.exit("e2e: the subscriber did not connect again after the junk")
    pub = ctx.socket(zmq.XPUB)
    pub.bind(f"tcp://127.0.0.1:{port}")
    endless = batch(0, stored([9001], 501))
    deadline = time.time() + 20
    subscribed = False
    while not subscribed:
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("e2e: the subscriber never subscribed after the junk")
        if pub.poll(50) and pub.recv().startswith(b"\x01"):
            subscribed = True
    time.sleep(0.2)
    replies = 0

    def pump(seconds):
        nonlocal replies
        end = time.time() + seconds
        while time.time() < end:
            while router.poll(0):
                identity = router.recv_multipart()[0]
                for seq in range(20000):  # no end marker: the subscriber must stop reading
                    try:
                        router.send_multipart([identity, b"", TOPIC, seq.to_bytes(8, "big"),
                                               endless], zmq.NOBLOCK)
                    except zmq.Again:
                        break
                replies += 1
            time.sleep(0.005)

    def send(seq, payload):
        pub.send_multipart([TOPIC, seq.to_bytes(8, "big"), payload])
        pump(0.2)

    send(0, batch(0, stored([1001, 1002], 1)))
    send(1, batch(0, stored([1003], 33, parent=1002)))
    send(3, batch(0, stored([5001, 5002], 301)))  # seq 2 lost: gap, endless replay, cleared
    send(4, batch(0, stored([5003], 333, parent=5002)))
    out, _ = proc.communicate(timeout=30)
    if proc.returncode != 0:
        sys.exit(f"e2e: subscriber exited with {proc.returncode}")
    summary = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(summary))
    r0 = summary["publishers"][0]
    answers = {q["name"]: q["matches"] for q in summary["queries"]}
    checks = [
        ("connect failures >= 1 (junk)", r0["connect_failures"] >= 1),
        ("connects >= 2 (the huge frame's, the publisher's)", r0["connects"] >= 2),
        ("disconnects >= 1 (the huge frame)", r0["disconnects"] >= 1),
        ("one gap", r0["gaps_detected"] == 1),
        ("one replay request", replies == 1),
        ("the endless replay failed", r0["replay_failures"] == 1 and r0["replayed"] == 0),
        ("the worker was cleared", r0["cleared"] == 1),
        ("4 batches applied", r0["batches"] == 4),
        ("X cleared with the worker", answers["X"] == []),
        ("W applied after the failed replay", answers["W"] == [[7, 0, 3]]),
    ]
    failures = [name for name, ok in checks if not ok]
    if failures:
        print("failed: " + ", ".join(failures))
    print(f"e2e hostile: {len(checks) - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


def rss_kib(pid):
    """The process's resident set in KiB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def soak(subscriber, seconds):
    """An endless replay reply for `seconds`: memory must stay bounded."""
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
    router = ctx.socket(zmq.ROUTER)
    replay_port = router.bind_to_random_port("tcp://127.0.0.1")
    cmd = [subscriber, "--worker-id", "7", "--format", "vllm", "--topic", "kv@",
           "--endpoint", f"tcp://127.0.0.1:{pub_port}", "--replay", f"tcp://127.0.0.1:{replay_port}",
           "--replay-max-bytes", str(32 << 20), "--idle-ms", str(int(seconds * 1000) + 5000),
           "--max-seconds", str(int(seconds) + 3)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.time() + 20
    while not (pub.poll(100) and pub.recv().startswith(b"\x01")):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("e2e soak: the subscriber never subscribed")
    payload = batch(0, stored(list(range(1, 200)), 1))
    seq = 0
    peak = sent = requests = 0
    identity = None
    end = time.time() + seconds
    last_rss = 0.0
    while time.time() < end and proc.poll() is None:
        if time.time() - last_rss > 0.5:  # a gap every half second: a new replay request
            pub.send_multipart([TOPIC, seq.to_bytes(8, "big"), payload])
            seq += 2
            peak, last_rss = max(peak, rss_kib(proc.pid)), time.time()
        while router.poll(0):
            identity = router.recv_multipart()[0]
            requests += 1
        if identity is not None:
            try:
                router.send_multipart([identity, b"", TOPIC, sent.to_bytes(8, "big"), payload],
                                      zmq.NOBLOCK)
                sent += 1
            except zmq.Again:
                time.sleep(0.001)
    peak = max(peak, rss_kib(proc.pid))
    out, _ = proc.communicate(timeout=30)
    summary = json.loads(out.strip().splitlines()[-1])
    r0 = summary["publishers"][0]
    print(f"e2e soak: {seconds:g} s, {sent} replayed batches of {len(payload)} bytes sent, "
          f"{requests} replay requests, {r0['replay_failures']} failed, peak RSS {peak / 1024:.1f} MiB")
    ok = proc.returncode == 0 and r0["replay_failures"] >= 1 and 0 < peak < 128 * 1024
    print(f"e2e soak: {'passed' if ok else 'FAILED'}")
    sys.exit(0 if ok else 1)


def main():
    subscriber = sys.argv[1]
    if "--hostile" in sys.argv[2:]:
        hostile(subscriber)
    if "--soak" in sys.argv[2:]:
        soak(subscriber, float(sys.argv[sys.argv.index("--soak") + 1]))
    replay = "--no-replay" not in sys.argv[2:]
    ctx = zmq.Context()
    p0 = Publisher(ctx, 0, new_replay_layout=True)
    p1 = Publisher(ctx, 1, new_replay_layout=False)
    queries = {"X": (1, 48), "Y": (101, 148), "Z": (201, 232), "W": (301, 348)}
    cmd = [subscriber, "--worker-id", "7", "--format", "vllm", "--topic", "kv@",
           "--block-size", str(BLOCK), "--idle-ms", "3000", "--max-seconds", "30"]
    for p in (p0, p1):
        cmd += ["--endpoint", f"tcp://127.0.0.1:{p.pub_port}",
                "--replay", f"tcp://127.0.0.1:{p.replay_port}" if replay else "-"]
    for name, (a, b) in queries.items():
        cmd += ["--query", f"{name}={a}-{b}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)

    def pump(seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for p in (p0, p1):
                p.service()
            time.sleep(0.005)

    deadline = time.time() + 20
    while not (p0.subscribed and p1.subscribed):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            sys.exit("e2e: the subscriber never subscribed")
        pump(0.05)
    pump(0.2)
    steps = [
        # rank 0: chain X (3 blocks), then chain Y whose first batch is lost live.
        lambda: p0.publish(batch(0, stored([1001, 1002], 1))),
        lambda: p0.publish(batch(0, stored([1003], 33, parent=1002))),
        lambda: p0.publish(batch(0, stored([2001, 2002], 101)), drop=True),
        lambda: p0.publish(batch(0, stored([2003], 133, parent=2002))),
        lambda: p0.publish(batch(0, removed([1003]))),
        # rank 1: X and Z; the removal of X's third block is lost live.
        lambda: p1.publish(batch(1, stored([3001, 3002, 3003], 1))),
        lambda: p1.publish(batch(1, stored([4001], 201))),
        lambda: p1.publish(batch(1, removed([3003])), drop=True),
        lambda: p1.publish(batch(1, stored([4002], 217, parent=4001))),
        # rank 1 restarts: its cache is empty; it stores chain W.
        lambda: p1.restart(),
        lambda: p1.publish(batch(1, stored([5001, 5002], 301))),
        lambda: p1.publish(batch(1, stored([5003], 333, parent=5002))),
    ]
    for step in steps:
        step()
        pump(0.1)
    out, _ = proc.communicate(timeout=30)
    if proc.returncode != 0:
        sys.exit(f"e2e: subscriber exited with {proc.returncode}")
    summary = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(summary))

    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append(f"{what}: got {got}, want {want}")

    answers = {q["name"]: q["matches"] for q in summary["queries"]}
    r0, r1 = summary["publishers"]
    if replay:
        want_answers = {"X": [[7, 0, 2]],  # rank 0 removed X2; rank 1 restarted (cleared)
                        "Y": [[7, 0, 3]],  # needs the replayed batch
                        "Z": [],           # rank 1 restarted
                        "W": [[7, 1, 3]]}
        want0 = dict(gaps_detected=1, replayed=2, gaps=0, restarts=0, cleared=0, batches=5,
                     events_rejected=0, malformed=0)
        want1 = dict(gaps_detected=1, replayed=2, gaps=0, restarts=1, cleared=1, batches=6,
                     events_rejected=0, malformed=0)
    else:
        # Each gap clears the worker; the next stores then miss their parents (Y2, Z1).
        want_answers = {"X": [], "Y": [], "Z": [], "W": [[7, 1, 3]]}
        want0 = dict(gaps_detected=1, replayed=0, gaps=1, missed=1, restarts=0, cleared=1,
                     batches=4, malformed=0)
        want1 = dict(gaps_detected=1, replayed=0, gaps=1, missed=1, restarts=1, cleared=2,
                     batches=5, events_rejected=0, malformed=0)
    # Pooled indexer: rejections and unknown removals show in the index's own counters.
    want_index = dict(events_rejected=0 if replay else 2, unknown_removals=0 if replay else 1,
                      workers=2, worker_blocks=8 if replay else 3)
    for key, value in want_index.items():
        expect(f"index {key}", summary["index"][key], value)
    for name, want in want_answers.items():
        expect(f"query {name}", answers[name], want)
    for rank, (got, want) in enumerate([(r0, want0), (r1, want1)]):
        for key, value in want.items():
            expect(f"rank {rank} {key}", got[key], value)
    total = len(want_index) + len(want_answers) + len(want0) + len(want1)
    if failures:
        print("\n".join(failures))
    print(f"e2e: {total - len(failures)} passed, {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
