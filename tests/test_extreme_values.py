"""Extreme values through every read path, on tables written by deltalake: the package's rows
must be deltalake's own (read whole, then filtered by DataFusion in memory)."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import DeltaTable as DeltalakeTable  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402

DEC_SCHEMA = pa.schema([("id", pa.int64()), ("d10", pa.decimal128(38, 10)), ("d38", pa.decimal128(38, 38))])
MAX_D10 = "9" * 28 + "." + "9" * 10  # strings: Decimal arithmetic would round to 28 digits
TINY_D38 = "0." + "0" * 37 + "1"


@pytest.fixture(scope="module")
def extreme_decimals(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two files: deltalake logs the decimal(38,10) maximum as the double ``1e+28`` (39 digits at
    scale 10) and the decimal(38,38) ``1e-38`` as ``9.999999999999998e-39`` (scale 54)."""
    path = str(tmp_path_factory.mktemp("extreme") / "decimals")
    for rows in (
        {"id": [0, 1], "d10": [Decimal(MAX_D10), Decimal("-" + MAX_D10)], "d38": [Decimal(0), None]},
        {"id": [2, 3], "d10": [Decimal(0), None], "d38": [Decimal(TINY_D38), Decimal("-" + TINY_D38)]},
    ):
        write_deltalake(path, pa.table(rows, schema=DEC_SCHEMA), mode="append")
    return path


def _oracle_ids(path: str, where: str) -> list[int]:
    ctx = SessionContext()
    ctx.from_arrow(DeltalakeTable(path).to_pyarrow_table(), "o")
    return sorted(ctx.sql(f"SELECT id FROM o WHERE {where}").to_pydict()["id"])


def test_decimal_statistics_beyond_the_column_precision_are_unknown(extreme_decimals: str) -> None:
    files = dd.DeltaTable(extreme_decimals).snapshot().files()
    files.validate(full=True)  # no decimal beyond its type's precision
    assert files.num_rows == 2


@pytest.mark.parametrize(
    "where",
    [
        "d10 > 0",
        f"d10 = CAST('{MAX_D10}' AS DECIMAL(38, 10))",
        f"d10 < CAST('-{'9' * 27}' AS DECIMAL(38, 10))",
        "d38 > 0",
        f"d38 = CAST('{TINY_D38}' AS DECIMAL(38, 38))",
        "d38 < 0 OR d10 > 1",
        "id >= 0",
    ],
)
def test_extreme_decimals_read_as_deltalake_does(extreme_decimals: str, where: str) -> None:
    expected = _oracle_ids(extreme_decimals, where)
    scanned = dd.DeltaTable(extreme_decimals).snapshot().scan(predicate=where).to_table()
    assert sorted(scanned.column("id").to_pylist()) == expected
    ctx = SessionContext()
    dd.register_table(ctx, "t", extreme_decimals)
    assert sorted(ctx.sql(f"SELECT id FROM t WHERE {where}").to_pydict()["id"]) == expected


def test_many_date_and_decimal_bounds_convert_together_each_as_alone(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Date bounds (parsed from strings) and decimal bounds (checked against their precision) are
    converted one pyarrow call per type, not one per column (5,000 columns: 2,500 calls); each
    column's bounds stay its own: one decimal beyond its precision is unknown, not its neighbours."""
    from delta_datafusion import stats

    width = 12
    dec, date = pa.decimal128(38, 10), pa.date32()
    schema = pa.schema(
        [("id", pa.int64())]
        + [(f"d{i}", dec) for i in range(width)]
        + [(f"t{i}", date) for i in range(width)]
    )
    day = datetime.date(2020, 1, 1)
    cols = {"id": [0, 1]}
    cols |= {f"d{i}": [Decimal(i), Decimal(f"{i}.5")] for i in range(width)}
    cols["d3"] = [Decimal(0), Decimal(MAX_D10)]  # logged as 1e+28: beyond decimal(38, 10)
    cols |= {
        f"t{i}": [day + datetime.timedelta(days=i), day + datetime.timedelta(days=i + 40)]
        for i in range(width)
    }
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table(cols, schema=schema))

    calls = {"decimal": 0, "date": 0}
    within, strptime = stats._within_precision, stats.pc.strptime

    def counted_within(arr):
        calls["decimal"] += 1
        return within(arr)

    def counted_strptime(*args, **kw):
        calls["date"] += 1
        return strptime(*args, **kw)

    monkeypatch.setattr(stats, "_within_precision", counted_within)
    monkeypatch.setattr(stats.pc, "strptime", counted_strptime)
    files = dd.DeltaTable(path).snapshot().files()
    monkeypatch.undo()
    # minValues and maxValues: one call each per type (was one per column: 24 each)
    assert calls == {"decimal": 2, "date": 2}
    files.validate(full=True)
    st = files.column("stats")[0].as_py()
    mins, maxs = st["minValues"], st["maxValues"]
    assert maxs["d3"] is None and mins["d3"] == Decimal(0)
    for i in (*range(3), *range(4, width)):
        assert (mins[f"d{i}"], maxs[f"d{i}"]) == (Decimal(i), Decimal(f"{i}.5"))
    for i in range(width):
        assert (mins[f"t{i}"], maxs[f"t{i}"]) == (
            day + datetime.timedelta(days=i),
            day + datetime.timedelta(days=i + 40),
        )


def test_bounds_converted_together_are_each_their_own_arrays(tmp_path) -> None:
    """Each column's converted bounds own their values: slices of the joined array carried it
    whole, and a pickle (a remote executor's results, transport="pickle") held it once per column
    (a 300-column table's file list: 0.4 -> 2.2 MB)."""
    import pickle

    width = 40
    dec = pa.decimal128(38, 10)
    schema = pa.schema(
        [("id", pa.int64())]
        + [(f"t{i}", pa.date32()) for i in range(width)]
        + [(f"d{i}", dec) for i in range(width)]
    )
    day = datetime.date(2020, 1, 1)
    path = str(tmp_path / "t")
    for f in range(3):
        cols = {"id": [f, f + 10]}
        cols |= {
            f"t{i}": [day + datetime.timedelta(days=i), day + datetime.timedelta(days=i + f)]
            for i in range(width)
        }
        cols |= {f"d{i}": [Decimal(i), Decimal(MAX_D10) if i == 3 else Decimal(f)] for i in range(width)}
        write_deltalake(path, pa.table(cols, schema=schema), mode="append")
    stats = dd.DeltaTable(path).snapshot().files().column("stats")
    compact = stats.combine_chunks()  # every child rebuilt with its own buffers
    assert compact.field("maxValues").field("d3").null_count == 3  # beyond decimal(38, 10): unknown
    pickled, pickled_compact = len(pickle.dumps(stats)), len(pickle.dumps(compact))
    assert pickled < 1.2 * pickled_compact


def _one_partition_day(path: str, column: str, day: int) -> None:
    """A table of one row partitioned by ``column``, a date (``d``) or timestamp (``ts``) on
    ``day`` (days since the epoch)."""
    if column == "d":
        value = pa.array([day], pa.int32()).view(pa.date32())
    else:
        value = pa.array([day * 86_400_000_000], pa.int64()).view(pa.timestamp("us", "UTC"))
    write_deltalake(path, pa.table({"id": pa.array([0], pa.int64()), column: value}), partition_by=[column])


@pytest.mark.parametrize("column", ["d", "ts"])
@pytest.mark.parametrize(
    ("day", "shown"), [(3_000_000, r"\+10183-09-21"), (-800_000, "-0221-09-04"), (-719_528, "0000-01-01")]
)
def test_partition_dates_and_times_beyond_python_years(tmp_path, column: str, day: int, shown: str) -> None:
    """deltalake (like Spark) writes partition values of years beyond 9999 or before 0000 with a
    sign or more digits (``+10183-09-21``, ``-0221-09-04``): valid Delta values, which such a
    table was refused as a corrupt log for ("cannot be read as date32"); year 0000 failed with
    Python's OverflowError. Both are refused as unsupported, naming the value and its file (scan
    units hold partition values as Python dates)."""
    path = str(tmp_path / column)
    _one_partition_day(path, column, day)
    with pytest.raises(
        dd.UnsupportedFeatureError, match=f"value '{shown}.*beyond the years 1\\.\\.9999.*data file"
    ):
        dd.DeltaTable(path).snapshot().files()
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", path)
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT * FROM t").collect()
    assert isinstance(dd.from_datafusion(info.value), dd.UnsupportedFeatureError)
    _one_partition_day(str(tmp_path / "first"), column, -719_162)  # 0001-01-01 reads
    assert dd.DeltaTable(str(tmp_path / "first")).snapshot().scan().to_table().num_rows == 1
