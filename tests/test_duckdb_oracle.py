"""DuckDB's ``delta_scan`` (delta-kernel-rs) as an oracle: the same rows as our SQL ``SELECT *``.

Two sources of tables:

* tables written here with deltalake, version by version: partitioned appends with NULL
  partition values, schema evolution (``schema_mode="merge"``), DELETE, UPDATE, MERGE, a partial
  (``predicate=``) and a full overwrite, OPTIMIZE (``dataChange=false`` rewrites), a checkpoint,
  RESTORE, and a table of nested / unusual types. Every version of each is compared;
* every snapshot (latest and time-travel versions) of the conformance corpus that DuckDB can
  read, which covers deletion vectors, column mapping, checkpoints of every kind and type
  widening. The known oracle disagreements of corpus/README.md are skipped with their reason.

DuckDB's arrow output is cast to our schema, then compared with ``assert_same_rows`` (sorted by
every primitive column, floats with a tolerance, NaN equal to NaN).
"""

from __future__ import annotations

import datetime as dt
import glob
import os
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("deltalake")
duckdb = pytest.importorskip("duckdb")
duckdb_extension_delta = pytest.importorskip("duckdb_extension_delta")

from conftest import CORPUS, load_manifest  # noqa: E402
from corpus_compare import assert_same_rows  # noqa: E402
from datafusion import SessionContext  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402

#: corpus/README.md "Known oracle disagreements": DuckDB is wrong or cannot read these.
DUCKDB_DISAGREES = {
    "data-reader-timestamp_ntz-id-mode": "duckdb returns NULL for the timestamp_ntz partition column "
    "tsNtzPartition (column mapping id mode)",
    "void-column": "duckdb rejects the void type",
    "canonicalized-paths-normal-a": "duckdb keeps the file removed through a file: URI and fails to open it",
    "canonicalized-paths-normal-b": "duckdb keeps the file removed through a file: URI and fails to open it",
    "canonicalized-paths-special-a": "duckdb keeps the file removed through a file: URI and fails to open it",
}

#: The tables the oracle comparison is mainly about; they must be in the corpus when it exists.
FOCUS_TABLES = [
    "table-with-dv-small",
    "with-short-dv",
    "dv-with-columnmapping",
    "table_with_deletion_logs",
    "cdf-table-with-dv",
    "table-with-columnmapping-mode-name",
    "table_with_column_mapping",
    "data-skipping-basic-stats-all-types-columnmapping-id",
    "data-skipping-basic-stats-all-types-columnmapping-name",
    "cdf-column-mapping-name-mode",
    "cdf-column-mapping-name-mode-3-7",
    "table-with-icebegCompatV2Enabled",
    "type-widening",
]


@pytest.fixture(scope="module")
def duck():
    paths = glob.glob(
        os.path.join(
            os.path.dirname(duckdb_extension_delta.__file__), "extensions", "**", "*.duckdb_extension"
        ),
        recursive=True,
    )
    if not paths:
        pytest.skip("duckdb-extension-delta ships no .duckdb_extension file")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{paths[0]}'")
    yield con
    con.close()


def duck_read(con, path: Path | str, version: int | None = None, where: str | None = None) -> pa.Table:
    args = f"'{path}'" + (f", version={version}" if version is not None else "")
    sql = f"SELECT * FROM delta_scan({args})" + (f" WHERE {where}" if where else "")
    return con.execute(sql).to_arrow_table()


def ours_read(path: Path | str, version: int | None = None, where: str | None = None) -> pa.Table:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path), version=version)
    return ctx.sql("SELECT * FROM t" + (f" WHERE {where}" if where else "")).to_arrow_table()


def _cast_to(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """DuckDB's columns cast to our types where possible (string_view, tz spelling, large lists)."""
    cols, names = [], []
    for name in table.column_names:
        col = table.column(name)
        idx = schema.get_field_index(name)
        if idx >= 0:
            try:
                col = col.cast(schema.field(idx).type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass
        cols.append(col)
        names.append(name)
    return pa.Table.from_arrays(cols, names=names)


def _fast_equal(ours: pa.Table, theirs: pa.Table) -> bool:
    """Exact equality after sorting (cheap for large tables); False means 'compare in detail'."""
    if ours.column_names != theirs.column_names or ours.num_rows != theirs.num_rows:
        return False
    keys = [
        (f.name, "ascending")
        for f in ours.schema
        if not (pa.types.is_nested(f.type) or pa.types.is_null(f.type))
    ]
    if not keys or len(keys) != len(ours.schema):
        return False
    try:
        a = ours.take(pc.sort_indices(ours, sort_keys=keys)).replace_schema_metadata(None)
        b = theirs.cast(a.schema).take(pc.sort_indices(theirs, sort_keys=keys))
        return a.equals(b)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False


def assert_same_as_duckdb(ours: pa.Table, theirs: pa.Table, context: str) -> None:
    theirs = _cast_to(theirs, ours.schema)
    if _fast_equal(ours, theirs):
        return
    assert_same_rows(ours, theirs, context)


# -- tables written with deltalake ------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("k", pa.int32()),
        ("v", pa.float64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(12, 3)),
    ]
)
PARTS = ["p", "k"]


def _batch(start: int, n: int, schema: pa.Schema = SCHEMA, p_override: str | None = "unset") -> pa.Table:
    ids = list(range(start, start + n))
    cols = {
        "id": ids,
        "p": [(["a", "b", "c", None][i % 4] if p_override == "unset" else p_override) for i in ids],
        "k": [None if i % 11 == 0 else i % 3 for i in ids],
        "v": [None if i % 13 == 0 else i * 0.25 for i in ids],
        "s": [None if i % 5 == 0 else f"s{i}" for i in ids],
        "d": [dt.date(2024, 1, 1) + dt.timedelta(days=i % 40) for i in ids],
        "ts": [dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(minutes=7 * i) for i in ids],
        "dec": [Decimal(i * 7 - 300) / 1000 for i in ids],
    }
    for f in schema:
        if f.name not in cols:
            cols[f.name] = [None if i % 2 else f"{f.name}{i}" for i in ids]
    return pa.table({f.name: cols[f.name] for f in schema}, schema=schema)


@pytest.fixture(scope="module")
def evolving_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """A partitioned table with many files and every kind of change deltalake can write."""
    path = str(tmp_path_factory.mktemp("oracle") / "evolving")
    write_deltalake(path, _batch(0, 60), partition_by=PARTS)  # v0
    for j in range(1, 9):  # v1..v8: appends, many files (each covers all partitions)
        write_deltalake(path, _batch(j * 60, 60), mode="append", partition_by=PARTS)
    merged = SCHEMA.append(pa.field("extra", pa.string()))
    write_deltalake(
        path, _batch(540, 40, merged), mode="append", schema_mode="merge", partition_by=PARTS
    )  # v9
    table = DeltaTable(path)
    table.delete("id < 30 OR id % 17 = 0")  # v10
    table = DeltaTable(path)
    table.update(updates={"v": "v * 2", "s": "'updated'"}, predicate="p = 'b' AND id > 200")  # v11
    table = DeltaTable(path)
    table.create_checkpoint()
    src = _batch(570, 20, merged)  # ids 570..579 exist, 580..589 are new
    (
        table.merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(updates={"s": "'merged'"})
        .when_not_matched_insert_all()
        .execute()
    )  # v12
    write_deltalake(
        path,
        _batch(1000, 30, merged, p_override="c"),
        mode="overwrite",
        predicate="p = 'c'",
        partition_by=PARTS,
    )  # v13: replaceWhere on one partition
    DeltaTable(path).optimize.compact()  # v14: dataChange=false rewrite
    write_deltalake(path, _batch(2000, 45, merged), mode="append", partition_by=PARTS)  # v15
    DeltaTable(path).delete("p IS NULL")  # v16: partition-only delete
    latest = DeltaTable(path).version()
    assert latest == 16, DeltaTable(path).history()
    return Path(path), latest


@pytest.mark.parametrize("version", list(range(17)))
def test_evolving_table_every_version(duck, evolving_table, version: int) -> None:
    path, _latest = evolving_table
    ours = ours_read(path, version)
    theirs = duck_read(duck, path, version)
    assert ours.num_rows > 0
    assert_same_as_duckdb(ours, theirs, f"evolving v{version}")


def test_evolving_table_latest_and_schema(duck, evolving_table) -> None:
    path, latest = evolving_table
    ours = ours_read(path)
    # the columns in the order of the latest schema string (deltalake's merge moved the partitions last)
    assert ours.column_names == [f.name for f in DeltaTable(str(path)).schema().fields]
    assert sorted(ours.column_names) == sorted(SCHEMA.names + ["extra"])
    assert ours.schema.field("extra").type == pa.string()
    assert_same_as_duckdb(ours, duck_read(duck, path), "evolving latest")
    # the partition-only delete removed every NULL-partition row; the update and merge are visible
    assert ours.filter(pc.is_null(ours.column("p"))).num_rows == 0
    assert "updated" in ours.column("s").to_pylist() and "merged" in ours.column("s").to_pylist()
    assert ours.num_rows == ours_read(path, latest).num_rows


@pytest.mark.parametrize(
    "where",
    [
        "p = 'b'",
        "k IS NULL",
        "p IS NULL OR k = 2",
        "id BETWEEN 100 AND 400 AND p <> 'a'",
        "extra IS NOT NULL",
        "d >= DATE '2024-01-20' AND v > 50",
        "ts < TIMESTAMP '2024-01-02 00:00:00+00:00'",
        "dec < 0",
        "s IN ('s101', 's202', 'updated', 'merged')",
    ],
)
def test_evolving_table_filtered(duck, evolving_table, where: str) -> None:
    path, _ = evolving_table
    for version in (8, 12, 16):
        ours = ours_read(path, version, where) if "extra" not in where or version >= 9 else None
        if ours is None:
            continue
        theirs = duck_read(duck, path, version, where)
        assert_same_as_duckdb(ours, theirs, f"evolving v{version} WHERE {where}")


@pytest.fixture(scope="module")
def restored_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = str(tmp_path_factory.mktemp("oracle") / "restored")
    write_deltalake(path, _batch(0, 50), partition_by=["p"])  # v0
    write_deltalake(path, _batch(50, 50), mode="append", partition_by=["p"])  # v1
    write_deltalake(path, _batch(500, 10), mode="overwrite", partition_by=["p"])  # v2
    DeltaTable(path).restore(1)  # v3: back to v1's files
    write_deltalake(path, _batch(900, 5), mode="append", partition_by=["p"])  # v4
    return Path(path)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_overwrite_and_restore(duck, restored_table, version: int) -> None:
    ours = ours_read(restored_table, version)
    assert_same_as_duckdb(ours, duck_read(duck, restored_table, version), f"restored v{version}")
    if version == 3:
        assert sorted(ours.column("id").to_pylist()) == list(range(100))


@pytest.fixture(scope="module")
def types_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = str(tmp_path_factory.mktemp("oracle") / "types")
    st = pa.struct([("x", pa.int32()), ("y", pa.string()), ("z", pa.struct([("w", pa.float64())]))])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("i8", pa.int8()),
            ("i16", pa.int16()),
            ("f32", pa.float32()),
            ("f64", pa.float64()),
            ("b", pa.bool_()),
            ("bin", pa.binary()),
            ("ntz", pa.timestamp("us")),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("dec", pa.decimal128(38, 10)),
            ("st", st),
            ("li", pa.list_(pa.int64())),
            ("lst", pa.list_(st)),
            ("mp", pa.map_(pa.string(), pa.int64())),
        ]
    )

    def rows(start: int) -> pa.Table:
        out = []
        for i in range(start, start + 25):
            out.append(
                {
                    "id": i,
                    "i8": None if i % 7 == 0 else (i % 250) - 125,
                    "i16": None if i % 6 == 0 else -i * 100,
                    "f32": [1.5, None, float("nan"), -0.0, float("inf")][i % 5],
                    "f64": [2.5, float("-inf"), None, float("nan"), 1e-300][i % 5],
                    "b": [True, False, None][i % 3],
                    "bin": None if i % 4 == 0 else bytes([i % 256, 0, 255]),
                    "ntz": dt.datetime(1900 + i, 2, 28, 23, 59, 59, 999999) if i % 3 else None,
                    "ts": dt.datetime(1969, 12, 31, 23, 59, tzinfo=dt.timezone.utc)
                    + dt.timedelta(seconds=i * 3601),
                    "dec": None if i % 9 == 0 else Decimal(f"-{i}.0123456789" if i % 2 else f"{i}.5"),
                    "st": None
                    if i % 5 == 0
                    else {"x": i, "y": None if i % 2 else f"y{i}", "z": {"w": i / 4}},
                    "li": None if i % 6 == 0 else list(range(i % 4)),
                    "lst": [] if i % 3 == 0 else [{"x": i, "y": "a", "z": None}],
                    "mp": None if i % 8 == 0 else [("a", i), ("b", None)][: i % 3],
                }
            )
        return pa.Table.from_pylist(out, schema=schema)

    write_deltalake(path, rows(0))
    write_deltalake(path, rows(25), mode="append")
    DeltaTable(path).delete("id % 4 = 1")
    return Path(path)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_types_table(duck, types_table, version: int) -> None:
    ours = ours_read(types_table, version)
    assert ours.num_rows > 0
    assert_same_as_duckdb(ours, duck_read(duck, types_table, version), f"types v{version}")


# -- the conformance corpus -------------------------------------------------------------------


def _corpus_cases() -> list:
    manifest = load_manifest()
    if manifest is None:
        return [
            pytest.param(
                None, None, marks=pytest.mark.skip(reason=f"corpus not found at {CORPUS}"), id="no-corpus"
            )
        ]
    cases = []
    for entry in manifest["tables"]:
        if entry.get("category") != "data":
            continue
        for exp in entry.get("expected", []):
            if exp.get("kind") != "snapshot":
                continue
            name, version = entry["name"], exp.get("version")
            marks = []
            if name in DUCKDB_DISAGREES:
                marks.append(pytest.mark.skip(reason=f"known oracle disagreement: {DUCKDB_DISAGREES[name]}"))
            else:
                check = (exp.get("checks") or {}).get(
                    "duckdb", "match" if exp.get("source") == "duckdb" else ""
                )
                if check and check != "match":
                    marks.append(pytest.mark.skip(reason=f"corpus records duckdb {check[:120]}"))
            cases.append(
                pytest.param(
                    name, version, marks=marks, id=f"{name}@{'latest' if version is None else version}"
                )
            )
    return cases


def test_focus_tables_are_in_the_corpus() -> None:
    manifest = load_manifest()
    if manifest is None:
        pytest.skip(f"corpus not found at {CORPUS}")
    names = {t["name"] for t in manifest["tables"]}
    assert set(FOCUS_TABLES) <= names, set(FOCUS_TABLES) - names
    covered = {c.values[0] for c in _corpus_cases() if not c.marks}
    assert set(FOCUS_TABLES) <= covered, set(FOCUS_TABLES) - covered


@pytest.mark.parametrize(("name", "version"), _corpus_cases())
def test_corpus_snapshot_matches_duckdb(duck, name: str, version: int | None) -> None:
    path = CORPUS / "tables" / name
    theirs = duck_read(duck, path, version)
    ours = ours_read(path, version)
    assert_same_as_duckdb(ours, theirs, f"{name} version {version}")


@pytest.mark.parametrize(
    ("name", "where"),
    [
        ("table-with-dv-small", "value > 3"),
        ("table-with-dv-small", "value IN (0, 9, 5)"),
        ("dv-with-columnmapping", "part = 1 OR col1 IS NULL"),
        ("table_with_deletion_logs", "age > 30 AND name IS NOT NULL"),
        ("table-with-columnmapping-mode-name", '"IntegerType" > 2 OR "StringType" = \'1\''),
        ("data-skipping-basic-stats-all-types-columnmapping-name", "as_int = 0 AND as_string = '0'"),
        ("data-skipping-basic-stats-all-types-columnmapping-name", "as_int > 0"),
        (
            "data-skipping-basic-stats-all-types-columnmapping-id",
            "as_timestamp >= TIMESTAMP '2000-01-01 08:00:00'",
        ),
        ("data-skipping-basic-stats-all-types-columnmapping-id", "as_date < DATE '2000-01-01'"),
    ],
)
def test_corpus_filtered_matches_duckdb(duck, name: str, where: str) -> None:
    manifest = load_manifest()
    if manifest is None:
        pytest.skip(f"corpus not found at {CORPUS}")
    path = CORPUS / "tables" / name
    ours = ours_read(path, None, where)
    assert_same_as_duckdb(ours, duck_read(duck, path, None, where), f"{name} WHERE {where}")
