"""The GIL is released while the core works: a restore reading a FIFO whose only writer is a
Python thread finishes only if the restore lets that thread run. The check runs in a child
process, so a binding that held the GIL fails it (the child is stopped) instead of hanging
the suite."""

import os
import subprocess
import sys
import textwrap

PRELUDE = textwrap.dedent(
    """
    import os, sys, threading
    import kvidx

    fifo = sys.argv[1]

    def writer(data):
        with open(fifo, "wb") as f:  # blocks until the restore opens the FIFO
            for i in range(0, len(data), 7):  # small writes: the reader waits for each
                f.write(data[i : i + 7])
                f.flush()
    """
)

CHILD = PRELUDE + textwrap.dedent(
    """
    with kvidx.Indexer(event_threads=0) as source:
        source.apply_event(kvidx.Stored(3, 0, [(1, 11), (2, 12)]))
        data = source.snapshot()

    thread = threading.Thread(target=writer, args=(data,))
    thread.start()
    with kvidx.Indexer(event_threads=0) as target:
        info = target.restore_snapshot(fifo)
        assert info.blocks == 2, info
        assert [tuple(m) for m in target.find_matches([1, 2])] == [(3, 0, 2)]
    thread.join()
    print("restored")
    """
)

CHILD_QUERYING = PRELUDE + textwrap.dedent(
    """
    hashes = list(range(1, 41))
    names = kvidx.seq_hashes(hashes)
    with kvidx.Indexer(event_threads=0) as source:
        for worker in range(200):
            source.apply_event(kvidx.Stored(worker, 0, list(zip(hashes, names))[: 1 + worker % 40]))
        data = source.snapshot()
    done = threading.Event()
    answers = []

    def query(index):
        # Short queries, back to back, for as long as the snapshot moves.
        while not done.is_set():
            answers.append(len(index.find_matches(hashes)))

    # A snapshot written to a FIFO whose only reader is a Python thread.
    received = []

    def reader():
        with open(fifo, "rb") as f:
            while True:
                chunk = f.read(7)
                if not chunk:
                    break
                received.append(chunk)

    with kvidx.Indexer(event_threads=0) as index:
        index.restore_snapshot(data)
        threads = [threading.Thread(target=reader), threading.Thread(target=query, args=(index,))]
        for t in threads:
            t.start()
        index.write_snapshot(fifo)
        done.set()
        for t in threads:
            t.join()
    assert b"".join(received) == data, "the snapshot written differs"

    # A snapshot restored from a FIFO whose only writer is a Python thread.
    done.clear()
    with kvidx.Indexer(event_threads=0) as index:
        threads = [threading.Thread(target=writer, args=(data,)), threading.Thread(target=query, args=(index,))]
        for t in threads:
            t.start()
        info = index.restore_snapshot(fifo)
        done.set()
        for t in threads:
            t.join()
        assert info.workers == 200, info
        assert len(index.find_matches(hashes)) == 200
    assert answers and all(0 <= n <= 200 for n in answers)
    print("moved")
    """
)


def run_child(script: str, tmp_path: "os.PathLike[str]") -> str:
    """Runs `script` in a child process with a new FIFO as its argument; its output."""
    fifo = os.path.join(os.fspath(tmp_path), "snapshot.fifo")
    os.mkfifo(fifo)
    # The timeout is a watchdog for a deadlock, never reached by a passing run.
    done = subprocess.run([sys.executable, "-c", script, fifo], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_restore_lets_python_threads_run(tmp_path: "os.PathLike[str]") -> None:
    assert run_child(CHILD, tmp_path) == "restored"


def test_queries_during_snapshot_io_served_by_python(tmp_path: "os.PathLike[str]") -> None:
    # A snapshot streamed to or from a FIFO served by a Python thread while another thread
    # queries back to back: all three threads finish (none waits for the GIL forever).
    assert run_child(CHILD_QUERYING, tmp_path) == "moved"
