"""Rows known from the log: when no data column is asked for (count(*), partition columns,
change-feed constants) and the filter is TRUE for every row of a unit, the unit yields numRecords
minus its deletion vector's cardinality rows of its own values, its file unopened. These are the
checks that the log's figures can be trusted and the batches built from them."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa

from ..scan_unit import ScanUnit


def constant_columns(unit: ScanUnit, columns: Sequence[str]) -> bool:
    """Are all ``columns`` partition values or constants of the unit (not stored in its file)?"""
    return all(
        c in unit.partition_values or (c in unit.constants and not unit.has_change_type_column)
        for c in columns
    )


def constant_batches(
    counted: Sequence[tuple[ScanUnit, int]], columns: Sequence[str], schema: pa.Schema, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """Batches of ``n`` rows of each unit's partition values / constants (rows known from the log);
    units with the same values share their batches, and a full batch is built once and repeated."""
    if not columns:
        total = sum(n for _, n in counted)
        if total:
            yield pa.RecordBatch.from_arrays([pa.nulls(total)], names=["n"]).select([])
        return
    rows: dict[tuple, tuple[tuple, int]] = {}
    for u, n in counted:
        values = tuple(u.partition_values[c] if c in u.partition_values else u.constants[c] for c in columns)
        key = tuple(_value_key(v) for v in values)
        rows[key] = (values, rows[key][1] + n if key in rows else n)
    for values, total in rows.values():
        scalars = [pa.array([v], f.type)[0] for v, f in zip(values, schema, strict=True)]
        full = None
        while total > 0:
            n = min(total, batch_size)
            if n == batch_size and full is not None:
                batch = full
            else:
                batch = pa.RecordBatch.from_arrays([pa.repeat(sc, n) for sc in scalars], schema=schema)
                if n == batch_size:
                    full = batch
            yield batch
            total -= n


def _value_key(value: Any) -> Any:
    """``value`` as a key that keeps apart what ``==`` merges: the float partition values -0.0
    and 0.0 are two values (their rows must keep their own sign)."""
    return (value, math.copysign(1.0, value)) if isinstance(value, float) else value


#: More rows than a data file is taken to hold: statistics claiming more are read, not trusted.
MAX_TRUSTED_ROWS = 2**31 - 1


def known_row_count(unit: ScanUnit) -> int | None:
    """Live rows of a unit known from the log alone, or None when the file must be read (also
    when the log's figures are impossible: a negative or huge numRecords, a deletion vector
    deleting fewer than none or more rows than the file has; the read then checks the file)."""
    n = unit.num_records
    if n is None or unit.only_rows is not None or not 0 <= n <= MAX_TRUSTED_ROWS:
        return None
    if unit.drop_rows is None:
        return n
    cardinality = unit.drop_rows.get("cardinality")
    if not isinstance(cardinality, int) or not 0 <= cardinality <= n:
        return None
    return n - cardinality
