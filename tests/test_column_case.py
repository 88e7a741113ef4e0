"""Data files naming a column in another case than the table schema.

Delta column names are case-insensitive, and Spark resolves a table's columns in its parquet files
so (``spark.sql.caseSensitive`` is false by default): a file that stores ``ID`` holds the values of
the table's ``id``. Such files come from writers outside Delta (CONVERT TO DELTA of parquet files
written with other names) and from a case-only rename by an overwrite. Read by exact name, every
such column was NULL, through every read path, without an error. deltalake and Polars return NULL
here too; Spark and the Delta Java kernel read the values.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import add_action
from datafusion import SessionContext
from test_dv import _inline_dv

import delta_datafusion as dd

ST = pa.struct([("Inner", pa.int32()), ("b", pa.string())])


def _schema_json() -> dict[str, Any]:
    def field(name: str, typ: Any) -> dict[str, Any]:
        return {"name": name, "type": typ, "nullable": True, "metadata": {}}

    st = {"type": "struct", "fields": [field("Inner", "integer"), field("b", "string")]}
    return {"type": "struct", "fields": [field("id", "long"), field("Name", "string"), field("st", st)]}


def _write(
    table: Path, name: str, names: tuple[str, str, str, str, str], rows: list[tuple]
) -> dict[str, Any]:
    """A data file storing (id, Name, st.Inner, st.b) under ``names``."""
    id_, nm, st, inner, b = names
    struct = pa.struct([(inner, pa.int32()), (b, pa.string())])
    data = pa.table(
        {
            id_: pa.array([r[0] for r in rows], pa.int64()),
            nm: pa.array([r[1] for r in rows], pa.string()),
            st: pa.array([{inner: r[2], b: r[3]} for r in rows], struct),
        }
    )
    pq.write_table(data, table / name)
    return add_action(table, name)


def _write_log(table: Path, commits: list[list[dict[str, Any]]]) -> None:
    for version, actions in enumerate(commits):
        (table / "_delta_log" / f"{version:020d}.json").write_text(
            "".join(json.dumps(a) + "\n" for a in actions)
        )


def _metadata(configuration: dict[str, str]) -> dict[str, Any]:
    md = {"id": "t", "format": {"provider": "parquet", "options": {}}, "partitionColumns": []}
    return {"metaData": md | {"schemaString": json.dumps(_schema_json()), "configuration": configuration}}


def _one_file_table(tmp_path: Path, data: pa.Table) -> Path:
    """A table of the schema above whose one data file stores ``data`` as it is."""
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(data, table / "f.parquet")
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    _write_log(table, [[protocol, _metadata({}), {"add": add_action(table, "f.parquet")}]])
    return table


def _rows(i: int) -> tuple:
    return (i, f"n{i}", i * 10, f"b{i}")


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """v0: a file with the table's names, one with every name in another case, one whose struct
    fields alone differ in case; v1: a deletion vector on the second file (row-selection path)."""
    table = tmp_path_factory.mktemp("case") / "t"
    (table / "_delta_log").mkdir(parents=True)
    exact = _write(table, "exact.parquet", ("id", "Name", "st", "Inner", "b"), [_rows(1), _rows(2)])
    other = _write(table, "other.parquet", ("ID", "name", "ST", "inner", "B"), [_rows(3), _rows(4), _rows(5)])
    nested = _write(table, "nested.parquet", ("id", "Name", "st", "INNER", "B"), [_rows(6)])
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
    protocol |= {
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "changeDataFeed"],
    }
    metadata = _metadata({"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"})
    commits = [
        [{"protocol": protocol}, metadata, {"add": exact}, {"add": other}, {"add": nested}],
        [
            {"remove": {**other, "deletionTimestamp": 1, "extendedFileMetadata": True}},
            {"add": {**other, "deletionVector": _inline_dv([1])}},  # deletes id 4
        ],
    ]
    _write_log(table, commits)
    return table


def _session(table: Path) -> SessionContext:
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(table))
    dd.register_table(ctx, "t0", str(table), version=0)
    return ctx


def _tuples(rows: list[dict[str, Any]]) -> list[tuple]:
    return sorted((r["id"], r["Name"], r["st"]["Inner"], r["st"]["b"]) for r in rows)


def test_every_read_path_finds_columns_named_in_another_case(table: Path) -> None:
    live = [_rows(i) for i in (1, 2, 3, 5, 6)]
    got = dd.DeltaTable(str(table)).snapshot().scan().to_table()
    assert _tuples(got.to_pylist()) == live
    ctx = _session(table)
    # no deletion vector at v0: the dataset scanner's path, unfiltered (first rows streamed) ...
    assert _tuples(ctx.sql("SELECT * FROM t0 LIMIT 100").to_pylist()) == [_rows(i) for i in range(1, 7)]
    # ... and with a filter pyarrow evaluates on the stored column (NULL would match no row)
    rows = ctx.sql("SELECT * FROM t0 WHERE id >= 2 AND \"Name\" <> 'x' AND st['Inner'] > 0").to_pylist()
    assert _tuples(rows) == [_rows(i) for i in range(2, 7)]
    assert ctx.sql("SELECT count(id) AS n, sum(st['Inner']) AS s FROM t0").to_pylist() == [{"n": 6, "s": 210}]
    # a column the filter reads and the query does not return (it read NULL in such files)
    rows = ctx.sql('SELECT "Name" FROM t0 WHERE id >= 3').to_pylist()
    assert sorted(r["Name"] for r in rows) == ["n3", "n4", "n5", "n6"]
    assert ctx.sql("SELECT count(*) AS n FROM t0 WHERE id IS NULL").to_pylist() == [{"n": 0}]
    got = dd.DeltaTable(str(table)).snapshot(version=0).scan(columns=["Name"], predicate="id >= 3").to_table()
    assert sorted(got.column("Name").to_pylist()) == ["n3", "n4", "n5", "n6"]
    # the deletion vector: the row-selection path
    assert _tuples(ctx.sql("SELECT * FROM t WHERE id > 2").to_pylist()) == [_rows(i) for i in (3, 5, 6)]
    feed = ctx.sql("SELECT id, \"Name\", _change_type FROM table_changes('t', 1, 1)").to_pylist()
    assert feed == [{"id": 4, "Name": "n4", "_change_type": "delete"}]
    inserts = ctx.sql("SELECT * FROM table_changes('t', 0, 0)").to_pylist()
    assert _tuples(inserts) == [_rows(i) for i in range(1, 7)]


def test_change_feed_python_api_keeps_commit_order_around_a_file_in_another_case(tmp_path: Path) -> None:
    """The commits are read by one ordered scan; the file naming its columns in another case is
    read by the row-selection path where its commit comes, not after the others."""
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    exact = _write(table, "a.parquet", ("id", "Name", "st", "Inner", "b"), [_rows(1), _rows(2)])
    other = _write(table, "b.parquet", ("ID", "name", "ST", "inner", "B"), [_rows(3), _rows(4)])
    last = _write(table, "c.parquet", ("id", "Name", "st", "Inner", "b"), [_rows(5)])
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}
    metadata = _metadata({"delta.enableChangeDataFeed": "true"})
    _write_log(table, [[protocol, metadata, {"add": exact}], [{"add": other}], [{"add": last}]])
    for first_rows_early in (True, False):  # the first file streamed or not: read(first_rows_early)
        scan = dd.DeltaTable(str(table)).changes(0 if first_rows_early else 1)
        got = scan.to_table().select(["id", "Name", "_commit_version"]).to_pylist()
        want = [(i, f"n{i}", v) for i, v in [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2)]]
        assert [tuple(r.values()) for r in got] == want[0 if first_rows_early else 2 :]


def test_a_name_given_exactly_wins_over_one_in_another_case(tmp_path: Path) -> None:
    data = pa.table({"ID": [100, 200], "id": [1, 2], "Name": ["a", "b"], "st": pa.array([None, None], ST)})
    table = _one_file_table(tmp_path, data)
    got = dd.DeltaTable(str(table)).snapshot().scan(columns=["id"]).to_table()
    assert sorted(got.column("id").to_pylist()) == [1, 2]


def test_two_columns_matching_one_table_column_ignoring_case_are_refused(tmp_path: Path) -> None:
    table = _one_file_table(tmp_path, pa.table({"ID": [1], "Id": [2], "Name": ["a"]}))
    why = r"f\.parquet: the file's 'ID', 'Id' and the table's 'id' differ only in case"
    with pytest.raises(dd.DeltaError, match=why):
        dd.DeltaTable(str(table)).snapshot().scan(columns=["id"]).to_table()
    ctx = _session(table)
    with pytest.raises(Exception, match="DeltaError: .*" + why):  # DataFusion wraps it
        ctx.sql("SELECT id FROM t").to_pylist()
    # columns the file names once are read, also beside one it does not have (st)
    assert ctx.sql('SELECT "Name", st FROM t').to_pylist() == [{"Name": "a", "st": None}]


def test_matching_ignoring_case_keeps_exact_names_for_their_own_columns() -> None:
    from delta_datafusion.read_schema import ConversionError, match_ignoring_case

    assert match_ignoring_case(["ID", "nAme"], ["id", "Name"]) == {"ID": "id", "nAme": "Name"}
    # a table with both a and A (writers other than Spark allow it): the file's a is a, never A
    assert match_ignoring_case(["a"], ["a", "A"]) == {"a": "a"}
    assert match_ignoring_case(["x", "X"], ["x"]) == {"x": "x"}
    assert match_ignoring_case(["other"], ["x"]) == {}
    with pytest.raises(ConversionError, match="ambiguous"):
        match_ignoring_case(["ab"], ["AB", "Ab"])


def test_change_feed_across_a_case_only_rename(tmp_path: Path) -> None:
    """An overwrite renaming K to k (no column mapping): the older changes' files store K, which
    is the same column; they read NULL before."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(path, pa.table({"K": [1, 2], "v": ["a", "b"]}), configuration=conf)
    write_deltalake(path, pa.table({"k": [3], "v": ["c"]}), mode="overwrite", schema_mode="overwrite")
    ctx = _session(Path(path))
    rows = ctx.sql("SELECT k, v, _change_type, _commit_version FROM table_changes('t', 0)").to_pylist()
    got = sorted((r["_commit_version"], r["_change_type"], r["k"], r["v"]) for r in rows)
    old = [(0, "insert", 1, "a"), (0, "insert", 2, "b"), (1, "delete", 1, "a"), (1, "delete", 2, "b")]
    assert got == [*old, (1, "insert", 3, "c")]


def test_change_feed_across_a_case_only_rename_of_a_partition_column(tmp_path: Path) -> None:
    """An overwrite repartitioning by k instead of K: the older changes' partitionValues say K,
    which is the same column; they read NULL before (deltalake fails on this range)."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(path, pa.table({"K": [1, 2], "v": ["a", "b"]}), partition_by=["K"], configuration=conf)
    write_deltalake(
        path, pa.table({"k": [3], "v": ["c"]}), partition_by=["k"], mode="overwrite", schema_mode="overwrite"
    )
    ctx = _session(Path(path))
    query = "SELECT k, v, _change_type, _commit_version FROM table_changes('t', 0)"
    got = sorted(
        (r["_commit_version"], r["_change_type"], r["k"], r["v"]) for r in ctx.sql(query).to_pylist()
    )
    old = [(0, "insert", 1, "a"), (0, "insert", 2, "b"), (1, "delete", 1, "a"), (1, "delete", 2, "b")]
    assert got == [*old, (1, "insert", 3, "c")]
    # the partition values decide pruning too: the older changes of k = 1 are kept
    rows = ctx.sql(query + " WHERE k = 1").to_pylist()
    assert sorted((r["_commit_version"], r["_change_type"]) for r in rows) == [(0, "insert"), (1, "delete")]
    assert sorted(dd.DeltaTable(path).changes(1, 1, columns=["k"]).to_table().column("k").to_pylist()) == [
        1,
        2,
        3,
    ]


def test_change_feed_refuses_a_partition_column_that_became_a_data_column_in_another_case(
    tmp_path: Path,
) -> None:
    """K partitioned, then k a data column: the older files hold no k (their value was in the
    log), so the range is refused as for the same name; it read NULL."""
    from deltalake import write_deltalake

    from delta_datafusion.errors import ChangeDataFeedError

    path = str(tmp_path / "t")
    conf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(path, pa.table({"K": [1, 2], "v": ["a", "b"]}), partition_by=["K"], configuration=conf)
    write_deltalake(
        path, pa.table({"k": [3], "v": ["c"]}), partition_by=[], mode="overwrite", schema_mode="overwrite"
    )
    write_deltalake(path, pa.table({"k": [4], "v": ["d"]}), mode="append")
    for start in (0, 1):
        with pytest.raises(ChangeDataFeedError, match="column 'k' cannot be read.*partitioning changed"):
            dd.DeltaTable(path).changes(start, 2, columns=["k", "v"]).to_table()
    assert dd.DeltaTable(path).changes(2, 2, columns=["k"]).to_table().column("k").to_pylist() == [4]
