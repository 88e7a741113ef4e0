"""A small checkpoint's adds are read through the handle that read its protocol and metaData (one
footer parse, one ParquetFile a load), to the same files as through a reader of its own; a larger
one still gets a reader of its own."""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext

import delta_datafusion as dd
import delta_datafusion.datafusion  # noqa: F401 - register_table
from delta_datafusion import DeltaTable
from delta_datafusion.log import checkpoint


def _table(path, partitioned: bool, after: int) -> None:
    """Three appends, a checkpoint, then ``after`` more appends."""
    for i in range(3 + after):
        rows = pa.table({"region": ["a", "b"][i % 2 : i % 2 + 1] * 2, "x": [10 * i, 10 * i + 1]})
        deltalake.write_deltalake(
            str(path), rows, mode="append", partition_by=["region"] if partitioned else None
        )
        if i == 2:
            deltalake.DeltaTable(str(path)).create_checkpoint()


def _opened(monkeypatch) -> list[str]:
    """The paths every pq.ParquetFile made from now on was opened on."""
    opened: list[str] = []
    made = pq.ParquetFile

    def counting(source, *args, **kwargs):
        opened.append(str(source))
        return made(source, *args, **kwargs)

    monkeypatch.setattr(pq, "ParquetFile", counting)
    return opened


def _checkpoint_opens(opened: list[str]) -> int:
    return sum(p.endswith(".checkpoint.parquet") for p in opened)


def _files(path) -> list[tuple]:
    snap = DeltaTable(str(path)).snapshot()
    raw = snap.raw_files
    return sorted(zip(raw.column("path").to_pylist(), raw.column("stats").to_pylist(), strict=True))


@pytest.mark.parametrize("after", [0, 2])  # the checkpoint alone; commits after it (a read on a thread)
def test_a_small_checkpoint_is_opened_once(tmp_path, monkeypatch, after):
    _table(tmp_path, partitioned=False, after=after)
    own = monkeypatch.context()
    with own as m:
        m.setattr(checkpoint, "SHARED_READER_MAX_ROWS", -1)
        expected = _files(tmp_path)
    opened = _opened(monkeypatch)
    assert _files(tmp_path) == expected
    assert len(expected) == 3 + after
    assert _checkpoint_opens(opened) == 1  # before: 2 (a reader of the leaf's own)
    opened.clear()
    snap = DeltaTable(str(tmp_path)).snapshot()
    assert sorted(snap.files().column("path").to_pylist()) == [p for p, _ in expected]
    assert _checkpoint_opens(opened) == 1


def test_a_registered_small_checkpoint_is_opened_once(tmp_path, monkeypatch):
    _table(tmp_path, partitioned=False, after=0)
    opened = _opened(monkeypatch)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(tmp_path))
    got = ctx.sql("SELECT count(*) AS n, sum(x) AS s FROM t WHERE x > 5").to_pydict()
    assert got == {"n": [4], "s": [10 + 11 + 20 + 21]}
    assert _checkpoint_opens(opened) == 1


def test_a_larger_checkpoint_gets_a_reader_of_its_own(tmp_path, monkeypatch):
    _table(tmp_path, partitioned=False, after=1)
    expected = _files(tmp_path)
    monkeypatch.setattr(checkpoint, "SHARED_READER_MAX_ROWS", 0)
    opened = _opened(monkeypatch)
    assert _files(tmp_path) == expected
    assert _checkpoint_opens(opened) == 2


def test_a_partitioned_checkpoint_read_as_dictionaries_gets_a_reader_of_its_own(tmp_path, monkeypatch):
    """Past DICTIONARY_READ_MIN_ROWS adds its partition values are read as dictionaries (what the
    shared handle does not): two opens a snapshot; with no dictionary to read, one."""
    _table(tmp_path, partitioned=True, after=1)
    ckpt = next((tmp_path / "_delta_log").glob("*.checkpoint.parquet"))
    assert checkpoint.dictionary_leaves(pq.ParquetFile(ckpt).metadata, None)
    expected = _files(tmp_path)
    monkeypatch.setattr(checkpoint, "DICTIONARY_READ_MIN_ROWS", 0)
    opened = _opened(monkeypatch)
    assert _files(tmp_path) == expected
    assert _checkpoint_opens(opened) == 2
    monkeypatch.setattr(checkpoint, "dictionary_leaves", lambda md, row_groups: [])
    opened.clear()
    assert _files(tmp_path) == expected
    assert _checkpoint_opens(opened) == 1


def test_a_small_partitioned_checkpoint_is_opened_once(tmp_path, monkeypatch):
    """A partitioned table's checkpoint of a few adds is read through the handle that read its
    protocol and metaData, its partition values as plain strings (the TPC-H li_part table's 112
    adds: its checkpoint was opened twice a fresh query); the files and a query's rows are the
    same as through a reader of its own."""
    _table(tmp_path, partitioned=True, after=1)
    with monkeypatch.context() as m:
        m.setattr(checkpoint, "SHARED_READER_MAX_ROWS", -1)
        expected = _files(tmp_path)
    opened = _opened(monkeypatch)
    assert _files(tmp_path) == expected
    assert _checkpoint_opens(opened) == 1
    opened.clear()
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(tmp_path))
    got = ctx.sql("SELECT region, sum(x) AS s FROM t WHERE region = 'a' GROUP BY region").to_pydict()
    assert got == {"region": ["a"], "s": [0 + 1 + 20 + 21]}
    assert _checkpoint_opens(opened) == 1
