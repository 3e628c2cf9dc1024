"""Snapshots to bytes, files and file objects, restored into a fresh indexer."""

import io
import pathlib

import kvidx


def filled() -> kvidx.Indexer:
    index = kvidx.Indexer(event_threads=2)
    for worker in range(5):
        index.apply_event(kvidx.Stored(worker, 0, [(local, worker * 10 + local) for local in range(1, worker + 2)]))
    index.apply_batch_at(9, 4, [kvidx.Stored(9, 0, [(1, 1)])])
    index.flush()
    return index


def check_restored(index: kvidx.Indexer, info: kvidx.SnapshotInfo) -> None:
    assert (info.workers, info.blocks, info.max_watermark) == (6, 16, 4)
    assert [tuple(m) for m in index.find_matches([1, 2, 3, 4, 5])][:2] == [(4, 0, 5), (3, 0, 4)]
    assert index.watermark(9) == 4


def test_bytes_round_trip() -> None:
    with filled() as source, kvidx.Indexer("radix") as target:
        check_restored(target, target.restore_snapshot(source.snapshot()))


def test_file_round_trip(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "index.snap"
    with filled() as source, kvidx.Indexer() as target:
        written = source.write_snapshot(path)
        assert written.bytes == path.stat().st_size
        check_restored(target, target.restore_snapshot(str(path)))


def test_file_object_round_trip() -> None:
    buffer = io.BytesIO()
    with filled() as source, kvidx.Indexer() as target:
        source.write_snapshot(buffer)
        buffer.seek(0)
        check_restored(target, target.restore_snapshot(buffer))


def test_restore_into_a_used_indexer_is_refused() -> None:
    with filled() as source, filled() as target:
        try:
            target.restore_snapshot(source.snapshot())
        except kvidx.InvalidArgument:
            pass
        else:
            raise AssertionError("restored into an indexer that knows workers")
