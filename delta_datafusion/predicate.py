"""One immutable predicate tree, used for row filtering, partition pruning and file skipping.

The tree is made of small frozen dataclasses:

* operands: :class:`Column` (a logical column name, or a path into nested structs) and
  :class:`Literal` (a typed ``pyarrow.Scalar``);
* predicates: :class:`Comparison` (``= != < <= > >=``), :class:`And`, :class:`Or`, :class:`Not`,
  :class:`IsNull`, :class:`IsNotNull`, :class:`In` (``[NOT] IN`` a list of literals) and
  :class:`BoolLiteral` (``TRUE``/``FALSE``/``NULL``).

Semantics are DataFusion's SQL semantics: three-valued logic (a row is kept when the predicate
is TRUE; FALSE and NULL drop it), ``x [NOT] IN (...)`` is NULL when ``x`` is NULL or when the
value is not found and the list holds a NULL, and floating-point values are totally ordered with
NaN equal to itself and greater than every other value (including +inf).

Entry points:

* :func:`to_pyarrow` builds a row filter with DataFusion semantics for ``Table.filter`` or a
  dataset scanner, optionally renaming logical columns to physical names (column mapping). It
  keeps name references, so pyarrow's parquet row-group pruning still works.
* :func:`referenced_columns`, :func:`conjuncts`, :func:`split_by_columns` and
  :func:`push_not_down` help planning; ``str(predicate)`` gives SQL-like text for EXPLAIN.
* Trees come from the builders here (``gt(col("x"), 1)``) or from a pyarrow Expression, such as
  the filter DataFusion pushes: :func:`.predicate_parse.from_pyarrow`.

NaN with the sign bit set: the rows read hold none (every NaN is made the positive one as it is
read, read/nan_filters.positive_nans), so DataFusion, which orders such a NaN below -inf, computes
on the rows what these filters answer; a literal ``-('NaN'::double)`` is read as below every value
(:mod:`.predicate_parse`), and in an IN list finds no row.
Known limits: comparisons between two columns are NaN-aware only when the column types are known
(from_pyarrow records them).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import PredicateError

__all__ = [
    "And",
    "BoolLiteral",
    "Column",
    "Comparison",
    "FALSE",
    "In",
    "IsNotNull",
    "IsNull",
    "Literal",
    "NULL",
    "Not",
    "Or",
    "Predicate",
    "TRUE",
    "and_",
    "between",
    "col",
    "conjunction",
    "conjuncts",
    "eq",
    "ge",
    "gt",
    "is_in",
    "is_not_null",
    "is_null",
    "le",
    "lit",
    "lt",
    "ne",
    "not_",
    "not_in",
    "or_",
    "push_not_down",
    "referenced_columns",
    "split_by_columns",
    "to_pyarrow",
]

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
#: ``a op b`` is ``b FLIPPED[op] a``.
FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
#: ``NOT (a op b)`` is ``a NEGATED[op] b`` (exact: the order used is total, NULL stays NULL).
NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


# --------------------------------------------------------------------------------------------
# Operands
# --------------------------------------------------------------------------------------------

_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _quote_ident(name: str) -> str:
    if _IDENT_RE.match(name):
        return name
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Column:
    """A column by logical name; ``path`` has more than one element for a nested struct field.

    ``type`` is informational (not part of equality): :func:`from_pyarrow` fills it from the
    schema, and :func:`to_pyarrow` uses it to apply NaN semantics to column-vs-column comparisons.
    """

    path: tuple[str, ...]
    type: pa.DataType | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        path = (self.path,) if isinstance(self.path, str) else tuple(self.path)
        if not path or not all(isinstance(p, str) for p in path):
            raise PredicateError(f"invalid column path {self.path!r}")
        object.__setattr__(self, "path", path)
        if self.type is not None and not isinstance(self.type, pa.DataType):
            raise PredicateError(f"invalid column type {self.type!r}")

    @property
    def name(self) -> str:
        """The top-level column name."""
        return self.path[0]

    def __str__(self) -> str:
        return ".".join(_quote_ident(p) for p in self.path)


def _scalar_key(s: pa.Scalar) -> Any:
    """A hashable value identifying a scalar's value. A float by its bits, as DataFusion's IN
    lists hash them: Python's ``-0.0 == 0.0`` let a plan kept for ``pf IN (0.0, ...)`` serve ``pf
    IN (-0.0, ...)``, and one key for every NaN let ``pf IN (-NaN, ...)`` serve ``pf IN (NaN,
    ...)`` (the sign bit set: not found in a NaN row)."""
    if not s.is_valid:
        return None
    t = s.type
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time(t) or pa.types.is_date(t):
        return s.value
    if pa.types.is_floating(t):
        return struct.pack("<d", s.as_py())
    try:
        v = s.as_py()
        hash(v)
        return v
    except Exception:
        return repr(s)


@dataclass(frozen=True, eq=False)
class Literal:
    """A typed literal value (a ``pyarrow.Scalar``; a null scalar is SQL NULL)."""

    value: pa.Scalar

    def __post_init__(self) -> None:
        if not isinstance(self.value, pa.Scalar):
            try:
                object.__setattr__(self, "value", pa.scalar(self.value))
            except Exception as e:
                raise PredicateError(f"cannot make a literal from {self.value!r}: {e}") from e

    @property
    def type(self) -> pa.DataType:
        return self.value.type

    @property
    def is_null(self) -> bool:
        return not self.value.is_valid

    @property
    def is_nan(self) -> bool:
        return pa.types.is_floating(self.type) and self.value.is_valid and math.isnan(self.value.as_py())

    def _key(self) -> tuple[str, Any]:
        return (str(self.type), _scalar_key(self.value))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Literal):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"Literal({_sql_literal(self.value)}: {self.type})"

    def __str__(self) -> str:
        return _sql_literal(self.value)


Operand = Column | Literal


def _fmt_epoch(value: int, unit: str) -> str:
    per_sec = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    secs, frac = divmod(value, per_sec)
    try:
        # isoformat: strftime's %Y leaves years below 1000 unpadded on glibc ('1-01-01')
        text = (_dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=secs)).isoformat(timespec="seconds")
    except OverflowError:  # past Python's years 1..9999, which Arrow's timestamps hold
        text = str(np.datetime64(secs, "s"))
    if frac:
        digits = {"ms": 3, "us": 6, "ns": 9}[unit]
        text += "." + str(frac).rjust(digits, "0").rstrip("0")
    return text


def _sql_literal(s: pa.Scalar) -> str:
    t = s.type
    if not s.is_valid:
        return "NULL"
    if pa.types.is_boolean(t):
        return "TRUE" if s.as_py() else "FALSE"
    if pa.types.is_integer(t):
        return str(s.as_py())
    if pa.types.is_floating(t):
        v = float(s.as_py())
        if math.isnan(v):  # the sign bit set: another value for DataFusion (below -inf)
            return "-('NaN'::DOUBLE)" if math.copysign(1.0, v) < 0 else "'NaN'::DOUBLE"
        if math.isinf(v):
            return "'inf'::DOUBLE" if v > 0 else "'-inf'::DOUBLE"
        return repr(v)
    if pa.types.is_decimal(t):
        return str(s.as_py())
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "'" + s.as_py().replace("'", "''") + "'"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "X'" + s.as_py().hex().upper() + "'"
    if pa.types.is_date(t):
        try:
            day = s.as_py().isoformat()
        except OverflowError:  # past Python's years 1..9999, which Arrow's dates hold
            day = str(np.datetime64(s.value if pa.types.is_date32(t) else s.value // 86_400_000, "D"))
        return f"DATE '{day}'"
    if pa.types.is_timestamp(t):
        text = _fmt_epoch(s.value, t.unit)
        return f"TIMESTAMP '{text}Z'" if t.tz is not None else f"TIMESTAMP '{text}'"
    if pa.types.is_dictionary(t):
        return _sql_literal(s.value)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return "[" + ", ".join(_sql_literal(v) for v in s.values) + "]"
    return "'" + str(s.as_py()).replace("'", "''") + "'"


# --------------------------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------------------------


class Predicate:
    """Base class of predicate nodes. ``&``, ``|`` and ``~`` build AND, OR and NOT."""

    __slots__ = ()

    def __and__(self, other: Predicate) -> Predicate:
        return and_(self, other)

    def __or__(self, other: Predicate) -> Predicate:
        return or_(self, other)

    def __invert__(self) -> Predicate:
        return Not(self)


def _check_operand(x: object) -> None:
    if not isinstance(x, (Column, Literal)):
        raise PredicateError(f"operand must be a Column or a Literal, got {type(x).__name__}")


def _check_pred(x: object) -> None:
    if not isinstance(x, Predicate):
        raise PredicateError(f"expected a Predicate, got {type(x).__name__}")


def _paren(p: Predicate) -> str:
    return f"({p})" if isinstance(p, (And, Or)) else str(p)


@dataclass(frozen=True)
class Comparison(Predicate):
    """``left op right`` with ``op`` one of ``= != < <= > >=``."""

    op: str
    left: Operand
    right: Operand

    def __post_init__(self) -> None:
        if self.op not in COMPARISON_OPS:
            raise PredicateError(f"unknown comparison operator {self.op!r}")
        _check_operand(self.left)
        _check_operand(self.right)

    def column_literal(self) -> tuple[Column, str, Literal] | None:
        """``(column, op, literal)`` with the column on the left, or None for other shapes."""
        if isinstance(self.left, Column) and isinstance(self.right, Literal):
            return self.left, self.op, self.right
        if isinstance(self.left, Literal) and isinstance(self.right, Column):
            return self.right, FLIPPED[self.op], self.left
        return None

    def __str__(self) -> str:
        op = "<>" if self.op == "!=" else self.op
        return f"{self.left} {op} {self.right}"


@dataclass(frozen=True)
class And(Predicate):
    children: tuple[Predicate, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", tuple(self.children))
        if not self.children:
            raise PredicateError("AND needs at least one operand")
        for c in self.children:
            _check_pred(c)

    def __str__(self) -> str:
        return " AND ".join(_paren(c) for c in self.children)


@dataclass(frozen=True)
class Or(Predicate):
    children: tuple[Predicate, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "children", tuple(self.children))
        if not self.children:
            raise PredicateError("OR needs at least one operand")
        for c in self.children:
            _check_pred(c)

    def __str__(self) -> str:
        return " OR ".join(_paren(c) for c in self.children)


@dataclass(frozen=True)
class Not(Predicate):
    child: Predicate

    def __post_init__(self) -> None:
        _check_pred(self.child)

    def __str__(self) -> str:
        return f"NOT ({self.child})"


@dataclass(frozen=True)
class IsNull(Predicate):
    operand: Operand

    def __post_init__(self) -> None:
        _check_operand(self.operand)

    def __str__(self) -> str:
        return f"{self.operand} IS NULL"


@dataclass(frozen=True)
class IsNotNull(Predicate):
    operand: Operand

    def __post_init__(self) -> None:
        _check_operand(self.operand)

    def __str__(self) -> str:
        return f"{self.operand} IS NOT NULL"


@dataclass(frozen=True)
class In(Predicate):
    """``operand [NOT] IN (values...)`` with SQL semantics (NULLs in the list make misses NULL)."""

    operand: Operand
    values: tuple[Literal, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        _check_operand(self.operand)
        values = tuple(v if isinstance(v, Literal) else Literal(v) for v in self.values)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "negated", bool(self.negated))

    def __str__(self) -> str:
        kw = "NOT IN" if self.negated else "IN"
        return f"{self.operand} {kw} ({_sql_list(self.values)})"


def _sql_list(values: Sequence[Literal]) -> str:
    """IN-list items as SQL text; a list of integers (the common long list: ids) is converted in
    one call, the per-item formatting took 50 ms for 20,000 items."""
    try:
        arr = pa.array([v.value for v in values])
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # literals of several types
        arr = None
    if arr is not None and pa.types.is_integer(arr.type):
        return ", ".join("NULL" if x is None else str(x) for x in arr.to_pylist())
    return ", ".join(str(v) for v in values)


@dataclass(frozen=True)
class BoolLiteral(Predicate):
    """A constant: ``True``, ``False`` or ``None`` (SQL NULL)."""

    value: bool | None

    def __post_init__(self) -> None:
        if self.value is not None and not isinstance(self.value, bool):
            raise PredicateError(f"BoolLiteral takes True, False or None, got {self.value!r}")

    def __str__(self) -> str:
        return {True: "TRUE", False: "FALSE", None: "NULL"}[self.value]


TRUE = BoolLiteral(True)
FALSE = BoolLiteral(False)
NULL = BoolLiteral(None)


# --------------------------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------------------------


def col(name: str | Sequence[str], type: pa.DataType | None = None) -> Column:  # noqa: A002
    """A column reference: ``col("a")`` or ``col(("struct", "field"))``."""
    return Column(name if isinstance(name, str) else tuple(name), type)


def lit(value: Any, type: pa.DataType | None = None) -> Literal:  # noqa: A002
    """A literal: a ``pyarrow.Scalar`` or a Python value (with an optional Arrow type)."""
    if isinstance(value, Literal):
        return value
    if isinstance(value, pa.Scalar):
        return Literal(value if type is None else value.cast(type))
    try:
        return Literal(pa.scalar(value, type=type))
    except Exception as e:
        raise PredicateError(f"cannot make a literal from {value!r}: {e}") from e


def _operand(x: Any) -> Operand:
    return x if isinstance(x, (Column, Literal)) else lit(x)


def _cmp(op: str, a: Any, b: Any) -> Comparison:
    return Comparison(op, _operand(a), _operand(b))


def eq(a: Any, b: Any) -> Comparison:
    return _cmp("=", a, b)


def ne(a: Any, b: Any) -> Comparison:
    return _cmp("!=", a, b)


def lt(a: Any, b: Any) -> Comparison:
    return _cmp("<", a, b)


def le(a: Any, b: Any) -> Comparison:
    return _cmp("<=", a, b)


def gt(a: Any, b: Any) -> Comparison:
    return _cmp(">", a, b)


def ge(a: Any, b: Any) -> Comparison:
    return _cmp(">=", a, b)


def between(x: Any, low: Any, high: Any) -> Predicate:
    return and_(ge(x, low), le(x, high))


def and_(*preds: Predicate) -> Predicate:
    """AND of the predicates, flattening nested ANDs; ``TRUE`` when empty."""
    out: list[Predicate] = []
    for p in preds:
        _check_pred(p)
        out.extend(p.children if isinstance(p, And) else (p,))
    if not out:
        return TRUE
    return out[0] if len(out) == 1 else And(tuple(out))


def or_(*preds: Predicate) -> Predicate:
    """OR of the predicates, flattening nested ORs; ``FALSE`` when empty."""
    out: list[Predicate] = []
    for p in preds:
        _check_pred(p)
        out.extend(p.children if isinstance(p, Or) else (p,))
    if not out:
        return FALSE
    return out[0] if len(out) == 1 else Or(tuple(out))


def not_(p: Predicate) -> Predicate:
    return Not(p)


def is_null(x: Any) -> IsNull:
    return IsNull(_operand(x))


def is_not_null(x: Any) -> IsNotNull:
    return IsNotNull(_operand(x))


def is_in(x: Any, values: Iterable[Any]) -> In:
    return In(_operand(x), tuple(_as_literal(v) for v in values), False)


def not_in(x: Any, values: Iterable[Any]) -> In:
    return In(_operand(x), tuple(_as_literal(v) for v in values), True)


def _as_literal(v: Any) -> Literal:
    return v if isinstance(v, Literal) else lit(v)


# --------------------------------------------------------------------------------------------
# Tree utilities
# --------------------------------------------------------------------------------------------


def iter_columns(pred: Predicate) -> Iterator[Column]:
    """Every column reference in the tree (with repeats)."""
    if isinstance(pred, Comparison):
        for x in (pred.left, pred.right):
            if isinstance(x, Column):
                yield x
    elif isinstance(pred, (And, Or)):
        for c in pred.children:
            yield from iter_columns(c)
    elif isinstance(pred, Not):
        yield from iter_columns(pred.child)
    elif isinstance(pred, (IsNull, IsNotNull, In)):
        if isinstance(pred.operand, Column):
            yield pred.operand
    elif isinstance(pred, BoolLiteral):
        return
    else:
        raise PredicateError(f"not a predicate: {pred!r}")


def literal_count(pred: Predicate) -> int:
    """How many literals the tree holds (one per comparison, each value of an IN list), walked
    with a stack: chains may be far deeper than Python's recursion limit."""
    count, stack = 0, [pred]
    while stack:
        p = stack.pop()
        if isinstance(p, (And, Or)):
            stack.extend(p.children)
        elif isinstance(p, Not):
            stack.append(p.child)
        elif isinstance(p, In):
            count += len(p.values)
        elif isinstance(p, Comparison):
            count += 1
    return count


def referenced_columns(pred: Predicate) -> set[str]:
    """Top-level logical names of every column the predicate reads."""
    return {c.name for c in iter_columns(pred)}


def chain_operands(pred: And | Or) -> list[Predicate]:
    """The operands of an AND (an OR) in order, nested ANDs (ORs) flattened with a stack: a tree
    built as ``And((And((a, b)), c))`` may be a chain far deeper than Python's recursion limit."""
    kind = type(pred)
    out: list[Predicate] = []
    stack: list[Predicate] = [pred]
    while stack:
        p = stack.pop()
        if type(p) is kind:
            stack.extend(reversed(p.children))  # type: ignore[attr-defined]
        else:
            out.append(p)
    return out


#: Deepest nesting of a predicate tree accepted from outside (AND / OR chains count as one
#: level; DataFusion's SQL parser stops at 50 levels of parentheses): the tree's walkers recurse
#: once per level, so a deeper tree would end in a RecursionError.
MAX_NESTING = 64


def check_nesting(pred: Predicate) -> None:
    """Raise :class:`PredicateError` for a tree nested deeper than :data:`MAX_NESTING` levels
    (walked with a stack)."""
    stack = [(pred, 1)]
    while stack:
        p, depth = stack.pop()
        if depth > MAX_NESTING:
            raise PredicateError(nesting_message())
        if isinstance(p, (And, Or)):
            stack.extend((c, depth + 1) for c in chain_operands(p))
        elif isinstance(p, Not):
            stack.append((p.child, depth + 1))


def nesting_message() -> str:
    return (
        f"the predicate is nested more than {MAX_NESTING} levels deep (a chain of ANDs or of ORs "
        "counts as one level); simplify it"
    )


def conjuncts(pred: Predicate) -> list[Predicate]:
    """The AND-ed parts of ``pred`` (nested ANDs flattened; ``TRUE`` has none)."""
    if isinstance(pred, And):
        out: list[Predicate] = []
        for c in chain_operands(pred):
            if c != TRUE:
                _check_pred(c)
                out.append(c)
        return out
    if pred == TRUE:
        return []
    _check_pred(pred)
    return [pred]


def conjunction(preds: Iterable[Predicate]) -> Predicate:
    """AND of ``preds`` (``TRUE`` when empty)."""
    return and_(*preds)


def split_by_columns(pred: Predicate, columns: Iterable[str]) -> tuple[Predicate, Predicate]:
    """Split ``pred`` into ``(inside, rest)`` with ``pred == inside AND rest``.

    ``inside`` is the AND of the conjuncts that reference only ``columns`` (top-level names, e.g.
    partition columns or ``_commit_version``/``_change_type``); either part is ``TRUE`` when empty.
    """
    cols = set(columns)
    inside: list[Predicate] = []
    rest: list[Predicate] = []
    for c in conjuncts(pred):
        (inside if referenced_columns(c) <= cols else rest).append(c)
    return conjunction(inside), conjunction(rest)


def push_not_down(pred: Predicate, negate: bool = False) -> Predicate:
    """An equivalent tree without :class:`Not` (negation normal form).

    Exact under three-valued logic: ``NOT (a AND b)`` is ``NOT a OR NOT b``, ``NOT (x < c)`` is
    ``x >= c`` (the order is total, NaN included), ``NOT (x IN l)`` is ``x NOT IN l``,
    ``NOT x IS NULL`` is ``x IS NOT NULL`` and ``NOT NULL`` is ``NULL``.
    """
    if isinstance(pred, Not):
        return push_not_down(pred.child, not negate)
    if isinstance(pred, (And, Or)):
        kids = [push_not_down(c, negate) for c in pred.children]
        use_and = isinstance(pred, And) != negate
        return and_(*kids) if use_and else or_(*kids)
    if not negate:
        _check_pred(pred)
        return pred
    if isinstance(pred, Comparison):
        return Comparison(NEGATED[pred.op], pred.left, pred.right)
    if isinstance(pred, IsNull):
        return IsNotNull(pred.operand)
    if isinstance(pred, IsNotNull):
        return IsNull(pred.operand)
    if isinstance(pred, In):
        return In(pred.operand, pred.values, not pred.negated)
    if isinstance(pred, BoolLiteral):
        return BoolLiteral(None if pred.value is None else not pred.value)
    raise PredicateError(f"not a predicate: {pred!r}")


# --------------------------------------------------------------------------------------------
# to_pyarrow
# --------------------------------------------------------------------------------------------

_NULL_BOOL = pa.scalar(None, pa.bool_())


#: logical -> physical names of fields: by path tuple, or a top-level column by its name
Rename = Mapping["str | tuple[str, ...]", str]


def _physical_path(path: tuple[str, ...], rename: Rename | None) -> tuple[str, ...]:
    if not rename:
        return path
    out = []
    for i, part in enumerate(path):
        new = rename.get(path[: i + 1])
        if new is None and i == 0:
            new = rename.get(part)
        out.append(part if new is None else new)
    return tuple(out)


def _operand_expr(x: Operand, rename: Rename | None) -> pc.Expression:
    if isinstance(x, Column):
        return pc.field(*_physical_path(x.path, rename))
    return pc.scalar(x.value)


def _is_floating(x: Operand) -> bool:
    t = x.type
    return t is not None and pa.types.is_floating(t)


def _plain_cmp(op: str, a: pc.Expression, b: pc.Expression) -> pc.Expression:
    if op == "=":
        return a == b
    if op == "!=":
        return a != b
    if op == "<":
        return a < b
    if op == "<=":
        return a <= b
    if op == ">":
        return a > b
    return a >= b


def _float_cmp_column_literal(op: str, x: pc.Expression, c: Literal) -> pc.Expression:
    """``x op c`` for a floating column and a non-null literal, NaN ordered above everything."""
    nan_x = pc.is_nan(x)
    if c.is_nan:
        if op in ("=", ">="):
            return nan_x
        if op in ("!=", "<"):
            return ~nan_x
        if op == "<=":  # TRUE for every non-null value
            return nan_x | ~nan_x
        return nan_x & ~nan_x  # ">": FALSE for every non-null value
    e = pc.scalar(c.value)
    if op in (">", ">="):
        return _plain_cmp(op, x, e) | nan_x
    return _plain_cmp(op, x, e)


def _float_cmp_general(op: str, a: pc.Expression, b: pc.Expression) -> pc.Expression:
    def eq_(p: pc.Expression, q: pc.Expression) -> pc.Expression:
        return (p == q) | (pc.is_nan(p) & pc.is_nan(q))

    def lt_(p: pc.Expression, q: pc.Expression) -> pc.Expression:
        return (p < q) | (~pc.is_nan(p) & pc.is_nan(q))

    if op == "=":
        return eq_(a, b)
    if op == "!=":
        return ~eq_(a, b)
    if op == "<":
        return lt_(a, b)
    if op == "<=":
        return lt_(a, b) | eq_(a, b)
    if op == ">":
        return lt_(b, a)
    return lt_(b, a) | eq_(b, a)


def _is_integer_column(x: Operand) -> bool:
    return isinstance(x, Column) and x.type is not None and pa.types.is_integer(x.type)


def _comparison_expr(p: Comparison, rename: Rename | None) -> pc.Expression:
    a, b = _operand_expr(p.left, rename), _operand_expr(p.right, rename)
    if not (_is_floating(p.left) or _is_floating(p.right)):
        return _plain_cmp(p.op, a, b)
    # an integer column against a float one, as DataFusion compares them (the integer cast to a
    # double, rounded): pyarrow's own cast refuses values past 2**53 when a file holds them
    if _is_integer_column(p.left) and _is_floating(p.right):
        a = a.cast(pa.float64(), safe=False)
    elif _is_integer_column(p.right) and _is_floating(p.left):
        b = b.cast(pa.float64(), safe=False)
    for x in (p.left, p.right):
        if isinstance(x, Literal) and x.is_null:
            return _plain_cmp(p.op, a, b)  # NULL whatever the other side is
    cl = p.column_literal()
    if cl is not None:
        column, op, literal = cl
        return _float_cmp_column_literal(op, _operand_expr(column, rename), literal)
    return _float_cmp_general(p.op, a, b)


_SET_LOOKUP_INCONCLUSIVE = 3  # arrow::compute::SetLookupOptions::NullMatchingBehavior::INCONCLUSIVE


def _sql_in_options(value_set: pa.Array) -> pc.FunctionOptions | None:
    """``SetLookupOptions`` with SQL semantics (null_matching_behavior=INCONCLUSIVE).

    pyarrow's Python constructor only offers MATCH/SKIP, so the options are built from their
    documented serialised form (an Arrow IPC file of one struct row) with
    ``FunctionOptions.deserialize``. Returns None if that is not possible.
    """
    try:
        row = pa.StructArray.from_arrays(
            [
                pa.array([value_set], pa.list_(value_set.type)),
                pa.array([_SET_LOOKUP_INCONCLUSIVE], pa.uint32()),
                pa.array([b"SetLookupOptions"], pa.binary()),
            ],
            names=["value_set", "null_matching_behavior", "_type_name"],
        )
        table = pa.table({"": row})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as w:
            w.write_table(table)
        opts = pc.FunctionOptions.deserialize(sink.getvalue())
        if "INCONCLUSIVE" not in str(pc.is_in(pc.field("x"), options=opts)):
            return None
        return opts
    except Exception:
        return None


def _value_array(values: Sequence[Literal]) -> pa.Array:
    typ = next((v.type for v in values if not v.is_null), None) or values[0].type
    scalars = [v.value if v.type == typ else v.value.cast(typ) for v in values]
    return pa.array(scalars, type=typ)


def _in_expr(p: In, rename: Rename | None) -> pc.Expression:
    """pyarrow's set lookup tells NaNs apart by their bits, as DataFusion's IN lists do; the rows
    read hold only the positive NaN (read/nan_filters.positive_nans), so a NaN in the list is
    looked up as such: the positive one finds every NaN row, one with the sign bit set none."""
    x = _operand_expr(p.operand, rename)
    values = [v for v in p.values if not v.is_nan]
    found_nan = any(math.copysign(1.0, v.value.as_py()) > 0 for v in p.values if v.is_nan)
    if values:
        base = _lookup(x, values, p)
    else:  # x IN (): FALSE, NULL for a NULL x
        base = pc.if_else(x.is_valid(), pc.scalar(False), pc.scalar(_NULL_BOOL))
    if found_nan:
        base = base | pc.is_nan(x)
    return ~base if p.negated else base


def _lookup(x: pc.Expression, values: Sequence[Literal], p: In) -> pc.Expression:
    """``x IN values`` with SQL's NULLs: NULL for a NULL ``x``, and for a value not found when
    the list holds a NULL."""
    try:
        arr = _value_array(values)
    except Exception as e:
        raise PredicateError(f"IN list values of mixed types: {p}") from e
    opts = _sql_in_options(arr)
    if opts is not None:
        base = pc.is_in(x, options=opts)
    else:  # equivalent formulation without the INCONCLUSIVE option
        non_null = arr.drop_null()
        base = pc.if_else(x.is_null(), pc.scalar(_NULL_BOOL), x.isin(non_null))
        if arr.null_count:
            base = base | pc.scalar(_NULL_BOOL)  # TRUE stays TRUE, a miss becomes NULL
    return base


def to_pyarrow(pred: Predicate, rename: Rename | None = None) -> pc.Expression:
    """A pyarrow row filter with DataFusion (SQL) semantics.

    ``rename`` maps logical to physical column names: a field by its logical path (``("a",
    "b")``), a top-level column also by its name. References stay by name.
    """
    if isinstance(pred, Comparison):
        return _comparison_expr(pred, rename)
    if isinstance(pred, And):
        out = to_pyarrow(pred.children[0], rename)
        for c in pred.children[1:]:
            out = out & to_pyarrow(c, rename)
        return out
    if isinstance(pred, Or):
        out = to_pyarrow(pred.children[0], rename)
        for c in pred.children[1:]:
            out = out | to_pyarrow(c, rename)
        return out
    if isinstance(pred, Not):
        return ~to_pyarrow(pred.child, rename)
    if isinstance(pred, IsNull):
        return _operand_expr(pred.operand, rename).is_null(nan_is_null=False)
    if isinstance(pred, IsNotNull):
        return _operand_expr(pred.operand, rename).is_valid()
    if isinstance(pred, In):
        return _in_expr(pred, rename)
    if isinstance(pred, BoolLiteral):
        return pc.scalar(pa.scalar(pred.value, pa.bool_()))
    raise PredicateError(f"not a predicate: {pred!r}")
