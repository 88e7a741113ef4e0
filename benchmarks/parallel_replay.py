"""Parallel scan-metadata replay: sequential ``scan_metadata()`` vs two-phase replay on threads,
processes and Dask, on a table with a V2 checkpoint of a million files.

The table (cached under ``benchmarks/.data/``, rebuilt when its recipe changes) is written by
:mod:`gen_v2_checkpoint`: a V2 checkpoint (JSON manifest) of 1,000,000 adds in 8 parquet sidecars
plus 100 inline adds, then 120 commits (appends, removes, re-adds, deletion-vector updates,
stats-only re-adds). Log only: no data files (scan metadata never opens them).

Cases (each in fresh processes, through ``harness.py``; pools and clusters are started untimed in
the case's setup, as a long-running service would keep them):

* ``sequential``      -- ``list(scan.scan_metadata())`` (``Snapshot.files()``) with
  ``delta_datafusion.snapshot.LEAF_THREADS = 1``: leaves read and reduced one after another, the
  baseline;
* ``sequential, one thread`` -- the same with pyarrow's own thread pool off as well (the package's
  ``arrow_threads(False)``), so the whole replay uses one core: the baseline for the scaling of
  the work itself, since the baseline above already uses ~1.4 cores through pyarrow;
* ``leaves on 8 threads`` -- the same with ``LEAF_THREADS = 8`` (the object-store default): the
  leaves read on a thread pool (the issue's "local thread pool for the parallel phase"). Locally
  the package's default reads them one at a time, as the baseline does;
* ``two-phase, 1 worker`` -- ``run_parallel(scan, workers=1)``: the same two-phase code inline,
  which separates the effect of per-leaf processing from the effect of parallelism;
* ``threads, 2 workers`` -- ``run_parallel(scan, workers=2)`` (a private thread pool);
* ``processes, 2 workers`` -- ``run_parallel(scan, executor=ProcessPoolExecutor(2, spawn))``:
  state bytes + file lists out, pickled ScanMetadata back;
* ``dask, 2 workers``  -- ``run_with_dask(scan, client)`` on ``LocalCluster(n_workers=2,
  processes=True, threads_per_worker=1)`` on loopback.

Every case returns the same projection of the file table (path, size, numRecords, DV id), so the
harness fingerprints prove the results are equal. Peak memory: the harness reports the driver's
``ru_maxrss``; for processes and Dask the workers' peaks (``VmHWM`` / worker ``ru_maxrss``) are
collected separately and printed in their own table.

Usage::

    .venv/bin/python benchmarks/parallel_replay.py                # 2 processes x 3 reps per case
    .venv/bin/python benchmarks/parallel_replay.py --procs 1 --reps 2 --wait-quiet 120
    .venv/bin/python benchmarks/parallel_replay.py --profile      # where the sequential time goes
    .venv/bin/python benchmarks/parallel_replay.py --profile-threads --reps 4  # the 2-thread case's CPU
    .venv/bin/python benchmarks/parallel_replay.py --quick        # 200k files, for a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from harness import (  # noqa: E402
    Case,
    add_common_args,
    format_report,
    prepared,
    run_selected,
    save_json,
    select,
)

RECIPE = {
    "recipe": 1,
    "kind": "v2-json",
    "num_files": 1_000_000,
    "sidecars": 8,
    "inline_adds": 100,
    "commits_after": 120,
    "adds_per_commit": 10,
    "removes_per_commit": 20,
    "dv_updates_per_commit": 5,
    "readds_per_commit": 2,
    "stats_readds_per_commit": 2,
    "seed": 42,
}
QUICK = {**RECIPE, "num_files": 200_000}


def data_dir() -> Path:
    return Path(os.environ.get("DELTA_BENCH_DATA") or BENCH_DIR / ".data").resolve()


def _table_name(quick: bool) -> str:
    return "parallel_v2_200k" if quick else "parallel_v2_1m"


def _is_built(quick: bool) -> bool:
    recipe = QUICK if quick else RECIPE
    path = data_dir() / _table_name(quick)
    stamp = data_dir() / f"{_table_name(quick)}.recipe.json"
    return path.is_dir() and stamp.is_file() and json.loads(stamp.read_text()).get("recipe") == recipe


def ensure_table(quick: bool = False) -> str:
    """Generate the benchmark table unless a copy built from the same recipe exists.

    The build runs in a child process: Linux keeps ``ru_maxrss`` across ``fork``/``exec``, so a
    generator peak in this process would become the floor of every measured worker's peak.
    """
    path = data_dir() / _table_name(quick)
    if not _is_built(quick):
        import subprocess

        cmd = [sys.executable, str(Path(__file__).resolve()), "--build-table"] + (
            ["--quick"] if quick else []
        )
        subprocess.run(cmd, check=True)
    return str(path)


def _build_table(quick: bool) -> None:
    import gen_v2_checkpoint as gen

    recipe = QUICK if quick else RECIPE
    name = _table_name(quick)
    path = data_dir() / name
    stamp = data_dir() / f"{name}.recipe.json"
    data_dir().mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f"{name}.building.", dir=data_dir()))
    print(
        f"generating {path} ({recipe['num_files']:,} checkpointed files, {recipe['sidecars']} sidecars) ..."
    )
    kwargs = {k: v for k, v in recipe.items() if k != "recipe"}
    t = gen.generate(tmp / "t", **kwargs)
    if path.exists():
        shutil.rmtree(path)
    os.replace(tmp / "t", path)
    shutil.rmtree(tmp, ignore_errors=True)
    stamp.write_text(
        json.dumps({"recipe": recipe, "version": t.version, "live_files": len(t.live), "seconds": t.seconds})
    )
    print(f"  version {t.version}, {len(t.live):,} live files, {len(t.leaves)} sidecars, {t.seconds:.1f} s")


# --------------------------------------------------------------------------------------------------
# cases (run inside harness worker processes)


def _summary(files):
    """Primitive projection of the file table: cheap to fingerprint, still identifies every row.
    Only its four values are combined: combining all nine columns (stats, partition values:
    ~200 MB of fresh memory at 1M files) was a serial 0.14-0.54 s tail of every case, and the
    whole stats and DV structs before taking a field of each still 12-120 ms (5-6 ms now): the
    benchmark's own cost, not the replay's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def field(column: str, name: str):
        chunks = [pc.struct_field(chunk, name) for chunk in files.column(column).chunks]
        return pa.chunked_array(chunks, files.schema.field(column).type.field(name).type).combine_chunks()

    return pa.table(
        {
            "path": files.column("path").combine_chunks(),
            "size": files.column("size").combine_chunks(),
            "num_records": field("stats", "numRecords"),
            "dv": field("deletion_vector", "pathOrInlineDv"),
        }
    )


def _concat(batches):
    from delta_datafusion.parallel import concat_files

    return concat_files(batches)


def _record_workers(mem_file: str | None, engine: str, peaks_mb: list[float]) -> None:
    if mem_file:
        with open(mem_file, "a") as fh:
            fh.write(json.dumps({"engine": engine, "pid": os.getpid(), "worker_peak_mb": peaks_mb}) + "\n")


@prepared
def case_sequential(path: str, leaf_threads: int | None = 1, arrow_pool: bool = True):
    import delta_datafusion.snapshot
    from delta_datafusion import DeltaTable
    from delta_datafusion.arrow_threads import arrow_threads

    # 1: the leaves are read and reduced one after another (sequential replay, also the package's
    # default for local tables); 8: on a thread pool (the default for object stores).
    # arrow_pool=False: pyarrow's own thread pool off too, so the whole replay runs on one core.
    delta_datafusion.snapshot.LEAF_THREADS = leaf_threads

    def run():
        with arrow_threads(arrow_pool):
            scan = DeltaTable(path).snapshot().scan()
            return _summary(_concat(list(scan.scan_metadata())))

    return run


@prepared
def case_threads(path: str, workers: int):
    from delta_datafusion import DeltaTable
    from delta_datafusion.parallel import run_parallel

    def run():
        return _summary(_concat(run_parallel(DeltaTable(path).snapshot().scan(), workers=workers)))

    return run


def _vm_hwm_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def _warm() -> int:
    import delta_datafusion.parallel  # noqa: F401 - import the package in the worker, untimed

    return os.getpid()


@prepared
def case_processes(path: str, workers: int, mem_file: str | None = None):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from delta_datafusion import DeltaTable
    from delta_datafusion.parallel import run_parallel

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    for f in [pool.submit(_warm) for _ in range(4 * workers)]:
        f.result()

    def run():
        out = _summary(_concat(run_parallel(DeltaTable(path).snapshot().scan(), executor=pool)))
        _record_workers(mem_file, "processes", [_vm_hwm_mb(p) for p in list(pool._processes)])
        return out

    return run


def _worker_peak_mb() -> float:
    """VmHWM of the calling process (per address space; ru_maxrss would include the parent's)."""
    return _vm_hwm_mb(os.getpid())


@prepared
def case_dask(path: str, workers: int, mem_file: str | None = None):
    import distributed

    from delta_datafusion import DeltaTable
    from delta_datafusion.parallel import run_with_dask

    cluster = distributed.LocalCluster(
        n_workers=workers, processes=True, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
    )
    client = distributed.Client(cluster)
    client.run(_warm)

    def run():
        out = _summary(_concat(run_with_dask(DeltaTable(path).snapshot().scan(), client)))
        _record_workers(mem_file, "dask", sorted(client.run(_worker_peak_mb).values()))
        return out

    return run


ENGINES = {
    "sequential": "sequential scan_metadata() (leaves one at a time)",
    "one_core": "sequential, one thread (pyarrow's pool off too)",
    "auto": "leaves on 8 threads (LEAF_THREADS=8)",
    "inline": "two-phase, 1 worker (inline)",
    "threads": "threads, 2 workers",
    "processes": "processes, 2 workers",
    "dask": "dask, 2 workers",
}


def build_cases(path: str, mem_file: str, recipe: dict) -> list[Case]:
    group = (
        f"V2 checkpoint, {recipe['num_files']:,} files in {recipe['sidecars']} sidecars "
        f"+ {recipe['commits_after']} commits"
    )
    common = dict(section="parallel scan metadata", group=group)
    return [
        Case("parallel_replay:case_sequential", dict(path=path), engine=ENGINES["sequential"], **common),
        Case(
            "parallel_replay:case_sequential",
            dict(path=path, arrow_pool=False),
            engine=ENGINES["one_core"],
            **common,
        ),
        Case(
            "parallel_replay:case_sequential",
            dict(path=path, leaf_threads=8),
            engine=ENGINES["auto"],
            **common,
        ),
        Case("parallel_replay:case_threads", dict(path=path, workers=1), engine=ENGINES["inline"], **common),
        Case("parallel_replay:case_threads", dict(path=path, workers=2), engine=ENGINES["threads"], **common),
        Case(
            "parallel_replay:case_processes",
            dict(path=path, workers=2, mem_file=mem_file),
            engine=ENGINES["processes"],
            **common,
        ),
        Case(
            "parallel_replay:case_dask",
            dict(path=path, workers=2, mem_file=mem_file),
            engine=ENGINES["dask"],
            **common,
        ),
    ]


def speedup_table(results: list[dict], worker_mem: dict[str, float]) -> str:
    """Markdown: warm / first wall time, speedup over sequential, driver and worker peak memory."""
    base = next((r for r in results if r["engine"] == ENGINES["sequential"] and not r.get("error")), None)
    lines = [
        "| engine | warm s | first s | speedup (warm) | speedup (first) | CPU s (warm) | driver peak RSS MB | worker peak RSS MB (each) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.get("error"):
            lines.append(f"| {r['engine']} | error: {r['error'][:80]} | | | | | | |")
            continue
        sp_w = base["warm_s"] / r["warm_s"] if base and r.get("warm_s") and base.get("warm_s") else None
        sp_f = base["first_s"] / r["first_s"] if base and r.get("first_s") else None
        kind = (
            "processes"
            if r["engine"] == ENGINES["processes"]
            else "dask"
            if r["engine"] == ENGINES["dask"]
            else None
        )
        wm = f"{worker_mem[kind]:.0f}" if kind and kind in worker_mem else "-"
        warm = f"{r['warm_s']:.2f}" if r.get("warm_s") is not None else "-"
        cpu = f"{r['cpu_s']:.1f}" if r.get("cpu_s") is not None else "-"
        lines.append(
            f"| {r['engine']} | {warm} | {r['first_s']:.2f} | {'-' if sp_w is None else f'{sp_w:.2f}x'}"
            f" | {'-' if sp_f is None else f'{sp_f:.2f}x'} | {cpu} | {r['rss_peak_mb']:.0f} | {wm} |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------
# profile of the sequential path


def _read_leaves(storage, leaves):
    from concurrent.futures import ThreadPoolExecutor

    from delta_datafusion.log.checkpoint import read_leaf

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(lambda leaf: read_leaf(storage, leaf), leaves))


def profile_sequential(path: str, top: int = 25) -> None:
    """Stage timings (wall and CPU) of Snapshot.files() on ``path`` plus a cProfile summary."""
    import cProfile
    import io
    import pstats

    import pyarrow as pa

    from delta_datafusion import DeltaTable
    from delta_datafusion.replay import flatten_file_actions, surviving_checkpoint_adds, with_keys
    from delta_datafusion.snapshot import project_raw

    def clock():
        return time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)

    def since(t0):
        w, ru = clock()
        cpu = (ru.ru_utime + ru.ru_stime) - (t0[1].ru_utime + t0[1].ru_stime)
        return w - t0[0], cpu

    stages: list[tuple[str, float, float]] = []

    def stage(name, fn):
        t0 = clock()
        out = fn()
        w, c = since(t0)
        stages.append((name, w, c))
        return out

    snap = stage("open snapshot (list, read commits, protocol/metaData)", lambda: DeltaTable(path).snapshot())
    live, keys = stage("commit replay (parse JSON, newest per key)", lambda: snap._commit_replay)
    manifest = stage("read checkpoint manifest", lambda: snap.checkpoint_manifest)
    leaves = stage(
        "read sidecars (8 threads)",
        lambda: _read_leaves(snap.storage, manifest.leaves),
    )
    phys = snap.metadata.physical_partition_columns()
    flat = stage(
        "flatten add structs (incl. partitionValues map -> struct)",
        lambda: [flatten_file_actions(t.column("add"), phys) for t in leaves],
    )
    keyed = stage("keys: decode paths, resolve, DV ids", lambda: [with_keys(snap.storage, f) for f in flat])
    surv = stage("is_in against commit keys", lambda: [surviving_checkpoint_adds(f, keys) for f in keyed])
    inline = [] if manifest.inline is None else [project_raw(snap.leaf_adds(manifest.inline, keys))]
    raw = stage(
        "concat raw tables",
        lambda: pa.concat_tables(
            [project_raw(live), *inline] + [project_raw(s) for s in surv], promote_options="permissive"
        ),
    )
    md = snap.metadata
    from delta_datafusion.partition_values import typed_partition_values
    from delta_datafusion.stats import typed_stats

    stage(
        "typed partition values",
        lambda: typed_partition_values(
            raw.column("partitionValues").combine_chunks(),
            phys,
            [md.arrow_schema.field(c) for c in md.partition_columns],
            raw.num_rows,
        ),
    )
    stage(
        "typed stats (JSON parse of 1M stats strings)",
        lambda: typed_stats(md, raw.column("stats").combine_chunks(), None, raw.num_rows),
    )
    total_w = sum(w for _, w, _ in stages)
    print(f"\n### Where Snapshot.files() spends its time ({raw.num_rows:,} files)\n")
    print("| stage | wall s | CPU s | share of wall |")
    print("|---|---|---|---|")
    for name, w, c in stages:
        print(f"| {name} | {w:.2f} | {c:.2f} | {100 * w / total_w:.0f} % |")
    print(f"| total | {total_w:.2f} | {sum(c for _, _, c in stages):.2f} | |")

    snap2 = DeltaTable(path).snapshot()
    prof = cProfile.Profile()
    t0 = clock()
    prof.runcall(snap2.files)
    w, c = since(t0)
    print(
        f"\nSnapshot.files() end to end: {w:.2f} s wall, {c:.2f} s CPU ({c / w:.2f} cores) under cProfile\n"
    )
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("cumulative").print_stats(top)
    print("```\n" + s.getvalue().strip() + "\n```")


# --------------------------------------------------------------------------------------------------
# CPU of the "threads, 2 workers" case, step by step


#: ("module:attribute", label) of the steps :func:`profile_threads` times (functions where the
#: caller's module looks them up); an indented step is part of the one above it
_THREAD_STEPS = [
    ("delta_datafusion.parallel.state:ParallelState.leaf_adds", "leaf read, flattened, located"),
    ("delta_datafusion.parallel.state:read_leaf", "  sidecar read (parquet decode)"),
    ("delta_datafusion.snapshot:flatten_file_actions", "  add structs flattened"),
    ("delta_datafusion.snapshot:with_locations", "  paths decoded, locations"),
    ("delta_datafusion.parallel.state:ParallelState.typed_ahead", "typed ahead (seen keys not known yet)"),
    ("delta_datafusion.parallel.state:ParallelState._surviving_typed", "surviving adds typed"),
    ("delta_datafusion.parallel.state:ParallelState._typed", "typing (in either of the two above)"),
    ("delta_datafusion.snapshot:typed_partition_column", "  typed partition values"),
    ("delta_datafusion.snapshot:typed_stats", "  typed stats"),
    ("delta_datafusion.stats:_wrapped_lines", "    stats JSON framed (one copy)"),
    ("delta_datafusion.stats:read_ndjson", "    stats JSON parse (pyarrow.json)"),
    ("delta_datafusion.parallel.state:touched_files", "touched adds (seen keys)"),
    ("delta_datafusion.scan:Scan.pruned_metadata", "pruning"),
    ("delta_datafusion.parallel.phases:SequentialPhase.__next__", "sequential phase (commits)"),
    ("delta_datafusion.parallel.state:ParallelState.with_seen_keys", "state with the seen keys"),
]
#: the part of the two "typed" steps that is neither typing nor the touched check: the touched
#: rows filtered out of the typed table, projections
_OTHER = "other (touched rows filtered out, projections)"


def _time_steps(acc: dict, calls: dict) -> list:
    """Wrap each of :data:`_THREAD_STEPS` to add its thread CPU (``time.thread_time``: user +
    sys of the calling thread) to ``acc[(role, label)]``; returns the undo list."""
    import importlib
    import threading

    undo = []
    for where, label in _THREAD_STEPS:
        module, _, attr = where.partition(":")
        owner = importlib.import_module(module)
        *classes, name = attr.split(".")
        for cls in classes:
            owner = getattr(owner, cls)
        fn = getattr(owner, name) if not classes else owner.__dict__[name]

        def timed(*a, __fn=fn, __label=label, **k):
            t0 = time.thread_time()
            try:
                return __fn(*a, **k)
            finally:
                role = "main" if threading.current_thread() is threading.main_thread() else "leaf threads"
                acc[(role, __label)] = acc.get((role, __label), 0.0) + time.thread_time() - t0
                calls[(role, __label)] = calls.get((role, __label), 0) + 1

        setattr(owner, name, timed)
        undo.append((owner, name, fn))
    return undo


def profile_threads(path: str, reps: int = 4) -> None:
    """Thread CPU of each step of ``run_parallel(scan, workers=2)`` (the "threads, 2 workers"
    case), per run, on the leaf threads and on the calling thread, with the process's user and
    system CPU and minor faults; the first run (imports, caches) is not counted."""
    from delta_datafusion import DeltaTable
    from delta_datafusion.parallel import run_parallel

    acc: dict = {}
    calls: dict = {}
    undo = _time_steps(acc, calls)
    runs = []
    try:
        for i in range(reps + 1):
            if i == 1:
                acc.clear()
                calls.clear()
            ru0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            _summary(_concat(run_parallel(DeltaTable(path).snapshot().scan(), workers=2)))
            ru1, w1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            runs.append(
                (
                    w1 - w0,
                    ru1.ru_utime - ru0.ru_utime,
                    ru1.ru_stime - ru0.ru_stime,
                    ru1.ru_minflt - ru0.ru_minflt,
                )
            )
    finally:
        for owner, name, fn in undo:
            setattr(owner, name, fn)
    print(f"\n### Where the CPU of run_parallel(workers=2) goes (mean of {reps} warm runs)\n")
    print("| step | leaf threads CPU ms | calling thread CPU ms | calls |")
    print("|---|---|---|---|")
    labels = [label for _, label in _THREAD_STEPS]
    for role in ("leaf threads", "main"):
        by = {label: acc.get((role, label), 0.0) for label in labels}
        acc[(role, _OTHER)] = (
            by["typed ahead (seen keys not known yet)"]
            + by["surviving adds typed"]
            - by["typing (in either of the two above)"]
            - by["touched adds (seen keys)"]
        )
    for label in [*labels, _OTHER]:
        leaf, main = acc.get(("leaf threads", label), 0.0), acc.get(("main", label), 0.0)
        n = calls.get(("leaf threads", label), 0) + calls.get(("main", label), 0)
        print(
            f"| {label.replace('  ', '. ')} | {1000 * leaf / reps:.0f} | {1000 * main / reps:.0f} | {n / reps:.3g} |"
        )
    print("\n| run | wall s | user s | sys s | minor faults |\n|---|---|---|---|---|")
    for i, (w, u, s, f) in enumerate(runs):
        print(f"| {'first' if i == 0 else i} | {w:.2f} | {u:.2f} | {s:.2f} | {f} |")


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_args(ap)
    ap.add_argument("--profile", action="store_true", help="profile the sequential path and exit")
    ap.add_argument(
        "--profile-threads", action="store_true", help="CPU of each step of the 2-thread case, and exit"
    )
    ap.add_argument("--build-table", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.build_table:
        _build_table(args.quick)
        return 0
    path = ensure_table(args.quick)
    if args.profile:
        profile_sequential(path)
        return 0
    if args.profile_threads:
        profile_threads(path, max(1, args.reps))
        return 0
    fd, mem_file = tempfile.mkstemp(prefix="parallel-replay-mem-", suffix=".jsonl")
    os.close(fd)
    cases = select(build_cases(path, mem_file, QUICK if args.quick else RECIPE), args)
    t0 = time.time()
    results = run_selected(cases, args)
    if results is None:  # --list
        os.unlink(mem_file)
        return 0
    worker_mem: dict[str, float] = {}
    with open(mem_file) as fh:
        for line in fh:
            rec = json.loads(line)
            peaks = [p for p in rec["worker_peak_mb"] if p == p]
            if peaks:
                worker_mem[rec["engine"]] = max(worker_mem.get(rec["engine"], 0.0), max(peaks))
    os.unlink(mem_file)
    print(format_report(results, ENGINES["sequential"]))
    print("### Speedup over sequential scan_metadata()\n")
    print(speedup_table(results, worker_mem))
    print(
        f"\n{len(results)} cases in {time.time() - t0:.0f} s (procs={args.procs}, reps={args.reps}); "
        f"table {path}; {os.cpu_count()} CPUs"
    )
    if args.json:
        meta = {"argv": sys.argv, "worker_peak_mb": worker_mem, "recipe": QUICK if args.quick else RECIPE}
        save_json(args.json, results, meta)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
