"""Log-replay conformance on the shared corpus: every table loads at the version and with the live
file set its expectations imply, and the tables that must fail do so with the right error.

For data tables the live file set is checked through the row count it implies: the parquet footer
row counts of the live files minus their deletion-vector cardinalities must equal the row count of
the expected snapshot (and so must the stats-based ``count_rows`` when every file has stats). A
missing, extra or duplicated file changes that sum (or fails to open).
"""

from __future__ import annotations

import os

import pyarrow.compute as pc
import pytest
from conftest import (
    CORPUS,
    all_files_have_stats,
    corpus_available,
    corpus_missing_reason,
    dv_cardinalities,
    live_row_count,
    load_manifest,
    manifest_tables,
)

from delta_datafusion.errors import (
    DeltaError,
    InvalidProtocolError,
    MissingMetadataError,
    MissingProtocolError,
    NonContiguousVersionsError,
    TableNotFoundError,
)
from delta_datafusion.snapshot import FILE_COLUMNS, count_rows
from delta_datafusion.table import DeltaTable

if not corpus_available():
    pytest.skip(corpus_missing_reason(), allow_module_level=True)

ERROR_KINDS: dict[str, type[DeltaError]] = {
    "invalid_protocol": InvalidProtocolError,
    "missing_protocol": MissingProtocolError,
    "missing_metadata": MissingMetadataError,
    "table_not_found": TableNotFoundError,
    "non_contiguous_versions": NonContiguousVersionsError,
}

TABLES = manifest_tables()
BY_NAME = {t["name"]: t for t in TABLES}
LOADABLE = [t["name"] for t in TABLES if t["category"] in ("data", "log_only")]
DATA = [t["name"] for t in TABLES if t["category"] == "data"]
LOG_ONLY = [t["name"] for t in TABLES if t["category"] == "log_only"]
ERRORS = [t["name"] for t in TABLES if t["category"] == "error"]
TIME_TRAVEL = [
    pytest.param(t["name"], e["version"], e["rows"], id=f"{t['name']}@v{e['version']}")
    for t in TABLES
    if t["category"] == "data"
    for e in t["expected"]
    if e["kind"] == "snapshot" and e.get("version") is not None
]
SNAPSHOT_ERRORS = [
    pytest.param(t["name"], err, id=f"{t['name']}@v{err.get('version')}-{err['kind']}")
    for t in TABLES
    if t["category"] == "data"
    for err in t.get("expect_error") or []
    if err["operation"] == "snapshot"
]


def table_path(name: str):
    return CORPUS / BY_NAME[name]["table_path"]


def latest_expectation(entry: dict) -> dict:
    found = [e for e in entry["expected"] if e["kind"] == "snapshot" and e.get("version") is None]
    assert len(found) == 1, f"{entry['name']}: expected exactly one latest-snapshot expectation"
    return found[0]


def expected_checkpoint(entry: dict, version: int) -> tuple[int, str, int] | None:
    """(version, package kind, parts) of the newest checkpoint the manifest lists at or before ``version``."""
    cks = [c for c in entry["log"].get("checkpoints") or [] if c["version"] <= version]
    if not cks:
        return None
    c = max(cks, key=lambda c: c["version"])
    if c["kind"].startswith("v2"):
        return c["version"], "v2", 1
    parts = c.get("parts", 1)
    return c["version"], ("multi" if parts > 1 else "classic"), parts


def check_segment(entry: dict, snap, version: int) -> None:
    """The snapshot starts from the newest complete checkpoint and replays the commits after it."""
    want = expected_checkpoint(entry, version)
    ck = snap.segment.checkpoint
    if want is None:
        assert ck is None
        assert [v for v, _ in snap.segment.commits] == list(range(0, version + 1))
    else:
        assert ck is not None, f"checkpoint {want} was not used"
        assert (ck.version, ck.kind, len(ck.parts)) == want
        assert [v for v, _ in snap.segment.commits] == list(range(want[0] + 1, version + 1))


def check_live_rows(snap, files, rows: int) -> None:
    assert files.column_names == FILE_COLUMNS
    locations = files.column("location").to_pylist()
    assert len(set(locations)) == len(locations), "a file is live twice"
    for loc in locations:
        assert os.path.isfile(loc), f"live file {loc} of {snap!r} does not exist"
    assert live_row_count(files) == rows
    if all_files_have_stats(files):
        assert count_rows(files) == rows
    else:
        assert count_rows(files) is None


@pytest.mark.parametrize("name", LOADABLE)
def test_corpus_latest_snapshot(name: str):
    entry = BY_NAME[name]
    path = table_path(name)
    dt = DeltaTable(str(path))
    snap = dt.snapshot()
    assert snap.version == entry["latest_version"]
    assert dt.latest_version() == entry["latest_version"]
    assert snap.partition_columns == entry["partition_columns"]
    check_segment(entry, snap, snap.version)
    files = snap.files()
    if entry.get("expected_log"):
        exp = entry["expected_log"]
        assert exp["version"] == snap.version
        want = sorted((f["path_decoded"], f["size"], f["modificationTime"]) for f in exp["active_files"])
        got = sorted(
            zip(
                files.column("path").to_pylist(),
                files.column("size").to_pylist(),
                files.column("modification_time").to_pylist(),
                strict=True,
            )
        )
        assert got == want
        for f in exp["active_files"]:
            assert any(loc.endswith("/" + f["path_decoded"]) for loc in files.column("location").to_pylist())
    if entry["category"] == "data":
        check_live_rows(snap, files, latest_expectation(entry)["rows"])


@pytest.mark.parametrize(("name", "version", "rows"), TIME_TRAVEL)
def test_corpus_time_travel(name: str, version: int, rows: int):
    entry = BY_NAME[name]
    snap = DeltaTable(str(table_path(name))).snapshot(version=version)
    assert snap.version == version
    check_segment(entry, snap, version)
    check_live_rows(snap, snap.files(), rows)


@pytest.mark.parametrize("name", ERRORS)
def test_corpus_expected_error(name: str):
    entry = BY_NAME[name]
    path = table_path(name)
    kinds = {
        e["kind"] for e in entry["expect_error"] if e["operation"] == "snapshot" and e.get("version") is None
    }
    assert len(kinds) == 1, kinds
    kind = kinds.pop()
    with pytest.raises(ERROR_KINDS[kind]) as info:
        DeltaTable(str(path)).snapshot().files()
    msg = str(info.value)
    assert str(path) in msg, f"error message does not name the table or log file: {msg}"
    if kind in ("missing_protocol", "missing_metadata"):
        assert ("protocol" if kind == "missing_protocol" else "metaData") in msg
    if kind == "invalid_protocol":
        assert "minReaderVersion" in msg or "readerFeatures" in msg


@pytest.mark.parametrize(("name", "err"), SNAPSHOT_ERRORS)
def test_corpus_expected_snapshot_error_at_version(name: str, err: dict):
    """E.g. snapshot-vacuumed v2: the log still describes it, but its data files were vacuumed."""
    assert err["kind"] == "file_not_found", f"unhandled expectation kind {err['kind']}"
    path = table_path(name)
    snap = DeltaTable(str(path)).snapshot(version=err["version"])
    files = snap.files()
    assert files.num_rows > 0
    missing = [loc for loc in files.column("location").to_pylist() if not os.path.exists(loc)]
    assert missing, "time travel to a vacuumed version must point at files that no longer exist"
    assert all(m.startswith(str(path) + "/") for m in missing)
    # The latest version of the same table is complete.
    latest = DeltaTable(str(path)).snapshot().files()
    assert all(os.path.isfile(loc) for loc in latest.column("location").to_pylist())


def test_corpus_manifest_covers_every_table_folder():
    """Every folder under tables/ is in the manifest, so the parametrization above sees them all."""
    folders = {p.name for p in (CORPUS / "tables").iterdir() if p.is_dir()}
    assert folders == {t["table_path"].split("/", 1)[1] for t in TABLES}
    assert load_manifest()["counts"]["tables"] == len(TABLES)


BENCH = {b["name"]: b for b in (load_manifest() or {}).get("bench", [])}


@pytest.mark.parametrize("name", sorted(BENCH))
def test_corpus_bench_table(name: str):
    entry = BENCH[name]
    path = CORPUS / entry["path"]
    if not path.is_dir():
        pytest.skip(f"bench table not found at {path}")
    exp = entry["expected_log"]
    snap = DeltaTable(str(path)).snapshot()
    assert snap.version == exp["version"]
    assert snap.partition_columns == entry["partition_columns"]
    files = snap.files()
    assert files.num_rows == exp["num_active_files"]
    assert pc.sum(files.column("size")).as_py() == exp["total_active_file_bytes"]
    assert pc.count_distinct(files.column("path")).as_py() == exp["num_active_files"]
    pv = files.column("partition_values").combine_chunks()
    col = pc.struct_field(pv, entry["partition_columns"][0])
    assert col.null_count == 0
    assert pc.count_distinct(col).as_py() == exp["num_partition_values"]
    assert dv_cardinalities(files) == 0
    # Each file lives under its partition's directory (path and partition value come from one add).
    sample = files.slice(0, 1000)
    for path_, value in zip(
        sample.column("path").to_pylist(),
        pc.struct_field(
            sample.column("partition_values").combine_chunks(), entry["partition_columns"][0]
        ).to_pylist(),
        strict=True,
    ):
        assert path_.startswith(value + "/"), (path_, value)


@pytest.mark.parametrize("name", LOADABLE)
def test_query_planning_types_files_as_files_does(name: str):
    """Query planning (``select_files``) types the raw adds of every source together and only
    the predicate's columns; ``files()`` types source by source. Both must give every live file
    the same partition values and the same statistics for the predicate's column (the two
    disagreed on partition values after typed checkpoints, see test_log_layouts)."""
    import pyarrow as pa

    from delta_datafusion.predicate_parse import from_pyarrow

    path = table_path(name)
    files = DeltaTable(str(path)).snapshot().files()
    snap = DeltaTable(str(path)).snapshot()
    flat = [
        f.name for f in snap.schema if f.name not in snap.partition_columns and not pa.types.is_nested(f.type)
    ]
    column = flat[0] if flat else None
    pred = (
        None
        if column is None
        else from_pyarrow(pc.field(column).is_null() | ~pc.field(column).is_null(), snap.schema)
    )
    planned, total, _ = snap.select_files(pred)
    assert total == files.num_rows

    def facts(table):
        out = []
        for r in table.sort_by("location").select(["location", "partition_values", "stats"]).to_pylist():
            st = r["stats"] or {}
            bounds = (
                tuple((st.get(k) or {}).get(column) for k in ("minValues", "maxValues", "nullCount"))
                if column
                else ()
            )
            out.append((r["location"], r["partition_values"], st.get("numRecords"), bounds))
        return out

    assert facts(planned) == facts(files)
