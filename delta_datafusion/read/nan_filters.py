"""NaN in the rows read. Which conjuncts of a row filter pyarrow's scanner may use to skip row
groups: parquet writers leave NaN out of float min/max statistics, and pyarrow's skipping trusts
them, so a conjunct a NaN could satisfy is kept from the scanner and applied to the rows after
reading. And every NaN read is made the positive one (:func:`positive_nans`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..read_schema import has_float


def split_nan_sensitive(predicate: Any, logical: pa.Schema) -> tuple[Any, Any]:
    """``(scan, post)``: the conjuncts pyarrow may use to skip row groups, and those on
    floating-point columns, applied to the rows after reading.

    Parquet writers leave NaN out of min/max statistics, and pyarrow's row-group skipping
    trusts them: a row group holding 0.1 and NaN has min = max = 0.1, so pyarrow rewrites
    ``f`` as 0.1 and drops the group for ``f > 2.0`` (SQL orders NaN above every number) or
    ``f <> 0.1``. So a conjunct on a float column reaches the scanner only when no NaN value
    can satisfy it (:func:`false_for_nan`): then the statistics still bound every matching
    row, and pyarrow's skipping stays right (it still filters the rows it reads).
    """
    from ..predicate import TRUE, conjunction, conjuncts, referenced_columns

    if predicate is None or predicate == TRUE:
        return predicate, None
    floats = {f.name for f in logical if has_float(f.type)}
    scan, post = [], []
    for c in conjuncts(predicate):
        (post if referenced_columns(c) & floats and not false_for_nan(c, floats) else scan).append(c)
    if not post:
        return predicate, None
    return (conjunction(scan) if scan else None), conjunction(post)


def false_for_nan(pred: Any, floats: set[str]) -> bool:
    """Is ``pred`` never TRUE for a row whose float columns hold NaN (whatever the rest holds),
    and safe from pyarrow's float statistics otherwise?

    Shapes known safe: ``f < c``, ``f <= c`` and ``f = c`` against non-NaN literals (NaN sorts
    above every number and equals only NaN), IS [NOT] NULL (statistics count nulls exactly),
    comparisons not touching a float column, and AND / OR of such shapes. Anything else (``f >
    c``, ``<>``, NOT, two float columns compared) is not. Neither is ``f IN (...)``: pyarrow drops
    a row group of zeros (statistics min -0.0, max +0.0) for ``f IN (0.0, ...)``, its set lookup
    telling -0.0 from 0.0."""
    from ..predicate import And, Column, Comparison, In, IsNotNull, IsNull, Literal, Or

    if isinstance(pred, (And, Or)):
        return all(false_for_nan(c, floats) for c in pred.children)
    if isinstance(pred, (IsNull, IsNotNull)):
        return True
    if isinstance(pred, In):
        on_float = isinstance(pred.operand, Column) and pred.operand.name in floats
        return not on_float and not pred.negated and not any(v.is_nan for v in pred.values)
    if isinstance(pred, Comparison):
        left, right, op = pred.left, pred.right, pred.op
        if isinstance(left, Literal) and isinstance(right, Column):
            left, right, op = right, left, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if not (isinstance(left, Column) and left.name in floats):
            return not (isinstance(right, Column) and right.name in floats)
        return isinstance(right, Literal) and not right.is_nan and op in ("<", "<=", "=")
    return False


#: A float's bits read as an unsigned integer: above these (-inf) lie the NaNs with the sign set.
_NEGATIVE_NAN_ABOVE = {32: (np.uint32, 0xFF800000), 64: (np.uint64, 0xFFF0000000000000)}


def float_positions(schema: pa.Schema) -> list[int]:
    """The positions of ``schema``'s top-level float columns :func:`positive_nans` checks."""
    return [
        i
        for i, t in enumerate(schema.types)
        if pa.types.is_floating(t) and t.bit_width in _NEGATIVE_NAN_ABOVE
    ]


def positive_nans(batches: Iterator[pa.RecordBatch], positions: Sequence[int]) -> Iterator[pa.RecordBatch]:
    """``batches`` with every NaN of a top-level float column given the positive sign;
    ``positions``: those columns' places (:func:`float_positions` of the batches' one schema).

    numpy on x86 makes NaN with the sign bit set (``inf - inf``, ``0.0 / 0.0``), and DataFusion
    orders such a NaN below -inf and apart from NaN, while Spark, DuckDB, Polars and this
    package's filters and pruning hold every NaN one value above +inf. Made positive, the rows
    give DataFusion's own evaluation (a filter not pushed, ORDER BY) the answers of the pushed
    filters. The check is one numpy max over the column's bits (null slots included: a NULL
    whose slot holds such bits costs a rewrite that keeps it NULL); pyarrow's max, with the
    schema walked per batch, cost ~14 us a small batch, ~30 us in the change feed's query,
    where its 340 batches paid ~13 ms of the thread pulling them (numpy: ~3 us). Only batches
    holding such a NaN are rewritten. Nested floats are left as stored: no filter reaches them."""
    for batch in batches:
        for i in positions:
            column = batch.column(i)
            width = column.type.bit_width
            as_uint, above = _NEGATIVE_NAN_ABOVE[width]
            data = column.buffers()[1] if len(column) else None
            if data is None:
                continue
            bits = np.frombuffer(data, dtype=as_uint, count=len(column), offset=column.offset * (width // 8))
            if int(bits.max()) > above:
                nan = pa.scalar(float("nan"), column.type)
                batch = batch.set_column(i, batch.schema.field(i), pc.if_else(pc.is_nan(column), nan, column))
        yield batch
