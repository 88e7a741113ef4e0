"""File pruning through SQL: partition values and per-file statistics, checked by construction.

A table of 40 single-file appends is written with deltalake. File ``i`` (written at version ``i``)
holds the 100 rows ``id = i*100 .. i*100+99`` and:

* partition ``region`` = ``["eu", "us", "ap", None][i % 4]`` (string, with NULL partition values);
* partition ``bucket`` = ``i // 10``, or NULL when ``i % 10 == 9`` (int32);
* ``d`` = 2024-01-01 + ``i`` days (date, constant per file);
* ``ts`` = 2024-01-01T00:00:00Z + ``id`` seconds (timestamp, per-file range);
* ``opt`` = ``id`` (int64): all NULL when ``i % 5 == 0``, never NULL when ``i % 5`` is 1 or 2,
  NULL on even ids otherwise;
* ``s`` = ``f"k{id:05d}"`` and ``x`` = ``id / 2``.

So for every predicate the set of files a correct reader must keep after partition pruning and
after statistics pruning is known exactly; each query checks ``last_plan`` against it, and the
rows against an unpruned read filtered by DataFusion over an in-memory copy.

Time travel (by version and by timestamp, through ``register_table`` and ``CREATE EXTERNAL TABLE``)
is checked on the same table and on one changed by DELETE, UPDATE and overwrite. Finally, on the
corpus tables whose statistics are interesting (every stats layout, truncated timestamps, column
mapping, type widening, typed and NULL partitions), generated filters on every column must return
what DataFusion returns over the unfiltered read held in memory: pruning may never drop a row.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from conftest import CORPUS, add_action, corpus_table, count_stats_parses, write_commit  # noqa: E402
from datafusion import SessionContext  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.errors import DeltaError  # noqa: E402

N_FILES = 40
ROWS_PER_FILE = 100
REGIONS = ["eu", "us", "ap", None]
BASE_DATE = dt.date(2024, 1, 1)
BASE_TS = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
#: Commit file modification times of the main table: version v at COMMIT_TIME0 + v hours.
COMMIT_TIME0 = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("region", pa.string()),
        ("bucket", pa.int32()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("opt", pa.int64()),
        ("s", pa.string()),
        ("x", pa.float64()),
    ]
)


def region(i: int) -> str | None:
    return REGIONS[i % 4]


def bucket(i: int) -> int | None:
    return None if i % 10 == 9 else i // 10


def file_rows(i: int) -> pa.Table:
    ids = list(range(i * ROWS_PER_FILE, (i + 1) * ROWS_PER_FILE))
    if i % 5 == 0:
        opt = [None] * len(ids)
    elif i % 5 in (1, 2):
        opt = list(ids)
    else:
        opt = [None if v % 2 == 0 else v for v in ids]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([region(i)] * len(ids), pa.string()),
            "bucket": pa.array([bucket(i)] * len(ids), pa.int32()),
            "d": pa.array([BASE_DATE + dt.timedelta(days=i)] * len(ids), pa.date32()),
            "ts": pa.array([BASE_TS + dt.timedelta(seconds=v) for v in ids], pa.timestamp("us", tz="UTC")),
            "opt": pa.array(opt, pa.int64()),
            "s": pa.array([f"k{v:05d}" for v in ids], pa.string()),
            "x": pa.array([v / 2 for v in ids], pa.float64()),
        },
        schema=SCHEMA,
    )


def _set_commit_mtimes(table: Path, first: dt.datetime, step: dt.timedelta) -> None:
    log = table / "_delta_log"
    for name in os.listdir(log):
        if re.fullmatch(r"\d{20}\.json", name):
            t = (first + step * int(name[:20])).timestamp()
            os.utime(log / name, (t, t))


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pruning") / "events"
    for i in range(N_FILES):
        write_deltalake(str(path), file_rows(i), mode="append", partition_by=["region", "bucket"])
    dt_ = DeltaTable(str(path))
    assert dt_.version() == N_FILES - 1
    assert len(dt_.file_uris()) == N_FILES, "each append must write exactly one file"
    _set_commit_mtimes(path, COMMIT_TIME0, dt.timedelta(hours=1))
    return path


@pytest.fixture(scope="module")
def session(table_path: Path):
    """(ctx, dataset); the unpruned read is registered as the in-memory table ``ref``."""
    ctx = SessionContext()
    dd.register(ctx)
    ds = dd.register_table(ctx, "t", str(table_path))
    full = ctx.sql("SELECT * FROM t").to_arrow_table()
    assert ds.last_plan is not None and ds.last_plan.files_after_stats_pruning == N_FILES
    ctx.register_record_batches("ref", [full.to_batches()])
    return ctx, ds


def _sorted_rows(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["id"])


def test_full_read_matches_deltalake(session, table_path: Path) -> None:
    ctx, ds = session
    ours = ctx.sql("SELECT * FROM t").to_arrow_table()
    assert ours.schema.remove_metadata() == SCHEMA
    theirs = DeltaTable(str(table_path)).to_pyarrow_table().select(SCHEMA.names).cast(SCHEMA)
    assert ours.num_rows == N_FILES * ROWS_PER_FILE
    assert _sorted_rows(ours) == _sorted_rows(theirs)
    expected = pa.concat_tables([file_rows(i) for i in range(N_FILES)])
    assert _sorted_rows(ours) == _sorted_rows(expected)


ALL = set(range(N_FILES))


def _files(cond: Callable[[int], bool]) -> set[int]:
    return {i for i in range(N_FILES) if cond(i)}


# (where clause, files kept by partition pruning, files kept after statistics pruning)
CASES: list[tuple[str, set[int], set[int]]] = [
    # partition predicates
    ("region = 'eu'", _files(lambda i: region(i) == "eu"), _files(lambda i: region(i) == "eu")),
    ("bucket = 2", _files(lambda i: bucket(i) == 2), _files(lambda i: bucket(i) == 2)),
    ("region IS NULL", _files(lambda i: region(i) is None), _files(lambda i: region(i) is None)),
    ("bucket IS NULL", {9, 19, 29, 39}, {9, 19, 29, 39}),
    ("region IS NOT NULL", _files(lambda i: region(i) is not None), _files(lambda i: region(i) is not None)),
    (
        "region <> 'us'",
        _files(lambda i: region(i) in ("eu", "ap")),
        _files(lambda i: region(i) in ("eu", "ap")),
    ),
    ("bucket < 1", _files(lambda i: bucket(i) == 0), _files(lambda i: bucket(i) == 0)),
    ("bucket BETWEEN 1 AND 2", _files(lambda i: bucket(i) in (1, 2)), _files(lambda i: bucket(i) in (1, 2))),
    (
        "region IN ('eu', 'ap')",
        _files(lambda i: region(i) in ("eu", "ap")),
        _files(lambda i: region(i) in ("eu", "ap")),
    ),
    (
        "region IN ('eu', 'ap', 'xx', 'yy', 'zz')",
        _files(lambda i: region(i) in ("eu", "ap")),
        _files(lambda i: region(i) in ("eu", "ap")),
    ),
    ("bucket NOT IN (0, 1)", _files(lambda i: bucket(i) in (2, 3)), _files(lambda i: bucket(i) in (2, 3))),
    (
        "region = 'eu' OR bucket = 3",
        _files(lambda i: region(i) == "eu" or bucket(i) == 3),
        _files(lambda i: region(i) == "eu" or bucket(i) == 3),
    ),
    (
        "region IS NULL OR bucket IS NULL",
        _files(lambda i: region(i) is None or bucket(i) is None),
        _files(lambda i: region(i) is None or bucket(i) is None),
    ),
    ("region = 'nope'", set(), set()),
    # statistics predicates
    ("id = 1234", ALL, {12}),
    ("id < 250", ALL, {0, 1, 2}),
    ("id <= 299", ALL, {0, 1, 2}),
    ("id > 3850", ALL, {38, 39}),
    ("id >= 3900", ALL, {39}),
    ("id BETWEEN 1050 AND 1420", ALL, set(range(10, 15))),
    ("id IN (5, 1999, 3905)", ALL, {0, 19, 39}),
    ("id IN (5, 1999, 3905, 2500, 77777)", ALL, {0, 19, 25, 39}),
    ("NOT (id >= 300)", ALL, {0, 1, 2}),
    ("id > 100000", ALL, set()),
    ("id < 150 OR id > 3850", ALL, {0, 1, 38, 39}),
    ("d = DATE '2024-01-10'", ALL, {9}),
    ("d >= DATE '2024-02-05'", ALL, set(range(35, 40))),
    ("d BETWEEN '2024-01-05' AND '2024-01-07'", ALL, {4, 5, 6}),
    ("ts < TIMESTAMP '2024-01-01 00:04:10'", ALL, {0, 1, 2}),
    (
        "ts BETWEEN TIMESTAMP '2024-01-01T00:20:50Z' AND TIMESTAMP '2024-01-01T00:40:50Z'",
        ALL,
        set(range(12, 25)),
    ),
    ("ts = TIMESTAMP '2024-01-01 01:00:00'", ALL, {36}),
    ("opt IS NULL", ALL, _files(lambda i: i % 5 in (0, 3, 4))),
    ("opt IS NOT NULL", ALL, _files(lambda i: i % 5 != 0)),
    ("opt > 2000", ALL, _files(lambda i: i >= 20 and i % 5 != 0)),
    ("s = 'k01234'", ALL, {12}),
    ("s < 'k00150'", ALL, {0, 1}),
    # combined partition and statistics predicates
    ("region = 'us' AND id < 2000", _files(lambda i: region(i) == "us"), {1, 5, 9, 13, 17}),
    ("bucket = 1 AND id >= 1500", _files(lambda i: bucket(i) == 1), {15, 16, 17, 18}),
    ("region = 'ap' AND d < DATE '2024-01-15'", _files(lambda i: region(i) == "ap"), {2, 6, 10}),
    (
        "(region = 'eu' OR region IS NULL) AND id BETWEEN 800 AND 2399",
        _files(lambda i: region(i) in ("eu", None)),
        {8, 11, 12, 15, 16, 19, 20, 23},
    ),
    ("region = 'eu' OR id < 150", ALL, _files(lambda i: region(i) == "eu" or i < 2)),
    ("bucket IS NULL AND opt IS NULL", {9, 19, 29, 39}, {9, 19, 29, 39}),
    ("bucket IS NULL AND opt IS NOT NULL AND id < 2500", {9, 19, 29, 39}, {9, 19}),
    (
        "region IN ('us', 'ap') AND ts >= TIMESTAMP '2024-01-01 00:58:00'",
        _files(lambda i: region(i) in ("us", "ap")),
        {34, 37, 38},
    ),
]


@pytest.mark.parametrize(("where", "after_partitions", "after_stats"), CASES, ids=[c[0] for c in CASES])
def test_pruning_counts_and_rows(
    session, where: str, after_partitions: set[int], after_stats: set[int]
) -> None:
    ctx, ds = session
    assert after_stats <= after_partitions
    got = ctx.sql(f"SELECT * FROM t WHERE {where}").to_arrow_table()
    plan = ds.last_plan
    assert plan is not None
    assert plan.filter, f"{where}: nothing was pushed to the provider"
    assert (plan.files_total, plan.files_after_partition_pruning, plan.files_after_stats_pruning) == (
        N_FILES,
        len(after_partitions),
        len(after_stats),
    ), f"{where}: {plan}"
    assert plan.fragments <= max(len(after_stats), 0) and (plan.fragments > 0) == bool(after_stats)
    expected = ctx.sql(f"SELECT * FROM ref WHERE {where}").to_arrow_table()
    assert _sorted_rows(got) == _sorted_rows(expected), where
    # Every remaining file must be one the predicate can match: the rows come from exactly them.
    files_with_rows = {r["id"] // ROWS_PER_FILE for r in got.to_pylist()}
    assert files_with_rows <= after_stats, f"{where}: rows from pruned files {files_with_rows - after_stats}"


@pytest.mark.parametrize("where", [c[0] for c in CASES])
def test_planning_selection_equals_scan_metadata(session, table_path: Path, where: str) -> None:
    """The provider's planning path (stats typed lazily, only for partition survivors and only the
    predicate's columns) keeps exactly the files scan_metadata() keeps, before and after the
    snapshot's full file table is built."""
    ctx, ds = session
    ctx.sql(f"SELECT id FROM t WHERE {where}").to_arrow_table()
    pred = ds.last_plan.predicate
    assert pred is not None, where
    snap = dd.DeltaTable(str(table_path)).snapshot()
    lazy, total, after_parts = snap.select_files(pred)
    expected = snap.scan(predicate=pred).files()  # builds the full file table
    built, total2, after_parts2 = snap.select_files(pred)
    want = sorted(expected.column("path").to_pylist())
    assert sorted(lazy.column("path").to_pylist()) == want, where
    assert sorted(built.column("path").to_pylist()) == want, where
    assert total == total2 == N_FILES and after_parts == after_parts2, where
    assert lazy.column("stats").type.get_field_index("numRecords") >= 0
    assert lazy.column("partition_values").to_pylist() == built.column("partition_values").to_pylist()


PARTITION_ONLY = {c[0] for c in CASES if c[1] == c[2] and "id" not in c[0] and "opt" not in c[0]}


@pytest.mark.parametrize("where", [c[0] for c in CASES])
def test_count_star_from_the_log(session, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """count(*) equals count(id) for every case. Under a partition-only filter (or none) it is
    answered from the log: no data file is opened."""
    ctx, _ = session
    want = ctx.sql(f"SELECT count(id) AS n FROM t WHERE {where}").to_pydict()["n"][0]
    if where in PARTITION_ONLY:
        from delta_datafusion.read import UnitReader

        def no_reads(*_a, **_k):
            raise AssertionError(f"{where}: a data file was opened for count(*)")

        monkeypatch.setattr(UnitReader, "_read_plain", no_reads)
        monkeypatch.setattr(UnitReader, "_read_selected", no_reads)
    got = ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pydict()["n"][0]
    assert got == want, where
    if where in PARTITION_ONLY:
        assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict()["n"][0] == N_FILES * ROWS_PER_FILE


@pytest.mark.parametrize("where", ["TRUE", *[c[0] for c in CASES]])
def test_partition_columns_from_the_log(session, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query reading only partition columns (GROUP BY region, bucket with count(*)) gives the
    same groups as the unpruned reference; under a partition-only filter (or none) no data file is
    opened: each file's rows are its numRecords copies of its partition values."""
    ctx, _ = session
    q = "SELECT region, bucket, count(*) AS n FROM {} WHERE {} GROUP BY region, bucket"
    want = sorted(ctx.sql(q.format("ref", where)).to_pylist(), key=str)
    if where == "TRUE" or where in PARTITION_ONLY:
        from delta_datafusion.read import UnitReader

        def no_reads(*_a, **_k):
            raise AssertionError(f"{where}: a data file was opened for partition columns only")

        monkeypatch.setattr(UnitReader, "_read_plain", no_reads)
        monkeypatch.setattr(UnitReader, "_read_selected", no_reads)
    got = sorted(ctx.sql(q.format("t", where)).to_pylist(), key=str)
    assert got == want, where
    assert ctx.sql(f"SELECT DISTINCT region FROM t WHERE {where}").to_arrow_table().num_rows == len(
        {r["region"] for r in want}
    ), where


STORED_COLUMN_SCANS = [
    "SELECT * FROM t LIMIT 5",
    "SELECT sum(x) AS s FROM t",
    "SELECT region, max(id) AS m FROM t GROUP BY region",
]


@pytest.mark.parametrize("query", STORED_COLUMN_SCANS)
def test_unfiltered_scan_of_stored_columns_parses_no_stats(
    session, table_path: Path, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan without a filter that reads a stored column opens every file, so no row count is
    taken from the log: the files' stats JSON is not parsed for it (every query parsed it for
    numRecords, ~0.8 ms over 100 files). count(*) still parses it and counts from the log."""

    ctx, _ = session
    parsed = count_stats_parses(monkeypatch)
    want = sorted(ctx.sql(query.replace("FROM t", "FROM ref")).to_pylist(), key=str)
    got = sorted(ctx.sql(query).to_pylist(), key=str)
    if "LIMIT" in query:
        assert len(got) == len(want) == 5
    else:
        assert got == want
    assert parsed == [], query
    # a snapshot of its own: the session's kept the typed counts of an earlier count(*)
    fresh = SessionContext()
    dd.register_table(fresh, "t", str(table_path))
    assert fresh.sql("SELECT count(*) AS n FROM t").to_pydict()["n"] == [N_FILES * ROWS_PER_FILE]
    assert parsed == [N_FILES]
    assert fresh.sql("SELECT count(*) AS n FROM t").to_pydict()["n"] == [N_FILES * ROWS_PER_FILE]
    assert parsed == [N_FILES]  # typed once per snapshot


PARTITION_FILTERED_SCANS = [
    ("SELECT sum(x) AS s FROM {} WHERE region = 'eu'", _files(lambda i: region(i) == "eu")),
    (
        "SELECT id FROM {} WHERE bucket IN (1, 2) OR region IS NULL",
        _files(lambda i: bucket(i) in (1, 2) or region(i) is None),
    ),
    (
        "SELECT max(id) AS m FROM {} WHERE region <> 'us' AND bucket IS NOT NULL",
        _files(lambda i: region(i) not in ("us", None) and bucket(i) is not None),
    ),
]


@pytest.mark.parametrize(("query", "kept"), PARTITION_FILTERED_SCANS)
def test_partition_filtered_scan_of_stored_columns_parses_no_stats(
    session, table_path: Path, query: str, kept: set[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan filtered on partition columns alone that reads a stored column: its files are kept,
    and wholly matched, by their partition values, and each is opened, so nothing reads their
    stats (the JSON was parsed for a numRecords nothing used: ~0.5-1 ms of a TPC-H query
    ``WHERE l_shipmode = 'AIR'`` over 16 files). A filter naming a data column, or a count taken
    from the log, still parses them."""

    ctx, _ = session
    parsed = count_stats_parses(monkeypatch)
    fresh = SessionContext()  # a snapshot of its own: no typed stats kept from earlier queries
    ds = dd.register_table(fresh, "t", str(table_path))
    want = sorted(ctx.sql(query.format("ref")).to_pylist(), key=str)
    assert sorted(fresh.sql(query.format("t")).to_pylist(), key=str) == want
    plan = ds.last_plan
    counts = (plan.files_total, plan.files_after_partition_pruning, plan.files_after_stats_pruning)
    assert counts == (N_FILES, len(kept), len(kept))
    assert parsed == [], query
    # a data column in the filter: its files' stats are typed for pruning
    assert fresh.sql("SELECT sum(x) AS s FROM t WHERE region = 'eu' AND id >= 0").to_pydict() == (
        ctx.sql("SELECT sum(x) AS s FROM ref WHERE region = 'eu' AND id >= 0").to_pydict()
    )
    assert parsed == [len(_files(lambda i: region(i) == "eu"))]
    # a count of a partition's rows is taken from the log: their numRecords are typed
    eu_rows = ROWS_PER_FILE * len(_files(lambda i: region(i) == "eu"))
    assert fresh.sql("SELECT count(*) AS n FROM t WHERE region = 'eu'").to_pydict()["n"] == [eu_rows]
    assert len(parsed) == 2


def test_count_and_stored_column_in_one_statement(session, monkeypatch: pytest.MonkeyPatch) -> None:
    """One statement scanning the table twice, for a count (from the log) and for a stored
    column: each scan plans with its own columns, and both results are exact."""
    from delta_datafusion.read import UnitReader

    ctx, _ = session
    q = (
        "SELECT (SELECT count(*) FROM {0}) AS n, (SELECT sum(id) FROM {0}) AS s, "
        "(SELECT count(*) FROM {0} a JOIN {0} b ON a.id = b.id) AS j"
    )
    want = ctx.sql(q.format("ref")).to_pydict()
    read = UnitReader._read_plain
    opened: list[int] = []

    def counting(self, units, *args, **kwargs):
        opened.append(len(units))
        return (yield from read(self, units, *args, **kwargs))

    monkeypatch.setattr(UnitReader, "_read_plain", counting)
    assert ctx.sql(q.format("t")).to_pydict() == want
    # the sum and the join's two sides read the files; the count alone does not
    assert sum(opened) == 3 * N_FILES


def test_planned_columns_are_this_threads_and_this_datasets(
    session, table_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DataFusion gives get_fragments no columns, so those of the scanner asked for just before
    are kept for it: only those of this thread and this dataset. A stored-column scanner made
    meanwhile on another thread (two queries on one table at once), or of another table on this
    thread, must not plan a count without its row counts (it would then read every file).
    (Statements run through DataFusion never showed either pairing: this pins the design.)"""
    import threading

    from delta_datafusion.datafusion.dataset import row_counts_wanted

    _, ds = session
    other = dd.register_table(SessionContext(), "u", str(table_path))
    wanted: list[bool] = []
    plan = ds.planner

    def recording(pred):
        wanted.append(row_counts_wanted())
        return plan(pred)

    monkeypatch.setattr(ds, "planner", recording)
    ds.scanner(columns=[])  # a count's scan on this thread ...
    meanwhile = threading.Thread(target=ds.scanner, kwargs={"columns": ["x"]})
    meanwhile.start()  # ... and a stored column's on another, before this one's fragments
    meanwhile.join()
    ds.get_fragments()
    ds.scanner(columns=["bucket"])  # partition column only: counted from the log ...
    other.scanner(columns=["x"])  # ... though another table's stored-column scan came between
    ds.get_fragments()
    ds.scanner(columns=["x"])  # a stored column of this table, on this thread: no row counts
    ds.get_fragments()
    assert wanted == [True, True, False]


def _check_plan_and_rows(session, where: str, after_partitions: set[int], after_stats: set[int]) -> None:
    ctx, ds = session
    got = ctx.sql(f"SELECT * FROM t WHERE {where}").to_arrow_table()
    plan = ds.last_plan
    assert plan is not None and plan.filter
    counts = (plan.files_total, plan.files_after_partition_pruning, plan.files_after_stats_pruning)
    assert counts == (N_FILES, len(after_partitions), len(after_stats)), f"{where[:80]}: {counts}"
    expected = ctx.sql(f"SELECT * FROM ref WHERE {where}").to_arrow_table()
    assert _sorted_rows(got) == _sorted_rows(expected), where[:80]
    assert {r["id"] // ROWS_PER_FILE for r in got.to_pylist()} <= after_stats


def test_long_in_lists_prune_and_match(session) -> None:
    """IN lists of thousands of values (pruned with one sort of the values and the files' bounds,
    not a comparison per value and file) keep exactly the files holding a listed value and return
    what DataFusion returns in memory; NOT IN lists that long prune nothing here (no file is one
    value) and still return the right rows. (DataFusion 55 keeps long IN lists of timestamps
    above the scan: tests/test_skipping.py covers their pruning.)"""
    files = [3, 17, 38]
    listed = [i * ROWS_PER_FILE + k for i in files for k in range(0, ROWS_PER_FILE, 3)]
    outside = list(range(10 * N_FILES * ROWS_PER_FILE, 10 * N_FILES * ROWS_PER_FILE + 3000))
    ids = ", ".join(map(str, listed + outside))
    _check_plan_and_rows(session, f"id IN ({ids})", ALL, set(files))
    _check_plan_and_rows(
        session, f"id IN ({ids}) AND region = 'ap'", _files(lambda i: region(i) == "ap"), {38}
    )
    _check_plan_and_rows(session, f"id NOT IN ({ids})", ALL, ALL)
    _check_plan_and_rows(session, f"opt NOT IN ({ids})", ALL, _files(lambda i: i % 5 != 0))
    strings = ", ".join(f"'k{v:05d}'" for v in listed) + ", " + ", ".join(f"'k{v}x'" for v in outside)
    _check_plan_and_rows(session, f"s IN ({strings})", ALL, set(files))


def test_chains_of_600_conditions(session) -> None:
    """DataFusion pushes a WHERE's conjuncts as one left-deep AND chain: 600 conditions exceeded
    Python's recursion limit while the filter was read (RecursionError: the query failed). The
    chain is read with a stack; partition and statistics pruning still apply to it."""
    excluded = " AND ".join(f"id <> {j * 7}" for j in range(600))
    _check_plan_and_rows(session, excluded, ALL, ALL)
    where = f"region = 'us' AND {excluded} AND id < 2000"
    _check_plan_and_rows(session, where, _files(lambda i: region(i) == "us"), {1, 5, 9, 13, 17})
    either = " OR ".join(f"(id = {j * 7} AND opt IS NOT NULL)" for j in range(600))
    _check_plan_and_rows(session, either, ALL, _files(lambda i: i * ROWS_PER_FILE <= 599 * 7 and i % 5 != 0))


def test_partition_columns_with_a_data_column_are_read(session) -> None:
    """One file column in the projection and every file is read (sums come from the data)."""
    ctx, _ = session
    q = "SELECT region, count(*) AS n, sum(id) AS s FROM {} GROUP BY region"
    got = sorted(ctx.sql(q.format("t")).to_pylist(), key=str)
    assert got == sorted(ctx.sql(q.format("ref")).to_pylist(), key=str)


def test_signed_zero_partitions_from_the_log_keep_their_sign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Float partitions -0 and 0 are two values (deltalake writes both folders). Rows of partition
    columns only come from the log, grouped by value: -0.0 == 0.0 in Python, so the two groups of
    one fragment were merged under the first one's sign and a row read 0.0 where its file says
    -0.0. The change feed's add rows come from the log the same way."""
    from delta_datafusion.datafusion import dataset

    monkeypatch.setattr(dataset, "target_fragments", lambda: 1)  # all files in one fragment
    path = str(tmp_path / "t")
    for f, g in ((-0.0, 1.5), (0.0, 1.5), (-0.0, -0.0), (0.0, 0.0)):
        rows = pa.table({"id": [1, 2], "f": pa.array([f, f]), "g": pa.array([g, g], pa.float32())})
        cdf = {"delta.enableChangeDataFeed": "true"}
        write_deltalake(path, rows, mode="append", partition_by=["f", "g"], configuration=cdf)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", path)

    def signs(sql: str) -> list[tuple[float, float]]:
        rows = ctx.sql(sql).to_pylist()
        return sorted((math.copysign(1, r["f"]), math.copysign(1, r["g"])) for r in rows)

    every = signs("SELECT f, g, id FROM t")
    assert every == sorted([(-1.0, 1.0), (1.0, 1.0), (-1.0, -1.0), (1.0, 1.0)] * 2)
    assert signs("SELECT f, g FROM t") == every
    assert signs("SELECT f, g FROM t WHERE f = 0") == every
    assert signs("SELECT f, g FROM table_changes('t', 0)") == every
    change = "CAST(f AS VARCHAR) AS f, CAST(g AS VARCHAR) AS g"
    want = ctx.sql(f"SELECT {change}, count(id) AS n FROM t GROUP BY 1, 2 ORDER BY 1, 2").to_pylist()
    assert ctx.sql(f"SELECT {change}, count(*) AS n FROM t GROUP BY 1, 2 ORDER BY 1, 2").to_pylist() == want


def _opened_files(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """File numbers (id // ROWS_PER_FILE of their first row) of the units the reader opens."""
    from delta_datafusion.read import UnitReader

    opened: list[str] = []
    plain, selected = UnitReader._read_plain, UnitReader._read_selected

    def spy_plain(self, units, *a, **k):
        opened.extend(u.location for u in units)
        return plain(self, units, *a, **k)

    def spy_selected(self, unit, *a, **k):
        opened.append(unit.location)
        return selected(self, unit, *a, **k)

    monkeypatch.setattr(UnitReader, "_read_plain", spy_plain)
    monkeypatch.setattr(UnitReader, "_read_selected", spy_selected)
    return opened


@pytest.mark.parametrize(
    ("where", "n", "opened"),
    [
        ("id >= 1000 AND id < 2500", 1500, 0),  # files 10..24 lie inside the range
        ("id >= 1050 AND id < 2500", 1450, 1),  # file 10 straddles the lower bound
        ("id BETWEEN 950 AND 1049", 100, 2),  # two straddling files
        ("region = 'us' AND id < 2000", 500, 0),
        ("d >= DATE '2024-01-05' AND id <> 5", 3600, 0),  # dates and a value outside every file
        ("opt IS NOT NULL", 2400, 16),  # the 16 files with some nulls in opt are read
        # a float min proves > (a NaN row, left out of the bounds, is above every number too):
        # files 3..39 are counted; file 2 (min 100) and files 0-1 (a NaN row may hide there) read
        ("x > 100", 3799, 3),
        ("x <> 10.25", 4000, 1),  # only file 0's bounds hold 10.25
        ("x < 100", 200, 2),  # never proven by float bounds (NaN): files 0-1 are read
        ("s >= 'k00000'", 4000, 40),  # string bounds never decide (truncation)
    ],
)
def test_count_star_with_filter_proven_by_stats(
    session, where: str, n: int, opened: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """count(*) under a filter on data columns: files whose statistics prove the filter TRUE for
    every row (integer/date bounds inside the range, no nulls) count numRecords unopened; the
    rest are read. The count equals count(id), which reads every selected file."""
    ctx, _ = session
    assert ctx.sql(f"SELECT count(id) AS n FROM t WHERE {where}").to_pydict()["n"][0] == n
    seen = _opened_files(monkeypatch)
    assert ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pydict()["n"][0] == n
    assert len(seen) == opened, (where, seen)


def test_limit_reads_one_file_per_fragment(session, monkeypatch: pytest.MonkeyPatch) -> None:
    """``SELECT * ... LIMIT``: each fragment reads its first file on its own (its first row group
    streamed in small batches), so DataFusion's early stop leaves the other files unread
    (pyarrow's scanner would read several ahead)."""
    import pyarrow.dataset as pads

    from delta_datafusion.read import UnitReader

    ctx, ds = session
    real = pads.FileSystemDataset
    real_stream = UnitReader._stream_first_row_group
    scanned: list[int] = []

    def spy(fragments, *args, **kwargs):
        scanned.append(len(fragments))
        return real(fragments, *args, **kwargs)

    def spy_stream(self, unit, *args, **kwargs):
        scanned.append(1)
        return (yield from real_stream(self, unit, *args, **kwargs))

    monkeypatch.setattr(pads, "FileSystemDataset", spy)
    monkeypatch.setattr(UnitReader, "_stream_first_row_group", spy_stream)
    got = ctx.sql("SELECT * FROM t LIMIT 3").to_arrow_table()
    assert got.num_rows == 3
    assert ds.last_plan.fragments >= 1 and ds.last_plan.files_after_stats_pruning == N_FILES
    assert scanned and all(n == 1 for n in scanned), scanned
    assert len(scanned) <= 2 * ds.last_plan.fragments  # a streamed first row group, then the rest
    # the LIMIT query's other partitions may still start a scan after it returned
    from delta_datafusion.datafusion.dataset import SCAN_THREADS

    for _ in range(2):  # a partition task scheduled before the LIMIT returned may start late
        SCAN_THREADS.wait_idle()
        time.sleep(0.1)
    scanned.clear()
    monkeypatch.setattr(UnitReader, "_stream_first_row_group", real_stream)
    full = ctx.sql("SELECT * FROM t").to_arrow_table()  # without a limit every file is read
    assert full.num_rows == N_FILES * ROWS_PER_FILE
    # every file once: through a dataset, except the single-row-group first files streamed whole
    assert N_FILES - ds.last_plan.fragments <= sum(scanned) <= N_FILES


def test_limit_decodes_one_files_first_rows_on_two_cores(session, monkeypatch: pytest.MonkeyPatch) -> None:
    """On two cores a table is scanned as one fragment: ``SELECT * ... LIMIT`` decodes the first
    rows of one file. With a fragment per core the other partition decoded its own first file's
    first rows for nothing (DataFusion does not pass a Python dataset the limit, and stops the
    query only after that decode); more cores get a fragment per two."""
    from delta_datafusion.datafusion import dataset
    from delta_datafusion.datafusion.dataset import SCAN_THREADS
    from delta_datafusion.read import UnitReader

    ctx, ds = session
    monkeypatch.setattr(dataset.os, "cpu_count", lambda: 2)
    real_stream = UnitReader._stream_first_row_group
    streamed: list[str] = []

    def spy_stream(self, unit, *args, **kwargs):
        streamed.append(unit.location)
        return (yield from real_stream(self, unit, *args, **kwargs))

    monkeypatch.setattr(UnitReader, "_stream_first_row_group", spy_stream)
    assert ctx.sql("SELECT * FROM t LIMIT 3").to_arrow_table().num_rows == 3
    for _ in range(2):  # a partition task scheduled before the LIMIT returned may start late
        SCAN_THREADS.wait_idle()
        time.sleep(0.1)
    assert ds.last_plan.fragments == 1
    assert len(streamed) == 1, streamed
    monkeypatch.setattr(dataset.os, "cpu_count", lambda: 8)
    assert ctx.sql("SELECT * FROM t LIMIT 3").to_arrow_table().num_rows == 3
    assert ds.last_plan.fragments == 4


def test_filtered_limit_makes_fragments_only_for_files_it_scans(
    session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filtered ``LIMIT`` met by each fragment's first file: the other files' pyarrow fragments
    (and partition guarantees) are not made, as the scan never reaches them (~3 us a file, and
    ~30 us with partition values: 0.5 s of a 200,000-file LIMIT query went into fragments that
    were never scanned)."""
    from delta_datafusion.datafusion.dataset import SCAN_THREADS
    from delta_datafusion.read import reader

    ctx, ds = session
    made: list[str] = []
    real = reader._guarantee

    def spy(unit, rs):
        made.append(unit.location)
        return real(unit, rs)

    monkeypatch.setattr(reader, "_guarantee", spy)
    got = ctx.sql("SELECT id FROM t WHERE x >= 0 LIMIT 3").to_arrow_table()  # float bounds: read
    assert got.num_rows == 3
    assert ds.last_plan.files_after_stats_pruning == N_FILES
    for _ in range(2):  # a partition task scheduled before the LIMIT returned may start late
        SCAN_THREADS.wait_idle()
        time.sleep(0.1)
    assert len(made) <= ds.last_plan.fragments, made
    made.clear()
    assert ctx.sql("SELECT count(id) AS n FROM t WHERE x >= 0").to_pydict()["n"] == [N_FILES * ROWS_PER_FILE]
    assert len(made) == N_FILES  # without a limit every file is scanned, through one fragment


def test_limit_over_many_one_row_files_stops_early(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``LIMIT`` over small files: the batches merged for DataFusion after the first grow by
    doubling, so a LIMIT needing a few more rows than the first file holds stops after a few
    more files (merging straight to COALESCE_ROWS read every file of a 10,000-partition table of
    one-row files: LIMIT 10 took 2.1 s, deltalake 0.2 s)."""
    from delta_datafusion.datafusion.dataset import SCAN_THREADS
    from delta_datafusion.read import UnitReader

    n = 400
    path = tmp_path / "one_row_files"
    write_deltalake(
        str(path),
        pa.table({"p": pa.array(range(n), pa.int64()), "v": pa.array(range(n))}),
        partition_by=["p"],
    )
    ctx = SessionContext()
    ds = dd.register_table(ctx, "t", str(path))
    pulled: list[int] = []
    real = UnitReader.read

    def spy(self, *args, **kwargs):
        for batch in real(self, *args, **kwargs):
            pulled.append(batch.num_rows)
            yield batch

    monkeypatch.setattr(UnitReader, "read", spy)
    got = ctx.sql("SELECT v FROM t WHERE v >= 0 LIMIT 10").to_pydict()["v"]
    assert len(got) == 10 and set(got) <= set(range(n))
    for _ in range(2):  # a partition task scheduled before the LIMIT returned may start late
        SCAN_THREADS.wait_idle()
        time.sleep(0.1)
    assert ds.last_plan.files_after_stats_pruning == n
    assert sum(pulled) < n // 4, sum(pulled)
    pulled.clear()
    assert ctx.sql("SELECT count(v) AS c FROM t WHERE v >= 0").to_pydict()["c"] == [n]
    assert sum(pulled) == n


def test_streamed_first_row_group_comes_in_batches_doubling_in_size(tmp_path: Path) -> None:
    """The first rows in a small batch, then batches doubling in size (each batch cost a
    conversion, and DataFusion's small batches are merged by a copy)."""
    from delta_datafusion.read.reader import FIRST_BATCH_ROWS

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array(range(100_000), pa.int64())}))  # one row group
    sizes = [b.num_rows for b in dd.DeltaTable(path).snapshot().scan().to_batches()]
    assert sizes == [FIRST_BATCH_ROWS, FIRST_BATCH_ROWS, 2 * FIRST_BATCH_ROWS, 4 * FIRST_BATCH_ROWS, 34464]


def test_streamed_first_row_group_is_decoded_at_the_handed_sizes(tmp_path: Path, monkeypatch) -> None:
    """The doubling batches are decoded at their sizes (pyarrow's reader takes a new batch size
    for its next batch), not decoded in first-batch sizes and joined: no batch is copied, and the
    rows are those of the file, in order."""
    from delta_datafusion.read import reader as reader_module
    from delta_datafusion.read.reader import FIRST_BATCH_ROWS

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array(range(100_000), pa.int64())}))  # one row group
    joined: list[int] = []
    real = pa.concat_batches

    def spy(batches, *args, **kwargs):
        joined.append(len(batches))
        return real(batches, *args, **kwargs)

    monkeypatch.setattr(reader_module.pa, "concat_batches", spy)
    batches = list(dd.DeltaTable(path).snapshot().scan().to_batches())
    monkeypatch.setattr(reader_module.pa, "concat_batches", real)
    assert [b.num_rows for b in batches] == [
        FIRST_BATCH_ROWS,
        FIRST_BATCH_ROWS,
        2 * FIRST_BATCH_ROWS,
        4 * FIRST_BATCH_ROWS,
        34464,
    ]
    assert joined == []
    assert pa.Table.from_batches(batches).column("id").to_pylist() == list(range(100_000))


def test_streamed_first_row_group_batches_hold_at_most_the_scans_batch_size(tmp_path: Path) -> None:
    """The doubling batches stop at the scan's batch size, also one that is not a multiple of the
    first batch's (200,000: a batch of 204,800 rows, which the Python API then cut into 200,000
    and 4,800)."""
    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array(range(500_000), pa.int64())}))  # one row group
    scan = dd.DeltaTable(path).snapshot().scan()
    sizes = [b.num_rows for b in scan.reader().read(scan.scan_units(), ["id"], None, 200_000)]
    assert max(sizes) == 200_000 and sum(sizes) == 500_000, sizes
    assert [b.num_rows for b in scan.to_batches(200_000)] == sizes


def test_pruned_queries_return_rows(session) -> None:
    """The cases are not vacuous: all but the empty ones return rows."""
    ctx, _ = session
    for where, _parts, stats in CASES:
        n = ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pydict()["n"][0]
        assert (n > 0) == bool(stats), where


def test_projection_and_aggregate_with_pruning(session) -> None:
    ctx, ds = session
    got = ctx.sql(
        "SELECT bucket, count(*) AS n, sum(id) AS s FROM t WHERE region = 'us' AND id < 2000 "
        "GROUP BY bucket ORDER BY bucket"
    ).to_pydict()
    assert ds.last_plan.files_after_stats_pruning == 5
    ids = [v for i in (1, 5, 9, 13, 17) for v in range(i * 100, i * 100 + 100)]
    by_bucket: dict = {}
    for v in ids:
        b = bucket(v // 100)
        n, s = by_bucket.get(b, (0, 0))
        by_bucket[b] = (n + 1, s + v)
    keys = sorted(by_bucket, key=lambda b: (b is None, b))
    assert got == {"bucket": keys, "n": [by_bucket[b][0] for b in keys], "s": [by_bucket[b][1] for b in keys]}


def test_count_star_with_partition_filter(session) -> None:
    ctx, ds = session
    got = ctx.sql("SELECT count(*) AS n FROM t WHERE region IS NULL AND bucket = 0").to_pydict()
    assert got == {"n": [200]}  # files 3 and 7
    assert ds.last_plan.files_after_partition_pruning == 2
    assert ds.last_plan.files_after_stats_pruning == 2


def _plan_text(ctx: SessionContext, sql: str) -> str:
    rows = ctx.sql(f"EXPLAIN {sql}").to_pydict()
    return "\n".join(rows["plan"])


def test_explain_shows_pushed_filter(session) -> None:
    ctx, ds = session
    plan = _plan_text(ctx, "SELECT id FROM t WHERE id = 1234")
    line = next(line for line in plan.splitlines() if "DatasetExec" in line)
    assert "filter_expr=" in line and "(id == 1234)" in line, line
    assert "number_of_fragments=1" in line, line
    assert "FilterExec" not in plan, plan
    assert ds.last_plan.files_after_stats_pruning == 1

    plan = _plan_text(ctx, "SELECT id FROM t WHERE region = 'eu' AND id < 2000")
    line = next(line for line in plan.splitlines() if "DatasetExec" in line)
    assert '(region == "eu")' in line and "(id < 2000)" in line, line
    assert ds.last_plan.files_after_partition_pruning == 10
    assert ds.last_plan.files_after_stats_pruning == 5


def test_explain_keeps_unpushed_filter_in_filterexec(session) -> None:
    ctx, ds = session
    plan = _plan_text(ctx, "SELECT id FROM t WHERE id < 250 AND s LIKE 'k001%'")
    line = next(line for line in plan.splitlines() if "DatasetExec" in line)
    assert "(id < 250)" in line and "LIKE" not in line, line
    assert re.search(r"FilterExec: .*LIKE", plan), plan
    assert ds.last_plan.files_after_stats_pruning == 3
    got = ctx.sql("SELECT id FROM t WHERE id < 250 AND s LIKE 'k001%' ORDER BY id").to_pydict()["id"]
    assert got == list(range(100, 200))


def test_dd_explain_reports_pruning_counts(session) -> None:
    ctx, _ = session
    text = dd.explain(ctx, "SELECT * FROM t WHERE region = 'us' AND id < 2000")
    assert "DatasetExec" in text
    lines = [line for line in text.splitlines() if "DeltaScan:" in line]
    assert len(lines) == 1, text
    line = lines[0]
    assert "files_total=40" in line, line
    assert "after_partition_pruning=10" in line, line
    assert "after_stats_pruning=5" in line, line
    assert "region" in line and "2000" in line, line

    text = dd.explain(ctx, "SELECT * FROM t WHERE bucket IS NULL")
    line = next(line for line in text.splitlines() if "DeltaScan:" in line)
    assert "files_total=40 after_partition_pruning=4 after_stats_pruning=4" in line, line

    text = dd.explain(ctx, "SELECT * FROM t")
    line = next(line for line in text.splitlines() if "DeltaScan:" in line)
    assert "files_total=40 after_partition_pruning=40 after_stats_pruning=40" in line, line


def test_dd_explain_raises_what_running_the_statement_raises(session) -> None:
    """DataFusion's EXPLAIN shows a failed planning step as a row of its output; dd.explain
    returned that text as the plan, where the query itself fails."""
    ctx, _ = session
    with pytest.raises(Exception, match="Cannot cast string 'x'"):  # noqa: B017 - DataFusion's own
        ctx.sql("SELECT * FROM t WHERE id = 'x'").collect()
    with pytest.raises(DeltaError, match="cannot be planned: .*Cannot cast string 'x' to value of Int64"):
        dd.explain(ctx, "SELECT * FROM t WHERE id = 'x'")
    assert "DeltaScan:" in dd.explain(ctx, "SELECT * FROM t WHERE id = 5")


def test_dd_explain_lists_every_scan(session, table_path: Path) -> None:
    """A table scanned twice in one query (UNION ALL, self-join) gets a DeltaScan line per scan,
    each with its own filter and counts; so does a folder-catalog table."""
    ctx, _ = session
    text = dd.explain(
        ctx,
        "SELECT id FROM t WHERE region = 'us' UNION ALL SELECT id FROM t WHERE id < 2000 AND region = 'eu'",
    )
    lines = sorted(line.strip() for line in text.splitlines() if "DeltaScan:" in line)
    assert len(lines) == 2, text
    assert any(
        "after_partition_pruning=10 after_stats_pruning=10" in x and "region = 'us'" in x for x in lines
    )
    assert any("after_partition_pruning=10 after_stats_pruning=5" in x and "2000" in x for x in lines)
    text = dd.explain(
        ctx, "SELECT x.id FROM t x JOIN t y ON x.id = y.id WHERE x.region = 'eu' AND y.id < 300"
    )
    assert len([line for line in text.splitlines() if "DeltaScan:" in line]) == 2, text

    cat = SessionContext()
    dd.register_catalog(cat, "lake", str(table_path.parent))
    text = dd.explain(cat, f"SELECT id FROM lake.default.{table_path.name} WHERE region = 'eu' AND id < 2000")
    lines = [line for line in text.splitlines() if "DeltaScan:" in line]
    assert (
        len(lines) == 1 and "files_total=40 after_partition_pruning=10 after_stats_pruning=5" in lines[0]
    ), text


def test_join_prunes_each_side(session, table_path: Path) -> None:
    ctx = SessionContext()
    a = dd.register_table(ctx, "a", str(table_path))
    b = dd.register_table(ctx, "b", str(table_path), version=9)
    got = ctx.sql(
        "SELECT a.id FROM a JOIN b ON a.id = b.id WHERE a.region = 'eu' AND b.id < 300 ORDER BY a.id"
    ).to_pydict()["id"]
    assert got == list(range(0, 100))  # file 0 is the only 'eu' file below id 300
    assert a.last_plan.files_total == 40
    assert b.last_plan.files_total == 10
    assert a.last_plan.files_after_partition_pruning == 10
    assert b.last_plan.files_after_stats_pruning == 3


# -- time travel -----------------------------------------------------------------------------


def _ids(ctx: SessionContext, sql: str) -> list[int]:
    return sorted(ctx.sql(sql).to_pydict()["id"])


@pytest.mark.parametrize("version", [0, 5, 17, 39])
def test_time_travel_by_version(session, table_path: Path, version: int) -> None:
    ctx = SessionContext()
    dd.register(ctx)
    ds = dd.register_table(ctx, "tv", str(table_path), version=version)
    expected_ids = list(range((version + 1) * ROWS_PER_FILE))
    assert _ids(ctx, "SELECT id FROM tv") == expected_ids
    assert ds.last_plan.files_total == version + 1
    # pruning works on an older snapshot too
    assert _ids(ctx, "SELECT id FROM tv WHERE id >= 550 AND region = 'us'") == [
        v for v in expected_ids if v >= 550 and region(v // 100) == "us"
    ]
    ctx.sql(
        f"CREATE EXTERNAL TABLE tv_ddl STORED AS DELTA LOCATION '{table_path}' OPTIONS ('version' '{version}')"
    )
    assert _ids(ctx, "SELECT id FROM tv_ddl") == expected_ids


@pytest.mark.parametrize(
    ("when", "version"),
    [
        (COMMIT_TIME0, 0),
        (COMMIT_TIME0 + dt.timedelta(hours=5, minutes=30), 5),
        (COMMIT_TIME0 + dt.timedelta(hours=12), 12),
        (COMMIT_TIME0 + dt.timedelta(days=30), 39),
    ],
)
def test_time_travel_by_timestamp(session, table_path: Path, when: dt.datetime, version: int) -> None:
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "tt", str(table_path), timestamp=when)
    expected_ids = list(range((version + 1) * ROWS_PER_FILE))
    assert _ids(ctx, "SELECT id FROM tt") == expected_ids
    iso = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    dd.register_table(ctx, "tt_iso", str(table_path), timestamp=iso)
    assert _ids(ctx, "SELECT id FROM tt_iso") == expected_ids
    ctx.sql(
        f"CREATE EXTERNAL TABLE tt_ddl STORED AS DELTA LOCATION '{table_path}' OPTIONS ('timestamp' '{iso}')"
    )
    assert _ids(ctx, "SELECT id FROM tt_ddl") == expected_ids


def test_time_travel_before_first_commit_fails(session, table_path: Path) -> None:
    ctx = SessionContext()
    with pytest.raises(Exception, match="before the earliest commit"):
        dd.register_table(ctx, "tt", str(table_path), timestamp=COMMIT_TIME0 - dt.timedelta(days=1))


@pytest.fixture(scope="module")
def mutated_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, pa.Table]]:
    """v0 write, v1 append, v2 delete, v3 update, v4 overwrite; the rows of each version per deltalake."""
    path = tmp_path_factory.mktemp("tt") / "m"
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.int64())])

    def rows(ids: range, p: str) -> pa.Table:
        return pa.table({"id": list(ids), "p": [p] * len(ids), "v": [i * 10 for i in ids]}, schema=schema)

    write_deltalake(str(path), rows(range(0, 10), "a"), partition_by=["p"])
    write_deltalake(str(path), rows(range(10, 20), "b"), mode="append", partition_by=["p"])
    DeltaTable(str(path)).delete("id < 5 OR id = 15")
    DeltaTable(str(path)).update(updates={"v": "v + 1"}, predicate="id >= 12")
    write_deltalake(str(path), rows(range(100, 103), "c"), mode="overwrite", partition_by=["p"])
    versions = {v: DeltaTable(str(path), version=v).to_pyarrow_table().select(schema.names) for v in range(5)}
    assert DeltaTable(str(path)).version() == 4
    return path, versions


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_time_travel_through_mutations(mutated_table, version: int) -> None:
    path, versions = mutated_table
    expected = sorted(versions[version].to_pylist(), key=lambda r: r["id"])
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "m", str(path), version=version)
    got = ctx.sql("SELECT id, p, v FROM m").to_arrow_table()
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == expected
    ctx.sql(f"CREATE EXTERNAL TABLE m_ddl STORED AS DELTA LOCATION '{path}' OPTIONS ('version' '{version}')")
    got = ctx.sql("SELECT id, p, v FROM m_ddl").to_arrow_table()
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == expected
    # a pruned query at that version
    got = ctx.sql("SELECT id, p, v FROM m_ddl WHERE p = 'b' AND id > 12").to_arrow_table()
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [
        r for r in expected if r["p"] == "b" and r["id"] > 12
    ]


def test_latest_registration_is_pinned(mutated_table) -> None:
    """register_table without version pins the latest snapshot at registration time."""
    path, versions = mutated_table
    ctx = SessionContext()
    dd.register_table(ctx, "m", str(path))
    assert sorted(ctx.sql("SELECT id FROM m").to_pydict()["id"]) == [100, 101, 102]
    assert sorted(versions[4].column("id").to_pylist()) == [100, 101, 102]


# -- pruning on real statistics: the conformance corpus ------------------------------------------


#: Corpus tables whose statistics exercise pruning: every stats layout (JSON, struct-only
#: checkpoints, sidecars), truncated timestamps, column mapping, type widening, partitions of
#: every type, NULL partitions, deletion vectors.
STATS_TABLES = [
    "type-widening",
    "parsed-stats",
    "data-skipping-basic-stats-all-types",
    "data-skipping-basic-stats-all-types-checkpoint",
    "data-skipping-basic-stats-all-types-columnmapping-id",
    "data-skipping-basic-stats-all-types-columnmapping-name",
    "timestamp-truncation-stats",
    "delta-checkpoint-stats-optional",
    "delta-stats-optional",
    "v1-multi-part-struct-stats-only",
    "v1-single-part-struct-stats-only",
    "v2-classic-parquet-struct-stats-only",
    "v2-parquet-sidecars-struct-stats-only",
    "parquet_row_group_skipping",
    "stats-writing-all-types",
    "data-skipping-change-stats-collected-across-versions",
    "data-skipping-partition-and-data-column",
    "timestamp-partitioned-table",
    "kernel-timestamp-pst",
    "kernel-timestamp-timestamp_micros",
    "kernel-timestamp-timestamp_millis",
    "basic-decimal-table",
    "delta-0.8.0-null-partition",
    "mixed-nulls",
    "table-with-dv-small",
    "dv-with-columnmapping",
    "data-reader-escaped-chars",
    "data-reader-timestamp_ntz",
    "basic_partitioned",
    "delta-2.2.0-partitioned-types",
    "delta-0.8.0-numeric-partition",
    "table-with-columnmapping-mode-name",
]
#: (table, column): statistics that contradict the data, where pruning by them is allowed.
LYING_STATS = {
    # the data files have no ts_col (it reads as NULL) but the stats claim nullCount 0 and a range
    ("parsed-stats", "ts_col"),
}


def _sql_literal(v, t: pa.DataType) -> str | None:
    if v is None:
        return None
    if pa.types.is_boolean(t):
        return "true" if v else "false"
    if pa.types.is_integer(t):
        return str(v)
    if pa.types.is_floating(t):
        if math.isnan(v):
            return "'NaN'::double"
        if math.isinf(v):
            return "'inf'::double" if v > 0 else "'-inf'::double"
        return repr(float(v))
    if pa.types.is_decimal(t):
        assert isinstance(v, Decimal)
        return str(v)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "'" + v.replace("'", "''") + "'"
    if pa.types.is_date(t):
        return f"DATE '{v.isoformat()}'"
    if pa.types.is_timestamp(t):
        if v.tzinfo is not None:  # the column is UTC; a naive literal is read as UTC
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return f"TIMESTAMP '{v.isoformat()}'"
    return None


def _stats_predicates(table: pa.Table, name: str) -> list[str]:
    out = []
    for f in table.schema:
        t = f.type
        if (
            pa.types.is_nested(t)
            or pa.types.is_null(t)
            or pa.types.is_binary(t)
            or (name, f.name) in LYING_STATS
        ):
            continue
        c = '"' + f.name.replace('"', '""') + '"'
        out += [f"{c} IS NULL", f"{c} IS NOT NULL"]
        values = [v for v in table.column(f.name).unique().to_pylist() if v is not None]
        lits = [x for x in (_sql_literal(v, t) for v in values) if x is not None]
        if not lits:
            continue
        try:
            lits = [lit for _, lit in sorted(zip(values, lits, strict=True))]
        except TypeError:
            lits = sorted(lits)
        lo, mid = lits[0], lits[len(lits) // 2]
        four = ", ".join((lits * 4)[:4])
        out += [
            f"{c} = {mid}",
            f"{c} < {mid}",
            f"{c} >= {mid}",
            f"{c} <> {lo}",
            f"{c} IN ({four})",
            f"{c} NOT IN ({four})",
        ]
    return out


def _canonical(table: pa.Table) -> list:
    return sorted(
        repr([("NaN" if isinstance(v, float) and math.isnan(v) else v) for v in row.values()])
        for row in table.to_pylist()
    )


@pytest.mark.parametrize("name", STATS_TABLES)
def test_corpus_stats_pruning_never_drops_rows(name: str) -> None:
    """Filtered reads equal DataFusion filtering the unfiltered read in memory (no pruning there)."""
    path = corpus_table(name)
    ctx = SessionContext()
    ds = dd.register_table(ctx, "t", str(path))
    full = ctx.sql("SELECT * FROM t").to_arrow_table()
    assert full.num_rows > 0, f"{name} reads no rows"
    ctx.register_record_batches("mem", [full.to_batches()])
    failures = []
    pruned_some = False
    for where in _stats_predicates(full, name):
        got = ctx.sql(f"SELECT * FROM t WHERE {where}").to_arrow_table()
        plan = ds.last_plan
        pruned_some |= plan is not None and plan.files_after_stats_pruning < plan.files_total
        want = ctx.sql(f"SELECT * FROM mem WHERE {where}").to_arrow_table()
        if got.num_rows != want.num_rows or _canonical(got) != _canonical(want):
            failures.append(f"{where}: {got.num_rows} rows, expected {want.num_rows} ({plan})")
    assert not failures, f"{name} ({CORPUS}):\n" + "\n".join(failures)
    if ds.last_plan is not None and ds.last_plan.files_total > 1:
        assert pruned_some, f"{name}: no predicate pruned any file"


def test_small_batches_are_merged_for_datafusion() -> None:
    """Small batches (small files) reach DataFusion merged, in order and with every row; the first
    batch passes alone (LIMIT) and large batches pass as they are; zero-column batches (count(*))
    keep their row counts."""
    from delta_datafusion.datafusion.dataset import COALESCE_ROWS, SMALL_BATCH, coalesce_small

    def batch(start: int, n: int) -> pa.RecordBatch:
        return pa.record_batch({"id": pa.array(range(start, start + n), pa.int64())})

    sizes = [100] * 3 + [SMALL_BATCH] + [100] * (COALESCE_ROWS // 100 + 5) + [7, SMALL_BATCH + 1, 3]
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    batches = [batch(s, n) for s, n in zip(starts, sizes, strict=True)]
    out = list(coalesce_small(iter(batches), {b"k": b"v"}))
    # the run of 100-row batches merges into batches doubling from 400 rows (the first batch's
    # 100, doubled once per merged batch, up to COALESCE_ROWS); the 7 rows join the last one
    merged, left, target = [], COALESCE_ROWS // 100 + 5, 400
    while left * 100 >= target:
        merged.append(-(-target // 100) * 100)
        left -= merged[-1] // 100
        target = min(2 * target, COALESCE_ROWS)
    assert len(merged) == 7 and left
    assert [b.num_rows for b in out] == [100, 200, SMALL_BATCH, *merged, left * 100 + 7, SMALL_BATCH + 1, 3]
    assert pa.Table.from_batches(out).column("id").to_pylist() == list(range(sum(sizes)))
    assert all(b.schema.metadata == {b"k": b"v"} for b in out)
    empty = [pa.record_batch({"n": pa.nulls(n)}).select([]) for n in (5, 6, 7)]
    assert [b.num_rows for b in coalesce_small(iter(empty), None)] == [5, 13]
    long = [b.num_rows for b in coalesce_small(iter([batch(0, 100)] * 2000), None)]
    assert sum(long) == 200_000 and max(long) == -(-COALESCE_ROWS // 100) * 100  # doubling stops


def test_a_lone_small_batch_passes_without_a_copy() -> None:
    """A small batch with no small neighbour (between large ones, or last) reaches DataFusion as
    it is: pa.concat_batches of one batch copies all its buffers."""
    from delta_datafusion.datafusion.dataset import SMALL_BATCH, coalesce_small

    def batch(n: int) -> pa.RecordBatch:
        return pa.record_batch({"id": pa.array(range(n), pa.int64()), "s": pa.array(["x"] * n)})

    batches = [batch(SMALL_BATCH), batch(10), batch(SMALL_BATCH), batch(20)]
    out = list(coalesce_small(iter(batches), None))
    assert [b.num_rows for b in out] == [SMALL_BATCH, 10, SMALL_BATCH, 20]
    for got, given in zip(out, batches, strict=True):
        for got_col, given_col in zip(got.columns, given.columns, strict=True):
            assert [b.address for b in got_col.buffers() if b is not None] == [
                b.address for b in given_col.buffers() if b is not None
            ], f"a {given.num_rows}-row batch was copied"


def test_full_size_merges_run_off_the_pulling_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Merges of COALESCE_ROWS rows run on a merging thread (the pulling thread reads the next
    small batches meanwhile); the doubling merges before them (a LIMIT's first rows) run on the
    pulling thread, at once. Order and rows are kept."""
    import threading

    from delta_datafusion.datafusion import dataset as dsm

    merged_on: list[tuple[int, str]] = []
    concat = pa.concat_batches

    def recording_concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
        out = concat(batches)
        merged_on.append((out.num_rows, threading.current_thread().name))
        return out

    monkeypatch.setattr(dsm.pa, "concat_batches", recording_concat)
    n = 1000
    count = 6 * dsm.COALESCE_ROWS // n + 3
    batches = [pa.record_batch({"id": pa.array(range(i * n, (i + 1) * n), pa.int64())}) for i in range(count)]
    out = list(dsm.coalesce_small(iter(batches), None))
    assert pa.Table.from_batches(out).column("id").to_pylist() == list(range(count * n))
    caller = threading.current_thread().name
    doubling = [(rows, name) for rows, name in merged_on if rows < dsm.COALESCE_ROWS]
    full = [(rows, name) for rows, name in merged_on if rows >= dsm.COALESCE_ROWS]
    assert doubling and all(name == caller for _, name in doubling[:-1])  # the last: what is left
    assert len(full) >= 2 and all(name.startswith("delta-merge") for _, name in full), merged_on


def test_merges_when_the_merging_threads_take_no_more_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """At interpreter shutdown the merging pool refuses new work (a scan DataFusion still runs
    then): the batches are merged on the pulling thread instead, every row kept, no error."""
    from concurrent.futures import ThreadPoolExecutor

    from delta_datafusion.datafusion import dataset as dsm

    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    monkeypatch.setattr(dsm, "_merge_pool", lambda: closed)
    n = 1000
    count = 3 * dsm.COALESCE_ROWS // n
    batches = [pa.record_batch({"id": pa.array(range(i * n, (i + 1) * n), pa.int64())}) for i in range(count)]
    out = list(dsm.coalesce_small(iter(batches), None))
    assert pa.Table.from_batches(out).column("id").to_pylist() == list(range(count * n))


def test_decimal_statistics_rounded_through_a_float(tmp_path: Path):
    """deltalake logs decimal min/max through a float64: 0.999999999999999999 (decimal(38,18)) is
    logged as 1.0. Such bounds are widened and never prove a predicate for every row, so the
    count shortcut reads the file and pruning keeps it; decimal(15, s) stays exact."""
    import json

    from datafusion import SessionContext
    from deltalake import write_deltalake

    import delta_datafusion as dd
    from delta_datafusion.skipping import _widen_decimal

    path = str(tmp_path / "t")
    typ = pa.decimal128(38, 18)
    for v in ("0.999999999999999999", "2"):
        write_deltalake(path, pa.table({"v": pa.array([Decimal(v)], typ)}), mode="append")
    first = (tmp_path / "t" / "_delta_log" / "00000000000000000000.json").read_text()
    stats = json.loads(
        next(json.loads(line)["add"]["stats"] for line in first.splitlines() if '"add"' in line)
    )
    assert stats["minValues"]["v"] == 1.0  # the writer's rounding this test is about
    ctx = SessionContext()
    dd.register_table(ctx, "t", path)
    ctx.register_record_batches(
        "m", [pa.table({"v": pa.array([Decimal("0.999999999999999999"), Decimal(2)], typ)}).to_batches()]
    )
    for where in ("v >= 1", "v = 1", "v <> 1", "v IN (1)", "v NOT IN (1)", "v < 1", "v > 1.5"):
        want = ctx.sql(f"SELECT count(*) AS n FROM m WHERE {where}").to_pydict()["n"]
        assert ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pydict()["n"] == want, where
    # widening: covers the float rounding, stays inside the type, gives up past its range
    lo = _widen_decimal(pa.array([Decimal(1)], typ), -1)
    assert Decimal("0.999999999999999") < lo[0].as_py() <= Decimal("0.999999999999999999")
    top = Decimal("99999999999999999999.999999999999999999")
    widened = _widen_decimal(pa.array([top], typ), +1)
    assert widened is None or widened[0].as_py() is None  # no bound
    # deltalake saturates scale-0 values past the int64 range at its limits: no bound
    wide = str(tmp_path / "wide")
    big = pa.array([Decimal(10) ** 20, -(Decimal(10) ** 20), Decimal(5)], pa.decimal128(38, 0))
    write_deltalake(wide, pa.table({"a": big}))
    ctx.register_record_batches("w", [pa.table({"a": big}).to_batches()])
    dd.register_table(ctx, "wide", wide)
    for where in ("a = 100000000000000000000", "a > 9223372036854775807", "a < -10000000000000000000"):
        lit = where.split(" ", 2)[2]
        where = where.replace(lit, f"CAST('{lit}' AS DECIMAL(38,0))")
        want = ctx.sql(f"SELECT count(*) AS n FROM w WHERE {where}").to_pydict()["n"]
        assert ctx.sql(f"SELECT count(*) AS n FROM wide WHERE {where}").to_pydict()["n"] == want == [1], where


def test_unfiltered_scan_streams_the_first_row_group_then_reads_the_rest(tmp_path: Path) -> None:
    """The first file's first row group is streamed in small batches (time to the first rows),
    its other row groups and the other files are read by the dataset: same rows either way, with
    partition values filled in, and a file storing a column as another type still refused."""
    import json

    import pyarrow.parquet as pq
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.errors import DeltaError

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "s", "type": "string", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    actions: list[dict] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "rg",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["p"],
                "configuration": {},
            }
        },
    ]
    expected = []
    for k, part in enumerate(["a", "b", None]):
        ids = list(range(100 * k, 100 * k + 25))
        (table / f"f{k}.parquet").parent.mkdir(exist_ok=True)
        pq.write_table(
            pa.table({"id": ids, "s": [f"s{i}" for i in ids]}), table / f"f{k}.parquet", row_group_size=10
        )
        actions.append({"add": add_action(table, f"f{k}.parquet", partitionValues={"p": part})})
        expected += [{"id": i, "s": f"s{i}", "p": part} for i in ids]
    write_commit(table, 0, actions)
    assert pq.ParquetFile(table / "f0.parquet").metadata.num_row_groups == 3
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    assert sorted(ctx.sql("SELECT * FROM t").to_pylist(), key=lambda r: r["id"]) == expected
    assert ctx.sql("SELECT count(*) AS n FROM (SELECT * FROM t LIMIT 7)").to_pydict()["n"] == [7]
    rows = dd.DeltaTable(str(table)).snapshot().scan(columns=["p", "id"]).to_table().to_pylist()
    assert sorted(rows, key=lambda r: r["id"]) == [{"p": r["p"], "id": r["id"]} for r in expected]
    # a file storing `id` as strings: refused by both paths, naming it
    for k in range(3):
        rows_k = pq.read_table(table / f"f{k}.parquet")
        bad = rows_k.set_column(0, "id", pa.array([f"{v}x" for v in rows_k.column("id").to_pylist()]))
        pq.write_table(bad, table / f"f{k}.parquet", row_group_size=10)
    for a in actions:
        if "add" in a:
            a["add"] = add_action(table, a["add"]["path"], partitionValues=a["add"]["partitionValues"])
    write_commit(table, 0, actions)
    with pytest.raises(DeltaError, match="stores column 'id' as string"):
        dd.DeltaTable(str(table)).snapshot().scan().to_table()


def test_widened_columns_prune_where_old_bounds_stay_exact() -> None:
    """type-widening: v0's file has bounds in the old types, v2's in the new. Integer, decimal and
    date bounds are the same values in the widened type, so they prune (every widened column kept
    both files before); a float's shortest text (3.4) is not the double it widens to
    (3.4000000953674316), so float -> double bounds are still not used."""
    table = dd.DeltaTable(str(corpus_table("type-widening"))).snapshot()

    def kept(predicate: str) -> int:
        scan = table.scan(predicate=predicate)
        return sum(m.files.num_rows for m in scan.scan_metadata())

    for column, old, new in [
        ("byte_long", "1", "9223372036854775807"),
        ("int_long", "2", "9223372036854775807"),
        ("byte_double", "5.0", "1.234567890123"),
        ("int_double", "7.0", "1.234567890123"),
        (
            "decimal_decimal_same_scale",
            "CAST('123.45' AS DECIMAL(20,2))",
            "CAST('12345678901234.56' AS DECIMAL(20,2))",
        ),
        (
            "decimal_decimal_greater_scale",
            "CAST('67.89' AS DECIMAL(20,5))",
            "CAST('12345678901.23456' AS DECIMAL(20,5))",
        ),
        ("short_decimal", "CAST('2' AS DECIMAL(6,1))", "CAST('12345.6' AS DECIMAL(6,1))"),
        ("long_decimal", "CAST('4' AS DECIMAL(21,1))", "CAST('123456789012345678.9' AS DECIMAL(21,1))"),
        ("date_timestamp_ntz", "TIMESTAMP '2024-09-09 00:00:00'", "TIMESTAMP '2024-09-09 12:34:56.123'"),
    ]:
        assert kept(f"{column} = {old}") == 1, column
        assert kept(f"{column} = {new}") == 1, column
        assert table.scan(predicate=f"{column} = {old}").to_table().num_rows == 1, column
    assert kept("float_double = 3.4000000953674316") == 2
    assert table.scan(predicate="float_double = 3.4000000953674316").to_table().num_rows == 1


def test_count_star_under_float_filters_matches_datafusion(tmp_path: Path) -> None:
    """count(*) under comparisons on float columns, files counted from the log where their min
    proves the filter: the counts equal DataFusion's over the same rows held in memory, with
    NaN (left out of the written bounds, above every number in SQL), NULL, -0.0 beside 0.0,
    infinities, files of NaN only, and a float32 column compared with float64 literals."""
    nan, inf = math.nan, math.inf
    files = [
        ([5.0, nan, 7.0], [0.1, 0.2, 0.3]),
        ([5.0, None], [0.1, None]),
        ([-0.0, 0.0], [-0.0, 0.0]),
        ([nan, nan], [nan, nan]),
        ([-inf, 1.5], [inf, 1.5]),
        ([2.5, inf], [0.25, 0.5]),
    ]
    schema = pa.schema([("f", pa.float64()), ("g", pa.float32())])
    path = str(tmp_path / "floats")
    for f, g in files:
        write_deltalake(path, pa.table({"f": f, "g": g}, schema=schema), mode="append")
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", path)
    ref = pa.table({"f": sum((f for f, _ in files), []), "g": sum((g for _, g in files), [])}, schema=schema)
    ctx.register_record_batches("ref", [ref.to_batches()])
    literals = ["-0.0", "0.0", "0.1", "0.2", "1", "4.9", "5", "5.0", "'NaN'::double", "'-inf'::double"]
    checked = 0
    for column in ("f", "g"):
        for op in ("<", "<=", "=", "<>", ">=", ">"):
            for lit in literals:
                where = f"{column} {op} {lit}"
                ours = ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pydict()["n"][0]
                theirs = ctx.sql(f"SELECT count(*) AS n FROM ref WHERE {where}").to_pydict()["n"][0]
                assert ours == theirs, where
                checked += 1
    assert checked == 2 * 6 * len(literals)


def test_merges_in_flight_keep_their_place_before_large_batches() -> None:
    """A full-size merge still running on a merging thread when a large batch (or the end) comes
    is handed on before it: rows keep the order the reader gave them, whatever the mix of sizes."""
    from delta_datafusion.datafusion import dataset as dsm

    sizes = [5000] + [1000] * (2 * dsm.COALESCE_ROWS // 1000) + [dsm.SMALL_BATCH, 700]
    sizes += [1000] * (dsm.COALESCE_ROWS // 1000 + 1) + [3 * dsm.SMALL_BATCH] + [900] * 80
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    batches = [
        pa.record_batch({"id": pa.array(range(s, s + n), pa.int64())})
        for s, n in zip(starts, sizes, strict=True)
    ]
    for _ in range(5):  # merges finish at different moments from run to run
        out = list(dsm.coalesce_small(iter(batches), None))
        assert pa.Table.from_batches(out).column("id").to_pylist() == list(range(sum(sizes)))
        assert len(out) < len(batches)


def test_stats_that_are_not_one_object_a_file_prune_nothing(tmp_path: Path) -> None:
    """A commit whose stats strings are not one whole JSON object each (half an object in one
    file's stats and its rest in the next, two objects in a third) must leave those files with
    unknown stats, kept by every filter. Parsed as plain lines, the halves made one object and
    the pair two, the count matched, and the second file took the pair's first object (ids
    1000..1000) as its own: ``id = 25`` pruned the file that holds it (no rows)."""
    import pyarrow.parquet as pq

    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": pa.array(range(10), pa.int64())}))
    adds = []
    for k in (1, 2, 3):
        name = f"part-{k}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(10 * k, 10 * k + 10), pa.int64())}), path / name)
        adds.append(add_action(path, name))
    far = '{"numRecords": 10, "minValues": {"id": 1000}, "maxValues": {"id": 1000}, "nullCount": {"id": 0}}'
    adds[0]["stats"] = '{"numRecords": 10, "minValues":'
    adds[1]["stats"] = '{"id": 10}, "maxValues": {"id": 19}, "nullCount": {"id": 0}}'
    adds[2]["stats"] = far + far
    write_commit(path, 1, [{"add": a} for a in adds])
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    for wanted in (5, 15, 25, 35):
        got = ctx.sql(f"SELECT id FROM t WHERE id = {wanted}").to_arrow_table().column("id").to_pylist()
        assert got == [wanted], (wanted, got)
    files = dd.DeltaTable(str(path)).snapshot().files()
    num_records = dict(
        zip(
            files.column("path").to_pylist(),
            files.column("stats").combine_chunks().field("numRecords").to_pylist(),
            strict=True,
        )
    )
    assert [num_records[f"part-{k}.parquet"] for k in (1, 2, 3)] == [None, None, None]
