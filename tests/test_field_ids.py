"""Tables whose schema carries parquet field ids without column mapping.

Writers that start from parquet with field ids (tpchgen-cli 4, pyiceberg exports, ...) hand them to
deltalake, which stores them in the Delta schema as ``parquet.field.id`` field metadata. Without
column mapping the protocol resolves columns by name, so the ids must not decide which parquet
column is read. (DuckDB's delta extension returns NULL for every column of such a table; the
scan benchmark's lineitem tables hit it.) Here the ids are deliberately out of step with the
column order, so a reader matching by id would swap columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datafusion import SessionContext
from deltalake import write_deltalake

import delta_datafusion as dd

IDS = {"id": "3", "name": "1", "score": "2"}


def _batch(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={"PARQUET:field_id": IDS["id"]}),
            pa.field("name", pa.string(), metadata={"PARQUET:field_id": IDS["name"]}),
            pa.field("score", pa.float64(), metadata={"PARQUET:field_id": IDS["score"]}),
        ]
    )
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "score": [i / 4 for i in ids]}, schema=schema)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("field_ids") / "t"
    write_deltalake(str(path), _batch(0, 50))
    write_deltalake(str(path), _batch(50, 100), mode="append")
    return path


def test_the_schema_carries_field_ids(table: Path) -> None:
    # the premise: deltalake kept the ids in the Delta schema, and no column mapping is on
    first = (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    md = next(json.loads(line)["metaData"] for line in first if '"metaData"' in line)
    fields = {f["name"]: f["metadata"] for f in json.loads(md["schemaString"])["fields"]}
    assert {k: str(v.get("parquet.field.id")) for k, v in fields.items()} == IDS
    assert "delta.columnMapping.mode" not in md.get("configuration", {})


def test_columns_are_read_by_name(table: Path) -> None:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    got = ctx.sql("SELECT * FROM t ORDER BY id").to_arrow_table()
    expected = pa.concat_tables([_batch(0, 50), _batch(50, 100)])
    assert got.column_names == ["id", "name", "score"]
    for c in got.column_names:
        assert got.column(c).to_pylist() == expected.column(c).to_pylist(), c

    got = ctx.sql("SELECT name, score FROM t WHERE id >= 90 AND score < 24 ORDER BY id").to_arrow_table()
    mask = pc.and_(pc.greater_equal(expected["id"], 90), pc.less(expected["score"], 24))
    want = expected.filter(mask)
    assert got.num_rows == 6
    assert got.column("name").to_pylist() == want.column("name").to_pylist()
    assert got.column("score").to_pylist() == want.column("score").to_pylist()

    # the Python API reads the same way
    scan = dd.DeltaTable(str(table)).snapshot().scan(columns=["score", "id"], predicate="id < 3")
    assert sorted(scan.to_table().to_pylist(), key=lambda r: r["id"]) == [
        {"score": i / 4, "id": i} for i in range(3)
    ]
