"""Data files storing a column as another type than the table's, read through SQL with and without
filters: the filtered read must give the rows of the unfiltered one (filtered by DataFusion in
memory), whatever the file stores.

Each table is hand-written (one ``_delta_log`` commit over parquet files written here), so the
stored types are exactly those named: writers differ in what they store for one Delta type
(delta-rs releases before its ``timestamp_ntz`` support, early 2024, stored a ``timestamp``
column of naive Arrow timestamps, without ``isAdjustedToUTC``; Spark stores INT96; others milliseconds or nanoseconds), and type widening
leaves files of the old type (PROTOCOL.md, Type Widening). delta-kernel-rs reads any timestamp
as the table's timestamp type (ensure_data_types: "timestamps are able to be cast between each
other"), as the unfiltered read here does.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext
from test_dv import _hand_encode, _z85_encode
from test_field_ids import _id_mode_start

import delta_datafusion as dd
from delta_datafusion.dv import DV_MAGIC

TIMES = [dt.datetime(2024, 1, 1, 12, 0, 0, 123000), dt.datetime(1900, 1, 1), dt.datetime(1970, 1, 1)]

#: (how the file stores the column, its Arrow type, pq.write_table options)
STORED_TIMESTAMPS = [
    ("utc_us", pa.timestamp("us", tz="UTC"), {}),
    ("utc_ms", pa.timestamp("ms", tz="UTC"), {}),
    ("utc_ns", pa.timestamp("ns", tz="UTC"), {"version": "2.6"}),
    ("paris_us", pa.timestamp("us", tz="Europe/Paris"), {}),
    ("naive_us", pa.timestamp("us"), {}),
    ("naive_ms", pa.timestamp("ms"), {}),
    ("naive_ns", pa.timestamp("ns"), {"version": "2.6"}),
    ("int96", pa.timestamp("us"), {"use_deprecated_int96_timestamps": True}),
]


def _table(
    root: Path,
    fields: list[dict[str, Any]],
    files: list[tuple[pa.Table, dict[str, Any]]],
    deleted: list[int] | None = None,
) -> Path:
    """A table of ``fields`` (Delta schema fields) whose data files are ``files`` as written;
    ``deleted``: the rows an inline deletion vector of each file deletes (read by rows then)."""
    (root / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": fields}
    protocol: dict[str, Any] = {"minReaderVersion": 1, "minWriterVersion": 2}
    if deleted is not None:
        features = ["deletionVectors", "timestampNtz"]
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": features,
            "writerFeatures": features,
        }
    actions: list[dict[str, Any]] = [
        {"protocol": protocol},
        {
            "metaData": {
                "id": "stored-types",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
            }
        },
    ]
    for i, (data, options) in enumerate(files):
        name = f"part-{i}.parquet"
        pq.write_table(data, root / name, **options)
        size = (root / name).stat().st_size
        add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": 0, "dataChange": True}
        if deleted is not None:
            payload = struct.pack("<i", DV_MAGIC) + _hand_encode(deleted)
            add["deletionVector"] = {
                "storageType": "i",
                "pathOrInlineDv": _z85_encode(payload, "pad"),
                "sizeInBytes": len(payload),
                "cardinality": len(deleted),
            }
        actions.append({"add": add})
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return root


def _filtered_in_memory(root: Path, where: str) -> list[dict[str, Any]]:
    """The rows of the unfiltered read, filtered by DataFusion over them in memory."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    rows = ctx.sql("SELECT * FROM t").to_arrow_table()
    mem = SessionContext()
    mem.register_record_batches("m", [rows.to_batches()])
    return mem.sql(f"SELECT * FROM m WHERE {where} ORDER BY id").to_pylist()


def _filtered(root: Path, where: str) -> list[dict[str, Any]]:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    return ctx.sql(f"SELECT * FROM t WHERE {where} ORDER BY id").to_pylist()


@pytest.mark.parametrize("delta_type", ["timestamp", "timestamp_ntz"])
@pytest.mark.parametrize("stored", [s[0] for s in STORED_TIMESTAMPS])
def test_filters_on_timestamps_stored_with_another_zone_or_unit(
    tmp_path: Path, delta_type: str, stored: str
) -> None:
    """A timestamp filter over a file storing the column with the other time-zone kind (a naive
    timestamp in a ``timestamp`` table, a UTC one in a ``timestamp_ntz`` table) failed where the
    unfiltered read of the same file works: pyarrow judged the file's row-group statistics, of
    the stored type, against the literal of the table's ("Cannot compare timestamp with timezone
    to timestamp without timezone", "Function 'equal' has no kernel matching input types
    (timestamp[us], timestamp[ms, tz=UTC])")."""
    _, typ, options = next(s for s in STORED_TIMESTAMPS if s[0] == stored)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "ts": pa.array(TIMES, typ)})
    # (no NULL in it: pyarrow judged a column with NULLs otherwise, and did not fail), and a file
    # storing the table's own type beside it
    own = pa.timestamp("us", tz="UTC" if delta_type == "timestamp" else None)
    plain = pa.table({"id": pa.array([4, 5], pa.int64()), "ts": pa.array([TIMES[0], None], own)})
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ts", "type": delta_type, "nullable": True, "metadata": {}},
    ]
    root = _table(tmp_path / "t", fields, [(data, options), (plain, {})])
    zone = "Z" if delta_type == "timestamp" else ""
    for where in [
        f"ts > TIMESTAMP '2000-01-01T00:00:00{zone}'",
        f"ts = TIMESTAMP '2024-01-01T12:00:00.123{zone}'",
        f"ts < TIMESTAMP '1950-01-01T00:00:00{zone}' OR id = 3",
        "ts IS NULL",
    ]:
        want = _filtered_in_memory(root, where)
        assert want, where  # the premise: the filter keeps rows
        assert _filtered(root, where) == want, where


def _column(name: str, delta_type: Any) -> dict[str, Any]:
    return {"name": name, "type": delta_type, "nullable": True, "metadata": {}}


D = decimal.Decimal
#: name -> (the table's Delta type, the file's Arrow type, three values, filters on column c):
#: encodings writers use for one type, and the type widenings of PROTOCOL.md (old files)
STORED = {
    "long_as_int8": ("long", pa.int8(), [1, -5, 100], ["c = 1", "c IN (1, 100)", "c > 3000000000"]),
    "long_as_uint16": ("long", pa.uint16(), [1, 5, 60000], ["c = 60000", "c > 2", "c < 0"]),
    "long_as_dictionary": ("long", pa.dictionary(pa.int32(), pa.int64()), [1, 5, 5], ["c = 5", "c > 2"]),
    "int_as_int16": ("integer", pa.int16(), [1, -5, 300], ["c = 300", "c > 2", "c < -1"]),
    "double_as_float": ("double", pa.float32(), [1.5, -2.25, 3.0], ["c = 1.5", "c > 0", "c < -2"]),
    "double_as_int": ("double", pa.int32(), [1, -2, 3], ["c = 1", "c > 0.5", "c < -1.5"]),
    "decimal_as_int": ("decimal(12,2)", pa.int32(), [1, -2, 3], ["c = 1", "c > 0.5", "c < -1.5"]),
    "decimal_scale_widened": (
        "decimal(10,4)",
        pa.decimal128(5, 2),
        [D("1.25"), D("-2.50"), D("3.00")],
        ["c = 1.25", "c > 1.2501", "c < -2.4999"],
    ),
    "decimal_int32": (
        "decimal(9,2)",
        pa.decimal128(9, 2),
        [D("1.25"), D("-2.50"), D("3.00")],
        ["c = 1.25", "c > 1"],
    ),
    "decimal_int64": (
        "decimal(18,2)",
        pa.decimal128(18, 2),
        [D("1.25"), D("-2.50"), D("3.00")],
        ["c = 1.25", "c > 1"],
    ),
    "decimal_fixed": (
        "decimal(38,2)",
        pa.decimal128(20, 2),
        [D("1.25"), D("-2.50"), D("3.00")],
        ["c = 1.25", "c < 12345678901234567890.12"],
    ),
    "dates_far_apart": (
        "date",
        pa.date32(),
        [dt.date(2024, 1, 1), dt.date(1, 1, 1), dt.date(9999, 12, 31)],
        ["c = DATE '2024-01-01'", "c < DATE '1000-01-01'"],
    ),
    "timestamp_ntz_as_date": (
        "timestamp_ntz",
        pa.date32(),
        [dt.date(2024, 1, 1), dt.date(1900, 1, 1), dt.date(2000, 1, 1)],
        ["c = TIMESTAMP '2024-01-01T00:00:00'", "c < TIMESTAMP '1950-01-01T00:00:00'"],
    ),
    "timestamp_as_naive": (
        "timestamp",
        pa.timestamp("us"),
        [dt.datetime(2024, 1, 1), dt.datetime(1900, 1, 1), dt.datetime(2000, 1, 1)],
        ["c > TIMESTAMP '1950-01-01T00:00:00Z'"],
    ),
    "string_as_large": (
        "string",
        pa.large_string(),
        ["a", "b", "é"],
        ["c = 'a'", "c LIKE '%é'", "c IN ('b', 'z')"],
    ),
    "string_as_view": (
        "string",
        pa.string_view(),
        ["a", "b", "é"],
        ["c = 'a'", "c LIKE '%é'", "c IN ('b', 'z')"],
    ),
    "string_as_binary": ("string", pa.binary(), [b"a", b"b", "é".encode()], ["c = 'a'", "c > 'a'"]),
    "string_as_dictionary": (
        "string",
        pa.dictionary(pa.int8(), pa.string()),
        ["a", "b", "b"],
        ["c = 'b'", "c > 'a'"],
    ),
    "binary_as_large": ("binary", pa.large_binary(), [b"\x00", b"\x01", b"\xff"], ["c = X'01'", "c > X'00'"]),
    "binary_as_view": ("binary", pa.binary_view(), [b"\x00", b"\x01", b"\xff"], ["c = X'01'", "c > X'00'"]),
    "binary_as_fixed": ("binary", pa.binary(1), [b"\x00", b"\x01", b"\xff"], ["c = X'01'", "c > X'00'"]),
}


#: the parquet physical type of the cases that name one
PHYSICAL = {"decimal_int32": "INT32", "decimal_int64": "INT64", "decimal_fixed": "FIXED_LEN_BYTE_ARRAY"}


@pytest.mark.parametrize("name", sorted(STORED))
def test_filters_on_columns_stored_as_another_type(tmp_path: Path, name: str) -> None:
    """Each stored type, filtered through SQL, gives the unfiltered read's rows that pass (the
    filter run by DataFusion in memory), by the dataset path and, with a deletion vector (row 1
    of each file deleted), by the row-selection path. Two files: one with a NULL in a fourth
    row, one without (pyarrow judges a column's statistics otherwise when it holds NULLs)."""
    delta_type, typ, values, filters = STORED[name]
    if pa.types.is_dictionary(typ):
        stored = pa.array(values).dictionary_encode().cast(typ)
    else:
        stored = pa.array(values, typ)
    with_null = pa.table(
        {"id": pa.array([1, 2, 3, 4], pa.int64()), "c": pa.concat_arrays([stored, pa.nulls(1, typ)])}
    )
    without = pa.table({"id": pa.array([5, 6, 7], pa.int64()), "c": stored})
    fields = [_column("id", "long"), _column("c", delta_type)]
    opts = {"store_decimal_as_integer": True} if name in ("decimal_int32", "decimal_int64") else {}
    for deleted in (None, [1]):
        root = _table(
            tmp_path / f"t{deleted is not None}", fields, [(with_null, opts), (without, opts)], deleted
        )
        physical = pq.ParquetFile(root / "part-0.parquet").schema.column(1).physical_type
        assert physical == PHYSICAL.get(name, physical)  # the premise: the encoding named
        rows = _filtered_in_memory(root, "true")
        assert [r["id"] for r in rows] == ([1, 3, 4, 5, 7] if deleted else [1, 2, 3, 4, 5, 6, 7])
        assert rows[0]["c"] is not None
        for where in [*filters, "c IS NULL", "c IS NOT NULL"]:
            assert _filtered(root, where) == _filtered_in_memory(root, where), (where, deleted)


def test_struct_fields_missing_reordered_extra_or_narrower(tmp_path: Path) -> None:
    """Files storing a struct column with fields in another order, without one (added later),
    with one the table does not have (dropped), or of a narrower type: fields are matched by
    name, a missing one reads NULL, an extra one is not read; the same through a nested
    predicate of the Python API, by both read paths."""
    s_type = {"type": "struct", "fields": [_column("a", "long"), _column("b", "string")]}
    fields = [_column("id", "long"), _column("s", s_type)]
    arrow_s = pa.struct([("a", pa.int64()), ("b", pa.string())])
    files = [
        pa.table({"id": [1, 2], "s": pa.array([{"a": 1, "b": "x"}, None], arrow_s)}),
        pa.table({"id": [3, 4], "s": pa.array([{"b": "z", "a": 3}, {"b": None, "a": 4}])}),
        pa.table({"id": [5, 6], "s": pa.array([{"a": 5}, {"a": 6}], pa.struct([("a", pa.int8())]))}),
        pa.table({"id": [7, 8], "s": pa.array([{"a": 7, "c": 1.5, "b": "q"}, {"a": 8, "c": 2.5, "b": "r"}])}),
        pa.table({"id": [9, 10]}),  # written before s was added
    ]
    want = [
        {"id": 1, "s": {"a": 1, "b": "x"}},
        {"id": 2, "s": None},
        {"id": 3, "s": {"a": 3, "b": "z"}},
        {"id": 4, "s": {"a": 4, "b": None}},
        {"id": 5, "s": {"a": 5, "b": None}},
        {"id": 6, "s": {"a": 6, "b": None}},
        {"id": 7, "s": {"a": 7, "b": "q"}},
        {"id": 8, "s": {"a": 8, "b": "r"}},
        {"id": 9, "s": None},
        {"id": 10, "s": None},
    ]
    for deleted in (None, [1]):
        root = _table(tmp_path / f"t{deleted is not None}", fields, [(f, {}) for f in files], deleted)
        live = [r for r in want if deleted is None or r["id"] % 2]  # row 1 of each file deleted
        assert _filtered(root, "true") == live
        got = _filtered(root, "s['b'] IS NULL")
        assert got == [r for r in live if r["s"] is None or r["s"]["b"] is None]
        snap = dd.DeltaTable(str(root)).snapshot()
        for pred, keep in [
            (pc.field("s", "a") > 3, lambda r: r["s"] is not None and r["s"]["a"] > 3),
            (pc.field("s", "b").is_null(), lambda r: r["s"] is None or r["s"]["b"] is None),
            (pc.field("s", "b") == "q", lambda r: r["s"] is not None and r["s"]["b"] == "q"),
        ]:
            rows = sorted(snap.scan(predicate=pred).to_table().to_pylist(), key=lambda r: r["id"])
            assert rows == [r for r in live if keep(r)], (pred, deleted)


def test_id_mode_lists_and_maps_of_structs_found_by_field_id_only(tmp_path: Path) -> None:
    """Column mapping id mode with struct fields inside a list's elements and a map's values:
    files naming every column and field otherwise (Spark's physical names, Iceberg's logical
    ones, names of neither and fields in reversed order) are read by field id at every depth."""
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)

    def mapped(name: str, typ: Any, fid: int) -> dict[str, Any]:
        md = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": f"col-{fid}"}
        return {"name": name, "type": typ, "nullable": True, "metadata": md}

    element = {"type": "struct", "fields": [mapped("x", "integer", 3), mapped("y", "string", 4)]}
    value = {"type": "struct", "fields": [mapped("c", "long", 6), mapped("d", "string", 7)]}
    schema = {
        "type": "struct",
        "fields": [
            mapped("id", "long", 1),
            mapped("l", {"type": "array", "elementType": element, "containsNull": True}, 2),
            mapped(
                "m", {"type": "map", "keyType": "string", "valueType": value, "valueContainsNull": True}, 5
            ),
        ],
    }
    actions: list[dict[str, Any]] = _id_mode_start(schema, 7)

    def pfield(name: str, typ: pa.DataType, fid: int) -> pa.Field:
        return pa.field(name, typ, metadata={"PARQUET:field_id": str(fid)})

    def write(file: str, names: dict[int, str], first_id: int, reverse: bool) -> None:
        el = [pfield(names[3], pa.int32(), 3), pfield(names[4], pa.string(), 4)]
        val = [pfield(names[6], pa.int64(), 6), pfield(names[7], pa.string(), 7)]
        if reverse:
            el, val = el[::-1], val[::-1]
        arrow_schema = pa.schema(
            [
                pfield(names[1], pa.int64(), 1),
                pfield(names[2], pa.list_(pa.struct(el)), 2),
                pfield(names[5], pa.map_(pa.string(), pa.struct(val)), 5),
            ]
        )
        x, y, c, d = names[3], names[4], names[6], names[7]
        i = first_id
        data = pa.table(
            {
                names[1]: [i, i + 1],
                names[2]: [[{x: i, y: "e"}, None], None],
                names[5]: [[("k", {c: 10 * i, d: "v"})], [("n", None)]],
            },
            schema=arrow_schema,
        )
        pq.write_table(data, root / file)
        size = (root / file).stat().st_size
        add = {"path": file, "partitionValues": {}, "size": size, "modificationTime": 0, "dataChange": True}
        actions.append({"add": add})

    write("spark.parquet", {i: f"col-{i}" for i in range(1, 8)}, 1, False)
    write("iceberg.parquet", {1: "id", 2: "l", 3: "x", 4: "y", 5: "m", 6: "c", 7: "d"}, 3, False)
    write("other.parquet", {i: f"f{i}" for i in range(1, 8)}, 5, True)
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    got = ctx.sql(
        "SELECT id, l[1]['x'] AS x, l[1]['y'] AS y, m['k']['c'] AS c, m['k']['d'] AS d FROM t ORDER BY id"
    )
    want = []
    for i in (1, 3, 5):
        want += [
            {"id": i, "x": i, "y": "e", "c": 10 * i, "d": "v"},
            {"id": i + 1, "x": None, "y": None, "c": None, "d": None},
        ]
    assert got.to_pylist() == want
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE cardinality(l) = 2").to_pydict()["n"] == [3]


def test_change_feed_filters_a_timestamp_stored_naive(tmp_path: Path) -> None:
    """The change feed reads a table's files with the same reader: its inserts from a file of
    naive timestamps in a ``timestamp`` column, filtered on it, failed as the table read did."""
    times = [dt.datetime(2024, 1, 1), dt.datetime(1900, 1, 1)]
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array(times, pa.timestamp("us"))})
    root = _table(tmp_path / "t", [_column("id", "long"), _column("ts", "timestamp")], [(data, {})])
    commit = root / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    actions[1]["metaData"]["configuration"] = {"delta.enableChangeDataFeed": "true"}
    actions[0]["protocol"]["minWriterVersion"] = 4  # the property binds writers from version 4
    commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(root))
    where = "ts > TIMESTAMP '2000-01-01T00:00:00Z'"
    got = ctx.sql(f"SELECT id, _change_type FROM table_changes('t', 0) WHERE {where}").to_pylist()
    assert got == [{"id": 1, "_change_type": "insert"}]


def test_nested_timestamp_stored_naive_filtered_by_the_python_api(tmp_path: Path) -> None:
    """A struct field of type ``timestamp`` stored naive, filtered by a nested predicate of the
    Python API (SQL does not push nested filters): the file's zones are compared field by field
    (it failed as the top-level column did)."""
    times = [dt.datetime(2024, 1, 1), dt.datetime(1900, 1, 1)]
    s_type = {"type": "struct", "fields": [_column("ts", "timestamp"), _column("n", "long")]}
    arrow_s = pa.struct([("ts", pa.timestamp("us")), ("n", pa.int64())])
    data = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "s": pa.array([{"ts": t, "n": 1} for t in times], arrow_s)}
    )
    root = _table(tmp_path / "t", [_column("id", "long"), _column("s", s_type)], [(data, {})])
    after = pa.scalar(dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("us", "UTC"))
    scan = dd.DeltaTable(str(root)).snapshot().scan(columns=["id"], predicate=pc.field("s", "ts") > after)
    assert scan.to_table().to_pylist() == [{"id": 1}]


def test_int96_timestamps_keep_the_dataset_path_under_a_filter(tmp_path: Path, monkeypatch) -> None:
    """Spark writes `timestamp` columns as INT96 by default, which pyarrow reads as naive
    timestamps but never judges by statistics (INT96 has none it uses): a filter on them works
    in the dataset path, so such files are not sent to the slower row-selection path (a1e61c7
    sent them there, with naive INT64 timestamps, which do need it)."""
    from delta_datafusion.read import selected_rows

    read_by_rows: list[str] = []
    plain_read = selected_rows.SelectedRows.read

    def spy(self, unit, *args, **kwargs):
        read_by_rows.append(Path(unit.location).name)
        return plain_read(self, unit, *args, **kwargs)

    monkeypatch.setattr(selected_rows.SelectedRows, "read", spy)
    times = [dt.datetime(2024, 1, 1), dt.datetime(1900, 1, 1)]
    ids = pa.array([1, 2], pa.int64())
    s_type = {"type": "struct", "fields": [_column("ts", "timestamp")]}
    int96 = pa.table(
        {"id": ids, "ts": pa.array(times, pa.timestamp("us")), "s": pa.array([{"ts": t} for t in times])}
    )
    naive = pa.table(
        {"id": pa.array([3, 4], pa.int64()), "ts": pa.array(times, pa.timestamp("us")), "s": int96["s"]}
    )
    fields = [_column("id", "long"), _column("ts", "timestamp"), _column("s", s_type)]
    files = [(int96, {"use_deprecated_int96_timestamps": True}), (naive, {})]
    root = _table(tmp_path / "t", fields, files)
    assert pq.ParquetFile(root / "part-0.parquet").schema.column(1).physical_type == "INT96"  # the premise
    assert _filtered(root, "ts > TIMESTAMP '2000-01-01T00:00:00Z'") == _filtered_in_memory(
        root, "ts > TIMESTAMP '2000-01-01T00:00:00Z'"
    )
    assert read_by_rows == ["part-1.parquet"]
    # a struct's INT96 field too (its leaf is found among the file's columns), by a nested predicate
    read_by_rows.clear()
    after = pa.scalar(dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc), pa.timestamp("us", "UTC"))
    scan = dd.DeltaTable(str(root)).snapshot().scan(columns=["id"], predicate=pc.field("s", "ts") > after)
    assert sorted(scan.to_table().column("id").to_pylist()) == [1, 3]
    assert read_by_rows == ["part-1.parquet"]
