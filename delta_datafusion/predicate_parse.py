"""Predicates from outside the package, bound to a table's schema.

* :func:`from_pyarrow` reads the ``pyarrow.compute.Expression`` DataFusion hands a Python dataset
  (or a user passes to ``scan(predicate=...)``) into a :mod:`.predicate` tree, resolving and
  typing its columns from the schema: through the public Substrait serialisation first, then the
  Expression's pickle payload.
* :func:`bind_types` types the columns of a tree built by hand (``gt(col("f"), 1)``).

Parsing notes (pyarrow 26, substrait 0.37): ``Expression.to_substrait`` writes timestamp literals
into fields the current Substrait proto no longer defines (read back as unknown fields, typed from
the compared column), cannot serialise nanosecond timestamps with a time zone or
``is_null(nan_is_null=True)``, and drops ``is_in``'s null-matching behaviour. Whatever Substrait
cannot carry is read from the Expression's pickle payload instead (an Arrow IPC file whose schema
metadata lists the tree in order). Both routes read ``is_in`` as SQL ``IN``, which is what
DataFusion means by it.
"""

from __future__ import annotations

import ctypes
import decimal
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .errors import PredicateError
from .predicate import (
    COMPARISON_OPS,
    FALSE,
    FLIPPED,
    MAX_NESTING,
    NULL,
    TRUE,
    And,
    BoolLiteral,
    Column,
    Comparison,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    Operand,
    Or,
    Predicate,
    and_,
    chain_operands,
    check_nesting,
    nesting_message,
    not_,
    or_,
)
from .predicate_numbers import exact_comparison_of, exact_in_values

__all__ = ["bind_types", "from_pyarrow"]


class _Unsupported(Exception):
    """The current parsing route cannot read this expression."""


# Intermediate form shared by both routes:
#   ("col", Column) | ("lit", pa.Scalar) | ("call", name, [args]) | ("in", operand, [pa.Scalar])
# with call names "=", "!=", "<", "<=", ">", ">=", "and", "or", "not", "is_null",
# "is_null_or_nan", "is_not_null".


def bind_types(pred: Predicate, schema: pa.Schema) -> Predicate:
    """``pred`` with every untyped column reference typed from ``schema`` (a predicate built by
    hand, e.g. ``gt(col("f"), 1)``): row filters are NaN-aware only for typed float columns.
    Columns not in the schema stay untyped (planning reports them). A tree nested deeper than
    :data:`~.predicate.MAX_NESTING` levels is refused; AND / OR chains come back flattened."""
    check_nesting(pred)
    return _bind_types(pred, schema)


def _bind_types(pred: Predicate, schema: pa.Schema) -> Predicate:
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
            right = _literal_for(left, right)
        elif isinstance(right, Column) and isinstance(left, Literal):
            left = _literal_for(right, left)
        read = _negative_nan_read(Comparison(pred.op, left, right))
        return exact_comparison_of(read) if isinstance(read, Comparison) else read
    if isinstance(pred, And):
        return And(tuple(_bind_types(c, schema) for c in chain_operands(pred)))
    if isinstance(pred, Or):
        return Or(tuple(_bind_types(c, schema) for c in chain_operands(pred)))
    if isinstance(pred, Not):
        return Not(_bind_types(pred.child, schema))
    if isinstance(pred, IsNull):
        return IsNull(operand(pred.operand))
    if isinstance(pred, IsNotNull):
        return IsNotNull(operand(pred.operand))
    if isinstance(pred, In):
        if not pred.values:  # x IN () is FALSE and x NOT IN () TRUE, NULL x included
            return BoolLiteral(pred.negated)
        x = operand(pred.operand)
        if not isinstance(x, Column):
            return In(x, pred.values, pred.negated)
        values = exact_in_values(x, tuple(_literal_for(x, v) for v in pred.values))
        if not values:  # no value of the column is in the list: FALSE (NOT IN: TRUE), NULL for NULL
            return exact_comparison_of(Comparison("!=" if pred.negated else "=", x, pred.values[0]))
        return In(x, values, pred.negated)
    return pred


_EXACT = decimal.Context(prec=80)


def _literal_for(column: Column, lit: Literal) -> Literal:
    """A timestamp literal compared with ``column``, in its time zone (see :func:`_zoned_literal`);
    numbers are put on an integer or decimal column's type by :mod:`.predicate_numbers`."""
    return _zoned_literal(column, lit)


def _zoned_literal(column: Column, lit: Literal) -> Literal:
    """A timestamp literal of another time zone than its column's, in the column's zone: the
    same instant (Arrow stores UTC instants; the zone only labels them), where pyarrow has no
    kernel comparing two zones. Naive against zoned stays refused: that one has no meaning."""
    t = column.type
    if (
        t is None
        or not pa.types.is_timestamp(t)
        or t.tz is None
        or not pa.types.is_timestamp(lit.type)
        or lit.type.tz is None
        or lit.type.tz == t.tz
    ):
        return lit
    return Literal(lit.value.cast(pa.timestamp(lit.type.unit, tz=t.tz)))


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


def _chain_links(node: tuple) -> list[tuple]:
    """The operands of an AND (or OR) chain, nested ANDs (ORs) flattened in order with a stack."""
    name, links, stack = node[1], [], [node]
    while stack:
        n = stack.pop()
        if n[0] == "call" and n[1] == name:
            if not n[2]:
                raise _Unsupported(f"{name} without arguments")
            stack.extend(reversed(n[2]))
        else:
            links.append(n)
    return links


def _check_nesting(node: tuple) -> None:
    """Refuse a filter nested deeper than :data:`MAX_NESTING` levels (chains count once),
    walked with a stack: reading it would otherwise end in a RecursionError."""
    stack = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        if depth > MAX_NESTING:
            raise PredicateError(nesting_message())
        if n[0] != "call":
            continue
        links = _chain_links(n) if n[1] in ("and", "or") else n[2]
        stack.extend((a, depth + 1) for a in links if a[0] == "call")


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
        return _negative_nan_read(Comparison(name, _to_operand(args[0]), _to_operand(args[1])))
    if name in ("and", "or"):
        kids = [_to_predicate(a) for a in _chain_links(node)]
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


def _negative_nan_read(p: Comparison) -> Predicate:
    """``p``, or what it means when it compares with a NaN whose sign bit is set
    (``-('NaN'::double)``): DataFusion orders that one below -inf and apart from NaN, and the rows
    read hold no such NaN (read/nan_filters.positive_nans), so ``x > -NaN``, ``x >= -NaN`` and
    ``x <> -NaN`` are TRUE and ``x < -NaN``, ``x <= -NaN`` and ``x = -NaN`` FALSE for every value
    of ``x``, NULL for a NULL one. (The package's float comparisons put every NaN above +inf.)"""
    x, c, op = p.left, p.right, p.op
    if isinstance(x, Literal) and not isinstance(c, Literal):
        x, c, op = c, x, FLIPPED[op]
    if not (isinstance(c, Literal) and c.is_nan and math.copysign(1.0, c.value.as_py()) < 0):
        return p
    if isinstance(x, Literal):  # two literals: DataFusion folds those before pushing them
        raise PredicateError(f"comparison {p} of two literals, one a NaN with the sign bit set")
    if op in (">", ">=", "!="):
        return Or((IsNotNull(x), NULL))  # TRUE, NULL for a NULL x
    return And((IsNull(x), NULL))  # FALSE, NULL for a NULL x


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


#: Substrait literal kinds read as they are, with their Arrow types.
_SIMPLE_LITERALS = {
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

#: Substrait type kinds read as they are (a type says "bool" where a literal says "boolean").
_SIMPLE_TYPES = {("bool" if k == "boolean" else k): t for k, t in _SIMPLE_LITERALS.items()} | {
    "date": pa.date32()
}


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
            return ("in", operand, self.in_list(sol.options, operand[1].type))
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
        if kind in _SIMPLE_TYPES:
            return _SIMPLE_TYPES[kind]
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

    def in_list(self, options: Any, ctx: pa.DataType | None) -> list[pa.Scalar]:
        """An IN list's items (literals only); items of one plain kind (a list from SQL) are
        converted in one call: one by one, 20,000 items took 0.1 s."""
        literals = []
        for o in options:
            if o.WhichOneof("rex_type") != "literal":
                raise _Unsupported("IN list with a non-literal")
            literals.append(o.literal)
        kinds = {lit_.WhichOneof("literal_type") for lit_ in literals}
        kind = kinds.pop() if len(kinds) == 1 else None
        if kind in _SIMPLE_LITERALS:
            return list(pa.array([getattr(lit_, kind) for lit_ in literals], _SIMPLE_LITERALS[kind]))
        return [self.literal(lit_, ctx) for lit_ in literals]

    def literal(self, lit_: Any, ctx: pa.DataType | None) -> pa.Scalar:
        kind = lit_.WhichOneof("literal_type")
        if kind is None:
            return self._deprecated_timestamp(lit_, ctx)
        if kind in _SIMPLE_LITERALS:
            return pa.scalar(getattr(lit_, kind), _SIMPLE_LITERALS[kind])
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
    node = reader.node(ee.referred_expr[0].expression)
    _check_nesting(node)
    return _to_predicate(node)


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

    def leaf(self) -> tuple:
        """The next column reference or literal."""
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
        raise _Unsupported(f"unexpected payload item {k!r}")

    def tree(self) -> tuple:
        """The next expression, its calls read with a stack rather than recursion: DataFusion
        pushes a WHERE of many conditions as a left-deep chain of binary ANDs, one call level
        per condition (600 conditions exceeded Python's recursion limit)."""
        calls: list[tuple[str, list[tuple], list[pa.StructScalar]]] = []  # name, args, options
        while True:
            k, v = self.take()
            if k == "call":
                calls.append((v, [], []))
                continue
            if k == "options" and calls:
                calls[-1][2].append(self.table.column(int(v))[0])
                continue
            if k == "end" and calls:
                name, args, opts = calls.pop()
                done = self.call(name, args, opts[-1] if opts else None)
            else:
                self.pos -= 1
                done = self.leaf()
            if not calls:
                return done
            calls[-1][1].append(done)

    def call(self, v: str, args: list[tuple], opts: pa.StructScalar | None) -> tuple:
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
    node = reader.tree()
    if reader.pos != len(items):
        raise _Unsupported("trailing items in the expression payload")
    _check_nesting(node)
    return _to_predicate(node)


_SUBSTRAIT_MAX_DEPTH = 8


def _nesting(text: str) -> int:
    """The deepest parenthesis nesting of an expression's text (string literals may hold
    parentheses too: this only chooses a parse route)."""
    depth = deepest = 0
    for ch in text:
        if ch == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch == ")":
            depth -= 1
    return deepest


def from_pyarrow(expr: pc.Expression | None, schema: pa.Schema) -> Predicate:
    """Parse a pyarrow filter (as DataFusion pushes it) into a :class:`Predicate`.

    ``None`` (no filter) gives ``TRUE``. The filter is read with DataFusion's meaning: comparisons
    order NaN above every number, ``is_in`` is SQL ``IN``. Column references are resolved against
    ``schema`` (logical names; a position, ``pc.field(0)``, is the schema's field there). Raises
    :class:`PredicateError` for anything else (functions, arithmetic, casts, non-Kleene AND/OR,
    ...), in which case the caller keeps the filter un-pushed and all files.
    """
    if expr is None:
        return TRUE
    if not isinstance(expr, pc.Expression):
        raise PredicateError(f"expected a pyarrow.compute.Expression, got {type(expr).__name__}")
    if not isinstance(schema, pa.Schema):
        raise PredicateError(f"expected a pyarrow.Schema, got {type(schema).__name__}")
    errors: list[str] = []
    # pyarrow 26's to_substrait serialises each call's arguments twice: its output doubles per
    # nesting level (a WHERE of 20 conjuncts, which DataFusion pushes as one left-deep chain: 4 s
    # and 0.9 GB; 22: 21 s, 3 GB). Nested filters take the payload route alone, which is linear.
    text = expression_text(expr)
    # unprintable (see expression_text): nesting unknown, the payload route is safe at any depth
    depth = _nesting(text) if text is not _UNPRINTABLE else _SUBSTRAIT_MAX_DEPTH + 1
    routes = (_from_pickle,) if depth > _SUBSTRAIT_MAX_DEPTH else (_from_substrait, _from_pickle)
    functions: list[bool] = []  # per route: was a function (call, cast, arithmetic) refused
    for route in routes:
        try:
            return route(expr, schema)
        except (_Unsupported, PredicateError) as e:
            first = str(e).splitlines()[0]
            functions.append(first.startswith("function"))
            errors.append(f"{first} is not supported in a scan predicate" if functions[-1] else first)
        except Exception as e:  # defensive: any surprise means "cannot parse"
            functions.append(False)
            errors.append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    # the second route's reason is this package's own wording (the first's is pyarrow's)
    reported = -1 if errors[-1] else 0
    error = FunctionNotSupportedError if functions[reported] else PredicateError
    raise error(f"cannot interpret filter {text}: {errors[reported]}")


class FunctionNotSupportedError(PredicateError):
    """A filter :func:`from_pyarrow` refuses for a function, cast or arithmetic in it (which SQL
    text can express: see :func:`delta_datafusion.scan.sql_predicate`)."""


_UNPRINTABLE = "<a filter pyarrow cannot print>"


def expression_text(expr: Any) -> str:
    """``str(expr)``, which never fails: pyarrow prints a long ``is_in`` string list shortened by
    bytes, and the cut can split a multi-byte character (forty U+FFFF in a list of five:
    UnicodeDecodeError, or a Rust panic when DataFusion formats that error)."""
    try:
        return str(expr)
    except UnicodeDecodeError:
        return _UNPRINTABLE
