"""A query reads the snapshot it was planned on: commits landing between ``ctx.sql()`` and the
collect (or while its stream is being read), a table registered again meanwhile, and other
queries running on the same session in threads change nothing in its rows."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
from datafusion import SessionContext
from deltalake import write_deltalake

import delta_datafusion as dd


def _ids(lo: int, hi: int) -> pa.Table:
    return pa.table({"id": pa.array(range(lo, hi), pa.int64())})


def test_a_commit_between_planning_and_execution_is_not_read(tmp_path: Path) -> None:
    """A folder-catalog table is resolved to its latest version when the statement is planned
    (``ctx.sql``); the commit landing before the collect is the next statement's."""
    path = tmp_path / "lake" / "t"
    write_deltalake(str(path), _ids(0, 100))
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    registered = ctx.sql("SELECT count(*) AS n, sum(id) AS s FROM t")
    folder = ctx.sql("SELECT count(*) AS n, sum(id) AS s FROM lake.default.t")
    both = ctx.sql(
        "SELECT (SELECT count(*) FROM lake.default.t) AS a, (SELECT max(id) FROM lake.default.t) AS b"
    )
    write_deltalake(str(path), _ids(100, 150), mode="append")
    assert registered.to_pydict() == {"n": [100], "s": [4950]}
    assert folder.to_pydict() == {"n": [100], "s": [4950]}
    assert both.to_pydict() == {"a": [100], "b": [99]}
    assert ctx.sql("SELECT count(*) AS n FROM lake.default.t").to_pydict() == {"n": [150]}


def test_a_stream_keeps_its_snapshot_through_an_overwrite_and_a_new_registration(tmp_path: Path) -> None:
    """An overwrite (its files removed from the log, not from storage) and registering the name
    again while a query's stream is read half: the stream still gives the planned version's rows."""
    path = tmp_path / "lake" / "t"
    n = 120_000  # three files of 40,000 rows: the first batch holds the first file's first rows
    for lo in range(0, n, n // 3):
        write_deltalake(str(path), _ids(lo, lo + n // 3), mode="append")
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    for name in ("t", "lake.default.t"):
        stream = ctx.sql(f"SELECT id FROM {name}").execute_stream()
        batches = iter(stream)
        first = next(batches).to_pyarrow()
        assert first.num_rows < n  # the premise: the stream is read half when the table changes
        write_deltalake(str(path), _ids(1000, 1010), mode="overwrite")
        dd.register_table(ctx, "t", str(path))
        ids = first.column("id").to_pylist() + [
            i for b in batches for i in b.to_pyarrow().column("id").to_pylist()
        ]
        assert sorted(ids) == list(range(n)), name
        # the next statement reads the overwrite, then the table is as at the start again
        assert ctx.sql(f"SELECT count(*) AS n FROM {name}").to_pydict() == {"n": [10]}
        write_deltalake(str(path), _ids(0, n), mode="overwrite")
        dd.register_table(ctx, "t", str(path))


def test_queries_on_one_session_in_threads(tmp_path: Path) -> None:
    """Four threads running different queries (filters, counts from the log, LIMIT, a join of
    the table with itself) on one session each get the answers a single thread gets."""
    path = tmp_path / "t"
    for part in ("a", "b", "c"):
        rows = pa.table(
            {
                "id": pa.array(range(200), pa.int64()),
                "p": [part] * 200,
                "v": [f"v{i % 7}" for i in range(200)],
            }
        )
        write_deltalake(str(path), rows, mode="append", partition_by=["p"])
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(path))
    queries = [
        "SELECT count(*) AS n FROM t",
        "SELECT p, count(*) AS n FROM t WHERE p <> 'b' GROUP BY p ORDER BY p",
        "SELECT count(*) AS n, sum(id) AS s FROM t WHERE id > 50 AND v = 'v3'",
        "SELECT id FROM t WHERE p = 'c' ORDER BY id DESC LIMIT 3",
        "SELECT count(*) AS n FROM t x JOIN t y ON x.id = y.id AND x.p = y.p WHERE x.v = 'v1'",
    ]
    want = {q: ctx.sql(q).to_pylist() for q in queries}
    wrong: list[tuple[str, object]] = []

    def run(k: int) -> None:
        for i in range(12):
            q = queries[(k + i) % len(queries)]
            try:
                got = ctx.sql(q).to_pylist()
            except Exception as e:  # noqa: BLE001 - recorded, asserted below
                got = e
            if got != want[q]:
                wrong.append((q, got))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
