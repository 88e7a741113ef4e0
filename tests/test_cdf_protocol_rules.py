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
from delta_datafusion.errors import CdfNotEnabledError, ChangeDataFeedError, UnsupportedFeatureError

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
    _assert_cdc_file_refused(t, where)


@pytest.mark.parametrize("where", [None, "_change_type = 'update_preimage'", "_change_type <> 'insert'"])
def test_change_data_file_with_null_change_types_is_refused_under_every_filter(tmp_path, where):
    """Change types are never NULL (PROTOCOL.md: one of the four, "filled for all rows"). A NULL
    one was refused when the rows reached the reader unfiltered, but a filter on
    ``_change_type`` dropped that row and the feed answered with the others only."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    images = {"id": [2, 2], "p": ["y", "z"], "_change_type": ["update_preimage", None]}
    write_file(t, "_change_data/c.parquet", images)
    write_log(t, [[PROTOCOL, metadata(), add(t, "a.parquet")], [cdc(t, "_change_data/c.parquet")]])
    _assert_cdc_file_refused(t, where)


def test_change_data_file_storing_change_types_without_statistics_is_read(tmp_path):
    """The refusal above looks at the file's columns, not its statistics: a change data file
    written without statistics of ``_change_type`` is read and filtered as any other."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    images = pa.table(
        {"id": [2, 2], "p": ["y", "z"], "_change_type": ["update_preimage", "update_postimage"]}
    )
    (t / "_change_data").mkdir()
    pq.write_table(images, t / "_change_data/c.parquet", write_statistics=False)
    write_log(t, [[PROTOCOL, metadata(), add(t, "a.parquet")], [cdc(t, "_change_data/c.parquet")]])
    post = [{"id": 2, "p": "z", "_change_type": "update_postimage", "_commit_version": 1}]
    assert feed_sql(t, 1, 1, "_change_type = 'update_postimage'") == post
    assert feed_api(t, 1, 1, "_change_type <> 'update_preimage' AND id = 2") == post


def test_a_commit_with_cdc_files_contributes_only_them(tmp_path):
    """Reader Requirements for AddCDCFile: a commit with ``cdc`` actions is read from them only,
    its ``add`` / ``remove`` actions with ``dataChange = true`` skipped; a data file may be both
    added and a change data file (``_change_type`` filled for every row): its rows count once."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    write_file(t, "b.parquet", {"id": [2], "p": ["z"]})
    images = {"id": [2, 2], "p": ["y", "z"], "_change_type": ["update_preimage", "update_postimage"]}
    write_file(t, "_change_data/c.parquet", images)
    write_file(t, "d.parquet", {"id": [3], "p": ["w"], "_change_type": ["insert"]})
    write_log(
        t,
        [
            [PROTOCOL, metadata(), add(t, "a.parquet")],
            [remove("a.parquet"), add(t, "b.parquet"), cdc(t, "_change_data/c.parquet")],
            [add(t, "d.parquet"), cdc(t, "d.parquet")],
        ],
    )
    expected = [
        {"id": 2, "p": "z", "_change_type": "update_postimage", "_commit_version": 1},
        {"id": 2, "p": "y", "_change_type": "update_preimage", "_commit_version": 1},
        {"id": 3, "p": "w", "_change_type": "insert", "_commit_version": 2},
    ]
    assert feed_sql(t, 1, 2) == expected
    assert feed_api(t, 1, 2) == expected
    assert feed_sql(t, 1, 2, "_change_type = 'delete' OR p = 'x'") == []
    assert feed_sql(t, 1, 2, "_change_type = 'insert'") == expected[2:]
    # the table itself reads d.parquet without its _change_type column
    assert dd.DeltaTable(str(t)).snapshot().scan().to_table().to_pylist() == [
        {"id": 2, "p": "z"},
        {"id": 3, "p": "w"},
    ]


def test_a_data_file_storing_change_types_is_read_with_its_actions_change_type(tmp_path):
    """Data files of a table with the feed enabled may store ``_change_type`` (PROTOCOL.md, Note
    for non-change data readers). Read through an ``add`` or ``remove`` of a commit without cdc
    files, its rows are inserts or deletes whatever the column holds."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"], "_change_type": ["update_postimage"] * 2})
    write_log(t, [[PROTOCOL, metadata()], [add(t, "a.parquet")], [remove("a.parquet")]])
    inserted = [
        {"id": i, "p": p, "_change_type": "insert", "_commit_version": 1} for i, p in ((1, "x"), (2, "y"))
    ]
    deleted = [
        {"id": i, "p": p, "_change_type": "delete", "_commit_version": 2} for i, p in ((1, "x"), (2, "y"))
    ]
    assert feed_sql(t, 0, 2) == inserted + deleted
    assert feed_api(t, 0, 2) == inserted + deleted
    assert feed_sql(t, 0, 2, "_change_type = 'update_postimage'") == []
    assert feed_sql(t, 0, 2, "_change_type IN ('delete', 'update_postimage') AND id = 2") == deleted[1:]


@pytest.mark.parametrize("partitioned", [False, True])
def test_remove_without_extended_file_metadata(tmp_path, partitioned):
    """A remove may leave out ``size`` and ``partitionValues`` (``extendedFileMetadata`` false or
    absent). Its rows are still the file's: read, counted and filtered as those of the add it
    removes; in a partitioned table the deleted rows' partition values are unknown, so it is
    refused (test_cdf.py::test_a_remove_without_partition_values_is_refused covers its message)."""
    t = tmp_path / "t"
    stats = json.dumps(
        {"numRecords": 2, "minValues": {"id": 1}, "maxValues": {"id": 2}, "nullCount": {"id": 0}}
    )
    if partitioned:
        write_file(t, "p=x/a.parquet", {"id": [1, 2]})
        first = [PROTOCOL, metadata(parts=("p",)), add(t, "p=x/a.parquet", {"p": "x"}, stats=stats)]
        write_log(t, [first, [remove("p=x/a.parquet", extendedFileMetadata=False)]])
        with pytest.raises(ChangeDataFeedError, match="p=x/a.parquet at version 1"):
            feed_api(t, 1, 1)
        return
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    first = [PROTOCOL, metadata(), add(t, "a.parquet", stats=stats)]
    write_log(t, [first, [remove("a.parquet", extendedFileMetadata=False)]])
    deleted = [
        {"id": i, "p": p, "_change_type": "delete", "_commit_version": 1} for i, p in ((1, "x"), (2, "y"))
    ]
    for start in (0, 1):  # the add's stats in the range or not
        assert feed_sql(t, start, 1, "_commit_version = 1") == deleted
        assert feed_sql(t, start, 1, "id = 2 AND _commit_version = 1") == deleted[1:]
        assert feed_sql(t, start, 1, "id > 2") == []
        assert feed_api(t, start, 1, "_change_type = 'delete'") == deleted


def test_a_file_removed_and_added_again_unchanged_in_one_commit_is_no_change(tmp_path):
    """The same path removed and added in one commit with the same (here: no) deletion vector
    changes no row: delta-kernel-rs pairs them and finds no row whose state changed."""
    t = tmp_path / "t"
    write_file(t, "a.parquet", {"id": [1, 2], "p": ["x", "y"]})
    write_log(t, [[PROTOCOL, metadata(), add(t, "a.parquet")], [remove("a.parquet"), add(t, "a.parquet")]])
    assert feed_sql(t, 1, 1) == []
    assert [r["_commit_version"] for r in feed_api(t, 0, 1)] == [0, 0]


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


def test_feed_disabled_and_enabled_again_inside_the_range_names_the_disabled_version(tmp_path):
    """Enabled at 0, disabled at 1, enabled again at 2: every version of a range must have it
    (delta-kernel-rs checks each metaData action); the error names version 1, and 2..2 reads."""
    t = tmp_path / "t"
    for name, i in (("a.parquet", 1), ("b.parquet", 2), ("c.parquet", 3)):
        write_file(t, name, {"id": [i], "p": ["x"]})
    write_log(
        t,
        [
            [PROTOCOL, metadata(), add(t, "a.parquet")],
            [metadata(conf={}), add(t, "b.parquet")],
            [metadata(conf={"delta.enableChangeDataFeed": "TRUE"}), add(t, "c.parquet")],
        ],
    )
    for start in (0, 1):
        with pytest.raises(CdfNotEnabledError, match="version 1"):
            feed_api(t, start, 2)
    assert feed_sql(t, 2, 2) == [{"id": 3, "p": "x", "_change_type": "insert", "_commit_version": 2}]


def test_protocol_upgrade_to_an_unknown_reader_feature_inside_the_range(tmp_path):
    """Every protocol of the range must be readable (delta-kernel-rs checks each protocol action
    in the range): an upgrade to a reader feature this reader does not know refuses the ranges
    over it, naming its commit file; the versions before it still read."""
    t = tmp_path / "t"
    for name, i in (("a.parquet", 1), ("b.parquet", 2)):
        write_file(t, name, {"id": [i], "p": ["x"]})
    later = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["laterFeature"],
        "writerFeatures": ["laterFeature", "changeDataFeed"],
    }
    write_log(t, [[PROTOCOL, metadata(), add(t, "a.parquet")], [{"protocol": later}, add(t, "b.parquet")]])
    assert [r["id"] for r in feed_api(t, 0, 0)] == [1]
    with pytest.raises(UnsupportedFeatureError, match="laterFeature") as info:
        feed_api(t, 0, 1)
    assert "00000000000000000001.json" in str(info.value)


def _assert_cdc_file_refused(t, where) -> None:
    """Both routes (SQL and the Python API) refuse version 1's change data file c.parquet, naming
    it and its _change_type column."""
    for read in (feed_sql, feed_api):
        with pytest.raises(Exception) as info:
            read(t, 1, 1, where)
        error = info.value if isinstance(info.value, dd.DeltaError) else dd.from_datafusion(info.value)
        assert isinstance(error, ChangeDataFeedError), (read.__name__, info.value)
        assert "_change_data/c.parquet" in str(error) and "_change_type" in str(error)
