"""SQL text as a scan predicate: ``snapshot.scan(predicate="part = 'p3' AND id < 10")``.

The text is planned by DataFusion as ``SELECT * FROM t WHERE <text>`` over a stand-in dataset
with the scan's schema, so it means exactly what it would mean in a query: DataFusion's parser,
type coercion and simplification, then the same pushed filter the provider receives. A conjunct
DataFusion keeps above the scan (functions, nested fields) cannot be applied by a Python scan, so
such text is refused with the part named, never silently dropped.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds

from ..errors import PredicateError


class _CaptureFilter(ds.Dataset):
    """A dataset that records the filter DataFusion pushes into it and holds no rows."""

    def __init__(self, schema: pa.Schema):
        self._schema = schema
        self.filters: list[Any] = []

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def scanner(self, columns: Any = None, filter: Any = None, **_: Any):  # noqa: A002
        empty = pa.table({f.name: pa.array([], f.type) for f in self._schema}, schema=self._schema)
        return ds.dataset(empty).scanner(columns=columns)

    def get_fragments(self, filter: Any = None):  # noqa: A002
        self.filters.append(filter)
        return []


def predicate_from_sql(text: str, schema: pa.Schema) -> Any:
    """The package predicate for the SQL boolean expression ``text`` over ``schema`` (None: TRUE)."""
    from datafusion import SessionContext, Table

    from ..predicate import BoolLiteral, from_pyarrow

    if not text.strip():
        raise PredicateError("predicate: the SQL text is empty")
    capture = _CaptureFilter(schema)
    ctx = SessionContext()
    ctx.register_table("t", Table(capture))

    def planning_error(e: Exception) -> PredicateError:
        first = str(e).strip().splitlines()
        return PredicateError(f"predicate {text!r}: {' '.join(first[:3])}")

    try:
        df = ctx.sql(f"SELECT * FROM t WHERE {text}")
        written = df.logical_plan().display_indent()
    except Exception as e:  # noqa: BLE001 - DataFusion's parse / type errors, as the package's
        raise planning_error(e) from e
    nodes = [line.strip().split(":", 1)[0] for line in written.splitlines() if line.strip()]
    extra = [n for n in nodes if n not in ("Projection", "Filter", "TableScan")]
    if extra or nodes.count("TableScan") != 1:
        # "i > 5 UNION ALL SELECT ...", "i > 5 LIMIT 0", "i > 5 ORDER BY i": more than a WHERE clause
        raise PredicateError(
            f"predicate {text!r}: not a single boolean expression (the text adds {extra or ['another scan']} "
            "to the query)"
        )
    if _never_true(df.logical_plan()):
        return BoolLiteral(False)
    try:
        plan = df.optimized_logical_plan().display_indent()
        df.execution_plan()
    except Exception as e:  # noqa: BLE001
        raise planning_error(e) from e
    kept = [line.strip() for line in plan.splitlines() if line.strip().startswith("Filter:")]
    if kept:
        part = _inline_extracted(kept[0][len("Filter:") :].strip(), plan)
        raise PredicateError(
            f"predicate {text!r}: the part `{part}` cannot be applied by a scan: DataFusion 55 hands a scan "
            "only comparisons, IN lists and IS [NOT] NULL of columns and literals, joined by AND/OR/NOT "
            "(functions, LIKE patterns, nested fields, IS DISTINCT FROM, IS TRUE/FALSE and some IN lists "
            "stay in DataFusion); filter those in SQL instead"
        )
    pushed = capture.filters[-1] if capture.filters else None
    if pushed is None:
        if "TableScan" not in plan:
            # folded to FALSE or NULL ("1 = 0", "i = NULL"): DataFusion plans no scan at all
            return BoolLiteral(False)
        return None
    if isinstance(pushed, pa.Scalar):  # a contradiction (or tautology) folded by DataFusion
        return BoolLiteral(bool(pushed.as_py()) if pushed.is_valid else None)
    return from_pyarrow(pushed, schema)


def _never_true(plan: Any) -> bool:
    """Is a conjunct of the WHERE clause, as written, ``x NOT IN (..., NULL)``? That is FALSE or
    NULL for every row, so the clause selects nothing. DataFusion 55's optimizer merges such a
    list with an ``IN`` list on the same column and drops the NULL (``id IN (1, 2) AND id NOT IN
    (3, NULL)`` selects 1 and 2), so the written clause is checked before it is optimized."""
    variant = plan.to_variant()
    if type(variant).__name__ == "Filter":
        return _conjunct_never_true(variant.predicate())
    return any(_never_true(child) for child in plan.inputs())


def _conjunct_never_true(expr: Any) -> bool:
    try:
        v = expr.to_variant()
    except Exception:  # noqa: BLE001 - a variant datafusion-python does not expose: no claim
        return False
    kind = type(v).__name__
    if kind == "BinaryExpr" and str(v.op()).upper() == "AND":
        return _conjunct_never_true(v.left()) or _conjunct_never_true(v.right())
    if kind == "InList" and v.negated():
        return any(_is_null_literal(item) for item in v.list())
    return False


def _is_null_literal(expr: Any) -> bool:
    try:
        v = expr.to_variant()
    except Exception:  # noqa: BLE001
        return False
    kind = type(v).__name__
    if kind in ("Cast", "TryCast"):
        return _is_null_literal(v.expr())
    return kind == "Literal" and str(v.data_type()) == "Null"


_EXTRACTED = re.compile(r" AS (__datafusion_extracted_\d+)")


def _inline_extracted(part: str, plan: str) -> str:
    """DataFusion moves nested-field accesses into a projection (``get_field(t.st, Utf8("a")) AS
    __datafusion_extracted_1``); put the expressions back so the message shows what was written."""
    for m in _EXTRACTED.finditer(plan):
        depth, i = 0, m.start()
        while i > 0:
            c = plan[i - 1]
            if c in ")]":
                depth += 1
            elif c in "([":
                depth -= 1
            elif depth == 0 and (plan.startswith(", ", i - 2) or plan.startswith(": ", i - 2)):
                break
            i -= 1
        part = re.sub(rf"\b{m.group(1)}\b", plan[i : m.start()], part)
    return part
