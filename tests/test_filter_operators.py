"""The ``operator`` wrappers installed for datafusion-python's filter conversion change nothing
but the one failing case (a pyarrow scalar operand), and make those queries answer correctly
through the provider and ``table_changes()``."""

from __future__ import annotations

import operator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.datafusion import filter_operators  # noqa: E402


def test_wrappers_keep_every_other_behaviour() -> None:
    filter_operators.install()
    filter_operators.install()  # idempotent: wrapped once
    assert hasattr(operator.and_, "__delta_datafusion_wrapped__")
    assert not hasattr(operator.and_.__delta_datafusion_wrapped__, "__delta_datafusion_wrapped__")
    assert operator.and_(6, 3) == 2 and operator.or_(6, 3) == 7 and operator.invert(5) == -6
    assert operator.and_({1, 2}, {2, 3}) == {2}
    assert operator.and_(True, False) is False
    for bad in (lambda: operator.and_("a", 1), lambda: operator.or_(1.5, 2), lambda: operator.invert("x")):
        with pytest.raises(TypeError):
            bad()
    # the repaired case: a scalar on either side of an expression
    e = operator.and_(pa.scalar(None, pa.bool_()), pc.field("x") > 1)
    assert isinstance(e, pc.Expression)
    t = pa.table({"x": [0, 2, None]})
    assert t.filter(e).num_rows == 0
    assert t.filter(operator.or_(pa.scalar(False), pc.field("x") > 1)).column("x").to_pylist() == [2]
    assert t.filter(operator.invert(pa.scalar(False)) & (pc.field("x") > 1)).num_rows == 1


@pytest.mark.parametrize(
    "where, expected",
    [
        ("id BETWEEN NULL AND 2", []),
        ("id NOT BETWEEN NULL AND 2", [3]),
        ("(id = 1 AND id = 2) AND s = 'a'", []),
        ("(id = 1 AND id = 2) OR s = 'a'", [1]),
        ("NULL OR id < 3", [1, 2]),
        # two folded constants meet as two scalars (pyarrow: no boolean bitwise kernel)
        ("id NOT IN (NULL) AND s NOT IN (NULL)", []),
        ("s > NULL AND id IN (NULL)", []),
        ("id IN (NULL) OR s IN (NULL)", []),
        ("NOT (id IN (NULL) AND s IN (NULL))", []),
    ],
)
def test_constant_conjuncts_through_provider_and_change_feed(tmp_path, where: str, expected: list) -> None:
    path = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1, 2, 3, None], pa.int64()), "s": ["a", "b", None, "d"]})
    write_deltalake(path, rows, configuration={"delta.enableChangeDataFeed": "true"})
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", path)
    for source in ("t", f"table_changes('{path}', 0)"):
        got = ctx.sql(f"SELECT id FROM {source} WHERE {where} ORDER BY id").to_pydict()["id"]
        assert got == expected, (source, where)
        n = ctx.sql(f"SELECT count(*) AS n FROM {source} WHERE {where}").to_pydict()["n"]
        assert n == [len(expected)], (source, where)
