"""The change data feed's rules, one test per rule, on hand-written logs (PROTOCOL.md "Add CDC
File", "Change Data Files", "Deletion Vectors"; delta-kernel-rs ``table_changes``).

Rules covered elsewhere are named in the module docstring of ``delta_datafusion.changes`` and in
test_cdf.py / test_cdf_pushdown.py / test_dv.py; the tests here are for rules whose inputs the
deltalake-written tables there never produce. Each table is a few rows written with pyarrow and
commits written as JSON; the expected rows are the protocol's, written out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import delta_datafusion as dd
from delta_datafusion.changes import clear_cache
from delta_datafusion.errors import CdfNotEnabledError, ChangeDataFeedError

CDF = {"delta.enableChangeDataFeed": "true"}
PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}}
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "p", "type": "string", "nullable": True, "metadata": {}},
    ],
}

pytestmark = pytest.mark.usefixtures("fresh_change_feed_cache")


def metadata(schema: dict[str, Any] = SCHEMA, parts: tuple[str, ...] = (), conf: dict | None = None) -> dict:
    return {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": list(parts),
            "configuration": dict(CDF if conf is None else conf),
        }
    }


def write_file(table: Path, name: str, data: dict[str, list]) -> str:
    (table / name).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(data), table / name)
    return name


def add(table: Path, name: str, pv: dict | None = None, **extra: Any) -> dict:
    size = (table / name).stat().st_size
    action = {"path": name, "partitionValues": pv or {}, "size": size, "modificationTime": 0}
    return {"add": {**action, "dataChange": True, **extra}}


def cdc(table: Path, name: str, pv: dict | None = None) -> dict:
    size = (table / name).stat().st_size
    return {"cdc": {"path": name, "partitionValues": pv or {}, "size": size, "dataChange": False}}


def remove(name: str, **extra: Any) -> dict:
    return {"remove": {"path": name, "deletionTimestamp": 1, "dataChange": True, **extra}}


def write_log(table: Path, commits: list[list[dict]]) -> None:
    (table / "_delta_log").mkdir(parents=True, exist_ok=True)
    for version, actions in enumerate(commits):
        text = "".join(json.dumps(a) + "\n" for a in actions)
        (table / "_delta_log" / f"{version:020d}.json").write_text(text)


def feed_sql(table: Path, start: int, end: int, where: str | None = None) -> list[dict]:
    from datafusion import SessionContext

    clear_cache()
    ctx = SessionContext()
    dd.register(ctx)
    q = f"SELECT id, p, _change_type, _commit_version FROM table_changes('{table}', {start}, {end})"
    q += f" WHERE {where}" if where else ""
    return ctx.sql(q + " ORDER BY _commit_version, id, _change_type").to_arrow_table().to_pylist()


def feed_api(table: Path, start: int, end: int, where: str | None = None) -> list[dict]:
    clear_cache()
    t = dd.DeltaTable(str(table)).changes(start, end, predicate=where).to_table()
    got = t.select(["id", "p", "_change_type", "_commit_version"]).to_pylist()
    return sorted(got, key=lambda r: (r["_commit_version"], r["id"], r["_change_type"]))


# --------------------------------------------------------------------------------------------
# change data files
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        None,
        "_change_type = 'delete'",
        "_change_type <> 'insert'",
        "_change_type IS NOT NULL",
        "_change_type IN ('delete', 'update_preimage') AND id = 1",
    ],
)
def test_change_data_file_without_its_change_type_column_is_refused_under_every_filter(tmp_path, where):
    """A change data file must hold ``_change_type`` (PROTOCOL.md, Change Data Files;
    delta-kernel-rs reads it as a required column). One without it was refused when read
    unfiltered, but a filter on ``_change_type`` dropped its rows (NULL compares to nothing) and
    the feed answered with no rows, as if the commit changed nothing."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    write_file(t, "_change_data/c.parquet", {"id": [1], "p": ["x"]})
    write_log(
        t,
        [
            [PROTOCOL, metadata(), add(t, "a.parquet")],
            [cdc(t, "_change_data/c.parquet"), remove("a.parquet")],
        ],
    )
    for read in (feed_sql, feed_api):
        with pytest.raises(Exception) as info:
            read(t, 1, 1, where)
        error = info.value if isinstance(info.value, dd.DeltaError) else dd.from_datafusion(info.value)
        assert isinstance(error, ChangeDataFeedError), (read.__name__, info.value)
        assert "_change_data/c.parquet" in str(error) and "_change_type" in str(error)


# --------------------------------------------------------------------------------------------
# where the change data feed is enabled
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "protocol",
    [
        {"minReaderVersion": 1, "minWriterVersion": 2},
        {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly"]},
    ],
    ids=["writer-2", "writer-7-without-the-feature"],
)
def test_property_without_protocol_support_is_not_an_enabled_feed(tmp_path, protocol):
    """``delta.enableChangeDataFeed`` binds writers only from writer version 4, and at version 7
    only with the ``changeDataFeed`` writer feature (PROTOCOL.md, Writer Requirements for
    AddCDCFile): below that, an UPDATE may be committed without its cdc files, and its rewritten
    files would read as every row deleted and inserted again. delta-kernel-rs (the feature
    enabled = supported by the protocol and set), Spark and deltalake (both upgrade the protocol
    with the property) agree; the feed was read from the property alone."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    write_file(t, "b.parquet", {"id": [1, 2], "p": ["x", "z"]})
    write_log(
        t,
        [
            [{"protocol": protocol}, metadata(), add(t, "a.parquet")],
            [remove("a.parquet"), add(t, "b.parquet")],  # an UPDATE of row 2, no cdc file
        ],
    )
    for start, end in ((0, 1), (1, 1)):
        with pytest.raises(CdfNotEnabledError, match=f"version {start}"):
            feed_api(t, start, end)


def test_feed_is_enabled_from_the_protocol_upgrade_on(tmp_path):
    """The property set at version 1 under writer version 2, the protocol upgraded at version 2:
    the feed can be read from version 2 on, and a range over version 1 names it."""
    t = tmp_path / "t"
    for name, i in (("a.parquet", 1), ("b.parquet", 2), ("c.parquet", 3)):
        write_file(t, name, {"id": [i], "p": ["x"]})
    write_log(
        t,
        [
            [
                {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                metadata(conf={}),
                add(t, "a.parquet"),
            ],
            [metadata(), add(t, "b.parquet")],
            [PROTOCOL, add(t, "c.parquet")],
        ],
    )
    assert feed_api(t, 2, 2) == [{"id": 3, "p": "x", "_change_type": "insert", "_commit_version": 2}]
    for start in (0, 1):
        with pytest.raises(CdfNotEnabledError, match=f"version {start}"):
            feed_api(t, start, 2)
