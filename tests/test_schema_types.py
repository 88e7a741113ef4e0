"""Delta schema types against PROTOCOL.md's Schema Serialization Format and delta-kernel-rs.

Decimal precision is 1..38 and the scale 0..precision (Spark's and the kernel's DecimalType;
parquet's DECIMAL too): a schema declaring another is refused by name, never handed to
DataFusion, whose decimal kernels panic on a negative scale (a filter on decimal(10,-2) raised
pyo3's PanicException, which ``except Exception`` does not catch).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import add_action, write_commit
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion import SchemaError


def _table(root: Path, typ: str, value: str) -> Path:
    """One file; ``y`` of type ``typ`` is its partition column, holding ``value``."""
    root.mkdir(parents=True)
    (root / "_delta_log").mkdir()
    pq.write_table(pa.table({"x": pa.array([1], pa.int64())}), root / "a.parquet")
    fields = [
        {"name": "x", "type": "long", "nullable": True, "metadata": {}},
        {"name": "y", "type": typ, "nullable": True, "metadata": {}},
    ]
    metadata = {
        "id": "decimals",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": fields}),
        "partitionColumns": ["y"],
        "configuration": {},
        "createdTime": 0,
    }
    add = add_action(root, "a.parquet", partitionValues={"y": value})
    write_commit(
        root,
        0,
        [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": metadata}, {"add": add}],
    )
    return root


@pytest.mark.parametrize(
    ("typ", "value", "why"),
    [
        ("decimal(10,-2)", "1200", "scale -2 is outside 0..10"),
        ("decimal(5,10)", "0.00001", "scale 10 is outside 0..5"),
        ("decimal(38, 39)", "0", "scale 39 is outside 0..38"),
    ],
)
def test_decimal_scale_outside_precision_is_refused(tmp_path: Path, typ: str, value: str, why: str) -> None:
    t = _table(tmp_path / "t", typ, value)
    with pytest.raises(SchemaError, match=why) as info:
        dd.register_table(SessionContext(), "t", str(t))
    assert "00000000000000000000.json" in str(info.value)


@pytest.mark.parametrize(
    ("typ", "value", "where"),
    [
        ("decimal(1,0)", "-9", "y = -9"),
        # DataFusion 55 compares decimal(38, 37+) with the float literal 0.5 as unequal (over
        # rows in memory too): a range instead
        ("decimal(38,38)", "0.5", "y > 0.4 AND y < 0.6"),
        ("decimal(38, 0)", "7", "y = 7"),
    ],
)
def test_decimal_bounds_of_the_protocol_are_read(tmp_path: Path, typ: str, value: str, where: str) -> None:
    t = _table(tmp_path / "t", typ, value)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(t))
    assert ctx.sql(f"SELECT count(*) AS n FROM t WHERE {where}").to_pylist() == [{"n": 1}]
