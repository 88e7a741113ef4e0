"""Write synthetic Delta logs (no data files) with large checkpoints, for parallel-replay tests and benchmarks.

:func:`generate` writes a table's ``_delta_log`` directly (JSON commits, parquet checkpoints via
pyarrow; no Delta writer library) and returns the live file set it expects *by construction*
(tracked in plain Python while the commits are generated), so readers can be checked against it.

Checkpoint kinds:

* ``v2-json``    -- V2 checkpoint with a UUID-named JSON manifest and parquet sidecars under
  ``_delta_log/_sidecars/``; a few adds are kept inline in the manifest;
* ``v2-parquet`` -- the same with a parquet manifest;
* ``multi``      -- classic multi-part checkpoint (``N.checkpoint.i.n.parquet``);
* ``classic``    -- classic single-file checkpoint (use ``row_group_size`` for several row groups);
* ``none``       -- no checkpoint: every file is added by the commits.

Checkpointed adds are built vectorized with Arrow, so a million files take a few seconds. After
the checkpoint come ``commits_after`` commits mixing appends, removes, re-adds of removed paths,
deletion-vector updates (remove with the old DV + add with a new DV for the same path), stats-only
re-adds of live files, commits without file actions and, optionally, a metaData change. Paths of
some files contain spaces (percent-encoded in the log). Checkpoint leaves also carry a few remove
tombstones, which readers must ignore.

Usage (the benchmark calls :func:`generate` itself)::

    python benchmarks/gen_v2_checkpoint.py /tmp/t --kind v2-json --files 100000 --sidecars 8
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from delta_datafusion.log.actions import DV_TYPE  # noqa: E402  (the log's own DV type)

KINDS = ("v2-json", "v2-parquet", "multi", "classic", "none")

STR_MAP = pa.map_(pa.string(), pa.string())
ADD_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", STR_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", STR_MAP),
        ("deletionVector", DV_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)
REMOVE_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", STR_MAP),
        ("size", pa.int64()),
        ("deletionVector", DV_TYPE),
    ]
)
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STR_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", STR_MAP),
        ("createdTime", pa.int64()),
    ]
)
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
SIDECAR_TYPE = pa.struct(
    [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64()), ("tags", STR_MAP)]
)
CKPT_MD_TYPE = pa.struct([("version", pa.int64()), ("tags", STR_MAP)])

#: Column order of checkpoint parquet files (a column is omitted when the file kind has no such action).
CHECKPOINT_COLUMNS = {
    "txn": TXN_TYPE,
    "add": ADD_TYPE,
    "remove": REMOVE_TYPE,
    "metaData": METADATA_TYPE,
    "protocol": PROTOCOL_TYPE,
    "checkpointMetadata": CKPT_MD_TYPE,
    "sidecar": SIDECAR_TYPE,
}
TABLE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "value", "type": "double", "nullable": True, "metadata": {}},
        {"name": "part", "type": "string", "nullable": True, "metadata": {}},
    ],
}
NUM_PARTS = 10
BASE_TIME = 1_700_000_000_000


@dataclass
class Live:
    """One live file as the generator knows it."""

    log_path: str  # as written in the log (percent-encoded)
    part: str | None
    num_records: int
    dv: tuple[str, str, int | None, int, int] | None = (
        None  # storageType, pathOrInlineDv, offset, size, cardinality
    )

    @property
    def dv_id(self) -> tuple[str, str, int | None] | None:
        return None if self.dv is None else (self.dv[0], self.dv[1], self.dv[2])


@dataclass
class GeneratedTable:
    path: str
    kind: str
    version: int
    checkpoint_version: int | None
    #: decoded relative path -> what the reader must report (DV id, numRecords)
    live: dict[str, Live]
    leaves: list[str] = field(default_factory=list)
    num_checkpoint_files: int = 0
    inline_adds: int = 0
    seconds: float = 0.0

    def expected_keys(self) -> set[tuple[str, tuple | None]]:
        return {(p, f.dv_id) for p, f in self.live.items()}


def _encode(path: str) -> str:
    return quote(path, safe="/=-_.~")


def _file_name(i: int, special: bool) -> str:
    return f"f with space-{i:08d}.parquet" if special else f"f-{i:08d}.parquet"


def _rel_path(i: int, part: str | None, special: bool) -> str:
    name = _file_name(i, special)
    return f"part={part}/{name}" if part is not None else name


def _stats_json(idx: int, num_records: int) -> str:
    lo = idx * 1000
    return json.dumps(
        {
            "numRecords": num_records,
            "minValues": {"id": lo, "value": float(idx % 97) / 7},
            "maxValues": {"id": lo + num_records - 1, "value": float(idx % 97) / 7 + 1.5},
            "nullCount": {"id": 0, "value": idx % 3},
        },
        separators=(",", ":"),
    )


def protocol(kind: str, dvs: bool) -> dict[str, Any]:
    if kind.startswith("v2") or dvs:
        features = (["v2Checkpoint"] if kind.startswith("v2") else []) + (["deletionVectors"] if dvs else [])
        return {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": features,
            "writerFeatures": features,
        }
    return {"minReaderVersion": 1, "minWriterVersion": 2}


def metadata(
    partitioned: bool, kind: str, dvs: bool, extra_conf: dict[str, str] | None = None
) -> dict[str, Any]:
    conf = {"delta.checkpointInterval": "1000"}
    if kind.startswith("v2"):
        conf["delta.checkpointPolicy"] = "v2"
    if dvs:
        conf["delta.enableDeletionVectors"] = "true"
    conf.update(extra_conf or {})
    return {
        "id": "5fba94ed-9794-4965-ba6e-6ee3c0d22af9",
        "name": "generated",
        "description": None,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(TABLE_SCHEMA),
        "partitionColumns": ["part"] if partitioned else [],
        "configuration": conf,
        "createdTime": BASE_TIME,
    }


def _protocol_row(p: dict[str, Any]) -> dict[str, Any]:
    return {
        "minReaderVersion": p["minReaderVersion"],
        "minWriterVersion": p["minWriterVersion"],
        "readerFeatures": p.get("readerFeatures"),
        "writerFeatures": p.get("writerFeatures"),
    }


def _metadata_row(m: dict[str, Any]) -> dict[str, Any]:
    return {
        **m,
        "format": {"provider": "parquet", "options": []},
        "configuration": list(m["configuration"].items()),
    }


# --------------------------------------------------------------------------------------------------
# vectorized checkpoint adds


def _str(arr: np.ndarray) -> pa.Array:
    return pa.array(arr).cast(pa.string())


def checkpoint_adds(
    n: int, partitioned: bool, special_every: int, dv_every: int, first_version: int = 0
) -> tuple[pa.Array, list[Live]]:
    """The ``add`` struct column of checkpoint files ``0..n-1`` and their Live records."""
    idx = np.arange(n, dtype=np.int64)
    num_records = 100 + (idx % 50)
    special = (idx % special_every == 5) if special_every else np.zeros(n, dtype=bool)
    has_dv = (idx % dv_every == 3) if dv_every else np.zeros(n, dtype=bool)
    parts = idx % NUM_PARTS
    part_str = pc.binary_join_element_wise("p", _str(parts), "")
    num8 = pc.utf8_lpad(_str(idx), 8, "0")
    plain = pc.binary_join_element_wise("f-", num8, ".parquet", "")
    spaced = pc.binary_join_element_wise("f%20with%20space-", num8, ".parquet", "")
    names = pc.if_else(pa.array(special), spaced, plain)
    paths = pc.binary_join_element_wise("part=", part_str, "/", names, "") if partitioned else names
    if partitioned:
        offsets = pa.array(np.arange(n + 1, dtype=np.int32))
        keys = pc.take(pa.array(["part"]), pa.array(np.zeros(n, dtype=np.int32)))
        pv = pa.MapArray.from_arrays(offsets, keys, part_str)
    else:
        pv = pa.MapArray.from_arrays(
            pa.array(np.zeros(n + 1, dtype=np.int32)), pa.array([], pa.string()), pa.array([], pa.string())
        )
    lo = idx * 1000
    value_lo = (idx % 97).astype(np.float64) / 7
    # stats JSON built column-wise; floats formatted by Arrow's cast (shortest round-trip repr).
    stats = pc.binary_join_element_wise(
        '{"numRecords":',
        _str(num_records),
        ',"minValues":{"id":',
        _str(lo),
        ',"value":',
        pa.array(value_lo).cast(pa.string()),
        '},"maxValues":{"id":',
        _str(lo + num_records - 1),
        ',"value":',
        pa.array(value_lo + 1.5).cast(pa.string()),
        '},"nullCount":{"id":0,"value":',
        _str(idx % 3),
        "}}",
        "",
    )
    dv_path = pc.binary_join_element_wise("dv", pc.utf8_lpad(_str(idx), 18, "0"), "")
    dv = pa.StructArray.from_arrays(
        [
            pc.take(pa.array(["u"]), pa.array(np.zeros(n, dtype=np.int32))),
            dv_path,
            pa.array(np.ones(n, dtype=np.int32)),
            pa.array(np.full(n, 40, dtype=np.int32)),
            pa.array(1 + idx % 5),
        ],
        fields=list(DV_TYPE),
        mask=pa.array(~has_dv),
    )
    add = pa.StructArray.from_arrays(
        [
            paths,
            pv,
            pa.array(1000 + idx % 977),
            pa.array(BASE_TIME + idx),
            pa.array(np.zeros(n, dtype=bool)),
            stats,
            pa.nulls(n, STR_MAP),
            dv,
            pa.nulls(n, pa.int64()),
            pa.nulls(n, pa.int64()),
        ],
        fields=list(ADD_TYPE),
    )
    lives = []
    nr = num_records.tolist()
    for i in range(n):
        part = f"p{i % NUM_PARTS}" if partitioned else None
        sp = bool(special[i])
        log_path = _encode(_rel_path(i, part, sp))
        d = ("u", f"dv{i:018d}", 1, 40, 1 + i % 5) if has_dv[i] else None
        lives.append(Live(log_path, part, nr[i], d))
    return add, lives


def _tombstones(start: int, n: int, partitioned: bool) -> pa.Array:
    rows = []
    for i in range(start, start + n):
        part = f"p{i % NUM_PARTS}" if partitioned else None
        rows.append(
            {
                "path": (f"part={part}/" if part else "") + f"gone-{i:08d}.parquet",
                "deletionTimestamp": BASE_TIME + i,
                "dataChange": True,
                "extendedFileMetadata": False,
                "partitionValues": [("part", part)] if part else [],
                "size": 10,
                "deletionVector": None,
            }
        )
    return pa.array(rows, REMOVE_TYPE)


def _action_table(columns: dict[str, pa.Array]) -> pa.Table:
    """A checkpoint table whose rows each hold one action; ``columns`` are the non-null pieces."""
    total = sum(len(a) for a in columns.values())
    out, offset = {}, 0
    for name, arr in columns.items():
        n = len(arr)
        pieces = []
        if offset:
            pieces.append(pa.nulls(offset, arr.type))
        pieces.append(arr)
        if total - offset - n:
            pieces.append(pa.nulls(total - offset - n, arr.type))
        out[name] = pa.concat_arrays(pieces) if len(pieces) > 1 else arr
        offset += n
    return pa.table(out)


def _write_parquet(table: pa.Table, path: Path, row_group_size: int | None) -> int:
    pq.write_table(table, path, row_group_size=row_group_size or max(1, table.num_rows), compression="zstd")
    return path.stat().st_size


def _chunks(n: int, k: int) -> list[tuple[int, int]]:
    bounds = np.linspace(0, n, k + 1).astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


# --------------------------------------------------------------------------------------------------
# the table


def _dv_descriptor(dv: tuple) -> dict:
    """The log's deletionVector descriptor from (storageType, pathOrInlineDv, offset, size, cardinality)."""
    st, p, off, sz, card = dv
    return {"storageType": st, "pathOrInlineDv": p, "offset": off, "sizeInBytes": sz, "cardinality": card}


def _add_action(live: Live, size: int, data_change: bool, version: int, stats_idx: int) -> dict:
    add: dict[str, Any] = {
        "path": live.log_path,
        "partitionValues": {"part": live.part} if live.part is not None else {},
        "size": size,
        "modificationTime": BASE_TIME + version * 1000,
        "dataChange": data_change,
        "stats": _stats_json(stats_idx, live.num_records),
    }
    if live.dv is not None:
        add["deletionVector"] = _dv_descriptor(live.dv)
    return {"add": add}


def _remove_action(live: Live, version: int) -> dict:
    rm: dict[str, Any] = {
        "path": live.log_path,
        "deletionTimestamp": BASE_TIME + version * 1000,
        "dataChange": True,
        "partitionValues": {"part": live.part} if live.part is not None else {},
        "size": 1000,
    }
    if live.dv is not None:
        rm["deletionVector"] = _dv_descriptor(live.dv)
    return {"remove": rm}


def _commit_info(version: int, op: str) -> dict:
    return {
        "commitInfo": {
            "timestamp": BASE_TIME + version * 1000,
            "operation": op,
            "engineInfo": "gen_v2_checkpoint",
        }
    }


def _write_commit(log: Path, version: int, actions: list[dict]) -> None:
    text = "\n".join(json.dumps(a, separators=(",", ":")) for a in actions) + "\n"
    (log / f"{version:020d}.json").write_text(text)


def generate(
    root: str | os.PathLike,
    *,
    kind: str = "v2-json",
    num_files: int = 1000,
    sidecars: int = 4,
    parts: int = 3,
    row_group_size: int | None = None,
    inline_adds: int = 3,
    commits_after: int = 10,
    adds_per_commit: int = 4,
    removes_per_commit: int = 3,
    readds_per_commit: int = 1,
    dv_updates_per_commit: int = 2,
    stats_readds_per_commit: int = 1,
    partitioned: bool = True,
    special_every: int = 97,
    dv_every: int = 10,
    tombstones_per_leaf: int = 3,
    history_commits: int = 0,
    metadata_change_at: int | None = None,
    seed: int = 0,
) -> GeneratedTable:
    """Write the table at ``root`` (must be empty or absent); see the module docstring.

    ``history_commits`` > 0 also writes commits ``0..C`` that add the checkpointed files in that
    many chunks (so the log is consistent from version 0); otherwise the log starts at the
    checkpoint, as after log cleanup. Without a checkpoint (``kind="none"``) the checkpoint files
    are added by commit 0 plus ``history_commits`` commits.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    t0 = time.perf_counter()
    rng = random.Random(seed)
    root = Path(root)
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=False)
    dvs = dv_every > 0 or dv_updates_per_commit > 0
    proto = protocol(kind, dvs)
    meta = metadata(partitioned, kind, dvs)
    add_col, lives = checkpoint_adds(num_files, partitioned, special_every, dv_every)
    live: dict[str, Live] = {unquote(f.log_path): f for f in lives}
    ever_live = list(live)  # sampling pool (may hold paths no longer live)

    # -- history up to the checkpoint ------------------------------------------------------------
    checkpoint_version: int | None
    if kind == "none":
        chunks = _chunks(num_files, max(1, history_commits + 1))
        checkpoint_version = None
        for v, (a, b) in enumerate(chunks):
            actions = [_commit_info(v, "WRITE")]
            if v == 0:
                actions += [{"protocol": proto}, {"metaData": meta}]
            for i in range(a, b):
                actions.append(_add_action(lives[i], 1000 + i % 977, True, v, i))
            _write_commit(log, v, actions)
        first_after = len(chunks)
    else:
        checkpoint_version = max(0, history_commits)
        if history_commits:
            chunks = _chunks(num_files, history_commits)
            _write_commit(log, 0, [_commit_info(0, "CREATE TABLE"), {"protocol": proto}, {"metaData": meta}])
            for v, (a, b) in enumerate(chunks, start=1):
                actions = [_commit_info(v, "WRITE")]
                for i in range(a, b):
                    actions.append(_add_action(lives[i], 1000 + i % 977, True, v, i))
                _write_commit(log, v, actions)
        first_after = checkpoint_version + 1

    # -- the checkpoint --------------------------------------------------------------------------
    leaves: list[str] = []
    n_inline = 0
    if kind != "none":
        C = checkpoint_version
        proto_arr = pa.array([_protocol_row(proto)], PROTOCOL_TYPE)
        meta_arr = pa.array([_metadata_row(meta)], METADATA_TYPE)
        txn_arr = pa.array([{"appId": "generator", "version": 7, "lastUpdated": BASE_TIME}], TXN_TYPE)
        if kind.startswith("v2"):
            n_inline = min(inline_adds, num_files)
            side_dir = log / "_sidecars"
            side_dir.mkdir()
            sidecar_rows = []
            for k, (a, b) in enumerate(_chunks(num_files - n_inline, max(1, sidecars)), start=1):
                a, b = a + n_inline, b + n_inline
                name = f"{C:020d}.checkpoint.{k:010d}.{sidecars:010d}.{uuid.UUID(int=rng.getrandbits(128))}.parquet"
                t = _action_table(
                    {
                        "add": add_col.slice(a, b - a),
                        "remove": _tombstones(a, tombstones_per_leaf, partitioned),
                    }
                )
                size = _write_parquet(t, side_dir / name, row_group_size)
                sidecar_rows.append(
                    {"path": name, "sizeInBytes": size, "modificationTime": BASE_TIME, "tags": None}
                )
                leaves.append(str(side_dir / name))
            inline = add_col.slice(0, n_inline)
            name = f"{C:020d}.checkpoint.{uuid.UUID(int=rng.getrandbits(128))}.{'json' if kind == 'v2-json' else 'parquet'}"
            if kind == "v2-json":
                lines: list[dict] = [
                    {"checkpointMetadata": {"version": C}},
                    {"protocol": proto},
                    {"metaData": meta},
                ]
                lines.append({"txn": {"appId": "generator", "version": 7, "lastUpdated": BASE_TIME}})
                for r in sidecar_rows:
                    lines.append({"sidecar": {k: v for k, v in r.items() if k != "tags"}})
                for row in inline.to_pylist():
                    row = {k: v for k, v in row.items() if v is not None}
                    row["partitionValues"] = dict(row.get("partitionValues") or [])
                    lines.append({"add": row})
                (log / name).write_text("\n".join(json.dumps(x, separators=(",", ":")) for x in lines) + "\n")
            else:
                t = _action_table(
                    {
                        "checkpointMetadata": pa.array([{"version": C, "tags": None}], CKPT_MD_TYPE),
                        "protocol": proto_arr,
                        "metaData": meta_arr,
                        "txn": txn_arr,
                        "sidecar": pa.array(sidecar_rows, SIDECAR_TYPE),
                        "add": inline,
                    }
                )
                _write_parquet(t, log / name, None)
            hint = {"version": C, "size": num_files + 3 + len(sidecar_rows), "v2Checkpoint": {"path": name}}
        else:
            n_parts = max(1, parts) if kind == "multi" else 1
            for k, (a, b) in enumerate(_chunks(num_files, n_parts), start=1):
                cols: dict[str, pa.Array] = {}
                if k == 1:
                    cols.update(protocol=proto_arr, metaData=meta_arr, txn=txn_arr)
                cols["add"] = add_col.slice(a, b - a)
                cols["remove"] = _tombstones(a, tombstones_per_leaf, partitioned)
                t = _action_table(cols)
                name = (
                    f"{C:020d}.checkpoint.{k:010d}.{n_parts:010d}.parquet"
                    if kind == "multi"
                    else f"{C:020d}.checkpoint.parquet"
                )
                _write_parquet(t, log / name, row_group_size)
                leaves.append(str(log / name))
            hint = {"version": C, "size": num_files + 3}
            if kind == "multi":
                hint["parts"] = n_parts
        (log / "_last_checkpoint").write_text(json.dumps(hint))

    # -- commits after the checkpoint ------------------------------------------------------------
    removed: dict[str, Live] = {}
    next_id = num_files
    version = first_after - 1
    for k in range(commits_after):
        version = first_after + k
        actions: list[dict] = [_commit_info(version, "MIXED")]
        touched: set[str] = set()

        def pick(n: int, touched: set[str] = touched) -> list[str]:
            """Up to n live paths not yet touched by this commit (random, reproducible)."""
            out: list[str] = []
            for _ in range(50 * n):
                if len(out) == n or not ever_live:
                    break
                p = ever_live[rng.randrange(len(ever_live))]
                if p in live and p not in touched:
                    out.append(p)
                    touched.add(p)
            return out

        if k % 10 == 9:  # a commit without file actions
            actions.append({"txn": {"appId": "generator", "version": 100 + k, "lastUpdated": BASE_TIME}})
            _write_commit(log, version, actions)
            continue
        if metadata_change_at is not None and k == metadata_change_at:
            meta = metadata(partitioned, kind, dvs, {"generator.changed": f"at {version}"})
            actions.append({"metaData": meta})
        for p in pick(removes_per_commit):
            f = live.pop(p)
            actions.append(_remove_action(f, version))
            removed[p] = f
        readd = [
            p for p in rng.sample(sorted(removed), min(len(removed), readds_per_commit)) if p not in touched
        ]
        for p in readd:
            f = removed.pop(p)
            touched.add(p)
            g = Live(f.log_path, f.part, f.num_records + 1, None)
            live[p] = g
            actions.append(_add_action(g, 2000, True, version, version))
        for p in pick(dv_updates_per_commit):
            f = live[p]
            old = f.dv
            card = (old[4] if old else 0) + 1
            new = Live(
                f.log_path,
                f.part,
                f.num_records,
                ("u", f"dvv{version:06d}{rng.getrandbits(40):012x}", 1, 40, card),
            )
            actions.append(_remove_action(f, version))
            actions.append(_add_action(new, 1000, True, version, version))
            live[p] = new
        for p in pick(stats_readds_per_commit):
            f = live[p]
            g = Live(f.log_path, f.part, f.num_records + 1000, f.dv)  # same key, newer stats win
            live[p] = g
            actions.append(_add_action(g, 1000, False, version, version + 1))
        for _ in range(adds_per_commit):
            i = next_id
            next_id += 1
            part = f"p{i % NUM_PARTS}" if partitioned else None
            rel = _rel_path(i, part, special_every > 0 and i % special_every == 5)
            g = Live(_encode(rel), part, 10 + i % 7, None)
            live[rel] = g
            ever_live.append(rel)
            touched.add(rel)
            actions.append(_add_action(g, 3000, True, version, i))
        _write_commit(log, version, actions)
    return GeneratedTable(
        path=str(root),
        kind=kind,
        version=version,
        checkpoint_version=checkpoint_version,
        live=live,
        leaves=leaves,
        num_checkpoint_files=num_files,
        inline_adds=n_inline,
        seconds=time.perf_counter() - t0,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path")
    ap.add_argument("--kind", default="v2-json", choices=KINDS)
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--sidecars", type=int, default=8)
    ap.add_argument("--parts", type=int, default=4)
    ap.add_argument("--row-group-size", type=int, default=None)
    ap.add_argument("--commits", type=int, default=100)
    args = ap.parse_args(argv)
    t = generate(
        args.path,
        kind=args.kind,
        num_files=args.files,
        sidecars=args.sidecars,
        parts=args.parts,
        row_group_size=args.row_group_size,
        commits_after=args.commits,
    )
    print(
        f"wrote {t.path}: version {t.version}, {len(t.live)} live files, {len(t.leaves)} leaves, {t.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
