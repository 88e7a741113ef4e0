"""Work every query on a freshly opened table pays whatever it reads: what a table without
deletion vectors, or stats objects without nulls, or a small checkpoint, do not need done. Each
test pins one piece of such work away, and checks that the result is what it was."""

from __future__ import annotations

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import record_read_threads
from datafusion import SessionContext

import delta_datafusion as dd
import delta_datafusion.datafusion  # noqa: F401 - register_table
from delta_datafusion import replay, scan_unit, stats
from delta_datafusion.log import checkpoint
from delta_datafusion.log.actions import DV_TYPE


class _ComputeSpy:
    """Stands for ``pyarrow.compute`` in one module: the names of the functions it looks up."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def __getattr__(self, name: str):
        self.used.append(name)
        return getattr(pc, name)


def test_an_all_null_deletion_vector_column_is_not_taken_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint without deletion vectors stores their column as an all-null struct: replay
    read each of its five fields and built the struct again (~10 compute calls a query)."""
    looked_at: list[str] = []
    real = replay.child

    def spying(struct, name, typ=None):
        looked_at.append(name)
        return real(struct, name, typ)

    monkeypatch.setattr(replay, "child", spying)
    dv = pa.array([None, None, None], DV_TYPE)
    out = replay._dv_column(dv, 3)
    assert out.type == DV_TYPE and out.null_count == 3 and len(out) == 3
    assert looked_at == []
    # one descriptor among nulls: read field by field, as before
    some = pa.array(
        [None, {"storageType": "u", "pathOrInlineDv": "ab", "sizeInBytes": 3, "cardinality": 1}], DV_TYPE
    )
    out = replay._dv_column(some, 2)
    assert looked_at and out.to_pylist() == some.to_pylist()


def test_files_without_deletion_vectors_are_not_checked_field_by_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """check_deletion_vectors refuses a descriptor without a storageType; with none at all it has
    nothing to look at (it compared and combined each field: ~10 compute calls a query)."""
    files = pa.table({"location": ["/t/a", "/t/b"], "deletion_vector": pa.array([None, None], DV_TYPE)})
    spy = _ComputeSpy()
    monkeypatch.setattr(scan_unit, "pc", spy)
    scan_unit.check_deletion_vectors(files)
    assert spy.used == []
    bad = pa.table(
        {
            "location": ["/t/a", "/t/b"],
            "deletion_vector": pa.array(
                [None, {"storageType": None, "pathOrInlineDv": "ab", "sizeInBytes": 3, "cardinality": 1}],
                DV_TYPE,
            ),
        }
    )
    with pytest.raises(dd.errors.DeletionVectorError, match="/t/b"):
        scan_unit.check_deletion_vectors(bad)


def test_parsed_stats_without_null_objects_are_built_without_a_mask(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each struct of the parsed stats (the whole object, minValues, maxValues, nullCount) was
    rebuilt with its nulls as a mask computed by two compute calls, also when it had none."""
    parsed = pa.array(
        [{"numRecords": 3, "minValues": {"a": 1}}, {"numRecords": 4, "minValues": {"a": 2}}],
        pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("a", pa.int64())]))]),
    )
    target = pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("a", pa.int32())]))])
    spy = _ComputeSpy()
    monkeypatch.setattr(stats, "pc", spy)
    out = stats._cast_from_parse(parsed, target)
    assert out.type == target and out.to_pylist() == parsed.to_pylist()
    assert "invert" not in spy.used
    # an object missing (a file without minValues) still comes out null
    holed = pa.array(
        [{"numRecords": 3, "minValues": None}, None],
        pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("a", pa.int64())]))]),
    )
    out = stats._cast_from_parse(holed, target)
    assert out.to_pylist() == [{"numRecords": 3, "minValues": None}, None]
    assert out.null_count == 1 and out.field("minValues").null_count == 2
    # a struct of no fields (no column with bounds) keeps its length from its mask
    empty = pa.struct([("minValues", pa.struct([]))])
    out = stats._cast_from_parse(pa.array([{"minValues": {}}] * 3, empty), empty)
    assert len(out) == 3 and len(out.field("minValues")) == 3 and out.null_count == 0


def _small_checkpointed_table(path) -> None:
    for i in range(3):
        deltalake.write_deltalake(str(path), pa.table({"x": [i, i + 10]}), mode="append")
    deltalake.DeltaTable(str(path)).create_checkpoint()


def test_a_small_checkpoint_is_read_on_the_callers_thread(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint of a few rows decodes in microseconds: its protocol and metaData, and its adds,
    are read without handing their columns to pyarrow's pool and waiting for it."""
    _small_checkpointed_table(tmp_path)
    threaded = record_read_threads(monkeypatch)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(tmp_path))
    assert ctx.sql("SELECT sum(x) AS s FROM t").to_pydict() == {"s": [sum(range(3)) + sum(range(10, 13))]}
    assert len(threaded) == 2 and not any(threaded)  # protocol/metaData, then the adds


def test_a_checkpoints_leaf_paths_are_listed_once_a_read(tmp_path) -> None:
    """The checkpoint columns read only when some row has a value (txn, domainMetadata) are
    looked up in the footer on one listing of its leaf paths, not one listing each (a
    ColumnSchema object per leaf and column: ~0.1 ms of a 60-leaf checkpoint's read)."""
    _small_checkpointed_table(tmp_path)
    snap = dd.DeltaTable(str(tmp_path)).snapshot()
    leaf = snap.checkpoint_manifest.leaves[0]
    md = pq.ParquetFile(leaf.path).metadata
    paths = checkpoint.leaf_paths(md)
    assert len(paths) == md.num_columns and "add.path" in paths and "txn.appId" in paths
    listed: list[int] = []
    real = checkpoint.leaf_paths

    def counting(metadata):
        listed.append(metadata.num_columns)
        return real(metadata)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(checkpoint, "leaf_paths", counting)
        table = checkpoint.read_leaf(snap.storage, leaf, None, False)
    assert listed == [md.num_columns]
    # both all null here: not read, as with a listing each
    assert "add" in table.column_names and not {"txn", "domainMetadata"} & set(table.column_names)
    for column in ("txn", "domainMetadata"):
        assert checkpoint._all_null(md, column, None, paths) == checkpoint._all_null(md, column, None)
