"""Corrupt and hostile logs found by the bad-input sweep: each gives a clear error of the package's
own type naming the file or version, or is read correctly; never a hang, a raw dependency error
or wrong rows. Tables are copies of the bundled example (``trips``: partitioned by city, change
data feed on, commits 0..5) edited in ``tmp_path``.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from conftest import commit_path, copy_table, log_dir, with_partition_values, without_partition_values

import delta_datafusion as dd
from delta_datafusion import DeltaTable
from delta_datafusion.errors import DeltaError, LogCorruptError, NonContiguousVersionsError

if TYPE_CHECKING:
    import pyarrow as pa

TRIPS = Path(dd.__file__).parent / "examples" / "trips"


@pytest.fixture
def trips(tmp_path: Path) -> Path:
    return copy_table(TRIPS, tmp_path / "trips")


def _sql(path: Path, query: str) -> list[dict]:
    from datafusion import SessionContext

    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(path))
    return ctx.sql(query).to_pylist()


def _edit(path: Path, fn) -> None:
    """Rewrite each action of a commit file with ``fn(action) -> action | None`` (None drops it)."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            new = fn(json.loads(line))
            if new is not None:
                out.append(json.dumps(new))
    path.write_text("\n".join(out) + "\n")


@pytest.mark.parametrize("version", [10_000_000, 9_000_000_000_000_000_000])
def test_stray_commit_far_ahead_is_a_gap_not_a_hang(trips: Path, version: int) -> None:
    shutil.copy(commit_path(trips, 1), log_dir(trips) / f"{version:020d}.json")
    started = time.monotonic()
    with pytest.raises(
        NonContiguousVersionsError, match=rf"missing 6\.\.{version - 1} between 0 and {version}"
    ):
        DeltaTable(str(trips)).snapshot()
    with pytest.raises(DeltaError, match=r"6\.\."):
        DeltaTable(str(trips)).changes(0, version)
    assert time.monotonic() - started < 10  # it used to list every missing version
    assert DeltaTable(str(trips)).snapshot(version=5).version == 5


def test_commit_version_beyond_a_long(trips: Path) -> None:
    shutil.copy(commit_path(trips, 1), log_dir(trips) / ("9" * 20 + ".json"))
    with pytest.raises(LogCorruptError, match=r"99999999999999999999\.json: a commit version beyond"):
        DeltaTable(str(trips)).snapshot()


@pytest.mark.parametrize(
    "name",
    [
        "99999999999999999999.checkpoint.parquet",
        "99999999999999999999.checkpoint.0000000001.0000000001.parquet",
        "99999999999999999999.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
    ],
)
def test_checkpoint_version_beyond_a_long(trips: Path, name: str) -> None:
    """As a commit's: before, the snapshot failed with a bare OverflowError ("Python int too
    large to convert to C long")."""
    from deltalake import DeltaTable as WriterTable

    WriterTable(str(trips)).create_checkpoint()
    shutil.copy(log_dir(trips) / "00000000000000000005.checkpoint.parquet", log_dir(trips) / name)
    with pytest.raises(LogCorruptError, match=rf"{re.escape(name)}: a checkpoint version beyond"):
        DeltaTable(str(trips)).snapshot().files()


def _metadata_edit(trips: Path, fn) -> None:
    def edit(action):
        if "metaData" in action:
            fn(action["metaData"])
        return action

    _edit(commit_path(trips, 0), edit)


def test_metadata_without_partition_columns_is_refused(trips: Path) -> None:
    """partitionColumns is required: read as unpartitioned, `city` came back NULL and
    `WHERE city = 'Porto'` matched nothing."""
    from delta_datafusion.errors import SchemaError

    _metadata_edit(trips, lambda md: md.pop("partitionColumns"))
    with pytest.raises(SchemaError, match=r"00000000000000000000\.json: metaData lacks partitionColumns"):
        DeltaTable(str(trips)).snapshot()


def test_repeated_partition_column_is_refused(trips: Path) -> None:
    from delta_datafusion.errors import SchemaError

    _metadata_edit(trips, lambda md: md.update(partitionColumns=["city", "city"]))
    with pytest.raises(
        SchemaError, match=r"partitionColumns \['city', 'city'\] name a column more than once"
    ):
        _sql(trips, "SELECT count(*) AS n FROM t")


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda s: s["fields"][0].pop("name"), "not an object with a string name and a type"),
        (lambda s: s["fields"][0].update(name=5), "not an object with a string name and a type"),
        (lambda s: s.update(fields={"a": 1}), "the fields of the struct at the top level are not a list"),
    ],
)
def test_malformed_schema_fields_are_schema_errors(trips: Path, mangle, message) -> None:
    from delta_datafusion.errors import SchemaError

    def edit(md):
        schema = json.loads(md["schemaString"])
        mangle(schema)
        md["schemaString"] = json.dumps(schema)

    _metadata_edit(trips, edit)
    with pytest.raises(SchemaError, match=message):
        DeltaTable(str(trips)).snapshot()


def test_deeply_nested_json_is_corrupt_not_a_recursion_error(trips: Path) -> None:
    from delta_datafusion.errors import SchemaError

    _metadata_edit(trips, lambda md: md.update(schemaString="[" * 100_000 + "]" * 100_000))
    with pytest.raises(SchemaError, match="schemaString is not valid JSON"):
        DeltaTable(str(trips)).snapshot()


def test_history_tolerates_odd_commit_info(trips: Path) -> None:
    """commitInfo is informational: history lists every version, with no operation where the
    line is not what the protocol describes."""
    _edit(commit_path(trips, 3), lambda a: {"commitInfo": "odd"} if "commitInfo" in a else a)
    _edit(commit_path(trips, 4), lambda a: {"commitInfo": {"operation": 7}} if "commitInfo" in a else a)
    deep = commit_path(trips, 5)
    deep.write_text('{"commitInfo": ' + "[" * 100_000 + "]" * 100_000 + "}\n" + deep.read_text())
    hist = DeltaTable(str(trips)).history()
    ops = hist.column("operation").to_pylist()
    assert len(ops) == 6 and ops[3] is None and ops[4] is None and ops[5] is None
    assert ops[0] is not None
    infos = hist.column("commit_info").to_pylist()
    assert infos[3] is None and json.loads(infos[4]) == {"operation": 7} and infos[5] is None


def test_history_gives_the_commit_info_however_the_line_is_written(trips: Path) -> None:
    """commit_info is the commitInfo object's text as written when it is the line's one key
    (spaces around it kept), else the object written again: always that object."""
    info = {"operation": "WRITE", "operationParameters": {"mode": "Append", "note": 'a \u00e9 \\ "}"'}}
    text = json.dumps(info)
    lines = {
        1: '{ "commitInfo" :  ' + text + " }",  # spaces
        2: '{"commitInfo":' + text + ',"other":1}',  # a second key
        3: '{"other":1,"commitInfo":' + text + "}",  # not the first key
        4: '{"commitInfo":' + json.dumps(info, ensure_ascii=False) + "}",  # UTF-8 as such
        5: '{"commitInfo":{"operation":"DELETE"},"commitInfo":'
        + text
        + "}",  # the key twice: the last counts
    }
    for version, line in lines.items():
        path = commit_path(trips, version)
        rest = [x for x in path.read_text().splitlines() if '"commitInfo"' not in x]
        path.write_text("\n".join([line, *rest]) + "\n")
    hist = DeltaTable(str(trips)).history().to_pylist()
    for version in lines:
        assert json.loads(hist[version]["commit_info"]) == info, version
        assert hist[version]["operation"] == "WRITE"
    assert hist[1]["commit_info"] == text  # as written


def test_sidecar_outside_the_sidecars_folder_is_refused(tmp_path: Path) -> None:
    """A V2 manifest naming a sidecar elsewhere (another table's, any file) was read as part of
    the table."""
    from conftest import corpus_table

    t = copy_table(corpus_table("v2-checkpoints-json-with-sidecars"), tmp_path / "t")
    manifest = next(log_dir(t).glob("00000000000000000006.checkpoint.*.json"))
    sidecar = sorted((log_dir(t) / "_sidecars").glob("00000000000000000006.checkpoint.*.parquet"))[0]
    outside = tmp_path / sidecar.name
    shutil.move(sidecar, outside)

    def point_outside(action):
        if "sidecar" in action and action["sidecar"]["path"] == sidecar.name:
            action["sidecar"]["path"] = outside.as_uri()
        return action

    _edit(manifest, point_outside)
    with pytest.raises(LogCorruptError, match=r"sidecar 'file://.*' is outside .*_delta_log/_sidecars"):
        DeltaTable(str(t)).snapshot().files()
    _edit(
        manifest, lambda a: {"sidecar": {**a["sidecar"], "path": "../../x.parquet"}} if "sidecar" in a else a
    )
    with pytest.raises(Exception, match=r"LogCorruptError.*sidecar '\.\./\.\./x\.parquet' is outside"):
        _sql(t, "SELECT count(*) AS n FROM t")


@pytest.mark.parametrize("num_records", [-100, 2**62])
def test_impossible_num_records_are_not_trusted_for_counts(trips: Path, num_records: int) -> None:
    """count(*) from the log used numRecords as given: -100 failed in pyarrow, 2**62 tried to
    allocate it; such a file is read instead."""
    want = _sql(trips, "SELECT count(*) AS n FROM t")

    def lie(action):
        if "add" in action and action["add"].get("stats"):
            stats = json.loads(action["add"]["stats"])
            stats["numRecords"] = num_records
            action["add"]["stats"] = json.dumps(stats)
        return action

    for version in range(6):
        _edit(commit_path(trips, version), lie)
    assert _sql(trips, "SELECT count(*) AS n FROM t") == want


def _dv_table(tmp_path: Path) -> Path:
    from conftest import corpus_table

    return copy_table(corpus_table("table-with-dv-small"), tmp_path / "dv")  # 10 rows, DV of 2 at v1


def test_negative_deletion_vector_cardinality_is_not_counted(tmp_path: Path) -> None:
    t = _dv_table(tmp_path)

    def negative(action):
        if "add" in action and action["add"].get("deletionVector"):
            action["add"]["deletionVector"]["cardinality"] = -3
        return action

    _edit(commit_path(t, 1), negative)
    with pytest.raises(Exception, match="DeletionVectorError.*cardinality must be a non-negative integer"):
        _sql(t, "SELECT count(*) AS n FROM t")


def test_deletion_vector_naming_a_row_past_the_file_is_refused(tmp_path: Path) -> None:
    """A well-formed DV (magic, size, checksum) deleting row 700 of a 10-row file was applied
    silently."""
    import struct
    import zlib

    from pyroaring import BitMap64

    t = _dv_table(tmp_path)
    dv_file = next(t.glob("deletion_vector_*.bin"))
    body = struct.pack("<I", 1681511377) + BitMap64([0, 700]).serialize()
    dv_file.write_bytes(b"\x01" + struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body)))

    def resize(action):
        if "add" in action and action["add"].get("deletionVector"):
            action["add"]["deletionVector"]["sizeInBytes"] = len(body)
        return action

    _edit(commit_path(t, 1), resize)
    with pytest.raises(Exception, match=r"DeletionVectorError.*names row 700, but the file has 10 rows"):
        _sql(t, "SELECT * FROM t")


def test_change_data_file_without_change_type_is_named_among_the_commits_read_together(trips: Path) -> None:
    """The Python API reads consecutive commits in one scan: the cdc file lacking _change_type is
    named (was 'one of 2 read together, the first' the other commit's cdc file)."""
    import pyarrow.parquet as pq

    from delta_datafusion.errors import ChangeDataFeedError

    cdc_paths = [
        json.loads(line)["cdc"]["path"]
        for v in range(6)
        for line in commit_path(trips, v).read_text().splitlines()
        if '"cdc"' in line
    ]
    assert len(cdc_paths) == 2  # the premise: two commits with a cdc file each
    cdc = trips / cdc_paths[-1]
    pq.write_table(pq.read_table(cdc).drop_columns(["_change_type"]), cdc)
    with pytest.raises(ChangeDataFeedError, match=rf"no _change_type column \({cdc}\)"):
        DeltaTable(str(trips)).changes(0).to_table()


def test_change_data_file_without_change_type_is_refused(trips: Path) -> None:
    """A cdc file lacking _change_type gave rows with a NULL change type."""
    import pyarrow.parquet as pq

    from delta_datafusion.errors import ChangeDataFeedError

    cdc = next((trips / "_change_data").rglob("*.parquet"))
    pq.write_table(pq.read_table(cdc).drop_columns(["_change_type"]), cdc)
    version = next(
        v
        for v in range(6)
        if cdc.name in commit_path(trips, v).read_text() and '"cdc"' in commit_path(trips, v).read_text()
    )
    with pytest.raises(
        ChangeDataFeedError, match=rf"change data file has no _change_type column \(.*{cdc.name}"
    ):
        DeltaTable(str(trips)).changes(version, version).to_table()
    with pytest.raises(Exception, match="ChangeDataFeedError.*no _change_type column"):
        _sql(
            trips,
            f"SELECT _change_type, count(*) FROM table_changes('{trips}', {version}, {version}) GROUP BY 1",
        )
    # the columns around it still read: the rows do not depend on the missing column
    assert DeltaTable(str(trips)).changes(version, version, columns=["trip_id"]).to_table().num_rows > 0


def test_an_action_listed_twice_in_a_commit_changes_the_feed_once(trips: Path) -> None:
    """The snapshot counted a doubled add once; the change feed gave its rows twice."""
    once = DeltaTable(str(trips)).changes(5, 5).to_table().num_rows
    path = commit_path(trips, 5)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [line for line in lines if '"add"' in line]) + "\n")
    assert DeltaTable(str(trips)).changes(5, 5).to_table().num_rows == once > 0
    assert _sql(trips, "SELECT count(*) AS n FROM t") == _sql(TRIPS, "SELECT count(*) AS n FROM t")


def test_parquet_that_is_not_a_sidecar_is_refused(tmp_path: Path) -> None:
    """A sidecar replaced by an unrelated parquet file was read as "no files"."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from conftest import corpus_table

    t = copy_table(corpus_table("v2-checkpoints-json-with-sidecars"), tmp_path / "t")
    sidecar = sorted((log_dir(t) / "_sidecars").glob("00000000000000000006.checkpoint.*.parquet"))[0]
    pq.write_table(pa.table({"x": [1]}), sidecar)
    with pytest.raises(
        LogCorruptError, match=rf"{sidecar.name}: sidecar has neither an add nor a remove column"
    ):
        DeltaTable(str(t)).snapshot().files()


def test_sidecar_listed_twice_is_refused(tmp_path: Path) -> None:
    from conftest import corpus_table

    t = copy_table(corpus_table("v2-checkpoints-json-with-sidecars"), tmp_path / "t")
    manifest = next(log_dir(t).glob("00000000000000000006.checkpoint.*.json"))
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join(lines + [next(line for line in lines if '"sidecar"' in line)]) + "\n")
    with pytest.raises(LogCorruptError, match="is listed more than once"):
        DeltaTable(str(t)).snapshot().files()


def test_multi_part_checkpoint_repeating_a_part_is_refused(tmp_path: Path) -> None:
    """A part copied over another gave its files' rows twice."""
    from conftest import corpus_table

    t = copy_table(corpus_table("v1-multi-part-struct-stats-only"), tmp_path / "t")
    part = log_dir(t) / "00000000000000000005.checkpoint.{:010d}.0000000003.parquet"
    shutil.copy(part.parent / part.name.format(2), part.parent / part.name.format(3))
    with pytest.raises(LogCorruptError, match="multi-part checkpoint list a file more than once"):
        DeltaTable(str(t)).snapshot().files()


def test_deletion_vector_descriptor_errors_name_the_data_file(tmp_path: Path) -> None:
    from delta_datafusion.errors import DeletionVectorError

    t = _dv_table(tmp_path)
    data_file = None

    def bad_type(action):
        nonlocal data_file
        if "add" in action and action["add"].get("deletionVector"):
            action["add"]["deletionVector"]["storageType"] = "q"
            data_file = action["add"]["path"]
        return action

    _edit(commit_path(t, 1), bad_type)
    with pytest.raises(
        DeletionVectorError,
        match=rf"version 1, data file .*{data_file}: unknown deletion vector storageType 'q'",
    ):
        DeltaTable(str(t)).snapshot().scan().to_table()


def test_unreadable_data_file_is_named_among_several(trips: Path) -> None:
    """The error named the first file of the read, a healthy one."""
    broken = sorted((trips / "city=Porto").glob("*.parquet"))[0]
    broken.write_bytes(broken.read_bytes()[:100])
    with pytest.raises(DeltaError, match=rf"cannot read data file .*{broken.name}"):
        DeltaTable(str(trips)).snapshot().scan().to_table()


def test_an_empty_v2_manifest_is_no_checkpoint(tmp_path: Path) -> None:
    """A checkpoint file of 0 bytes is ignored, as Spark and delta-kernel-rs ignore it (a failed
    writer can leave one): the older checkpoint and the commits give the version. This reader
    refused the table ("the checkpoint manifest is empty"; before that, "no protocol action
    found in the log"); where nothing else gives the version, the error says it was ignored."""
    from conftest import corpus_table

    from delta_datafusion.errors import VersionNotFoundError

    t = copy_table(corpus_table("v2-checkpoints-json-with-sidecars"), tmp_path / "t")
    want = sorted(DeltaTable(str(t)).snapshot().files().column("path").to_pylist())
    manifest = next(log_dir(t).glob("00000000000000000006.checkpoint.*.json"))
    manifest.write_bytes(b"")
    snap = DeltaTable(str(t)).snapshot()
    assert (snap.version, snap.checkpoint_version) == (6, 5)
    assert sorted(snap.files().column("path").to_pylist()) == want
    for older in log_dir(t).glob("0000000000000000000[0-5].*"):
        older.unlink()
    with pytest.raises(
        VersionNotFoundError,
        match=rf"empty checkpoint files \(0 bytes\) ignored at versions 6 \({manifest.name}\)",
    ):
        DeltaTable(str(t)).snapshot()


def test_incomplete_multi_part_checkpoint_is_mentioned(tmp_path: Path) -> None:
    from conftest import corpus_table

    from delta_datafusion.errors import VersionNotFoundError

    t = copy_table(corpus_table("v1-multi-part-struct-stats-only"), tmp_path / "t")
    for v in range(5):
        commit_path(t, v).unlink(missing_ok=True)
    (log_dir(t) / "00000000000000000005.checkpoint.0000000002.0000000003.parquet").unlink()
    with pytest.raises(
        VersionNotFoundError,
        match=r"incomplete multi-part checkpoints ignored at versions 5 \(2 of its 3 parts\)",
    ):
        DeltaTable(str(t)).snapshot(version=5)


def test_bad_partition_value_in_the_change_feed_names_the_table_and_range(trips: Path) -> None:
    """The error named only the column and value ("Porto" is no date)."""

    def as_date(md):
        schema = json.loads(md["schemaString"])
        for f in schema["fields"]:
            if f["name"] == "city":
                f["type"] = "date"
        md["schemaString"] = json.dumps(schema)

    _metadata_edit(trips, as_date)
    with pytest.raises(LogCorruptError, match=r"table_changes on .*trips 0\.\.5: partition column 'city'"):
        DeltaTable(str(trips)).changes(0, 5).to_table()


# -- mutation fuzz findings (session 14) ---------------------------------------------------------


def test_a_commit_line_that_is_json_null_is_refused(trips: Path) -> None:
    """pyarrow's JSON reader crashed the whole process (SIGSEGV) on a null first line."""
    for version in (1, 0):
        path = commit_path(trips, version)
        path.write_text("null\n" + path.read_text())
        with pytest.raises(
            LogCorruptError, match=rf"{version:020d}\.json: cannot parse commit JSON: a line is JSON null"
        ):
            DeltaTable(str(trips)).snapshot().files()


def test_invalid_utf8_in_a_commit_is_refused(trips: Path) -> None:
    """pyarrow does not check UTF-8: stats and partition values failed later with UnicodeDecodeError."""
    path = commit_path(trips, 1)
    path.write_bytes(path.read_bytes().replace(b'"city":"Porto"}', b'"city":"Po\xc3("}', 1))
    with pytest.raises(LogCorruptError, match=r"00000000000000000001\.json: not UTF-8 text \(byte \d+"):
        DeltaTable(str(trips)).snapshot().files()
    with pytest.raises(Exception, match="LogCorruptError.*not UTF-8 text"):
        _sql(trips, "SELECT count(*) FROM t")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda md: md.update(schemaString=5), "metaData.schemaString is not a string: 5"),
        (lambda md: _field0(md, metadata=5), "the metadata of field trip_id is not an object"),
        (
            lambda md: _field0(md, metadata={"delta.columnMapping.physicalName": {"a": 1}}),
            "with a string physical",
        ),
        (lambda md: _field0(md, name="\ud800"), "field name or metadata is not valid Unicode text"),
        (
            lambda md: md.update(partitionColumns=None),
            "partitionColumns must be a list of column names, got None",
        ),
        (
            lambda md: md.update(partitionColumns=""),
            "partitionColumns must be a list of column names, got ''",
        ),
    ],
)
def test_malformed_schema_values_are_schema_errors(trips: Path, edit, message: str) -> None:
    """TypeError, AttributeError and UnicodeEncodeError before; a null or empty-string
    partitionColumns was read as unpartitioned (the partition column NULL)."""
    from delta_datafusion.errors import SchemaError

    _metadata_edit(trips, edit)
    with pytest.raises(SchemaError, match=r"00000000000000000000\.json: .*" + re.escape(message)):
        DeltaTable(str(trips)).snapshot().files()


def _field0(md: dict, **changes) -> None:
    schema = json.loads(md["schemaString"])
    schema["fields"][0].update(changes)
    md["schemaString"] = json.dumps(schema)


def test_an_add_without_partition_values_is_refused(trips: Path) -> None:
    """partitionValues is required on add and cdc actions: read as NULLs, `city` came back NULL
    for the file's rows (deltalake and DuckDB refuse)."""

    def drop(action):
        if "add" in action:
            action["add"]["partitionValues"] = None
        return action

    for version in range(6):
        _edit(commit_path(trips, version), drop)
    # the error names the action's version and its commit file (h29c's mutation hunt: the table's
    # version alone was named, and the commit dropping the field had to be searched for)
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(trips)).snapshot().files()
    found = re.search(
        r"data file city=\w+/part-\S+ of version (\d) in (\S+) has no partitionValues \(a required",
        str(info.value),
    )
    assert found and found[2] == str(commit_path(trips, int(found[1]))), str(info.value)
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(trips)).changes(1, 1).to_table()
    assert f"of version 1 in {commit_path(trips, 1)} has no partitionValues" in str(info.value), str(
        info.value
    )


def test_a_deletion_vector_without_storage_type_is_refused(trips: Path) -> None:
    """Read as no deletion vector, the deleted rows came back (deltalake and DuckDB refuse)."""
    from delta_datafusion.errors import DeletionVectorError

    def dv(action):
        if "add" in action:
            action["add"]["deletionVector"] = {
                "storageType": None,
                "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                "sizeInBytes": 40,
                "cardinality": 1,
            }
        return action

    _edit(commit_path(trips, 1), dv)
    with pytest.raises(
        DeletionVectorError,
        match=r"data file \S+city=Porto\S+: its deletion vector descriptor has no storageType",
    ) as info:
        _scan_rows(trips)
    # which table version and which commit holds the descriptor (the data file alone was named)
    assert str(info.value).startswith(f"table {DeltaTable(str(trips)).snapshot().table_root} version 5, ")
    assert str(info.value).endswith(f"(logged in {commit_path(trips, 1)})"), str(info.value)
    with pytest.raises(DeletionVectorError, match="has no storageType") as info:
        DeltaTable(str(trips)).changes(1, 1).to_table()
    assert str(info.value).endswith(f"(logged in {commit_path(trips, 1)})"), str(info.value)


def _scan_rows(path: Path) -> int:
    return DeltaTable(str(path)).snapshot().scan().to_table().num_rows


@pytest.mark.parametrize("where", ["footer", "values"])
def test_checkpoint_text_that_is_not_utf8_is_refused(tmp_path: Path, where: str) -> None:
    """A column name in the footer, or a protocol feature stored in the data pages, that is not
    UTF-8: UnicodeDecodeError before."""
    import pyarrow.parquet as pq
    from conftest import corpus_table

    name = "simple_table_with_checkpoint" if where == "footer" else "dv-with-columnmapping"
    t = copy_table(corpus_table(name), tmp_path / "t")
    checkpoint = log_dir(t) / f"{10:020d}.checkpoint.parquet"
    if where == "values":  # values stored verbatim
        pq.write_table(pq.read_table(checkpoint), checkpoint, compression="none", use_dictionary=False)
    data = bytearray(checkpoint.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    if where == "footer":
        data[data.index(b"partitionValues", footer) + 2] = 0xE1
    else:
        i = data.find(b"columnMapping")
        while 0 <= i < footer:
            data[i + 1] = 0xE1
            i = data.find(b"columnMapping", i + 1)
    checkpoint.write_bytes(bytes(data))
    with pytest.raises(
        LogCorruptError, match=r"10\.checkpoint\.parquet: checkpoint parquet holds text that is not UTF-8"
    ):
        DeltaTable(str(t)).snapshot().files()


@pytest.mark.parametrize("odd", [1, 2, 3])
def test_checkpoint_parts_typing_stats_parsed_apart_are_refused(tmp_path: Path, odd: int) -> None:
    """One part of a multi-part checkpoint stores stats_parsed.maxValues.id as a string, the
    others as a long: SQL failed with pyarrow's ArrowTypeError (deltalake refuses the table).
    The error names that part (it named the first part whichever was odd)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from conftest import corpus_table

    def retyped(arr: pa.StructArray, path: list[str]) -> pa.StructArray:
        kids = [
            (arr.field(k).cast(pa.string()) if len(path) == 1 else retyped(arr.field(k), path[1:]))
            if f.name == path[0]
            else arr.field(k)
            for k, f in enumerate(arr.type)
        ]
        return pa.StructArray.from_arrays(kids, names=[f.name for f in arr.type], mask=arr.is_null())

    t = copy_table(corpus_table("v1-multi-part-struct-stats-only"), tmp_path / "t")
    part = log_dir(t) / f"00000000000000000005.checkpoint.{odd:010d}.0000000003.parquet"
    table = pq.read_table(part)
    i = table.column_names.index("add")
    adds = retyped(table.column("add").combine_chunks(), ["stats_parsed", "maxValues", "id"])
    pq.write_table(table.set_column(i, "add", adds), part)
    why = (
        rf"checkpoint\.{odd:010d}\.0000000003\.parquet: the checkpoint's parts or the commits disagree on add"
    )
    with pytest.raises(Exception, match="LogCorruptError.*" + why):
        _sql(t, "SELECT count(*) FROM t WHERE id > 2")


def test_a_checkpoint_add_without_partition_values_is_refused(tmp_path: Path) -> None:
    """A null partitionValues map in a checkpoint became a struct of NULLs (the null check of
    commit adds never saw it) and the file's rows read NULL partition values; deltalake and
    DuckDB refuse. The checkpoint's partitionValues_parsed is not used in its place."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable as DLTable
    from deltalake import write_deltalake

    t = tmp_path / "t"
    conf = {"delta.checkpoint.writeStatsAsStruct": "true"}
    write_deltalake(str(t), pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"], configuration=conf)
    DLTable(str(t)).create_checkpoint()
    checkpoint = next(log_dir(t).glob("*.checkpoint.parquet"))
    pq.write_table(without_partition_values(pq.read_table(checkpoint)), checkpoint)
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot().files()
    # the version and file of the action: the checkpoint's
    want = rf"data file p=\w/part-\S+ of version 0 in {re.escape(str(checkpoint))} has no partitionValues \(a required field\)"
    assert re.search(want, str(info.value)), str(info.value)


def _two_part_checkpoint(t: Path, damage, damaged: tuple[int, ...] = (1,)) -> list[Path]:
    """The checkpoint deltalake writes of ``t`` (a table of two adds) made a checkpoint in two
    parts, each holding one add, ``damage`` applied to the parts numbered in ``damaged``."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable as DLTable

    DLTable(str(t)).create_checkpoint()
    classic = next(log_dir(t).glob("*.checkpoint.parquet"))
    table = pq.read_table(classic)
    classic.unlink()
    (log_dir(t) / "_last_checkpoint").unlink()
    adds = table.column("add").combine_chunks()
    is_add = pc.not_equal(pc.fill_null(pc.struct_field(adds, "path"), ""), "")
    moved = pc.index(is_add, True).as_py()  # the first add goes to the second part, the rest stay
    in_second = pa.array([i == moved for i in range(table.num_rows)])
    halves = [table.filter(pc.invert(in_second)), table.filter(in_second)]
    parts = [log_dir(t) / f"{0:020d}.checkpoint.{k:010d}.{2:010d}.parquet" for k in (1, 2)]
    for k, (half, part) in enumerate(zip(halves, parts, strict=True)):
        pq.write_table(damage(half) if k in damaged else half, part)
    assert DeltaTable(str(t)).snapshot().checkpoint_version == 0
    return parts


def test_a_checkpoint_part_without_partition_values_is_named(tmp_path: Path) -> None:
    """Of a checkpoint in two parts, the second's add lacks partitionValues: the error named the
    table's version alone, not which part holds the action."""
    import pyarrow as pa
    from deltalake import write_deltalake

    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    parts = _two_part_checkpoint(t, without_partition_values)
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot().files()
    want = rf"data file p=\w/part-\S+ of version 0 in {re.escape(str(parts[1]))} has no partitionValues"
    assert re.search(want, str(info.value)), str(info.value)


def _untypable_partition_values(checkpoint: pa.Table) -> pa.Table:
    """Every partition value of the adds ``x``, which an integer partition column cannot hold."""
    import pyarrow as pa

    return with_partition_values(
        checkpoint,
        lambda pv: pa.MapArray.from_arrays(
            pv.offsets, pv.keys, pa.array(["x"] * len(pv.items), pa.string()), mask=pv.is_null()
        ),
    )


@pytest.mark.parametrize(
    ("damage", "what"),
    [
        (without_partition_values, "has no partitionValues"),
        (_untypable_partition_values, None),
    ],
    ids=["no-partition-values", "untypable-value"],
)
@pytest.mark.parametrize("state_as", ["state", "bytes"])
def test_a_parallel_worker_names_the_checkpoint_part_it_reads(
    tmp_path: Path, damage, what: str | None, state_as: str
) -> None:
    """Both parts of a checkpoint hold a damaged add; a worker of the parallel phase reading one
    of them named the table and version but not the part (its state's log_file_of knew no file),
    where Snapshot.files() names it. The parts are read on two threads at once with one state:
    each error names the part its own worker read."""
    from concurrent.futures import ThreadPoolExecutor

    import pyarrow as pa
    from deltalake import write_deltalake

    from delta_datafusion.parallel import Parallel, ParallelScanMetadata, ParallelState

    t = tmp_path / "t"
    write_deltalake(str(t), pa.table({"id": [1, 2], "p": [1, 2]}), partition_by=["p"])
    parts = _two_part_checkpoint(t, damage, damaged=(0, 1))
    phase = DeltaTable(str(t)).snapshot().scan().parallel_scan_metadata()
    assert list(phase)
    after = phase.finish()
    assert isinstance(after, Parallel) and sorted(f.path for f in after.files) == sorted(map(str, parts))

    def message(state, leaf) -> str:
        with pytest.raises(LogCorruptError) as info:
            list(ParallelScanMetadata(state, [leaf]))
        return str(info.value)

    state = after.state
    if state_as == "bytes":
        data = after.state.to_bytes()
        state = ParallelState.from_bytes(data)
        for leaf in after.files:  # each worker rebuilding the state from the bytes
            assert f"of version 0 in {leaf.path}" in message(data, leaf)
    with ThreadPoolExecutor(2) as pool:
        for _ in range(20):
            messages = list(pool.map(lambda leaf: message(state, leaf), after.files))
            for leaf, text in zip(after.files, messages, strict=True):
                assert text.startswith(f"{after.state.table_root} at version 0: "), text
                found = re.search(r"data file p=\d/part-\S+ of version 0 in (\S+?)\)?( |$)", text)
                assert found and found[1] == leaf.path, text
                if what is not None:
                    assert what in text, text


def _arrow_schema_with_128_bit_integers(path: Path) -> None:
    """Rewrite the Arrow schema a parquet footer carries so that a 64-bit integer says 128 bits
    (as one flipped byte of a footer can): pyarrow refuses the footer with ArrowNotImplementedError,
    not the ArrowInvalid/OSError of other damaged footers."""
    import base64

    import pyarrow.parquet as pq

    data = path.read_bytes()
    stored = pq.read_metadata(path).metadata[b"ARROW:schema"]
    flat = base64.b64decode(stored)
    at = flat.find(b"\x40\x00\x00\x00")
    while at >= 0:  # the first 64 that is an integer's width
        damaged = flat[:at] + b"\x80" + flat[at + 1 :]
        path.write_bytes(data.replace(stored, base64.b64encode(damaged)))
        try:
            pq.read_schema(path)
        except NotImplementedError:
            return
        except OSError:
            pass
        at = flat.find(b"\x40\x00\x00\x00", at + 1)
    raise AssertionError("no integer width found")


def _column_name_not_utf8(path: Path, name: bytes) -> None:
    """The column ``name`` in the footer with its last byte not UTF-8: pyarrow raises
    UnicodeDecodeError opening it."""
    path.write_bytes(path.read_bytes().replace(name, name[:-1] + b"\xff"))


@pytest.mark.parametrize(
    "damage",
    [_arrow_schema_with_128_bit_integers, lambda p: _column_name_not_utf8(p, b"distance_km")],
    ids=["integer-width", "name-not-utf8"],
)
def test_a_data_file_footer_pyarrow_refuses_otherwise_is_named(trips: Path, damage) -> None:
    """A footer with a column name that is not UTF-8 was a StorageError ('the store failed', which
    a retry does not mend), naming one of 4 files; one pyarrow refuses with
    ArrowNotImplementedError escaped as that raw error until footer reads were probed."""
    import pyarrow.parquet as pq

    from delta_datafusion.errors import StorageError, describe

    broken = next((trips / "city=Faro").glob("*.parquet"))
    damage(broken)
    with pytest.raises((NotImplementedError, UnicodeDecodeError)):
        pq.read_schema(broken)
    with pytest.raises(DeltaError) as info:
        DeltaTable(str(trips)).snapshot().scan().to_table()
    assert not isinstance(info.value, StorageError), info.value
    assert re.search(rf"version 5: cannot read data file \S*{re.escape(broken.name)}: ", str(info.value))
    with pytest.raises(Exception) as info:
        _sql(trips, "SELECT * FROM t")
    assert re.search(
        rf"^DeltaError: .*cannot read data file \S*{re.escape(broken.name)}", describe(info.value)
    )


def test_a_checkpoint_footer_pyarrow_refuses_otherwise_is_corrupt(tmp_path: Path) -> None:
    """ArrowNotImplementedError from a checkpoint's footer escaped as that raw error."""
    import pyarrow.parquet as pq
    from conftest import corpus_table

    t = copy_table(corpus_table("simple_table_with_checkpoint"), tmp_path / "t")
    checkpoint = log_dir(t) / f"{10:020d}.checkpoint.parquet"
    pq.write_table(pq.read_table(checkpoint), checkpoint)  # with an Arrow schema in its footer
    _arrow_schema_with_128_bit_integers(checkpoint)
    with pytest.raises(LogCorruptError, match=r"10\.checkpoint\.parquet: cannot read checkpoint parquet"):
        DeltaTable(str(t)).snapshot().files()


def _corrupt_pages(path: Path) -> None:
    """Overwrite the file's column chunks (all between the magic and the footer): the footer still
    reads, the data does not decode."""
    data = bytearray(path.read_bytes())
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    data[4:footer] = b"\xab" * (footer - 4)
    path.write_bytes(bytes(data))


def test_a_page_that_does_not_decode_is_not_called_a_type_mismatch(tmp_path: Path) -> None:
    """Spark's INT96 timestamps are nanoseconds in the footer (read as microseconds): a corrupt
    page in one file was reported as 'data file <the other file> stores column 'timestamp' as
    timestamp[ns], but the table schema says timestamp[us, tz=UTC]', blaming a healthy file for a
    type that reads fine."""
    from conftest import corpus_table

    from delta_datafusion.errors import describe

    t = copy_table(corpus_table("data-reader-date-types-utc"), tmp_path / "t")
    broken = next(t.glob("part-00001-*.parquet"))
    _corrupt_pages(broken)
    with pytest.raises(DeltaError) as info:
        DeltaTable(str(t)).snapshot().scan().to_table()
    assert re.search(rf"version 0: cannot read data file \S*{re.escape(broken.name)}: ", str(info.value))
    with pytest.raises(Exception) as info:
        _sql(t, "SELECT * FROM t")
    assert re.search(rf"cannot read data file \S*{re.escape(broken.name)}: ", describe(info.value))


def test_a_small_file_that_does_not_decode_is_named_far_behind_the_scan(tmp_path: Path) -> None:
    """pyarrow reads small files further ahead than the 6 files decoded again after an error naming
    none (the 9th of 12 files of 2 KB was seen failing first): the read said 'cannot read one of 12
    data files (the first is <a healthy one>)'. Where the scan stood when it failed depends on
    pyarrow's threads, so the error is given to the naming step as the scan gives it, with the
    damaged file last of the files not handed on."""
    import pyarrow as pa
    from deltalake import write_deltalake

    t = tmp_path / "t"
    for v in range(12):
        write_deltalake(
            str(t), pa.table({"id": pa.array(range(v * 10, v * 10 + 10), pa.int64())}), mode="append"
        )
    scan = DeltaTable(str(t)).snapshot().scan()
    units = sorted(scan.scan_units(), key=lambda u: u.location)
    _corrupt_pages(Path(units[-1].location.removeprefix("file://")))
    err = scan.reader().errors.file_error(
        units, pa.ArrowInvalid("Corrupt snappy compressed data."), {u.location: ["id"] for u in units}
    )
    assert f"version 11: cannot read data file {units[-1].location}: Corrupt snappy" in str(err), str(err)


@pytest.mark.parametrize("cut", [60, -20, "before"])
def test_history_refuses_a_commit_info_line_that_is_not_json(trips: Path, cut) -> None:
    """A commit cut inside its commitInfo line (a write stopped half way), or before it where it
    is the last line, was listed by history() as a commit with no operation, while every other
    read refuses the file (deltalake's history too): an odd commitInfo is informational, text
    that does not parse is a damaged file."""
    path = commit_path(trips, 4)
    line, *rest = path.read_bytes().splitlines()
    assert b'"commitInfo"' in line
    if cut == "before":  # commitInfo written last (as some writers do), the commit cut before it
        path.write_bytes(b"\n".join([*rest, line])[: len(rest[0]) // 2])
    else:
        path.write_bytes(line[:cut])
    with pytest.raises(
        LogCorruptError,
        match=r"00000000000000000004\.json: (cannot parse the commitInfo line|malformed JSON action on line 1)",
    ):
        DeltaTable(str(trips)).history()
    assert DeltaTable(str(trips)).history(limit=1).column("version").to_pylist() == [5]


def test_a_multi_part_checkpoint_names_the_part_whose_metadata_is_bad(tmp_path: Path) -> None:
    """Protocol and metaData may sit in any part of a multi-part checkpoint: a schemaString broken
    in the second part was reported in the first part (a healthy file)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from conftest import corpus_table

    from delta_datafusion.errors import SchemaError

    t = copy_table(corpus_table("v1-multi-part-struct-stats-only"), tmp_path / "t")
    first, second = (log_dir(t) / f"{5:020d}.checkpoint.{k:010d}.{3:010d}.parquet" for k in (1, 2))
    held, other = first.read_bytes(), second.read_bytes()  # the parts' actions swapped: still valid
    first.write_bytes(other)
    second.write_bytes(held)
    assert DeltaTable(str(t)).snapshot().version == 5
    table = pq.read_table(second)
    md = table.column("metaData").combine_chunks()
    kids = [
        pc.utf8_slice_codeunits(md.field(k), 0, 20) if f.name == "schemaString" else md.field(k)
        for k, f in enumerate(md.type)
    ]
    broken = pa.StructArray.from_arrays(kids, fields=list(md.type), mask=md.is_null())
    pq.write_table(table.set_column(table.column_names.index("metaData"), "metaData", broken), second)
    with pytest.raises(
        SchemaError, match=r"\.checkpoint\.0000000002\.0000000003\.parquet: schemaString is not"
    ):
        DeltaTable(str(t)).snapshot()


def test_a_page_that_ends_early_is_named(trips: Path) -> None:
    """One flipped byte in a change data file's page header: pyarrow's scan fails ('Column 1
    named rider expected length 10 but got length 0'), but decoding the file again batch by batch
    gives no rows and no error, so the file was not found: 'cannot read one of 5 data files (the
    first is <a healthy one>)'. Fewer rows decoded than the footer holds name the file now."""
    import pyarrow.parquet as pq

    cdc = next((trips / "_change_data" / "city=Lisbon").glob("*.parquet"))
    data = bytearray(cdc.read_bytes())
    data[157] ^= 0x0A
    cdc.write_bytes(bytes(data))
    with pytest.raises(Exception, match="expected length 10 but got length 0"):
        pq.read_table(cdc)
    with pytest.raises(DeltaError) as info:
        DeltaTable(str(trips)).changes(0).to_table()
    assert re.search(rf"version 5: cannot read data file \S*{re.escape(cdc.name)}: ", str(info.value)), str(
        info.value
    )


@pytest.mark.parametrize("lacking", ["protocol", "metaData", "both"])
def test_a_checkpoint_without_protocol_or_metadata_is_named(tmp_path: Path, lacking: str) -> None:
    """Every checkpoint holds the protocol and metaData; one without them, and no commit after it
    with them, was reported as "no protocol action found in the log" naming only the table (the
    commits before the checkpoint are not read), leaving the damaged file to be found."""
    import deltalake
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from delta_datafusion.errors import MissingMetadataError, MissingProtocolError

    t = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(str(t), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
        if i == 1:
            deltalake.DeltaTable(str(t)).create_checkpoint()
    ck = log_dir(t) / f"{1:020d}.checkpoint.parquet"
    rows = pq.read_table(ck)
    drop = [c for c in ("protocol", "metaData") if lacking in (c, "both")]
    keep = (
        pc.and_(*[rows.column(c).is_null() for c in drop])
        if len(drop) == 2
        else rows.column(drop[0]).is_null()
    )
    pq.write_table(rows.filter(keep), ck)
    error = MissingMetadataError if lacking == "metaData" else MissingProtocolError
    action = "metaData" if lacking == "metaData" else "protocol"
    with pytest.raises(error, match=rf"{ck}\) holds no {action} action"):
        DeltaTable(str(t)).snapshot()
