"""The GIL is released while the core works: a restore reading a FIFO whose only writer is a
Python thread finishes only if the restore lets that thread run. The check runs in a child
process, so a binding that held the GIL fails it (the child is stopped) instead of hanging
the suite."""

import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import os, sys, threading
    import kvidx

    fifo = sys.argv[1]
    with kvidx.Indexer(event_threads=0) as source:
        source.apply_event(kvidx.Stored(3, 0, [(1, 11), (2, 12)]))
        data = source.snapshot()

    def writer():
        with open(fifo, "wb") as f:  # blocks until the restore opens the FIFO
            for i in range(0, len(data), 7):  # small writes: the reader waits for each
                f.write(data[i : i + 7])
                f.flush()

    thread = threading.Thread(target=writer)
    thread.start()
    with kvidx.Indexer(event_threads=0) as target:
        info = target.restore_snapshot(fifo)
        assert info.blocks == 2, info
        assert [tuple(m) for m in target.find_matches([1, 2])] == [(3, 0, 2)]
    thread.join()
    print("restored")
    """
)


def test_a_restore_lets_python_threads_run(tmp_path: "os.PathLike[str]") -> None:
    fifo = os.path.join(os.fspath(tmp_path), "snapshot.fifo")
    os.mkfifo(fifo)
    # The timeout is a watchdog for a deadlock, never reached by a passing run.
    done = subprocess.run([sys.executable, "-c", CHILD, fifo], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "restored", done.stderr
