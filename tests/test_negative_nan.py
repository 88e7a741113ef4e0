"""NaN values stored with the sign bit set (numpy on x86 makes them: ``inf - inf``, ``0.0 / 0.0``).

DataFusion compares floats by their total order, where such a NaN sorts below -inf, while Spark,
DuckDB and Polars treat every NaN as one value above +inf, and so do this package's row filters
and pruning. Rows are therefore read with every NaN made the positive one: the filters pushed to
the provider then agree with what DataFusion computes on the rows it gets (a filter it evaluates
itself, ORDER BY), whichever way a query is planned. The oracle here is DataFusion over the rows
the package returned, loaded in memory, so a pushed filter and DataFusion's own evaluation of the
same text must give the same rows.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402

NEG = math.copysign(math.nan, -1.0)
NEG_NAN = "-('NaN'::double)"
#: Unsigned views of the two widths: above these bit patterns a float is a NaN with the sign set.
NEGATIVE_NAN_ABOVE = {
    pa.float64(): (pa.uint64(), 0xFFF0000000000000),
    pa.float32(): (pa.uint32(), 0xFF800000),
}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Three files (deltalake writes one an append): -NaN alone beside numbers (its file's
    statistics say min 1.0), -NaN and NaN together, and no NaN; float and double columns, a NULL,
    the feed enabled (an update gives change rows too)."""
    path = str(tmp_path_factory.mktemp("negnan") / "t")
    parts = [
        {"id": [1, 2, 3], "f": [1.0, 2.0, NEG]},
        {"id": [4, 5, 6, 7], "f": [-1.0, math.nan, 1.5, NEG]},
        {"id": [8, 9, 10], "f": [float("-inf"), None, 0.0]},
    ]
    for i, p in enumerate(parts):
        rows = pa.table(
            {"id": pa.array(p["id"], pa.int64()), "f": pa.array(p["f"], pa.float64())}
        ).append_column("g", pa.array(p["f"], pa.float32()))
        write_deltalake(
            path,
            rows,
            mode="append" if i else "error",
            configuration=None if i else {"delta.enableChangeDataFeed": "true"},
        )
    from deltalake import DeltaTable

    DeltaTable(path).update(predicate="id = 10", updates={"id": "11"})
    return path


def _negative_nans(t: pa.Table) -> list[str]:
    """The columns of ``t`` holding a NaN with the sign bit set."""
    out = []
    for name, col in zip(t.column_names, t.columns, strict=True):
        if col.type in NEGATIVE_NAN_ABOVE:
            as_uint, above = NEGATIVE_NAN_ABOVE[col.type]
            bits = col.combine_chunks().view(as_uint).to_pylist()
            if any(b is not None and b > above for b in bits):
                out.append(name)
    return out


def test_the_table_holds_negative_nans(table: str) -> None:
    """The fixture is what this file is about: its parquet files keep the sign bit."""
    import pyarrow.dataset as ds

    raw = ds.dataset(table, format="parquet").to_table()
    assert _negative_nans(raw) == ["f", "g"]


def test_rows_read_carry_no_negative_nan(table: str) -> None:
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", table)
    assert _negative_nans(ctx.sql("SELECT * FROM t").to_arrow_table()) == []
    assert _negative_nans(ctx.sql("SELECT * FROM t WHERE f > 0.5 OR f IS NULL").to_arrow_table()) == []
    assert _negative_nans(ctx.sql("SELECT * FROM table_changes('t', 0)").to_arrow_table()) == []
    snapshot = dd.DeltaTable(table).snapshot()
    assert _negative_nans(snapshot.scan().to_table()) == []
    assert _negative_nans(snapshot.scan(predicate="g > 0.5").to_table()) == []
    # NaN rows are all there, made positive
    nan_ids = ctx.sql("SELECT id FROM t WHERE isnan(f) ORDER BY id").to_pydict()["id"]
    assert nan_ids == [3, 5, 7]


FILTERS = [
    "f < 0.0",
    "f <= 1.0",
    "f > 1.0",
    "f >= 1.5",
    "f = 'NaN'::double",
    "f <> 'NaN'::double",
    "f > 'NaN'::double",
    "f < 'NaN'::double",
    "NOT (f < 0.0)",
    "g < 0.0",
    "g > 1.0",
    "g = 'NaN'::float",
    "f IN ('NaN'::double, 1.5)",
    "f IN ('NaN'::double, 1.5, 2.0, 3.0)",
    f"f IN ({NEG_NAN}, 1.5, 2.0, 3.0)",
    f"f NOT IN ({NEG_NAN}, 1.5, 2.0, 3.0)",
    "f NOT IN ('NaN'::double, 1.5, 2.0, 3.0)",
    f"f = {NEG_NAN}",
    f"f <> {NEG_NAN}",
    f"f > {NEG_NAN}",
    f"f >= {NEG_NAN}",
    f"f < {NEG_NAN}",
    f"f <= {NEG_NAN}",
    f"{NEG_NAN} < f",
    f"NOT (f > {NEG_NAN})",
    f"NOT (f < {NEG_NAN})",
    f"f < {NEG_NAN} OR id = 1",
    "f BETWEEN -1.0 AND 1.0",
    "f = g",
    "f < g",
]


@pytest.fixture(scope="module")
def sessions(table: str) -> tuple[SessionContext, SessionContext]:
    """(the table registered by the package, DataFusion over its rows in memory)."""
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", table)
    mem = SessionContext()
    mem.register_record_batches("t", [ctx.sql("SELECT * FROM t").to_arrow_table().to_batches()])
    return ctx, mem


@pytest.mark.parametrize("where", FILTERS)
def test_filter_agrees_with_datafusion_on_the_rows(sessions, where: str) -> None:
    ctx, mem = sessions
    sql = f"SELECT id FROM t WHERE {where} ORDER BY id"
    assert ctx.sql(sql).to_pydict()["id"] == mem.sql(sql).to_pydict()["id"], where


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ("f < 0.0", [4, 8]),
        ("f > 1.0", [2, 3, 5, 6, 7]),
        ("f = 'NaN'::double", [3, 5, 7]),
        ("g < 0.0", [4, 8]),
        ("f IN ('NaN'::double, 1.5, 2.0, 3.0)", [2, 3, 5, 6, 7]),
        (f"f IN ({NEG_NAN}, 1.5, 2.0, 3.0)", [2, 6]),
        (f"f > {NEG_NAN}", [1, 2, 3, 4, 5, 6, 7, 8, 11]),
        (f"f < {NEG_NAN}", []),
        (f"NOT (f < {NEG_NAN})", [1, 2, 3, 4, 5, 6, 7, 8, 11]),
    ],
)
def test_every_nan_is_one_value_above_every_number(table: str, where: str, ids: list[int]) -> None:
    """As Spark, DuckDB and Polars answer over these files; through SQL and the Python API."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", table)
    assert ctx.sql(f"SELECT id FROM t WHERE {where} ORDER BY id").to_pydict()["id"] == ids
    got = dd.DeltaTable(table).snapshot().scan(predicate=where).to_table().column("id").to_pylist()
    assert sorted(got) == ids


def test_order_by_puts_every_nan_last(sessions) -> None:
    ctx, _ = sessions
    ids = ctx.sql("SELECT id FROM t WHERE f IS NOT NULL ORDER BY f, id").to_pydict()["id"]
    assert ids[-3:] == [3, 5, 7]


@pytest.mark.parametrize("where", ["f < 0.0", "f > 1.0", "f = 'NaN'::double", f"f > {NEG_NAN}", "g <= 1.0"])
def test_change_feed_filter_agrees_with_datafusion_on_the_rows(table: str, where: str) -> None:
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", table)
    feed = "SELECT id, f, g, _change_type, _commit_version FROM table_changes('t', 0)"
    mem = SessionContext()
    mem.register_record_batches("c", [ctx.sql(feed).to_arrow_table().to_batches()])
    key = "ORDER BY _commit_version, id, _change_type"
    cols = "id, _change_type, _commit_version"
    got = ctx.sql(f"SELECT {cols} FROM ({feed} WHERE {where}) {key}").to_pydict()
    want = mem.sql(f"SELECT {cols} FROM c WHERE {where} {key}").to_pydict()
    assert got == want, where
    assert got["id"], where  # every filter here matches rows


def test_a_checkpointed_table_reads_the_same(tmp_path: Path) -> None:
    """The same rows after a checkpoint (stats from the checkpoint, not the commits)."""
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2, 3], "f": [1.0, 2.0, NEG]}))
    DeltaTable(path).create_checkpoint()
    ctx = SessionContext()
    dd.register_table(ctx, "t", path)
    assert ctx.sql("SELECT id FROM t WHERE f < 0.0").to_pydict()["id"] == []
    assert ctx.sql("SELECT id FROM t WHERE f > 1.5 ORDER BY id").to_pydict()["id"] == [2, 3]


@pytest.mark.parametrize("typ", [pa.float64(), pa.float32()])
def test_negative_nans_of_a_sliced_column_are_found_in_the_slice_only(typ: pa.DataType) -> None:
    """The check reads the column's buffer at its offset: a batch sliced out of a longer one holds
    a -NaN at its last row (found, made positive), and one whose -NaN lies before its offset has
    none (left as it is); a NULL keeps its place, whatever its slot holds."""
    from delta_datafusion.read.nan_filters import float_positions, positive_nans

    values = pa.array([NEG, 1.0, None, 2.0, NEG], typ)
    whole = pa.record_batch({"id": pa.array(range(5), pa.int64()), "f": values})
    assert float_positions(whole.schema) == [1]
    tail, middle = whole.slice(1, 4), whole.slice(1, 3)
    as_uint, above = NEGATIVE_NAN_ABOVE[typ]
    fixed_tail, fixed_middle = list(positive_nans(iter([tail, middle]), [1]))
    tail_bits = fixed_tail.column(1).view(as_uint).to_pylist()
    assert tail_bits[:3] == tail.column(1).view(as_uint).to_pylist()[:3]  # the values before it kept
    assert tail_bits[3] <= above and math.isnan(fixed_tail.column(1)[3].as_py())
    assert fixed_tail.column(1).is_null().to_pylist() == [False, True, False, False]
    assert fixed_middle is middle  # nothing to make positive: the batch passes as it is
