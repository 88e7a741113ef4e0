"""Measuring core shared by the benchmark scripts.

A *case* is a function ``module:function`` (module in ``benchmarks/`` or importable) plus keyword
arguments. Every case runs in fresh worker processes::

    python benchmarks/harness.py --worker peers:dl_querybuilder_sql --kwargs '{"path": ..., "sql": ...}' \
        --reps 3 --out result.json

The worker imports the case's module (and what ``@needs`` lists, or runs the ``@prepared`` factory)
*outside* the timer, records RSS after that, then runs the case ``reps`` times. Each repetition
redoes the whole operation from the table path; the case function must return a *materialized*
result (a ``pyarrow.Table``, a polars ``DataFrame``, an int, ...): the time is ``perf_counter``
around that call. Measured per worker process:

* wall time of every repetition; ``first`` = repetition 1 of a fresh process, ``warm`` = the
  later ones (page cache warm in both cases: :func:`run_selected` reads the tables' files once
  before the first case);
* CPU seconds (user+sys over all threads, ``getrusage``) of every repetition;
* ``rss_base_mb`` (VmRSS after imports/setup) and ``rss_peak_mb`` (``ru_maxrss`` right after the
  first repetition); ``rss_delta_mb`` = peak - base;
* a fingerprint of the (last) result: row count plus an order-independent checksum of the rows
  after normalizing types (string_view -> utf8, ints -> int64, decimals/floats -> 6 significant
  digits, timestamps -> UTC microseconds, column order by name), so results of engines can be
  checked equal; results of at most 100 rows also keep their sorted rows, compared with a float
  tolerance (a DataFusion decimal avg and a DuckDB double avg then match).

The parent (:func:`run_cases`) aggregates P processes x R repetitions per case: ``warm_s`` = median
of all non-first repetitions, ``first_s`` = median over processes of the first repetition,
``cpu_s`` = median CPU of warm repetitions, min/max, memory, and ``bg_cores`` = CPU cores used by
*other* processes while the worker ran (``/proc/stat`` busy time minus the worker's CPU). Optionally
it waits (bounded) for a quiet machine before each worker (``--wait-quiet``).

:func:`format_table` prints markdown tables (rows = engines, columns = groups, one table per
section) with ``warm [first]`` cells, and ratio tables against a named baseline engine. No timing
thresholds anywhere: benchmarks only print (and write JSON with ``--json``).

Benchmark scripts build a list of :class:`Case` and call :func:`bench_main`::

    from harness import Case, bench_main
    def cases(args): return [Case("peers:dl_querybuilder_sql", dict(path=p, sql=q), engine="deltalake", group="Q1")]
    if __name__ == "__main__": bench_main(cases, baseline="deltalake")
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
BG_MARK = 0.3  # cells whose bg_cores exceed this get a '*' (other work disturbed the measurement)


# --------------------------------------------------------------------------------------------------
# decorators for case functions


def needs(*modules: str):
    """Mark a case function: import ``modules`` in the worker before timing starts."""

    def deco(fn):
        fn._bench_needs = modules
        return fn

    return deco


def prepared(fn):
    """Mark a case *factory*: ``fn(**kwargs)`` runs untimed (imports, connections) and returns the
    zero-argument callable that is timed. It must not open the table (each repetition must)."""
    fn._bench_prepared = True
    return fn


# --------------------------------------------------------------------------------------------------
# cases


@dataclass
class Case:
    """One measured operation.

    fn      -- "module:function"; module is looked up in benchmarks/ first, then on sys.path.
    kwargs  -- JSON-serializable keyword arguments for fn.
    engine  -- row label (e.g. "deltalake QueryBuilder", "ours").
    group   -- column label (e.g. "Q1 li_part").
    section -- table title; one table is printed per section.
    check   -- fingerprint class: results in the same section+group are compared only between
               cases with the same ``check`` value; None = not compared (nor between worker processes).
    procs/reps -- override the run's defaults for this case.
    env     -- extra environment variables for the worker processes (e.g. an allocator setting).
    """

    fn: str
    kwargs: dict = field(default_factory=dict)
    engine: str = ""
    group: str = ""
    section: str = ""
    check: str | None = "result"
    procs: int | None = None
    reps: int | None = None
    id: str = ""
    env: dict = field(default_factory=dict)

    def __post_init__(self):
        if not self.engine:
            self.engine = self.fn
        if not self.id:
            self.id = "/".join(x for x in (self.section, self.group, self.engine) if x)


def resolve(ref: str) -> Callable:
    mod_name, _, fn_name = ref.partition(":")
    if not fn_name:
        raise ValueError(f"case function must be 'module:function', got {ref!r}")
    for p in (str(BENCH_DIR), str(ROOT)):
        if p not in sys.path:
            sys.path.insert(0, p)
    mod = importlib.import_module(mod_name)
    return getattr(mod, fn_name)


# --------------------------------------------------------------------------------------------------
# process metrics


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def maxrss_mb() -> float:
    """Peak RSS of this process. VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork+exec,
    so a worker would report at least its parent's peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def _busy_seconds() -> float:
    """Machine-wide busy CPU seconds so far (all cores), from /proc/stat."""
    try:
        with open("/proc/stat") as fh:
            parts = fh.readline().split()[1:]
    except OSError:
        return float("nan")
    vals = [int(x) for x in parts]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)  # idle + iowait
    busy = sum(vals[:8]) - idle  # user nice system idle iowait irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def busy_cores(interval: float = 0.5) -> float:
    b0, t0 = _busy_seconds(), time.monotonic()
    time.sleep(interval)
    return (_busy_seconds() - b0) / (time.monotonic() - t0)


def wait_quiet(
    max_wait: float, threshold: float = BG_MARK, log: Callable[[str], None] | None = None
) -> float:
    """Wait (at most ``max_wait`` s) until other processes use less than ``threshold`` cores."""
    deadline = time.monotonic() + max_wait
    busy = busy_cores()
    while busy > threshold and time.monotonic() < deadline:
        if log:
            log(f"  machine busy ({busy:.2f} cores), waiting ...")
        time.sleep(2.0)
        busy = busy_cores()
    return busy


# --------------------------------------------------------------------------------------------------
# result fingerprints


def cast_views(table):
    """Cast string_view/large_string -> string and binary_view/large_binary -> binary (top level)."""
    import pyarrow as pa

    fields = []
    for f in table.schema:
        t = f.type
        if t in (pa.string_view(), pa.large_string()):
            t = pa.string()
        elif t in (pa.binary_view(), pa.large_binary()):
            t = pa.binary()
        fields.append(pa.field(f.name, t, f.nullable, f.metadata))
    schema = pa.schema(fields, metadata=table.schema.metadata)
    return table if schema == table.schema else table.cast(schema)


def to_arrow(obj):
    """Convert a materialized result to a pyarrow Table (None if it is not tabular)."""
    import pyarrow as pa

    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    if isinstance(obj, pa.RecordBatchReader):
        return obj.read_all()
    mod = type(obj).__module__ or ""
    if mod.startswith("polars") and hasattr(obj, "to_arrow"):
        return obj.to_arrow()
    if hasattr(obj, "__arrow_c_stream__"):
        return pa.table(obj)
    if hasattr(obj, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(obj)])
    if hasattr(obj, "to_arrow_table"):
        return obj.to_arrow_table()
    return None


def _canon_number(arr, digits: int):
    """Numbers -> int64 codes: integral values (|x| < 2**53) exactly, others as a
    (``digits``-significant-digit mantissa, exponent) code, so that the same value computed as
    decimal, float64 or int by different engines gets the same code."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if pa.types.is_integer(t):
        return pc.cast(arr, pa.int64(), safe=False)
    if pa.types.is_decimal(t) and t.scale <= 0:
        try:
            return pc.cast(arr, pa.int64())
        except pa.ArrowInvalid:
            pass
    f = pc.cast(arr, pa.float64(), safe=False)
    valid = pc.is_valid(f).to_numpy(zero_copy_only=False)
    x = pc.fill_null(f, 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
    with np.errstate(all="ignore"):
        finite = np.isfinite(x)
        xf = np.where(finite, x, 0.0)
        integral = finite & (np.rint(xf) == xf) & (np.abs(xf) < 2.0**53)
        ax = np.abs(xf)
        e = np.where(ax > 0, np.floor(np.log10(np.where(ax > 0, ax, 1.0))), 0.0) - (digits - 1)
        m = np.rint(xf / np.power(10.0, e))
        over = np.abs(m) >= 10.0**digits
        m = np.where(over, np.rint(m / 10.0), m)
        e = e + over
        code = m.astype(np.int64) * 4096 + (e.astype(np.int64) + 2048) + (1 << 62)
        code = np.where(integral, xf.astype(np.int64), code)
        code = np.where(np.isnan(x), (1 << 62) - 1, code)
        code = np.where(np.isposinf(x), (1 << 62) - 2, code)
        code = np.where(np.isneginf(x), (1 << 62) - 3, code)
    return pa.array(code, pa.int64(), mask=~valid)


def canonical_table(table, digits: int = 6, numbers: str = "code"):
    """Normalize a result table for fingerprinting (see module doc).

    ``numbers="code"``: ints -> int64 and decimals/floats -> int64 codes (see :func:`_canon_number`);
    ``numbers="float"``: ints -> int64, decimals/floats -> float64 (for tolerant comparison)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.combine_chunks() if table.num_columns else table
    cols, names = [], []
    for name in sorted(table.column_names):
        col = table.column(name)
        arr = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
        t = arr.type
        if pa.types.is_dictionary(t):
            arr = arr.dictionary_decode()
            t = arr.type
        if t in (pa.string_view(), pa.large_string()):
            arr = pc.cast(arr, pa.string())
        elif t in (pa.binary_view(), pa.large_binary()):
            arr = pc.cast(arr, pa.binary())
        elif pa.types.is_boolean(t):
            arr = pc.cast(arr, pa.int64())
        elif numbers == "float" and pa.types.is_integer(t):
            arr = pc.cast(arr, pa.int64(), safe=False)
        elif numbers == "float" and (pa.types.is_floating(t) or pa.types.is_decimal(t)):
            arr = pc.cast(arr, pa.float64(), safe=False)
        elif pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            arr = _canon_number(arr, digits)
        elif pa.types.is_timestamp(t):
            arr = pc.cast(pc.cast(arr, pa.timestamp("us", tz=t.tz)), pa.int64())
        elif pa.types.is_date64(t):
            arr = pc.cast(pc.cast(arr, pa.date32()), pa.int64())
        elif pa.types.is_date32(t) or pa.types.is_time32(t):
            arr = pc.cast(pc.cast(arr, pa.int32()), pa.int64())
        elif pa.types.is_time64(t) or pa.types.is_duration(t):
            arr = pc.cast(arr, pa.int64())
        elif pa.types.is_null(t):
            arr = pa.nulls(len(arr), pa.int64())
        elif pa.types.is_nested(t):
            arr = pa.array([json.dumps(v, sort_keys=True, default=str) for v in arr.to_pylist()], pa.string())
        cols.append(arr)
        names.append(name)
    return pa.Table.from_arrays(cols, names=names)


def _column_checksums(ct) -> dict[str, str]:
    """Per-column order-independent checksums (to name the columns that differ)."""
    try:
        import numpy as np
        import polars as pl
    except ImportError:  # pragma: no cover
        return {}
    df = pl.from_arrow(ct, rechunk=False)
    return {c: f"{int(np.sum(df[c].hash(seed=0).to_numpy(), dtype=np.uint64)):016x}" for c in df.columns}


def _row_checksum(ct) -> str:
    """Order-independent checksum: sum (mod 2**64) of per-row hashes."""
    try:
        import numpy as np
        import polars as pl

        if ct.num_columns == 0:
            return "0" * 16
        h = pl.from_arrow(ct, rechunk=False).hash_rows(seed=0).to_numpy()
        return f"{int(np.sum(h, dtype=np.uint64)):016x}"
    except ImportError:  # pragma: no cover - slow fallback
        total = 0
        for row in ct.to_pylist():
            d = hashlib.blake2b(repr(sorted(row.items())).encode(), digest_size=8).digest()
            total = (total + int.from_bytes(d, "little")) % (1 << 64)
        return f"{total:016x}"


VALUES_MAX_ROWS = 100  # results up to this size also keep their (sorted) rows for tolerant checks
REL_TOL, ABS_TOL = 1e-5, 1e-6  # float tolerance of those checks (decimal avg vs double avg)


def _sort_key(row):
    return tuple((v is None, v if not isinstance(v, float) else round(v, 6)) for v in row)


def _small_values(t) -> list | None:
    try:
        ft = canonical_table(t, numbers="float")
        rows = [list(r) for r in zip(*(ft.column(i).to_pylist() for i in range(ft.num_columns)), strict=True)]
        return sorted(rows, key=_sort_key)
    except Exception:  # noqa: BLE001 - values are optional; the checksum remains
        return None


def _values_close(a: list, b: list) -> bool:
    if len(a) != len(b):
        return False
    for ra, rb in zip(a, b, strict=True):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if isinstance(x, int | float) and isinstance(y, int | float):
                if not math.isclose(x, y, rel_tol=REL_TOL, abs_tol=ABS_TOL):
                    return False
            elif x != y:
                return False
    return True


def fingerprints_match(a: dict, b: dict) -> bool:
    """Same row count and either the same checksum, or (small results) the same sorted rows
    within a float tolerance (so a decimal(…, 6) avg equals a float64 avg)."""
    if a.get("rows") != b.get("rows"):
        return False
    if a.get("checksum") == b.get("checksum"):
        return True
    va, vb = a.get("values"), b.get("values")
    return va is not None and vb is not None and _values_close(va, vb)


def fingerprint(obj, digits: int = 6) -> dict:
    """``{"rows", "checksum", "columns", "preview"[, "values"]}`` of a case result."""
    if obj is None:
        return {"rows": None, "checksum": None, "preview": "None"}
    if isinstance(obj, bool | int | float | str | list | tuple | dict):
        blob = json.dumps(obj, sort_keys=True, default=str)
        rows = len(obj) if isinstance(obj, list | tuple | dict) else 1
        return {
            "rows": rows,
            "checksum": hashlib.blake2b(blob.encode(), digest_size=8).hexdigest(),
            "preview": blob[:80],
        }
    t = to_arrow(obj)
    if t is None:
        blob = repr(obj)
        return {"rows": None, "checksum": None, "preview": blob[:80]}
    ct = canonical_table(t, digits)
    preview = ""
    if 0 < t.num_rows <= 20:
        try:
            first = cast_views(t).sort_by([(c, "ascending") for c in t.column_names]).slice(0, 1)
            preview = "|".join(str(v[0]) for v in first.to_pydict().values())[:120]
        except Exception:  # noqa: BLE001 - preview is best effort
            preview = ""
    out = {
        "rows": t.num_rows,
        "checksum": _row_checksum(ct),
        "columns": sorted(t.column_names),
        "column_checksums": _column_checksums(ct) if ct.num_columns else {},
        "preview": preview,
    }
    if t.num_rows <= VALUES_MAX_ROWS:
        out["values"] = _small_values(t)
    return out


# --------------------------------------------------------------------------------------------------
# worker


def worker(ref: str, kwargs: dict, reps: int, digits: int = 6) -> dict:
    """Run one case ``reps`` times in this (fresh) process and return the measurements."""
    out: dict = {"fn": ref, "pid": os.getpid()}
    t0 = time.perf_counter()
    fn = resolve(ref)
    for m in getattr(fn, "_bench_needs", ()):
        importlib.import_module(m)
    runner = fn(**kwargs) if getattr(fn, "_bench_prepared", False) else functools.partial(fn, **kwargs)
    out["setup_s"] = time.perf_counter() - t0
    out["rss_base_mb"] = rss_mb()
    times, cpus = [], []
    result = None
    for i in range(reps):
        result = None  # drop the previous result before the next repetition
        c0 = cpu_s()
        s0 = time.perf_counter()
        result = runner()
        s1 = time.perf_counter()
        c1 = cpu_s()
        times.append(s1 - s0)
        cpus.append(c1 - c0)
        if i == 0:
            out["rss_peak_mb"] = maxrss_mb()
            out["rss_after_first_mb"] = rss_mb()
    out["times_s"] = times
    out["cpu_s"] = cpus
    out["fingerprint"] = fingerprint(result, digits)
    return out


def _worker_cli(args) -> int:
    kwargs = json.loads(args.kwargs) if args.kwargs else {}
    try:
        res = worker(args.worker, kwargs, args.reps, args.digits)
    except BaseException as e:  # noqa: BLE001 - report every failure to the parent
        res = {
            "fn": args.worker,
            "error": f"{type(e).__name__}: {e}"[:2000],
            "traceback": traceback.format_exc(),
        }
    text = json.dumps(res, default=str)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    else:
        print(text)
    return 0


# --------------------------------------------------------------------------------------------------
# parent: run and aggregate


def _median(xs):
    xs = [x for x in xs if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return statistics.median(xs) if xs else None


def run_worker(case: Case, reps: int, timeout: float, digits: int = 6) -> dict:
    """Start one fresh worker process for ``case``; returns its measurements (+ bg_cores)."""
    fd, out_path = tempfile.mkstemp(prefix="bench-", suffix=".json")
    os.close(fd)
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--worker",
        case.fn,
        "--kwargs",
        json.dumps(case.kwargs),
        "--reps",
        str(reps),
        "--digits",
        str(digits),
        "--out",
        out_path,
    ]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(BENCH_DIR), str(ROOT), env.get("PYTHONPATH")) if x)
    env.update(case.env)
    c0, b0, t0 = cpu_s(resource.RUSAGE_CHILDREN), _busy_seconds(), time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        elapsed = time.monotonic() - t0
        child_cpu = cpu_s(resource.RUSAGE_CHILDREN) - c0
        try:
            with open(out_path) as fh:
                res = json.loads(fh.read() or "{}")
        except (OSError, json.JSONDecodeError):
            res = {}
        if not res:
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
            res = {"error": f"worker exited with {proc.returncode}: " + " / ".join(tail)}
        elif proc.returncode != 0 and "error" not in res:
            res["error"] = f"worker exited with {proc.returncode}"
    except subprocess.TimeoutExpired:
        elapsed = time.monotonic() - t0
        child_cpu = cpu_s(resource.RUSAGE_CHILDREN) - c0
        res = {"error": f"timeout after {timeout:.0f} s"}
    finally:
        try:
            os.unlink(out_path)
        except OSError:
            pass
    busy = _busy_seconds() - b0
    res["wall_process_s"] = elapsed
    res["bg_cores"] = max(0.0, (busy - child_cpu) / elapsed) if elapsed > 0 else None
    return res


def aggregate(case: Case, runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    rec = {k: v for k, v in asdict(case).items()}
    rec["processes"] = runs
    errors = [r["error"] for r in runs if "error" in r]
    rec["error"] = errors[0] if errors else None
    if not ok:
        return rec
    firsts = [r["times_s"][0] for r in ok]
    warms = [t for r in ok for t in r["times_s"][1:]]
    alls = [t for r in ok for t in r["times_s"]]
    rec.update(
        first_s=_median(firsts),
        warm_s=_median(warms),
        min_s=min(alls),
        max_s=max(alls),
        cpu_first_s=_median([r["cpu_s"][0] for r in ok]),
        cpu_s=_median([c for r in ok for c in r["cpu_s"][1:]]),
        setup_s=_median([r["setup_s"] for r in ok]),
        rss_base_mb=_median([r["rss_base_mb"] for r in ok]),
        rss_peak_mb=_median([r["rss_peak_mb"] for r in ok]),
        rss_delta_mb=_median([r["rss_peak_mb"] - r["rss_base_mb"] for r in ok]),
        bg_cores=max((r["bg_cores"] for r in ok if r.get("bg_cores") is not None), default=None),
        fingerprint=ok[0]["fingerprint"],
    )
    if case.check is not None:  # check=None: any rows will do (LIMIT without ORDER BY)
        rec["fingerprint_stable"] = all(
            fingerprints_match(r["fingerprint"], ok[0]["fingerprint"]) for r in ok
        )
    return rec


def run_cases(
    cases: Iterable[Case],
    procs: int = 2,
    reps: int = 3,
    timeout: float = 900.0,
    wait_quiet_s: float = 0.0,
    rerun_disturbed: bool = False,
    digits: int = 6,
    log: Callable[[str], None] | None = None,
) -> list[dict]:
    """Run every case in ``procs`` fresh worker processes x ``reps`` repetitions; return records.

    ``wait_quiet_s`` > 0: before each worker wait up to that long for other load < 0.3 cores.
    ``rerun_disturbed``: run a case once more when bg_cores > 0.3 and keep the less disturbed one.
    """
    log = log or (lambda s: print(s, file=sys.stderr, flush=True))
    results = []
    cases = list(cases)
    for n, case in enumerate(cases, 1):
        p = case.procs or procs
        r = case.reps or reps
        attempts = 2 if rerun_disturbed else 1
        best = None
        for _ in range(attempts):
            runs = []
            for _ in range(p):
                if wait_quiet_s > 0:
                    wait_quiet(wait_quiet_s, log=log)
                runs.append(run_worker(case, r, timeout, digits))
            rec = aggregate(case, runs)
            if best is None or (rec.get("bg_cores") or 0) < (best.get("bg_cores") or 0):
                best = rec
            if (best.get("bg_cores") or 0) <= BG_MARK:
                break
        results.append(best)
        if best.get("error"):
            log(f"[{n}/{len(cases)}] {case.id}: ERROR {best['error']}")
        else:
            fp = best["fingerprint"]
            log(
                f"[{n}/{len(cases)}] {case.id}: warm {fmt_s(best['warm_s'])} first {fmt_s(best['first_s'])}"
                f" cpu {fmt_num(best['cpu_s'])} rss +{fmt_num(best['rss_delta_mb'], 0)} MB"
                f" rows {fp.get('rows')} bg {fmt_num(best['bg_cores'])}"
            )
    return results


# --------------------------------------------------------------------------------------------------
# formatting


def fmt_s(x: float | None) -> str:
    if x is None:
        return "-"
    if x < 0.01:
        return f"{x * 1000:.1f} ms"
    if x < 1:
        return f"{x * 1000:.0f} ms"
    return f"{x:.2f} s"


def fmt_num(x: float | None, nd: int = 2) -> str:
    return "-" if x is None else f"{x:.{nd}f}"


def _ordered(values: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for v in values:
        seen.setdefault(v, None)
    return list(seen)


Baseline = str | list[str] | tuple[str, ...] | None


def _bases(baseline: Baseline) -> list[str]:
    if not baseline:
        return []
    return [baseline] if isinstance(baseline, str) else list(baseline)


def check_fingerprints(results: list[dict], baseline: Baseline = None) -> list[str]:
    """Compare fingerprints within each (section, group, check) across engines.

    The reference is the (first present) baseline engine's result, else the first engine's. Marks each
    record with ``fingerprint_match`` (True / False / None) and returns mismatch descriptions."""
    problems = []
    buckets: dict[tuple, list[dict]] = {}
    for r in results:
        r["fingerprint_match"] = None
        if r.get("error") or r.get("check") is None or not r.get("fingerprint"):
            continue
        buckets.setdefault((r["section"], r["group"], r["check"]), []).append(r)
    for (section, group, _), recs in buckets.items():
        if len(recs) < 2:
            continue
        ref = next((r for b in _bases(baseline) for r in recs if r["engine"] == b), recs[0])
        key = (ref["fingerprint"].get("rows"), ref["fingerprint"].get("checksum"))
        for r in recs:
            fp = r["fingerprint"]
            r["fingerprint_match"] = fingerprints_match(fp, ref["fingerprint"])
            if not r["fingerprint_match"]:
                ca = fp.get("column_checksums") or {}
                cb = ref["fingerprint"].get("column_checksums") or {}
                cols = sorted(c for c in set(ca) | set(cb) if ca.get(c) != cb.get(c))
                detail = (
                    f"rows={fp.get('rows')} checksum={fp.get('checksum')} preview={fp.get('preview')!r}"
                    f" != {ref['engine']} rows={key[0]} checksum={key[1]}"
                    f" preview={ref['fingerprint'].get('preview')!r}"
                )
                if cols and fp.get("rows") == key[0]:
                    detail += f"; columns that differ: {', '.join(cols)}"
                problems.append(f"{section}/{group}: {r['engine']} {detail}")
    for r in results:
        if r.get("fingerprint_stable") is False:
            problems.append(f"{r['id']}: result differs between worker processes")
    return problems


METRICS = {"wall": ("warm_s", "first_s"), "cpu": ("cpu_s", "cpu_first_s")}


def _cell(r: dict | None, metric: str = "wall") -> str:
    if r is None:
        return ""
    if r.get("error"):
        return "error"
    warm, first = (r.get(k) for k in METRICS[metric])
    fmt = fmt_s if metric == "wall" else (lambda x: "-" if x is None else f"{x:.2f}")
    s = f"{fmt(warm)} [{fmt(first)}]" if warm is not None else f"[{fmt(first)}]"
    if (r.get("bg_cores") or 0) > BG_MARK:
        s += " *"
    if r.get("fingerprint_match") is False:
        s += " ≠"
    return s


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}×"


def format_table(
    results: list[dict], baseline: Baseline = None, section: str | None = None, metric: str = "wall"
) -> str:
    """Markdown tables: per section, rows = engines, columns = groups, cells = ``warm [first]``
    wall times (``metric="cpu"``: CPU seconds of those runs).

    With ``baseline`` (an engine label, or a list: the first one present in a section is used), a
    second table gives every engine's ratio against it per column (``warm ratio [first ratio]``,
    < 1 = faster than the baseline)."""
    kw, kf = METRICS[metric]
    out = []
    sections = _ordered(r["section"] for r in results) if section is None else [section]
    for sec in sections:
        recs = [r for r in results if r["section"] == sec]
        groups = _ordered(r["group"] for r in recs)
        engines = _ordered(r["engine"] for r in recs)
        by = {(r["engine"], r["group"]): r for r in recs}
        headers = []
        for g in groups:
            rows = {
                (r.get("fingerprint") or {}).get("rows")
                for r in recs
                if r["group"] == g and not r.get("error") and r.get("check") is not None
            }
            n = rows.pop() if len(rows) == 1 else None
            headers.append(f"{g} ({n:,} rows)" if n is not None and n != 1 else g)
        title = (sec or "results") + (" (CPU seconds, user+sys)" if metric == "cpu" else "")
        out.append(f"### {title}\n")
        out.append("| engine | " + " | ".join(headers) + " |")
        out.append("|---|" + "---|" * len(groups))
        for e in engines:
            out.append(f"| {e} | " + " | ".join(_cell(by.get((e, g)), metric) for g in groups) + " |")
        out.append("")
        base = next((b for b in _bases(baseline) if b in engines), None)
        if base and len(engines) > 1:
            out.append(f"Ratio to `{base}` (warm [first]; < 1 is faster):\n")
            out.append("| engine | " + " | ".join(groups) + " |")
            out.append("|---|" + "---|" * len(groups))
            for e in engines:
                if e == base:
                    continue
                cells = []
                for g in groups:
                    r, b = by.get((e, g)), by.get((base, g))
                    if not r or not b or r.get("error") or b.get("error"):
                        cells.append("-")
                    else:
                        cells.append(f"{_ratio(r.get(kw), b.get(kw))} [{_ratio(r.get(kf), b.get(kf))}]")
                out.append(f"| {e} | " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


def format_resources(results: list[dict]) -> str:
    """Markdown tables (one per section) of CPU, memory, setup time and background load per case."""
    out = []
    for sec in _ordered(r["section"] for r in results):
        out.append(f"#### {sec or 'results'}: CPU / memory\n")
        out.append(
            "| group | engine | cpu s warm [first] | RSS after imports MB | ru_maxrss after 1st run MB"
            " | delta MB | setup s | bg cores | min..max |"
        )
        out.append("|---|---|---|---|---|---|---|---|---|")
        for r in results:
            if r["section"] != sec:
                continue
            if r.get("error"):
                out.append(f"| {r['group']} | {r['engine']} | error: {r['error'][:100]} | | | | | | |")
                continue
            out.append(
                f"| {r['group']} | {r['engine']} | {fmt_num(r['cpu_s'])} [{fmt_num(r['cpu_first_s'])}]"
                f" | {fmt_num(r['rss_base_mb'], 1)} | {fmt_num(r['rss_peak_mb'], 1)} | {fmt_num(r['rss_delta_mb'], 1)}"
                f" | {fmt_num(r['setup_s'])} | {fmt_num(r['bg_cores'])} | {fmt_s(r['min_s'])}..{fmt_s(r['max_s'])} |"
            )
        out.append("")
    return "\n".join(out)


def format_report(results: list[dict], baseline: Baseline = None) -> str:
    problems = check_fingerprints(results, baseline)
    parts = [format_table(results, baseline)]
    parts.append(
        "Cells: warm median [first run in a fresh process]; * = other load > 0.3 cores; ≠ = result differs.\n"
    )
    if any((r.get("bg_cores") or 0) > BG_MARK for r in results):
        parts.append("Other load disturbed some cases (*): CPU seconds are the steadier comparison.\n")
        parts.append(format_table(results, baseline, metric="cpu"))
    parts.append(format_resources(results))
    fps = [
        f"- {r['section']} / {r['group']} / {r['engine']}: rows={r['fingerprint'].get('rows')} checksum={r['fingerprint'].get('checksum')}"
        + (f" first={r['fingerprint']['preview']!r}" if r["fingerprint"].get("preview") else "")
        for r in results
        if not r.get("error") and r.get("fingerprint")
    ]
    parts.append("### Result fingerprints\n")
    parts.append("\n".join(fps) + "\n")
    if problems:
        parts.append("### RESULT MISMATCHES\n")
        parts.append("\n".join(f"- {p}" for p in problems) + "\n")
    errors = [f"- {r['id']}: {r['error']}" for r in results if r.get("error")]
    if errors:
        parts.append("### Errors\n")
        parts.append("\n".join(errors) + "\n")
    return "\n".join(parts)


def environment() -> dict:
    from importlib import metadata

    vers = {}
    for pkg in (
        "deltalake",
        "datafusion",
        "duckdb",
        "duckdb-extension-delta",
        "polars",
        "pyarrow",
        "delta-datafusion",
    ):
        try:
            vers[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            vers[pkg] = None
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "host": platform.node(),
        "versions": vers,
    }


def save_json(path: str, results: list[dict], meta: dict | None = None) -> None:
    doc = {"meta": {"environment": environment(), **(meta or {})}, "results": results}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)


# --------------------------------------------------------------------------------------------------
# CLI for benchmark scripts


def add_common_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--procs", type=int, default=2, help="fresh worker processes per case (default 2)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions per process (default 3)")
    ap.add_argument("--filter", default=None, help="regex on case id (section/group/engine)")
    ap.add_argument("--engines", default=None, help="regex on engine label")
    ap.add_argument("--baseline", default=None, help="engine label to compute ratios against")
    ap.add_argument("--json", default=None, help="write all records to this JSON file")
    ap.add_argument("--quick", action="store_true", help="small tables / fewer cases where supported")
    ap.add_argument(
        "--wait-quiet", type=float, default=0.0, help="wait up to N s for a quiet machine per worker"
    )
    ap.add_argument("--rerun-disturbed", action="store_true", help="rerun a case once if bg load > 0.3 cores")
    ap.add_argument("--timeout", type=float, default=900.0, help="per worker process, seconds")
    ap.add_argument("--digits", type=int, default=6, help="significant digits of floats in fingerprints")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")


def select(cases: list[Case], args) -> list[Case]:
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.id)]
    if args.engines:
        cases = [c for c in cases if re.search(args.engines, c.engine)]
    return cases


def compile_package() -> None:
    """Write the package's bytecode once, as ``pip install`` does.

    Benchmarks import the package from the source tree; with PYTHONDONTWRITEBYTECODE set (as on
    this machine) every fresh worker would otherwise compile it again (~50 ms counted in "first")."""
    import compileall

    pkg = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "delta_datafusion")
    compileall.compile_dir(pkg, quiet=1)


def warm_page_cache(cases: list[Case]) -> None:
    """Read every file under the cases' local ``path`` folders once, so that "first" measures a
    process's first query and not the disk: otherwise whichever engine runs first on a table pays
    the cold page cache alone (seen: 1.1 s against 0.3 s for the same first query)."""
    roots = sorted({c.kwargs["path"] for c in cases if isinstance(c.kwargs.get("path"), str)})
    for root in roots:
        if not os.path.isdir(root):
            continue
        for folder, _, names in os.walk(root):
            for name in names:
                try:
                    with open(os.path.join(folder, name), "rb") as fh:
                        while fh.read(1 << 23):
                            pass
                except OSError:
                    continue


def run_selected(cases: list[Case], args: argparse.Namespace) -> list[dict] | None:
    """Run the selected cases with the common arguments (compiling the package first, as pip
    does); with ``--list`` print them instead and return None."""
    if args.list:
        for c in cases:
            print(f"{c.id}  ->  {c.fn}({json.dumps(c.kwargs)[:150]})")
        return None
    compile_package()
    warm_page_cache(cases)
    return run_cases(
        cases,
        procs=args.procs,
        reps=args.reps,
        timeout=args.timeout,
        wait_quiet_s=args.wait_quiet,
        rerun_disturbed=args.rerun_disturbed,
        digits=args.digits,
    )


def bench_main(
    build_cases: Callable[[argparse.Namespace], list[Case]],
    *,
    description: str = "",
    baseline: Baseline = None,
    argv: list[str] | None = None,
    extra_args: Callable[[argparse.ArgumentParser], None] | None = None,
) -> list[dict]:
    """Standard CLI: parse args, build cases (``build_cases(args)``), run, print, save JSON."""
    ap = argparse.ArgumentParser(description=description)
    add_common_args(ap)
    if extra_args:
        extra_args(ap)
    args = ap.parse_args(argv)
    cases = select(build_cases(args), args)
    t0 = time.time()
    results = run_selected(cases, args)
    if results is None:
        return []
    base = args.baseline or baseline
    print(format_report(results, base))
    print(f"{len(results)} cases in {time.time() - t0:.0f} s (procs={args.procs}, reps={args.reps})")
    if args.json:
        save_json(
            args.json, results, {"argv": sys.argv, "procs": args.procs, "reps": args.reps, "baseline": base}
        )
        print(f"wrote {args.json}")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="benchmark harness: worker mode, or run one ad-hoc case")
    ap.add_argument("--worker", help="module:function to run in this process (internal)")
    ap.add_argument("--run", help="module:function to measure in fresh worker processes")
    ap.add_argument("--kwargs", default="{}", help="JSON keyword arguments")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--digits", type=int, default=6)
    ap.add_argument("--out", default=None)
    ap.add_argument("--report", nargs="+", metavar="JSON", help="reprint the tables of saved --json files")
    ap.add_argument("--baseline", default=None, help="with --report: engine label for ratio tables")
    args = ap.parse_args(argv)
    if args.worker:
        return _worker_cli(args)
    if args.report:
        results, base = [], args.baseline
        for path in args.report:
            with open(path) as fh:
                doc = json.load(fh)
            results += doc["results"]
            base = base or doc.get("meta", {}).get("baseline")
        print(format_report(results, base))
        return 0
    if args.run:
        case = Case(args.run, json.loads(args.kwargs), engine=args.run, group="case")
        results = run_cases([case], procs=args.procs, reps=args.reps, digits=args.digits)
        print(format_report(results))
        return 1 if results[0].get("error") else 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
