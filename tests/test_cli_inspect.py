"""The CLI's ``history``, ``files`` and ``changes`` commands on the bundled example and corpus
tables: the values printed are checked against the log files, the Python API and the corpus
expectations; bad arguments and unreadable tables end with exit code 2 and a one-line error."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import corpus_table, require_corpus

from delta_datafusion import DeltaTable, cli

EXAMPLE = str(cli.example_table())


def _printed(text: str) -> tuple[list[str], list[dict[str, str]], int]:
    """(column names, rows as {column: cell}, the row count on the last line) of a table that
    ``_format`` printed; lines before its header (a summary) are skipped."""
    lines = text.rstrip("\n").splitlines()
    sep = next(i for i, line in enumerate(lines) if line and set(line) <= {"-", "+"})
    names = [c.strip() for c in lines[sep - 1].split(" | ")]
    rows = []
    for line in lines[sep + 1 : -1]:
        if line.startswith("... "):
            break
        cells = [c.strip() for c in line.split(" | ")]
        assert len(cells) == len(names), line
        rows.append(dict(zip(names, cells, strict=True)))
    count = int(lines[-1].strip("()").split()[0])
    return names, rows, count


def _run(capsys, *args: str) -> str:
    assert cli.main(list(args)) == 0, capsys.readouterr().err
    return capsys.readouterr().out


def _commit_info(table: Path | str, version: int) -> dict:
    for line in (Path(table) / "_delta_log" / f"{version:020d}.json").read_text().splitlines():
        if '"commitInfo"' in line:
            return json.loads(line)["commitInfo"]
    raise AssertionError(f"no commitInfo in version {version}")


def _utc(ms: int) -> str:
    """A commit time as the table shows it, as DataFusion does: ``2024-01-01T11:20:00.123Z``."""
    at = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(milliseconds=ms)
    return at.isoformat(timespec="milliseconds" if ms % 1000 else "seconds").replace("+00:00", "Z")


# -- history ---------------------------------------------------------------------------------


def test_history_lists_the_commits_newest_first_with_their_commit_info(capsys):
    names, rows, count = _printed(_run(capsys, "history", EXAMPLE))
    # deltalake names no user: no such column; its clientVersion is the engine
    assert names == ["version", "timestamp", "operation", "engine", "parameters", "metrics"]
    assert count == 6 and [r["version"] for r in rows] == ["5", "4", "3", "2", "1", "0"]
    api = DeltaTable(EXAMPLE).history().to_pylist()[::-1]
    assert [r["timestamp"] for r in rows] == [_utc(h["timestamp"]) for h in api]
    assert [r["operation"] for r in rows] == ["WRITE", "DELETE", "UPDATE", "WRITE", "WRITE", "WRITE"]
    delete = _commit_info(EXAMPLE, 4)
    assert rows[1]["parameters"] == f"predicate={delete['operationParameters']['predicate']}"
    assert "city = 'Lisbon' AND trip_id >= 30" in rows[1]["parameters"]
    assert "num_deleted_rows=10" in rows[1]["metrics"].split(", ")
    assert {r["engine"] for r in rows} == {delete["engineInfo"]}  # before clientVersion
    # --limit: the newest N, as history(limit=N) reads them
    _, rows, count = _printed(_run(capsys, "history", EXAMPLE, "--limit", "2"))
    assert count == 2 and [r["version"] for r in rows] == ["5", "4"]
    names, rows, count = _printed(_run(capsys, "history", EXAMPLE, "--limit", "0"))
    assert count == 0 and rows == [] and names[:3] == ["version", "timestamp", "operation"]


def test_history_takes_max_rows_as_the_other_commands_do(capsys):
    """The other commands cap their rows with --max-rows; history only took --limit, and
    refused --max-rows as an unrecognized argument. Both are taken (the newest N commits, in
    every format); given with different numbers they are refused, naming both."""
    for args in (["--max-rows", "2"], ["--limit", "2", "--max-rows", "2"]):
        _, rows, count = _printed(_run(capsys, "history", EXAMPLE, *args))
        assert count == 2 and [r["version"] for r in rows] == ["5", "4"]
    out = _run(capsys, "history", EXAMPLE, "--max-rows", "3", "--format", "json")
    assert [json.loads(line)["version"] for line in out.splitlines()] == [5, 4, 3]
    assert cli.main(["history", EXAMPLE, "--limit", "2", "--max-rows", "3"]) == 2
    err = capsys.readouterr().err
    assert "error: ArgumentError: --limit 2 and --max-rows 3 both give the number of commits" in err


def test_history_of_a_checkpointed_table_lists_every_commit():
    """dv-with-columnmapping: checkpoint at 10, commits 0..15 (a WRITE, then DELETEs)."""
    path = corpus_table("dv-with-columnmapping")
    assert (path / "_delta_log" / f"{10:020d}.checkpoint.parquet").is_file()
    out = _capture("history", str(path))
    _, rows, count = _printed(out)
    assert count == 16 and [r["version"] for r in rows] == [str(v) for v in range(15, -1, -1)]
    assert [r["operation"] for r in rows] == ["DELETE"] * 15 + ["WRITE"]
    assert rows[-1]["parameters"] == 'mode=ErrorIfExists, partitionBy=["part"]'
    assert rows[-1]["metrics"] == "numFiles=20, numOutputRows=50, numOutputBytes=24078"
    assert rows[0]["parameters"] == 'predicate=["(col1#19833 = 28)"]'
    assert "numDeletionVectorsAdded=1" in rows[0]["metrics"].split(", ")
    assert {r["engine"] for r in rows} == {"Apache-Spark/3.5.0 Delta-Lake/3.0.0-SNAPSHOT"}


def test_history_shows_the_user_and_parameters_that_are_not_text():
    """checkpoint-v2-table (Databricks, v2 checkpoints at 6 and 8): userName is shown; a
    parameter that is not a string (statsOnLoad: true, description: null) is written as JSON."""
    path = corpus_table("checkpoint-v2-table")
    names, rows, count = _printed(_capture("history", str(path), "--limit", "5"))
    assert names == ["version", "timestamp", "operation", "user", "engine", "parameters", "metrics"]
    assert count == 5 and [r["version"] for r in rows] == ["9", "8", "7", "6", "5"]
    assert {r["user"] for r in rows} == {"rtyler@scribd.com"}
    assert rows[0]["parameters"] == "mode=Append, statsOnLoad=true, partitionBy=[]"
    assert rows[4]["operation"] == "SET TBLPROPERTIES"
    assert rows[4]["parameters"] == 'properties={"delta.checkpointInterval":"2"}'
    _, rows, _ = _printed(_capture("history", str(path)))
    assert rows[-1]["operation"] == "CREATE TABLE" and "description=null" in rows[-1]["parameters"]


def test_history_api_gives_each_commits_commit_info():
    path = corpus_table("cdf-table")
    hist = DeltaTable(str(path)).history().to_pylist()
    assert [h["version"] for h in hist] == [0, 1, 2, 3]
    for h in hist:
        assert json.loads(h["commit_info"]) == _commit_info(path, h["version"])
    assert json.loads(hist[3]["commit_info"])["operationMetrics"]["numDeletedRows"] == "1"


def _capture(*args: str) -> str:
    """stdout of ``cli.main(args)``, which must succeed (for tests without capsys)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    assert code == 0, err.getvalue()
    return out.getvalue()


# -- files -----------------------------------------------------------------------------------


def test_files_lists_the_live_files_and_prunes_with_where(capsys):
    out = _run(capsys, "files", EXAMPLE)
    assert out.splitlines()[0] == "version 5: 4 live files"
    names, rows, count = _printed(out)
    assert names == ["path", "partition_values", "size", "num_records", "deletion_vector", "deleted_rows"]
    api = sorted(DeltaTable(EXAMPLE).snapshot().files().to_pylist(), key=lambda f: f["path"])
    assert count == 4 and [r["path"] for r in rows] == [f["path"] for f in api]
    assert [r["size"] for r in rows] == [str(f["size"]) for f in api]
    # 40 rows written per city at versions 0-2; Lisbon lost 10 to the delete and gained 20
    assert [(r["partition_values"], r["num_records"]) for r in rows] == [
        ("{city: 'Faro'}", "40"),
        ("{city: 'Lisbon'}", "20"),
        ("{city: 'Lisbon'}", "30"),
        ("{city: 'Porto'}", "40"),
    ]
    assert {(r["deletion_vector"], r["deleted_rows"]) for r in rows} == {("false", "NULL")}
    # partition pruning
    out = _run(capsys, "files", EXAMPLE, "--where", "city = 'Porto'")
    assert out.splitlines()[0] == "version 5: 1 of 4 live files kept by --where"
    _, rows, count = _printed(out)
    assert count == 1 and rows[0]["path"].startswith("city=Porto/")
    # statistics pruning: trip_id 120..139 were appended at version 5 alone
    out = _run(capsys, "files", EXAMPLE, "--where", "trip_id >= 120 AND fare > 0")
    assert out.splitlines()[0] == "version 5: 1 of 4 live files kept by --where"
    _, rows, _ = _printed(out)
    v5 = [
        a["add"]["path"]
        for a in map(json.loads, (Path(EXAMPLE) / "_delta_log" / f"{5:020d}.json").open())
        if "add" in a
    ]
    assert [r["path"] for r in rows] == v5 and rows[0]["num_records"] == "20"
    # a predicate DataFusion applies (a function) prunes nothing: every file kept
    out = _run(capsys, "files", EXAMPLE, "--where", "starts_with(rider, 'rider-1')")
    assert out.splitlines()[0] == "version 5: 4 of 4 live files kept by --where"
    # time travel: version 0 had one file, Lisbon's 40 rows
    out = _run(capsys, "files", EXAMPLE, "--version", "0")
    assert out.splitlines()[0] == "version 0: 1 live file"  # one file, in words
    _, rows, _ = _printed(out)
    assert rows[0]["partition_values"] == "{city: 'Lisbon'}" and rows[0]["num_records"] == "40"
    ms = DeltaTable(EXAMPLE).history().column("timestamp")[1].as_py()
    when = dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()
    out = _run(capsys, "files", EXAMPLE, "--timestamp", when)
    assert out.splitlines()[0] == "version 1: 2 live files"
    # --max-rows
    _, rows, count = _printed(_run(capsys, "files", EXAMPLE, "--max-rows", "1"))
    assert len(rows) == 1 and count == 4 and rows[0]["path"].startswith("city=Faro/")  # first by path


def test_files_shows_deletion_vectors():
    """table-with-dv-small: one file of 10 rows, 2 deleted by a DV (8 visible)."""
    path = corpus_table("table-with-dv-small")
    names, rows, count = _printed(_capture("files", str(path)))
    assert "partition_values" not in names  # not partitioned
    assert count == 1
    assert (rows[0]["num_records"], rows[0]["deletion_vector"], rows[0]["deleted_rows"]) == (
        "10",
        "true",
        "2",
    )
    _, rows, _ = _printed(_capture("files", str(path), "--version", "0"))  # before the DELETE
    assert (rows[0]["num_records"], rows[0]["deletion_vector"], rows[0]["deleted_rows"]) == (
        "10",
        "false",
        "NULL",
    )


def test_files_of_a_partitioned_dv_table_with_column_mapping():
    """dv-with-columnmapping: 15 live files, two carry a DV deleting one row each; the partition
    column is named logically (``part``) though the paths use its physical name."""
    path = corpus_table("dv-with-columnmapping")
    _, rows, count = _printed(_capture("files", str(path)))
    assert count == 15
    with_dv = [
        (r["partition_values"], r["num_records"], r["deleted_rows"])
        for r in rows
        if r["deletion_vector"] == "true"
    ]
    assert sorted(with_dv) == [("{part: 6}", "3", "1"), ("{part: 8}", "3", "1")]
    # live rows: the snapshot's expected row count
    live = sum(
        int(r["num_records"]) - (int(r["deleted_rows"]) if r["deleted_rows"] != "NULL" else 0) for r in rows
    )
    assert (
        live
        == pq.read_metadata(
            require_corpus() / "expected" / "dv-with-columnmapping" / "snapshot.parquet"
        ).num_rows
    )
    out = _capture("files", str(path), "--where", "part = 6")
    assert out.splitlines()[0] == "version 15: 1 of 15 live files kept by --where"
    assert _printed(out)[1][0]["deletion_vector"] == "true"
    _, _, count = _printed(_capture("files", str(path), "--version", "0"))
    assert count == 20  # the WRITE's numFiles


# -- changes ---------------------------------------------------------------------------------


def test_changes_prints_the_change_feed_of_a_range(capsys):
    out = _run(capsys, "changes", EXAMPLE, "3", "3")
    assert out.splitlines()[0] == "changes of versions 3..3"
    names, rows, count = _printed(out)
    assert names == [
        "trip_id", "city", "rider", "distance_km", "fare", "started_at",
        "_change_type", "_commit_version", "_commit_timestamp",
    ]  # fmt: skip
    api = DeltaTable(EXAMPLE).changes(3, 3).to_table().to_pylist()
    assert count == len(api) == 20
    assert Counter((r["trip_id"], r["fare"], r["_change_type"]) for r in rows) == Counter(
        (str(a["trip_id"]), str(a["fare"]), a["_change_type"]) for a in api
    )
    # the UPDATE doubled the fares of Porto's trips 40..49
    post = {r["trip_id"]: float(r["fare"]) for r in rows if r["_change_type"] == "update_postimage"}
    pre = {r["trip_id"]: float(r["fare"]) for r in rows if r["_change_type"] == "update_preimage"}
    assert sorted(post, key=int) == [str(i) for i in range(40, 50)] and post == {
        k: 2 * v for k, v in pre.items()
    }
    assert {r["_commit_timestamp"] for r in rows} == {
        _utc(DeltaTable(EXAMPLE).history().column("timestamp")[3].as_py())
    }


def test_changes_columns_where_and_max_rows(capsys):
    out = _run(
        capsys, "changes", EXAMPLE, "3", "--columns", "fare, trip_id", "--where", "_change_type = 'delete'"
    )
    assert out.splitlines()[0] == "changes of versions 3..5"
    names, rows, count = _printed(out)
    # the change columns are always printed, after the columns asked for
    assert names == ["fare", "trip_id", "_change_type", "_commit_version", "_commit_timestamp"]
    assert count == 10 and sorted(int(r["trip_id"]) for r in rows) == list(range(30, 40))
    assert {(r["_change_type"], r["_commit_version"]) for r in rows} == {("delete", "4")}
    # --max-rows: the first rows printed, all counted (the whole range: 20 + 10 + 20)
    out = _run(
        capsys, "changes", EXAMPLE, "3", "--max-rows", "5", "--columns", "trip_id", "--columns", "city"
    )
    names, rows, count = _printed(out)
    assert names[:2] == ["trip_id", "city"] and len(rows) == 5 and count == 50
    assert "... 45 more rows" in out
    # a change column named in --columns is printed once, where it is named
    names, _, count = _printed(_run(capsys, "changes", EXAMPLE, "5", "--columns", "_commit_version,trip_id"))
    assert names == ["_commit_version", "trip_id", "_change_type", "_commit_timestamp"] and count == 20


def test_changes_of_a_cdf_table_match_the_corpus_expectation():
    """cdf-table 0..3 (Spark, cdc files): the 23 rows kernel's basic_cdf asserts."""
    path = corpus_table("cdf-table")
    out = _capture("changes", str(path), "0", "3")
    _, rows, count = _printed(out)
    want = pq.read_table(require_corpus() / "expected" / "cdf-table" / "cdf_0_3.parquet").to_pylist()
    assert count == len(want) == 23
    key = ("id", "name", "birthday", "_change_type", "_commit_version")
    assert Counter(tuple(r[k] for k in key) for r in rows) == Counter(
        tuple(str(w[k]) for k in key) for w in want
    )
    # a sub-range and a filter on a data column
    _, rows, count = _printed(
        _capture("changes", str(path), "2", "3", "--where", "id = 7", "--columns", "name")
    )
    assert count == 3
    assert sorted((r["_commit_version"], r["_change_type"]) for r in rows) == [
        ("2", "update_postimage"), ("2", "update_preimage"), ("3", "delete"),
    ]  # fmt: skip


def test_changes_of_a_table_with_in_commit_timestamps():
    """cdc_ict_table: _commit_timestamp is each commit's inCommitTimestamp (version 1's is a
    year before version 0's file time)."""
    path = corpus_table("cdc_ict_table")
    _, rows, count = _printed(_capture("changes", str(path), "1", "1"))
    assert count == 4 and {r["_change_type"] for r in rows} == {"insert"}
    assert {r["_commit_timestamp"] for r in rows} == {_utc(_commit_info(path, 1)["inCommitTimestamp"])}


# -- errors and options ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["changes", EXAMPLE, "3", "1"], "error: ArgumentError: END 1 is before START 3"),
        (["changes", EXAMPLE, "3", "--columns", "fare,nope"], "error: ArgumentError: --columns: unknown column(s) ['nope']"),
        (["changes", EXAMPLE, "3", "--columns", "fare,fare"], "error: ArgumentError: --columns: columns ['fare'] are listed more than once"),
        (["changes", EXAMPLE, "9"], "error: VersionNotFoundError: table_changes: start version 9 is after the latest version 5"),
        (["changes", EXAMPLE, "nope"], "start 'nope' is neither a version nor an ISO-8601 timestamp"),
        (["changes", EXAMPLE, "0", "--where", "nope = 1"], "error: PredicateError: predicate 'nope = 1'"),
        (["files", EXAMPLE, "--where", "nope = 1"], "error: PredicateError: predicate 'nope = 1'"),
        (["files", EXAMPLE, "--version", "6"], "error: VersionNotFoundError: version 6 does not exist"),
        (["history", EXAMPLE, "--option", "version=1"], "`history` lists the commits (--limit N: the newest N)"),
        (["files", EXAMPLE, "--option", "version=1"], "`files` takes --version 1"),
        (["changes", EXAMPLE, "0", "--option", "timestamp=x"], "`changes` takes the range as START [END]"),
        # a table not given with --table, or named otherwise: DataFusion's words, and which were given
        (["sql", f"SELECT * FROM '{EXAMPLE}'"], "not found (no table given; name each Delta table with --table NAME=URI)"),
        (["sql", "SELECT * FROM trips", "--table", f"t={EXAMPLE}"], "error: ArgumentError: Error during planning: table 'datafusion.public.trips' not found (tables given: t;"),
        # DataFusion's own messages of several lines, on one
        (["sql", "SELECT nope FROM t", "--table", f"t={EXAMPLE}"], "No field named nope. Valid fields are t.trip_id"),
        (["sql", "DELETE FROM t", "--table", f"t={EXAMPLE}"], "DELETE operation on table 't' caused by This feature is not implemented"),
    ],
)  # fmt: skip
def test_bad_arguments_are_named(capsys, args, said):
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["changes", EXAMPLE, "-1"], "argument start: a version is a whole number from 0, got '-1'"),
        (["changes", EXAMPLE, "0", "-2"], "argument end: a version is a whole number from 0, got '-2'"),
        (["history", EXAMPLE, "--limit", "-1"], "argument --limit: expected a whole number >= 0, got '-1'"),
        (["files", EXAMPLE, "--version", "-1"], "argument --version: expected a whole number >= 0, got '-1'"),
        (["files", EXAMPLE, "--max-rows", "x"], "argument --max-rows: expected a whole number >= 0"),
        (["files", EXAMPLE, "--version", "1", "--timestamp", "2024-01-01"], "not allowed with argument --version"),
    ],
)  # fmt: skip
def test_bad_numbers_are_refused_by_the_parser(capsys, args, said):
    with pytest.raises(SystemExit) as stop:
        cli.main(args)
    assert stop.value.code == 2 and said in capsys.readouterr().err


def test_unreadable_tables_give_the_package_errors(tmp_path, capsys):
    for command, more in (("history", []), ("files", []), ("changes", ["0"])):
        assert cli.main([command, str(tmp_path), *more]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: TableNotFoundError: ") and "Traceback" not in err, err
    # a table without the change feed enabled
    path = corpus_table("table-with-dv-small")
    assert cli.main(["changes", str(path), "0"]) == 2
    assert (
        "error: CdfNotEnabledError: change data feed is not enabled at version 0" in capsys.readouterr().err
    )


def test_storage_options_reach_the_filesystem(capsys):
    """``dir://`` (fsspec's folder-prefix filesystem) needs ``path``, the folder it reads under:
    without the options the store cannot be opened (zip://, which `info` is tested with, gives no
    modification times, which history and the change feed need)."""
    option = ["--option", f"path={Path(EXAMPLE).parent}", "--option", "target_protocol=file"]
    for command, more, count in (("history", [], 6), ("files", [], 4), ("changes", ["3", "3"], 20)):
        args = [command, "dir://trips", *more]
        assert cli.main(args) == 2
        assert "cannot open filesystem for 'dir://trips'" in capsys.readouterr().err
        assert cli.main([*args, *option]) == 0
        assert _printed(capsys.readouterr().out)[2] == count
