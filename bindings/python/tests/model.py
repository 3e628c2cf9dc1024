"""A small pure-Python model of the index contract (docs/contract.md), without tiers."""

from typing import Dict, List, Optional, Sequence, Set, Tuple

Worker = Tuple[int, int]
Path = Tuple[int, ...]


class Model:
    """Each worker maps block names (engine sequence hashes) to the identity of the block:
    the tuple of local hashes from position 0 up to and including it."""

    def __init__(self) -> None:
        self.workers: Dict[Worker, Dict[int, Path]] = {}

    def stored(self, worker: Worker, parent: Optional[int], blocks: Sequence[Tuple[int, int]]) -> bool:
        held = self.workers.setdefault(worker, {})
        if parent is not None and blocks and parent not in held:
            return False
        path: Path = held[parent] if parent is not None and blocks else ()
        for local, name in blocks:
            path = path + (local,)
            held[name] = path
        return True

    def removed(self, worker: Worker, names: Sequence[int]) -> None:
        held = self.workers.setdefault(worker, {})
        for name in names:
            held.pop(name, None)

    def cleared(self, worker: Worker) -> None:
        self.workers[worker] = {}

    def remove_worker(self, worker_id: int) -> None:
        for worker in [w for w in self.workers if w[0] == worker_id]:
            del self.workers[worker]

    def find_matches(self, query: Sequence[int]) -> List[Tuple[int, int, int]]:
        out = []
        for (worker_id, dp_rank), held in self.workers.items():
            paths: Set[Path] = set(held.values())
            depth = 0
            while depth < len(query) and tuple(query[: depth + 1]) in paths:
                depth += 1
            if depth:
                out.append((worker_id, dp_rank, depth))
        out.sort(key=lambda m: (-m[2], m[0], m[1]))
        return out

    def worker_blocks(self) -> int:
        return sum(len(held) for held in self.workers.values())
