"""The router end to end: a fake engine publishes vLLM batches on a ZMQ socket, the router
(a child process) applies them and routes requests over HTTP."""

import json
import pathlib
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Dict, Iterator

import pytest
import zmq

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "bindings" / "python" / "tests"))
from payloads import batch, stored  # noqa: E402

BLOCK = 4
TOKENS = list(range(100, 116))


@pytest.fixture
def engine() -> Iterator[zmq.Socket]:  # type: ignore[type-arg]
    context = zmq.Context()
    socket = context.socket(zmq.XPUB)  # XPUB: the router's subscription is seen arriving
    socket.bind("tcp://127.0.0.1:*")
    yield socket
    socket.close(linger=0)
    context.term()


def post(base: str, path: str, body: bytes) -> Any:
    request = urllib.request.Request(base + path, data=body, method="POST")
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def metrics(base: str) -> Dict[str, int]:
    with urllib.request.urlopen(base + "/metrics") as response:
        text = response.read().decode()
    return {name: int(value) for name, value in (line.split() for line in text.splitlines())}


def wait_for_batches(base: str, count: int) -> None:
    """Until the router's feed has taken `count` batches (a watchdog deadline, not a timing)."""
    deadline = time.monotonic() + 120
    while metrics(base)["kvidx_feed_batches"] + metrics(base)["kvidx_feed_batches_malformed"] < count:
        assert time.monotonic() < deadline, "the router never applied the batches"
        time.sleep(0.01)


def test_the_router_routes_by_the_engines_events(engine: zmq.Socket) -> None:  # type: ignore[type-arg]
    endpoint = engine.getsockopt_string(zmq.LAST_ENDPOINT)
    router = subprocess.Popen(
        [sys.executable, str(HERE / "router.py"), "--listen", "127.0.0.1:0", "--block-size", str(BLOCK),
         # Synchronous: a batch counted in /metrics is applied (with event threads it may
         # still be queued).
         "--event-threads", "0",
         "--engine", f"7={endpoint}", "--engine", "8=tcp://127.0.0.1:1"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert router.stdout is not None
        line = router.stdout.readline()
        assert line.startswith("listening on "), line
        base = "http://" + line.split()[-1]
        assert engine.recv() == b"\x01"  # the router subscribed to everything
        engine.send_multipart([b"", struct.pack(">Q", 0), batch(stored([1, 2, 3], None, TOKENS[:12], BLOCK))])
        engine.send_multipart([b"", struct.pack(">Q", 1), b"\xc1 not msgpack"])
        wait_for_batches(base, 2)

        status, answer = post(base, "/route", json.dumps({"tokens": TOKENS}).encode())
        assert status == 200
        assert (answer["worker_id"], answer["cached_blocks"], answer["blocks"]) == (7, 3, 4)
        status, answer = post(base, "/route", json.dumps({"tokens": [5] * 16}).encode())
        assert status == 200 and answer["cached_blocks"] == 0 and answer["worker_id"] in (7, 8)
        for bad in (b"{", b"[]", json.dumps({"tokens": "abc"}).encode(), json.dumps({"tokens": [-1] * 4}).encode()):
            assert post(base, "/route", bad)[0] == 400
        counters = metrics(base)
        assert counters["kvidx_feed_batches"] == 1 and counters["kvidx_feed_batches_malformed"] == 1
        assert counters["kvidx_index_worker_blocks"] == 3
    finally:
        router.terminate()
        router.wait()
