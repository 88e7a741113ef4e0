"""Fields of NULL structs read as NULL. A parquet field the writer declared required (Spark's
``NOT NULL`` nested fields, deltalake's non-nullable ones) holds a value under a NULL struct, and
DataFusion 55 reads a field (``s['a']``, ``l[2]['a']``) by the field's own validity only: such rows
matched ``s['a'] = 0`` and were missed by ``s['a'] IS NULL``. Tables are written by deltalake."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402

INNER = pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("s", INNER),
        pa.field("l", pa.list_(pa.field("element", INNER))),
        pa.field("m", pa.map_(pa.string(), pa.field("value", INNER))),
        pa.field("outer", pa.struct([pa.field("in", INNER, nullable=False)])),
    ]
)
ROWS = [
    {
        "id": 1,
        "s": {"a": 1, "b": "x"},
        "l": [{"a": 1, "b": "x"}],
        "m": [("k", {"a": 1, "b": "x"})],
        "outer": {"in": {"a": 1, "b": "x"}},
    },
    {"id": 2, "s": None, "l": [{"a": 5, "b": "y"}, None], "m": [("k", None)], "outer": None},
    {
        "id": 3,
        "s": {"a": 0, "b": None},
        "l": [{"a": 0, "b": None}, {"a": 0, "b": None}],
        "m": [("k", {"a": 0, "b": None})],
        "outer": {"in": {"a": 0, "b": None}},
    },
]


@pytest.fixture(params=["none", "name"], ids=["plain", "column_mapping"])
def table(request, tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    config = {"delta.enableChangeDataFeed": "true"}
    if request.param == "name":
        config |= {
            "delta.columnMapping.mode": "name",
            "delta.minReaderVersion": "2",
            "delta.minWriterVersion": "5",
        }
    write_deltalake(path, pa.Table.from_pylist(ROWS, schema=SCHEMA), configuration=config)
    return path


def _ids(ctx: SessionContext, sql: str) -> list[int]:
    return sorted(r["id"] for r in ctx.sql(sql).to_pylist())


@pytest.mark.parametrize(
    ("where", "want"),
    [
        ("s['a'] = 0", [3]),
        ("s['a'] IS NULL", [2]),
        ("s['b'] IS NULL", [2, 3]),
        ("l[2]['a'] = 0", [3]),
        ("l[2]['a'] IS NULL", [1, 2]),
        ("m['k']['a'] = 0", [3]),
        ("m['k']['a'] IS NULL", [2]),
        ("outer['in']['a'] = 0", [3]),
        ("outer['in']['a'] IS NULL", [2]),
    ],
)
def test_fields_of_null_structs_are_null_in_sql(table: str, where: str, want: list[int]) -> None:
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", table)
    assert _ids(ctx, f"SELECT id FROM t WHERE {where}") == want
    assert _ids(ctx, f"SELECT id FROM table_changes('t', 0) WHERE {where}") == want
    assert (
        sorted(dd.DeltaTable(table).snapshot().scan(predicate=where).to_table().column("id").to_pylist())
        == want
    )


def test_fields_of_null_structs_in_every_read_path(table: str) -> None:
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", table)
    for sql in (
        "SELECT id, s['a'] AS a FROM t",  # the dataset scan
        "SELECT id, s['a'] AS a FROM (SELECT * FROM t LIMIT 3)",  # the first rows streamed
        "SELECT id, s['a'] AS a FROM t WHERE id > 0",  # filtered
    ):
        assert sorted((r["id"], r["a"]) for r in ctx.sql(sql).to_pylist()) == [(1, 1), (2, None), (3, 0)], sql
    assert ctx.sql("SELECT count(s['a']) AS n FROM t").to_pylist() == [{"n": 2}]
    # the struct itself is unchanged
    assert ctx.sql("SELECT s FROM t ORDER BY id").to_pylist() == [{"s": r["s"]} for r in ROWS]
