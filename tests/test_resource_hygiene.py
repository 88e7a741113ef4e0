"""Resources a long-lived process keeps: open files, threads, process-wide caches.

A server runs thousands of queries in one process while writers commit, checkpoint and clean up
the log. What a query or a snapshot leaves open must not grow with the number of queries or of
checkpoints written since the process started; the counts here are exact (``/proc/self/fd``).
"""

from __future__ import annotations

import gc
import os
from pathlib import Path

import pyarrow as pa
import pytest

deltalake = pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402

import delta_datafusion as dd  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")


def _open_log_files(table: Path) -> list[str]:
    """The files under the table's ``_delta_log`` this process holds open (deleted ones too)."""
    gc.collect()
    log = str(table / "_delta_log")
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
        if target.startswith(log):
            found.append(target)
    return found


def _checkpointed_table(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    deltalake.write_deltalake(
        str(path), pa.table({"id": [0]}), configuration={"delta.enableChangeDataFeed": "true"}
    )
    return path


def _append_and_checkpoint(path: Path, value: int) -> None:
    deltalake.write_deltalake(str(path), pa.table({"id": [value]}), mode="append")
    deltalake.DeltaTable(str(path)).create_checkpoint()


def test_queried_registered_and_catalog_tables_hold_no_checkpoint_open(tmp_path: Path) -> None:
    """A registered or folder-catalog table reads its checkpoint at its first query, and never
    again: each held that file open for the process's life (a catalog of N tables, N
    descriptors; a checkpoint a log cleanup deleted kept on disk)."""
    root = tmp_path / "lake"
    for name in ("a", "b"):
        _checkpointed_table(root).rename(root / name)
        _append_and_checkpoint(root / name, 1)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "a", str(root / "a"))
    ctx.sql(f"CREATE EXTERNAL TABLE b STORED AS DELTA LOCATION '{root / 'b'}'").collect()
    dd.register_catalog(ctx, "lake", str(root))
    for table in ("a", "b", "lake.default.a", "lake.default.b"):
        assert ctx.sql(f"SELECT count(*) AS n FROM {table}").to_pylist() == [{"n": 2}]
    assert _open_log_files(root / "a") + _open_log_files(root / "b") == []


def test_a_table_handle_keeps_few_checkpoints_open(tmp_path: Path) -> None:
    """A table handle kept for the process keeps its checkpoints open for its next snapshots
    (and a snapshot made and not loaded, as a change feed's range ends are, for the read of its
    files to come): those of its two latest checkpoints, not of every one it ever opened (one
    more per checkpoint written, deleted ones too: a log cleanup's disk space not given back)."""
    path = _checkpointed_table(tmp_path)
    table = dd.DeltaTable(str(path))
    for v in range(1, 5):
        _append_and_checkpoint(path, v)
        assert table.snapshot().files().num_rows == v + 1
        assert table.snapshot(version=v - 1).version == v - 1
        assert len(_open_log_files(path)) <= 2
    for name in os.listdir(path / "_delta_log"):  # a log cleanup up to version 3's checkpoint
        if ".checkpoint." in name and int(name[:20]) < 3:
            os.remove(path / "_delta_log" / name)
    assert [f for f in _open_log_files(path) if f.endswith("(deleted)")] == []


def test_table_changes_queries_keep_few_checkpoints_open(tmp_path: Path) -> None:
    """``table_changes()`` of a registered name and of a location, each statement over a range
    ending at a new checkpoint: the files kept open stay two (one more per checkpoint before)."""
    path = _checkpointed_table(tmp_path)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(path))
    for v in range(1, 6):
        _append_and_checkpoint(path, v)
        for ref in ("t", str(path)):
            rows = ctx.sql(f"SELECT count(*) AS n FROM table_changes('{ref}', {v - 1}, {v})").to_pylist()
            assert rows == [{"n": 2}]
        assert len(_open_log_files(path)) <= 2, _open_log_files(path)


def test_fixed_width_code_offsets_are_kept_for_a_few_widths() -> None:
    """Codes of one width (read as dictionaries) share an offsets buffer per width, kept for the
    process (512 KB to 4 MB each): a process reading tables whose codes have many widths kept one
    buffer per width it ever met (40 widths: 21 MB of Arrow memory), not a few."""
    from delta_datafusion.read import dictionaries

    dictionaries._offsets.clear()
    for width in range(1, 41):
        values = pa.array(["".join(chr(97 + (i + k) % 26) for k in range(width)) for i in range(3)])
        codes = pa.DictionaryArray.from_arrays(pa.array([0, 1, 2, 1, 0], pa.int32()), values)
        out = dictionaries.decoded(codes, pa.string())
        assert out.to_pylist() == values.take([0, 1, 2, 1, 0]).to_pylist()
    assert len(dictionaries._offsets) <= dictionaries.KEPT_OFFSET_WIDTHS
    assert 1 not in dictionaries._offsets and 40 in dictionaries._offsets  # the widths met last


def test_show_tables_over_a_folder_catalog_leaves_no_checkpoint_open(tmp_path: Path) -> None:
    """SHOW TABLES (and information_schema) opens every table of a folder catalog, reading each
    one's protocol and metadata from its checkpoint; those snapshots stay cached until a query
    reads them. Each held its checkpoint open meanwhile: a catalog of N tables, N files."""
    root = tmp_path / "lake"
    for name in ("a", "b", "c"):
        path = _checkpointed_table(root)
        path.rename(root / name)
        _append_and_checkpoint(root / name, 1)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_catalog(ctx, "lake", str(root))
    shown = ctx.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake' AND table_schema = 'default'"
    )
    assert sorted(shown.to_pydict()["table_name"]) == ["a", "b", "c"]
    assert [f for name in ("a", "b", "c") for f in _open_log_files(root / name)] == []
    assert ctx.sql("SELECT count(*) AS n FROM lake.default.b").to_pylist() == [{"n": 2}]
    assert [f for name in ("a", "b", "c") for f in _open_log_files(root / name)] == []


def test_deletion_vector_cache_keeps_a_bounded_number_of_bytes(tmp_path: Path) -> None:
    """The process's deletion vector cache was bounded by count alone (4,096 vectors): a vector
    of a 1M-row file with half its rows deleted takes ~130 KB, so a long-lived process reading
    tables with many such files could keep ~0.5-0.9 GB. It keeps ``max_bytes`` of vectors (by
    their stored size), the most recently used."""
    from pyroaring import BitMap64
    from test_dv import _frame

    from delta_datafusion.dv import DeletionVectorCache, DeletionVectorDescriptor
    from delta_datafusion.storage import Storage

    name = "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
    content, descriptors = b"\x01", []
    for k in range(12):
        rows = BitMap64(range(k, 40_000, 3))
        body = rows.serialize()
        descriptors.append(DeletionVectorDescriptor("u", "0" * 20, len(content), 4 + len(body), len(rows)))
        content += _frame(body)
    (tmp_path / name).write_bytes(content)
    storage = Storage(str(tmp_path))
    size = descriptors[0].size_in_bytes
    cache = DeletionVectorCache()
    cache.max_bytes = 5 * size  # five vectors' worth
    for d in descriptors:
        assert len(cache.get(d, storage)) == d.cardinality
    assert len(cache) <= 5
    assert len(cache.get(descriptors[-1], storage)) == descriptors[-1].cardinality


def test_a_table_handle_on_an_object_store_reads_its_checkpoint_footer_once(tmp_path: Path) -> None:
    """On an object store a kept checkpoint handle holds no descriptor, and opening it again is
    a request: a table handle asked for a snapshot per request at one checkpoint opens it once
    for the planning reads (each load's leaf read opens its own reader)."""
    fsspec = pytest.importorskip("fsspec")
    from fsspec.implementations.memory import MemoryFileSystem

    opened: list[str] = []

    class _CountingStore(MemoryFileSystem):
        protocol = "ddhygiene"

        def _open(self, path, mode="rb", **kwargs):
            kwargs.pop("size", None)
            kwargs.pop("cache_type", None)
            opened.append(path)
            return super()._open(path, mode, **kwargs)

    fsspec.register_implementation("ddhygiene", _CountingStore, clobber=True)
    path = _checkpointed_table(tmp_path)
    _append_and_checkpoint(path, 1)
    deltalake.write_deltalake(str(path), pa.table({"id": [2]}), mode="append")
    store, root = fsspec.filesystem("memory"), f"/dd-hygiene-{os.getpid()}"
    for local in path.rglob("*"):
        if local.is_file():
            store.pipe(f"{root}/{local.relative_to(path).as_posix()}", local.read_bytes())
    try:
        table = dd.DeltaTable(f"ddhygiene://{root}")
        for _ in range(4):
            assert table.snapshot().files().num_rows == 3
        checkpoint_opens = [p for p in opened if ".checkpoint." in p]
        assert len(checkpoint_opens) == 1 + 4, checkpoint_opens
    finally:
        store.rm(root, recursive=True)
