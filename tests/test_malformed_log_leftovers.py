"""Logs that break the protocol's file-action rules: refused by name, never a silent answer.

Each table is two deltalake appends (versions 0 and 1, one file of one row each) with a
hand-written third commit (version 2) that breaks one rule of PROTOCOL.md's "Add File and Remove
File" section.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import commit_path, write_commit
from test_dv import _hand_encode, _z85_encode

import delta_datafusion as dd
from delta_datafusion.dv import DV_MAGIC
from delta_datafusion.errors import LogCorruptError


def _two_appends(table: Path) -> list[dict[str, Any]]:
    """Versions 0 and 1 (one row each); the add actions of both, as written."""
    for i in range(2):
        deltalake.write_deltalake(str(table), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    adds = []
    for v in range(2):
        for line in commit_path(table, v).read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
    return adds


def _remove_of(add: dict[str, Any]) -> dict[str, Any]:
    return {"remove": {"path": add["path"], "deletionTimestamp": 1, "dataChange": True}}


def _inline_dv(deleted: list[int], cardinality: int | None = None) -> dict[str, Any]:
    """An inline deletion vector of the row indexes ``deleted`` (its cardinality as logged)."""
    payload = struct.pack("<i", DV_MAGIC) + _hand_encode(sorted(deleted))
    return {
        "storageType": "i",
        "pathOrInlineDv": _z85_encode(payload, "pad"),
        "sizeInBytes": len(payload),
        "cardinality": len(deleted) if cardinality is None else cardinality,
    }


def _ids(table: Path) -> list[int]:
    return sorted(dd.DeltaTable(str(table)).snapshot().scan().to_table().column("id").to_pylist())


@pytest.mark.parametrize("remove_first", [False, True])
def test_add_and_remove_of_one_file_in_one_commit_is_refused(tmp_path: Path, remove_first: bool):
    """PROTOCOL.md: actions of one commit "are not guaranteed to be applied in order" and the only
    legal add + remove of one path in a commit has two different dvIds; with the same key the file
    is both live and removed (Spark keeps the later line, the kernel the first seen)."""
    adds = _two_appends(tmp_path)
    readd = {"add": dict(adds[0], modificationTime=2)}
    actions = [_remove_of(adds[0]), readd] if remove_first else [readd, _remove_of(adds[0])]
    write_commit(tmp_path, 2, actions)
    with pytest.raises(LogCorruptError) as e:
        _ids(tmp_path)
    msg = str(e.value)
    assert "version 2" in msg and adds[0]["path"] in msg and "both added and removed" in msg, msg


def test_add_and_remove_in_different_commits_still_read(tmp_path: Path):
    """The same key removed in one commit and re-added in the next is legal: the re-add is live."""
    adds = _two_appends(tmp_path)
    write_commit(tmp_path, 2, [_remove_of(adds[0])])
    write_commit(tmp_path, 3, [{"add": dict(adds[0], modificationTime=3)}])
    assert _ids(tmp_path) == [0, 1]
    write_commit(tmp_path, 4, [_remove_of(adds[0])])
    assert _ids(tmp_path) == [1]


def test_add_and_remove_of_one_path_with_different_dvs_is_legal(tmp_path: Path):
    """PROTOCOL.md: "it is legal for the same path to occur in an add action and a remove action, but with two
    different dvIds": a remove of the file without a DV beside an add of it with a DV deleting
    its one row."""
    adds = _two_appends(tmp_path)
    write_commit(tmp_path, 2, [{"add": dict(adds[0], deletionVector=_inline_dv([0]))}, _remove_of(adds[0])])
    assert _ids(tmp_path) == [1]


def _feed_table(table: Path) -> list[dict[str, Any]]:
    """Two appends with the change data feed enabled; a copy of the first data file as ``copy.parquet``."""
    for i in range(2):
        deltalake.write_deltalake(
            str(table),
            pa.table({"id": pa.array([i], pa.int64())}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    adds = [
        json.loads(line)["add"]
        for v in range(2)
        for line in commit_path(table, v).read_text().splitlines()
        if "add" in json.loads(line)
    ]
    (table / "copy.parquet").write_bytes((table / adds[0]["path"]).read_bytes())
    return adds


def _without_data_change(action: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in action.items() if k != "dataChange"}


@pytest.mark.parametrize("kind", ["add", "remove"])
def test_file_action_without_data_change_is_refused_by_the_feed(tmp_path: Path, kind: str):
    """``dataChange`` is required on add and remove; the feed's answer depends on it (an add with
    ``false`` contributes no insert), so a missing one is refused by name rather than read as true.
    The snapshot's file set does not depend on it and still reads."""
    adds = _feed_table(tmp_path)
    if kind == "add":
        action = {"add": _without_data_change(dict(adds[0], path="copy.parquet"))}
        live = [0, 0, 1]
    else:
        action = {"remove": _without_data_change(_remove_of(adds[0])["remove"])}
        live = [1]
    write_commit(tmp_path, 2, [action])
    assert _ids(tmp_path) == live
    with pytest.raises(LogCorruptError) as e:
        dd.DeltaTable(str(tmp_path)).changes(0, 2).to_table()
    msg = str(e.value)
    assert "version 2" in msg and "dataChange" in msg and "00000000000000000002.json" in msg, msg
    # a range that does not include the commit still reads
    assert sorted(dd.DeltaTable(str(tmp_path)).changes(0, 1).to_table().column("id").to_pylist()) == [0, 1]


def test_missing_data_change_in_a_commit_with_cdc_files_is_not_needed(tmp_path: Path):
    """A commit with cdc files takes its changes from them; its adds' dataChange is not read
    (the kernel does not read it there either)."""
    adds = _feed_table(tmp_path)
    (tmp_path / "_change_data").mkdir()
    cdc_rows = pa.table({"id": pa.array([0], pa.int64()), "_change_type": pa.array(["insert"])})

    pq.write_table(cdc_rows, tmp_path / "_change_data" / "c.parquet")
    size = (tmp_path / "_change_data" / "c.parquet").stat().st_size
    write_commit(
        tmp_path,
        2,
        [
            {"add": _without_data_change(dict(adds[0], path="copy.parquet"))},
            {
                "cdc": {
                    "path": "_change_data/c.parquet",
                    "partitionValues": {},
                    "size": size,
                    "dataChange": False,
                }
            },
        ],
    )
    t = dd.DeltaTable(str(tmp_path)).changes(2, 2).to_table()
    assert t.column("id").to_pylist() == [0] and t.column("_change_type").to_pylist() == ["insert"]
