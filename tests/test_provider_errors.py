"""Errors through the DataFusion provider: clear, typed where possible, naming what is wrong.

Errors raised while DataFusion plans or executes reach the caller as a plain ``Exception`` (or
``ValueError`` from ``ctx.sql``) whose text carries the package's exception class name and
message; errors raised while registering a table are the package's own exception types.

Also checked: reads never write into the table folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("deltalake")
from conftest import copy_table, corpus_table, folder_state  # noqa: E402
from datafusion import SessionContext  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.errors import (  # noqa: E402
    ArgumentError,
    CdfNotEnabledError,
    DataFileNotFoundError,
    DeletionVectorError,
    DeltaError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)


def _ctx() -> SessionContext:
    ctx = SessionContext()
    dd.register(ctx)
    return ctx


def _run(ctx: SessionContext, sql: str) -> pa.Table:
    return ctx.sql(sql).to_arrow_table()


def _error_text(ctx: SessionContext, sql: str) -> str:
    with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
        _run(ctx, sql)
    return str(info.value)


# -- unknown tables and bad locations ----------------------------------------------------------


def test_unknown_table_name_in_sql() -> None:
    ctx = _ctx()
    with pytest.raises(Exception, match="no_such_table_xyz"):
        _run(ctx, "SELECT * FROM no_such_table_xyz")


def test_unknown_table_in_delta_catalog(tmp_path: Path) -> None:
    write_deltalake(str(tmp_path / "known"), pa.table({"a": [1, 2]}))
    ctx = _ctx()
    dd.register_catalog(ctx, "lake", str(tmp_path))
    assert _run(ctx, "SELECT count(*) AS n FROM lake.default.known").to_pydict() == {"n": [2]}
    with pytest.raises(Exception, match="not_a_table_abc"):
        _run(ctx, "SELECT * FROM lake.default.not_a_table_abc")
    # a folder that exists but is not a Delta table is not served either
    (tmp_path / "plain_folder").mkdir()
    with pytest.raises(Exception, match="plain_folder"):
        _run(ctx, "SELECT * FROM lake.default.plain_folder")


def test_register_catalog_on_a_missing_folder_or_a_file(tmp_path: Path) -> None:
    (tmp_path / "file.txt").write_text("x")
    for root in (tmp_path / "missing", tmp_path / "file.txt"):
        with pytest.raises(TableNotFoundError, match=r"register_catalog\('lake'\): .* is not a folder"):
            dd.register_catalog(_ctx(), "lake", str(root))


def test_register_table_where_the_default_schema_is_a_folder_catalog(partitioned: Path) -> None:
    """register_table into a folder catalog (the session's default one) is refused in the
    catalog's own words; the message quoted DataFusion's wrapping of them ('PyErr { type: ...')."""
    ctx = _ctx()
    dd.register_catalog(ctx, "datafusion", str(partitioned.parent), schema="public")
    with pytest.raises(dd.ArgumentError) as info:
        dd.register_table(ctx, "extra", str(partitioned))
    text = str(info.value)
    assert text.startswith(
        "register_table: cannot register 'extra': tables cannot be added to a Delta folder catalog"
    )
    assert "PyErr" not in text and "Traceback" not in text


def test_register_catalog_on_a_table_or_with_an_empty_name(partitioned: Path) -> None:
    """A table's own folder as a catalog root served an empty catalog (its subfolders are
    partitions); an empty catalog name was accepted."""
    with pytest.raises(
        ArgumentError, match=r"is a Delta table, not a folder of Delta tables.*register_table"
    ):
        dd.register_catalog(_ctx(), "lake", str(partitioned))
    for catalog, schema in (("", "default"), ("lake", " ")):
        with pytest.raises(DeltaError, match="name must be a non-empty string"):
            dd.register_catalog(_ctx(), catalog, str(partitioned.parent), schema=schema)
    ctx = _ctx()
    dd.register_catalog(ctx, "lake", str(partitioned.parent))
    rows = ctx.sql(f"SELECT count(*) AS n FROM lake.default.{partitioned.name}").to_pydict()
    assert rows == {"n": [30]}


def test_register_table_on_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "does" / "not" / "exist"
    with pytest.raises(TableNotFoundError) as info:
        dd.register_table(_ctx(), "t", str(missing))
    assert str(missing) in str(info.value)
    assert not missing.exists(), "a failed registration must not create the folder"


def test_register_table_on_folder_without_log(tmp_path: Path) -> None:
    folder = tmp_path / "just_parquet"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1]}), folder / "part-0.parquet")
    with pytest.raises(TableNotFoundError, match="just_parquet"):
        dd.register_table(_ctx(), "t", str(folder))


def test_register_table_on_a_file(tmp_path: Path) -> None:
    f = tmp_path / "table.parquet"
    pq.write_table(pa.table({"a": [1]}), f)
    with pytest.raises(TableNotFoundError, match="table.parquet"):
        dd.register_table(_ctx(), "t", str(f))


def test_register_table_with_unknown_scheme() -> None:
    with pytest.raises(DeltaError, match="nosuchproto"):
        dd.register_table(_ctx(), "t", "nosuchproto://bucket/table")


def test_create_external_table_on_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    ctx = _ctx()
    with pytest.raises(Exception) as info:  # noqa: B017
        ctx.sql(f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '{missing}'").collect()
    text = str(info.value)
    assert "TableNotFoundError" in text and str(missing) in text, text
    with pytest.raises(Exception, match="'t' not found|t.*not found"):
        _run(ctx, "SELECT * FROM t")


def test_version_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1]}))
    write_deltalake(str(path), pa.table({"a": [2]}), mode="append")
    with pytest.raises(VersionNotFoundError, match="99"):
        dd.register_table(_ctx(), "t", str(path), version=99)
    ctx = _ctx()
    with pytest.raises(Exception) as info:  # noqa: B017
        ctx.sql(
            f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '{path}' OPTIONS ('version' '7')"
        ).collect()
    assert "VersionNotFoundError" in str(info.value) and "7" in str(info.value)
    with pytest.raises(Exception, match="version"):
        ctx.sql(
            f"CREATE EXTERNAL TABLE t2 STORED AS DELTA LOCATION '{path}' OPTIONS ('version' 'abc')"
        ).collect()


def test_create_external_table_checks_what_it_is_told(tmp_path: Path) -> None:
    """A misspelt option or a wrong PARTITIONED BY is refused, not silently ignored (the first
    would read the latest version instead of the one meant), as an ArgumentError (it was a plain
    DeltaError)."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2], "p": ["x", "y"]}), partition_by=["p"])
    write_deltalake(str(path), pa.table({"a": [3], "p": ["x"]}), mode="append")
    ctx = _ctx()

    def error(sql: str) -> dd.DeltaError:
        with pytest.raises(Exception) as info:  # noqa: B017
            ctx.sql(sql).collect()
        err = dd.from_datafusion(info.value)
        assert isinstance(err, dd.ArgumentError), info.value
        return err

    err = error(f"CREATE EXTERNAL TABLE t1 STORED AS DELTA LOCATION '{path}' OPTIONS ('verison' '0')")
    assert "unknown OPTIONS ['verison']" in str(err) and "'version'" in str(err)
    err = error(f"CREATE EXTERNAL TABLE t2 STORED AS DELTA PARTITIONED BY (a) LOCATION '{path}'")
    assert "PARTITIONED BY ['a']" in str(err) and "['p']" in str(err)
    # a column list must name every column: the Delta schema decides columns and types
    err = error(f"CREATE EXTERNAL TABLE t4 (a BIGINT) STORED AS DELTA LOCATION '{path}'")
    assert "leaves out ['p']" in str(err) and "name every column or none" in str(err)
    err = error(f"CREATE EXTERNAL TABLE t6 (a BIGINT, q VARCHAR) STORED AS DELTA LOCATION '{path}'")
    assert "declared columns ['q'] are not in the Delta table" in str(err)
    # what matches the table is accepted
    ctx.sql(
        f"CREATE EXTERNAL TABLE t3 STORED AS DELTA PARTITIONED BY (p) LOCATION '{path}' OPTIONS ('version' '0')"
    )
    assert ctx.sql("SELECT count(*) AS n FROM t3").to_pydict() == {"n": [2]}
    ctx.sql(f"CREATE EXTERNAL TABLE t5 (a BIGINT, p VARCHAR) STORED AS DELTA LOCATION '{path}'")
    assert ctx.sql("SELECT sum(a) AS s FROM t5").to_pydict() == {"s": [6]}


def test_partitioned_by_reads_its_names_as_sql_identifiers(tmp_path: Path) -> None:
    """PARTITIONED BY names are identifiers: a quoted one is its text (DataFusion hands them over
    as written, quotes included), so a partition column only a quoted name can spell ("Up Per",
    "a.b", a quote) is accepted; before, every quoted name was refused as not matching."""
    path = tmp_path / "t"
    table = pa.table(
        {"Up Per": ["x", "y"], "a.b": [1, 2], 'q"t': [1.0, 2.0], "Part": ["u", "v"], "v": [1, 2]}
    )
    write_deltalake(str(path), table, partition_by=["Up Per", "a.b", 'q"t', "Part"])
    ctx = _ctx()
    for i, names in enumerate(['"Up Per", "a.b", "q""t", "Part"', '"Up Per", "a.b", "q""t", Part']):
        ctx.sql(f"CREATE EXTERNAL TABLE t{i} STORED AS DELTA PARTITIONED BY ({names}) LOCATION '{path}'")
        assert ctx.sql(f'SELECT v FROM t{i} WHERE "a.b" = 2').to_pydict() == {"v": [2]}
    # a name that is not the table's, or the right names in another order, is still refused
    for names in [
        '"up per", "a.b", "q""t", "Part"',
        '"a.b", "Up Per", "q""t", "Part"',
        '"Up Per", "a.b", "q""t", "part"',
    ]:
        with pytest.raises(Exception) as info:  # noqa: B017
            ctx.sql(
                f"CREATE EXTERNAL TABLE bad STORED AS DELTA PARTITIONED BY ({names}) LOCATION '{path}'"
            ).collect()
        err = dd.from_datafusion(info.value)
        assert isinstance(err, dd.ArgumentError) and "does not match" in str(err), info.value


def test_mistaken_arguments_are_argument_errors(tmp_path: Path) -> None:
    """A wrong kind of argument is an ArgumentError (README: also a ValueError and a TypeError),
    not a plain DeltaError as these were."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    ctx = _ctx()
    dd.register_table(ctx, "t", str(path))
    for sql, said in [
        ("SELECT * FROM table_changes(1, 0)", "the first argument must be a table name or a location"),
        ("SELECT * FROM table_changes('', 0)", "the table name or location must not be empty"),
        ("SELECT * FROM table_changes('t', a)", "start must be a literal version or timestamp"),
    ]:
        with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion wraps it
            _run(ctx, sql)
        err = dd.from_datafusion(info.value)
        assert isinstance(err, ArgumentError) and said in str(err), info.value
    table = dd.DeltaTable(str(path))
    with pytest.raises(ArgumentError, match="predicate must be SQL text"):
        table.snapshot().scan(predicate=5)
    with pytest.raises(ArgumentError, match="predicate must be SQL text"):
        table.changes(0, predicate=5)


def test_version_or_timestamp_as_a_storage_option_is_refused(tmp_path: Path) -> None:
    """README likens storage_options to SQL OPTIONS, where 'version' and 'timestamp' pin the
    table; given as storage options (which go to the filesystem) they read the latest version
    silently: register_table(..., storage_options={'version': 0}) returned the rows of version 1."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1]}))
    write_deltalake(str(path), pa.table({"a": [2]}), mode="append")
    ctx = _ctx()
    for key in ("version", "timestamp", "Version"):
        with pytest.raises(ArgumentError, match=f"storage option {key!r} is not a filesystem option"):
            dd.register_table(ctx, "t", str(path), storage_options={key: 0})
        with pytest.raises(ArgumentError, match=f"storage option {key!r} is not a filesystem option"):
            dd.DeltaTable(str(path), storage_options={key: 0})
        with pytest.raises(ArgumentError, match=f"storage option {key!r} is not a filesystem option"):
            dd.register_catalog(ctx, "lake", str(tmp_path), storage_options={key: 0})
    dd.register_table(ctx, "t", str(path), version=0)  # the way to pin it
    assert _run(ctx, "SELECT count(*) AS n FROM t").to_pydict() == {"n": [1]}


def test_look_alike_of_version_or_timestamp_as_a_storage_option_is_refused(tmp_path: Path) -> None:
    """storage_options={'versoin': 0} went to the filesystem, which ignores it (local) or passes
    it on, so the latest version was read silently, where the CLI's --option and SQL OPTIONS
    refuse such a key; refused the same way, with the word it looks like."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1]}))
    write_deltalake(str(path), pa.table({"a": [2]}), mode="append")
    ctx = _ctx()
    for key, meant in (
        ("versoin", "version"),
        ("Verison", "version"),
        ("timestmp", "timestamp"),
        ("time_stamp", "timestamp"),
    ):
        why = f"storage option {key!r} is not a filesystem option \\(did you mean {meant!r}\\?\\)"
        with pytest.raises(ArgumentError, match=why):
            dd.register_table(ctx, "t", str(path), storage_options={key: 0})
        with pytest.raises(ArgumentError, match=why):
            dd.DeltaTable(str(path), storage_options={key: 0})
        with pytest.raises(ArgumentError, match=why):
            dd.register_catalog(ctx, "lake", str(tmp_path), storage_options={key: 0})
    # options that only start alike still go to the filesystem
    for key in ("versioned", "version_id", "person", "timestamps_as_utc"):
        assert dd.DeltaTable(str(path), storage_options={key: 0}).snapshot().version == 1


# -- missing data files ------------------------------------------------------------------------


@pytest.fixture
def partitioned(tmp_path: Path) -> Path:
    path = tmp_path / "src"
    for i, p in enumerate(["a", "b", "c"]):
        rows = pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": [p] * 10})
        write_deltalake(str(path), rows, mode="append", partition_by=["p"])
    copy = copy_table(path, tmp_path / "copy")
    return copy


def _data_files(table: Path) -> list[Path]:
    return sorted(p for p in table.rglob("*.parquet") if "_delta_log" not in p.parts)


def test_missing_data_file(partitioned: Path) -> None:
    victim = next(p for p in _data_files(partitioned) if "p=b" in str(p))
    victim.unlink()
    ctx = _ctx()
    dd.register_table(ctx, "t", str(partitioned))
    text = _error_text(ctx, "SELECT * FROM t")
    assert "DataFileNotFoundError" in text, text
    assert victim.name in text, text
    assert "version 2" in text, text
    # aggregates that read a column fail too (no silent partial answer)
    text = _error_text(ctx, "SELECT count(id) FROM t")
    assert "DataFileNotFoundError" in text and victim.name in text, text
    # count(*) without a filter is answered from the log's record counts: no data file is opened,
    # so it gives the version's full count (like Delta's metadata-only count in Spark)
    assert _run(ctx, "SELECT count(*) AS n FROM t").to_pydict() == {"n": [30]}
    # a query that prunes the missing file away does not need it
    assert sorted(_run(ctx, "SELECT id FROM t WHERE p = 'a'").column("id").to_pylist()) == list(range(10))
    assert _run(ctx, "SELECT count(*) AS n FROM t WHERE id >= 20").to_pydict() == {"n": [10]}


_DENIED_SCRIPT = """
import sys
import delta_datafusion as dd
from datafusion import SessionContext
for what, run in (
    ("sql", lambda: (lambda c: (dd.register_table(c, "t", sys.argv[1]), c.sql("SELECT sum(id) FROM t").to_pylist()))(SessionContext())),
    ("api", lambda: dd.DeltaTable(sys.argv[1]).snapshot().scan().to_table()),
    ("log", lambda: dd.DeltaTable(sys.argv[2]).snapshot()),
):
    try:
        run()
        print(what, "read")
    except Exception as e:
        e = dd.from_datafusion(e)
        print(what, type(e).__name__, str(e).splitlines()[0])
"""


def test_folders_denied_to_the_reader_are_storage_errors(partitioned: Path, tmp_path: Path) -> None:
    """A partition folder the process may not look into is a StorageError saying so, not a data
    file "removed by VACUUM" (existence was checked with os.path.exists, False when denied); a
    log folder it may not list is a StorageError too (it was a plain DeltaError)."""
    import subprocess
    import sys

    denied_log = copy_table(partitioned, tmp_path / "log_denied")
    folder = partitioned / "p=b"
    command = [sys.executable, "-c", _DENIED_SCRIPT, str(partitioned), str(denied_log)]
    if os.geteuid() == 0:  # root reads everything: drop the capabilities that let it
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot deny a folder to the reader")
        drop = "-dac_override,-dac_read_search"
        command = ["setpriv", f"--inh-caps={drop}", f"--bounding-set={drop}", *command]
    folder.chmod(0)
    (denied_log / "_delta_log").chmod(0)
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=300)
    finally:
        folder.chmod(0o755)
        (denied_log / "_delta_log").chmod(0o755)
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
    assert set(lines) == {"sql", "api", "log"}, out.stdout + out.stderr
    for what in ("sql", "api"):
        assert lines[what].startswith("StorageError "), lines[what]
        assert "permission denied" in lines[what] and "p=b" in lines[what], lines[what]
        assert "VACUUM" not in lines[what], lines[what]
    assert lines["log"].startswith("StorageError ") and "permission denied" in lines["log"], lines["log"]


def _caught(ctx: SessionContext, sql: str) -> Exception:
    with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
        _run(ctx, sql)
    return info.value


def test_typed_errors_rebuilt_from_datafusion(partitioned: Path, tmp_path: Path) -> None:
    """``dd.from_datafusion`` gives back the package's exception type and message for errors of a
    scan (missing data file) and of ``table_changes()`` (planning); DataFusion's own errors give
    None."""
    victim = next(p for p in _data_files(partitioned) if "p=b" in str(p))
    victim.unlink()
    ctx = _ctx()
    dd.register_table(ctx, "t", str(partitioned))
    err = dd.from_datafusion(_caught(ctx, "SELECT * FROM t"))
    assert type(err) is DataFileNotFoundError, err
    assert str(err).startswith(f"table {partitioned.as_uri()} version 2: data file ")
    assert victim.name in str(err) and "PyErr" not in str(err)

    # table_changes() errors are raised during planning and carry a Python repr of the message
    err = dd.from_datafusion(_caught(ctx, "SELECT * FROM table_changes('t', 0)"))
    assert type(err) is CdfNotEnabledError, err
    with pytest.raises(CdfNotEnabledError) as direct:
        dd.DeltaTable(str(partitioned)).changes(0).to_table()
    assert str(err) == str(direct.value)
    # quotes and backslashes inside the message survive
    odd = tmp_path / "it's a \\ path"
    err = dd.from_datafusion(
        _caught(ctx, f"SELECT * FROM table_changes('{str(odd).replace(chr(39), chr(39) * 2)}', 0)")
    )
    assert type(err) is TableNotFoundError and repr(str(odd)) in str(err), err

    # not the package's: the unknown table is DataFusion's own planning error
    assert dd.from_datafusion(_caught(ctx, "SELECT * FROM no_such_table")) is None
    assert dd.from_datafusion(ValueError("External error: KeyError: 'x'")) is None  # not a package class
    plain = DeletionVectorError("bad magic")
    assert dd.from_datafusion(plain) is plain


def test_cli_prints_the_package_error(partitioned: Path, capsys) -> None:
    from delta_datafusion import cli

    code = cli.main(["sql", "SELECT * FROM table_changes('t', 0)", "--table", f"t={partitioned}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: CdfNotEnabledError: change data feed is not enabled at version 0 of "), err
    assert "PyErr" not in err and "Traceback" not in err


def test_missing_data_file_at_older_version(partitioned: Path) -> None:
    victim = next(p for p in _data_files(partitioned) if "p=a" in str(p))
    victim.unlink()
    ctx = _ctx()
    ctx.sql(f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '{partitioned}' OPTIONS ('version' '1')")
    text = _error_text(ctx, "SELECT * FROM t")
    assert "DataFileNotFoundError" in text and victim.name in text and "version 1" in text, text


def test_missing_data_file_with_deletion_vector(copy_corpus_table) -> None:
    table = copy_corpus_table("table-with-dv-small")
    (victim,) = _data_files(table)
    victim.unlink()
    ctx = _ctx()
    dd.register_table(ctx, "t", str(table))
    text = _error_text(ctx, "SELECT * FROM t")
    assert "DataFileNotFoundError" in text and victim.name in text and "version 1" in text, text
    # version 0 has no deletion vector (the other read path) and fails the same way
    dd.register_table(ctx, "t0", str(table), version=0)
    text = _error_text(ctx, "SELECT * FROM t0")
    assert "DataFileNotFoundError" in text and victim.name in text and "version 0" in text, text


def test_vacuumed_version_fails_through_sql() -> None:
    table = corpus_table("snapshot-vacuumed")
    ctx = _ctx()
    dd.register_table(ctx, "v2", str(table), version=2)
    text = _error_text(ctx, "SELECT * FROM v2")
    assert "DataFileNotFoundError" in text and "version 2" in text, text
    missing = [f for f in _logged_adds(table, 2) if not (table / f).exists()]
    assert missing and any(Path(m).name in text for m in missing), text
    ctx.sql(f"CREATE EXTERNAL TABLE v2b STORED AS DELTA LOCATION '{table}' OPTIONS ('version' '2')")
    text = _error_text(ctx, "SELECT count(*) FROM v2b")
    assert "DataFileNotFoundError" in text, text
    # the latest version is intact
    dd.register_table(ctx, "latest", str(table))
    assert _run(ctx, "SELECT count(*) AS n FROM latest").to_pydict() == {"n": [20]}


def _logged_adds(table: Path, version: int) -> list[str]:
    """Paths of the files live at ``version`` (adds minus removes of the JSON commits)."""
    live: dict[str, None] = {}
    for v in range(version + 1):
        for line in (table / "_delta_log" / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = None
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live)


# -- corrupt deletion vectors ------------------------------------------------------------------

DV_FILE = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
DV_OFFSET = 1  # the descriptor's offset: where the 4-byte big-endian size is
DV_SIZE = 36


def _corrupt(table: Path, how: str) -> Path:
    dv = table / DV_FILE
    data = bytearray(dv.read_bytes())
    assert struct.unpack(">i", bytes(data[DV_OFFSET : DV_OFFSET + 4]))[0] == DV_SIZE
    body = DV_OFFSET + 4
    if how == "bad_magic":
        data[body : body + 4] = b"\x00\x01\x02\x03"
    elif how == "flipped_byte":
        data[body + 12] ^= 0xFF
    elif how == "flipped_checksum":
        data[body + DV_SIZE] ^= 0x01
    elif how == "truncated":
        data = data[: body + 10]
    elif how == "empty":
        data = bytearray()
    elif how == "bad_version":
        data[0] = 7
    elif how == "missing":
        dv.unlink()
        return dv
    else:  # pragma: no cover
        raise AssertionError(how)
    dv.write_bytes(bytes(data))
    return dv


@pytest.mark.parametrize(
    ("how", "words"),
    [
        ("bad_magic", ["magic"]),
        ("flipped_byte", ["checksum"]),
        ("flipped_checksum", ["checksum"]),
        ("truncated", ["truncated"]),
        ("empty", []),
        ("bad_version", ["version"]),
        ("missing", ["not found"]),
    ],
)
def test_corrupt_deletion_vector(copy_corpus_table, how: str, words: list[str]) -> None:
    table = copy_corpus_table("table-with-dv-small", f"dv-{how}")
    _corrupt(table, how)
    ctx = _ctx()
    dd.register_table(ctx, "t", str(table))
    text = _error_text(ctx, "SELECT * FROM t")
    assert "DeletionVectorError" in text, text
    assert DV_FILE in text, text
    for w in words:
        assert w in text.lower(), (w, text)
    text = _error_text(ctx, "SELECT count(*) FROM t WHERE value > 0")
    assert "DeletionVectorError" in text, text
    # version 0 has no deletion vector and still reads
    dd.register_table(ctx, "t0", str(table), version=0)
    assert _run(ctx, "SELECT count(*) AS n FROM t0").to_pydict() == {"n": [10]}


def test_intact_deletion_vector_copy_reads(copy_corpus_table) -> None:
    """Control for the corruption cases: the untouched copy reads 8 of 10 rows."""
    table = copy_corpus_table("table-with-dv-small", "dv-intact")
    ctx = _ctx()
    dd.register_table(ctx, "t", str(table))
    assert _run(ctx, "SELECT count(*) AS n FROM t").to_pydict() == {"n": [8]}


# -- unsupported features ----------------------------------------------------------------------


def _write_table_log(
    table: Path,
    reader_features: list[str],
    writer_features: list[str],
    fields: list[dict] | None = None,
    with_data: bool = False,
) -> None:
    """A hand-written table at version 0 with the given protocol features."""
    log = table / "_delta_log"
    log.mkdir(parents=True)
    fields = fields or [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
    actions: list[dict] = [
        {"commitInfo": {"timestamp": 1700000000000, "operation": "CREATE TABLE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": reader_features,
                "writerFeatures": writer_features,
            }
        },
        {
            "metaData": {
                "id": str(uuid.UUID(int=7)),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": 1700000000000,
            }
        },
    ]
    if with_data:
        data = pa.table({"id": pa.array([1, 2, 3], pa.int64())})
        pq.write_table(data, table / "part-0.parquet")
        size = (table / "part-0.parquet").stat().st_size
        actions.append(
            {
                "add": {
                    "path": "part-0.parquet",
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": 1700000000000,
                    "dataChange": True,
                    "stats": json.dumps(
                        {
                            "numRecords": 3,
                            "minValues": {"id": 1},
                            "maxValues": {"id": 3},
                            "nullCount": {"id": 0},
                        }
                    ),
                }
            }
        )
    (log / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


@pytest.mark.parametrize(
    ("features", "named"),
    [
        # variantType without a VARIANT column is read (see test_variant_feature_is_refused_only_with_a_variant_column)
        (["deletionVectors", "someFutureFeature"], "someFutureFeature"),
        (["catalogManaged"], "catalogManaged"),
    ],
)
def test_unsupported_reader_feature(tmp_path: Path, features: list[str], named: str) -> None:
    table = tmp_path / "t"
    _write_table_log(table, features, features, with_data=True)
    with pytest.raises(UnsupportedFeatureError) as info:
        dd.register_table(_ctx(), "t", str(table))
    assert named in str(info.value)
    ctx = _ctx()
    with pytest.raises(Exception) as info2:  # noqa: B017
        ctx.sql(f"CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '{table}'").collect()
    assert "UnsupportedFeatureError" in str(info2.value) and named in str(info2.value)
    dd.register_catalog(ctx, "lake", str(tmp_path))
    with pytest.raises(Exception, match=named):
        _run(ctx, "SELECT * FROM lake.default.t")


def test_writer_only_features_do_not_block_reads(tmp_path: Path) -> None:
    table = tmp_path / "t"
    _write_table_log(table, [], ["appendOnly", "invariants", "someFutureWriterFeature"], with_data=True)
    ctx = _ctx()
    dd.register_table(ctx, "t", str(table))
    assert sorted(_run(ctx, "SELECT id FROM t").column("id").to_pylist()) == [1, 2, 3]


# -- reads never write -------------------------------------------------------------------------


def test_reads_do_not_write_into_the_table(tmp_path: Path, copy_corpus_table) -> None:
    tables = {
        "events": tmp_path / "lake" / "events",
        "dv": copy_corpus_table("table-with-dv-small", "lake/dv"),
        "cm": copy_corpus_table("dv-with-columnmapping", "lake/cm"),
    }
    for i in range(3):
        rows = pa.table({"id": list(range(i * 5, i * 5 + 5)), "p": [f"p{i}"] * 5})
        write_deltalake(str(tables["events"]), rows, mode="append", partition_by=["p"])
    DeltaTable(str(tables["events"])).create_checkpoint()
    write_deltalake(
        str(tables["events"]), pa.table({"id": [99], "p": ["p9"]}), mode="append", partition_by=["p"]
    )
    lake = tmp_path / "lake"
    before = folder_state(lake)

    ctx = _ctx()
    dd.register_table(ctx, "e", str(tables["events"]))
    dd.register_table(ctx, "e1", str(tables["events"]), version=1)
    dd.register_table(ctx, "dv", str(tables["dv"]))
    ctx.sql(f"CREATE EXTERNAL TABLE cm STORED AS DELTA LOCATION '{tables['cm']}' OPTIONS ('version' '5')")
    dd.register_catalog(ctx, "lake", str(lake))
    assert _run(ctx, "SELECT count(*) AS n FROM e").to_pydict() == {"n": [16]}
    assert _run(ctx, "SELECT count(*) AS n FROM e1 WHERE p = 'p1'").to_pydict() == {"n": [5]}
    assert _run(ctx, "SELECT count(*) AS n FROM dv WHERE value > 2").num_rows == 1
    _run(ctx, "SELECT * FROM cm")
    _run(ctx, "SELECT * FROM lake.default.events e JOIN lake.default.dv d ON e.id = d.value")
    _run(ctx, "SELECT * FROM lake.default.cm WHERE part = 1")
    dd.explain(ctx, "SELECT * FROM e WHERE id > 3")
    ctx.sql("SHOW TABLES").collect()
    for name in ("events", "dv", "cm"):
        _run(ctx, f"SELECT * FROM lake.default.{name}")

    after = folder_state(lake)
    assert after == before, {
        k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)
    }


def test_failed_reads_do_not_write(partitioned: Path) -> None:
    victim = _data_files(partitioned)[0]
    victim.unlink()
    before = folder_state(partitioned)
    ctx = _ctx()
    dd.register_table(ctx, "t", str(partitioned))
    _error_text(ctx, "SELECT * FROM t")
    with pytest.raises(VersionNotFoundError):
        dd.register_table(ctx, "t2", str(partitioned), version=12)
    assert folder_state(partitioned) == before
    shutil.rmtree(partitioned / "_delta_log")
    os.makedirs(partitioned / "_delta_log")
    before = folder_state(partitioned)
    with pytest.raises(DeltaError):
        dd.register_table(ctx, "t3", str(partitioned))
    assert folder_state(partitioned) == before


def test_dropped_sessions_release_their_tables(tmp_path: Path) -> None:
    """A process that makes a session per request must not keep every snapshot it registered:
    the package's per-session registries are emptied when the SessionContext is collected."""
    import gc
    import weakref

    from delta_datafusion.datafusion import session as session_module
    from delta_datafusion.datafusion import table_function

    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"})
    alive, ids = [], []
    for _ in range(20):
        ctx = _ctx()
        dd.register(ctx)
        alive.append(weakref.ref(dd.register_table(ctx, "t", str(path))))
        dd.register_catalog(ctx, "lake", str(tmp_path))
        assert _run(ctx, "SELECT count(*) AS n FROM table_changes('t', 0)").to_pydict() == {"n": [2]}
        assert _run(ctx, "SELECT count(*) AS n FROM lake.default.t").to_pydict() == {"n": [2]}
        ids.append(ctx.session_id())
        del ctx
    gc.collect()
    assert not any(r() is not None for r in alive)
    session_module.registered_tables("")  # collected sessions are forgotten by the next registry call
    for sid in ids:
        assert sid not in session_module._REGISTRY and sid not in session_module._CATALOGS
        assert sid not in table_function._SESSIONS


def test_a_dropped_table_is_forgotten_while_its_session_lives(tmp_path: Path) -> None:
    """A long-lived session registering and dropping a table per request kept every snapshot it
    ever registered (10 MB and an open checkpoint file each: 1,500 requests, 15 GB) until the
    session itself was collected; and after a drop, register_table replaced a table the user had
    put under that name."""
    import gc
    import weakref

    from delta_datafusion.datafusion import session as session_module

    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2]}))
    ctx = _ctx()
    dd.register(ctx)
    alive = []
    for i in range(20):
        alive.append(weakref.ref(dd.register_table(ctx, f"req_{i}", str(path))))
        assert _run(ctx, f"SELECT count(*) AS n FROM req_{i}").to_pydict() == {"n": [2]}
        ctx.deregister_table(f"req_{i}")
        _run(ctx, f"CREATE EXTERNAL TABLE ext_{i} STORED AS DELTA LOCATION '{path}'")
        assert _run(ctx, f"SELECT count(*) AS n FROM ext_{i}").to_pydict() == {"n": [2]}
        _run(ctx, f"DROP TABLE ext_{i}")
    gc.collect()
    assert not any(r() is not None for r in alive)
    assert session_module.registered_tables(ctx.session_id()) == []
    # the name is the user's now: register_table refuses to replace it
    dd.register_table(ctx, "mine", str(path))
    ctx.deregister_table("mine")
    ctx.register_record_batches("mine", [[pa.record_batch({"x": [7]})]])
    with pytest.raises(dd.DeltaError, match="did not register"):
        dd.register_table(ctx, "mine", str(path))
    assert _run(ctx, "SELECT x FROM mine").to_pydict() == {"x": [7]}
    # while the package's table is there, registering again replaces it (newer commits)
    dd.register_table(ctx, "t", str(path))
    write_deltalake(str(path), pa.table({"a": [3]}), mode="append")
    dd.register_table(ctx, "t", str(path))
    assert _run(ctx, "SELECT count(*) AS n FROM t").to_pydict() == {"n": [3]}


def test_two_threads_refreshing_one_name_both_succeed(tmp_path: Path, monkeypatch) -> None:
    """register_table refreshing a name while another thread's refresh has swapped its dataset in
    but not recorded it yet was refused as if the name were a user's table."""
    import threading

    from delta_datafusion.datafusion import session as session_module

    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2]}))
    ctx = _ctx()
    dd.register_table(ctx, "t", str(path))
    in_window, release = threading.Event(), threading.Event()
    remember = session_module._remember

    def slow_remember(sid, name, dataset):
        if threading.current_thread().name == "first":
            in_window.set()
            release.wait(10)
        return remember(sid, name, dataset)

    monkeypatch.setattr(session_module, "_remember", slow_remember)
    errors: list[Exception] = []

    def refresh() -> None:
        try:
            dd.register_table(ctx, "t", str(path))
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)

    first = threading.Thread(target=refresh, name="first")
    first.start()
    assert in_window.wait(10)
    second = threading.Thread(target=refresh, name="second")
    second.start()
    threading.Timer(0.3, release.set).start()  # the second waits for the first, then replaces it
    first.join(20)
    second.join(20)
    assert errors == []
    assert _run(ctx, "SELECT count(*) AS n FROM t").to_pydict() == {"n": [2]}
    # and dropped tables' entries do not pile up: registrations clear them now and then (each
    # registration pruning every name made registering many tables quadratic)
    for i in range(500):
        dd.register_table(ctx, f"req_{i}", str(path))
        ctx.deregister_table(f"req_{i}")
    assert len(session_module._REGISTRY[ctx.session_id()]) <= 20


def test_a_session_collected_while_the_registry_is_locked_does_not_deadlock() -> None:
    """A session's finalizer runs whenever the garbage collector does, also inside the registry's
    lock (an allocation there): it took the lock itself and the process hung for good (seen once
    in the test suite, in register_table)."""
    import subprocess
    import sys

    script = (
        "import gc\n"
        "from datafusion import SessionContext\n"
        "import delta_datafusion as dd\n"
        "from delta_datafusion.datafusion import session as s\n"
        "ctx = SessionContext(); dd.register(ctx); ctx.me = ctx  # only the collector frees it\n"
        "sid = ctx.session_id(); del ctx\n"
        "with s._REGISTRY_LOCK:\n"
        "    gc.collect()\n"
        "s.registered_tables('')\n"
        "print(sid not in s._TRACKED)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr[-2000:]


def test_filter_pyarrow_cannot_evaluate_is_refused_at_planning(tmp_path):
    """`l = [3]` on a list column is pushed to the provider, which pyarrow cannot compare: refused
    while planning with a PredicateError naming the filter (it used to surface as a read error
    naming a data file, as if the file were broken)."""
    import deltalake
    import pyarrow as pa
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.errors import PredicateError

    path = str(tmp_path / "t")
    deltalake.write_deltalake(
        path, pa.table({"id": [1, 2], "l": pa.array([[3], [4, 5]], pa.list_(pa.int64()))})
    )
    ctx = SessionContext()
    dd.register_table(ctx, "t", path)
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT id FROM t WHERE l = [3]").collect()
    err = dd.from_datafusion(info.value)
    assert isinstance(err, PredicateError)
    assert "l = [3] cannot be evaluated" in str(err) and ".parquet" not in str(err)


def test_unreadable_table_in_a_folder_catalog_does_not_break_listings(tmp_path: Path) -> None:
    """DataFusion's information_schema (SHOW TABLES, SHOW COLUMNS, ...) looks up every listed
    table of every catalog: one table that cannot be opened failed those queries for the whole
    session, in-memory tables included. It is now left out of listings; a query naming it still
    gets its error (found by the API sweep)."""
    root = tmp_path / "lake"
    write_deltalake(str(root / "good"), pa.table({"a": [1, 2]}))
    copy_table(corpus_table("deltalog-invalid-protocol-version"), root / "bad")
    write_deltalake(str(root / "zgood"), pa.table({"a": [3]}))
    ctx = _ctx()
    dd.register_catalog(ctx, "lake", str(root))
    ctx.register_record_batches("mem", [[pa.record_batch({"x": [1]})]])

    tables = _run(
        ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema <> 'information_schema'"
    )
    assert sorted(tables.column(0).to_pylist()) == ["good", "mem", "zgood"]
    assert _run(ctx, "SHOW COLUMNS FROM mem").column("column_name").to_pylist() == ["x"]
    cols = _run(
        ctx, "SELECT table_name, column_name FROM information_schema.columns WHERE table_catalog = 'lake'"
    )
    assert sorted(cols.column("table_name").to_pylist()) == ["good", "zgood"]
    for q in ("SELECT * FROM lake.default.bad", "SELECT a FROM lake.default.bad"):
        with pytest.raises(Exception, match="minReaderVersion 99") as info:
            _run(ctx, q)
        assert "InvalidProtocolError" in str(info.value) or isinstance(
            dd.from_datafusion(info.value), dd.errors.InvalidProtocolError
        )
    assert _run(ctx, "SELECT a FROM lake.default.zgood").column(0).to_pylist() == [3]


def test_elements_and_map_values_declared_not_null_that_hold_nulls(tmp_path: Path) -> None:
    """containsNull / valueContainsNull false reached DataFusion as non-nullable children: a
    file holding NULLs there made map_values panic and array functions fail (DuckDB returns the
    NULLs; fields declared NOT NULL were already served nullable)."""
    from conftest import add_action, write_commit

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    stored = pa.schema(
        [("id", pa.int32()), ("a", pa.list_(pa.int32())), ("m", pa.map_(pa.string(), pa.int32()))]
    )
    rows = [{"id": 0, "a": [1, None], "m": [("k", None)]}, {"id": 1, "a": [3, 2], "m": [("j", 5)]}]
    pq.write_table(pa.Table.from_pylist(rows, schema=stored), table / "f0.parquet")
    fields = [
        {"name": "id", "type": "integer", "nullable": False, "metadata": {}},
        {
            "name": "a",
            "type": {"type": "array", "elementType": "integer", "containsNull": False},
            "nullable": True,
            "metadata": {},
        },
        {
            "name": "m",
            "type": {"type": "map", "keyType": "string", "valueType": "integer", "valueContainsNull": False},
            "nullable": True,
            "metadata": {},
        },
    ]
    meta = {
        "id": "x",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": [],
        "configuration": {},
    }
    write_commit(
        table,
        0,
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {"metaData": meta},
            {"add": add_action(table, "f0.parquet")},
        ],
    )
    ctx = _ctx()
    dd.register_table(ctx, "t", str(table))
    got = ctx.sql("SELECT id, array_sort(a) AS s, map_values(m) AS v FROM t ORDER BY id").to_pylist()
    assert got == [{"id": 0, "s": [None, 1], "v": [None]}, {"id": 1, "s": [2, 3], "v": [5]}]
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE array_has(a, 1)").to_pylist() == [{"n": 1}]


def test_reading_a_datasets_schema_runs_no_python_code(tmp_path: Path) -> None:
    """datafusion-python panics when reading a dataset's schema raises: a Ctrl-C whose handler
    ran inside a Python ``schema`` property became a PanicException (30 interrupts in 400).
    Outside table lookups the property is a C getter, so no handler runs there."""
    import sys

    from delta_datafusion.datafusion.dataset import dataset_behind

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": [1, 2]}))
    ctx = _ctx()
    dd.register_table(ctx, "t", path)
    dataset = dataset_behind(ctx.catalog().schema().table("t"))  # the lookup still finds it
    assert dataset is not None and dataset.schema.names == ["id"]
    calls: list[str] = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith(
            os.path.join("delta_datafusion", "datafusion", "dataset.py")
        ):
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        dataset.schema  # noqa: B018
        ctx.sql("SELECT count(*) FROM t").schema()
    finally:
        sys.setprofile(None)
    assert not {"schema", "_probing_schema"} & set(calls), calls
    assert ctx.sql("SELECT sum(id) AS s FROM t").to_pylist() == [{"s": 3}]


def test_nested_comparison_error_says_how_to_write_it(tmp_path):
    """`l = [3]`, `s = named_struct(...)`, `m = map(...)` are valid SQL, but DataFusion hands
    them to the scan as done and pyarrow compares no lists, structs or maps: the PredicateError
    only named pyarrow's missing kernel. It now says the form DataFusion evaluates itself, and that
    form reads the rows a plain DataFusion table gives."""
    import deltalake
    import pyarrow as pa
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.errors import PredicateError

    path = str(tmp_path / "t")
    inner = pa.struct([("x", pa.int64())])
    deltalake.write_deltalake(
        path,
        pa.table(
            {
                "id": [1, 2, 3],
                "l": pa.array([[3], [4, 5], None], pa.list_(pa.int64())),
                "My S": pa.array([{"x": 1}, None, {"x": 2}], inner),
            }
        ),
    )
    ctx = SessionContext()
    dd.register_table(ctx, "t", path)
    for column, value, ids in (("l", "[3]", [1]), ('"My S"', "named_struct('x', 2)", [3])):
        with pytest.raises(Exception) as info:
            ctx.sql(f"SELECT id FROM t WHERE {column} = {value}").collect()
        err = dd.from_datafusion(info.value)
        assert isinstance(err, PredicateError)
        assert f"coalesce({column}, {column}) = ..." in str(err)
        rows = ctx.sql(f"SELECT id FROM t WHERE coalesce({column}, {column}) = {value}").to_pylist()
        assert sorted(r["id"] for r in rows) == ids
        with pytest.raises(PredicateError, match=re.escape(f"coalesce({column}, {column})")):
            dd.DeltaTable(path).snapshot().scan(predicate=f"{column} = {value}")
