"""Vectorised file pruning (data skipping) from partition values and per-file statistics.

:func:`file_keep_mask` answers, for every file of a snapshot at once, "may this file hold a row for
which the predicate is TRUE?". It never says no unless it is sure. It works on the ``files`` table
built by log replay:

* ``partition_values``: struct with one typed field per partition column (logical names; a null
  field is a null partition value);
* ``stats``: ``struct<numRecords: int64, minValues: struct<...>, maxValues: struct<...>,
  nullCount: struct<...>, tightBounds: bool>``, where min/max mirror the table's non-partition
  columns with their Arrow types and ``nullCount`` mirrors them with int64 leaves. The whole
  struct, any child, any leaf may be null or missing: that means "unknown".

Rules (all conservative):

1. ``NOT`` is pushed down first (:func:`~delta_datafusion.predicate.push_not_down`), so the tree
   left is AND/OR over leaves; a file is kept when AND/OR of the leaves' "may be TRUE" answers is
   true.
2. Any subtree that reads only partition columns (or no column at all) is evaluated exactly on the
   typed partition values with SQL semantics (:func:`~delta_datafusion.predicate.to_pyarrow`): a
   partition column is constant within a file. A file with a null ``partition_values`` struct or
   a missing partition field is kept.
3. Leaves on data columns use the statistics:

   * every comparison / IN leaf drops a file whose column is all null (``nullCount ==
     numRecords``; per the protocol this also holds when ``tightBounds`` is false);
   * ``IS NULL`` drops a file only when ``nullCount == 0``; ``IS NOT NULL`` only when ``nullCount
     == numRecords``. No other use of ``nullCount`` is made, so wide bounds (``tightBounds =
     false``, files with deletion vectors) need no special case: min/max stay valid bounds;
   * ``x < c`` / ``x <= c`` drop when ``min >= c`` / ``min > c``; ``x > c`` / ``x >= c`` drop when
     ``max <= c`` / ``max < c``; ``x = c`` drops when ``c`` is outside ``[min, max]``; ``x IN
     (...)`` drops when every non-null literal is outside ``[min, max]`` (a long list: each bound
     binary-searched among the sorted literals, not a comparison per literal);
   * ``x != c`` and ``x NOT IN (...)`` drop only when ``min == max`` equals a listed literal and
     ``nullCount == 0``; a ``NOT IN`` list holding a NULL is never TRUE, so it drops every file;
   * a comparison with a NULL literal is never TRUE and drops every file; column-vs-column
     comparisons keep every file.
4. Statistic quirks:

   * timestamps: Delta writes min/max truncated to milliseconds, so the max is widened by 1 ms.
     The min is widened by 1 ms too, in case a writer truncated a pre-1970 value toward zero;
   * strings: writers cut min/max to a prefix (Spark: 32 UTF-16 code units, the max then gets a
     tie-breaker character appended; other writers count code points or bytes). A min prefix is
     still a lower bound. A max is used only when its UTF-8 encoding is shorter than
     :data:`STRING_MAX_TRUSTED_BYTES` (28) bytes: a string that short was not truncated under any
     of these conventions with a prefix length of 32 (bytes >= UTF-16 units >= code points, and
     a byte-based cut backs off at most 3 bytes to a character boundary). Longer maxima mean
     "no upper bound";
   * floats: NaN is not reflected in min/max (Parquet-derived stats skip it) but sorts above
     every number in SQL, and NaN min/max values are treated as unknown. So for floating columns
     the max is never used for ``>``, ``>=``, ``!=``, ``NOT IN`` or NaN literals; ``<``, ``<=``,
     ``=`` and ``IN`` with non-NaN literals use min/max normally (NaN never satisfies them).
     Proving a filter TRUE for every row (:func:`file_all_match_mask`) is the mirror image:
     only ``>``, ``>=`` (from the min), ``!=`` and ``NOT IN`` with non-NaN literals, which NaN
     satisfies;
   * decimals of more than 15 digits: some writers (deltalake) log their min/max through a
     float64, so both are widened by more than that rounding could have moved them, and they
     never prove a predicate true for every row;
   * binary min/max are not used.
5. Anything that cannot be evaluated (unknown column, type mismatch, missing stats) keeps the file.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from .arrays import as_array
from .predicate import (
    And,
    BoolLiteral,
    Column,
    Comparison,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Or,
    Predicate,
    iter_columns,
    push_not_down,
    to_pyarrow,
)

__all__ = ["STRING_MAX_TRUSTED_BYTES", "file_keep_mask", "partition_keep_mask"]

#: A string max is used as an upper bound only when its UTF-8 encoding is shorter than this.
STRING_MAX_TRUSTED_BYTES = 28


def _const(n: int, value: bool) -> pa.BooleanArray:
    nulls = pa.nulls(n, pa.bool_())
    return pc.is_null(nulls) if value else pc.is_valid(nulls)


def _child(arr: pa.Array | None, name: str) -> pa.Array | None:
    """``arr.name`` with the parent's nulls applied, or None when absent."""
    if arr is None or not pa.types.is_struct(arr.type) or arr.type.get_field_index(name) < 0:
        return None
    return pc.struct_field(arr, name)


def _true_unless_false(cond: pa.Array) -> pa.Array:
    """``cond`` with null (unknown) read as True (may match)."""
    return pc.fill_null(cond, True)


def _widen(arr: pa.Array, sign: int) -> pa.Array | None:
    unit = arr.type.unit
    delta = pa.scalar(
        _dt.timedelta(milliseconds=1) if unit != "s" else _dt.timedelta(seconds=1), pa.duration(unit)
    )
    try:
        return pc.add_checked(arr, delta) if sign > 0 else pc.subtract_checked(arr, delta)
    except Exception:
        return None


#: Decimals with more digits than a float64 holds: some writers (deltalake 1.6) pass decimal
#: statistics through a float, so 0.999999999999999999 is logged as 1.0.
FLOAT_EXACT_DECIMAL_DIGITS = 15


def _widen_decimal(arr: pa.Array, sign: int) -> pa.Array | None:
    """A decimal bound moved outward by more than a float64 rounding of it could have moved it
    (relative 2^-53; widened by 2^-50 of the value plus one unit of the scale); bounds at the int64
    limits (where deltalake saturates larger values) become unknown."""
    t = arr.type
    magnitude = pc.abs(arr.cast(pa.float64()))
    # deltalake saturates values past the int64 range at its limits instead: those bound nothing
    arr = pc.if_else(pc.greater_equal(magnitude, 9.2e18), pa.scalar(None, t), arr)
    try:
        err = pc.add(pc.multiply(magnitude, 2.0**-50), 10.0**-t.scale)
        wide = pa.decimal256(t.precision + 1, t.scale)  # decimal128 arithmetic stops at 38 digits
        err = err.cast(wide, safe=False)
        moved = pc.add_checked(arr.cast(wide), err) if sign > 0 else pc.subtract_checked(arr.cast(wide), err)
        return moved.cast(t)
    except Exception:  # noqa: BLE001 - past the type's range: no bound
        return None


class _Files:
    """Column access over the files table, with caching of the adjusted bounds."""

    def __init__(
        self,
        n: int,
        partition_values: pa.Array | None,
        stats: pa.Array | None,
        schema: pa.Schema | None,
        partition_columns: Sequence[str],
    ) -> None:
        self.n = n
        self.schema = schema
        self.partition_columns = set(partition_columns)
        self.stats = stats
        self.num_records = _child(stats, "numRecords")
        self.min_values = _child(stats, "minValues")
        self.max_values = _child(stats, "maxValues")
        self.null_count = _child(stats, "nullCount")
        self._bounds: dict[tuple[str, ...], tuple[pa.Array | None, pa.Array | None]] = {}
        self._nulls: dict[tuple[str, tuple[str, ...]], pa.Array] = {}
        self._part_missing: pa.Array | None = None
        arrays: list[pa.Array] = []
        names: list[str] = []
        if partition_values is not None and pa.types.is_struct(partition_values.type):
            fields = partition_values.type
            arrays = [pc.struct_field(partition_values, i) for i in range(fields.num_fields)]
            names = [fields.field(i).name for i in range(fields.num_fields)]
            if partition_values.null_count:
                self._part_missing = pc.is_null(partition_values)
        # A helper column keeps the row count (constant predicates, no partition fields).
        arrays.append(pa.nulls(n, pa.bool_()))
        names.append("__delta_datafusion_row__")
        self._part_table = pa.Table.from_arrays(arrays, names=names)

    # ---- types -------------------------------------------------------------------------------

    def column_type(self, c: Column) -> pa.DataType | None:
        if self.schema is not None:
            fields: Any = self.schema
            typ = None
            for part in c.path:
                if fields is None or fields.get_field_index(part) < 0:
                    typ = None
                    break
                typ = fields.field(fields.get_field_index(part)).type
                fields = typ if pa.types.is_struct(typ) else None
            if typ is not None:
                return typ
        return c.type

    # ---- partition evaluation ----------------------------------------------------------------

    def is_partition_only(self, pred: Predicate) -> bool:
        return all(len(c.path) == 1 and c.name in self.partition_columns for c in iter_columns(pred))

    def exact_partition(self, pred: Predicate) -> pa.Array:
        """``pred`` evaluated on each file's partition values: TRUE keeps the file."""
        keep = self._on_partition_values(pred)
        if keep is None:
            return _const(self.n, True)
        if self._part_missing is not None:  # no partition values recorded: unknown
            keep = pc.or_(keep, self._part_missing)
        return keep

    def partition_truth(self, pred: Predicate) -> pa.Array:
        """``pred`` evaluated on each file's partition values: TRUE only where it is surely TRUE
        (a NULL result, an unknown column or a file without partition values give False)."""
        truth = self._on_partition_values(pred)
        if truth is None:
            return _const(self.n, False)
        if self._part_missing is not None:
            truth = pc.and_(truth, pc.invert(self._part_missing))
        return truth

    def _on_partition_values(self, pred: Predicate) -> pa.Array | None:
        """``pred`` on the partition values table, NULL read as False; None when it cannot be
        evaluated there. One thread: the table is one batch, and pyarrow's pool (busy with
        checkpoint reads or DataFusion's scans) only adds waiting (3 ms instead of 0.1 ms)."""
        names = set(self._part_table.column_names)
        if any(c.name not in names for c in iter_columns(pred)):
            return None
        try:
            out = ds.dataset(self._part_table).to_table(columns={"k": to_pyarrow(pred)}, use_threads=False)
        except Exception:
            return None
        return pc.fill_null(as_array(out.column("k")), False)

    # ---- statistics --------------------------------------------------------------------------

    def _leaf(self, struct: pa.Array | None, path: tuple[str, ...]) -> pa.Array | None:
        arr = struct
        for part in path:
            arr = _child(arr, part)
            if arr is None:
                return None
        return arr

    def null_count_of(self, c: Column) -> pa.Array | None:
        arr = self._leaf(self.null_count, c.path)
        if arr is None or not pa.types.is_integer(arr.type):
            return None
        return arr

    def all_null(self, c: Column) -> pa.Array:
        """True where every (valid) row of the file has a null in ``c`` (cached per column: a
        WHERE of hundreds of conditions may name one column in each)."""
        key = ("all", c.path)
        if key not in self._nulls:
            nc = self.null_count_of(c)
            out = _const(self.n, False)
            if nc is not None and self.num_records is not None:
                try:
                    out = pc.fill_null(pc.equal(nc, self.num_records), False)
                except Exception:
                    pass
            self._nulls[key] = out
        return self._nulls[key]

    def no_null(self, c: Column) -> pa.Array:
        """True where no (valid) row of the file has a null in ``c`` (cached per column)."""
        key = ("none", c.path)
        if key not in self._nulls:
            nc = self.null_count_of(c)
            self._nulls[key] = _const(self.n, False) if nc is None else pc.fill_null(pc.equal(nc, 0), False)
        return self._nulls[key]

    def bounds(self, c: Column) -> tuple[pa.Array | None, pa.Array | None]:
        """(lower, upper) bounds of the non-null, non-NaN values; null entries mean unknown."""
        if c.path in self._bounds:
            return self._bounds[c.path]
        mn = self._leaf(self.min_values, c.path)
        mx = self._leaf(self.max_values, c.path)
        typ = self.column_type(c)
        for arr in (mn, mx):
            if arr is not None and typ is not None and arr.type != typ and not _comparable(arr.type, typ):
                mn = mx = None
                break
        t = (mn if mn is not None else mx).type if (mn is not None or mx is not None) else None
        if t is None or pa.types.is_struct(t) or pa.types.is_nested(t):
            mn = mx = None
        elif pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            mn = mx = None
        elif pa.types.is_floating(t):
            mn = None if mn is None else _nan_to_null(mn)
            mx = None if mx is None else _nan_to_null(mx)
        elif pa.types.is_timestamp(t):
            mn = None if mn is None else _widen(mn, -1)
            mx = None if mx is None else _widen(mx, +1)
        elif pa.types.is_decimal(t) and t.precision > FLOAT_EXACT_DECIMAL_DIGITS:
            mn = None if mn is None else _widen_decimal(mn, -1)
            mx = None if mx is None else _widen_decimal(mx, +1)
        elif pa.types.is_string(t) or pa.types.is_large_string(t):
            if mx is not None:
                too_long = pc.fill_null(
                    pc.greater_equal(pc.binary_length(mx), STRING_MAX_TRUSTED_BYTES), True
                )
                mx = pc.if_else(too_long, pa.scalar(None, mx.type), mx)
        self._bounds[c.path] = (mn, mx)
        return mn, mx


def _comparable(a: pa.DataType, b: pa.DataType) -> bool:
    groups = (
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_decimal,
        pa.types.is_timestamp,
        pa.types.is_date,
        pa.types.is_boolean,
        lambda t: pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t),
    )
    return any(g(a) and g(b) for g in groups)


def _nan_to_null(arr: pa.Array) -> pa.Array:
    return pc.if_else(pc.fill_null(pc.is_nan(arr), False), pa.scalar(None, arr.type), arr)


def _cmp(op: str, arr: pa.Array, value: pa.Scalar) -> pa.Array:
    fn = {
        "=": pc.equal,
        "!=": pc.not_equal,
        "<": pc.less,
        "<=": pc.less_equal,
        ">": pc.greater,
        ">=": pc.greater_equal,
    }[op]
    return fn(arr, value)


def _combine(pred: And | Or, evaluate: Any) -> pa.Array:
    """AND / OR of the per-file answers for the children of ``pred``."""
    op = pc.and_ if isinstance(pred, And) else pc.or_
    out = evaluate(pred.children[0])
    for c in pred.children[1:]:
        out = op(out, evaluate(c))
    return out


# ---- IN lists: long ones by a binary search of the sorted values, not a comparison per value ----


def _value_arrays(values: Sequence[Literal]) -> tuple[list[pa.Array], bool]:
    """An IN list's literals as Arrow arrays without nulls, one per literal type (a list from
    SQL has one type), and whether the list holds a NULL."""
    scalars = [v.value for v in values]
    try:
        groups = [pa.array(scalars)]
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # "cannot mix scalars with different types"
        by_type: dict[pa.DataType, list[pa.Scalar]] = {}
        for sc in scalars:
            by_type.setdefault(sc.type, []).append(sc)
        groups = [pa.array(group, type=t) for t, group in by_type.items()]
    has_null = any(g.null_count for g in groups)
    return [g.drop_null() for g in groups if g.null_count < len(g)], has_null


def _has_nan(arrays: list[pa.Array]) -> bool:
    return any(pa.types.is_floating(a.type) and pc.any(pc.is_nan(a)).as_py() for a in arrays)


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def _exact_cast(arr: pa.Array, t: pa.DataType) -> pa.Array | None:
    """``arr`` as type ``t`` when every value converts exactly and the two types order their
    values alike (numbers, dates, timestamps of one time zone, strings); else None."""
    if arr.type == t:
        return arr
    a = arr.type
    if pa.types.is_timestamp(a) and pa.types.is_timestamp(t):
        # zoned values are instants (UTC underneath) whichever zone names them; naive ones are not
        alike = (a.tz is None) == (t.tz is None)
    else:
        alike = (_numeric(a) and _numeric(t)) or _comparable(a, t)
    if not alike:
        return None
    try:
        out = arr.cast(t)  # safe: refuses overflow and truncation
        back = out.cast(a, safe=False)  # and the round trip catches silent rounding
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return out if pc.all(pc.equal(back, arr)).as_py() else None


def _same_type(values: pa.Array, bounds: list[pa.Array]) -> tuple[pa.Array, list[pa.Array]] | None:
    """``values`` and ``bounds`` converted exactly to one type (the bounds' or the values'), so
    that ordering them together orders them as comparing them would; None when impossible."""
    for target in (bounds[0].type, values.type):
        vals = _exact_cast(values, target)
        cast = [_exact_cast(b, target) for b in bounds]
        if vals is not None and all(b is not None for b in cast):
            return vals, cast  # type: ignore[return-value]
    return None


#: How an IN list is judged: a binary search of the sorted values costs ~10-45 ms over 300,000
#: files (their bounds to numpy) and well under 1 ms over 3,000 whatever the list's length; one
#: comparison per value costs ~0.25 ms per value over 300,000 files, ~0.03 over 3,000.
_SEARCH_FROM = 8
_SEARCH_FROM_MANY_FILES = 96
_MANY_FILES = 20_000


def _any_between(values: pa.Array, lo: pa.Array | None, hi: pa.Array | None, n: int) -> pa.Array:
    """True where some of ``values`` (non-null) lies in ``[lo, hi]``; a null or absent bound is
    no bound. Raises if the types cannot be ordered together.

    Long lists: the values are sorted once and each bound binary-searched among them (values
    below a lower bound, values at or below an upper bound): a file may hold a value iff there
    are more of the second (a 20,000-id list took 0.9 s by comparisons per value)."""
    bounds = [b for b in (lo, hi) if b is not None]
    if not bounds:
        return _const(n, True)
    same = _same_type(values, bounds)
    if same is None:
        raise TypeError(f"IN list of {values.type} against bounds of {bounds[0].type}")
    values, converted = same
    it = iter(converted)
    lo = next(it) if lo is not None else None
    hi = next(it) if hi is not None else None
    k = len(values)
    if k < (_SEARCH_FROM_MANY_FILES if n > _MANY_FILES else _SEARCH_FROM):
        inside = _const(n, False)
        for v in values:
            one = _const(n, True)
            if lo is not None:
                one = pc.and_(one, _true_unless_false(pc.less_equal(lo, v)))
            if hi is not None:
                one = pc.and_(one, _true_unless_false(pc.greater_equal(hi, v)))
            inside = pc.or_(inside, one)
        return inside
    # numpy orders these as Arrow compares them: numbers, dates and timestamps natively (one
    # type on both sides), strings as Python str (code points: UTF-8 byte order), decimals as
    # Decimal objects
    ordered = values.sort().to_numpy(zero_copy_only=False)
    below = np.zeros(n, np.int64)
    upto = np.full(n, k, np.int64)
    for b, out, side in ((lo, below, "left"), (hi, upto, "right")):
        if b is None:
            continue
        valid = b.is_valid()
        mask = valid.to_numpy(zero_copy_only=False)
        out[mask] = np.searchsorted(ordered, b.filter(valid).to_numpy(zero_copy_only=False), side=side)
    return pa.array(upto > below)


def _listed(arr: pa.Array, values: list[pa.Array]) -> pa.Array:
    """True where ``arr`` (a per-file bound) equals one of ``values``; False where it is null or
    cannot be compared with them."""
    hit = _const(len(arr), False)
    for vals in values:
        same = _same_type(vals, [arr])
        if same is not None:
            hit = pc.or_(hit, pc.fill_null(pc.is_in(same[1][0], value_set=same[0]), False))
    return hit


class _Evaluator:
    def __init__(self, files: _Files) -> None:
        self.f = files
        self.n = files.n

    def keep(self, pred: Predicate) -> pa.Array:
        """May ``pred`` (already free of NOT) be TRUE for some row of each file."""
        if isinstance(pred, BoolLiteral):
            return _const(self.n, pred.value is True)
        if self.f.is_partition_only(pred):
            return self.f.exact_partition(pred)
        if isinstance(pred, (And, Or)):
            return _combine(pred, self.keep)
        try:
            if isinstance(pred, Comparison):
                return self.comparison(pred)
            if isinstance(pred, IsNull):
                return self.is_null(pred)
            if isinstance(pred, IsNotNull):
                return self.is_not_null(pred)
            if isinstance(pred, In):
                return self.in_list(pred)
        except Exception:
            return _const(self.n, True)
        return _const(self.n, True)  # anything else (e.g. a NOT left in place): unknown

    # ---- leaves ------------------------------------------------------------------------------

    def is_null(self, pred: IsNull) -> pa.Array:
        x = pred.operand
        if isinstance(x, Literal):
            return _const(self.n, x.is_null)
        return pc.invert(self.f.no_null(x))

    def is_not_null(self, pred: IsNotNull) -> pa.Array:
        x = pred.operand
        if isinstance(x, Literal):
            return _const(self.n, not x.is_null)
        return pc.invert(self.f.all_null(x))

    def _is_float(self, c: Column, lit: Literal | None = None) -> bool:
        t = self.f.column_type(c)
        if t is not None:
            return pa.types.is_floating(t)
        return lit is not None and pa.types.is_floating(lit.type)

    def comparison(self, pred: Comparison) -> pa.Array:
        if isinstance(pred.left, Literal) and isinstance(pred.right, Literal):
            return self.f.exact_partition(pred)  # constant: evaluated exactly
        if isinstance(pred.left, Column) and isinstance(pred.right, Column):
            return _const(self.n, True)
        column, op, literal = pred.column_literal()  # type: ignore[misc]
        if literal.is_null:
            return _const(self.n, False)
        possible = pc.invert(self.f.all_null(column))
        is_float = self._is_float(column, literal)
        if literal.is_nan:
            if op == ">":
                return _const(self.n, False)  # nothing is greater than NaN
            return possible  # NaN rows (=, >=) or any non-null row (<, <=, !=) may match
        mn, mx = self.f.bounds(column)
        value = literal.value
        keep = possible
        try:
            if op == "=":
                if mn is not None:
                    keep = pc.and_(keep, _true_unless_false(pc.less_equal(mn, value)))
                if mx is not None:
                    keep = pc.and_(keep, _true_unless_false(pc.greater_equal(mx, value)))
            elif op in ("<", "<="):
                if mn is not None:
                    keep = pc.and_(keep, _true_unless_false(_cmp(op, mn, value)))
            elif op in (">", ">="):
                if mx is not None and not is_float:
                    keep = pc.and_(keep, _true_unless_false(_cmp(op, mx, value)))
            elif op == "!=":
                if not is_float and mn is not None and mx is not None:
                    only_value = pc.and_(pc.equal(mn, value), pc.equal(mx, value))
                    only_value = pc.and_(pc.fill_null(only_value, False), self.f.no_null(column))
                    keep = pc.and_(keep, pc.invert(only_value))
        except Exception:
            return possible
        return keep

    def in_list(self, pred: In) -> pa.Array:
        x = pred.operand
        if isinstance(x, Literal):
            return self.f.exact_partition(pred)
        values, has_null = _value_arrays(pred.values)
        possible = pc.invert(self.f.all_null(x))
        if pred.negated:
            if has_null:
                return _const(self.n, False)  # x NOT IN (..., NULL) is never TRUE
            t = self.f.column_type(x)
            types = [t] if t is not None else [a.type for a in values]
            if not values or any(pa.types.is_floating(u) for u in types):
                return possible  # NaN rows are not in the bounds
            mn, mx = self.f.bounds(x)
            if mn is None or mx is None:
                return possible
            try:
                single = pc.fill_null(pc.equal(mn, mx), False)
                hit = _listed(mn, values)
                excluded = pc.and_(pc.and_(single, hit), self.f.no_null(x))
                return pc.and_(possible, pc.invert(excluded))
            except Exception:
                return possible
        if not values:
            return _const(self.n, False)  # x IN (NULL, ...) is never TRUE
        if _has_nan(values):
            return possible
        mn, mx = self.f.bounds(x)
        if mn is None and mx is None:
            return possible
        try:
            any_inside = _const(self.n, False)
            for vals in values:  # one array per literal type (one from SQL)
                any_inside = pc.or_(any_inside, _any_between(vals, mn, mx, self.n))
            return pc.and_(possible, any_inside)
        except Exception:
            return possible


def _exact_bounds(t: pa.DataType | None) -> bool:
    """Types whose min/max statistics bound every value exactly as stored: no truncation (strings,
    timestamps to milliseconds), no NaN (floats)."""
    if t is not None and pa.types.is_decimal(t):
        return t.precision <= FLOAT_EXACT_DECIMAL_DIGITS
    return t is not None and (pa.types.is_integer(t) or pa.types.is_date(t))


def _exact_float(literal: Literal) -> float | None:
    """A non-null, non-NaN float or integer literal as the float64 it equals exactly; else None."""
    if literal.is_null or literal.is_nan:
        return None
    value = literal.value.as_py()
    if pa.types.is_floating(literal.type):
        return float(value)
    if pa.types.is_integer(literal.type) and abs(value) <= 2**53:
        return float(value)
    return None


class _AllMatchEvaluator:
    """The dual of :class:`_Evaluator`: is ``pred`` TRUE for *every* row of each file? Answers
    True only when sure; everything uncertain is False (the file is then read and filtered)."""

    def __init__(self, files: _Files) -> None:
        self.f = files
        self.n = files.n

    def all(self, pred: Predicate) -> pa.Array:
        if isinstance(pred, BoolLiteral):
            return _const(self.n, pred.value is True)
        if self.f.is_partition_only(pred):
            return self.f.partition_truth(pred)
        if isinstance(pred, (And, Or)):
            return _combine(pred, self.all)
        try:
            if isinstance(pred, Comparison):
                return self.comparison(pred)
            if isinstance(pred, In):
                return self.in_list(pred)
            if isinstance(pred, IsNull) and isinstance(pred.operand, Column):
                return self.f.all_null(pred.operand)
            if isinstance(pred, IsNotNull) and isinstance(pred.operand, Column):
                return self.f.no_null(pred.operand)
        except Exception:
            return _const(self.n, False)
        return _const(self.n, False)

    def _bounds(self, c: Column) -> tuple[pa.Array, pa.Array] | None:
        if not _exact_bounds(self.f.column_type(c)):
            return None
        mn, mx = self.f.bounds(c)
        return None if mn is None or mx is None else (mn, mx)

    def comparison(self, pred: Comparison) -> pa.Array:
        shape = pred.column_literal()
        if shape is None:
            return _const(self.n, False)
        column, op, literal = shape
        if pa.types.is_floating(self.f.column_type(column) or pa.null()):
            return self._float_comparison(column, op, literal)
        bounds = self._bounds(column)
        if literal.is_null or bounds is None or not _exact_bounds(literal.type):
            return _const(self.n, False)
        mn, mx = bounds
        v = literal.value
        if op == "=":
            holds = pc.and_(pc.equal(mn, v), pc.equal(mx, v))
        elif op == "!=":
            holds = pc.or_(pc.less(mx, v), pc.greater(mn, v))
        elif op in ("<", "<="):
            holds = _cmp(op, mx, v)
        else:  # > >=
            holds = _cmp(op, mn, v)
        return pc.and_(pc.fill_null(holds, False), self.f.no_null(column))

    def _float_comparison(self, column: Column, op: str, literal: Literal) -> pa.Array:
        """``column op literal`` on a float column. Its min/max leave NaN out, and NaN sorts
        above every number and differs from every number, so only the shapes a NaN row makes
        TRUE are proven: ``> c`` / ``>= c`` from the min, ``!= c`` from either bound (``<``,
        ``<=`` and ``=`` could meet a NaN the bounds do not show). Compared as float64, with the
        literal exactly a float64 (a float, or an integer of at most 2**53). The row filter
        orders NaN so only when the predicate types one side as a float (the column, as planning
        records it, or the literal): an untyped column against an integer is compared plainly."""
        v = _exact_float(literal)
        if v is None or op not in (">", ">=", "!="):
            return _const(self.n, False)
        if not any(t is not None and pa.types.is_floating(t) for t in (column.type, literal.type)):
            return _const(self.n, False)
        mn, mx = self.f.bounds(column)
        lo = None if mn is None else mn.cast(pa.float64())
        hi = None if mx is None else mx.cast(pa.float64())
        if op == "!=":
            below = _const(self.n, False) if hi is None else pc.fill_null(pc.less(hi, v), False)
            above = _const(self.n, False) if lo is None else pc.fill_null(pc.greater(lo, v), False)
            holds = pc.or_(below, above)
        elif lo is None:
            return _const(self.n, False)
        else:
            holds = pc.fill_null(_cmp(op, lo, v), False)
        return pc.and_(holds, self.f.no_null(column))

    def in_list(self, pred: In) -> pa.Array:
        x = pred.operand
        if not isinstance(x, Column):
            return _const(self.n, False)
        if pa.types.is_floating(self.f.column_type(x) or pa.null()):
            # NaN rows (see _float_comparison): NOT IN is its '<>' for every value, IN unproven
            if not pred.negated or not pred.values:
                return _const(self.n, False)
            out = self._float_comparison(x, "!=", pred.values[0])
            for v in pred.values[1:]:
                out = pc.and_(out, self._float_comparison(x, "!=", v))
            return out
        bounds = self._bounds(x)
        values, has_null = _value_arrays(pred.values)
        if bounds is None or not values or not all(_exact_bounds(a.type) for a in values):
            return _const(self.n, False)
        mn, mx = bounds
        if pred.negated:
            if has_null:
                return _const(self.n, False)  # NOT IN (..., NULL) is never TRUE
            holds = pc.and_(pc.is_valid(mn), pc.is_valid(mx))
            for vals in values:
                holds = pc.and_(holds, pc.invert(_any_between(vals, mn, mx, self.n)))
        else:
            single = pc.fill_null(pc.equal(mn, mx), False)
            holds = pc.and_(single, _listed(mn, values))
        return pc.and_(holds, self.f.no_null(x))


def file_all_match_mask(
    pred: Predicate,
    files: pa.Table | pa.RecordBatch,
    schema: pa.Schema,
    partition_columns: Sequence[str],
) -> pa.BooleanArray:
    """True for every file all of whose rows make ``pred`` TRUE, judged by partition values and
    exact statistics (integer, date and decimal bounds, null counts; float bounds for the shapes
    a NaN makes TRUE); False when unsure.

    The dual of :func:`file_keep_mask`. Bounds stay valid for files with deletion vectors
    (``tightBounds = false``: the live rows are a subset), and a zero null count stays zero.
    """
    n = files.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    f = _Files(n, _column(files, "partition_values"), _column(files, "stats"), schema, partition_columns)
    try:
        out = pc.fill_null(as_array(_AllMatchEvaluator(f).all(push_not_down(pred))), False)
    except Exception:
        return _const(n, False)
    return out if len(out) == n else _const(n, False)


def _column(table: pa.Table | pa.RecordBatch, name: str) -> pa.Array | None:
    if name not in table.schema.names:
        return None
    return as_array(table.column(name))


def file_keep_mask(
    pred: Predicate,
    files: pa.Table | pa.RecordBatch,
    schema: pa.Schema,
    partition_columns: Sequence[str],
) -> pa.BooleanArray:
    """True for every file that may hold a row for which ``pred`` is TRUE (see module doc).

    ``files`` has the columns ``partition_values`` and ``stats`` (either may be missing);
    ``schema`` is the table's logical Arrow schema. The result has no nulls.
    """
    n = files.num_rows
    if n == 0:
        return pa.array([], pa.bool_())
    f = _Files(n, _column(files, "partition_values"), _column(files, "stats"), schema, partition_columns)
    return _evaluate(pred, f)


def partition_keep_mask(pred: Predicate, partition_values: pa.Array | pa.ChunkedArray) -> pa.BooleanArray:
    """Like :func:`file_keep_mask` with partition values only (data-column leaves keep every file)."""
    arr = as_array(partition_values)
    n = len(arr)
    if n == 0:
        return pa.array([], pa.bool_())
    names = (
        [arr.type.field(i).name for i in range(arr.type.num_fields)] if pa.types.is_struct(arr.type) else []
    )
    f = _Files(n, arr, None, None, names)
    return _evaluate(pred, f)


def _evaluate(pred: Predicate, f: _Files) -> pa.BooleanArray:
    try:
        nnf = push_not_down(pred)
        out = _Evaluator(f).keep(nnf)
        out = pc.fill_null(as_array(out), True)
    except Exception:
        return _const(f.n, True)
    if len(out) != f.n:  # pragma: no cover - defensive
        return _const(f.n, True)
    return out
