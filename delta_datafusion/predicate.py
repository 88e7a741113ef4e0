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

* :func:`from_pyarrow` reads the ``pyarrow.compute.Expression`` DataFusion hands a Python dataset
  (through the public Substrait serialisation first, then the Expression's pickle payload).
* :func:`to_pyarrow` builds a row filter with DataFusion semantics for ``Table.filter`` or a
  dataset scanner, optionally renaming logical columns to physical names (column mapping). It
  keeps name references, so pyarrow's parquet row-group pruning still works.
* :func:`referenced_columns`, :func:`conjuncts`, :func:`split_by_columns` and
  :func:`push_not_down` help planning; ``str(predicate)`` gives SQL-like text for EXPLAIN.

Parsing notes (pyarrow 26, substrait 0.37): ``Expression.to_substrait`` writes timestamp literals
into fields the current Substrait proto no longer defines (read back as unknown fields, typed from
the compared column), cannot serialise nanosecond timestamps with a time zone or
``is_null(nan_is_null=True)``, and drops ``is_in``'s null-matching behaviour. Whatever Substrait
cannot carry is read from the Expression's pickle payload instead (an Arrow IPC file whose schema
metadata lists the tree in order). Both routes read ``is_in`` as SQL ``IN``, which is what
DataFusion means by it.

Known limits: NaN handling assumes the canonical (positive) NaN; a negative-sign NaN bit pattern
is treated like any NaN here while DataFusion sorts it below -inf. Comparisons between two columns
are NaN-aware only when the column types are known (:func:`from_pyarrow` records them).
"""

from __future__ import annotations

import ctypes
import datetime as _dt
import decimal
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
    "from_pyarrow",
    "bind_types",
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
    """A hashable value identifying a scalar's value (NaN equals NaN)."""
    if not s.is_valid:
        return None
    t = s.type
    if pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_time(t) or pa.types.is_date64(t):
        return s.value
    if pa.types.is_floating(t):
        v = s.as_py()
        return "NaN" if math.isnan(v) else v
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
    text = (_dt.datetime(1970, 1, 1) + _dt.timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S")
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
        if math.isnan(v):
            return "'NaN'::DOUBLE"
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
        return f"DATE '{s.as_py().isoformat()}'"
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
        return f"{self.operand} {kw} ({', '.join(str(v) for v in self.values)})"


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


def referenced_columns(pred: Predicate) -> set[str]:
    """Top-level logical names of every column the predicate reads."""
    return {c.name for c in iter_columns(pred)}


def conjuncts(pred: Predicate) -> list[Predicate]:
    """The AND-ed parts of ``pred`` (nested ANDs flattened; ``TRUE`` has none)."""
    if isinstance(pred, And):
        out: list[Predicate] = []
        for c in pred.children:
            out.extend(conjuncts(c))
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


def _comparison_expr(p: Comparison, rename: Rename | None) -> pc.Expression:
    a, b = _operand_expr(p.left, rename), _operand_expr(p.right, rename)
    if not (_is_floating(p.left) or _is_floating(p.right)):
        return _plain_cmp(p.op, a, b)
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
    x = _operand_expr(p.operand, rename)
    if not p.values:
        base = pc.if_else(x.is_valid(), pc.scalar(False), pc.scalar(_NULL_BOOL))
        return ~base if p.negated else base
    try:
        arr = _value_array(p.values)
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
    return ~base if p.negated else base


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


# --------------------------------------------------------------------------------------------
# from_pyarrow
# --------------------------------------------------------------------------------------------


class _Unsupported(Exception):
    """The current parsing route cannot read this expression."""


# Intermediate form shared by both routes:
#   ("col", Column) | ("lit", pa.Scalar) | ("call", name, [args]) | ("in", operand, [pa.Scalar])
# with call names "=", "!=", "<", "<=", ">", ">=", "and", "or", "not", "is_null",
# "is_null_or_nan", "is_not_null".


def bind_types(pred: Predicate, schema: pa.Schema) -> Predicate:
    """``pred`` with every untyped column reference typed from ``schema`` (a predicate built by
    hand, e.g. ``gt(col("f"), 1)``): row filters are NaN-aware only for typed float columns.
    Columns not in the schema stay untyped (planning reports them)."""

    def column(c: Column) -> Column:
        if c.type is not None:
            return c
        try:
            return Column(c.path, _resolve_path(schema, c.path))
        except _Unsupported:
            return c

    def operand(x: Operand) -> Operand:
        return column(x) if isinstance(x, Column) else x

    if isinstance(pred, Comparison):
        left, right = operand(pred.left), operand(pred.right)
        if isinstance(left, Column) and isinstance(right, Literal):
            right = _decimal_literal(left, right)
        elif isinstance(right, Column) and isinstance(left, Literal):
            left = _decimal_literal(right, left)
        return Comparison(pred.op, left, right)
    if isinstance(pred, And):
        return And(tuple(bind_types(c, schema) for c in pred.children))
    if isinstance(pred, Or):
        return Or(tuple(bind_types(c, schema) for c in pred.children))
    if isinstance(pred, Not):
        return Not(bind_types(pred.child, schema))
    if isinstance(pred, IsNull):
        return IsNull(operand(pred.operand))
    if isinstance(pred, IsNotNull):
        return IsNotNull(operand(pred.operand))
    if isinstance(pred, In):
        if not pred.values:  # x IN () is FALSE and x NOT IN () TRUE, NULL x included
            return BoolLiteral(pred.negated)
        x = operand(pred.operand)
        values = tuple(_decimal_literal(x, v) for v in pred.values) if isinstance(x, Column) else pred.values
        return In(x, values, pred.negated)
    return pred


_EXACT = decimal.Context(prec=80)


def _decimal_literal(column: Column, lit: Literal) -> Literal:
    """An integer literal compared with a decimal column, as that decimal type when exact (SQL
    compares ``dec > 2`` numerically; pyarrow would widen both sides past its precision limit)."""
    t = column.type
    if t is None or not pa.types.is_decimal(t) or lit.is_null or not pa.types.is_integer(lit.type):
        return lit
    try:  # through Python's Decimal: pyarrow refuses int64 -> decimal(p < 21) by type, not value
        return Literal(pa.scalar(decimal.Decimal(lit.value.as_py()), t))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, decimal.InvalidOperation, OverflowError):
        return lit  # out of the column's range: left for the evaluability check to refuse


def _resolve_path(schema: pa.Schema, path: Sequence[str]) -> pa.DataType:
    fields: Any = schema
    typ: pa.DataType | None = None
    for part in path:
        idx = fields.get_field_index(part)
        if idx < 0:
            raise _Unsupported(f"column {'.'.join(path)!r} is not in the schema")
        typ = fields.field(idx).type
        fields = typ if pa.types.is_struct(typ) else _NoFields()
    assert typ is not None
    return typ


class _NoFields:
    def get_field_index(self, name: str) -> int:
        return -1


def _to_predicate(node: tuple) -> Predicate:
    kind = node[0]
    if kind == "col":
        c: Column = node[1]
        if c.type is not None and not pa.types.is_boolean(c.type):
            raise _Unsupported(f"non-boolean column {c} used as a predicate")
        return Comparison("=", c, Literal(pa.scalar(True)))
    if kind == "lit":
        s: pa.Scalar = node[1]
        if pa.types.is_boolean(s.type) or pa.types.is_null(s.type):
            return BoolLiteral(s.as_py() if s.is_valid else None)
        raise _Unsupported(f"non-boolean literal {s} used as a predicate")
    if kind == "in":
        operand = _to_operand(node[1])
        if not node[2]:  # x IN () is FALSE for every row, NULL x included
            return FALSE
        return In(operand, tuple(Literal(v) for v in node[2]), False)
    name, args = node[1], node[2]
    if name in COMPARISON_OPS:
        if len(args) != 2:
            raise _Unsupported(f"comparison with {len(args)} arguments")
        if any(a[0] not in ("col", "lit") for a in args):
            return _boolean_comparison(name, args)
        return Comparison(name, _to_operand(args[0]), _to_operand(args[1]))
    if name in ("and", "or"):
        if not args:
            raise _Unsupported(f"{name} without arguments")
        kids = tuple(_to_predicate(a) for a in args)
        return and_(*kids) if name == "and" else or_(*kids)
    if len(args) != 1:
        raise _Unsupported(f"{name} with {len(args)} arguments")
    if name == "not":
        return Not(_to_predicate(args[0]))
    if name in ("is_null", "is_not_null", "is_null_or_nan") and args[0][0] not in ("col", "lit"):
        # IS [NOT] NULL of a boolean expression ("(a > 1) IS NULL"); a boolean is never NaN
        p = _to_predicate(args[0])
        known = or_(_is(p, True), _is(p, False))
        return known if name == "is_not_null" else not_(known)
    if name == "is_not_null":
        return IsNotNull(_to_operand(args[0]))
    if name == "is_null":
        return IsNull(_to_operand(args[0]))
    if name == "is_null_or_nan":
        x = _to_operand(args[0])
        if x.type is not None and pa.types.is_floating(x.type):
            return Or((IsNull(x), Comparison("=", x, Literal(pa.scalar(float("nan"), x.type)))))
        return IsNull(x)
    raise _Unsupported(f"function {name!r}")


def _is(p: Predicate, value: bool) -> Predicate:
    """A predicate that is TRUE where ``p`` is ``value`` and FALSE elsewhere (never NULL), so that
    ``p IS NULL`` can be written as ``NOT (_is(p, True) OR _is(p, False))``.

    A comparison or IN is NULL exactly when a column operand is NULL (or a NULL literal / NULL in
    the IN list leaves it undecided); AND, OR and NOT follow Kleene's tables."""
    if isinstance(p, BoolLiteral):
        return TRUE if p.value is value else FALSE
    if isinstance(p, (IsNull, IsNotNull)):
        return p if value else not_(p)
    if isinstance(p, Comparison):
        if any(isinstance(x, Literal) and x.is_null for x in (p.left, p.right)):
            return FALSE
        nonnull = [IsNotNull(x) for x in (p.left, p.right) if isinstance(x, Column)]
        return and_(*nonnull, p if value else not_(p))
    if isinstance(p, In):
        values = tuple(v for v in p.values if not v.is_null)
        hit = In(p.operand, values, False) if values else FALSE
        nonnull = [IsNotNull(p.operand)] if isinstance(p.operand, Column) else []
        if isinstance(p.operand, Literal) and p.operand.is_null:
            return FALSE
        found = and_(*nonnull, hit)
        missed = FALSE if len(values) != len(p.values) else and_(*nonnull, not_(hit))
        return found if value != p.negated else missed
    if isinstance(p, Not):
        return _is(p.child, not value)
    if isinstance(p, And):
        parts = [_is(c, value) for c in p.children]
        return and_(*parts) if value else or_(*parts)
    if isinstance(p, Or):
        parts = [_is(c, value) for c in p.children]
        return or_(*parts) if value else and_(*parts)
    raise _Unsupported(f"IS NULL of {p}")


def _boolean_comparison(op: str, args: Sequence[tuple]) -> Predicate:
    """A comparison of two boolean expressions (e.g. ``(a > 1) = (b = 'x')``, ``(a > 1) > b``) as
    logic that is exact in SQL's three-valued logic, where a NULL side makes the comparison NULL
    (false < true):

    - ``P = Q``: ``(P AND Q) OR (NOT P AND NOT Q)``; ``P <> Q``: ``(P AND NOT Q) OR (NOT P AND Q)``;
    - ``P >= Q``: ``(P OR NOT Q) AND (P OR NOT P) AND (Q OR NOT Q)``, where ``X OR NOT X`` is TRUE
      for a known X and NULL for a NULL one, so a NULL side cannot give TRUE;
    - ``P > Q``: ``(P AND NOT Q) OR (P AND NOT P) OR (Q AND NOT Q)`` (``NOT (Q >= P)``; ``X AND
      NOT X`` is FALSE for a known X and NULL for a NULL one);
    - ``P <= Q`` and ``P < Q`` swap the sides.

    Checked for all nine NULL/TRUE/FALSE pairs against DataFusion (tests/test_sql_filters.py)."""
    p, q = _to_predicate(args[0]), _to_predicate(args[1])
    if op in ("<", "<="):
        p, q, op = q, p, {"<": ">", "<=": ">="}[op]
    if op == "=":
        return or_(and_(p, q), and_(not_(p), not_(q)))
    if op == "!=":
        return or_(and_(p, not_(q)), and_(not_(p), q))
    if op == ">=":
        return and_(or_(p, not_(q)), or_(p, not_(p)), or_(q, not_(q)))
    if op == ">":
        return or_(and_(p, not_(q)), and_(p, not_(p)), and_(q, not_(q)))
    raise _Unsupported(f"comparison ({op}) of boolean expressions")


def _to_operand(node: tuple) -> Operand:
    if node[0] == "col":
        return node[1]
    if node[0] == "lit":
        return Literal(node[1])
    raise _Unsupported("only columns and literals can be compared")


# ---- Substrait route -----------------------------------------------------------------------

_SUBSTRAIT_FUNCS = {
    "equal": "=",
    "not_equal": "!=",
    "lt": "<",
    "lte": "<=",
    "gt": ">",
    "gte": ">=",
    "and": "and",
    "or": "or",
    "not": "not",
    "is_null": "is_null",
    "is_not_null": "is_not_null",
}
_PRECISION_UNIT = {0: "s", 3: "ms", 6: "us", 9: "ns"}
# Deprecated Substrait literal fields pyarrow 26 still writes for timestamps (microseconds).
_DEPRECATED_TIMESTAMP_FIELD = 14
_DEPRECATED_TIMESTAMP_TZ_FIELD = 27


class _SubstraitReader:
    def __init__(self, ee: Any, schema: pa.Schema) -> None:
        self.schema = schema
        self.funcs: dict[int, str] = {}
        self.types: dict[int, str] = {}
        for ext in ee.extensions:
            which = ext.WhichOneof("mapping_type")
            if which == "extension_function":
                f = ext.extension_function
                self.funcs[f.function_anchor] = f.name.split(":")[0]
            elif which == "extension_type":
                t = ext.extension_type
                self.types[t.type_anchor] = t.name

    def node(self, e: Any) -> tuple:
        kind = e.WhichOneof("rex_type")
        if kind == "selection":
            return ("col", self.column(e.selection))
        if kind == "literal":
            return ("lit", self.literal(e.literal, None))
        if kind == "singular_or_list":
            sol = e.singular_or_list
            operand = self.node(sol.value)
            if operand[0] != "col":
                raise _Unsupported("IN over a non-column")
            ctx = operand[1].type
            values = []
            for o in sol.options:
                if o.WhichOneof("rex_type") != "literal":
                    raise _Unsupported("IN list with a non-literal")
                values.append(self.literal(o.literal, ctx))
            return ("in", operand, values)
        if kind == "scalar_function":
            sf = e.scalar_function
            fname = self.funcs.get(sf.function_reference)
            name = _SUBSTRAIT_FUNCS.get(fname or "")
            if name is None:
                raise _Unsupported(f"substrait function {fname!r}")
            raw = []
            for a in sf.arguments:
                if a.WhichOneof("arg_type") != "value":
                    raise _Unsupported("non-value function argument")
                raw.append(a.value)
            # Columns first, so literals can be typed after the column they are compared with.
            cols = {i: self.node(v) for i, v in enumerate(raw) if v.WhichOneof("rex_type") != "literal"}
            ctx = next((n[1].type for n in cols.values() if n[0] == "col"), None)
            args = [
                cols[i] if i in cols else ("lit", self.literal(v.literal, ctx)) for i, v in enumerate(raw)
            ]
            return ("call", name, args)
        raise _Unsupported(f"substrait expression {kind!r}")

    def column(self, sel: Any) -> Column:
        if (
            sel.WhichOneof("reference_type") != "direct_reference"
            or sel.WhichOneof("root_type") != "root_reference"
        ):
            raise _Unsupported("field reference that is not a direct root reference")
        seg = sel.direct_reference
        fields: Any = self.schema
        path: list[str] = []
        typ: pa.DataType | None = None
        while True:
            if seg.WhichOneof("reference_type") != "struct_field":
                raise _Unsupported("non-struct field reference")
            idx = seg.struct_field.field
            if fields is None or not 0 <= idx < len(fields):
                raise _Unsupported(f"field index {idx} out of range")
            f = fields.field(idx)
            path.append(f.name)
            typ = f.type
            if not seg.struct_field.HasField("child"):
                break
            seg = seg.struct_field.child
            fields = typ if pa.types.is_struct(typ) else None
        return Column(tuple(path), typ)

    def arrow_type(self, t: Any, ctx: pa.DataType | None) -> pa.DataType:
        kind = t.WhichOneof("kind")
        simple = {
            "bool": pa.bool_(),
            "i8": pa.int8(),
            "i16": pa.int16(),
            "i32": pa.int32(),
            "i64": pa.int64(),
            "fp32": pa.float32(),
            "fp64": pa.float64(),
            "string": pa.string(),
            "binary": pa.binary(),
            "date": pa.date32(),
        }
        if kind in simple:
            return simple[kind]
        if kind == "decimal":
            return pa.decimal128(t.decimal.precision, t.decimal.scale)
        if kind == "fixed_binary":
            return pa.binary(t.fixed_binary.length)
        if kind == "precision_timestamp":
            return pa.timestamp(_PRECISION_UNIT[t.precision_timestamp.precision])
        if kind == "precision_timestamp_tz":
            return pa.timestamp(_PRECISION_UNIT[t.precision_timestamp_tz.precision], tz=_ctx_tz(ctx))
        if kind == "user_defined":
            return self.user_type(t.user_defined.type_reference)
        raise _Unsupported(f"substrait type {kind!r}")

    def user_type(self, anchor: int) -> pa.DataType:
        name = self.types.get(anchor)
        known = {
            "u8": pa.uint8(),
            "u16": pa.uint16(),
            "u32": pa.uint32(),
            "u64": pa.uint64(),
            "large_string": pa.large_string(),
            "large_binary": pa.large_binary(),
        }
        if name not in known:
            raise _Unsupported(f"substrait extension type {name!r}")
        return known[name]

    def literal(self, lit_: Any, ctx: pa.DataType | None) -> pa.Scalar:
        kind = lit_.WhichOneof("literal_type")
        if kind is None:
            return self._deprecated_timestamp(lit_, ctx)
        simple = {
            "boolean": pa.bool_(),
            "i8": pa.int8(),
            "i16": pa.int16(),
            "i32": pa.int32(),
            "i64": pa.int64(),
            "fp32": pa.float32(),
            "fp64": pa.float64(),
            "string": pa.string(),
            "binary": pa.binary(),
        }
        if kind in simple:
            return pa.scalar(getattr(lit_, kind), simple[kind])
        if kind == "fixed_binary":
            return pa.scalar(lit_.fixed_binary, pa.binary(len(lit_.fixed_binary)))
        if kind == "date":
            return pa.scalar(lit_.date, pa.int32()).cast(pa.date32())
        if kind == "decimal":
            d = lit_.decimal
            unscaled = int.from_bytes(d.value, "little", signed=True)
            # exact: the default context would round to 28 significant digits (decimal(38) has 38)
            value = decimal.Decimal(unscaled).scaleb(-d.scale, context=_EXACT)
            return pa.scalar(value, pa.decimal128(d.precision, d.scale))
        if kind in ("precision_timestamp", "precision_timestamp_tz"):
            pt = getattr(lit_, kind)
            tz = _ctx_tz(ctx) if kind == "precision_timestamp_tz" else None
            return pa.scalar(pt.value, pa.int64()).cast(pa.timestamp(_PRECISION_UNIT[pt.precision], tz=tz))
        if kind == "null":
            return pa.scalar(None, self.arrow_type(lit_.null, ctx))
        if kind == "user_defined":
            return self._user_literal(lit_.user_defined)
        raise _Unsupported(f"substrait literal {kind!r}")

    def _user_literal(self, ud: Any) -> pa.Scalar:
        from google.protobuf import wrappers_pb2

        typ = self.user_type(ud.type_reference)
        if ud.WhichOneof("val") != "value":
            raise _Unsupported("user-defined literal without a packed value")
        wrapper = {
            "type.googleapis.com/google.protobuf.UInt64Value": wrappers_pb2.UInt64Value,
            "type.googleapis.com/google.protobuf.UInt32Value": wrappers_pb2.UInt32Value,
            "type.googleapis.com/google.protobuf.StringValue": wrappers_pb2.StringValue,
            "type.googleapis.com/google.protobuf.BytesValue": wrappers_pb2.BytesValue,
        }.get(ud.value.type_url)
        if wrapper is None:
            raise _Unsupported(f"user-defined literal {ud.value.type_url!r}")
        msg = wrapper()
        ud.value.Unpack(msg)
        return pa.scalar(msg.value, typ)

    def _deprecated_timestamp(self, lit_: Any, ctx: pa.DataType | None) -> pa.Scalar:
        """pyarrow writes timestamps in fields removed from the current Substrait proto.

        The value is microseconds since the epoch; the unit and time zone come from the column the
        literal is compared with (DataFusion always pushes literals of the column's type).
        """
        from google.protobuf.unknown_fields import UnknownFieldSet

        fields = [(u.field_number, u.wire_type, u.data) for u in UnknownFieldSet(lit_)]
        if len(fields) != 1 or fields[0][1] != 0 or ctx is None or not pa.types.is_timestamp(ctx):
            raise _Unsupported("literal of an unknown kind")
        number, _, data = fields[0]
        if number == _DEPRECATED_TIMESTAMP_TZ_FIELD and ctx.tz is not None:
            tz: str | None = ctx.tz
        elif number == _DEPRECATED_TIMESTAMP_FIELD and ctx.tz is None:
            tz = None
        else:
            raise _Unsupported("timestamp literal that does not match its column")
        micros = data - (1 << 64) if data >= (1 << 63) else data
        return pa.scalar(micros, pa.int64()).cast(pa.timestamp("us", tz=tz)).cast(ctx)


def _ctx_tz(ctx: pa.DataType | None) -> str:
    if ctx is not None and pa.types.is_timestamp(ctx) and ctx.tz is not None:
        return ctx.tz
    return "UTC"


def _from_substrait(expr: pc.Expression, schema: pa.Schema) -> Predicate:
    try:
        from substrait.proto import ExtendedExpression
    except ImportError as e:  # pragma: no cover - substrait is a dependency
        raise _Unsupported("the substrait package is not installed") from e
    try:
        buf = expr.to_substrait(schema)
    except Exception as e:
        raise _Unsupported(f"to_substrait failed: {e}") from e
    ee = ExtendedExpression()
    ee.ParseFromString(bytes(buf))
    if len(ee.referred_expr) != 1 or ee.referred_expr[0].WhichOneof("expr_type") != "expression":
        raise _Unsupported("expected exactly one expression")
    reader = _SubstraitReader(ee, schema)
    return _to_predicate(reader.node(ee.referred_expr[0].expression))


# ---- pickle-payload route ------------------------------------------------------------------

_PICKLE_FUNCS = {
    "equal": "=",
    "not_equal": "!=",
    "less": "<",
    "less_equal": "<=",
    "greater": ">",
    "greater_equal": ">=",
    "and_kleene": "and",
    "or_kleene": "or",
    "invert": "not",
    "is_valid": "is_not_null",
    "is_null": "is_null",
    "is_in": "in",
}


class _ArrowSchemaC(ctypes.Structure):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("metadata", ctypes.c_void_p),
        ("flags", ctypes.c_int64),
        ("n_children", ctypes.c_int64),
        ("children", ctypes.c_void_p),
        ("dictionary", ctypes.c_void_p),
        ("release", ctypes.c_void_p),
        ("private_data", ctypes.c_void_p),
    ]


def _ordered_metadata(schema: pa.Schema) -> list[tuple[str, str]]:
    """Schema metadata as an ordered list with repeats (a dict loses both).

    Read through the Arrow C data interface, whose metadata encoding is specified: int32 count,
    then for each pair int32 key length, key bytes, int32 value length, value bytes.
    """
    c = _ArrowSchemaC()
    schema._export_to_c(ctypes.addressof(c))
    try:
        p = c.metadata
        if not p:
            return []
        n = ctypes.c_int32.from_address(p).value
        off = 4
        out = []
        for _ in range(n):
            kl = ctypes.c_int32.from_address(p + off).value
            k = ctypes.string_at(p + off + 4, kl)
            off += 4 + kl
            vl = ctypes.c_int32.from_address(p + off).value
            v = ctypes.string_at(p + off + 4, vl)
            off += 4 + vl
            out.append((k.decode(), v.decode()))
        return out
    finally:
        if c.release:
            ctypes.CFUNCTYPE(None, ctypes.c_void_p)(c.release)(ctypes.addressof(c))


class _PickleReader:
    def __init__(self, items: list[tuple[str, str]], table: pa.Table, schema: pa.Schema) -> None:
        self.items = items
        self.table = table
        self.schema = schema
        self.pos = 0

    def take(self) -> tuple[str, str]:
        if self.pos >= len(self.items):
            raise _Unsupported("truncated expression payload")
        item = self.items[self.pos]
        self.pos += 1
        return item

    def column(self, path: tuple[str, ...]) -> Column:
        return Column(path, _resolve_path(self.schema, path))

    def node(self) -> tuple:
        k, v = self.take()
        if k == "field_ref":
            return ("col", self.column((v,)))
        if k == "nested_field_ref":
            parts = []
            for _ in range(int(v)):
                k2, v2 = self.take()
                if k2 != "field_ref":
                    raise _Unsupported("nested reference with a non-name part")
                parts.append(v2)
            return ("col", self.column(tuple(parts)))
        if k == "literal":
            return ("lit", self.table.column(int(v))[0])
        if k != "call":
            raise _Unsupported(f"unexpected payload item {k!r}")
        args: list[tuple] = []
        opts: pa.StructScalar | None = None
        while True:
            if self.pos >= len(self.items):
                raise _Unsupported("truncated expression payload")
            k2, v2 = self.items[self.pos]
            if k2 == "end":
                self.pos += 1
                break
            if k2 == "options":
                self.pos += 1
                opts = self.table.column(int(v2))[0]
            else:
                args.append(self.node())
        name = _PICKLE_FUNCS.get(v)
        if name is None:
            raise _Unsupported(f"function {v!r}")
        if name == "in":
            if len(args) != 1 or args[0][0] != "col" or opts is None:
                raise _Unsupported("is_in over a non-column")
            value_set = opts["value_set"].values
            if value_set is None:
                raise _Unsupported("is_in without a value set")
            return ("in", args[0], [value_set[i] for i in range(len(value_set))])
        if name == "is_null" and opts is not None and opts.as_py().get("nan_is_null"):
            return ("call", "is_null_or_nan", args)
        return ("call", name, args)


def _from_pickle(expr: pc.Expression, schema: pa.Schema) -> Predicate:
    try:
        payload = expr.__reduce__()[1][0]
        table = pa.ipc.open_file(payload).read_all()
        items = _ordered_metadata(table.schema)
    except Exception as e:
        raise _Unsupported(f"cannot read the expression payload: {e}") from e
    reader = _PickleReader(items, table, schema)
    node = reader.node()
    if reader.pos != len(items):
        raise _Unsupported("trailing items in the expression payload")
    return _to_predicate(node)


def from_pyarrow(expr: pc.Expression | None, schema: pa.Schema) -> Predicate:
    """Parse a pyarrow filter (as DataFusion pushes it) into a :class:`Predicate`.

    ``None`` (no filter) gives ``TRUE``. The filter is read with DataFusion's meaning: comparisons
    order NaN above every number, ``is_in`` is SQL ``IN``. Column references are resolved against
    ``schema`` (logical names). Raises :class:`PredicateError` for anything else (functions,
    arithmetic, casts, positional references, non-Kleene AND/OR, ...), in which case the caller
    keeps the filter un-pushed and all files.
    """
    if expr is None:
        return TRUE
    if not isinstance(expr, pc.Expression):
        raise PredicateError(f"expected a pyarrow.compute.Expression, got {type(expr).__name__}")
    if not isinstance(schema, pa.Schema):
        raise PredicateError(f"expected a pyarrow.Schema, got {type(schema).__name__}")
    errors: list[str] = []
    for route in (_from_substrait, _from_pickle):
        try:
            return route(expr, schema)
        except (_Unsupported, PredicateError) as e:
            first = str(e).splitlines()[0]
            errors.append(
                f"{first} is not supported in a scan predicate" if first.startswith("function") else first
            )
        except Exception as e:  # defensive: any surprise means "cannot parse"
            errors.append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    # the second route's reason is this package's own wording (the first's is pyarrow's)
    raise PredicateError(f"cannot interpret filter {expr}: {errors[-1] or errors[0]}")
