"""Whole SQL statements over a Delta table against the same statements over its rows in memory.

DataFusion gets no statistics, orderings or partitioning from the provider (Statistics unknown),
so what it plans on is the provider's rows alone; but some of those rows come from the log, not
the files: ``count(*)`` and partition-only scans count numRecords minus a deletion vector's
cardinality, partition values become constant batches, and a scan's files are split into
fragments. This checks aggregates, joins (hash, sort-merge, nested loop; a table with itself
and with another version), semi/anti joins, window functions, set operations, DISTINCT, ORDER BY
over partition columns and LIMIT/OFFSET in subqueries, under DataFusion settings that change
the plan (target_partitions 1 and 16, batch_size 1 and 7, sort-merge joins, no round-robin
repartition) and with the files in three fragments (``target_fragments`` is one on two cores,
so CI never splits a scan otherwise).

The table is written here: NULL partitions (also the empty-string value, NULL per the
protocol), inline deletion vectors (one deleting every row of its file), files with full, wide
(``tightBounds`` false), count-only, numRecords-less and no statistics, a removed file, several
versions. The reference rows are computed here from what was written. Session 36 ran ~40,000
random statements of these shapes (and the corpus, change feeds, 4 fragments over 299 files)
without a difference; this keeps a fixed set of them.
"""

from __future__ import annotations

import json
import math
import random
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import add_action, metadata_action, write_commit
from datafusion import SessionConfig, SessionContext
from test_dv import _hand_encode, _z85_encode

import delta_datafusion as dd
from delta_datafusion.datafusion import dataset
from delta_datafusion.dv import DV_MAGIC

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": n, "type": t, "nullable": True, "metadata": {}}
        for n, t in [
            ("id", "long"),
            ("k", "integer"),
            ("v", "double"),
            ("s", "string"),
            ("p", "string"),
            ("q", "integer"),
        ]
    ],
}
ROWS = pa.schema([("id", pa.int64()), ("k", pa.int32()), ("v", pa.float64()), ("s", pa.string())])
TABLE = pa.schema([*ROWS, ("p", pa.string()), ("q", pa.int32())])
PROTOCOL = {
    "protocol": {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors"],
    }
}


class _Writer:
    """Writes the table's files and commits, keeping each version's live rows (the reference)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rng = random.Random(38)
        self.files: dict[str, dict[str, Any]] = {}
        self.versions: list[pa.Table] = []
        self.next_id = 0

    def file(self, p: str | None, q: int | None, n: int, stats: str) -> dict[str, Any]:
        """A data file of ``n`` rows in partition (p, q), its add action with ``stats`` of a kind."""
        rng = self.rng
        rows = [
            {
                "id": self.next_id + i,
                "k": None if rng.random() < 0.25 else rng.randint(-2, 4),
                "v": None if rng.random() < 0.2 else round(rng.uniform(-3, 3), 2),
                "s": None if rng.random() < 0.2 else rng.choice(["a", "b", "cc"]),
            }
            for i in range(n)
        ]
        self.next_id += n
        name = f"f{len(self.files)}-{len(self.versions)}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=ROWS), self.root / name, row_group_size=2)
        full: dict[str, Any] = {"numRecords": n, "minValues": {}, "maxValues": {}, "nullCount": {}}
        for c in ("id", "k", "v", "s"):
            values = [r[c] for r in rows if r[c] is not None]
            full["nullCount"][c] = n - len(values)
            if values:
                full["minValues"][c], full["maxValues"][c] = min(values), max(values)
        if stats == "wide":
            full["tightBounds"] = False
            full["minValues"] = {c: v - 5 for c, v in full["minValues"].items() if c != "s"}
        chosen = {
            "full": full,
            "wide": full,
            "count only": {"numRecords": n},
            "no numRecords": {k: v for k, v in full.items() if k != "numRecords"},
            "none": None,
        }[stats]
        extra = {} if chosen is None else {"stats": json.dumps(chosen)}
        pv = {"p": p, "q": None if q is None else str(q)}
        add = add_action(self.root, name, partitionValues=pv, **extra)
        # an empty string partition value is NULL (PROTOCOL.md, Partition Value Serialization)
        self.files[name] = {"rows": rows, "p": p or None, "q": q, "add": add, "deleted": set()}
        return {"add": add}

    def delete(self, name: str, rows: set[int]) -> list[dict[str, Any]]:
        """A remove of the file and its add again with an inline vector deleting ``rows`` more."""
        f = self.files[name]
        f["deleted"] = f["deleted"] | rows
        payload = struct.pack("<i", DV_MAGIC) + _hand_encode(sorted(f["deleted"]))
        dv = {
            "storageType": "i",
            "pathOrInlineDv": _z85_encode(payload, "pad"),
            "sizeInBytes": len(payload),
            "cardinality": len(f["deleted"]),
        }
        old = f["add"]
        remove = {"path": name, "deletionTimestamp": 1, "dataChange": True, "size": old["size"]}
        if "deletionVector" in old:
            remove["deletionVector"] = old["deletionVector"]
        f["add"] = {**old, "deletionVector": dv}
        return [{"remove": remove}, {"add": f["add"]}]

    def remove(self, name: str) -> list[dict[str, Any]]:
        f = self.files.pop(name)
        return [
            {"remove": {"path": name, "deletionTimestamp": 1, "dataChange": True, "size": f["add"]["size"]}}
        ]

    def commit(self, actions: list[dict[str, Any]]) -> None:
        write_commit(self.root, len(self.versions), actions)
        rows = [
            {**r, "p": f["p"], "q": f["q"]}
            for f in self.files.values()
            for i, r in enumerate(f["rows"])
            if i not in f["deleted"]
        ]
        self.versions.append(pa.Table.from_pylist(rows, schema=TABLE))


def _write_table(root: Path) -> list[pa.Table]:
    """Four versions of the table; the live rows of each."""
    root.mkdir()
    (root / "_delta_log").mkdir()
    w = _Writer(root)
    meta = metadata_action(SCHEMA, ["p", "q"], {"delta.enableDeletionVectors": "true"})
    v0 = [
        w.file("a", 1, 7, "full"),
        w.file(None, 1, 5, "full"),
        w.file("a", None, 6, "wide"),
        w.file("b", 2, 4, "none"),
        w.file("", 2, 5, "no numRecords"),
        w.file(None, None, 3, "count only"),
    ]
    w.commit([PROTOCOL, meta, *v0])
    names = list(w.files)
    w.commit([*w.delete(names[0], {0, 3}), *w.delete(names[2], {5}), w.file("c", 3, 8, "full")])
    w.commit([*w.remove(names[3]), *w.delete(names[0], {4}), w.file("b", 1, 6, "count only")])
    w.commit([*w.delete(names[1], set(range(5))), w.file(None, 2, 4, "wide"), w.file("a", 1, 1, "full")])
    return w.versions


# {a}: the latest version, {b}: version 1
QUERIES = [
    "SELECT count(*) FROM {a}",
    "SELECT count(*), count(k), count(p), count(q), count(DISTINCT p), count(DISTINCT q), min(id), max(id), sum(k) FROM {a}",
    "SELECT count(*), count(p), count(DISTINCT (p, q)), min(q), max(p) FROM {b}",
    "SELECT p, q, count(*), count(k), min(v), max(s) FROM {a} GROUP BY p, q",
    "SELECT p, count(*) FROM {a} WHERE q IS NULL GROUP BY p",
    "SELECT q, count(*), sum(id) FROM {a} WHERE p IS NULL GROUP BY q",
    "SELECT p IS NULL AS pn, count(*), count(DISTINCT k) FROM {a} GROUP BY 1 HAVING count(*) > 1",
    "SELECT count(*) FROM {a} WHERE id > 10",
    "SELECT count(*) FROM {a} WHERE k IS NOT NULL AND p = 'a'",
    "SELECT count(*), max(q) FROM {a} WHERE p IS NOT NULL",
    "SELECT count(*) FROM {a} WHERE v > -100",
    "SELECT count(*) FROM (SELECT p FROM {a} LIMIT 5 OFFSET 2)",
    "SELECT count(*) FROM (SELECT * FROM {a} WHERE q = 1 LIMIT 100)",
    "SELECT count(*) FROM (SELECT q FROM {b} WHERE p IS NULL LIMIT 4)",
    "SELECT DISTINCT p, q FROM {a}",
    "SELECT DISTINCT q FROM {b} WHERE id > 3",
    "SELECT x.id, y.id FROM {a} x JOIN {b} y ON x.id = y.id",
    "SELECT x.p, x.q, y.id FROM {a} x LEFT JOIN {b} y ON x.p = y.p AND x.q = y.q AND x.id = y.id",
    "SELECT count(*), count(x.id), count(y.id) FROM {a} x FULL JOIN {b} y ON x.id = y.id",
    "SELECT count(*), sum(x.id) FROM {a} x JOIN {a} y ON x.p = y.p AND x.q = y.q",
    "SELECT count(*) FROM {a} x JOIN {b} y ON (x.p IS NOT DISTINCT FROM y.p) AND x.k < y.k",
    "SELECT count(*), sum(x.id - y.id) FROM {a} x JOIN {b} y ON x.k < y.k",
    "SELECT id FROM {a} WHERE id NOT IN (SELECT id FROM {b})",
    "SELECT id FROM {a} WHERE q IN (SELECT q FROM {b} WHERE p IS NULL)",
    "SELECT id FROM {a} WHERE k NOT IN (SELECT k FROM {b} WHERE p = 'a')",
    "SELECT id FROM {a} x WHERE EXISTS (SELECT 1 FROM {b} y WHERE y.p = x.p AND y.id > x.id)",
    "SELECT id FROM {a} x WHERE NOT EXISTS (SELECT 1 FROM {b} y WHERE y.q = x.q)",
    "SELECT id, row_number() OVER (PARTITION BY p, q ORDER BY id), count(*) OVER (PARTITION BY q), "
    "sum(k) OVER (PARTITION BY p ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW), "
    "lag(id) OVER (ORDER BY id) FROM {a}",
    "SELECT p, q, rank() OVER (ORDER BY p NULLS FIRST, q NULLS LAST), ntile(3) OVER (ORDER BY id) FROM {a}",
    "SELECT p, q FROM {a} UNION SELECT p, q FROM {b}",
    "SELECT id, k FROM {a} EXCEPT SELECT id, k FROM {b}",
    "SELECT p, q FROM {a} INTERSECT ALL SELECT p, q FROM {b}",
    "SELECT count(*) FROM (SELECT p FROM {a} UNION ALL SELECT p FROM {b})",
    "SELECT (SELECT count(*) FROM {a}) AS na, (SELECT count(*) FROM {b} WHERE p IS NULL) AS nb",
    "SELECT count(*) FROM {a} UNION ALL SELECT count(*) FROM {b}",
    "WITH c AS (SELECT * FROM {a} WHERE q IS NOT NULL) "
    "SELECT count(*) AS n, (SELECT count(*) FROM c WHERE p IS NULL) AS m FROM c",
]
ORDERED = [
    "SELECT p, q, id FROM {a} ORDER BY p NULLS FIRST, q DESC, id LIMIT 9",
    "SELECT id, p FROM {a} ORDER BY q NULLS FIRST, id DESC LIMIT 5 OFFSET 3",
    "SELECT q, p FROM {b} ORDER BY q DESC NULLS LAST, p LIMIT 20",
]
SETTINGS = {
    "default": {},
    "one partition": {"datafusion.execution.target_partitions": "1"},
    "16 partitions, batches of 1": {
        "datafusion.execution.target_partitions": "16",
        "datafusion.execution.batch_size": "1",
    },
    "sort-merge joins": {
        "datafusion.optimizer.prefer_hash_join": "false",
        "datafusion.optimizer.repartition_joins": "true",
        "datafusion.execution.target_partitions": "4",
    },
    "no round-robin, batches of 7": {
        "datafusion.optimizer.enable_round_robin_repartition": "false",
        "datafusion.optimizer.filter_null_join_keys": "true",
        "datafusion.execution.batch_size": "7",
    },
}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[pa.Table]]:
    root = tmp_path_factory.mktemp("whole_sql") / "t"
    return root, _write_table(root)


def _session(settings: dict[str, str], root: Path, versions: list[pa.Table]) -> SessionContext:
    """``d0``.. the table's versions through the provider, ``m0``.. their rows in memory."""
    config = SessionConfig()
    for key, value in settings.items():
        config = config.set(key, value)
    ctx = SessionContext(config)
    for v, rows in enumerate(versions):
        dd.register_table(ctx, f"d{v}", str(root), version=v)
        ctx.register_record_batches(f"m{v}", [rows.to_batches(max_chunksize=5)])
    return ctx


def _rows(ctx: SessionContext, sql: str, ordered: bool) -> list[tuple] | Counter:
    def norm(x: Any) -> Any:
        return round(x, 9) if isinstance(x, float) and not math.isnan(x) else x

    rows = [tuple(norm(x) for x in r.values()) for r in ctx.sql(sql).to_pylist()]
    return rows if ordered else Counter(rows)


def test_the_reference_is_what_the_provider_reads(table: tuple[Path, list[pa.Table]]) -> None:
    """Every version's rows, unfiltered, and the table's shapes the statements rely on."""
    root, versions = table
    ctx = _session({}, root, versions)
    for v in range(len(versions)):
        assert _rows(ctx, f"SELECT * FROM d{v}", False) == _rows(ctx, f"SELECT * FROM m{v}", False), v
    assert [t.num_rows for t in versions] == [30, 35, 36, 36]  # 3 + 1 + 5 rows deleted by vectors
    assert versions[-1].column("p").null_count and versions[-1].column("q").null_count


# one fragment is what a scan gets on two cores (the other tests); three under every setting
@pytest.mark.parametrize("settings,fragments", [("default", 1)] + [(s, 3) for s in SETTINGS])
def test_statements_match_the_rows_in_memory(
    table: tuple[Path, list[pa.Table]], settings: str, fragments: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dataset, "target_fragments", lambda: fragments)
    root, versions = table
    ctx = _session(SETTINGS[settings], root, versions)
    latest = len(versions) - 1
    assert f"fragments={fragments} " in dd.explain(ctx, f"SELECT * FROM d{latest}")
    wrong = []
    for sql, ordered in [(q, False) for q in QUERIES] + [(q, True) for q in ORDERED]:
        ours = _rows(ctx, sql.format(a=f"d{latest}", b="d1"), ordered)
        theirs = _rows(ctx, sql.format(a=f"m{latest}", b="m1"), ordered)
        if ours != theirs:
            wrong.append(f"{sql}\n  delta:  {ours}\n  memory: {theirs}")
    assert not wrong, "\n".join(wrong)
