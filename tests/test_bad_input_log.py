"""Bad input: malformed commits, truncated checkpoints, missing sidecars, unknown fields and
features, folders that are not Delta tables. Every failure is one of the package's own exception
types (a DeltaError subclass) and its message names the file (or table) and the problem. Reads never
write to the table's folder.
"""

from __future__ import annotations

import datetime as dt
import decimal
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import (
    commit_path,
    corpus_table,
    files_summary,
    folder_state,
    live_row_count,
    log_dir,
    metadata_action,
    write_commit,
)

from delta_datafusion.errors import (
    DeletionVectorError,
    DeltaError,
    InvalidProtocolError,
    LogCorruptError,
    MissingLogFileError,
    SchemaError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from delta_datafusion.parallel import ParallelScanMetadata
from delta_datafusion.table import DeltaTable

# ------------------------------------------------------------------------------------------------
# malformed commits

BAD_LINES = {
    "truncated-object": '{"add": {"path": "x.parquet", "size": 1',
    "not-json": "this is not json",
    "json-array": "[1, 2, 3]",
    "action-not-object": '{"add": 5}',
    "wrong-field-type": '{"add": {"path": 17, "size": "big", "partitionValues": {}, "modificationTime": 1, "dataChange": true}}',
    "trailing-garbage": '{"commitInfo": {"timestamp": 1}} }}',
}


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_malformed_json_line_in_commit(copy_corpus_table, kind: str):
    t = copy_corpus_table("dv-with-columnmapping")  # checkpoint 10, commits up to 15
    bad = commit_path(t, 13)
    with open(bad, "a") as fh:
        fh.write(BAD_LINES[kind] + "\n")
    dt_ = DeltaTable(str(t))
    with pytest.raises(LogCorruptError) as info:
        dt_.snapshot().files()
    msg = str(info.value)
    assert str(bad) in msg, msg
    assert "JSON" in msg or "json" in msg, msg
    # Versions before the bad commit are unaffected.
    assert live_row_count(dt_.snapshot(version=12).files()) == live_row_count(
        DeltaTable(str(corpus_table("dv-with-columnmapping"))).snapshot(version=12).files()
    )


def test_malformed_metadata_line_fails_when_snapshot_loads(copy_corpus_table):
    t = copy_corpus_table("app-txn-no-checkpoint")
    c0 = commit_path(t, 0)
    c0.write_text(c0.read_text().replace('{"metaData":{', '{"metaData":{"oops', 1))
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot()
    assert str(c0) in str(info.value) and "malformed JSON" in str(info.value)


def test_unparseable_schema_string(tmp_path: Path):
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), pa.table({"x": [1, 2]}))
    c0 = commit_path(t, 0)
    actions = [json.loads(line) for line in c0.read_text().splitlines()]
    for a in actions:
        if "metaData" in a:
            a["metaData"]["schemaString"] = json.dumps(
                {"type": "struct", "fields": [{"name": "x", "type": "wat"}]}
            )
    write_commit(t, 0, actions)
    with pytest.raises(SchemaError) as info:
        DeltaTable(str(t)).snapshot()
    assert str(c0) in str(info.value) and "wat" in str(info.value)


def test_unparseable_partition_value(copy_corpus_table):
    t = copy_corpus_table("delta-0.8.0-numeric-partition")  # partitioned by x long, y double
    write_commit(
        t,
        1,
        [
            {"commitInfo": {"timestamp": 1}},
            {
                "add": {
                    "path": "x=abc/f.parquet",
                    "partitionValues": {"x": "abc", "y": "1.0"},
                    "size": 1,
                    "modificationTime": 1,
                    "dataChange": True,
                }
            },
        ],
    )
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot().files()
    msg = str(info.value)
    assert "'x'" in msg and "'abc'" in msg and str(t) in msg, msg
    assert msg.endswith(f"(data file x=abc/f.parquet of version 1 in {commit_path(t, 1)})"), msg  # which add
    # the change feed too, with the change data feed enabled at that commit
    v0 = [json.loads(line) for line in commit_path(t, 0).read_text().splitlines()]
    metadata = next(a["metaData"] for a in v0 if "metaData" in a)
    metadata["configuration"] = {**metadata.get("configuration", {}), "delta.enableChangeDataFeed": "true"}
    commit = [json.loads(line) for line in commit_path(t, 1).read_text().splitlines()]
    upgrade = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}  # binds writers to the property
    write_commit(t, 1, [upgrade, {"metaData": metadata}, *commit])
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).changes(1, 1).to_table()
    assert str(info.value).endswith(f"(data file x=abc/f.parquet of version 1 in {commit_path(t, 1)})"), (
        info.value
    )


# ------------------------------------------------------------------------------------------------
# corrupt checkpoints and sidecars


def _truncate(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "no-footer":
        path.write_bytes(data[:-8])
    elif how == "zeroed-body":
        path.write_bytes(data[:4] + b"\0" * (len(data) - 12) + data[-8:])
    else:
        raise AssertionError(how)


TRUNCATIONS = ["half", "empty", "no-footer", "zeroed-body"]


CHECKPOINTED = ["simple_table_with_checkpoint", "dv-with-columnmapping", "v1-multi-part-struct-stats-only"]


@pytest.mark.parametrize("how", [t for t in TRUNCATIONS if t != "empty"])
@pytest.mark.parametrize("name", CHECKPOINTED)
def test_truncated_checkpoint_parquet(copy_corpus_table, name: str, how: str):
    t = copy_corpus_table(name)
    ck = sorted(log_dir(t).glob("*.checkpoint*.parquet"))[-1]
    _truncate(ck, how)
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot().files()
    msg = str(info.value)
    assert str(ck) in msg and "checkpoint parquet" in msg, msg
    assert not isinstance(info.value, MissingLogFileError)


@pytest.mark.parametrize("name", CHECKPOINTED)
def test_an_emptied_checkpoint_parquet_is_no_checkpoint(copy_corpus_table, name: str):
    """A checkpoint file of 0 bytes is ignored, as Spark and delta-kernel-rs ignore it (it was
    refused as a truncated one): the older checkpoint and the commits give the version, or the
    error says the version cannot be rebuilt and that the file was ignored."""
    t = copy_corpus_table(name)
    want = sorted(DeltaTable(str(t)).snapshot().files().column("path").to_pylist())
    ck = sorted(log_dir(t).glob("*.checkpoint*.parquet"))[-1]
    _truncate(ck, "empty")
    try:
        got = sorted(DeltaTable(str(t)).snapshot().files().column("path").to_pylist())
    except VersionNotFoundError as e:
        assert "empty checkpoint files (0 bytes) ignored at versions" in str(e) and ck.name in str(e), e
    else:
        assert got == want


@pytest.mark.parametrize("name", ["v2-checkpoint-parquet", "v2-checkpoint-json"])
def test_truncated_v2_manifest(copy_corpus_table, name: str):
    t = copy_corpus_table(name)
    manifest = next(log_dir(t).glob("00000000000000000002.checkpoint.*-*"))
    for cut in (100, 200, 400, len(manifest.read_bytes()) - 3):
        original = manifest.read_bytes()
        manifest.write_bytes(original[:cut])
        with pytest.raises(LogCorruptError) as info:
            DeltaTable(str(t)).snapshot().files()
        assert str(manifest) in str(info.value), (cut, str(info.value))
        manifest.write_bytes(original)
    assert DeltaTable(str(t)).snapshot().files().num_rows == 4


@pytest.mark.parametrize(
    "name",
    ["v2-checkpoint-json", "v2-checkpoint-parquet", "v2-classic-checkpoint-parquet", "checkpoint-v2-table"],
)
def test_missing_sidecar(copy_corpus_table, name: str):
    t = copy_corpus_table(name)
    leaves = DeltaTable(str(t)).snapshot().checkpoint_manifest.leaves
    victim = Path(leaves[-1].path)
    assert victim.parent.name == "_sidecars"
    victim.unlink()
    with pytest.raises(MissingLogFileError) as info:
        DeltaTable(str(t)).snapshot().files()
    msg = str(info.value)
    assert str(victim) in msg and "missing" in msg, msg


@pytest.mark.parametrize("how", TRUNCATIONS)
def test_truncated_sidecar(copy_corpus_table, how: str):
    """A damaged sidecar is reported as unreadable, not as missing (pyarrow's "magic bytes not
    found" must not read as a missing file)."""
    t = copy_corpus_table("v2-checkpoint-json")
    sidecar = Path(DeltaTable(str(t)).snapshot().checkpoint_manifest.leaves[0].path)
    _truncate(sidecar, how)
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot().files()
    assert str(sidecar) in str(info.value) and "checkpoint parquet" in str(info.value), str(info.value)
    assert not isinstance(info.value, MissingLogFileError)


def test_sidecar_action_without_path(copy_corpus_table):
    t = copy_corpus_table("v2-checkpoint-json")
    manifest = next(log_dir(t).glob("00000000000000000002.checkpoint.*.json"))
    with open(manifest, "a") as fh:
        fh.write(json.dumps({"sidecar": {"sizeInBytes": 5, "modificationTime": 1}}) + "\n")
    with pytest.raises(LogCorruptError) as info:
        DeltaTable(str(t)).snapshot().files()
    assert "sidecar" in str(info.value) and "path" in str(info.value)


# ------------------------------------------------------------------------------------------------
# unknown fields and actions are ignored


def _rewrite_commit(path: Path, edit) -> None:
    actions = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    path.write_text("".join(json.dumps(a) + "\n" for a in edit(actions)))


def test_unknown_action_fields_are_ignored(copy_corpus_table):
    name = "app-txn-no-checkpoint"
    want = DeltaTable(str(corpus_table(name))).snapshot()
    t = copy_corpus_table(name)

    def edit(actions):
        for a in actions:
            for key in ("add", "remove", "commitInfo", "metaData", "protocol", "txn"):
                if key in a:
                    a[key]["futureField"] = {"nested": [1, 2, {"deep": None}]}
                    a[key]["futureScalar"] = "x"
        return [{"futureAction": {"anything": True}}, *actions, {"anotherUnknownAction": [1, 2]}]

    _rewrite_commit(commit_path(t, 0), edit)
    _rewrite_commit(commit_path(t, 1), edit)
    snap = DeltaTable(str(t)).snapshot()
    assert files_summary(snap.files()) == files_summary(want.files())
    assert snap.transactions == want.transactions == {"my-app": 3, "my-app2": 2}
    assert snap.schema == want.schema
    assert live_row_count(snap.files()) == 22


def test_commit_that_is_not_json_at_all_is_corrupt(tmp_path: Path):
    """Protocol and metaData are found by a byte search: a commit of garbage was reported as a
    table without a protocol, naming no file."""
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), pa.table({"x": [1, 2]}))
    commit_path(t, 0).write_text("{not json\n")
    with pytest.raises(LogCorruptError, match=r"00000000000000000000\.json: malformed JSON action on line 1"):
        DeltaTable(str(t)).snapshot()


def test_no_version_buildable_says_so(tmp_path: Path):
    """Commit 0 and every checkpoint gone: the error named versions ('available versions are
    2..4') that cannot be built either."""
    from delta_datafusion.errors import VersionNotFoundError

    t = tmp_path / "t"
    for i in range(5):
        deltalake.write_deltalake(str(t), pa.table({"x": [i]}), mode="append")
    commit_path(t, 0).unlink()
    commit_path(t, 1).unlink()
    for v in (3, None):
        with pytest.raises(
            VersionNotFoundError, match=r"no version can be: the log keeps commits 2\.\.4 only"
        ):
            DeltaTable(str(t)).snapshot(version=v)


def test_add_path_starting_with_file_colon_is_relative(tmp_path: Path):
    """deltalake logs a partition column named 'file:k' as the path 'file:k=a/part-...' unescaped;
    deltalake and DuckDB read it relative to the table (it was read relative to the process's
    current folder, then refused as a URI without an absolute path)."""
    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), pa.table({"file:k": ["a"], "v": [1]}), partition_by=["file:k"])
    assert any(
        json.loads(line).get("add", {}).get("path", "").startswith("file:k=a/")
        for line in commit_path(t, 0).read_text().splitlines()
    )
    assert DeltaTable(str(t)).snapshot().scan().to_table().to_pylist() == [{"file:k": "a", "v": 1}]


def test_in_commit_timestamp_enablement_that_is_not_a_number(copy_corpus_table):
    t = copy_corpus_table("cdc_ict_table")

    def edit(actions):
        for a in actions:
            if "metaData" in a:
                a["metaData"]["configuration"].update(
                    {
                        "delta.inCommitTimestampEnablementVersion": "abc",
                        "delta.inCommitTimestampEnablementTimestamp": "1",
                    }
                )
        return actions

    _rewrite_commit(commit_path(t, 0), edit)
    assert DeltaTable(str(t)).snapshot().scan().to_table().num_rows > 0  # reads need no timestamps
    for call in (
        lambda: DeltaTable(str(t)).snapshot(timestamp="2100-01-01"),
        lambda: DeltaTable(str(t)).changes(0),
    ):
        with pytest.raises(
            LogCorruptError, match="inCommitTimestampEnablementVersion='abc'.* must be integers"
        ):
            call()


def test_unknown_checkpoint_columns_are_ignored(tmp_path: Path):
    t = tmp_path / "t"
    for k in range(3):
        deltalake.write_deltalake(str(t), pa.table({"x": [k, k + 1]}), mode="append")
    deltalake.DeltaTable(str(t)).create_checkpoint()
    want = files_summary(DeltaTable(str(t)).snapshot().files())
    ck = log_dir(t) / f"{2:020d}.checkpoint.parquet"
    table = pq.read_table(ck)
    add = table.column("add").combine_chunks()
    extra = pa.array(
        [{"a": i} if v else None for i, v in enumerate(add.is_valid().to_pylist())],
        pa.struct([("a", pa.int64())]),
    )
    fields = list(add.type) + [pa.field("futureField", extra.type)]
    children = [add.field(i) for i in range(add.type.num_fields)] + [extra]
    new_add = pa.StructArray.from_arrays(children, fields=fields, mask=pc.invert(add.is_valid()))
    table = table.set_column(table.schema.get_field_index("add"), "add", new_add)
    table = table.append_column(
        "futureAction", pa.array([None] * table.num_rows, pa.struct([("z", pa.string())]))
    )
    pq.write_table(table, ck)
    snap = DeltaTable(str(t)).snapshot()
    assert snap.segment.checkpoint is not None
    assert files_summary(snap.files()) == want


# ------------------------------------------------------------------------------------------------
# protocol: unknown reader features are refused by name, writer-only features are not


def _set_protocol(t: Path, protocol: dict, version: int = 0) -> Path:
    path = commit_path(t, version)
    _rewrite_commit(path, lambda acts: [({"protocol": protocol} if "protocol" in a else a) for a in acts])
    return path


@pytest.mark.parametrize("feature", ["fancyNewThing", "catalogManaged"])
def test_unknown_or_refused_reader_feature(copy_corpus_table, feature: str):
    t = copy_corpus_table("app-txn-no-checkpoint")
    c0 = _set_protocol(
        t,
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": [feature],
            "writerFeatures": [feature],
        },
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        DeltaTable(str(t)).snapshot()
    msg = str(info.value)
    assert repr(feature) in msg and str(c0) in msg, msg


def test_protocol_upgrade_to_unknown_feature_only_blocks_later_versions(copy_corpus_table):
    t = copy_corpus_table("app-txn-no-checkpoint")
    write_commit(
        t,
        2,
        [
            {"commitInfo": {"timestamp": 1}},
            {
                "protocol": {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": ["laterFeature"],
                    "writerFeatures": ["laterFeature"],
                }
            },
        ],
    )
    with pytest.raises(UnsupportedFeatureError) as info:
        DeltaTable(str(t)).snapshot()
    assert "'laterFeature'" in str(info.value) and str(commit_path(t, 2)) in str(info.value)
    assert live_row_count(DeltaTable(str(t)).snapshot(version=1).files()) == 22


def test_unknown_writer_only_features_are_readable(copy_corpus_table):
    t = copy_corpus_table("app-txn-no-checkpoint")
    _set_protocol(
        t,
        {
            "minReaderVersion": 1,
            "minWriterVersion": 7,
            "writerFeatures": ["someWriterOnlyFeature", "appendOnly"],
        },
    )
    snap = DeltaTable(str(t)).snapshot()
    assert "someWriterOnlyFeature" in snap.protocol.writer_features
    assert live_row_count(snap.files()) == 22
    _set_protocol(
        t,
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "x"],
        },
    )
    assert live_row_count(DeltaTable(str(t)).snapshot().files()) == 22


@pytest.mark.parametrize(
    "protocol",
    [
        {"minReaderVersion": 4, "minWriterVersion": 7},
        {"minReaderVersion": 2, "minWriterVersion": 5, "readerFeatures": ["columnMapping"]},
        {"minReaderVersion": "three", "minWriterVersion": 7},
        {"minWriterVersion": 2},
        {"minReaderVersion": "1", "minWriterVersion": 2},
        {"minReaderVersion": 3, "minWriterVersion": 7, "writerFeatures": []},
        # TypeError before (unhashable, not iterable)
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [["deletionVectors"]]},
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [], "writerFeatures": True},
    ],
    ids=[
        "reader-4",
        "features-with-reader-2",
        "non-integer",
        "no-reader-version",
        "string-1",
        "v3-without-features",
        "feature-not-a-name",
        "writer-features-not-a-list",
    ],
)
def test_invalid_protocol(copy_corpus_table, protocol: dict):
    t = copy_corpus_table("app-txn-no-checkpoint")
    c0 = _set_protocol(t, protocol)
    with pytest.raises(InvalidProtocolError) as info:
        DeltaTable(str(t)).snapshot()
    assert str(c0) in str(info.value)


# ------------------------------------------------------------------------------------------------
# not a Delta table


def test_folder_that_is_not_a_delta_table(tmp_path: Path):
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    with pytest.raises(TableNotFoundError) as info:
        DeltaTable(str(tmp_path)).snapshot()
    assert str(tmp_path) in str(info.value) and "_delta_log" in str(info.value)


def test_a_tables_log_folder_given_for_the_table(tmp_path: Path):
    """`delta-datafusion info t/_delta_log`: the message pointed at t/_delta_log/_delta_log only;
    it now says to give the table's folder."""
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    write_commit(tmp_path / "t", 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}])
    with pytest.raises(
        TableNotFoundError, match=r"_delta_log is a table's log folder: give the table's folder"
    ):
        DeltaTable(str(tmp_path / "t" / "_delta_log")).snapshot()


def test_nonexistent_folder(tmp_path: Path):
    missing = tmp_path / "nope"
    with pytest.raises(TableNotFoundError) as info:
        DeltaTable(str(missing)).snapshot()
    assert str(missing) in str(info.value)
    assert not missing.exists()  # a read does not create the folder


def test_empty_delta_log(tmp_path: Path):
    (tmp_path / "_delta_log").mkdir()
    with pytest.raises(TableNotFoundError) as info:
        DeltaTable(str(tmp_path)).snapshot()
    assert str(tmp_path / "_delta_log") in str(info.value) and "empty" in str(info.value)


def test_delta_log_without_commits_or_checkpoints(tmp_path: Path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / ".00000000000000000000.json.crc").write_text("x")
    (log / "_last_checkpoint").write_text(json.dumps({"version": 0, "size": 1}))
    (log / "00000000000000000000.crc").write_text("{}")
    with pytest.raises(TableNotFoundError) as info:
        DeltaTable(str(tmp_path)).snapshot()
    assert str(log) in str(info.value)


def test_delta_log_is_a_file(tmp_path: Path):
    (tmp_path / "_delta_log").write_text("not a folder")
    with pytest.raises(TableNotFoundError) as info:
        DeltaTable(str(tmp_path)).snapshot()
    assert str(tmp_path) in str(info.value)


def test_all_errors_are_delta_errors():
    for cls in (
        LogCorruptError,
        MissingLogFileError,
        InvalidProtocolError,
        TableNotFoundError,
        UnsupportedFeatureError,
        SchemaError,
    ):
        assert issubclass(cls, DeltaError)


# ------------------------------------------------------------------------------------------------
# reads never write


def _read_everything(path: Path) -> None:
    dt_ = DeltaTable(str(path))
    snap = dt_.snapshot()
    files = snap.files()
    snap.transactions  # noqa: B018 - loads the txn replay
    snap.domain_metadata  # noqa: B018
    dt_.history()
    for v in sorted({0, snap.version // 2, snap.version}):
        try:
            dt_.snapshot(version=v).files()
        except DeltaError:
            pass  # e.g. a version before the oldest checkpoint after log cleanup
    dt_.snapshot(timestamp=dt_.history().column("timestamp")[-1].as_py())
    scan = snap.scan()
    scan.files()
    list(scan.scan_units())  # the units made, each descriptor checked
    if files.num_rows and importlib.util.find_spec("delta_datafusion.read") is not None:
        scan.to_table()


READ_ONLY_TABLES = [
    "dv-with-columnmapping",
    "v2-checkpoints-json-with-sidecars",
    "v2-checkpoint-parquet",
    "v1-multi-part-struct-stats-only",
    "corrupted-last-checkpoint-kernel",
    "cdc_ict_table",
    "data-reader-escaped-chars",
    "v2-checkpoints-json-without-sidecars",
]


@pytest.mark.parametrize("name", READ_ONLY_TABLES)
def test_reads_never_write_to_the_table_folder(name: str):
    path = corpus_table(name)
    before = folder_state(path)
    _read_everything(path)
    assert folder_state(path) == before


def test_reads_never_write_even_when_reading_fails(copy_corpus_table, tmp_path: Path):
    t = copy_corpus_table("v2-checkpoint-json")
    os.unlink(DeltaTable(str(t)).snapshot().checkpoint_manifest.leaves[0].path)
    (log_dir(t) / "_last_checkpoint").unlink()
    before = folder_state(t)
    with pytest.raises(MissingLogFileError):
        DeltaTable(str(t)).snapshot().files()
    assert folder_state(t) == before
    empty = tmp_path / "empty"
    (empty / "_delta_log").mkdir(parents=True)
    before = folder_state(empty)
    with pytest.raises(TableNotFoundError):
        DeltaTable(str(empty)).snapshot()
    assert folder_state(empty) == before


def test_reads_never_write_deltalake_table(tmp_path: Path):
    t = tmp_path / "t"
    for k in range(12):
        deltalake.write_deltalake(
            str(t), pa.table({"x": [k], "p": [f"v{k % 3}"]}), mode="append", partition_by=["p"]
        )
        if k == 9:
            deltalake.DeltaTable(str(t)).create_checkpoint()
    before = folder_state(t)
    _read_everything(t)
    assert folder_state(t) == before


# ------------------------------------------------------------------------------------------------
# damage found by the bad-input sweep: each used to escape as a raw Python/pyarrow error or to
# lose rows silently


def _small_table(path: Path, commits: int = 2, checkpoint: bool = False) -> Path:
    for i in range(commits):
        rows = pa.table({"id": pa.array([i * 10, i * 10 + 1], pa.int64()), "val": [f"v{i}0", f"v{i}1"]})
        deltalake.write_deltalake(str(path), rows, mode="append")
    if checkpoint:
        deltalake.DeltaTable(str(path)).create_checkpoint()
    return path


@pytest.mark.parametrize("action", ["add", "remove"])
def test_file_action_without_path(tmp_path: Path, action: str):
    t = _small_table(tmp_path / "t", commits=2)
    if action == "remove":
        first = next(
            a["add"] for a in map(json.loads, commit_path(t, 0).read_text().splitlines()) if "add" in a
        )
        write_commit(t, 2, [{"remove": {"deletionTimestamp": 1, "dataChange": True, "size": first["size"]}}])
    else:
        _rewrite_commit(
            commit_path(t, 1),
            lambda acts: [({"add": {**a["add"], "path": None}} if "add" in a else a) for a in acts],
        )
    with pytest.raises(
        LogCorruptError, match=rf"{action} actions of .*file action\(s\) at version \d without a path"
    ):
        DeltaTable(str(t)).snapshot().files()


def _replace_checkpoint_add_field(ckpt: Path, name: str, make) -> pa.Table:
    """Rewrite checkpoint ``ckpt`` with ``add.<name>`` replaced by ``make(add)``; returns the original."""
    original = pq.read_table(ckpt)
    add = original.column("add").combine_chunks()
    names = [add.type.field(i).name for i in range(add.type.num_fields)]
    fields = [add.field(i) for i in range(add.type.num_fields)]
    fields[names.index(name)] = make(add)
    broken = original.set_column(
        original.schema.get_field_index("add"),
        "add",
        pa.StructArray.from_arrays(fields, names=names, mask=add.is_null()),
    )
    pq.write_table(broken, ckpt)
    return original


def _add_schema_field(t: Path, field: dict) -> None:
    """Append ``field`` to the schema of the metaData action in commit 0."""

    def edit(actions):
        for a in actions:
            if "metaData" in a:
                schema = json.loads(a["metaData"]["schemaString"])
                schema["fields"].append(field)
                a["metaData"]["schemaString"] = json.dumps(schema)
        return actions

    _rewrite_commit(commit_path(t, 0), edit)


def test_checkpoint_add_without_path_or_without_add_column(tmp_path: Path):
    t = _small_table(tmp_path / "t", commits=2, checkpoint=True)
    ckpt = log_dir(t) / f"{1:020d}.checkpoint.parquet"
    # add.path null in every add row
    original = _replace_checkpoint_add_field(ckpt, "path", lambda add: pa.nulls(len(add), pa.string()))
    with pytest.raises(LogCorruptError, match="checkpoint 1 of .* without a path"):
        DeltaTable(str(t)).snapshot().files()
    # a part of a multi-part checkpoint may lack the add column (Spark writes such parts, see the
    # corpus table parquet_row_group_skipping); a classic checkpoint always has it: one without
    # is not a checkpoint (it was read as "no files", losing every row)
    pq.write_table(original.drop_columns(["add"]), ckpt)
    with pytest.raises(LogCorruptError, match=r"checkpoint has no add column .*not a checkpoint"):
        DeltaTable(str(t)).snapshot().files()


@pytest.mark.parametrize(
    "field, make, message",
    [
        ("size", lambda add: pa.array(["big"] * len(add)), "a file action field has the wrong type"),
        (
            "path",
            lambda add: pa.array(range(len(add)), pa.int64()),
            "file action paths are int64, not strings",
        ),
    ],
)
def test_checkpoint_add_fields_of_the_wrong_type(tmp_path: Path, field, make, message):
    """A string size failed in pyarrow; integer paths were cast to file names "0", "1"."""
    t = _small_table(tmp_path / "t", commits=2, checkpoint=True)
    _replace_checkpoint_add_field(log_dir(t) / f"{1:020d}.checkpoint.parquet", field, make)
    with pytest.raises(LogCorruptError, match=f"checkpoint 1 of .*: {message}"):
        DeltaTable(str(t)).snapshot().files()


@pytest.mark.parametrize("name", ["v2-checkpoint-parquet", "v1-multi-part-struct-stats-only"])
def test_checkpoint_leaf_typing_an_add_field_wrongly_is_named(copy_corpus_table, name: str):
    """A sidecar or a checkpoint part typing add.size as a string was reported as "checkpoint N"
    alone: which of its files holds the bad type was not said (both reads: the snapshot's and
    the parallel scan's second phase)."""
    t = copy_corpus_table(name)
    leaves = DeltaTable(str(t)).snapshot().checkpoint_manifest.leaves
    assert len(leaves) > 1
    victim = Path(leaves[1].path)  # one with adds (the multi-part table's third part has none)
    _replace_checkpoint_add_field(victim, "size", lambda add: pa.array(["big"] * len(add)))
    with pytest.raises(LogCorruptError, match="a file action field has the wrong type") as info:
        DeltaTable(str(t)).snapshot().files()
    assert str(victim) in str(info.value), str(info.value)
    phase = DeltaTable(str(t)).snapshot().scan().parallel_scan_metadata()
    batches = list(phase)
    assert batches
    after = phase.finish()
    with pytest.raises(LogCorruptError, match="a file action field has the wrong type") as info:
        list(ParallelScanMetadata(after.state, after.files))
    assert str(victim) in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("storageType", "x", "unknown deletion vector storageType 'x'"),
        ("cardinality", -1, "cardinality must be a non-negative integer"),
        ("pathOrInlineDv", "", "pathOrInlineDv must be a non-empty string"),
    ],
)
def test_bad_deletion_vector_descriptor_names_its_commit(copy_corpus_table, field: str, value, message: str):
    """A descriptor field damaged in a commit: the error named the table's version and the data
    file, not the commit holding the descriptor (h29c's mutation hunt); a scan and the change
    feed (a deletion vector update of that commit) name it now."""
    t = copy_corpus_table("cdf-table-with-dv")  # commit 5 updates the one file's inline DV

    def edit(actions):
        for a in actions:
            if "add" in a:
                a["add"]["deletionVector"][field] = value
        return actions

    _rewrite_commit(commit_path(t, 5), edit)
    logged = f"(logged in {commit_path(t, 5)})"
    with pytest.raises(DeletionVectorError, match=message) as info:
        DeltaTable(str(t)).snapshot(5).scan().to_table()
    assert logged in str(info.value) and "version 5" in str(info.value), str(info.value)
    with pytest.raises(DeletionVectorError, match=message) as info:
        DeltaTable(str(t)).changes(5, 5).to_table()
    assert logged in str(info.value), str(info.value)


def test_bad_deletion_vector_descriptor_names_its_checkpoint(copy_corpus_table):
    t = copy_corpus_table("dv-with-columnmapping")  # checkpoint 10 holds adds with DVs
    checkpoint = log_dir(t) / f"{10:020d}.checkpoint.parquet"

    def negative_cardinality(add):
        dv = add.field(add.type.get_field_index("deletionVector"))
        kids = {f.name: dv.field(i) for i, f in enumerate(dv.type)}
        kids["cardinality"] = pc.if_else(dv.is_valid(), pa.scalar(-1, pa.int64()), kids["cardinality"])
        return pa.StructArray.from_arrays(list(kids.values()), fields=list(dv.type), mask=dv.is_null())

    _replace_checkpoint_add_field(checkpoint, "deletionVector", negative_cardinality)
    with pytest.raises(DeletionVectorError, match="cardinality must be a non-negative integer") as info:
        DeltaTable(str(t)).snapshot(10).scan().to_table()
    assert f"(logged in {checkpoint})" in str(info.value), str(info.value)


def test_nul_character_in_a_location(tmp_path: Path):
    t = _small_table(tmp_path / "t", commits=1)
    with pytest.raises(DeltaError, match="contains a NUL character"):
        DeltaTable(str(t) + "\x00x")


def test_duplicate_column_names_in_schema(tmp_path: Path):
    t = _small_table(tmp_path / "t", commits=1)
    _add_schema_field(t, {"name": "ID", "type": "long", "nullable": True, "metadata": {}})
    with pytest.raises(
        SchemaError, match="columns 'id' and 'ID' at the top level: column names must be unique"
    ):
        DeltaTable(str(t)).snapshot()


@pytest.mark.parametrize(
    "field, message",
    [
        (
            {"name": "when", "type": "interval", "nullable": True, "metadata": {}},
            "unknown Delta type 'interval'",
        ),
        ({"name": "ID", "type": "long", "nullable": True, "metadata": {}}, "column names must be unique"),
    ],
)
def test_a_bad_schema_is_refused_naming_each_file_that_carries_it(tmp_path: Path, field, message):
    """Parsed schemas are cached by their text, bad ones not: every table carrying the same bad
    schemaString is refused each time, naming its own commit file (an unknown type fails after
    the text parsed: at the Arrow conversion)."""
    for name in ("a", "b"):
        t = _small_table(tmp_path / name, commits=1)
        _add_schema_field(t, field)
        for _ in range(2):
            with pytest.raises(SchemaError, match=message) as info:
                DeltaTable(str(t)).snapshot()
            assert str(commit_path(t, 0)) in str(info.value)


@pytest.mark.parametrize("options", [["a"], "abc", 5])
def test_storage_options_of_the_wrong_type(tmp_path: Path, options):
    t = _small_table(tmp_path / "t", commits=1)
    with pytest.raises(DeltaError, match="storage_options for .* must be a dict"):
        DeltaTable(str(t), storage_options=options)


def test_unreadable_log_is_a_delta_error(tmp_path: Path, monkeypatch):
    """A commit or _delta_log the process may not read (root ignores file modes, so the denial
    is simulated where Storage opens and lists local files)."""
    import delta_datafusion.storage.store as storage_module  # where Storage looks up open

    t = _small_table(tmp_path / "t", commits=2)
    denied = str(commit_path(t, 1))
    real_open = open

    def fake_open(path, *args, **kwargs):
        if str(path) == denied:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(storage_module, "open", fake_open, raising=False)
    with pytest.raises(DeltaError, match=r"cannot read .*00000000000000000001\.json: permission denied"):
        DeltaTable(str(t)).snapshot()
    monkeypatch.undo()

    def fake_scandir(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(storage_module.os, "scandir", fake_scandir)
    with pytest.raises(DeltaError, match=r"cannot list .*_delta_log: permission denied"):
        DeltaTable(str(t)).snapshot()


def test_scan_column_arguments(tmp_path: Path):
    t = _small_table(tmp_path / "t", commits=1)
    snap = DeltaTable(str(t)).snapshot()
    with pytest.raises(DeltaError, match="not a string"):
        snap.scan(columns="id")
    with pytest.raises(DeltaError, match=r"columns \['id'\] are listed more than once"):
        snap.scan(columns=["id", "val", "id"])


def test_data_file_with_a_foreign_column_type_is_named(tmp_path: Path):
    """A data file storing a table column as another kind of type (here the long column as
    strings) fails the read with an error naming that file, the column and both types."""
    t = _small_table(tmp_path / "t", commits=3)
    victim = sorted(p for p in t.glob("*.parquet"))[1]
    rows = pq.read_table(victim)
    pq.write_table(rows.set_column(0, "id", pa.array(["1", "2x"])), victim)
    for predicate in (None, "id >= 0"):
        with pytest.raises(DeltaError) as info:
            DeltaTable(str(t)).snapshot().scan(predicate=predicate).to_table()
        msg = str(info.value)
        assert f"data file {victim} stores column 'id' as string, but the table schema says int64" in msg, msg


def _one_column_table(
    path: Path, delta_type: Any, stored: pa.Array, type_changes: list | None = None
) -> Path:
    """A table with column ``c`` of ``delta_type`` and one data file storing ``stored``."""
    (path / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"c": stored}), path / "a.parquet")
    meta = {"delta.typeChanges": type_changes} if type_changes else {}
    schema = {
        "type": "struct",
        "fields": [{"name": "c", "type": delta_type, "nullable": True, "metadata": meta}],
    }
    protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    if type_changes:
        protocol = {"minReaderVersion": 3, "minWriterVersion": 7}
        protocol |= {"readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"]}
    add = {"path": "a.parquet", "partitionValues": {}, "size": (path / "a.parquet").stat().st_size}
    add |= {"modificationTime": 0, "dataChange": True}
    write_commit(path, 0, [{"protocol": protocol}, metadata_action(schema), {"add": add}])
    return path


@pytest.mark.parametrize(
    "delta_type, stored",
    [
        ("long", pa.array(["123", "-7"])),  # numeric strings were converted to numbers
        ("float", pa.array([0.1, 1e300])),  # 1e300 became inf
        ("date", pa.array([86_400_000_000 + 5], pa.timestamp("us"))),  # the time of day was dropped
        ("string", pa.array([1, 2], pa.int32())),
        ("integer", pa.array([True, False])),
        ("double", pa.array([2**53 + 1], pa.int64())),  # long -> double is no Delta widening
        ("timestamp", pa.array([1], pa.date32())),  # date -> timestamp_ntz is; not to timestamp
    ],
)
def test_data_file_storing_a_type_delta_does_not_allow_is_refused(tmp_path: Path, delta_type: str, stored):
    """pyarrow casts a file's column to the table's type whenever it can; the values may then be
    ones the file never held. Such a file (only a writer outside Delta makes one) is refused,
    naming it, on every read path: plain, filtered (also when no row matches), LIMIT, SQL."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = _one_column_table(tmp_path / "t", delta_type, stored)
    msg = "data file .*a.parquet stores column 'c' as .*, but the table schema says "
    snap = DeltaTable(str(t)).snapshot()
    for predicate in (None, "c IS NULL"):
        with pytest.raises(DeltaError, match=msg):
            snap.scan(predicate=predicate).to_table()
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    for q in ("SELECT * FROM t", "SELECT * FROM t LIMIT 1", "SELECT count(c) FROM t WHERE c IS NULL"):
        with pytest.raises(Exception, match="stores column 'c' as"):
            ctx.sql(q).to_arrow_table()


@pytest.mark.parametrize(
    "delta_type, stored, expected",
    [
        ("long", pa.array([1, 2], pa.int32()), [1, 2]),  # a narrower integer
        ("string", pa.array([b"ab"], pa.binary()), ["ab"]),  # strings written without the UTF8 annotation
        ("string", pa.array(["ab"], pa.large_string()), ["ab"]),
        ("timestamp_ntz", pa.array([0], pa.timestamp("ms")), [dt.datetime(1970, 1, 1)]),
        (
            "decimal(10,2)",
            pa.array([decimal.Decimal("1.50")], pa.decimal128(5, 2)),
            [decimal.Decimal("1.50")],
        ),
        ("double", pa.array([1.5], pa.float32()), [1.5]),
        ("binary", pa.array([b"ab", None], pa.binary(2)), [b"ab", None]),  # fixed-length bytes
        ("binary", pa.array(["ab"]), [b"ab"]),
        ("string", pa.array(['{"a": 1}'], pa.json_()), ['{"a": 1}']),  # an Arrow extension type
        (
            {"type": "array", "elementType": "long", "containsNull": True},
            pa.array([[1, 2], None], pa.list_(pa.int64(), 2)),  # polars' Array: fixed-size lists
            [[1, 2], None],
        ),
        (
            {"type": "struct", "fields": [{"name": "x", "type": "binary", "nullable": True, "metadata": {}}]},
            pa.array([{"x": b"abc"}], pa.struct([("x", pa.binary(3))])),
            [{"x": b"abc"}],
        ),
    ],
)
def test_data_file_storing_another_encoding_of_the_type_reads(
    tmp_path: Path, delta_type: str, stored, expected
):
    t = _one_column_table(tmp_path / "t", delta_type, stored)
    assert DeltaTable(str(t)).snapshot().scan().to_table().column("c").to_pylist() == expected


@pytest.mark.parametrize(
    "delta_type, stored, fits",
    [
        ("integer", pa.array([1, 2**40], pa.int64()), [1, 2]),
        ("byte", pa.array([1, 200], pa.uint8()), [1, 2]),
        (
            "decimal(5,2)",
            pa.array([decimal.Decimal("1.00"), decimal.Decimal("12345678.90")], pa.decimal128(10, 2)),
            None,
        ),
        ("timestamp_ntz", pa.array([1, 10**18 + 1], pa.timestamp("ns")), None),
        # nested: the top-level column is named (pyarrow's message alone named nothing)
        (
            {
                "type": "struct",
                "fields": [{"name": "a", "type": "integer", "nullable": True, "metadata": {}}],
            },
            pa.array([{"a": 1}, {"a": 2**40}], pa.struct([("a", pa.int64())])),
            None,
        ),
        (
            {"type": "array", "elementType": "integer", "containsNull": True},
            pa.array([[1], [2**40]], pa.list_(pa.int64())),
            None,
        ),
    ],
)
def test_wider_stored_values_that_do_not_fit_name_the_column(tmp_path: Path, delta_type: Any, stored, fits):
    """Integers of any width, decimals of the same scale and any timestamp unit are read through a
    cast; a value that does not fit fails it, and the error names the file, the column and both
    types (it named neither column nor types)."""
    t = _one_column_table(tmp_path / "t", delta_type, stored)
    with pytest.raises(DeltaError, match=r"a\.parquet stores column 'c' as .*, but the table schema says .*"):
        DeltaTable(str(t)).snapshot().scan().to_table()
    if fits is not None:  # the values that fit read
        small = _one_column_table(tmp_path / "small", delta_type, stored.slice(0, 1).cast(stored.type))
        assert DeltaTable(str(small)).snapshot().scan().to_table().column("c").to_pylist() == fits[:1]


@pytest.mark.parametrize(
    "entry", [{"toType": "long"}, {"fromType": 5, "toType": "long"}, {"fromType": "int", "toType": "long"}]
)
def test_malformed_type_change_entry_is_a_schema_error(tmp_path: Path, entry):
    t = _one_column_table(tmp_path / "t", "long", pa.array([1], pa.int64()), type_changes=[entry])
    with pytest.raises(SchemaError, match="column 'c' has malformed delta.typeChanges metadata"):
        DeltaTable(str(t)).snapshot()


def test_partition_column_copy_in_a_data_file_is_not_read(tmp_path: Path):
    """A data file may hold a copy of a partition column (some writers add one); the value comes
    from the log, so the copy's type is no reason to refuse the file."""
    t = tmp_path / "t"
    (t / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["999", "999"]}), t / "a.parquet")
    fields = [
        {"name": n, "type": ty, "nullable": True, "metadata": {}}
        for n, ty in (("id", "long"), ("p", "integer"))
    ]
    md = metadata_action({"type": "struct", "fields": fields}, partition_columns=["p"])
    add = {"path": "a.parquet", "partitionValues": {"p": "1"}, "size": (t / "a.parquet").stat().st_size}
    add |= {"modificationTime": 0, "dataChange": True}
    write_commit(t, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, md, {"add": add}])
    for predicate in (None, "id > 0", "p = 1"):
        got = DeltaTable(str(t)).snapshot().scan(predicate=predicate).to_table().to_pylist()
        assert got == [{"id": 1, "p": 1}, {"id": 2, "p": 1}], predicate


@pytest.mark.parametrize(
    "change",
    [
        ("double", "float"),
        ("long", "integer"),
        ("string", "long"),
        ("timestamp_ntz", "date"),
        ("long", "double"),
    ],
)
def test_type_change_the_protocol_does_not_allow_is_refused(tmp_path: Path, change):
    """delta.typeChanges naming a change type widening does not allow: refused when the table is
    opened (readers must fail on unsupported type changes), never read through a cast."""
    old, new = change
    stored = (
        pa.array([1], pa.int64())
        if old == "long"
        else pa.array([1.5])
        if old == "double"
        else pa.array(["7"])
    )
    if old == "timestamp_ntz":
        stored = pa.array([1], pa.timestamp("us"))
    changes = [{"fromType": old, "toType": new}]
    t = _one_column_table(tmp_path / "t", new, stored, type_changes=changes)
    with pytest.raises(
        UnsupportedFeatureError, match=f"records the type change {old} -> {new} in delta.typeChanges"
    ):
        DeltaTable(str(t)).snapshot()


def test_file_path_that_is_not_utf8(tmp_path: Path):
    t = _small_table(tmp_path / "t", commits=2)
    lines = commit_path(t, 1).read_bytes().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith(b'{"add"'))
    lines[k] = lines[k].replace(b'"path":"', b'"path":"\xff', 1)
    commit_path(t, 1).write_bytes(b"\n".join(lines) + b"\n")
    # the commit is refused as a whole (pyarrow's JSON reader does not check UTF-8 itself)
    with pytest.raises(
        LogCorruptError, match=r"00000000000000000001\.json: not UTF-8 text \(byte \d+: b'\\xffpar"
    ):
        DeltaTable(str(t)).snapshot().files()


def test_checkpoint_partition_values_of_the_wrong_type(tmp_path: Path):
    """partitionValues stored as a list instead of a map used to read as NULL partitions."""
    t = tmp_path / "t"
    for i in range(2):
        rows = pa.table({"id": pa.array([i], pa.int64()), "part": [f"p{i}"]})
        deltalake.write_deltalake(str(t), rows, mode="append", partition_by=["part"])
    deltalake.DeltaTable(str(t)).create_checkpoint()
    ckpt = log_dir(t) / f"{1:020d}.checkpoint.parquet"
    _replace_checkpoint_add_field(
        ckpt,
        "partitionValues",
        lambda add: pa.array([["x"] if v.is_valid else None for v in add], pa.list_(pa.string())),
    )
    with pytest.raises(LogCorruptError, match="checkpoint 1 of .*partitionValues are list<.*>, not a map"):
        DeltaTable(str(t)).snapshot().files()


@pytest.mark.parametrize(
    "edit, error, message",
    [
        (
            lambda a: {"protocol": "x"} if "protocol" in a else a,
            LogCorruptError,
            "the protocol action .* is not a JSON object",
        ),
        (
            lambda a: {"metaData": [1]} if "metaData" in a else a,
            LogCorruptError,
            "the metaData action .* is not a JSON object",
        ),
        (
            lambda a: {"metaData": {**a["metaData"], "partitionColumns": "id"}} if "metaData" in a else a,
            SchemaError,
            "partitionColumns must be a list of column names, got 'id'",
        ),
    ],
    ids=["protocol-string", "metadata-list", "partition-columns-string"],
)
def test_protocol_and_metadata_that_are_not_objects(tmp_path: Path, edit, error, message):
    t = _small_table(tmp_path / "t", commits=1)
    _rewrite_commit(commit_path(t, 0), lambda actions: [edit(a) for a in actions])
    with pytest.raises(error, match=message):
        DeltaTable(str(t)).snapshot()


def test_variant_feature_listed_by_deltalake(tmp_path: Path):
    """deltalake 1.6 lists ``variantType`` on every table it creates with deletion vectors
    enabled: the table, its deletion vectors and its change feed read as deltalake reads them.
    A VARIANT column added later reads as NULL from files written before it (VARIANT columns
    themselves: tests/test_variant.py)."""
    t = tmp_path / "dv"
    rows = pa.table({"id": pa.array(range(6), pa.int64()), "s": [f"r{i}" for i in range(6)]})
    deltalake.write_deltalake(
        str(t),
        rows,
        configuration={"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"},
    )
    deltalake.DeltaTable(str(t)).delete("id < 2")
    protocol = deltalake.DeltaTable(str(t)).protocol()
    assert "variantType" in (protocol.reader_features or []), protocol  # the premise
    snap = DeltaTable(str(t)).snapshot()
    assert sorted(snap.scan().to_table().column("id").to_pylist()) == [2, 3, 4, 5]
    assert DeltaTable(str(t)).changes(1).to_table().num_rows == 2

    _add_schema_field(t, {"name": "v", "type": "variant", "nullable": True, "metadata": {}})
    read = DeltaTable(str(t)).snapshot().scan(columns=["id", "v"]).to_table().sort_by("id")
    assert read.to_pylist() == [{"id": i, "v": None} for i in (2, 3, 4, 5)]


def test_log_file_removed_after_listing(tmp_path: Path):
    """Log cleanup (or a concurrent writer) can remove a listed checkpoint before a snapshot
    reads it (on first use): the version is listed again, here read from its commits, not a bare
    FileNotFoundError (a file gone from a listing passed in is a MissingLogFileError naming it:
    test_log_cleanup_during_a_timestamp_lookup_is_a_package_error)."""
    t = _small_table(tmp_path / "t", commits=3, checkpoint=True)
    want = DeltaTable(str(t)).snapshot().files().column("path").to_pylist()
    snap = DeltaTable(str(t)).snapshot()  # listed and opened; the checkpoint's size is read lazily
    (log_dir(t) / f"{2:020d}.checkpoint.parquet").unlink()
    assert sorted(snap.files().column("path").to_pylist()) == sorted(want)


def test_column_mapping_mode_without_the_protocol_feature(tmp_path: Path):
    """deltalake 1.6 writes delta.columnMapping.mode=name with physical names in the schema but
    no columnMapping feature when the table needs reader version 3 for another feature. Which
    names the files use is then unknowable: refused clearly (as delta-kernel-rs does), where it
    used to read every column as NULL. The mode property alone, without annotations, is ignored."""
    import datetime as dt

    path = tmp_path / "t"
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "ts": pa.array([dt.datetime(2024, 1, 1)] * 2, pa.timestamp("us")),
        }
    )
    deltalake.write_deltalake(str(path), data, configuration={"delta.columnMapping.mode": "name"})
    actions = [json.loads(line) for line in commit_path(path, 0).read_text().splitlines()]
    protocol = next(a["protocol"] for a in actions if "protocol" in a)
    assert "columnMapping" not in protocol.get("readerFeatures", [])  # what deltalake writes
    with pytest.raises(SchemaError, match="physical name but the protocol .* does not enable column mapping"):
        DeltaTable(str(path)).snapshot()
    # the same table with the annotations stripped: the mode means nothing, logical names are read
    for a in actions:
        if "metaData" in a:
            schema = json.loads(a["metaData"]["schemaString"])
            for f in schema["fields"]:
                f["metadata"] = {}
            a["metaData"]["schemaString"] = json.dumps(schema)
    commit_path(path, 0).write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    got = DeltaTable(str(path)).snapshot().scan().to_table()
    assert got.column("id").to_pylist() == [1, 2]


def _mapped(name: str, typ: Any, physical: str, column_id: int) -> dict[str, Any]:
    meta = {"delta.columnMapping.id": column_id, "delta.columnMapping.physicalName": physical}
    return {"name": name, "type": typ, "nullable": True, "metadata": meta}


@pytest.mark.parametrize("nested", [False, True])
def test_physical_name_given_to_two_columns(tmp_path: Path, nested: bool):
    """Two columns of a column-mapping table under one physical name would read one parquet column;
    their stats bounds became one JSON key given twice, on which pyarrow's JSON reader crashed
    the process (segmentation fault in files())."""
    pair = [_mapped("a", "float", "col-p", 1), _mapped("b", "string", "col-p", 2)]
    dates = {"type": "struct", "fields": [_mapped("d", "date", "col-d", 4)]}
    fields = [_mapped("s", {"type": "struct", "fields": pair}, "col-s", 3)] if nested else pair
    schema = {"type": "struct", "fields": [*fields, _mapped("z", dates, "col-z", 5)]}
    t = tmp_path / "t"
    log_dir(t).mkdir(parents=True)
    write_commit(
        t,
        0,
        [
            {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
            metadata_action(
                schema,
                configuration={"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "5"},
                table_id="1",
            ),
            {
                "add": {
                    "path": "f.parquet",
                    "partitionValues": {},
                    "size": 1,
                    "modificationTime": 0,
                    "dataChange": True,
                    "stats": '{"numRecords": 1}',
                }
            },
        ],
    )
    at = "s" if nested else "the top level"
    with pytest.raises(
        SchemaError, match=f"gives columns 'a' and 'b' at {at} the same physical name 'col-p'"
    ):
        DeltaTable(str(t)).snapshot().files()
