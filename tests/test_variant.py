"""VARIANT columns (reader features ``variantType`` / ``variantType-preview``).

DataFusion 55 has no variant type, so the reader takes the protocol's alternative: the column is
served as its parquet struct of binaries ``value`` / ``metadata`` (Spark's variant binary
encoding, bytes as stored). Shredded variants (``typed_value`` beside ``value``) are refused,
never read with their shredded part silently missing.

No writer on this machine writes VARIANT columns (deltalake 1.6 cannot), so the tables are written
here: parquet files by pyarrow holding real variant encodings, and a hand-written log.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import add_action, commit_path, metadata_action, write_commit
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import DeltaTable, UnsupportedFeatureError
from delta_datafusion.cli import main as cli_main

# -- Spark variant binary encoding (enough of it for these tables) --------------------------------


def variant_metadata(keys: list[str] = ()) -> bytes:
    """Version 1, sorted dictionary, one-byte offsets."""
    keys = sorted(keys)
    data = [k.encode() for k in keys]
    offsets = [0]
    for b in data:
        offsets.append(offsets[-1] + len(b))
    return bytes([0x01 | (0x10 if keys else 0), len(keys), *offsets]) + b"".join(data)


def v_int8(i: int) -> bytes:
    return bytes([3 << 2]) + struct.pack("<b", i)


def v_double(x: float) -> bytes:
    return bytes([7 << 2]) + struct.pack("<d", x)


def v_string(s: str) -> bytes:
    b = s.encode()
    return bytes([(len(b) << 2) | 1]) + b


def v_object(fields: dict[str, bytes], keys: list[str]) -> bytes:
    keys = sorted(keys)
    ids = [keys.index(k) for k in fields]
    offsets = [0]
    for v in fields.values():
        offsets.append(offsets[-1] + len(v))
    return bytes([0x02, len(fields), *ids, *offsets]) + b"".join(fields.values())


VARIANT = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])
EMPTY = variant_metadata()


def variants(values: list[tuple[bytes, bytes] | None], typ: pa.DataType = VARIANT) -> pa.StructArray:
    """A struct array of (value, metadata) pairs; None is a NULL variant. ``typ`` may order the
    fields differently or add ``_``-prefixed ones (filled with 0)."""
    children = []
    for f in typ:
        if f.name == "value":
            children.append(pa.array([v[0] if v else b"" for v in values], pa.binary()))
        elif f.name == "metadata":
            children.append(pa.array([v[1] if v else b"" for v in values], pa.binary()))
        else:
            children.append(pa.array([0] * len(values), f.type))
    return pa.StructArray.from_arrays(
        children, fields=list(typ), mask=pa.array([v is None for v in values], pa.bool_())
    )


ROWS_A = [
    (1, (v_int8(5), EMPTY), "a"),
    (2, None, "b"),
    (3, (v_string("hi"), EMPTY), "c"),
    (4, (v_object({"a": v_int8(1), "b": v_string("x")}, ["a", "b"]), variant_metadata(["a", "b"])), "d"),
]
ROWS_B = [(5, None, "e"), (6, None, "f")]  # a file whose variants are all NULL (nullCount prunes it)
ROWS_C = [(7, (v_double(2.5), EMPTY), "g")]


def _field(name: str, typ: Any, physical: str | None = None, fid: int | None = None) -> dict:
    md = (
        {}
        if physical is None
        else {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": physical}
    )
    return {"name": name, "type": typ, "nullable": True, "metadata": md}


def _schema(mapped: bool) -> dict:
    return {
        "type": "struct",
        "fields": [
            _field("id", "long", "col-id" if mapped else None, 1),
            _field("v", "variant", "col-v" if mapped else None, 2),
            _field(
                "s",
                {
                    "type": "struct",
                    "fields": [
                        _field("tag", "string", "col-tag" if mapped else None, 4),
                        _field("w", "variant", "col-w" if mapped else None, 5),
                    ],
                },
                "col-s" if mapped else None,
                3,
            ),
            _field(
                "arr",
                {"type": "array", "elementType": "variant", "containsNull": True},
                "col-arr" if mapped else None,
                6,
            ),
        ],
    }


def _data_file(
    table: Path, name: str, rows: list, mapped: bool = False, vtype: pa.DataType = VARIANT
) -> dict:
    """Write rows (id, variant, tag) as a parquet file; return its add action with stats."""
    n = lambda logical: f"col-{logical}" if mapped else logical  # noqa: E731
    ids = pa.array([r[0] for r in rows], pa.int64())
    v = variants([r[1] for r in rows], vtype)
    w = variants([r[1] for r in reversed(rows)], vtype)
    s = pa.StructArray.from_arrays([pa.array([r[2] for r in rows]), w], names=[n("tag"), n("w")])
    elements = [e for r in rows if r[1] for e in (r[1], None)]  # [v, NULL] per non-NULL v
    offsets = [0]
    for r in rows:
        offsets.append(offsets[-1] + (2 if r[1] else 0))
    arr = pa.ListArray.from_arrays(
        pa.array(offsets, pa.int32()), variants(elements, vtype), type=pa.list_(pa.field("element", vtype))
    )
    pq.write_table(pa.table({n("id"): ids, n("v"): v, n("s"): s, n("arr"): arr}), table / name)
    nulls = sum(r[1] is None for r in rows)
    stats = {
        "numRecords": len(rows),
        "minValues": {n("id"): min(r[0] for r in rows), n("s"): {n("tag"): min(r[2] for r in rows)}},
        "maxValues": {n("id"): max(r[0] for r in rows), n("s"): {n("tag"): max(r[2] for r in rows)}},
        "nullCount": {n("id"): 0, n("v"): nulls, n("s"): {n("tag"): 0, n("w"): nulls}, n("arr"): 0},
    }
    return add_action(table, name, stats=json.dumps(stats))


def _variant_table(
    table: Path,
    feature: str = "variantType",
    mapped: bool = False,
    vtype_c: pa.DataType = VARIANT,
) -> Path:
    table.mkdir(parents=True)
    (table / "_delta_log").mkdir()
    features = [feature] + (["columnMapping"] if mapped else [])
    config = {"delta.enableChangeDataFeed": "true"}
    if mapped:
        config |= {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "6"}
    write_commit(
        table,
        0,
        [
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": features,
                    "writerFeatures": features + ["changeDataFeed"],
                }
            },
            {
                "metaData": {
                    "id": "variant-test",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(_schema(mapped)),
                    "partitionColumns": [],
                    "configuration": config,
                    "createdTime": 0,
                }
            },
            {"add": _data_file(table, "a.parquet", ROWS_A, mapped)},
        ],
    )
    write_commit(table, 1, [{"add": _data_file(table, "b.parquet", ROWS_B, mapped)}])
    write_commit(table, 2, [{"add": _data_file(table, "c.parquet", ROWS_C, mapped, vtype_c)}])
    return table


def _expected(rows: list) -> list[dict]:
    out = []
    for r in rows:
        as_dict = None if r[1] is None else {"value": r[1][0], "metadata": r[1][1]}
        out.append({"id": r[0], "v": as_dict, "arr": [as_dict, None] if r[1] else []})
    return out


def _sql(ctx: SessionContext, q: str) -> list[dict]:
    return ctx.sql(q).to_arrow_table().to_pylist()


ALL = ROWS_A + ROWS_B + ROWS_C


@pytest.mark.parametrize("feature", ["variantType", "variantType-preview"])
@pytest.mark.parametrize("mapped", [False, True], ids=["plain", "column-mapping"])
def test_variant_columns_read_as_stored_bytes(tmp_path: Path, feature: str, mapped: bool) -> None:
    t = _variant_table(tmp_path / "t", feature, mapped)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    assert ctx.table("t").schema().field("v").type == VARIANT

    got = _sql(ctx, "SELECT id, v, arr FROM t ORDER BY id")
    assert got == _expected(ALL)
    # nested: the variant inside a struct holds the rows of its file in reverse order
    nested = _sql(ctx, "SELECT id, s['tag'] AS tag, s['w'] AS w FROM t WHERE id <= 4 ORDER BY id")
    assert [r["w"] for r in nested] == [r["v"] for r in reversed(_expected(ROWS_A))]
    assert [r["tag"] for r in nested] == ["a", "b", "c", "d"]
    # the struct's fields are ordinary SQL
    assert _sql(ctx, "SELECT v['value'] AS x FROM t WHERE id = 3") == [{"x": v_string("hi")}]

    # NULL variants, counted and filtered; nullCount prunes the all-NULL file
    assert _sql(ctx, "SELECT id FROM t WHERE v IS NULL ORDER BY id") == [{"id": 2}, {"id": 5}, {"id": 6}]
    assert _sql(ctx, "SELECT count(*) AS n FROM t WHERE v IS NOT NULL") == [{"n": 4}]
    plan = dd.explain(ctx, "SELECT id FROM t WHERE v IS NOT NULL")
    assert "files_total=3" in plan and "after_stats_pruning=2" in plan, plan

    # time travel, the Python API and the change feed read the same bytes
    dd.register_table(ctx, "t1", str(t), version=1)
    assert _sql(ctx, "SELECT id, v, arr FROM t1 ORDER BY id") == _expected(ROWS_A + ROWS_B)
    scanned = DeltaTable(str(t)).snapshot().scan(columns=["id", "v"]).to_table().sort_by("id")
    assert scanned.to_pylist() == [{"id": r["id"], "v": r["v"]} for r in _expected(ALL)]
    changes = _sql(ctx, "SELECT id, v, _change_type, _commit_version FROM table_changes('t', 1) ORDER BY id")
    assert changes == [
        {"id": r["id"], "v": r["v"], "_change_type": "insert", "_commit_version": 1 if r["id"] < 7 else 2}
        for r in _expected(ROWS_B + ROWS_C)
    ]


def test_variant_struct_field_order_and_ignorable_fields(tmp_path: Path) -> None:
    """The protocol names the two fields; writers may order them either way and add fields
    starting with ``_``, which readers ignore."""
    odd = pa.struct(
        [
            pa.field("metadata", pa.binary(), False),
            pa.field("_note", pa.int32()),
            pa.field("value", pa.binary(), False),
        ]
    )
    t = _variant_table(tmp_path / "t", vtype_c=odd)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    assert _sql(ctx, "SELECT id, v, arr FROM t ORDER BY id") == _expected(ALL)


def test_shredded_variant_file_is_refused(tmp_path: Path) -> None:
    """A file keeping part of a variant in ``typed_value`` is refused by name: reading its
    ``value`` alone would return NULL or partial values. Columns beside it still read."""
    shredded = pa.struct(
        [
            pa.field("value", pa.binary()),
            pa.field("metadata", pa.binary(), False),
            pa.field("typed_value", pa.int64()),
        ]
    )
    t = _variant_table(tmp_path / "t", vtype_c=shredded)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    for q in (
        "SELECT * FROM t",
        "SELECT id FROM t WHERE v IS NOT NULL",
        "SELECT s FROM t",
        "SELECT * FROM table_changes('t', 0)",
    ):
        with pytest.raises(Exception, match=r"UnsupportedFeatureError.*c\.parquet.*shredded") as info:
            ctx.sql(q).collect()
        assert isinstance(dd.from_datafusion(info.value), UnsupportedFeatureError), q
    assert "'v' (field 'typed_value')" in str(info.value)
    assert sorted(r["id"] for r in _sql(ctx, "SELECT id FROM t")) == [1, 2, 3, 4, 5, 6, 7]
    with pytest.raises(UnsupportedFeatureError, match=r"VARIANT 's\.w'"):
        DeltaTable(str(t)).snapshot().scan(columns=["s"]).to_table()


def _with_shredding_feature(t: Path, feature: str) -> Path:
    actions = [json.loads(line) for line in commit_path(t, 0).read_text().splitlines()]
    for a in actions:
        if "protocol" in a:
            a["protocol"]["readerFeatures"].append(feature)
            a["protocol"]["writerFeatures"].append(feature)
    write_commit(t, 0, actions)
    return t


@pytest.mark.parametrize("feature", ["variantShredding", "variantShredding-preview"])
def test_a_table_with_the_shredding_feature_reads_its_unshredded_files(tmp_path: Path, feature: str) -> None:
    """The feature allows shredded files; files storing the variant unshredded read as in any
    table (they were refused with the whole table before)."""
    t = _with_shredding_feature(_variant_table(tmp_path / "t"), feature)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    assert _sql(ctx, "SELECT id, v, arr FROM t ORDER BY id") == _expected(ALL)
    changes = _sql(ctx, "SELECT id, v FROM table_changes('t', 1) ORDER BY id")
    assert changes == [{"id": r["id"], "v": r["v"]} for r in _expected(ROWS_B + ROWS_C)]


@pytest.mark.parametrize("feature", ["variantShredding", "variantShredding-preview"])
def test_a_shredded_file_of_a_table_with_the_feature_is_refused_by_name(tmp_path: Path, feature: str) -> None:
    """Only a query reading the variant from the shredded file (c.parquet, version 2) is refused;
    the other columns, and the version before it, read."""
    shredded = pa.struct(
        [
            pa.field("value", pa.binary()),
            pa.field("metadata", pa.binary(), False),
            pa.field("typed_value", pa.int64()),
        ]
    )
    t = _with_shredding_feature(_variant_table(tmp_path / "t", vtype_c=shredded), feature)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    with pytest.raises(Exception, match=r"UnsupportedFeatureError.*c\.parquet.*shredded"):
        ctx.sql("SELECT id, v FROM t").collect()
    assert sorted(r["id"] for r in _sql(ctx, "SELECT id FROM t")) == [1, 2, 3, 4, 5, 6, 7]
    dd.register_table(ctx, "t1", str(t), version=1)
    assert _sql(ctx, "SELECT id, v, arr FROM t1 ORDER BY id") == _expected(ROWS_A + ROWS_B)
    with pytest.raises(UnsupportedFeatureError, match=r"c\.parquet.*shredded"):
        DeltaTable(str(t)).changes(0).to_table()


def test_cli_info_names_variant_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    t = _variant_table(tmp_path / "t")
    assert cli_main(["info", str(t)]) == 0
    out = capsys.readouterr().out
    assert "  v: variant, read as struct<value: binary not null, metadata: binary not null>" in out


def test_shredded_check_never_passes_on_an_unreadable_footer(tmp_path: Path, monkeypatch) -> None:
    """A footer that cannot be read (a store's passing error) leaves a file unchecked: it is not
    read as unshredded; once readable, the check runs and refuses it."""
    shredded = pa.struct(
        [
            pa.field("value", pa.binary()),
            pa.field("metadata", pa.binary(), False),
            pa.field("typed_value", pa.int64()),
        ]
    )
    t = _variant_table(tmp_path / "t", vtype_c=shredded)
    scan = DeltaTable(str(t)).snapshot().scan(columns=["id", "v"])

    def unreadable(*args, **kwargs):
        raise OSError("connection reset")

    with monkeypatch.context() as m:
        m.setattr(pq, "ParquetFile", unreadable)  # the footer probe (read/footer_probe.py)
        m.setattr(pq, "read_schema", unreadable)  # the check's own read
        with pytest.raises(dd.DeltaError, match="connection reset"):
            scan.to_table()
    with pytest.raises(UnsupportedFeatureError, match="shredded"):
        scan.to_table()


# -- column mapping id mode: columns found by field id, a variant's fields by name --------------


SHREDDED = pa.struct(
    [
        pa.field("metadata", pa.binary(), False),
        pa.field("value", pa.binary()),
        pa.field("typed_value", pa.int64()),
    ]
)


def _id_mode_table(table: Path, file_names: str, shredded: bool = False) -> Path:
    """Columns k, v (variant) and s.w (variant) in column mapping id mode. The file carries field
    ids on the columns and struct fields, none inside a variant (as Spark writes it), under the
    physical names or (``file_names="other"``) names unlike them (a file converted from Iceberg)."""

    def md(i: int, physical: str) -> dict:
        return {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": physical}

    def stored(physical: str, other: str, typ: pa.DataType, i: int) -> pa.Field:
        return pa.field(
            physical if file_names == "physical" else other, typ, metadata={"PARQUET:field_id": str(i)}
        )

    w = {"name": "w", "type": "variant", "nullable": True, "metadata": md(4, "col-w")}
    fields = [
        {"name": "k", "type": "integer", "nullable": True, "metadata": md(1, "col-k")},
        {"name": "v", "type": "variant", "nullable": True, "metadata": md(2, "col-v")},
        {
            "name": "s",
            "type": {"type": "struct", "fields": [w]},
            "nullable": True,
            "metadata": md(3, "col-s"),
        },
    ]
    if shredded:  # row 1 keeps its value in typed_value only
        vtype = SHREDDED
        v = pa.StructArray.from_arrays(
            [
                pa.array([EMPTY, EMPTY]),
                pa.array([None, v_int8(3)], pa.binary()),
                pa.array([42, None], pa.int64()),
            ],
            fields=list(SHREDDED),
        )
    else:
        vtype = VARIANT
        v = variants([(v_int8(4), EMPTY), None])
    s_type = pa.struct([stored("col-w", "iw", vtype, 4)])
    s = pa.StructArray.from_arrays([v], fields=list(s_type))
    schema = pa.schema(
        [
            stored("col-k", "ik", pa.int32(), 1),
            stored("col-v", "iv", vtype, 2),
            stored("col-s", "is", s_type, 3),
        ]
    )
    table.mkdir(parents=True)
    (table / "_delta_log").mkdir()
    pq.write_table(pa.table([pa.array([1, 2], pa.int32()), v, s], schema=schema), table / "a.parquet")
    features = ["variantType", "columnMapping"]
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": [*features, "changeDataFeed"],
    }
    conf = {"delta.columnMapping.mode": "id", "delta.enableChangeDataFeed": "true"}
    metadata = metadata_action({"type": "struct", "fields": fields}, [], conf, "variant-id-mode")
    write_commit(table, 0, [{"protocol": protocol}, metadata, {"add": add_action(table, "a.parquet")}])
    return table


@pytest.mark.parametrize("file_names", ["physical", "other"])
def test_variant_columns_in_id_mode(tmp_path: Path, file_names: str) -> None:
    """The variant's value and metadata have no field ids: resolving them by id named them
    'unmatched' and every read failed ('struct fields don't match')."""
    t = _id_mode_table(tmp_path / "t", file_names)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    v = {"value": v_int8(4), "metadata": EMPTY}
    assert _sql(ctx, "SELECT k, v, s FROM t ORDER BY k") == [
        {"k": 1, "v": v, "s": {"w": v}},
        {"k": 2, "v": None, "s": {"w": None}},
    ]
    assert _sql(ctx, "SELECT k FROM t WHERE v IS NOT NULL") == [{"k": 1}]
    assert _sql(ctx, "SELECT k, v FROM table_changes('t', 0) ORDER BY k") == [
        {"k": 1, "v": v},
        {"k": 2, "v": None},
    ]
    scanned = DeltaTable(str(t)).snapshot().scan(columns=["k", "v"]).to_table().sort_by("k").to_pylist()
    assert scanned == [{"k": 1, "v": v}, {"k": 2, "v": None}]


def test_shredded_variant_found_by_field_id_is_refused(tmp_path: Path) -> None:
    """The shredded-variant check looked a column up by its physical name; a file naming it
    otherwise (id mode finds it by field id) went unchecked."""
    t = _id_mode_table(tmp_path / "t", "other", shredded=True)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    # a nested variant is named by its physical path (as in name mode)
    for q, named in (("SELECT k, v FROM t", "'v'"), ("SELECT k, s FROM t", "'s.col-w'")):
        with pytest.raises(
            Exception, match=rf"UnsupportedFeatureError.*a\.parquet.*VARIANT {named}.*typed_value"
        ):
            ctx.sql(q).collect()
    with pytest.raises(UnsupportedFeatureError, match="VARIANT 'v'"):
        DeltaTable(str(t)).snapshot().scan(columns=["v"]).to_table()


def test_shredded_variant_named_in_another_case_is_refused(tmp_path: Path) -> None:
    """A file naming the variant column in another case is read for it (Delta names ignore
    case); the check looked for the exact name and missed it. Row 1's value holds part of the
    object and typed_value the rest: the cast to (value, metadata) dropped typed_value silently."""
    t = tmp_path / "t"
    _variant_table(t)
    shredded = pa.StructArray.from_arrays(
        [pa.array([EMPTY]), pa.array([v_int8(1)], pa.binary()), pa.array([42], pa.int64())],
        fields=list(SHREDDED),
    )
    data = pa.table({"id": pa.array([8], pa.int64()), "V": shredded})
    pq.write_table(data, t / "d.parquet")
    write_commit(t, 3, [{"add": add_action(t, "d.parquet")}])
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(t))
    with pytest.raises(Exception, match=r"UnsupportedFeatureError.*d\.parquet.*VARIANT 'v'.*typed_value"):
        ctx.sql("SELECT id, v FROM t WHERE id = 8").collect()
