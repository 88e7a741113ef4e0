"""Set operations across Delta inputs: two tables, two versions of one table, two change ranges.

DataFusion 55 fails ``count(*)`` over ``UNION ALL`` of inputs whose schema metadata differ, so a
provider that put its location or version into the schema broke every such query (found: `SELECT
count(*) FROM (SELECT id FROM a UNION ALL SELECT id FROM b)` -> "Physical input schema should be
the same as the one converted from logical input schema").
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from datafusion import SessionContext
from deltalake import DeltaTable as DLTable
from deltalake import write_deltalake

import delta_datafusion as dd

CDF = {"delta.enableChangeDataFeed": "true"}


def _rows(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    return pa.table({"id": ids, "part": [f"p{i % 2}" for i in ids], "v": [i * 10 for i in ids]})


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> SessionContext:
    root = tmp_path_factory.mktemp("setops")
    a, b = root / "a", root / "b"
    write_deltalake(str(a), _rows(0, 10), partition_by=["part"], configuration=CDF)  # v0
    write_deltalake(str(a), _rows(10, 25), mode="append")  # v1
    DLTable(str(a)).delete("id < 3")  # v2
    write_deltalake(str(b), _rows(100, 104))
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "a", str(a))
    dd.register_table(ctx, "a0", str(a), version=0)
    dd.register_table(ctx, "b", str(b))
    dd.register_catalog(ctx, "lake", str(root))
    return ctx


def _n(ctx: SessionContext, sql: str) -> int:
    return ctx.sql(sql).to_pylist()[0]["n"]


@pytest.mark.parametrize(
    "left,right",
    [
        ("a", "b"),  # two tables
        ("a", "a0"),  # two versions of one table
        ("lake.default.a", "b"),  # a catalog table and a registered one
        ("table_changes('a', 0, 0)", "table_changes('a', 1)"),  # two change ranges
        ("table_changes('a', 2)", "a"),  # a change feed and a table
    ],
)
def test_union_all_counts(ctx: SessionContext, left: str, right: str) -> None:
    nl = _n(ctx, f"SELECT count(*) AS n FROM {left}")
    nr = _n(ctx, f"SELECT count(*) AS n FROM {right}")
    assert nl > 0 and nr > 0
    assert (
        _n(ctx, f"SELECT count(*) AS n FROM (SELECT id FROM {left} UNION ALL SELECT id FROM {right})")
        == nl + nr
    )
    ids = ctx.sql(f"SELECT id FROM {left} UNION ALL SELECT id FROM {right} ORDER BY id").to_pydict()["id"]
    want = sorted(
        ctx.sql(f"SELECT id FROM {left}").to_pydict()["id"]
        + ctx.sql(f"SELECT id FROM {right}").to_pydict()["id"]
    )
    assert ids == want


def test_union_except_and_full_rows(ctx: SessionContext) -> None:
    # versions compared in SQL: what v2 lost against v0, what it gained
    assert ctx.sql("SELECT id FROM a0 EXCEPT SELECT id FROM a ORDER BY id").to_pydict()["id"] == [0, 1, 2]
    assert _n(ctx, "SELECT count(*) AS n FROM (SELECT id FROM a EXCEPT SELECT id FROM a0)") == 15
    assert _n(ctx, "SELECT count(*) AS n FROM (SELECT id FROM a UNION SELECT id FROM a0)") == 25
    both = ctx.sql("SELECT * FROM a UNION ALL SELECT * FROM b").to_arrow_table()
    assert both.num_rows == 22 + 4
    assert sorted(both.column("id").to_pylist()) == list(range(3, 25)) + list(range(100, 104))
