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
import pyarrow.parquet as pq
import pytest
from conftest import add_action, write_commit
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import DeltaTable, InvalidProtocolError, UnsupportedFeatureError

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
    metadata = {
        "id": "features",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": [],
        "configuration": configuration or {},
        "createdTime": 0,
    }
    write_commit(
        root, 0, [{"protocol": protocol}, {"metaData": metadata}, {"add": add_action(root, "a.parquet")}]
    )
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
def test_variant_shredding_with_a_variant_column_is_refused_by_name(tmp_path: Path, feature: str) -> None:
    t = _table(tmp_path / "t", ["variantType", feature], ["variantType", feature], [LONG, VARIANT])
    with pytest.raises(UnsupportedFeatureError, match=f"'{feature}': shredded VARIANT columns") as info:
        _sum(t)
    assert "00000000000000000000.json" in str(info.value)


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
def test_change_feed_refuses_a_variant_column_added_under_shredding(tmp_path: Path, feature: str) -> None:
    """The snapshot of version 1 is refused (a VARIANT column under the shredding feature): so
    is a change range from before it, as from its own start, naming the commit."""
    t = _variant_added_later(tmp_path / "t", feature)
    with pytest.raises(UnsupportedFeatureError, match=feature):
        DeltaTable(str(t)).snapshot(version=1)
    assert _sum_at(t, 0) == 3
    # from version 0: the commit bringing the column is named; from 1, as the snapshot does,
    # the protocol's file
    for start, named in ((0, 1), (1, 0)):
        with pytest.raises(UnsupportedFeatureError, match=rf"{named:020d}\.json.*{feature}"):
            DeltaTable(str(t)).changes(start, 2).to_table()
    assert DeltaTable(str(t)).changes(0, 0).to_table().num_rows == 2


def _sum_at(table: Path, version: int) -> int:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table), version=version)
    return ctx.sql("SELECT sum(x) AS s FROM t").to_pylist()[0]["s"]
