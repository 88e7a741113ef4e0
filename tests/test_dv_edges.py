"""Deletion vectors at the edges of the format, end to end: each table either reads its right rows
or fails with a DeletionVectorError naming the table, the data file and the problem.

Tables are hand-written (one or two parquet files of several row groups, a log of three commits):
a vector of only the magic number (no bucket count), and one vector named by two data files with
two cardinalities (the decoded-vector cache must check each descriptor, whichever came first).
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import add_action, metadata_action, write_commit
from datafusion import SessionContext
from pyroaring import BitMap64
from test_dv import _frame, _z85_encode

import delta_datafusion as dd
from delta_datafusion.dv import DV_MAGIC, DeletionVectorDescriptor, default_cache, load_deleted_rows
from delta_datafusion.errors import DeletionVectorError
from delta_datafusion.storage import Storage

ROWS = 40
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "x", "type": "integer", "nullable": True, "metadata": {}},
    ],
}
PROTOCOL = {
    "protocol": {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
}


def _table(root: Path, files: int) -> list[dict[str, Any]]:
    """Version 0 of a table of ``files`` files of ROWS rows (row groups of 7): their add actions."""
    root.mkdir()
    (root / "_delta_log").mkdir()
    adds = []
    for k in range(files):
        ids = list(range(k * ROWS, (k + 1) * ROWS))
        name = f"part-{k}.parquet"
        data = pa.table({"id": pa.array(ids, pa.int64()), "x": pa.array([i % 7 for i in ids], pa.int32())})
        pq.write_table(data, root / name, row_group_size=7)
        adds.append(add_action(root, name, stats=json.dumps({"numRecords": ROWS})))
    write_commit(root, 0, [PROTOCOL, metadata_action(SCHEMA), *({"add": a} for a in adds)])
    return adds


def _with_dv(add: dict[str, Any], dv: dict[str, Any]) -> list[dict[str, Any]]:
    """A remove of ``add`` and its add again with ``dv`` (one commit's actions)."""
    remove = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True, "size": add["size"]}
    return [{"remove": remove}, {"add": {**add, "deletionVector": dv}}]


def _query(root: Path, sql: str) -> list[dict[str, Any]]:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    return ctx.sql(sql).to_arrow_table().to_pylist()


def _inline(payload: bytes, cardinality: int) -> dict[str, Any]:
    text = _z85_encode(payload, "pad")
    return {
        "storageType": "i",
        "pathOrInlineDv": text,
        "sizeInBytes": len(payload),
        "cardinality": cardinality,
    }


# -- a vector with no room for the bucket count ---------------------------------------------------

MAGIC_ONLY = struct.pack("<i", DV_MAGIC)


@pytest.mark.parametrize("stored", ["inline", "file"])
def test_vector_of_only_the_magic_number_is_a_corrupt_bitmap(tmp_path: Path, stored: str) -> None:
    if stored == "inline":
        descriptor = DeletionVectorDescriptor.from_dict(_inline(MAGIC_ONLY, 0))
    else:
        (tmp_path / "deletion_vector_00000000-0000-0000-0000-000000000000.bin").write_bytes(
            b"\x01" + _frame(b"")
        )
        descriptor = DeletionVectorDescriptor("u", "0" * 20, 1, 4, 0)
    with pytest.raises(DeletionVectorError, match="corrupt roaring bitmap"):
        load_deleted_rows(descriptor, Storage(str(tmp_path)))


def test_vector_of_only_the_magic_number_in_a_query_names_the_file(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (add,) = _table(root, 1)
    write_commit(root, 1, _with_dv(add, _inline(MAGIC_ONLY, 0)))
    with pytest.raises(
        Exception, match=r"DeletionVectorError: .*version 1.*part-0\.parquet.*corrupt roaring"
    ):
        _query(root, "SELECT count(id) AS n FROM t")


# -- one vector, two descriptors ------------------------------------------------------------------


@pytest.mark.parametrize("liar_first", [False, True])
def test_a_cached_vector_is_checked_against_each_descriptor(tmp_path: Path, liar_first: bool) -> None:
    """Two data files name the same inline vector (rows 1 and 2), one with cardinality 3: the
    second descriptor must be refused whichever was decoded first (the cache served it unchecked:
    count(id) 76 and rows returned, while count(*) from the log said 75)."""
    default_cache.clear()
    root = tmp_path / "t"
    adds = _table(root, 2)
    good = _inline(struct.pack("<i", DV_MAGIC) + BitMap64([1, 2]).serialize(), 2)
    liar = {**good, "cardinality": 3}
    first, second = (liar, good) if liar_first else (good, liar)
    write_commit(root, 1, _with_dv(adds[0], first) + _with_dv(adds[1], second))
    with pytest.raises(
        Exception, match=r"DeletionVectorError: .*cardinality mismatch, bitmap has 2 rows, log says 3"
    ):
        _query(root, "SELECT count(id) AS n FROM t")
    storage = Storage(str(root))
    assert load_deleted_rows(DeletionVectorDescriptor.from_dict(good), storage) == BitMap64([1, 2])
    default_cache.get(DeletionVectorDescriptor.from_dict(good), storage)
    with pytest.raises(DeletionVectorError, match="cardinality mismatch"):
        default_cache.get(DeletionVectorDescriptor.from_dict(liar), storage)


def test_a_cached_file_vector_is_checked_against_each_size(tmp_path: Path) -> None:
    """Two descriptors of one DV file and offset, the second with a sizeInBytes that is not the
    file's: refused after the first was cached too."""
    default_cache.clear()
    name = "deletion_vector_00000000-0000-0000-0000-000000000000.bin"
    body = BitMap64([0, 5]).serialize()
    (tmp_path / name).write_bytes(b"\x01" + _frame(body))
    storage = Storage(str(tmp_path))
    good = DeletionVectorDescriptor("u", "0" * 20, 1, 4 + len(body), 2)
    assert default_cache.get(good, storage) == BitMap64([0, 5])
    with pytest.raises(DeletionVectorError, match=f"{name}.*size mismatch"):
        default_cache.get(DeletionVectorDescriptor("u", "0" * 20, 1, 3 + len(body), 2), storage)


# -- an absolute path the table's store cannot read -----------------------------------------------


def test_absolute_vector_path_on_another_store_names_the_data_file_and_version(tmp_path: Path) -> None:
    """A 'p' vector on s3 of a local table is refused by the store's resolver; the error said
    which path and store, but not that it was a deletion vector, nor the version or data file."""
    root = tmp_path / "t"
    (add,) = _table(root, 1)
    dv = {
        "storageType": "p",
        "pathOrInlineDv": "s3://bucket/dv.bin",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    write_commit(root, 1, _with_dv(add, dv))
    with pytest.raises(Exception, match="UnsupportedFeatureError") as info:
        _query(root, "SELECT count(id) AS n FROM t")
    text = str(info.value)
    for part in (
        "version 1",
        "part-0.parquet",
        "deletion vector",
        "s3://bucket/dv.bin",
        "00000000000000000001.json",
    ):
        assert part in text, (part, text)
