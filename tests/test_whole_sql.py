"""Whole SQL statements over a Delta table and its change feed against the same statements over
their rows in memory.

DataFusion gets no statistics, orderings or partitioning from the provider (Statistics unknown),
so it plans on the provider's rows alone; but some of those rows come from the log, not the
files: ``count(*)`` and partition-only scans count numRecords minus a deletion vector's
cardinality, partition values and change columns become constant batches, and a scan's files
are split into fragments. This checks aggregates, joins (hash, sort-merge, nested loop; a table
with itself, with another version, with its change feed), semi/anti joins, window functions, set
operations, DISTINCT, ORDER BY over partition columns and LIMIT/OFFSET in subqueries, under
DataFusion settings that change the plan (target_partitions 1 and 16, batch_size 1 and 7,
sort-merge joins, no round-robin repartition) and with the files in three fragments
(``target_fragments`` is one on two cores, so CI never split a scan before).

The table is written here: NULL partitions (also the empty-string value, NULL per the
protocol), inline deletion vectors (one deleting every row of its file, one on a file as it is
added), files with full, wide (``tightBounds`` false), count-only, numRecords-less and no
statistics, a removed file, four versions, the change data feed on. The reference rows (each
version's, and the feed's: inserts of added files, deletes of the rows a new vector or a remove
takes away) are computed here from what was written. Session 36 ran ~79,000 random statements
of these shapes (and over the corpus, deltalake-written change feeds, 4 fragments over 299
files) without a wrong answer from the provider (the differences were DataFusion's own GROUP BY
ROLLUP over in-memory tables at small batch sizes); this keeps a fixed set of them.
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
CHANGES = pa.schema([*TABLE, ("_change_type", pa.string()), ("_commit_version", pa.int64())])
PROTOCOL = {
    "protocol": {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "changeDataFeed"],
    }
}


def _vector(deleted: set[int]) -> dict[str, Any]:
    """An inline deletion vector of the row indexes ``deleted``."""
    payload = struct.pack("<i", DV_MAGIC) + _hand_encode(sorted(deleted))
    return {
        "storageType": "i",
        "pathOrInlineDv": _z85_encode(payload, "pad"),
        "sizeInBytes": len(payload),
        "cardinality": len(deleted),
    }


class _Writer:
    """Writes the table's files and commits, keeping each version's live rows (the reference)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.rng = random.Random(38)
        self.files: dict[str, dict[str, Any]] = {}
        self.versions: list[pa.Table] = []
        self.next_id = 0
        #: the change feed's rows: (change type, row) of the commit being written, then of all
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.changes: list[dict[str, Any]] = []

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
        self.pending += [("insert", {**r, "p": p or None, "q": q}) for r in rows]
        return {"add": add}

    def _remove_action(self, name: str) -> dict[str, Any]:
        add = self.files[name]["add"]
        remove = {"path": name, "deletionTimestamp": 1, "dataChange": True, "size": add["size"]}
        remove.update(extendedFileMetadata=True, partitionValues=add["partitionValues"])
        if "deletionVector" in add:
            remove["deletionVector"] = add["deletionVector"]
        return {"remove": remove}

    def delete(self, name: str, rows: set[int]) -> list[dict[str, Any]]:
        """A remove of the file and its add again with an inline vector deleting ``rows`` more."""
        f = self.files[name]
        self.pending += [
            ("delete", {**f["rows"][i], "p": f["p"], "q": f["q"]}) for i in sorted(rows - f["deleted"])
        ]
        remove = self._remove_action(name)
        f["deleted"] = f["deleted"] | rows
        f["add"] = {**f["add"], "deletionVector": _vector(f["deleted"])}
        return [remove, {"add": f["add"]}]

    def file_with_vector(self, p: str | None, q: int | None, n: int, stats: str, deleted: set[int]) -> dict:
        """A new data file added with a deletion vector already (as a clone or a restore adds one)."""
        name = self.file(p, q, n, stats)["add"]["path"]
        f = self.files[name]
        f["deleted"] = set(deleted)
        f["add"] = {**f["add"], "deletionVector": _vector(deleted)}
        gone = {f["rows"][i]["id"] for i in deleted}
        self.pending = [(t, r) for t, r in self.pending if r["id"] not in gone]
        return {"add": f["add"]}

    def remove(self, name: str) -> list[dict[str, Any]]:
        remove = self._remove_action(name)
        f = self.files.pop(name)
        live = [r for i, r in enumerate(f["rows"]) if i not in f["deleted"]]
        self.pending += [("delete", {**r, "p": f["p"], "q": f["q"]}) for r in live]
        return [remove]

    def commit(self, actions: list[dict[str, Any]]) -> None:
        version = len(self.versions)
        write_commit(self.root, version, actions)
        self.changes += [{**r, "_change_type": t, "_commit_version": version} for t, r in self.pending]
        self.pending = []
        rows = [
            {**r, "p": f["p"], "q": f["q"]}
            for f in self.files.values()
            for i, r in enumerate(f["rows"])
            if i not in f["deleted"]
        ]
        self.versions.append(pa.Table.from_pylist(rows, schema=TABLE))


def _write_table(root: Path) -> tuple[list[pa.Table], pa.Table]:
    """Four versions of the table: the live rows of each, and the change feed's rows."""
    root.mkdir()
    (root / "_delta_log").mkdir()
    w = _Writer(root)
    config = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    meta = metadata_action(SCHEMA, ["p", "q"], config)
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
    v3 = [
        w.file(None, 2, 4, "wide"),
        w.file("a", 1, 1, "full"),
        w.file_with_vector("b", 2, 6, "full", {1, 4}),
    ]
    w.commit([*w.delete(names[1], set(range(5))), *v3])
    return w.versions, pa.Table.from_pylist(w.changes, schema=CHANGES)


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


Written = tuple[Path, list[pa.Table], pa.Table]

# the change ranges read: table_changes('d3', start, end) against the change rows of the range
RANGES = [(0, 3), (1, 2)]
CHANGE_COLUMNS = "id, k, v, s, p, q, _change_type, _commit_version"
# {c}: a change range (its rows without _commit_timestamp), {a}: the latest version
FEED_QUERIES = [
    "SELECT * FROM {c}",
    "SELECT count(*) FROM {c}",
    "SELECT _change_type, _commit_version, count(*), count(k), sum(id) FROM {c} GROUP BY 1, 2",
    "SELECT p, q, _change_type, count(*) FROM {c} GROUP BY 1, 2, 3",
    "SELECT count(*) FROM (SELECT _change_type FROM {c} LIMIT 5)",
    "SELECT count(*) FROM {c} WHERE p IS NULL AND _change_type = 'delete'",
    "SELECT x.id, x._change_type, y.k FROM {c} x JOIN {a} y ON x.id = y.id",
    "SELECT count(*), count(y.id) FROM {c} x LEFT JOIN {a} y ON x.p = y.p AND x.q = y.q",
    "SELECT id FROM {a} WHERE id NOT IN (SELECT id FROM {c} WHERE _change_type = 'delete')",
    "SELECT id, row_number() OVER (PARTITION BY id ORDER BY _commit_version DESC, _change_type) FROM {c}",
    "SELECT id, k, p, q FROM {a} EXCEPT SELECT id, k, p, q FROM {c} WHERE _change_type = 'insert'",
]
# the same over table_changes() itself (no subquery between it and the aggregate)
BARE_FEED_QUERIES = [
    "SELECT count(*) FROM {c}",
    "SELECT _change_type, p, count(*) FROM {c} GROUP BY 1, 2",
    "SELECT count(*) FROM (SELECT q FROM {c} LIMIT 7)",
]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Written:
    root = tmp_path_factory.mktemp("whole_sql") / "t"
    versions, changes = _write_table(root)
    return root, versions, changes


def _session(settings: dict[str, str], written: Written) -> SessionContext:
    """``d0``.. the table's versions through the provider, ``m0``.. their rows in memory, and
    ``c_<start>_<end>`` the change rows of each range of RANGES in memory."""
    root, versions, changes = written
    config = SessionConfig()
    for key, value in settings.items():
        config = config.set(key, value)
    ctx = SessionContext(config)
    dd.register(ctx)
    for v, rows in enumerate(versions):
        dd.register_table(ctx, f"d{v}", str(root), version=v)
        ctx.register_record_batches(f"m{v}", [rows.to_batches(max_chunksize=5)])
    ctx.register_record_batches("changes", [changes.to_batches(max_chunksize=5)])
    for start, end in RANGES:
        ctx.sql(
            f"CREATE VIEW c_{start}_{end} AS SELECT * FROM changes "
            f"WHERE _commit_version BETWEEN {start} AND {end}"
        )
    return ctx


def _rows(ctx: SessionContext, sql: str, ordered: bool) -> list[tuple] | Counter:
    def norm(x: Any) -> Any:
        return round(x, 9) if isinstance(x, float) and not math.isnan(x) else x

    rows = [tuple(norm(x) for x in r.values()) for r in ctx.sql(sql).to_pylist()]
    return rows if ordered else Counter(rows)


def test_the_reference_is_what_the_provider_reads(table: Written) -> None:
    """Every version's rows, unfiltered, and the table's shapes the statements rely on."""
    ctx = _session({}, table)
    versions, changes = table[1], table[2]
    for v in range(len(versions)):
        assert _rows(ctx, f"SELECT * FROM d{v}", False) == _rows(ctx, f"SELECT * FROM m{v}", False), v
    assert [t.num_rows for t in versions] == [30, 35, 36, 40]  # 3 + 1 + 5 + 2 rows deleted by vectors
    assert versions[-1].column("p").null_count and versions[-1].column("q").null_count
    assert Counter(changes.column("_change_type").to_pylist()) == {"insert": 53, "delete": 13}


def _differences(ctx: SessionContext, pairs: list[tuple[str, str, bool]]) -> list[str]:
    wrong = []
    for ours_sql, theirs_sql, ordered in pairs:
        ours, theirs = _rows(ctx, ours_sql, ordered), _rows(ctx, theirs_sql, ordered)
        if ours != theirs:
            wrong.append(f"{ours_sql}\n  delta:  {ours}\n  memory: {theirs}")
    return wrong


# one fragment is what a scan gets on two cores (the other tests); three under every setting
@pytest.mark.parametrize("settings,fragments", [("default", 1)] + [(s, 3) for s in SETTINGS])
def test_statements_match_the_rows_in_memory(
    table: Written, settings: str, fragments: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dataset, "target_fragments", lambda: fragments)
    ctx = _session(SETTINGS[settings], table)
    latest = len(table[1]) - 1
    assert f"fragments={fragments} " in dd.explain(ctx, f"SELECT * FROM d{latest}")
    a, b = f"d{latest}", "d1"
    pairs = [(q.format(a=a, b=b), q.format(a=f"m{latest}", b="m1"), False) for q in QUERIES]
    pairs += [(q.format(a=a, b=b), q.format(a=f"m{latest}", b="m1"), True) for q in ORDERED]
    for start, end in RANGES:
        feed = f"table_changes('{a}', {start}, {end})"
        memory = f"c_{start}_{end}"
        rows = f"(SELECT {CHANGE_COLUMNS} FROM {feed})"
        pairs += [(q.format(c=rows, a=a), q.format(c=memory, a=f"m{latest}"), False) for q in FEED_QUERIES]
        pairs += [
            (q.format(c=feed, a=a), q.format(c=memory, a=f"m{latest}"), False) for q in BARE_FEED_QUERIES
        ]
    wrong = _differences(ctx, pairs)
    assert not wrong, "\n".join(wrong)
