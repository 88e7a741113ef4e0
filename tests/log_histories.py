"""Random Delta histories written in random log layouts, and a naive replay to check readers against.

:func:`gen_history` makes a seeded history of commits (adds, removes, re-adds, deletion-vector
updates, stats-only re-adds, txn and domainMetadata actions, metaData changes: new columns,
renames and drops under column mapping, type widening, configuration, in-commit timestamps on and
off; protocol upgrades). :func:`write_layout` writes it as JSON commits plus, at random versions,
checkpoints in every format written here with pyarrow (classic, multi-part, V2 with a JSON or
parquet manifest and sidecars, classic-named V2; stats as JSON and/or ``stats_parsed``,
``partitionValues_parsed``, optional columns left out), an ignored incomplete multi-part
checkpoint, log compaction files, version checksums, ``_last_checkpoint`` right, stale, naming a
missing or incomplete checkpoint or garbage, and a log cleanup before a checkpoint.

:func:`replay` is the reference: a dict keyed by (resolved location, deletion vector unique id)
over the JSON commits alone, newest action wins. With ``real_data`` the data files (and deletion
vectors: inline, or files named by absolute path) are written too, so rows can be counted.
"""

from __future__ import annotations

import json
import os
import random
import struct
import sys
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyroaring import BitMap64

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import gen_v2_checkpoint as bench  # noqa: E402  (its checkpoint column types)

from delta_datafusion.log.actions import DOMAIN_TYPE as DOMAIN_T  # noqa: E402
from delta_datafusion.log.actions import DV_TYPE as DV  # noqa: E402

STR_MAP, PROTOCOL_T, METADATA_T, TXN_T = (
    bench.STR_MAP,
    bench.PROTOCOL_TYPE,
    bench.METADATA_TYPE,
    bench.TXN_TYPE,
)
REMOVE_T, SIDECAR_T, CKMETA_T = bench.REMOVE_TYPE, bench.SIDECAR_TYPE, bench.CKPT_MD_TYPE

PART_TYPES = {"p": "string", "q": "integer"}
NAME_TAGS = ["", " sp ace", "%pct", "#h", "é", "a=b", "+pl", "[br]", "&amp", "x%2520y"]
P_VALUES = ["a", "b c", "x/y", "e=f", "%41", "ü", None, "#", "2024-01-01"]


def _schema(cols: list[tuple[str, str]], phys: dict | None = None, changes: dict | None = None) -> str:
    def meta(n: str) -> dict:
        m = {}
        if phys is not None:
            m = {"delta.columnMapping.id": phys[n][1], "delta.columnMapping.physicalName": phys[n][0]}
        if changes and n in changes:
            m["delta.typeChanges"] = changes[n]
        return m

    return json.dumps(
        {
            "type": "struct",
            "fields": [{"name": n, "type": t, "nullable": True, "metadata": meta(n)} for n, t in cols],
        }
    )


def phys_map(md: dict) -> dict:
    """logical -> physical column name (identity without column mapping)."""
    out = {}
    for f in json.loads(md["schemaString"])["fields"]:
        out[f["name"]] = f.get("metadata", {}).get("delta.columnMapping.physicalName", f["name"])
    return out


def _hive_escape(v: str) -> str:
    out = []
    for ch in v:
        if ch in "\"%#'*/:=?\\\x7f{[]^" or ord(ch) < 32:
            out.append(f"%{ord(ch):02X}")
        else:
            out.append(ch)
    return "".join(out)


def encode(raw: str, rng: random.Random) -> str:
    """A URI encoding of a path (several equivalent forms)."""
    safe = rng.choice(["/", "/=", "/=:@", "/=+,"])
    return quote(raw, safe=safe)


def dv_id(dv: dict | None) -> str | None:
    """The protocol's unique id of a deletion vector: storageType, pathOrInlineDv, @offset."""
    if dv is None:
        return None
    off = dv.get("offset")
    return (
        (dv.get("storageType") or "") + (dv.get("pathOrInlineDv") or "") + ("" if off is None else f"@{off}")
    )


@dataclass
class State:
    protocol: dict
    metadata: dict
    files: dict = field(default_factory=dict)  # (location, dvid) -> add dict
    removed: dict = field(default_factory=dict)  # (location, dvid) -> remove dict (tombstones)
    txns: dict = field(default_factory=dict)  # appId -> txn dict
    domains: dict = field(default_factory=dict)  # domain -> dm dict (active only)
    ict: int | None = None  # this commit's inCommitTimestamp

    def copy(self) -> State:
        return State(
            dict(self.protocol),
            json.loads(json.dumps(self.metadata)),
            dict(self.files),
            dict(self.removed),
            dict(self.txns),
            dict(self.domains),
            self.ict,
        )


def location(root: str, path: str) -> str:
    """A log path as the file it names: decoded once, absolute paths and file URIs kept."""
    p = unquote(path)
    if p.startswith("file://"):
        p = p[len("file://") :]
    elif p.startswith("file:"):
        p = p[len("file:") :]
    if p.startswith("/"):
        return os.path.normpath(p)
    return root.rstrip("/") + "/" + p


def replay(root: str, commits: list[list[dict]]) -> list[State]:
    """Naive reference: every version's state from the JSON commits alone."""
    states: list[State] = []
    st: State | None = None
    for actions in commits:
        st = State({}, {}) if st is None else st.copy()
        st.ict = None
        adds, removes = [], []
        for a in actions:
            ((kind, body),) = a.items()
            if kind == "protocol":
                st.protocol = body
            elif kind == "metaData":
                st.metadata = body
            elif kind == "add":
                adds.append(body)
            elif kind == "remove":
                removes.append(body)
            elif kind == "txn":
                st.txns[body["appId"]] = body
            elif kind == "domainMetadata":
                if body.get("removed"):
                    st.domains.pop(body["domain"], None)
                else:
                    st.domains[body["domain"]] = body
            elif kind == "commitInfo":
                st.ict = body.get("inCommitTimestamp")
        for r in removes:
            k = (location(root, r["path"]), dv_id(r.get("deletionVector")))
            st.files.pop(k, None)
            st.removed[k] = r
        for ad in adds:
            k = (location(root, ad["path"]), dv_id(ad.get("deletionVector")))
            st.files[k] = ad
            st.removed.pop(k, None)
        states.append(st)
    return states


# ----------------------------------------------------------------------------------------------
# history generator
# ----------------------------------------------------------------------------------------------


@dataclass
class History:
    root: str
    commits: list[list[dict]]
    part_cols: list[str]
    elsewhere: str
    mtimes: list[int]
    real_data: bool = False
    #: deleted row indexes by DV unique id (real deletion vectors)
    dv_rows: dict = field(default_factory=dict)
    #: the rows written to each data file, by location (``real_data``)
    data: dict = field(default_factory=dict)


def _stats(rng: random.Random, data_cols: list[tuple[str, str]], n: int, tight: bool | None) -> str | None:
    """Made-up stats JSON (no data file behind it), or None; some columns left out."""
    if rng.random() < 0.15:
        return None
    lo = rng.randint(-1000, 1000)
    hi = lo + rng.randint(0, 500)
    mins, maxs, nulls = {}, {}, {}
    for i, (name, typ) in enumerate(data_cols):
        if rng.random() < 0.2:
            continue
        if typ in ("long", "integer"):
            mins[name], maxs[name] = (lo, hi) if i == 0 else (rng.randint(0, 9), rng.randint(10, 19))
        elif typ == "string":
            mins[name], maxs[name] = "a" + str(rng.randint(0, 9)), "z" + str(rng.randint(0, 9))
        elif typ == "double":
            mins[name], maxs[name] = rng.random(), 1 + rng.random()
        nulls[name] = rng.randint(0, n)
    s = {"numRecords": n, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    if tight is not None:
        s["tightBounds"] = tight
    return json.dumps(s)


def _write_data(loc: str, n: int, lo: int, data_cols: list[tuple[str, str]], rng: random.Random) -> pa.Table:
    """A real data file of n rows: id lo..lo+n-1, other columns random/null."""
    cols = {}
    off = rng.randint(-20, 20)
    for i, (name, typ) in enumerate(data_cols):
        if i == 0:
            cols[name] = pa.array(range(lo, lo + n), pa.int64())
        elif typ == "string":
            cols[name] = pa.array(
                [None if rng.random() < 0.2 else f"s{j + off}" for j in range(n)], pa.string()
            )
        elif typ in ("long", "integer"):
            cols[name] = pa.array(
                [None if rng.random() < 0.1 else j % 7 + off for j in range(n)],
                pa.int64() if typ == "long" else pa.int32(),
            )
        else:
            cols[name] = pa.array([(j + off) / 3 for j in range(n)], pa.float64())
    os.makedirs(os.path.dirname(loc), exist_ok=True)
    table = pa.table(cols)
    pq.write_table(table, loc)
    return table


def exact_stats(table: pa.Table, tight: bool | None) -> str:
    """The file's true stats (every column), as a writer computes them."""
    mins, maxs, nulls = {}, {}, {}
    for name in table.column_names:
        col = table.column(name)
        nulls[name] = col.null_count
        if col.null_count < len(col):
            mm = pc.min_max(col).as_py()
            mins[name], maxs[name] = mm["min"], mm["max"]
    s = {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    if tight is not None:
        s["tightBounds"] = tight
    return json.dumps(s)


_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85(data: bytes) -> str:
    """Z85 text of ``data``, zero-padded to whole 4-byte groups (as Delta-Spark writes)."""
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        v = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            v, d = divmod(v, 85)
            chunk.append(_Z85[d])
        out.append("".join(reversed(chunk)))
    return "".join(out)


def real_dv(rows: list[int], rng: random.Random, elsewhere: str) -> dict:
    """A real deletion vector (inline, or in a file named by absolute path) deleting ``rows``."""
    payload = struct.pack("<i", 1681511377) + BitMap64(rows).serialize()
    if rng.random() < 0.5:
        return {
            "storageType": "i",
            "pathOrInlineDv": z85(payload),
            "sizeInBytes": len(payload),
            "cardinality": len(rows),
        }
    os.makedirs(elsewhere, exist_ok=True)
    path = f"{elsewhere}/dv {uuid.UUID(int=rng.getrandbits(128))}.bin"
    pad = rng.randint(0, 3)
    frame = len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
    Path(path).write_bytes(b"\x01" + b"\0" * pad + frame)
    return {
        "storageType": "p",
        "pathOrInlineDv": "file://" + quote(path),
        "offset": 1 + pad,
        "sizeInBytes": len(payload),
        "cardinality": len(rows),
    }


def gen_history(
    rng: random.Random,
    root: str,
    elsewhere: str,
    n_versions: int,
    real_data: bool = False,
    bulk: bool = False,
) -> History:
    part_cols = rng.choice([[], ["p"], ["p", "q"]])
    data_cols = [("id", "long"), ("name", "string")]
    use_tf = rng.random() < 0.5  # table features protocol from the start
    cm = rng.random() < 0.3  # column mapping (name mode) from the start
    phys: dict | None = None

    def new_phys(n: str) -> None:
        ids = max((x[1] for x in phys.values()), default=0)
        phys[n] = (f"col-{uuid.UUID(int=rng.getrandbits(128))}", ids + 1)

    if cm:
        phys = {}
        for c, _ in data_cols + [(c, 0) for c in part_cols]:
            new_phys(c)
    type_changes: dict = {}
    widen = use_tf and rng.random() < 0.4
    if widen:
        data_cols.append(("w", "integer"))
        if phys is not None:
            new_phys("w")
    row_tracking = use_tf and rng.random() < 0.3
    next_row_id = [0]

    def P(n: str) -> str:  # physical name
        return phys[n][0] if phys is not None else n

    features_r: list[str] = []
    features_w: list[str] = []
    if use_tf:
        features_r = ["deletionVectors", "v2Checkpoint"] if rng.random() < 0.7 else ["deletionVectors"]
        if cm:
            features_r.append("columnMapping")
        if widen:
            features_r.append("typeWidening")
        features_w = features_r + ["domainMetadata"] + (["rowTracking"] if row_tracking else [])
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": list(features_r),
            "writerFeatures": list(features_w),
        }
    elif cm:
        protocol = {"minReaderVersion": 2, "minWriterVersion": 5}
    else:
        protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    table_id = str(uuid.UUID(int=rng.getrandbits(128)))

    def md(config: dict) -> dict:
        return {
            "id": table_id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _schema(data_cols + [(c, PART_TYPES[c]) for c in part_cols], phys, type_changes),
            "partitionColumns": list(part_cols),
            "configuration": dict(config),
            "createdTime": 1_700_000_000_000,
        }

    config: dict = {}
    if cm:
        config["delta.columnMapping.mode"] = "name"
        config["delta.columnMapping.maxColumnId"] = str(len(phys))
    counter = [0]
    live: dict = {}  # key -> add
    dead: dict = {}  # key -> add (removed, may be re-added)
    txn_versions: dict = {}
    domains: set = set()
    ict_on = False
    pending_ict = False
    ict_t = 1_800_000_000_000
    mtimes = []
    t = 1_750_000_000_000
    commits: list[list[dict]] = []

    written: dict = {}  # location -> (numRecords, min id)
    dv_rows: dict = {}  # DV unique id -> deleted row indexes (real data)

    def dv_enabled() -> bool:
        return "deletionVectors" in (protocol.get("readerFeatures") or [])

    def new_path() -> tuple[str, dict]:
        counter[0] += 1
        tag = rng.choice(NAME_TAGS)
        name = f"part-{counter[0]:05d}{tag}.parquet"
        pv: dict = {}
        if part_cols:
            pv[P("p")] = rng.choice(P_VALUES)
            if "q" in part_cols:
                pv[P("q")] = rng.choice([None, "0", "-5", "123", "7"])
        r = rng.random()
        if r < 0.08:
            raw = f"{elsewhere}/{name}"
            log = ("file://" if rng.random() < 0.5 else "") + encode(raw, rng)
        else:
            d = "/".join(
                f"{c}={'__HIVE_DEFAULT_PARTITION__' if pv[P(c)] is None else _hive_escape(pv[P(c)])}"
                for c in part_cols
            )
            raw = (d + "/" if d else "") + name
            log = encode(raw, rng)
        return log, pv

    def dv_desc() -> dict:
        kind = rng.choice(["u", "u", "i", "p"])
        card = rng.randint(1, 5)
        if kind == "u":
            return {
                "storageType": "u",
                "pathOrInlineDv": "".join(rng.choice("abcdefghij0123456789") for _ in range(20)),
                "offset": rng.choice([1, 1, 57, None]),
                "sizeInBytes": 36,
                "cardinality": card,
            }
        if kind == "i":
            return {
                "storageType": "i",
                "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                "sizeInBytes": 40,
                "cardinality": card,
            }
        return {
            "storageType": "p",
            "pathOrInlineDv": f"file://{elsewhere}/dv-{rng.randint(0, 99)}.bin",
            "offset": 1,
            "sizeInBytes": 36,
            "cardinality": card,
        }

    def add_action(path: str, pv: dict, dv: dict | None) -> dict:
        n = rng.randint(1, 100)
        if real_data:
            loc = location(root, path)
            if loc not in written:
                lo = rng.randint(-1000, 1000)
                table = _write_data(loc, n, lo, [(P(c), t) for c, t in data_cols], rng)
                written[loc] = (n, lo, table)
            n, lo, table = written[loc]
        a: dict = {
            "path": path,
            "partitionValues": pv,
            "size": rng.randint(100, 10_000),
            "modificationTime": t,
            "dataChange": rng.random() < 0.8,
        }
        s = _stats(
            rng, [(P(c), t) for c, t in data_cols], n, (False if dv else True) if rng.random() < 0.5 else None
        )
        if s is not None and real_data:
            s = exact_stats(table, json.loads(s).get("tightBounds"))
        if s is not None:
            a["stats"] = s
        if dv is not None:
            a["deletionVector"] = dv
        if rng.random() < 0.1:
            a["tags"] = {"k": "v"}
        if rng.random() < 0.05:
            a["clusteringProvider"] = "liquid"
        if row_tracking:
            a["baseRowId"] = next_row_id[0]
            a["defaultRowCommitVersion"] = version_now[0]
            next_row_id[0] += n
        return a

    def remove_action(add: dict) -> dict:
        r: dict = {"path": add["path"], "deletionTimestamp": t, "dataChange": True}
        if rng.random() < 0.3:  # same path, another equivalent encoding
            raw = unquote(add["path"])
            if not raw.startswith("file:"):
                r["path"] = encode(raw, rng)
        elif (
            rng.random() < 0.15
            and not add["path"].startswith("file:")
            and not unquote(add["path"]).startswith("/")
        ):
            # a relative add removed by its absolute URI (as Spark canonicalizes removes)
            r["path"] = "file://" + quote(root.rstrip("/") + "/" + unquote(add["path"]), safe="/")
        if rng.random() < 0.5:
            r["extendedFileMetadata"] = True
            r["partitionValues"] = add["partitionValues"]
            r["size"] = add["size"]
        if add.get("deletionVector"):
            r["deletionVector"] = add["deletionVector"]
        return r

    stale: list = []  # keys of removed files to remove again in the next commit
    version_now = [0]
    for v in range(n_versions):
        version_now[0] = v
        t += rng.randint(1000, 100_000)
        mtimes.append(t)
        acts: list[dict] = []
        touched: set = set()
        if v == 0:
            acts.append({"protocol": dict(protocol)})
            acts.append({"metaData": md(config)})
        else:
            r = rng.random()
            if r < 0.08:
                name = rng.choice(
                    [f"c{v}", f"c.{v}", f"C{v}ü"] + ([f"c {v}", f"c`{v}"] if phys is not None else [])
                )
                data_cols.append((name, rng.choice(["long", "double", "string"])))
                if phys is not None:
                    new_phys(data_cols[-1][0])
                    config["delta.columnMapping.maxColumnId"] = str(max(x[1] for x in phys.values()))
                acts.append({"metaData": md(config)})
            elif r < 0.13 and phys is not None and len(data_cols) > 1:
                i = rng.randrange(1, len(data_cols))
                old_name, typ = data_cols[i]
                if rng.random() < 0.5:
                    new_name = old_name.split("_r")[0] + f"_r{v}"
                    phys[new_name] = phys.pop(old_name)
                    if old_name in type_changes:
                        type_changes[new_name] = type_changes.pop(old_name)
                    data_cols[i] = (new_name, typ)
                else:
                    del data_cols[i]
                acts.append({"metaData": md(config)})
            elif r < 0.15 and phys is None and use_tf and "columnMapping" not in protocol["readerFeatures"]:
                phys = {}
                for i, (c, _) in enumerate(data_cols + [(c, 0) for c in part_cols]):
                    phys[c] = (c, i + 1)
                config["delta.columnMapping.mode"] = "name"
                config["delta.columnMapping.maxColumnId"] = str(len(phys))
                protocol = dict(
                    protocol,
                    readerFeatures=protocol["readerFeatures"] + ["columnMapping"],
                    writerFeatures=protocol["writerFeatures"] + ["columnMapping"],
                )
                acts.append({"protocol": dict(protocol)})
                acts.append({"metaData": md(config)})
            elif r < 0.19:
                config[f"user.k{rng.randint(0, 3)}"] = str(rng.randint(0, 99))
                user = [k for k in config if k.startswith("user.")]
                if user and rng.random() < 0.3:
                    config.pop(rng.choice(user))
                acts.append({"metaData": md(config)})
            elif r < 0.23 and not ict_on and use_tf:
                ict_on = True
                config["delta.enableInCommitTimestamps"] = "true"
                config["delta.inCommitTimestampEnablementVersion"] = str(v)
                ict_t += rng.randint(1, 10_000)
                pending_ict = True
                config["delta.inCommitTimestampEnablementTimestamp"] = str(ict_t)
                if "inCommitTimestamp" not in protocol["writerFeatures"]:
                    protocol = dict(
                        protocol, writerFeatures=protocol["writerFeatures"] + ["inCommitTimestamp"]
                    )
                    acts.append({"protocol": dict(protocol)})
                acts.append({"metaData": md(config)})
            elif r < 0.25 and ict_on and rng.random() < 0.3:
                ict_on = False
                config["delta.enableInCommitTimestamps"] = "false"
                for k in (
                    "delta.inCommitTimestampEnablementVersion",
                    "delta.inCommitTimestampEnablementTimestamp",
                ):
                    config.pop(k, None)
                acts.append({"metaData": md(config)})
            elif r < 0.31 and widen and dict(data_cols).get("w") == "integer":
                to = rng.choice(["long", "double"])
                type_changes["w"] = [{"fromType": "integer", "toType": to}]
                data_cols[[c for c, _ in data_cols].index("w")] = ("w", to)
                acts.append({"metaData": md(config)})
            elif r < 0.27 and not use_tf:
                use_tf = True
                rf = ["deletionVectors"] + (["v2Checkpoint"] if rng.random() < 0.6 else [])
                if cm:
                    rf.append("columnMapping")
                protocol = {
                    "minReaderVersion": 3,
                    "minWriterVersion": 7,
                    "readerFeatures": rf,
                    "writerFeatures": rf + ["domainMetadata"],
                }
                acts.append({"protocol": dict(protocol)})
        # file actions
        while stale:
            k = stale.pop()
            if k not in live and k in dead:
                touched.add(k)
                acts.append({"remove": remove_action(dead[k])})
        n_ops = rng.choice([0, 1, 1, 2, 3, 5])
        if v == 0 and bulk:
            n_ops = rng.randint(20, 60 if real_data else 250)
        for _ in range(n_ops):
            op = rng.random()
            if op < 0.45 or not live:
                path, pv = new_path()
                dv = dv_desc() if dv_enabled() and rng.random() < 0.2 and not real_data else None
                a = add_action(path, pv, dv)
                k = (location(root, path), dv_id(dv))
                if k in touched:
                    continue
                touched.add(k)
                acts.append({"add": a})
                live[k] = a
            elif op < 0.65:
                k = rng.choice(list(live))
                if k in touched:
                    continue
                touched.add(k)
                acts.append({"remove": remove_action(live[k])})
                dead[k] = live.pop(k)
            elif op < 0.69 and dead:  # a remove of a file already removed: no effect
                k = rng.choice(list(dead))
                if k in touched or k in live:
                    continue
                touched.add(k)
                acts.append({"remove": remove_action(dead[k])})
            elif op < 0.75 and dead:
                k = rng.choice(list(dead))
                if k in touched:
                    continue
                touched.add(k)
                old = dead.pop(k)
                a = add_action(old["path"], old["partitionValues"], old.get("deletionVector"))
                acts.append({"add": a})
                live[k] = a
            elif op < 0.9 and dv_enabled():
                k = rng.choice(list(live))
                if k in touched:
                    continue
                old = live[k]
                if real_data:
                    n_rows = written[k[0]][0]
                    before = set(dv_rows.get(dv_id(old.get("deletionVector")), []))
                    more = set(rng.sample(range(n_rows), rng.randint(1, max(1, n_rows // 3))))
                    rows = sorted(before | more)
                    dv = real_dv(rows, rng, elsewhere)
                    dv_rows[dv_id(dv)] = rows
                else:
                    dv = dv_desc()
                    was = old.get("deletionVector")
                    if was and was.get("offset") is not None and rng.random() < 0.4:
                        # the same DV file, another offset: another deletion vector
                        dv = dict(was, offset=was["offset"] + rng.randint(1, 50))
                        stale.append(k)  # removed again later: must not touch the new one
                k2 = (k[0], dv_id(dv))
                if k2 in touched or k2 in live:
                    continue
                touched.update({k, k2})
                acts.append({"remove": remove_action(old)})
                a = add_action(old["path"], old["partitionValues"], dv)
                a["size"] = old["size"]
                acts.append({"add": a})
                del live[k]
                dead[k] = old
                live[k2] = a
                dead.pop(k2, None)
            else:  # stats-only re-add of a live file (dataChange false)
                k = rng.choice(list(live))
                if k in touched:
                    continue
                touched.add(k)
                old = live[k]
                a = dict(old)
                a["dataChange"] = False
                a["stats"] = (
                    old.get("stats")
                    if real_data
                    else (
                        _stats(rng, [(P(c), t) for c, t in data_cols], rng.randint(1, 100), None)
                        or old.get("stats")
                    )
                )
                if a["stats"] is None:
                    a.pop("stats")
                acts.append({"add": a})
                live[k] = a
        if rng.random() < 0.25:
            app = rng.choice(["app-a", "app-b", "app c"])
            txn_versions[app] = txn_versions.get(app, 0) + rng.randint(1, 4)
            acts.append({"txn": {"appId": app, "version": txn_versions[app], "lastUpdated": t}})
        if use_tf and rng.random() < 0.2:
            d = rng.choice(["dom.a", "dom.b", "dom c"])
            if d in domains and rng.random() < 0.4:
                domains.discard(d)
                acts.append({"domainMetadata": {"domain": d, "configuration": "", "removed": True}})
            else:
                domains.add(d)
                acts.append(
                    {"domainMetadata": {"domain": d, "configuration": json.dumps({"v": v}), "removed": False}}
                )
        rng.shuffle(acts)
        ci: dict = {"timestamp": t, "operation": "WRITE"}
        if ict_on:
            if not pending_ict:
                ict_t += rng.randint(1, 10_000)
            pending_ict = False
            ci["inCommitTimestamp"] = ict_t
            acts.insert(0, {"commitInfo": ci})
        elif rng.random() < 0.8:
            acts.insert(rng.randint(0, len(acts)), {"commitInfo": ci})
        commits.append(acts)
    data = {loc: table for loc, (_, _, table) in written.items()}
    return History(root, commits, part_cols, elsewhere, mtimes, real_data, dv_rows, data)


# ----------------------------------------------------------------------------------------------
# layout writer
# ----------------------------------------------------------------------------------------------


def _map(d: dict | None):
    return None if d is None else list(d.items())


def _json_type(t: str) -> pa.DataType:
    return {"long": pa.int64(), "string": pa.string(), "double": pa.float64(), "integer": pa.int32()}[t]


def _data_fields(md: dict) -> list[tuple[str, str]]:
    parts = set(md["partitionColumns"])
    pm = phys_map(md)
    return [
        (pm[f["name"]], f["type"]) for f in json.loads(md["schemaString"])["fields"] if f["name"] not in parts
    ]


def _part_fields(md: dict) -> list[tuple[str, str]]:
    types = {f["name"]: f["type"] for f in json.loads(md["schemaString"])["fields"]}
    pm = phys_map(md)
    return [(pm[c], types[c]) for c in md["partitionColumns"]]


def _add_type(md: dict, stats_json: bool, stats_parsed: bool, pv_parsed: bool) -> pa.DataType:
    fields = [
        ("path", pa.string()),
        ("partitionValues", STR_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
    ]
    if stats_json:
        fields.append(("stats", pa.string()))
    fields += [
        ("tags", STR_MAP),
        ("deletionVector", DV),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
    data = _data_fields(md)
    if stats_parsed:
        vals = pa.struct([(n, _json_type(t)) for n, t in data])
        nulls = pa.struct([(n, pa.int64()) for n, t in data])
        fields.append(
            (
                "stats_parsed",
                pa.struct(
                    [
                        ("numRecords", pa.int64()),
                        ("minValues", vals),
                        ("maxValues", vals),
                        ("nullCount", nulls),
                        ("tightBounds", pa.bool_()),
                    ]
                ),
            )
        )
    if pv_parsed and md["partitionColumns"]:
        fields.append(
            ("partitionValues_parsed", pa.struct([(n, _json_type(t)) for n, t in _part_fields(md)]))
        )
    return pa.struct(fields)


def _parsed_stats(stats: str | None, md: dict) -> dict | None:
    if stats is None:
        return None
    s = json.loads(stats)
    out: dict = {"numRecords": s.get("numRecords"), "tightBounds": s.get("tightBounds")}
    for key in ("minValues", "maxValues", "nullCount"):
        src = s.get(key) or {}
        out[key] = {n: src.get(n) for n, _ in _data_fields(md)}
    return out


def _pv_parsed(pv: dict, md: dict) -> dict:
    out = {}
    for n, t in _part_fields(md):
        v = pv.get(n)
        out[n] = None if v is None else (int(v) if t == "integer" else v)
    return out


def _add_row(a: dict, md: dict, stats_json: bool, stats_parsed: bool, pv_parsed: bool) -> dict:
    r = {
        "path": a["path"],
        "partitionValues": _map(a["partitionValues"]),
        "size": a["size"],
        "modificationTime": a["modificationTime"],
        "dataChange": a["dataChange"],
        "tags": _map(a.get("tags")),
        "deletionVector": a.get("deletionVector"),
        "baseRowId": a.get("baseRowId"),
        "defaultRowCommitVersion": a.get("defaultRowCommitVersion"),
    }
    if stats_json:
        r["stats"] = a.get("stats")
    if stats_parsed:
        r["stats_parsed"] = _parsed_stats(a.get("stats"), md)
    if pv_parsed and md["partitionColumns"]:
        r["partitionValues_parsed"] = _pv_parsed(a["partitionValues"], md)
    return r


def _remove_row(r: dict) -> dict:
    out = dict(r)
    if "partitionValues" in out:
        out["partitionValues"] = _map(out["partitionValues"])
    return out


def _md_row(md: dict) -> dict:
    m = dict(md)
    m["format"] = {"provider": "parquet", "options": []}
    m["configuration"] = _map(md["configuration"])
    return m


@dataclass
class Layout:
    description: list[str] = field(default_factory=list)
    checkpoints: dict = field(default_factory=dict)  # version -> kind
    earliest: int = 0  # first readable version
    inclusive: bool = False  # the cleanup removed the earliest checkpoint's commit too


def _ckpt_rows(st: State, rng: random.Random, sj: bool, sp: bool, pvp: bool, tombstones: bool):
    """(non-file rows, file rows) as dicts of one action each, for the parquet schema."""
    meta = [{"protocol": st.protocol}, {"metaData": _md_row(st.metadata)}]
    meta += [{"txn": x} for x in st.txns.values()]
    meta += [{"domainMetadata": x} for x in st.domains.values()]
    files = [{"add": _add_row(a, st.metadata, sj, sp, pvp)} for a in st.files.values()]
    if tombstones:
        files += [{"remove": _remove_row(r)} for r in st.removed.values()]
    rng.shuffle(files)
    return meta, files


def _write_parquet(rows: list[dict], schema: pa.Schema, path: Path, rng: random.Random) -> int:
    tbl = pa.Table.from_pylist(rows, schema=schema)
    pq.write_table(tbl, path, row_group_size=rng.choice([None, 2, 3, 7]))
    return path.stat().st_size


def write_checkpoint(log: Path, v: int, st: State, kind: str, rng: random.Random, notes: list[str]) -> dict:
    """Write a checkpoint of ``st`` at version v; return the _last_checkpoint body for it."""
    sj = rng.random() < 0.8 or kind == "v2-json"
    sp = (not sj) or rng.random() < 0.4
    pvp = rng.random() < 0.5
    tomb = rng.random() < 0.6
    notes.append(f"ckpt {v} {kind} stats_json={sj} stats_parsed={sp} pv_parsed={pvp} tombstones={tomb}")
    add_t = _add_type(st.metadata, sj, sp, pvp)
    lean = rng.random() < 0.3  # leave out columns and fields nothing needs
    has_dv = any(a.get("deletionVector") for a in st.files.values())
    if lean:
        has_rt = any(a.get("baseRowId") is not None for a in st.files.values())
        drop = {"tags"} | (set() if has_dv else {"deletionVector"})
        drop |= set() if has_rt else {"baseRowId", "defaultRowCommitVersion"}
        keep = [f for f in add_t if f.name not in drop]
        add_t = pa.struct(keep)
        notes.append("  lean")
    base = [("protocol", PROTOCOL_T), ("metaData", METADATA_T)]
    if not lean or st.txns:
        base.append(("txn", TXN_T))
    if not lean or st.domains:
        base.append(("domainMetadata", DOMAIN_T))
    rem = [("remove", REMOVE_T)] if (tomb or not lean) else []
    files_schema = pa.schema([("add", add_t), *rem])
    meta, files = _ckpt_rows(st, rng, sj, sp, pvp, tomb)
    if lean:
        names = set(add_t.names)
        for f in files:
            if "add" in f:
                f["add"] = {k: x for k, x in f["add"].items() if k in names}
    if kind in ("classic", "multi"):
        schema = pa.schema(base + [("add", add_t), *rem])
        rows = meta + files
        rng.shuffle(rows)
        if kind == "classic":
            size = _write_parquet(rows, schema, log / f"{v:020d}.checkpoint.parquet", rng)
            return {"version": v, "size": len(rows), "sizeInBytes": size}
        n = rng.randint(2, 4)
        cuts = sorted(rng.randint(0, len(rows)) for _ in range(n - 1))
        bounds = [0, *cuts, len(rows)]
        for i in range(n):
            _write_parquet(
                rows[bounds[i] : bounds[i + 1]],
                schema,
                log / f"{v:020d}.checkpoint.{i + 1:010d}.{n:010d}.parquet",
                rng,
            )
        return {"version": v, "size": len(rows), "parts": n}
    # V2: manifest (json / parquet / classic-named parquet) + 0..4 sidecars
    n_side = rng.randint(0, 4) if files else 0
    inline_n = rng.randint(0, len(files)) if rng.random() < 0.4 or n_side == 0 else 0
    inline, rest = files[:inline_n], files[inline_n:]
    if n_side == 0:
        inline, rest = files, []
    side_dir = log / "_sidecars"
    side_dir.mkdir(exist_ok=True)
    sidecars = []
    if rest:
        n_side = max(n_side, 1)
        cuts = sorted(rng.randint(0, len(rest)) for _ in range(n_side - 1))
        bounds = [0, *cuts, len(rest)]
        for i in range(n_side):
            name = f"{uuid.UUID(int=rng.getrandbits(128))}.parquet"
            size = _write_parquet(rest[bounds[i] : bounds[i + 1]], files_schema, side_dir / name, rng)
            ref = name if rng.random() < 0.7 else quote(str(side_dir / name))
            sidecars.append(
                {"sidecar": {"path": ref, "sizeInBytes": size, "modificationTime": 1, "tags": None}}
            )
    ckmeta = {"checkpointMetadata": {"version": v, "tags": None}}
    body = meta + inline + sidecars + [ckmeta]
    rng.shuffle(body)
    uid = uuid.UUID(int=rng.getrandbits(128))
    if kind == "v2-json":
        # JSON: no stats_parsed / pv_parsed; maps as objects
        name = f"{v:020d}.checkpoint.{uid}.json"
        lines = []
        for row in body:
            ((k, val),) = row.items()
            val = _to_json_action(k, val, st)
            lines.append(json.dumps({k: val}))
        (log / name).write_text("\n".join(lines) + "\n")
        return {
            "version": v,
            "size": len(body),
            "v2Checkpoint": {"path": name, "sizeInBytes": (log / name).stat().st_size, "modificationTime": 1},
        }
    schema = pa.schema(
        base + [("add", add_t), *rem, ("checkpointMetadata", CKMETA_T), ("sidecar", SIDECAR_T)]
    )
    if kind == "v2-parquet":
        name = f"{v:020d}.checkpoint.{uid}.parquet"
        _write_parquet(body, schema, log / name, rng)
        return {
            "version": v,
            "size": len(body),
            "v2Checkpoint": {"path": name, "sizeInBytes": (log / name).stat().st_size, "modificationTime": 1},
        }
    assert kind == "v2-classic"
    _write_parquet(body, schema, log / f"{v:020d}.checkpoint.parquet", rng)
    return {"version": v, "size": len(body)}


def _to_json_action(kind: str, val: dict, st: State) -> dict:
    val = dict(val)
    if kind == "add":
        val["partitionValues"] = dict(val["partitionValues"] or [])
        val.pop("stats_parsed", None)
        val.pop("partitionValues_parsed", None)
        if val.get("tags") is not None:
            val["tags"] = dict(val["tags"])
        val = {k: x for k, x in val.items() if x is not None}
    elif kind == "remove":
        if val.get("partitionValues") is not None:
            val["partitionValues"] = dict(val["partitionValues"])
        val = {k: x for k, x in val.items() if x is not None}
    elif kind == "metaData":
        val = st.metadata
    elif kind in ("checkpointMetadata", "sidecar"):
        val = {k: x for k, x in val.items() if x is not None}
    return val


def write_commit(log: Path, v: int, actions: list[dict], mtime_ms: int, style: random.Random) -> None:
    """A commit file (LF or CRLF lines, blank lines, with or without a final newline), its
    modification time set to ``mtime_ms``."""
    p = log / f"{v:020d}.json"
    r = style.random()
    sep = "\r\n" if r < 0.1 else ("\n\n" if r < 0.15 else "\n")
    end = "" if style.random() < 0.4 else sep
    compact = style.random() < 0.5
    lines = [json.dumps(a, separators=(",", ":")) if compact else json.dumps(a) for a in actions]
    p.write_bytes((sep.join(lines) + end).encode())
    os.utime(p, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))


def write_crc(log: Path, v: int, st: State) -> None:
    body = {
        "tableSizeBytes": sum(a["size"] for a in st.files.values()),
        "numFiles": len(st.files),
        "numMetadata": 1,
        "numProtocol": 1,
        "metadata": st.metadata,
        "protocol": st.protocol,
        "setTransactions": list(st.txns.values()),
        "domainMetadata": list(st.domains.values()),
    }
    if st.ict is not None:
        body["inCommitTimestampOpt"] = st.ict
    (log / f"{v:020d}.crc").write_text(json.dumps(body))


def write_compaction(log: Path, lo: int, hi: int, commits: list[list[dict]], root: str) -> None:
    """Compacted actions of commits lo..hi (newest action per key; removes kept as tombstones)."""
    files: dict = {}
    other: list[dict] = []
    txns: dict = {}
    doms: dict = {}
    pm: dict = {}
    for v in range(lo, hi + 1):
        for a in commits[v]:
            ((k, body),) = a.items()
            if k in ("add", "remove"):
                key = (location(root, body["path"]), dv_id(body.get("deletionVector")))
                files[key] = a
            elif k == "txn":
                txns[body["appId"]] = a
            elif k == "domainMetadata":
                doms[body["domain"]] = a
            elif k in ("protocol", "metaData"):
                pm[k] = a
    other = list(pm.values()) + list(txns.values()) + list(doms.values()) + list(files.values())
    (log / f"{lo:020d}.{hi:020d}.compacted.json").write_text("\n".join(json.dumps(a) for a in other) + "\n")


def write_layout(h: History, states: list[State], rng: random.Random) -> Layout:
    lay = Layout()
    log = Path(h.root) / "_delta_log"
    log.mkdir(parents=True)
    n = len(h.commits)
    for v, acts in enumerate(h.commits):
        write_commit(log, v, acts, h.mtimes[v], rng)
    hints = []
    k = rng.choice([0, 1, 1, 2, 3])
    for v in sorted(rng.sample(range(n), min(k, n))):
        st = states[v]
        v2ok = "v2Checkpoint" in (st.protocol.get("readerFeatures") or [])
        kinds = ["classic", "multi"] + (["v2-json", "v2-parquet", "v2-classic"] * 2 if v2ok else [])
        kind = rng.choice(kinds)
        hints.append(write_checkpoint(log, v, st, kind, rng, lay.description))
        lay.checkpoints[v] = kind
        if rng.random() < 0.15:  # a second checkpoint of the same version, another kind
            kind2 = rng.choice(["classic", "multi"] + (["v2-json", "v2-parquet"] if v2ok else []))
            if kind2 != kind and not (kind == "v2-classic" and kind2 == "classic"):
                hints.append(write_checkpoint(log, v, st, kind2, rng, lay.description))
    # an incomplete multi-part checkpoint with wrong content (must be ignored)
    if rng.random() < 0.2 and n > 1:
        v = rng.randrange(n)
        tot = rng.randint(5, 6)
        for i in range(1, tot + 1):
            if i == 2:
                continue
            (log / f"{v:020d}.checkpoint.{i:010d}.{tot:010d}.parquet").write_bytes(b"garbage, not parquet")
        lay.description.append(f"incomplete multi-part at {v} ({tot} parts, part 2 missing)")
    # compaction files
    for _ in range(rng.choice([0, 0, 1, 2])):
        lo = rng.randrange(n)
        hi = rng.randrange(lo, n)
        if hi > lo:
            write_compaction(log, lo, hi, h.commits, h.root)
            lay.description.append(f"compaction {lo}..{hi}")
    # checksums
    if rng.random() < 0.5:
        for v in range(n):
            if rng.random() < 0.6:
                write_crc(log, v, states[v])
        lay.description.append("crc files")
    # _last_checkpoint
    r = rng.random()
    if hints and r < 0.45:
        (log / "_last_checkpoint").write_text(json.dumps(hints[-1]))
        lay.description.append("hint right")
    elif hints and r < 0.6:
        (log / "_last_checkpoint").write_text(json.dumps(hints[0]))
        lay.description.append("hint stale/first")
    elif r < 0.7:
        (log / "_last_checkpoint").write_text(json.dumps({"version": n + 5, "size": 3}))
        lay.description.append("hint missing ckpt")
    elif hints and r < 0.8:
        hv = hints[-1]["version"]
        (log / "_last_checkpoint").write_text(json.dumps({"version": hv, "size": 3, "parts": 7}))
        lay.description.append("hint wrong parts")
    elif r < 0.85:
        (log / "_last_checkpoint").write_text("{not json")
        lay.description.append("hint garbage")
    # log cleanup: drop commits before a checkpoint
    if lay.checkpoints and rng.random() < 0.25:
        c = rng.choice(sorted(lay.checkpoints))
        inclusive = rng.random() < 0.3  # the checkpoint's own commit removed too
        lay.inclusive = inclusive
        for v in range(c + 1 if inclusive else c):
            (log / f"{v:020d}.json").unlink()
            (log / f"{v:020d}.crc").unlink(missing_ok=True)
        for f in log.iterdir():
            if ".checkpoint." in f.name and int(f.name[:20]) < c:
                f.unlink()
        lay.earliest = c
        lay.description.append(f"cleanup before {c}")
    return lay
