"""Compare a result with a corpus expectation the way corpus/README.md prescribes."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def _is_primitive(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_null(t))


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, list):
        if v and isinstance(v[0], tuple) and len(v[0]) == 2:  # map entries: unordered
            return sorted((_norm(k), _norm(x)) for k, x in v)
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in v.items()}
    return v


def _close(a: Any, b: Any, rel: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k], rel) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_close(x, y, rel) for x, y in zip(a, b, strict=True))
    return a == b


def assert_same_rows(actual: pa.Table, expected: pa.Table, context: str = "") -> None:
    """Select expected columns by name, cast, sort by primitive columns, compare row by row."""
    missing = [c for c in expected.column_names if c not in actual.column_names]
    # A schema column absent from every data file reads as all-NULL; one oracle (duckdb) drops
    # such columns from its output (parquet_row_group_skipping's "missing"), so tolerate those.
    extra = [
        c
        for c in actual.column_names
        if c not in expected.column_names and actual.column(c).null_count != actual.num_rows
    ]
    assert not missing and not extra, f"{context}: missing columns {missing}, extra columns {extra}"
    actual = actual.select(expected.column_names)
    cols = []
    for f in expected.schema:
        col = actual.column(f.name)
        try:
            col = col.cast(f.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        cols.append(col)
    actual = pa.Table.from_arrays(cols, names=expected.column_names)
    assert actual.num_rows == expected.num_rows, (
        f"{context}: {actual.num_rows} rows, expected {expected.num_rows}"
    )
    keys = [(f.name, "ascending") for f in expected.schema if _is_primitive(f.type)]

    if keys and not any(pa.types.is_floating(f.type) for f in expected.schema):
        # fast path for big tables: exact equality after sorting (no floats, so no tolerance)
        order_a = actual.take(pc.sort_indices(actual, sort_keys=keys))
        order_e = expected.take(pc.sort_indices(expected, sort_keys=keys))
        if order_a.cast(expected.schema).equals(order_e):
            return

    def rows(t: pa.Table) -> list[dict]:
        if keys:
            t = t.take(pc.sort_indices(t, sort_keys=keys))
        out = [{k: _norm(v) for k, v in r.items()} for r in t.to_pylist()]
        if not keys:
            out.sort(key=repr)
        return out

    a_rows, e_rows = rows(actual), rows(expected)
    rel = {f.name: (1e-6 if pa.types.is_float32(f.type) else 1e-9) for f in expected.schema}
    for i, (a, e) in enumerate(zip(a_rows, e_rows, strict=True)):
        for k in e:
            assert _close(a[k], e[k], rel[k]), (
                f"{context}: row {i} column {k!r}: got {a[k]!r}, expected {e[k]!r}"
            )
