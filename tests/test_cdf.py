"""The change data feed on tables written by deltalake (delta-rs), checked against ``load_cdf``.

Tables are written into ``tmp_path`` with ``delta.enableChangeDataFeed=true``: appends, updates,
deletes, merges, overwrites, partitioned and not, checkpoints inside the range; timestamp ranges
(commit file modification times set with ``os.utime``); in-commit timestamps (corpus
``cdc_ict_table``); deletion vectors (corpus ``cdf-table-with-dv``); errors; the Python API; name
resolution and caching of the SQL function.

deltalake's ``load_cdf`` quirks handled in :func:`dl_changes`: string_view -> string, uint64
``_commit_version`` -> int64; its ``_commit_timestamp`` is ``commitInfo.timestamp`` (not the file
modification time) and is left out of the comparison.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import (
    add_action,
    commit_path,
    copy_table,
    corpus_table,
    one_row_appends,
    python_schema_catalog,
    write_commit,
)
from corpus_compare import assert_same_rows

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable as DLTable  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion import DeltaTable  # noqa: E402
from delta_datafusion.changes import load_change_feed  # noqa: E402
from delta_datafusion.errors import (  # noqa: E402
    CdfNotEnabledError,
    ChangeDataFeedError,
    DeltaError,
    InvalidRangeError,
    VersionNotFoundError,
)

CDF = {"delta.enableChangeDataFeed": "true"}
CHANGE_COLUMNS = ["_change_type", "_commit_version", "_commit_timestamp"]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def rows(ids, ver: int = 0, parts: int = 3) -> pa.Table:
    ids = np.asarray(ids, dtype=np.int64)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % parts}" for i in ids], pa.string()),
            "value": pa.array(ids * 10 + ver, pa.int64()),
            "name": pa.array([f"n{i}-{ver}" for i in ids], pa.string()),
        }
    )


def _plain(t: pa.Table) -> pa.Table:
    cols = []
    for f in t.schema:
        col = t.column(f.name)
        if pa.types.is_string_view(f.type) or pa.types.is_large_string(f.type):
            col = col.cast(pa.string())
        elif pa.types.is_unsigned_integer(f.type):
            col = col.cast(pa.int64())
        cols.append(col)
    return pa.Table.from_arrays(cols, names=t.column_names)


def dl_changes(path, start: int, end: int | None = None) -> pa.Table:
    """deltalake's change feed, normalized (no _commit_timestamp)."""
    t = pa.table(DLTable(str(path)).load_cdf(starting_version=start, ending_version=end))
    return _plain(t).drop_columns(["_commit_timestamp"])


def ours(path, start, end=None, **kw) -> pa.Table:
    return DeltaTable(str(path)).changes(start, end, **kw).to_table()


def sql(ctx, query: str) -> pa.Table:
    return ctx.sql(query).to_arrow_table()


def assert_matches_deltalake(path, start: int, end: int | None = None) -> pa.Table:
    got = ours(path, start, end)
    expected = dl_changes(path, start, end)
    assert expected.num_rows > 0
    assert_same_rows(got.drop_columns(["_commit_timestamp"]), expected, f"{path} {start}..{end}")
    # SQL gives the same rows
    ctx = new_ctx()
    args = f"'{path}', {start}" + ("" if end is None else f", {end}")
    via_sql = sql(ctx, f"SELECT * FROM table_changes({args})")
    assert via_sql.schema == got.schema.remove_metadata() or via_sql.schema.names == got.schema.names
    assert_same_rows(via_sql.drop_columns(["_commit_timestamp"]), expected, f"{path} sql")
    return got


def new_ctx():
    from datafusion import SessionContext

    ctx = SessionContext()
    dd.register(ctx)
    return ctx


def counts(t: pa.Table) -> dict[tuple[int, str], int]:
    g = t.group_by(["_commit_version", "_change_type"]).aggregate([("_change_type", "count")])
    return {(r["_commit_version"], r["_change_type"]): r["_change_type_count"] for r in g.to_pylist()}


def set_commit_times(path, times_ms: dict[int, int]) -> None:
    for v, ms in times_ms.items():
        p = commit_path(path, v)
        os.utime(p, ns=(ms * 1_000_000, ms * 1_000_000))


pytestmark = pytest.mark.usefixtures("fresh_change_feed_cache")


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------


@pytest.fixture
def flat_table(tmp_path) -> Path:
    """Not partitioned: v0 create, v1 append, v2 update, v3 delete, v4 merge, v5 append."""
    p = tmp_path / "flat"
    write_deltalake(str(p), rows(range(0, 100)), configuration=CDF)
    write_deltalake(str(p), rows(range(100, 150), 1), mode="append")
    DLTable(str(p)).update(updates={"value": "value + 1000"}, predicate="id < 10")
    DLTable(str(p)).delete("id >= 140")
    src = rows(list(range(20, 30)) + list(range(200, 205)), 4)
    (
        DLTable(str(p))
        .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    write_deltalake(str(p), rows(range(300, 310), 5), mode="append")
    return p


@pytest.fixture
def part_table(tmp_path) -> Path:
    """Partitioned by part: create, append, update one partition, delete across, merge, overwrite
    of one partition (predicate), partition-only delete, checkpoint at v4."""
    p = tmp_path / "part"
    write_deltalake(str(p), rows(range(0, 90)), partition_by=["part"], configuration=CDF)  # v0
    write_deltalake(str(p), rows(range(90, 120), 1), mode="append")  # v1
    DLTable(str(p)).update(updates={"value": "value * 2"}, predicate="part = 'p1' AND id < 30")  # v2
    DLTable(str(p)).delete("id >= 50 AND id < 60")  # v3
    src = rows(list(range(60, 66)) + list(range(500, 504)), 4)
    (
        DLTable(str(p))
        .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )  # v4
    DLTable(str(p)).create_checkpoint()
    write_deltalake(
        str(p), rows([600, 603, 606], 5, parts=3), mode="overwrite", predicate="part = 'p0'"
    )  # v5
    DLTable(str(p)).delete("part = 'p2'")  # v6: partition-only delete, no cdc files
    write_deltalake(str(p), rows(range(700, 712), 7), mode="append")  # v7
    return p


# --------------------------------------------------------------------------------------------
# against deltalake
# --------------------------------------------------------------------------------------------


def test_flat_table_matches_deltalake(flat_table):
    got = assert_matches_deltalake(flat_table, 0)
    c = counts(got)
    assert c[(0, "insert")] == 100 and c[(1, "insert")] == 50
    assert c[(2, "update_preimage")] == c[(2, "update_postimage")] == 10
    assert c[(3, "delete")] == 10
    assert c[(4, "update_preimage")] == 10 and c[(4, "insert")] == 5
    assert c[(5, "insert")] == 10


@pytest.mark.parametrize("start,end", [(0, 0), (1, 3), (2, 2), (3, 5), (4, None)])
def test_flat_table_subranges(flat_table, start, end):
    assert_matches_deltalake(flat_table, start, end)


def test_partitioned_table_matches_deltalake(part_table):
    got = assert_matches_deltalake(part_table, 0)
    c = counts(got)
    # overwrite with a predicate and a partition-only delete write no cdc files: derived from actions
    assert c[(6, "delete")] == sum(1 for i in list(range(0, 120)) + [500, 501, 502, 503] if i % 3 == 2) - sum(
        1 for i in range(50, 60) if i % 3 == 2
    )
    assert (5, "insert") in c and (5, "delete") in c
    assert c[(7, "insert")] == 12


@pytest.mark.parametrize("start,end", [(0, 3), (3, 6), (4, 5), (5, 7), (6, 6)])
def test_partitioned_subranges_across_checkpoint(part_table, start, end):
    assert (part_table / "_delta_log" / f"{4:020d}.checkpoint.parquet").exists()
    assert_matches_deltalake(part_table, start, end)


def test_overwrite_whole_table(tmp_path):
    p = tmp_path / "ow"
    write_deltalake(str(p), rows(range(10)), configuration=CDF)
    write_deltalake(str(p), rows(range(5, 8), 1), mode="overwrite")
    got = assert_matches_deltalake(p, 0)
    assert counts(got) == {(0, "insert"): 10, (1, "delete"): 10, (1, "insert"): 3}


def test_data_change_false_is_ignored(tmp_path):
    p = tmp_path / "opt"
    for i in range(4):
        write_deltalake(str(p), rows(range(i * 10, i * 10 + 10), i), mode="append", configuration=CDF)
    DLTable(str(p)).optimize.compact()
    feed = load_change_feed(DeltaTable(str(p)), 4, 4)
    assert feed.sources.num_rows == 0
    assert ours(p, 4, 4).num_rows == 0
    assert ours(p, 0).num_rows == 40


# --------------------------------------------------------------------------------------------
# timestamps
# --------------------------------------------------------------------------------------------


def test_commit_timestamp_is_file_modification_time(flat_table):
    base = 1_700_000_000_000
    set_commit_times(flat_table, {v: base + v * 60_000 for v in range(6)})
    got = ours(flat_table, 0)
    assert got.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    by_version = {
        r["_commit_version"]: r["_commit_timestamp"] for r in got.select(CHANGE_COLUMNS[1:]).to_pylist()
    }
    for v, ts in by_version.items():
        assert ts == dt.datetime.fromtimestamp((base + v * 60_000) / 1000, tz=dt.timezone.utc)


def test_commit_times_changed_later_are_not_served_from_the_caches(flat_table):
    """A long-running process: a copy or restore tool gives an older commit file another time.
    Timestamp bounds and _commit_timestamp follow it (they came from the process's caches, which
    looked only at the range's own and the newest commit files)."""
    base = 1_700_000_000_000
    set_commit_times(flat_table, {v: base + v * 60_000 for v in range(6)})
    t = DeltaTable(str(flat_table))
    start = dt.datetime.fromtimestamp((base + 90_000) / 1000, tz=dt.timezone.utc)
    assert t.changes(start).start_version == 2
    v5 = ours(flat_table, 5, 5).column("_commit_timestamp").to_pylist()
    assert v5[0] == dt.datetime.fromtimestamp((base + 300_000) / 1000, tz=dt.timezone.utc)
    # v1 moves after the start; v2's time moves past v5's: timestamps are made increasing
    set_commit_times(flat_table, {1: base + 100_000, 2: base + 400_000})
    assert t.changes(start).start_version == 1
    got = {r["_commit_version"]: r["_commit_timestamp"] for r in ours(flat_table, 5, 5).to_pylist()}
    assert got == {5: dt.datetime.fromtimestamp((base + 400_003) / 1000, tz=dt.timezone.utc)}
    assert t.history().to_pylist()[-1]["timestamp"] == base + 400_003


def test_timestamp_ranges(flat_table):
    base = 1_700_000_000_000
    set_commit_times(flat_table, {v: base + v * 60_000 for v in range(6)})

    def at(ms):
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)

    t = DeltaTable(str(flat_table))
    # exactly at commit 2 .. exactly at commit 4
    assert t.changes(at(base + 120_000), at(base + 240_000)).start_version == 2
    assert t.changes(at(base + 120_000), at(base + 240_000)).end_version == 4
    # between commits: start -> next commit, end -> previous commit
    scan = t.changes(at(base + 90_000), at(base + 200_000))
    assert (scan.start_version, scan.end_version) == (2, 3)
    assert set(scan.to_table().column("_commit_version").to_pylist()) == {2, 3}
    # before the first commit: starts at 0; after the last one as end: latest
    scan = t.changes(at(base - 10_000_000), at(base + 10_000_000))
    assert (scan.start_version, scan.end_version) == (0, 5)
    # ISO strings, mixing a version and a timestamp
    assert t.changes("2023-11-14T22:15:00Z", 4).start_version == 2  # base (v0) = 22:13:20Z, v2 = 22:15:20Z
    assert t.changes(1, "2023-11-14T22:15:00+00:00").end_version == 1
    assert t.changes(dt.date(2023, 11, 14)).start_version == 0

    ctx = new_ctx()
    got = sql(
        ctx,
        f"SELECT DISTINCT _commit_version FROM table_changes('{flat_table}', "
        f"TIMESTAMP '2023-11-14 22:14:50', TIMESTAMP '2023-11-14T22:17:20Z') ORDER BY 1",
    )
    assert got.column(0).to_pylist() == [2, 3, 4]
    got = sql(ctx, f"SELECT count(*) FROM table_changes('{flat_table}', '2023-11-14 22:18:20')")
    assert got.column(0).to_pylist() == [10]  # version 5 only
    # sub-millisecond instants: start rounds up, end rounds down
    got = sql(
        ctx,
        f"SELECT DISTINCT _commit_version FROM table_changes('{flat_table}', "
        f"TIMESTAMP '2023-11-14 22:15:19.9999999', TIMESTAMP '2023-11-14 22:15:20.0009') ORDER BY 1",
    )
    assert got.column(0).to_pylist() == [2]

    class NanoTimestamp(dt.datetime):
        """pandas.Timestamp's interface (pandas is not installed here): a datetime subclass
        whose ``value`` holds UTC nanoseconds beyond the microseconds datetime keeps."""

        value: int

        def to_pydatetime(self) -> dt.datetime:
            return dt.datetime(*self.timetuple()[:6], self.microsecond, tzinfo=self.tzinfo)

    def nanos(ns: int) -> NanoTimestamp:
        stamp = NanoTimestamp.fromtimestamp((ns // 1000) / 1e6, tz=dt.timezone.utc)
        stamp.value = ns
        return stamp

    commit2 = (base + 120_000) * 1_000_000
    assert t.changes(nanos(commit2 + 1), 4).start_version == 3  # a nanosecond after commit 2
    assert t.changes(0, nanos(commit2 - 1)).end_version == 1  # a nanosecond before it


def test_timestamp_errors(flat_table):
    base = 1_700_000_000_000
    set_commit_times(flat_table, {v: base + v * 60_000 for v in range(6)})
    t = DeltaTable(str(flat_table))

    def at(ms):
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)

    with pytest.raises(VersionNotFoundError, match="after the latest commit"):
        t.changes(at(base + 10_000_000))
    with pytest.raises(VersionNotFoundError, match="before the earliest commit"):
        t.changes(0, at(base - 10_000))
    with pytest.raises(InvalidRangeError, match="selects no commit"):
        t.changes(at(base + 70_000), at(base + 80_000))
    ctx = new_ctx()
    with pytest.raises(Exception, match="VersionNotFoundError"):
        sql(ctx, f"SELECT * FROM table_changes('{flat_table}', TIMESTAMP '2030-01-01 00:00:00')")
    # instants Python's datetime cannot show (years 0 and 10000 in UTC) are reported, not crashed on
    with pytest.raises(VersionNotFoundError, match="after the latest commit"):
        t.changes("9999-12-31T23:59:59-01:00")
    with pytest.raises(VersionNotFoundError, match="before the earliest commit"):
        t.changes(0, "0001-01-01T00:00:00+01:00")
    for when in ("0001-01-01T00:00:00+01:00", -(10**18), -(10**30)):
        with pytest.raises(VersionNotFoundError, match="before the earliest commit"):
            t.snapshot(timestamp=when)
    with pytest.raises(Exception, match="VersionNotFoundError"):
        sql(ctx, f"SELECT * FROM table_changes('{flat_table}', '9999-12-31T23:59:59-01:00')")
    # unicode digits are not versions ('²'.isdigit() is true, int('²') fails; int('٣') is 3)
    for text in ("\u00b2", "\u2476", "\u0663"):
        with pytest.raises(DeltaError, match="neither a version nor"):
            t.changes(text)
    with pytest.raises(Exception, match="must be an integer"):
        sql(
            ctx,
            f"CREATE EXTERNAL TABLE x STORED AS DELTA LOCATION '{flat_table}' OPTIONS ('version' '\u0663')",
        )


def test_in_commit_timestamps(copy_corpus_table):
    p = copy_corpus_table("cdc_ict_table")
    # modification times must not matter with in-commit timestamps
    set_commit_times(p, {v: 1_000_000 + v for v in range(4)})
    got = ours(p, 0)
    ict = {}
    for v in range(4):
        first = json.loads(commit_path(p, v).read_text().splitlines()[0])
        ict[v] = first["commitInfo"]["inCommitTimestamp"]
    for r in got.select(CHANGE_COLUMNS[1:]).to_pylist():
        assert r["_commit_timestamp"] == dt.datetime.fromtimestamp(
            ict[r["_commit_version"]] / 1000, tz=dt.timezone.utc
        )
    # version 1's ICT is in 2023 although commitInfo.timestamp is in 2026
    assert ict[1] == 1683874206883
    # timestamp ranges resolve through the in-commit timestamps
    t = DeltaTable(str(p))
    start = dt.datetime.fromtimestamp(ict[2] / 1000, tz=dt.timezone.utc)
    assert t.changes(start).start_version == 2
    ctx = new_ctx()
    got = sql(
        ctx,
        f"SELECT DISTINCT _commit_version FROM table_changes('{p}', TIMESTAMP '{start.isoformat()}') ORDER BY 1",
    )
    assert got.column(0).to_pylist() == [2, 3]
    # _commit_timestamp filters prune by commit
    q = f"SELECT count(*) FROM table_changes('{p}', 0) WHERE _commit_timestamp >= TIMESTAMP '{start.isoformat()}'"
    assert sql(ctx, q).column(0).to_pylist() == [ours(p, 2).num_rows]


def _ict_table(p: Path, protocol: dict, commits: list[tuple[dict, int | None]]) -> None:
    """One-row appends; ``commits``: (table properties or None, in-commit timestamp or None)."""
    import pyarrow.parquet as pq

    schema = json.dumps(
        {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    )
    (p / "_delta_log").mkdir(parents=True)
    for v, (conf, ict) in enumerate(commits):
        pq.write_table(pa.table({"id": pa.array([v], pa.int64())}), p / f"f{v}.parquet")
        info = {"timestamp": 1, "operation": "WRITE"} | (
            {"inCommitTimestamp": ict} if ict is not None else {}
        )
        actions = [{"commitInfo": info}]
        if v == 0:
            actions.append({"protocol": protocol})
        if conf is not None:
            md = {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": schema}
            actions.append(
                {"metaData": md | {"partitionColumns": [], "configuration": conf, "createdTime": 1}}
            )
        actions.append({"add": add_action(p, f"f{v}.parquet")})
        write_commit(p, v, actions)
    set_commit_times(p, {v: 1_700_000_000_000 + v * 1000 for v in range(len(commits))})


def _timestamps_ms(p: Path, start: int, end: int | None = None) -> dict[int, int]:
    got = ours(p, start, end).select(["_commit_version", "_commit_timestamp"]).to_pylist()
    return {r["_commit_version"]: int(r["_commit_timestamp"].timestamp() * 1000) for r in got}


def _edit_commit(
    p: Path, v: int, ict: int | None = None, conf: dict | None = None, protocol: bool = False
) -> None:
    """Give a deltalake-written commit an in-commit timestamp (its commitInfo is the first action),
    the inCommitTimestamp writer feature and/or new table properties."""
    lines = [json.loads(line) for line in commit_path(p, v).read_text().splitlines() if line.strip()]
    md = next(
        a["metaData"] for a in map(json.loads, commit_path(p, 0).read_text().splitlines()) if "metaData" in a
    )
    assert "commitInfo" in lines[0]
    if ict is not None:
        lines[0]["commitInfo"]["inCommitTimestamp"] = ict
    extra = []
    if protocol:
        features = ["changeDataFeed", "inCommitTimestamp"]
        extra.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": features}})
    if conf is not None:
        extra.append({"metaData": md | {"configuration": conf}})
    lines[1:1] = extra
    commit_path(p, v).write_text("".join(json.dumps(a) + "\n" for a in lines))


_BASE = 1_700_000_000_000
_CDF = {"delta.enableChangeDataFeed": "true"}
_ICT_ON = _CDF | {
    "delta.enableInCommitTimestamps": "true",
    "delta.inCommitTimestampEnablementVersion": "1",
    "delta.inCommitTimestampEnablementTimestamp": str(_BASE + 15_000),
}


def _switched_off_table(p: Path, n: int) -> dict[int, int]:
    """``n`` deltalake appends; in-commit timestamps on at version 1 (``_BASE`` + 15 s) and 2
    (+25 s: later than the file times, as a slow store gives), off at 3; file times ``_BASE`` +
    10 s a version (returned)."""
    one_row_appends(p, n, _CDF)
    _edit_commit(p, 1, _BASE + 15_000, _ICT_ON, protocol=True)
    _edit_commit(p, 2, _BASE + 25_000)
    _edit_commit(p, 3, None, _CDF | {"delta.enableInCommitTimestamps": "false"})
    files = {v: _BASE + 10_000 * v for v in range(n)}
    set_commit_times(p, files)
    return files


@pytest.mark.parametrize("later", ["off", "off and on again"])
def test_in_commit_timestamps_switched_off_later(tmp_path, later):
    """In-commit timestamps enabled at version 1, switched off at 3 (and on again at 4): PROTOCOL.md
    takes commit timestamps from the latest table properties, so versions 1 and 2 have their file
    times now, in history() and time travel. The change feed's _commit_timestamp gave them their
    in-commit timestamps (as delta-kernel-rs does) while a start time selected commits by file times:
    a start between version 1's file time and its in-commit timestamp left version 1 out though its
    rows said they were committed after the start. Every route now gives each version one time."""
    p = tmp_path / "t"
    files = _switched_off_table(p, 5)
    want = dict(files)
    if later == "off and on again":
        again = _ICT_ON | {
            "delta.inCommitTimestampEnablementVersion": "4",
            "delta.inCommitTimestampEnablementTimestamp": str(_BASE + 45_000),
        }
        _edit_commit(p, 4, _BASE + 45_000, again)
        set_commit_times(p, {4: files[4]})
        want[4] = _BASE + 45_000
    t = DeltaTable(str(p))
    assert {r["version"]: r["timestamp"] for r in t.history().to_pylist()} == want
    assert {v: t.snapshot(v).commit_timestamp() for v in range(5)} == want
    assert _timestamps_ms(p, 0) == want
    assert _timestamps_ms(p, 1, 2) == {1: want[1], 2: want[2]}  # a range ending before the switch
    for v, ms in want.items():
        at = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
        assert t.snapshot(timestamp=at).version == v
        scan = t.changes(at)
        assert scan.start_version == v
        assert min(_timestamps_ms(p, scan.start_version).values()) >= ms
    # a start between version 1's file time and the in-commit timestamp it had
    start = dt.datetime.fromtimestamp((files[1] + 1) / 1000, tz=dt.timezone.utc)
    rows = sql(
        new_ctx(),
        f"SELECT _commit_version, _commit_timestamp FROM table_changes('{p}', TIMESTAMP '{start.isoformat()}')",
    )
    assert min(rows.column("_commit_version").to_pylist()) == 2
    assert all(ts >= start for ts in rows.column("_commit_timestamp").to_pylist())


def test_a_cached_feed_follows_in_commit_timestamps_switched_off_after_it(tmp_path):
    """A range's feed is cached while its commits are unchanged; its commits' timestamps also
    depend on the latest table properties, so a later commit switching in-commit timestamps off
    gives them their file times (the cached feed kept the in-commit timestamps)."""
    p = tmp_path / "t"
    files = _switched_off_table(p, 4)
    aside = tmp_path / "v3.json"
    shutil.move(commit_path(p, 3), aside)
    assert _timestamps_ms(p, 0, 2) == {0: files[0], 1: _BASE + 15_000, 2: _BASE + 25_000}
    shutil.move(aside, commit_path(p, 3))
    assert _timestamps_ms(p, 0, 2) == {v: files[v] for v in range(3)}


def test_in_commit_timestamp_property_without_the_feature_is_ignored(tmp_path):
    """The property alone, on a protocol without the inCommitTimestamp feature, enables nothing
    (as in delta-kernel-rs): file times are used, where this was refused as a corrupt log."""
    on = {"delta.enableChangeDataFeed": "true", "delta.enableInCommitTimestamps": "true"}
    _ict_table(tmp_path, {"minReaderVersion": 1, "minWriterVersion": 4}, [(on, None), (None, None)])
    assert _timestamps_ms(tmp_path, 0, 1) == {0: 1_700_000_000_000, 1: 1_700_000_001_000}
    at = dt.datetime.fromtimestamp(1_700_000_000.5, tz=dt.timezone.utc)
    assert DeltaTable(str(tmp_path)).snapshot(timestamp=at).version == 0


@pytest.mark.parametrize("column", ["_change_type", "_commit_version", "_commit_timestamp"])
def test_table_column_named_like_a_change_column_is_refused(tmp_path, column):
    """A table column with a change feed column's name: a clear ChangeDataFeedError naming it
    (a raw KeyError from the Python API, a DataFusion duplicate-field error from SQL before)."""
    import pyarrow.parquet as pq

    types = {"_change_type": "string", "_commit_version": "long", "_commit_timestamp": "timestamp"}
    values = {
        "_change_type": pa.array(["mine"]),
        "_commit_version": pa.array([42], pa.int64()),
        "_commit_timestamp": pa.array([0], pa.timestamp("us", "UTC")),
    }
    fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
    fields.append({"name": column, "type": types[column], "nullable": True, "metadata": {}})
    (tmp_path / "_delta_log").mkdir()
    pq.write_table(
        pa.table({"id": pa.array([1], pa.int64()), column: values[column]}), tmp_path / "a.parquet"
    )
    md = {"id": "t", "format": {"provider": "parquet", "options": {}}, "partitionColumns": []}
    md |= {"schemaString": json.dumps({"type": "struct", "fields": fields})}
    md |= {"configuration": {"delta.enableChangeDataFeed": "true"}}
    protocol = {"minReaderVersion": 1, "minWriterVersion": 4}
    write_commit(
        tmp_path, 0, [{"protocol": protocol}, {"metaData": md}, {"add": add_action(tmp_path, "a.parquet")}]
    )
    assert DeltaTable(str(tmp_path)).snapshot().scan().to_table().num_rows == 1  # the table itself reads
    with pytest.raises(ChangeDataFeedError, match=f"has a column named '{column}'"):
        DeltaTable(str(tmp_path)).changes(0).to_table()
    ctx = new_ctx()
    with pytest.raises(Exception, match=f"ChangeDataFeedError.*has a column named '{column}'"):
        sql(ctx, f"SELECT * FROM table_changes('{tmp_path}', 0)")


WIDENING_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["typeWidening"],
    "writerFeatures": ["typeWidening", "changeDataFeed"],
}


def _widening_metadata(typ: str, meta: dict) -> dict:
    """A metaData action of a table with one column ``f`` of ``typ`` (field metadata ``meta``),
    type widening and the change feed enabled."""
    schema = {"type": "struct", "fields": [{"name": "f", "type": typ, "nullable": True, "metadata": meta}]}
    conf = {"delta.enableTypeWidening": "true", "delta.enableChangeDataFeed": "true"}
    md = {"id": "x", "format": {"provider": "parquet", "options": {}}, "partitionColumns": []}
    return {"metaData": md | {"configuration": conf, "schemaString": json.dumps(schema)}}


def _one_value_stats(v: float) -> str:
    return json.dumps({"numRecords": 1, "minValues": {"f": v}, "maxValues": {"f": v}, "nullCount": {"f": 0}})


def test_bounds_of_files_written_before_a_type_change_are_not_trusted(tmp_path):
    """float -> double widening, a rewrite of the old file, then delta.typeChanges removed (the
    protocol allows that once every live file has the new type). A range from before the change
    still reads the float file, whose stats say -0.1 while its value read as a double is
    -0.10000000149011612: its bounds are not used (the filter pruned its row)."""
    import pyarrow.parquet as pq

    (tmp_path / "_delta_log").mkdir()
    pq.write_table(pa.table({"f": pa.array([-0.1], pa.float32())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"f": pa.array([-0.1], pa.float32()).cast(pa.float64())}), tmp_path / "b.parquet")

    metadata, stats, protocol = _widening_metadata, _one_value_stats, WIDENING_PROTOCOL
    commits = [
        [
            {"protocol": protocol},
            metadata("float", {}),
            {"add": add_action(tmp_path, "a.parquet", stats=stats(-0.1))},
        ],
        [metadata("double", {"delta.typeChanges": [{"fromType": "float", "toType": "double"}]})],
        [
            {"remove": {"path": "a.parquet", "dataChange": False, "deletionTimestamp": 0}},
            {"add": add_action(tmp_path, "b.parquet", dataChange=False, stats=stats(-0.10000000149011612))},
        ],
        [metadata("double", {})],
    ]
    for v, actions in enumerate(commits):
        write_commit(tmp_path, v, actions)
    pred = "f < -0.1000000001"
    got = DeltaTable(str(tmp_path)).changes(0, 3, predicate=pred).to_table()
    assert got.select(["f", "_change_type", "_commit_version"]).to_pylist() == [
        {"f": -0.10000000149011612, "_change_type": "insert", "_commit_version": 0}
    ]
    ctx = new_ctx()
    assert sql(ctx, f"SELECT count(*) FROM table_changes('{tmp_path}', 0, 3) WHERE {pred}").column(
        0
    ).to_pylist() == [1]


def test_retyped_columns_are_the_fields_whose_type_changed():
    """Only bounds of fields whose type changed in the range are dropped: a field added to a
    struct (no bounds in older files) leaves its siblings' bounds in use, and an integer, decimal
    or date widened keeps them (they are the same values in the wider type; a float's are not)."""
    from types import SimpleNamespace

    from delta_datafusion.changes.schema_compat import retyped_columns

    def md(*fields: tuple[str, pa.DataType]) -> SimpleNamespace:
        schema = pa.schema(list(fields))
        return SimpleNamespace(
            physical_schema=schema,
            arrow_schema=schema,
            schema_string=str(schema),
            schema_json={"fields": [{"name": n, "type": str(t)} for n, t in fields]},
            column_mapping_mode="none",
        )

    v0 = md(("id", pa.int32()), ("s", pa.struct([("x", pa.float32())])))
    added = md(("id", pa.int32()), ("s", pa.struct([("x", pa.float32()), ("y", pa.int32())])))
    widened = md(("id", pa.int64()), ("s", pa.struct([("x", pa.float64()), ("y", pa.int32())])))
    assert retyped_columns([(0, v0), (1, added)]) == set()
    assert retyped_columns([(0, v0), (1, added), (2, widened)]) == {("s", "x")}
    as_text = md(("id", pa.string()), ("s", pa.struct([("x", pa.float64()), ("y", pa.int32())])))
    assert retyped_columns([(0, v0), (1, as_text)]) == {("id",), ("s", "x")}


# --------------------------------------------------------------------------------------------
# deletion vectors
# --------------------------------------------------------------------------------------------


def test_deletion_vector_table(copy_corpus_table):
    p = copy_corpus_table("cdf-table-with-dv")
    scan = DeltaTable(str(p)).changes(0)
    files = scan.files()
    kinds = files.column("kind").to_pylist()
    assert "dv_update" in kinds
    dv_rows = files.filter(pc.equal(files.column("kind"), "dv_update")).to_pylist()
    for r in dv_rows:
        # only the rows whose deletion state changed: the selection is a deletion vector
        assert r["only_rows"] is not None
    got = scan.to_table()
    c = counts(got)

    # commit 5 swaps DVs: row 3 newly deleted, rows 0 and 5 un-deleted; commit 6 drops the DV (3 back)
    def changed(v):
        t = got.filter(pc.equal(got.column("_commit_version"), v))
        return sorted(zip(t.column("value").to_pylist(), t.column("_change_type").to_pylist(), strict=True))

    assert changed(5) == [(0, "insert"), (3, "delete"), (5, "insert")]
    assert changed(6) == [(3, "insert")]
    assert changed(1) == [(0, "delete"), (9, "delete")]
    assert sum(c.values()) == 24
    # the same through SQL, with a filter on the DV commits
    ctx = new_ctx()
    q = f"SELECT value, _change_type FROM table_changes('{p}', 0) WHERE _commit_version >= 6"
    assert sql(ctx, q).to_pylist() == [{"value": 3, "_change_type": "insert"}]


def test_removed_file_with_dv_contributes_live_rows(tmp_path, copy_corpus_table):
    """A removed file with a DV deletes only its rows that were still live."""
    p = copy_corpus_table("table-with-dv-small")
    t = DeltaTable(str(p))
    snap = t.snapshot()
    files = snap.raw_files.to_pylist()
    assert files and files[0]["deletionVector"]
    f = files[0]
    v = snap.version + 1
    md = snap.metadata
    conf = dict(md.configuration)
    conf["delta.enableChangeDataFeed"] = "true"
    meta = {
        "metaData": {
            "id": md.id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": md.schema_string,
            "partitionColumns": list(md.partition_columns),
            "configuration": conf,
            "createdTime": md.created_time,
        }
    }
    # Spark adds the changeDataFeed writer feature with the property (without it the property
    # binds no writer: see test_cdf_protocol_rules.py)
    proto = snap.protocol
    upgraded = {
        "protocol": {
            "minReaderVersion": proto.min_reader_version,
            "minWriterVersion": proto.min_writer_version,
            "readerFeatures": sorted(proto.reader_features),
            "writerFeatures": sorted(proto.writer_features | {"changeDataFeed"}),
        }
    }
    write_commit(p, v, [{"commitInfo": {"operation": "SET TBLPROPERTIES"}}, upgraded, meta])
    remove = {
        "remove": {
            "path": f["path"].replace(" ", "%20"),
            "deletionTimestamp": 1,
            "dataChange": True,
            "partitionValues": {},
            "size": f["size"],
            "deletionVector": f["deletionVector"],
        }
    }
    write_commit(p, v + 1, [{"commitInfo": {"operation": "DELETE"}}, remove])
    live = snap.scan().to_table()
    got = ours(p, v + 1)
    assert got.num_rows == live.num_rows
    assert set(got.column("_change_type").to_pylist()) == {"delete"}
    assert sorted(got.column(live.column_names[0]).to_pylist()) == sorted(live.column(0).to_pylist())
    # the range starting before CDF was enabled is refused, naming the version
    with pytest.raises(CdfNotEnabledError, match=f"version {v - 1}"):
        ours(p, v - 1)


# --------------------------------------------------------------------------------------------
# change feed enablement, ranges, schema changes
# --------------------------------------------------------------------------------------------


def test_cdf_disabled_inside_range(flat_table):
    DLTable(str(flat_table)).alter.set_table_properties({"delta.enableChangeDataFeed": "false"})  # v6
    write_deltalake(str(flat_table), rows(range(900, 905), 7), mode="append")  # v7
    with pytest.raises(CdfNotEnabledError, match="version 6"):
        ours(flat_table, 0)
    with pytest.raises(CdfNotEnabledError, match="version 7"):
        ours(flat_table, 7)
    assert ours(flat_table, 0, 5).num_rows > 0
    ctx = new_ctx()
    with pytest.raises(Exception, match=r"CdfNotEnabledError.*version 6"):
        sql(ctx, f"SELECT * FROM table_changes('{flat_table}', 2)")


def test_enabled_later(tmp_path):
    p = tmp_path / "later"
    write_deltalake(str(p), rows(range(5)))
    DLTable(str(p)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})  # v1
    write_deltalake(str(p), rows(range(5, 8), 2), mode="append")  # v2
    with pytest.raises(CdfNotEnabledError, match="version 0"):
        ours(p, 0)
    assert counts(ours(p, 1)) == {(2, "insert"): 3}


def test_range_errors(flat_table):
    t = DeltaTable(str(flat_table))
    with pytest.raises(InvalidRangeError, match="start version 4 is after end version 2"):
        t.changes(4, 2)
    with pytest.raises(VersionNotFoundError, match="start version 9 is after the latest version 5"):
        t.changes(9)
    with pytest.raises(VersionNotFoundError, match="end version 9 is after the latest version 5"):
        t.changes(1, 9)
    with pytest.raises(InvalidRangeError, match="negative"):
        t.changes(-1)
    ctx = new_ctx()
    for q, cls in [
        (f"SELECT * FROM table_changes('{flat_table}', 4, 2)", "InvalidRangeError"),
        (f"SELECT * FROM table_changes('{flat_table}', 9)", "VersionNotFoundError"),
        (f"SELECT * FROM table_changes('{flat_table}')", "takes 2 or 3 arguments"),
        (f"SELECT * FROM table_changes('{flat_table}', 1.5)", "must be a version"),
        (f"SELECT * FROM table_changes('{flat_table}', NULL)", "start must not be NULL"),
    ]:
        with pytest.raises(Exception, match=cls):
            sql(ctx, q)
    # one statement may read several feeds: each range error names its table
    dd.register_table(ctx, "flat", str(flat_table))
    for bad, what in [
        ("4, 2", f"start version 4 is after end version 2 of {t.storage.root_uri}"),
        ("NULL", "table_changes on flat: start must not be NULL"),
        ("1.5", "table_changes on flat: start must be a version"),
        ("id", "table_changes on flat: start must be a literal version"),
    ]:
        q = f"SELECT * FROM table_changes('flat', 0) a JOIN table_changes('flat', {bad}) b ON a.id = b.id"
        with pytest.raises(DeltaError, match=what):
            try:
                sql(ctx, q)
            except Exception as e:
                raise dd.from_datafusion(e) from e
    # NULL end = latest
    assert sql(ctx, f"SELECT count(*) FROM table_changes('{flat_table}', 5, NULL)").column(0).to_pylist() == [
        10
    ]


def test_cleaned_up_log(part_table):
    # Commits before the checkpoint (v4) are gone: the range must start at or after it
    for v in range(0, 4):
        commit_path(part_table, v).unlink()
    with pytest.raises(VersionNotFoundError, match="not available"):
        ours(part_table, 2)
    assert ours(part_table, 4).num_rows == dl_changes(part_table, 4).num_rows


def test_cleaned_up_log_error_says_where_a_feed_can_start(part_table):
    """Commits 0..2 gone, 3 left, the checkpoint at 4: commit 3 is listed but the table's state
    there is not known, so the error says the feed can start at 4 (it listed 3 as available,
    and a feed from 3 failed again)."""
    for v in range(0, 3):
        commit_path(part_table, v).unlink()
    with pytest.raises(
        VersionNotFoundError,
        match=r"commits available: 3\.\.\d+; a change feed can start at version 4 or later",
    ):
        ours(part_table, 0)
    with pytest.raises(VersionNotFoundError):
        ours(part_table, 3)
    assert ours(part_table, 4).num_rows == dl_changes(part_table, 4).num_rows


def test_cleaned_up_log_without_a_checkpoint_error_says_no_feed_can_be_read(flat_table):
    """Commits 0..1 gone and no checkpoint: no version's state is known, so no start works; the
    error said only which commits are listed (h23g)."""
    for v in range(0, 2):
        commit_path(flat_table, v).unlink()
    with pytest.raises(
        VersionNotFoundError, match=r"commits available: 2\.\.\d+; with commit 0 gone .* no feed"
    ):
        ours(flat_table, 0)
    with pytest.raises(VersionNotFoundError):
        ours(flat_table, 2)


def test_added_column_reads_null_for_older_changes(flat_table):
    DLTable(str(flat_table)).alter.add_columns(deltalake.Field("extra", "string"))  # v6
    t = rows(range(800, 803), 7).append_column("extra", pa.array(["a", "b", "c"]))
    write_deltalake(str(flat_table), t, mode="append")  # v7
    got = ours(flat_table, 0)
    assert got.schema.names[:5] == ["id", "part", "value", "name", "extra"]
    new = got.filter(pc.equal(got.column("_commit_version"), 7))
    assert sorted(new.column("extra").to_pylist()) == ["a", "b", "c"]
    old = got.filter(pc.less(got.column("_commit_version"), 7))
    assert old.column("extra").null_count == old.num_rows > 0


def test_incompatible_schema_change(tmp_path):
    p = tmp_path / "schema"
    write_deltalake(str(p), rows(range(10)), configuration=CDF)  # v0
    write_deltalake(str(p), rows(range(10, 15), 1), mode="append")  # v1
    changed = rows(range(20, 25), 2)
    changed = changed.set_column(2, "value", pa.array([str(x) for x in changed.column("value").to_pylist()]))
    write_deltalake(str(p), changed, mode="overwrite", schema_mode="overwrite")  # v2: value long -> string
    write_deltalake(str(p), changed, mode="append")  # v3
    with pytest.raises(
        ChangeDataFeedError,
        match=r"column 'value' cannot be read for changes of versions 0\.\.1: its schema type changed",
    ):
        ours(p, 0)
    # columns that did not change are fine, and so is a range after the change
    assert ours(p, 0, columns=["id", "_change_type"]).num_rows == 10 + 5 + (15 + 5) + 5
    assert ours(p, 3).column("value").type == pa.string()
    # a range starting at the schema-changing commit: the files it removes were written under the
    # old schema (deltalake's load_cdf casts them: long 10 -> '10'; a filter on the column then
    # failed inside pyarrow): refused the same way, unless only the inserts are read
    for q in (
        f"SELECT value FROM table_changes('{p}', 2, 2)",
        f"SELECT id FROM table_changes('{p}', 2, 2) WHERE value = '20'",
    ):
        with pytest.raises(Exception, match="files removed at version 2 .possibly written before version 2."):
            sql(new_ctx(), q)
    inserted = sql(new_ctx(), f"SELECT value FROM table_changes('{p}', 2, 2) WHERE _change_type = 'insert'")
    assert inserted.column("value").type == pa.string() and inserted.num_rows == 5
    assert sql(new_ctx(), f"SELECT count(*) FROM table_changes('{p}', 2, 2)").column(0).to_pylist() == [20]
    ctx = new_ctx()
    with pytest.raises(Exception, match="ChangeDataFeedError"):
        sql(ctx, f"SELECT value FROM table_changes('{p}', 0)")
    assert sql(ctx, f"SELECT count(id) FROM table_changes('{p}', 0)").column(0).to_pylist() == [40]
    # files removed by the schema-changing commit may be older: refused too
    with pytest.raises(Exception, match="files removed at version 2"):
        sql(ctx, f"SELECT value FROM table_changes('{p}', 0) WHERE _commit_version >= 2")
    # pruning by version (or change type) makes the column readable
    got = sql(
        ctx,
        f"SELECT value FROM table_changes('{p}', 0) WHERE _commit_version >= 2 AND _change_type = 'insert'",
    )
    assert got.num_rows == 10
    assert sql(ctx, f"SELECT value FROM table_changes('{p}', 3)").num_rows == 5


def test_filter_on_a_column_that_became_a_partition_column(tmp_path):
    """Files written before ``p`` became a partition column carry no partition value for it: a
    filter on ``p`` must not prune them as if ``p`` were NULL there (their rows vanished
    silently); it is refused like reading ``p``, unless version or change type exclude them."""
    p = str(tmp_path / "repart")
    write_deltalake(p, pa.table({"id": [1, 2], "p": ["a", "b"]}), configuration=CDF)  # v0
    write_deltalake(
        p, pa.table({"id": [3], "p": ["c"]}), mode="overwrite", schema_mode="overwrite", partition_by=["p"]
    )  # v1
    ctx = new_ctx()
    for start in (0, 1):
        src = f"table_changes('{p}', {start}, 1)"
        for q in (
            f"SELECT id, p FROM {src}",
            f"SELECT id FROM {src} WHERE p = 'a'",
            f"SELECT count(*) FROM {src} WHERE p IN ('a', 'b')",
            f"SELECT id FROM {src} WHERE p <> 'c'",
        ):
            with pytest.raises(Exception, match="ChangeDataFeedError.*column 'p' cannot be read"):
                sql(ctx, q)
        got = sql(
            ctx, f"SELECT id, p FROM {src} WHERE p = 'c' AND _change_type = 'insert' AND _commit_version = 1"
        ).to_pylist()
        assert got == [{"id": 3, "p": "c"}]
    with pytest.raises(ChangeDataFeedError, match="column 'p' cannot be read"):
        DeltaTable(p).changes(0, 1, predicate="p = 'a'").to_table()


def test_partition_column_added_by_an_overwrite_is_null_for_older_changes(tmp_path):
    """A partition column that did not exist before the commit adding it is NULL for the rows
    of files written earlier (removed by that commit, or changed before it), like any column
    added later; it was refused as if the column had been repartitioned."""
    p = str(tmp_path / "newpart")
    write_deltalake(p, pa.table({"id": [1, 2]}), configuration=CDF)  # v0
    write_deltalake(p, pa.table({"id": [3]}), mode="append")  # v1
    write_deltalake(
        p,
        pa.table({"id": [4], "k": pa.array([1], pa.int8())}),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=["k"],
    )  # v2: adds partition column k, removes the files of ids 1..3
    ctx = new_ctx()
    got = sql(ctx, f"SELECT id, k, _change_type FROM table_changes('{p}', 2, 2) ORDER BY id").to_pylist()
    assert got == [
        {"id": 1, "k": None, "_change_type": "delete"},
        {"id": 2, "k": None, "_change_type": "delete"},
        {"id": 3, "k": None, "_change_type": "delete"},
        {"id": 4, "k": 1, "_change_type": "insert"},
    ]
    src = f"table_changes('{p}', 0)"
    assert sorted(sql(ctx, f"SELECT id FROM {src} WHERE k IS NULL").column(0).to_pylist()) == [
        1,
        1,
        2,
        2,
        3,
        3,
    ]
    assert sql(ctx, f"SELECT id FROM {src} WHERE k = 1").column(0).to_pylist() == [4]
    assert sql(ctx, f"SELECT count(*) FROM {src} WHERE k IS NOT NULL").column(0).to_pylist() == [1]
    assert sorted(DeltaTable(p).changes(0, 2, predicate="k IS NULL").to_table().column("id").to_pylist()) == [
        1,
        1,
        2,
        2,
        3,
        3,
    ]


def test_removes_without_stats_take_those_of_the_files_add(tmp_path):
    """deltalake writes removes without statistics: the add of the same file in the range gives
    them, so counts need no open of the removed file (vacuumed here) and filters prune it."""
    p = str(tmp_path / "vac")
    write_deltalake(p, pa.table({"id": list(range(10))}), configuration=CDF)  # v0
    write_deltalake(p, pa.table({"id": list(range(10, 20))}), mode="overwrite")  # v1: removes v0's file
    removed = [
        a["remove"] for a in map(json.loads, commit_path(p, 1).read_text().splitlines()) if "remove" in a
    ]
    assert len(removed) == 1 and "stats" not in removed[0]
    DLTable(p).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert not (Path(p) / removed[0]["path"]).exists()
    ctx = new_ctx()
    src = f"table_changes('{p}', 0, 1)"
    got = sql(ctx, f"SELECT _change_type, count(*) AS n FROM {src} GROUP BY 1 ORDER BY 1").to_pylist()
    assert got == [{"_change_type": "delete", "n": 10}, {"_change_type": "insert", "n": 20}]
    # the removed file's bounds (0..9) prune it: only v1's file is read
    assert sorted(sql(ctx, f"SELECT id FROM {src} WHERE id >= 15").column(0).to_pylist()) == list(
        range(15, 20)
    )
    # a query that needs the removed file's rows still names it
    with pytest.raises(Exception, match="DataFileNotFoundError"):
        sql(ctx, f"SELECT id FROM {src} WHERE _change_type = 'delete'")


def test_schema_change_error_names_the_version_of_the_change(tmp_path):
    """With another metadata change between (v1 adds a column), the refusal for a column that
    became a partition column at v2 names v2, not where the first schema ended."""
    p = str(tmp_path / "msg")
    write_deltalake(p, pa.table({"id": [1, 2], "p": ["a", "b"]}), configuration=CDF)  # v0
    write_deltalake(p, pa.table({"id": [3], "p": ["c"], "e": ["x"]}), mode="append", schema_mode="merge")
    write_deltalake(
        p,
        pa.table({"id": [4], "p": ["d"], "e": ["y"]}),
        mode="overwrite",
        schema_mode="overwrite",
        partition_by=["p"],
    )  # v2
    with pytest.raises(
        ChangeDataFeedError, match="versions 0..0: its schema partitioning changed at version 2"
    ):
        DeltaTable(p).changes(0, 2).to_table()
    with pytest.raises(Exception, match="partitioning changed at version 2"):
        sql(new_ctx(), f"SELECT p FROM table_changes('{p}', 1, 2)")


def test_schema_change_error_names_the_change_of_its_own_reason(tmp_path):
    """A column retyped at v1 and then no longer partitioned at v2: the refusal for v0's changes
    gives the type change at v1, not the end of every range the column differs in."""
    p = str(tmp_path / "two_changes")
    write_deltalake(p, pa.table({"id": [1], "c": pa.array([5], pa.int64())}), configuration=CDF)  # v0
    write_deltalake(
        p, pa.table({"id": [2], "c": ["x"]}), mode="overwrite", schema_mode="overwrite", partition_by=["c"]
    )  # v1: c a string partition column
    write_deltalake(
        p, pa.table({"id": [3], "c": ["y"]}), mode="overwrite", schema_mode="overwrite", partition_by=["id"]
    )  # v2: c a string data column
    with pytest.raises(ChangeDataFeedError, match="type changed from int64 to string at version 1"):
        DeltaTable(p).changes(0, 2, columns=["c"]).to_table()


def _property_commits(path: str, n: int) -> None:
    """``n`` commits of a metaData action that only sets a table property (same schemaString)."""
    for i in range(n):
        DLTable(path).alter.set_table_properties({"custom.round": str(i)}, raise_if_not_exists=False)


def test_property_only_metadata_commits_parse_each_schema_once(tmp_path, monkeypatch):
    """A range of metaData actions that only set table properties parses each distinct
    schemaString once and compares schemas only where they change: 4,000 such commits of a
    300-column table took 10.5 s and 1.4 GB to plan (every action's schema parsed, checked and
    converted again, and the metadata of every suffix of the range compared)."""
    import delta_datafusion.changes.feed as feed_module
    import delta_datafusion.protocol as protocol_module

    p = str(tmp_path / "props")
    write_deltalake(p, rows(range(10)), configuration=CDF)  # v0
    _property_commits(p, 5)  # v1..v5
    write_deltalake(p, rows(range(10, 15), 1), mode="append")  # v6
    DLTable(p).delete("id < 3")  # v7
    DLTable(p).alter.add_columns(deltalake.Field("extra", "string"))  # v8
    _property_commits(p, 5)  # v9..v13
    extra = rows(range(20, 23), 14).append_column("extra", pa.array(["a", "b", "c"]))
    write_deltalake(p, extra, mode="append")  # v14
    parsed: list[str] = []
    compared: list[int] = []
    parse, compare = protocol_module.parse_schema_string, feed_module.incompatible_columns
    monkeypatch.setattr(
        protocol_module,
        "parse_schema_string",
        lambda text, where, *known: parsed.append(text) or parse(text, where, *known),
    )
    monkeypatch.setattr(
        feed_module,
        "incompatible_columns",
        lambda chain, memo=None: compared.append(len(chain)) or compare(chain, memo),
    )
    got = ours(p, 0)
    assert len(parsed) == len(set(parsed)) == 2  # the schema of v0 and the one of v8
    # one schema change, v8 appending a column: v0..v7's files hold the end's other columns as
    # they are, without a comparison of schemas
    assert compared == []
    # the rows: those before v8 with extra NULL, as deltalake gives them for the range before it
    older = got.filter(pc.less(got.column("_commit_version"), 8)).drop_columns(["_commit_timestamp"])
    assert_same_rows(older, dl_changes(p, 0, 7), "v0..v7")
    assert counts(got) == {(0, "insert"): 10, (6, "insert"): 5, (7, "delete"): 3, (14, "insert"): 3}
    assert got.filter(pc.less(got.column("_commit_version"), 8)).column("extra").null_count == 18
    assert sorted(got.filter(pc.equal(got.column("_commit_version"), 14)).column("extra").to_pylist()) == [
        "a",
        "b",
        "c",
    ]
    assert_matches_deltalake(p, 9)  # a range of property commits and data after the change


def test_schema_change_between_property_only_commits_names_its_versions(tmp_path):
    """The versions a refusal names span the property-only commits around the schema change: the
    schema the older files were written under lasted until the change, whatever was set between."""
    p = str(tmp_path / "retyped")
    write_deltalake(p, rows(range(10)), configuration=CDF)  # v0
    _property_commits(p, 3)  # v1..v3
    changed = rows(range(20, 25), 4)
    changed = changed.set_column(2, "value", pa.array([str(x) for x in changed.column("value").to_pylist()]))
    write_deltalake(p, changed, mode="overwrite", schema_mode="overwrite")  # v4: value long -> string
    _property_commits(p, 3)  # v5..v7
    write_deltalake(p, changed, mode="append")  # v8
    with pytest.raises(
        ChangeDataFeedError,
        match=r"column 'value' cannot be read for changes of versions 0\.\.3: its schema type changed "
        r"from int64 to string at version 4",
    ):
        ours(p, 0)
    got = ours(p, 0, columns=["id", "_change_type", "_commit_version"])
    assert counts(got) == {(0, "insert"): 10, (4, "delete"): 10, (4, "insert"): 5, (8, "insert"): 5}
    assert ours(p, 5).column("value").to_pylist() == [str(x) for x in changed.column("value").to_pylist()]


def _appended_columns(path: str, n: int) -> None:
    """v0 (``id``) and ``n - 1`` commits each appending a column ``c<v>`` (schema merge)."""
    write_deltalake(path, pa.table({"id": pa.array([0], pa.int64())}), configuration=CDF)
    for v in range(1, n):
        data = {"id": pa.array([v], pa.int64()), f"c{v}": pa.array([v * 10], pa.int64())}
        write_deltalake(path, pa.table(data), mode="append", schema_mode="merge")


def test_commits_appending_columns_are_checked_and_converted_once_each(tmp_path, monkeypatch):
    """A range of k commits each appending a column: each commit's new column is checked and
    converted once, and no schemas are compared (every field of every schema was converted and
    the end's columns traced back through every suffix of the range: 1,000 such commits took
    14 s to plan). The rows: each version's own column set, the columns added later NULL."""
    import delta_datafusion.changes as changes_module
    import delta_datafusion.changes.feed as feed_module
    import delta_datafusion.schema as schema_module

    n = 12
    p = str(tmp_path / "appended")
    _appended_columns(p, n)
    changes_module.clear_cache()  # the schemas are parsed here
    converted: list[str] = []
    compared: list[int] = []
    convert, compare = schema_module.delta_field_to_arrow, feed_module.incompatible_columns
    monkeypatch.setattr(
        schema_module, "delta_field_to_arrow", lambda f, *a: converted.append(f["name"]) or convert(f, *a)
    )
    monkeypatch.setattr(
        feed_module,
        "incompatible_columns",
        lambda chain, memo=None: compared.append(len(chain)) or compare(chain, memo),
    )
    got = ours(p, 0)
    # logical and physical: id at v0, then each version's appended column
    assert sorted(converted) == sorted(["id", "id"] + [f"c{v}" for v in range(1, n) for _ in range(2)])
    assert compared == []
    assert got.column_names == ["id"] + [f"c{v}" for v in range(1, n)] + [
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
    ]
    assert got.sort_by("_commit_version").drop_columns(["_commit_timestamp"]).to_pylist() == [
        {
            "id": v,
            **{f"c{c}": (v * 10 if c == v else None) for c in range(1, n)},
            "_change_type": "insert",
            "_commit_version": v,
        }
        for v in range(n)
    ]


def test_schema_appending_columns_reuses_only_the_same_arrow_fields():
    """A schema appending a column to the one parsed before converts only that column, but only
    where the shared fields are the same JSON: ``1`` equals ``true`` in Python, while the Arrow
    metadata of the field is "1" for one and "true" for the other."""
    from delta_datafusion.protocol import Metadata, clear_schema_cache
    from delta_datafusion.schema import to_arrow_schema

    def action(value, *more: str) -> dict:
        fields = [{"name": "a", "type": "long", "nullable": True, "metadata": {"k": value}}]
        fields += [{"name": m, "type": "string", "nullable": True, "metadata": {}} for m in more]
        text = json.dumps({"type": "struct", "fields": fields})
        return {"id": "t", "schemaString": text, "partitionColumns": [], "configuration": {}}

    clear_schema_cache()
    assert Metadata.from_action(action(1), "v0").arrow_schema.field("a").metadata == {b"k": b"1"}
    appended = Metadata.from_action(action(True, "b"), "v1")
    assert appended.arrow_schema.names == ["a", "b"]
    assert appended.arrow_schema.field("a").metadata == {b"k": b"true"}
    Metadata.from_action(action("x", "b"), "v2")
    again = Metadata.from_action(action("x", "b", "c", "d"), "v3")  # converted from v2's
    assert again.arrow_schema.equals(to_arrow_schema(again.schema_json), check_metadata=True)
    assert again.physical_schema.equals(
        to_arrow_schema(again.schema_json, physical=True), check_metadata=True
    )


def test_columns_appended_around_an_incompatible_change_keep_their_refusals(tmp_path):
    """Commits appending columns before and after a retyping: the retyped column is refused for
    every version before the retyping (those appending columns too), one added just before it
    only for the versions it existed in, and the others read (NULL before they were added)."""
    p = str(tmp_path / "retyped")
    write_deltalake(p, pa.table({"id": [0], "v": pa.array([1], pa.int64())}), configuration=CDF)  # v0
    write_deltalake(
        p, pa.table({"id": [1], "a": pa.array([2], pa.int64())}), mode="append", schema_mode="merge"
    )
    # v2: v and a retyped to strings (an overwrite), v3 and v4 append b and c
    write_deltalake(
        p, pa.table({"id": [2], "v": ["x"], "a": ["y"]}), mode="overwrite", schema_mode="overwrite"
    )
    write_deltalake(
        p, pa.table({"id": [3], "b": pa.array([4], pa.int64())}), mode="append", schema_mode="merge"
    )
    write_deltalake(
        p, pa.table({"id": [4], "c": pa.array([5], pa.int64())}), mode="append", schema_mode="merge"
    )
    feed = load_change_feed(DeltaTable(p), 0)
    assert {c: [(v, last) for v, last, _ in r] for c, r in feed.incompatible.items()} == {
        "v": [(0, 0), (1, 1)],
        "a": [(1, 1)],
    }
    assert all(
        "type changed from int64 to string" in why for r in feed.incompatible.values() for *_, why in r
    )
    with pytest.raises(
        ChangeDataFeedError,
        match=r"column 'v' cannot be read for changes of versions 0\.\.0: its schema type changed from int64 to string at version 2",
    ):
        ours(p, 0, columns=["id", "v"])
    with pytest.raises(
        ChangeDataFeedError,
        match=r"column 'a' cannot be read for changes of versions 1\.\.1: its schema type changed from int64 to string at version 2",
    ):
        ours(p, 0, columns=["id", "a"])
    assert ours(p, 0, columns=["a"], predicate="_commit_version = 0").column("a").to_pylist() == [None]
    got = ours(p, 0, columns=["id", "b", "c", "_change_type", "_commit_version"])
    assert counts(got) == {
        (0, "insert"): 1,
        (1, "insert"): 1,
        (2, "delete"): 2,
        (2, "insert"): 1,
        (3, "insert"): 1,
        (4, "insert"): 1,
    }
    assert sorted(got.filter(pc.is_valid(got.column("b"))).column("id").to_pylist()) == [3]
    assert sorted(got.filter(pc.is_valid(got.column("c"))).column("id").to_pylist()) == [4]
    assert ours(p, 1, columns=["a"], predicate="_commit_version = 3").column("a").to_pylist() == [None]


def test_column_mapping_removed_in_the_range(tmp_path):
    """Column mapping removed at v1 (name -> none, files rewritten, as Spark's REMOVE COLUMN
    MAPPING does): v0's file and partition values hold the columns under their physical names.
    Reading them under v1's names gave NULL for the partition column and the data column; the
    columns are refused for v0's changes, and read from v1 on."""
    root = tmp_path / "cm"
    (root / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"col-a": pa.array([10, 20], pa.int64())}), root / "x.parquet")
    pq.write_table(pa.table({"a": pa.array([10, 20], pa.int64())}), root / "y.parquet")

    def field(name: str, mapped: int | None) -> dict:
        meta = (
            {}
            if mapped is None
            else {"delta.columnMapping.id": mapped, "delta.columnMapping.physicalName": f"col-{name}"}
        )
        return {"name": name, "type": "long", "nullable": True, "metadata": meta}

    def metadata(mode: str) -> dict:
        mapped = mode != "none"
        fields = [field("a", 1 if mapped else None), field("p", 2 if mapped else None)]
        conf = {**CDF, "delta.columnMapping.mode": mode}
        if mapped:
            conf["delta.columnMapping.maxColumnId"] = "2"
        return {
            "metaData": {
                "id": "t1",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": ["p"],
                "configuration": conf,
                "createdTime": 0,
            }
        }

    def file(path: str, key: str, col: str, change: bool) -> dict:
        stats = {"numRecords": 2, "minValues": {col: 10}, "maxValues": {col: 20}, "nullCount": {col: 0}}
        return {
            "path": path,
            "partitionValues": {key: "1"},
            "size": (root / path).stat().st_size,
            "modificationTime": 0,
            "dataChange": change,
            "stats": json.dumps(stats),
        }

    commits = [
        [
            {"commitInfo": {"timestamp": 1000}},
            {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
            metadata("name"),
            {"add": file("x.parquet", "col-p", "col-a", True)},
        ],
        [
            {"commitInfo": {"timestamp": 2000}},
            metadata("none"),
            {"remove": {**file("x.parquet", "col-p", "col-a", False), "deletionTimestamp": 2000}},
            {"add": file("y.parquet", "p", "a", False)},
        ],
    ]
    for v, actions in enumerate(commits):
        commit_path(root, v).write_text("".join(json.dumps(a) + "\n" for a in actions))
    table = DeltaTable(str(root))
    assert table.snapshot(version=0).scan().to_table().to_pylist() == [{"a": 10, "p": 1}, {"a": 20, "p": 1}]
    for column in ("p", "a"):
        with pytest.raises(
            ChangeDataFeedError,
            match=f"column .{column}. cannot be read.*field {column} was stored as .col-{column}.",
        ):
            table.changes(0, 1, columns=[column]).to_table()
    assert table.changes(0, 1, columns=["_change_type", "_commit_version"]).to_table().num_rows == 2
    assert table.changes(1, 1, columns=["a", "p"]).to_table().num_rows == 0  # dataChange=false only


def test_nested_field_renamed_under_a_mapping_since_removed(tmp_path):
    """Column mapping removed at v1 (name -> none): v0's file stores nested field st.b under its
    physical name 'a' (renamed under the mapping), while the top-level name 'st' is unchanged.
    Reading it under v1's names gave st.b NULL; st is refused for v0's changes. An overwrite
    that drops a nested field without any mapping still reads the field that is left."""
    proto = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    table = _mapping_log(
        tmp_path / "nested",
        {
            "x.parquet": pa.table({"st": pa.array([{"a": 20}])}),
            "y.parquet": pa.table({"st": pa.array([{"b": 20}])}),
        },
        [
            [proto, _mapped_metadata("name", [("st", 1, "st", [("b", 2, "a", [])])]), {"add": "x.parquet"}],
            [
                _mapped_metadata("none", [("st", 1, "st", [("b", 2, "b", [])])]),
                {"remove": "x.parquet"},
                {"add": "y.parquet", "change": False},
            ],
        ],
    )
    assert table.snapshot(version=0).scan().to_table().to_pylist() == [{"st": {"b": 20}}]
    assert table.changes(0, 0, columns=["st"]).to_table().to_pylist() == [{"st": {"b": 20}}]
    with pytest.raises(ChangeDataFeedError, match="column .st. cannot be read.*field st.b was stored as .a."):
        table.changes(0, 1, columns=["st"]).to_table()
    # no mapping anywhere: an overwrite dropping st.c leaves st.b readable in v0's changes
    p = str(tmp_path / "dropped")
    first = pa.table({"st": pa.array([{"b": 1, "c": 2}])})
    write_deltalake(p, first, configuration=CDF)
    write_deltalake(p, pa.table({"st": pa.array([{"b": 3}])}), mode="overwrite", schema_mode="overwrite")
    got = DeltaTable(p).changes(0, 1, columns=["st", "_change_type"]).to_table().to_pylist()
    assert sorted(got, key=str) == sorted(
        [
            {"st": {"b": 1}, "_change_type": "insert"},
            {"st": {"b": 1}, "_change_type": "delete"},
            {"st": {"b": 3}, "_change_type": "insert"},
        ],
        key=str,
    )


def test_column_mapping_table(copy_corpus_table):
    p = copy_corpus_table("cdf-column-mapping-name-mode")
    got = ours(p, 1)
    assert got.schema.names[:3] == ["id", "name", "value"]
    ctx = new_ctx()
    q = f"SELECT name, _change_type FROM table_changes('{p}', 1) WHERE id = 2 ORDER BY _commit_version, _change_type"
    res = sql(ctx, q).to_pylist()
    assert res and all(r["name"] == "Bob" for r in res)


# --------------------------------------------------------------------------------------------
# Python API
# --------------------------------------------------------------------------------------------


def test_python_api(part_table):
    t = DeltaTable(str(part_table))
    scan = t.changes(
        0, 4, columns=["id", "_change_type", "_commit_version"], predicate=pc.field("part") == "p1"
    )
    reader = scan.to_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == ["id", "_change_type", "_commit_version"]
    got = reader.read_all()
    full = ours(part_table, 0, 4)
    exp = full.filter(pc.equal(full.column("part"), "p1")).select(["id", "_change_type", "_commit_version"])
    assert_same_rows(got, exp, "python api")
    # commit order
    versions = got.column("_commit_version").to_pylist()
    assert versions == sorted(versions)
    files = scan.files()
    assert files.column_names[:4] == ["kind", "change_type", "version", "timestamp"]
    assert set(files.column("kind").to_pylist()) <= {"cdc", "add", "remove", "dv_update"}
    pvs = files.column("partition_values").to_pylist()
    assert pvs and all(pv["part"] == "p1" for pv in pvs)
    assert scan.to_table().num_rows == got.num_rows
    with pytest.raises(DeltaError, match="unknown column"):
        t.changes(0, columns=["nope"])
    # a repeated column is refused as Snapshot.scan refuses it (it read two `id` columns, or
    # failed in pyarrow for a commit with both an add and a remove)
    with pytest.raises(DeltaError, match=r"columns \['id'\] are listed more than once"):
        t.changes(0, columns=["id", "_change_type", "id"])


def test_to_reader_streams(flat_table):
    scan = DeltaTable(str(flat_table)).changes(0)
    reader = scan.to_reader()
    first = reader.read_next_batch()
    assert first.num_rows > 0 and first.schema.names == scan.schema.names
    rest = sum(b.num_rows for b in reader)
    assert first.num_rows + rest == scan.to_table().num_rows


def test_python_api_reads_commits_in_one_ordered_scan(flat_table, monkeypatch):
    """Commits whose files are read whole (cdc files, appends) are one pyarrow scan, whose batches
    come file after file: commit order is kept without a scan per commit. A filtered feed still
    reads commit after commit."""
    from delta_datafusion.read import UnitReader

    calls = []
    real = UnitReader.read

    def spy(self, units, *args, **kw):
        calls.append(sorted({u.constants["_commit_version"] for u in units}))
        return real(self, units, *args, **kw)

    monkeypatch.setattr(UnitReader, "read", spy)
    got = DeltaTable(str(flat_table)).changes(0).to_table()
    assert calls == [[0, 1, 2, 3, 4, 5]]
    versions = got.column("_commit_version").to_pylist()
    assert versions == sorted(versions)
    assert_same_rows(got, ours(flat_table, 0), "one ordered scan")
    calls.clear()
    filtered = DeltaTable(str(flat_table)).changes(0, predicate=pc.field("id") < 300).to_table()
    assert calls == [[0], [1], [2], [3], [4]]  # v5 (ids 300..309) pruned
    versions = filtered.column("_commit_version").to_pylist()
    assert versions == sorted(versions)


def test_change_columns_are_one_array_per_value_sliced_for_each_batch(tmp_path):
    """The columns a file's rows take from its unit (partition values, change type, version,
    timestamp) were filled by pyarrow's scanner from each fragment's guarantee: a new array per
    batch (the cdf benchmark's full feed, 2M rows: ~30 ms of CPU). Each value's array is now made
    once per read and each batch takes a slice of it; the rows are the same."""
    p = tmp_path / "t"
    write_deltalake(str(p), rows(range(0, 90)), partition_by=["part"], configuration=CDF)  # v0
    write_deltalake(str(p), rows(range(90, 120), 1), mode="append")  # v1
    DLTable(str(p)).delete("part = 'p2'")  # v2: removes of files v0 and v1 added (same locations)
    assert_matches_deltalake(p, 0)
    # v0 and v1 are one read (v2 reads their files again: another); the first file's first rows
    # are streamed (made apart)
    batches = list(DeltaTable(str(p)).changes(0, 1).to_batches())[1:]
    assert len(batches) == 5

    def buffer(batch: pa.RecordBatch, column: str) -> int:
        return batch.column(column).buffers()[-1].address  # data (strings: their bytes)

    for column, key in [
        ("_commit_version", "_commit_version"),
        ("_change_type", "_change_type"),
        ("part", "part"),
        ("_commit_timestamp", "_commit_version"),
    ]:
        seen: dict = {}  # value -> (the most rows of a batch so far, its arrays' addresses)
        shared = 0
        for b in batches:
            most, addresses = seen.setdefault(b.column(key)[0].as_py(), (0, set()))
            if b.num_rows <= most:  # a slice of the array an earlier batch took
                assert buffer(b, column) in addresses, (column, b.column(key)[0])
                shared += 1
            addresses.add(buffer(b, column))
            seen[b.column(key)[0].as_py()] = (max(most, b.num_rows), addresses)
        assert shared >= 2, column


def test_streamed_first_rows_take_the_reads_value_arrays(tmp_path):
    """The first file's first rows, streamed before the scan (for a LIMIT), made every partition
    value and constant anew with pa.repeat, all of the table's, then kept the requested ones:
    they now take the read's value arrays (made once, see read/constants.py), only the columns
    asked for. Three files of 30 rows of one commit: the streamed batch and both scanned ones
    slice the same array of each change column."""
    p = tmp_path / "t"
    write_deltalake(str(p), rows(range(0, 90)), partition_by=["part"], configuration=CDF)  # v0
    scan = DeltaTable(str(p)).changes(0, 0)
    batches = list(scan.to_batches())
    assert [b.num_rows for b in batches] == [30, 30, 30]
    for column in ["_change_type", "_commit_version", "_commit_timestamp"]:
        data = {b.column(column).buffers()[-1].address for b in batches}  # strings: their bytes
        assert len(data) == 1, column
    # projected: only the columns asked for, in their order
    projected = list(DeltaTable(str(p)).changes(0, 0, columns=["_commit_version", "id"]).to_batches())
    assert [b.schema.names for b in projected] == [["_commit_version", "id"]] * 3
    assert sorted(pa.Table.from_batches(projected).column("id").to_pylist()) == list(range(90))


def test_value_arrays_a_read_keeps_are_bounded(monkeypatch):
    """The value arrays a read keeps for its next batches stay under CACHED_BYTES, the oldest
    going first (a scan over many partitions would otherwise keep one array per value)."""
    from delta_datafusion.read import constants
    from delta_datafusion.scan_unit import ScanUnit

    monkeypatch.setattr(constants, "CACHED_BYTES", 3 * 8 * 1000)
    columns = constants.ConstantColumns(["p"], [pa.field("p", pa.int64())], [], ["p"])
    rows_only = pa.record_batch({"x": pa.array(range(1000))}).select([])
    for v in range(10):
        got = columns.complete(rows_only, ScanUnit(f"f{v}", 1, {"p": v}))
        assert got.column(0).to_pylist() == [v] * 1000
        assert sum(a.nbytes for _, a in columns.values._arrays.values()) <= constants.CACHED_BYTES
    assert len(columns.values._arrays) == 3


def test_value_arrays_of_numbers_times_and_strings_are_filled_not_repeated(monkeypatch):
    """pa.repeat builds a value's array value by value: the full feed made ~140 of them a query
    (each commit's version and timestamp, change types, partition values; 2 % of its
    instructions). Numbers, dates, timestamps and strings are now one numpy fill of the value's
    stored bits; the arrays are equal to pa.repeat's (the bits of -0.0 kept)."""
    import datetime as dt

    from delta_datafusion.read import constants
    from delta_datafusion.scan_unit import ScanUnit

    ts = pa.timestamp("us", tz="UTC")
    cases = [
        ("_commit_version", pa.int64(), 54),
        ("_commit_timestamp", ts, dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=dt.timezone.utc)),
        ("_change_type", pa.string(), "update_postimage"),
        ("part", pa.string(), ""),
        ("b", pa.binary(), b"\x00\xff"),
        ("f", pa.float64(), -0.0),
        ("d", pa.date32(), dt.date(2024, 2, 29)),
        ("i", pa.int8(), -128),
    ]
    expected = [pa.repeat(pa.scalar(v, t), 1000) for _, t, v in cases]

    def no_repeat(*args, **kwargs):
        raise AssertionError("pa.repeat called")

    monkeypatch.setattr(pa, "repeat", no_repeat)
    names = [name for name, _, _ in cases]
    columns = constants.ConstantColumns(names, [pa.field(n, t) for n, t, _ in cases], [], names)
    rows = pa.record_batch({"x": pa.array(range(1000))}).select([])
    got = columns.complete(rows, ScanUnit("f", 1, {n: v for n, _, v in cases}))
    got.validate(full=True)
    for (name, _, _), want in zip(cases, expected, strict=True):
        assert got.column(name).equals(want), name
    assert np.signbit(got.column("f").to_numpy()).all()  # -0.0, not 0.0


def _corrupt_first_page(path: Path) -> None:
    """Overwrite bytes of the file's first column chunk: its footer still reads, its data does not."""
    data = bytearray(path.read_bytes())
    data[100:400] = b"\xab" * 300
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("start", [0, 2])
def test_a_file_that_cannot_be_decoded_is_named_among_the_commits_read_together(tmp_path, start):
    """Commits read whole are one scan (and the first file's first rows are streamed): a file whose
    data cannot be decoded, in an error naming no file, is named (was 'one of 5 data files, the
    first is' another one: pyarrow reads files ahead, so the error's place says nothing)."""
    p = tmp_path / "t"
    for v in range(5):
        ids = range(v * 1000, v * 1000 + 3000)
        data = pa.table({"id": pa.array(ids, pa.int64()), "s": [f"v{v}_{i}" * 3 for i in ids]})
        write_deltalake(str(p), data, mode="append", configuration=CDF if v == 0 else None)
    bad = p / next(a["add"]["path"] for a in map(json.loads, commit_path(p, 2).open()) if "add" in a)
    _corrupt_first_page(bad)
    for read in (
        lambda: DeltaTable(str(p)).changes(start).to_table(),
        DeltaTable(str(p)).snapshot().scan().to_table,
    ):
        with pytest.raises(DeltaError) as info:
            read()
        assert f"version 4: cannot read data file {bad}: " in str(info.value), str(info.value)


# --------------------------------------------------------------------------------------------
# SQL: names, caching, joins
# --------------------------------------------------------------------------------------------


def test_catalog_names_resolve_as_datafusion_does(flat_table, tmp_path):
    """A bare name means what DataFusion resolves it to: a Delta folder catalog table when that
    catalog is the session's default, another table of the same name when that one is."""
    from datafusion import SessionConfig, SessionContext

    shutil.copytree(flat_table, tmp_path / "lake" / "events")
    n = ours(flat_table, 3).num_rows
    ctx = SessionContext(SessionConfig().with_default_catalog_and_schema("lake", "default"))
    dd.register(ctx)
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    for name in ("events", "default.events", "lake.default.events", "'events'"):
        got = sql(ctx, f"SELECT count(*) FROM table_changes({name}, 3)").column(0).to_pylist()
        assert got == [n], name

    # default catalog: DataFusion's own; "events" there is an in-memory table, not the Delta one
    ctx = new_ctx()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    ctx.register_record_batches("events", [[pa.record_batch({"x": [1]})]])
    assert sql(ctx, "SELECT count(*) FROM table_changes(lake.default.events, 3)").column(0).to_pylist() == [n]
    with pytest.raises(Exception, match="TableNotFoundError"):
        sql(ctx, "SELECT * FROM table_changes(events, 3)")


def test_a_name_the_session_has_in_another_case_is_suggested(flat_table, tmp_path):
    """A folder catalog's ``MyT`` cannot be named by an unquoted identifier (SQL reads it as
    ``myt``); the error said only "registered in this session: none"."""
    shutil.copytree(flat_table, tmp_path / "lake" / "MyT")
    ctx = new_ctx()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    n = ours(flat_table, 3).num_rows
    assert sql(ctx, 'SELECT count(*) FROM table_changes(lake.default."MyT", 3)').column(0).to_pylist() == [n]
    with pytest.raises(
        Exception, match='the session has lake.default."MyT": SQL reads unquoted names in lower'
    ):
        sql(ctx, "SELECT * FROM table_changes(lake.default.MyT, 3)")
    with pytest.raises(Exception, match='the session has lake.default."MyT" \\(names differing in case'):
        sql(ctx, "SELECT * FROM table_changes('lake.default.mYt', 3)")
    with pytest.raises(Exception, match=r"registered in this session: none\)\"\)"):  # nothing like it
        sql(ctx, "SELECT * FROM table_changes(lake.default.other, 3)")


def test_the_other_case_hint_opens_no_other_table(flat_table, tmp_path, monkeypatch):
    """The hint lists the catalog folder and opens only a folder named like the argument: the
    catalog's table_names opens every table (40 snapshot loads for a typo in a 40-table lake)."""
    for name in ("MyT", "a", "b", "c"):
        shutil.copytree(flat_table, tmp_path / "lake" / name)
    ctx = new_ctx()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    opened = []
    orig = DeltaTable.snapshot

    def spy(self, *args, **kw):
        opened.append(self.storage.root)
        return orig(self, *args, **kw)

    monkeypatch.setattr(DeltaTable, "snapshot", spy)
    with pytest.raises(Exception, match=r"registered in this session: none\)\"\)"):
        sql(ctx, "SELECT * FROM table_changes(lake.default.other, 3)")
    with pytest.raises(Exception, match='the session has lake.default."MyT": SQL reads'):
        sql(ctx, "SELECT * FROM table_changes(lake.default.MyT, 3)")
    assert opened == []


def test_the_other_case_hint_over_a_users_schema_provider(flat_table):
    """datafusion's SchemaProvider declares table_names a method: the hint calls it (iterating
    the bound method raised TypeError in place of the not-found error)."""
    ctx = new_ctx()
    ctx.register_catalog_provider("c", python_schema_catalog({"Foo"}))
    with pytest.raises(Exception, match='TableNotFoundError.*the session has c.s."Foo": SQL reads'):
        sql(ctx, "SELECT * FROM table_changes(c.s.Foo, 3)")
    with pytest.raises(Exception, match=r"TableNotFoundError.*registered in this session: none\)\"\)"):
        sql(ctx, "SELECT * FROM table_changes(c.s.bar, 3)")


def test_dropped_name_is_not_resolved(flat_table):
    ctx = new_ctx()
    dd.register_table(ctx, "flat", str(flat_table))
    dd.register_table(ctx, "other", str(flat_table))
    assert sql(ctx, "SELECT count(*) FROM table_changes(flat, 3)").num_rows == 1
    ctx.sql("DROP TABLE flat").collect()
    with pytest.raises(Exception, match="TableNotFoundError") as info:
        sql(ctx, "SELECT * FROM table_changes(flat, 3)")
    assert "Delta tables registered in this session: other)" in str(info.value)


def test_name_registered_again_while_planning_says_so(flat_table, monkeypatch):
    """register_table on another thread drops the name and adds it back: a table_changes() that
    looked in between said the table was "not a table of this session" while listing it among
    the registered ones; it says the table was being registered again, to run the query again."""
    from delta_datafusion.datafusion import table_function

    ctx = new_ctx()
    dd.register_table(ctx, "flat", str(flat_table))
    real = table_function._delta_table_named
    looks: list[tuple] = []

    def absent_at_first(session, ref):
        looks.append(ref)
        return False if len(looks) == 1 else real(session, ref)

    monkeypatch.setattr(table_function, "_delta_table_named", absent_at_first)
    with pytest.raises(Exception, match="TableNotFoundError") as info:
        sql(ctx, "SELECT * FROM table_changes(flat, 3)")
    assert "was being registered again (on another thread)" in str(info.value)
    assert "not a table of this session" not in str(info.value)


def test_name_resolution(flat_table, part_table, tmp_path):
    ctx = new_ctx()
    dd.register_table(ctx, "flat", str(flat_table))
    ctx.sql(f"CREATE EXTERNAL TABLE parted STORED AS DELTA LOCATION '{part_table}'")
    n_flat = ours(flat_table, 3).num_rows
    assert sql(ctx, "SELECT count(*) FROM table_changes(flat, 3)").column(0).to_pylist() == [n_flat]
    assert sql(ctx, "SELECT count(*) FROM table_changes('flat', 3)").column(0).to_pylist() == [n_flat]
    assert sql(ctx, "SELECT count(*) FROM table_changes(parted, 5, 5)").column(0).to_pylist() == [
        ours(part_table, 5, 5).num_rows
    ]
    # a registered name pinned to an old version still reads the live history
    dd.register_table(ctx, "old_flat", str(flat_table), version=1)
    assert sql(ctx, "SELECT max(_commit_version) FROM table_changes(old_flat, 0)").column(0).to_pylist() == [
        5
    ]
    # a Delta folder catalog (tables found through the session, provider metadata)
    dd.register_catalog(ctx, "lake", str(tmp_path))
    assert sql(ctx, "SELECT count(*) FROM table_changes('lake.default.flat', 3)").column(0).to_pylist() == [
        n_flat
    ]
    # a catalog folder name that is not a plain SQL identifier, in every spelling
    shutil.copytree(flat_table, tmp_path / "flat-copy")
    for spelling in ("'lake.default.flat-copy'", 'lake.default."flat-copy"', '"lake"."default"."flat-copy"'):
        got = sql(ctx, f"SELECT count(*) FROM table_changes({spelling}, 3)").column(0).to_pylist()
        assert got == [n_flat], spelling
    with pytest.raises(Exception) as info:
        sql(ctx, "SELECT * FROM table_changes(nope, 0)")
    text = str(info.value)
    assert "TableNotFoundError" in text and "'nope'" in text and "flat" in text and "parted" in text
    with pytest.raises(Exception, match="TableNotFoundError"):
        sql(ctx, f"SELECT * FROM table_changes('{tmp_path / 'missing'}', 0)")
    # the errors also name the registered tables for a folder that is not a table
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(Exception, match="registered Delta tables"):
        sql(ctx, f"SELECT * FROM table_changes('{empty}', 0)")


def test_feed_cache(flat_table):
    t = DeltaTable(str(flat_table))
    a = load_change_feed(t, 1, 3)
    assert load_change_feed(t, 1, 3) is a
    assert load_change_feed(DeltaTable(str(flat_table)), 1, 3) is a
    latest = load_change_feed(t, 1)
    write_deltalake(str(flat_table), rows(range(950, 952), 6), mode="append")
    newer = load_change_feed(t, 1)
    assert newer is not latest and newer.end == 6
    # re-timed commits are not served stale
    set_commit_times(flat_table, {2: 1_600_000_000_000})
    assert load_change_feed(t, 1, 3) is not a
    ctx = new_ctx()
    q = f"SELECT count(*) FROM table_changes('{flat_table}', 6)"
    assert sql(ctx, q).column(0).to_pylist() == [2]


def test_join_with_registered_table(part_table):
    ctx = new_ctx()
    dd.register_table(ctx, "cur", str(part_table))
    q = (
        f"SELECT c.id, c._change_type, t.value AS current_value FROM table_changes('{part_table}', 4, 4) c "
        "JOIN cur t ON c.id = t.id WHERE c._change_type = 'update_postimage' ORDER BY c.id"
    )
    got = sql(ctx, q)
    changes = ours(part_table, 4, 4)
    post = changes.filter(pc.equal(changes.column("_change_type"), "update_postimage"))
    current = DeltaTable(str(part_table)).snapshot().scan().to_table()
    cur = {r["id"]: r["value"] for r in current.to_pylist()}
    exp = sorted((r["id"], "update_postimage", cur[r["id"]]) for r in post.to_pylist() if r["id"] in cur)
    assert [(r["id"], r["_change_type"], r["current_value"]) for r in got.to_pylist()] == exp
    assert len(exp) > 0


def test_url_encoded_paths_and_checkpoint_in_range(tmp_path):
    """Partition values with spaces (URL-encoded paths) and a checkpoint in the middle of the range."""
    p = tmp_path / "enc"
    t = rows(range(12))
    t = t.set_column(1, "part", pa.array([f"a b/{i % 2}" for i in range(12)]))
    write_deltalake(str(p), t, partition_by=["part"], configuration=CDF)
    DLTable(str(p)).update(updates={"value": "value + 1"}, predicate="id < 4")
    DLTable(str(p)).create_checkpoint()
    DLTable(str(p)).delete("id = 7")
    got = ours(p, 0)
    assert counts(got) == {
        (0, "insert"): 12,
        (1, "update_preimage"): 4,
        (1, "update_postimage"): 4,
        (2, "delete"): 1,
    }
    assert set(got.column("part").to_pylist()) == {"a b/0", "a b/1"}


def test_checkpointed_table_copy_is_independent(part_table, tmp_path):
    # the cache key includes the location: a copy is a different table
    copy = copy_table(part_table, tmp_path / "copy")
    a = load_change_feed(DeltaTable(str(part_table)), 5, 7)
    b = load_change_feed(DeltaTable(str(copy)), 5, 7)
    assert a is not b
    assert_same_rows(
        ours(copy, 5, 7).drop_columns(["_commit_timestamp"]),
        ours(part_table, 5, 7).drop_columns(["_commit_timestamp"]),
    )


def test_corpus_dv_table_via_sql_projection(copy_corpus_table):
    p = corpus_table("cdf-table-with-dv")
    ctx = new_ctx()
    got = sql(ctx, f"SELECT _change_type, count(*) AS n FROM table_changes('{p}', 0) GROUP BY 1 ORDER BY 1")
    full = ours(p, 0)
    exp = full.group_by("_change_type").aggregate([("_change_type", "count")]).sort_by("_change_type")
    assert got.column("n").to_pylist() == exp.column("_change_type_count").to_pylist()
    assert sql(ctx, f"SELECT count(*) FROM table_changes('{p}', 0)").column(0).to_pylist() == [full.num_rows]


@pytest.mark.parametrize(
    "where",
    [
        "_change_type = 'delete'",
        "_change_type IN ('update_preimage', 'insert')",
        "name = 'n25-4' OR name = 'n25-0'",
        "name > 'n2' AND _commit_version >= 2",
        "part = 'p1' AND _change_type <> 'insert'",
    ],
)
def test_string_filters_on_delta_rs_change_files(part_table, where):
    """delta-rs writes string_view columns into update/merge/cdc files: string filters still work."""
    ctx = new_ctx()
    full = ours(part_table, 0)
    ctx.register_record_batches("full_t", [full.to_batches()])
    got = sql(ctx, f"SELECT * FROM table_changes('{part_table}', 0) WHERE {where}")
    exp = sql(ctx, f"SELECT * FROM full_t WHERE {where}")
    assert exp.num_rows > 0
    assert_same_rows(got, exp, where)


def test_nested_string_filter_on_delta_rs_change_files(tmp_path):
    """delta-rs stores a struct's string field as string_view in cdc and update files: a filter
    on the nested field (pushed from Python; SQL does not push it) failed the read with 'equal'
    has no kernel matching (string, string_view), as top-level string filters once did."""
    path = str(tmp_path / "t")
    rows = [{"id": i, "st": {"a": i % 3, "b": f"x{i % 4}"}} for i in range(40)]
    write_deltalake(path, pa.Table.from_pylist(rows), configuration={"delta.enableChangeDataFeed": "true"})
    DLTable(path).update(updates={"id": "id + 100"}, predicate="id < 10")
    full = ours(path, 0)
    for expr in (
        pc.field("st", "b") == "x1",
        pc.field("st", "b").isin(["x2", "x3"]),
        pc.field("st", "b") > "x1",
    ):
        got = DeltaTable(path).changes(0, predicate=expr).to_table()
        exp = full.filter(expr)
        assert 1 in exp.column("_commit_version").to_pylist()  # the update's cdc rows
        assert_same_rows(got, exp, str(expr))
    assert DeltaTable(path).snapshot().scan(predicate=pc.field("st", "b") == "x1").to_table().num_rows > 0


def test_nested_fields_added_by_schema_merge_read_as_null_in_older_changes(tmp_path):
    """A struct (also inside a list or a map) that gained a field: older changes read it as NULL,
    as the table scan and deltalake's load_cdf do (the feed used to refuse the column)."""
    path = str(tmp_path / "t")
    inner1 = pa.struct([("a", pa.int32())])
    inner2 = pa.struct([("a", pa.int32()), ("b", pa.string())])

    def schema(inner):
        return pa.schema(
            [("id", pa.int64()), ("st", inner), ("xs", pa.list_(inner)), ("m", pa.map_(pa.string(), inner))]
        )

    first = [{"id": 1, "st": {"a": 1}, "xs": [{"a": 2}], "m": [("k", {"a": 3})]}]
    second = [
        {"id": 2, "st": {"a": 4, "b": "x"}, "xs": [{"a": 5, "b": "y"}], "m": [("k", {"a": 6, "b": "z"})]}
    ]
    write_deltalake(
        path,
        pa.Table.from_pylist(first, schema(inner1)),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    write_deltalake(path, pa.Table.from_pylist(second, schema(inner2)), mode="append", schema_mode="merge")
    ctx = new_ctx()
    dd.register_table(ctx, "t", path)
    got = sql(
        ctx, "SELECT id, st, xs, m, _change_type, _commit_version FROM table_changes('t', 0) ORDER BY id"
    )
    want = [
        {"id": 1, "st": {"a": 1, "b": None}, "xs": [{"a": 2, "b": None}], "m": [("k", {"a": 3, "b": None})]},
        {"id": 2, "st": {"a": 4, "b": "x"}, "xs": [{"a": 5, "b": "y"}], "m": [("k", {"a": 6, "b": "z"})]},
    ]
    assert got.drop_columns(["_change_type", "_commit_version"]).to_pylist() == want
    assert got.column("_commit_version").to_pylist() == [0, 1]
    # the table scan reads the same files the same way; deltalake's load_cdf agrees where it can
    # (it fails to cast the map column)
    assert sql(ctx, "SELECT id, st, xs, m FROM t ORDER BY id").to_pylist() == want
    feed = pa.table(DLTable(path).load_cdf(starting_version=0, columns=["id", "st", "xs"]).read_all())
    assert sorted(feed.select(["id", "st", "xs"]).to_pylist(), key=lambda r: r["id"]) == [
        {k: r[k] for k in ("id", "st", "xs")} for r in want
    ]


def test_file_added_after_a_type_change_and_removed_in_the_range_is_readable(tmp_path):
    """v2 changes `s` from string to int; v3 adds f3 (int), v4 removes it. The delete at v4 reads
    a file the same range added after the change, so it was written under the new schema: the
    range 0..4 filtered to versions >= 3 gives the rows of 3..4 (it used to be refused as
    "possibly written before version 2"); rows from before the change stay refused."""
    import pyarrow.parquet as pq

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)

    def metadata(stype: str) -> dict:
        fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
        fields.append({"name": "s", "type": stype, "nullable": True, "metadata": {}})
        schema = {"type": "struct", "fields": fields}
        conf = {"delta.enableChangeDataFeed": "true"}
        md = {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema)}
        return {"metaData": {**md, "partitionColumns": [], "configuration": conf}}

    def add(name: str, ids: list, values: list, typ: pa.DataType) -> dict:
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array(values, typ)}), table / name)
        return add_action(table, name, stats=json.dumps({"numRecords": len(ids)}))

    def remove(a: dict) -> dict:
        return {"remove": {"path": a["path"], "deletionTimestamp": 1, "dataChange": True, "size": a["size"]}}

    f1 = add("f1.parquet", [1, 2], ["x", "y"], pa.string())
    f2 = add("f2.parquet", [3], [33], pa.int32())
    f3 = add("f3.parquet", [4], [44], pa.int32())
    commits = [
        [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}, metadata("string")],
        [{"add": f1}],
        [metadata("integer"), remove(f1), {"add": f2}],
        [{"add": f3}],
        [remove(f3)],
    ]
    for v, actions in enumerate(commits):
        info = {"commitInfo": {"timestamp": 1_700_000_000_000 + v}}
        write_commit(table, v, [info, *actions])
    ctx = new_ctx()
    q = "SELECT id, s, _change_type, _commit_version FROM table_changes('{}', {}, 4) {} ORDER BY 4, 3"
    want = sql(ctx, q.format(table, 3, "")).to_pylist()
    assert [(r["id"], r["s"], r["_change_type"]) for r in want] == [(4, 44, "insert"), (4, 44, "delete")]
    assert sql(ctx, q.format(table, 0, "WHERE _commit_version >= 3")).to_pylist() == want
    with pytest.raises(Exception, match="ChangeDataFeedError"):  # f1's rows were written as strings
        sql(ctx, q.format(table, 0, ""))


# --------------------------------------------------------------------------------------------
# one version per statement while a writer commits
# --------------------------------------------------------------------------------------------


def test_one_statement_sees_one_version_of_a_table(tmp_path, monkeypatch):
    """Open-ended table_changes() calls and folder-catalog references of one table in one SQL
    statement end at one version, even when commits land while the statement is planned; the
    next statement sees the new commits."""
    from delta_datafusion.datafusion import session as session_mod
    from delta_datafusion.datafusion import table_function as tf

    path = tmp_path / "t"
    write_deltalake(str(path), rows(range(3)), configuration=CDF)  # v0

    def commit() -> None:
        write_deltalake(str(path), rows([100 + DLTable(str(path)).version()]), mode="append")

    load, table = tf.load_change_feed, session_mod.DeltaSchemaProvider._table

    def load_then_commit(*args, **kwargs):
        feed = load(*args, **kwargs)
        commit()
        return feed

    def table_then_commit(self, name):
        found = table(self, name)
        commit()
        return found

    monkeypatch.setattr(tf, "load_change_feed", load_then_commit)
    monkeypatch.setattr(session_mod.DeltaSchemaProvider, "_table", table_then_commit)
    ctx = new_ctx()
    dd.register_catalog(ctx, "lake", str(tmp_path))
    union = (
        f"SELECT 'a' AS side, max(_commit_version) AS v, count(*) AS n FROM table_changes('{path}', 0) "
        f"UNION ALL SELECT 'b', max(_commit_version), count(*) FROM table_changes('{path}', 0) ORDER BY side"
    )
    assert sql(ctx, union).to_pylist() == [{"side": "a", "v": 0, "n": 3}, {"side": "b", "v": 0, "n": 3}]
    # the next statement resolves latest again: two commits landed during the first one
    again = sql(ctx, union).to_pylist()
    assert [r["v"] for r in again] == [2, 2] and [r["n"] for r in again] == [5, 5]
    mixed = (
        "SELECT (SELECT count(*) FROM lake.default.t) AS table_rows, "
        "(SELECT count(*) FROM table_changes('lake.default.t', 0) WHERE _change_type = 'insert') AS inserted, "
        "(SELECT max(_commit_version) FROM table_changes('lake.default.t', 0)) AS feed_end"
    )
    got = sql(ctx, mixed).to_pylist()[0]
    assert got["table_rows"] == got["inserted"] and got["feed_end"] == got["table_rows"] - 3
    # an explicit end is not pinned: it reads what it names
    ended = sql(ctx, f"SELECT max(_commit_version) AS v FROM table_changes('{path}', 0, 1)").to_pylist()
    assert ended == [{"v": 1}]


def test_statement_tracking_keeps_sessions_as_they_were(tmp_path, monkeypatch):
    """The statement pins neither change how a session looks (signature, copies, the caller's
    own wrapper, a later class-level patch) nor give a puzzling error when a statement's pin ends
    before a later start."""
    import copy
    import gc
    import inspect

    from datafusion import SessionContext

    from delta_datafusion.datafusion import session as session_mod

    plain = SessionContext()
    ctx = new_ctx()
    assert isinstance(ctx, SessionContext)
    assert inspect.signature(ctx.sql) == inspect.signature(plain.sql)
    twin = copy.copy(ctx)
    del ctx
    gc.collect()
    assert twin.sql("SELECT 1 AS x").to_pydict() == {"x": [1]}
    seen = []
    original = SessionContext.sql

    def traced(self, *args, **kwargs):
        seen.append(args[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(SessionContext, "sql", traced)
    twin.sql("SELECT 2 AS x")
    assert seen == ["SELECT 2 AS x"]
    monkeypatch.setattr(SessionContext, "sql", original)
    mine, log = SessionContext(), []
    inner = mine.sql
    mine.sql = lambda q: (log.append(q), inner(q))[1]
    dd.register(mine)
    mine.sql("SELECT 3")
    assert log == ["SELECT 3"]
    # a start after the version the statement pinned: says so
    path = tmp_path / "t"
    write_deltalake(str(path), rows(range(3)), configuration=CDF)
    table = session_mod.DeltaSchemaProvider._table

    def table_then_commit(self, name):
        found = table(self, name)
        write_deltalake(str(path), rows([7]), mode="append")
        return found

    monkeypatch.setattr(session_mod.DeltaSchemaProvider, "_table", table_then_commit)
    ctx = new_ctx()
    dd.register_catalog(ctx, "lake", str(tmp_path))
    with pytest.raises(
        Exception,
        match=r"start version 1 is after end version 0 of \S+: this statement already read the table at version 0",
    ):
        sql(
            ctx,
            "SELECT (SELECT count(*) FROM lake.default.t) AS n, "
            "(SELECT count(*) FROM table_changes('lake.default.t', 1)) AS c",
        )


def _mapping_log(root: Path, files: dict[str, pa.Table], commits: list[list[dict]]) -> DeltaTable:
    """A hand-written table: parquet ``files`` and ``commits`` of actions, where an action
    ``{"add": name, "change": bool}`` / ``{"remove": name}`` stands for a file action."""
    (root / "_delta_log").mkdir(parents=True)
    for name, rows in files.items():
        pq.write_table(rows, root / name)

    def file(name: str, change: bool) -> dict:
        size = (root / name).stat().st_size
        return {
            "path": name,
            "partitionValues": {},
            "size": size,
            "modificationTime": 0,
            "dataChange": change,
        }

    for v, actions in enumerate(commits):
        out = [{"commitInfo": {"timestamp": 1000 * (v + 1)}}]
        for a in actions:
            if "add" in a and isinstance(a["add"], str):
                out.append({"add": file(a["add"], a.get("change", True))})
            elif "remove" in a and isinstance(a["remove"], str):
                out.append({"remove": {**file(a["remove"], False), "deletionTimestamp": 1}})
            else:
                out.append(a)
        commit_path(root, v).write_text("".join(json.dumps(a) + "\n" for a in out))
    return DeltaTable(str(root))


def _mapped_metadata(mode: str, fields: list[tuple[str, int, str, list]]) -> dict:
    """metaData with (name, id, physical name, nested fields of the same shape) long/struct fields."""

    def field(name: str, fid: int, phys: str, nested: list) -> dict:
        meta = (
            {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": phys}
            if mode != "none"
            else {}
        )
        t = {"type": "struct", "fields": [field(*n) for n in nested]} if nested else "long"
        return {"name": name, "type": t, "nullable": True, "metadata": meta}

    conf = {**CDF, "delta.columnMapping.mode": mode}
    if mode != "none":
        conf["delta.columnMapping.maxColumnId"] = "9"
    schema = {"type": "struct", "fields": [field(*f) for f in fields]}
    return {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": [],
            "configuration": conf,
            "createdTime": 0,
        }
    }


def test_column_mapping_transitions_followed_through_every_metadata_change(tmp_path):
    """Fields are followed back through each metadata change (by id while mapping is on at both
    sides, by name where it is off at either): (1) after renames a->c, b->a under the mapping and
    its removal, 'a' was stored as 'b' (it read the other column's values); (2) mapping removed
    and enabled again: v0's 'col-a' is not 'a' (read NULL); (3) a nested field dropped under the
    mapping was not a rename (refused)."""
    proto = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    # (1) v0 name mode: c stored as a, a stored as b; st.b stored as a, st.a as b; v1 removal
    swapped = _mapping_log(
        tmp_path / "swap",
        {
            "x.parquet": pa.table({"a": [1], "b": [2], "st": pa.array([{"a": 10, "b": 20}])}),
            "y.parquet": pa.table({"c": [1], "a": [2], "st": pa.array([{"b": 10, "a": 20}])}),
        },
        [
            [
                proto,
                _mapped_metadata(
                    "name",
                    [
                        ("c", 1, "a", []),
                        ("a", 2, "b", []),
                        ("st", 3, "st", [("b", 4, "a", []), ("a", 5, "b", [])]),
                    ],
                ),
                {"add": "x.parquet"},
            ],
            [
                _mapped_metadata(
                    "none",
                    [
                        ("c", 1, "c", []),
                        ("a", 2, "a", []),
                        ("st", 3, "st", [("b", 4, "b", []), ("a", 5, "a", [])]),
                    ],
                ),
                {"remove": "x.parquet"},
                {"add": "y.parquet", "change": False},
            ],
        ],
    )
    assert swapped.changes(0, 0, columns=["a", "st"]).to_table().to_pylist() == [
        {"a": 2, "st": {"b": 10, "a": 20}}
    ]
    for column, stored in (("a", "b"), ("c", "a"), ("st", "a")):
        with pytest.raises(
            ChangeDataFeedError, match=f"column '{column}' cannot be read.*was stored as '{stored}'"
        ):
            swapped.changes(0, 1, columns=[column]).to_table()
    # (2) name (col-a) -> none (rewritten) -> name again (physical = logical)
    again = _mapping_log(
        tmp_path / "again",
        {"x.parquet": pa.table({"col-a": [1]}), "y.parquet": pa.table({"a": [1]})},
        [
            [proto, _mapped_metadata("name", [("a", 1, "col-a", [])]), {"add": "x.parquet"}],
            [
                _mapped_metadata("none", [("a", 1, "a", [])]),
                {"remove": "x.parquet"},
                {"add": "y.parquet", "change": False},
            ],
            [_mapped_metadata("name", [("a", 1, "a", [])])],
        ],
    )
    with pytest.raises(ChangeDataFeedError, match="column 'a' cannot be read.*was stored as 'col-a'"):
        again.changes(0, 2, columns=["a"]).to_table()
    assert again.changes(1, 2, columns=["a"]).to_table().num_rows == 0  # only dataChange=false
    # (3) none st{a, c} -> name (names kept) -> st.c dropped -> mapping removed
    dropped = _mapping_log(
        tmp_path / "dropped",
        {
            "x.parquet": pa.table({"st": pa.array([{"a": 1, "c": 2}])}),
            "y.parquet": pa.table({"st": pa.array([{"a": 1}])}),
        },
        [
            [
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
                _mapped_metadata("none", [("st", 2, "st", [("a", 3, "a", []), ("c", 4, "c", [])])]),
                {"add": "x.parquet"},
            ],
            [proto, _mapped_metadata("name", [("st", 2, "st", [("a", 3, "a", []), ("c", 4, "c", [])])])],
            [_mapped_metadata("name", [("st", 2, "st", [("a", 3, "a", [])])])],
            [
                _mapped_metadata("none", [("st", 2, "st", [("a", 3, "a", [])])]),
                {"remove": "x.parquet"},
                {"add": "y.parquet", "change": False},
            ],
        ],
    )
    for end in (2, 3):
        assert dropped.changes(0, end, columns=["st"]).to_table().to_pylist() == [{"st": {"a": 1}}]
    # (4) a column added after the removal, under the name another field was stored as before
    later = _mapping_log(
        tmp_path / "later",
        {
            "x.parquet": pa.table({"a": [7]}),
            "y.parquet": pa.table({"x": [7]}),
            "z.parquet": pa.table({"x": [8], "a": [9]}),
        },
        [
            [proto, _mapped_metadata("name", [("x", 1, "a", [])]), {"add": "x.parquet"}],
            [
                _mapped_metadata("none", [("x", 1, "x", [])]),
                {"remove": "x.parquet"},
                {"add": "y.parquet", "change": False},
            ],
            [_mapped_metadata("none", [("x", 1, "x", []), ("a", 2, "a", [])]), {"add": "z.parquet"}],
        ],
    )
    with pytest.raises(ChangeDataFeedError, match="column 'a' cannot be read.*another field as 'a'"):
        later.changes(0, 2, columns=["a"]).to_table()  # it read x's value 7 for v0
    assert later.changes(1, 2, columns=["a"]).to_table().to_pylist() == [{"a": 9}]
    # (5) an upgrade that renames in the same change: z is what was stored as 'a'
    upgraded = _mapping_log(
        tmp_path / "upgraded",
        {"x.parquet": pa.table({"a": [7]})},
        [
            [
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}},
                _mapped_metadata("none", [("a", 1, "a", [])]),
                {"add": "x.parquet"},
            ],
            [proto, _mapped_metadata("name", [("z", 1, "a", [])])],
        ],
    )
    assert upgraded.changes(0, 1, columns=["z"]).to_table().to_pylist() == [{"z": 7}]


def test_struct_map_keys_under_a_mapping_since_removed(tmp_path):
    """A map whose keys are structs: their fields have physical names too; they were never
    followed (keys read NULL, or swapped when the names were swapped)."""
    proto = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    key = pa.struct([("col-k1", pa.int64()), ("col-k2", pa.int64())])
    stored = pa.array([[({"col-k1": 1, "col-k2": 2}, 100)]], pa.map_(key, pa.int64()))
    plain = pa.array(
        [[({"k1": 1, "k2": 2}, 100)]],
        pa.map_(pa.struct([("k1", pa.int64()), ("k2", pa.int64())]), pa.int64()),
    )

    def metadata(mode: str) -> dict:
        md = _mapped_metadata(mode, [("m", 1, "m", [])])
        schema = json.loads(md["metaData"]["schemaString"])

        def kfield(name: str, fid: int) -> dict:
            meta = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": f"col-{name}"}
            return {
                "name": name,
                "type": "long",
                "nullable": True,
                "metadata": meta if mode != "none" else {},
            }

        key_type = {"type": "struct", "fields": [kfield("k1", 2), kfield("k2", 3)]}
        schema["fields"][0]["type"] = {
            "type": "map",
            "keyType": key_type,
            "valueType": "long",
            "valueContainsNull": True,
        }
        md["metaData"]["schemaString"] = json.dumps(schema)
        return md

    table = _mapping_log(
        tmp_path / "mapkey",
        {"x.parquet": pa.table({"m": stored}), "y.parquet": pa.table({"m": plain})},
        [
            [proto, metadata("name"), {"add": "x.parquet"}],
            [metadata("none"), {"remove": "x.parquet"}, {"add": "y.parquet", "change": False}],
        ],
    )
    assert table.changes(0, 0, columns=["m"]).to_table().column("m").to_pylist() == [
        [({"k1": 1, "k2": 2}, 100)]
    ]
    with pytest.raises(ChangeDataFeedError, match="field m.key.k1 was stored as 'col-k1'"):
        table.changes(0, 1, columns=["m"]).to_table()


def test_column_dropped_and_added_again_without_mapping_is_the_same_column(tmp_path):
    """Without column mapping a column is its name: dropped by an overwrite and added back by a
    merge, its older values are read (as deltalake and Spark read them), at the top level and
    nested; the mapping checks refused it as another field stored under that name."""
    p = str(tmp_path / "readd")
    write_deltalake(p, pa.table({"a": [1], "b": [10], "s": pa.array([{"x": 1, "y": 2}])}), configuration=CDF)
    write_deltalake(
        p, pa.table({"a": [2], "s": pa.array([{"y": 3}])}), mode="overwrite", schema_mode="overwrite"
    )
    write_deltalake(
        p,
        pa.table({"a": [3], "b": [30], "s": pa.array([{"y": 4, "x": 5}])}),
        mode="append",
        schema_mode="merge",
    )
    got = DeltaTable(p).changes(0, 2, columns=["a", "b", "s", "_change_type"]).to_table().to_pylist()
    assert sorted(got, key=str) == sorted(
        [
            {"a": 1, "b": 10, "s": {"y": 2, "x": 1}, "_change_type": "insert"},
            {"a": 1, "b": 10, "s": {"y": 2, "x": 1}, "_change_type": "delete"},
            {"a": 2, "b": None, "s": {"y": 3, "x": None}, "_change_type": "insert"},
            {"a": 3, "b": 30, "s": {"y": 4, "x": 5}, "_change_type": "insert"},
        ],
        key=str,
    )


def test_id_mode_left_and_entered_again_is_not_matched_by_ids(tmp_path):
    """id mode, mapping removed, id mode again with other ids: the ids of the ends do not name
    the same fields; v0's columns are refused (they were read swapped)."""
    proto = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}

    def ids(mode: str, a: int, b: int) -> dict:
        md = _mapped_metadata("name" if mode == "id" else mode, [("a", a, "pa", []), ("b", b, "pb", [])])
        md["metaData"]["configuration"]["delta.columnMapping.mode"] = mode
        return md

    def with_ids(names: list[str], fids: list[int], values: list[int]) -> pa.Table:
        fields = [
            pa.field(n, pa.int64(), metadata={b"PARQUET:field_id": str(i).encode()})
            for n, i in zip(names, fids, strict=True)
        ]
        return pa.table([pa.array([v]) for v in values], schema=pa.schema(fields))

    table = _mapping_log(
        tmp_path / "idagain",
        {
            "x.parquet": with_ids(["pa", "pb"], [1, 2], [1, 2]),
            "y.parquet": pa.table({"a": [1], "b": [2]}),
            "z.parquet": with_ids(["pb", "pa"], [1, 2], [3, 4]),
        },
        [
            [proto, ids("id", 1, 2), {"add": "x.parquet"}],
            [
                _mapped_metadata("none", [("a", 1, "a", []), ("b", 2, "b", [])]),
                {"remove": "x.parquet"},
                {"add": "y.parquet", "change": False},
            ],
            [ids("id", 2, 1)],
            [{"add": "z.parquet"}],
        ],
    )
    assert table.changes(3, 3, columns=["a", "b"]).to_table().to_pylist() == [{"a": 4, "b": 3}]
    with pytest.raises(ChangeDataFeedError, match="column 'a' cannot be read"):
        table.changes(0, 3, columns=["a", "b"]).to_table()


def test_column_dropped_and_added_back_keeps_its_checks_without_mapping(tmp_path):
    """A partition column dropped by an overwrite and added back as a data column is refused
    for the older changes, as one un-partitioned without a drop is (it read NULL); one added
    back with another type is refused when planned, not when a file is read."""
    p = str(tmp_path / "part")
    write_deltalake(p, pa.table({"a": [1], "p": ["u"]}), partition_by=["p"], configuration=CDF)
    write_deltalake(p, pa.table({"a": [2]}), mode="overwrite", schema_mode="overwrite", partition_by=[])
    write_deltalake(p, pa.table({"a": [3], "p": ["w"]}), mode="append", schema_mode="merge")
    with pytest.raises(ChangeDataFeedError, match="column 'p' cannot be read.*partitioning changed"):
        DeltaTable(p).changes(0, 2, columns=["a", "p"]).to_table()
    assert DeltaTable(p).changes(2, 2, columns=["a", "p"]).to_table().to_pylist() == [{"a": 3, "p": "w"}]
    q = str(tmp_path / "type")
    write_deltalake(q, pa.table({"a": [1], "b": [10]}), configuration=CDF)
    write_deltalake(q, pa.table({"a": [2]}), mode="overwrite", schema_mode="overwrite")
    write_deltalake(q, pa.table({"a": [3], "b": ["x"]}), mode="append", schema_mode="merge")
    with pytest.raises(
        ChangeDataFeedError, match="column 'b' cannot be read.*type changed from int64 to string"
    ):
        DeltaTable(q).changes(0, 2, columns=["b"]).to_table()


@pytest.mark.parametrize("kind", ["list", "map"])
def test_field_added_to_a_struct_inside_a_list_or_map(tmp_path, kind):
    """A table whose only column is a list (or map) of structs, a field added by a merge: the
    column's bounds are forgotten for the older changes, and forgetting them rebuilt the empty
    bounds struct with no rows (ArrowInvalid)."""
    if kind == "list":
        first = pa.table({"c": pa.array([[{"a": 1}]])})
        second = pa.table({"c": pa.array([[{"a": 2, "b": "x"}]])})
    else:
        first = pa.table(
            {"c": pa.array([[("k", {"a": 1})]], pa.map_(pa.string(), pa.struct([("a", pa.int64())])))}
        )
        value = pa.struct([("a", pa.int64()), ("b", pa.string())])
        second = pa.table({"c": pa.array([[("k", {"a": 2, "b": "x"})]], pa.map_(pa.string(), value))})
    p = str(tmp_path / kind)
    write_deltalake(p, first, configuration=CDF)
    write_deltalake(p, second, mode="append", schema_mode="merge")
    got = DeltaTable(p).changes(0, columns=["c", "_commit_version"]).to_table().to_pylist()
    assert len(got) == 2 and sorted(r["_commit_version"] for r in got) == [0, 1]
    old = next(r["c"] for r in got if r["_commit_version"] == 0)
    assert old == ([{"a": 1, "b": None}] if kind == "list" else [("k", {"a": 1, "b": None})])


def test_a_remove_without_partition_values_is_refused(tmp_path: Path):
    """PROTOCOL.md lets a remove written without extendedFileMetadata leave out its partition
    values; its deleted rows read the partition column as NULL before (a filter on it lost them).
    Spark and deltalake refuse such a range; so does this package, naming the file and version.
    A remove that has them is read."""
    t = tmp_path / "t"
    (t / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), t / "f.parquet")
    pq.write_table(pa.table({"id": pa.array([2], pa.int64())}), t / "g.parquet")
    fields = [{"name": c, "type": "long", "nullable": True, "metadata": {}} for c in ("id", "p")]
    metadata = {"id": "t", "format": {"provider": "parquet", "options": {}}, "partitionColumns": ["p"]}
    metadata |= {"schemaString": json.dumps({"type": "struct", "fields": fields})}
    metadata |= {"configuration": {"delta.enableChangeDataFeed": "true"}}
    f, g = (add_action(t, n, partitionValues={"p": "1"}) for n in ("f.parquet", "g.parquet"))
    write_commit(t, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}, {"metaData": metadata}])
    write_commit(t, 1, [{"add": f}, {"add": g}])
    write_commit(t, 2, [{"remove": {**g, "deletionTimestamp": 1, "extendedFileMetadata": True}}])
    write_commit(t, 3, [{"remove": {"path": "f.parquet", "deletionTimestamp": 1, "dataChange": True}}])
    from datafusion import SessionContext

    ctx = SessionContext()
    dd.register(ctx)
    rows = ctx.sql(f"SELECT id, p, _change_type FROM table_changes('{t}', 1, 2) WHERE p = 1").to_pylist()
    assert sorted((r["id"], r["_change_type"]) for r in rows) == [(1, "insert"), (2, "delete"), (2, "insert")]
    why = (
        r"f\.parquet at version 3 \(\S+00000000000000000003\.json\) has no partitionValues \(written without"
    )
    with pytest.raises(ChangeDataFeedError, match=why):
        DeltaTable(str(t)).changes(0).to_table()
    with pytest.raises(Exception, match="ChangeDataFeedError.*" + why):
        ctx.sql(f"SELECT count(*) FROM table_changes('{t}', 3)").collect()


def test_bounds_of_a_float_file_removed_after_the_widening_are_not_trusted(tmp_path):
    """float -> double widening at v1; the float file deleted at v3; delta.typeChanges dropped at
    v4. A range starting after the widening sees double everywhere in its own types, but its
    delete is of the float file (stats -0.1, value -0.10000000149011612): the start metadata's
    typeChanges says so, and the filter pruned the delete."""
    import pyarrow.parquet as pq

    (tmp_path / "_delta_log").mkdir()
    pq.write_table(pa.table({"f": pa.array([-0.1], pa.float32())}), tmp_path / "a.parquet")
    pq.write_table(pa.table({"f": pa.array([7.0], pa.float64())}), tmp_path / "b.parquet")

    metadata, stats, protocol = _widening_metadata, _one_value_stats, WIDENING_PROTOCOL
    remove = {"path": "a.parquet", "dataChange": True, "deletionTimestamp": 0, "extendedFileMetadata": True}
    remove |= {"partitionValues": {}, "size": (tmp_path / "a.parquet").stat().st_size, "stats": stats(-0.1)}
    commits = [
        [
            {"protocol": protocol},
            metadata("float", {}),
            {"add": add_action(tmp_path, "a.parquet", stats=stats(-0.1))},
        ],
        [metadata("double", {"delta.typeChanges": [{"fromType": "float", "toType": "double"}]})],
        [{"add": add_action(tmp_path, "b.parquet", stats=stats(7.0))}],
        [{"remove": remove}],
        [metadata("double", {})],
    ]
    for v, actions in enumerate(commits):
        write_commit(tmp_path, v, actions)
    got = DeltaTable(str(tmp_path)).changes(2, 4, predicate="f < -0.1000000001").to_table()
    assert got.select(["f", "_change_type", "_commit_version"]).to_pylist() == [
        {"f": -0.10000000149011612, "_change_type": "delete", "_commit_version": 3}
    ]


def test_planning_across_schema_changes_keeps_no_schema_alive(tmp_path):
    """Schema compatibility's sibling lookups last one feed's planning: kept process-wide, they
    held every schema field list a long-running process ever compared (up to 4,096, beyond the 64
    parsed schemas it keeps), after the feeds and schemas themselves were gone."""
    import gc

    from delta_datafusion.changes import cache
    from delta_datafusion.protocol import clear_schema_cache

    path = str(tmp_path / "t")
    cdf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(path, pa.table({"id": [1], "marker_column_7f3a": [1]}), configuration=cdf)
    write_deltalake(path, pa.table({"id": [2]}), mode="overwrite", schema_mode="overwrite")
    got = DeltaTable(path).changes(0).to_table()
    assert sorted(got.column("_change_type").to_pylist()) == ["delete", "insert", "insert"]
    cache._FEEDS.clear()
    clear_schema_cache()
    gc.collect()
    held = [
        o
        for o in gc.get_objects()
        if isinstance(o, list)
        and any(isinstance(f, dict) and f.get("name") == "marker_column_7f3a" for f in o)
    ]
    assert held == []


def test_value_arrays_are_found_without_hashing_the_column_type():
    """A read's value arrays are found by column and value and their type compared, not hashed
    (a timestamp type with a time zone costs ~1.2 us to hash, and every batch asks for three or
    four arrays): a type that refuses to be hashed still gets its array made once, then slices
    of it; the same column and value asked as another type gets an array of that type."""
    from delta_datafusion.read.constants import RepeatedValues

    class Unhashed(pa.ExtensionType):
        def __init__(self):
            super().__init__(pa.timestamp("us", tz="UTC"), "test.unhashed")

        def __arrow_ext_serialize__(self):
            return b""

        @classmethod
        def __arrow_ext_deserialize__(cls, storage_type, serialized):
            return cls()

        def __hash__(self):
            raise AssertionError("the column type was hashed")

    values = RepeatedValues()
    typ = Unhashed()
    first = values.array("c", typ, None, 5)
    again = values.array("c", typ, None, 3)
    assert first.type == typ and again.type == typ and again.null_count == 3
    assert values._arrays[("c", type(None), None)][1] is first  # made once, sliced since
    seven = values.array("v", pa.int64(), 7, 4)
    assert values.array("v", pa.int64(), 7, 2).buffers()[1].address == seven.buffers()[1].address
    as_int32 = values.array("v", pa.int32(), 7, 2)
    assert as_int32.type == pa.int32() and as_int32.to_pylist() == [7, 7]


def test_unit_values_are_put_into_the_scanned_batch_in_place(monkeypatch):
    """A scanned batch whose columns are the output's stored ones, in order, takes its unit's
    values at their places (add_column / set_column), without its columns taken as Python objects
    and made into a new batch (~20 us a batch; the full feed: 334 batches). The rows and schema
    are those of the general path; scanned columns in another order (a column read only by a
    filter) still take it."""
    from delta_datafusion.read import constants
    from delta_datafusion.scan_unit import ScanUnit

    names = ["id", "part", "_change_type", "_commit_version", "s"]
    fields = [
        pa.field("id", pa.int64()),
        pa.field("part", pa.string()),
        pa.field("_change_type", pa.string()),
        pa.field("_commit_version", pa.int64()),
        pa.field("s", pa.string(), metadata={b"k": b"v"}),
    ]
    scanned = pa.record_batch(
        [pa.array([1, 2, 3]), pa.array(["delete", None, "insert"]), pa.array(["a", None, "c"])],
        schema=pa.schema([fields[0], fields[2], fields[4]]),
    )
    valued = ["part", "_change_type", "_commit_version"]
    cdc = ScanUnit("f", 1, {"part": "p1"}, constants={"_commit_version": 7})
    add = ScanUnit("g", 1, {}, constants={"_change_type": "insert", "_commit_version": 8})
    want = {
        id(cdc): [[1, 2, 3], ["p1"] * 3, ["delete", None, "insert"], [7] * 3, ["a", None, "c"]],
        id(add): [[1, 2, 3], [None] * 3, ["insert"] * 3, [8] * 3, ["a", None, "c"]],
    }

    class NoNewBatches:
        @staticmethod
        def from_arrays(*args, **kwargs):
            raise AssertionError("a new batch made of the scanned columns")

    in_place = constants.ConstantColumns(names, fields, ["id", "_change_type", "s"], valued)
    with monkeypatch.context() as m:
        m.setattr(pa, "RecordBatch", NoNewBatches)
        got = {id(u): in_place.complete(scanned, u) for u in (cdc, add)}
    for u in (cdc, add):
        assert got[id(u)].schema.equals(pa.schema(fields), check_metadata=True)
        assert [c.to_pylist() for c in got[id(u)].columns] == want[id(u)]
        assert got[id(u)].column("id").buffers()[1].address == scanned.column(0).buffers()[1].address
    # scanned in another order, with a column only a filter reads: the general path, same rows
    filtered = pa.record_batch(
        [scanned.column(2), pa.array([0.5, 1.5, 2.5]), scanned.column(0), scanned.column(1)],
        names=["s", "x", "id", "_change_type"],
    )
    arranged = constants.ConstantColumns(names, fields, ["s", "x", "id", "_change_type"], valued)
    for u in (cdc, add):
        out = arranged.complete(filtered, u)
        assert out.schema.equals(pa.schema(fields), check_metadata=True)
        assert [c.to_pylist() for c in out.columns] == want[id(u)]
