"""The command line (the demo is the main job) and the small Python API around snapshots."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import corpus_table

import delta_datafusion as dd
from delta_datafusion import DeltaTable, cli
from delta_datafusion.errors import DeltaError


def test_demo_runs_on_the_bundled_table():
    out = io.StringIO()
    assert cli.demo(out) == 0
    text = out.getvalue()
    # revenue by city, pruning shown by explain, time travel and the change feed
    assert "Lisbon | 50" in text and "Porto  | 40" in text
    assert "after_partition_pruning=1" in text
    assert "120" in text  # rows at version 2
    assert "update_postimage | 10" in text and "delete           | 10" in text


def test_demo_runs_from_a_folder_with_a_quote_in_its_name(tmp_path, monkeypatch):
    # the demo pastes the example's location into CREATE EXTERNAL TABLE ... LOCATION '...'
    copy = tmp_path / "o'brien" / "trips"
    shutil.copytree(cli.example_table(), copy)
    monkeypatch.setattr(cli, "example_table", lambda: copy)
    out = io.StringIO()
    assert cli.demo(out) == 0
    assert "120" in out.getvalue()


def test_cli_stops_quietly_when_its_reader_goes_away():
    """`delta-datafusion sql ... | head -1`: no error message, the status of a SIGPIPE death."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "delta_datafusion.cli",
            "sql",
            "SELECT * FROM generate_series(1, 200000)",
            "--max-rows",
            "200000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1])},
    )
    assert proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert err == ""


def test_cli_on_an_ascii_only_stream_escapes_what_it_cannot_show(tmp_path: Path) -> None:
    """PYTHONIOENCODING=ascii (or a C locale) and a non-ASCII table path: `info` printed
    "error: UnicodeEncodeError" and exited 2 instead of its output."""
    table = tmp_path / "données-é"
    shutil.copytree(cli.example_table(), table)
    done = subprocess.run(
        [sys.executable, "-m", "delta_datafusion.cli", "info", str(table)],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1]), "PYTHONIOENCODING": "ascii"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"donn\\xe9es-\\xe9" in done.stdout


@pytest.mark.parametrize("command", ["demo", "sql", "info", "history", "files", "changes"])
def test_each_command_help_says_what_it_does(capsys, command: str) -> None:
    """`delta-datafusion demo --help` printed only its usage and -h; the others' began with their
    arguments: the one line saying what the command does was in the top-level list only."""
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    description = capsys.readouterr().out.split("\n\n")[1]
    assert not description.startswith(("positional arguments", "options")), description


def test_cli_table_columns_stay_aligned_on_an_ascii_only_stream() -> None:
    """On an ASCII stream 'é' prints as the four characters \\xe9, but the column was as wide as
    one character: the header and separator ended three columns before the row under them."""
    done = subprocess.run(
        [sys.executable, "-m", "delta_datafusion.cli", "sql", "SELECT 'é' AS e, 'x' AS \"ñ\", 1 AS n"],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1]), "PYTHONIOENCODING": "ascii"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    header, sep, row, _ = done.stdout.decode("ascii").splitlines()
    assert row == "\\xe9 | x    | 1"
    assert header == "e    | \\xf1 | n"
    assert sep == "-----+------+--"


def test_cli_takes_non_ascii_text_typed_under_a_c_locale(tmp_path: Path) -> None:
    """Under LC_ALL=C with PYTHONUTF8=0 Python keeps each non-ASCII byte of the command line as a
    lone surrogate: SQL text, --where predicates and names holding one failed with "error:
    UnicodeEncodeError: 'utf-8' codec can't encode ...: surrogates not allowed" (exit 2). They
    are read as the UTF-8 they were typed as; the output is escaped for the ASCII stdout."""
    trips = cli.example_table()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LC_") and k not in ("LANG", "PYTHONIOENCODING")
    }
    env.update(
        {"PYTHONPATH": str(Path(cli.__file__).parents[1]), "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}
    )
    runs = {
        "sql": [
            "sql",
            "SELECT 'é' AS \"ñ\", count(*) AS n FROM trips WHERE city <> 'Lisbõa'",
            "--table",
            f"trips={trips}",
        ],
        "files": ["files", str(trips), "--where", "city = 'Pórto'"],
        "changes": ["changes", str(trips), "3", "--where", "city <> 'Pórto'"],
    }
    utf8 = {**env, "PYTHONUTF8": "1", "PYTHONIOENCODING": "ascii"}  # the same text read right
    out = {}
    for name, argv in runs.items():
        done, expected = (
            subprocess.run(
                [sys.executable, "-m", "delta_datafusion.cli", *argv], capture_output=True, env=e, timeout=120
            )
            for e in (env, utf8)
        )
        assert done.returncode == 0, (name, done.stderr.decode(errors="replace"))
        assert done.stdout == expected.stdout, name
        out[name] = done.stdout
    assert b"\\xf1 " in out["sql"] and b"\\xe9 | 130" in out["sql"]
    assert b"0 of 4 live files kept by --where" in out["files"]
    # an error naming such text shows it as typed (escaped), not as surrogates
    done = subprocess.run(
        [sys.executable, "-m", "delta_datafusion.cli", "sql", 'SELECT * FROM "é"'],
        capture_output=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 2 and b"'datafusion.public.\\xe9' not found" in done.stderr, done.stderr


def test_cli_sql_and_info(capsys):
    path = str(cli.example_table())
    assert (
        cli.main(["sql", "SELECT count(*) AS n FROM trips WHERE city = 'Faro'", "--table", f"trips={path}"])
        == 0
    )
    assert "40" in capsys.readouterr().out
    assert cli.main(["info", path]) == 0
    out = capsys.readouterr().out
    assert "version: 5" in out and "partition columns: ['city']" in out and "live files: 4" in out


def test_cli_sql_prints_an_explain_as_lines_with_the_delta_pruning(capsys):
    """EXPLAIN in `sql` printed each plan as one table cell with its line breaks escaped (``\\n``),
    unreadable (FORMAT tree entirely); it prints the plans line by line as dd.explain() does,
    with the DeltaScan figures, also after a leading comment and for EXPLAIN ANALYZE."""
    table = f"trips={cli.example_table()}"
    query = "SELECT trip_id FROM trips WHERE city = 'Porto'"
    for statement in (f"EXPLAIN {query}", f"-- why so slow?\n/* a */ explain {query}"):
        assert cli.main(["sql", statement, "--table", table]) == 0
        out = capsys.readouterr().out
        assert "\\n" not in out
        lines = out.splitlines()
        assert "logical_plan:" in lines and "physical_plan:" in lines and "delta:" in lines
        assert any(line.startswith("    DatasetExec: number_of_fragments=1") for line in lines)
        scan = "DeltaScan: table=trips version=5 files_total=4 after_partition_pruning=1"
        assert any(line.strip().startswith(scan) for line in lines)
    assert cli.main(["sql", f"EXPLAIN FORMAT tree {query}", "--table", table]) == 0
    out = capsys.readouterr().out
    assert "\\n" not in out and any(line.strip().startswith("\u250c") for line in out.splitlines())
    assert cli.main(["sql", f"EXPLAIN ANALYZE {query}", "--table", table]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "Plan with Metrics:" in lines and any(line.strip().startswith(scan) for line in lines)
    assert "\\n" not in "".join(lines)


def test_cli_sql_reads_a_table_as_of_a_version_or_time(capsys):
    """``sql --as-of NAME=WHEN`` pins a table given with --table to a version or a time, as
    ``register_table(version=, timestamp=)`` does; a name no --table gave, or a bad WHEN, is an
    error naming it."""
    path = str(cli.example_table())
    query = "SELECT count(*) AS n FROM trips"
    latest = dd.DeltaTable(path).snapshot().scan().to_table().num_rows
    first = dd.DeltaTable(path).snapshot(version=0).scan().to_table().num_rows
    assert first != latest
    assert cli.main(["sql", query, "--table", f"trips={path}", "--as-of", "trips=0"]) == 0
    assert f"{first}" in capsys.readouterr().out.split()
    at = dd.DeltaTable(path).history().column("timestamp")[0].as_py()
    when = dt.datetime.fromtimestamp(at / 1000, dt.timezone.utc).isoformat()
    assert cli.main(["sql", query, "--table", f"trips={path}", "--as-of", f"TRIPS={when}"]) == 0
    assert f"{first}" in capsys.readouterr().out.split()
    assert cli.main(["sql", query, "--table", f"trips={path}", "--as-of", "other=0"]) == 2
    assert "--as-of names 'other'" in capsys.readouterr().err
    assert cli.main(["sql", query, "--table", f"trips={path}", "--as-of", "trips=99"]) == 2
    assert "99" in capsys.readouterr().err
    assert cli.main(["sql", query, "--table", f"trips={path}", "--as-of", "trips"]) == 2
    assert "NAME=WHEN" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("when", "said"),
    [
        # digits other than 0-9 (str.isdigit() says yes) are not a version: not Python's int()
        # failing ('invalid literal for int()'), nor an Arabic-Indic digit read as version 3
        ("\u00b2", "timestamp '\u00b2' is not an ISO-8601 timestamp"),
        ("\u0663", "timestamp '\u0663' is not an ISO-8601 timestamp"),
        # a signed number is a version the user meant, refused as one (not as a timestamp)
        ("-1", "--as-of trips=-1: a version is a whole number from 0"),
        ("+3", "--as-of trips=+3: a version is a whole number from 0"),
        # text that is no time: the error names the flag and the table, as for a version
        ("abc", "--as-of trips=abc: timestamp 'abc' is not an ISO-8601 timestamp"),
        ("1.5", "--as-of trips=1.5: timestamp '1.5' is not an ISO-8601 timestamp"),
        ("2024-13-01", "--as-of trips=2024-13-01: timestamp '2024-13-01' is not an ISO-8601 timestamp"),
    ],
)
def test_cli_sql_as_of_refuses_what_is_not_a_version_or_time(capsys, when: str, said: str):
    path = str(cli.example_table())
    args = ["sql", "SELECT count(*) FROM trips", "--table", f"trips={path}", "--as-of", f"trips={when}"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert said in err, err


def test_cli_refuses_a_misspelt_version_or_timestamp_option(capsys):
    """``--option versoin=0`` (like 'version', which is refused with a hint) went to the
    filesystem, which ignores it: the command read the latest version silently, where SQL's
    ``OPTIONS ('versoin' '0')`` is refused. Refused as a look-alike, with the same hint."""
    path = str(cli.example_table())
    for args, hint in (
        (["info", path, "--option", "versoin=0"], "(did you mean 'version'?): `info` takes --version 0"),
        (["files", path, "--option", "Version=0"], "(did you mean 'version'?): `files` takes --version 0"),
        (["history", path, "--option", "timestmp=2024-01-01"], "`history` lists the commits"),
        (["changes", path, "0", "--option", "time_stamp=x"], "`changes` takes the range as START [END]"),
        (
            ["sql", "SELECT count(*) FROM trips", "--table", f"trips={path}", "--option", "verison=1"],
            "`sql` takes --as-of trips=1",
        ),
    ):
        assert cli.main(args) == 2
        err = capsys.readouterr().err
        assert f"--option {args[-1].split('=')[0]}=... is not a storage option" in err and hint in err, err
    assert cli.main(["info", path, "--option", "person=x"]) == 0  # not a look-alike: the filesystem's


def test_cli_passes_storage_options(tmp_path, capsys):
    """``--option KEY=VALUE`` reaches the filesystem (zip needs ``fo``, the archive); without it
    the store cannot be opened, so the option is what makes the table readable."""
    import zipfile

    example = cli.example_table()
    archive = tmp_path / "trips.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for f in example.rglob("*"):
            if f.is_file():
                z.write(f, f.relative_to(example.parent).as_posix())
    assert cli.main(["info", "zip://trips"]) == 2
    assert "cannot open filesystem for 'zip://trips'" in capsys.readouterr().err
    assert cli.main(["info", "zip://trips", "--option", f"fo={archive}"]) == 0
    assert "live files: 4" in capsys.readouterr().out
    assert cli.main(["info", "zip://trips", "--option", f" storage.fo = {archive} "]) == 0  # as SQL OPTIONS
    assert "live files: 4" in capsys.readouterr().out
    query = "SELECT count(*) AS n FROM trips WHERE city = 'Faro'"
    assert cli.main(["sql", query, "--table", "trips=zip://trips", "--option", f"fo={archive}"]) == 0
    assert "40" in capsys.readouterr().out
    for bad in ("fo", "=x"):
        assert cli.main(["info", "zip://trips", "--option", bad]) == 2
        assert "--option expects KEY=VALUE" in capsys.readouterr().err
    assert cli.main(["info", str(example), "--option", "version=0"]) == 2  # silently latest before
    assert "--option version=... is not a storage option: `info` takes --version" in capsys.readouterr().err
    # `sql` pins a table with --as-of (the refusal used to send users to SQL OPTIONS instead)
    args = ["sql", "SELECT count(*) FROM trips", "--table", f"trips={example}", "--option", "version=0"]
    assert cli.main(args) == 2
    assert "`sql` takes --as-of trips=0" in capsys.readouterr().err
    assert cli.main(["info", "zip://trips", "--option", f"fo={archive}", "--option", "fo=y"]) == 2
    assert "--option gives 'fo' twice" in capsys.readouterr().err


def test_timeline_resolves_the_times_snapshot_takes():
    """DeltaTable.timeline() answers version_at_or_before/after for any time snapshot(timestamp=)
    takes: an ISO string failed with Python's TypeError from inside its binary search."""
    timeline = DeltaTable(str(cli.example_table())).timeline()
    last = timeline.timestamp(5)
    assert timeline.version_at_or_before("2999-01-01T00:00:00Z") == 5
    assert timeline.version_at_or_before(dt.datetime.fromtimestamp(last / 1000, dt.timezone.utc)) == 5
    assert timeline.version_at_or_after(dt.date(1999, 1, 1)) == 0
    assert timeline.version_at_or_after(timeline.timestamp(0)) == 0  # ms since the epoch, as before
    with pytest.raises(dd.ArgumentError, match="timestamp 'soon' is not an ISO-8601 timestamp"):
        timeline.version_at_or_before("soon")


def _last_actions(table: Path, upto: int) -> dict[str, dict]:
    """The last protocol and metaData actions of commits 0..upto (tables without checkpoints)."""
    found: dict[str, dict] = {}
    for v in range(upto + 1):
        for line in (table / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            found.update({k: action[k] for k in ("protocol", "metaData") if k in action})
    return found


def test_cli_info_as_json_gives_the_logs_protocol_and_schema(tmp_path, capsys):
    """``info`` had no --format while sql, history, files and changes have one: a script had to
    parse its lines. ``--format json`` writes one object, the protocol and schema as the log
    writes them; csv (no rows to write) is refused by the argument parser."""
    from deltalake import write_deltalake

    features = tmp_path / "dv"
    write_deltalake(
        str(features), pa.table({"id": [1, 2]}), configuration={"delta.enableDeletionVectors": "true"}
    )
    for table, version in ((cli.example_table(), 5), (cli.example_table(), 2), (features, 0)):
        assert cli.main(["info", str(table), "--version", str(version), "--format", "json"]) == 0
        out = capsys.readouterr().out
        assert out.count("\n") == 1
        got = json.loads(out)
        log = _last_actions(Path(table), version)
        for key in ("readerFeatures", "writerFeatures"):  # sets: written sorted
            if key in log["protocol"]:
                log["protocol"][key] = sorted(log["protocol"][key])
        snap = DeltaTable(str(table)).snapshot(version=version)
        assert got == {
            "table": snap.table_root,
            "version": version,
            "protocol": log["protocol"],
            "partition_columns": log["metaData"]["partitionColumns"],
            "properties": log["metaData"]["configuration"],
            "live_files": snap.files().num_rows,
            "bytes": sum(snap.files().column("size").to_pylist()),
            "files_of_unknown_size": 0,
            "schema": json.loads(log["metaData"]["schemaString"]),
        }
        assert cli.main(["info", str(table), "--version", str(version)]) == 0
        text = capsys.readouterr().out
        assert f"live files: {got['live_files']}, bytes: {got['bytes']}\n" in text
    assert "deletionVectors" in got["protocol"]["readerFeatures"]  # the premise: a table with features
    with pytest.raises(SystemExit):
        cli.main(["info", str(features), "--format", "csv"])
    assert "invalid choice: 'csv'" in capsys.readouterr().err


def test_cli_info_says_which_columns_are_not_null(tmp_path, capsys):
    """``info`` listed every column as Arrow types, which the package serves all nullable (a file
    may hold NULLs anyway): a column the Delta schema declares NOT NULL looked like any other.
    It says ``not null`` where the table's schema does (top-level columns)."""
    from deltalake import write_deltalake

    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.struct([pa.field("a", pa.int32(), nullable=False)]), nullable=False),
            pa.field("x", pa.string()),
        ]
    )
    write_deltalake(str(tmp_path / "t"), pa.table({"id": [1], "s": [{"a": 1}], "x": ["q"]}, schema=schema))
    assert cli.main(["info", str(tmp_path / "t")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[out.index("columns:") + 1 :] == [
        "  id: int64 not null",
        "  s: struct<a: int32> not null",
        "  x: string",
    ]


def test_cli_info_at_a_time_with_properties_and_the_package_version(capsys, monkeypatch):
    path = str(cli.example_table())
    first = DeltaTable(path).timeline().timestamp(0)
    at = dt.datetime.fromtimestamp(first / 1000, dt.timezone.utc).isoformat()
    assert cli.main(["info", path, "--timestamp", at]) == 0
    out = capsys.readouterr().out
    assert "version: 0" in out and "delta.enableChangeDataFeed = true" in out, out
    assert out.index("columns:") < out.index("  trip_id: int64")
    with pytest.raises(SystemExit):
        cli.main(["info", path, "--version", "1", "--timestamp", at])
    assert "not allowed with argument --version" in capsys.readouterr().err
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"delta-datafusion {dd.__version__}"
    # Ctrl-C: a short word and the status of a tool stopped by SIGINT, not a traceback
    monkeypatch.setattr(cli, "demo", lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert cli.main([]) == 130
    assert capsys.readouterr().err == "interrupted\n"
    run = subprocess.run(
        [sys.executable, "-m", "delta_datafusion", "--version"], capture_output=True, text=True
    )
    assert run.returncode == 0 and run.stdout.startswith("delta-datafusion "), run


def test_cli_reports_errors_with_exit_code(tmp_path, capsys):
    assert cli.main(["info", str(tmp_path)]) == 2
    assert "TableNotFoundError" in capsys.readouterr().err


def test_history_lists_every_commit_with_operation_and_increasing_timestamps():
    table = DeltaTable(str(cli.example_table()))
    hist = table.history().to_pylist()
    assert [h["version"] for h in hist] == list(range(6))
    ops = [h["operation"] for h in hist]
    assert ops[0] in ("WRITE", "CREATE TABLE") and "UPDATE" in ops and "DELETE" in ops
    ts = [h["timestamp"] for h in hist]
    assert ts == sorted(ts) and len(set(ts)) == len(ts)


def test_history_uses_in_commit_timestamps():
    path = corpus_table("cdc_ict_table")
    hist = DeltaTable(str(path)).history().to_pylist()
    log = path / "_delta_log"
    for h in hist:
        first = json.loads((log / f"{h['version']:020d}.json").read_text().splitlines()[0])
        assert h["timestamp"] == first["commitInfo"]["inCommitTimestamp"]


def test_snapshot_arguments_are_checked():
    table = DeltaTable(str(cli.example_table()))
    with pytest.raises(DeltaError, match="either version or timestamp"):
        table.snapshot(version=1, timestamp="2024-01-01")
    with pytest.raises(DeltaError, match="version must be an integer"):
        table.snapshot(version="1")
    with pytest.raises(DeltaError, match=r"available versions are 0\.\.5"):
        table.snapshot(version=9)
    import numpy as np

    assert table.snapshot(version=np.int64(2)).version == 2  # as table_changes takes it
    with pytest.raises(DeltaError, match="version must be an integer"):
        table.snapshot(version=2.0)


def test_python_api_batch_size_and_argument_errors(tmp_path):
    """to_batches(batch_size=N) gives batches of at most N rows (it gave 8,192 or more: decoding
    batch sizes); bad arguments are DeltaError, not AttributeError/TypeError."""
    import pyarrow as pa
    from deltalake import write_deltalake

    import delta_datafusion as dd

    path = tmp_path / "t"
    write_deltalake(
        str(path),
        pa.table({"x": pa.array(range(20_000), pa.int64())}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    table = DeltaTable(str(path))
    sizes = [b.num_rows for b in table.snapshot().scan().to_batches(batch_size=1000)]
    assert max(sizes) <= 1000 and sum(sizes) == 20_000
    sizes = [b.num_rows for b in table.changes(0).to_reader(batch_size=777)]
    assert max(sizes) <= 777 and sum(sizes) == 20_000
    import numpy as np

    assert sum(b.num_rows for b in table.snapshot().scan().to_batches(batch_size=np.int64(5000))) == 20_000
    for bad in (0, -1, "3", True, 2.5):
        with pytest.raises(DeltaError, match="batch_size must be a positive integer"):
            next(table.snapshot().scan().to_batches(batch_size=bad))
    # beyond what pyarrow's readers take (a C int): decoded in the largest batches they take
    # (it was a StorageError blaming a data file for an OverflowError)
    two = tmp_path / "two"  # two files: read together by a dataset scanner
    for mode in ("error", "append"):
        write_deltalake(
            str(two), pa.table({"x": [1, 2]}), mode=mode, configuration={"delta.enableChangeDataFeed": "true"}
        )
    for huge in (2**31, 2**63, 10**20):
        assert (
            sum(b.num_rows for b in DeltaTable(str(two)).snapshot().scan().to_batches(batch_size=huge)) == 4
        )
        assert sum(b.num_rows for b in DeltaTable(str(two)).changes(0).to_batches(batch_size=huge)) == 4
    for call in (
        lambda: dd.register(None),
        lambda: dd.register_catalog(None, "c", str(tmp_path)),
        lambda: dd.explain(None, "SELECT 1"),
    ):
        with pytest.raises(DeltaError, match="expected a datafusion SessionContext, got NoneType"):
            call()


def test_python_api_argument_types(tmp_path):
    """Arguments of the wrong type are DeltaErrors naming the argument (they were TypeErrors or
    AttributeErrors from deep inside); numpy integers and datetime64 are timestamps."""
    import datetime as dt

    import numpy as np
    from deltalake import write_deltalake

    from delta_datafusion.parallel import split_leaves

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    write_deltalake(path, pa.table({"x": [3]}), mode="append")
    table = DeltaTable(path)
    snap = table.snapshot()
    for call, message in [
        (lambda: snap.scan(columns=5), "columns must be a list of column names, got 5"),
        (lambda: snap.scan(columns=b"x"), "columns must be a list of column names"),
        (lambda: snap.scan(columns=[["x"]]), r"columns must be column names \(strings\), got \['x'\]"),
        (lambda: table.changes(0, columns=5).to_table(), "columns must be a list of column names"),
        (lambda: snap.commit_timestamp("1"), "version must be an integer, got '1'"),
        (lambda: table.snapshot(listing=5), "listing must be a LogListing"),
        (lambda: split_leaves([], "2"), "parts must be an integer, got '2'"),
        (lambda: split_leaves([], 1.5), "parts must be an integer, got 1.5"),
        (lambda: table.snapshot(timestamp=np.datetime64("NaT")), "timestamp must be a timestamp"),
        (lambda: table.snapshot(timestamp=np.datetime64(10**18, "s")), "outside the years 1..9999"),
        (lambda: table.snapshot(timestamp=np.datetime64(-(10**6), "Y")), "outside the years 1..9999"),
    ]:
        with pytest.raises(DeltaError, match=message):
            call()
    assert snap.commit_timestamp(np.int64(1)) == snap.commit_timestamp(1)
    t1 = snap.commit_timestamp(1)
    for form in (
        np.int64(t1),
        np.datetime64(t1, "ms"),
        np.datetime64(t1 * 1_000_000 + 999_999, "ns"),
        dt.datetime.fromtimestamp(t1 / 1000, dt.timezone.utc).isoformat().replace("+00:00", "z"),
    ):
        assert table.snapshot(timestamp=form).version == 1, form
    assert table.snapshot(timestamp=np.datetime64(t1 - 1, "ms")).version == 0


def test_sql_predicate_with_a_newline_in_a_literal(tmp_path):
    """The predicate's plan is read from its structure: a string literal holding a newline made
    its printed form look like another plan node, and the predicate was refused."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2, 3], "s": ["a\nb", "a b", "x\ny"]}))
    scan = DeltaTable(path).snapshot().scan
    assert scan(predicate="s = 'a\nb'").to_table().column("id").to_pylist() == [1]
    assert sorted(scan(predicate="s <> 'a\nb' OR s IS NULL").to_table().column("id").to_pylist()) == [2, 3]
    with pytest.raises(DeltaError, match="not a single boolean expression"):
        scan(predicate="s = 'a\nb' UNION ALL SELECT * FROM t")
    assert scan(predicate="s LIKE '%\ny'").to_table().column("id").to_pylist() == [3]


def test_sql_predicate_with_a_subquery_is_refused(tmp_path):
    """Subqueries live inside expressions, below no plan input: the optimizer makes joins of
    them, which must be refused (a structural check of the written plan alone let
    `x IN (SELECT ...)` through as no filter at all: every row)."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"x": [1, 2, 3, 4]}), configuration={"delta.enableChangeDataFeed": "true"})
    table = DeltaTable(path)
    for text in (
        "x IN (SELECT x FROM t WHERE x > 2)",
        "x IN (SELECT 3)",
        "x NOT IN (SELECT 1)",
        "EXISTS (SELECT 1 FROM t WHERE x > 100)",
        "x > 2 OR x IN (SELECT 3)",
    ):
        with pytest.raises(DeltaError, match="not a single boolean expression"):
            table.snapshot().scan(predicate=text)
        with pytest.raises(DeltaError, match="not a single boolean expression"):
            table.changes(0, predicate=text + " AND x < 4").to_table()
    # a scalar subquery stays in a Filter above the scan: DataFusion runs it, as in SQL
    assert table.snapshot().scan(predicate="x = (SELECT 2)").to_table().column("x").to_pylist() == [2]
    # a repeated expression (DataFusion's __common_expr_N in a projection) is applied, not dropped
    got = table.snapshot().scan(predicate="x + 1 > 1 AND x + 1 < 4").to_table().column("x").to_pylist()
    assert sorted(got) == [1, 2]


def test_cli_counts_rows_in_words(tmp_path, capsys):
    assert cli.main(["sql", "--max-rows", "0", "SELECT 1 AS x"]) == 0
    assert capsys.readouterr().out.splitlines()[-2:] == ["... 1 more row", "(1 row)"]
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert "``" not in capsys.readouterr().out


def test_argument_errors_are_value_and_type_errors_too(capsys):
    """Bad arguments are the package's ArgumentError, which Python-convention code catches as
    ValueError or TypeError (they were bare DeltaErrors)."""
    from delta_datafusion.errors import ArgumentError

    table = DeltaTable(str(cli.example_table()))
    calls = [
        lambda: table.snapshot(version="1"),
        lambda: table.snapshot(timestamp="not a time"),
        lambda: table.history(limit=-1),
        lambda: table.changes(start=True),
        lambda: table.snapshot().scan(columns="trip_id"),
        lambda: table.snapshot().scan().to_reader(batch_size=0),
        lambda: DeltaTable(""),
    ]
    for call in calls:
        for kind in (ArgumentError, ValueError, TypeError, DeltaError):
            with pytest.raises(kind):
                call()
    assert cli.main(["sql", "SELECT 1", "--table", "nothing"]) == 2
    assert "error: ArgumentError: --table expects NAME=URI" in capsys.readouterr().err


def test_scan_streams_and_the_lazy_names_are_listed():
    snap = DeltaTable(str(cli.example_table())).snapshot()
    reader = snap.scan(columns=["trip_id"], predicate="city = 'Porto'").to_reader(batch_size=7)
    assert isinstance(reader, pa.RecordBatchReader) and reader.schema.names == ["trip_id"]
    batches = list(reader)
    assert all(b.num_rows <= 7 for b in batches)
    assert sum(b.num_rows for b in batches) == snap.scan(predicate="city = 'Porto'").to_table().num_rows > 0
    assert {"register", "register_table", "register_catalog", "explain", "DeltaTable"} <= set(dir(dd))


def test_scan_api_prunes_and_reads():
    import pyarrow.compute as pc

    snap = DeltaTable(str(cli.example_table())).snapshot()
    scan = snap.scan(columns=["trip_id", "fare"], predicate=pc.field("city") == "Porto")
    meta = next(scan.scan_metadata())
    assert meta.files_before_pruning == 4 and meta.num_files == 1
    rows = scan.to_table()
    assert rows.column_names == ["trip_id", "fare"] and rows.num_rows == 40
    with pytest.raises(DeltaError, match="unknown column"):
        snap.scan(columns=["nope"])


def test_registered_table_is_pinned_and_folder_catalog_follows_new_commits(tmp_path):
    """README: register_table serves the snapshot loaded at registration; a folder catalog looks
    for a newer version each time a query names the table."""
    import pyarrow as pa
    from datafusion import SessionContext
    from deltalake import write_deltalake

    import delta_datafusion as dd

    lake = tmp_path / "lake"
    path = lake / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2]}))
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(path))
    dd.register_catalog(ctx, "lake", str(lake))

    def count(table: str) -> int:
        return ctx.sql(f"SELECT count(*) AS n FROM {table}").to_pydict()["n"][0]

    assert (count("t"), count("lake.default.t")) == (2, 2)
    write_deltalake(str(path), pa.table({"id": [3]}), mode="append")
    assert count("t") == 2  # pinned at registration
    assert count("lake.default.t") == 3  # the catalog sees version 1
    ctx.deregister_table("t")
    dd.register_table(ctx, "t", str(path))
    assert count("t") == 3
    # registering the name again replaces the registration, as the README says
    write_deltalake(str(path), pa.table({"id": [4]}), mode="append")
    dd.register_table(ctx, "t", str(path))
    assert count("t") == 4
    dd.register_table(ctx, "t", str(path), version=0)
    assert count("t") == 2
    # a name another kind of table holds, or an unknown schema, is refused with the package's error
    ctx.register_record_batches("other", [[pa.record_batch({"x": [1]})]])
    with pytest.raises(DeltaError, match="'other' names a table this session already has"):
        dd.register_table(ctx, "other", str(path))
    with pytest.raises(dd.ArgumentError, match="cannot register 'nope.t'"):
        dd.register_table(ctx, "nope.t", str(path))
    with pytest.raises(DeltaError, match="pass the query itself"):
        dd.explain(ctx, "EXPLAIN SELECT 1")


def test_table_changes_of_a_registered_name_without_an_end_reads_past_the_registration(tmp_path):
    """README: a registered table serves the snapshot of its registration, but table_changes() of
    its name without an end reads to the latest version, also within one statement (the name gives
    the location only); an end keeps the range at the registered version."""
    import pyarrow as pa
    from datafusion import SessionContext
    from deltalake import write_deltalake

    import delta_datafusion as dd

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", path)
    write_deltalake(path, pa.table({"id": [3]}), mode="append")
    both = "SELECT (SELECT count(*) FROM t) AS n, (SELECT count(*) FROM table_changes('t', 0{})) AS c"
    assert ctx.sql(both.format("")).to_pydict() == {"n": [2], "c": [3]}
    assert ctx.sql(both.format(", 0")).to_pydict() == {"n": [2], "c": [2]}


SQL_PREDICATES = [
    "id > 2 AND birthday >= '2023-12-25'",
    "name IN ('Ada', 'Bob') OR id IS NULL",
    "NOT (id BETWEEN 3 AND 6)",
    "birthday < DATE '2023-12-24'",
]


@pytest.mark.parametrize("text", SQL_PREDICATES)
def test_sql_text_predicates_in_the_python_api(text):
    """``scan(predicate=...)`` and ``changes(predicate=...)`` take SQL text: the rows (and the files
    kept) are what the same WHERE clause gives through DataFusion."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    path = corpus_table("cdf-table")
    table = DeltaTable(str(path))
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(path))

    def rows(t):
        return sorted(map(str, t.to_pylist()))

    got = table.snapshot().scan(predicate=text).to_table()
    want = ctx.sql(f"SELECT * FROM t WHERE {text}").to_arrow_table()
    assert 0 < got.num_rows < table.snapshot().scan().to_table().num_rows
    assert got.num_rows == want.num_rows and rows(got) == rows(want), text
    files = table.snapshot().scan(predicate=text).files().num_rows
    assert 0 < files <= table.snapshot().files().num_rows

    feed_text = f"({text}) AND _change_type <> 'update_preimage'"
    got = table.changes(0, predicate=feed_text).to_table().drop_columns(["_commit_timestamp"])
    want = ctx.sql(f"SELECT * FROM table_changes('t', 0) WHERE {feed_text}").to_arrow_table()
    assert rows(got) == rows(want.drop_columns(["_commit_timestamp"])), feed_text


def sql_rows(path, text: str, columns: list[str]) -> list:
    """The rows SQL gives for ``WHERE text`` over the table (DataFusion applies what a scan
    cannot), sorted: what a Python scan with the same text must return."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    select = ", ".join(f'"{c}"' for c in columns)
    return _comparable(ctx.sql(f"SELECT {select} FROM t WHERE {text}").to_arrow_table())


def scan_rows(snap, text: str, columns: list[str]) -> list:
    return _comparable(snap.scan(columns=columns, predicate=text).to_table())


def _comparable(table: pa.Table) -> list:
    """Rows sorted, NaN spelled out (NaN != NaN would fail equal results)."""

    def cell(v):
        return "NaN" if isinstance(v, float) and v != v else v

    return sorted(({k: cell(v) for k, v in r.items()} for r in table.to_pylist()), key=str)


def test_sql_text_predicate_errors():
    from delta_datafusion.errors import PredicateError

    snap = DeltaTable(str(corpus_table("cdf-table"))).snapshot()
    with pytest.raises(PredicateError, match=r"predicate 'id >'.*ParserError"):
        snap.scan(predicate="id >")
    with pytest.raises(PredicateError, match=r"predicate 'nope = 1'.*nope"):
        snap.scan(predicate="nope = 1")
    # a function stays above the scan in DataFusion: DataFusion applies it, as in SQL
    got = scan_rows(snap, "length(name) > 3", ["id", "name"])
    assert got and got == sql_rows(corpus_table("cdf-table"), "length(name) > 3", ["id", "name"])
    with pytest.raises(PredicateError, match="empty"):
        snap.scan(predicate="  ")
    # a contradiction DataFusion folds away reads nothing
    assert snap.scan(predicate="id = 1 AND id = 2").to_table().num_rows == 0
    assert snap.scan(predicate="TRUE").to_table().num_rows == snap.scan().to_table().num_rows


def test_sql_text_predicate_errors_do_not_name_the_stand_in_table(tmp_path):
    """The text is planned over a stand-in table named ``t``, and DataFusion's schema errors
    named it: ``trips.uid = 1`` was answered "Did you mean 't.uid'? ... Valid fields are t.uid,
    t.name", as if the table were called t. The fields are named as the text may name them."""
    from deltalake import write_deltalake

    from delta_datafusion.errors import PredicateError

    cdf = {"delta.enableChangeDataFeed": "true"}
    write_deltalake(
        str(tmp_path / "u"), pa.table({"uid": [1], "name": ["a"], "st": ["t.x"]}), configuration=cdf
    )
    table = DeltaTable(str(tmp_path / "u"))
    for text, said in (
        ("trips.uid = 1", "No field named trips.uid. Did you mean 'uid'? Valid fields are uid, name, st"),
        ('"UID" = 1', "use double quotes to refer to the uid column"),
        ("st = 't.x' AND nme = 'a'", "No field named nme. Did you mean 'name'?"),
    ):
        for call in (lambda p: table.snapshot().scan(predicate=p), lambda p: table.changes(0, predicate=p)):
            with pytest.raises(PredicateError) as caught:
                call(text)
            assert said in str(caught.value) and "t.uid" not in str(caught.value), str(caught.value)


def test_sql_text_predicate_on_a_nested_field_is_applied_by_datafusion(tmp_path):
    import deltalake

    struct = pa.array([{"a": 1}], pa.struct([("a", pa.int32())]))
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"id": [1], "st": struct}))
    from delta_datafusion.datafusion.sql_predicate import plan_sql_predicate

    snap = DeltaTable(str(tmp_path / "t")).snapshot()
    for text in ("st['a'] > 0", "get_field(st, 'a') > 0 AND id = 1"):
        # DataFusion keeps the nested field above the scan and applies it
        assert plan_sql_predicate(text, snap.schema)[1] is True
        assert snap.scan(predicate=text).to_table().to_pylist() == [{"id": 1, "st": {"a": 1}}]


@pytest.mark.parametrize("value", ["-5", "x", "\u0661", "1_000"])
def test_cli_refuses_a_bad_max_rows(capsys, value):
    path = str(cli.example_table())
    with pytest.raises(SystemExit) as info:
        cli.main(["sql", "SELECT 1", "--table", f"trips={path}", "--max-rows", value])
    assert info.value.code == 2
    assert "--max-rows: expected a whole number >= 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        cli.main(["info", path, "--version", value])
    assert info.value.code == 2
    assert "--version: expected a whole number >= 0" in capsys.readouterr().err


# -- scan predicates found wrong by the API sweep ---------------------------------------------


def _api_table(tmp_path, rows) -> str:
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, rows)
    return path


@pytest.mark.parametrize("text", ["false", "1 = 0", "NULL", "i = NULL", "i < NULL OR i > NULL"])
def test_sql_predicate_folded_to_false_selects_nothing(tmp_path, text):
    """DataFusion plans no scan at all for these; the scan used to take that as TRUE."""
    import pyarrow as pa

    path = _api_table(tmp_path, pa.table({"i": pa.array([1, 2, None], pa.int64())}))
    scan = DeltaTable(path).snapshot().scan(predicate=text)
    assert scan.to_table().num_rows == 0
    assert sum(m.files.num_rows for m in scan.scan_metadata()) == 0
    assert DeltaTable(path).snapshot().scan(predicate="1 = 1").to_table().num_rows == 3


def test_never_true_predicate_text_is_still_type_checked(tmp_path):
    """A NOT IN list holding NULL makes the text select nothing, but the rest of the text must
    still be valid: SQL refuses `bin > 1.5` (binary vs float), so the scan must too, not return
    0 rows (the check used to stop at the NULL, before DataFusion's type coercion)."""
    import pyarrow as pa

    from delta_datafusion.errors import PredicateError

    path = _api_table(tmp_path, pa.table({"i": [1, 5, 7], "bin": [b"a", b"b", b"c"]}))
    scan = DeltaTable(path).snapshot().scan
    with pytest.raises(PredicateError, match="Binary > Float64"):
        scan(predicate="bin > 1.5 AND i NOT IN (5, NULL)")
    with pytest.raises(PredicateError, match="Binary > Float64"):
        scan(predicate="bin > 1.5")
    assert scan(predicate="i > 1 AND i NOT IN (5, NULL)").to_table().num_rows == 0


def test_predicate_text_without_in_skips_the_in_list_walk(tmp_path, monkeypatch):
    """The walk looking for IN lists that hold NULL runs only for text with the word IN: it
    copies a subtree at each step in datafusion-python (1,000 ORed ranges: 1.15 -> 0.97 s to
    scan). Lists are still found in any case and inside other words' company."""
    import pyarrow as pa

    from delta_datafusion.datafusion import sql_predicate

    path = _api_table(tmp_path, pa.table({"i": [1, 5, 7], "s": ["in", "x", "y"]}))
    walked: list[int] = []
    real = sql_predicate._null_in_lists

    def counted(plan):
        walked.append(1)
        return real(plan)

    monkeypatch.setattr(sql_predicate, "_null_in_lists", counted)
    scan = DeltaTable(path).snapshot().scan
    ors = " OR ".join(f"(i > {k} AND i < {k + 2})" for k in range(50))
    assert scan(predicate=ors).to_table().num_rows == 3
    assert scan(predicate="s = 'x' OR i = 7").to_table().num_rows == 2
    assert walked == []
    assert scan(predicate="i > 1 AND i not In (5, NULL)").to_table().num_rows == 0
    assert walked
    walked.clear()
    assert scan(predicate="i\nIN (1, 7)").to_table().num_rows == 2
    assert walked


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # a conjunct NOT IN a list holding NULL is never TRUE: DataFusion 55 merged it with the IN
        # list and dropped the NULL (found by the Python API fuzzer)
        ("i IN (1, 2) AND i NOT IN (3, NULL)", []),
        ("(3 <> i AND i NOT IN (4, NULL, 5, NULL)) AND i IN (3, 3, 8, NULL)", []),
        ("i NOT IN (CAST(NULL AS BIGINT), 3) AND i > 0", []),
        ("i IN (1, 2) AND i NOT IN (3)", [1, 2]),
        # in AND/OR alone an IN list's NULL selects as FALSE would: the list without it
        ("i IN (1, NULL) OR i = 8", [1, 8]),
        # where NULL and FALSE differ (NOT, comparisons, CASE, NOT IN under OR): refused
        ("i = 1 OR i NOT IN (3, NULL)", None),
        ("i IN (1, 2) AND NOT (i IN (3, NULL))", None),
        ("i IN (1, 2) AND (i NOT IN (3, NULL)) = true", None),
        ("i IN (1, 2) AND CASE WHEN true THEN i NOT IN (3, NULL) END", None),
        # an item that may be NULL is refused too (the review: NULLIF(1, 1) slipped past)
        ("i IN (2, 3) AND i NOT IN (1, NULLIF(1, 1))", None),
        ("i IN (2, 3) AND NOT (i IN (1, CAST(NULLIF(1, 1) AS BIGINT)))", None),
        # TRY_CAST may give NULL; a list nested in an item is below it (the third review)
        ("i IN (2, 3) AND i NOT IN (1, TRY_CAST('abc' AS BIGINT))", None),
        ("i IN (2, 3) AND i IN (CASE WHEN i NOT IN (5, NULL) THEN 2 ELSE 3 END, 8)", None),
        ("i IN (2, 3) AND i NOT IN (1, CAST('4' AS BIGINT))", [2, 3]),
        # IN right after a number, no space: no word boundary before it (the fourth review)
        ("i+0IN (1, 2) AND NOT (i+0IN (3, NULL))", None),
        ("NOT (5IN (i, NULL)) AND i > 0", None),
        # a list of values under NOT reads as written
        ("NOT (i IN (1, 2)) AND i < 5", [3, 4]),
        ("i NOT IN (3) AND i > 3", [4, 8]),
    ],
)
def test_not_in_with_null_in_predicate_text(tmp_path, text, want):
    import pyarrow as pa

    deltalake = pytest.importorskip("deltalake")
    path = _api_table(tmp_path, pa.table({"i": pa.array([1, 2, 3, 4, 8, None], pa.int64())}))
    deltalake.write_deltalake(
        str(tmp_path / "c"),
        pa.table({"i": pa.array([1, 2, 3, 4, 8], pa.int64())}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    if want is None:
        from delta_datafusion.errors import PredicateError

        with pytest.raises(PredicateError, match="IN list holding NULL"):
            DeltaTable(path).snapshot().scan(predicate=text)
        return
    got = DeltaTable(path).snapshot().scan(predicate=text).to_table().column("i").to_pylist()
    assert sorted(got) == want
    changed = DeltaTable(str(tmp_path / "c")).changes(0, predicate=text).to_table().column("i").to_pylist()
    assert sorted(changed) == [v for v in want if v is not None]


def test_hand_built_predicate_gets_column_types(tmp_path):
    """``gt(col("f"), 1)`` without a type used pyarrow's NaN semantics (NaN > 1 false); the scan
    types its columns from the schema, so SQL's (NaN sorts above every number) apply."""
    import pyarrow as pa

    from delta_datafusion.predicate import col, ge, gt, ne

    path = _api_table(tmp_path, pa.table({"f": [0.5, 2.0, float("nan"), None], "g": [1.0] * 4}))
    snap = DeltaTable(path).snapshot()

    def rows(p):
        return sorted(
            ("nan" if v != v else str(v)) for v in snap.scan(predicate=p).to_table().column("f").to_pylist()
        )

    assert rows(gt(col("f"), 1)) == ["2.0", "nan"]
    assert rows(ge(col("f"), 2)) == ["2.0", "nan"]
    assert rows(ne(col("f"), 1)) == ["0.5", "2.0", "nan"]
    assert rows(gt(col("f"), col("g"))) == ["2.0", "nan"]


def test_empty_in_lists(tmp_path):
    """x IN () is FALSE and x NOT IN () TRUE for every row, NULL x included (as DataFusion)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from delta_datafusion.predicate import col, is_in, not_in

    deltalake = pytest.importorskip("deltalake")
    path = _api_table(tmp_path, pa.table({"i": pa.array([1, None], pa.int64())}))
    deltalake.write_deltalake(path, pa.table({"i": pa.array([None, None], pa.int64())}), mode="append")
    snap = DeltaTable(path).snapshot()
    for p, n in ((not_in(col("i"), []), 4), (~pc.field("i").isin([]), 4), (is_in(col("i"), []), 0)):
        assert snap.scan(predicate=p).to_table().num_rows == n, p


@pytest.mark.parametrize("text", ["i > 1 UNION ALL SELECT * FROM t", "i > 1 LIMIT 0", "i > 1 ORDER BY i"])
def test_sql_predicate_must_be_one_boolean_expression(tmp_path, text):
    import pyarrow as pa

    from delta_datafusion.errors import PredicateError

    path = _api_table(tmp_path, pa.table({"i": pa.array([1, 2, None], pa.int64())}))
    with pytest.raises(PredicateError, match="not a single boolean expression"):
        DeltaTable(path).snapshot().scan(predicate=text)


def test_predicate_with_incomparable_types_is_refused_when_the_scan_is_built(tmp_path):
    """``b == 1`` on a boolean column used to pass planning and fail at read time (only when a
    file was read), with pyarrow's message blaming the data file."""
    import datetime as dt

    import pyarrow as pa
    import pyarrow.compute as pc

    from delta_datafusion.errors import PredicateError

    ntz = pa.array([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)], pa.timestamp("us"))
    path = _api_table(
        tmp_path, pa.table({"b": [True, False], "s": ["x", "y"], "i": [1, 2], "ts": ntz, "bin": [b"1", b"x"]})
    )
    snap = DeltaTable(path).snapshot()
    utc = pa.scalar(dt.datetime(2024, 1, 1), pa.timestamp("us", tz="UTC"))
    for expr, shown in (
        (pc.field("b") == 1, "b = 1"),
        (pc.field("s") == 1.5, "s = 1.5"),
        (pc.field("i") == "x", "i = 'x'"),
        # a zoned instant against a timestamp_ntz column: pyarrow checks it only on rows
        (pc.field("ts") > utc, "ts > TIMESTAMP '2024-01-01T00:00:00Z'"),
        # pyarrow parses a binary column's values as integers for this, only when it has values
        # (it failed at read time blaming a data file, or matched b"1")
        (pc.field("bin").isin([1]), "bin IN (1)"),
    ):
        with pytest.raises(
            PredicateError,
            match=re.escape(f"predicate {shown} cannot be evaluated on the table's column types"),
        ):
            snap.scan(predicate=expr)
    assert snap.scan(predicate=pc.field("i") > 1).to_table().num_rows == 1
    assert snap.scan(predicate=pc.field("bin").isin([b"x"])).to_table().num_rows == 1


def test_integer_literal_against_a_decimal_column(tmp_path):
    """``dec > 2`` on a decimal(5,2) column compares numerically, as in SQL (pyarrow alone
    refuses it: an int64 widened to a decimal needs precision 21)."""
    from decimal import Decimal

    import pyarrow as pa
    import pyarrow.compute as pc

    from delta_datafusion.predicate import col, gt

    dec = pa.array([Decimal("1.50"), Decimal("2.00"), Decimal("2.50"), None], pa.decimal128(5, 2))
    snap = DeltaTable(_api_table(tmp_path, pa.table({"dec": dec}))).snapshot()
    for p, want in (
        (pc.field("dec") > 2, [Decimal("2.50")]),
        (pc.field("dec") == 2, [Decimal("2.00")]),
        (gt(col("dec"), 2), [Decimal("2.50")]),
        (pc.field("dec").isin([2, 3]), [Decimal("2.00")]),
        ("dec > 2", [Decimal("2.50")]),
    ):
        assert sorted(snap.scan(predicate=p).to_table().column("dec").to_pylist()) == want, p


def test_numbers_of_another_type_against_integer_and_decimal_columns(tmp_path):
    """``i > 1.5`` (int64 column, float literal) failed reading a file whose values a float does
    not hold exactly (2**62: a DeltaError blaming the file, only on some files' values), and
    ``dec > 0.001`` on a decimal(38, 2) column was refused (precision 39). Both compare exactly
    now, NaN above every number; a value the type cannot hold equals nothing (NULL for NULL)."""
    from decimal import Decimal

    import deltalake
    import pyarrow.compute as pc

    from delta_datafusion.predicate import col, gt

    i = [1, None, 3, 2**62, -5, 0, 7, -(2**63)]
    dec = [Decimal("-0.01"), Decimal("0.00"), None, Decimal("12345678901234567890.12")] + [None] * 4
    g = [1.0, float("nan"), -0.0, None, float("inf"), 2.0**62, 0.5, None]
    path = str(tmp_path / "t")
    data = pa.table(
        {
            "id": range(8),
            "i": pa.array(i, pa.int64()),
            "dec": pa.array(dec, pa.decimal128(38, 2)),
            "g": pa.array(g, pa.float64()),
        }
    )
    deltalake.write_deltalake(path, data.slice(0, 4), configuration={"delta.enableChangeDataFeed": "true"})
    deltalake.write_deltalake(path, data.slice(4), mode="append")
    table = DeltaTable(path)
    snap = table.snapshot()

    def ids(values, keep):
        return [n for n, v in enumerate(values) if v is not None and keep(v)]

    F = pc.field
    for p, want in (
        (F("i") > 1.5, ids(i, lambda v: v > 1.5)),
        (gt(col("i"), 1.5), ids(i, lambda v: v > 1.5)),
        (F("i") >= 1e18, ids(i, lambda v: v >= 10**18)),
        (F("i") < -4.5, ids(i, lambda v: v < -4.5)),
        (F("i") <= -9e18, ids(i, lambda v: v <= -9 * 10**18)),
        (F("i") == 3.0, [2]),
        (F("i") == 1.5, []),
        (~(F("i") == 1.5), ids(i, lambda v: True)),
        (F("i") != 0.5, ids(i, lambda v: True)),
        (F("i") > 1e19, []),
        (F("i") < float("nan"), ids(i, lambda v: True)),
        (F("i") > float("-inf"), ids(i, lambda v: True)),
        (F("i").isin(pa.array([1.5, 3.0, 7.0])), [2, 6]),
        (F("i").isin(pa.array([1.5])), []),
        (~F("i").isin(pa.array([1.5])), ids(i, lambda v: True)),
        (pc.scalar(2.5) < F("i"), ids(i, lambda v: v > 2.5)),
        (F("dec") > pa.scalar(Decimal("0.001")), [3]),
        (F("dec") == pa.scalar(Decimal("-0.010")), [0]),
        (F("dec") < 0.005, [0, 1]),
        (F("dec") > pa.scalar(Decimal(10) ** 37), []),
        (F("dec") < pa.scalar(Decimal(10) ** 37), [0, 1, 3]),
        # an integer or decimal against a float column (2**62 + 1 lies between two doubles)
        (F("g") > 2**62, [1, 4]),
        (F("g") >= 2**62, [1, 4, 5]),
        (F("g") > 2**62 + 1, [1, 4]),
        (F("g") >= 2**62 + 1, [1, 4]),
        (F("g") <= 2**62 + 1, [0, 2, 5, 6]),
        (F("g") == 2**62 + 1, []),
        (F("g").isin([2**62, 1]), [0, 5]),
        (F("g") != pa.scalar(2**64 - 1, pa.uint64()), [0, 1, 2, 4, 5, 6]),
        (F("g") < pa.scalar(Decimal("0.6")), [2, 6]),
    ):
        got = sorted(snap.scan(predicate=p).to_table().column("id").to_pylist())
        assert got == want, p
    changed = table.changes(0, predicate=F("i") > 1.5).to_table().column("id").to_pylist()
    assert sorted(changed) == ids(i, lambda v: v > 1.5)


def test_an_integer_column_against_a_float_column(tmp_path):
    """``pc.field("i") > pc.field("f")`` failed reading any file with an integer past 2**53 (a
    DeltaError blaming the file: pyarrow's checked cast); it compares as DataFusion does, the
    integer cast to a double, NaN above every number."""
    import deltalake
    import pyarrow.compute as pc
    from datafusion import SessionContext

    data = pa.table(
        {
            "id": pa.array(range(6), pa.int64()),
            "i": pa.array([2**62, 1, 2**53 + 1, None, 5, 0], pa.int64()),
            "f": pa.array([1.0, 1.0, 2.0**53, 2.0, float("nan"), -0.0]),
        }
    )
    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, data)
    snap = DeltaTable(path).snapshot()
    ctx = SessionContext()
    ctx.register_record_batches("ref", [data.to_batches()])
    i, f = pc.field("i"), pc.field("f")
    for expr, sql in ((i > f, "i > f"), (f <= i, "f <= i"), (i == f, "i = f"), (~(i < f), "NOT (i < f)")):
        want = ctx.sql(f"SELECT id FROM ref WHERE {sql} ORDER BY id").to_pydict()["id"]
        assert sorted(snap.scan(predicate=expr).to_table().column("id").to_pylist()) == want, sql


def test_walkthrough_papercuts(tmp_path, capsys):
    """What a new user tripped over: path objects as locations, a file given as a table, error
    classes at the top level, clear predicate errors, explain/register argument checks, NULL in
    the CLI."""
    from pathlib import Path

    import pyarrow.compute as pc
    from datafusion import SessionContext

    import delta_datafusion as dd

    example = Path(cli.example_table())
    assert DeltaTable(example).snapshot().version == DeltaTable(str(example)).snapshot().version
    assert DeltaTable(example).uri == str(example)
    log_file = next((example / "_delta_log").glob("*.json"))
    with pytest.raises(dd.TableNotFoundError, match="is a file, not a Delta table folder"):
        DeltaTable(log_file).snapshot()
    assert issubclass(dd.CdfNotEnabledError, dd.DeltaError) and dd.PredicateError is not None
    snap = DeltaTable(example).snapshot()
    with pytest.raises(dd.PredicateError) as info:
        snap.scan(predicate=pc.field("nope") == 1)
    assert str(info.value) == "cannot interpret filter (nope == 1): column 'nope' is not in the schema"
    text = "rider LIKE 'rider-1%'"
    assert scan_rows(snap, text, ["trip_id", "rider"]) == sql_rows(example, text, ["trip_id", "rider"])
    ctx = SessionContext()
    with pytest.raises(dd.DeltaError, match="non-empty SQL string"):
        dd.explain(ctx, None)
    with pytest.raises(dd.DeltaError, match="SessionContext"):
        dd.register_table(None, "t", str(example))
    assert cli._format(pa.table({"x": pa.array([None, 1], pa.int64())})).splitlines()[2].strip() == "NULL"


def test_shapes_datafusion_keeps_above_the_scan(tmp_path):
    """IS DISTINCT FROM and IS TRUE, functions, LIKE, casts of a column: DataFusion applies what
    it does not hand a scan, so a Python scan (and the change feed) gives SQL's rows; the scan
    still prunes by the part it is handed."""
    from deltalake import write_deltalake

    from delta_datafusion.datafusion.sql_predicate import plan_sql_predicate

    snap = DeltaTable(cli.example_table()).snapshot()
    for text in ("fare IS DISTINCT FROM 3", "(fare > 3) IS TRUE"):
        assert plan_sql_predicate(text, snap.schema) == (None, True)  # all of it above the scan
        cols = ["trip_id", "fare"]
        assert scan_rows(snap, text, cols) == sql_rows(cli.example_table(), text, cols)
    path = tmp_path / "casts"
    rows = pa.table(
        {
            "x": pa.array([1.0, 2.0, float("nan"), None], pa.float32()),
            "i": pa.array([1, 2, 3, None], pa.int32()),
            "s": ["ab", "cd", "ax", None],
            "part": ["a", "a", "b", "b"],
        }
    )
    write_deltalake(
        str(path), rows, partition_by=["part"], configuration={"delta.enableChangeDataFeed": "true"}
    )
    table = DeltaTable(str(path))
    cols = ["x", "i", "s", "part"]
    for text in (
        "x > 1.0",
        "i = 2.0",
        "i < 3000000000",
        "i > 3000000000",
        "NOT (x > 1.5)",
        "s LIKE 'a%'",
        "upper(s) = 'CD' OR x > 2.5",
        "x > 1.0 AND part = 'a'",
        "i + 1 > 1 AND i + 1 < 4",
    ):
        assert scan_rows(table.snapshot(), text, cols) == sql_rows(path, text, cols), text
        got = _comparable(table.changes(0, columns=cols, predicate=text).to_table())
        assert got == scan_rows(table.snapshot(), text, cols), text
    scan = table.snapshot().scan(predicate="x > 1.0 AND part = 'a'")
    assert scan.files().num_rows == 1  # pruned by the part handed to the scan
    assert (
        sum(b.num_rows for b in table.snapshot().scan(columns=[], predicate="s LIKE 'a%'").to_batches()) == 2
    )


def test_decimal_against_a_fractional_literal_in_predicate_text(tmp_path):
    """README: `price > 69.49` is a float comparison through a cast of the column, which a scan
    is not handed: DataFusion applies it, as in SQL; the literal written as a decimal gives
    the decimal comparison."""
    from decimal import Decimal

    from deltalake import write_deltalake

    from delta_datafusion.datafusion.sql_predicate import plan_sql_predicate

    prices = [Decimal("69.48"), Decimal("69.49"), Decimal("69.50"), None]
    write_deltalake(str(tmp_path), pa.table({"price": pa.array(prices, pa.decimal128(10, 2))}))
    table = DeltaTable(str(tmp_path))
    # the cast of the column stays above the scan
    assert plan_sql_predicate("price > 69.49", table.snapshot().schema) == (None, True)
    # run through DataFusion, as in SQL: the float 69.49 is 69.4899999..., so 69.49 is above it
    got = table.snapshot().scan(predicate="price > 69.49").to_table().column("price").to_pylist()
    assert got == [r["price"] for r in sql_rows(tmp_path, "price > 69.49", ["price"])]
    assert got == [Decimal("69.49"), Decimal("69.50")]
    got = table.snapshot().scan(predicate="price > CAST(69.49 AS DECIMAL(10, 2))").to_table()
    assert got.column("price").to_pylist() == [Decimal("69.50")]


def test_cli_info_with_a_file_of_unknown_size(tmp_path, capsys):
    """An add without a size read fine but `info` failed summing the sizes."""
    import shutil
    from pathlib import Path

    import delta_datafusion as dd

    t = tmp_path / "trips"
    shutil.copytree(Path(dd.__file__).parent / "examples" / "trips", t)
    commit = t / "_delta_log" / f"{5:020d}.json"
    lines = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
    for action in lines:
        if "add" in action:
            action["add"].pop("size")
    commit.write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    assert cli.main(["info", str(t)]) == 0
    assert "(1 of unknown size)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "values",
    [
        pa.array([[{"a": 1}]]),
        pa.array([[1]]),
        pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int64())),
        pa.array([b"x"]),
        pa.array([True]),
    ],
    ids=["list-struct", "list", "map", "binary", "bool"],
)
def test_table_whose_columns_have_no_bounds(tmp_path, values):
    """No column takes min/max statistics: the bounds structs have no fields, and relabelling
    one rebuilt it from no children, with no rows (ArrowInvalid in files(), every scan and the
    change feed; SQL read fine)."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"c": values}), configuration={"delta.enableChangeDataFeed": "true"})
    table = DeltaTable(path)
    assert table.snapshot().files().num_rows == 1
    assert table.snapshot().scan().to_table().column("c").to_pylist() == values.to_pylist()
    assert table.changes(0).to_table().column("c").to_pylist() == values.to_pylist()


def test_cli_sql_refuses_storage_options_without_a_table(capsys):
    """--option goes to the --table tables' filesystems; without one it went nowhere silently
    (table_changes('s3://...', 0) read without the options the command line gave)."""
    assert cli.main(["sql", "SELECT 1", "--option", "anon=true"]) == 2
    assert "--option applies to the tables given with --table, and none is given" in capsys.readouterr().err


def test_cli_refuses_a_table_name_given_twice(capsys, tmp_path):
    """--table t=A --table T=B: SQL reads both as t; the last one silently won before."""
    path = str(cli.example_table())
    assert cli.main(["sql", "SELECT 1", "--table", f"trips={path}", "--table", f"Trips={tmp_path}"]) == 2
    assert (
        f"error: ArgumentError: --table names 'Trips' twice (also as 'trips={path}')"
        in capsys.readouterr().err
    )


def test_cli_table_names_compare_as_sql_reads_them(capsys, tmp_path):
    path = str(cli.example_table())
    # quoted names keep their case: two tables
    args = ["sql", 'SELECT count(*) AS n FROM "A" JOIN "a" USING (trip_id)']
    assert cli.main([*args, "--table", f'"A"={path}', "--table", f'"a"={path}']) == 0
    capsys.readouterr()
    for first, second in (("public.t", "t"), ('"t"', "T")):
        assert cli.main(["sql", "SELECT 1", "--table", f"{first}={path}", "--table", f"{second}={path}"]) == 2
        assert f"--table names {second!r} twice (also as '{first}={path}')" in capsys.readouterr().err


def test_cli_table_names_differing_in_non_ascii_case_are_two_tables(capsys, tmp_path):
    path = str(cli.example_table())
    assert (
        cli.main(["sql", 'SELECT count(*) AS n FROM "Ä"', "--table", f"Ä={path}", "--table", f"ä={path}"])
        == 0
    )
    capsys.readouterr()
    # other.t is not t: the error is DataFusion's about the schema, not a duplicate name
    assert cli.main(["sql", "SELECT 1", "--table", f"t={path}", "--table", f"other.t={path}"]) == 2
    assert "twice" not in capsys.readouterr().err


def test_history_limit_gives_the_newest_commits():
    table = DeltaTable(str(cli.example_table()))
    full = table.history().to_pylist()
    assert table.history(limit=2).to_pylist() == full[-2:]
    assert table.history(limit=100).to_pylist() == full
    assert table.history(limit=0).num_rows == 0
    with pytest.raises(DeltaError, match="limit must be at least 0"):
        table.history(limit=-1)
    with pytest.raises(DeltaError, match="limit must be an integer"):
        table.history(limit="2")


def test_long_non_ascii_strings_in_in_lists(tmp_path):
    """pyarrow 26 prints a long string of an IN list cut by bytes, possibly inside a character,
    and the print fails (UnicodeDecodeError from str(), a Rust panic where datafusion-python 55
    prints the pushed filter). The package parsed the filter only after printing it: the Python
    API failed with a bare UnicodeDecodeError or a PanicException (the randomized differential)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import write_deltalake

    from delta_datafusion.predicate_parse import from_pyarrow

    long = "\uffff" * 40
    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("s", pa.string())])
    rows = pa.table({"id": [1, 2, 3], "s": ["a", long, "é" * 60]}, schema=schema)
    write_deltalake(path, rows, configuration={"delta.enableChangeDataFeed": "true"})
    listed = [long, "b", "c", "d", "é" * 60]
    expr = pc.field("s").isin(listed)
    assert str(from_pyarrow(expr, schema)).startswith("s IN (")
    snap = DeltaTable(path).snapshot()
    assert sorted(snap.scan(predicate=expr).to_table().column("id").to_pylist()) == [2, 3]
    text = "s IN (" + ", ".join(f"'{v}'" for v in listed) + ")"
    assert sorted(snap.scan(predicate=text).to_table().column("id").to_pylist()) == [2, 3]
    assert sorted(snap.scan(predicate="NOT " + text).to_table().column("id").to_pylist()) == [1]
    feed = DeltaTable(path).changes(0, 0, predicate=text).to_table()
    assert sorted(feed.column("id").to_pylist()) == [2, 3]


def test_a_misused_argument_raises_argument_error():
    """README: a wrong argument (type or value) is an ArgumentError, also a ValueError and a
    TypeError, whichever call meets it: not a bare DeltaError for some of them."""
    from datafusion import SessionContext

    example = str(cli.example_table())
    table = DeltaTable(example)
    snap = table.snapshot()
    misuses = {
        "version and timestamp": lambda: table.snapshot(version=1, timestamp="2024-01-01"),
        "a float change-feed start": lambda: table.changes(1.5),
        "a listing of the wrong type": lambda: table.snapshot(listing=[]),
        "storage_options not a dict": lambda: DeltaTable(example, storage_options=[("a", 1)]),
        "an unknown column": lambda: snap.scan(columns=["nope"]),
        "a column listed twice": lambda: snap.scan(columns=["city", "city"]),
    }
    for what, call in misuses.items():
        with pytest.raises(dd.ArgumentError) as info:
            call()
        assert isinstance(info.value, ValueError), what
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "trips", example)
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT count(*) FROM table_changes('trips', 1.5)").collect()
    assert isinstance(dd.from_datafusion(info.value), dd.ArgumentError)


def test_a_missing_table_on_a_store_is_named_by_its_url():
    # 'bucket/t is not a Delta table' does not say which store was asked
    with pytest.raises(dd.TableNotFoundError, match=r"^memory:///no/such/table is not a Delta table"):
        DeltaTable("memory://no/such/table").snapshot()


def test_cli_shows_values_python_cannot_hold(tmp_path, capsys):
    """Nanosecond times (``now()``) and dates beyond the year 9999 (a Delta table may hold them)
    have no Python value: the CLI failed with pyarrow's ValueError / OverflowError instead of
    printing them."""
    from deltalake import write_deltalake

    assert cli.main(["sql", "SELECT CAST('2024-01-02 03:04:05.123456789' AS TIMESTAMP) AS ts"]) == 0
    assert capsys.readouterr().out.splitlines()[2].strip() == "2024-01-02T03:04:05.123456789"
    far = pa.table({"id": pa.array([1, 2], pa.int64()), "d": pa.array([0, 3_000_000], pa.date32())})
    write_deltalake(tmp_path / "far", far)
    query = "SELECT id, d FROM t ORDER BY id"
    assert cli.main(["sql", query, "--table", f"t={tmp_path / 'far'}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[2] for line in out[2:4]] == ["1970-01-01", "10183-09-21"]
    # a time without a fraction shows none, as DataFusion's own output
    assert cli.main(["sql", "SELECT TIMESTAMP '2024-01-02 03:04:05' AS ts, now() IS NOT NULL AS b"]) == 0
    assert capsys.readouterr().out.splitlines()[2].split(" | ") == ["2024-01-02T03:04:05", "true"]


def test_cli_prints_each_row_on_one_line(capsys):
    """A line break in a value started a line that looked like another row, a NULL inside a
    struct, list or map printed as Python's ``None`` (a top-level one as NULL), and wide
    characters pushed the columns after them out of line."""
    query = (
        "SELECT * FROM (VALUES ('new' || chr(10) || 'line', named_struct('x', CAST(NULL AS INT), 'y', 'q'), "
        "make_array(1, NULL), map(['k'], [CAST(NULL AS INT)]), '日本', 1)) AS v(s, st, l, m, w, n)"
    )
    assert cli.main(["sql", query]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[3] == "(1 row)"
    assert [c.strip() for c in lines[2].split(" | ")] == [
        "new\\nline",
        "{x: NULL, y: 'q'}",
        "[1, NULL]",
        "{'k': NULL}",
        "日本",
        "1",
    ]
    # every column starts where its header does, on a terminal (日本 takes four columns)
    assert lines[0].index("| n") == lines[2].index("| 1") + 2


def test_cli_prints_binary_and_intervals_as_datafusion_shows_them(capsys, tmp_path):
    """Binary values printed as Python's ``b'\\x01\\x02'`` and intervals as
    ``MonthDayNano(months=0, days=1, ...)``; they print as DataFusion's own display does,
    also inside a list or struct, here from a binary column of a Delta table."""
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path / "t"), pa.table({"b": [b"\x01\x02\xff", None]}))
    query = (
        "SELECT b, [b] AS l, named_struct('k', b) AS st, INTERVAL '1 month 1 day 2 hours 3.5 seconds' AS i, "
        "-INTERVAL '90 minutes' AS m, INTERVAL '0 seconds' AS z FROM t ORDER BY b NULLS LAST"
    )
    assert cli.main(["sql", query, "--table", f"t={tmp_path / 't'}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [c.strip() for c in lines[2].split(" | ")] == [
        "0102ff",
        "[0102ff]",
        "{k: 0102ff}",
        "1 mons 1 days 2 hours 3.500000000 secs",
        "-1 hours -30 mins",
        "0 secs",
    ]
    assert [c.strip() for c in lines[3].split(" | ")][:3] == ["NULL", "[NULL]", "{k: NULL}"]


def test_cli_prints_floats_booleans_and_durations_as_datafusion_shows_them(capsys, tmp_path):
    """A Delta ``float`` column's 0.1 printed as 0.10000000149011612 (the float32 widened to a
    Python float), a difference of timestamps of -19 hours as Python's "-1 day, 5:00:00", one
    with nanoseconds as the bare number of nanoseconds without pandas installed, booleans as
    True/False and NaN as nan; they print as DataFusion's own display does."""
    from deltalake import write_deltalake

    floats = pa.array([0.1, float("nan"), 3.4e38], pa.float32())
    table = pa.table(
        {"f": floats, "l": pa.array([[0.1, None]] * 3, pa.list_(pa.float32())), "b": [True, False, None]}
    )
    write_deltalake(str(tmp_path / "t"), table)
    assert cli.main(["sql", "SELECT * FROM t", "--table", f"t={tmp_path / 't'}"]) == 0
    rows = [[c.strip() for c in line.split(" | ")] for line in capsys.readouterr().out.splitlines()[2:5]]
    assert rows == [
        ["0.1", "[0.1, NULL]", "true"],
        ["NaN", "[0.1, NULL]", "false"],
        ["3.4e38", "[0.1, NULL]", "NULL"],
    ]
    query = (
        "SELECT TIMESTAMP '2024-01-01' - TIMESTAMP '2024-01-01 19:00:00' AS neg, "
        "TIMESTAMP '2024-01-01 00:00:01.500000001' - TIMESTAMP '2024-01-01' AS ns, "
        "arrow_cast(0, 'Duration(Second)') AS zero, [arrow_cast(1500, 'Duration(Millisecond)')] AS l, "
        "CAST(1e16 AS DOUBLE) AS big, CAST(1e-7 AS DOUBLE) AS small"
    )
    assert cli.main(["sql", query]) == 0
    row = [c.strip() for c in capsys.readouterr().out.splitlines()[2].split(" | ")]
    assert row == ["-PT68400S", "PT1.500000001S", "P0D", "[PT1.5S]", "1e16", "1e-7"]


def test_a_pyarrow_function_in_a_predicate_says_to_write_it_as_sql(tmp_path):
    """A pyarrow function, cast or arithmetic in ``scan(predicate=...)`` was refused without a
    way out; the error says to give the condition as SQL text, which then reads the rows."""
    import pyarrow.compute as pc

    snap = DeltaTable(
        _api_table(tmp_path, pa.table({"id": [1, 2, 3], "name": ["Ann", "bob", None]}))
    ).snapshot()
    for expr, sql, want in (
        (pc.starts_with(pc.field("name"), "A"), "starts_with(name, 'A')", [1]),
        (pc.field("id") + 1 > 3, "id + 1 > 3", [3]),
        (pc.field("id").cast(pa.string()) == "2", "CAST(id AS VARCHAR) = '2'", [2]),
    ):
        with pytest.raises(dd.PredicateError, match="give such a condition as SQL text"):
            snap.scan(predicate=expr)
        assert sorted(snap.scan(predicate=sql).to_table().column("id").to_pylist()) == want


def test_a_sql_predicate_failing_on_a_row_is_a_predicate_error(tmp_path):
    """DataFusion evaluating the SQL text of ``scan(predicate=)`` or ``changes(predicate=)`` on a
    row can fail (text that is no number cast to one, a division by zero); that is the
    predicate's failure, raised as a ``PredicateError`` naming it, the table and the version
    (it was a plain ``DeltaError``)."""
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    write_deltalake(
        path,
        pa.table({"s": ["1", "abc", "3"], "i": [1, 0, 3]}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    table = DeltaTable(path)
    for text, said in (("CAST(s AS INT) > 1", "Cannot cast string 'abc'"), ("10 / i > 1", "Divide by zero")):
        with pytest.raises(
            dd.PredicateError, match=rf"predicate '{re.escape(text)}' on table .* at version 0: .*{said}"
        ):
            table.snapshot().scan(predicate=text).to_table()
        with pytest.raises(
            dd.PredicateError, match=rf"predicate '{re.escape(text)}' on the change feed .*{said}"
        ):
            table.changes(0, predicate=text).to_table()
    # the same functions on rows where they succeed read the rows
    assert table.snapshot().scan(predicate="i > 1 AND CAST(s AS INT) > 1").to_table().column(
        "i"
    ).to_pylist() == [3]
