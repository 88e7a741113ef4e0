"""Statistics as other writers print them, hand-written into small tables: every query through SQL
returns what DataFusion returns over the same rows held in memory, and the bounds still prune.

Writers differ in how they print bounds: Delta-Spark writes timestamps in the session's zone with
an offset and cuts strings at 32 UTF-16 units with a tie-breaker (``\\x7f`` or U+10FFFF now,
U+FFFD before, which is no UTF-8 upper bound past the BMP); the Java kernel writes decimals as
``BigDecimal.toString`` (``1E+2``, ``1.00000000000E-7``), infinities and NaN as strings and
timestamp_ntz without a fraction when it is zero; Spark writes a checkpoint's ``stats_parsed``
timestamps as INT96 (its default output type), and a checkpoint written before a type widening
keeps the old types there."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from datafusion import SessionContext

import delta_datafusion as dd

UTC = dt.timezone.utc


def _field(name: str, typ: Any, changes: list[tuple[str, str]] | None = None) -> dict:
    meta = {"delta.typeChanges": [{"fromType": a, "toType": b} for a, b in changes]} if changes else {}
    return {"name": name, "type": typ, "nullable": True, "metadata": meta}


def _metadata(fields: list[dict], configuration: dict | None = None) -> dict:
    return {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps({"type": "struct", "fields": fields}),
            "partitionColumns": [],
            "configuration": configuration or {},
            "createdTime": 0,
        }
    }


def _add(root: Path, name: str, data: pa.Table, stats: str | None) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, root / name)
    add = {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size}
    add |= {"modificationTime": 0, "dataChange": True}
    return {"add": add if stats is None else {**add, "stats": stats}}


def _commit(root: Path, version: int, actions: list[dict]) -> None:
    (root / "_delta_log").mkdir(parents=True, exist_ok=True)
    text = "".join(json.dumps(a) + "\n" for a in actions)
    (root / "_delta_log" / f"{version:020d}.json").write_text(text)


def _checkpoint(root: Path, commit: list[dict], stats_parsed: pa.Array, int96: bool) -> None:
    """Checkpoint of version 0 (``commit``'s actions): the adds' stats only as ``stats_parsed``."""
    proto_t = pa.struct(
        [
            ("minReaderVersion", pa.int32()),
            ("minWriterVersion", pa.int32()),
            ("readerFeatures", pa.list_(pa.string())),
            ("writerFeatures", pa.list_(pa.string())),
        ]
    )
    md_t = pa.struct(
        [
            ("id", pa.string()),
            (
                "format",
                pa.struct([("provider", pa.string()), ("options", pa.map_(pa.string(), pa.string()))]),
            ),
            ("schemaString", pa.string()),
            ("partitionColumns", pa.list_(pa.string())),
            ("configuration", pa.map_(pa.string(), pa.string())),
            ("createdTime", pa.int64()),
        ]
    )
    proto = next(a["protocol"] for a in commit if "protocol" in a)
    md = next(a["metaData"] for a in commit if "metaData" in a)
    md = {
        **md,
        "format": {"provider": "parquet", "options": []},
        "configuration": list(md["configuration"].items()),
    }
    adds = [a["add"] for a in commit if "add" in a]
    add_t = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", pa.map_(pa.string(), pa.string())),
            ("size", pa.int64()),
            ("modificationTime", pa.int64()),
            ("dataChange", pa.bool_()),
            ("stats_parsed", stats_parsed.type),
        ]
    )
    rows = [None, None] + [
        {**{k: a[k] for k in ("path", "size", "modificationTime", "dataChange")}, "partitionValues": []}
        for a in adds
    ]
    add_col = pa.array(rows, pa.struct(list(add_t)[:-1]))
    add_col = pa.StructArray.from_arrays(
        [add_col.field(i) for i in range(add_t.num_fields - 1)]
        + [pa.concat_arrays([pa.nulls(2, stats_parsed.type), stats_parsed])],
        fields=list(add_t),
        mask=pa.array([True, True] + [False] * len(adds)),
    )
    table = pa.table(
        {
            "protocol": pa.array([proto] + [None] * (len(adds) + 1), proto_t),
            "metaData": pa.array([None, md] + [None] * len(adds), md_t),
            "add": add_col,
        }
    )
    log = root / "_delta_log"
    pq.write_table(table, log / f"{0:020d}.checkpoint.parquet", use_deprecated_int96_timestamps=int96)
    (log / "_last_checkpoint").write_text(json.dumps({"version": 0, "size": table.num_rows}))


def _same_as_in_memory(path: Path, rows: pa.Table, wheres: list[str]) -> SessionContext:
    """Every WHERE clause gives the in-memory rows and count; the context has the table as t."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    ctx.register_record_batches("m", [rows.to_batches()])
    for where in wheres:
        for select in ("count(*) AS n", "*"):
            ours = ctx.sql(f"SELECT {select} FROM t WHERE {where}").to_arrow_table().to_pylist()
            theirs = ctx.sql(f"SELECT {select} FROM m WHERE {where}").to_arrow_table().to_pylist()
            assert sorted(map(repr, ours)) == sorted(map(repr, theirs)), (select, where)
    return ctx


def _files_read(ctx: SessionContext, where: str) -> int:
    line = next(x for x in dd.explain(ctx, f"SELECT * FROM t WHERE {where}").splitlines() if "DeltaScan" in x)
    return int(line.split("after_stats_pruning=")[1].split()[0])


def _stats(num: int, mins: dict, maxs: dict, nulls: dict) -> str:
    return json.dumps({"numRecords": num, "minValues": mins, "maxValues": maxs, "nullCount": nulls})


def test_bounds_printed_as_spark_and_the_java_kernel_print_them(tmp_path: Path) -> None:
    """Offsets, truncated milliseconds, decimals in exponent notation, timestamp_ntz without a
    fraction, NaN / infinite float bounds as strings (those bounds are then unknown), and
    string maxima cut with each tie-breaker: a U+FFFD one below the row's U+1F600 in UTF-8 must
    not be trusted (it is 35 bytes long)."""
    schema = pa.schema(
        [
            ("t", pa.timestamp("us", tz="UTC")),
            ("n", pa.timestamp("us")),
            ("d", pa.decimal128(38, 18)),
            ("f", pa.float64()),
            ("s", pa.string()),
        ]
    )
    fields = [
        _field("t", "timestamp"),
        _field("n", "timestamp_ntz"),
        _field("d", "decimal(38,18)"),
        _field("f", "double"),
        _field("s", "string"),
    ]
    t1, t2 = dt.datetime(2024, 1, 1, 10, 0, 0, 123456, UTC), dt.datetime(2024, 1, 1, 11, 30, 0, 999999, UTC)
    n1, n2 = dt.datetime(1969, 12, 31, 23, 59, 59, 999), dt.datetime(1970, 1, 1, 0, 0, 0, 500000)
    old_max = "c" * 32 + "\U0001f600"
    files = [
        (  # Spark: a zone offset per bound; the Java kernel: exponent decimals, ntz without ".000"
            {
                "t": [t1, t2],
                "n": [n1, n2],
                "d": [Decimal("100"), Decimal("1E-7")],
                "f": [1.0, 2.0],
                "s": ["a", "b"],
            },
            '{"numRecords":2,"minValues":{"t":"2024-01-01T11:00:00.123+01:00","n":"1969-12-31T23:59:59",'
            '"d":1.00000000000E-7,"f":1.0,"s":"a"},"maxValues":{"t":"2024-01-01T03:30:00.999-08:00",'
            '"n":"1970-01-01T00:00:00.5","d":1E+2,"f":2.0,"s":"b"},"nullCount":{"t":0,"n":0,"d":0,"f":0,"s":0}}',
        ),
        (  # NaN and infinity as the Java kernel writes them: those bounds are unknown
            {"t": [t1], "n": [n1], "d": [Decimal(-5)], "f": [float("nan")], "s": ["z"]},
            '{"numRecords":1,"minValues":{"t":"2024-01-01T10:00:00.123Z","f":"NaN"},'
            '"maxValues":{"t":"2024-01-01T10:00:00.123Z","f":"Infinity"},"nullCount":{"t":0,"f":0}}',
        ),
        (  # Spark now: the cut max ends with \x7f (next char below it) or U+10FFFF
            {
                "t": [t2, t2],
                "n": [n2, n2],
                "d": [Decimal(0), Decimal(0)],
                "f": [-0.0, -0.0],
                "s": ["a" * 40, "b" * 31 + "\U0001f600x"],
            },
            _stats(
                2,
                {
                    "t": "2024-01-01T11:30:00.999Z",
                    "n": "1970-01-01T00:00:00.5",
                    "d": 0,
                    "f": -0.0,
                    "s": "a" * 32,
                },
                {
                    "t": "2024-01-01T11:30:00.999Z",
                    "n": "1970-01-01T00:00:00.5",
                    "d": 0,
                    "f": -0.0,
                    "s": "b" * 31 + "\U0001f600\x7f",
                },
                {"t": 0, "n": 0, "d": 0, "f": 0, "s": 0},
            ),
        ),
        (  # Spark before: U+FFFD appended, no upper bound of the U+1F600 it replaces
            {"t": [t2], "n": [n2], "d": [Decimal(1)], "f": [3.0], "s": [old_max]},
            _stats(
                1,
                {
                    "t": "2024-01-01T12:30:00.999+01:00",
                    "n": "1970-01-01T00:00:00.5",
                    "d": 1,
                    "f": 3.0,
                    "s": "c" * 32,
                },
                {
                    "t": "2024-01-01T12:30:00.999+01:00",
                    "n": "1970-01-01T00:00:00.5",
                    "d": 1,
                    "f": 3.0,
                    "s": "c" * 32 + "\ufffd",
                },
                {"t": 0, "n": 0, "d": 0, "f": 0, "s": 0},
            ),
        ),
    ]
    root = tmp_path / "styles"
    actions: list[dict] = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["timestampNtz"],
                "writerFeatures": ["timestampNtz"],
            }
        },
        _metadata(fields),
    ]
    for i, (rows, stats) in enumerate(files):
        actions.append(_add(root, f"part-{i}.parquet", pa.table(rows, schema=schema), stats))
    _commit(root, 0, actions)
    rows = pa.concat_tables([pa.table(r, schema=schema) for r, _ in files])
    wheres = [
        "t = '2024-01-01T10:00:00.123456Z'",
        "t > '2024-01-01T11:30:00.999Z'",
        "t >= '2024-01-01T11:30:00.999999Z'",
        "t < '2024-01-01T10:00:00.123001Z'",
        "n = '1969-12-31T23:59:59.000999'",
        "n <= '1969-12-31T23:59:59'",
        "n > '1970-01-01T00:00:00.499999'",
        "d = 0.0000001",
        "d < CAST('0.0000001' AS DECIMAL(38,18))",
        "d > 99.999999999999999999",
        "d = 100",
        "f > 2.5",
        "f = 'NaN'::double",
        "f <> 1.0",
        "f <= -0.0",
        "f < 0.5",
        f"s = '{'a' * 40}'",
        f"s > '{'a' * 33}'",
        "s >= 'b' || repeat('b', 30) || '\U0001f600x'",
        f"s = '{old_max}'",
        f"s > '{'c' * 32}\ufffd'",
        "s IN ('b', 'zz')",
    ]
    ctx = _same_as_in_memory(root, rows, wheres)
    # the bounds were read, not ignored: the first file and the one without bounds for the column
    assert _files_read(ctx, "t = '2024-01-01T10:00:00.123456Z'") == 2
    assert _files_read(ctx, "d = 100") == 2
    assert _files_read(ctx, "n < '1969-12-31T23:59:59.001'") == 2
    assert _files_read(ctx, "f < 0.5") == 2  # the -0.0 file and the unknown one
    assert _files_read(ctx, "f > 2.5") == 4  # a float max bounds no NaN, which sorts above it
    assert _files_read(ctx, f"s = '{'a' * 40}'") == 3  # the cut maxima are not upper bounds: kept


def _old_and_new_types() -> tuple[list[dict], list[dict], pa.Schema, pa.Schema]:
    def struct(name: str, typ: str, changes: list | None = None) -> dict:
        return {"type": "struct", "fields": [_field(name, typ, changes)]}

    old = [_field("a", "integer"), _field("c", "decimal(5,2)"), _field("d", "date"), _field("f", "float")]
    old.append(_field("g", struct("h", "short")))
    new = [
        _field("a", "long", [("integer", "long")]),
        _field("c", "decimal(10,4)", [("decimal(5,2)", "decimal(10,4)")]),
        _field("d", "timestamp_ntz", [("date", "timestamp_ntz")]),
        _field("f", "double", [("float", "double")]),
        _field("g", struct("h", "long", [("short", "long")])),
    ]
    old_t = pa.schema(
        [
            ("a", pa.int32()),
            ("c", pa.decimal128(5, 2)),
            ("d", pa.date32()),
            ("f", pa.float32()),
            ("g", pa.struct([("h", pa.int16())])),
        ]
    )
    new_t = pa.schema(
        [
            ("a", pa.int64()),
            ("c", pa.decimal128(10, 4)),
            ("d", pa.timestamp("us")),
            ("f", pa.float64()),
            ("g", pa.struct([("h", pa.int64())])),
        ]
    )
    return old, new, old_t, new_t


def test_checkpoint_statistics_in_the_types_before_a_widening(tmp_path: Path) -> None:
    """A checkpoint written before a type widening keeps its ``stats_parsed`` in the old types
    (int, decimal(5,2), date, float, a short in a struct); read after the widening, those bounds are
    the widened values (the float's are dropped, see stats.widened_columns) and prune."""
    old, new, old_t, new_t = _old_and_new_types()
    root = tmp_path / "widened"
    feats = ["typeWidening", "timestampNtz"]
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": feats,
            "writerFeatures": feats,
        }
    }
    first = {
        "a": [1, 2147483647],
        "c": [Decimal("1.25"), Decimal("999.99")],
        "d": [dt.date(1969, 12, 31), dt.date(2024, 1, 1)],
        "f": [0.5, 3.4],
        "g": [{"h": 7}, {"h": 32767}],
    }
    commit0 = [protocol, _metadata(old, {"delta.enableTypeWidening": "true"})]
    commit0.append(_add(root, "old.parquet", pa.table(first, schema=old_t), None))
    _commit(root, 0, commit0)
    bounds = pa.struct(list(old_t))
    parsed_t = pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", bounds),
            ("maxValues", bounds),
            (
                "nullCount",
                pa.struct([(n, pa.int64()) for n in "acdf"] + [("g", pa.struct([("h", pa.int64())]))]),
            ),
        ]
    )
    low = {"a": 1, "c": Decimal("1.25"), "d": dt.date(1969, 12, 31), "f": 0.5, "g": {"h": 7}}
    high = {"a": 2147483647, "c": Decimal("999.99"), "d": dt.date(2024, 1, 1), "f": 3.4, "g": {"h": 32767}}
    nulls = {"a": 0, "c": 0, "d": 0, "f": 0, "g": {"h": 0}}
    parsed = pa.array([{"numRecords": 2, "minValues": low, "maxValues": high, "nullCount": nulls}], parsed_t)
    _checkpoint(root, commit0, parsed, int96=False)
    _commit(root, 1, [_metadata(new, {"delta.enableTypeWidening": "true"})])
    second = {
        "a": [2147483648, 9223372036854775807],
        "c": [Decimal("999.9901"), Decimal("1000")],
        "d": [dt.datetime(2024, 1, 1, 0, 0, 0, 1), dt.datetime(2024, 6, 1)],
        "f": [3.5, 4.0],
        "g": [{"h": 32768}, {"h": 2**40}],
    }
    stats = _stats(
        2,
        {"a": 2147483648, "c": 999.9901, "d": "2024-01-01T00:00:00.000", "f": 3.5, "g": {"h": 32768}},
        {"a": 9223372036854775807, "c": 1000, "d": "2024-06-01T00:00:00.000", "f": 4.0, "g": {"h": 2**40}},
        nulls,
    )
    _commit(root, 2, [_add(root, "new.parquet", pa.table(second, schema=new_t), stats)])
    rows = pa.concat_tables([pa.table(first, schema=old_t).cast(new_t), pa.table(second, schema=new_t)])
    wheres = []
    for column, values in {
        "a": ["2147483647", "2147483648", "1"],
        "c": ["999.99", "999.9901", "1.25", "1000"],
        "d": [
            "TIMESTAMP '2024-01-01 00:00:00'",
            "TIMESTAMP '2024-01-01 00:00:00.000001'",
            "TIMESTAMP '1969-12-31 00:00:00'",
        ],
        "f": ["3.4", "3.4000000953674316", "3.5"],
        "g['h']": ["32767", "32768"],
    }.items():
        wheres += [f"{column} {op} {v}" for v in values for op in ("=", "<", ">", "<>")]
    ctx = _same_as_in_memory(root, rows, wheres)
    # each file's bounds in its own types prune the other file
    for where in ("a = 1", "c = 1.25", "d = TIMESTAMP '1969-12-31 00:00:00'", "a = 2147483648", "c = 1000"):
        assert _files_read(ctx, where) == 1, where
    assert _files_read(ctx, "f = 3.4000000953674316") == 2  # the float's old bounds are not used


_TS_UTC = 'Timestamp(Microsecond, Some("UTC"))'


def _micros(t: dt.datetime) -> int:
    return (t - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)


def test_int96_checkpoint_timestamp_statistics_prune(tmp_path: Path) -> None:
    """Spark writes a checkpoint's ``stats_parsed`` timestamps as INT96 (spark.sql.parquet.
    outputTimestampType's default). Read as nanoseconds, a year-1 bound (a common placeholder)
    overflows, and the leaf's cast failed for every file of the checkpoint: no file was pruned by
    its timestamps. Read as microseconds, each file keeps its own bounds."""
    groups = [
        [dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(2020, 1, 1, tzinfo=UTC)],
        [dt.datetime(2021, 5, 5, tzinfo=UTC)],
        [dt.datetime(2022, 6, 6, 12, tzinfo=UTC), dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)],
    ]
    ts = pa.timestamp("us", tz="UTC")
    root = tmp_path / "int96"
    commit0: list[dict] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        _metadata([_field("t", "timestamp")]),
    ]
    for i, g in enumerate(groups):
        commit0.append(_add(root, f"part-{i}.parquet", pa.table({"t": pa.array(g, ts)}), None))
    _commit(root, 0, commit0)
    bounds = pa.struct([("t", ts)])
    parsed_t = pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", bounds),
            ("maxValues", bounds),
            ("nullCount", pa.struct([("t", pa.int64())])),
        ]
    )
    parsed = pa.array(
        [
            {
                "numRecords": len(g),
                "minValues": {"t": min(g)},
                "maxValues": {"t": max(g)},
                "nullCount": {"t": 0},
            }
            for g in groups
        ],
        parsed_t,
    )
    _checkpoint(root, commit0, parsed, int96=True)
    rows = pa.table({"t": pa.array([v for g in groups for v in g], ts)})
    # DataFusion parses timestamp text through nanoseconds: times outside 1677..2262 as integers
    year_1000 = f"arrow_cast({_micros(dt.datetime(1000, 1, 1, tzinfo=UTC))}, '{_TS_UTC}')"
    end_9999 = (
        f"arrow_cast({_micros(dt.datetime(9999, 12, 31, 23, 59, 59, 998000, tzinfo=UTC))}, '{_TS_UTC}')"
    )
    wheres = [
        "t = '2021-05-05T00:00:00Z'",
        f"t < {year_1000}",
        f"t > {end_9999}",
        "t BETWEEN '2020-01-01T00:00:00Z' AND '2021-06-01T00:00:00Z'",
    ]
    ctx = _same_as_in_memory(root, rows, wheres)
    for where in wheres[:3]:
        assert _files_read(ctx, where) == 1, where
    assert dd.DeltaTable(str(root)).snapshot().files().column("stats").to_pylist()[0]["minValues"] == {
        "t": dt.datetime(1, 1, 1, tzinfo=UTC)
    }


def test_non_finite_float_bounds_written_as_strings_leave_the_other_stats_known(tmp_path: Path) -> None:
    """Spark (Jackson) and the Java kernel write a float column's NaN and infinite bounds as the
    strings "NaN", "Infinity", "-Infinity" (Spark's max of a column holding NaN is NaN). pyarrow
    reads no float from a string, and the whole stats object of such a file was dropped: its
    numRecords (count(*) read the file), its null counts and every other column's bounds. Those
    bounds are unknown; the rest of the object is kept."""
    schema = pa.schema([("x", pa.int64()), ("f", pa.float64()), ("s", pa.string())])
    fields = [_field("x", "long"), _field("f", "double"), _field("s", "string")]
    nan, inf = float("nan"), float("inf")
    files = [
        ({"x": [1, 2], "f": [1.0, nan], "s": ["NaN", "a"]}, '"NaN"', "1.0", '"NaN"'),
        ({"x": [10, 11], "f": [-inf, inf], "s": ["b", "c"]}, '"-Infinity"', '"Infinity"', '"c"'),
        ({"x": [20, 21], "f": [nan, nan], "s": ["Infinity", "z"]}, '"NaN"', '"NaN"', '"z"'),
    ]
    root = tmp_path / "nonfinite"
    actions: list[dict] = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, _metadata(fields)]
    for i, (rows, fmin, fmax, smax) in enumerate(files):
        lo, hi = min(rows["x"]), max(rows["x"])
        smin = json.dumps(min(rows["s"]))
        stats = (
            f'{{"numRecords":2,"minValues":{{"x":{lo},"f":{fmin},"s":{smin}}},'
            f'"maxValues":{{"x":{hi},"f":{fmax},"s":{smax}}},"nullCount":{{"x":0,"f":0,"s":0}}}}'
        )
        actions.append(_add(root, f"part-{i}.parquet", pa.table(rows, schema=schema), stats))
    _commit(root, 0, actions)
    typed = dd.DeltaTable(str(root)).snapshot().files().column("stats").to_pylist()
    assert [s["numRecords"] for s in typed] == [2, 2, 2]
    assert [s["minValues"]["x"] for s in typed] == [1, 10, 20]
    assert [(s["minValues"]["f"], s["maxValues"]["f"]) for s in typed] == [
        (None, 1.0),
        (None, None),
        (None, None),
    ]
    rows = pa.concat_tables([pa.table(r, schema=schema) for r, *_ in files])
    wheres = [
        "x = 10",
        "x > 1",
        "f > 0.5",
        "f < 0.5",
        "f = 'NaN'::double",
        "f = 1.0",
        "s = 'NaN'",
        "s = 'Infinity'",
    ]
    wheres += ["s > 'b'", "f IS NOT NULL", "f <> 1.0"]
    ctx = _same_as_in_memory(root, rows, wheres)
    assert _files_read(ctx, "x = 10") == 1
    assert _files_read(ctx, "s = 'NaN'") == 2  # the second file's b..c exclude it (a min "NaN" is unknown)
    assert _files_read(ctx, "f = 1.0") == 3  # no float bound but the first file's max: kept
