"""Comparisons of a numeric column with a number of another type, made exact.

pyarrow compares ``i > 1.5`` (an int64 column, a double) by casting the column to a float, which
fails on the values a float cannot hold exactly (beyond 2**53, or 2**24 in a dataset filter),
so a read failed on some files' values and not on others; ``dec > 0.001`` on a decimal(38, 2)
column needs a decimal of precision 39, which pyarrow refuses. The literal is put on the
column's grid instead, with the operator adjusted so that the comparison means the same for
every value the column can hold (``i > 1.5`` is ``i > 1``, ``i = 1.5`` holds for no value);
likewise an integer or decimal against a float column (``f IN (2**62 + 1)``, which pyarrow
refused or failed on). A NaN literal is above every number, as DataFusion orders it.
"""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import numpy as np
import pyarrow as pa

from .predicate import FLIPPED, Column, Comparison, Literal

#: Python's default context rounds to 28 digits; decimal128 holds 38, decimal256 76
_EXACT = decimal.Context(prec=80)


def exact_comparison(column: Column, op: str, lit: Literal) -> Comparison | None:
    """``column op lit`` with ``lit`` of the column's own type, when the column is an integer or
    decimal and the literal a number of another type; None where nothing needs changing."""
    t = column.type
    if t is None or lit.is_null or lit.type == t:
        return None
    if pa.types.is_floating(t) and not pa.types.is_floating(lit.type):
        value = _number(lit)
        return None if value is None else _float_comparison(column, op, value)
    if not (pa.types.is_integer(t) or pa.types.is_decimal(t)):
        return None
    value = _number(lit)
    if value is None:
        return None
    low, high = _bounds(t)
    if isinstance(value, float) or value > high:  # NaN or infinite, or above every value
        return _constant(column, op in ("<", "<=", "!="), t)
    if value < low:
        return _constant(column, op in (">", ">=", "!="), t)
    unit = _unit(t)
    steps = value / unit
    if steps.denominator == 1:
        return Comparison(op, column, _on_grid(int(steps), t))
    if op in ("=", "!="):  # between two values of the type: never equal
        return _constant(column, op == "!=", t)
    down, up = math.floor(steps), math.ceil(steps)
    # x > 1.5 is x > 1, x >= 1.5 is x >= 2, x < 1.5 is x < 2, x <= 1.5 is x <= 1
    return Comparison(op, column, _on_grid(down if op in (">", "<=") else up, t))


def _float_comparison(column: Column, op: str, value: Fraction) -> Comparison:
    """``column op value`` for a float column and an integer or decimal ``value``: against the
    value itself where the column's type holds it, else against the floats either side of it
    (pyarrow cast an integer past 2**53 to a float only to fail). The infinities bound the
    type: no value is out of its range; NaN stays above every number."""
    t = column.type
    np_type = np.float32 if t == pa.float32() else np.float16 if t == pa.float16() else np.float64
    try:
        near = np_type(float(value))
    except OverflowError:
        near = np_type(math.inf if value > 0 else -math.inf)
    if math.isfinite(near) and Fraction(float(near)) == value:
        return Comparison(op, column, Literal(pa.scalar(near, t)))
    if math.isinf(near) or Fraction(float(near)) > value:
        down, up = np.nextafter(near, np_type(-math.inf)), near
    else:
        down, up = near, np.nextafter(near, np_type(math.inf))
    if op in ("=", "!="):  # between two floats: never equal (column < -inf holds for none, NaN too)
        return Comparison(">=" if op == "!=" else "<", column, Literal(pa.scalar(-math.inf, t)))
    return Comparison(op, column, Literal(pa.scalar(down if op in (">", "<=") else up, t)))


def exact_comparison_of(pred: Comparison) -> Comparison:
    """``pred`` (a column against a literal, either side) made exact, or as it was."""
    shape = pred.column_literal()
    if shape is None:
        return pred
    column, op, lit = shape
    exact = exact_comparison(column, op, lit)
    if exact is None:
        return pred
    return exact if isinstance(pred.left, Column) else Comparison(FLIPPED[exact.op], exact.right, exact.left)


def exact_in_values(column: Column, values: tuple[Literal, ...]) -> tuple[Literal, ...]:
    """An ``IN`` list's values for an integer or decimal column: of its type, without those no
    value of the column can equal (``i IN (1.5, 2.0)`` is ``i IN (2)``)."""
    out = []
    for v in values:
        exact = exact_comparison(column, "=", v)
        if exact is None:
            out.append(v)
        elif exact.op == "=":
            out.append(exact.right)
    return tuple(out)


def _number(lit: Literal) -> Fraction | float | None:
    """The literal's exact value; a float for NaN and the infinities (compared as above or below
    every number, ``-inf`` as a Fraction below any bound); None when it is not a number."""
    t = lit.type
    v = lit.value.as_py()
    if pa.types.is_integer(t):
        return Fraction(v)
    if pa.types.is_decimal(t):
        return Fraction(v)
    if pa.types.is_floating(t):
        if math.isnan(v) or v == math.inf:
            return math.nan
        if v == -math.inf:
            return Fraction(-(10**80))
        return Fraction(v)
    return None


def _unit(t: pa.DataType) -> Fraction:
    return Fraction(1, 10**t.scale) if pa.types.is_decimal(t) else Fraction(1)


def _bounds(t: pa.DataType) -> tuple[Fraction, Fraction]:
    if pa.types.is_decimal(t):
        top = Fraction(10**t.precision - 1, 10**t.scale)
        return -top, top
    bits = t.bit_width
    if pa.types.is_signed_integer(t):
        return Fraction(-(2 ** (bits - 1))), Fraction(2 ** (bits - 1) - 1)
    return Fraction(0), Fraction(2**bits - 1)


def _on_grid(steps: int, t: pa.DataType) -> Literal:
    if pa.types.is_decimal(t):
        return Literal(pa.scalar(decimal.Decimal(steps).scaleb(-t.scale, _EXACT), t))
    return Literal(pa.scalar(steps, t))


def _constant(column: Column, holds: bool, t: pa.DataType) -> Comparison:
    """A comparison TRUE (``holds``) or FALSE for every value of the column, NULL for NULL, as
    the comparison it replaces: ``column <= max`` or ``column > max``."""
    top = _bounds(t)[1]
    return Comparison("<=" if holds else ">", column, _on_grid(int(top / _unit(t)), t))
