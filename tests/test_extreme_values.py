"""Extreme values through every read path, on tables written by deltalake: the package's rows
must be deltalake's own (read whole, then filtered by DataFusion in memory)."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import DeltaTable as DeltalakeTable  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402

DEC_SCHEMA = pa.schema([("id", pa.int64()), ("d10", pa.decimal128(38, 10)), ("d38", pa.decimal128(38, 38))])
MAX_D10 = "9" * 28 + "." + "9" * 10  # strings: Decimal arithmetic would round to 28 digits
TINY_D38 = "0." + "0" * 37 + "1"


@pytest.fixture(scope="module")
def extreme_decimals(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Two files: deltalake logs the decimal(38,10) maximum as the double ``1e+28`` (39 digits at
    scale 10) and the decimal(38,38) ``1e-38`` as ``9.999999999999998e-39`` (scale 54)."""
    path = str(tmp_path_factory.mktemp("extreme") / "decimals")
    for rows in (
        {"id": [0, 1], "d10": [Decimal(MAX_D10), Decimal("-" + MAX_D10)], "d38": [Decimal(0), None]},
        {"id": [2, 3], "d10": [Decimal(0), None], "d38": [Decimal(TINY_D38), Decimal("-" + TINY_D38)]},
    ):
        write_deltalake(path, pa.table(rows, schema=DEC_SCHEMA), mode="append")
    return path


def _oracle_ids(path: str, where: str) -> list[int]:
    ctx = SessionContext()
    ctx.from_arrow(DeltalakeTable(path).to_pyarrow_table(), "o")
    return sorted(ctx.sql(f"SELECT id FROM o WHERE {where}").to_pydict()["id"])


def test_decimal_statistics_beyond_the_column_precision_are_unknown(extreme_decimals: str) -> None:
    files = dd.DeltaTable(extreme_decimals).snapshot().files()
    files.validate(full=True)  # no decimal beyond its type's precision
    assert files.num_rows == 2


@pytest.mark.parametrize(
    "where",
    [
        "d10 > 0",
        f"d10 = CAST('{MAX_D10}' AS DECIMAL(38, 10))",
        f"d10 < CAST('-{'9' * 27}' AS DECIMAL(38, 10))",
        "d38 > 0",
        f"d38 = CAST('{TINY_D38}' AS DECIMAL(38, 38))",
        "d38 < 0 OR d10 > 1",
        "id >= 0",
    ],
)
def test_extreme_decimals_read_as_deltalake_does(extreme_decimals: str, where: str) -> None:
    expected = _oracle_ids(extreme_decimals, where)
    scanned = dd.DeltaTable(extreme_decimals).snapshot().scan(predicate=where).to_table()
    assert sorted(scanned.column("id").to_pylist()) == expected
    ctx = SessionContext()
    dd.register_table(ctx, "t", extreme_decimals)
    assert sorted(ctx.sql(f"SELECT id FROM t WHERE {where}").to_pydict()["id"]) == expected
