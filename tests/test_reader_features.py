"""Reader feature names as the current PROTOCOL.md and writers spell them.

The protocol names the shredding feature ``variantShredding`` (``variantShredding-preview`` was
its name before); delta-kernel-rs and deltalake read ``timestampWithoutTimezone`` (a spelling some
existing tables carry) as ``timestampNtz``; a writer-only feature is not allowed in
``readerFeatures`` (the kernel refuses such a protocol as invalid). Tables are hand-written logs
over one small parquet file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import add_action, metadata_action, write_commit
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import DeltaTable, InvalidProtocolError

LONG = {"name": "x", "type": "long", "nullable": True, "metadata": {}}
VARIANT = {"name": "v", "type": "variant", "nullable": True, "metadata": {}}


def _table(
    root: Path, reader: list[str], writer: list[str], fields: list[dict], configuration: dict | None = None
) -> Path:
    root.mkdir(parents=True)
    (root / "_delta_log").mkdir()
    columns = {"x": pa.array([1, 2], pa.int64())}
    if any(f["name"] == "v" for f in fields):
        v = pa.StructArray.from_arrays(
            [pa.array([b"\x0c\x05", b"\x0c\x06"]), pa.array([b"\x01\x00\x00"] * 2)],
            fields=[pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)],
        )
        columns["v"] = v
    pq.write_table(pa.table(columns), root / "a.parquet")
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": reader,
        "writerFeatures": writer,
    }
    metadata = metadata_action({"type": "struct", "fields": fields}, [], configuration, "features")
    write_commit(root, 0, [{"protocol": protocol}, metadata, {"add": add_action(root, "a.parquet")}])
    return root


def _sum(table: Path) -> int:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    return ctx.sql("SELECT sum(x) AS s FROM t").to_pylist()[0]["s"]


@pytest.mark.parametrize("feature", ["variantShredding", "variantShredding-preview"])
def test_variant_shredding_without_variant_columns_is_read(tmp_path: Path, feature: str) -> None:
    """Shredding is honoured vacuously when no column is a VARIANT, under either name."""
    t = _table(tmp_path / "t", ["variantType", feature], ["variantType", feature], [LONG])
    assert _sum(t) == 3
    assert DeltaTable(str(t)).snapshot().scan(columns=["x"]).to_table().num_rows == 2


@pytest.mark.parametrize("feature", ["variantShredding", "variantShredding-preview"])
def test_variant_shredding_with_an_unshredded_variant_column_is_read(tmp_path: Path, feature: str) -> None:
    """Shredded files are refused one by one when the column is read (tests/test_variant.py)."""
    t = _table(tmp_path / "t", ["variantType", feature], ["variantType", feature], [LONG, VARIANT])
    assert _sum(t) == 3
    values = DeltaTable(str(t)).snapshot().scan(columns=["v"]).to_table().column("v").to_pylist()
    assert [v["value"] for v in values] == [b"\x0c\x05", b"\x0c\x06"]


def test_timestamp_without_timezone_spelling_is_timestamp_ntz(tmp_path: Path) -> None:
    fields = [LONG, {"name": "ts", "type": "timestamp_ntz", "nullable": True, "metadata": {}}]
    t = _table(tmp_path / "t", ["timestampWithoutTimezone"], ["timestampWithoutTimezone"], fields)
    assert _sum(t) == 3


@pytest.mark.parametrize("feature", ["appendOnly", "changeDataFeed", "rowTracking", "inCommitTimestamp"])
def test_writer_only_feature_in_reader_features_is_an_invalid_protocol(tmp_path: Path, feature: str) -> None:
    t = _table(tmp_path / "t", [feature], [feature], [LONG])
    with pytest.raises(InvalidProtocolError, match=f"{feature!r} is a writer-only feature") as info:
        _sum(t)
    assert "00000000000000000000.json" in str(info.value)


def _variant_added_later(root: Path, feature: str) -> Path:
    """Version 0: shredding supported, no VARIANT column; version 1 adds one by a metaData action
    alone (no protocol action); version 2 adds a file holding an (unshredded) variant."""
    from test_variant import EMPTY, v_int8, variants

    cdf = {"delta.enableChangeDataFeed": "true"}
    writer = ["variantType", feature, "changeDataFeed"]
    _table(root, ["variantType", feature], writer, [LONG], cdf)
    data = pa.table({"x": pa.array([3], pa.int64()), "v": variants([(v_int8(3), EMPTY)])})
    pq.write_table(data, root / "b.parquet")
    metadata = json.loads(root.joinpath("_delta_log", f"{0:020d}.json").read_text().splitlines()[1])
    metadata["metaData"]["schemaString"] = json.dumps({"type": "struct", "fields": [LONG, VARIANT]})
    write_commit(root, 1, [metadata])
    write_commit(root, 2, [{"add": add_action(root, "b.parquet")}])
    return root


@pytest.mark.parametrize("feature", ["variantShredding", "variantShredding-preview"])
def test_change_feed_reads_a_variant_column_added_under_shredding(tmp_path: Path, feature: str) -> None:
    """A VARIANT column brought by a metaData action alone under the shredding feature: the
    snapshots and change ranges across it read its unshredded values."""
    t = _variant_added_later(tmp_path / "t", feature)
    assert _sum_at(t, 0) == 3
    assert _sum_at(t, 2) == 6
    for start in (0, 1):
        feed = DeltaTable(str(t)).changes(start, 2).to_table()
        assert sorted(feed.column("x").to_pylist()) == ([1, 2, 3] if start == 0 else [3])
        assert feed.filter(pc.field("x") == 3).column("v").to_pylist()[0]["value"] is not None


def _sum_at(table: Path, version: int) -> int:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table), version=version)
    return ctx.sql("SELECT sum(x) AS s FROM t").to_pylist()[0]["s"]
