"""Log replay benchmark: snapshot load + full scan metadata, delta_datafusion vs deltalake.

Measured operation (each repetition starts from the table path, nothing cached in between):

* ours:      ``delta_datafusion.DeltaTable(p).snapshot().files()`` (typed partition values and
             stats included), returned as (path, size_bytes);
* deltalake: ``deltalake.DeltaTable(p).get_add_actions(flatten=True)`` (``peers:dl_add_actions``).

Tables (all log only: the benchmark never opens data files):

* ``k300``: ``../shared/corpus/bench/300k-add-files-100-col-partitioned`` (5 JSON commits, 46 MB,
  300,000 live adds, 100 partition values, no stats).
* ``k300_ckpt``: a copy of k300 plus a deltalake checkpoint at v4 (the same 300k adds from parquet).
* ``gen3000``: 3,050 JSON commits written directly (10 adds with JSON stats and 3 removes per commit,
  8 partitions), with a deltalake checkpoint every 100 versions (v99 .. v2999; the latest snapshot
  is checkpoint v2999 + 50 commits).
* ``gen3000_nockpt``: the same commits hard-linked without checkpoints (3,050 JSON files to replay).

Ours also runs with ``ARROW_DEFAULT_MEMORY_POOL=jemalloc`` (the row "jemalloc pool"): pyarrow's
default mimalloc pool asks for transparent huge pages, and where the kernel compacts memory for
them (``/sys/kernel/mm/transparent_hugepage/defrag`` = madvise, as here) a fresh process pays for
it in its first repetition and in peak memory.

Generated tables are cached under ``benchmarks/.data/log_replay/`` (rebuilt when their recipe
changes). Every case runs in fresh worker processes (``harness.py``): warm = median of repetitions
2..n, first = first repetition of a fresh process; peak memory = ``ru_maxrss`` after the first
repetition. Results of the two engines are fingerprinted and must agree.

Usage::

    .venv/bin/python benchmarks/log_replay.py [--procs 2 --reps 5] [--tables k300,gen3000]
    .venv/bin/python benchmarks/log_replay.py --profile      # cProfile + phase breakdown of ours

Target (from the issue): ours at most 0.5x deltalake's time. No thresholds are enforced here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import Case, bench_main, needs  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
K300 = ROOT.parent / "shared" / "corpus" / "bench" / "300k-add-files-100-col-partitioned"
DATA = Path(os.environ.get("DELTA_BENCH_DATA") or BENCH_DIR / ".data").resolve() / "log_replay"

GEN = {
    "commits": 3050,
    "checkpoint_interval": 100,
    "files_per_commit": 10,
    "removes_per_commit": 3,
    "partitions": 8,
}
RECIPES = {"k300_ckpt": 1, "gen3000": 3, "gen3000_nockpt": 3}
TABLES = ["k300", "k300_ckpt", "gen3000", "gen3000_nockpt"]
TARGET = 0.5
JEMALLOC = "delta_datafusion (ARROW_DEFAULT_MEMORY_POOL=jemalloc)"

# --------------------------------------------------------------------------------------------------
# case functions (run in harness workers)


@needs("delta_datafusion.table", "pyarrow")
def ours_files(path: str):
    """``DeltaTable(path).snapshot().files()`` -> (path, size_bytes)."""
    import pyarrow as pa

    from delta_datafusion.table import DeltaTable

    files = DeltaTable(path).snapshot().files()
    return pa.table({"path": files.column("path"), "size_bytes": files.column("size")})


# --------------------------------------------------------------------------------------------------
# tables


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _stamp(path: Path) -> Path:
    return path / ".log_replay_recipe.json"


def _is_built(name: str) -> bool:
    p = DATA / name
    try:
        return json.loads(_stamp(p).read_text()).get("recipe") == RECIPES[name]
    except (OSError, ValueError):
        return False


def _finish(tmp: Path, name: str, facts: dict) -> None:
    _stamp(tmp).write_text(json.dumps({"recipe": RECIPES[name], "facts": facts}))
    final = DATA / name
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def _fresh(name: str) -> Path:
    tmp = DATA / f"{name}.building-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


def build_k300_ckpt() -> None:
    from deltalake import DeltaTable

    tmp = _fresh("k300_ckpt")
    shutil.copytree(K300 / "_delta_log", tmp / "_delta_log", copy_function=shutil.copyfile)
    os.chmod(tmp / "_delta_log", 0o755)
    DeltaTable(str(tmp)).create_checkpoint()
    _finish(tmp, "k300_ckpt", {"checkpoint": 4})


def build_gen3000() -> None:
    from datagen import (
        gen_log_table,
    )  # the shared synthetic-log writer (JSON commits + deltalake checkpoints)

    tmp = _fresh("gen3000")
    t0 = time.perf_counter()
    facts = gen_log_table(str(tmp), **GEN)
    facts["build_seconds"] = round(time.perf_counter() - t0, 1)
    _finish(tmp, "gen3000", facts)


def build_gen3000_nockpt() -> None:
    src = DATA / "gen3000" / "_delta_log"
    tmp = _fresh("gen3000_nockpt")
    (tmp / "_delta_log").mkdir()
    n = 0
    for f in sorted(os.listdir(src)):
        if f.endswith(".json") and ".checkpoint" not in f:
            os.link(src / f, tmp / "_delta_log" / f)
            n += 1
    _finish(tmp, "gen3000_nockpt", {"commits": n})


def ensure_tables(names: list[str]) -> dict[str, str]:
    DATA.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in names:
        if name == "k300":
            if not K300.is_dir():
                raise SystemExit(f"benchmark table not found: {K300}")
            paths[name] = str(K300)
            continue
        if name == "gen3000_nockpt" and not _is_built("gen3000"):
            _log("gen3000: building (3,050 commits, checkpoints every 100) ...")
            build_gen3000()
        if not _is_built(name):
            _log(f"{name}: building ...")
            t0 = time.perf_counter()
            {"k300_ckpt": build_k300_ckpt, "gen3000": build_gen3000, "gen3000_nockpt": build_gen3000_nockpt}[
                name
            ]()
            _log(f"{name}: built in {time.perf_counter() - t0:.1f} s")
        paths[name] = str(DATA / name)
    return paths


def describe(path: str) -> str:
    log = Path(path) / "_delta_log"
    names = os.listdir(log)
    commits = sum(1 for f in names if f.endswith(".json") and ".checkpoint" not in f)
    ckpts = sorted(int(f.split(".")[0]) for f in names if ".checkpoint." in f)
    size = sum((log / f).stat().st_size for f in names if (log / f).is_file())
    last = f", newest checkpoint v{ckpts[-1]}" if ckpts else ""
    return f"{commits} commits, {len(ckpts)} checkpoints{last}, log {size / 1e6:.1f} MB"


# --------------------------------------------------------------------------------------------------
# profile


def profile(paths: dict[str, str], top: int = 25) -> None:
    """Phase breakdown (warm, in-process) and cProfile of ours on each table."""
    import cProfile
    import io
    import pstats

    from delta_datafusion.table import DeltaTable

    for name, path in paths.items():
        DeltaTable(path).snapshot().files()  # warm the page cache and imports
        phases = []
        t = time.perf_counter()
        dt_ = DeltaTable(path)
        listing = dt_.listing()
        phases.append(("list _delta_log", time.perf_counter() - t))
        t = time.perf_counter()
        snap = dt_.snapshot()
        phases.append(("snapshot(): list + read commits + protocol/metaData", time.perf_counter() - t))
        t = time.perf_counter()
        snap.commit_log  # noqa: B018
        phases.append(("parse commit JSON (pyarrow.json)", time.perf_counter() - t))
        t = time.perf_counter()
        snap._commit_replay  # noqa: B018
        phases.append(("commit replay (flatten, keys, newest per key)", time.perf_counter() - t))
        t = time.perf_counter()
        snap.checkpoint_manifest  # noqa: B018
        phases.append(("read checkpoint manifest", time.perf_counter() - t))
        t = time.perf_counter()
        raw = snap.raw_files
        phases.append(("read leaves; checkpoint adds: flatten, keys, anti-join", time.perf_counter() - t))
        t = time.perf_counter()
        files = snap.files()
        phases.append(("typed partition values + stats (scan files)", time.perf_counter() - t))
        total = sum(p[1] for p in phases[1:])
        print(
            f"\n### profile: {name} ({describe(path)}; {files.num_rows:,} live files, {raw.num_rows:,} raw)\n"
        )
        print(f"listing alone: {phases[0][1] * 1000:.0f} ms ({len(listing.commits)} commits listed)")
        print("| phase | ms | share |\n|---|---|---|")
        for label, sec in phases[1:]:
            print(f"| {label} | {sec * 1000:.0f} | {sec / total:.0%} |")
        print(f"| total | {total * 1000:.0f} | |")
        prof = cProfile.Profile()
        prof.enable()
        DeltaTable(path).snapshot().files()
        prof.disable()
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(top)
            text = buf.getvalue()
            start = text.find("   ncalls")
            print(f"\ncProfile sorted by {key} (pyarrow/numpy C calls are charged to their Python caller):\n")
            print("```\n" + text[start:].rstrip() + "\n```")


# --------------------------------------------------------------------------------------------------
# main


def _extra_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--tables", default=",".join(TABLES), help=f"comma-separated subset of {TABLES}")
    ap.add_argument("--profile", action="store_true", help="profile ours in-process instead of benchmarking")


def _table_names(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TABLES]
    if unknown:
        raise SystemExit(f"unknown tables {unknown}; known: {TABLES}")
    return names


def build_cases(args: argparse.Namespace) -> list[Case]:
    paths = ensure_tables(_table_names(args.tables))
    cases = []
    for name, path in paths.items():
        _log(f"{name}: {path} ({describe(path)})")
        group = name
        cases.append(
            Case(
                "log_replay:ours_files",
                {"path": path},
                engine="delta_datafusion",
                group=group,
                section="log replay",
            )
        )
        # pyarrow 26's default pool (mimalloc) asks for transparent huge pages; where the kernel
        # compacts memory for them (THP defrag=madvise, this machine), a fresh process pays for it
        cases.append(
            Case(
                "log_replay:ours_files",
                {"path": path},
                engine=JEMALLOC,
                group=group,
                section="log replay",
                env={"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"},
            )
        )
        cases.append(
            Case(
                "peers:dl_add_actions", {"path": path}, engine="deltalake", group=group, section="log replay"
            )
        )
    return cases


def summarize(results: list[dict]) -> None:
    """Ratio table ours / deltalake: wall (warm, first), CPU seconds, peak RSS, background load."""
    by = {(r["engine"], r["group"]): r for r in results}
    groups = list(dict.fromkeys(r["group"] for r in results))
    print(f"\n### ours / deltalake (target <= {TARGET}x of deltalake's time)\n")
    print(
        "| table | ours warm [first] | deltalake warm [first] | ratio warm | ratio first | ratio CPU"
        " | ours peak RSS MB | deltalake peak RSS MB | bg cores | target (warm) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g, (engine, label) in itertools.product(
        groups, [("delta_datafusion", ""), (JEMALLOC, " (jemalloc pool)")]
    ):
        o, d = by.get((engine, g)), by.get(("deltalake", g))
        if not o or not d or o.get("error") or d.get("error"):
            print(f"| {g}{label} | error | | | | | | | | |")
            continue
        nan = float("nan")
        # one repetition gives a first run only: no warm time to compare
        ow, dw = o.get("warm_s") or nan, d.get("warm_s") or nan
        rw, rf = ow / dw, o["first_s"] / d["first_s"]
        rc = o["cpu_s"] / d["cpu_s"] if o.get("cpu_s") and d.get("cpu_s") else nan
        bg = max(o.get("bg_cores") or 0, d.get("bg_cores") or 0)
        verdict = "-" if rw != rw else "met" if rw <= TARGET else "NOT met"
        print(
            f"| {g}{label} | {ow * 1000:.0f} [{o['first_s'] * 1000:.0f}] ms"
            f" | {dw * 1000:.0f} [{d['first_s'] * 1000:.0f}] ms | {rw:.2f}x | {rf:.2f}x | {rc:.2f}x"
            f" | {o['rss_peak_mb']:.0f} | {d['rss_peak_mb']:.0f} | {bg:.2f} | {verdict} |"
        )
    print(f"\nmachine: {os.cpu_count()} CPUs; bg cores > 0.3 means other processes disturbed the timing.")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--profile" in argv:
        ap = argparse.ArgumentParser()
        _extra_args(ap)
        args, _ = ap.parse_known_args(argv)
        profile(ensure_tables(_table_names(args.tables)))
        return 0
    if not any(a.startswith("--reps") for a in argv):
        argv = [*argv, "--reps", "5"]
    results = bench_main(
        build_cases,
        description=__doc__.splitlines()[0],
        baseline="deltalake",
        argv=argv,
        extra_args=_extra_args,
    )
    if results:
        summarize(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
