"""Filters on every corpus table: pruning and row filters agree with a plain filter of the rows.

For each corpus table with a snapshot expectation at its latest version, and for each top-level
column of a primitive type, a handful of filters (IS [NOT] NULL, and =, <>, <, >= against the
column's median value) run through the provider -- partition pruning, stats pruning (JSON stats,
``stats_parsed``, deletion vectors, column mapping, truncated timestamps) and the SQL-exact row
filter -- and through DataFusion over an in-memory copy of the same table's rows. The counts must
be equal: a file skipped wrongly, or a row filter with the wrong semantics, shows up here on real
tables written by Spark/Delta.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import corpus_available, corpus_missing_reason, corpus_table, manifest_tables
from datafusion import SessionContext

import delta_datafusion as dd

pytestmark = pytest.mark.skipif(not corpus_available(), reason=corpus_missing_reason())

# The kernel's parsed-stats table gives ts_col statistics (nullCount 0, min/max) for data files
# that have no ts_col column at all, so its rows read as NULL while its statistics say no NULLs.
# Pruning trusts the log's statistics (as delta-kernel-rs and deltalake do: IS NULL gives 0 rows
# there too; DuckDB gives 600), so the two answers differ by construction of the table.
CONTRADICTORY_STATS = {("parsed-stats", "ts_col")}


def _tables() -> list[str]:
    names = []
    for t in manifest_tables():
        latest = [
            e for e in t.get("expected", []) if e.get("kind") == "snapshot" and e.get("version") is None
        ]
        if latest and latest[0].get("rows"):
            names.append(t["name"])
    return names


def _literal(v: object, typ: pa.DataType) -> str | None:
    if v is None:
        return None
    if pa.types.is_boolean(typ):
        return "true" if v else "false"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return "'" + str(v).replace("'", "''") + "'"
    if pa.types.is_integer(typ):
        return f"CAST({v} AS BIGINT)"
    if pa.types.is_floating(typ):
        return f"CAST({v!r} AS DOUBLE)"
    if pa.types.is_decimal(typ):
        return f"CAST({v} AS DECIMAL({typ.precision}, {typ.scale}))"
    if pa.types.is_date(typ):
        return f"DATE '{v}'"
    if pa.types.is_timestamp(typ) and isinstance(v, dt.datetime):
        # a string literal: DataFusion coerces it to the column's type (UTC offset for tz columns)
        return "'" + v.isoformat() + "'"
    return None


def _filters(table: pa.Table, name: str) -> list[str]:
    f = table.schema.field(name)
    q = '"' + name.replace('"', '""') + '"'
    out = [f"{q} IS NULL", f"{q} IS NOT NULL"]
    values = table.column(name).drop_null()
    if len(values) and not (pa.types.is_floating(f.type) and pc.any(pc.is_nan(values)).as_py()):
        median = values.take(pc.sort_indices(values))[len(values) // 2].as_py()
        lit = _literal(median, f.type)
        if lit is not None:
            out += [f"{q} = {lit}", f"{q} <> {lit}", f"{q} < {lit}", f"{q} >= {lit}"]
    return out


def _primitive(t: pa.DataType) -> bool:
    return not pa.types.is_nested(t) and not pa.types.is_binary(t) and not pa.types.is_null(t)


@pytest.mark.parametrize("name", _tables())
def test_filters_agree_with_the_rows(name: str) -> None:
    path = corpus_table(name)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    rows = ctx.sql("SELECT * FROM t").to_arrow_table()
    assert rows.num_rows > 0
    ref = SessionContext()
    ref.register_record_batches("t", [rows.to_batches()])
    checked = 0
    for field in rows.schema:
        if not _primitive(field.type) or (name, field.name) in CONTRADICTORY_STATS:
            continue
        for where in _filters(rows, field.name):
            q = f"SELECT count(*) AS n FROM t WHERE {where}"
            assert ctx.sql(q).to_pylist() == ref.sql(q).to_pylist(), f"{name}: {where}"
            checked += 1
    assert checked > 0 or all(not _primitive(f.type) for f in rows.schema)


def test_contradictory_stats_are_as_described() -> None:
    """Keeps the exclusion above honest: the table really reads NULL where its stats say no NULLs."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(corpus_table("parsed-stats")))
    # the rows, read: all NULL; the statistics (nullCount 0 in every file) prove IS NOT NULL for
    # every row, so count(*) under it is answered from the log without reading
    assert ctx.sql("SELECT count(ts_col) AS n FROM t").to_pylist() == [{"n": 0}]
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE ts_col IS NOT NULL").to_pylist() == [{"n": 600}]
    files = dd.DeltaTable(str(corpus_table("parsed-stats"))).snapshot().files()
    null_counts = pc.struct_field(pc.struct_field(files.column("stats"), "nullCount"), "ts_col")
    assert pc.all(pc.equal(null_counts, 0)).as_py()


def test_statistics_proven_files_are_still_filtered() -> None:
    """The reader keeps the row filter on files whose statistics prove it (it skips it only for
    partition values and constants): with this table's statistics, skipping it would hand on 600
    rows whose ts_col is NULL under ``WHERE ts_col IS NOT NULL``. The count, answered from the
    log, trusts them (see the test above)."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(corpus_table("parsed-stats")))
    assert ctx.sql("SELECT ts_col FROM t WHERE ts_col IS NOT NULL").to_pylist() == []
    got = ctx.sql(
        "SELECT count(ts_col) AS c, count(*) AS n FROM (SELECT ts_col FROM t WHERE ts_col IS NOT NULL)"
    )
    assert got.to_pylist() == [{"c": 0, "n": 0}]


def _change_ranges() -> list[tuple[str, int, int | None]]:
    out = []
    for t in manifest_tables():
        for e in t.get("expected", []):
            if e.get("kind") == "cdf" and e.get("rows"):
                out.append((t["name"], e.get("start_version", 0), e.get("end_version")))
    return out


@pytest.mark.parametrize("name,start,end", _change_ranges())
def test_change_feed_filters_agree_with_the_rows(name: str, start: int, end: int | None) -> None:
    """The same on every corpus change-feed range, change columns included (commit pruning,
    change-type constants, commit timestamps, cdc footers, DV diffs)."""
    path = str(corpus_table(name)).replace("'", "''")
    src = f"table_changes('{path}', {start}" + ("" if end is None else f", {end}") + ")"
    ctx = SessionContext()
    dd.register(ctx)
    rows = ctx.sql(f"SELECT * FROM {src}").to_arrow_table()
    assert rows.num_rows > 0
    ref = SessionContext()
    ref.register_record_batches("c", [rows.to_batches()])
    for field in rows.schema:
        if not _primitive(field.type):
            continue
        for where in _filters(rows, field.name):
            got = ctx.sql(f"SELECT count(*) AS n FROM {src} WHERE {where}").to_pylist()
            assert got == ref.sql(f"SELECT count(*) AS n FROM c WHERE {where}").to_pylist(), (
                f"{name}: {where}"
            )


@pytest.mark.parametrize("name", _tables())
def test_combined_filters_agree_with_the_rows(name: str) -> None:
    """AND / OR / NOT of two of those filters (fixed random pairs per table): the evaluators'
    three-valued logic over real statistics and partition values."""
    import random

    ctx = SessionContext()
    dd.register_table(ctx, "t", str(corpus_table(name)))
    rows = ctx.sql("SELECT * FROM t").to_arrow_table()
    ref = SessionContext()
    ref.register_record_batches("t", [rows.to_batches()])
    leaves = [
        w
        for f in rows.schema
        if _primitive(f.type) and (name, f.name) not in CONTRADICTORY_STATS
        for w in _filters(rows, f.name)
    ]
    if len(leaves) < 2:
        pytest.skip(f"{name}: fewer than two filterable columns")
    rng = random.Random(name)
    for _ in range(3):
        a, b = rng.sample(leaves, 2)
        for where in (f"({a}) AND ({b})", f"({a}) OR NOT ({b})", f"NOT (({a}) AND ({b}))", f"({a}) OR ({b})"):
            q = f"SELECT count(*) AS n FROM t WHERE {where}"
            assert ctx.sql(q).to_pylist() == ref.sql(q).to_pylist(), f"{name}: {where}"
