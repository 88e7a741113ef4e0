"""Every snapshot expectation of the corpus, met through SQL (latest, version and timestamp)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import CORPUS, corpus_available, corpus_missing_reason, manifest_tables
from corpus_compare import assert_same_rows
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import DeltaTable

if not corpus_available():
    pytest.skip(corpus_missing_reason(), allow_module_level=True)


def _snapshot_cases():
    for t in manifest_tables():
        if t["category"] != "data":
            continue
        for e in t.get("expected", []):
            if e["kind"] == "snapshot":
                vid = "latest" if e["version"] is None else f"v{e['version']}"
                yield pytest.param(t, e, id=f"{t['name']}-{vid}")


CASES = list(_snapshot_cases())


@pytest.mark.parametrize(("table", "expectation"), CASES)
def test_corpus_select_star(table, expectation):
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(CORPUS / table["table_path"]), version=expectation["version"])
    got = ctx.sql("SELECT * FROM t").to_arrow_table()
    expected = pq.read_table(CORPUS / expectation["file"])
    assert_same_rows(got, expected, f"{table['name']}@{expectation['version']}")
    # count(*) is answered from the log (numRecords minus deletion-vector cardinality) where the
    # stats allow it, and by reading the files otherwise: the same number either way.
    count = ctx.sql("SELECT count(*) AS n FROM t").to_pydict()["n"][0]
    assert count == expected.num_rows, f"{table['name']}@{expectation['version']}: count(*)"


def _sql_literal(value, typ: pa.DataType) -> str:
    if pa.types.is_date(typ):
        return f"DATE '{value.isoformat()}'"
    if pa.types.is_decimal(typ):  # a bare 1.5 is a float literal in DataFusion
        return f"CAST('{value}' AS DECIMAL({typ.precision}, {typ.scale}))"
    return str(value)


def _exact_stats_columns(schema: pa.Schema) -> list[pa.Field]:
    """Up to two top-level columns of the types whose statistics can prove a filter."""
    exact = [
        f
        for f in schema
        if pa.types.is_integer(f.type) or pa.types.is_date(f.type) or pa.types.is_decimal(f.type)
    ]
    return exact[:2]


RANGE_CASES = [
    c
    for c in CASES
    if pq.read_metadata(CORPUS / c.values[1]["file"]).num_rows
    and _exact_stats_columns(pq.read_schema(CORPUS / c.values[1]["file"]))
]


@pytest.mark.parametrize(("table", "expectation"), RANGE_CASES)
def test_corpus_count_star_under_stats_filters(table, expectation):
    """count(*) under range filters on integer/date/decimal columns (the types whose statistics
    can prove a filter for a whole file, deletion vectors included): equal to the expected rows
    that match, whether files are counted from the log or read."""
    expected = pq.read_table(CORPUS / expectation["file"])
    columns = _exact_stats_columns(expected.schema)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(CORPUS / table["table_path"]), version=expectation["version"])
    checked = 0
    for f in columns:
        col = expected.column(f.name)
        lo, hi = pc.min(col).as_py(), pc.max(col).as_py()
        if lo is None:
            continue
        checked += 1
        name = '"' + f.name.replace('"', '""') + '"'
        for cond, mask in (
            (f"{name} >= {_sql_literal(lo, f.type)}", pc.greater_equal(col, pc.min(col))),
            (f"{name} < {_sql_literal(hi, f.type)}", pc.less(col, pc.max(col))),
        ):
            want = pc.sum(pc.fill_null(mask, False).cast(pa.int64())).as_py() or 0
            got = ctx.sql(f"SELECT count(*) AS n FROM t WHERE {cond}").to_pydict()["n"][0]
            assert got == want, f"{table['name']}@{expectation['version']}: count(*) WHERE {cond}"
    assert checked, "every chosen column is all null"


TIME_TRAVEL = [c for c in CASES if c.values[1]["version"] is not None]


@pytest.mark.parametrize(("table", "expectation"), TIME_TRAVEL)
def test_corpus_time_travel_by_timestamp(table, expectation):
    """The commit timestamp of version N resolves back to N, and gives version N's rows."""
    path = str(CORPUS / table["table_path"])
    version = expectation["version"]
    timeline = DeltaTable(path).timeline()
    try:
        ts_ms = timeline.timestamp(version)
    except dd.DeltaError:
        pytest.skip(f"no commit file for version {version} (only a checkpoint): timestamps unknown")
    ctx = SessionContext()
    dd.register(ctx)
    iso = _iso(ts_ms)
    ctx.sql(f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '{path}' OPTIONS ('timestamp' '{iso}')")
    got = ctx.sql("SELECT * FROM t").to_arrow_table()
    assert f"version={version} " in dd.explain(ctx, "SELECT * FROM t")
    assert_same_rows(got, pq.read_table(CORPUS / expectation["file"]), f"{table['name']}@ts({version})")


def _iso(ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")


def test_corpus_vacuumed_version_fails_through_sql():
    """snapshot-vacuumed@v2: its files were vacuumed; the query must fail, not return partial rows."""
    entry = next(t for t in manifest_tables() if t["name"] == "snapshot-vacuumed")
    assert any(e["kind"] == "file_not_found" for e in entry["expect_error"])
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(CORPUS / entry["table_path"]), version=2)
    with pytest.raises(Exception, match="DataFileNotFoundError") as info:
        ctx.sql("SELECT * FROM t").to_arrow_table()
    assert "version 2" in str(info.value)


@pytest.mark.parametrize(
    "table",
    [t for t in manifest_tables() if t["category"] == "error"],
    ids=lambda t: t["name"],
)
def test_corpus_error_tables_fail_to_register(table):
    ctx = SessionContext()
    with pytest.raises(dd.DeltaError) as info:
        dd.register_table(ctx, "t", str(CORPUS / table["table_path"]))
    assert table["name"] in str(info.value)
