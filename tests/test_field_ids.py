"""Tables whose schema carries parquet field ids without column mapping.

Writers that start from parquet with field ids (tpchgen-cli 4, pyiceberg exports, ...) hand them to
deltalake, which stores them in the Delta schema as ``parquet.field.id`` field metadata. Without
column mapping the protocol resolves columns by name, so the ids must not decide which parquet
column is read. (DuckDB's delta extension returns NULL for every column of such a table; the
scan benchmark's lineitem tables hit it.) Here the ids are deliberately out of step with the
column order, so a reader matching by id would swap columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from datafusion import SessionContext
from deltalake import write_deltalake

import delta_datafusion as dd

IDS = {"id": "3", "name": "1", "score": "2"}


def _batch(lo: int, hi: int) -> pa.Table:
    ids = list(range(lo, hi))
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={"PARQUET:field_id": IDS["id"]}),
            pa.field("name", pa.string(), metadata={"PARQUET:field_id": IDS["name"]}),
            pa.field("score", pa.float64(), metadata={"PARQUET:field_id": IDS["score"]}),
        ]
    )
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "score": [i / 4 for i in ids]}, schema=schema)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("field_ids") / "t"
    write_deltalake(str(path), _batch(0, 50))
    write_deltalake(str(path), _batch(50, 100), mode="append")
    return path


def _id_mode_start(schema: dict, max_id: int) -> list[dict]:
    """The protocol and metaData actions of a column-mapping 'id' table with ``schema``."""
    features = ["columnMapping"]
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": features,
    }
    config = {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": str(max_id)}
    md = {
        "id": "ids",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": [],
        "configuration": config,
    }
    return [{"protocol": protocol}, {"metaData": md}]


def test_the_schema_carries_field_ids(table: Path) -> None:
    # the premise: deltalake kept the ids in the Delta schema, and no column mapping is on
    first = (table / "_delta_log" / "00000000000000000000.json").read_text().splitlines()
    md = next(json.loads(line)["metaData"] for line in first if '"metaData"' in line)
    fields = {f["name"]: f["metadata"] for f in json.loads(md["schemaString"])["fields"]}
    assert {k: str(v.get("parquet.field.id")) for k, v in fields.items()} == IDS
    assert "delta.columnMapping.mode" not in md.get("configuration", {})


def test_columns_are_read_by_name(table: Path) -> None:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    got = ctx.sql("SELECT * FROM t ORDER BY id").to_arrow_table()
    expected = pa.concat_tables([_batch(0, 50), _batch(50, 100)])
    assert got.column_names == ["id", "name", "score"]
    for c in got.column_names:
        assert got.column(c).to_pylist() == expected.column(c).to_pylist(), c

    got = ctx.sql("SELECT name, score FROM t WHERE id >= 90 AND score < 24 ORDER BY id").to_arrow_table()
    mask = pc.and_(pc.greater_equal(expected["id"], 90), pc.less(expected["score"], 24))
    want = expected.filter(mask)
    assert got.num_rows == 6
    assert got.column("name").to_pylist() == want.column("name").to_pylist()
    assert got.column("score").to_pylist() == want.column("score").to_pylist()

    # the Python API reads the same way
    scan = dd.DeltaTable(str(table)).snapshot().scan(columns=["score", "id"], predicate="id < 3")
    assert sorted(scan.to_table().to_pylist(), key=lambda r: r["id"]) == [
        {"score": i / 4, "id": i} for i in range(3)
    ]


def test_column_mapping_id_mode_resolves_columns_by_field_id(tmp_path: Path) -> None:
    """In id mode the parquet field id, not the name, says which column is which (PROTOCOL.md,
    column mapping). A file naming its columns differently from the physical names (converted
    from Iceberg, say) read as all NULL before; a Spark-style file with the physical names and a
    nested struct whose fields are named differently are read alongside it."""
    import pyarrow.parquet as pq

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)

    def field(name: str, typ: object, fid: int) -> dict:
        md = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": f"col-{fid}"}
        return {"name": name, "type": typ, "nullable": True, "metadata": md}

    st_type = {"type": "struct", "fields": [field("a", "integer", 4), field("b", "string", 5)]}
    schema = {
        "type": "struct",
        "fields": [field("id", "long", 1), field("score", "double", 2), field("st", st_type, 3)],
    }

    def pfield(name: str, typ: pa.DataType, fid: int) -> pa.Field:
        return pa.field(name, typ, metadata={"PARQUET:field_id": str(fid)})

    def write(name: str, names: dict[int, str], rows: list[tuple]) -> dict:
        st = pa.struct([pfield(names[4], pa.int32(), 4), pfield(names[5], pa.string(), 5)])
        arrow_schema = pa.schema(
            [pfield(names[1], pa.int64(), 1), pfield(names[2], pa.float64(), 2), pfield(names[3], st, 3)]
        )
        data = pa.table(
            {
                names[1]: [r[0] for r in rows],
                names[2]: [r[1] for r in rows],
                names[3]: [{names[4]: r[2], names[5]: r[3]} for r in rows],
            },
            schema=arrow_schema,
        )
        pq.write_table(data, table / name)
        size = (table / name).stat().st_size
        return {
            "add": {
                "path": name,
                "partitionValues": {},
                "size": size,
                "modificationTime": 0,
                "dataChange": True,
            }
        }

    spark = {i: f"col-{i}" for i in range(1, 6)}
    iceberg = {1: "id", 2: "score", 3: "st", 4: "a", 5: "b"}
    rows1, rows2 = [(1, 0.5, 10, "x"), (2, 1.5, 20, "y")], [(3, 2.5, 30, "z"), (4, 3.5, 40, "w")]
    actions = [
        *_id_mode_start(schema, 5),
        write("f1.parquet", spark, rows1),
        write("f2.parquet", iceberg, rows2),
    ]
    (table / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    expected = [{"id": r[0], "score": r[1], "st": {"a": r[2], "b": r[3]}} for r in rows1 + rows2]
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    assert ctx.sql("SELECT * FROM t ORDER BY id").to_pylist() == expected
    assert ctx.sql("SELECT id FROM t WHERE score > 2 ORDER BY id").to_pydict()["id"] == [3, 4]
    assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict()["n"] == [4]  # no column read
    assert ctx.sql("SELECT st['b'] AS b FROM t WHERE id >= 2 ORDER BY id").to_pydict()["b"] == ["y", "z", "w"]
    got = dd.DeltaTable(str(table)).snapshot().scan(predicate="score < 3").to_table()
    assert sorted(got.column("id").to_pylist()) == [1, 2, 3]


@pytest.mark.parametrize("mode", ["name", "id"])
def test_nested_field_predicate_under_column_mapping(tmp_path: Path, mode: str) -> None:
    """A Python predicate on a nested field of a column-mapped table: the row filter uses the
    physical names at every level (only the top level was renamed: pyarrow found no field
    ``col-...x``). Found by the column-mapping fuzzer."""
    from delta_datafusion import DeltaTable

    s_type = pa.struct([("x", pa.int32()), ("y", pa.string())])
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "s": pa.array([{"x": 1, "y": "a"}, {"x": 5, "y": "b"}, None], s_type),
        }
    )
    path = tmp_path / "t"
    write_deltalake(
        str(path),
        rows,
        configuration={"delta.columnMapping.mode": mode, "delta.enableChangeDataFeed": "true"},
    )
    field = DeltaTable(str(path)).snapshot().metadata.schema_json["fields"][1]
    assert field["type"]["fields"][0]["metadata"]["delta.columnMapping.physicalName"] != "x"  # the premise
    want = [{"id": 2, "s": {"x": 5, "y": "b"}}]
    got = DeltaTable(str(path)).snapshot().scan(columns=["id", "s"], predicate=pc.field("s", "x") > 2)
    assert got.to_table().to_pylist() == want
    changes = DeltaTable(str(path)).changes(0, columns=["id", "s"], predicate=pc.field("s", "x") > 2)
    assert changes.to_table().to_pylist() == want


@pytest.mark.parametrize("order", [["s", "s.x"], ["s.x", "s"]])
def test_top_level_dotted_name_beside_a_nested_field_under_column_mapping(tmp_path: Path, order) -> None:
    """A top-level column "s.x" and the field x of struct s are different columns; their
    physical names must not be confused in a row filter (found by the review of the fix above)."""
    from delta_datafusion import DeltaTable

    cols = {
        "s": pa.array([{"x": 1}, {"x": 5}], pa.struct([("x", pa.int32())])),
        "s.x": pa.array([5, 1], pa.int32()),
    }
    path = tmp_path / "t"
    write_deltalake(
        str(path), pa.table({k: cols[k] for k in order}), configuration={"delta.columnMapping.mode": "name"}
    )
    snap = DeltaTable(str(path)).snapshot()
    nested = snap.scan(predicate=pc.field("s", "x") > 2).to_table()
    assert nested.column("s.x").to_pylist() == [1]
    top = snap.scan(predicate=pc.field("s.x") > 2).to_table()
    assert top.column("s.x").to_pylist() == [5]


def test_change_data_file_named_by_field_id_keeps_its_change_type(tmp_path: Path) -> None:
    """In id mode a change data file whose table columns carry other names is read by field id,
    and its _change_type column, which is no table column and has no field id, by name (it was
    left out, and the feed refused the file as having no _change_type column)."""
    import pyarrow.parquet as pq

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)

    def field(name: str, typ: str, fid: int) -> dict:
        md = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": f"col-{fid}"}
        return {"name": name, "type": typ, "nullable": True, "metadata": md}

    def write(name: str, ids: list[int], vs: list[str], change_types: list[str] | None = None) -> int:
        fields = [
            pa.field("renamed_a", pa.int64(), metadata={"PARQUET:field_id": "1"}),
            pa.field("renamed_b", pa.string(), metadata={"PARQUET:field_id": "2"}),
        ]
        arrays = [pa.array(ids, pa.int64()), pa.array(vs)]
        if change_types is not None:
            fields.append(pa.field("_change_type", pa.string()))
            arrays.append(pa.array(change_types))
        (table / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), table / name)
        return (table / name).stat().st_size

    def file_action(kind: str, name: str, size: int) -> dict:
        return {
            kind: {
                "path": name,
                "partitionValues": {},
                "size": size,
                "modificationTime": 0,
                "dataChange": True,
            }
        }

    schema = {"type": "struct", "fields": [field("id", "long", 1), field("v", "string", 2)]}
    conf = {
        "delta.columnMapping.mode": "id",
        "delta.columnMapping.maxColumnId": "2",
        "delta.enableChangeDataFeed": "true",
    }
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["columnMapping"],
        "writerFeatures": ["columnMapping", "changeDataFeed"],
    }
    md = {"id": "ids", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema)}
    md |= {"partitionColumns": [], "configuration": conf}
    a = write("a.parquet", [1, 2], ["a", "b"])
    b = write("b.parquet", [1, 2], ["z", "b"])
    c = write("_change_data/c.parquet", [1, 1], ["a", "z"], ["update_preimage", "update_postimage"])
    commits = [
        [{"protocol": protocol}, {"metaData": md}, file_action("add", "a.parquet", a)],
        [file_action("remove", "a.parquet", a), file_action("add", "b.parquet", b)]
        + [file_action("cdc", "_change_data/c.parquet", c)],
    ]
    for version, actions in enumerate(commits):
        (table / "_delta_log" / f"{version:020d}.json").write_text(
            "\n".join(json.dumps(x) for x in actions) + "\n"
        )
    got = dd.DeltaTable(str(table)).changes(1).to_table().select(["id", "v", "_change_type"]).to_pylist()
    assert sorted(got, key=lambda r: r["_change_type"]) == [
        {"id": 1, "v": "z", "_change_type": "update_postimage"},
        {"id": 1, "v": "a", "_change_type": "update_preimage"},
    ]
    ctx = SessionContext()
    dd.register(ctx)
    q = f"SELECT v FROM table_changes('{table}', 0) WHERE _change_type = 'update_postimage'"
    assert ctx.sql(q).to_pydict()["v"] == ["z"]


def _id_mode_table(table: Path, columns: list[tuple[str, str, str, int]], data: pa.Table) -> None:
    """A one-file table in column mapping id mode: ``columns`` are (name, Delta type, physical
    name, field id); ``data`` is the data file as stored (its own names and field ids)."""
    import pyarrow.parquet as pq

    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(data, table / "a.parquet")
    fields = [
        {
            "name": name,
            "type": typ,
            "nullable": True,
            "metadata": {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": phys},
        }
        for name, typ, phys, i in columns
    ]
    conf = {
        "delta.columnMapping.mode": "id",
        "delta.columnMapping.maxColumnId": str(max(c[3] for c in columns)),
    }
    md = {"id": "x", "format": {"provider": "parquet", "options": {}}, "partitionColumns": []}
    md |= {"schemaString": json.dumps({"type": "struct", "fields": fields}), "configuration": conf}
    size = (table / "a.parquet").stat().st_size
    add = {
        "path": "a.parquet",
        "partitionValues": {},
        "size": size,
        "modificationTime": 0,
        "dataChange": True,
    }
    actions = [{"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}, {"metaData": md}, {"add": add}]
    (table / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _with_ids(names_types: list[tuple[str, pa.DataType, int]], arrays: list[pa.Array]) -> pa.Table:
    fields = [pa.field(n, t, metadata={"PARQUET:field_id": str(i)}) for n, t, i in names_types]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def test_id_mode_column_of_the_same_name_but_another_field_id_reads_null(tmp_path: Path) -> None:
    """In id mode a file column named like the table's column but carrying another field id is
    another column (dropped and added again: old files hold the dropped one): the table's column
    reads as NULL (PROTOCOL.md: ids not found in a file are NULL), not as the old values."""
    table = tmp_path / "t"
    data = _with_ids([("id", pa.int64(), 1), ("c", pa.int64(), 2)], [pa.array([1, 2]), pa.array([10, 20])])
    _id_mode_table(table, [("id", "long", "id", 1), ("c", "long", "c", 3)], data)
    got = dd.DeltaTable(str(table)).snapshot().scan().to_table().sort_by("id").to_pylist()
    assert got == [{"id": 1, "c": None}, {"id": 2, "c": None}]
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE c IS NULL").to_pydict()["n"] == [2]


def test_id_mode_file_with_other_names_is_type_checked_too(tmp_path: Path) -> None:
    """A file read by field id (its names differ from the physical ones) storing a column as a
    type the table's cannot be read as unchanged is refused like any other file (its doubles
    became float infinities)."""
    table = tmp_path / "t"
    data = _with_ids([("x", pa.int64(), 1), ("y", pa.float64(), 2)], [pa.array([1]), pa.array([1e300])])
    _id_mode_table(table, [("a", "long", "col-1", 1), ("b", "float", "col-2", 2)], data)
    with pytest.raises(
        dd.DeltaError,
        match=r"a.parquet stores column 'b' \(physical name 'col-2'\) as double, but the table schema says float",
    ):
        dd.DeltaTable(str(table)).snapshot().scan().to_table()
    assert dd.DeltaTable(str(table)).snapshot().scan(columns=["a"]).to_table().column("a").to_pylist() == [1]


def test_name_mode_value_out_of_the_table_type_names_the_logical_column(tmp_path: Path) -> None:
    """A file storing a column wider than the table's type, with a value that does not fit, is
    refused naming the column as queries know it: under column mapping its physical name alone
    (``col-...``) names nothing the user knows."""
    import pyarrow.parquet as pq

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"col-1": pa.array([1, 2**40], pa.int64())}), table / "a.parquet")
    md = {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}
    schema = {
        "type": "struct",
        "fields": [{"name": "x", "type": "integer", "nullable": True, "metadata": md}],
    }
    actions = _id_mode_start(schema, 1)
    actions[1]["metaData"]["configuration"]["delta.columnMapping.mode"] = "name"
    size = (table / "a.parquet").stat().st_size
    actions.append(
        {
            "add": {
                "path": "a.parquet",
                "partitionValues": {},
                "size": size,
                "modificationTime": 0,
                "dataChange": True,
            }
        }
    )
    (table / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    with pytest.raises(
        Exception,
        match=r"a.parquet stores column 'x' \(physical name 'col-1'\) as int64, but the table schema says int32",
    ):
        ctx.sql("SELECT * FROM t").collect()


def test_id_mode_file_read_at_two_versions_maps_columns_per_version(tmp_path: Path) -> None:
    """Which file columns a file's field ids map to depends on the version's schema: a file whose
    names agree with the version that dropped a column (nothing to map) but not with the version
    before it (the dropped column is stored under another name) gave NULLs for that column at the
    older version once the newer one had been read (the per-file cache ignored the schema)."""
    table = tmp_path / "t"
    data = _with_ids(
        [("col-k", pa.int64(), 1), ("ice_c", pa.string(), 2)], [pa.array([1, 2]), pa.array(["x", "y"])]
    )
    _id_mode_table(table, [("k", "long", "col-k", 1), ("c", "string", "col-c", 2)], data)
    md = json.loads((table / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[1])["metaData"]
    schema = json.loads(md["schemaString"])
    schema["fields"] = schema["fields"][:1]  # version 1 drops c
    md["schemaString"] = json.dumps(schema)
    (table / "_delta_log" / f"{1:020d}.json").write_text(json.dumps({"metaData": md}) + "\n")
    dt = dd.DeltaTable(str(table))
    v1 = [{"k": 1}, {"k": 2}]
    v0 = [{"k": 1, "c": "x"}, {"k": 2, "c": "y"}]
    assert dt.snapshot(version=1).scan().to_table().sort_by("k").to_pylist() == v1
    assert dt.snapshot(version=0).scan().to_table().sort_by("k").to_pylist() == v0
    ctx = SessionContext()
    dd.register_table(ctx, "t0", str(table), version=0)
    assert ctx.sql("SELECT * FROM t0 ORDER BY k").to_pylist() == v0


def test_id_mode_column_dropped_and_added_again_under_its_physical_name(tmp_path: Path) -> None:
    """In id mode a column is its field id: c (id 2, boolean) dropped and a string c (id 3) added
    under the same physical name is a new column, NULL in the older file, in snapshots and in the
    change feed (which refused: "type changed from bool to string", matching by physical name)."""
    table = tmp_path / "t"
    data = _with_ids(
        [("col-k", pa.int64(), 1), ("col-c", pa.bool_(), 2)], [pa.array([1, 2]), pa.array([True, False])]
    )
    _id_mode_table(table, [("k", "long", "col-k", 1), ("c", "boolean", "col-c", 2)], data)
    log = table / "_delta_log"
    actions = [json.loads(line) for line in (log / f"{0:020d}.json").read_text().splitlines()]
    md = actions[1]["metaData"]
    md["configuration"]["delta.enableChangeDataFeed"] = "true"
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    schema = json.loads(md["schemaString"])
    schema["fields"][1] = dict(schema["fields"][1], type="string")
    schema["fields"][1]["metadata"] = {
        "delta.columnMapping.id": 3,
        "delta.columnMapping.physicalName": "col-c",
    }
    md = dict(md, schemaString=json.dumps(schema))
    md["configuration"] = dict(md["configuration"], **{"delta.columnMapping.maxColumnId": "3"})
    (log / f"{1:020d}.json").write_text(json.dumps({"metaData": md}) + "\n")
    dt = dd.DeltaTable(str(table))
    assert dt.snapshot(version=0).scan().to_table().sort_by("k").column("c").to_pylist() == [True, False]
    assert dt.snapshot().scan().to_table().sort_by("k").to_pylist() == [
        {"k": 1, "c": None},
        {"k": 2, "c": None},
    ]
    feed = dt.changes(0, 1).to_table().sort_by("k").select(["k", "c", "_change_type"]).to_pylist()
    assert feed == [
        {"k": 1, "c": None, "_change_type": "insert"},
        {"k": 2, "c": None, "_change_type": "insert"},
    ]


def test_id_mode_file_without_field_ids_is_refused(tmp_path: Path) -> None:
    """PROTOCOL.md: in id mode a data file without field ids is refused or read as NULLs. It was
    read by physical name, which can pick a dropped column another has replaced under its name."""
    table = tmp_path / "t"
    _id_mode_table(table, [("k", "long", "col-k", 1)], pa.table({"col-k": pa.array([1, 2], pa.int64())}))
    message = r"a\.parquet: column mapping id mode finds columns by parquet field id, and this file has none"
    with pytest.raises(dd.DeltaError, match=message):
        dd.DeltaTable(str(table)).snapshot().scan().to_table()
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    with pytest.raises(Exception, match="field id") as info:  # noqa: B017 - DataFusion's type
        ctx.sql("SELECT k FROM t WHERE k > 1").collect()
    assert isinstance(dd.from_datafusion(info.value), dd.DeltaError)


def test_id_mode_table_column_missing_from_a_file_with_ids_reads_null(tmp_path: Path) -> None:
    """A file with field ids on some columns: a table column whose id it lacks reads as NULL
    (PROTOCOL.md), not as the file's id-less column of the same physical name (a dropped one)."""
    table = tmp_path / "t"
    k = pa.field("col-k", pa.int64(), metadata={"PARQUET:field_id": "1"})
    c = pa.field("col-c", pa.bool_())  # no field id: not the table's column 3
    data = pa.Table.from_arrays([pa.array([1, 2]), pa.array([True, False])], schema=pa.schema([k, c]))
    _id_mode_table(table, [("k", "long", "col-k", 1), ("c", "boolean", "col-c", 3)], data)
    got = dd.DeltaTable(str(table)).snapshot().scan().to_table().sort_by("k").to_pylist()
    assert got == [{"k": 1, "c": None}, {"k": 2, "c": None}]
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE c IS NULL").to_pydict() == {"n": [2]}


def test_id_mode_files_of_one_schema_share_one_column_map(tmp_path: Path) -> None:
    """The field-id column map of each file read is cached per file for the process; files of one
    schema (a table's files repeat a few) share one map, which is as large as the table is wide
    (65,536 files x 5,000 columns held 3e8 entries before)."""
    import pyarrow.parquet as pq

    from delta_datafusion.read import file_checks

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    md = {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-1"}
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": md}]}
    actions = _id_mode_start(schema, 1)
    for i in range(4):  # named as Iceberg names them: the field id says which column it is
        data = pa.table(
            {"id": [i]}, schema=pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"})])
        )
        pq.write_table(data, table / f"f{i}.parquet")
        size = (table / f"f{i}.parquet").stat().st_size
        actions.append({"add": {"path": f"f{i}.parquet", "partitionValues": {}, "size": size,
                                "modificationTime": 0, "dataChange": True}})  # fmt: skip
    (table / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    assert sorted(ctx.sql("SELECT id FROM t").to_pydict()["id"]) == [0, 1, 2, 3]
    maps = [v for (location, _, _), v in file_checks._ID_CACHE.items() if location.startswith(str(table))]
    assert len(maps) == 4 and maps[0] == {"col-1": ("id", pa.int64())}
    assert len({id(m) for m in maps}) == 1


class _Label(pa.ExtensionType):
    """A Python extension type: pyarrow gives it no hash."""

    def __init__(self) -> None:
        super().__init__(pa.int64(), "delta_datafusion.test.label")

    def __arrow_ext_serialize__(self) -> bytes:
        return b""

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> _Label:
        return cls()


def test_id_mode_file_with_an_unhashable_extension_type_is_read(tmp_path: Path) -> None:
    """A file column of a registered Python extension type (pyarrow gives such types no hash)
    renamed by field id is read: footer facts that cannot be hashed are kept unshared."""
    table = tmp_path / "t"
    data = _with_ids([("file_x", _Label(), 1)], [pa.ExtensionArray.from_storage(_Label(), pa.array([1, 2]))])
    _id_mode_table(table, [("x", "long", "col-1", 1)], data)
    pa.register_extension_type(_Label())
    try:
        ctx = SessionContext()
        dd.register_table(ctx, "t", str(table))
        assert ctx.sql("SELECT x FROM t ORDER BY x").to_pydict() == {"x": [1, 2]}
    finally:
        pa.unregister_extension_type("delta_datafusion.test.label")


def test_change_feed_footer_pruning_matches_columns_by_field_id(tmp_path: Path) -> None:
    """A change without stats in the log (a remove written without them) is pruned by its file's
    parquet footer. In id mode the footer's column of the physical name but another field id is
    another column (dropped and added again), which the read gives as NULL: its statistics
    (no NULLs) dropped the file for ``c IS NULL``, and the change feed lost the rows it reads."""
    import pyarrow.parquet as pq

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    data = _with_ids([("id", pa.int64(), 1), ("c", pa.int64(), 2)], [pa.array([1, 2]), pa.array([10, 20])])
    pq.write_table(data, table / "a.parquet")
    size = (table / "a.parquet").stat().st_size

    def field(name: str, fid: int) -> dict:
        md = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": name}
        return {"name": name, "type": "long", "nullable": True, "metadata": md}

    def metadata(c_id: int) -> dict:
        schema = {"type": "struct", "fields": [field("id", 1), field("c", c_id)]}
        actions = _id_mode_start(schema, c_id)
        actions[1]["metaData"]["configuration"]["delta.enableChangeDataFeed"] = "true"
        return actions[1]

    file = {"path": "a.parquet", "partitionValues": {}, "size": size, "dataChange": True}
    protocol = _id_mode_start({"type": "struct", "fields": []}, 0)[0]
    # changeDataFeed binds writers to the property
    protocol["protocol"]["writerFeatures"] = ["columnMapping", "changeDataFeed"]
    commits = [
        [
            protocol,
            metadata(2),
            {"add": file | {"modificationTime": 0}},
        ],
        [metadata(3)],  # c dropped and added again under its physical name: another field id
        [{"remove": file | {"deletionTimestamp": 0, "extendedFileMetadata": True}}],
    ]
    for v, actions in enumerate(commits):
        (table / "_delta_log" / f"{v:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    rows = [{"id": 1, "c": None}, {"id": 2, "c": None}]
    got = dd.DeltaTable(str(table)).changes(2, 2, columns=["id", "c"], predicate="c IS NULL").to_table()
    assert got.select(["id", "c"]).sort_by("id").to_pylist() == rows
    ctx = SessionContext()
    dd.register(ctx)
    q = f"SELECT id, c FROM table_changes('{table}', 2, 2) WHERE c IS NULL ORDER BY id"
    assert ctx.sql(q).to_arrow_table().to_pylist() == rows
