"""Two ``table_changes()`` calls of one statement compared through subqueries, against the same
ranges' rows registered in memory under names of their own.

DataFusion names every scan of a table function after the function (``table_changes()``), so the
two calls share one qualifier, as a table read twice without aliases does. Two DataFusion 55 bugs
then give silent wrong rows (README, Limits): its common-subexpression elimination takes two such
scans in one expression for one, and its rewrite of a quantified comparison (``x = ANY (SELECT
...)``, ``x > ALL (SELECT ...)``) resolves the outer query's column to the subquery's when both
sides have one qualifier (apache/datafusion#25258, any table). The forms the README gives to keep
the calls apart are checked here; the ``upstream`` tests pin what DataFusion 55 still does
wrong, so that the README is corrected when a DataFusion upgrade fixes it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from datafusion import SessionContext
from deltalake import DeltaTable as DLTable
from deltalake import write_deltalake

import delta_datafusion as dd

CDF = {"delta.enableChangeDataFeed": "true"}


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory) -> SessionContext:
    """``t``: ids 1..4 inserted at version 0, 5 and 6 at version 1, id 2 updated at version 2;
    ``m0``, ``m1``, ``m2``: the change rows of versions 0, 1 and 2 in memory."""
    path = Path(tmp_path_factory.mktemp("tc_subqueries")) / "t"
    table = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "v": [10, 20, 30, 40]})
    write_deltalake(str(path), table, configuration=CDF)
    write_deltalake(str(path), pa.table({"id": pa.array([5, 6], pa.int64()), "v": [50, 60]}), mode="append")
    DLTable(str(path)).update({"v": "v + 1"}, predicate="id = 2")
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(path))
    for v in range(3):
        rows = ctx.sql(f"SELECT id, v, _change_type FROM table_changes('t', {v}, {v})").to_arrow_table()
        ctx.register_record_batches(f"m{v}", [rows.to_batches()])
    return ctx


def _feed(v: int) -> str:
    return f"table_changes('t', {v}, {v})"


def _both(ctx: SessionContext, query: str, *versions: int) -> tuple[Counter, Counter]:
    """The rows of ``query`` with {0}, {1}, ... standing for the change ranges of ``versions``:
    over the feeds, and over their rows in memory (each its own table)."""
    over_feeds = ctx.sql(query.format(*(_feed(v) for v in versions))).to_pylist()
    in_memory = ctx.sql(query.format(*(f"m{v}" for v in versions))).to_pylist()
    return _bag(over_feeds), _bag(in_memory)


def _bag(rows: list[dict]) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in rows)


ALIASED = [
    "SELECT id FROM {0} a WHERE a.id = ANY (SELECT b.id FROM {1} b)",
    "SELECT id FROM {0} WHERE id = ANY (SELECT id FROM {1} b)",  # one alias is enough
    "SELECT id FROM {0} a WHERE id <> ALL (SELECT id FROM {1})",
    "SELECT id FROM {0} a WHERE a.id > ALL (SELECT b.id FROM {1} b)",
    "SELECT id FROM {0} a WHERE a.v < ANY (SELECT b.v FROM {1} b WHERE b._change_type <> 'update_preimage')",
    "SELECT id FROM {0} a WHERE a.id >= ALL (SELECT b.id FROM {1} b)",
]


@pytest.mark.parametrize("query", ALIASED)
@pytest.mark.parametrize("versions", [(0, 1), (1, 0), (2, 0), (0, 2)])
def test_a_quantified_comparison_of_two_ranges_with_an_alias(
    ctx: SessionContext, query: str, versions: tuple[int, int]
) -> None:
    ours, reference = _both(ctx, query, *versions)
    assert ours == reference


KEPT_APART = [
    # the forms the README gives for two calls in one statement
    "SELECT a.id, b.v FROM {0} a JOIN {1} b ON a.id + 4 = b.id",
    "SELECT count(*) AS n FROM {0} UNION ALL SELECT count(*) AS n FROM {1}",
    "WITH a AS (SELECT count(*) AS n FROM {0}), b AS (SELECT count(*) AS m FROM {1}) SELECT * FROM a CROSS JOIN b",
    "SELECT id FROM {0} WHERE id IN (SELECT id - 4 FROM {1})",
    "SELECT id FROM {0} WHERE id NOT IN (SELECT id - 4 FROM {1})",
    "SELECT id FROM {0} a WHERE EXISTS (SELECT 1 FROM {1} b WHERE b.id = a.id + 4)",
    "SELECT id FROM {0} WHERE id < (SELECT min(id) FROM {1})",
]


@pytest.mark.parametrize("query", KEPT_APART)
def test_forms_that_keep_two_calls_apart(ctx: SessionContext, query: str) -> None:
    for versions in [(0, 1), (1, 0), (2, 1)]:
        ours, reference = _both(ctx, query, *versions)
        assert ours == reference, versions


def test_upstream_unaliased_quantified_comparison_compares_a_range_with_itself(ctx: SessionContext) -> None:
    """DataFusion 55 (apache/datafusion#25258): with no alias, the outer ``id`` is read as the
    subquery's own, so ``= ANY`` holds for every row and ``> ALL`` for none. When this fails,
    DataFusion got it right: drop the README's paragraph on it."""
    assert sorted(
        r["id"]
        for r in ctx.sql(f"SELECT id FROM {_feed(0)} WHERE id = ANY (SELECT id FROM {_feed(1)})").to_pylist()
    ) == [1, 2, 3, 4]
    assert ctx.sql(f"SELECT id FROM {_feed(1)} WHERE id > ALL (SELECT id FROM {_feed(0)})").to_pylist() == []
    # the same rows in memory, under names of their own: [] and [5, 6]
    assert ctx.sql("SELECT id FROM m0 WHERE id = ANY (SELECT id FROM m1)").to_pylist() == []
    assert sorted(
        r["id"] for r in ctx.sql("SELECT id FROM m1 WHERE id > ALL (SELECT id FROM m0)").to_pylist()
    ) == [5, 6]


def test_upstream_scalar_subqueries_of_two_calls_in_one_expression_are_one(ctx: SessionContext) -> None:
    """DataFusion 55's common-subexpression elimination takes the second call for the first
    (README, Limits). When this fails, DataFusion got it right: drop the README's paragraph."""
    query = "SELECT (SELECT count(*) FROM {0}) AS a, (SELECT count(*) FROM {1}) AS b"
    assert ctx.sql(query.format(_feed(0), _feed(1))).to_pylist() == [{"a": 4, "b": 4}]
    assert ctx.sql(query.format("m0", "m1")).to_pylist() == [{"a": 4, "b": 2}]
