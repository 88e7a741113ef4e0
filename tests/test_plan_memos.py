"""A snapshot keeps what planning a filter costs: the typed statistics of the files partition
pruning kept, and each filter's scan plan, so a query repeated on a registered table does not
prune again; another snapshot (a new registration) plans anew, to the same rows."""

from __future__ import annotations

import deltalake
import pyarrow as pa
from conftest import count_stats_parses
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import DeltaTable


def test_planning_types_a_candidate_set_once_per_snapshot(tmp_path, monkeypatch):
    """select_files keeps the typed statistics of the files partition pruning kept, per kept set
    and columns: a query planned again on the snapshot parses no stats JSON, and what it keeps is
    what a snapshot of its own keeps."""
    import pyarrow.compute as pc

    from delta_datafusion.scan import as_predicate

    for i, region in enumerate(["a", "b", "a", "c"]):
        rows = pa.table({"region": [region] * 3, "x": [10 * i, 10 * i + 1, 10 * i + 2]})
        deltalake.write_deltalake(str(tmp_path), rows, mode="append", partition_by=["region"])
    parsed = count_stats_parses(monkeypatch)
    snap = DeltaTable(str(tmp_path)).snapshot()
    on_x = as_predicate(pc.field("x") > 15, snap.schema)
    on_both = as_predicate((pc.field("x") > 15) & (pc.field("region") == "a"), snap.schema)

    def paths(pred) -> list[str]:
        return sorted(snap.select_files(pred)[0].column("path").to_pylist())

    first = paths(on_x)
    assert parsed == [4]
    assert paths(on_x) == first and parsed == [4]  # typed once
    both = paths(on_both)
    assert parsed == [4, 2]  # another kept set: typed (two files of region a)
    assert paths(on_both) == both and paths(on_x) == first and parsed == [4, 2]
    own = DeltaTable(str(tmp_path)).snapshot()
    assert own is not snap
    for pred, got in ((on_x, first), (on_both, both)):
        assert sorted(own.select_files(pred)[0].column("path").to_pylist()) == got
    assert len(first) == 2 and len(both) == 1
    snap.files()  # the full table built: planning uses it, the kept typings go
    assert "_typed_memo" not in snap.__dict__
    assert paths(on_x) == first


def test_a_filter_is_planned_once_per_snapshot(tmp_path, monkeypatch):
    """A registered snapshot keeps each filter's plan: a query repeated on it prunes once; another
    literal, another column or a count that may come from the log is planned apart, and a new
    registration (a snapshot of its own) plans again, to the same rows."""
    from delta_datafusion import snapshot as snapshot_module

    for i, region in enumerate(["a", "b", "a", "c"]):
        rows = pa.table({"region": [region] * 3, "x": [10 * i, 10 * i + 1, 10 * i + 2]})
        deltalake.write_deltalake(str(tmp_path), rows, mode="append", partition_by=["region"])
    planned: list[str] = []
    real = snapshot_module.Snapshot.select_files

    def counting(self, predicate=None, row_counts=True):
        planned.append(str(predicate))
        return real(self, predicate, row_counts)

    monkeypatch.setattr(snapshot_module.Snapshot, "select_files", counting)

    ctx = SessionContext()
    dd.register_table(ctx, "t", str(tmp_path))

    def query(sql: str) -> list:
        return ctx.sql(sql).to_pylist()

    queries = {
        "SELECT count(*) AS n FROM t WHERE x > 15": [{"n": 6}],
        "SELECT count(*) AS n FROM t WHERE x > 25": [{"n": 3}],
        "SELECT sum(x) AS s FROM t WHERE x > 15": [{"s": 20 + 21 + 22 + 30 + 31 + 32}],
        "SELECT count(*) AS n FROM t WHERE region = 'a'": [{"n": 6}],
    }
    for sql, want in queries.items():
        assert query(sql) == want, sql
    first = len(planned)
    assert first == len(queries)  # count(*) and sum(x) of one filter: two plans (row counts or not)
    for sql, want in queries.items():
        assert query(sql) == want, sql
    assert len(planned) == first  # every plan kept
    dd.register_table(ctx, "t", str(tmp_path))  # registered again: a snapshot of its own
    for sql, want in queries.items():  # plans again, to the same rows
        assert query(sql) == want, sql
    assert len(planned) == 2 * first


def test_plans_of_in_lists_with_zero_and_negative_zero_are_kept_apart(tmp_path):
    """DataFusion's IN list tells -0.0 from 0.0 (it hashes the bits; ``=`` does not), so ``pf IN
    (-0.0, ...)`` and ``pf IN (0.0, ...)`` select different partitions of a float column: the
    second query must not reuse the first's plan (its files, proven to match whole)."""
    written = []
    for pf, ids in ((-0.0, [1, 2]), (0.0, [3, 4]), (1.5, [5])):
        written.append(pa.table({"pf": pa.array([pf] * len(ids), pa.float64()), "id": ids}))
        deltalake.write_deltalake(str(tmp_path), written[-1], mode="append", partition_by=["pf"])
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(tmp_path))
    ctx.register_record_batches("mem", [pa.concat_tables(written).to_batches()])
    for where in (
        "pf IN (0.0, 2.0, 3.0, 4.0)",
        "pf IN (-0.0, 2.0, 3.0, 4.0)",
        "pf NOT IN (0.0, 2.0, 3.0, 4.0)",
    ):
        want = ctx.sql(f"SELECT id FROM mem WHERE {where} ORDER BY id").to_pydict()["id"]
        got = ctx.sql(f"SELECT id FROM t WHERE {where} ORDER BY id").to_pydict()["id"]
        assert got == want, where
    assert want == [1, 2, 5]  # the last: -0.0 is not in a list of 0.0


def test_literals_of_zero_and_negative_zero_differ():
    """Literals key plans (and compare predicates): -0.0 and 0.0 are different IN-list items."""
    from delta_datafusion.predicate import Literal

    zero, neg = Literal(pa.scalar(0.0)), Literal(pa.scalar(-0.0))
    assert zero != neg and hash(zero) != hash(neg)
    nan = float("nan")
    assert Literal(pa.scalar(-0.0)) == neg and Literal(pa.scalar(nan)) == Literal(pa.scalar(nan))


def test_plans_of_in_lists_with_nan_and_negative_nan_are_kept_apart(tmp_path):
    """``-('NaN'::double)`` has the sign bit set: DataFusion's IN list does not find it in a NaN
    row, so ``pf IN (-NaN, ...)`` and ``pf IN (NaN, ...)`` plan apart (a shared plan skipped the
    NaN partition for the second)."""
    written = []
    for pf, ids in ((float("nan"), [1, 2]), (1.5, [3])):
        written.append(pa.table({"pf": pa.array([pf] * len(ids), pa.float64()), "id": ids}))
        deltalake.write_deltalake(str(tmp_path), written[-1], mode="append", partition_by=["pf"])
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(tmp_path))
    ctx.register_record_batches("mem", [pa.concat_tables(written).to_batches()])
    neg, nan = "-('NaN'::double)", "'NaN'::double"
    for where in (f"pf IN ({neg}, 1.5, 2.0, 3.0)", f"pf IN ({nan}, 1.5, 2.0, 3.0)"):
        want = ctx.sql(f"SELECT id FROM mem WHERE {where} ORDER BY id").to_pydict()["id"]
        got = ctx.sql(f"SELECT id FROM t WHERE {where} ORDER BY id").to_pydict()["id"]
        assert got == want, where
    assert want == [1, 2, 3]
