"""Locations (file URIs, fsspec URLs, chained URLs) and how table names resolve in a session.

Tables are written by deltalake in each test; every case here returned wrong rows, read another
table, or failed obscurely before it was fixed.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import re
import shutil
import sys
import threading
import time
import uuid
import zipfile
from pathlib import Path

import fsspec
import pyarrow as pa
import pytest
from datafusion import SessionContext
from deltalake import write_deltalake
from fsspec.implementations.memory import MemoryFileSystem

import delta_datafusion as dd
from delta_datafusion import cli
from delta_datafusion.errors import (
    ArgumentError,
    DeltaError,
    InvalidProtocolError,
    TableNotFoundError,
    from_datafusion,
)


def _table(path: Path, values: list[int], cdf: bool = True) -> str:
    config = {"delta.enableChangeDataFeed": "true"} if cdf else None
    write_deltalake(str(path), pa.table({"x": pa.array(values, pa.int64())}), configuration=config)
    return str(path)


def _xs(t: pa.Table) -> list[int]:
    return sorted(t.column("x").to_pylist())


def _session() -> SessionContext:
    ctx = SessionContext()
    dd.register(ctx)
    return ctx


def _zip(table: Path, archive: Path) -> Path:
    """The table folder in a zip archive, under its own name."""
    with zipfile.ZipFile(archive, "w") as z:
        for folder, _, names in os.walk(table):
            for n in names:
                full = os.path.join(folder, n)
                z.write(full, os.path.relpath(full, table.parent))
    return archive


def _sql_xs(ctx: SessionContext, sql: str) -> list[int]:
    return sorted(r["x"] for r in ctx.sql(sql).to_pylist())


# -- locations ---------------------------------------------------------------------------------


def test_file_uri_with_a_host_or_a_relative_path_is_refused(tmp_path: Path, monkeypatch):
    _table(tmp_path / "here", [1])
    monkeypatch.chdir(tmp_path / "here")  # used to read the current folder's table
    with pytest.raises(DeltaError, match="host.*'other-table'"):
        dd.DeltaTable("file://other-table")
    with pytest.raises(DeltaError, match="absolute path"):
        dd.DeltaTable("file:here")
    assert _xs(dd.DeltaTable(f"file://localhost{tmp_path}/here").snapshot().scan().to_table()) == [1]


def test_an_unknown_protocol_is_an_argument_error():
    """A URL whose protocol no fsspec filesystem has is a mistaken argument, like a misspelt
    option; it was a plain DeltaError, so callers could not tell it from a store failure."""
    with pytest.raises(dd.ArgumentError, match="cannot open filesystem for 'bogus://x/t'.*bogus"):
        dd.DeltaTable("bogus://x/t").snapshot()
    ctx = SessionContext()
    with pytest.raises(dd.ArgumentError, match="bogus"):
        dd.register_table(ctx, "t", "bogus://x/t")


def test_fsspec_paths_keep_hash_and_question_mark(tmp_path: Path):
    fs = fsspec.filesystem("memory")
    root = f"/loc-{uuid.uuid4().hex}"
    fs.put(_table(tmp_path / "a", [1, 2, 3]), f"{root}/h#x", recursive=True)
    fs.put(_table(tmp_path / "b", [7]), f"{root}/h", recursive=True)
    fs.put(_table(tmp_path / "c", [5, 6]), f"{root}/q?y", recursive=True)
    try:
        assert _xs(dd.DeltaTable(f"memory://{root}/h#x").snapshot().scan().to_table()) == [1, 2, 3]
        assert _xs(dd.DeltaTable(f"memory://{root}/q?y").snapshot().scan().to_table()) == [5, 6]
    finally:
        fs.rm(root, recursive=True)


def test_chained_fsspec_urls(tmp_path: Path):
    t = _table(tmp_path / "t", [1, 2, 3])
    archive = _zip(Path(t), tmp_path / "t.zip")
    for url in (f"simplecache::file://{t}", f"simplecache::{t}", f"zip://t::file://{archive}"):
        table = dd.DeltaTable(url)
        assert _xs(table.snapshot().scan().to_table()) == [1, 2, 3], url
        assert table.storage.root_uri == url
    # SQL over a chained URL, and a folder catalog whose root is one (child URLs keep the chain)
    ctx = _session()
    ctx.sql(f"CREATE EXTERNAL TABLE z STORED AS DELTA LOCATION 'zip://t::file://{archive}'")
    assert _sql_xs(ctx, "SELECT x FROM z") == [1, 2, 3]
    dd.register_catalog(ctx, "lake", f"simplecache::file://{tmp_path}")
    assert _sql_xs(ctx, "SELECT x FROM lake.default.t") == [1, 2, 3]


def test_listing_without_modification_times_is_an_error_not_1970(tmp_path: Path):
    t = _table(tmp_path / "t", [1])
    write_deltalake(t, pa.table({"x": pa.array([2], pa.int64())}), mode="append")
    archive = _zip(Path(t), tmp_path / "t.zip")
    table = dd.DeltaTable("zip://t", {"fo": str(archive)})
    assert _xs(table.snapshot().scan().to_table()) == [1, 2]  # reads need no times
    with pytest.raises(DeltaError, match="no modification time"):  # used to pick version 1
        table.snapshot(timestamp="2001-01-01T00:00:00Z")
    with pytest.raises(DeltaError) as info:  # history() needs the times too, and says so
        table.history()
    # zip's NotImplementedError carries no text: no empty "(NotImplementedError: )"
    assert "(NotImplementedError)" in str(info.value) and "history()" in str(info.value)
    assert "written with extended timestamps" in str(info.value)  # Python's zipfile writes none
    # a folder catalog over such a store serves the table (its cache key asked for a file time)
    ctx = _session()
    dd.register_catalog(ctx, "lake", f"zip://::file://{archive}")
    assert _sql_xs(ctx, "SELECT x FROM lake.default.t") == [1, 2]


def test_zip_extended_timestamps_are_commit_times(tmp_path: Path):
    """Info-ZIP's zip gives each entry two times: the DOS time (the writing machine's local
    wall-clock time, no zone, in 2-second steps) and the extended timestamp extra field 0x5455
    (UTC seconds since the epoch), which fsspec's ZipFileSystem lists with the entry (``extra``).
    The store gave no time at all (it has no modified()): history(), time travel by timestamp
    and _commit_timestamp were refused. Written in Tokyo and read in New York, the DOS time read
    in either zone, or as UTC, is hours off; the extra field is not."""
    import subprocess

    from conftest import in_zone

    if shutil.which("zip") is None:
        pytest.skip("Info-ZIP's zip is not installed")
    t = _table(tmp_path / "t", [1])
    for x in (2, 3):
        write_deltalake(t, pa.table({"x": pa.array([x], pa.int64())}), mode="append")
    base = 1_700_000_001  # odd seconds: a DOS time cannot hold them
    commits = sorted((Path(t) / "_delta_log").glob("*.json"))
    for i, commit in enumerate(commits):
        os.utime(commit, (base + 10 * i, base + 10 * i))
    env = {**os.environ, "TZ": "Asia/Tokyo"}
    subprocess.run(["zip", "-qr", "t.zip", "t"], cwd=tmp_path, env=env, check=True)
    with in_zone("America/New_York"):
        table = dd.DeltaTable(f"zip://t::file://{tmp_path / 't.zip'}")
        assert table.history().column("timestamp").to_pylist() == [1000 * (base + 10 * i) for i in range(3)]
        at = dt.datetime.fromtimestamp(base + 15, dt.timezone.utc).isoformat()
        assert table.snapshot(timestamp=at).version == 1
        stamps = table.changes(0).to_table().column("_commit_timestamp").cast(pa.int64()).to_pylist()
        assert sorted(set(stamps)) == [1_000_000 * (base + 10 * i) for i in range(3)]


def test_change_feed_with_in_commit_timestamps_needs_no_file_times(tmp_path: Path):
    """README: without modification times (zip), table_changes() needs in-commit timestamps; with
    them it must work (the change-feed cache key asked every commit for its file time first)."""
    from conftest import corpus_table

    src = corpus_table("cdc_ict_table")
    shutil.copytree(src, tmp_path / "cdc_ict_table")
    archive = _zip(tmp_path / "cdc_ict_table", tmp_path / "t.zip")
    zipped = dd.DeltaTable("zip://cdc_ict_table", {"fo": str(archive)})
    want = dd.DeltaTable(str(src)).changes(0).to_table()
    got = zipped.changes(0).to_table()
    assert zipped.changes("2000-01-01").to_table().num_rows == want.num_rows  # a timestamp bound too
    key = ["_commit_version", "_change_type", *[c for c in want.column_names if not c.startswith("_")]]
    assert got.sort_by([(c, "ascending") for c in key]).equals(want.sort_by([(c, "ascending") for c in key]))


def test_sql_options_become_typed_filesystem_arguments(tmp_path: Path):
    t = _table(tmp_path / "t", [1, 2, 3])
    ctx = _session()
    cache = tmp_path / "cache"
    ctx.sql(
        f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION 'blockcache://{t}' OPTIONS "
        f"('target_protocol' 'file', 'cache_storage' '{cache}', 'cache_check' '10', 'check_files' 'false')"
    )
    assert _sql_xs(ctx, "SELECT x FROM t") == [1, 2, 3]
    from delta_datafusion.datafusion.session import option_value

    assert [option_value(v) for v in ("10", "-3", "007", "TRUE", "false", "1.5", "abc")] == [
        10,
        -3,
        "007",
        True,
        False,
        "1.5",
        "abc",
    ]


# -- table names in table_changes -------------------------------------------------------------


def test_table_changes_names_resolve_as_select_does(tmp_path: Path):
    big, small = _table(tmp_path / "big", [1, 2, 3]), _table(tmp_path / "small", [9])
    ctx = _session()
    dd.register_table(ctx, '"A"', big)
    dd.register_table(ctx, "a", small)
    assert _sql_xs(ctx, 'SELECT x FROM "A"') == [1, 2, 3]
    assert _sql_xs(ctx, 'SELECT x FROM table_changes("A", 0)') == [1, 2, 3]  # was a's feed
    assert _sql_xs(ctx, "SELECT x FROM table_changes(A, 0)") == [9]  # unquoted: a, as in SQL
    assert _sql_xs(ctx, "SELECT x FROM table_changes('\"A\"', 0)") == [1, 2, 3]
    # qualified spellings of one table
    ctx2 = _session()
    ctx2.sql(f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '{big}'")
    dd.register_table(ctx2, "public.pt", small)
    for name in ("'t'", "'public.t'", "'datafusion.public.t'", "public.t", "datafusion.public.t"):
        assert _sql_xs(ctx2, f"SELECT x FROM table_changes({name}, 0)") == [1, 2, 3], name
    assert _sql_xs(ctx2, "SELECT x FROM table_changes(pt, 0)") == [9]


def test_table_changes_on_a_name_reused_for_another_table(tmp_path: Path):
    t = _table(tmp_path / "t", [1, 2, 3])
    ctx = _session()
    dd.register_table(ctx, "t", t)
    ctx.deregister_table("t")
    ctx.register_record_batches("t", [[pa.record_batch({"y": [42]})]])
    with pytest.raises(Exception, match="TableNotFoundError.*not a Delta table"):  # was the old feed
        ctx.sql("SELECT * FROM table_changes('t', 0)").collect()
    dd.register_table(ctx, "d", t)
    ctx.sql("CREATE VIEW v AS SELECT * FROM d")
    with pytest.raises(Exception, match="TableNotFoundError.*not a Delta table"):
        ctx.sql("SELECT * FROM table_changes(v, 0)").collect()


def test_relative_location_is_fixed_at_registration(tmp_path: Path, monkeypatch):
    _table(tmp_path / "first" / "tbl", [1, 2, 3])
    _table(tmp_path / "second" / "tbl", [7])
    monkeypatch.chdir(tmp_path / "first")
    ctx = _session()
    dd.register_table(ctx, "r", "tbl")
    ctx.sql("CREATE EXTERNAL TABLE e STORED AS DELTA LOCATION 'tbl'")
    monkeypatch.chdir(tmp_path / "second")
    for name in ("r", "e"):
        assert _sql_xs(ctx, f"SELECT x FROM {name}") == [1, 2, 3]
        assert _sql_xs(ctx, f"SELECT x FROM table_changes('{name}', 0)") == [1, 2, 3], name


def test_explain_shows_only_this_statements_change_scans(tmp_path: Path):
    t = _table(tmp_path / "t", [1, 2, 3])
    ctx = _session()
    dd.register_table(ctx, "t", t)
    ctx.sql("SELECT count(*) FROM table_changes('t', 0)").collect()
    plan = dd.explain(ctx, "SELECT * FROM t WHERE x > 1")
    assert [line for line in plan.splitlines() if "DeltaScan" in line and "changes=" in line] == []
    plan = dd.explain(ctx, "SELECT * FROM table_changes('t', 0) WHERE x > 1")
    assert len([line for line in plan.splitlines() if "DeltaScan" in line and "changes=0..0" in line]) == 1


# -- folder catalogs ----------------------------------------------------------------------------


def test_folder_catalog_lists_links_and_any_folder_name(tmp_path: Path):
    root = tmp_path / "lake"
    for name in ("real", "sp ace", "2024_sales", "données"):
        _table(root / name, [1, 2, 3])
    _table(tmp_path / "elsewhere", [4])
    os.symlink(tmp_path / "elsewhere", root / "linked")
    (root / ".hidden" / "_delta_log").mkdir(parents=True)
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(root))
    names = ctx.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake' AND table_schema = 'default' ORDER BY 1"
    ).to_pydict()["table_name"]
    assert names == ["2024_sales", "données", "linked", "real", "sp ace"]
    assert _sql_xs(ctx, 'SELECT x FROM lake.default."2024_sales"') == [1, 2, 3]
    assert _sql_xs(ctx, "SELECT x FROM lake.default.linked") == [4]


def test_folder_catalog_schema_has_no_owner_in_information_schema(tmp_path: Path):
    """information_schema.schemata showed a folder catalog's schema_owner as the repr of a bound
    method with its memory address: datafusion-python 55 reads SchemaProvider.owner_name as an
    attribute and prints whatever it finds; a folder has no owner, so NULL."""
    _table(tmp_path / "lake" / "t", [1])
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    rows = ctx.sql(
        "SELECT schema_name, schema_owner FROM information_schema.schemata WHERE catalog_name = 'lake'"
    )
    assert rows.to_pylist() == [{"schema_name": "default", "schema_owner": None}]


def test_folder_catalog_schema_answers_datafusions_schema_api(tmp_path: Path):
    """``ctx.catalog("lake").schema("default")`` hands back the package's provider itself (a
    Python provider is not wrapped in datafusion's ``Schema``); its ``names()``, which a
    ``Schema`` has, raised AttributeError."""
    for name in ("a", "b"):
        _table(tmp_path / "lake" / name, [1])
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    schema = ctx.catalog("lake").schema("default")
    assert schema.names() == {"a", "b"}
    assert schema.table_exist("a") and schema.table("a").schema.names == ["x"]


def test_folder_catalog_with_a_table_being_created(tmp_path: Path):
    root = tmp_path / "lake"
    _table(root / "good", [1])
    (root / "being_created" / "_delta_log").mkdir(parents=True)  # a writer's first moment
    ctx = _session()
    dd.register_table(ctx, "mine", str(root / "good"))
    dd.register_catalog(ctx, "lake", str(root))
    names = {r["table_name"] for r in ctx.sql("SHOW TABLES").to_pylist()}
    assert {"mine", "good"} <= names  # the whole statement used to fail
    with pytest.raises(Exception, match="being_created"):
        ctx.sql("SELECT * FROM lake.default.being_created").collect()


def test_folder_catalog_sees_a_table_written_again_at_the_same_version(tmp_path: Path):
    root = tmp_path / "lake"
    _table(root / "t", [1, 2, 3])
    write_deltalake(str(root / "t"), pa.table({"x": pa.array([4], pa.int64())}), mode="append")
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(root))
    assert _sql_xs(ctx, "SELECT x FROM lake.default.t") == [1, 2, 3, 4]
    shutil.rmtree(root / "t")
    _table(root / "t", [100])
    write_deltalake(str(root / "t"), pa.table({"x": pa.array([200], pa.int64())}), mode="append")
    assert _sql_xs(ctx, "SELECT x FROM lake.default.t") == [100, 200]  # was the old snapshot


def test_cli_sql_with_a_statement_that_returns_no_columns(tmp_path: Path, capsys):
    t = _table(tmp_path / "t", [1])
    assert cli.main(["sql", f"CREATE EXTERNAL TABLE e STORED AS DELTA LOCATION '{t}'"]) == 0
    assert capsys.readouterr().out.splitlines() == ["(0 rows)"]  # was 52 blank lines first


def test_missing_table_name_lists_only_live_registrations(tmp_path: Path):
    t = _table(tmp_path / "t", [1])
    ctx = _session()
    dd.register_table(ctx, "kept", t)
    dd.register_table(ctx, "dropped", t)
    ctx.deregister_table("dropped")
    with pytest.raises(Exception, match="TableNotFoundError") as info:
        ctx.sql("SELECT * FROM table_changes(nope, 0)").collect()
    assert "registered in this session: kept)" in str(info.value)
    assert isinstance(dd.from_datafusion(info.value), TableNotFoundError)


# -- review and stress findings ---------------------------------------------------------------


def test_local_folder_names_with_url_characters(tmp_path: Path):
    """'::' in a local folder name is not an fsspec chain; '%', '#' and '?' in a local table's
    folder survive table_changes reopening the registered table."""
    plain = _table(tmp_path / "plain", [1, 2, 3])
    for name in ("a::b", "pct%41x", "hash#x", "q?x"):
        shutil.copytree(plain, tmp_path / name)
        assert _xs(dd.DeltaTable(str(tmp_path / name)).snapshot().scan().to_table()) == [1, 2, 3], name
        ctx = _session()
        dd.register_table(ctx, "t", str(tmp_path / name))
        assert _sql_xs(ctx, "SELECT x FROM table_changes('t', 0)") == [1, 2, 3], name
    # a local folder catalog serves such folders too
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(tmp_path))
    assert _sql_xs(ctx, 'SELECT x FROM lake.default."a::b"') == [1, 2, 3]
    assert "a::b" in ctx.sql("SHOW TABLES").to_pydict()["table_name"]


def test_unlistable_locations_are_package_errors(tmp_path: Path):
    """A symlink loop or a name too long for the filesystem: DeltaError naming the folder, from
    Python and from SQL (raw OSError before)."""
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    long = tmp_path / ("x" * 300)
    for where in (str(loop), str(long)):
        with pytest.raises(DeltaError, match="cannot list .*_delta_log"):
            dd.DeltaTable(where).snapshot()
        ctx = _session()
        with pytest.raises(Exception) as info:
            ctx.sql(f"SELECT count(*) FROM table_changes('{where}', 0)").collect()
        assert isinstance(dd.from_datafusion(info.value), DeltaError)


def test_table_changes_takes_string_views_and_far_timestamps(tmp_path: Path):
    """VARCHAR casts are string views in DataFusion 55; timestamps outside the nanosecond range
    (years 1677..2262) are bounds like any other (both refused before)."""
    t = _table(tmp_path / "t", [1, 2, 3])
    ctx = _session()

    def n(sql: str) -> int:
        return ctx.sql(sql).to_pydict()["n"][0]

    assert n(f"SELECT count(*) AS n FROM table_changes(CAST('{t}' AS VARCHAR), 0, CAST('0' AS VARCHAR))") == 3
    far = "arrow_cast('2999-01-01T00:00:00', 'Timestamp(Millisecond, None)')"
    assert n(f"SELECT count(*) AS n FROM table_changes('{t}', 0, {far})") == 3
    assert n(f"SELECT count(*) AS n FROM table_changes('{t}', 0, to_timestamp_seconds(32472144000))") == 3
    early = "arrow_cast('1600-01-01T00:00:00', 'Timestamp(Microsecond, None)')"
    assert n(f"SELECT count(*) AS n FROM table_changes('{t}', {early})") == 3


def test_misspelt_delta_options_are_refused_on_any_filesystem(tmp_path: Path):
    """OPTIONS go to the filesystem of an object store, which takes anything: 'versoin' read the
    latest version there, silently."""
    fs = fsspec.filesystem("memory")
    root = f"/opt-{uuid.uuid4().hex}"
    fs.put(_table(tmp_path / "t", [1]), f"{root}/t", recursive=True)
    try:
        ctx = _session()
        for key in ("versoin", "timestmp", "time_stamp"):
            with pytest.raises(Exception, match=f"'{key}' is not a Delta option"):
                ctx.sql(
                    f"CREATE EXTERNAL TABLE x STORED AS DELTA LOCATION 'memory://{root}/t' OPTIONS ('{key}' '0')"
                )
    finally:
        fs.rm(root, recursive=True)


def test_file_uri_with_a_fragment_or_query_is_refused(tmp_path: Path):
    """RFC 8089 would make 'file:///x/t#v2' the folder /x/t: both spellings of a file URI used to
    open different tables (file:/x/t#v2 read the folder 't#v2'). A '#' or '?' is written %23, %3F."""
    _table(tmp_path / "t", [1])
    _table(tmp_path / "t#v2", [2])
    _table(tmp_path / "t?v=3", [3])
    for uri in (
        f"file://{tmp_path}/t#v2",
        f"file:{tmp_path}/t#v2",
        f"file://{tmp_path}/t?v=3",
        f"local://{tmp_path}/t#v2",
    ):
        with pytest.raises(DeltaError, match="fragment.*%23"):
            dd.DeltaTable(uri)
    assert _xs(dd.DeltaTable(f"file://{tmp_path}/t%23v2").snapshot().scan().to_table()) == [2]
    assert _xs(dd.DeltaTable(f"file:{tmp_path}/t%3Fv=3").snapshot().scan().to_table()) == [3]
    assert _xs(dd.DeltaTable(f"{tmp_path}/t#v2").snapshot().scan().to_table()) == [2]


def test_folder_catalog_at_a_filesystem_root(tmp_path: Path):
    name = f"root_{uuid.uuid4().hex[:8]}"
    fs = fsspec.filesystem("memory")
    fs.put(_table(tmp_path / "t", [1, 2, 3]), f"/{name}", recursive=True)
    try:
        ctx = _session()
        dd.register_catalog(ctx, "lake", "memory://")
        assert _sql_xs(ctx, f"SELECT x FROM lake.default.{name}") == [1, 2, 3]
    finally:
        fs.rm(f"/{name}", recursive=True)


def test_table_changes_on_a_quoted_name_with_a_dot(tmp_path: Path):
    t = _table(tmp_path / "t", [1, 2, 3])
    ctx = _session()
    ctx.sql(f"CREATE EXTERNAL TABLE \"My.T\" STORED AS DELTA LOCATION '{t}'")
    ctx.sql(f"CREATE EXTERNAL TABLE \"Upper\" STORED AS DELTA LOCATION '{t}'")
    assert _sql_xs(ctx, 'SELECT x FROM table_changes("My.T", 0)') == [1, 2, 3]
    # listed as SQL spells them
    with pytest.raises(Exception, match='registered in this session: "My.T", "Upper"\\)'):
        ctx.sql("SELECT * FROM table_changes(nope, 0)").collect()


def test_table_changes_identifier_parts_holding_dots(tmp_path: Path):
    """An identifier's parts come from DataFusion's parse, not from its flattened text:
    lake."default.x" (schema lake, table "default.x") read catalog lake's default.x before, and
    lake.default."t.v2" (a catalog folder named t.v2) was not found."""
    _table(tmp_path / "lake" / "x", [1, 2])
    _table(tmp_path / "lake" / "t.v2", [3])
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    ctx.sql("CREATE SCHEMA lake")  # datafusion.lake
    dd.register_table(ctx, 'lake."default.x"', _table(tmp_path / "other", [7, 8, 9]))
    assert _sql_xs(ctx, 'SELECT x FROM lake."default.x"') == [7, 8, 9]
    assert _sql_xs(ctx, 'SELECT x FROM table_changes(lake."default.x", 0)') == [7, 8, 9]
    assert _sql_xs(ctx, "SELECT x FROM table_changes('lake.\"default.x\"', 0)") == [7, 8, 9]
    assert _sql_xs(ctx, "SELECT x FROM table_changes(lake.default.x, 0)") == [1, 2]
    assert _sql_xs(ctx, 'SELECT x FROM table_changes(lake.default."t.v2", 0)') == [3]


def test_register_table_refreshes_its_table_under_any_spelling_of_the_name(tmp_path: Path):
    """register_table("Trips") registers trips (SQL lower-cases unquoted names): refreshing it as
    "trips" or "public.trips" was refused as someone else's table, and messages listed "Trips",
    which SQL cannot name."""
    t = _table(tmp_path / "t", [1])
    ctx = _session()
    dd.register_table(ctx, "Trips", t)
    write_deltalake(t, pa.table({"x": pa.array([2], pa.int64())}), mode="append")
    dd.register_table(ctx, "trips", t)
    assert _sql_xs(ctx, "SELECT x FROM trips") == [1, 2]
    write_deltalake(t, pa.table({"x": pa.array([3], pa.int64())}), mode="append")
    dd.register_table(ctx, "public.trips", t)
    assert _sql_xs(ctx, "SELECT x FROM Trips") == [1, 2, 3]
    with pytest.raises(Exception, match="registered in this session: public.trips\\)"):  # once
        ctx.sql("SELECT * FROM table_changes(nope, 0)").collect()
    # a table the package did not register is still not replaced, whatever the spelling
    ctx.register_record_batches("mem", [[pa.record_batch({"x": [5]})]])
    with pytest.raises(DeltaError, match="'MEM' names a table this session already has"):
        dd.register_table(ctx, "MEM", t)


def test_change_range_errors_name_the_table(tmp_path: Path):
    t = _table(tmp_path / "t", [1])
    ctx = _session()
    dd.register_table(ctx, "tt", t)
    for args, why in (
        ("-1", "start version must not be negative"),
        ("'abc'", "start 'abc' is neither a version"),
        ("0, 'abc'", "end 'abc' is neither a version"),
        ("TIMESTAMP '2200-01-01 00:00:00'", "start timestamp .* is after the latest commit"),
    ):
        with pytest.raises(Exception, match=r"table_changes on (tt|file://\S+/t): " + why):
            ctx.sql(f"SELECT * FROM table_changes(tt, {args})").collect()
    with pytest.raises(DeltaError, match=f"table_changes on .*{tmp_path.name}/t: start version must not be"):
        dd.DeltaTable(t).changes(-1)


def test_table_changes_raises_the_catalog_tables_own_error(tmp_path: Path):
    """A catalog table whose log cannot be read: table_changes raises that error (it used to fall
    back to reading the name as a path)."""
    root = tmp_path / "lake"
    _table(root / "orders", [1])
    (root / "orders" / "_delta_log" / f"{1:020d}.json").write_text(
        json.dumps({"protocol": {"minReaderVersion": 99, "minWriterVersion": 2}}) + "\n"
    )
    ctx = _session()
    dd.register_catalog(ctx, "lake", str(root))
    with pytest.raises(Exception, match="InvalidProtocolError.*minReaderVersion 99") as info:
        ctx.sql("SELECT * FROM table_changes('lake.default.orders', 0)").collect()
    assert isinstance(dd.from_datafusion(info.value), InvalidProtocolError)


def test_explain_counts_only_its_own_threads_plans(tmp_path: Path):
    ctx = _session()
    for name in ("a", "b"):
        dd.register_table(ctx, name, _table(tmp_path / name, list(range(10))))
    stop = threading.Event()

    def noise() -> None:
        while not stop.is_set():
            ctx.sql("SELECT * FROM table_changes('b', 0)").collect()
            ctx.sql("SELECT * FROM a WHERE x = 7").collect()

    thread = threading.Thread(target=noise)
    thread.start()
    try:
        for _ in range(20):
            plan = dd.explain(ctx, "SELECT * FROM a WHERE x = 1")
            scans = [line for line in plan.splitlines() if "DeltaScan" in line]
            assert len(scans) == 1 and "pushed_filter=[x = 1]" in scans[0], scans
    finally:
        stop.set()
        thread.join()


def test_sessions_using_only_the_table_function_are_forgotten(tmp_path: Path):
    import gc

    from delta_datafusion.datafusion import table_function

    t = _table(tmp_path / "t", [1])
    before = len(table_function._SESSIONS)
    for _ in range(20):
        ctx = SessionContext()
        table_function.install_table_changes(ctx)
        ctx.sql(f"SELECT * FROM table_changes('{t}', 0)").collect()
        del ctx
    gc.collect()
    assert len(table_function._SESSIONS) <= before


def test_a_folder_name_that_is_not_utf8_is_refused_clearly(tmp_path: Path) -> None:
    """A table folder whose name holds bytes that are not UTF-8 (or any non-ASCII name under a
    non-UTF-8 locale with PYTHONUTF8=0) reaches Python with surrogates, which Arrow strings
    refuse: files(), scans, the change feed and SQL raised a raw UnicodeEncodeError."""
    root = os.fsdecode(os.fsencode(str(tmp_path)) + b"/tab\xe9")
    shutil.copytree(_table(tmp_path / "src", [1, 2]), root)
    table = dd.DeltaTable(root)
    assert table.snapshot().version == 0  # the log itself reads
    message = "is not UTF-8 text"
    for read in (lambda: table.snapshot().files(), lambda: table.changes(0).to_table()):
        with pytest.raises(DeltaError, match=message):
            read()
    ctx = _session()
    with pytest.raises(Exception, match=message) as info:  # noqa: B017 - DataFusion's wrapper
        dd.register_table(ctx, "t", root)
        ctx.sql("SELECT * FROM t").collect()
    assert isinstance(dd.from_datafusion(info.value) or info.value, DeltaError)


def test_table_changes_identifier_whose_relation_holds_a_dot(tmp_path: Path):
    """DataFusion flattens an identifier's relation: "x.default".t (schema "x.default") and
    x.default.t (catalog x) arrive alike. One existing reading is read; two are refused, not
    guessed (the folder catalog's table was read before)."""
    from datafusion.catalog import Schema

    ctx = _session()
    ctx.catalog("datafusion").register_schema("x.default", Schema.memory_schema())
    dd.register_table(ctx, '"x.default".t', _table(tmp_path / "dotted", [7, 8, 9]))
    assert _sql_xs(ctx, 'SELECT x FROM table_changes("x.default".t, 0)') == [7, 8, 9]
    _table(tmp_path / "lake" / "t", [1, 2])
    dd.register_catalog(ctx, "x", str(tmp_path / "lake"))
    assert _sql_xs(ctx, 'SELECT x FROM "x.default".t') == [7, 8, 9]
    with pytest.raises(Exception, match=r'may name x\.default\.t and "x\.default"\.t, both tables'):
        ctx.sql('SELECT x FROM table_changes("x.default".t, 0)').collect()
    assert _sql_xs(ctx, "SELECT x FROM table_changes('\"x.default\".t', 0)") == [7, 8, 9]
    assert _sql_xs(ctx, "SELECT x FROM table_changes('x.default.t', 0)") == [1, 2]


def test_register_table_does_not_replace_a_copy_under_another_name(tmp_path: Path):
    """A table the user registered under another name from one of ours (a copy of the provider)
    is not ours to replace, and replacing it must not forget the original's registration."""
    a, b = _table(tmp_path / "a", [1]), _table(tmp_path / "b", [2])
    ctx = _session()
    dd.register_table(ctx, "t", a)
    ctx.register_table("copy", ctx.table_provider("t"))
    with pytest.raises(DeltaError, match="'copy' names a table this session already has"):
        dd.register_table(ctx, "copy", b)
    dd.register_table(ctx, "t", a)  # still refreshes
    assert _sql_xs(ctx, "SELECT x FROM t") == [1]


def test_table_changes_identifier_falls_back_to_a_relative_path(tmp_path: Path, monkeypatch):
    """A bare or quoted identifier naming no table is tried as a folder, as written."""
    _table(tmp_path / "UpT", [5])
    monkeypatch.chdir(tmp_path)
    ctx = _session()
    assert _sql_xs(ctx, 'SELECT x FROM table_changes("UpT", 0)') == [5]


def test_zip_table_with_in_commit_timestamps_enabled_after_creation(tmp_path: Path):
    """A store without modification times (zip): the commits since in-commit timestamps were
    enabled have timestamps of their own, so time travel to them and their commit timestamps
    need no file time (PROTOCOL.md). Every such lookup was refused for the older commits' lack of
    modification times; one that needs them still is."""
    t = Path(_table(tmp_path / "t", [0]))
    for k in (1, 2):
        write_deltalake(str(t), pa.table({"x": pa.array([k], pa.int64())}), mode="append")
    md = next(
        json.loads(line)["metaData"]
        for line in (t / "_delta_log" / f"{0:020d}.json").open()
        if "metaData" in line
    )
    ict = 1_700_000_010_000
    md["configuration"] |= {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": str(ict),
    }
    protocol = {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["inCommitTimestamp", "changeDataFeed"],
    }
    log = t / "_delta_log"
    (log / f"{3:020d}.json").write_text(
        "\n".join(
            json.dumps(a)
            for a in ({"commitInfo": {"inCommitTimestamp": ict}}, {"protocol": protocol}, {"metaData": md})
        )
        + "\n"
    )
    table = dd.DeltaTable(f"zip://t::file://{_zip(t, tmp_path / 't.zip')}")
    assert table.snapshot(timestamp=ict + 5).version == 3
    assert table.snapshot().commit_timestamp(3) == ict
    assert table.changes(dt.datetime.fromtimestamp(ict / 1000, dt.timezone.utc)).to_table().num_rows == 0
    with pytest.raises(DeltaError, match="gives no modification time"):
        table.snapshot(timestamp=ict - 5)
    # a start after the latest commit: the history is given from the first commit with a time
    with pytest.raises(
        DeltaError, match=r"after the latest commit; available history: .* \(version 3; the commits"
    ):
        table.changes(dt.datetime.fromtimestamp(ict / 1000 + 60, dt.timezone.utc))


def test_register_table_refreshes_a_quoted_external_table(tmp_path: Path):
    """CREATE EXTERNAL TABLE "Upper" / "a.b": DataFusion hands the factory the name with its
    quotes dropped; register_table('"Upper"', ...) refreshes that table (refused after the names
    began to be compared as SQL reads them)."""
    a, b = _table(tmp_path / "a", [1]), _table(tmp_path / "b", [2])
    ctx = _session()
    for name in ('"Upper"', '"a.b"'):
        ctx.sql(f"CREATE EXTERNAL TABLE {name} STORED AS DELTA LOCATION '{a}'")
        dd.register_table(ctx, name, b)
        assert _sql_xs(ctx, f"SELECT x FROM {name}") == [2]


def test_register_table_refuses_a_copy_in_another_schema(tmp_path: Path):
    """other.t is not t (public.t): a copy of t's provider there is not replaced, and t's own
    refresh still works."""
    from datafusion.catalog import Schema

    a, b = _table(tmp_path / "a", [1]), _table(tmp_path / "b", [2])
    ctx = _session()
    ctx.catalog("datafusion").register_schema("other", Schema.memory_schema())
    dd.register_table(ctx, "t", a)
    ctx.register_table("other.t", ctx.table_provider("t"))
    with pytest.raises(DeltaError, match="'other.t' names a table this session already has"):
        dd.register_table(ctx, "other.t", b)
    dd.register_table(ctx, "datafusion.public.t", b)
    assert _sql_xs(ctx, "SELECT x FROM t") == [2]


def test_table_names_compare_as_datafusion_resolves_them():
    from delta_datafusion.datafusion.names import same_as_flattened, same_table

    assert (
        same_table("Trips", "trips")
        and same_table("t", "public.t")
        and same_table("t", "datafusion.public.t")
    )
    assert not same_table('"T"', "t") and not same_table("t", "other.t") and not same_table("t", "c.public.t")
    assert not same_table("Ä", "ä")  # DataFusion lower-cases ASCII letters only
    assert same_table('"a.b"', '"a.b"') and not same_table('"a.b"', "a.b")
    assert same_as_flattened("Upper", '"Upper"') and not same_as_flattened("Upper", "Upper")
    assert same_as_flattened("a.b", '"a.b"') and same_as_flattened("trips", "public.Trips")


def test_registrations_of_two_tables_spelled_alike_are_kept_apart(tmp_path: Path):
    """register_table("Trips") is trips; CREATE EXTERNAL TABLE "Trips" is Trips, which DataFusion
    hands the factory as Trips too. The second overwrote the first's registry entry: trips could
    not be refreshed any more and dd.explain lost its scan."""
    a, b, c = (_table(tmp_path / n, [k]) for k, n in enumerate("abc", start=1))
    ctx = _session()
    dd.register_table(ctx, "Trips", a)
    ctx.sql(f"CREATE EXTERNAL TABLE \"Trips\" STORED AS DELTA LOCATION '{b}'")
    dd.register_table(ctx, "Trips", c)
    assert _sql_xs(ctx, "SELECT x FROM trips") == [3]
    assert _sql_xs(ctx, 'SELECT x FROM "Trips"') == [2]
    assert "DeltaScan" in dd.explain(ctx, "SELECT * FROM trips")


def test_a_failed_create_or_replace_does_not_cost_the_table_its_registration(tmp_path: Path, monkeypatch):
    """CREATE OR REPLACE EXTERNAL TABLE t races a register_table('t') on another thread: the
    factory recorded its table before DataFusion's registration, which then failed; the table
    register_table put there lost its entry and could never be refreshed again."""
    from delta_datafusion.datafusion import session as session_module

    a, b, c = (_table(tmp_path / n, [k]) for k, n in enumerate("abc", start=1))
    ctx = _session()
    dd.register_table(ctx, "t", a)
    create = session_module.DeltaTableFactory.create

    def racing_create(self, cmd):
        thread = threading.Thread(target=dd.register_table, args=(ctx, "t", c))
        thread.start()
        thread.join(20)
        return create(self, cmd)

    monkeypatch.setattr(session_module.DeltaTableFactory, "create", racing_create)
    ctx.register_table_factory("DELTA", session_module.DeltaTableFactory(ctx.session_id()))
    with pytest.raises(Exception, match="already exists"):  # DataFusion's own race
        ctx.sql(f"CREATE OR REPLACE EXTERNAL TABLE t STORED AS DELTA LOCATION '{b}'").collect()
    assert _sql_xs(ctx, "SELECT x FROM t") == [3]
    dd.register_table(ctx, "t", a)  # was refused: "register_table did not register"
    assert _sql_xs(ctx, "SELECT x FROM t") == [1]


def test_two_racing_create_or_replace_keep_the_served_table_registered(tmp_path: Path, monkeypatch):
    """Two CREATE OR REPLACE EXTERNAL TABLE w run their factories before DataFusion registers
    either; the second factory's registry entry replaced the first's, and when the first's table
    was the one served, w could never be refreshed again."""
    from delta_datafusion.datafusion import session as session_module

    a, b, c, d = (_table(tmp_path / n, [k]) for k, n in enumerate("abcd", start=1))
    ctx = _session()
    ctx.sql(f"CREATE EXTERNAL TABLE w STORED AS DELTA LOCATION '{a}'").collect()
    create = session_module.DeltaTableFactory.create
    inner_done, other = threading.Event(), []

    def racing_create(self, cmd):
        out = create(self, cmd)
        if not other:  # the first statement: the second one's factory runs now, then waits for ours
            thread = threading.Thread(
                target=lambda: other.append(
                    _try(ctx, f"CREATE OR REPLACE EXTERNAL TABLE w STORED AS DELTA LOCATION '{c}'")
                )
            )
            other.append(thread)
            thread.start()
            inner_done.wait(20)
        else:
            inner_done.set()
            for _ in range(200):  # until the first statement has registered its table
                if ctx.table_exist("w"):
                    break
                time.sleep(0.02)
        return out

    monkeypatch.setattr(session_module.DeltaTableFactory, "create", racing_create)
    ctx.sql(f"CREATE OR REPLACE EXTERNAL TABLE w STORED AS DELTA LOCATION '{b}'").collect()
    other[0].join(20)
    monkeypatch.setattr(session_module.DeltaTableFactory, "create", create)
    gc.collect()
    assert _sql_xs(ctx, "SELECT x FROM w") == [2]
    assert "DeltaScan" in dd.explain(ctx, "SELECT * FROM w")
    dd.register_table(ctx, "w", d)
    assert _sql_xs(ctx, "SELECT x FROM w") == [4]


def _try(ctx: SessionContext, sql: str) -> str:
    try:
        ctx.sql(sql).collect()
        return "ok"
    except Exception as e:  # noqa: BLE001 - DataFusion's "already exists" for the losing statement
        return str(e)


def test_explain_keeps_the_scan_of_a_table_refreshed_meanwhile(tmp_path: Path):
    """dd.explain looked for plans only in the datasets registered after the EXPLAIN: a refresh on
    another thread in between hid the scan the statement planned."""
    a, b = _table(tmp_path / "a", [1]), _table(tmp_path / "b", [2])

    class RefreshingContext(SessionContext):
        refresh = False

        def sql(self, query, *args, **kwargs):
            out = super().sql(query, *args, **kwargs)
            if self.refresh and query.startswith("EXPLAIN"):
                thread = threading.Thread(target=dd.register_table, args=(self, "t", b))
                thread.start()
                thread.join()
            return out

    ctx = RefreshingContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", a)
    ctx.refresh = True
    scans = [line for line in dd.explain(ctx, "SELECT * FROM t").splitlines() if "DeltaScan" in line]
    assert len(scans) == 1


def _explaining_context(before_statement, after_statement) -> SessionContext:
    """A session whose EXPLAIN statements run ``before_statement`` (after dd.explain has looked at
    the session's tables) and ``after_statement`` (before it looks again), each on another thread:
    a server's other threads refreshing the table in those two moments."""

    def on_other_thread(fn) -> None:
        thread = threading.Thread(target=fn)
        thread.start()
        thread.join()

    class ExplainingContext(SessionContext):
        def sql(self, query, *args, **kwargs):
            if not query.startswith("EXPLAIN"):
                return super().sql(query, *args, **kwargs)
            on_other_thread(before_statement)
            df = super().sql(query, *args, **kwargs)

            class Collected:
                def to_pydict(self):
                    rows = df.to_pydict()
                    on_other_thread(after_statement)
                    return rows

            return Collected()

    ctx = ExplainingContext()
    dd.register(ctx)
    return ctx


def test_explain_keeps_the_scan_of_a_table_registered_and_replaced_meanwhile(tmp_path: Path):
    """A name registered again on another thread after dd.explain first looked, and again before it
    looked a second time: the dataset the statement planned was in neither look, and its scan line
    was missing."""
    a, b, c = (_table(tmp_path / n, [i]) for i, n in enumerate("abc"))
    ctx = _explaining_context(lambda: dd.register_table(ctx, "t", b), lambda: dd.register_table(ctx, "t", c))
    dd.register_table(ctx, "t", a)
    scans = [line for line in dd.explain(ctx, "SELECT * FROM t").splitlines() if "DeltaScan" in line]
    assert len(scans) == 1 and "table=t version=0" in scans[0], scans


def test_explain_keeps_the_scan_of_a_catalog_table_committed_to_meanwhile(tmp_path: Path):
    """A folder-catalog table a writer commits to while dd.explain runs, queried by other threads:
    the statement opened the version committed after dd.explain first looked, another thread's
    query replaced it with the next one before the second look, and the scan line was missing
    (a third of the explains, with a writer committing every 20 ms and four threads querying)."""
    root = tmp_path / "lake"
    t = _table(root / "w", [0])

    def commit_and_query(x: int) -> None:
        write_deltalake(t, pa.table({"x": pa.array([x], pa.int64())}), mode="append")
        ctx.sql("SELECT count(*) FROM lake.default.w").collect()

    ctx = _explaining_context(lambda: commit_and_query(1), lambda: commit_and_query(2))
    dd.register_catalog(ctx, "lake", str(root))
    ctx.sql("SELECT count(*) FROM lake.default.w").collect()  # version 0 opened
    scans = [
        line for line in dd.explain(ctx, "SELECT * FROM lake.default.w").splitlines() if "DeltaScan" in line
    ]
    assert len(scans) == 1 and "version=1 " in scans[0], scans


def test_registered_names_list_a_quoted_external_table_beside_its_unquoted_twin(tmp_path: Path):
    a, b = _table(tmp_path / "a", [1]), _table(tmp_path / "b", [2])
    ctx = _session()
    dd.register_table(ctx, "Trips", a)
    ctx.sql(f"CREATE EXTERNAL TABLE \"Trips\" STORED AS DELTA LOCATION '{b}'")
    with pytest.raises(Exception, match='registered in this session: "Trips", trips\\)'):
        ctx.sql("SELECT * FROM table_changes(nope, 0)").collect()


def test_register_table_of_a_name_dropped_while_it_looks(tmp_path: Path, monkeypatch):
    """The table present when register_table checks, gone when it looks behind the name (a
    CREATE OR REPLACE on another thread drops it first): it was refused as another's table."""
    from delta_datafusion.datafusion import session as session_module

    a, b = _table(tmp_path / "a", [1]), _table(tmp_path / "b", [2])
    ctx = _session()
    dd.register_table(ctx, "t", a)
    look = session_module._registered_dataset

    def dropped_meanwhile(ctx_, name):
        ctx_.deregister_table(name)
        return look(ctx_, name)

    monkeypatch.setattr(session_module, "_registered_dataset", dropped_meanwhile)
    dd.register_table(ctx, "t", b)
    assert _sql_xs(ctx, "SELECT x FROM t") == [2]


# -- stores addressed by URL, and files on other stores ------------------------------------------


class _UrlMemoryFS(MemoryFileSystem):
    """An in-memory store that names files by their whole URL, as fsspec's HTTP store does."""

    protocol = ("http", "https")


class _HostMemoryFS(MemoryFileSystem):
    """An in-memory store that needs the URL's host to open, as fsspec's FTP store does."""

    protocol = "ddhost"
    hosts: list[str] = []

    def __init__(self, host: str, **kwargs):
        super().__init__(**kwargs)
        _HostMemoryFS.hosts.append(host)

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        rest = path.split("://", 1)[1] if "://" in path else path
        return "/" + rest.split("/", 1)[1].rstrip("/") if "/" in rest else "/"

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict:
        return {"host": path.split("://", 1)[1].split("/", 1)[0]}


def _upload(fs, local: str, prefix: str) -> None:
    for folder, _, names in os.walk(local):
        for n in names:
            full = os.path.join(folder, n)
            fs.pipe(prefix + "/" + os.path.relpath(full, local).replace(os.sep, "/"), Path(full).read_bytes())


def test_stores_that_name_files_by_url_or_need_the_urls_host(tmp_path: Path, monkeypatch):
    """An HTTP store's paths are whole URLs (the protocol was cut off, and every listing
    failed); an FTP-like store takes its host from the URL (it was opened without one)."""
    t = _table(tmp_path / "t", [1, 2, 3])
    write_deltalake(t, pa.table({"x": pa.array([4], pa.int64())}), mode="append")
    registry = sys.modules["fsspec.registry"]._registry
    monkeypatch.setitem(registry, "http", _UrlMemoryFS)
    monkeypatch.setitem(registry, "https", _UrlMemoryFS)
    monkeypatch.setitem(registry, "ddhost", _HostMemoryFS)
    url = f"http://127.0.0.1:9/loc-{uuid.uuid4().hex}/t"
    store = fsspec.filesystem("memory")
    _upload(store, t, url)
    try:
        table = dd.DeltaTable(url)
        assert table.storage.root_uri == url
        assert _xs(table.snapshot().scan().to_table()) == [1, 2, 3, 4]
        assert table.snapshot().files().column("location").to_pylist()[0].startswith(url + "/")
        assert _xs(table.changes(1).to_table()) == [4]
        ctx = _session()
        ctx.sql(f"CREATE EXTERNAL TABLE h STORED AS DELTA LOCATION '{url}'")
        assert _sql_xs(ctx, "SELECT x FROM h") == [1, 2, 3, 4]
    finally:
        store.rm(url, recursive=True)
    root = f"/loc-{uuid.uuid4().hex}"
    _upload(store, t, root + "/t")
    try:
        assert _xs(dd.DeltaTable(f"ddhost://myhost{root}/t").snapshot().scan().to_table()) == [1, 2, 3, 4]
        assert "myhost" in _HostMemoryFS.hosts
    finally:
        store.rm(root, recursive=True)


def test_a_log_path_on_another_store_is_refused_not_read_from_this_one(tmp_path: Path):
    """An absolute add path is a URI: memory:///x/y.parquet in a local table was read from the
    local file /x/y.parquet, and file:///x/y.parquet in a memory table from memory's /x/y.parquet
    (other files, other rows)."""
    from delta_datafusion.errors import UnsupportedFeatureError

    t = Path(_table(tmp_path / "t", [1, 2]))
    commit = t / "_delta_log" / "00000000000000000001.json"
    data = next(t.glob("*.parquet"))
    size = data.stat().st_size

    def add(path: str) -> str:
        action = {
            "path": path,
            "partitionValues": {},
            "size": size,
            "modificationTime": 1,
            "dataChange": True,
        }
        return json.dumps({"add": action}) + "\n"

    commit.write_text(add(f"memory://{data}"))
    with pytest.raises(UnsupportedFeatureError, match=r"on another filesystem \(memory\) than the table's"):
        dd.DeltaTable(str(t)).snapshot().files()
    store = fsspec.filesystem("memory")
    root = f"/loc-{uuid.uuid4().hex}"
    commit.write_text(add(f"file://{data}"))
    _upload(store, str(t), root)
    try:
        with pytest.raises(UnsupportedFeatureError, match=r"on another filesystem \(file\)"):
            dd.DeltaTable(f"memory://{root}").snapshot().files()
        store.pipe(
            f"{root}/_delta_log/00000000000000000001.json", add(f"memory://{root}/{data.name}").encode()
        )
        # the same file named by its URI: one live file
        assert _xs(dd.DeltaTable(f"memory://{root}").snapshot().scan().to_table()) == [1, 2]
    finally:
        store.rm(root, recursive=True)
    commit.write_text(add(f"file://{data}"))
    assert _xs(dd.DeltaTable(str(t)).snapshot().scan().to_table()) == [1, 2]


def test_file_uris_fail_with_the_types_and_names_plain_paths_get(tmp_path: Path):
    """A malformed file URI was a plain DeltaError (a host, a relative path, a fragment), a
    '%00' in one a bare ValueError ('embedded null byte') from the filesystem calls; they are
    ArgumentErrors naming the URI, as a NUL in a plain path is. A well-formed URI that is no
    table gets the TableNotFoundError a plain path gets, naming the URI as given."""
    _table(tmp_path / "t", [1])
    (tmp_path / "plain.txt").write_text("x")
    for uri, words in (
        ("file://otherhost/x/t", "with a host ('otherhost')"),
        ("file:rel/t", "needs an absolute path"),
        (f"file://{tmp_path}/t#v2", "'#' fragment"),
        (f"file://{tmp_path}/t%00", "NUL character"),
        (f"file:{tmp_path}/t%00x", "NUL character"),
    ):
        with pytest.raises(ArgumentError, match=re.escape(words)) as info:
            dd.DeltaTable(uri).snapshot()
        assert repr(uri) in str(info.value)
    with pytest.raises(ArgumentError, match="NUL character"):
        dd.DeltaTable(f"{tmp_path}/t\x00")
    for uri, plain, words in (
        (f"file://{tmp_path}/no%20such", f"{tmp_path}/no such", "is not a Delta table"),
        (f"file://{tmp_path}/plain.txt", f"{tmp_path}/plain.txt", "is a file, not a Delta table folder"),
        (f"file://{tmp_path}/t/%5Fdelta_log", f"{tmp_path}/t/_delta_log", "is a table's log folder"),
    ):
        with pytest.raises(TableNotFoundError, match=re.escape(f"{plain} {words}")):
            dd.DeltaTable(plain).snapshot()
        with pytest.raises(TableNotFoundError, match=re.escape(f"{uri} {words}")):
            dd.DeltaTable(uri).snapshot()
        with pytest.raises(TableNotFoundError, match=re.escape(f"{uri} {words}")):
            dd.register_table(_session(), "t", uri)


def test_file_uri_with_a_tab_or_line_break_is_refused(tmp_path: Path):
    """URL parsing deletes tabs and line breaks: file:///x/a<LF>b read the folder /x/ab."""
    _table(tmp_path / "ab", [1])
    for uri in (f"file://{tmp_path}/a\nb", f"file://{tmp_path}/a\tb", f"local://{tmp_path}/a\rb"):
        with pytest.raises(DeltaError, match="tab or line break"):
            dd.DeltaTable(uri)


def test_a_store_failing_to_close_a_checkpoint_is_a_storage_error(tmp_path: Path, monkeypatch):
    """fsspec's blockcache over local files fails every close with an AttributeError, which
    escaped as it was."""
    from delta_datafusion.errors import StorageError

    class Closing:
        def __init__(self, f):
            self._f = f

        def __getattr__(self, name):
            return getattr(self._f, name)

        def close(self):
            raise AttributeError("property 'closed' of 'LocalFileOpener' object has no setter")

    class BadCloseFS(MemoryFileSystem):
        protocol = "ddbadclose"

        def _open(self, path, mode="rb", **kwargs):
            return Closing(super()._open(path, mode, **kwargs))

    monkeypatch.setitem(sys.modules["fsspec.registry"]._registry, "ddbadclose", BadCloseFS)
    t = _table(tmp_path / "t", [1])
    dl = __import__("deltalake").DeltaTable(t)
    dl.create_checkpoint()
    store = fsspec.filesystem("memory")
    root = f"/loc-{uuid.uuid4().hex}"
    _upload(store, t, root)
    try:
        with pytest.raises(StorageError, match=r"cannot close .*checkpoint.parquet: AttributeError"):
            dd.DeltaTable(f"ddbadclose://{root}").snapshot().files()
    finally:
        store.rm(root, recursive=True)


class _PerHostMemoryFS(MemoryFileSystem):
    """A host-addressed store with one namespace per host (as FTP or HDFS servers are)."""

    protocol = "ddhosts"
    stores: dict[str, dict] = {}

    def __init__(self, host: str, **kwargs):
        super().__init__(**kwargs)
        self.store = _PerHostMemoryFS.stores.setdefault(host, {})
        self.pseudo_dirs = [""]

    _strip_protocol = _HostMemoryFS._strip_protocol
    _get_kwargs_from_urls = _HostMemoryFS._get_kwargs_from_urls


def test_tables_at_one_path_on_two_hosts_are_two_tables(tmp_path: Path, monkeypatch):
    """The host is part of a table's identity: the same path on two servers was one table to the
    caches and statement pins (B's change feed read at A's latest version), and an absolute
    path naming another host was read from the table's own."""
    from delta_datafusion.errors import UnsupportedFeatureError

    monkeypatch.setitem(sys.modules["fsspec.registry"]._registry, "ddhosts", _PerHostMemoryFS)
    a = _table(tmp_path / "a", [1, 2])
    b = _table(tmp_path / "b", [100, 200])
    write_deltalake(b, pa.table({"x": pa.array([300], pa.int64())}), mode="append")
    for host, local in (("hosta", a), ("hostb", b)):
        _upload(fsspec.filesystem("ddhosts", host=host), local, "/t")
    ta, tb = dd.DeltaTable("ddhosts://hosta/t"), dd.DeltaTable("ddhosts://hostb/t")
    assert ta.storage.cache_key != tb.storage.cache_key
    assert tb.storage.root_uri == "ddhosts://hostb/t"
    assert _xs(ta.snapshot().scan().to_table()) == [1, 2]
    assert _xs(tb.snapshot().scan().to_table()) == [100, 200, 300]
    # a host option other than the URL's would read the other server's table
    with pytest.raises(ArgumentError, match="'host' names another store than the URL.*'hostb'.*'hosta'"):
        dd.DeltaTable("ddhosts://hosta/t", {"host": "hostb"})
    assert _xs(dd.DeltaTable("ddhosts://hosta/t", {"host": "hosta"}).snapshot().scan().to_table()) == [1, 2]
    ctx = _session()
    sql = (
        "SELECT x FROM table_changes('ddhosts://hosta/t', 0) UNION ALL "
        "SELECT x FROM table_changes('ddhosts://hostb/t', 0)"
    )
    assert _sql_xs(ctx, sql) == [1, 2, 100, 200, 300]
    data = next(p for p in fsspec.filesystem("ddhosts", host="hostb").find("/t") if p.endswith(".parquet"))
    size = fsspec.filesystem("ddhosts", host="hostb").info(data)["size"]
    add = {
        "path": f"ddhosts://hostb{data}",
        "partitionValues": {},
        "size": size,
        "modificationTime": 1,
        "dataChange": True,
    }
    fsspec.filesystem("ddhosts", host="hosta").pipe(
        "/t/_delta_log/00000000000000000001.json", (json.dumps({"add": add}) + "\n").encode()
    )
    with pytest.raises(UnsupportedFeatureError, match="on another filesystem .*hostb"):
        dd.DeltaTable("ddhosts://hosta/t").snapshot().files()


class _AccountMemoryFS(MemoryFileSystem):
    """An Azure-like store with one namespace per account: URLs name it as adlfs's do
    (``ddaz://container@account.dfs.core.windows.net/path``), and, as in adlfs, a connection
    string (the option, else AZURE_STORAGE_CONNECTION_STRING) picks it over ``account_name``."""

    protocol = "ddaz"
    cachable = False  # the environment picks the account too
    stores: dict[str, dict] = {}

    def __init__(self, account_name: str = "", connection_string: str = "", **kwargs):
        super().__init__(**kwargs)
        text = connection_string or os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if text:
            account_name = dict(p.split("=", 1) for p in text.split(";"))["AccountName"]
        self.store = _AccountMemoryFS.stores.setdefault(account_name.lower(), {})
        self.pseudo_dirs = [""]

    @classmethod
    def _strip_protocol(cls, path: str) -> str:
        rest = path.split("://", 1)[1] if "://" in path else path.lstrip("/")
        container, _, key = rest.partition("/")
        return "/" + "/".join(p for p in (container.split("@", 1)[0], key.rstrip("/")) if p)

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict:
        host = path.split("://", 1)[1].split("/", 1)[0]
        return {"account_name": host.split("@", 1)[1].split(".", 1)[0]} if "@" in host else {}


def test_an_azure_url_and_options_naming_two_accounts_are_refused(tmp_path: Path, monkeypatch):
    """A URL naming one account with a connection string (option or environment) or an
    ``account_name`` of another read the other account's table silently (adlfs takes those over
    the URL's account); the URL's account in any case, or a URL naming none, reads as before."""
    monkeypatch.setitem(sys.modules["fsspec.registry"]._registry, "ddaz", _AccountMemoryFS)
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    container = f"c{uuid.uuid4().hex[:8]}"
    for account, values in (("mine", [1, 2]), ("other", [7])):
        local = _table(tmp_path / account, values)
        _upload(fsspec.filesystem("ddaz", account_name=account), local, f"/{container}/t")
    conn = "DefaultEndpointsProtocol=https;AccountName=Mine;AccountKey=a2V5"
    other = f"ddaz://{container}@other.dfs.core.windows.net/t"
    mine = f"ddaz://{container}@mine.dfs.core.windows.net/t"
    assert _xs(dd.DeltaTable(other).snapshot().scan().to_table()) == [7]
    sas = "BlobEndpoint=https://mine.blob.core.windows.net/;SharedAccessSignature=sv=1&sig=a%3D"
    for opts in ({"connection_string": conn}, {"account_name": "mine"}, {"connection_string": sas}):
        with pytest.raises(ArgumentError, match="'other'.*'[Mm]ine'|'[Mm]ine'.*'other'"):
            dd.DeltaTable(other, opts).snapshot()
    ctx = _session()
    with pytest.raises(Exception) as caught:
        ctx.sql(
            f"CREATE EXTERNAL TABLE e STORED AS DELTA LOCATION '{other}' OPTIONS ('connection_string' '{conn}')"
        )
    assert isinstance(from_datafusion(caught.value), ArgumentError), caught.value
    ctx.sql(
        f"CREATE EXTERNAL TABLE e STORED AS DELTA LOCATION '{mine}' OPTIONS ('connection_string' '{conn}')"
    )
    assert _sql_xs(ctx, "SELECT x FROM e") == [1, 2]
    dd.register_catalog(ctx, "lake", mine.rsplit("/", 1)[0], storage_options={"connection_string": conn})
    assert _sql_xs(ctx, "SELECT x FROM lake.default.t") == [1, 2]
    same = (
        (mine.replace("@mine", "@MINE"), {"account_name": "Mine"}),
        (f"ddaz://{container}/t", {"connection_string": conn}),
    )
    for uri, opts in same:
        assert _xs(dd.DeltaTable(uri, opts).snapshot().scan().to_table()) == [1, 2]

    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    with pytest.raises(ArgumentError, match="'other'.*AZURE_STORAGE_CONNECTION_STRING.*'Mine'"):
        dd.DeltaTable(other).snapshot()
    with pytest.raises(Exception) as caught:
        ctx.sql(f"SELECT x FROM table_changes('{other}', 0)").collect()
    assert isinstance(from_datafusion(caught.value), ArgumentError), caught.value
    assert _sql_xs(ctx, f"SELECT x FROM table_changes('{mine}', 0)") == [1, 2]
    assert _xs(dd.DeltaTable(f"ddaz://{container}/t").snapshot().scan().to_table()) == [1, 2]


def test_adlfs_reads_a_connection_strings_account_so_another_in_the_url_is_refused(monkeypatch):
    """adlfs itself (no server: opening makes no request) reads the connection string's account
    whatever account the URL names, so the package refuses the two naming different accounts;
    the emulator's strings (UseDevelopmentStorage, a local endpoint whose path is the account)
    were let through, and read the emulator's container for another account's URL."""
    adlfs = pytest.importorskip("adlfs")
    from delta_datafusion.storage import Storage

    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    conn = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=a2V5;BlobEndpoint=http://127.0.0.1:9/devstoreaccount1"
    fs = adlfs.AzureBlobFileSystem(account_name="other", connection_string=conn, skip_instance_cache=True)
    assert fs.service_client.account_name == "devstoreaccount1"
    with pytest.raises(ArgumentError, match="'other'.*'devstoreaccount1'"):
        Storage("abfss://c@other.dfs.core.windows.net/t", {"connection_string": conn})
    for uri in ("abfss://c@DevStoreAccount1.dfs.core.windows.net/t", "az://c/t", "abfs://c/t"):
        storage = Storage(uri, {"connection_string": conn})
        assert storage.root == "c/t" and storage.fs.service_client.account_name == "devstoreaccount1"
    # an emulator's strings name its account without AccountName: the library reads it anyway
    sas = "SharedAccessSignature=sv=1&sig=a%3D"
    emulator = ("UseDevelopmentStorage=true", f"BlobEndpoint=http://127.0.0.1:9/devstoreaccount1;{sas}")
    for text in emulator:
        fs = adlfs.AzureBlobFileSystem(account_name="other", connection_string=text, skip_instance_cache=True)
        assert fs.service_client.account_name == "devstoreaccount1"
        with pytest.raises(ArgumentError, match="'other'.*'devstoreaccount1'"):
            Storage("abfss://c@other.dfs.core.windows.net/t", {"connection_string": text})
        storage = Storage("abfss://c@devstoreaccount1.dfs.core.windows.net/t", {"connection_string": text})
        assert storage.fs.service_client.account_name == "devstoreaccount1"
    # an account_name option beside a connection string of another account: the string's is read
    fs = adlfs.AzureBlobFileSystem(account_name="other", connection_string=conn, skip_instance_cache=True)
    assert fs.service_client.account_name == "devstoreaccount1"
    with pytest.raises(ArgumentError, match=r"'other' \(storage option account_name\).*'devstoreaccount1'"):
        Storage("az://c/t", {"account_name": "other", "connection_string": conn})
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", conn)
    with pytest.raises(ArgumentError, match="'other'.*AZURE_STORAGE_CONNECTION_STRING.*'devstoreaccount1'"):
        Storage("az://c/t", {"account_name": "other"})
    assert Storage("az://c/t", {"account_name": "DevStoreAccount1"}).root == "c/t"


def test_adlfs_without_any_credential_says_how_a_public_container_is_read(monkeypatch):
    """adlfs without a key, token or ``anon`` asks azure-identity's DefaultAzureCredential, which
    fails each request with a ClientAuthenticationError listing the sources it tried (after about
    90 s of the blob client's retries) and no word of ``anon``: the StorageError says how a public
    container is read. The failure is raised by the listing itself here (no Azure server)."""
    adlfs = pytest.importorskip("adlfs")
    from azure.core.exceptions import ClientAuthenticationError

    for name in [n for n in os.environ if n.startswith("AZURE_")]:
        monkeypatch.delenv(name)
    said = (
        "DefaultAzureCredential failed to retrieve a token from the included credentials.\n"
        "Attempted credentials:\n\tEnvironmentCredential: EnvironmentCredential authentication unavailable."
    )

    async def no_credential(self, *args, **kwargs):
        raise ClientAuthenticationError(message=said)

    monkeypatch.setattr(adlfs.AzureBlobFileSystem, "_ls", no_credential)
    options = {"account_name": "devstoreaccount1", "skip_instance_cache": True}
    with pytest.raises(dd.errors.StorageError) as caught:
        dd.DeltaTable("abfs://c/t", storage_options=options).snapshot()
    message = str(caught.value)
    assert "c/t/_delta_log" in message and "DefaultAzureCredential failed" in message
    assert "storage_options={'anon': True}" in message and "--option anon=true" in message


def test_an_http_table_requests_its_files_by_percent_encoded_urls(tmp_path: Path, monkeypatch):
    """A log path decoded once names the folder `x=A%2FA`; over HTTP that is the URL `x=A%252FA`
    (the decoded name was requested: a raw 404 from the HTTP client, or a 'removed by VACUUM'
    error for a file that exists)."""
    from urllib.parse import quote

    from conftest import corpus_table

    registry = sys.modules["fsspec.registry"]._registry
    monkeypatch.setitem(registry, "http", _UrlMemoryFS)
    store = fsspec.filesystem("memory")
    for name in ("data-reader-escaped-chars", "delta-0.8.0-special-partition", "data-reader-timestamp_ntz"):
        local = corpus_table(name)
        url = f"http://127.0.0.1:9/loc-{uuid.uuid4().hex}/{name}"
        for folder, _, names in os.walk(local):  # as a web server serves the folder: encoded URLs
            for n in names:
                rel = os.path.relpath(os.path.join(folder, n), local).replace(os.sep, "/")
                store.pipe(url + "/" + quote(rel), Path(folder, n).read_bytes())
        try:
            expected = dd.DeltaTable(str(local)).snapshot().scan().to_table()
            got = dd.DeltaTable(url).snapshot().scan().to_table()
            key = expected.column_names
            assert sorted(got.to_pylist(), key=repr) == sorted(expected.select(key).to_pylist(), key=repr), (
                name
            )
        finally:
            store.rm(url, recursive=True)


@pytest.mark.parametrize(
    "name", ["v2-checkpoints-json-with-sidecars", "v2-checkpoint-parquet", "v1-multi-part-struct-stats-only"]
)
def test_an_http_tables_checkpoint_sidecars_and_parallel_leaves_keep_the_urls_host(
    name: str, tmp_path: Path, monkeypatch
):
    """Sidecar and parallel-leaf paths were normalized with posixpath.normpath, which folds the
    '//' of ``http://host/...``: every V2 checkpoint's sidecar was "missing" (``http:/127...``)
    and every checkpoint leaf of the parallel phase "not in" the log folder; a leaf's URL was
    percent-encoded again as if it were a log path (``a%2520folder``), also "not in" it, and a
    sidecar named ``side car %41`` was requested unencoded."""
    from urllib.parse import quote

    from conftest import corpus_table

    from delta_datafusion.parallel import ParallelScanMetadata, run_parallel

    registry = sys.modules["fsspec.registry"]._registry
    monkeypatch.setitem(registry, "http", _UrlMemoryFS)
    store = fsspec.filesystem("memory")
    local = tmp_path / name
    shutil.copytree(corpus_table(name), local)
    manifests = list((local / "_delta_log").glob("*.checkpoint.*.json"))
    for side in (local / "_delta_log" / "_sidecars").glob("*.parquet") if manifests else ():
        renamed = f"side car %41 {side.name}"  # named in the manifests URI-encoded
        side.rename(side.with_name(renamed))
        for m in manifests:
            m.write_text(m.read_text().replace(f'"path":"{side.name}"', f'"path":"{quote(renamed)}"'))
    url = f"http://127.0.0.1:9/a%20folder-{uuid.uuid4().hex}/{name}"  # 'a folder-...', encoded
    for folder, _, names in os.walk(local):
        for n in names:
            rel = os.path.relpath(os.path.join(folder, n), local).replace(os.sep, "/")
            store.pipe(url + "/" + quote(rel), Path(folder, n).read_bytes())

    def paths(batches) -> list[str]:
        return sorted(p for m in batches for p in m.files.column("path").to_pylist())

    try:
        want = dd.DeltaTable(str(local)).snapshot()
        snap = dd.DeltaTable(url).snapshot()
        assert sorted(snap.files().column("path").to_pylist()) == sorted(
            want.files().column("path").to_pylist()
        )
        assert snap.scan().to_table().num_rows == want.scan().to_table().num_rows > 0
        expected = paths(want.scan().scan_metadata())
        assert paths(run_parallel(dd.DeltaTable(url).snapshot().scan())) == expected
        phase = dd.DeltaTable(url).snapshot().scan().parallel_scan_metadata()
        first = list(phase)
        after = phase.finish()
        assert after.files and all(f.path.startswith(url + "/_delta_log/") for f in after.files)
        leaves = list(ParallelScanMetadata(after.state.to_bytes(), after.files))
        assert paths(first + leaves) == expected
    finally:
        store.rm(url, recursive=True)


@pytest.mark.parametrize("name", ["canonicalized-paths-normal-a", "canonicalized-paths-special-a"])
def test_an_http_table_refuses_a_file_uri_with_one_slash_as_other_stores_do(name: str, monkeypatch):
    """The log adds '/some/unqualified/absolute/path' and removes it as 'file:/some/...' (Spark
    canonicalizes removes). Over HTTP the 'file:/...' spelling was taken as a relative path
    (http://host/t/file%3A/some/...), so the remove missed the add and files() listed a removed
    file (0 locally); memory and S3 refuse the table, as 'file:///...' was refused over HTTP."""
    from urllib.parse import quote

    from conftest import corpus_table

    registry = sys.modules["fsspec.registry"]._registry
    monkeypatch.setitem(registry, "http", _UrlMemoryFS)
    store = fsspec.filesystem("memory")
    local = corpus_table(name)
    url = f"http://127.0.0.1:9/loc-{uuid.uuid4().hex}/{name}"
    for folder, _, names in os.walk(local):
        for n in names:
            rel = os.path.relpath(os.path.join(folder, n), local).replace(os.sep, "/")
            store.pipe(url + "/" + quote(rel), Path(folder, n).read_bytes())
    try:
        assert dd.DeltaTable(str(local)).snapshot().files().num_rows == 0
        with pytest.raises(
            dd.UnsupportedFeatureError, match="'file:/some/unqualified/.*on another filesystem"
        ):
            dd.DeltaTable(url).snapshot().files()
    finally:
        store.rm(url, recursive=True)


def test_an_http_folder_catalog_names_its_tables_as_their_folders(tmp_path: Path, monkeypatch):
    """A web server lists a folder by percent-encoded URLs: the catalog named its tables 'a%20b',
    'x%2541' and '%C3%BC' (the local catalog: 'a b', 'x%41', 'ü'), and the table 'x%41' was
    requested as the folder 'xA'."""
    from urllib.parse import quote

    from conftest import corpus_table

    registry = sys.modules["fsspec.registry"]._registry
    monkeypatch.setitem(registry, "http", _UrlMemoryFS)
    store = fsspec.filesystem("memory")
    url = f"http://127.0.0.1:9/lake-{uuid.uuid4().hex}"
    local = tmp_path / "lake"
    names = {
        "plain": "table-with-dv-small",
        "a b": "cdf-table",
        "x%41": "basic_partitioned",
        "ü": "simple_table",
    }
    for name, source in names.items():
        shutil.copytree(corpus_table(source), local / name)
    for folder, _, files in os.walk(local):
        for n in files:
            rel = os.path.relpath(os.path.join(folder, n), local).replace(os.sep, "/")
            store.pipe(url + "/" + quote(rel), Path(folder, n).read_bytes())

    def counts(root: str) -> dict[str, int]:
        ctx = SessionContext()
        dd.register_catalog(ctx, "lake", root)
        listed = ctx.catalog("lake").schema("default").table_names
        sql = 'SELECT count(*) AS c FROM lake.default."{}"'
        return {n: ctx.sql(sql.format(n)).to_pylist()[0]["c"] for n in sorted(listed)}

    try:
        want = counts(str(local))
        assert sorted(want) == sorted(names) and all(want.values())
        assert counts(url) == want
    finally:
        store.rm(url, recursive=True)


def test_a_missing_zip_archive_is_no_table(tmp_path: Path):
    """A zip archive that is not there holds no table: TableNotFoundError, as for a missing
    folder (it was a plain DeltaError about opening a filesystem)."""
    missing = tmp_path / "missing.zip"
    for uri, options in ((f"zip://t::file://{missing}", None), ("zip://t", {"fo": str(missing)})):
        with pytest.raises(dd.TableNotFoundError, match=r"\(so there is no table there\): FileNotFoundError"):
            dd.DeltaTable(uri, options).snapshot()


class _KeyFileFS(MemoryFileSystem):
    """A store that reads its key file on opening (as sftp's key_filename and older gcsfs token
    files are read): a missing key file raises FileNotFoundError naming the key file."""

    protocol = "ddkeyfile"

    def __init__(self, key_file: str = "", **kwargs):
        Path(key_file).read_bytes()
        super().__init__(**kwargs)


def test_a_missing_key_file_is_not_a_missing_table(tmp_path: Path):
    """A missing file an option names (a key file) is the store's error, naming that file: not
    TableNotFoundError, which says no table is at the location."""
    fsspec.register_implementation("ddkeyfile", _KeyFileFS, clobber=True)
    key = tmp_path / "missing.key"
    with pytest.raises(DeltaError, match="missing.key") as info:
        dd.DeltaTable("ddkeyfile://t", {"key_file": str(key)}).snapshot()
    assert not isinstance(info.value, TableNotFoundError), info.value


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        ("file:///tmp/a#b/t", "a file URI cannot have a '#' fragment"),
        ("file:rel/t", "a file URI needs an absolute path"),
        ("bogus://x/t", "Protocol not known: bogus"),
    ],
)
def test_table_changes_of_a_location_it_cannot_open_says_why(location: str, reason: str):
    """A location the package cannot open (a malformed file URI, a store fsspec does not know or
    whose package is missing) was reported as "not a table of this session and no such path
    exists", while register_table and DeltaTable named the reason."""
    with pytest.raises(DeltaError, match=re.escape(reason)):
        dd.DeltaTable(location).changes(0)
    with pytest.raises(Exception) as info:
        _session().sql(f"SELECT count(*) FROM table_changes('{location}', 0)").collect()
    err = from_datafusion(info.value)
    # a protocol no filesystem has, or a malformed file URI, is a mistaken argument, as for
    # register_table and DeltaTable
    assert isinstance(err, ArgumentError) and reason in str(err), str(err)
