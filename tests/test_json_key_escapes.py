"""Action keys written with JSON escapes (``"remov\\u0065"`` is the key ``remove``).

Commits are parsed with an explicit schema from which the action types and the optional add
fields that never occur in a commit are left out (they cost the parser a null column a row), and
protocol and metaData are found by a byte search. Both looked for the keys as written, so a key
spelled with an escape was dropped: a remove that did not remove, a deletion vector that deleted
nothing, a schema change not seen. JSON allows any character of a key to be escaped; no writer
known escapes ASCII letters, but a reader must not give other rows for the same JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import log_dir, metadata_action, write_commit

from delta_datafusion import DeltaTable
from delta_datafusion.errors import UnsupportedFeatureError
from delta_datafusion.log import actions

SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


def _table(t: Path, actions_: list[dict]) -> None:
    log_dir(t).mkdir(parents=True)
    write_commit(
        t,
        0,
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            metadata_action(SCHEMA, table_id="t"),
            *actions_,
        ],
    )


def _add(path: str, size: int = 1, **extra) -> dict:
    return {
        "add": {
            "path": path,
            "partitionValues": {},
            "size": size,
            "modificationTime": 1,
            "dataChange": True,
            **extra,
        }
    }


def _escaped(action: dict, key: str, spelled: str) -> str:
    """``action`` as a JSON line with every ``"key"`` written as ``"spelled"``."""
    return json.dumps(action).replace(f'"{key}"', f'"{spelled}"')


def _write_lines(t: Path, version: int, lines: list[str]) -> None:
    (log_dir(t) / f"{version:020d}.json").write_text("".join(line + "\n" for line in lines))


def _live(t: Path) -> list[tuple[str, int]]:
    files = DeltaTable(str(t)).snapshot().files()
    return sorted(zip(files.column("path").to_pylist(), files.column("size").to_pylist(), strict=True))


@pytest.fixture(params=["small log", "large log"])
def log_size(request, monkeypatch):
    """Small logs are searched key by key; large ones with one regex pass on threads."""
    if request.param == "large log":
        monkeypatch.setattr(actions, "_SMALL", 0)
        monkeypatch.setattr(actions, "_HEAD", 16)
    return request.param


def test_an_escaped_remove_key_removes(tmp_path: Path, log_size: str):
    t = tmp_path / "t"
    _table(t, [_add("a.parquet", 1), _add("b.parquet", 2)])
    remove = {"remove": {"path": "a.parquet", "deletionTimestamp": 2, "dataChange": True}}
    _write_lines(t, 1, [_escaped(remove, "remove", "remov\\u0065")])
    assert _live(t) == [("b.parquet", 2)]


def test_an_escaped_add_key_adds(tmp_path: Path, log_size: str):
    t = tmp_path / "t"
    _table(t, [])
    _write_lines(t, 1, [_escaped(_add("a.parquet", 1), "add", "\\u0061dd")])
    assert _live(t) == [("a.parquet", 1)]


def test_an_escaped_deletion_vector_key_deletes(tmp_path: Path, log_size: str):
    t = tmp_path / "t"
    _table(t, [_add("a.parquet", 10)])
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab12cd34ef56gh78ij90",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 3,
    }
    remove = {"remove": {"path": "a.parquet", "deletionTimestamp": 2, "dataChange": True}}
    with_dv = _escaped(_add("a.parquet", 10, deletionVector=dv), "deletionVector", "deletion\\u0056ector")
    _write_lines(t, 1, [json.dumps(remove), with_dv])
    files = DeltaTable(str(t)).snapshot().files()
    dvs = pc.struct_field(files.column("deletion_vector").combine_chunks(), "cardinality")
    assert dvs.to_pylist() == [3]


def test_an_escaped_metadata_key_changes_the_schema(tmp_path: Path):
    t = tmp_path / "t"
    _table(t, [])
    wider = {
        "type": "struct",
        "fields": [*SCHEMA["fields"], {"name": "z", "type": "string", "nullable": True, "metadata": {}}],
    }
    _write_lines(t, 1, [_escaped(metadata_action(wider, table_id="t"), "metaData", "met\\u0061Data")])
    assert DeltaTable(str(t)).snapshot().schema == pa.schema([("id", pa.int64()), ("z", pa.string())])


def test_an_escaped_protocol_key_is_honoured(tmp_path: Path):
    t = tmp_path / "t"
    _table(t, [])
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["notAFeatureAnyReaderKnows"],
            "writerFeatures": ["notAFeatureAnyReaderKnows"],
        }
    }
    _write_lines(t, 1, [_escaped(protocol, "protocol", "pr\\u006ftocol")])
    with pytest.raises(UnsupportedFeatureError, match="notAFeatureAnyReaderKnows"):
        DeltaTable(str(t)).snapshot()


def test_the_change_feed_reads_an_escaped_remove_key(tmp_path: Path, log_size: str):
    import deltalake

    t = tmp_path / "t"
    deltalake.write_deltalake(
        str(t),
        pa.table({"id": pa.array([1, 2], pa.int64())}),
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    path = DeltaTable(str(t)).snapshot().files().column("path")[0].as_py()
    remove = {"remove": {"path": path, "deletionTimestamp": 2, "dataChange": True}}
    _write_lines(t, 1, [_escaped(remove, "remove", "r\\u0065move")])
    rows = DeltaTable(str(t)).changes(1).to_table()
    assert sorted(zip(rows["id"].to_pylist(), rows["_change_type"].to_pylist(), strict=True)) == [
        (1, "delete"),
        (2, "delete"),
    ]
