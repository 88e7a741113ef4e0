"""Build the benchmark tables (idempotently) into the benchmark data directory.

The recipes follow ``shared/docs/peers.md`` so that numbers measured on these tables are
comparable with the peer measurements listed there:

* ``raw/lineitem.parquet``: ``tpchgen-cli parquet -s 1 --tables=lineitem`` (tpchgen-cli 4.0.0).
* ``li_part``: lineitem (string_view cast to utf8) partitioned by ``l_shipmode``. For each mode
  (sorted), its rows in ``l_orderkey`` order are cut into 16 equal chunks and every chunk is its own
  ``write_deltalake(..., partition_by=['l_shipmode'], mode='append')`` (one file per call); then
  ``create_checkpoint()``. 112 commits, v111, 112 files.
* ``li_flat``: the same rows unpartitioned, 96 chunks -> 96 appends, then a checkpoint. v95.
* ``cdf``: change data feed enabled; 1.5M rows (id, part p0..p7, grp, qty, price, name, ver, ts)
  partitioned by ``part``, then 54 commits (appends, updates, deletes, merges, one OPTIMIZE compact,
  an append / replaceWhere overwrite / partition-only delete of staging partition ``px``), with a
  checkpoint at v25. v54.
* ``many``: 2,050 appends of 100 rows with ``delta.checkpointInterval=100`` (delta-rs checkpoints by
  itself at v99, v199, ...). ``--quick`` builds ``many_quick`` (250 appends) instead.
* ``many_nockpt``: hard-linked copy of ``many`` without checkpoints and ``_last_checkpoint``.
* ``k300`` / ``k300_ckpt``: copy of ``shared/corpus/bench/300k-add-files-100-col-partitioned``
  (log only, 300k adds) and the same plus a delta-rs checkpoint.
* ``loglong`` / ``loglong_nockpt``: synthetic log written by :func:`gen_log_table` (JSON commits
  written directly; deltalake is used only for the checkpoints). **Log only: no data files exist**,
  so these tables are for snapshot / log-replay benchmarks, not for scans.

Usage::

    python benchmarks/datagen.py                      # every table
    python benchmarks/datagen.py li_part li_flat cdf  # only these (and what they depend on)
    python benchmarks/datagen.py many --quick         # the small variant (many_quick)
    python benchmarks/datagen.py cdf --force          # rebuild even if present

The data directory is ``benchmarks/.data/`` unless ``DELTA_BENCH_DATA`` is set. ``manifest.json``
there records, per table, the recipe version, build time and facts (version, files, bytes, rows).
A table is rebuilt only when it is missing from the manifest, its recipe version changed, or with
``--force``. Builds go to ``<name>.building`` first and are renamed into place when complete.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import cast_views  # noqa: E402

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
SHARED_K300 = ROOT.parent / "shared" / "corpus" / "bench" / "300k-add-files-100-col-partitioned"

TPCHGEN_VERSION = "4.0.0"
LI_PART_CHUNKS_PER_MODE = 16
LI_FLAT_CHUNKS = 96
MANY_COMMITS = 2050
MANY_QUICK_COMMITS = 250
MANY_ROWS_PER_COMMIT = 100
CDF_BASE_ROWS = 1_500_000
CDF_PARTS = 8
CDF_CHECKPOINT_AT = 25
LOGLONG = {"commits": 5050, "checkpoint_interval": 100, "files_per_commit": 4, "removes_per_commit": 1}
LOGLONG_QUICK = {"commits": 1050, "checkpoint_interval": 100, "files_per_commit": 4, "removes_per_commit": 1}


# --------------------------------------------------------------------------------------------------
# paths and manifest


def data_dir() -> Path:
    """The benchmark data directory (``DELTA_BENCH_DATA`` or ``benchmarks/.data``)."""
    return Path(os.environ.get("DELTA_BENCH_DATA") or BENCH_DIR / ".data").resolve()


def table_path(name: str) -> str:
    """Absolute path of table ``name`` (e.g. ``"li_part"``, ``"many_quick"``, ``"raw/lineitem.parquet"``)."""
    return str(data_dir() / name)


def table_name(name: str, quick: bool = False) -> str:
    """Name of the table actually built for ``name`` (``many`` -> ``many_quick`` with ``quick``)."""
    if quick and name in QUICK_VARIANTS:
        return QUICK_VARIANTS[name]
    return name


def read_manifest() -> dict:
    p = data_dir() / "manifest.json"
    if p.exists():
        return json.loads(p.read_text())
    return {}


def _write_manifest(m: dict) -> None:
    p = data_dir() / "manifest.json"
    tmp = p.with_suffix(".tmp")
    tmp.write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, p)


def is_built(name: str) -> bool:
    entry = read_manifest().get(name)
    return bool(entry) and entry.get("recipe") == RECIPES[name][0] and os.path.exists(table_path(name))


# --------------------------------------------------------------------------------------------------
# helpers


def _dir_bytes(path: str, skip_log: bool = True) -> int:
    total = 0
    for root, dirs, files in os.walk(path):
        if skip_log:
            dirs[:] = [d for d in dirs if d != "_delta_log"]
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def delta_facts(path: str, rows: bool = True) -> dict:
    """Version, live files, live bytes and rows (from add stats) of a Delta table."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    dt = DeltaTable(path)
    adds = pa.table(dt.get_add_actions(flatten=True))
    facts = {
        "version": dt.version(),
        "files": adds.num_rows,
        "bytes": int(pc.sum(adds["size_bytes"]).as_py() or 0),
    }
    if rows and "num_records" in adds.column_names:
        facts["rows"] = int(pc.sum(adds["num_records"]).as_py() or 0)
    log = os.path.join(path, "_delta_log")
    facts["checkpoints"] = sorted(
        int(f.split(".")[0]) for f in os.listdir(log) if f.endswith(".checkpoint.parquet")
    )
    return facts


def _log_action_counts(path: str) -> dict:
    counts: dict[str, int] = {}
    log = os.path.join(path, "_delta_log")
    for f in sorted(os.listdir(log)):
        if not f.endswith(".json"):
            continue
        with open(os.path.join(log, f)) as fh:
            for line in fh:
                line = line.strip()
                if line:
                    key = next(iter(json.loads(line)))
                    counts[key] = counts.get(key, 0) + 1
    return counts


def _fresh_dir(path: Path) -> Path:
    tmp = path.with_name(path.name + ".building")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    return tmp


def _promote(tmp: Path, final: Path) -> None:
    if final.exists():
        if final.is_dir():
            shutil.rmtree(final)
        else:
            final.unlink()
    os.replace(tmp, final)


# --------------------------------------------------------------------------------------------------
# raw lineitem


def build_raw(final: Path) -> dict:
    """``tpchgen-cli parquet -s 1 --tables=lineitem`` -> ``raw/lineitem.parquet``."""
    import pyarrow.parquet as pq

    tmp = _fresh_dir(final.parent / "lineitem_gen")
    exe = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    if not os.path.exists(exe):
        raise SystemExit(f"tpchgen-cli not found: pip install tpchgen-cli=={TPCHGEN_VERSION}")
    cmd = [exe, "parquet", "-s", "1", "--tables=lineitem", f"--output-dir={tmp}"]
    subprocess.run(cmd, check=True)
    produced = tmp / "lineitem.parquet"
    os.replace(produced, final)
    shutil.rmtree(tmp)
    md = pq.ParquetFile(final).metadata
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    return {"rows": md.num_rows, "bytes": final.stat().st_size, "tpchgen": version}


def _read_lineitem():
    """lineitem with string_view cast to utf8, sorted by (l_orderkey, l_linenumber).

    tpchgen-cli 4 writes parquet field ids, which deltalake copies into the Delta schema as
    ``parquet.field.id`` field metadata; DuckDB's delta extension then returns NULL for every
    column (measured: Q1 0 rows), so the plain TPC-H table is written without them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pq.read_table(table_path("raw/lineitem.parquet"))
    t = cast_views(t)
    t = t.cast(pa.schema([f.remove_metadata() for f in t.schema]))
    return t.sort_by([("l_orderkey", "ascending"), ("l_linenumber", "ascending")])


def _chunks(n: int, k: int) -> list[tuple[int, int]]:
    """(offset, length) of ``k`` equal chunks of ``n`` rows (sizes differ by at most one)."""
    base, extra = divmod(n, k)
    out, off = [], 0
    for i in range(k):
        ln = base + (1 if i < extra else 0)
        out.append((off, ln))
        off += ln
    return out


# --------------------------------------------------------------------------------------------------
# li_part / li_flat


def build_li_part(final: Path) -> dict:
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    li = _read_lineitem()
    tmp = _fresh_dir(final)
    dt: DeltaTable | str = str(tmp)
    modes = sorted(pc.unique(li["l_shipmode"]).to_pylist())
    for mode in modes:
        rows = li.filter(pc.equal(li["l_shipmode"], mode))
        for off, ln in _chunks(rows.num_rows, LI_PART_CHUNKS_PER_MODE):
            write_deltalake(dt, rows.slice(off, ln), partition_by=["l_shipmode"], mode="append")
            if isinstance(dt, str):
                dt = DeltaTable(dt)
    dt = DeltaTable(str(tmp))
    dt.create_checkpoint()
    _promote(tmp, final)
    return delta_facts(str(final))


def build_li_flat(final: Path) -> dict:
    from deltalake import DeltaTable, write_deltalake

    li = _read_lineitem()
    tmp = _fresh_dir(final)
    dt: DeltaTable | str = str(tmp)
    for off, ln in _chunks(li.num_rows, LI_FLAT_CHUNKS):
        write_deltalake(dt, li.slice(off, ln), mode="append")
        if isinstance(dt, str):
            dt = DeltaTable(dt)
    dt = DeltaTable(str(tmp))
    dt.create_checkpoint()
    _promote(tmp, final)
    return delta_facts(str(final))


# --------------------------------------------------------------------------------------------------
# cdf


def _mix(ids, salt: int):
    """Deterministic pseudo-random non-negative int64 per id (multiplicative hash), so that qty,
    price and name are uncorrelated with each other and with the partition (id % 8)."""
    import numpy as np

    x = (np.asarray(ids, dtype=np.uint64) + np.uint64((salt * 0x632BE59BD9B4E019) % (1 << 64))) * np.uint64(
        0x9E3779B97F4A7C15
    )
    x ^= x >> np.uint64(29)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(32)
    return (x >> np.uint64(1)).astype(np.int64)


def _cdf_rows(ids, ver: int, part: str | None = None):
    """Deterministic rows for the cdf table: every column is a function of ``id`` (and ``ver``).

    ``part`` = p{id % 8}; ``grp`` = id // 10,000, so a ``grp`` predicate selects a contiguous id
    range and DML rewrites only the files holding it (appended files survive until the OPTIMIZE,
    which keeps ~100 live files as in peers.md); qty, price and name are hashes of id."""
    import numpy as np
    import pyarrow as pa

    ids = np.asarray(ids, dtype=np.int64)
    if part is None:
        parts = pa.array([f"p{i}" for i in range(CDF_PARTS)]).take(pa.array(ids % CDF_PARTS))
    else:
        parts = pa.array([part] * len(ids), pa.string())
    names = pa.array([f"name-{i:04d}" for i in range(5000)]).take(pa.array(_mix(ids, 4) % 5000))
    base_us = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
    ts = base_us + ids * 1_000_000 + ver * 86_400_000_000
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": parts,
            "grp": pa.array(ids // 10_000, pa.int32()),
            "qty": pa.array(_mix(ids, 2) % 100 + 1, pa.int32()),
            "price": pa.array((_mix(ids, 3) % 100_000) / 100.0, pa.float64()),
            "name": names,
            "ver": pa.array(np.full(len(ids), ver), pa.int32()),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        }
    )


# The 54 commits after the initial write (v1..v54). v25 is followed by a checkpoint; v41 is a
# cross-partition UPDATE and v46 a MERGE (peers.md measures those single commits); v9 is the
# OPTIMIZE; v50..v52 are the staging partition px (append, replaceWhere overwrite, partition delete).
CDF_OPS: list[tuple] = [
    ("append", 10_000),  # v1
    ("update_part", "p1", "grp < 5"),  # v2
    ("delete_range", 100_000, 110_000),  # v3
    ("merge", 200_000, 4_000, 4_000),  # v4: 4k existing ids from 200k, 4k new
    ("append", 20_000),  # v5
    ("update_all", "grp = 11"),  # v6
    ("delete_part_grp", "p2", 3),  # v7
    ("append", 20_000),  # v8
    ("optimize",),  # v9: OPTIMIZE compact (dataChange=false)
    ("merge", 400_000, 5_000, 2_000),  # v10
    ("delete_range", 210_000, 222_000),  # v11
    ("append", 10_000),  # v12
    ("update_all", "grp = 42 AND qty <= 30"),  # v13
    ("delete_part_grp", "p6", 7),  # v14
    ("merge", 600_000, 3_000, 3_000),  # v15
    ("append", 15_000),  # v16
    ("update_part", "p3", "grp < 3"),  # v17
    ("delete_range", 300_000, 308_000),  # v18
    ("merge", 800_000, 4_000, 2_000),  # v19
    ("append", 15_000),  # v20
    ("update_all", "grp = 57"),  # v21
    ("delete_part_grp", "p0", 9),  # v22
    ("append", 15_000),  # v23
    ("merge", 1_000_000, 4_000, 2_000),  # v24
    ("update_part", "p5", "grp >= 60 AND grp < 64"),  # v25 -> checkpoint
    ("append", 15_000),  # v26
    ("delete_range", 505_000, 512_500),  # v27
    ("merge", 1_200_000, 4_000, 2_000),  # v28
    ("update_all", "grp = 151 AND qty <= 50"),  # v29 (appended rows)
    ("append", 15_000),  # v30
    ("update_part", "p4", "grp >= 20 AND grp < 25"),  # v31
    ("delete_part_grp", "p3", 13),  # v32
    ("update_part", "p7", "grp < 4"),  # v33
    ("merge", 1_400_000, 4_000, 2_000),  # v34
    ("append", 15_000),  # v35
    ("delete_range", 700_000, 710_000),  # v36
    ("update_all", "grp = 88 AND qty <= 40"),  # v37
    ("append", 15_000),  # v38
    ("merge", 100_000, 4_000, 2_000),  # v39 (partly hits deleted ids -> inserts)
    ("delete_part_grp", "p4", 121),  # v40
    ("update_all", "grp = 77 AND qty <= 20"),  # v41: one UPDATE across partitions
    ("append", 15_000),  # v42
    ("delete_range", 900_000, 924_000),  # v43
    ("merge", 300_000, 4_000, 2_000),  # v44
    ("append", 15_000),  # v45
    ("merge", 1_100_000, 5_000, 5_000),  # v46: one MERGE
    ("update_part", "p2", "grp >= 30 AND grp < 33"),  # v47
    ("delete_range", 1_300_000, 1_305_000),  # v48
    ("append", 14_450),  # v49
    ("px_append", 5_000),  # v50
    ("px_overwrite", 6_000),  # v51
    ("px_delete",),  # v52
    ("delete_part_grp", "p5", 44),  # v53
    ("update_all", "grp = 93 AND qty <= 20"),  # v54
]

CDF_UPDATES = {"qty": "qty + 1", "ver": "ver + 1", "price": "price * 1.01"}


def build_cdf(final: Path) -> dict:
    """The change-data-feed table: v0 = 1.5M rows, then the 54 commits of :data:`CDF_OPS`."""
    import numpy as np
    from deltalake import DeltaTable, write_deltalake

    assert len(CDF_OPS) == 54
    tmp = _fresh_dir(final)
    path = str(tmp)
    write_deltalake(
        path,
        _cdf_rows(np.arange(CDF_BASE_ROWS), 0),
        partition_by=["part"],
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    next_id = CDF_BASE_ROWS
    px_next = 10_000_000
    for v, op in enumerate(CDF_OPS, start=1):
        dt = DeltaTable(path)
        kind = op[0]
        if kind == "append":
            n = op[1]
            write_deltalake(dt, _cdf_rows(np.arange(next_id, next_id + n), v), mode="append")
            next_id += n
        elif kind == "update_part":
            dt.update(updates=CDF_UPDATES, predicate=f"part = '{op[1]}' AND {op[2]}")
        elif kind == "update_all":
            dt.update(updates=CDF_UPDATES, predicate=op[1])
        elif kind == "delete_range":
            dt.delete(f"id >= {op[1]} AND id < {op[2]}")
        elif kind == "delete_part_grp":
            dt.delete(f"part = '{op[1]}' AND grp = {op[2]}")
        elif kind == "merge":
            start, n_old, n_new = op[1], op[2], op[3]
            ids = np.concatenate([np.arange(start, start + n_old), np.arange(next_id, next_id + n_new)])
            next_id += n_new
            src = _cdf_rows(ids, v)
            (
                dt.merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        elif kind == "optimize":
            dt.optimize.compact()
        elif kind == "px_append":
            n = op[1]
            write_deltalake(dt, _cdf_rows(np.arange(px_next, px_next + n), v, part="px"), mode="append")
            px_next += n
        elif kind == "px_overwrite":
            n = op[1]
            rows = _cdf_rows(np.arange(px_next, px_next + n), v, part="px")
            write_deltalake(dt, rows, mode="overwrite", predicate="part = 'px'")
            px_next += n
        elif kind == "px_delete":
            dt.delete("part = 'px'")
        else:
            raise ValueError(op)
        got = DeltaTable(path).version()
        if got != v:
            raise RuntimeError(f"cdf build: expected version {v} after {op}, table is at {got}")
        if v == CDF_CHECKPOINT_AT:
            DeltaTable(path).create_checkpoint()
    _promote(tmp, final)
    facts = delta_facts(str(final))
    facts["log_actions"] = _log_action_counts(str(final))
    facts["cdf_rows_all"] = _cdf_change_counts(str(final))
    return facts


def _cdf_change_counts(path: str) -> dict:
    import pyarrow as pa
    from deltalake import DeltaTable

    t = pa.table(DeltaTable(path).load_cdf(starting_version=0, columns=["id", "_change_type"]))
    ct = t["_change_type"].cast(pa.string())
    vc = ct.value_counts().to_pylist()
    out = {d["values"]: d["counts"] for d in vc}
    out["total"] = t.num_rows
    return out


# --------------------------------------------------------------------------------------------------
# many / many_nockpt


def _build_many(final: Path, commits: int) -> dict:
    import numpy as np
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    tmp = _fresh_dir(final)
    dt: DeltaTable | str = str(tmp)
    n = MANY_ROWS_PER_COMMIT
    for i in range(commits):
        ids = np.arange(i * n, (i + 1) * n, dtype=np.int64)
        batch = pa.table({"id": ids, "v": (ids % 1000) / 10.0, "s": pa.array([f"r{i}"] * n)})
        if isinstance(dt, str):
            write_deltalake(dt, batch, configuration={"delta.checkpointInterval": "100"})
            dt = DeltaTable(dt)
        else:
            write_deltalake(dt, batch, mode="append")
    _promote(tmp, final)
    return delta_facts(str(final))


def build_many(final: Path) -> dict:
    return _build_many(final, MANY_COMMITS)


def build_many_quick(final: Path) -> dict:
    return _build_many(final, MANY_QUICK_COMMITS)


def _link_copy_without_checkpoints(src: Path, final: Path) -> dict:
    tmp = _fresh_dir(final)
    shutil.copytree(src, tmp, copy_function=os.link)
    log = tmp / "_delta_log"
    for f in os.listdir(log):
        if ".checkpoint" in f or f == "_last_checkpoint":
            os.unlink(log / f)
    _promote(tmp, final)
    return delta_facts(str(final))


def build_many_nockpt(final: Path) -> dict:
    return _link_copy_without_checkpoints(data_dir() / "many", final)


def build_many_quick_nockpt(final: Path) -> dict:
    return _link_copy_without_checkpoints(data_dir() / "many_quick", final)


# --------------------------------------------------------------------------------------------------
# k300 (log only, from shared/corpus/bench)


def build_k300(final: Path) -> dict:
    if not SHARED_K300.exists():
        raise SystemExit(f"k300 source not found: {SHARED_K300}")
    tmp = _fresh_dir(final)
    shutil.copytree(SHARED_K300, tmp, copy_function=shutil.copyfile)
    for root, _dirs, files in os.walk(tmp):  # the shared copy is read-only
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o644)
    _promote(tmp, final)
    return delta_facts(str(final), rows=False)


def build_k300_ckpt(final: Path) -> dict:
    from deltalake import DeltaTable

    tmp = _fresh_dir(final)
    shutil.copytree(data_dir() / "k300", tmp)
    DeltaTable(str(tmp)).create_checkpoint()
    _promote(tmp, final)
    return delta_facts(str(final), rows=False)


# --------------------------------------------------------------------------------------------------
# synthetic long logs


_LOG_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        {"name": "part", "type": "string", "nullable": True, "metadata": {}},
    ],
}
_LOG_NS = uuid.UUID("5f0c6c1e-8a36-4f57-9c3c-1d2b7a4c9e10")


def gen_log_table(
    path: str,
    commits: int,
    checkpoint_interval: int = 100,
    files_per_commit: int = 1,
    removes_per_commit: int = 0,
    partitions: int = 8,
    rows_per_file: int = 1000,
) -> dict:
    """Write a log-only Delta table with ``commits`` commits (versions 0..commits-1).

    Every commit adds ``files_per_commit`` files (plain ``add`` actions with partition values and
    JSON stats: numRecords, min/max/nullCount of id, value, name) and, from v1 on, removes the
    ``removes_per_commit`` oldest live files. The JSON commit files are written directly (fast and
    deterministic: paths are UUID5s of (version, index), timestamps are synthetic); deltalake is used
    only to write a checkpoint at every version ``v`` with ``(v + 1) % checkpoint_interval == 0``
    (the versions delta-rs picks itself, e.g. v99, v199; ``checkpoint_interval=0``: none).

    **No data files are written**: the table is for snapshot / log-replay benchmarks only.
    Returns facts: version, adds, removes, live files, checkpoints.
    """
    from collections import deque

    log = os.path.join(path, "_delta_log")
    os.makedirs(log, exist_ok=True)
    base_ms = 1_700_000_000_000
    live: deque = deque()
    checkpoints = []
    n_add = n_remove = 0
    file_no = 0
    for v in range(commits):
        ts = base_ms + v * 1000
        lines = []
        op = "CREATE TABLE" if v == 0 else "WRITE"
        lines.append(
            json.dumps(
                {
                    "commitInfo": {
                        "timestamp": ts,
                        "operation": op,
                        "operationParameters": {"mode": "Append"},
                        "clientVersion": "delta-datafusion-bench-gen_log_table",
                    }
                }
            )
        )
        if v == 0:
            lines.append(json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}))
            conf = {"delta.enableExpiredLogCleanup": "false"}
            if checkpoint_interval:
                conf["delta.checkpointInterval"] = str(checkpoint_interval)
            lines.append(
                json.dumps(
                    {
                        "metaData": {
                            "id": str(uuid.uuid5(_LOG_NS, "table")),
                            "name": "loglong",
                            "format": {"provider": "parquet", "options": {}},
                            "schemaString": json.dumps(_LOG_SCHEMA),
                            "partitionColumns": ["part"],
                            "configuration": conf,
                            "createdTime": base_ms,
                        }
                    }
                )
            )
        if v > 0:
            for _ in range(min(removes_per_commit, len(live))):
                rpath, rpart, rsize = live.popleft()
                lines.append(
                    json.dumps(
                        {
                            "remove": {
                                "path": rpath,
                                "deletionTimestamp": ts,
                                "dataChange": True,
                                "extendedFileMetadata": True,
                                "partitionValues": {"part": rpart},
                                "size": rsize,
                            }
                        }
                    )
                )
                n_remove += 1
        for i in range(files_per_commit):
            part = f"p{file_no % partitions}"
            fid = uuid.uuid5(_LOG_NS, f"{v}-{i}")
            fpath = f"part={part}/part-{i:05d}-{fid}-c000.snappy.parquet"
            lo = file_no * rows_per_file
            hi = lo + rows_per_file - 1
            size = 8_000 + (file_no * 7919) % 4_000
            stats = {
                "numRecords": rows_per_file,
                "minValues": {"id": lo, "value": lo / 10.0, "name": f"n{lo:09d}"},
                "maxValues": {"id": hi, "value": hi / 10.0, "name": f"n{hi:09d}"},
                "nullCount": {"id": 0, "value": 0, "name": 0},
            }
            lines.append(
                json.dumps(
                    {
                        "add": {
                            "path": fpath,
                            "partitionValues": {"part": part},
                            "size": size,
                            "modificationTime": ts,
                            "dataChange": True,
                            "stats": json.dumps(stats, separators=(",", ":")),
                        }
                    },
                    separators=(",", ":"),
                )
            )
            live.append((fpath, part, size))
            n_add += 1
            file_no += 1
        with open(os.path.join(log, f"{v:020d}.json"), "x") as fh:
            fh.write("\n".join(lines) + "\n")
        if checkpoint_interval and (v + 1) % checkpoint_interval == 0:
            from deltalake import DeltaTable

            DeltaTable(path).create_checkpoint()
            checkpoints.append(v)
    return {
        "version": commits - 1,
        "adds": n_add,
        "removes": n_remove,
        "files": len(live),
        "checkpoints": checkpoints,
        "data_files": False,
    }


def _build_loglong(final: Path, params: dict, checkpoints: bool) -> dict:
    tmp = _fresh_dir(final)
    p = dict(params)
    if not checkpoints:
        p["checkpoint_interval"] = 0
    facts = gen_log_table(str(tmp), **p)
    _promote(tmp, final)
    facts["params"] = p
    return facts


def build_loglong(final: Path) -> dict:
    return _build_loglong(final, LOGLONG, True)


def build_loglong_nockpt(final: Path) -> dict:
    return _build_loglong(final, LOGLONG, False)


def build_loglong_quick(final: Path) -> dict:
    return _build_loglong(final, LOGLONG_QUICK, True)


def build_loglong_quick_nockpt(final: Path) -> dict:
    return _build_loglong(final, LOGLONG_QUICK, False)


# --------------------------------------------------------------------------------------------------
# registry and CLI

# name -> (recipe version, builder, dependencies). Bump the recipe version when a recipe changes.
RECIPES: dict[str, tuple[int, Callable[[Path], dict], tuple[str, ...]]] = {
    "raw/lineitem.parquet": (1, build_raw, ()),
    "li_part": (2, build_li_part, ("raw/lineitem.parquet",)),
    "li_flat": (2, build_li_flat, ("raw/lineitem.parquet",)),
    "cdf": (4, build_cdf, ()),
    "many": (1, build_many, ()),
    "many_nockpt": (1, build_many_nockpt, ("many",)),
    "many_quick": (1, build_many_quick, ()),
    "many_quick_nockpt": (1, build_many_quick_nockpt, ("many_quick",)),
    "k300": (1, build_k300, ()),
    "k300_ckpt": (1, build_k300_ckpt, ("k300",)),
    "loglong": (1, build_loglong, ()),
    "loglong_nockpt": (1, build_loglong_nockpt, ()),
    "loglong_quick": (1, build_loglong_quick, ()),
    "loglong_quick_nockpt": (1, build_loglong_quick_nockpt, ()),
}
QUICK_VARIANTS = {
    "many": "many_quick",
    "many_nockpt": "many_quick_nockpt",
    "loglong": "loglong_quick",
    "loglong_nockpt": "loglong_quick_nockpt",
}
ALIASES = {"raw": "raw/lineitem.parquet", "lineitem": "raw/lineitem.parquet"}
DEFAULT_TABLES = [
    "li_part",
    "li_flat",
    "cdf",
    "many",
    "many_nockpt",
    "k300",
    "k300_ckpt",
    "loglong",
    "loglong_nockpt",
]


def ensure(name: str, quick: bool = False, force: bool = False, log: Callable[[str], None] = print) -> str:
    """Build table ``name`` (and its dependencies) unless already built; return its path."""
    name = table_name(ALIASES.get(name, name), quick)
    if name not in RECIPES:
        raise SystemExit(f"unknown table {name!r}; known: {', '.join(RECIPES)}")
    recipe, builder, deps = RECIPES[name]
    for dep in deps:
        ensure(dep, quick=False, force=False, log=log)
    final = data_dir() / name
    if not force and is_built(name):
        log(f"{name}: present ({final})")
        return str(final)
    data_dir().mkdir(parents=True, exist_ok=True)
    final.parent.mkdir(parents=True, exist_ok=True)
    log(f"{name}: building ...")
    t0 = time.perf_counter()
    facts = builder(final)
    dt = time.perf_counter() - t0
    m = read_manifest()
    m[name] = {
        "recipe": recipe,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "build_seconds": round(dt, 2),
        "facts": facts,
    }
    _write_manifest(m)
    log(f"{name}: built in {dt:.1f} s: {json.dumps(facts)}")
    return str(final)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tables", nargs="*", help=f"tables to build (default: {' '.join(DEFAULT_TABLES)})")
    ap.add_argument("--quick", action="store_true", help="build the small variants of many / loglong")
    ap.add_argument("--force", action="store_true", help="rebuild even if present")
    ap.add_argument("--list", action="store_true", help="list tables and their manifest facts")
    args = ap.parse_args(argv)
    if args.list:
        m = read_manifest()
        print(f"data dir: {data_dir()}")
        for name in RECIPES:
            e = m.get(name)
            state = f"built {e['built_at']} in {e['build_seconds']} s {json.dumps(e['facts'])}" if e else "-"
            print(f"{name:22s} {state}")
        return 0
    names = args.tables or DEFAULT_TABLES
    t0 = time.perf_counter()
    for name in names:
        ensure(name, quick=args.quick, force=args.force)
    print(f"done in {time.perf_counter() - t0:.1f} s; data dir {data_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
