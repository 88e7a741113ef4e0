"""Seeded deletion-vector tables against a reference computed here.

Each seed writes a small table with deltalake (several files, row groups and pages of a few rows,
partitioned or not, change data feed on), upgrades it to deletion vectors, then appends its own
commits: a file removed and added again with another deletion vector (inline with both Z85 tail
conventions, or in a DV file holding several at offsets, by UUID under a prefix or by absolute
path; empty, every row, rows restored, an empty high bucket), stats wide, tight, without
``tightBounds`` or without bounds, files removed with their vector and restored, new files added
with a vector, statistics-only re-adds, commits with cdc files (which win), checkpoints by
deltalake. The reference is the rows of the data files minus the deleted positions, in Python;
filters are evaluated by DataFusion over those rows in memory. Every version is read through SQL
and the Python API (rows, counts, GROUP BY the partition column, LIMIT), ``files()`` and the
parallel phases; the change feed over several ranges, filtered too, with page windows on every
file (found: a file added and removed in one range lost one side's rows).
"""

from __future__ import annotations

import collections
import json
import random
import struct
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_dv import _frame, _hand_encode, _z85_encode

from delta_datafusion.dv import DV_MAGIC

deltalake = pytest.importorskip("deltalake")

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.read import reader as reader_module  # noqa: E402

SEEDS = range(6)
CHANGE_TYPES = ["insert", "delete", "update_preimage", "update_postimage"]


def _uid(dv: dict[str, Any]) -> str:
    offset = dv.get("offset")
    return dv["storageType"] + dv["pathOrInlineDv"] + ("" if offset is None else f"@{offset}")


@dataclass
class _File:
    path: str
    pv: dict[str, str | None]
    rows: list[dict[str, Any]]  # in file order, partition value included
    add: dict[str, Any]  # the add action without its deletion vector
    dv: dict[str, Any] | None = None
    deleted: frozenset[int] = frozenset()

    def live(self) -> list[dict[str, Any]]:
        return [r for i, r in enumerate(self.rows) if i not in self.deleted]

    def but(self, **changes: Any) -> _File:
        return _File(**{**self.__dict__, **changes})


@dataclass
class _Table:
    """The table being written and what each version holds (the reference)."""

    root: Path
    rng: random.Random
    partitioned: bool
    files: dict[str, _File] = field(default_factory=dict)
    removed: dict[str, _File] = field(default_factory=dict)
    versions: list[dict[str, _File]] = field(default_factory=list)
    changes: list[list[tuple[str, dict[str, Any]]]] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    next_id: int = 0
    dv_files: list[dict[str, Any]] = field(default_factory=list)

    def schema(self, with_partition: bool = True) -> pa.Schema:
        fields = [pa.field("id", pa.int64()), pa.field("x", pa.int32()), pa.field("s", pa.string())]
        return pa.schema(
            fields + ([pa.field("p", pa.string())] if self.partitioned and with_partition else [])
        )

    def new_rows(self, n: int) -> list[dict[str, Any]]:
        r, out = self.rng, []
        for _ in range(n):
            row = {
                "id": self.next_id,
                "x": None if r.random() < 0.2 else r.randint(-5, 20),
                "s": None if r.random() < 0.1 else r.choice(["a", "b", "ab", "c", ""]),
            }
            if self.partitioned:
                row["p"] = r.choice(["u", "v", None])
            self.next_id += 1
            out.append(row)
        return out

    def commit(self, actions: list[dict[str, Any]], changes: list[tuple[str, dict[str, Any]]]) -> None:
        log = self.root / "_delta_log" / f"{len(self.versions):020d}.json"
        log.write_text("".join(json.dumps(a) + "\n" for a in actions))
        self.done(changes)

    def done(self, changes: list[tuple[str, dict[str, Any]]]) -> None:
        self.versions.append({k: f.but() for k, f in self.files.items()})
        self.changes.append(changes)

    # -- deltalake's part -----------------------------------------------------------------
    def write(self, first: bool) -> None:
        from deltalake import WriterProperties, write_deltalake

        r = self.rng
        props = WriterProperties(
            max_row_group_size=r.randint(2, 6),
            data_page_row_count_limit=r.choice([1, 2, 1000]),
            write_batch_size=2,
        )
        data = pa.Table.from_pylist(self.new_rows(r.randint(3, 25)), self.schema())
        write_deltalake(
            str(self.root),
            data,
            mode="append",
            partition_by=["p"] if self.partitioned else None,
            configuration={"delta.enableChangeDataFeed": "true"} if first else None,
            writer_properties=props,
        )
        version = len(self.versions)
        text = (self.root / "_delta_log" / f"{version:020d}.json").read_text()
        added = [json.loads(line)["add"] for line in text.splitlines() if '"add"' in line]
        for add in added:
            rows = pq.read_table(self.root / unquote(add["path"])).to_pylist()
            pv = add["partitionValues"]
            for row in rows:
                row.update({"p": pv["p"]} if self.partitioned else {})
            self.files[add["path"]] = _File(add["path"], pv, rows, add)
        self.done([("insert", row) for add in added for row in self.files[add["path"]].rows])

    def upgrade(self) -> None:
        text = (self.root / "_delta_log" / f"{0:020d}.json").read_text()
        md = next(json.loads(line)["metaData"] for line in text.splitlines() if '"metaData"' in line)
        md["configuration"] = {**(md.get("configuration") or {}), "delta.enableDeletionVectors": "true"}
        protocol = {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "changeDataFeed", "appendOnly", "invariants"],
        }
        self.commit([{"protocol": protocol}, {"metaData": md}], [])

    # -- deletion vectors -----------------------------------------------------------------
    def make_dv(self, rows: list[int]) -> dict[str, Any]:
        r = self.rng
        high = [r.randint(1, 5)] if r.random() < 0.1 else []  # an empty bucket of high row indexes
        payload = struct.pack("<i", DV_MAGIC) + _hand_encode_with_empty(rows, high)
        kind = r.choice(["i", "u", "u", "p"])
        if kind == "i":
            text = _z85_encode(payload, r.choice(["pad", "crate"]))
            return {
                "storageType": "i",
                "pathOrInlineDv": text,
                "sizeInBytes": len(payload),
                "cardinality": len(rows),
            }
        if self.dv_files and r.random() < 0.6:  # several DVs in one file
            entry = r.choice(self.dv_files)
        else:
            u = uuid.UUID(int=r.getrandbits(128))
            prefix = r.choice(["", "ab"])
            (self.root / prefix).mkdir(exist_ok=True)
            path = self.root / prefix / f"deletion_vector_{u}.bin"
            path.write_bytes(b"\x01")
            entry = {"path": path, "token": prefix + _z85_encode(u.bytes, "pad")}
            self.dv_files.append(entry)
        body = entry["path"].read_bytes()
        entry["path"].write_bytes(body + _frame(payload[4:]))
        token = entry["token"] if kind == "u" else entry["path"].as_uri()
        dv = {"storageType": kind, "pathOrInlineDv": token, "offset": len(body)}
        if len(body) == 1 and r.random() < 0.3:
            del dv["offset"]  # absent: the first DV of the file
        return {**dv, "sizeInBytes": len(payload), "cardinality": len(rows)}

    def stats(self, rows: list[dict[str, Any]], num: int, tight: bool | None) -> str:
        """Bounds of ``rows`` with ``numRecords`` ``num``; ``tightBounds`` when not None."""
        st: dict[str, Any] = {"numRecords": num, "minValues": {}, "maxValues": {}, "nullCount": {}}
        for c in ("id", "x", "s"):
            values = [row[c] for row in rows if row[c] is not None]
            if values:
                st["minValues"][c], st["maxValues"][c] = min(values), max(values)
            st["nullCount"][c] = len(rows) - len(values)
        return json.dumps(st | ({} if tight is None else {"tightBounds": tight}))

    def dv_stats(self, f: _File, deleted: frozenset[int]) -> str | None:
        live = [row for i, row in enumerate(f.rows) if i not in deleted]
        mode = self.rng.choice(["wide", "tight", "absent", "count", "none"])
        return {
            "wide": lambda: self.stats(f.rows, len(f.rows), False),
            "tight": lambda: self.stats(live, len(f.rows), True),
            "absent": lambda: self.stats(live, len(f.rows), None),  # no tightBounds: tight
            "count": lambda: json.dumps({"numRecords": len(f.rows)}),
            "none": lambda: None,
        }[mode]()

    def remove(self, f: _File) -> dict[str, Any]:
        rem = {"path": f.path, "deletionTimestamp": 1, "dataChange": True, "extendedFileMetadata": True}
        rem |= {"partitionValues": f.pv, "size": f.add["size"]}
        if self.rng.random() < 0.5 and f.add.get("stats"):
            rem["stats"] = f.add["stats"]
        return rem | ({"deletionVector": f.dv} if f.dv else {})

    def added(self, f: _File, deleted: frozenset[int], dv: dict | None, stats: str | None) -> dict[str, Any]:
        add = {k: v for k, v in f.add.items() if k != "stats"} | ({"stats": stats} if stats else {})
        self.files[f.path] = f.but(add=add, dv=dv, deleted=deleted)
        return {"add": add | ({"deletionVector": dv} if dv else {})}

    # -- commits of our own ---------------------------------------------------------------
    def crafted(self) -> None:
        r = self.rng
        self.dv_files = []
        actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": 2, "operation": "DELETE"}}]
        changes: list[tuple[str, dict[str, Any]]] = []
        touched: set[str] = set()
        for _ in range(r.randint(1, 3)):
            # by first id, not path: deltalake names its files at random
            live = sorted(
                (p for p in self.files if p not in touched), key=lambda p: self.files[p].rows[0]["id"]
            )
            gone = sorted(
                (p for p in self.removed if p not in touched), key=lambda p: self.removed[p].rows[0]["id"]
            )
            op = r.random()
            if op < 0.5 and live:  # a new deletion vector
                f = self.files[r.choice(live)]
                deleted = self._deleted(f)
                dv = self.make_dv(sorted(deleted))
                while f.dv is not None and _uid(dv) == _uid(f.dv):
                    dv = self.make_dv(sorted(deleted))
                actions += [{"remove": self.remove(f)}, self.added(f, deleted, dv, self.dv_stats(f, deleted))]
                for i, row in enumerate(f.rows):
                    if (i in deleted) != (i in f.deleted):
                        changes.append(("delete" if i in deleted else "insert", row))
            elif op < 0.65 and live:  # the file removed, with its vector
                f = self.files.pop(r.choice(live))
                self.removed[f.path] = f
                actions.append({"remove": self.remove(f)})
                changes += [("delete", row) for row in f.live()]
            elif op < 0.72 and live:  # statistics recomputed: no data change
                f = self.files[r.choice(live)]
                add = f.add | {"stats": self.stats(f.rows, len(f.rows), False if f.dv else None)}
                self.files[f.path] = f.but(add=add)
                actions.append(
                    {"add": add | {"dataChange": False} | ({"deletionVector": f.dv} if f.dv else {})}
                )
            elif op < 0.85 and gone:  # a removed file restored, with its old, no or a new vector
                f = self.removed.pop(r.choice(gone))
                self.files[f.path] = f
                dv, deleted = (f.dv, f.deleted) if r.random() < 0.4 else (None, frozenset())
                if r.random() < 0.4:
                    deleted = frozenset(i for i in range(len(f.rows)) if r.random() < 0.5)
                    dv = self.make_dv(sorted(deleted))
                st = self.dv_stats(f, deleted) if dv else self.stats(f.rows, len(f.rows), None)
                actions.append(self.added(f, deleted, dv, st))
                changes += [("insert", row) for row in self.files[f.path].live()]
            else:  # a new file of ours, maybe with a vector from the start
                f = self._new_file()
                deleted = frozenset(i for i in range(len(f.rows)) if r.random() < 0.4)
                dv = self.make_dv(sorted(deleted)) if r.random() < 0.6 else None
                deleted = deleted if dv else frozenset()
                st = self.dv_stats(f, deleted) if dv else self.stats(f.rows, len(f.rows), None)
                actions.append(self.added(f, deleted, dv, st))
                changes += [("insert", row) for row in self.files[f.path].live()]
            touched.add(f.path)
        if r.random() < 0.2:  # a cdc file: the commit's changes are its rows
            rows = self.new_rows(r.randint(1, 4))
            types = [r.choice(CHANGE_TYPES) for _ in rows]
            pv = rows[0].get("p")
            name = f"_change_data/cdc-{uuid.UUID(int=r.getrandbits(128))}.parquet"
            (self.root / "_change_data").mkdir(exist_ok=True)
            stored = [
                {k: v for k, v in row.items() if k != "p"} | {"_change_type": t}
                for row, t in zip(rows, types, strict=True)
            ]
            schema = pa.schema(list(self.schema(False)) + [pa.field("_change_type", pa.string())])
            pq.write_table(pa.Table.from_pylist(stored, schema), self.root / name)
            cdc = {
                "path": name,
                "partitionValues": {"p": pv} if self.partitioned else {},
                "dataChange": False,
            }
            actions.append({"cdc": cdc | {"size": (self.root / name).stat().st_size}})
            changes = [
                (t, row | ({"p": pv} if self.partitioned else {})) for row, t in zip(rows, types, strict=True)
            ]
        self.commit(actions, changes)
        if r.random() < 0.3:
            deltalake.DeltaTable(str(self.root)).create_checkpoint()
            self.checkpoints.append(len(self.versions) - 1)

    def _deleted(self, f: _File) -> frozenset[int]:
        r, n = self.rng, len(f.rows)
        mode = r.random()
        if mode < 0.1:
            return frozenset(range(n))
        if mode < 0.17:
            return frozenset()
        if mode < 0.3:  # some deleted rows restored
            return frozenset(i for i in range(n) if r.random() < 0.3)
        more = {i for i in range(n) if r.random() < r.choice([0.1, 0.3, 0.6])}
        start = r.randrange(n)
        return frozenset(f.deleted | more | set(range(start, min(n, start + r.randint(0, 6)))))

    def _new_file(self) -> _File:
        r = self.rng
        rows = self.new_rows(r.randint(1, 12))
        pv = r.choice(["u", "v", None]) if self.partitioned else None
        name = f"own-{uuid.UUID(int=r.getrandbits(128))}.parquet"
        if self.partitioned:
            folder = "p=__HIVE_DEFAULT_PARTITION__" if pv is None else f"p={pv}"
            (self.root / folder).mkdir(exist_ok=True)
            name = f"{folder}/{name}"
            for row in rows:
                row["p"] = pv
        data = pa.Table.from_pylist(
            [{k: v for k, v in row.items() if k != "p"} for row in rows], self.schema(False)
        )
        pq.write_table(data, self.root / name, row_group_size=r.randint(2, 5), data_page_size=64)
        add = {"path": name, "partitionValues": {"p": pv} if self.partitioned else {}, "modificationTime": 0}
        add |= {"size": (self.root / name).stat().st_size, "dataChange": True}
        return _File(name, add["partitionValues"], rows, add)


def _hand_encode_with_empty(rows: list[int], empty_high: list[int]) -> bytes:
    """The portable 64-bit bitmap of ``rows``, plus empty buckets for the ``empty_high`` keys."""
    if not empty_high:
        return _hand_encode(rows)
    body = _hand_encode(rows)
    count = int.from_bytes(body[:8], "little")
    empty = b"".join(h.to_bytes(4, "little") + _empty_roaring32() for h in empty_high)
    return (count + len(empty_high)).to_bytes(8, "little") + body[8:] + empty


def _empty_roaring32() -> bytes:
    from pyroaring import BitMap

    return BitMap().serialize()


def _build(root: Path, seed: int) -> _Table:
    rng = random.Random(seed)
    t = _Table(root, rng, partitioned=rng.random() < 0.5)
    for i in range(rng.randint(2, 3)):
        t.write(first=i == 0)
    t.upgrade()
    for _ in range(rng.randint(4, 7)):
        t.crafted()
    return t


# -- comparison ---------------------------------------------------------------------------------


def _bag(rows: list[dict[str, Any]], columns: list[str] | None = None) -> collections.Counter:
    return collections.Counter(tuple((k, row[k]) for k in (columns or sorted(row))) for row in rows)


def _memory(rows: list[dict[str, Any]], schema: pa.Schema, name: str):
    from datafusion import SessionContext

    ctx = SessionContext()
    data = pa.Table.from_pylist(rows, schema)
    ctx.register_record_batches(name, [data.to_batches() or [pa.RecordBatch.from_pylist([], schema)]])
    return ctx


def _filter(t: _Table, r: random.Random, depth: int = 0) -> str:
    k = r.random()
    if depth < 2 and k < 0.45:
        op = r.choice(["AND", "OR"])
        return f"({_filter(t, r, depth + 1)} {op} {_filter(t, r, depth + 1)})"
    if depth < 2 and k < 0.5:
        return f"NOT ({_filter(t, r, depth + 1)})"
    c = r.randrange(max(t.next_id, 1))
    atoms = [
        f"id < {c}",
        f"id >= {c}",
        f"id BETWEEN {c} AND {c + r.randint(0, 8)}",
        "x IS NULL",
        "x IS NOT NULL",
        f"x = {r.randint(-5, 20)}",
        f"x > {r.randint(-5, 20)}",
        f"s = '{r.choice(['a', 'b', ''])}'",
        "s IS NULL",
    ]
    if t.partitioned:
        atoms += [f"p = '{r.choice('uv')}'", f"p <> '{r.choice('uv')}'", "p IS NULL"]
    return r.choice(atoms)


def _same(ours, ref, sql: str, where: str) -> None:
    got = ours.sql(sql).to_arrow_table().to_pylist()
    want = ref.sql(sql).to_arrow_table().to_pylist()
    assert _bag(got) == _bag(want), f"{where}: {sql}: {len(got)} rows, expected {len(want)}"


def _files_dvs(files: pa.Table) -> dict[str, dict[str, Any] | None]:
    dvs = files.column("deletion_vector").to_pylist()
    return {p: dv for p, dv in zip(files.column("path").to_pylist(), dvs, strict=True)}


def _check_version(t: _Table, v: int, r: random.Random) -> None:
    from datafusion import SessionContext

    where = f"{t.root} version {v}"
    live = t.versions[v]
    rows = [row for f in live.values() for row in f.live()]
    ours = SessionContext()
    dd.register(ours)
    dd.register_table(ours, "t", str(t.root), version=v)
    ref = _memory(rows, t.schema(), "t")
    sqls = ["SELECT * FROM t", "SELECT count(*) AS n FROM t"]
    for f in [_filter(t, r) for _ in range(4)]:
        sqls += [f"SELECT * FROM t WHERE {f}", f"SELECT count(*) AS n FROM t WHERE {f}"]
        if t.partitioned:
            sqls.append(f"SELECT p, count(*) AS n FROM t WHERE {f} GROUP BY p")
    for sql in sqls:
        _same(ours, ref, sql, where)
    n = r.randint(1, 8)
    got = ours.sql(f"SELECT * FROM t LIMIT {n}").to_arrow_table().to_pylist()
    assert len(got) == min(n, len(rows)) and not _bag(got) - _bag(rows), where
    snapshot = dd.DeltaTable(str(t.root)).snapshot(v)
    f = _filter(t, r)
    got = snapshot.scan(predicate=f).to_table().to_pylist()
    want = ref.sql(f"SELECT * FROM t WHERE {f}").to_arrow_table().to_pylist()
    assert _bag(got, t.schema().names) == _bag(want, t.schema().names), f"{where}: scan({f!r})"
    expected = {unquote(p): None if x.dv is None else {"offset": None, **x.dv} for p, x in live.items()}
    assert _files_dvs(snapshot.files()) == expected, where
    if any(c <= v for c in t.checkpoints):
        assert _files_dvs(_parallel(t, v, r)) == expected, f"{where}: parallel phases"


def _parallel(t: _Table, v: int, r: random.Random) -> pa.Table:
    from delta_datafusion.parallel import (
        Parallel,
        ParallelScanMetadata,
        ParallelState,
        concat_files,
        expand_leaf,
    )

    phase = dd.DeltaTable(str(t.root)).snapshot(v).scan().parallel_scan_metadata()
    out = list(phase)
    after = phase.finish()
    if isinstance(after, Parallel):
        blob = after.state.to_bytes()
        units = [u for leaf in after.files for u in expand_leaf(leaf, storage=after.state.storage)]
        r.shuffle(units)
        k = r.randint(1, len(units))
        out += [
            b for i in range(k) for b in ParallelScanMetadata(ParallelState.from_bytes(blob), units[i::k])
        ]
    return concat_files(out)


def _check_feed(t: _Table, a: int, b: int, r: random.Random) -> None:
    from datafusion import SessionContext

    where = f"{t.root} changes {a}..{b}"
    rows = [
        row | {"_change_type": c, "_commit_version": v} for v in range(a, b + 1) for c, row in t.changes[v]
    ]
    extra = [pa.field("_change_type", pa.string()), pa.field("_commit_version", pa.int64())]
    ref = _memory(rows, pa.schema(list(t.schema()) + extra), "f")
    ours = SessionContext()
    dd.register(ours)
    ours.sql(f"CREATE VIEW f AS SELECT * FROM table_changes('{t.root}', {a}, {b})")
    columns = ", ".join(t.schema().names + ["_change_type", "_commit_version"])
    sqls = [f"SELECT {columns} FROM f", "SELECT _change_type, count(*) AS n FROM f GROUP BY _change_type"]
    for f in [_filter(t, r) for _ in range(3)]:
        sqls += [
            f"SELECT {columns} FROM f WHERE {f}",
            f"SELECT _commit_version, _change_type, count(*) AS n FROM f WHERE {f} GROUP BY 1, 2",
        ]
    for sql in sqls:
        _same(ours, ref, sql, where)
    f = _filter(t, r)
    got = dd.DeltaTable(str(t.root)).changes(a, b, predicate=f).to_table().to_pylist()
    want = ref.sql(f"SELECT * FROM f WHERE {f}").to_arrow_table().to_pylist()
    names = t.schema().names + ["_change_type", "_commit_version"]
    assert _bag(got, names) == _bag(want, names), f"{where}: changes(predicate={f!r})"


@pytest.mark.parametrize("seed", SEEDS)
def test_deletion_vector_tables_against_the_reference(tmp_path: Path, seed: int, monkeypatch) -> None:
    monkeypatch.setattr(reader_module, "WINDOW_MIN_BYTES", 0)  # page windows on every file
    t = _build(tmp_path / "t", seed)
    r = random.Random(seed + 1000)
    for v in range(len(t.versions)):
        _check_version(t, v, r)
    last = len(t.versions) - 1
    for a, b in [(0, last), *(sorted((r.randint(0, last), r.randint(0, last))) for _ in range(2))]:
        _check_feed(t, a, b, r)
