"""Two-phase parallel scan metadata (``delta_datafusion.parallel``).

The invariant checked everywhere: the sequential phase's batches plus the parallel phase's batches
over *any* partition of the checkpoint leaves (and of their row groups) equal ``scan_metadata()``
as a set of files (all scan-metadata columns compared, rows sorted by path and DV id).

Tables: every corpus table that loads (categories data / log_only, at its latest version and at
its checkpoint and expectation versions), and tables generated here with
``benchmarks/gen_v2_checkpoint.py`` (V2 JSON and parquet manifests with sidecars and inline adds,
multi-part and classic checkpoints with several row groups, commits after the checkpoint with
removes, re-adds, DV updates, stats-only re-adds and a metaData change). The generator knows the
live file set by construction, which checks the sequential reference (``Snapshot.files()``)
itself; deltalake (delta-rs) cross-checks the path sets independently.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import os
import re
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delta_datafusion import DeltaTable
from delta_datafusion import parallel as par
from delta_datafusion.errors import DeltaError, ParallelStateError
from delta_datafusion.log.checkpoint import LeafFile
from delta_datafusion.parallel import (
    Done,
    Parallel,
    ParallelScanMetadata,
    ParallelState,
    SequentialPhase,
    concat_files,
    expand_leaf,
    run_parallel,
    run_with_dask,
    scan_leaf_files,
    split_leaves,
)
from delta_datafusion.parallel import execute as par_execute
from delta_datafusion.parallel import state as par_state
from delta_datafusion.parallel.state import LeafAdds
from delta_datafusion.scan import ScanMetadata

REPO = Path(__file__).resolve().parents[1]
from conftest import CORPUS, MANIFEST, corpus_table, one_row_appends, record_read_threads  # noqa: E402

BENCH = REPO / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import gen_v2_checkpoint as gen  # noqa: E402

HAS_SKIPPING = importlib.util.find_spec("delta_datafusion.skipping") is not None


# ==============================================================================================
# helpers
# ==============================================================================================


def _dv_key(files: pa.Table) -> pa.Array:
    dv = files.column("deletion_vector").combine_chunks()
    parts = [
        pc.fill_null(pc.struct_field(dv, "storageType"), ""),
        pc.fill_null(pc.struct_field(dv, "pathOrInlineDv"), ""),
        pc.fill_null(pc.struct_field(dv, "offset").cast(pa.string()), ""),
    ]
    return pc.binary_join_element_wise(*parts, "|")


def canonical(files: pa.Table) -> pa.Table:
    """Rows sorted by (path, DV id); all scan-metadata columns kept."""
    t = files.combine_chunks()
    t = t.append_column("_dv", _dv_key(t)).sort_by([("path", "ascending"), ("_dv", "ascending")])
    return t.drop_columns(["_dv"]).combine_chunks()


def _norm(v):
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def assert_same_files(actual: pa.Table, expected: pa.Table, context: str = "") -> None:
    assert actual.schema == expected.schema, (
        f"{context}: schema differs\n{actual.schema}\nvs\n{expected.schema}"
    )
    a, e = canonical(actual), canonical(expected)
    if a.equals(e):
        return
    ka = set(zip(a.column("path").to_pylist(), _dv_key(a).to_pylist(), strict=True))
    ke = set(zip(e.column("path").to_pylist(), _dv_key(e).to_pylist(), strict=True))
    assert ka == ke, f"{context}: extra {sorted(ka - ke)[:5]}, missing {sorted(ke - ka)[:5]}"
    assert a.num_rows == e.num_rows, f"{context}: {a.num_rows} rows vs {e.num_rows} (duplicates?)"
    ra, re_ = _norm(a.to_pylist()), _norm(e.to_pylist())
    for x, y in zip(ra, re_, strict=True):
        assert x == y, f"{context}: row differs\n{x}\nvs\n{y}"


def reference_files(path: str, version: int | None = None, predicate=None) -> pa.Table:
    """``scan_metadata()`` of a fresh snapshot, concatenated."""
    scan = DeltaTable(path).snapshot(version).scan(predicate=predicate)
    batches = list(scan.scan_metadata())
    return pa.concat_tables([b.files for b in batches])


def sequential(path: str, version: int | None = None, predicate=None) -> tuple[list, Done | Parallel]:
    phase = DeltaTable(path).snapshot(version).scan(predicate=predicate).parallel_scan_metadata()
    assert isinstance(phase, SequentialPhase)
    batches = list(phase)
    return batches, phase.finish()


def _rr(files, k):
    return [files[i::k] for i in range(k)]


def _row_groups_one_each(files, state):
    units = [u for f in files for u in expand_leaf(f, storage=state.storage)]
    return [[u] for u in units]


def _row_groups_round_robin(files, state):
    units = [u for f in files for u in expand_leaf(f, storage=state.storage)]
    return _rr(units, 3)


SPLITS = {
    "one-worker": lambda files, state: [list(files)],
    "one-per-worker": lambda files, state: [[f] for f in files],
    "round-robin-2": lambda files, state: _rr(files, 2),
    "round-robin-3-reversed": lambda files, state: [g[::-1] for g in _rr(files[::-1], 3)],
    "split-leaves-2": lambda files, state: split_leaves(files, 2, state.storage),
    "split-leaves-5": lambda files, state: split_leaves(files, 5, state.storage),
    "row-group-each": _row_groups_one_each,
    "row-group-round-robin-3": _row_groups_round_robin,
}


def run_split(batches, after, split, *, via_bytes=True) -> pa.Table:
    """Sequential batches + the parallel phase over ``split(files)``; each group gets its own state."""
    out = list(batches)
    if isinstance(after, Parallel):
        blob = after.state.to_bytes()
        groups = split(after.files, after.state)
        _assert_partition(after.files, groups, after.state)
        for group in groups:
            state = ParallelState.from_bytes(blob) if via_bytes else after.state
            out.extend(ParallelScanMetadata(state, group))
    return concat_files(out)


def _row_group_count(leaf: LeafFile, state: ParallelState) -> int:
    return len(expand_leaf(leaf, storage=state.storage))


def _assert_partition(files, groups, state) -> None:
    """Every row group of every leaf is in exactly one group."""
    want = {}
    for f in files:
        n = _row_group_count(f, state)
        for rg in range(n) if f.row_groups is None else f.row_groups:
            want[(f.path, rg)] = 0
    for g in groups:
        for leaf in g:
            rgs = (
                range(_row_group_count(LeafFile(leaf.path), state))
                if leaf.row_groups is None
                else leaf.row_groups
            )
            for rg in rgs:
                assert (leaf.path, rg) in want, f"{leaf} is not part of the leaves"
                want[(leaf.path, rg)] += 1
    assert all(c == 1 for c in want.values()), {k: c for k, c in want.items() if c != 1}


def _batch_schema_check(batches, expected_schema):
    for b in batches:
        assert b.files.schema == expected_schema


# ==============================================================================================
# the corpus
# ==============================================================================================


def _corpus_cases() -> list:
    if not MANIFEST.is_file():
        return [pytest.param(None, None, id="corpus-missing")]
    manifest = json.loads(MANIFEST.read_text())
    cases = []
    for t in manifest["tables"]:
        if t["category"] not in ("data", "log_only"):
            continue
        versions = {None}
        versions.update(c["version"] for c in t.get("log", {}).get("checkpoints", []))
        versions.update(e["version"] for e in t.get("expected", []) if e.get("kind") == "snapshot")
        for v in sorted(versions, key=lambda x: -1 if x is None else x):
            cases.append(pytest.param(t["name"], v, id=f"{t['name']}@{'latest' if v is None else v}"))
    return cases


def _load_corpus(name, version):
    if name is None:
        pytest.skip(f"conformance corpus not found at {CORPUS} (expected {MANIFEST})")
    path = str(CORPUS / "tables" / name)
    try:
        DeltaTable(path).snapshot(version)
    except DeltaError as e:  # tables / versions that must fail to load (expect_error) are not ours
        pytest.skip(f"{name} at version {version} does not load: {e}")
    return path


@pytest.mark.parametrize(("name", "version"), _corpus_cases())
def test_corpus_parallel_equals_scan_metadata(name, version):
    path = _load_corpus(name, version)
    expected = reference_files(path, version)
    batches, after = sequential(path, version)
    _batch_schema_check(batches, expected.schema)
    snap = DeltaTable(path).snapshot(version)
    manifest = snap.checkpoint_manifest
    if manifest is None or not manifest.leaves:
        assert isinstance(after, Done)
    else:
        assert isinstance(after, Parallel)
        assert after.files == manifest.leaves
    for split_name, split in SPLITS.items():
        got = run_split(batches, after, split)
        assert_same_files(got, expected, f"{name}@{version} split {split_name}")


def test_corpus_has_parallel_cases():
    """The corpus exercises the parallel phase with sidecars, multi-part parts and classic files."""
    if not MANIFEST.is_file():
        pytest.skip(f"conformance corpus not found at {CORPUS} (expected {MANIFEST})")
    kinds = {}
    for name in (
        "v2-checkpoints-json-with-sidecars",
        "v2-checkpoint-parquet",
        "v1-multi-part-struct-stats-only",
        "checkpoint",
    ):
        path = str(CORPUS / "tables" / name)
        _, after = sequential(path)
        assert isinstance(after, Parallel), name
        kinds[name] = len(after.files)
    assert kinds["v1-multi-part-struct-stats-only"] == 3
    assert kinds["v2-checkpoints-json-with-sidecars"] == 2


def test_corpus_v2_without_sidecars_is_done():
    if not MANIFEST.is_file():
        pytest.skip(f"conformance corpus not found at {CORPUS} (expected {MANIFEST})")
    path = str(CORPUS / "tables" / "v2-checkpoints-json-without-sidecars")
    batches, after = sequential(path)
    assert isinstance(after, Done)
    assert_same_files(concat_files(batches), reference_files(path))


# ==============================================================================================
# generated tables
# ==============================================================================================

GENERATED = {
    # name: generator kwargs
    "v2-json": dict(
        kind="v2-json", num_files=700, sidecars=5, row_group_size=60, commits_after=30, inline_adds=4
    ),
    "v2-parquet": dict(
        kind="v2-parquet",
        num_files=600,
        sidecars=4,
        row_group_size=45,
        commits_after=25,
        metadata_change_at=5,
    ),
    "multi": dict(
        kind="multi", num_files=500, parts=3, row_group_size=50, commits_after=20, history_commits=3
    ),
    "classic": dict(kind="classic", num_files=450, row_group_size=40, commits_after=22, partitioned=False),
    "classic-one-rg": dict(
        kind="classic", num_files=120, commits_after=6, dv_every=0, dv_updates_per_commit=0
    ),
    "v2-sparse": dict(
        kind="v2-json", num_files=5, sidecars=8, inline_adds=2, commits_after=8, removes_per_commit=1
    ),
    "none": dict(kind="none", num_files=200, commits_after=12, history_commits=2),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, gen.GeneratedTable]:
    root = tmp_path_factory.mktemp("generated")
    return {name: gen.generate(root / name, seed=i, **kw) for i, (name, kw) in enumerate(GENERATED.items())}


def _keys(files: pa.Table) -> set:
    dv = files.column("deletion_vector").to_pylist()
    return {
        (p, None if d is None else (d["storageType"], d["pathOrInlineDv"], d["offset"]))
        for p, d in zip(files.column("path").to_pylist(), dv, strict=True)
    }


@pytest.mark.parametrize("name", list(GENERATED))
def test_generated_reference_is_right(generated, name):
    """Snapshot.files() (the sequential reference) gives the live set known by construction."""
    g = generated[name]
    snap = DeltaTable(g.path).snapshot()
    assert snap.version == g.version
    assert snap.segment.checkpoint_version == g.checkpoint_version
    files = snap.files()
    assert files.num_rows == len(g.live)
    assert _keys(files) == g.expected_keys()
    records = dict(
        zip(
            files.column("path").to_pylist(),
            pc.struct_field(files.column("stats"), "numRecords").to_pylist(),
            strict=True,
        )
    )
    assert records == {p: f.num_records for p, f in g.live.items()}
    if GENERATED[name].get("metadata_change_at") is not None:
        assert "generator.changed" in snap.metadata.configuration
    # the generated log has what the test needs
    if g.kind.startswith("v2"):
        manifest = snap.checkpoint_manifest
        assert snap.protocol.min_reader_version == 3 and "v2Checkpoint" in snap.protocol.reader_features
        assert [leaf.path for leaf in manifest.leaves] == g.leaves
        assert all("/_delta_log/_sidecars/" in p for p in g.leaves)
        assert manifest.inline is not None


@pytest.mark.parametrize("threads", [1, 8])
@pytest.mark.parametrize("name", list(GENERATED))
def test_leaf_threads_give_the_same_snapshot(generated, name, threads, monkeypatch):
    """LEAF_THREADS = 1 (sequential replay), 8 and the default (a leaf per core locally) give the same files,
    txns and domain metadata, also when files() is built first (which drops the raw strings)."""
    import delta_datafusion.snapshot as snapshot_mod

    g = generated[name]
    threaded = DeltaTable(g.path).snapshot()
    want = threaded.files()
    monkeypatch.setattr(snapshot_mod, "LEAF_THREADS", threads)
    one = DeltaTable(g.path).snapshot()
    raw_first = one.raw_files
    got = one.files()
    assert got.equals(want)
    assert (one.transactions, one.domain_metadata) == (threaded.transactions, threaded.domain_metadata)
    # raw_files rebuilt after the typed table dropped it: same rows
    assert one.raw_files.num_rows == raw_first.num_rows == want.num_rows
    assert sorted(one.raw_files.column("path").to_pylist()) == sorted(want.column("path").to_pylist())


@pytest.mark.parametrize("removed", ["none", "one", "all"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("kind", ["v2-json", "multi"])
def test_files_typed_leaf_by_leaf_equal_the_raw_route(tmp_path, kind, removed, threads, monkeypatch):
    """files() types each leaf's adds before dropping the few later commits touched (the raw adds
    of a leaf are not copied nor kept); the result equals typing the raw adds (raw_files first),
    also when a commit removes one file or every live file (then many are dropped first, and no
    leaf has a live add)."""
    import delta_datafusion.snapshot as snapshot_mod

    g = gen.generate(tmp_path / "t", kind=kind, num_files=600, sidecars=3, commits_after=2, seed=7)
    path = Path(g.path)
    live = DeltaTable(str(path)).snapshot().files()
    if removed != "none":
        n = 1 if removed == "one" else live.num_rows
        dvs = live.column("deletion_vector").to_pylist()
        lines = [
            {"remove": {"path": p, "deletionTimestamp": 0, "dataChange": True, "deletionVector": d}}
            for p, d in zip(live.column("path").to_pylist()[:n], dvs[:n], strict=True)
        ]
        commit = path / "_delta_log" / f"{g.version + 1:020d}.json"
        commit.write_text(
            "".join(
                json.dumps({k: {f: x for f, x in v.items() if x is not None}}) + "\n"
                for line in lines
                for k, v in line.items()
            )
        )
    monkeypatch.setattr(snapshot_mod, "LEAF_THREADS", threads)
    typed_first = DeltaTable(str(path)).snapshot()
    got = typed_first.files()
    raw_first = DeltaTable(str(path)).snapshot()
    raw_first.raw_files  # noqa: B018 - the checkpoint pass kept raw: files() types it
    want = raw_first.files()
    assert got.equals(want)
    assert got.num_rows == live.num_rows - {"none": 0, "one": 1, "all": live.num_rows}[removed]
    assert (typed_first.transactions, typed_first.domain_metadata) == (
        raw_first.transactions,
        raw_first.domain_metadata,
    )


@pytest.mark.parametrize("where", ["local", "memory"])
def test_default_leaf_threads(generated, where, monkeypatch):
    """By default a local table's checkpoint leaves are read a leaf per core (with one core one
    after another on the caller's thread), an object store's on a pool (reads wait on the
    network); the files are the same. A one-leaf checkpoint is still read on a thread while the
    commits replay."""
    import threading

    import fsspec

    import delta_datafusion.snapshot as snapshot_mod

    def table_path(name: str) -> str:
        path = generated[name].path
        if where == "local":
            return path
        fs, root = fsspec.filesystem("memory"), f"/dd-leaf-threads-{os.getpid()}/{name}"
        for dirpath, _dirs, names in os.walk(path):
            for n in names:
                fs.pipe(
                    f"{root}/{Path(dirpath, n).relative_to(path).as_posix()}", Path(dirpath, n).read_bytes()
                )
        return f"memory://{root}"

    readers: list[threading.Thread] = []
    started: list[str] = []
    real_read, real_thread = snapshot_mod.read_leaf, snapshot_mod._on_thread

    def read_spy(*args, **kwargs):
        readers.append(threading.current_thread())
        return real_read(*args, **kwargs)

    def thread_spy(work, name):
        started.append(name)
        return real_thread(work, name)

    monkeypatch.setattr(snapshot_mod, "read_leaf", read_spy)
    monkeypatch.setattr(snapshot_mod, "_on_thread", thread_spy)
    monkeypatch.setattr(snapshot_mod, "LEAF_THREADS", None)
    path = table_path("v2-json")
    files = DeltaTable(path).snapshot().files()
    assert len(readers) == len(generated["v2-json"].leaves) == 5
    on_caller = set(readers) == {threading.current_thread()}
    one_at_a_time = where == "local" and snapshot_mod.local_leaf_threads() == 1
    assert on_caller == one_at_a_time, f"leaves read on {sorted({t.name for t in readers})}"
    monkeypatch.setattr(snapshot_mod, "LEAF_THREADS", 8)
    assert DeltaTable(path).snapshot().files().equals(files)
    monkeypatch.setattr(snapshot_mod, "LEAF_THREADS", None)
    for cores in (1, 4):  # one core: a local table's leaves one after another; more: a pool
        readers.clear()
        with monkeypatch.context() as m:
            m.setattr(snapshot_mod.os, "cpu_count", lambda n=cores: n)
            assert DeltaTable(path).snapshot().files().equals(files)
        on_caller = set(readers) == {threading.current_thread()}
        assert on_caller == (where == "local" and cores == 1), (cores, sorted({t.name for t in readers}))
    if (os.cpu_count() or 1) > 1 or where == "memory":
        started.clear()
        classic = DeltaTable(table_path("classic")).snapshot()
        assert _keys(classic.files()) == generated["classic"].expected_keys()
        assert started == ["delta-checkpoint-scan-files"]
    if where == "memory":
        fsspec.filesystem("memory").rm(f"/dd-leaf-threads-{os.getpid()}", recursive=True)


@pytest.mark.parametrize("name", ["v2-json", "v2-parquet", "multi", "classic"])
def test_generated_reference_matches_deltalake(generated, name):
    """Independent cross-check of the generated logs: delta-rs reads the same path set."""
    deltalake = pytest.importorskip("deltalake")
    g = generated[name]
    try:
        dt = deltalake.DeltaTable(g.path)
        adds = pa.table(dt.get_add_actions(flatten=True))
    except Exception as e:  # noqa: BLE001 - a delta-rs limitation is not our failure
        pytest.skip(f"deltalake cannot read the generated {name} table: {e}")
    assert dt.version() == g.version
    assert {unquote(p) for p in adds.column("path").to_pylist()} == set(g.live)


@pytest.mark.parametrize("split_name", list(SPLITS))
@pytest.mark.parametrize("name", list(GENERATED))
def test_generated_parallel_equals_scan_metadata(generated, name, split_name):
    g = generated[name]
    expected = reference_files(g.path)
    batches, after = sequential(g.path)
    _batch_schema_check(batches, expected.schema)
    if g.kind == "none":
        assert isinstance(after, Done)
    else:
        assert isinstance(after, Parallel)
        assert [f.path for f in after.files] == g.leaves
    got = run_split(batches, after, SPLITS[split_name], via_bytes=split_name != "one-worker")
    assert_same_files(got, expected, f"{name} split {split_name}")


def test_sequential_phase_yields_commits_and_manifest(generated):
    g = generated["v2-json"]
    batches, after = sequential(g.path)
    assert [b.extra.get("source") for b in batches] == ["commits", "checkpoint manifest"]
    manifest_paths = set(batches[1].files.column("path").to_pylist())
    inline = {p for p in list(g.live)[: g.inline_adds]}
    assert manifest_paths <= set(g.live)
    assert manifest_paths <= inline
    assert isinstance(after, Parallel)
    # the seen keys are exactly the keys of the commits' file actions
    snap = DeltaTable(g.path).snapshot()
    _, commit_keys = snap._commit_replay
    assert set(after.state.seen_keys.to_pylist()) == set(commit_keys.to_pylist())
    assert after.state.checkpoint_version == g.checkpoint_version
    assert after.state.version == g.version


def test_empty_and_tombstone_only_sidecars(generated):
    """Sidecars without adds (tombstones only) give empty, correctly typed batches."""
    g = generated["v2-sparse"]
    batches, after = sequential(g.path)
    expected = reference_files(g.path)
    leaf_batches = list(ParallelScanMetadata(after.state, after.files))
    assert len(leaf_batches) == len(after.files) == 8
    assert any(b.num_files == 0 for b in leaf_batches)
    _batch_schema_check(leaf_batches, expected.schema)
    assert_same_files(concat_files(batches + leaf_batches), expected, "v2-sparse")


def test_metadata_change_after_checkpoint_reaches_workers(generated):
    g = generated["v2-parquet"]
    _, after = sequential(g.path)
    state = ParallelState.from_bytes(after.state.to_bytes())
    assert state.metadata.configuration.get("generator.changed", "").startswith("at ")
    assert state.metadata == DeltaTable(g.path).snapshot().metadata
    assert state.protocol == DeltaTable(g.path).snapshot().protocol


def test_finish_requires_iteration(generated):
    g = generated["v2-json"]
    phase = DeltaTable(g.path).snapshot().scan().parallel_scan_metadata()
    with pytest.raises(ParallelStateError, match="before the sequential phase was iterated"):
        phase.finish()
    next(phase)  # partially iterated is not enough
    with pytest.raises(ParallelStateError, match="iterated to its end"):
        phase.finish()
    rest = list(phase)
    assert len(rest) == 1
    first = phase.finish()
    assert isinstance(first, Parallel)
    assert phase.finish() is first


def test_missing_sidecar_is_reported(generated, tmp_path):
    import shutil

    from delta_datafusion.errors import MissingLogFileError

    src = generated["v2-json"]
    path = tmp_path / "copy"
    shutil.copytree(src.path, path)
    _, after = sequential(str(path))
    gone = after.files[1].path
    os.unlink(gone)
    with pytest.raises(MissingLogFileError, match=Path(gone).name):
        list(ParallelScanMetadata(after.state.to_bytes(), after.files))
    with pytest.raises(MissingLogFileError, match=Path(gone).name):
        split_leaves(after.files, 50, after.state.storage)


def test_a_sidecar_without_partition_values_is_named(tmp_path):
    """A V2 sidecar whose adds lack partitionValues: a worker's error named the table and
    version but not the sidecar, which the sequential replay (Snapshot.files()) names."""
    from conftest import without_partition_values

    from delta_datafusion.errors import LogCorruptError

    g = gen.generate(tmp_path / "t", kind="v2-parquet", num_files=40, sidecars=3, commits_after=2)
    _, after = sequential(g.path)
    assert isinstance(after, Parallel) and all("/_sidecars/" in f.path for f in after.files)
    damaged = after.files[1]
    pq.write_table(without_partition_values(pq.read_table(damaged.path)), damaged.path)
    checkpoint = after.state.checkpoint_version
    named = (
        rf"data file part=\w+/\S+ of version {checkpoint} in {re.escape(damaged.path)} has no partitionValues"
    )
    with pytest.raises(LogCorruptError, match=named):
        DeltaTable(g.path).snapshot().files()
    for state in (after.state, after.state.to_bytes()):
        assert len(list(ParallelScanMetadata(state, [after.files[0]]))) == 1
        with pytest.raises(LogCorruptError, match=named):
            list(ParallelScanMetadata(state, [damaged]))


def test_concurrent_reads_of_row_groups_of_one_file(generated):
    """Workers on threads read row groups of the same file at the same time: each has its own reader.

    (A ParquetFile shared between threads -- log.actions.open_parquet caches one per path -- crashes
    with SIGSEGV, hangs, or fails with "ReadRangeCache did not find matching cache" here.)
    """
    g = generated["classic"]
    batches, after = sequential(g.path)
    units = [u for f in after.files for u in expand_leaf(f, storage=after.state.storage)]
    assert len(units) > 5 and len({u.path for u in units}) == 1
    expected = canonical(reference_files(g.path))
    with ThreadPoolExecutor(4) as pool:
        for _ in range(15):
            results = list(pool.map(lambda u: list(ParallelScanMetadata(after.state, [u])), units))
            got = canonical(concat_files(list(batches) + [m for r in results for m in r]))
            assert got.equals(expected)


# -- property test: random partitions of row-group units ---------------------------------------


@pytest.fixture(scope="module")
def property_case(generated):
    g = generated["v2-json"]
    batches, after = sequential(g.path)
    units = [u for f in after.files for u in expand_leaf(f, storage=after.state.storage)]
    return batches, after, units, canonical(reference_files(g.path))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_splits_property(property_case, data):
    batches, after, units, expected = property_case
    k = data.draw(st.integers(min_value=1, max_value=6), label="workers")
    assignment = data.draw(
        st.lists(st.integers(0, k - 1), min_size=len(units), max_size=len(units)), label="assignment"
    )
    order = data.draw(st.permutations(range(len(units))), label="order")
    merge = data.draw(st.booleans(), label="merge row groups per file")
    groups: list[list[LeafFile]] = [[] for _ in range(k)]
    for i in order:
        groups[assignment[i]].append(units[i])
    if merge:  # one LeafFile per (worker, file) with several row groups
        merged = []
        for g in groups:
            per_file: dict[str, list[int]] = {}
            for u in g:
                per_file.setdefault(u.path, []).extend(u.row_groups)
            merged.append([LeafFile(p, 0, tuple(sorted(r))) for p, r in per_file.items()])
        groups = merged
    out = list(batches)
    for g in groups:
        out.extend(ParallelScanMetadata(after.state, g))
    got = canonical(concat_files(out))
    assert got.equals(expected)


# ==============================================================================================
# split helpers
# ==============================================================================================


def test_expand_leaf_and_split_leaves_partition_exactly(generated):
    g = generated["classic"]
    _, after = sequential(g.path)
    (leaf,) = after.files
    n = pq.ParquetFile(leaf.path).metadata.num_row_groups
    assert n > 5
    singles = expand_leaf(leaf, storage=after.state.storage)
    assert [u.row_groups for u in singles] == [(i,) for i in range(n)]
    chunks = expand_leaf(leaf, 3, storage=after.state.storage)
    assert len(chunks) == 3 and sum(len(c.row_groups) for c in chunks) == n
    assert [rg for c in chunks for rg in c.row_groups] == list(range(n))
    # a sub-range expands within itself
    sub = expand_leaf(LeafFile(leaf.path, leaf.size, (2, 3, 4)), storage=after.state.storage)
    assert [u.row_groups for u in sub] == [(2,), (3,), (4,)]
    for parts in (1, 2, 3, 4, 7, 100):
        groups = split_leaves(after.files, parts, after.state.storage)
        assert 1 <= len(groups) <= parts
        assert all(groups)
        _assert_partition(after.files, groups, after.state)
    # a single big classic checkpoint is spread over both workers
    two = split_leaves(after.files, 2)
    assert len(two) == 2 and all(leaf.row_groups for grp in two for leaf in grp)


def test_split_leaves_balances_sidecars(generated):
    g = generated["v2-json"]
    _, after = sequential(g.path)
    for parts in (1, 2, 3, 4, 5, 6, 11):
        groups = after.state.split(after.files, parts)
        _assert_partition(after.files, groups, after.state)
        assert len(groups) <= parts
    # as many equal sidecars as workers: whole files, no row-group reads needed
    groups = split_leaves(after.files, len(after.files))
    assert all(len(grp) == 1 and grp[0].row_groups is None for grp in groups)
    with pytest.raises(DeltaError, match="parts must be at least 1"):
        split_leaves(after.files, 0)
    assert split_leaves([], 3) == []


# ==============================================================================================
# state bytes
# ==============================================================================================


def test_state_round_trip(generated):
    g = generated["v2-json"]
    _, after = sequential(g.path)
    blob = after.state.to_bytes()
    assert blob.startswith(par.MAGIC)
    assert blob == after.state.to_bytes()  # deterministic
    state = ParallelState.from_bytes(blob)
    assert state == after.state
    assert state.to_bytes() == blob
    assert state.table_root == after.state.table_root
    assert state.seen_keys.equals(after.state.seen_keys)
    assert state.metadata == DeltaTable(g.path).snapshot().metadata
    # compact: the seen keys are stored compressed
    raw_keys = sum(len(k) for k in after.state.seen_keys.to_pylist())
    header = len(json.dumps(after.state.header()))
    assert len(blob) < header + raw_keys / 2 + 1024
    # bytearray / memoryview are accepted too
    assert ParallelState.from_bytes(bytearray(blob)) == state
    assert ParallelState.from_bytes(memoryview(blob)) == state


def _state(generated, predicate=None) -> ParallelState:
    g = generated["v2-json"]
    _, after = sequential(g.path, predicate=predicate)
    return after.state


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda b: b[: len(b) // 2], "truncated"),
        (lambda b: b[:-1], "truncated"),
        (lambda b: b[:5], "bad magic|truncated"),
        (lambda b: b[:12], "truncated"),
        (lambda b: b + b"\0", "unexpected bytes"),
        (lambda b: b[:100] + bytes([b[100] ^ 0x01]) + b[101:], "checksum"),
        (lambda b: b[:-3] + b"xyz", "checksum"),
        (lambda b: b"PAR1" + b[4:], "bad magic"),
        (lambda b: b"", "bad magic"),
        (lambda b: b"\x80\x04\x95" + b"pickle" * 10, "bad magic"),
        (lambda b: json.dumps({"table_root": "/x"}).encode(), "bad magic"),
    ],
    ids=[
        "half",
        "last-byte",
        "5-bytes",
        "12-bytes",
        "trailing-byte",
        "bit-flip",
        "tampered-digest",
        "parquet-magic",
        "empty",
        "pickle",
        "json",
    ],
)
def test_corrupted_state_is_refused(generated, mangle, message):
    blob = _state(generated).to_bytes()
    with pytest.raises(ParallelStateError, match=message):
        ParallelState.from_bytes(mangle(blob))


def test_other_versions_are_refused(generated, monkeypatch):
    state = _state(generated)
    monkeypatch.setattr(par_state, "_package_version", lambda: "0.0.1-other")
    other_pkg = state.to_bytes()
    monkeypatch.undo()
    with pytest.raises(
        ParallelStateError, match=r"written by delta_datafusion 0\.0\.1-other, this is delta_datafusion"
    ):
        ParallelState.from_bytes(other_pkg)
    monkeypatch.setattr(par_state, "FORMAT_VERSION", 99)
    other_fmt = state.to_bytes()
    monkeypatch.undo()
    with pytest.raises(ParallelStateError, match="format version 99"):
        ParallelState.from_bytes(other_fmt)
    with pytest.raises(ParallelStateError, match="bytes"):
        ParallelState.from_bytes("not bytes")  # type: ignore[arg-type]
    with pytest.raises(ParallelStateError):
        ParallelScanMetadata(12, [])  # type: ignore[arg-type]
    # a worker given bytes of another version fails with the same error
    monkeypatch.setattr(par_state, "_package_version", lambda: "9.9.9")
    blob = state.to_bytes()
    monkeypatch.undo()
    with pytest.raises(ParallelStateError, match="9.9.9"):
        scan_leaf_files(blob, [])


def test_consistent_header_but_bad_content_is_refused(generated):
    """Bytes rebuilt with a valid checksum but inconsistent content still fail with ParallelStateError."""
    state = _state(generated)
    header = state.header()
    header["num_keys"] += 1
    bad = _reassemble(header, par_state._keys_ipc(state.seen_keys))
    with pytest.raises(ParallelStateError, match="announces"):
        ParallelState.from_bytes(bad)
    header = state.header()
    del header["metaData"]
    with pytest.raises(ParallelStateError, match="header lacks"):
        ParallelState.from_bytes(_reassemble(header, par_state._keys_ipc(state.seen_keys)))
    header = state.header()
    header["predicate"] = {"$dc": "os:system", "fields": {}}
    with pytest.raises(ParallelStateError, match="outside the delta_datafusion package"):
        ParallelState.from_bytes(_reassemble(header, par_state._keys_ipc(state.seen_keys)))
    with pytest.raises(ParallelStateError, match="corrupted"):
        ParallelState.from_bytes(_reassemble(state.header(), b"not arrow"))


def test_deeply_nested_predicate_in_a_state_is_refused(generated):
    state = _state(generated)
    header = state.header()
    header["predicate"] = "__P__"
    text = json.dumps(header).replace('"__P__"', "[" * 600 + "1" + "]" * 600)
    with pytest.raises(ParallelStateError, match="RecursionError"):
        ParallelState.from_bytes(_reassemble(json.loads(text), par_state._keys_ipc(state.seen_keys)))


def test_table_replaced_between_the_phases_is_refused(tmp_path):
    """A classic checkpoint's name is its version alone: a table dropped and written again at the
    same location with a checkpoint at the same version gave the new table's files to the old
    state, silently. The leaf's size (when the work item carries it) and the checkpoint's
    metaData id tell."""
    import shutil

    from deltalake import DeltaTable as DLTable
    from deltalake import write_deltalake

    path = str(tmp_path / "t")

    def make(rows: int) -> None:
        shutil.rmtree(path, ignore_errors=True)
        for _ in range(3):
            write_deltalake(path, pa.table({"id": pa.array(range(rows), pa.int64())}), mode="append")
        DLTable(path).create_checkpoint()

    make(5)
    _, after = sequential(path)
    blob, leaves = after.state.to_bytes(), after.files
    assert leaves and all(leaf.size for leaf in leaves)
    make(7)
    with pytest.raises(ParallelStateError, match="changed since|was replaced since"):
        list(ParallelScanMetadata(blob, leaves))
    # without sizes in the work items, the metaData id still tells
    unsized = [LeafFile(leaf.path) for leaf in leaves]
    with pytest.raises(ParallelStateError, match="belongs to table id .* was replaced since"):
        list(ParallelScanMetadata(blob, unsized))


def test_table_replaced_after_a_later_metadata_commit_is_refused(tmp_path):
    """The snapshot's metadata came from a commit after the checkpoint (a table property set): the
    check read the checkpoint's own id instead of giving up (the replacement went unnoticed)."""
    import shutil

    from deltalake import DeltaTable as DLTable
    from deltalake import write_deltalake

    path = str(tmp_path / "t")

    def make(value: int) -> None:
        shutil.rmtree(path, ignore_errors=True)
        for _ in range(3):
            write_deltalake(path, pa.table({"id": pa.array([value], pa.int64())}), mode="append")
        DLTable(path).create_checkpoint()
        DLTable(path).alter.set_table_properties({"delta.appendOnly": "false"})

    make(1)
    _, after = sequential(path)
    assert after.state.checkpoint_table_id is not None
    blob, unsized = after.state.to_bytes(), [LeafFile(leaf.path) for leaf in after.files]
    make(2)
    with pytest.raises(ParallelStateError, match="belongs to table id .* was replaced since"):
        list(ParallelScanMetadata(blob, unsized))


def test_sequential_phases_finished_on_threads_at_once(tmp_path):
    """Reading the checkpoint's table id through the planning reads' cached parquet reader, shared
    by the snapshots of one DeltaTable, crashed pyarrow (a false LogCorruptError, or a segfault)
    when phases were finished on several threads at once."""
    import threading

    from deltalake import DeltaTable as DLTable
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    for k in range(40):
        write_deltalake(path, pa.table({"v": [k, k + 1]}), mode="append")
    DLTable(path).create_checkpoint()
    checkpoint = next((tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet"))
    pq.write_table(pq.read_table(checkpoint), checkpoint, row_group_size=7)  # several row groups
    DLTable(path).alter.set_table_properties({"delta.appendOnly": "false"})  # metadata after it
    for _ in range(20):
        table = DeltaTable(path)
        phases = []
        for _ in range(8):
            phase = table.snapshot().scan().parallel_scan_metadata()
            list(phase)
            phases.append(phase)
        barrier, errors, ids = threading.Barrier(8), [], []

        def finish(phase, barrier=barrier, ids=ids, errors=errors):
            try:
                barrier.wait()
                ids.append(phase.finish().state.checkpoint_table_id)
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=finish, args=(p,)) for p in phases]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        assert len(set(ids)) == 1 and ids[0] is not None


def test_table_id_changed_after_the_checkpoint_is_not_a_replacement(tmp_path):
    """A writer may log a metaData with a new table id after the checkpoint (deltalake's
    DeltaTable.create(mode='overwrite')): the checkpoint's id is then not the snapshot's, and the
    table was not replaced."""
    from deltalake import DeltaTable as DLTable
    from deltalake import write_deltalake

    path = str(tmp_path / "t")
    one_row_appends(path, 3)
    DLTable(path).create_checkpoint()
    DLTable.create(path, pa.schema([("id", pa.int64())]), mode="overwrite")
    write_deltalake(path, pa.table({"id": pa.array([7], pa.int64())}), mode="append")
    batches, after = sequential(path)
    got = run_split(batches, after, lambda files, state: [files])
    assert_same_files(got, reference_files(path))
    assert DeltaTable(path).snapshot().files().num_rows == 1


def _reassemble(header: dict, keys: bytes) -> bytes:
    import hashlib

    h = json.dumps(header).encode()
    pkg = par_state._package_version().encode()
    body = par_state._U32.pack(len(h)) + h + par_state._U64.pack(len(keys)) + keys
    total = (
        len(par.MAGIC)
        + par_state._FIXED.size
        + len(pkg)
        + par_state._U64.size
        + len(body)
        + par_state._DIGEST
    )
    blob = (
        par.MAGIC
        + par_state._FIXED.pack(par.FORMAT_VERSION, len(pkg))
        + pkg
        + par_state._U64.pack(total)
        + body
    )
    return blob + hashlib.blake2b(blob, digest_size=par_state._DIGEST).digest()


def test_unserializable_storage_options_are_refused(generated):
    state = _state(generated)
    state.storage_options["client"] = object()
    with pytest.raises(ParallelStateError, match="JSON-serializable"):
        state.to_bytes()


# -- predicates --------------------------------------------------------------------------------


def _predicates():
    import datetime
    import decimal

    from delta_datafusion import predicate as P

    return [
        P.eq(P.col("part"), "p3"),
        P.and_(P.gt(P.col("id", pa.int64()), 150_000), P.ne(P.col("part"), "p1")),
        P.or_(P.lt(P.col("value"), 2.0), P.is_null(P.col("id"))),
        P.In(P.col("value"), (P.lit(1.5), P.lit(float("nan")), P.lit(None, pa.float64())), negated=True),
        P.not_(P.In(P.col("part"), (P.lit("p2"), P.lit("p4")))),
        P.lt(
            P.col("id"),
            P.lit(
                datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc),
                pa.timestamp("us", tz="Europe/Paris"),
            ),
        ),
        P.ne(P.col(("s", "a")), P.lit(decimal.Decimal("-1.23"), pa.decimal128(5, 2))),
        P.ge(P.col("d"), P.lit(datetime.date(2021, 3, 4))),
        P.eq(P.col("b"), P.lit(b"\x00\xff")),
        P.and_(P.TRUE, P.NULL, P.FALSE, P.is_not_null(P.col("x", pa.list_(pa.int32())))),
        P.lt(P.col("f"), P.lit(float("-inf"))),
    ]


def test_predicate_json_round_trip():
    for pred in _predicates():
        doc = par.encode_value(pred)
        text = json.dumps(doc, allow_nan=False)
        back = par.decode_value(json.loads(text))
        assert back == pred, (str(pred), text)
        assert str(back) == str(pred)
        assert type(back) is type(pred)
    # column types (not part of equality) survive too
    from delta_datafusion import predicate as P

    c = par.decode_value(par.encode_value(P.col("x", pa.timestamp("ns", tz="UTC"))))
    assert c.type == pa.timestamp("ns", tz="UTC")
    with pytest.raises(ParallelStateError, match="cannot serialize"):
        par.encode_value(object())
    with pytest.raises(ParallelStateError, match="unknown tag"):
        par.decode_value({"$what": 1})


def test_predicate_survives_state_bytes(generated):
    from delta_datafusion import predicate as P

    pred = P.and_(P.eq(P.col("part"), "p3"), P.gt(P.col("id"), 20_000))
    state = _state(generated, pred)
    back = ParallelState.from_bytes(state.to_bytes())
    assert back.predicate == state.predicate == pred
    assert back.scan.predicate == pred


PRUNING_PREDICATES = {
    "part-eq": pc.field("part") == "p3",
    "id-gt-and-part-ne": (pc.field("id") > 300_000) & (pc.field("part") != "p1"),
    "value-lt": pc.field("value") < 1.0,
    "id-lt": pc.field("id") < 20_000,
}
PRUNING_CASES = [
    pytest.param(name, pred, id=f"{pred_id}-{name}")
    for name in ("v2-json", "v2-parquet", "multi", "classic")
    for pred_id, pred in PRUNING_PREDICATES.items()
    if not (name == "classic" and "part" in pred_id)  # the classic generated table is not partitioned
]


@pytest.mark.skipif(not HAS_SKIPPING, reason="delta_datafusion.skipping (file pruning) is not available")
@pytest.mark.parametrize(("name", "pred"), PRUNING_CASES)
def test_pruning_in_parallel_phase(generated, name, pred):
    g = generated[name]
    expected_batches = list(DeltaTable(g.path).snapshot().scan(predicate=pred).scan_metadata())
    expected = pa.concat_tables([b.files for b in expected_batches])
    before = sum(b.files_before_pruning for b in expected_batches)
    assert expected.num_rows < before  # the predicate prunes something
    batches, after = sequential(g.path, predicate=pred)
    for split_name in ("one-per-worker", "row-group-round-robin-3"):
        got = run_split(batches, after, SPLITS[split_name])
        assert_same_files(got, expected, f"{name} {pred} {split_name}")
    out = run_parallel(DeltaTable(g.path).snapshot().scan(predicate=pred), workers=3)
    assert sum(b.files_before_pruning for b in out) == before
    assert_same_files(concat_files(out), expected, f"{name} {pred} run_parallel")


# ==============================================================================================
# executors
# ==============================================================================================


@pytest.mark.parametrize("name", ["v2-json", "multi", "classic", "none", "v2-sparse"])
def test_run_parallel_threads(generated, name):
    g = generated[name]
    expected = reference_files(g.path)
    for workers in (None, 1, 2, 4):
        out = run_parallel(DeltaTable(g.path).snapshot().scan(), workers=workers)
        assert_same_files(concat_files(out), expected, f"{name} workers={workers}")
    with ThreadPoolExecutor(3) as pool:
        out = run_parallel(DeltaTable(g.path).snapshot().scan(), executor=pool)
    assert_same_files(concat_files(out), expected, f"{name} explicit thread pool")


WITH_LEAVES = [name for name, kw in GENERATED.items() if kw["kind"] != "none"]


@pytest.mark.parametrize("name", list(GENERATED))
def test_state_made_ahead_is_the_finished_state_without_keys(generated, name):
    """prepare() lists the leaves and makes the state before the commits are replayed; finish()
    then gives that state with the seen keys: equal to the state made without prepare()."""
    g = generated[name]
    phase = DeltaTable(g.path).snapshot().scan().parallel_scan_metadata()
    ahead = phase.prepare()
    if g.kind == "none":
        assert ahead is None
        assert list(phase) and isinstance(phase.finish(), Done)
        return
    assert isinstance(ahead, Parallel) and len(ahead.state.seen_keys) == 0
    assert phase.prepare() is ahead
    assert [f.path for f in ahead.files] == g.leaves
    batches = list(phase)
    after = phase.finish()
    _, plain = sequential(g.path)
    assert after.files == ahead.files == plain.files
    assert after.state == plain.state and len(after.state.seen_keys) > 0
    assert after.state.header() == {**ahead.state.header(), "num_keys": len(plain.state.seen_keys)}
    assert after.state.storage is ahead.state.storage and after.state.metadata is ahead.state.metadata
    assert_same_files(run_split(batches, after, SPLITS["one-worker"]), reference_files(g.path), name)


@pytest.mark.parametrize("name", WITH_LEAVES)
def test_phase_two_reads_only_the_add_fields_it_types(generated, name, monkeypatch):
    """A leaf's adds are read without ``dataChange`` and ``tags``, which no scan-metadata column
    holds (the generator writes both); the results stay ``scan_metadata()``'s, for several splits."""
    from delta_datafusion.parallel import state as state_mod

    g = generated[name]
    read: list[pa.Schema] = []
    real = state_mod.read_leaf

    def recording(storage, leaf, columns=None):
        table = real(storage, leaf, columns)
        read.append(table.schema)
        return table

    monkeypatch.setattr(state_mod, "read_leaf", recording)
    batches, after = sequential(g.path)
    expected = reference_files(g.path)
    for split_name in ("one-per-worker", "split-leaves-2", "row-group-round-robin-3"):
        read.clear()
        assert_same_files(run_split(batches, after, SPLITS[split_name]), expected, f"{name} {split_name}")
        adds = [{f.name for f in schema.field("add").type} for schema in read if "add" in schema.names]
        assert adds, f"{name} {split_name}: no leaf with adds read"
        for fields in adds:
            assert {"path", "partitionValues", "size", "modificationTime", "stats"} <= fields
            assert not fields & {"dataChange", "tags"}, fields


@pytest.mark.parametrize("name", WITH_LEAVES)
@pytest.mark.parametrize("split_name", ["one-per-worker", "split-leaves-5", "row-group-round-robin-3"])
def test_leaves_typed_ahead_equal_scan_metadata(generated, name, split_name):
    """Every add of a leaf typed before the seen keys are known, the touched ones dropped after:
    the same files as scan_metadata(), for several splits of the leaves and row groups."""
    g = generated[name]
    phase = DeltaTable(g.path).snapshot().scan().parallel_scan_metadata()
    ahead = phase.prepare()
    read = {}
    for group in SPLITS[split_name](ahead.files, ahead.state):
        for leaf in group:  # read and typed before the commits are replayed
            read[leaf] = ahead.state.typed_ahead(ahead.state.leaf_adds(leaf))
            assert read[leaf].typed is not None or read[leaf].flat.num_rows == 0
    out = list(phase)
    after = phase.finish()
    leaf_batches = [after.state.surviving_leaf(adds) for adds in read.values()]
    assert [b.extra["leaf"] for b in leaf_batches] == [leaf.describe() for leaf in read]
    assert_same_files(concat_files(out + leaf_batches), reference_files(g.path), f"{name} {split_name}")


def _finish_after_typed_ahead(monkeypatch, leaves: int) -> list[int]:
    """Hold finish() until ``leaves`` leaves were typed ahead, so run_parallel's workers read leaves
    while the sequential phase is still running (as they do when it is slow). Returns the rows
    typed ahead, one entry per leaf."""
    typed_ahead = ParallelState.typed_ahead
    finish = SequentialPhase.finish
    rows: list[int] = []
    enough = threading.Event()
    if leaves == 0:
        enough.set()

    def spy(self, adds):
        out = typed_ahead(self, adds)
        rows.append(adds.flat.num_rows)
        if len(rows) >= leaves:
            enough.set()
        return out

    def held(self):
        assert enough.wait(60), f"only {len(rows)} leaves typed ahead"
        return finish(self)

    monkeypatch.setattr(ParallelState, "typed_ahead", spy)
    monkeypatch.setattr(SequentialPhase, "finish", held)
    return rows


@pytest.mark.parametrize("name", WITH_LEAVES)
@pytest.mark.parametrize("how", ["workers=2", "workers=3", "thread pool"])
def test_run_parallel_types_leaves_while_the_commits_replay(generated, name, how, monkeypatch):
    """run_parallel on threads starts the leaves once the manifest lists them; those read before the
    seen keys are known are typed whole, their touched adds dropped after: same files."""
    g = generated[name]
    scan = DeltaTable(g.path).snapshot().scan()
    workers = 2 if how == "workers=2" else 3
    groups = len(split_leaves(scan.parallel_scan_metadata().prepare().files, workers, scan.snapshot.storage))
    # a single group without a pool runs inline, after the sequential phase (as before)
    ahead = min(workers, groups) if groups > 1 or how == "thread pool" else 0
    rows = _finish_after_typed_ahead(monkeypatch, ahead)
    if how == "thread pool":
        with ThreadPoolExecutor(workers) as pool:
            out = run_parallel(scan, executor=pool)
    else:
        out = run_parallel(scan, workers=workers)
    assert len(rows) >= ahead and (ahead or not rows)
    assert_same_files(concat_files(out), reference_files(g.path), f"{name} {how}")


def test_run_parallel_error_of_the_sequential_phase_with_leaves_in_flight(generated, monkeypatch):
    """The commits fail to replay while leaves are read: that error is raised, the leaves' tasks
    stop and the private pool's threads end."""
    from delta_datafusion.snapshot import Snapshot

    g = generated["v2-json"]
    leaf_adds = ParallelState.leaf_adds
    started = threading.Event()

    def spy(self, leaf):
        started.set()
        return leaf_adds(self, leaf)

    def replay(self):
        assert started.wait(60)
        raise DeltaError(f"{self.table_root}: the commits cannot be replayed")

    monkeypatch.setattr(ParallelState, "leaf_adds", spy)
    monkeypatch.setattr(Snapshot, "_commit_replay", property(replay))
    with pytest.raises(DeltaError, match="the commits cannot be replayed"):
        run_parallel(DeltaTable(g.path).snapshot().scan(), workers=2)
    assert not [t for t in threading.enumerate() if t.name.startswith("delta-leaf")]
    started.clear()
    with ThreadPoolExecutor(2) as pool:
        with pytest.raises(DeltaError, match="the commits cannot be replayed"):
            run_parallel(DeltaTable(g.path).snapshot().scan(), executor=pool)
        assert pool.submit(lambda: 7).result() == 7


def test_run_parallel_leaves_go_to_the_free_thread(generated, monkeypatch):
    """Leaves are handed out one at a time: while one thread is held on its first leaf (a core
    busy with other work), the other scans every other leaf (a static half each would leave them
    to the held thread); the batches still come back in the leaves' order."""
    g = generated["v2-sparse"]
    scan = DeltaTable(g.path).snapshot().scan()
    leaves = scan.parallel_scan_metadata().prepare().files
    assert len(leaves) == 8
    leaf_adds = ParallelState.leaf_adds
    lock, others_done = threading.Lock(), threading.Event()
    by_thread: dict[str, list[str]] = {}

    def spy(self, leaf):
        with lock:
            first = not by_thread
            by_thread.setdefault(threading.current_thread().name, []).append(leaf.path)
        if first:
            others_done.wait(30)
        out = leaf_adds(self, leaf)
        with lock:
            if sum(map(len, by_thread.values())) == len(leaves) and not first:
                others_done.set()
        return out

    monkeypatch.setattr(ParallelState, "leaf_adds", spy)
    out = run_parallel(scan, workers=2)
    assert sorted(len(v) for v in by_thread.values()) == [1, 7], by_thread
    assert [b.extra["leaf"] for b in out if "leaf" in b.extra] == [leaf.describe() for leaf in leaves]
    assert_same_files(concat_files(out), reference_files(g.path))


def _retyped_after_a_delete(tmp_path) -> str:
    """A table whose partition column p is retyped to integer after its 'abc' file was deleted
    (after the checkpoint): that removed file's add does not fit the current schema."""
    from deltalake import DeltaTable as DLTable
    from deltalake import write_deltalake

    path = tmp_path / "t"
    rows = pa.table({"p": [str(i) for i in range(1, 10)] + ["abc"], "x": pa.array(range(10), pa.int64())})
    write_deltalake(str(path), rows, partition_by=["p"])
    DLTable(str(path)).create_checkpoint()
    DLTable(str(path)).delete("p = 'abc'")
    log = path / "_delta_log"
    first = (log / "00000000000000000000.json").read_text().splitlines()
    md = next(json.loads(line)["metaData"] for line in first if '"metaData"' in line)
    schema = json.loads(md["schemaString"])
    for field in schema["fields"]:
        if field["name"] == "p":
            field["type"] = "integer"
    md["schemaString"] = json.dumps(schema)
    (log / "00000000000000000002.json").write_text(json.dumps({"metaData": md}) + "\n")
    return str(path)


def _spy_typed_rows(monkeypatch) -> list[int]:
    typed_rows: list[int] = []
    real = par_state._StateTable.to_scan_files

    def spy(self, raw, *args, **kwargs):
        typed_rows.append(raw.num_rows)
        return real(self, raw, *args, **kwargs)

    monkeypatch.setattr(par_state._StateTable, "to_scan_files", spy)
    return typed_rows


def test_leaf_adds_typed_before_the_touched_are_dropped(tmp_path, monkeypatch):
    """A worker types every add of a leaf the commits touched little and drops the touched ones
    from the typed table (dropping them from the raw adds first copied every stats string). A
    file a later commit removed may not fit the current schema (here a partition column retyped
    after its 'abc' file was deleted): typing every add fails, and the survivors alone are typed."""
    path = _retyped_after_a_delete(tmp_path)
    typed_rows = _spy_typed_rows(monkeypatch)
    expected = reference_files(str(path))
    assert sorted(v["p"] for v in expected.column("partition_values").to_pylist()) == list(range(1, 10))
    batches, after = sequential(str(path))
    assert isinstance(after, Parallel) and len(after.files) == 1
    got = run_split(batches, after, lambda files, state: [files])
    assert typed_rows == [10, 9]  # every add first (failed on 'abc'), then the survivors
    assert_same_files(got, expected)


def test_leaf_typed_ahead_that_does_not_fit_the_schema(tmp_path, monkeypatch):
    """The same table through run_parallel with its leaf read before the seen keys are known:
    typing every add ahead fails on the removed 'abc' file, so the survivors are typed once the
    keys are there; the same files as scan_metadata()."""
    path = _retyped_after_a_delete(tmp_path)
    expected = reference_files(path)
    typed_rows = _spy_typed_rows(monkeypatch)
    ahead = _finish_after_typed_ahead(monkeypatch, 1)
    with ThreadPoolExecutor(2) as pool:
        out = run_parallel(DeltaTable(path).snapshot().scan(), executor=pool)
    assert ahead == [10]
    assert typed_rows == [10, 9]  # every add ahead (failed on 'abc'), then the survivors
    assert_same_files(concat_files(out), expected)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["/t/a", "/t/b", "/t/c d", "/t/e"]), st.sampled_from([None, "u", "i"])),
        max_size=12,
    ),
    st.sets(st.integers(0, 11), max_size=6),
)
def test_touched_files_are_the_keys_in_the_commit_keys(files, picked):
    """``touched_files`` builds a joined key only for files with a deletion vector, and says what
    ``is_in(file_keys(...))`` says for every mix of files with and without one."""
    from delta_datafusion.log.actions import DV_TYPE
    from delta_datafusion.replay import file_keys, touched_files

    locations = pa.array([loc for loc, _ in files], pa.string())
    dv = pa.array(
        [
            None if kind is None else {"storageType": kind, "pathOrInlineDv": "x", "offset": 1}
            for _, kind in files
        ],
        DV_TYPE,
    )
    keys = file_keys(locations, dv)
    commit_keys = pa.array(
        [keys[i].as_py() for i in sorted(picked) if i < len(keys)] + ["/t/e", "/t/a\x00ux@1"], pa.string()
    )
    expected = pc.is_in(keys, value_set=commit_keys)
    assert touched_files(locations, dv, commit_keys).equals(expected)


def test_worker_count_checked_before_any_work(generated):
    """``workers=0`` (or a non-integer) is refused by name by every driver, before the sequential
    phase reads anything (Dask's driver split the leaves into 0 groups and failed on "parts", the
    others took 0 as the default)."""
    from delta_datafusion.errors import ArgumentError

    g = generated["v2-json"]
    phase = DeltaTable(g.path).snapshot().scan().parallel_scan_metadata()
    list(phase)
    after = phase.finish()
    assert isinstance(after, Parallel)
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ArgumentError, match="workers"):
            run_parallel(DeltaTable(g.path).snapshot().scan(), workers=bad)
        with pytest.raises(ArgumentError, match="workers"):
            par.execute_parallel(after.state, after.files, workers=bad)
        with pytest.raises(ArgumentError, match="workers"):
            par.run_with_dask(DeltaTable(g.path).snapshot().scan(), client=None, workers=bad)


@pytest.mark.parametrize("name", ["v2-json", "multi"])
def test_single_threaded_leaf_tasks(generated, name, monkeypatch):
    """``arrow_threads=False`` (what local pools use when the tasks fill the CPUs) reads and parses
    every leaf with pyarrow's pool off, gives the same files, and leaves the caller's setting alone."""
    from delta_datafusion.arrow_threads import use_threads
    from delta_datafusion.log import actions

    g = generated[name]
    phase = DeltaTable(g.path).snapshot().scan().parallel_scan_metadata()
    list(phase)
    after = phase.finish()
    assert isinstance(after, Parallel) and len(after.files) >= 2
    # these leaves are small enough to be read on the caller's thread anyway: as large ones
    monkeypatch.setattr(actions, "THREADED_READ_MIN_ROWS", 0)
    seen = record_read_threads(monkeypatch)
    single = concat_files(ParallelScanMetadata(after.state, after.files, arrow_threads=False))
    assert seen and not any(seen)
    assert use_threads()
    seen.clear()
    pooled = concat_files(ParallelScanMetadata(after.state, after.files))
    assert seen and all(seen)
    assert_same_files(single, pooled, name)
    # the drivers' choice: one thread per task once the tasks fill this machine's CPUs
    monkeypatch.setattr(par_execute, "_default_workers", lambda: 2)
    assert par_execute._arrow_threads_for(1) and not par_execute._arrow_threads_for(2)


def test_run_parallel_threads_corpus():
    if not MANIFEST.is_file():
        pytest.skip(f"conformance corpus not found at {CORPUS} (expected {MANIFEST})")
    for name in (
        "v2-checkpoints-json-with-sidecars",
        "v1-multi-part-struct-stats-only",
        "parquet_row_group_skipping",
    ):
        path = str(CORPUS / "tables" / name)
        out = run_parallel(DeltaTable(path).snapshot().scan(), workers=2)
        assert_same_files(concat_files(out), reference_files(path), name)


@pytest.fixture(scope="module")
def spawn_pool():
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=ctx) as pool:
        yield pool


def _remote_pid() -> int:
    return os.getpid()


def test_state_bytes_in_spawned_processes(generated, spawn_pool):
    """Workers in fresh (spawned) interpreters rebuild the state from bytes alone."""
    assert spawn_pool.submit(_remote_pid).result() != os.getpid()
    for name in ("v2-json", "multi", "classic"):
        g = generated[name]
        expected = reference_files(g.path)
        batches, after = sequential(g.path)
        blob = after.state.to_bytes()
        groups = split_leaves(after.files, 3, after.state.storage)
        futures = [spawn_pool.submit(scan_leaf_files, blob, grp) for grp in groups]
        out = list(batches) + [m for f in futures for m in f.result()]
        assert_same_files(concat_files(out), expected, f"{name} spawn")
        before = _shared_leftovers()
        for transport in ("auto", "shared", "pickle"):
            out = run_parallel(DeltaTable(g.path).snapshot().scan(), executor=spawn_pool, transport=transport)
            assert_same_files(concat_files(out), expected, f"{name} run_parallel(process pool, {transport})")
        assert _shared_leftovers() <= before  # result files are unlinked once mapped
    with pytest.raises(DeltaError, match="transport"):
        run_parallel(DeltaTable(g.path).snapshot().scan(), executor=spawn_pool, transport="carrier pigeon")


def _shared_leftovers() -> set[str]:
    d = Path(par.shared_dir())
    return {p.name for p in d.glob("delta-leaf-*.arrow")}


def test_shared_transport_in_process(generated):
    """The shared-file worker function and the driver-side mapping, without a pool."""
    g = generated["multi"]
    batches, after = sequential(g.path)
    before = _shared_leftovers()
    items = par.scan_leaf_files_shared(after.state.to_bytes(), after.files, par.shared_dir())
    assert all(isinstance(i, par_execute._SharedBatch) for i in items)
    received = par_execute._receive(items)
    assert _shared_leftovers() <= before
    assert_same_files(concat_files(list(batches) + received), reference_files(g.path), "shared transport")
    # an unwritable directory falls back to returning the batches themselves
    items = par.scan_leaf_files_shared(after.state.to_bytes(), after.files, "/nonexistent/dir")
    assert all(isinstance(i, ScanMetadata) for i in items)


def test_spawned_worker_refuses_corrupted_state(generated, spawn_pool):
    _, after = sequential(generated["v2-json"].path)
    blob = after.state.to_bytes()
    bad = blob[:50] + bytes([blob[50] ^ 0xFF]) + blob[51:]
    with pytest.raises(ParallelStateError, match="checksum"):
        spawn_pool.submit(scan_leaf_files, bad, after.files[:1]).result()


@pytest.mark.skipif(not HAS_SKIPPING, reason="delta_datafusion.skipping (file pruning) is not available")
def test_predicate_in_spawned_processes(generated, spawn_pool):
    from delta_datafusion import predicate as P

    g = generated["v2-json"]
    pred = P.and_(P.In(P.col("part"), (P.lit("p3"), P.lit("p5"))), P.gt(P.col("id"), 100_000))
    expected = reference_files(g.path, predicate=pred)
    out = run_parallel(DeltaTable(g.path).snapshot().scan(predicate=pred), executor=spawn_pool)
    assert_same_files(concat_files(out), expected, "predicate via process pool")


def test_dask_distributed(generated, monkeypatch):
    distributed = pytest.importorskip("distributed")
    # spawned worker processes import the package from the checkout
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        for name in ("v2-json", "multi", "classic", "none"):
            g = generated[name]
            expected = reference_files(g.path)
            for transport in ("auto", "pickle"):
                out = run_with_dask(DeltaTable(g.path).snapshot().scan(), client, transport=transport)
                assert_same_files(concat_files(out), expected, f"{name} dask {transport}")
        assert par_execute._is_local_cluster(client)
        # by hand: ship the state bytes and one file list per task, gather
        g = generated["v2-parquet"]
        batches, after = sequential(g.path)
        blob = after.state.to_bytes()
        futures = client.map(
            scan_leaf_files, [blob] * len(after.files), [[f] for f in after.files], pure=False
        )
        results = client.gather(futures)
        assert_same_files(
            concat_files(list(batches) + [m for r in results for m in r]), reference_files(g.path), "dask map"
        )
        workers = {w for w in client.run(os.getpid).values()}
        assert os.getpid() not in workers and len(workers) == 2
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("files", [None, "part.parquet", 5])
def test_parallel_files_must_be_a_list(generated, files):
    blob = _state(generated).to_bytes()
    with pytest.raises(ParallelStateError, match="files must be a list of checkpoint leaf files"):
        ParallelScanMetadata(blob, files)


def test_leaves_of_another_checkpoint_or_table_are_refused(tmp_path):
    """State from the checkpoint at v4 with the leaves of the older v3 checkpoint (or of another
    table) used to return a wrong file set silently."""
    deltalake = pytest.importorskip("deltalake")
    path = str(tmp_path / "t")
    for k in range(4):
        deltalake.write_deltalake(path, pa.table({"p": [k % 2], "x": [k]}), mode="append", partition_by=["p"])
    deltalake.DeltaTable(path).create_checkpoint()  # v3
    _, old = sequential(path)
    deltalake.DeltaTable(path).delete("p = 0")  # v4
    deltalake.DeltaTable(path).create_checkpoint()
    seq, new = sequential(path)
    assert isinstance(old, Parallel) and isinstance(new, Parallel)
    with pytest.raises(
        ParallelStateError, match="not one of the 1 leaf files of the checkpoint at version 4 the state"
    ):
        list(ParallelScanMetadata(new.state.to_bytes(), old.files))
    other = str(tmp_path / "other")
    deltalake.write_deltalake(other, pa.table({"p": [0], "x": [0]}), partition_by=["p"])
    deltalake.DeltaTable(other).create_checkpoint()
    _, foreign = sequential(other)
    with pytest.raises(ParallelStateError, match="is not in .*_delta_log"):
        list(ParallelScanMetadata(new.state.to_bytes(), foreign.files))
    # the right leaves still give scan_metadata()
    got = concat_files(seq + list(ParallelScanMetadata(new.state.to_bytes(), new.files)))
    assert got.num_rows == DeltaTable(path).snapshot().files().num_rows == 2


def test_a_split_must_name_each_leaf_of_its_own_checkpoint_once(tmp_path):
    """Duplicates (a leaf twice, overlapping row groups), a classic checkpoint at the version of
    the V2 one the state was made from, and a path escaping _delta_log with '..' used to give
    duplicate or foreign files silently; relative and file:// spellings of a real leaf are read."""
    import shutil

    src = corpus_table("v2-checkpoints-json-with-sidecars")
    root = tmp_path / "t"
    shutil.copytree(src, root)
    snap = DeltaTable(str(root)).snapshot()
    phase = snap.scan().parallel_scan_metadata()
    seq = list(phase)
    done = phase.finish()
    blob = done.state.to_bytes()
    leaf = done.files[0]
    for split in ([leaf, leaf], [leaf, leaf.path], [LeafFile(leaf.path, leaf.size, (0,)), leaf]):
        with pytest.raises(ParallelStateError, match="given twice"):
            ParallelScanMetadata(blob, split)
        with pytest.raises(ParallelStateError, match="given twice"):
            par.split_leaves(split, 2, done.state.storage)
    with pytest.raises(ParallelStateError, match="lists a row group twice"):
        ParallelScanMetadata(blob, [LeafFile(leaf.path, leaf.size, (0, 0))])
    # a classic checkpoint next to the V2 one at the same version holds the same adds
    classic = root / "_delta_log" / f"{done.state.checkpoint_version:020d}.checkpoint.parquet"
    pq.write_table(pa.concat_tables([pq.read_table(f.path) for f in done.files]), classic)
    with pytest.raises(ParallelStateError, match="not one of the .* leaf files"):
        list(ParallelScanMetadata(blob, [str(classic)]))
    escaping = str(root / "_delta_log" / ".." / "_delta_log" / ".." / "other.parquet")
    with pytest.raises(ParallelStateError, match="is not in"):
        list(ParallelScanMetadata(blob, [escaping]))
    rel = os.path.relpath(leaf.path, root)
    for spelling in (rel, "file://" + leaf.path):
        got = concat_files(seq + list(ParallelScanMetadata(blob, [spelling, *done.files[1:]])))
        assert got.num_rows == snap.files().num_rows, spelling


def test_state_header_fields_of_the_wrong_type_are_refused():
    """A forged state with a valid checksum but malformed header values: ParallelStateError, not
    an AttributeError from deep inside."""

    snap = DeltaTable(str(corpus_table("v2-checkpoints-json-with-sidecars"))).snapshot()
    phase = snap.scan().parallel_scan_metadata()
    list(phase)
    state = phase.finish().state
    for field, value in (("table_root", 5), ("protocol", []), ("leaves", "x"), ("storage_options", [1])):
        forged = par.ParallelState.from_bytes(state.to_bytes())
        header = forged.header()
        header[field] = value
        blob = _reassemble(header, par_state._keys_ipc(forged.seen_keys))
        with pytest.raises(ParallelStateError, match="wrong type"):
            par.ParallelState.from_bytes(blob)


@pytest.mark.parametrize("how", ["inline", "threads", "executor", "processes"])
def test_repeated_multi_part_checkpoint_part_refused_in_parallel(tmp_path, how):
    """A part copied over another lists its files twice: the sequential replay refuses the table
    (tests/test_corrupt_tables.py) and so does the union of the parallel phase, however the parts
    are split, instead of returning those files (and their rows) twice."""
    import shutil

    from conftest import copy_table

    from delta_datafusion.errors import LogCorruptError

    t = copy_table(corpus_table("v1-multi-part-struct-stats-only"), tmp_path / "t")
    part = t / "_delta_log" / "00000000000000000005.checkpoint.{:010d}.0000000003.parquet"
    shutil.copy(part.parent / part.name.format(2), part.parent / part.name.format(3))
    scan = DeltaTable(str(t)).snapshot().scan()
    match = "multi-part checkpoint list a file more than once"
    if how == "inline":
        with pytest.raises(LogCorruptError, match=match):
            run_parallel(scan, workers=1)
    elif how == "threads":
        with pytest.raises(LogCorruptError, match=match):
            run_parallel(scan, workers=3)
    elif how == "executor":
        with ThreadPoolExecutor(2) as pool, pytest.raises(LogCorruptError, match=match):
            run_parallel(scan, executor=pool)
    else:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(2, mp_context=ctx) as pool, pytest.raises(LogCorruptError, match=match):
            run_parallel(scan, executor=pool)


def test_leaf_queue_names_the_leaves_no_thread_scanned() -> None:
    """Every leaf handed out must come back scanned; one that did not (a task that ended without
    an error and without it) is named, instead of its rows going missing from the result."""
    leaves = [LeafFile("/t/_delta_log/_sidecars/a.parquet"), LeafFile("/t/_delta_log/b.parquet", 0, (2, 3))]
    queue = par_execute._LeafQueue(leaves)
    taken = queue.take()
    assert isinstance(taken, tuple) and taken[1] == leaves[0]
    (piece,) = queue.read(taken[0], LeafAdds(leaves[0], None, pa.table({"path": pa.array([], pa.string())})))
    queue.put(piece, ScanMetadata(pa.table({"path": pa.array([], pa.string())})))
    with pytest.raises(ParallelStateError, match=r"not scanned: b\.parquet row groups \[2, 3\]$"):
        queue.results()


def _adds(leaf: LeafFile, rows: int) -> LeafAdds:
    return LeafAdds(leaf, None, pa.table({"path": pa.array([f"f{i}" for i in range(rows)], pa.string())}))


def test_leaf_queue_offers_the_last_leaves_in_pieces(monkeypatch) -> None:
    """Once no leaf is left to hand out, a leaf read is split into a piece per thread and the
    pieces are offered: a thread out of leaves waits for them (not ending while another still
    reads) and takes one; the reader takes back what nobody took. Batches come back in order."""
    monkeypatch.setattr(par_execute, "TAIL_PIECE_ROWS", 10)
    a, b, c = (LeafFile(f"/t/_delta_log/_sidecars/{n}.parquet") for n in "abc")
    queue = par_execute._LeafQueue([a, b, c], threads=2)
    (ia, _), (ib, _) = queue.take(), queue.take()
    (whole,) = queue.read(ia, _adds(a, 100))  # c is still to hand out: a stays whole
    assert whole.adds.flat.num_rows == 100
    ic, leaf = queue.take()
    assert leaf == c
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(queue.take()))
    waiter.start()  # no leaf left, b and c being read: it waits for their pieces
    waiter.join(0.2)
    assert waiter.is_alive()
    b_own, b_offered = queue.read(ib, _adds(b, 25))
    waiter.join(10)
    assert got == [b_offered] and b_offered.adds.flat.num_rows + b_own.adds.flat.num_rows == 25
    (c_whole,) = queue.read(ic, _adds(c, 19))  # no two pieces of 10 rows: whole
    assert not queue.reclaim(b_offered)  # the waiting thread has it
    assert queue.take() is None  # no leaf, no piece, nobody reading
    for piece, name in ((whole, "a"), (b_offered, "b1"), (c_whole, "c"), (b_own, "b0")):
        queue.put(piece, ScanMetadata(pa.table({"path": [name]})))
    assert [m.files.column("path")[0].as_py() for m in queue.results()] == ["a", "b0", "b1", "c"]
    alone = par_execute._LeafQueue([a], threads=3)
    i, _ = alone.take()
    own, *offered = alone.read(i, _adds(a, 30))
    assert [p.adds.flat.num_rows for p in (own, *offered)] == [10, 10, 10]
    assert all(alone.reclaim(p) for p in offered) and alone.take() is None


def test_leaf_queue_splits_a_last_leaf_into_several_pieces_a_thread(monkeypatch) -> None:
    """A last leaf is split into TAIL_PIECES_PER_THREAD pieces per thread (of TAIL_PIECE_ROWS
    adds at least), so that the threads end within about a piece of each other (with a piece per
    thread, 1M adds in 8 sidecars on 2 threads: their ends a median 63-84 ms apart, against 21-34)."""
    monkeypatch.setattr(par_execute, "TAIL_PIECE_ROWS", 10)
    a, b = (LeafFile(f"/t/_delta_log/_sidecars/{n}.parquet") for n in "ab")
    queue = par_execute._LeafQueue([a, b], threads=2)
    (ia, _), (ib, _) = queue.take(), queue.take()
    pieces = queue.read(ia, _adds(a, 100))
    assert [p.adds.flat.num_rows for p in pieces] == [12, 13, 12, 13, 12, 13, 12, 13]
    firsts = [p.adds.flat.column("path")[0].as_py() for p in pieces]
    assert firsts == [f"f{n}" for n in (0, 12, 25, 37, 50, 62, 75, 87)]
    few = queue.read(ib, _adds(b, 35))  # three pieces of 10 adds at least
    assert [p.adds.flat.num_rows for p in few] == [11, 12, 12]
    taken = []
    while (item := queue.take()) is not None:  # the offered pieces, in order, for idle threads
        taken.append(item)
    assert taken == pieces[1:] + few[1:]


@pytest.mark.parametrize("name", ["v2-json", "v2-parquet", "multi"])
@pytest.mark.parametrize("workers", [2, 3])
def test_run_parallel_shares_the_last_leaves_between_threads(generated, name, workers, monkeypatch):
    """On threads, the leaves read once none is left to hand out come back in pieces (a batch
    each, typed by whichever thread is free); the files stay scan_metadata()'s."""
    monkeypatch.setattr(par_execute, "TAIL_PIECE_ROWS", 1, raising=False)
    g = generated[name]
    out = run_parallel(DeltaTable(g.path).snapshot().scan(), workers=workers)
    assert_same_files(concat_files(out), reference_files(g.path), f"{name} workers={workers}")
    leaves = [b.extra["leaf"] for b in out if "leaf" in b.extra]
    assert len(leaves) > len(set(leaves)), leaves


def test_with_seen_keys_keeps_everything_else_of_the_state(generated):
    """A state made before the commits replayed, given its seen keys (SequentialPhase.prepare),
    is the state with those keys and every other argument kept: the table id that refuses another
    table's checkpoint, the leaves it may read, the predicate, the parsed metadata it shares."""
    import inspect

    from delta_datafusion import predicate as P

    _, after = sequential(generated["classic"].path, predicate=P.gt(P.col("id"), 20_000))
    state = after.state
    assert state.checkpoint_table_id is not None and state.leaves and state.predicate is not None
    params = set(inspect.signature(ParallelState.__init__).parameters) - {"self"}
    assert set(state._arguments()) == params  # no constructor argument left out
    assert state.with_seen_keys(state.seen_keys) == state
    other = state.with_seen_keys(pa.array(["b", "a", "b"]))
    assert sorted(other.seen_keys.to_pylist()) == ["a", "b"]
    assert {**other.header(), "num_keys": 0} == {**state.header(), "num_keys": 0}
    assert other.metadata is state.metadata and other.storage is state.storage
