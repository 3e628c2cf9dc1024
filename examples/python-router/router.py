"""A KV-cache-aware HTTP router over kvidx: subscribes to engines' ZMQ KV-event publishers
(pyzmq) through an EngineFeed and serves

  POST /route    {"tokens": [...], "lora_name": null}  or  {"local_hashes": [...]}
                 -> {"worker_id", "dp_rank", "cached_blocks", "blocks", "matches"}
  GET  /metrics  Prometheus text: the index's and the feed's counters

with the standard library's HTTP server. A request goes to the worker holding the longest
prefix of its blocks; with none, to the configured engines in turn.

  python router.py --listen 127.0.0.1:8000 --block-size 16 \\
      --engine 1=tcp://10.0.0.1:5557 --engine 2=tcp://10.0.0.2:5557
"""

import argparse
import itertools
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, Iterator, List, Optional, Tuple

import zmq

import kvidx

MAX_BODY = 1 << 20


class Router:
    """The index, the engine feed and the subscriber threads."""

    def __init__(self, engines: List[Tuple[int, str]], fmt: str, block_size: int, event_threads: int) -> None:
        self.index = kvidx.Indexer(event_threads=event_threads)
        self.feed = kvidx.EngineFeed(fmt)  # type: ignore[arg-type]
        self.block_size = block_size
        self.engines = engines
        self.fallback: Iterator[int] = itertools.cycle([worker for worker, _ in engines])
        self.fallback_lock = threading.Lock()
        self.context = zmq.Context()
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.subscribe, args=engine, daemon=True) for engine in engines]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def subscribe(self, worker_id: int, endpoint: str) -> None:
        """Applies every batch the engine publishes: frames (topic, seq, payload)."""
        socket = self.context.socket(zmq.SUB)
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        socket.setsockopt(zmq.RCVTIMEO, 200)
        socket.connect(endpoint)
        while not self.stopping.is_set():
            try:
                frames = socket.recv_multipart()
            except zmq.Again:
                continue
            seq: Optional[bytes] = frames[-2] if len(frames) >= 3 else None
            try:
                self.feed.apply_message(self.index, worker_id, frames[-1], seq=seq)
            except kvidx.KvidxError as error:  # counted in the feed's batches_malformed
                print(f"engine {worker_id}: batch refused: {error}", file=sys.stderr)
        socket.close(linger=0)

    def route(self, request: Dict[str, Any]) -> Dict[str, Any]:
        if "local_hashes" in request:
            hashes = request["local_hashes"]
        else:
            hashes = kvidx.hash_tokens(request["tokens"], self.block_size, lora_name=request.get("lora_name"))
        matches = self.index.find_matches(hashes)
        if matches:
            worker_id, dp_rank, depth = matches[0]
        else:
            with self.fallback_lock:
                worker_id, dp_rank, depth = next(self.fallback), 0, 0
        return {
            "worker_id": worker_id,
            "dp_rank": dp_rank,
            "cached_blocks": depth,
            "blocks": len(hashes),
            "matches": [{"worker_id": w, "dp_rank": r, "depth": d} for w, r, d in matches],
        }

    def metrics(self) -> str:
        lines = []
        for prefix, counters in (("kvidx_index", self.index.stats()), ("kvidx_feed", self.feed.stats())):
            for name in dir(counters):
                if not name.startswith("_"):
                    lines.append(f"{prefix}_{name} {getattr(counters, name)}")
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join()
        self.context.term()
        self.index.close()


def handler(router: Router) -> type:
    class Handler(BaseHTTPRequestHandler):
        def reply(self, status: int, body: str, content_type: str = "application/json") -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/metrics":
                self.reply(200, router.metrics(), "text/plain; version=0.0.4")
            else:
                self.reply(404, json.dumps({"error": "not found"}))

        def do_POST(self) -> None:
            if self.path != "/route":
                return self.reply(404, json.dumps({"error": "not found"}))
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self.reply(413, json.dumps({"error": f"body larger than {MAX_BODY} bytes"}))
            try:
                request = json.loads(self.rfile.read(length))
                if not isinstance(request, dict):
                    raise ValueError("the body is not a JSON object")
                answer = router.route(request)
            except (ValueError, KeyError, TypeError, OverflowError, kvidx.KvidxError) as error:
                return self.reply(400, json.dumps({"error": str(error)}))
            self.reply(200, json.dumps(answer))

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def parse_engine(text: str) -> Tuple[int, str]:
    worker, _, endpoint = text.partition("=")
    if not endpoint:
        raise argparse.ArgumentTypeError("expected WORKER_ID=ENDPOINT, e.g. 1=tcp://127.0.0.1:5557")
    return int(worker), endpoint


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--listen", default="127.0.0.1:8000", help="HOST:PORT (port 0: any free port)")
    parser.add_argument("--engine", action="append", type=parse_engine, default=[], help="WORKER_ID=ZMQ_ENDPOINT")
    parser.add_argument("--format", default="vllm", choices=["vllm", "sglang", "trtllm"])
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--event-threads", type=int, default=2)
    args = parser.parse_args()
    if not args.engine:
        parser.error("at least one --engine")
    host, _, port = args.listen.rpartition(":")
    router = Router(args.engine, args.format, args.block_size, args.event_threads)
    server = ThreadingHTTPServer((host, int(port)), handler(router))
    router.start()
    print(f"listening on {host}:{server.server_port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        router.close()


if __name__ == "__main__":
    main()
