"""Column names SQL must quote: spaces, upper case, a dot, non-ASCII, and a partition column with a
space (its folder name is URL-encoded in the log's paths).

Filters on them travel through DataFusion, substrait and the package's predicate tree, prune by
partition values and by stats (whose JSON keys are the names themselves: ``"a.b"`` is one key,
not a nested path), and come back as row filters. Results are compared with DataFusion filtering
an in-memory copy of the same rows; for table_changes() with an in-memory copy of the feed.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from datafusion import SessionContext
from deltalake import DeltaTable as DLTable
from deltalake import write_deltalake

import delta_datafusion as dd


def _rows(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table(
        {
            "Order Id": ids,
            "CamelCase": [f"v{i % 5}" for i in ids],
            "a.b": [i * 1.5 for i in ids],
            "Part Col": [f"p {i % 3}" for i in ids],
            "émoji✓": [i % 2 == 0 for i in ids],
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("names") / "t"
    write_deltalake(
        str(path),
        _rows(0, 30),
        partition_by=["Part Col"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    write_deltalake(str(path), _rows(30, 60), mode="append")  # v1
    DLTable(str(path)).delete('"Order Id" < 5')  # v2
    return path


@pytest.fixture(scope="module")
def sessions(table: Path):
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(table))
    ref = SessionContext()
    ref.register_record_batches("t", [ctx.sql("SELECT * FROM t").to_arrow_table().to_batches()])
    feed = ctx.sql(f"SELECT * FROM table_changes('{table}', 0)").to_arrow_table()
    ref.register_record_batches("c", [feed.to_batches()])
    return ctx, ref


def test_names_survive(sessions) -> None:
    ctx, _ = sessions
    got = ctx.sql('SELECT * FROM t ORDER BY "Order Id"').to_arrow_table()
    assert got.column_names == ["Order Id", "CamelCase", "a.b", "Part Col", "émoji✓"]
    assert got.column("Order Id").to_pylist() == list(range(5, 60))
    assert got.column("Part Col").to_pylist() == [f"p {i % 3}" for i in range(5, 60)]


@pytest.mark.parametrize(
    "where,after_partitions",
    [
        ('"Order Id" > 40', None),
        ("\"CamelCase\" = 'v1'", None),
        ('"a.b" < 10', None),
        ("\"Part Col\" = 'p 1'", 1),
        ('"émoji✓"', None),
        ("\"Part Col\" IN ('p 0', 'p 2') AND \"Order Id\" % 2 = 1", 2),
        ('"CamelCase" IS NOT NULL AND "a.b" BETWEEN 3 AND 60', None),
    ],
)
def test_filters_on_quoted_names(sessions, where: str, after_partitions: int | None) -> None:
    ctx, ref = sessions
    q = f'SELECT count(*) AS n, sum("Order Id") AS s FROM t WHERE {where}'
    got = ctx.sql(q).to_pylist()
    assert got == ref.sql(q).to_pylist()
    assert got[0]["n"] > 0
    text = dd.explain(ctx, f"SELECT * FROM t WHERE {where}")
    m = re.search(r"files_total=(\d+) after_partition_pruning=(\d+) after_stats_pruning=(\d+)", text)
    assert m, text
    total, parts, stats = map(int, m.groups())
    # two appends of three partitions; the delete rewrote the three v0 files (ids 0..4 are in each)
    assert total == 6
    if after_partitions is not None:
        assert parts == 2 * after_partitions
    # stats JSON keys are the names themselves ("a.b" is one key): v1's files hold ids 30..59, and
    # after the delete the v0 files start at ids 5 / 6 / 7, so a.b = 1.5 * id < 10 keeps two
    expected_stats = {'"Order Id" > 40': 3, '"a.b" < 10': 2}
    if where in expected_stats:
        assert stats == expected_stats[where], text


@pytest.mark.parametrize(
    "where",
    [
        "\"Part Col\" = 'p 1' AND _change_type = 'delete'",
        '"Order Id" < 3',
        "\"CamelCase\" = 'v2' AND _commit_version = 1",
    ],
)
def test_change_feed_filters_on_quoted_names(sessions, table: Path, where: str) -> None:
    ctx, ref = sessions
    got = ctx.sql(f"SELECT count(*) AS n FROM table_changes('{table}', 0) WHERE {where}").to_pylist()
    assert got == ref.sql(f"SELECT count(*) AS n FROM c WHERE {where}").to_pylist()
    assert got[0]["n"] > 0


def test_partition_column_named_like_another_columns_physical_name(tmp_path: Path) -> None:
    """Column mapping renames can give a partition column the name another column is stored under
    (partition p -> a while data column a -> b, still stored as ``a``, PROTOCOL.md allows it):
    every query reading b with a filter failed ("Multiple matches for FieldRef.Name(a)")."""
    import json

    import pyarrow.parquet as pq

    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"a": pa.array([1, 2, 3], pa.int32())}), root / "f1.parquet")

    def field(name: str, typ: str, fid: int, phys: str) -> dict:
        meta = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": phys}
        return {"name": name, "type": typ, "nullable": True, "metadata": meta}

    def metadata(fields: list, parts: list) -> dict:
        conf = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
        schema = json.dumps({"type": "struct", "fields": fields})
        md = {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": schema}
        return {"metaData": md | {"partitionColumns": parts, "configuration": conf, "createdTime": 0}}

    size = (root / "f1.parquet").stat().st_size
    add = {"path": "f1.parquet", "partitionValues": {"p": "x"}, "size": size, "modificationTime": 0}
    v0 = [
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        metadata([field("p", "string", 1, "p"), field("a", "integer", 2, "a")], ["p"]),
        {"add": add | {"dataChange": True}},
    ]
    v1 = [metadata([field("a", "string", 1, "p"), field("b", "integer", 2, "a")], ["a"])]
    for v, actions in enumerate([v0, v1]):
        text = "\n".join(json.dumps(x) for x in actions) + "\n"
        (root / "_delta_log" / f"{v:020d}.json").write_text(text)
    want = [{"a": "x", "b": 1}, {"a": "x", "b": 2}, {"a": "x", "b": 3}]
    assert dd.DeltaTable(str(root)).snapshot().scan().to_table().sort_by("b").to_pylist() == want
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    for where, rows in [
        ("b > 1", want[1:]),
        ("a = 'x' AND b = 2", want[1:2]),
        ("a = 'y'", []),
        ("a = 'x' OR b = 1", want),
    ]:
        assert ctx.sql(f"SELECT a, b FROM t WHERE {where} ORDER BY b").to_pylist() == rows, where
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE b = 2").to_pydict() == {"n": [1]}
