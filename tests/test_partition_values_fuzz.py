"""Seeded random partition values, names and filters on tables deltalake writes in the test.

Each table is partitioned by one to three columns of every type deltalake writes as a partition
(strings with '/', '%', '=', quotes, spaces, newlines, unicode, '' and NULL; integer extremes;
NaN, -0.0 and infinities; decimals; dates and times from year 1 to 9999, before 1970 and to the
microsecond), named with spaces, dots, quotes, capitals and unicode, a few of them in column
mapping mode 'name'; appends, deletes, updates and replaceWhere overwrites (also of whole
partitions, and updates moving rows to another partition), overwrites and checkpoints make the
versions. For every version:

* ``SELECT *`` through SQL equals deltalake's ``to_pyarrow_table()`` (of the same writes without
  column mapping: deltalake reads its column-mapping tables' data columns as NULL) exactly:
  -0.0 is not 0.0, NaN equals NaN;
* ``Snapshot.files()`` has the partition values of deltalake's ``get_add_actions()``;
* random filters on the partition columns (comparisons, IN lists, BETWEEN, IS [NOT] DISTINCT
  FROM, LIKE, casts to strings, coalesce, AND/OR/NOT) under projections, count, GROUP BY and
  DISTINCT give the same rows as over those rows loaded in memory (pruning never drops a file
  with a matching row; rows answered from the log keep their partition values' sign);

and ``table_changes()`` of random ranges is what turns the version before into the last one
(inserts and post-images added, deletes and pre-images taken away), filtered the same way as its
rows in memory. Session 26 ran ~128,000 such queries over ~1,800 tables (partition-column deletes,
updates and replaceWhere overwrites too; DuckDB's ``delta_scan`` read 6,300 of their versions the
same) without a difference; this keeps a few hundred of them.
"""

from __future__ import annotations

import collections
import datetime as dt
import decimal
import math
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402

D = decimal.Decimal
UTC = dt.timezone.utc
STRINGS = [
    "", "a", "A", "a/b", "a%b", "%2F", "a=b", " a", "a ", " ", "#", "?", "x\ny", "é", "€😀", "a\\b",
    "a:b", "*", "a\tb", "'\"", "__HIVE_DEFAULT_PARTITION__", "null", "a_b", "a%", "_", "x" * 100,
    ".", "\u00a0", "ß", "\x01",
]  # fmt: skip
TIMES = [
    dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(1970, 1, 1), dt.datetime(1, 1, 1),
    dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(2020, 2, 29, 12, 30, 0, 1),
    dt.datetime(1900, 3, 1, 0, 0, 0, 500000), dt.datetime(1582, 10, 10),
]  # fmt: skip
FLOATS = [math.nan, -0.0, 0.0, math.inf, -math.inf, 0.1, 1.5, -2.5, 1e20, 1e-7, 2.0**53 + 2]
#: type name -> (Arrow type, values to draw from)
TYPES: dict[str, tuple[pa.DataType, list]] = {
    "string": (pa.string(), STRINGS),
    "int8": (pa.int8(), [-128, 127, 0, -1, 1]),
    "int16": (pa.int16(), [-32768, 32767, 0, -1, 300]),
    "int32": (pa.int32(), [-(2**31), 2**31 - 1, 0, -1, 70000]),
    "int64": (pa.int64(), [-(2**63), 2**63 - 1, 0, -1, 2**53 + 1]),
    "float32": (pa.float32(), [*FLOATS[:8], 16777217.0]),
    "float64": (pa.float64(), FLOATS),
    "decimal": (pa.decimal128(7, 3), [D("0.000"), D("1.250"), D("9999.999"), D("0.001"), D("12.5")]),
    "decimal0": (pa.decimal128(20, 0), [D(0), D(10**19), D(12345678901234567)]),
    "date": (
        pa.date32(),
        [dt.date(1, 1, 1), dt.date(1969, 12, 31), dt.date(9999, 12, 31), dt.date(2000, 2, 29)],
    ),
    "timestamp": (pa.timestamp("us", "UTC"), [t.replace(tzinfo=UTC) for t in TIMES]),
    "timestamp_ntz": (pa.timestamp("us"), TIMES),
    "bool": (pa.bool_(), [True, False]),
}
NAMES = ["p", "Up Per", "a.b", 'q"t', "ünï", "x-y", "1st", "#h", "%p", "a=b", "select", "ü Ü"]
#: (partition column types, column mapping) of the tables; every type, most in two tables
TABLES = [
    (["string"], False),
    (["string", "int8"], True),
    (["float64"], False),
    (["float32", "decimal"], True),
    (["date", "timestamp_ntz"], False),
    (["timestamp", "bool", "int64"], True),
    (["int16", "int32", "decimal0"], False),
    (["float64", "string"], False),
    (["timestamp", "date"], False),
]
QUERIES_PER_VERSION = 14
CHANGE_RANGES = 2
#: DataFusion errors on rows (or literals) the provider rightly never hands on after pruning
MEMORY_ONLY_ERRORS = ("Cast error", "verflow", "exceeds the representable")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _iso(v: dt.datetime) -> str:
    return f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}.{v.microsecond:06d}"


def _literal(kind: str, v: object) -> str:
    if v is None:
        return "NULL"
    if kind == "string":
        return "'" + str(v).replace("'", "''") + "'"
    if kind.startswith("int"):
        return str(v)
    if kind.startswith("float"):
        assert isinstance(v, float)
        text = f"CAST('{v}' AS DOUBLE)" if math.isnan(v) or math.isinf(v) else repr(v)
        return f"CAST({text} AS REAL)" if kind == "float32" else text
    if kind.startswith("decimal"):
        return f"CAST('{v}' AS DECIMAL({'7,3' if kind == 'decimal' else '20,0'}))"
    if kind == "date":
        assert isinstance(v, dt.date)
        return f"DATE '{v.year:04d}-{v.month:02d}-{v.day:02d}'"
    if kind == "timestamp":
        assert isinstance(v, dt.datetime)
        return f"arrow_cast('{_iso(v)}Z', 'Timestamp(Microsecond, Some(\"UTC\"))')"
    if kind == "timestamp_ntz":
        assert isinstance(v, dt.datetime)
        return f"arrow_cast('{_iso(v)}', 'Timestamp(Microsecond, None)')"
    return "TRUE" if v else "FALSE"


#: partition types whose values deltalake's predicates take as plain literals
_WRITER_LITERALS = {
    "string": lambda v: "'" + v.replace("'", "''") + "'",
    "int8": str,
    "int16": str,
    "int32": str,
    "int64": str,
    "bool": lambda v: "true" if v else "false",
    "date": lambda v: f"'{v.year:04d}-{v.month:02d}-{v.day:02d}'",
}


class _Table:
    """One random table: its partition columns, their values, and the writes that make it."""

    def __init__(self, seed: int, kinds: list[str]):
        self.r = random.Random(seed)
        self.kinds = kinds
        self.names = self.r.sample(NAMES, len(kinds))
        self.pools = [
            self.r.sample(TYPES[k][1], min(4, len(TYPES[k][1]))) + ([None] if self.r.random() < 0.7 else [])
            for k in kinds
        ]
        self.next_id = 0

    def batch(self, n: int) -> pa.Table:
        cols = {
            name: pa.array([self.r.choice(pool) for _ in range(n)], TYPES[k][0])
            for name, k, pool in zip(self.names, self.kinds, self.pools, strict=True)
        }
        cols["id"] = pa.array(range(self.next_id, self.next_id + n), pa.int64())
        cols["w"] = pa.array([self.r.choice(STRINGS) for _ in range(n)], pa.string())
        self.next_id += 1000
        return pa.table(cols)

    def writes(self) -> list[tuple[str, object]]:
        out: list[tuple[str, object]] = [("create", self.batch(self.r.randint(3, 20)))]
        for _ in range(self.r.randint(2, 3)):
            k = self.r.random()
            if k < 0.4:
                out.append(("append", self.batch(self.r.randint(1, 12))))
            elif k < 0.65:
                out.append(("delete", f"id % {self.r.randint(2, 4)} = 0"))
            elif k < 0.8:
                out.append(("update", None))
            elif k < 0.9:
                out.append(("overwrite", self.batch(self.r.randint(1, 8))))
            else:
                out.append(("checkpoint", None))
            plain = [i for i, k in enumerate(self.kinds) if k in _WRITER_LITERALS]
            if plain and self.r.random() < 0.5:
                out.append(self._partition_write(self.r.choice(plain)))
        return out

    def _partition_write(self, i: int) -> tuple[str, object]:
        """A delete, update or replaceWhere overwrite of one partition value (deltalake's SQL)."""
        name, kind, v = self.names[i], self.kinds[i], self.r.choice(self.pools[i])
        where = f"{_q(name)} IS NULL" if v is None else f"{_q(name)} = {_WRITER_LITERALS[kind](v)}"
        k = self.r.random()
        if k < 0.4:
            return ("delete", where)
        if k < 0.7:
            w = self.r.choice(self.pools[i])
            return ("update", ({_q(name): "NULL" if w is None else _WRITER_LITERALS[kind](w)}, where))
        rows = self.batch(self.r.randint(1, 6))
        rows = rows.set_column(i, name, pa.array([v] * rows.num_rows, TYPES[kind][0]))
        return ("replace", (rows, where))

    def value(self, i: int) -> object:
        pool = self.pools[i]
        return self.r.choice(pool) if self.r.random() < 0.8 else self.r.choice(TYPES[self.kinds[i]][1])

    def condition(self, depth: int = 0) -> str:
        r = self.r
        if depth < 2 and r.random() < 0.3:
            a, b = self.condition(depth + 1), self.condition(depth + 1)
            text = f"({a} {r.choice(['AND', 'OR'])} {b})"
            return f"(NOT {text})" if r.random() < 0.2 else text
        i = r.randrange(len(self.names))
        c, kind, v = _q(self.names[i]), self.kinds[i], self.value(i)
        ops = ["=", "<>", "<", "<=", ">", ">=", "IS DISTINCT FROM", "IS NOT DISTINCT FROM", "IN", "NOT IN"]
        ops += ["BETWEEN", "NULL", "CAST", "COALESCE"] + (["LIKE", "NOT LIKE"] if kind == "string" else [])
        op = r.choice(ops)
        if op == "NULL" or (v is None and r.random() < 0.5):
            return f"({c} IS {r.choice(['', 'NOT '])}NULL)"
        if op in ("IN", "NOT IN"):
            values = [self.value(i) for _ in range(r.randint(1, 4))]
            if all(x is None for x in values):  # DataFusion 55 simplifies NULLs in IN lists wrongly
                values.append(r.choice(TYPES[kind][1]))
            values = [x for x in values if x is not None] if op == "NOT IN" or depth else values
            return f"({c} {op} ({', '.join(_literal(kind, x) for x in values)}))"
        if v is None:
            v = r.choice(TYPES[kind][1])
        if op == "BETWEEN":
            w = self.value(i)
            w = r.choice(TYPES[kind][1]) if w is None else w
            return f"({c} BETWEEN {_literal(kind, v)} AND {_literal(kind, w)})"
        if op == "CAST":
            return f"(CAST({c} AS VARCHAR) = CAST({_literal(kind, v)} AS VARCHAR))"
        if op == "COALESCE":
            return f"(coalesce({c}, {_literal(kind, v)}) = {_literal(kind, v)})"
        if op in ("LIKE", "NOT LIKE"):
            text = str(v)
            return f"({c} {op} {_literal(kind, text[: r.randint(0, len(text))] + r.choice(['%', '_', '']))})"
        return f"({c} {op} {_literal(kind, v)})"

    def query(self, source: str, extra: str = "") -> str:
        r = self.r
        where = self.condition()
        cols = ", ".join(_q(n) for n in r.sample(self.names, r.randint(1, len(self.names)))) + extra
        k = r.random()
        if k < 0.45:
            return f"SELECT * FROM {source} WHERE {where}"
        if k < 0.65:
            return f"SELECT {cols} FROM {source} WHERE {where}"
        if k < 0.75:
            return f"SELECT count(*) AS n FROM {source} WHERE {where}"
        if k < 0.9:
            return f"SELECT {cols}, count(*) AS n FROM {source} WHERE {where} GROUP BY {cols}"
        return f"SELECT DISTINCT {cols} FROM {source} WHERE {where}"


def _key(v: object) -> object:
    if isinstance(v, float):
        return "NaN" if math.isnan(v) else repr(v)  # keeps -0.0 apart from 0.0
    return repr(v)


def _rows(table: pa.Table, names: list[str] | None = None) -> collections.Counter:
    table = table.select(names) if names is not None else table
    return collections.Counter(tuple(_key(v) for v in row.values()) for row in table.to_pylist())


def _assert_same(ours: pa.Table, expected: pa.Table, context: str) -> None:
    assert ours.column_names == expected.column_names, context
    a, b = _rows(ours), _rows(expected.cast(ours.schema))
    assert a == b, (
        f"{context}\nonly ours: {list((a - b).items())[:3]}\nonly expected: {list((b - a).items())[:3]}"
    )


def _run(ctx: SessionContext, sql: str) -> tuple[pa.Table | None, str | None]:
    try:
        return ctx.sql(sql).to_arrow_table(), None
    except Exception as e:  # noqa: BLE001 - either side's error is compared
        return None, str(e)


def _compare(ctx: SessionContext, sql: str, ours_source: str, memory_source: str) -> None:
    ours, ours_error = _run(ctx, sql.replace("@T", ours_source))
    expected, expected_error = _run(ctx, sql.replace("@T", memory_source))
    if ours_error or expected_error:
        if expected_error and not ours_error and any(e in expected_error for e in MEMORY_ONLY_ERRORS):
            return
        assert bool(ours_error) == bool(expected_error), (
            f"{sql}\nours: {ours_error}\nmemory: {expected_error}"
        )
        return
    assert ours is not None and expected is not None
    _assert_same(ours, expected, sql)


def _memory(ctx: SessionContext, name: str, table: pa.Table) -> None:
    ctx.register_record_batches(name, [table.to_batches() or [pa.RecordBatch.from_pylist([], table.schema)]])


def _write(path: str, writes: list[tuple[str, object]], partitions: list[str], mapping: bool) -> None:
    config = {"delta.enableChangeDataFeed": "true", "delta.checkpointInterval": "3"}
    if mapping:
        config.update(
            {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}
        )
    for kind, arg in writes:
        if kind == "create":
            write_deltalake(path, arg, partition_by=partitions, configuration=config)
        elif kind in ("append", "overwrite"):
            write_deltalake(path, arg, mode=kind)
        elif kind == "delete":
            DeltaTable(path).delete(str(arg))
        elif kind == "update":
            updates, where = arg if arg else ({"w": "'updated'"}, "id % 3 = 1")
            DeltaTable(path).update(updates=updates, predicate=where)
        elif kind == "replace":
            rows, where = arg
            write_deltalake(path, rows, mode="overwrite", predicate=where)
        else:
            DeltaTable(path).create_checkpoint()


def _partition_values(actions: pa.Table, names: list[str]) -> collections.Counter:
    cols = [actions.column(f"partition.{n}").to_pylist() for n in names]
    return collections.Counter(tuple(_key(v) for v in row) for row in zip(*cols, strict=True))


@pytest.mark.parametrize(("seed", "kinds", "mapping"), [(i, k, m) for i, (k, m) in enumerate(TABLES)])
def test_partition_values_agree_with_deltalake_and_the_rows_in_memory(
    tmp_path: Path, seed: int, kinds: list[str], mapping: bool
) -> None:
    table = _Table(seed, kinds)
    writes = table.writes()
    plain = str(tmp_path / "plain")
    _write(plain, writes, table.names, mapping=False)
    path = str(tmp_path / "mapped") if mapping else plain
    if mapping:
        _write(path, writes, table.names, mapping=True)
    latest = DeltaTable(plain).version()
    assert DeltaTable(path).version() == latest
    for version in range(latest + 1):
        context = f"{table.names} {kinds} at version {version}"
        theirs = DeltaTable(plain, version=version)
        ctx = SessionContext()
        dd.register(ctx)
        dd.register_table(ctx, "t", path, version=version)
        rows = ctx.sql("SELECT * FROM t").to_arrow_table()
        expected = theirs.to_pyarrow_table()
        _assert_same(rows, expected.select(rows.column_names), f"SELECT * of {context}")
        files = dd.DeltaTable(path).snapshot(version=version).files()
        ours_values = collections.Counter(
            tuple(_key(v) for v in row.values()) for row in files.column("partition_values").to_pylist()
        )
        assert ours_values == _partition_values(
            pa.table(theirs.get_add_actions(flatten=True)), table.names
        ), context
        _memory(ctx, "m", rows)
        for _ in range(QUERIES_PER_VERSION):
            _compare(ctx, table.query("@T"), "t", "m")
    ctx = SessionContext()
    dd.register(ctx)
    for i in range(CHANGE_RANGES):
        start = table.r.randint(0, latest)
        end = table.r.randint(start, latest)
        feed = ctx.sql(f"SELECT * FROM table_changes('{path}', {start}, {end})").to_arrow_table()
        kinds_of = feed.column("_change_type")
        plus = feed.filter(pc.is_in(kinds_of, pa.array(["insert", "update_postimage"])))
        minus = feed.filter(pc.is_in(kinds_of, pa.array(["delete", "update_preimage"])))
        after = DeltaTable(plain, version=end).to_pyarrow_table()
        before = DeltaTable(plain, version=start - 1).to_pyarrow_table() if start else after.slice(0, 0)
        names = [*table.names, "id", "w"]
        assert _rows(after, names) + _rows(minus, names) == _rows(before, names) + _rows(plus, names), (
            f"table_changes {start}..{end} of {table.names} {kinds}"
        )
        name = f"feed{i}"
        _memory(ctx, name, feed)
        source = f"table_changes('{path}', {start}, {end})"
        for _ in range(QUERIES_PER_VERSION // 2):
            _compare(ctx, table.query("@T", ", _change_type, _commit_version"), source, name)
