"""Log layouts: commits only, classic / multi-part / V2 checkpoints (JSON and parquet manifests with
sidecars), ``_last_checkpoint`` hints, version gaps, time travel by version and timestamp (file
modification times and in-commit timestamps), app transactions, domain metadata, typed partition
values, typed stats and URL-encoded / absolute paths.

Corpus tables are copied to ``tmp_path`` before they are modified. Tables written with deltalake
(delta-rs) in ``tmp_path`` are cross-checked against deltalake's own file listing and against the
values the test wrote.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import unquote

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import (
    commit_path,
    copy_table,
    corpus_table,
    files_summary,
    live_row_count,
    log_dir,
    manifest_entry,
    manifest_tables,
    metadata_action,
    one_row_appends,
    require_corpus,
    write_commit,
)

from delta_datafusion.errors import (
    DeltaError,
    LogCorruptError,
    NonContiguousVersionsError,
    VersionNotFoundError,
)
from delta_datafusion.snapshot import count_rows
from delta_datafusion.table import DeltaTable

# ------------------------------------------------------------------------------------------------
# helpers


def ours(path: Path | str, version: int | None = None) -> list[tuple[str, int]]:
    return files_summary(DeltaTable(str(path)).snapshot(version=version).files())


def oracle(path: Path | str, version: int | None = None) -> list[tuple[str, int]]:
    """deltalake's live files (its paths are as written in the log: decode them)."""
    t = pa.table(deltalake.DeltaTable(str(path), version=version).get_add_actions(flatten=True))
    return sorted(
        zip(
            [unquote(p) for p in t.column("path").to_pylist()],
            t.column("size_bytes").to_pylist(),
            strict=True,
        )
    )


def sorted_files(path: Path | str, version: int | None = None) -> pa.Table:
    files = DeltaTable(str(path)).snapshot(version=version).files()
    return files.sort_by("path")


def comparable(files: pa.Table) -> list[dict]:
    """Everything of the file table that must not depend on the log layout."""
    return (
        files.sort_by("path")
        .select(["path", "location", "size", "partition_values", "stats", "deletion_vector"])
        .to_pylist()
    )


def set_mtime(path: Path, seconds: float) -> None:
    os.utime(path, (seconds, seconds))


def build_history(path: Path, *, checkpoints: tuple[int, ...] = (), stats_as_struct: bool = False) -> int:
    """A partitioned table with appends, a delete and a partition overwrite (versions 0..7).

    ``checkpoints``: versions after which deltalake writes a classic checkpoint. Returns the latest
    version.
    """
    config = (
        {"delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "false"}
        if stats_as_struct
        else None
    )

    def batch(k: int, parts: list[str]) -> pa.Table:
        n = len(parts)
        return pa.table(
            {"x": pa.array(range(k * 100, k * 100 + n), pa.int64()), "p": pa.array(parts, pa.string())}
        )

    def after(version: int) -> None:
        if version in checkpoints:
            deltalake.DeltaTable(str(path)).create_checkpoint()

    deltalake.write_deltalake(str(path), batch(0, ["a", "b", "a"]), partition_by=["p"], configuration=config)
    after(0)
    deltalake.write_deltalake(str(path), batch(1, ["a", "c"]), mode="append", partition_by=["p"])
    after(1)
    deltalake.DeltaTable(str(path)).delete("p = 'a'")  # removes whole files
    after(2)
    deltalake.write_deltalake(str(path), batch(3, ["a", "b", "d"]), mode="append", partition_by=["p"])
    after(3)
    deltalake.write_deltalake(
        str(path), batch(4, ["b", "b"]), mode="overwrite", predicate="p = 'b'", partition_by=["p"]
    )
    after(4)
    deltalake.write_deltalake(str(path), batch(5, ["c", "e"]), mode="append", partition_by=["p"])
    after(5)
    deltalake.DeltaTable(str(path)).delete("x = 501")  # rewrites the file of partition e
    after(6)
    deltalake.write_deltalake(str(path), batch(7, ["f"]), mode="append", partition_by=["p"])
    after(7)
    return 7


def checkpoint_file(path: Path, version: int) -> Path:
    return log_dir(path) / f"{version:020d}.checkpoint.parquet"


# ------------------------------------------------------------------------------------------------
# commits only / classic checkpoint


def test_commits_only_every_version_matches_deltalake(tmp_path: Path):
    latest = build_history(tmp_path / "t")
    dt_ = DeltaTable(str(tmp_path / "t"))
    for v in range(latest + 1):
        snap = dt_.snapshot(version=v)
        assert snap.segment.checkpoint is None
        assert [c for c, _ in snap.segment.commits] == list(range(v + 1))
        assert files_summary(snap.files()) == oracle(tmp_path / "t", v), f"version {v}"
    files = dt_.snapshot().files()
    # The replayed history: p=a deleted at v2 and re-added at v3, b overwritten at v4, e rewritten.
    rows = pq.read_table(files.column("location").to_pylist()).column("x").to_pylist()
    assert sorted(rows) == [101, 300, 302, 400, 401, 500, 700]
    assert count_rows(files) == live_row_count(files) == 7


@pytest.mark.parametrize("stats_as_struct", [False, True], ids=["stats-json", "stats-struct"])
def test_single_checkpoint_then_commits(tmp_path: Path, stats_as_struct: bool):
    t = tmp_path / "t"
    latest = build_history(t, checkpoints=(4,), stats_as_struct=stats_as_struct)
    snap = DeltaTable(str(t)).snapshot()
    assert snap.segment.checkpoint is not None
    assert (snap.segment.checkpoint.version, snap.segment.checkpoint.kind) == (4, "classic")
    assert [v for v, _ in snap.segment.commits] == [5, 6, 7]
    assert files_summary(snap.files()) == oracle(t)
    with_checkpoint = {v: comparable(sorted_files(t, v)) for v in range(latest + 1)}
    assert all(s["stats"]["numRecords"] is not None for s in with_checkpoint[latest])
    # Without the checkpoint the same state comes from the commits alone (stats from JSON).
    checkpoint_file(t, 4).unlink()
    snap2 = DeltaTable(str(t)).snapshot()
    assert snap2.segment.checkpoint is None
    for v in range(latest + 1):
        assert comparable(sorted_files(t, v)) == with_checkpoint[v], f"version {v}"


def test_checkpoint_without_earlier_commits(tmp_path: Path):
    """Log cleanup removed the commits before the checkpoint: the checkpoint is the start."""
    t = tmp_path / "t"
    build_history(t, checkpoints=(4,))
    before = comparable(sorted_files(t))
    for v in range(4):
        commit_path(t, v).unlink()
    commit_path(t, 4).unlink()  # the checkpoint version's own commit is not needed either
    snap = DeltaTable(str(t)).snapshot()
    assert snap.segment.checkpoint.version == 4
    assert comparable(snap.files().sort_by("path")) == before
    assert DeltaTable(str(t)).snapshot(version=4).files().num_rows == len(oracle(t, 4))
    with pytest.raises(VersionNotFoundError) as info:
        DeltaTable(str(t)).snapshot(version=3)
    assert "4..7" in str(info.value)


def test_two_checkpoints_newest_wins_and_time_travel_uses_older(tmp_path: Path):
    t = tmp_path / "t"
    build_history(t, checkpoints=(2, 5))
    dt_ = DeltaTable(str(t))
    assert dt_.snapshot().segment.checkpoint.version == 5
    assert dt_.snapshot(version=4).segment.checkpoint.version == 2
    assert dt_.snapshot(version=1).segment.checkpoint is None
    for v in range(8):
        assert ours(t, v) == oracle(t, v)


def test_manifest_entry_skips_when_the_corpus_is_absent(monkeypatch, tmp_path):
    """README: without the corpus its tests are skipped. manifest_entry() raised KeyError there,
    failing test_corpus_single_checkpoint_tables in a checkout with no ../shared/corpus."""
    import conftest

    monkeypatch.setattr(conftest, "MANIFEST", tmp_path / "manifest.json")
    conftest.load_manifest.cache_clear()
    try:
        with pytest.raises(pytest.skip.Exception, match="corpus not found"):
            manifest_entry("simple_table_with_checkpoint")
    finally:
        monkeypatch.undo()
        conftest.load_manifest.cache_clear()


def test_without_the_corpus_the_run_ends_with_its_warning(tmp_path):
    """README: without the corpus, the test run ends with a warning saying its tests were skipped.
    The warning came before pytest's short summary (-ra), under hundreds of SKIPPED lines; the
    run ended with 'N passed, M skipped'."""
    repo = Path(__file__).resolve().parents[1]
    env = {**os.environ, "DELTA_DATAFUSION_CORPUS": str(tmp_path / "no-corpus")}
    args = [
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "tests/test_log_layouts.py",
        "-k",
        "single_checkpoint",
    ]
    proc = subprocess.run(
        [sys.executable, *args], cwd=repo, env=env, capture_output=True, text=True, timeout=600
    )
    lines = proc.stdout.strip().splitlines()
    assert "skipped" in proc.stdout and proc.returncode == 0, proc.stdout
    assert "corpus tests were SKIPPED" in lines[-1], lines[-5:]


def test_corpus_single_checkpoint_tables():
    for name in ("simple_table_with_checkpoint", "app-txn-checkpoint", "125-iterator-bug"):
        entry = manifest_entry(name)
        snap = DeltaTable(str(corpus_table(name))).snapshot()
        ck = [c["version"] for c in entry["log"]["checkpoints"]]
        assert snap.segment.checkpoint.kind == "classic"
        assert snap.segment.checkpoint.version == max(ck)
        rows = next(
            e["rows"] for e in entry["expected"] if e["kind"] == "snapshot" and e.get("version") is None
        )
        assert live_row_count(snap.files()) == rows


# ------------------------------------------------------------------------------------------------
# multi-part checkpoints


def split_checkpoint(table: Path, version: int, parts: int, *, metadata_last: bool = False) -> list[Path]:
    """Rewrite the classic checkpoint at ``version`` as a multi-part checkpoint of ``parts`` files."""
    classic = checkpoint_file(table, version)
    t = pq.read_table(classic)
    if metadata_last:  # file actions first, protocol and metaData in the last part
        is_pm = pc.or_(t.column("protocol").is_valid(), t.column("metaData").is_valid())
        t = pa.concat_tables([t.filter(pc.invert(is_pm)), t.filter(is_pm)])
    n = t.num_rows
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    out = []
    for i in range(parts):
        p = log_dir(table) / f"{version:020d}.checkpoint.{i + 1:010d}.{parts:010d}.parquet"
        pq.write_table(t.slice(bounds[i], bounds[i + 1] - bounds[i]), p)
        out.append(p)
    classic.unlink()
    (log_dir(table) / "_last_checkpoint").write_text(
        json.dumps({"version": version, "size": n, "parts": parts})
    )
    return out


@pytest.mark.parametrize("metadata_last", [False, True], ids=["pm-first", "pm-last"])
def test_multi_part_checkpoint_written_from_classic(tmp_path: Path, metadata_last: bool):
    t = tmp_path / "t"
    build_history(t, checkpoints=(5,))
    before = {v: comparable(sorted_files(t, v)) for v in (5, 6, 7)}
    parts = split_checkpoint(t, 5, 3, metadata_last=metadata_last)
    snap = DeltaTable(str(t)).snapshot()
    ck = snap.segment.checkpoint
    assert (ck.version, ck.kind, [p.name for p in ck.parts]) == (5, "multi", [p.name for p in parts])
    assert len(snap.checkpoint_manifest.leaves) == 3
    for v in (5, 6, 7):
        assert comparable(sorted_files(t, v)) == before[v]
    assert snap.partition_columns == ["p"]


def test_incomplete_multi_part_checkpoint_is_ignored(tmp_path: Path):
    t = tmp_path / "t"
    build_history(t, checkpoints=(2, 5))
    before = comparable(sorted_files(t))
    parts = split_checkpoint(t, 5, 3)
    parts[1].unlink()  # part 2 of 3 is missing: the set is incomplete
    snap = DeltaTable(str(t)).snapshot()
    assert snap.segment.checkpoint.version == 2  # the older complete checkpoint
    assert [v for v, _ in snap.segment.commits] == [3, 4, 5, 6, 7]
    assert comparable(snap.files().sort_by("path")) == before


@pytest.mark.parametrize("kind", ["classic", "a part of a multi-part one"])
def test_a_checkpoint_file_of_0_bytes_is_ignored(tmp_path: Path, kind: str):
    """As Spark (SnapshotManagement lists checkpoints with ``getLen > 0``) and delta-kernel-rs
    (``should_process_log_file``): the older checkpoint and the commits after it give the
    version. This reader refused the table: "cannot read checkpoint parquet: Parquet file size is
    0 bytes"."""
    t = tmp_path / "t"
    build_history(t, checkpoints=(2, 5))
    before = {v: comparable(sorted_files(t, v)) for v in (5, 7)}
    if kind == "classic":
        checkpoint_file(t, 5).write_bytes(b"")
    else:
        split_checkpoint(t, 5, 3)[1].write_bytes(b"")
    snap = DeltaTable(str(t)).snapshot(version=5)
    assert snap.checkpoint_version == 2
    for v in (5, 7):
        assert comparable(sorted_files(t, v)) == before[v]


def _v2_manifest(table: Path, version: int, name: str, paths: list[str]) -> None:
    """A V2 checkpoint at ``version`` named ``name`` whose JSON manifest holds the adds of ``paths``."""
    lines = [
        {"checkpointMetadata": {"version": version}},
        {"protocol": _V2_PROTOCOL},
        metadata_action(_ID_SCHEMA, table_id="t"),
        *({"add": _add(p)["add"]} for p in paths),
    ]
    (log_dir(table) / f"{version:020d}.checkpoint.{name}.json").write_text(
        "".join(json.dumps(a) + "\n" for a in lines)
    )


_V2_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["v2Checkpoint"],
    "writerFeatures": ["v2Checkpoint"],
}
_ID_SCHEMA = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}


@pytest.mark.parametrize("hint", [None, "smaller"])
def test_two_v2_checkpoints_of_one_version_the_greater_name_is_read(tmp_path: Path, hint: str | None):
    """Complete checkpoints of one version describe one state, but when they disagree the
    reference readers read the same one: the greatest in Spark's CheckpointInstance order (V2
    over multi-part over classic, more parts over fewer, then the greater file name), as
    delta-kernel-rs does, whatever ``_last_checkpoint`` names. This reader took the hint's, else
    the smaller name (the first listed) and the fewer parts."""
    t = tmp_path / "t"
    log_dir(t).mkdir(parents=True)
    write_commit(
        t, 0, [{"protocol": _V2_PROTOCOL}, metadata_action(_ID_SCHEMA, table_id="t"), _add("a.parquet")]
    )
    smaller, greater = "00000000-0000-4000-8000-000000000001", "ffffffff-0000-4000-8000-000000000002"
    _v2_manifest(t, 0, smaller, ["a.parquet"])
    _v2_manifest(t, 0, greater, ["b.parquet"])
    if hint:
        name = f"{0:020d}.checkpoint.{smaller}.json"
        (log_dir(t) / "_last_checkpoint").write_text(
            json.dumps({"version": 0, "size": 4, "v2Checkpoint": {"path": name, "sizeInBytes": 1}})
        )
    snap = DeltaTable(str(t)).snapshot()
    assert snap.segment.checkpoint.parts[0].name == f"{0:020d}.checkpoint.{greater}.json"
    assert snap.files().column("path").to_pylist() == ["b.parquet"]


def test_two_multi_part_checkpoints_of_one_version_the_one_of_more_parts_is_read(tmp_path: Path):
    """See test_two_v2_checkpoints_of_one_version_the_greater_name_is_read: of two complete
    multi-part sets, Spark and delta-kernel-rs read the one of more parts."""
    t = tmp_path / "t"
    build_history(t, checkpoints=(5,))
    classic = pq.read_table(checkpoint_file(t, 5))
    live = sorted_files(t, 5).column("path").to_pylist()
    split_checkpoint(t, 5, 3)
    # a set of 2 parts at the same version that has lost the first live file's add
    add_paths = pc.struct_field(classic.column("add"), "path")
    fewer = classic.filter(pc.invert(pc.fill_null(pc.equal(add_paths, live[0]), False)))
    for i, rows in enumerate([fewer.slice(0, 2), fewer.slice(2)]):
        pq.write_table(rows, log_dir(t) / f"{5:020d}.checkpoint.{i + 1:010d}.{2:010d}.parquet")
    (log_dir(t) / "_last_checkpoint").write_text(json.dumps({"version": 5, "size": 1, "parts": 2}))
    snap = DeltaTable(str(t)).snapshot(version=5)
    assert len(snap.segment.checkpoint.parts) == 3
    assert sorted(snap.files().column("path").to_pylist()) == live


def test_corpus_multi_part_checkpoint_and_missing_part(copy_corpus_table):
    name = "v1-multi-part-struct-stats-only"
    src = corpus_table(name)
    snap = DeltaTable(str(src)).snapshot()
    ck = snap.segment.checkpoint
    assert (ck.version, ck.kind, len(ck.parts)) == (5, "multi", 3)
    want = files_summary(snap.files())
    rows = live_row_count(snap.files())
    t = copy_corpus_table(name)
    part2 = next(log_dir(t).glob("*.checkpoint.0000000002.0000000003.parquet"))
    part2.unlink()
    snap2 = DeltaTable(str(t)).snapshot()  # _last_checkpoint still names the 3-part checkpoint
    assert snap2.segment.checkpoint is None
    assert snap2.version == 5
    assert files_summary(snap2.files()) == want
    assert live_row_count(snap2.files()) == rows


def test_corpus_multi_part_five_parts():
    snap = DeltaTable(str(corpus_table("parquet_row_group_skipping"))).snapshot()
    assert (snap.segment.checkpoint.kind, len(snap.segment.checkpoint.parts)) == ("multi", 5)
    assert [p.name.split(".")[2] for p in snap.segment.checkpoint.parts] == [f"{i:010d}" for i in range(1, 6)]
    assert live_row_count(snap.files()) == 5


# ------------------------------------------------------------------------------------------------
# V2 checkpoints


V2_TABLES = [
    ("v2-checkpoint-json", 2, "json", 2),
    ("v2-checkpoint-parquet", 2, "parquet", 2),
    ("v2-checkpoints-json-with-sidecars", 6, "json", None),
    ("v2-checkpoints-json-without-sidecars", 2, "json", 0),
    ("v2-checkpoints-parquet-without-sidecars", 2, "parquet", 0),
    ("v2-parquet-sidecars-struct-stats-only", 5, "parquet", 1),
    ("checkpoint-v2-table", 8, "json", None),
]


@pytest.mark.parametrize(("name", "version", "fmt", "sidecars"), V2_TABLES, ids=[t[0] for t in V2_TABLES])
def test_v2_checkpoint_manifest_and_sidecars(name: str, version: int, fmt: str, sidecars: int | None):
    path = corpus_table(name)
    snap = DeltaTable(str(path)).snapshot()
    ck = snap.segment.checkpoint
    assert (ck.version, ck.kind) == (version, "v2")
    assert ck.parts[0].name.endswith("." + fmt)
    leaves = snap.checkpoint_manifest.leaves
    on_disk = (
        sorted(p.name for p in (log_dir(path) / "_sidecars").glob(f"{version:020d}.*"))
        if sidecars != 0
        else []
    )
    if sidecars == 0:
        assert leaves == [] or all(leaf.path == ck.parts[0].path for leaf in leaves)
    else:
        names = sorted(Path(leaf.path).name for leaf in leaves)
        assert all(Path(leaf.path).parent.name == "_sidecars" for leaf in leaves)
        if sidecars is not None:
            assert len(names) == sidecars
        assert set(names) <= set(on_disk) and names
    entry = manifest_entry(name)
    rows = next(e["rows"] for e in entry["expected"] if e["kind"] == "snapshot" and e.get("version") is None)
    assert live_row_count(snap.files()) == rows


@pytest.mark.parametrize("name", ["v2-checkpoint-json", "v2-checkpoint-parquet"])
def test_v2_checkpoint_without_last_checkpoint_and_fallback_to_commits(copy_corpus_table, name: str):
    t = copy_corpus_table(name)
    want = comparable(sorted_files(t))
    (log_dir(t) / "_last_checkpoint").unlink()
    snap = DeltaTable(str(t)).snapshot()
    assert snap.segment.checkpoint.kind == "v2"
    assert comparable(snap.files().sort_by("path")) == want
    # Remove the manifest: the commits 0..2 rebuild the same state; the orphan sidecars are unused.
    Path(snap.segment.checkpoint.parts[0].path).unlink()
    snap2 = DeltaTable(str(t)).snapshot()
    assert snap2.segment.checkpoint is None
    assert comparable(snap2.files().sort_by("path")) == want


@pytest.mark.parametrize("name", ["v2-checkpoint-json", "v2-checkpoint-parquet"])
def test_v2_commit_after_checkpoint_removes_a_sidecar_file(copy_corpus_table, name: str):
    t = copy_corpus_table(name)
    before = DeltaTable(str(t)).snapshot()
    assert before.version == 2
    files = before.files()
    victim = files.column("path")[0].as_py()
    kept = files_summary(files)[:]
    write_commit(
        t,
        3,
        [
            {"commitInfo": {"timestamp": 1, "operation": "DELETE"}},
            {"remove": {"path": victim, "deletionTimestamp": 1, "dataChange": True}},
        ],
    )
    after = DeltaTable(str(t)).snapshot()
    assert after.segment.checkpoint.version == 2 and [v for v, _ in after.segment.commits] == [3]
    assert files_summary(after.files()) == [f for f in kept if f[0] != victim]
    assert len(kept) - 1 == after.files().num_rows


def test_v2_json_manifest_txn_and_domain_metadata(copy_corpus_table):
    t = copy_corpus_table("v2-checkpoint-json")
    manifest = next(log_dir(t).glob("00000000000000000002.checkpoint.*.json"))
    with open(manifest, "a") as fh:
        fh.write(json.dumps({"txn": {"appId": "ck-app", "version": 9, "lastUpdated": 5}}) + "\n")
        fh.write(
            json.dumps({"domainMetadata": {"domain": "ck.dom", "configuration": '{"a":1}', "removed": False}})
            + "\n"
        )
        fh.write(
            json.dumps({"domainMetadata": {"domain": "ck.keep", "configuration": "{}", "removed": False}})
            + "\n"
        )
    snap = DeltaTable(str(t)).snapshot()
    assert snap.transactions == {"ck-app": 9}
    assert snap.domain_metadata == {"ck.dom": '{"a":1}', "ck.keep": "{}"}
    write_commit(
        t,
        3,
        [
            {"commitInfo": {"timestamp": 1}},
            {"txn": {"appId": "ck-app", "version": 10}},
            {"domainMetadata": {"domain": "ck.dom", "configuration": '{"a":1}', "removed": True}},
        ],
    )
    snap = DeltaTable(str(t)).snapshot()
    assert snap.transactions == {"ck-app": 10}
    assert snap.domain_metadata == {"ck.keep": "{}"}
    assert DeltaTable(str(t)).snapshot(version=2).domain_metadata == {"ck.dom": '{"a":1}', "ck.keep": "{}"}


def test_v2_classic_named_checkpoint_with_sidecars():
    path = corpus_table("v2-classic-checkpoint-parquet")
    snap = DeltaTable(str(path)).snapshot()
    assert snap.segment.checkpoint.kind == "classic"
    leaves = snap.checkpoint_manifest.leaves
    assert leaves and all(Path(leaf.path).parent.name == "_sidecars" for leaf in leaves)
    assert live_row_count(snap.files()) == 20


@pytest.mark.parametrize("form", ["file_uri", "absolute_path", "relative_name"])
def test_sidecar_paths_are_uri_encoded(tmp_path: Path, form: str):
    """Sidecar paths are URI-encoded like add paths, and decoded exactly once: in a folder named
    'sc 100%25', '%2525' is the '%25' of the name (decoded twice it named the folder 'sc 100%')."""
    from urllib.parse import quote

    src = corpus_table("v2-checkpoints-json-with-sidecars")
    want = DeltaTable(str(src)).snapshot().files().column("path").to_pylist()
    root = tmp_path / "sc 100%25"
    shutil.copytree(src, root)
    spell = {
        "file_uri": lambda name: "file://" + quote(f"{root}/_delta_log/_sidecars/{name}"),
        "absolute_path": lambda name: quote(f"{root}/_delta_log/_sidecars/{name}"),
        "relative_name": lambda name: quote(name, safe=""),
    }[form]
    for manifest in (root / "_delta_log").glob("*.checkpoint.*.json"):
        actions = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
        for a in actions:
            if "sidecar" in a:
                a["sidecar"]["path"] = spell(a["sidecar"]["path"])
        manifest.write_text("".join(json.dumps(a) + "\n" for a in actions))
    assert sorted(DeltaTable(str(root)).snapshot().files().column("path").to_pylist()) == sorted(want)


def _sidecar_column_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    import delta_datafusion.log.checkpoint as ck

    reads: list[str] = []
    real = ck.read_parquet_actions

    def spy(storage, info, columns):
        if "sidecar" in columns:
            reads.append(info.path if hasattr(info, "path") else info)
        return real(storage, info, columns)

    monkeypatch.setattr(ck, "read_parquet_actions", spy)
    return reads


def test_all_null_sidecar_column_is_not_read(tmp_path, monkeypatch):
    """deltalake's classic checkpoints carry a sidecar column that is null in every row: the footer
    statistics say so and the column is not read; where they show sidecar rows (a V2 checkpoint
    under a classic name) it is, and the sidecars are the leaves."""
    t = tmp_path / "t"
    for k in range(3):
        deltalake.write_deltalake(str(t), pa.table({"id": [k, k + 10]}), mode="append")
    deltalake.DeltaTable(str(t)).create_checkpoint()
    ckpt = next((t / "_delta_log").glob("*.checkpoint.parquet"))
    sidecar = pq.read_table(ckpt, columns=["sidecar"]).column("sidecar")
    assert sidecar.null_count == len(sidecar) > 0  # the premise: present, all null
    reads = _sidecar_column_reads(monkeypatch)
    snap = DeltaTable(str(t)).snapshot()
    assert [Path(leaf.path).name for leaf in snap.checkpoint_manifest.leaves] == [ckpt.name]
    assert live_row_count(snap.files()) == 6
    assert reads == []

    snap = DeltaTable(str(corpus_table("v2-classic-checkpoint-parquet"))).snapshot()
    assert all(Path(leaf.path).parent.name == "_sidecars" for leaf in snap.checkpoint_manifest.leaves)
    assert live_row_count(snap.files()) == 20
    assert len(reads) == 1


def _leaf_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The columns of every parquet read of the log from now on (checkpoint leaves and parts)."""
    reads: list[list[str]] = []
    real = pq.ParquetFile.read

    def spy(self, columns=None, **kwargs):
        reads.append(list(columns or []))
        return real(self, columns=columns, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spy)
    return reads


def test_all_null_checkpoint_columns_are_not_read(tmp_path, monkeypatch):
    """A checkpoint whose txn, domainMetadata, deletion vector and row id columns are null in every
    row (deltalake's, with neither) has them read as absent: the footer's null counts say so, and
    the typed files are those of a read that decodes them; the stats read apart from the rest of
    the leaf (a single-leaf checkpoint with later commits) leaves out dataChange as well."""
    import delta_datafusion.log.checkpoint as ck
    import delta_datafusion.snapshot as snapshot_module

    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)  # the one-leaf overlap, on any machine
    t = tmp_path / "t"
    ids = list(range(40))
    deltalake.write_deltalake(str(t), pa.table({"id": ids, "p": [f"p{i}" for i in ids]}), partition_by=["p"])
    deltalake.DeltaTable(str(t)).create_checkpoint()
    deltalake.write_deltalake(str(t), pa.table({"id": [99], "p": ["p0"]}), mode="append", partition_by=["p"])
    ckpt = next((t / "_delta_log").glob("*.checkpoint.parquet"))
    for column in ("txn", "domainMetadata", "add"):  # the premise: present, all null (no DVs either)
        values = pq.read_table(ckpt, columns=[column]).column(column)
        if column == "add":
            values = pc.struct_field(values.combine_chunks(), "deletionVector")
        assert values.null_count == len(values) == 42  # 40 adds, protocol, metaData
    reads = _leaf_reads(monkeypatch)
    snap = DeltaTable(str(t)).snapshot()
    files = snap.files()
    assert (files.num_rows, snap.transactions, snap.domain_metadata) == (41, {}, {})
    asked = {c for columns in reads for c in columns}
    assert "add.stats" in asked  # the leaf was read apart: stats, then the rest
    unread = {"txn", "domainMetadata", "add.deletionVector", "add.baseRowId", "add.defaultRowCommitVersion"}
    assert asked.isdisjoint(unread | {"add.dataChange"}), asked
    monkeypatch.setattr(ck, "SKIPPED_WHEN_NULL", frozenset())  # every column decoded
    whole = DeltaTable(str(t)).snapshot().files()
    assert {"txn", "add.deletionVector"} <= {c for columns in reads for c in columns}
    assert files.equals(whole)


def test_checkpoint_columns_with_a_value_are_read(tmp_path, monkeypatch):
    """The footer shows a value in the checkpoint's txn column: it is read, and the transaction
    comes from the checkpoint; a footer without null counts is not taken for all null."""
    import delta_datafusion.log.checkpoint as ck

    t = tmp_path / "t"
    deltalake.write_deltalake(
        str(t),
        pa.table({"id": [1, 2]}),
        commit_properties=deltalake.CommitProperties(app_transactions=[deltalake.Transaction("app", 7)]),
    )
    deltalake.write_deltalake(str(t), pa.table({"id": [3]}), mode="append")
    deltalake.DeltaTable(str(t)).create_checkpoint()
    reads = _leaf_reads(monkeypatch)
    snap = DeltaTable(str(t)).snapshot()
    assert (snap.files().num_rows, snap.transactions) == (2, {"app": 7})
    asked = {c for columns in reads for c in columns}
    assert "txn" in asked and "domainMetadata" not in asked
    md = pq.ParquetFile(next((t / "_delta_log").glob("*.checkpoint.parquet"))).metadata
    assert ck._all_null(md, "domainMetadata", None) and not ck._all_null(md, "txn", None)
    assert not ck._all_null(md, "domainMetadata", [])  # no row group read: nothing known
    assert not ck._all_null(md, "add.partitionValues", None)  # repeated: never skipped


def test_v2_time_travel_between_checkpoints():
    path = corpus_table("checkpoint-v2-table")
    dt_ = DeltaTable(str(path))
    assert dt_.snapshot(version=7).segment.checkpoint.version == 6
    assert dt_.snapshot(version=5).segment.checkpoint is None
    assert [v for v, _ in dt_.snapshot(version=7).segment.commits] == [7]


# ------------------------------------------------------------------------------------------------
# _last_checkpoint hints: the listing decides, a bad hint changes nothing


def _hint_variants(real: str, older: int | None) -> dict[str, str | None]:
    return {
        "deleted": None,
        "empty": "",
        "garbage": "{not json",
        "truncated": real[: len(real) // 2],
        "json-array": "[1, 2]",
        "string-version": json.dumps({"version": "10", "size": 3}),
        "future-version": json.dumps({"version": 999, "size": 3}),
        "stale-version": json.dumps({"version": older if older is not None else 5, "size": 3}),
        "wrong-parts": json.dumps({"version": json.loads(real)["version"], "size": 3, "parts": 4}),
        "v2-path-missing": json.dumps(
            {
                "version": json.loads(real)["version"],
                "size": 3,
                "v2Checkpoint": {"path": "nope.json", "sizeInBytes": 1},
            }
        ),
    }


HINT_TABLES = [
    ("dv-with-columnmapping", 10, None),
    ("table_with_deletion_logs", 20, 10),
    ("v2-checkpoint-json", 2, None),
]
HINT_CASES = [
    pytest.param(table, ck, older, variant, id=f"{table}-{variant}")
    for table, ck, older in HINT_TABLES
    for variant in _hint_variants('{"version": 1}', older)
]


@pytest.mark.parametrize(("name", "checkpoint", "older", "variant"), HINT_CASES)
def test_bad_last_checkpoint_hint_gives_same_snapshot(copy_corpus_table, name, checkpoint, older, variant):
    t = copy_corpus_table(name)
    hint = log_dir(t) / "_last_checkpoint"
    reference = DeltaTable(str(t)).snapshot()
    want = comparable(reference.files())
    content = _hint_variants(hint.read_text(), older)[variant]
    if content is None:
        hint.unlink()
    else:
        hint.write_text(content)
    snap = DeltaTable(str(t)).snapshot()
    assert snap.version == reference.version
    assert snap.segment.checkpoint.version == checkpoint
    assert snap.segment.checkpoint.parts == reference.segment.checkpoint.parts
    assert comparable(snap.files()) == want


def test_corpus_corrupted_last_checkpoint():
    path = corpus_table("corrupted-last-checkpoint-kernel")
    assert (log_dir(path) / "_last_checkpoint").stat().st_size == 0
    snap = DeltaTable(str(path)).snapshot()
    assert snap.segment.checkpoint.version == 10
    assert live_row_count(snap.files()) == 100


# ------------------------------------------------------------------------------------------------
# version gaps and time travel by version


def test_gap_after_checkpoint_names_missing_version(copy_corpus_table):
    t = copy_corpus_table("dv-with-columnmapping")  # checkpoint 10, commits 0..15
    commit_path(t, 12).unlink()
    dt_ = DeltaTable(str(t))
    with pytest.raises(NonContiguousVersionsError) as info:
        dt_.snapshot()
    msg = str(info.value)
    assert "missing 12" in msg and str(log_dir(t)) in msg
    assert dt_.snapshot(version=11).version == 11  # versions before the gap still load
    assert live_row_count(dt_.snapshot(version=11).files()) == live_row_count(
        DeltaTable(str(corpus_table("dv-with-columnmapping"))).snapshot(version=11).files()
    )


def test_listing_that_missed_a_commit_being_written_is_retried(copy_corpus_table, monkeypatch):
    """A listing taken while a writer commits 12 and 13 can see 13 but not 12 (a directory is not
    listed atomically): the log is listed again instead of reporting a gap that is not there."""
    from delta_datafusion.storage import Storage

    t = copy_corpus_table("dv-with-columnmapping")  # checkpoint 10, commits 0..15
    real = Storage.list_names
    calls = []

    def racing(self, path):
        names, info = real(self, path)
        calls.append(path)
        if len(calls) == 1:  # the first listing missed commit 12
            names = [n for n in names if n != f"{12:020d}.json"]
            info = None if info is None else {n: f for n, f in info.items() if n in names}
        return names, info

    monkeypatch.setattr(Storage, "list_names", racing)
    snap = DeltaTable(str(t)).snapshot()
    assert snap.version == 15 and len(calls) == 2
    assert [v for v, _ in snap.segment.commits] == [11, 12, 13, 14, 15]


def test_listing_in_the_folders_own_order_is_taken_once(copy_corpus_table, monkeypatch):
    """A local folder lists its files in no particular order (they are not sorted by name, which
    took 0.5 ms of every load of a 3,000-commit log): commits are ordered by version, and the
    listing is not mistaken for one that missed a commit and taken again."""
    from delta_datafusion.storage import Storage

    t = copy_corpus_table("dv-with-columnmapping")  # checkpoint 10, commits 0..15
    want = DeltaTable(str(t)).snapshot()
    real = Storage.list_names
    calls = []

    def reversed_order(self, path):
        names, info = real(self, path)
        calls.append(path)
        return sorted(names, reverse=True), info

    monkeypatch.setattr(Storage, "list_names", reversed_order)
    snap = DeltaTable(str(t)).snapshot()
    assert len(calls) == 1
    assert snap.segment == want.segment and snap.files().equals(want.files())
    assert DeltaTable(str(t)).listing().commit_versions == list(range(16))


def test_gap_before_checkpoint_only_breaks_older_versions(copy_corpus_table):
    t = copy_corpus_table("dv-with-columnmapping")
    commit_path(t, 3).unlink()
    commit_path(t, 4).unlink()
    dt_ = DeltaTable(str(t))
    assert dt_.snapshot().version == 15
    assert dt_.snapshot(version=10).segment.checkpoint.version == 10
    # a newer checkpoint (10) lets a log cleanup remove the commits before it, in any order:
    # version 6 is gone, not the log corrupt
    with pytest.raises(VersionNotFoundError) as info:
        dt_.snapshot(version=6)
    assert "3..4" in str(info.value) and "checkpoint at version 10" in str(info.value)


def test_log_cleanup_caught_halfway_is_a_version_gone_not_a_corrupt_log(tmp_path: Path):
    """A log cleanup up to a checkpoint deletes the older commits and checkpoints in no set order:
    a listing taken halfway can still hold an older checkpoint (3) and the commits after it but
    one (4). Versions 4..7 can no longer be read, as once the cleanup ends: a
    VersionNotFoundError; it was a NonContiguousVersionsError calling the log corrupt (seen racing
    deltalake's cleanup_metadata with table_changes). The gap stays a gap for the versions after
    the newest checkpoint (test_gap_after_checkpoint_names_missing_version)."""
    t = tmp_path / "t"
    build_history(t, checkpoints=(3, 8))  # versions 0..7 (no checkpoint at 8: none is written)
    deltalake.write_deltalake(str(t), pa.table({"x": [800], "p": ["g"]}), mode="append", partition_by=["p"])
    deltalake.DeltaTable(str(t)).create_checkpoint()  # at version 8
    commit_path(t, 4).unlink()  # what the cleanup up to 8 removed so far
    table = DeltaTable(str(t))
    assert ours(t) == oracle(t)  # the latest version still reads from its checkpoint
    for version in (4, 6, 7):
        with pytest.raises(VersionNotFoundError, match=rf"version {version} .*missing commits 4 between"):
            table.snapshot(version=version)
    assert table.snapshot(version=3).version == 3  # before the gap: the older checkpoint
    with pytest.raises(VersionNotFoundError):
        table.changes(6, 8)


def test_gap_without_checkpoint(tmp_path: Path):
    t = tmp_path / "t"
    build_history(t)
    commit_path(t, 5).unlink()
    with pytest.raises(NonContiguousVersionsError) as info:
        DeltaTable(str(t)).snapshot()
    assert "missing 5" in str(info.value)
    assert DeltaTable(str(t)).snapshot(version=4).version == 4


def test_time_travel_by_version_errors_name_the_available_range(copy_corpus_table):
    t = copy_corpus_table("dv-with-columnmapping")
    dt_ = DeltaTable(str(t))
    for bad in (16, 100, -1):
        with pytest.raises(VersionNotFoundError) as info:
            dt_.snapshot(version=bad)
        assert "0..15" in str(info.value) and str(bad) in str(info.value)
    for bad in ("3", 2.0, True):
        with pytest.raises(DeltaError):
            dt_.snapshot(version=bad)
    with pytest.raises(DeltaError):
        dt_.snapshot(version=1, timestamp=0)
    for v in range(10):  # log cleanup: commits before the checkpoint are gone
        commit_path(t, v).unlink()
    with pytest.raises(VersionNotFoundError) as info:
        dt_.snapshot(version=5)
    assert "10..15" in str(info.value)
    assert dt_.snapshot(version=10).version == 10


# ------------------------------------------------------------------------------------------------
# time travel by timestamp


BASE = 1_700_000_000  # seconds; commit k gets BASE + 100 k


def _stamp_commits(t: Path, latest: int) -> list[int]:
    for v in range(latest + 1):
        set_mtime(commit_path(t, v), BASE + 100 * v)
    return [(BASE + 100 * v) * 1000 for v in range(latest + 1)]


def test_time_travel_by_timestamp_file_mtimes(tmp_path: Path):
    t = tmp_path / "t"
    latest = build_history(t)
    ms = _stamp_commits(t, latest)
    dt_ = DeltaTable(str(t))
    assert dt_.history().column("timestamp").to_pylist() == ms
    for v in range(latest + 1):
        assert dt_.snapshot(timestamp=ms[v]).version == v
        assert dt_.snapshot(timestamp=ms[v] + 99_999).version == v
    assert dt_.snapshot(timestamp=ms[-1] + 10**9).version == latest
    when = dt.datetime.fromtimestamp(BASE + 250, tz=dt.timezone.utc)
    assert dt_.snapshot(timestamp=when).version == 2
    assert dt_.snapshot(timestamp=when.isoformat()).version == 2
    assert dt_.snapshot(timestamp=when.replace(tzinfo=None)).version == 2  # naive = UTC
    assert files_summary(dt_.snapshot(timestamp=when).files()) == oracle(t, 2)
    with pytest.raises(VersionNotFoundError) as info:
        dt_.snapshot(timestamp=ms[0] - 1)
    msg = str(info.value)
    assert "version 0" in msg and f"version {latest}" in msg
    with pytest.raises(DeltaError):
        dt_.snapshot(timestamp="not a time")


def test_digits_alone_are_a_version_or_refused_never_a_time(tmp_path: Path, capsys):
    """Text of digits alone: where a version or a time is taken (table_changes(), changes(), the
    CLI's changes START/END and sql --as-of) it is a version; where only a time is taken
    (snapshot(timestamp=), register_table(timestamp=), OPTIONS 'timestamp', the CLI's
    --timestamp) '20231114' read as a basic-form date and '1700000000000' was refused as no
    ISO-8601 time while the integer is epoch milliseconds. The same text meant a version in one
    place and a date in another: there it is now an ArgumentError naming the forms taken."""
    import datafusion

    import delta_datafusion as dd
    from delta_datafusion import cli
    from delta_datafusion.errors import ArgumentError

    t = one_row_appends(tmp_path / "t", 3, {"delta.enableChangeDataFeed": "true"})
    ms = _stamp_commits(t, 2)
    table = DeltaTable(str(t))
    iso = dt.datetime.fromtimestamp(ms[1] / 1000, tz=dt.timezone.utc).isoformat()
    basic = dt.datetime.fromtimestamp(ms[1] / 1000, tz=dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for when in (iso, basic, ms[1]):  # each entry point takes an ISO-8601 time (Python: ms too)
        assert table.snapshot(timestamp=when).version == 1
    words = "digits alone are not read as a time"
    for text in ("20231114", "1700000000100", " 1 "):
        with pytest.raises(ArgumentError, match=words):
            table.snapshot(timestamp=text)
        ctx = datafusion.SessionContext()
        with pytest.raises(ArgumentError, match=words):
            dd.register_table(ctx, "t", str(t), timestamp=text)
        dd.register(ctx)
        with pytest.raises(Exception, match=f"OPTIONS 'timestamp' '{text}': {words}"):
            ctx.sql(
                f"CREATE EXTERNAL TABLE x STORED AS DELTA LOCATION '{t}' OPTIONS ('timestamp' '{text}')"
            ).collect()
        for command in ("info", "files"):
            assert cli.main([command, str(t), "--timestamp", text]) == 2
            assert words in capsys.readouterr().err
    ctx = datafusion.SessionContext()
    dd.register(ctx)
    ctx.sql(
        f"CREATE EXTERNAL TABLE x STORED AS DELTA LOCATION '{t}' OPTIONS ('timestamp' '{basic}')"
    ).collect()
    assert ctx.sql("SELECT count(*) AS n FROM x").to_pydict() == {"n": [2]}
    # where a version or a time is taken, digits are a version
    assert table.changes("1").start_version == 1
    got = ctx.sql(f"SELECT DISTINCT _commit_version AS v FROM table_changes('{t}', '1') ORDER BY v")
    assert got.to_pydict() == {"v": [1, 2]}
    assert cli.main(["sql", "SELECT count(*) AS n FROM t", "--table", f"t={t}", "--as-of", "t=1"]) == 0
    assert "2" in capsys.readouterr().out.split()
    # a date written without dashes is a version there: the error says how the date is written
    with pytest.raises(VersionNotFoundError, match=r"'20231114' is read as a version.*'2023-11-14'"):
        table.changes("20231114")
    with pytest.raises(Exception, match=r"'20231114' is read as a version.*'2023-11-14'"):
        ctx.sql(f"SELECT * FROM table_changes('{t}', 0, '20231114')").collect()
    with pytest.raises(VersionNotFoundError) as info:  # digits that are no date: no hint
        table.changes("99999999")
    assert "read as a version" not in str(info.value)
    capsys.readouterr()
    assert cli.main(["sql", "SELECT 1", "--table", f"t={t}", "--as-of", "t=20231114"]) == 2
    assert re.search(
        r"--as-of t=20231114: .*'20231114' is read as a version.*'2023-11-14'", capsys.readouterr().err
    )


def test_time_travel_by_timestamp_non_monotonic_mtimes(tmp_path: Path):
    """A commit file older than its predecessor counts as predecessor + 1 ms (Delta's rule)."""
    t = tmp_path / "t"
    latest = build_history(t)
    ms = _stamp_commits(t, latest)
    set_mtime(commit_path(t, 2), BASE + 50)  # earlier than commit 1
    dt_ = DeltaTable(str(t))
    stamps = dt_.history().column("timestamp").to_pylist()
    assert stamps[2] == ms[1] + 1
    assert all(a < b for a, b in zip(stamps, stamps[1:], strict=False))
    assert dt_.snapshot(timestamp=ms[1]).version == 1
    assert dt_.snapshot(timestamp=ms[1] + 1).version == 2
    assert dt_.snapshot(timestamp=(BASE + 50) * 1000).version == 0


def _ict_table(tmp_path: Path) -> tuple[Path, list[int]]:
    """deltalake commits 0..2 (mtime timestamps), then in-commit timestamps enabled at version 3."""
    t = tmp_path / "ict"
    for k in range(3):
        deltalake.write_deltalake(str(t), pa.table({"x": pa.array([k], pa.int64())}), mode="append")
    ms = _stamp_commits(t, 2)
    md = next(
        json.loads(line)["metaData"]
        for line in commit_path(t, 0).read_text().splitlines()
        if '"metaData"' in line
    )
    t3 = (BASE + 1000) * 1000 + 123
    t4 = t3 + 5_000
    md = dict(md)
    md["configuration"] = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": str(t3),
    }
    write_commit(
        t,
        3,
        [
            {"commitInfo": {"timestamp": 1, "inCommitTimestamp": t3, "operation": "SET TBLPROPERTIES"}},
            {
                "protocol": {
                    "minReaderVersion": 1,
                    "minWriterVersion": 7,
                    "writerFeatures": ["inCommitTimestamp"],
                }
            },
            {"metaData": md},
        ],
    )
    data = next(log_dir(t).parent.glob("*.parquet"))
    write_commit(
        t,
        4,
        [
            {"commitInfo": {"timestamp": 2, "inCommitTimestamp": t4, "operation": "WRITE"}},
            {
                "add": {
                    "path": data.name,
                    "partitionValues": {},
                    "size": data.stat().st_size,
                    "modificationTime": 1,
                    "dataChange": True,
                }
            },
        ],
    )
    # Misleading file times: the in-commit timestamps, not the mtimes, count from version 3.
    set_mtime(commit_path(t, 3), BASE - 10_000)
    set_mtime(commit_path(t, 4), BASE - 20_000)
    return t, ms + [t3, t4]


def test_time_travel_by_timestamp_in_commit_timestamps_enabled_later(tmp_path: Path):
    t, stamps = _ict_table(tmp_path)
    dt_ = DeltaTable(str(t))
    assert dt_.history().column("timestamp").to_pylist() == stamps
    snap = dt_.snapshot()
    assert snap.commit_timestamp(4) == stamps[4]
    assert dt_.snapshot(version=1).commit_timestamp() == stamps[1]
    for v, ts in enumerate(stamps):
        assert dt_.snapshot(timestamp=ts).version == v
    assert dt_.snapshot(timestamp=stamps[3] - 1).version == 2
    assert dt_.snapshot(timestamp=stamps[4] - 1).version == 3
    assert dt_.snapshot(timestamp=stamps[4] + 10**7).version == 4
    with pytest.raises(VersionNotFoundError):
        dt_.snapshot(timestamp=stamps[0] - 1)


def test_time_travel_by_timestamp_ict_enabled_after_commits_with_later_file_times(tmp_path: Path):
    """Clock skew: the commits before in-commit timestamps were enabled have file times after the
    enablement timestamp. A timestamp at or after the enablement timestamp is looked for among the
    ICT commits only, an earlier one among the commits before (PROTOCOL.md), never in one merged
    (unsorted) list."""
    t, stamps = _ict_table(tmp_path)
    t3, t4 = stamps[3], stamps[4]
    set_mtime(commit_path(t, 1), BASE + 1500)  # after t3 = BASE + 1000.123 s
    set_mtime(commit_path(t, 2), BASE + 1200)  # adjusted to BASE + 1500.001 s
    dt_ = DeltaTable(str(t))
    assert dt_.history().column("timestamp").to_pylist()[1:3] == [
        (BASE + 1500) * 1000,
        (BASE + 1500) * 1000 + 1,
    ]
    cases = {t3: 3, t3 + 1: 3, t4 - 1: 3, t4: 4, (BASE + 1500) * 1000: 4, t3 - 1: 0, stamps[0]: 0}
    assert {ts: dt_.snapshot(timestamp=ts).version for ts in cases} == cases
    with pytest.raises(VersionNotFoundError):
        dt_.snapshot(timestamp=stamps[0] - 1)


def test_time_travel_by_timestamp_ict_corpus_ignores_mtimes(copy_corpus_table):
    t = copy_corpus_table("cdc_ict_table")
    for v in range(4):
        set_mtime(commit_path(t, v), 1_000_000_000 + v)  # 2001: nothing to do with the commits
    ict = []
    for v in range(4):
        first = json.loads(commit_path(t, v).read_text().splitlines()[0])
        ict.append(first["commitInfo"]["inCommitTimestamp"])
    dt_ = DeltaTable(str(t))
    assert dt_.history().column("timestamp").to_pylist() == ict
    assert dt_.snapshot(timestamp=ict[3]).version == 3
    assert dt_.snapshot(timestamp=ict[2]).version == 2
    assert dt_.snapshot(timestamp=ict[3] - 1).version == 2
    assert live_row_count(dt_.snapshot(timestamp=ict[2]).files()) == 2
    with pytest.raises(VersionNotFoundError):
        dt_.snapshot(timestamp=1_000_000_000_000)


# ------------------------------------------------------------------------------------------------
# app transactions and domain metadata


@pytest.mark.parametrize("name", ["app-txn-checkpoint", "app-txn-no-checkpoint"])
def test_app_transactions_corpus(copy_corpus_table, name: str):
    t = copy_corpus_table(name)
    dt_ = DeltaTable(str(t))
    assert dt_.snapshot().transactions == {"my-app": 3, "my-app2": 2}
    assert dt_.snapshot(version=0).transactions == {"my-app": 1}
    write_commit(
        t,
        2,
        [
            {"commitInfo": {"timestamp": 1}},
            {"txn": {"appId": "my-app2", "version": 7, "lastUpdated": 3}},
            {"txn": {"appId": "new", "version": 0}},
        ],
    )
    assert DeltaTable(str(t)).snapshot().transactions == {"my-app": 3, "my-app2": 7, "new": 0}


def test_domain_metadata_replay(copy_corpus_table):
    t = copy_corpus_table("app-txn-no-checkpoint")
    write_commit(
        t,
        2,
        [
            {"commitInfo": {"timestamp": 1}},
            {
                "domainMetadata": {
                    "domain": "delta.clustering",
                    "configuration": '{"clusteringColumns":[["id"]]}',
                    "removed": False,
                }
            },
            {"domainMetadata": {"domain": "app.one", "configuration": "v1", "removed": False}},
        ],
    )
    write_commit(
        t,
        3,
        [
            {"commitInfo": {"timestamp": 2}},
            {"domainMetadata": {"domain": "app.one", "configuration": "v2", "removed": False}},
            {"domainMetadata": {"domain": "delta.clustering", "configuration": "", "removed": True}},
        ],
    )
    dt_ = DeltaTable(str(t))
    assert dt_.snapshot(version=1).domain_metadata == {}
    assert dt_.snapshot(version=2).domain_metadata == {
        "delta.clustering": '{"clusteringColumns":[["id"]]}',
        "app.one": "v1",
    }
    assert dt_.snapshot().domain_metadata == {"app.one": "v2"}
    assert dt_.snapshot().transactions == {"my-app": 3, "my-app2": 2}


# ------------------------------------------------------------------------------------------------
# typed partition values


PARTITIONED = [
    {
        "i": 1,
        "d": dt.date(2020, 1, 1),
        "ts": dt.datetime(2021, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc),
        "s": "a b",
        "v": 1.5,
    },
    {"i": 2, "d": dt.date(1999, 12, 31), "ts": None, "s": "x/y=z%", "v": 2.5},
    {"i": None, "d": None, "ts": dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc), "s": None, "v": 3.5},
    {
        "i": -4,
        "d": dt.date(2020, 1, 1),
        "ts": dt.datetime(2021, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc),
        "s": "ü #?&+:'\"",
        "v": 4.5,
    },
    {
        "i": 5,
        "d": dt.date(1, 1, 1),
        "ts": dt.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc),
        "s": "",
        "v": 5.5,
    },
]
PARTITION_SCHEMA = pa.schema(
    [
        ("i", pa.int32()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("s", pa.string()),
        ("v", pa.float64()),
    ]
)


def test_checkpoint_partition_maps_in_the_writers_layout():
    """Checkpoint partitionValues maps holding the partition columns in order and nothing else (as
    Spark and deltalake write them) give their values without a key lookup per entry: with one
    partition column, the map's own value strings, not a copy. Any other layout (keys in another
    order, one missing, extra or repeated, a null map, a slice) gives what the lookup gives: the
    first entry of a key, null where it has none."""
    from delta_datafusion.partition_values import map_to_struct

    typ = pa.map_(pa.string(), pa.string())
    one = pa.array([[("p", "a")], [("p", "b")], [("p", None)]], typ)
    out = map_to_struct(one, ["p"])
    assert out.to_pylist() == [{"p": "a"}, {"p": "b"}, {"p": None}]
    assert out.field(0).buffers()[2].address == one.items.buffers()[2].address  # the same strings
    assert map_to_struct(one.slice(1), ["p"]).to_pylist() == [{"p": "b"}, {"p": None}]
    two = pa.array([[("a", "1"), ("b", "x")], [("a", "2"), ("b", None)]], typ)
    assert map_to_struct(two, ["a", "b"]).to_pylist() == [{"a": "1", "b": "x"}, {"a": "2", "b": None}]
    assert map_to_struct(two, ["b", "a"]).to_pylist() == [{"b": "x", "a": "1"}, {"b": None, "a": "2"}]
    assert map_to_struct(two, ["a"]).to_pylist() == [{"a": "1"}, {"a": "2"}]
    assert map_to_struct(two, ["a", "b", "c"]).to_pylist() == [
        {"a": "1", "b": "x", "c": None},
        {"a": "2", "b": None, "c": None},
    ]
    repeated = pa.array([[("a", "1"), ("a", "2")], [("b", "3"), ("a", "4")]], typ)
    assert map_to_struct(repeated, ["a", "b"]).to_pylist() == [{"a": "1", "b": None}, {"a": "4", "b": "3"}]
    with_null = pa.array([[("p", "a")], None], typ)
    assert map_to_struct(with_null, ["p"]).to_pylist() == [{"p": "a"}, None]


def test_checkpoint_partition_maps_read_as_dictionaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A checkpoint whose partition values the writer dictionary-encoded (few distinct values) and
    which is one row group has them read as dictionaries, and the typed files are those of a read
    of plain strings. Several row groups (whose dictionaries pyarrow cannot join under a nested
    column) and dictionary-encoded maps in any layout read the same as plain ones."""
    import delta_datafusion.log.checkpoint as ck
    from delta_datafusion.partition_values import map_to_struct

    t = tmp_path / "t"
    ids = list(range(12))
    deltalake.write_deltalake(
        str(t),
        pa.table({"id": ids, "p": [f"p{i % 3}" for i in ids], "q": [i % 4 for i in ids]}),
        partition_by=["p", "q"],
    )
    deltalake.DeltaTable(str(t)).create_checkpoint()
    # 12 adds: read through the planning handle as plain strings unless dictionaries start here
    monkeypatch.setattr(ck, "DICTIONARY_READ_MIN_ROWS", 0)
    snap = DeltaTable(str(t)).snapshot()
    leaf = snap.checkpoint_manifest.leaves[0]
    pv = ck.read_leaf(snap.storage, leaf, ["add.partitionValues"]).schema.field("add").type[0].type
    assert pa.types.is_dictionary(pv.key_type) and pa.types.is_dictionary(pv.item_type), pv
    files = snap.files()
    got = sorted(files.column("partition_values").to_pylist(), key=lambda v: (v["p"], v["q"]))
    assert got == sorted(({"p": f"p{i % 3}", "q": i % 4} for i in ids), key=lambda v: (v["p"], v["q"]))
    with monkeypatch.context() as m:
        m.setattr(ck, "dictionary_leaves", lambda md, row_groups: [])
        assert DeltaTable(str(t)).snapshot().files().equals(files)

    ckpt = checkpoint_file(t, 0)  # the same checkpoint in row groups of 5 rows
    pq.write_table(pq.read_table(ckpt), ckpt, row_group_size=5)
    assert pq.ParquetFile(ckpt).metadata.num_row_groups > 1
    assert DeltaTable(str(t)).snapshot().files().sort_by("path").equals(files.sort_by("path"))

    typ = pa.map_(pa.string(), pa.string())
    layouts = [
        [[("a", "1"), ("b", "x")], [("a", "2"), ("b", None)]],
        [[("b", "x"), ("a", "1")], [("a", "2"), ("b", "y")]],
        [[("a", "1")], None, [("a", "3"), ("c", "z")]],
        [[("a", "1"), ("a", "2")], [("b", "3")]],
    ]
    for rows in layouts:
        plain = pa.array(rows, typ)
        coded = pa.MapArray.from_arrays(
            plain.offsets,
            plain.keys.dictionary_encode(),
            plain.items.dictionary_encode(),
            mask=plain.is_null(),
        )
        for names in (["a"], ["a", "b"], ["b", "a"]):
            assert map_to_struct(coded, names).equals(map_to_struct(plain, names)), (rows, names)
            assert map_to_struct(coded.slice(1), names).equals(map_to_struct(plain.slice(1), names))


@pytest.mark.parametrize("checkpoint", [False, True], ids=["commit", "checkpoint"])
def test_typed_partition_values_from_deltalake(tmp_path: Path, checkpoint: bool):
    t = tmp_path / "t"
    deltalake.write_deltalake(
        str(t), pa.Table.from_pylist(PARTITIONED, PARTITION_SCHEMA), partition_by=["i", "d", "ts", "s"]
    )
    if checkpoint:
        deltalake.DeltaTable(str(t)).create_checkpoint()
    snap = DeltaTable(str(t)).snapshot()
    assert (snap.segment.checkpoint is not None) == checkpoint
    files = snap.files()
    assert files.num_rows == len(PARTITIONED)
    pv_type = files.schema.field("partition_values").type
    assert [(f.name, f.type) for f in pv_type] == [(f.name, f.type) for f in PARTITION_SCHEMA][:4]
    by_v = {r["v"]: r for r in PARTITIONED}
    for loc, pv in zip(
        files.column("location").to_pylist(), files.column("partition_values").to_pylist(), strict=True
    ):
        assert os.path.isfile(loc), loc  # encoded directory names resolved to the real file
        (v,) = pq.read_table(loc, columns=["v"]).column("v").to_pylist()
        want = {k: by_v[v][k] for k in ("i", "d", "ts", "s")}
        if want["s"] == "":  # Delta stores an empty string partition value as null
            want["s"] = None
        assert pv == want, (loc, pv, want)


def _partition_tuples(table: pa.Table, names: list[str]) -> set[tuple]:
    return {tuple(r[n] for n in names) for r in table.select(names).to_pylist()}


PARTITIONED_CORPUS = [
    t["name"]
    for t in manifest_tables()
    if t["category"] == "data" and t.get("partition_columns") and not t.get("expect_error")
]


@pytest.mark.parametrize("name", PARTITIONED_CORPUS)
def test_corpus_partition_values_match_expected_rows(name: str):
    """The partition values of the live files are exactly the distinct ones of the expected rows."""
    corpus = require_corpus()
    entry = manifest_entry(name)
    snap = DeltaTable(str(corpus_table(name))).snapshot()
    exp = next(e for e in entry["expected"] if e["kind"] == "snapshot" and e.get("version") is None)
    expected = pq.read_table(corpus / exp["file"])
    names = list(entry["partition_columns"])
    files = snap.files()
    footer = [pq.ParquetFile(loc).metadata.num_rows for loc in files.column("location").to_pylist()]
    card = pc.fill_null(
        pc.struct_field(files.column("deletion_vector").combine_chunks(), "cardinality"), 0
    ).to_pylist()
    nonempty = files.filter(pa.array([n - c > 0 for n, c in zip(footer, card, strict=True)]))
    pv = nonempty.column("partition_values").combine_chunks()
    ours_t = pa.table({n: pc.struct_field(pv, n) for n in names})
    ours_t = ours_t.cast(pa.schema([expected.schema.field(n) for n in names]))
    assert _partition_tuples(ours_t, names) == _partition_tuples(expected, names)


# ------------------------------------------------------------------------------------------------
# typed stats


def _stats_batch(k: int) -> pa.Table:
    return pa.table(
        {
            "b": pa.array([1, -5, None], pa.int8()),
            "sh": pa.array([300, -300, 7 + k], pa.int16()),
            "i": pa.array([k, k + 10, None], pa.int32()),
            "l": pa.array([2**40 + k, -(2**40), 0], pa.int64()),
            "f": pa.array([1.25, -2.5 * k, None], pa.float32()),
            "d": pa.array([3.125, float(k), -1e10], pa.float64()),
            "s": pa.array(["zeta", f"alpha {k}", None], pa.string()),
            "dt": pa.array([dt.date(2020, 1, k), dt.date(1969, 7, 20), None], pa.date32()),
            "ts": pa.array(
                [
                    dt.datetime(2021, 1, 1, 0, 0, 0, 123456 + k, tzinfo=dt.timezone.utc),
                    dt.datetime(1999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc),
                    None,
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "ntz": pa.array(
                [dt.datetime(2021, 1, 1, 0, 0, 0, 654321), None, dt.datetime(2000, 1, k)], pa.timestamp("us")
            ),
            "dec": pa.array(
                [decimal.Decimal("1.23"), decimal.Decimal(f"-9{k}.99"), None], pa.decimal128(5, 2)
            ),
            "st": pa.array(
                [{"x": k, "y": "q"}, {"x": None, "y": "a"}, None],
                pa.struct([("x", pa.int32()), ("y", pa.string())]),
            ),
            "id": pa.array([k, k, k], pa.int64()),
        }
    )


def _floor_ms(v):
    return v.replace(microsecond=v.microsecond // 1000 * 1000) if v is not None else None


def _expected_stats(data: pa.Table) -> dict:
    """What the writer's stats must say about ``data``: min/max (timestamps in ms), null counts."""
    mins, maxs, nulls = {}, {}, {}
    for name in data.column_names:
        col = data.column(name).combine_chunks()
        if pa.types.is_struct(col.type):
            sub_min, sub_max, sub_null = {}, {}, {}
            for f in col.type:
                child = pc.struct_field(col, f.name)
                mm = pc.min_max(child).as_py()
                sub_min[f.name], sub_max[f.name] = mm["min"], mm["max"]
                sub_null[f.name] = child.null_count
            mins[name], maxs[name], nulls[name] = sub_min, sub_max, sub_null
            continue
        mm = pc.min_max(col).as_py()
        lo, hi = mm["min"], mm["max"]
        if pa.types.is_timestamp(col.type):
            lo, hi = _floor_ms(lo), _floor_ms(hi)
        mins[name], maxs[name], nulls[name] = lo, hi, col.null_count
    return {"numRecords": data.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}


@pytest.mark.parametrize("source", ["commit", "checkpoint-json", "checkpoint-struct"])
def test_typed_stats_equal_written_values(tmp_path: Path, source: str):
    t = tmp_path / "t"
    config = None
    if source == "checkpoint-struct":
        config = {"delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "false"}
    batches = {k: _stats_batch(k) for k in (1, 2, 3)}
    for k, b in batches.items():
        deltalake.write_deltalake(str(t), b, mode="append", configuration=config if k == 1 else None)
    if source != "commit":
        deltalake.DeltaTable(str(t)).create_checkpoint()
    snap = DeltaTable(str(t)).snapshot()
    assert (snap.segment.checkpoint is not None) == (source != "commit")
    files = snap.files()
    stats_type = files.schema.field("stats").type
    mm_type = stats_type.field("minValues").type
    assert mm_type.field("ts").type == pa.timestamp("us", tz="UTC")
    assert mm_type.field("ntz").type == pa.timestamp("us")
    assert mm_type.field("dt").type == pa.date32()
    assert mm_type.field("dec").type == pa.decimal128(5, 2)
    assert mm_type.field("f").type == pa.float32()
    assert mm_type.field("b").type == pa.int8()
    assert files.num_rows == 3
    for loc, stats in zip(
        files.column("location").to_pylist(), files.column("stats").to_pylist(), strict=True
    ):
        k = pq.read_table(loc, columns=["id"]).column("id")[0].as_py()
        want = _expected_stats(batches[k])
        assert stats["numRecords"] == want["numRecords"]
        for part in ("minValues", "maxValues", "nullCount"):
            got = {name: stats[part][name] for name in want[part] if name != "id"}
            exp = {name: want[part][name] for name in want[part] if name != "id"}
            assert got == exp, (source, part, k)
    assert count_rows(files) == 9


@pytest.mark.parametrize("source", ["commit", "checkpoint-struct"])
def test_typed_stats_for_a_column_subset(tmp_path: Path, source: str):
    """Planning types only the predicate's columns: the same values as the full stats."""
    t = tmp_path / "t"
    config = None
    if source == "checkpoint-struct":
        config = {"delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "false"}
    for k in (1, 2, 3):
        deltalake.write_deltalake(
            str(t), _stats_batch(k), mode="append", configuration=config if k == 1 else None
        )
    if source != "commit":
        deltalake.DeltaTable(str(t)).create_checkpoint()
    snap = DeltaTable(str(t)).snapshot()
    sub = snap.to_scan_files(snap.raw_files, stats_columns={"ts", "dec"})
    none = snap.to_scan_files(snap.raw_files, stats_columns=())
    full = snap.files()
    assert sub.column("stats").type.field("minValues").type.names == ["ts", "dec"]
    assert none.column("stats").type.names == ["numRecords", "tightBounds"]
    for s_row, n_row, f_row in zip(
        sub.column("stats").to_pylist(),
        none.column("stats").to_pylist(),
        full.column("stats").to_pylist(),
        strict=True,
    ):
        assert s_row["numRecords"] == n_row["numRecords"] == f_row["numRecords"]
        for part in ("minValues", "maxValues", "nullCount"):
            assert s_row[part] == {c: f_row[part][c] for c in ("ts", "dec")}, (source, part)


def test_python_scan_types_only_the_predicate_columns_stats(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``Scan.to_table()`` plans as a query does: the stats of the predicate's columns are typed,
    not every column's (a 5,000-column table's one-column scan parsed 5,000 columns' bounds: 1.8 s
    for 90 rows). ``scan_metadata()`` still gives every file's full stats."""
    from delta_datafusion import snapshot as snapshot_module

    t = tmp_path / "t"
    width = 40
    for k in (1, 2, 3):
        batch = pa.table(
            {f"c{i}": pa.array([k * 10 + r + i for r in range(5)], pa.int64()) for i in range(width)}
        )
        deltalake.write_deltalake(
            str(t),
            batch,
            mode="append",
            configuration={"delta.dataSkippingNumIndexedCols": "-1"} if k == 1 else None,
        )
    typed: list[object] = []
    to_scan_files = snapshot_module.Snapshot.to_scan_files

    def recording(self, raw, stats_columns=None, partition_values=None):
        typed.append(None if stats_columns is None else sorted(stats_columns))
        return to_scan_files(self, raw, stats_columns, partition_values)

    monkeypatch.setattr(snapshot_module.Snapshot, "to_scan_files", recording)
    last = f"c{width - 1}"
    snap = DeltaTable(str(t)).snapshot()
    scan = snap.scan(columns=["c0"], predicate=pc.field(last) == 20 + width)
    assert scan.to_table().column("c0").to_pylist() == [21]
    assert typed == [[last]]
    assert snap.scan(columns=["c0"]).to_table().num_rows == 15
    assert typed == [[last], []]
    # the public file listing is unchanged: every column's bounds
    files = next(scan.scan_metadata()).files
    assert files.num_rows == 1
    assert len(files.column("stats").type.field("minValues").type) == width


def test_stats_lines_longer_than_a_parse_block(monkeypatch: pytest.MonkeyPatch):
    """Stats are parsed in blocks of ~256 KB for multi-core parsing; lines longer than a block (a
    long string bound) still parse exactly, without the per-row fallback."""
    from delta_datafusion import stats as stats_mod

    def no_slow_path(*_a, **_k):
        raise AssertionError("fell back to per-row parsing")

    monkeypatch.setattr(stats_mod, "_parse_rows_individually", no_slow_path)
    typ = pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("s", pa.string())]))])
    long = "x" * 300_000
    values = [
        json.dumps({"numRecords": i, "minValues": {"s": long if i % 3 == 0 else f"v{i}"}}) for i in range(12)
    ]
    out = stats_mod.parse_stats_json(pa.array(values), typ).to_pylist()
    assert [o["numRecords"] for o in out] == list(range(12))
    assert [o["minValues"]["s"] for o in out] == [long if i % 3 == 0 else f"v{i}" for i in range(12)]


def test_stats_parse_blocks_follow_the_schema_width(monkeypatch: pytest.MonkeyPatch):
    """Narrow stats are parsed in several blocks (pyarrow parses blocks on all cores); stats of a
    wide table in one, as each block costs in proportion to the schema's fields (2,000 columns:
    8 blocks took 2.4x the time of one). The values are exact either way."""
    from delta_datafusion import stats as stats_mod
    from delta_datafusion.log import actions

    blocks: list[int] = []
    real = actions.pajson.read_json

    def spy(source, read_options=None, parse_options=None):
        blocks.append(read_options.block_size)
        return real(source, read_options=read_options, parse_options=parse_options)

    monkeypatch.setattr(actions.pajson, "read_json", spy)

    def parse(ncols: int, nrows: int) -> tuple[int, list]:
        names = [f"c{j}" for j in range(ncols)]
        leaf = pa.struct([(n, pa.int64()) for n in names])
        typ = pa.struct([("numRecords", pa.int64()), ("minValues", leaf), ("maxValues", leaf)])
        rows = [
            {"numRecords": i, "minValues": dict.fromkeys(names, i), "maxValues": dict.fromkeys(names, -i)}
            for i in range(nrows)
        ]
        strings = pa.array([json.dumps(r) for r in rows])
        blocks.clear()
        out = stats_mod.parse_stats_json(strings, typ).to_pylist()
        nbytes = sum(len(x) + 1 for x in strings.to_pylist())
        assert len(blocks) == 1
        return -(-nbytes // blocks[0]), [out, rows]

    narrow_blocks, (out, rows) = parse(3, 40_000)
    assert out == rows
    wide_blocks, (out, rows) = parse(2_000, 150)
    assert out == rows
    assert narrow_blocks >= 4
    assert wide_blocks == 1


STATS_TYPE = pa.struct(
    [
        ("numRecords", pa.int64()),
        ("minValues", pa.struct([("id", pa.int64()), ("s", pa.string()), ("d", pa.date32())])),
        ("nullCount", pa.struct([("id", pa.int64())])),
    ]
)


def _stats_of_json(text: str | None) -> dict | None:
    """What one stats string must parse to: the JSON object's fields, None when absent/garbage."""
    if text is None:
        return None
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    mins = obj.get("minValues") or {}
    d = mins.get("d")
    return {
        "numRecords": obj.get("numRecords"),
        "minValues": None
        if "minValues" not in obj
        else {"id": mins.get("id"), "s": mins.get("s"), "d": dt.date.fromisoformat(d) if d else None},
        "nullCount": None if "nullCount" not in obj else {"id": obj["nullCount"].get("id")},
    }


@pytest.mark.parametrize("string_type", [pa.string(), pa.large_string()])
def test_stats_json_rows_parse_independently(string_type: pa.DataType, monkeypatch: pytest.MonkeyPatch):
    """Every stats string parses to its own row: pretty-printed JSON (newlines inside), absent
    stats, empty strings, garbage and non-object JSON (null, never a shifted row), in slices of a
    larger array too."""
    from delta_datafusion import stats as stats_mod

    good = [
        json.dumps(
            {
                "numRecords": i,
                "minValues": {"id": i * 10, "s": f"k\n{i}", "d": "2024-01-02"},
                "nullCount": {"id": 0},
            }
        )
        for i in range(20)
    ]
    pretty = json.dumps({"numRecords": 7, "minValues": {"id": -1, "s": "a b"}}, indent=2)
    odd = [pretty, None, "", "{not json", "[1, 2]", "5", '{"numRecords": 3}', "{}"]
    values = good[:5] + odd + good[5:]
    arr = pa.array(values, string_type)
    for lo, hi in [(0, len(values)), (3, 17), (5, 6), (6, len(values)), (len(values) - 4, len(values))]:
        got = stats_mod.parse_stats_json(arr.slice(lo, hi - lo), STATS_TYPE).to_pylist()
        assert got == [_stats_of_json(v) for v in values[lo:hi]], (lo, hi)
    # the common case (no newline, nothing odd) parses as one buffer, without the per-row path
    clean = pa.array(good, string_type).slice(2)

    def no_slow_path(*_a, **_k):
        raise AssertionError("fell back to per-row parsing")

    monkeypatch.setattr(stats_mod, "_parse_rows_individually", no_slow_path)
    assert stats_mod.parse_stats_json(clean, STATS_TYPE).to_pylist() == [_stats_of_json(v) for v in good[2:]]


def test_one_bad_stats_string_does_not_send_its_batch_row_by_row(monkeypatch: pytest.MonkeyPatch):
    """A batch whose parse fails is halved until the failing part is small: one garbage string
    among 4,000 is parsed on its own (the whole batch went row by row: 100,000 strings 24 s), and
    every row still parses to its own stats."""
    from delta_datafusion import stats as stats_mod

    good = [
        json.dumps(
            {"numRecords": i, "minValues": {"id": i, "s": f"v{i}", "d": "2024-01-02"}, "nullCount": {"id": 0}}
        )
        for i in range(4_000)
    ]
    for bad in ("{not json", "[1, 2]", ""):
        values = good[:2_500] + [bad] + good[2_500:]
        slow_rows: list[int] = []
        real = stats_mod._parse_rows_individually

        def counted(stats, parse_type, real=real, slow_rows=slow_rows):
            slow_rows.append(len(stats))
            return real(stats, parse_type)

        monkeypatch.setattr(stats_mod, "_parse_rows_individually", counted)
        got = stats_mod.parse_stats_json(pa.array(values), STATS_TYPE).to_pylist()
        assert got == [_stats_of_json(v) for v in values], bad
        assert sum(slow_rows) <= stats_mod.ROW_BY_ROW_MAX, (bad, slow_rows)


def test_stats_strings_that_are_not_one_whole_object_each_are_garbage_not_shifted():
    """Stats are joined to their files by position, so each string must give exactly its own
    object: a string holding half an object (its other half in the next string) or two objects
    is garbage (null stats: the file is kept), and the others keep their own stats. Joined as
    plain lines, the halves parsed as one object and the pair as two, the count matched, and the
    files after them got their neighbours' stats (wrong numRecords and bounds, files pruned)."""
    from delta_datafusion import stats as stats_mod
    from delta_datafusion.arrow_threads import arrow_threads

    good = [json.dumps({"numRecords": i, "minValues": {"id": i}, "nullCount": {"id": 0}}) for i in range(40)]
    odd = ['{"numRecords": 100, "minValues":', '{"id": 7}}', '{"numRecords": 200}{"numRecords": 300}']
    for at in (0, 20, 40):
        values = good[:at] + odd + good[at:]
        got = stats_mod.parse_stats_json(pa.array(values), STATS_TYPE).to_pylist()
        assert got == [_stats_of_json(v) for v in values], at
        assert got[at : at + 3] == [None, None, None]
        # without the pyarrow pool too (the parallel phase parses on its own thread)
        with arrow_threads(False):
            assert stats_mod.parse_stats_json(pa.array(values), STATS_TYPE).to_pylist() == got


def test_stats_parsed_one_by_one_keep_every_digit():
    """Stats strings next to a garbage one are parsed one by one; their decimal bounds keep
    every digit as in a clean batch (they went through a Python float: 1.12345678901234567891
    became 1.12345678901234570000), and a key given twice is still read."""
    from decimal import Decimal

    from delta_datafusion import stats as stats_mod

    typ = pa.struct([("numRecords", pa.int64()), ("minValues", pa.struct([("d", pa.decimal128(38, 20))]))])
    exact = '{"numRecords": 1, "minValues": {"d": 1.12345678901234567891}}'
    pretty = '{"numRecords": 2,\n "minValues": {"d": 2.5}}'
    twice = '{"numRecords": 3, "numRecords": 4}'
    for values in ([exact, pretty], [exact, "{garbage", pretty, twice]):
        got = stats_mod.parse_stats_json(pa.array(values), typ).to_pylist()
        assert got[0] == {"numRecords": 1, "minValues": {"d": Decimal("1.12345678901234567891")}}
        assert got[values.index(pretty)] == {"numRecords": 2, "minValues": {"d": Decimal("2.5")}}
    assert got[1] is None and got[3]["numRecords"] in (3, 4)


def test_key_presence_pass_agrees_with_byte_search(monkeypatch: pytest.MonkeyPatch):
    """The one-pass (chunked regex) presence check of action keys finds a key wherever it sits:
    in the head, across a chunk boundary, at the very end, several keys in one chunk."""
    from delta_datafusion.log import actions

    monkeypatch.setattr(actions, "_SMALL", 0)
    monkeypatch.setattr(actions, "_HEAD", 64)
    keys = ["add", "remove", "txn", "domainMetadata", "deletionVector", "stats"]
    filler = b'{"add":{"path":"p","size":1}}\n' * 400  # 12,000 bytes: chunks of 1,500
    step = -(-len(filler) // 8)
    positions = [0, 10, 63, 64, 200, len(filler) - 1, len(filler)]
    positions += [k * step + d for k in range(1, 8) for d in (-20, -9, -5, -1, 0, 1)]
    for pos in positions:
        for extra in ([b'"remove"'], [b'"txn"', b'"deletionVector"'], [b'"domainMetadata"']):
            buf = filler[:pos] + b"".join(extra) + filler[pos:]
            expected = {k for k in keys if b'"' + k.encode() + b'"' in buf}
            assert actions.present_keys(buf, keys) == expected, (pos, extra)
    assert actions.present_keys(filler, keys) == {"add"}


def _present_keys_in_child(buf: bytes, keys: list[str], out) -> None:
    from delta_datafusion.log import actions

    out.put(sorted(actions.present_keys(buf, keys)))


def test_key_presence_pool_works_in_a_forked_child(monkeypatch: pytest.MonkeyPatch):
    """The search pool is per process: a child forked after the parent used it makes its own
    (the parent's threads do not exist in the child, and reusing the pool would hang)."""
    import multiprocessing

    from delta_datafusion.log import actions

    monkeypatch.setattr(actions, "_SMALL", 0)
    monkeypatch.setattr(actions, "_HEAD", 64)
    buf = b'{"add":{"path":"p"}}\n' * 500 + b'{"remove":{"path":"p"}}\n'
    assert actions.present_keys(buf, ["add", "remove", "txn"]) == {"add", "remove"}
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_present_keys_in_child, args=(buf, ["add", "remove", "txn"], out))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("present_keys hung in a forked child")
    assert out.get(timeout=5) == ["add", "remove"]


def test_remove_at_the_end_of_a_large_log_is_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A remove (with a deletion vector key) only in the last line of a large commit buffer."""
    from delta_datafusion.log import actions

    monkeypatch.setattr(actions, "_SMALL", 0)
    monkeypatch.setattr(actions, "_HEAD", 256)
    t = tmp_path / "t"
    _plain_table(t, [_add(f"f{i:05d}.parquet") for i in range(2000)])
    write_commit(t, 1, [_remove("f01999.parquet"), _remove("f00000.parquet")])
    files = DeltaTable(str(t)).snapshot().files()
    names = {p.rsplit("/", 1)[-1] for p in files.column("location").to_pylist()}
    assert len(names) == 1998 and "f01999.parquet" not in names and "f00000.parquet" not in names


# ------------------------------------------------------------------------------------------------
# URL-encoded and absolute paths


def _plain_table(t: Path, actions: list[dict]) -> None:
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    log_dir(t).mkdir(parents=True)
    write_commit(
        t,
        0,
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            metadata_action(schema, table_id="t"),
            *actions,
        ],
    )


def _add(path: str, size: int = 1) -> dict:
    return {
        "add": {"path": path, "partitionValues": {}, "size": size, "modificationTime": 1, "dataChange": True}
    }


def _remove(path: str) -> dict:
    return {"remove": {"path": path, "deletionTimestamp": 2, "dataChange": True}}


def test_url_encoded_paths_decode_once_and_match_across_encodings(tmp_path: Path):
    t = tmp_path / "t"
    _plain_table(
        t,
        [
            _add("a%20b.parquet", 1),
            _add("c%2520d.parquet", 2),
            _add("dir%3Dx/e%23f.parquet", 3),
            _add("g.parquet", 4),
        ],
    )
    # A remove with a different (but equivalent) encoding of the same path removes it.
    write_commit(t, 1, [_remove("%61%20b.parquet"), _remove("g%2Eparquet")])
    snap = DeltaTable(str(t)).snapshot()
    files = snap.files()
    assert files_summary(files) == [("c%20d.parquet", 2), ("dir=x/e#f.parquet", 3)]
    assert sorted(files.column("location").to_pylist()) == [
        str(t / "c%20d.parquet"),
        str(t / "dir=x/e#f.parquet"),
    ]
    assert files_summary(DeltaTable(str(t)).snapshot(version=0).files())[0] == ("a b.parquet", 1)


def test_a_remove_matches_its_add_in_any_spelling_of_the_path(tmp_path: Path):
    """Reconciliation keys are decoded paths: a remove spelled with escapes removes an add spelled
    literally and the other way round (a space, ':' as %3A, a non-ASCII letter as its UTF-8
    escapes), the table root's own absolute path or file URI matches the relative path, and '+'
    is a plus, not a space (URL paths are not form data): ``a+b`` and ``a b`` are two files."""
    t = tmp_path / "t"
    _plain_table(
        t,
        [
            _add("a%20b.parquet", 1),
            _add("c d.parquet", 2),
            _add("x%3Ay.parquet", 3),
            _add("%C3%A9.parquet", 4),
            _add("p+q.parquet", 5),
            _add("r%2Bs.parquet", 6),
            _add("f.parquet", 7),
            _add(f"file://{t}/g.parquet", 8),
        ],
    )
    write_commit(
        t,
        1,
        [
            _remove("a b.parquet"),
            _remove("c%20d.parquet"),
            _remove("x:y.parquet"),
            _remove("é.parquet"),
            _remove("p q.parquet"),
            _remove("r s.parquet"),
            _remove(f"file://{t}/f.parquet"),
            _remove("g.parquet"),
        ],
    )
    assert files_summary(DeltaTable(str(t)).snapshot().files()) == [("p+q.parquet", 5), ("r+s.parquet", 6)]
    write_commit(t, 2, [_remove("p%2Bq.parquet"), _remove("r+s.parquet")])
    assert DeltaTable(str(t)).snapshot().files().num_rows == 0


def test_absolute_paths_and_file_uris_are_the_same_file(tmp_path: Path):
    t = tmp_path / "t"
    other = tmp_path / "elsewhere dir"
    a = f"{other}/x y.parquet"
    _plain_table(
        t,
        [
            _add(a.replace(" ", "%20"), 10),
            _add(f"file://{other}/lit%2520eral.parquet".replace(" ", "%20"), 11),
            _add(f"file:{other}/h%23ash.parquet".replace(" ", "%20"), 12),
        ],
    )
    files = DeltaTable(str(t)).snapshot().files()
    locs = sorted(files.column("location").to_pylist())
    assert locs == sorted([a, f"{other}/lit%20eral.parquet", f"{other}/h#ash.parquet"])
    write_commit(
        t,
        1,
        [
            _remove(f"file://{a}".replace(" ", "%20")),
            _remove(f"{other}/lit%2520eral.parquet".replace(" ", "%20")),
        ],
    )
    assert DeltaTable(str(t)).snapshot().files().column("location").to_pylist() == [f"{other}/h#ash.parquet"]


def test_one_absolute_path_among_many_is_the_only_one_resolved_alone(tmp_path: Path, monkeypatch):
    """Relative paths are joined to the root in one Arrow call; an absolute path or URI among
    them is resolved on its own (all 2,000 went through Python for one of them)."""
    from delta_datafusion.storage import Storage

    t = tmp_path / "t"
    other = tmp_path / "elsewhere"
    actions = [_add(f"part-{i:05d}.parquet", i + 1) for i in range(2_000)]
    actions.insert(1_234, _add(f"file://{other}/far.parquet", 5_000))
    actions.insert(77, _add(f"{other}/near.parquet", 5_001))
    _plain_table(t, actions)
    real = Storage.resolve
    resolved: list[str] = []

    def counted(self, path):
        resolved.append(path)
        return real(self, path)

    monkeypatch.setattr(Storage, "resolve", counted)
    files = DeltaTable(str(t)).snapshot().files()
    by_size = dict(zip(files.column("size").to_pylist(), files.column("location").to_pylist(), strict=True))
    assert len(by_size) == 2_002
    assert by_size[5_000] == f"{other}/far.parquet" and by_size[5_001] == f"{other}/near.parquet"
    assert by_size[1] == f"{t}/part-00000.parquet" and by_size[2_000] == f"{t}/part-01999.parquet"
    assert sorted(resolved) == sorted([f"file://{other}/far.parquet", f"{other}/near.parquet"])


@pytest.mark.parametrize("large", [False, True])
def test_percent_encoded_folders_are_decoded_once_each(large: bool, monkeypatch: pytest.MonkeyPatch):
    """Timestamp partitions (or values with spaces) put a '%' in every path of a table: the folder
    part is decoded once per distinct folder, and only file names holding a '%' are decoded one by
    one (every path went through Python: 1,000,000 paths 2.6 s). Results equal unquote's."""
    from delta_datafusion import replay

    values = [f"ts=2024-01-0{i % 3 + 1}%2000%253A00%253A00/part-{i:04d}.parquet" for i in range(3_000)] + [
        "a%2Fb/c%20d.parquet",  # an encoded '/' in a folder, a '%' in the file name
        "no-folder%20here.parquet",
        "plain/x.parquet",
        "%C3/%A9",  # a byte sequence cut by a literal '/': invalid UTF-8 either way
        "%E2%82%AC/%zz/x%",  # the euro sign; a malformed escape and a lone '%' stay as written
        "/abs/%41/",
        "",
        None,
    ]
    calls: list[str] = []
    real = replay.unquote
    monkeypatch.setattr(replay, "unquote", lambda v: calls.append(v) or real(v))
    typ = pa.large_string() if large else pa.string()
    got = replay.decode_paths(pa.array(values, typ))
    assert got.type == typ
    assert got.to_pylist() == [None if v is None else real(v) for v in values]
    assert len(calls) <= 20, len(calls)
    every = pa.array(values[:3_000] + ["no-folder%20here.parquet", "%C3/%A9", "x%41/y"], typ).slice(1)
    assert replay.decode_paths(every).to_pylist() == [real(v) for v in every.to_pylist()]


@pytest.mark.parametrize("large", [False, True])
def test_percent_escaped_file_names_are_decoded_without_python(large: bool, monkeypatch: pytest.MonkeyPatch):
    """A file name holding an escape (``f%20with%20space-1.parquet``) is decoded with the others
    on the paths' bytes, not by a Python call per name (one in a hundred of 125k paths: 13.7 ->
    4 ms a checkpoint leaf); the result is unquote's."""
    from delta_datafusion import replay

    values = [
        f"part=p{i % 7}/f%20with%20space-{i:05d}.parquet"
        if i % 3 == 0
        else f"part=p{i % 7}/f-{i:05d}.parquet"
        for i in range(3_000)
    ] + ["%E2%82%AC%2Fx/%41%zz%", "no-folder%2541.parquet", "%", "x%4", ""]
    calls: list[str] = []
    real = replay.unquote
    monkeypatch.setattr(replay, "unquote", lambda v: calls.append(v) or real(v))
    typ = pa.large_string() if large else pa.string()
    got = replay.decode_paths(pa.array(values, typ))
    assert got.type == typ
    assert got.to_pylist() == [real(v) for v in values]
    assert calls == []


@pytest.mark.parametrize("large", [False, True])
def test_decoded_paths_equal_unquote_on_random_escapes(large: bool):
    """Random strings of escapes (of UTF-8 sequences whole, cut, or malformed), literal
    multi-byte characters, '/' and nulls, sliced anywhere: every row decodes as ``unquote``
    decodes it, replacement characters included (those rows take the per-string path)."""
    import random

    from delta_datafusion.replay import decode_paths
    from delta_datafusion.strings import percent_decode

    parts = ["%", "%2", "%25", "%41", "%2F", "%C3%A9", "%C3", "%A9", "%E2%82%AC", "%F0%9F%98%80", "%zz"]
    parts += ["%4", "a", "F", "0", "/", "é", "€", " "]
    rng = random.Random(7)
    typ = pa.large_string() if large else pa.string()
    exact = 0
    for _ in range(2_000):
        values = [
            "".join(rng.choice(parts) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(1, 6))
        ]
        values = [None if rng.random() < 0.1 else v for v in values]
        arr = pa.array(values, typ).slice(rng.randint(0, len(values) - 1))
        want = [None if v is None else unquote(v) for v in arr.to_pylist()]
        got = decode_paths(arr)
        assert got.type == typ
        assert got.to_pylist() == want, arr.to_pylist()
        exact += percent_decode(arr) is not None
    assert 500 < exact < 2_000  # both paths taken


@pytest.mark.parametrize("large", [False, True])
def test_relative_paths_resolve_under_the_root_in_either_string_type(large: bool, tmp_path: Path):
    """Relative log paths get the table root put before them (a large_string array too: the
    join with the root's string scalar had no kernel for it); nulls stay null, absolute ones
    resolve on their own."""
    from delta_datafusion.replay import resolve_paths
    from delta_datafusion.storage import Storage

    storage = Storage(str(tmp_path))
    typ = pa.large_string() if large else pa.string()
    got = resolve_paths(storage, pa.array(["a/b.parquet", None, "", "é/x y.parquet", "/abs/c.parquet"], typ))
    root = storage.root.rstrip("/") + "/"
    assert got.type == typ
    assert got.to_pylist() == [root + "a/b.parquet", None, root, root + "é/x y.parquet", "/abs/c.parquet"]


@pytest.mark.parametrize("large", [False, True])
def test_path_byte_checks_see_only_their_own_strings(large: bool):
    """The byte-level checks behind path decoding and resolution: sliced arrays, nulls whose
    slots hold bytes, empty strings, large offsets."""
    from delta_datafusion.replay import decode_paths
    from delta_datafusion.strings import any_contains_byte, starts_with_byte

    typ = pa.large_string() if large else pa.string()
    arr = pa.array(["%41/x", "a", "", "/abs", None, "b:c"], typ)
    assert any_contains_byte(arr, ord("%")) and not any_contains_byte(arr.slice(1), ord("%"))
    assert any_contains_byte(arr, ord(":")) and not any_contains_byte(arr.slice(0, 5), ord(":"))
    assert starts_with_byte(arr, ord("/")).tolist() == [False, False, False, True, False, False]
    assert starts_with_byte(arr.slice(3, 2), ord("/")).tolist() == [True, False]
    assert decode_paths(arr.slice(1)).to_pylist() == ["a", "", "/abs", None, "b:c"]
    assert decode_paths(arr).to_pylist()[0] == "A/x"
    # a null slot whose bytes are "/x": not a string that starts with '/'
    offs = np.array([0, 2, 3], np.int64 if large else np.int32)
    masked = pa.Array.from_buffers(
        typ,
        2,
        [pa.py_buffer(np.packbits([0, 1], bitorder="little")), pa.py_buffer(offs), pa.py_buffer(b"/xy")],
    )
    assert masked.to_pylist() == [None, "y"]
    assert starts_with_byte(masked, ord("/")).tolist() == [False, False]


@pytest.mark.parametrize("layout", ["run", "scattered", "none", "all"])
def test_file_actions_of_a_checkpoint_keep_exactly_the_non_null_rows(layout: str):
    """A run of adds is sliced without copying, scattered adds are filtered: same rows either way."""
    from delta_datafusion.replay import flatten_file_actions

    paths = {"run": [None, "a", "b", "c", None], "scattered": ["a", None, "b", None, "c"]}
    paths |= {"none": [None, None], "all": ["a", "b", "c"]}
    rows = [None if p is None else {"path": p, "size": i} for i, p in enumerate(paths[layout])]
    actions = pa.array(rows, pa.struct([("path", pa.string()), ("size", pa.int64())]))
    flat = flatten_file_actions(actions, [], pa.array(range(len(rows)), pa.int64()))
    want = [(r["path"], r["size"], i) for i, r in enumerate(rows) if r is not None]
    got = list(zip(*(flat.column(c).to_pylist() for c in ("path", "size", "version")), strict=True))
    assert got == want


def test_file_actions_of_one_chunk_are_not_copied():
    """A checkpoint's add column is read as a chunked array of one chunk: its strings are used
    where they are (joining the chunks copies even one: 21k adds, 0.5 ms)."""
    from delta_datafusion.replay import flatten_file_actions

    actions = pa.array([{"path": f"p{i}", "size": i} for i in range(5)])
    flat = flatten_file_actions(pa.chunked_array([actions]), [])
    assert flat.column("path").to_pylist() == [f"p{i}" for i in range(5)]
    read = pc.struct_field(actions, "path").buffers()[2]
    assert flat.column("path").chunk(0).buffers()[2].address == read.address


@pytest.mark.parametrize(
    "name", ["canonicalized-paths-normal-a", "canonicalized-paths-normal-b", "canonicalized-paths-special-a"]
)
def test_corpus_canonicalized_paths_are_removed(name: str):
    path = corpus_table(name)
    log0 = commit_path(path, 0).read_text()
    assert '"path":"/some/' in log0  # an absolute path, removed later as a file: URI
    dt_ = DeltaTable(str(path))
    assert dt_.snapshot(version=0).files().num_rows == 1
    assert dt_.snapshot().files().num_rows == 0


def test_corpus_special_characters_decoded_paths_exist():
    for name in (
        "data-reader-escaped-chars",
        "delta-0.8.0-special-partition",
        "v2-classic-checkpoint-parquet",
    ):
        files = DeltaTable(str(corpus_table(name))).snapshot().files()
        assert files.num_rows > 0
        for p, loc in zip(
            files.column("path").to_pylist(), files.column("location").to_pylist(), strict=True
        ):
            assert "%" not in p or os.path.isfile(loc)
            assert os.path.isfile(loc), loc


def test_copy_preserves_table(tmp_path: Path):
    """Sanity check of the copy helper used above: a copy reads exactly like the original."""
    src = corpus_table("table_with_deletion_logs")
    dst = copy_table(src, tmp_path / "copy")
    assert comparable(sorted_files(dst)) == [
        {**r, "location": r["location"].replace(str(src), str(dst))} for r in comparable(sorted_files(src))
    ]
    shutil.rmtree(dst)


def _dv(path_or_inline: str, cardinality: int) -> dict:
    return {
        "storageType": "u",
        "pathOrInlineDv": path_or_inline,
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": cardinality,
    }


def test_file_actions_are_keyed_by_path_and_deletion_vector(tmp_path: Path):
    """A DV update removes (path, old DV) and adds (path, new DV) in one commit; a remove of another
    (path, DV) pair does not touch the live one; a key removed and re-added in the next commit is
    live again (in one commit it is refused: tests/test_malformed_log_leftovers.py)."""
    t = tmp_path / "t"
    _plain_table(t, [_add("f.parquet", 10), _add("g.parquet", 20)])
    add_dv1 = _add("f.parquet", 10)
    add_dv1["add"]["deletionVector"] = _dv("ab12cd34ef56gh78ij90", 2)
    write_commit(t, 1, [_remove("f.parquet"), add_dv1])
    add_dv2 = _add("f.parquet", 10)
    add_dv2["add"]["deletionVector"] = _dv("zz12cd34ef56gh78ij90", 3)
    remove_dv1 = _remove("f.parquet")
    remove_dv1["remove"]["deletionVector"] = _dv("ab12cd34ef56gh78ij90", 2)
    write_commit(t, 2, [remove_dv1, add_dv2])
    write_commit(t, 3, [_remove("f.parquet"), remove_dv1])  # stale keys: no effect on (f, dv2)
    write_commit(t, 4, [_remove("g.parquet")])
    write_commit(t, 5, [_add("g.parquet", 21)])  # rewritten in place
    dt_ = DeltaTable(str(t))

    def live(version):
        files = dt_.snapshot(version=version).files()
        dvs = pc.struct_field(files.column("deletion_vector").combine_chunks(), "pathOrInlineDv").to_pylist()
        return sorted(
            zip(files.column("path").to_pylist(), files.column("size").to_pylist(), dvs, strict=True)
        )

    assert live(0) == [("f.parquet", 10, None), ("g.parquet", 20, None)]
    assert live(1) == [("f.parquet", 10, "ab12cd34ef56gh78ij90"), ("g.parquet", 20, None)]
    assert live(2) == [("f.parquet", 10, "zz12cd34ef56gh78ij90"), ("g.parquet", 20, None)]
    assert live(3) == live(2)
    assert live(4) == [("f.parquet", 10, "zz12cd34ef56gh78ij90")]
    assert live(5) == [("f.parquet", 10, "zz12cd34ef56gh78ij90"), ("g.parquet", 21, None)]


@pytest.mark.parametrize("where", ["commit", "commit, empty storageType", "checkpoint"])
def test_an_all_null_deletion_vector_is_none_for_a_later_remove(tmp_path: Path, where: str):
    """A deletion vector descriptor present with every field null (``"deletionVector": {}`` in a
    commit; a checkpoint writer's all-null struct) is no deletion vector: scans read the whole
    file, and a remove of the path without one removes it (delta-kernel-rs keys a file by its DV's
    storageType). It was keyed as a file with a DV, so the remove missed it and the removed
    file's rows came back, in files(), SQL and the parallel phase alike."""
    import datafusion

    import delta_datafusion as dd
    from delta_datafusion.log.actions import DV_TYPE
    from delta_datafusion.parallel import Parallel, ParallelScanMetadata, concat_files

    t = tmp_path / "t"
    log_dir(t).mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2, 3]}), t / "a.parquet")
    pq.write_table(pa.table({"id": [10]}), t / "b.parquet")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    features = ["deletionVectors"]
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": features,
        "writerFeatures": features,
    }
    metadata = metadata_action(schema, table_id="t")["metaData"]
    adds = [
        {
            "path": name,
            "partitionValues": {},
            "size": (t / name).stat().st_size,
            "modificationTime": 1,
            "dataChange": True,
        }
        for name in ("a.parquet", "b.parquet")
    ]
    adds[0]["deletionVector"] = {"storageType": ""} if "empty" in where else {}
    write_commit(t, 0, [{"protocol": protocol}, {"metaData": metadata}, *({"add": a} for a in adds)])
    if where == "checkpoint":
        str_map = pa.map_(pa.string(), pa.string())
        add_type = pa.struct(
            [
                ("path", pa.string()),
                ("partitionValues", str_map),
                ("size", pa.int64()),
                ("modificationTime", pa.int64()),
                ("dataChange", pa.bool_()),
                ("deletionVector", DV_TYPE),
            ]
        )
        meta_type = pa.struct(
            [
                ("id", pa.string()),
                ("format", pa.struct([("provider", pa.string()), ("options", str_map)])),
                ("schemaString", pa.string()),
                ("partitionColumns", pa.list_(pa.string())),
                ("configuration", str_map),
            ]
        )
        protocol_type = pa.struct(
            [
                ("minReaderVersion", pa.int32()),
                ("minWriterVersion", pa.int32()),
                ("readerFeatures", pa.list_(pa.string())),
                ("writerFeatures", pa.list_(pa.string())),
            ]
        )
        all_null = dict.fromkeys(DV_TYPE.names)
        rows = [
            {"protocol": protocol},
            {"metaData": dict(metadata, format={"provider": "parquet", "options": []}, configuration=[])},
            {"add": dict(adds[0], partitionValues=[], deletionVector=all_null)},
            {"add": dict(adds[1], partitionValues=[])},
        ]
        ckpt = pa.Table.from_pylist(
            rows, pa.schema([("protocol", protocol_type), ("metaData", meta_type), ("add", add_type)])
        )
        assert ckpt.column("add")[2].as_py()["deletionVector"] == all_null  # a struct, not null
        pq.write_table(ckpt, log_dir(t) / f"{0:020d}.checkpoint.parquet")
    write_commit(t, 1, [{"remove": {"path": "a.parquet", "deletionTimestamp": 2, "dataChange": True}}])

    snap = DeltaTable(str(t)).snapshot()
    assert snap.files().column("path").to_pylist() == ["b.parquet"]
    ctx = datafusion.SessionContext()
    dd.register_table(ctx, "t", str(t))
    assert ctx.sql("SELECT id FROM t").to_pylist() == [{"id": 10}]
    phase = DeltaTable(str(t)).snapshot().scan().parallel_scan_metadata()
    batches = list(phase)
    after = phase.finish()
    if isinstance(after, Parallel):
        batches += list(ParallelScanMetadata(after.state, after.files))
    assert concat_files(batches).column("path").to_pylist() == ["b.parquet"]


def test_timestamp_partition_values_with_a_zone_offset():
    """Delta writes UTC timestamps ("... 00:00:00" or "...Z"); some writers keep an offset. A
    zoned column converts it to UTC (as deltalake does); a zoneless one refuses it, naming the
    value that cannot be read (the message used to name None)."""
    import pyarrow as pa

    from delta_datafusion.errors import LogCorruptError
    from delta_datafusion.partition_values import parse_column

    raw = pa.array(["2024-01-01T01:00:00+01:00", "2024-01-01 00:00:00", None, "2024-01-01T02:00:00-0130"])
    got = parse_column(raw, pa.timestamp("us", "UTC"), "pt").cast(pa.int64()).to_pylist()
    midnight = 1_704_067_200_000_000
    assert got == [midnight, midnight, None, midnight + (3 * 3600 + 1800) * 1_000_000]
    with pytest.raises(
        LogCorruptError, match=r"partition column 'pt': value '2024-01-01T01:00:00\+01:00' cannot"
    ):
        parse_column(raw, pa.timestamp("us"), "pt")
    with pytest.raises(LogCorruptError, match="value 'x1' cannot be read"):
        parse_column(pa.array(["2024-01-01T01:00:00+01:00", "x1"]), pa.timestamp("us", "UTC"), "pt")


def test_one_unreadable_partition_value_is_found_without_parsing_every_row(monkeypatch: pytest.MonkeyPatch):
    """The value named by the error is found by halving the failing batch: the values before it
    are not parsed one by one (one bad value at the end of 1,000,000 took 8 s to report as int64,
    42 s as a timestamp). The first unreadable value in log order is the one named."""
    import pyarrow as pa

    from delta_datafusion import partition_values as pv_mod
    from delta_datafusion.errors import LogCorruptError

    real = pv_mod._parse
    one_by_one: list[int] = []

    def counted(raw, target, real=real):
        if len(raw) == 1:
            one_by_one.append(1)
        return real(raw, target)

    monkeypatch.setattr(pv_mod, "_parse", counted)
    cases = [
        (pa.int64(), "7", ["abc", "x"]),
        (pa.timestamp("us", "UTC"), "2024-01-01 00:00:00", ["2024-13-01 00:00:00", "nope"]),
        (pa.timestamp("us"), "2024-01-01 00:00:00", ["2024-01-01T01:00:00+01:00", "x1"]),
        (pa.date32(), "2024-01-02", ["2024-02-30", "y"]),
    ]
    for target, good, (first, later) in cases:
        values: list[str | None] = [good if i % 7 else None for i in range(4_000)]
        values[2_500], values[3_500] = first, later
        one_by_one.clear()
        with pytest.raises(LogCorruptError, match=re.escape(f"value {first!r} cannot be read as")) as info:
            pv_mod.parse_column(pa.array(values), target, "c")
        assert info.value.unparseable == first
        assert len(one_by_one) <= 32, (target, len(one_by_one))


def test_commit_timestamp_is_the_adjusted_timestamp(tmp_path: Path):
    """Commits with equal file times (a fresh clone, a copy): commit_timestamp() gives the same
    strictly increasing times as history(), time travel and _commit_timestamp (it used to give the
    raw file time, so travelling to it found an older version)."""
    t = tmp_path / "t"
    for k in range(3):
        deltalake.write_deltalake(str(t), pa.table({"x": pa.array([k], pa.int64())}), mode="append")
    for v in range(3):
        set_mtime(commit_path(t, v), BASE)
    table = DeltaTable(str(t))
    stamps = table.history().column("timestamp").to_pylist()
    assert stamps == [BASE * 1000, BASE * 1000 + 1, BASE * 1000 + 2]
    snap = table.snapshot()
    assert [snap.commit_timestamp(v) for v in range(3)] == stamps
    assert table.snapshot(timestamp=snap.commit_timestamp()).version == 2
    with pytest.raises(VersionNotFoundError):
        table.snapshot(version=1).commit_timestamp(2)


def test_empty_partition_value_is_null_from_a_typed_checkpoint(tmp_path: Path):
    """deltalake writes an empty string partition value as "" in ``partitionValues`` and, with
    ``writeStatsAsStruct``, in the checkpoint's ``partitionValues_parsed`` too. It is NULL either
    way (deltalake, Spark and delta-kernel-rs read NULL): the same version answered '' once
    replayed from the checkpoint (found by the scan fuzzer)."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = tmp_path / "t"
    rows = pa.table({"id": [1, 2, 3], "p": ["a", "", None]})
    deltalake.write_deltalake(
        str(t), rows, partition_by=["p"], configuration={"delta.checkpoint.writeStatsAsStruct": "true"}
    )

    def read() -> tuple[list, list, list]:
        ctx = SessionContext()
        dd.register_table(ctx, "t", str(t))
        got = ctx.sql("SELECT id, p FROM t ORDER BY id").to_arrow_table().to_pylist()
        nulls = ctx.sql("SELECT count(*) AS n FROM t WHERE p IS NULL").to_pylist()
        parts = DeltaTable(str(t)).snapshot().files().column("partition_values").to_pylist()
        return got, nulls, sorted(parts, key=str)

    before = read()
    assert before[0] == [{"id": 1, "p": "a"}, {"id": 2, "p": None}, {"id": 3, "p": None}]
    assert before[1] == [{"n": 2}]
    deltalake.DeltaTable(str(t)).create_checkpoint()
    checkpoint = pq.read_table(next(log_dir(t).glob("*.checkpoint.parquet"))).column("add")
    parsed = [v for v in pc.struct_field(checkpoint, "partitionValues_parsed").to_pylist() if v]
    assert {"p": ""} in parsed  # the premise: the typed column holds ""
    assert read() == before


# ------------------------------------------------------------------------------------------------
# a classic checkpoint's adds typed on a thread while the commits after it replay


def _checkpoint_then_changes(path: Path) -> None:
    """Partitioned appends with app transactions, a checkpoint, then a delete and appends that
    remove and re-add files the checkpoint lists."""
    for i in range(4):
        rows = pa.table({"id": pa.array(range(i * 100, i * 100 + 100), pa.int64()), "p": [f"p{i % 2}"] * 100})
        props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction(f"app{i % 2}", i)])
        deltalake.write_deltalake(str(path), rows, partition_by=["p"], mode="append", commit_properties=props)
    deltalake.DeltaTable(str(path)).create_checkpoint()
    deltalake.DeltaTable(str(path)).delete("id < 150")
    rows = pa.table({"id": pa.array(range(1000, 1010), pa.int64()), "p": ["p1"] * 10})
    props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction("app1", 9)])
    deltalake.write_deltalake(str(path), rows, partition_by=["p"], mode="append", commit_properties=props)


@pytest.mark.parametrize("slow", ["leaf", "leaf, few touched", "commits", "sequential"])
def test_checkpoint_adds_typed_on_a_thread(tmp_path, monkeypatch, slow):
    """Whether the commit keys are known before the checkpoint's adds are typed (a slow commit
    replay: typed first, dropped after) or not (a slow leaf read: dropped first), or the leaf is
    read on the caller's thread, files(), the row count, stats and app transactions agree with
    deltalake."""
    import time

    import delta_datafusion.snapshot as snapshot_module

    _checkpoint_then_changes(tmp_path)
    if slow == "sequential":
        monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 1)
    else:
        monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)  # the thread, whatever the CPU count
        name = "read_leaf" if slow.startswith("leaf") else "newest_per_key"
        if slow == "leaf, few touched":  # keys known first, yet typed first and dropped after
            monkeypatch.setattr(snapshot_module, "_few_touched", lambda keys, n: keys is not None)
        real = getattr(snapshot_module, name)

        def delayed(*args, **kwargs):
            time.sleep(0.2)
            return real(*args, **kwargs)

        monkeypatch.setattr(snapshot_module, name, delayed)
    snap = DeltaTable(str(tmp_path)).snapshot()
    assert snap.segment.checkpoint is not None and snap.segment.checkpoint.version == 3
    files = snap.files()
    assert files_summary(files) == oracle(tmp_path)
    assert count_rows(files) == 400 - 150 + 10
    mins = pc.struct_field(pc.struct_field(files.column("stats"), "minValues"), "id").to_pylist()
    assert sorted(mins)[0] == 150 and 1000 in mins
    assert snap.transactions == {"app0": 2, "app1": 9}
    assert snap.domain_metadata == {}


def _threads_started(monkeypatch) -> list[str]:
    """The names of the snapshot's helper threads started from now on (``_on_thread`` spied)."""
    import delta_datafusion.snapshot as snapshot_module

    started: list[str] = []
    real = snapshot_module._on_thread

    def spy(work, name):
        started.append(name)
        return real(work, name)

    monkeypatch.setattr(snapshot_module, "_on_thread", spy)
    return started


def test_checkpoint_of_the_latest_version_is_read_on_the_callers_thread(tmp_path, monkeypatch):
    """With no commit after the checkpoint there is nothing to overlap its read with: planning
    and files() read and type it on the caller's thread (a thread started and waited for on
    every query cost ~0.3 ms), with the same files; a commit after it still gets the thread."""
    import delta_datafusion.snapshot as snapshot_module

    for i in range(3):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "p": [f"p{i % 2}"] * 10})
        props = deltalake.CommitProperties(app_transactions=[deltalake.Transaction("app", i)])
        deltalake.write_deltalake(
            str(tmp_path), rows, partition_by=["p"], mode="append", commit_properties=props
        )
    deltalake.DeltaTable(str(tmp_path)).create_checkpoint()
    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)  # threads allowed, whatever the CPU count
    started = _threads_started(monkeypatch)
    snap = DeltaTable(str(tmp_path)).snapshot()
    assert not snap.commit_data and snap.checkpoint_version == 2  # the premise
    files, total, _ = snap.select_files(None)
    assert total == 3 and files_summary(files) == oracle(tmp_path)
    snap = DeltaTable(str(tmp_path)).snapshot()
    assert files_summary(snap.files()) == oracle(tmp_path)
    assert snap.transactions == {"app": 2}
    assert started == []
    deltalake.write_deltalake(
        str(tmp_path), pa.table({"id": [99], "p": ["p0"]}), partition_by=["p"], mode="append"
    )
    snap = DeltaTable(str(tmp_path)).snapshot()
    assert files_summary(snap.select_files(None)[0]) == oracle(tmp_path)
    assert started == ["delta-checkpoint-read"]


@pytest.mark.parametrize("stats", ["json", "json and struct", "struct"])
@pytest.mark.parametrize("path", ["apart", "rows not lining up", "typing failed once"])
def test_checkpoint_stats_parsed_while_the_rest_is_read(tmp_path, monkeypatch, stats, path):
    """A checkpoint of many adds and a few commits after it: its add stats are read on their own
    and typed on a thread of their own while the rest of it is read and replayed (the parse is
    most of a load's work). The files, stats included, are those of the leaf read whole, also
    when the two reads' rows do not line up (read whole again) or the typing fails (typed again
    after the commit keys are known, from the stats put back)."""
    import delta_datafusion.snapshot as snapshot_module

    conf = {
        "json": None,
        "json and struct": {"delta.checkpoint.writeStatsAsStruct": "true"},
        "struct": {
            "delta.checkpoint.writeStatsAsStruct": "true",
            "delta.checkpoint.writeStatsAsJson": "false",
        },
    }[stats]
    rows = pa.table({"id": pa.array(range(240), pa.int64()), "p": [f"p{i % 80}" for i in range(240)]})
    deltalake.write_deltalake(str(tmp_path), rows, partition_by=["p"], configuration=conf)
    deltalake.DeltaTable(str(tmp_path)).create_checkpoint()
    deltalake.DeltaTable(str(tmp_path)).delete("p = 'p3'")
    more = pa.table({"id": pa.array([1000, 1001], pa.int64()), "p": ["p5", "p90"]})
    deltalake.write_deltalake(str(tmp_path), more, partition_by=["p"], mode="append")
    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)  # the threads, whatever the CPU count
    with monkeypatch.context() as m:  # the leaf read whole
        m.setattr(snapshot_module.Snapshot, "_stats_apart", lambda *a: None, raising=False)
        whole = DeltaTable(str(tmp_path)).snapshot().files()
    started = _threads_started(monkeypatch)
    failed: list[bool] = []
    if path == "rows not lining up":
        monkeypatch.setattr(snapshot_module._StatsApart, "lines_up", lambda self, rest: False)
    elif path == "typing failed once":
        real_table = snapshot_module.Snapshot.scan_file_table

        def fail_once(self, raw, typed, pv=None):
            if not failed and threading.current_thread().name.startswith("delta-checkpoint-scan-files"):
                failed.append(True)
                raise ValueError("a file that does not fit the schema")
            return real_table(self, raw, typed, pv)

        monkeypatch.setattr(snapshot_module.Snapshot, "scan_file_table", fail_once)
    snap = DeltaTable(str(tmp_path)).snapshot()
    assert snap.checkpoint_version == 0 and len(snap.commit_data) == 2  # the premise
    files = snap.files()
    assert sorted(started) == ["delta-checkpoint-scan-files", "delta-checkpoint-stats"]
    assert failed == ([True] if path == "typing failed once" else [])
    assert files.equals(whole)
    assert files_summary(files) == oracle(tmp_path)
    assert count_rows(files) == 240 - 3 + 2
    mins = pc.struct_field(pc.struct_field(files.column("stats"), "minValues"), "id").to_pylist()
    assert sorted(mins)[:3] == [0, 1, 2] and 1001 in mins and 3 not in mins


@pytest.mark.parametrize("slow", ["commits", "sequential", "leaf, few touched"])
def test_checkpoint_files_an_overwrite_removed_are_not_typed(tmp_path, monkeypatch, slow):
    """An overwrite that changed a partition column's type removed every checkpointed file: their
    old values ('abc') do not parse as the new type. When the checkpoint's thread finished before
    the commit keys were known, it typed every add and refused the table (about 1 run in 2)."""
    import time

    import delta_datafusion.snapshot as snapshot_module

    deltalake.write_deltalake(str(tmp_path), pa.table({"p": ["abc"], "x": [1]}), partition_by=["p"])
    deltalake.DeltaTable(str(tmp_path)).create_checkpoint()
    rows = pa.table({"p": pa.array([1], pa.int32()), "x": [2]})
    deltalake.write_deltalake(
        str(tmp_path), rows, partition_by=["p"], mode="overwrite", schema_mode="overwrite"
    )
    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 1 if slow == "sequential" else 2)
    if slow == "commits":  # the thread is done before the commit keys are
        real = snapshot_module.newest_per_key

        def delayed(*args, **kwargs):
            time.sleep(0.2)
            return real(*args, **kwargs)

        monkeypatch.setattr(snapshot_module, "newest_per_key", delayed)
    if slow == "leaf, few touched":  # keys known first, typing every add fails: typed again after
        real_leaf = snapshot_module.read_leaf

        def delayed_leaf(*args, **kwargs):
            time.sleep(0.2)
            return real_leaf(*args, **kwargs)

        monkeypatch.setattr(snapshot_module, "read_leaf", delayed_leaf)
        monkeypatch.setattr(snapshot_module, "_few_touched", lambda keys, n: keys is not None)
    files = DeltaTable(str(tmp_path)).snapshot().files()
    assert files.column("partition_values").to_pylist() == [{"p": 1}]


@pytest.mark.parametrize(
    "new_values", [pa.array([dt.date(2020, 1, 1)]), pa.array([{"x": 1}])], ids=["to-date", "to-struct"]
)
def test_checkpoint_stats_of_a_column_retyped_since_are_not_typed(tmp_path, new_values):
    """A checkpoint with stats_parsed of a long column, then an overwrite retyping it: typing the
    removed files' bounds as the new type raised raw pyarrow/Python errors on the checkpoint
    thread (every run), and a bound of another kind is now unknown rather than an error."""
    deltalake.write_deltalake(
        str(tmp_path),
        pa.table({"a": pa.array([1, 2], pa.int64())}),
        configuration={"delta.checkpoint.writeStatsAsStruct": "true"},
    )
    deltalake.DeltaTable(str(tmp_path)).create_checkpoint()
    deltalake.write_deltalake(
        str(tmp_path), pa.table({"a": new_values}), mode="overwrite", schema_mode="overwrite"
    )
    got = DeltaTable(str(tmp_path)).snapshot().scan().to_table().column("a").to_pylist()
    assert got == new_values.to_pylist()


def test_snapshots_of_one_handle_built_on_threads_at_once(tmp_path):
    """The snapshots of one DeltaTable share its cached checkpoint reader (protocol and metadata
    reads): eight threads calling snapshot() at once crashed the process (segfault)."""
    import threading

    path = str(tmp_path / "t")
    for k in range(40):
        deltalake.write_deltalake(path, pa.table({"v": [k, k + 1]}), mode="append")
    deltalake.DeltaTable(path).create_checkpoint()
    checkpoint = next(log_dir(tmp_path / "t").glob("*.checkpoint.parquet"))
    pq.write_table(pq.read_table(checkpoint), checkpoint, row_group_size=7)  # several row groups
    deltalake.DeltaTable(path).alter.set_table_properties({"delta.appendOnly": "false"})
    for _ in range(20):
        table = DeltaTable(path)
        barrier, errors, versions = threading.Barrier(8), [], []

        def build(table=table, barrier=barrier, errors=errors, versions=versions):
            try:
                barrier.wait()
                versions.append(table.snapshot().version)
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=build) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        assert versions == [40] * 8


def test_log_cleanup_during_a_timestamp_lookup_is_a_package_error(copy_corpus_table):
    """In-commit timestamps are read from the commit files, after the listing: commits cleaned
    up in between gave a raw FileNotFoundError; now a MissingLogFileError naming the file (time
    travel by timestamp, history)."""
    from delta_datafusion.errors import MissingLogFileError

    t = copy_corpus_table("cdc_ict_table")
    deltalake.DeltaTable(str(t)).create_checkpoint()
    ict = [
        json.loads(commit_path(t, v).read_text().splitlines()[0])["commitInfo"]["inCommitTimestamp"]
        for v in range(4)
    ]
    table = DeltaTable(str(t))
    listing = table.listing()  # then the cleanup removes the commits before the checkpoint
    for v in range(3):
        commit_path(t, v).unlink()
    with pytest.raises(
        MissingLogFileError, match=r"00000000000000000002.json disappeared after the folder was listed"
    ):
        table.snapshot(timestamp=ict[2], listing=listing)
    table.listing = lambda: listing
    with pytest.raises(MissingLogFileError, match="disappeared after the folder was listed"):
        table.history()


def test_change_feed_start_timestamp_before_the_cleaned_up_history_is_refused(tmp_path):
    """With commits 0..4 cleaned up, a start timestamp before commit 5 may have selected one of
    them: refused (it silently started at version 5, leaving changes out), as a start version that
    old is; a start at commit 5's own timestamp still works."""
    import datetime as dt

    for i in range(6):
        deltalake.write_deltalake(
            str(tmp_path),
            pa.table({"id": [i]}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    for v in range(6):
        os.utime(commit_path(tmp_path, v), (1_700_000_000 + v * 10, 1_700_000_000 + v * 10))
    deltalake.DeltaTable(str(tmp_path)).create_checkpoint()
    for v in range(5):
        commit_path(tmp_path, v).unlink()
    table = DeltaTable(str(tmp_path))
    early = dt.datetime.fromtimestamp(1_700_000_020, tz=dt.timezone.utc)  # version 2's commit time
    with pytest.raises(VersionNotFoundError, match="before the earliest commit still in the log .version 5"):
        table.changes(early).to_table()
    with pytest.raises(VersionNotFoundError, match="versions 2..4 .* are not available"):
        table.changes(2).to_table()
    at5 = dt.datetime.fromtimestamp(1_700_000_050, tz=dt.timezone.utc)
    assert table.changes(at5).to_table().column("id").to_pylist() == [5]


def test_a_log_file_removed_after_the_listing_is_listed_again(tmp_path, monkeypatch):
    """A checkpoint listed, then removed by a concurrent writer's log cleanup before it was read:
    the snapshot lists again (as Spark does) instead of failing the read; so does a folder
    catalog query."""
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.log import segment

    t = tmp_path / "lake" / "t"
    for i in range(4):
        deltalake.write_deltalake(str(t), pa.table({"id": [i]}), mode="append")
        if i in (1, 3):
            deltalake.DeltaTable(str(t)).create_checkpoint()
    stale = segment.list_log(DeltaTable(str(t)).storage)  # names the checkpoint at version 3
    (log_dir(t) / f"{3:020d}.checkpoint.parquet").unlink()
    real = segment.list_log
    calls = []

    def listing_once_stale(storage):
        calls.append(storage.root)
        return stale if len(calls) == 1 else real(storage)

    monkeypatch.setattr(DeltaTable, "listing", lambda self: listing_once_stale(self.storage))
    snap = DeltaTable(str(t)).snapshot()
    assert len(calls) == 2 and snap.version == 3 and snap.checkpoint_version == 1
    assert sorted(snap.scan().to_table().column("id").to_pylist()) == [0, 1, 2, 3]
    calls.clear()
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    assert ctx.sql("SELECT count(*) AS n FROM lake.default.t").to_pydict()["n"] == [4]


def _table_with_an_old_checkpoint(t: Path, commits: int = 4) -> None:
    """Appends of one row each (``id`` = version), a checkpoint at version 1, no log retention."""
    conf = {"delta.logRetentionDuration": "interval 0 seconds"}
    for i in range(commits):
        deltalake.write_deltalake(str(t), pa.table({"id": [i]}), mode="append", configuration=conf)
        if i == 1:
            deltalake.DeltaTable(str(t)).create_checkpoint()


def _checkpoint_and_clean_up(t: Path) -> None:
    """A writer's checkpoint at the latest version, then log cleanup with zero retention: the
    older commits and checkpoints are deleted."""
    writer = deltalake.DeltaTable(str(t))
    writer.create_checkpoint()
    writer.cleanup_metadata()
    assert not (log_dir(t) / f"{1:020d}.checkpoint.parquet").exists()


def test_log_cleanup_between_a_catalog_listing_and_its_checkpoint_read(tmp_path, monkeypatch):
    """A folder-catalog query opens the table (listing, commits) and reads the checkpoint later,
    when it plans the scan: a log cleanup in between removed that checkpoint, and the query (and
    every later one, served the cached table) failed with MissingLogFileError. The version is now
    built again from a new listing, its rows right."""
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.datafusion import session

    t = tmp_path / "lake" / "t"
    _table_with_an_old_checkpoint(t)
    opened = session.table_dataset
    cleanups = []

    def cleanup_after_opening(snapshot, label=None):
        dataset = opened(snapshot, label)
        if not cleanups:  # the first opening: its snapshot replays checkpoint 1 + commits 2, 3
            assert snapshot.checkpoint_version == 1
            _checkpoint_and_clean_up(t)
            cleanups.append(snapshot.version)
        return dataset

    monkeypatch.setattr(session, "table_dataset", cleanup_after_opening)
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    query = "SELECT id FROM lake.default.t ORDER BY id"
    assert ctx.sql(query).to_pydict() == {"id": [0, 1, 2, 3]}
    assert cleanups == [3]
    assert ctx.sql(query).to_pydict() == {"id": [0, 1, 2, 3]}
    assert "version=3 files_total=4" in dd.explain(ctx, "SELECT count(*) FROM lake.default.t WHERE id > 0")


def test_log_cleanup_after_a_registration_is_listed_again_and_vacuum_stays_an_error(tmp_path):
    """A registered table's checkpoint is read when the first query plans; cleaned up before
    that, the version is listed again (read from the new checkpoint). A data file removed (a
    vacuum) is no log file: it stays an error naming the file, not a retry."""
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.errors import DataFileNotFoundError

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    ctx = SessionContext()
    dataset = dd.register_table(ctx, "t", str(t))
    _checkpoint_and_clean_up(t)
    assert ctx.sql("SELECT sum(id) AS s, count(*) AS n FROM t").to_pydict() == {"s": [6], "n": [4]}
    assert dataset.last_plan.version == 3
    gone = next(t.glob("*.parquet"))
    gone.unlink()
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT id FROM t ORDER BY id").to_pydict()
    error = dd.from_datafusion(info.value)
    assert isinstance(error, DataFileNotFoundError) and gone.name in str(error)


def test_log_cleanup_past_a_registered_version_is_a_clear_error(tmp_path):
    """When the writer committed and cleaned up past the registered version, that version cannot
    be read any more: the query says so (log cleanup, the version), instead of a missing
    checkpoint file."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    deltalake.write_deltalake(str(t), pa.table({"id": [4]}), mode="append")
    _checkpoint_and_clean_up(t)
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT id FROM t").to_pydict()
    error = dd.from_datafusion(info.value)
    assert isinstance(error, VersionNotFoundError)
    assert "log cleanup removed the files of version 3" in str(error)
    dd.register_table(ctx, "t", str(t))  # opened again: the latest version
    assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict() == {"n": [5]}


@pytest.mark.parametrize("read", ["changes", "table_changes", "history"])
def test_log_cleanup_right_after_a_change_feed_listing_is_listed_again(tmp_path, monkeypatch, read):
    """A checkpoint and log cleanup just after the change feed (or history) listed the log removed
    commits it then read: the feed of versions the cleanup kept failed with MissingLogFileError
    ("disappeared after the folder was listed"), where snapshot() lists again. It lists again
    too now."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = tmp_path / "t"
    conf = {"delta.logRetentionDuration": "interval 0 seconds", "delta.enableChangeDataFeed": "true"}
    for i in range(5):
        deltalake.write_deltalake(str(t), pa.table({"id": [i]}), mode="append", configuration=conf)
        if i == 1:
            deltalake.DeltaTable(str(t)).create_checkpoint()
    listings = _cleanup_after_the_first_listing(monkeypatch, t)
    if read == "changes":
        rows = DeltaTable(str(t)).changes(4).to_table()
        assert rows.column("id").to_pylist() == [4]
    elif read == "table_changes":
        ctx = dd.register(SessionContext())
        rows = ctx.sql(f"SELECT id, _commit_version FROM table_changes('{t}', 4)").to_pydict()
        assert rows == {"id": [4], "_commit_version": [4]}
    else:
        assert DeltaTable(str(t)).history().column("version").to_pylist() == [3, 4]
    assert len(listings) >= 2


def test_log_cleanup_after_a_snapshot_was_loaded_is_listed_again(tmp_path):
    """The Python API reads a snapshot's checkpoint on first use, as a registered table does: a
    checkpoint and log cleanup in between removed it, and a snapshot (or a scan made from it)
    whose version the new checkpoint still gives failed with MissingLogFileError ("disappeared
    after the folder was listed") where the same query through SQL read it. The version is now
    built again from a new listing."""
    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    table = DeltaTable(str(t))
    for_scan, for_files, for_txn = table.snapshot(), table.snapshot(), table.snapshot()
    scan = for_scan.scan(predicate="id > 0")
    _checkpoint_and_clean_up(t)
    assert sorted(scan.to_table().column("id").to_pylist()) == [1, 2, 3]
    assert sorted(for_scan.scan().to_table().column("id").to_pylist()) == [0, 1, 2, 3]
    assert for_files.files().num_rows == 4 and for_files.version == 3
    assert for_txn.transactions == {} and for_txn.files().num_rows == 4


def test_log_cleanup_before_a_parallel_scan_of_a_loaded_snapshot_is_listed_again(tmp_path):
    """parallel_scan_metadata() of a snapshot whose checkpoint a log cleanup removed after it was
    loaded yielded the old listing's commits, then failed with MissingLogFileError ("disappeared
    after the folder was listed"), where files() and the other scans of that snapshot list again.
    It lists again too now, before it yields anything: the two phases give that version's files."""
    from delta_datafusion.parallel import run_parallel

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    snap = DeltaTable(str(t)).snapshot()
    _checkpoint_and_clean_up(t)
    want = DeltaTable(str(t)).snapshot(3).scan(predicate="id > 0").files()
    assert want.num_rows == 3
    got = [
        path
        for m in run_parallel(snap.scan(predicate="id > 0"))
        for path in m.files.column("path").to_pylist()
    ]
    assert sorted(got) == sorted(want.column("path").to_pylist())


def test_log_cleanup_past_a_loaded_snapshot_is_a_clear_error(tmp_path):
    """A snapshot whose version a log cleanup removed (the writer committed past it first) says
    so, naming the version, instead of a missing checkpoint file."""
    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    snap = DeltaTable(str(t)).snapshot()
    deltalake.write_deltalake(str(t), pa.table({"id": [4]}), mode="append")
    _checkpoint_and_clean_up(t)
    for read in (
        snap.files,
        lambda: snap.scan().to_table(),
        lambda: list(snap.scan().parallel_scan_metadata()),
    ):
        with pytest.raises(
            VersionNotFoundError, match=r"log cleanup removed the files of version 3 .*4\.\.4"
        ):
            read()


@pytest.mark.parametrize("read", ["transactions", "domain_metadata"])
def test_transactions_of_a_cleaned_up_snapshot_beside_another_snapshot_files(
    tmp_path, copy_corpus_table, monkeypatch, read
):
    """A snapshot whose checkpoint a log cleanup removed, asked for its transactions first (the
    checkpoint holds them) while another thread builds a second table's files: the transactions
    listed the log again through files(), which waits for the snapshot lock while holding the
    transactions property's lock (one per class before Python 3.12), and that thread's files()
    took the two in the other order: both threads hung. It lists again on its own now."""
    import threading

    from delta_datafusion import snapshot as snapshot_module

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    stale = DeltaTable(str(t)).snapshot()
    _checkpoint_and_clean_up(t)
    other = DeltaTable(str(copy_corpus_table("v2-checkpoint-json"))).snapshot()  # files read with txns
    asking, building = threading.Event(), threading.Event()
    real_manifest, real_replay = snapshot_module.read_manifest, snapshot_module.Snapshot._replayed_files

    def manifest_once_the_other_builds(storage, *args):
        if storage is stale.storage and not asking.is_set():
            asking.set()  # the stale snapshot's property lock is held now
            building.wait(30)
        return real_manifest(storage, *args)

    def replay_once_the_stale_one_asks(self):
        if self is other:
            building.set()  # the other snapshot's lock and files lock are held now
            asking.wait(30)
        return real_replay(self)

    monkeypatch.setattr(snapshot_module, "read_manifest", manifest_once_the_other_builds)
    monkeypatch.setattr(snapshot_module.Snapshot, "_replayed_files", replay_once_the_stale_one_asks)
    results: dict = {}

    def run(key, work):
        try:
            results[key] = work()
        except Exception as e:  # noqa: BLE001 - asserted below
            results[key] = e

    threads = [
        threading.Thread(target=run, args=(read, lambda: getattr(stale, read)), daemon=True),
        threading.Thread(target=run, args=("files", lambda: other.files().num_rows), daemon=True),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)  # a hang, not a time limit: the two threads deadlocked
    assert not any(thread.is_alive() for thread in threads), "deadlocked"
    assert results == {read: {}, "files": 4}
    assert stale.files().num_rows == 4 and stale.version == 3


def _on_threads(work: dict) -> tuple[dict, list]:
    """Start one daemon thread per ``work`` entry; results (or exceptions) by key, and the threads."""
    import threading

    results: dict = {}

    def run(key, fn):
        try:
            results[key] = fn()
        except Exception as e:  # noqa: BLE001 - asserted by the caller
            results[key] = e

    threads = [threading.Thread(target=run, args=item, daemon=True) for item in work.items()]
    for thread in threads:
        thread.start()
    return results, threads


def test_files_of_two_tables_build_on_two_threads_at_once(tmp_path, monkeypatch):
    """Two snapshots of two tables: while one thread replays one snapshot's log, other threads
    build the other's files. The cached properties held one lock per class while computing
    (functools.cached_property before Python 3.12): the other threads waited for the first
    snapshot's whole log replay, and for ever when that replay waited on one of them."""
    import threading

    from delta_datafusion import snapshot as snapshot_module

    for name in ("a", "b"):
        deltalake.write_deltalake(str(tmp_path / name), pa.table({"x": [1, 2]}))
        deltalake.write_deltalake(str(tmp_path / name), pa.table({"x": [3]}), mode="append")
    held = DeltaTable(str(tmp_path / "a")).snapshot()
    other = DeltaTable(str(tmp_path / "b")).snapshot()
    replaying, release = threading.Event(), threading.Event()
    real_newest = snapshot_module.newest_per_key

    def first_held_until_released(adds, removes, where):
        if not replaying.is_set():  # the held snapshot's commit replay (its files are being built)
            replaying.set()
            release.wait(60)
        return real_newest(adds, removes, where)

    monkeypatch.setattr(snapshot_module, "newest_per_key", first_held_until_released)
    results, (first,) = _on_threads({"held": lambda: held.files().num_rows})
    try:
        assert replaying.wait(30)
        others, threads = _on_threads(
            {"files": lambda: other.files().num_rows, "raw_files": lambda: other.raw_files.num_rows}
        )
        for thread in threads:
            thread.join(30)  # a hang, not a time limit: the other snapshot waited for the held one
        assert not any(thread.is_alive() for thread in threads), "waited for the held snapshot"
        assert others == {"files": 2, "raw_files": 2}
        assert results == {}  # still held
    finally:
        release.set()
    first.join(30)
    assert not first.is_alive()
    assert results == {"held": 2}


def test_a_snapshot_property_is_built_once_by_concurrent_callers_and_a_failure_is_not_kept(
    tmp_path, monkeypatch
):
    """The snapshot's cached values are computed under a lock of the snapshot and property (not
    of the class): threads asking together get the one value computed once; a failed computation
    is not kept, so the next call computes again."""
    import threading

    from delta_datafusion import snapshot as snapshot_module
    from delta_datafusion.errors import StorageError

    deltalake.write_deltalake(str(tmp_path), pa.table({"x": [1, 2]}))
    deltalake.write_deltalake(str(tmp_path), pa.table({"x": [3]}), mode="append")
    calls: list[int] = []
    computing, release = threading.Event(), threading.Event()
    real_sources = snapshot_module.Snapshot._raw_sources

    def failing_first(self):
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("the store failed once")
        return real_sources(self)

    monkeypatch.setattr(snapshot_module.Snapshot, "_raw_sources", failing_first)
    snap = DeltaTable(str(tmp_path)).snapshot()
    with pytest.raises(StorageError, match="failed once"):
        snap.raw_files  # noqa: B018
    assert snap.raw_files.num_rows == 2 and len(calls) == 2

    def held_first(self):
        calls.append(1)
        if not computing.is_set():
            computing.set()
            release.wait(60)
        return real_sources(self)

    calls.clear()
    monkeypatch.setattr(snapshot_module.Snapshot, "_raw_sources", held_first)
    snap = DeltaTable(str(tmp_path)).snapshot()
    results, threads = _on_threads({i: lambda: snap.raw_files for i in range(3)})
    assert computing.wait(30)
    threading.Event().wait(0.2)  # let the other threads ask meanwhile (not a time limit)
    release.set()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert len(calls) == 1 and results[0].num_rows == 2
    assert results[1] is results[0] and results[2] is results[0]


def _raw_leftovers(snap) -> list[str]:
    """The raw log values a snapshot whose files are built still holds (it should hold none)."""
    return [k for k in ("raw_files", "_checkpoint_pass") if k in snap.__dict__]


def test_raw_files_planned_on_a_thread_are_not_kept_after_files_were_built(tmp_path, monkeypatch):
    """A thread planning from the raw adds (select_files, as every SQL query does) while another
    builds the typed files (files(), the Python API's scans): the raw adds (stats strings,
    about twice the typed table) are dropped once the typed files exist. They were kept for the
    snapshot's life when the planning thread finished making them after files() had dropped
    them (forced here: the planner is held after reading the log until files() returned)."""
    from delta_datafusion import snapshot as snapshot_module

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    snap = DeltaTable(str(t)).snapshot()
    real_sources = snapshot_module.Snapshot._raw_sources
    planner: dict = {}
    sources_read, files_built = threading.Event(), threading.Event()

    def held_on_the_planner(self):
        out = real_sources(self)
        if threading.get_ident() == planner.get("thread"):
            sources_read.set()
            files_built.wait(60)
        return out

    def plan():
        planner["thread"] = threading.get_ident()
        return snap.select_files(None)[0].num_rows

    monkeypatch.setattr(snapshot_module.Snapshot, "_raw_sources", held_on_the_planner)
    results, (thread,) = _on_threads({"planned": plan})
    assert sources_read.wait(30)
    assert snap.files().num_rows == 4
    files_built.set()
    thread.join(30)
    assert results == {"planned": 4}
    assert _raw_leftovers(snap) == []


def test_raw_checkpoint_read_on_a_thread_is_not_kept_after_the_one_leaf_files_were_built(
    tmp_path, monkeypatch
):
    """A thread planning from the raw adds reads the checkpoint into ``_checkpoint_pass`` while
    files() types the same one-leaf checkpoint on its own thread (the overlapped path): that raw
    read is dropped with the raw adds once the typed files exist (it was kept for the snapshot's
    life: the overlapped path dropped only the raw adds). Forced: the planner starts reading
    once files() is typing, and files() goes on once the planner has read the log."""
    from delta_datafusion import snapshot as snapshot_module

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    snap = DeltaTable(str(t)).snapshot()
    real_sources = snapshot_module.Snapshot._raw_sources
    real_apart = snapshot_module.Snapshot._stats_apart
    planning, typing, planned = threading.Event(), threading.Event(), threading.Event()

    def planner_waits_for_typing(self):
        planning.set()
        typing.wait(60)
        try:
            return real_sources(self)
        finally:
            planned.set()

    def typing_waits_for_planner(self, *args):
        typing.set()
        planned.wait(60)
        return real_apart(self, *args)

    def plan():
        return snap.select_files(None)[0].num_rows

    monkeypatch.setattr(snapshot_module.Snapshot, "_raw_sources", planner_waits_for_typing)
    monkeypatch.setattr(snapshot_module.Snapshot, "_stats_apart", typing_waits_for_planner)
    results, threads = _on_threads({"planned": plan})
    assert planning.wait(30)  # past the check for built files
    more, threads2 = _on_threads({"files": lambda: snap.files().num_rows})
    for thread in threads + threads2:
        thread.join(30)
    assert typing.is_set() and planned.is_set()  # files() took the overlapped path
    assert results == {"planned": 4} and more == {"files": 4}
    assert _raw_leftovers(snap) == []


def test_commit_timestamp_of_a_cleaned_up_version_names_the_commits_left(tmp_path):
    """A snapshot kept while the log is cleaned up past its version: its commit timestamp is no
    longer known, and the error says which commits are left (it named the version only)."""
    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    snap = DeltaTable(str(t)).snapshot()
    deltalake.write_deltalake(str(t), pa.table({"id": [4]}), mode="append")
    _checkpoint_and_clean_up(t)
    with pytest.raises(VersionNotFoundError, match=r"version 3 .*log cleaned up.*commits available: 4\.\.4"):
        snap.commit_timestamp()


def test_commit_timestamp_lists_again_when_a_cleanup_follows_its_listing(tmp_path, monkeypatch):
    """Snapshot.commit_timestamp() lists the log for the commit file times (each made greater than
    the ones before): a checkpoint and log cleanup right after that listing removed commits it
    then asked for their times, and it failed with MissingLogFileError where history() lists
    again. It lists again too now."""

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t, commits=5)
    snap = DeltaTable(str(t)).snapshot()
    listings = _cleanup_after_the_first_listing(monkeypatch, t)
    got = snap.commit_timestamp()
    assert len(listings) >= 2
    assert got == DeltaTable(str(t)).history().column("timestamp")[-1].as_py()


def test_a_table_written_again_to_the_same_version_is_not_read_as_the_registered_one(tmp_path):
    """The folder deleted and another table written there up to the registered version: listing
    again finds that version with other metadata, and the query is refused instead of reading
    the other table's files with the registered schema."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = tmp_path / "t"
    _table_with_an_old_checkpoint(t)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    shutil.rmtree(t)
    for i in range(4):
        deltalake.write_deltalake(str(t), pa.table({"name": [str(i)]}), mode="append")
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT id FROM t").to_pydict()
    assert "was replaced by another table after it was opened" in str(dd.from_datafusion(info.value))


def test_a_table_written_again_with_its_own_checkpoint_at_the_registered_one_is_not_called_corrupt(tmp_path):
    """As above, but the new table has a checkpoint where the registered snapshot's was (same
    version, same name, other bytes): the registered snapshot, whose checkpoint is read at the
    first query, failed with LogCorruptError "cannot read checkpoint parquet: Unexpected end of
    stream" (the file was opened at the size listed before). The log is listed again, which
    finds another table there."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    def table(columns: dict) -> None:
        for _ in range(2):
            deltalake.write_deltalake(str(t), pa.table(columns), mode="append")
        deltalake.DeltaTable(str(t)).create_checkpoint()  # at version 1
        deltalake.write_deltalake(str(t), pa.table(columns), mode="append")

    t = tmp_path / "t"
    table({"id": [1]})
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    snap = DeltaTable(str(t)).snapshot()
    shutil.rmtree(t)
    table({"name": ["a much longer value than a number", "and a second row"]})
    with pytest.raises(Exception) as info:
        ctx.sql("SELECT * FROM t").to_pydict()
    assert "was replaced by another table after it was opened" in str(dd.from_datafusion(info.value))
    with pytest.raises(DeltaError, match="was replaced by another table after it was opened"):
        snap.files()


@pytest.mark.parametrize("how", ["sql", "files"])
def test_a_table_written_again_with_a_checkpoint_of_the_same_size_is_not_read_as_the_registered_one(
    tmp_path, how
):
    """As above, but the new table's checkpoint has the very size of the registered one's (the same
    writes of other values): it parsed, and the registration read the new table's rows (v 7 and
    8 for 0 and 1). The checkpoint's metaData row names another table id than the one read from
    the same file when the snapshot was loaded. (The parallel phase two already compared ids.)"""
    from datafusion import SessionContext

    import delta_datafusion as dd

    def table(first: int) -> None:
        for v in (first, first + 1):
            deltalake.write_deltalake(str(t), pa.table({"id": [1, 2, 3], "v": [v] * 3}), mode="append")
        deltalake.DeltaTable(str(t)).create_checkpoint()  # at version 1, the latest

    t = tmp_path / "t"
    table(0)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    snap = DeltaTable(str(t)).snapshot()
    size = checkpoint_file(t, 1).stat().st_size
    shutil.rmtree(t)
    table(7)
    assert checkpoint_file(t, 1).stat().st_size == size
    with pytest.raises(Exception) as info:
        if how == "sql":
            ctx.sql("SELECT v FROM t").to_pydict()
        else:
            snap.files()
    assert "was replaced by another table after it was opened" in str(dd.from_datafusion(info.value))


def test_log_cleanup_whose_checkpoint_writes_the_schema_in_another_form_is_the_same_table(copy_corpus_table):
    """The corpus table's checkpoint writes its schemaString with spaces, its commits without; a
    checkpoint rebuilt from the commits (compact) then a log cleanup, between registration and
    the first query: the version listed again is the same table (it was refused as "replaced by
    another table": the metadata were compared by their text)."""
    import glob

    from datafusion import SessionContext

    import delta_datafusion as dd

    t = copy_corpus_table("parsed-stats")
    other = copy_corpus_table("parsed-stats", "other")
    for f in glob.glob(str(other / "_delta_log" / "*checkpoint*")):
        os.remove(f)
    deltalake.DeltaTable(str(other)).create_checkpoint()
    version = DeltaTable(str(t)).snapshot().version
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    want = SessionContext()
    dd.register_table(want, "t", str(t))
    expected = want.sql("SELECT * FROM t ORDER BY 1").to_pydict()
    log = t / "_delta_log"
    ckpt = f"{version:020d}.checkpoint.parquet"
    for f in (ckpt, "_last_checkpoint"):
        shutil.copy(other / "_delta_log" / f, log / f)
    for f in log.iterdir():  # the cleanup: everything before the new checkpoint
        if f.name[:20].isdigit() and int(f.name[:20]) < version:
            f.unlink()
    assert ctx.sql("SELECT * FROM t ORDER BY 1").to_pydict() == expected


@pytest.mark.parametrize("stats_as_struct", [False, True], ids=["stats-json", "stats-struct"])
def test_queries_see_partition_values_of_adds_after_a_checkpoint(tmp_path: Path, stats_as_struct: bool):
    """Query planning types the commits' adds together with the checkpoint's. With typed
    partition values in the checkpoint (writeStatsAsStruct), the commits' adds (which have none
    there) came out with NULL partition values: wrong values in SELECT, rows lost to a partition
    filter (session 9's empty-string rule made a missing parsed value NULL)."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = tmp_path / "t"
    build_history(t, checkpoints=(4,), stats_as_struct=stats_as_struct)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    want = {"p": ["c", "a", "d", "b", "b", "c", "f"], "x": [101, 300, 302, 400, 401, 500, 700]}
    assert ctx.sql("SELECT p, x FROM t ORDER BY x").to_pydict() == want
    assert ctx.sql("SELECT p, x FROM t WHERE x > 0 ORDER BY x").to_pydict() == want
    assert ctx.sql("SELECT x FROM t WHERE p = 'f'").to_pydict() == {"x": [700]}
    pruned = DeltaTable(str(t)).snapshot().scan(predicate="x >= 500").to_table().sort_by("x")
    assert pruned.to_pydict() == {"x": [500, 700], "p": ["c", "f"]}


def test_checkpoint_partition_strings_win_over_a_disagreeing_typed_copy(tmp_path: Path):
    """A checkpoint whose ``partitionValues_parsed`` disagrees with the ``partitionValues`` strings
    (an edited or badly written checkpoint): the strings, the protocol's required field, decide,
    as in Spark, delta-kernel-rs (DuckDB) and deltalake. The typed copy decided before (99 for
    "10"; 20 for a NULL)."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    t = tmp_path / "t"
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "p": pa.array([10, 20], pa.int64())})
    conf = {"delta.checkpoint.writeStatsAsStruct": "true"}
    deltalake.write_deltalake(str(t), rows, partition_by=["p"], configuration=conf)
    deltalake.DeltaTable(str(t)).create_checkpoint()
    (log_dir(t) / f"{0:020d}.json").unlink()
    path = next(log_dir(t).glob("*.checkpoint.parquet"))
    checkpoint = pq.read_table(path)
    adds = checkpoint.column("add").combine_chunks()
    edited = []
    for add in adds.to_pylist():
        if add and add["partitionValues_parsed"]["p"] == 10:
            add["partitionValues_parsed"]["p"] = 99  # the strings still say "10"
        elif add and add["partitionValues_parsed"]["p"] == 20:
            add["partitionValues"] = [("p", None)]  # the strings say NULL
        edited.append(add)
    i = checkpoint.column_names.index("add")
    pq.write_table(checkpoint.set_column(i, "add", pa.array(edited, adds.type)), path)
    expected = [{"id": 1, "p": 10}, {"id": 2, "p": None}]
    assert (
        sorted(deltalake.DeltaTable(str(t)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected
    )
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    assert ctx.sql("SELECT id, p FROM t ORDER BY id").to_pylist() == expected
    assert ctx.sql("SELECT id FROM t WHERE p = 10").to_pylist() == [{"id": 1}]
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE p IS NULL").to_pylist() == [{"n": 1}]
    parts = DeltaTable(str(t)).snapshot().files().column("partition_values").to_pylist()
    assert sorted(parts, key=str) == sorted([{"p": 10}, {"p": None}], key=str)


def test_in_commit_timestamp_given_as_a_boolean_is_refused(tmp_path: Path):
    """JSON true is no timestamp: it was read as 1 (bool is an int in Python): commit_timestamp
    returned True and history() failed with pyarrow's ArrowTypeError."""
    t, _ = _ict_table(tmp_path)
    lines = commit_path(t, 4).read_text().splitlines()
    first = json.loads(lines[0])
    first["commitInfo"]["inCommitTimestamp"] = True
    commit_path(t, 4).write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    why = r"00000000000000000004\.json: in-commit timestamps are enabled but the first action has no"
    with pytest.raises(LogCorruptError, match=why):
        DeltaTable(str(t)).snapshot().commit_timestamp(4)
    with pytest.raises(LogCorruptError, match=why):
        DeltaTable(str(t)).history()


@pytest.mark.parametrize("dropped", ["Version", "Timestamp"])
def test_in_commit_timestamp_enablement_with_one_property_missing(tmp_path: Path, dropped: str):
    """One enablement property without the other was read as "enabled at creation", and the error
    then blamed version 0 for having no in-commit timestamp (delta-kernel-rs refuses the table
    configuration, naming the missing property)."""
    t, _ = _ict_table(tmp_path)
    actions = [json.loads(line) for line in commit_path(t, 3).read_text().splitlines()]
    for a in actions:
        if "metaData" in a:
            del a["metaData"]["configuration"][f"delta.inCommitTimestampEnablement{dropped}"]
    write_commit(t, 3, actions)
    other = "Timestamp" if dropped == "Version" else "Version"
    why = f"{t.name}: table property delta.inCommitTimestampEnablement{other} is set without "
    why += f"delta.inCommitTimestampEnablement{dropped}"
    with pytest.raises(LogCorruptError, match=why):
        DeltaTable(str(t)).history()
    with pytest.raises(LogCorruptError, match=why):
        DeltaTable(str(t)).snapshot(timestamp=BASE * 1000)


def test_change_range_timestamps_below_the_microsecond():
    """A start between two microseconds means the first commit at or after it: rounded up, from
    strings and numpy alike (strings were truncated); an end is rounded down. Strings take any
    number of fraction digits and a lower-case z, as snapshot(timestamp=) does."""
    import numpy as np

    from delta_datafusion.changes.version_range import Instant, as_bound

    base = 1_700_000_001_000_000  # 2023-11-14T22:13:21Z in microseconds
    for text in (
        "2023-11-14T22:13:21.000000001Z",
        "2023-11-14 22:13:21.0000001+00:00",
        "2023-11-14T22:13:21.0000009z",
    ):
        assert as_bound(text, "start") == Instant(base + 1), text
        assert as_bound(text, "end") == Instant(base), text
    assert as_bound("20231114T221321.0000001Z", "start") == Instant(base + 1)  # basic form
    assert as_bound("20231114T221321,0000001+0000", "end") == Instant(base)
    assert as_bound("2023-11-14T22:13:21.000000000Z", "start") == Instant(base)
    assert as_bound("2023-11-14T22:13:21.5z", "start") == Instant(base + 500_000)
    ns = np.datetime64(base * 1000 + 1, "ns")
    assert as_bound(ns, "start") == Instant(base + 1)
    assert as_bound(ns, "end") == Instant(base)
    assert as_bound(np.datetime64(base, "us"), "start") == Instant(base)


def test_iso_timestamps_read_the_same_on_every_supported_python():
    """parse_iso reads ISO-8601 calendar dates and times by its own grammar, then checks them with
    datetime.fromisoformat in the extended form: the same answers on Python 3.10 (whose reader
    takes only that form) and 3.11 (whose reader also takes non-ISO strings)."""
    import datetime as dt

    from delta_datafusion.timestamps import parse_iso

    utc, plus1 = dt.timezone.utc, dt.timezone(dt.timedelta(hours=1))
    cases = {
        "2024-01-02": dt.datetime(2024, 1, 2),
        "20240102": dt.datetime(2024, 1, 2),
        "2024-01-02T03:04:05Z": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc),
        "20240102T030405z": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc),
        "2024-01-02 03:04:05+0100": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=plus1),
        "2024-01-02T03:04+01": dt.datetime(2024, 1, 2, 3, 4, tzinfo=plus1),
        "2024-01-02T03:04:05.5": dt.datetime(2024, 1, 2, 3, 4, 5, 500000),
        "2024-01-02T03:04:05,123456789": dt.datetime(2024, 1, 2, 3, 4, 5, 123456),
        # offsets with seconds, as datetime.isoformat() writes them (Europe/Amsterdam in 1900)
        "1900-01-01T12:00:00+00:19:32": dt.datetime(
            1900, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(seconds=1172))
        ),
        "1900-01-01T12:00:00+001932": dt.datetime(
            1900, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(seconds=1172))
        ),
    }
    assert {text: parse_iso(text)[0] for text in cases} == cases
    assert parse_iso("2024-01-02T03:04:05,123456789")[1] and not parse_iso("2024-01-02T03:04:05.1234560")[1]
    garbage = ("2024-01-02T03:04:05+01:", "2024-01-02T0304:05", "2024-01-02T03:04:05.123456\u0663")
    # Python 3.11 reads these as other instants (a fraction of an hour as one of a second, a
    # date's offset as a time of day, a digit dropped): not ISO-8601, refused
    garbage += ("2024-01-02T03,5", "2024-01-02+05:00", "1970-01-08T1148385Z", "2024-01-02x03:04:05")
    garbage += ("2024W011T03:04:05Z",)  # week dates are not read (Python 3.10 cannot)
    assert not parse_iso("2024-01-02T03:04:05+01:00:00.1234567")[1]  # an offset's digits are not the time's
    for bad in ("abc", "2024-13-01", "2024-01-02T03:04:05Z+00:00", "2024-01-02T03:04:05+1", *garbage):
        assert parse_iso(bad) is None, bad


def test_in_commit_timestamp_enablement_version_after_the_latest_version(tmp_path: Path):
    """An enablement version no commit has reached (delta-kernel-rs refuses it): a timestamp at
    or after the enablement timestamp was answered with the latest version, unchecked."""
    t, stamps = _ict_table(tmp_path)
    actions = [json.loads(line) for line in commit_path(t, 3).read_text().splitlines()]
    for a in actions:
        if "metaData" in a:
            a["metaData"]["configuration"]["delta.inCommitTimestampEnablementVersion"] = "9"
    write_commit(t, 3, actions)
    with pytest.raises(
        LogCorruptError, match="delta.inCommitTimestampEnablementVersion is 9, after the latest version 4"
    ):
        DeltaTable(str(t)).snapshot(timestamp=stamps[3] + 10**9)


def test_change_range_over_a_missing_commit_names_it_and_the_gap(tmp_path):
    """The error said 'versions 4' and 'commits available: 0..7' although 4 is not."""
    for v in range(8):
        deltalake.write_deltalake(
            str(tmp_path),
            pa.table({"id": [v]}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    commit_path(tmp_path, 4).unlink()
    with pytest.raises(
        VersionNotFoundError,
        match=r"commit file of version 4 of .* is not available .*available: 0..7 without 4",
    ):
        DeltaTable(str(tmp_path)).changes(3, 7).to_table()


def _cleanup_after_the_first_listing(monkeypatch, t) -> list[str]:
    """Make the first listing of ``t``'s log be followed at once by a writer's checkpoint of
    version 3 and log cleanup of 0..2; returns the listed paths, one per listing."""
    from delta_datafusion.storage import Storage

    real = Storage.list_names
    listings: list[str] = []

    def cleanup_after_the_first_listing(self, path):
        names = real(self, path)
        listings.append(path)
        if len(listings) == 1:
            deltalake.DeltaTable(str(t), version=3).create_checkpoint()
            deltalake.DeltaTable(str(t)).cleanup_metadata()
            assert not commit_path(t, 2).exists()
        return names

    monkeypatch.setattr(Storage, "list_names", cleanup_after_the_first_listing)
    return listings
