"""Delta schema types against PROTOCOL.md's Schema Serialization Format and delta-kernel-rs.

Decimal precision is 1..38 and the scale 0..precision (Spark's and the kernel's DecimalType;
parquet's DECIMAL too): a schema declaring another is refused by name, never handed to
DataFusion, whose decimal kernels panic on a negative scale (a filter on decimal(10,-2) raised
pyo3's PanicException, which ``except Exception`` does not catch).
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import add_action, metadata_action, write_commit
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import DeltaTable, SchemaError


def _table(root: Path, typ: str, value: str) -> Path:
    """One file; ``y`` of type ``typ`` is its partition column, holding ``value``."""
    root.mkdir(parents=True)
    (root / "_delta_log").mkdir()
    pq.write_table(pa.table({"x": pa.array([1], pa.int64())}), root / "a.parquet")
    fields = [
        {"name": "x", "type": "long", "nullable": True, "metadata": {}},
        {"name": "y", "type": typ, "nullable": True, "metadata": {}},
    ]
    metadata = {
        "id": "decimals",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": ["y"],
        "configuration": {},
        "createdTime": 0,
    }
    add = add_action(root, "a.parquet", partitionValues={"y": value})
    write_commit(
        root,
        0,
        [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": metadata}, {"add": add}],
    )
    return root


@pytest.mark.parametrize(
    ("typ", "value", "why"),
    [
        ("decimal(10,-2)", "1200", "scale -2 is outside 0..10"),
        ("decimal(5,10)", "0.00001", "scale 10 is outside 0..5"),
        ("decimal(38, 39)", "0", "scale 39 is outside 0..38"),
    ],
)
def test_decimal_scale_outside_precision_is_refused(tmp_path: Path, typ: str, value: str, why: str) -> None:
    t = _table(tmp_path / "t", typ, value)
    with pytest.raises(SchemaError, match=why) as info:
        dd.register_table(SessionContext(), "t", str(t))
    assert "00000000000000000000.json" in str(info.value)


@pytest.mark.parametrize(
    ("typ", "value", "where"),
    [
        ("decimal(1,0)", "-9", "y = -9"),
        # DataFusion 55 compares decimal(38, 37+) with the float literal 0.5 as unequal (over
        # rows in memory too): a range instead
        ("decimal(38,38)", "0.5", "y > 0.4 AND y < 0.6"),
        ("decimal(38, 0)", "7", "y = 7"),
    ],
)
def test_decimal_bounds_of_the_protocol_are_read(tmp_path: Path, typ: str, value: str, where: str) -> None:
    t = _table(tmp_path / "t", typ, value)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    assert ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pylist() == [{"n": 1}]


# -- every primitive, nested containers and field metadata, under each column-mapping mode -------


class _Schema:
    """A Delta schema and the parquet schema a writer of ``mode`` stores it as: physical names,
    or in id mode parquet field ids, on nested fields and on array elements and map keys and
    values too (``delta.columnMapping.nested.ids``, as IcebergCompatV2 writers record them)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.next_id = 0

    def field(self, name: str, typ: object, metadata: dict | None = None) -> tuple[dict, int]:
        self.next_id += 1
        md = dict(metadata or {})
        if self.mode != "none":
            md["delta.columnMapping.id"] = self.next_id
            md["delta.columnMapping.physicalName"] = f"col-{self.next_id}-{name}"
        return {"name": name, "type": typ, "nullable": True, "metadata": md}, self.next_id

    def stored(self, f: dict, fid: int, arrow: pa.DataType) -> pa.Field:
        """In id mode under names unlike the physical ones (as files converted from Iceberg):
        only the ids say which column is which."""
        name = f["metadata"]["delta.columnMapping.physicalName"] if self.mode == "name" else f["name"]
        if self.mode == "id":
            name = f"stored-{fid}"
        return pa.field(name, arrow, True, metadata=self.ids(fid))

    def ids(self, fid: int) -> dict | None:
        return {"PARQUET:field_id": str(fid)} if self.mode == "id" else None


_UTC = dt.timezone.utc
_PRIMITIVES = [  # (name, Delta type, stored type, values, field metadata)
    ("b", "byte", pa.int8(), [-128, 127, None], None),
    ("s", "short", pa.int16(), [-32768, 32767, None], None),
    ("i", "integer", pa.int32(), [-(2**31), 2**31 - 1, None], None),
    ("l", "long", pa.int64(), [-(2**63), 2**63 - 1, None], None),
    ("f", "float", pa.float32(), [1.5, -3.25, None], None),
    ("d", "double", pa.float64(), [1e308, -5e-324, None], None),
    ("bo", "boolean", pa.bool_(), [True, False, None], None),
    ("st", "string", pa.string(), ["é", "", None], None),
    ("bi", "binary", pa.binary(), [b"\x00\xff", b"", None], None),
    ("da", "date", pa.date32(), [dt.date(1, 1, 1), dt.date(9999, 12, 31), None], None),
    (
        "ts",
        "timestamp",
        pa.timestamp("us", "UTC"),
        [dt.datetime(1, 1, 1, tzinfo=_UTC), dt.datetime(2020, 1, 1, 0, 0, 0, 1, tzinfo=_UTC), None],
        None,
    ),
    (
        "tn",
        "timestamp_ntz",
        pa.timestamp("us"),
        [dt.datetime(1970, 1, 1), dt.datetime(9999, 12, 31), None],
        None,
    ),
    ("d10", "decimal(1,0)", pa.decimal128(1, 0), [Decimal("-9"), Decimal("9"), None], None),
    (
        "d3838",
        "decimal(38,38)",
        pa.decimal128(38, 38),
        [Decimal("0." + "9" * 38), Decimal("-1E-38"), None],
        None,
    ),
    ("ch", "string", pa.string(), ["ab  ", "x", None], {"__CHAR_VARCHAR_TYPE_STRING": "char(4)"}),
    ("vc", "string", pa.string(), ["abc", "", None], {"__CHAR_VARCHAR_TYPE_STRING": "varchar(10)", "n": 5}),
    # columns named like metadata keys
    ("delta.columnMapping.physicalName", "long", pa.int64(), [1, 2, None], None),
    ("PARQUET:field_id", "long", pa.int64(), [3, 4, None], None),
    ("__CHAR_VARCHAR_TYPE_STRING", "string", pa.string(), ["q", "r", None], {"comment": "x"}),
]
#: array<map<string, struct<a: int, arr: array<struct<c: long>>>>>, rows as logical values
_NESTED = [[[("k1", {"a": 1, "arr": [{"c": 10}, None, {"c": None}]}), ("k2", None)], None, []], None, [[]]]


def _nested(sch: _Schema) -> tuple[dict, pa.Field, list]:
    c, c_id = sch.field("c", "long")
    a, a_id = sch.field("a", "integer")
    arr, arr_id = sch.field("arr", {"type": "array", "elementType": {"type": "struct", "fields": [c]}})
    value = {"type": "struct", "fields": [a, arr]}
    map_type = {"type": "map", "keyType": "string", "valueType": value, "valueContainsNull": True}
    top, top_id = sch.field("nested", {"type": "array", "elementType": map_type, "containsNull": True})
    if sch.mode == "id":
        p = top["metadata"]["delta.columnMapping.physicalName"]
        ids = {f"{p}.element": 901, f"{p}.element.key": 902, f"{p}.element.value": 903}
        top["metadata"]["delta.columnMapping.nested.ids"] = ids
        ap = arr["metadata"]["delta.columnMapping.physicalName"]
        arr["metadata"]["delta.columnMapping.nested.ids"] = {f"{ap}.element": 904}
    c_t = pa.struct([sch.stored(c, c_id, pa.int64())])
    arr_t = pa.list_(pa.field("element", c_t, True, metadata=sch.ids(904)))
    value_t = pa.struct([sch.stored(a, a_id, pa.int32()), sch.stored(arr, arr_id, arr_t)])
    map_t = pa.map_(
        pa.field("key", pa.string(), False, metadata=sch.ids(902)),
        pa.field("value", value_t, True, metadata=sch.ids(903)),
    )
    stored = sch.stored(top, top_id, pa.list_(pa.field("element", map_t, True, metadata=sch.ids(901))))
    names = {"a": value_t.field(0).name, "arr": value_t.field(1).name, "c": c_t.field(0).name}

    def physical(x: object) -> object:
        if isinstance(x, dict):
            return {names[k]: physical(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return type(x)(physical(v) for v in x)
        return x

    return top, stored, physical(_NESTED)


def _typed_table(root: Path, mode: str) -> tuple[list[dict], list[dict]]:
    """The table (partitioned by a timestamp_ntz), its Delta fields and its rows (logical)."""
    sch = _Schema(mode)
    fields, stored, columns = [], [], []
    for name, typ, arrow, values, md in _PRIMITIVES:
        f, fid = sch.field(name, typ, md)
        fields.append(f)
        stored.append(sch.stored(f, fid, arrow))
        columns.append(pa.array(values, arrow))
    top, nested_field, nested_values = _nested(sch)
    fields.append(top)
    stored.append(nested_field)
    columns.append(pa.array(nested_values, nested_field.type))
    part, _ = sch.field("p", "timestamp_ntz")
    fields.append(part)
    root.mkdir(parents=True)
    (root / "_delta_log").mkdir()
    pq.write_table(pa.table(columns, schema=pa.schema(stored)), root / "a.parquet")
    features = ["timestampNtz"] + (["columnMapping"] if mode != "none" else [])
    conf = {"delta.enableChangeDataFeed": "true"}
    if mode != "none":
        conf |= {"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "999"}
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": [*features, "changeDataFeed"],
    }
    metadata = metadata_action({"type": "struct", "fields": fields}, ["p"], conf, "types")
    write_commit(root, 0, [{"protocol": protocol}, metadata])
    part_key = part["metadata"].get("delta.columnMapping.physicalName", "p")
    add = add_action(root, "a.parquet", partitionValues={part_key: "2021-03-04 05:06:07.000008"})
    write_commit(root, 1, [{"add": add}])
    rows = [
        {**{name: values[r] for name, _, _, values, _ in _PRIMITIVES}, "nested": _NESTED[r]}
        | {"p": dt.datetime(2021, 3, 4, 5, 6, 7, 8)}
        for r in range(3)
    ]
    return fields, rows


def _as_values(rows: list[dict]) -> list[dict]:
    """Maps as lists of (key, value) tuples, as pyarrow gives them."""
    out = []
    for r in rows:
        nested = r["nested"]
        if nested is not None:
            nested = [None if m is None else [tuple(kv) for kv in m] for m in nested]
        out.append({**r, "nested": nested})
    return out


@pytest.mark.parametrize("mode", ["none", "name", "id"])
def test_types_nested_containers_and_field_metadata(tmp_path: Path, mode: str) -> None:
    fields, rows = _typed_table(tmp_path / "t", mode)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(tmp_path / "t"))
    schema = ctx.table("t").schema()
    assert schema.names == [f["name"] for f in fields]
    for f in fields:  # field metadata kept, values that are not strings as JSON
        want = {k: v if isinstance(v, str) else json.dumps(v) for k, v in f["metadata"].items()}
        got = {k.decode(): v.decode() for k, v in (schema.field(f["name"]).metadata or {}).items()}
        assert got == want, f["name"]
    # nested fields keep theirs too (ids, physical names, nested ids as JSON)
    value = schema.field("nested").type.value_type.item_type
    nested_json = fields[-2]["type"]["elementType"]["valueType"]["fields"]
    for arrow_field, delta_field in zip(value, nested_json, strict=True):
        want = {k: v if isinstance(v, str) else json.dumps(v) for k, v in delta_field["metadata"].items()}
        assert {k.decode(): v.decode() for k, v in (arrow_field.metadata or {}).items()} == want
    expected = _as_values(rows)
    assert ctx.sql('SELECT * FROM t ORDER BY "l"').to_arrow_table().to_pylist() == expected
    scanned = DeltaTable(str(tmp_path / "t")).snapshot().scan().to_table().sort_by("l").to_pylist()
    assert scanned == expected
    feed = ctx.sql("SELECT * FROM table_changes('t', 1) ORDER BY \"l\"").to_arrow_table()
    assert feed.drop_columns(["_change_type", "_commit_version", "_commit_timestamp"]).to_pylist() == expected
    checks = {
        "p = TIMESTAMP '2021-03-04 05:06:07.000008'": 3,
        "p > TIMESTAMP '2021-03-04 05:06:07.000008'": 0,
        "d10 = -9": 1,
        "d3838 > 0": 1,
        '"delta.columnMapping.physicalName" = 2': 1,
        '"PARQUET:field_id" = 3': 1,
        "ch = 'ab  '": 1,
        "nested[1]['k1']['arr'][1]['c'] = 10": 1,
        "nested[1]['k1']['a'] IS NULL": 2,
    }
    for where, n in checks.items():
        assert ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pylist() == [{"n": n}], where


# -- a field metadata key the reader uses itself ------------------------------------------------


def _stray_field_id_table(root: Path, mode: str, file_ids: str) -> Path:
    """Columns a=1, b=2 whose Delta field metadata holds ``PARQUET:field_id`` (11, 12): in id
    mode beside ``delta.columnMapping.id`` (1, 2, which the files carry), otherwise in a file
    with those ids swapped or with none."""

    def md(i: int) -> dict:
        out = {"PARQUET:field_id": str(10 + i)}
        if mode != "none":
            out |= {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f"col-{i}"}
        return out

    def stored(name: str, i: int) -> pa.Field:
        fid = {"swapped": str(13 - i), "none": None, "mapped": str(i)}[file_ids]
        return pa.field(
            f"col-{i}" if mode != "none" else name, pa.int64(), metadata=fid and {"PARQUET:field_id": fid}
        )

    root.mkdir(parents=True)
    (root / "_delta_log").mkdir()
    schema = pa.schema([stored("a", 1), stored("b", 2)])
    pq.write_table(pa.table([pa.array([1]), pa.array([2])], schema=schema), root / "f.parquet")
    fields = [
        {"name": n, "type": "long", "nullable": True, "metadata": md(i)} for n, i in (("a", 1), ("b", 2))
    ]
    features = ["columnMapping"] if mode != "none" else []
    metadata = {
        "id": "stray",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": [],
        "configuration": {"delta.enableChangeDataFeed": "true"}
        | ({"delta.columnMapping.mode": mode} if mode != "none" else {}),
        "createdTime": 0,
    }
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": [*features, "changeDataFeed"],
    }
    write_commit(
        root, 0, [{"protocol": protocol}, {"metaData": metadata}, {"add": add_action(root, "f.parquet")}]
    )
    return root


@pytest.mark.parametrize(
    ("mode", "file_ids"),
    [("none", "swapped"), ("none", "none"), ("name", "swapped"), ("name", "none"), ("id", "mapped")],
)
def test_a_parquet_field_id_key_in_field_metadata_does_not_resolve_columns(
    tmp_path: Path, mode: str, file_ids: str
) -> None:
    """PROTOCOL.md: field ids resolve columns in id mode only, and then the ids of
    ``delta.columnMapping.id``. A ``PARQUET:field_id`` key in a field's metadata (a writer
    copying an Arrow schema's keys) is the column's metadata, kept on the logical schema; it
    turned on resolution by id: columns swapped, or files without ids refused."""
    t = _stray_field_id_table(tmp_path / "t", mode, file_ids)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    assert ctx.sql("SELECT a, b FROM t").to_pylist() == [{"a": 1, "b": 2}]
    assert ctx.sql("SELECT a, b FROM table_changes('t', 0)").to_pylist() == [{"a": 1, "b": 2}]
    assert DeltaTable(str(t)).snapshot().scan(columns=["a", "b"]).to_table().to_pylist() == [{"a": 1, "b": 2}]
    assert ctx.table("t").schema().field("b").metadata[b"PARQUET:field_id"] == b"12"


@pytest.mark.parametrize("spelled", ["Name", "NAME", "Id", "ID", "None"])
def test_column_mapping_mode_is_read_ignoring_case(tmp_path: Path, spelled: str) -> None:
    """Delta-Spark reads delta.columnMapping.mode ignoring case (DeltaColumnMappingMode lowercases
    it) and keeps the value as the user wrote it."""
    mode = spelled.lower()
    t = _stray_field_id_table(tmp_path / "t", mode, "mapped" if mode == "id" else "none")
    log = t / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    actions[1]["metaData"]["configuration"]["delta.columnMapping.mode"] = spelled
    write_commit(t, 0, actions)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    assert ctx.sql("SELECT a, b FROM t").to_pylist() == [{"a": 1, "b": 2}]
    assert ctx.sql("SELECT a, b FROM table_changes('t', 0)").to_pylist() == [{"a": 1, "b": 2}]


def test_unknown_column_mapping_mode_names_the_file(tmp_path: Path) -> None:
    t = _stray_field_id_table(tmp_path / "t", "name", "none")
    log = t / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    actions[1]["metaData"]["configuration"]["delta.columnMapping.mode"] = "names"
    write_commit(t, 0, actions)
    with pytest.raises(
        SchemaError, match=r"00000000000000000000\.json: unknown delta\.columnMapping\.mode 'names'"
    ):
        dd.register_table(SessionContext(), "t", str(t))
