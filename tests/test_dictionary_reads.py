"""Low-cardinality string columns read as dictionaries (read/reader.py, ``UnitReader._format``):
the scan's dataset declares them as dictionaries, so its filter copies their indices, and the rows
it keeps are turned into strings after (``UnitReader._dataset_schema``, read/dictionaries.py).
The results must be those of the same rows in memory, for every filter shape: on other columns,
on the dictionary column itself (read as strings), a NaN-sensitive filter applied after the scan,
partition columns, column mapping, NULLs; and the turned strings those of pyarrow's cast."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext
from deltalake import write_deltalake

import delta_datafusion as dd
from delta_datafusion.read import reader as reader_module
from delta_datafusion.read.dictionaries import decoded

FILES = 3
ROWS = 20_000  # per file: the flag's data pages dwarf its dictionary page (the format's choice)
FLAGS = ["A", "N", "R", None]


def _rows(part: int) -> pa.Table:
    """File ``part``'s rows: ids part * ROWS + 0..ROWS-1, a flag of four values (one NULL), a
    float with NaNs and NULLs, a high-cardinality name and a partition value."""
    ids = list(range(part * ROWS, (part + 1) * ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "flag": pa.array([FLAGS[i * 2654435761 % 1000003 % 4] for i in ids], pa.string()),
            "x": pa.array(
                [math.nan if i % 13 == 0 else None if i % 17 == 0 else (i % 100) / 10 for i in ids]
            ),
            "name": pa.array([f"n{i * 7919 % 100_003}" for i in ids], pa.string()),
            "g": pa.array([f"g{i % 2}" for i in ids], pa.string()),
        }
    )


@pytest.fixture(scope="module")
def data() -> pa.Table:
    return pa.concat_tables([_rows(p) for p in range(FILES)])


@pytest.fixture(scope="module", params=["flat", "partitioned"])
def table(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dict") / request.param
    for p in range(FILES):
        write_deltalake(
            str(path), _rows(p), mode="append", partition_by=["g"] if request.param == "partitioned" else None
        )
    return path


@pytest.fixture
def sessions(table: Path, data: pa.Table) -> tuple[SessionContext, SessionContext]:
    """Our provider's session, and DataFusion's over the same rows in memory."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    ref = SessionContext()
    ref.register_record_batches("t", [data.to_batches()])
    return ctx, ref


@pytest.fixture
def dataset_schemas(monkeypatch: pytest.MonkeyPatch) -> list[pa.Schema]:
    """The schemas of the datasets the reader scans while the test runs."""
    seen: list[pa.Schema] = []
    real = ds.FileSystemDataset

    def recording(fragments, schema, *args, **kwargs):
        seen.append(schema)
        return real(fragments, schema, *args, **kwargs)

    monkeypatch.setattr(reader_module.ds, "FileSystemDataset", recording)
    return seen


QUERIES = [
    # filters on other columns: the flag's indices are filtered, then cast
    "SELECT flag, count(*) AS n, sum(id) AS s FROM t WHERE id <> 1234 AND id > 500 GROUP BY flag",
    "SELECT id, flag, name FROM t WHERE id BETWEEN 19990 AND 20010",
    "SELECT flag, name FROM t WHERE name LIKE 'n1%' AND id < 30000",
    # the flag filtered: read as strings
    "SELECT flag, count(*) AS n FROM t WHERE flag = 'R' OR flag IS NULL GROUP BY flag",
    "SELECT id, flag FROM t WHERE flag LIKE 'N%' AND id < 100",
    "SELECT count(*) AS n FROM t WHERE flag IN ('A', 'N') AND x > 5",
    # NaN-sensitive comparisons (filtered after the scan) with the flag read beside them
    "SELECT flag, count(*) AS n FROM t WHERE x > 3.5 GROUP BY flag",
    "SELECT id, flag, x FROM t WHERE NOT (x < 9.0) AND id < 45000",
    # partition column filtered, the flag output
    "SELECT g, flag, count(*) AS n FROM t WHERE g = 'g1' AND id > 1000 GROUP BY g, flag",
    "SELECT g, flag, count(*) AS n FROM t WHERE g = 'g0' GROUP BY g, flag",
    # unfiltered
    "SELECT flag, count(*) AS n FROM t GROUP BY flag",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_filtered_dictionary_reads_match_memory(sessions, sql: str) -> None:
    ctx, ref = sessions
    got = ctx.sql(sql).to_arrow_table()
    want = ref.sql(sql).to_arrow_table()
    assert got.schema == want.schema
    keys = [(c, "ascending") for c in got.column_names]
    assert _rows_of(got.sort_by(keys)) == _rows_of(want.sort_by(keys))
    assert got.num_rows > 0


def _rows_of(table: pa.Table) -> list[tuple]:
    """Rows with NaN as a string (NaN != NaN in Python)."""
    return [
        tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r.values())
        for r in table.to_pylist()
    ]


def test_filtered_scan_filters_the_dictionary_indices(sessions, dataset_schemas: list[pa.Schema]) -> None:
    """A filter on another column runs on the flag's dictionary indices (the scanner used to cast
    every row to strings before filtering them); a filter on the flag itself reads strings."""
    ctx, ref = sessions
    sql = "SELECT flag, count(*) AS n FROM t WHERE id <> 1234 GROUP BY flag ORDER BY flag"
    assert ctx.sql(sql).to_pylist() == ref.sql(sql).to_pylist()
    assert dataset_schemas
    for schema in dataset_schemas:
        assert schema.field("flag").type == pa.dictionary(pa.int32(), pa.string()), schema
        assert schema.field("name").type == pa.string()  # high cardinality: decoded plain
    dataset_schemas.clear()
    sql = "SELECT id, flag FROM t WHERE flag = 'A' AND id < 50 ORDER BY id"
    assert ctx.sql(sql).to_pylist() == ref.sql(sql).to_pylist()
    assert dataset_schemas and all(s.field("flag").type == pa.string() for s in dataset_schemas)


def test_python_api_filtered_scan(table: Path, sessions) -> None:
    """The Python API's scan (no DataFusion): NaN is above every number, as in SQL."""
    _, ref = sessions
    got = dd.DeltaTable(str(table)).snapshot().scan(columns=["id", "flag"], predicate="x >= 9.5").to_table()
    assert got.schema.field("flag").type == pa.string()
    want = ref.sql("SELECT id, flag FROM t WHERE x >= 9.5").to_arrow_table()
    assert want.num_rows and got.sort_by("id").to_pylist() == want.sort_by("id").to_pylist()


def test_column_mapping_names_the_dictionary_column_physically(tmp_path: Path, dataset_schemas) -> None:
    """Name-mode column mapping: the flag is stored as ``col-f``; the dataset declares the
    physical name as a dictionary and the output has the logical name and type."""
    root = tmp_path / "cm"
    (root / "_delta_log").mkdir(parents=True)
    rows = _rows(0).select(["id", "flag"]).rename_columns(["col-i", "col-f"])
    pq.write_table(rows, root / "f.parquet")

    def field(name: str, typ: str, fid: int, phys: str) -> dict:
        meta = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": phys}
        return {"name": name, "type": typ, "nullable": True, "metadata": meta}

    schema = json.dumps(
        {"type": "struct", "fields": [field("id", "long", 1, "col-i"), field("flag", "string", 2, "col-f")]}
    )
    conf = {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "2"}
    md = {"id": "x", "format": {"provider": "parquet", "options": {}}, "schemaString": schema}
    add = {"path": "f.parquet", "partitionValues": {}, "size": (root / "f.parquet").stat().st_size}
    actions = [
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {"metaData": md | {"partitionColumns": [], "configuration": conf, "createdTime": 0}},
        {"add": add | {"modificationTime": 0, "dataChange": True}},
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    got = ctx.sql(
        "SELECT flag, count(*) AS n FROM t WHERE id >= 100 GROUP BY flag ORDER BY flag"
    ).to_arrow_table()
    want: dict = {}
    for r in _rows(0).to_pylist():
        if r["id"] >= 100:
            want[r["flag"]] = want.get(r["flag"], 0) + 1
    order = sorted(want, key=lambda f: (f is None, f))
    assert got.to_pydict() == {"flag": order, "n": [want[f] for f in order]}
    assert got.schema.field("flag").type == pa.string()
    assert any(s.field("col-f").type == pa.dictionary(pa.int32(), pa.string()) for s in dataset_schemas)


def _dictionary(values: pa.Array, indices: list[int], nulls: list[bool]) -> pa.DictionaryArray:
    """A dictionary array whose NULL rows hold the given (possibly out of range) indices, as a
    reader may leave them."""
    raw = pa.array(indices, pa.int32())
    validity = pa.array([not x for x in nulls], pa.bool_()).buffers()[1]
    held = pa.Array.from_buffers(pa.int32(), len(indices), [validity, raw.buffers()[1]], sum(nulls))
    return pa.DictionaryArray.from_arrays(held, values)


@pytest.mark.parametrize(
    "values",
    [
        pa.array(["A", "N", "R"]),
        pa.array(["AB", "CD", "EF"]),
        pa.array(["x", "yy"]),  # two widths: pyarrow's cast
        pa.array([""]),  # width 0: pyarrow's cast
        pa.array(["é", "ü"]),  # two bytes each
        pa.array(["zz", "AB", "CD", "qq"]).slice(1, 2),  # a slice of a dictionary
        pa.array(["A", "B"], pa.large_string()),  # large values: pyarrow's cast
    ],
)
def test_decoded_is_pyarrows_cast(values: pa.Array) -> None:
    rng = np.random.default_rng(5)
    n = 1000
    nulls = list(rng.random(n) < 0.2)
    indices = [
        int(i) if not null else int(j)
        for i, null, j in zip(rng.integers(0, len(values), n), nulls, rng.integers(-9, 99, n), strict=True)
    ]
    arr = _dictionary(values, indices, nulls)
    for piece in (arr, arr.slice(3, 500), arr.slice(0, 0)):
        got = decoded(piece, pa.string())
        got.validate(full=True)
        assert got.type == pa.string()
        want = piece.cast(pa.string())
        assert got.to_pylist() == want.to_pylist()


def test_decoded_without_nulls_and_in_large_batches() -> None:
    """Batches larger than the kept offsets (and than any before them) still get theirs."""
    for n in (5, 131072, 300_000, 7):
        arr = pa.DictionaryArray.from_arrays(
            pa.array(np.arange(n, dtype=np.int32) % 3), pa.array(["a", "b", "c"])
        )
        got = decoded(arr, pa.string())
        got.validate(full=True)
        assert got.null_count == 0 and got.equals(arr.cast(pa.string()))


def test_a_column_added_later_reads_null_from_older_files(tmp_path: Path, dataset_schemas) -> None:
    """Schema evolution: the flag is added by the second append. The older file lacks it (the
    scanner gives NULL dictionaries, turned into NULL strings); a filtered scan reads both."""
    path = tmp_path / "evolved"
    write_deltalake(str(path), _rows(0).select(["id", "x"]))
    write_deltalake(str(path), _rows(1).select(["id", "x", "flag"]), mode="append", schema_mode="merge")
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    got = ctx.sql("SELECT flag, count(*) AS n FROM t WHERE id >= 10 GROUP BY flag").to_arrow_table()
    assert got.schema.field("flag").type == pa.string()
    counts = dict(zip(got.column("flag").to_pylist(), got.column("n").to_pylist(), strict=True))
    newer = _rows(1).column("flag").to_pylist()
    want = {f: newer.count(f) for f in set(newer)}
    want[None] = want.get(None, 0) + ROWS - 10
    assert counts == want
    assert any(pa.types.is_dictionary(s.field("flag").type) for s in dataset_schemas), dataset_schemas


def _small_rows(k: int, n: int = 50) -> pa.Table:
    """``n`` rows of the table's columns with ids after the large files' (small append ``k``)."""
    return _rows(FILES + k).slice(0, n)


def test_unfiltered_scan_reads_small_files_without_dictionaries(tmp_path: Path, monkeypatch) -> None:
    """A large file (the flag's dictionary pays) among many small ones (appends, change-data
    files): an unfiltered scan reads the small files plain and declares the flag as strings (the
    scanner turns the large file's dictionary into strings); a filtered scan keeps dictionaries
    for every file. The rows are those in memory either way."""
    path = tmp_path / "mixed"
    write_deltalake(str(path), _rows(0))
    small = [_small_rows(k) for k in range(4)]
    for t in small:
        write_deltalake(str(path), t, mode="append")
    data = pa.concat_tables([_rows(0), *small])
    files = dd.DeltaTable(str(path)).snapshot().files().sort_by("size")
    sizes = files.column("size").to_pylist()
    # the large file is "large" at this test's scale: between the small files and it
    monkeypatch.setattr(reader_module, "SMALL_FILE_BYTES", (sizes[-2] + sizes[-1]) // 2, raising=False)
    scans: list[tuple[pa.Schema, list[tuple[str, frozenset]]]] = []
    real = ds.FileSystemDataset

    def recording(fragments, schema, *args, **kwargs):
        formats = [(f.path, frozenset(f.format.read_options.dictionary_columns)) for f in fragments]
        scans.append((schema, formats))
        return real(fragments, schema, *args, **kwargs)

    monkeypatch.setattr(reader_module.ds, "FileSystemDataset", recording)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    got = ctx.sql("SELECT id, flag, name FROM t").to_arrow_table().sort_by("id")
    assert got.to_pylist() == data.select(["id", "flag", "name"]).sort_by("id").to_pylist()
    read = [fmt for _, formats in scans for fmt in formats]
    small_read = [cols for p, cols in read if p.endswith(tuple(files.column("path").to_pylist()[:-1]))]
    assert len(small_read) == len(small), read
    assert all(cols == frozenset() for cols in small_read), read
    assert all(s.field("flag").type == pa.string() for s, _ in scans), scans
    # filtered: every file with the format's dictionaries, the flag declared as one
    scans.clear()
    sql = "SELECT id, flag FROM t WHERE id > 5"
    got = ctx.sql(sql).to_arrow_table().sort_by("id")
    assert (
        got.to_pylist()
        == data.filter(pc.greater(data.column("id"), 5)).select(["id", "flag"]).sort_by("id").to_pylist()
    )
    assert scans and all("flag" in cols for _, formats in scans for _, cols in formats), scans
    assert all(pa.types.is_dictionary(s.field("flag").type) for s, _ in scans), scans
