"""SQL text as a scan predicate: ``snapshot.scan(predicate="part = 'p3' AND id < 10")``.

The text is planned by DataFusion as ``SELECT 1 FROM t WHERE <text>`` over a stand-in dataset
with the scan's schema, so it means exactly what it would mean in a query: DataFusion's parser,
type coercion and simplification, then the same pushed filter the provider receives. A conjunct
DataFusion keeps above the scan (functions, LIKE, nested fields) is not in that filter: the scan
then prunes by the part it is handed and reads its rows through DataFusion, which applies the
rest (:func:`~delta_datafusion.scan.rows_through_datafusion`), never dropping it.
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


def plan_sql_predicate(text: str, schema: pa.Schema) -> tuple[Any, bool]:
    """(the part of ``text`` DataFusion hands a scan, as a package predicate (None: TRUE); whether
    DataFusion keeps another part above the scan, which the caller must then have DataFusion
    apply: dropping it would return rows the text excludes)."""
    from datafusion import SessionContext, Table

    from ..predicate import BoolLiteral
    from ..predicate_parse import from_pyarrow

    if not text.strip():
        raise PredicateError("predicate: the SQL text is empty")
    capture = _CaptureFilter(schema)
    ctx = SessionContext()
    ctx.register_table("t", Table(capture))

    def planning_error(e: Exception) -> PredicateError:
        first = " ".join(str(e).strip().splitlines()[:3])
        if first.startswith("Schema error"):  # the fields as the text may name them
            first = _STAND_IN.sub("", first)
        return PredicateError(f"predicate {text!r}: {first}")

    try:
        # not SELECT *: DataFusion 55 expands a wildcard in time quadratic in the columns (4,000
        # columns: 1.9 s, against 0.1 s for this)
        df = ctx.sql(f"SELECT 1 FROM t WHERE {text}")
        nodes = [kind for kind, _ in _plan_nodes(df.logical_plan())]
    except Exception:  # noqa: BLE001 - planned again as written, for its own error or plan
        try:
            # "... UNION ALL SELECT * FROM t" plans only after a wildcard (same column count)
            df = ctx.sql(f"SELECT * FROM t WHERE {text}")
            nodes = [kind for kind, _ in _plan_nodes(df.logical_plan())]
        except Exception as e:  # noqa: BLE001 - DataFusion's parse / type errors, as the package's
            raise planning_error(e) from e
    # "i > 5 UNION ALL SELECT ...", "i > 5 LIMIT 0", "i > 5 ORDER BY i": more than a WHERE clause
    _single_scan(nodes, text, empty_ok=False)
    # an IN list in the plan as written comes from the word IN only (a walk of 3,000 ORed ranges
    # without one costs 1.8 s: datafusion-python copies a subtree at each step)
    null_lists = _null_in_lists(df.logical_plan()) if _MAY_HOLD_IN.search(text) else None
    if null_lists == "false":
        try:  # never TRUE, but the text must still be valid SQL: types are checked from here on
            df.optimized_logical_plan()
            df.execution_plan()
        except Exception as e:  # noqa: BLE001
            raise planning_error(e) from e
        return BoolLiteral(False), False
    if null_lists == "refuse":
        raise PredicateError(
            f"predicate {text!r}: an IN list holding NULL (or an item that may be NULL, such as "
            "NULLIF(...)) under NOT, in a comparison or a CASE, or a NOT IN list beyond the top-level "
            "AND, is simplified wrongly by DataFusion 55 (it drops the NULL); write the list with literals "
            "and without NULL (x NOT IN (..., NULL) is never TRUE; x IN (..., NULL) is TRUE where x IN "
            "(...) is)"
        )
    try:
        plan = _plan_nodes(df.optimized_logical_plan())
    except Exception as e:  # noqa: BLE001
        raise planning_error(e) from e
    # subqueries sit inside expressions, below no plan input: the optimizer turns them into joins
    # (x IN (SELECT ...), EXISTS) or leaves them in a kept Filter
    _single_scan([kind for kind, _ in plan], text, empty_ok=True)
    try:
        df.execution_plan()
    except Exception as e:  # noqa: BLE001
        raise planning_error(e) from e
    except BaseException as e:
        # datafusion-python 55 prints the pushed pyarrow filter once it has it, and pyarrow 26
        # cuts a long string of an IN list by bytes, possibly inside a character: the print
        # fails and the Rust side panics (plain pyarrow datasets too). The filter was captured
        # before the print; the package reads it without printing it.
        if type(e).__name__ != "PanicException" or not capture.filters:
            raise
    rest = any(kind == "Filter" for kind, _ in plan)
    pushed = capture.filters[-1] if capture.filters else None
    if pushed is None:
        if not any(kind == "TableScan" for kind, _ in plan):
            # folded to FALSE or NULL ("1 = 0", "i = NULL"): DataFusion plans no scan at all
            return BoolLiteral(False), False
        return None, rest
    if isinstance(pushed, pa.Scalar):  # a contradiction (or tautology) folded by DataFusion
        return BoolLiteral(bool(pushed.as_py()) if pushed.is_valid else None), rest
    return from_pyarrow(pushed, schema), rest


# DataFusion's schema errors qualify the fields it suggests with the stand-in table's name ("Did
# you mean 't.uid'? ... Valid fields are t.uid, t.name"), which is not the user's table's
_STAND_IN = re.compile(r"(?<=[' ,])t\.(?=[^\s,.'])")


def _single_scan(kinds: list[str], text: str, empty_ok: bool) -> None:
    """Refuse a plan that is more than a filtered scan of the stand-in table (``empty_ok``: an
    optimized plan may fold a contradiction into an empty relation, with no scan)."""
    allowed = ("Projection", "Filter", "TableScan") + (("EmptyRelation",) if empty_ok else ())
    extra = [k for k in kinds if k not in allowed]
    scans = kinds.count("TableScan")
    if extra or scans > 1 or (scans == 0 and not empty_ok):
        raise PredicateError(
            f"predicate {text!r}: not a single boolean expression (the text adds {extra or ['another scan']} "
            "to the query)"
        )


def _plan_nodes(plan: Any) -> list[tuple[str, Any]]:
    """(kind, node) of every node of a logical plan, from its structure: the printed plan cannot
    be split into nodes by lines, as a string literal may hold a newline."""
    out, stack = [], [plan]
    while stack:
        node = stack.pop()
        variant = node.to_variant()
        out.append((type(variant).__name__, variant))
        stack.extend(node.inputs())
    return out


#: The keyword IN ends a word but may follow a number with no space ("i+0IN (3, NULL)" is an IN
#: list): no word boundary is asked for before it.
_MAY_HOLD_IN = re.compile(r"in\b", re.IGNORECASE)


def _null_in_lists(plan: Any) -> str | None:
    """What the WHERE clause, as written, does with IN lists that may hold NULL: ``"false"``
    when a conjunct is ``x NOT IN (..., NULL)`` (FALSE or NULL for every row: nothing is
    selected); ``"refuse"`` when a list holding NULL, or an item that may be NULL (an
    expression such as ``NULLIF(1, 1)``), sits where NULL and FALSE differ (under NOT, in a
    comparison, a CASE, a NOT IN anywhere but a conjunct); None otherwise. DataFusion 55's
    optimizer merges IN lists on one column and drops their NULLs (``id IN (1, 2) AND id NOT IN
    (3, NULL)`` selects 1 and 2), so the clause is checked before it is optimized."""
    variant = plan.to_variant()
    if type(variant).__name__ == "Filter":
        return _null_lists_in(variant.predicate(), conjunct=True, positive=True)
    for child in plan.inputs():
        found = _null_in_lists(child)
        if found:
            return found
    return None


def _kind(expr: Any) -> tuple[str, Any]:
    try:
        v = expr.to_variant()
    except Exception:  # noqa: BLE001 - a variant datafusion-python does not expose
        return "", None
    return type(v).__name__, v


def _null_lists_in(expr: Any, conjunct: bool, positive: bool, depth: int = 0) -> str | None:
    kind, v = _kind(expr)
    if kind == "BinaryExpr" and str(v.op()).upper() in ("AND", "OR"):
        # a chain of AND/OR (a WHERE of many conditions) is walked with a stack, not recursion,
        # and adds no depth: 201 conditions were refused as if they held an IN list with NULL
        found: set[str | None] = set()
        stack = [(v, conjunct)]
        while stack:
            node, conj = stack.pop()
            inner = conj and str(node.op()).upper() == "AND"
            for child in (node.left(), node.right()):
                child_kind, cv = _kind(child)
                if child_kind == "BinaryExpr" and str(cv.op()).upper() in ("AND", "OR"):
                    stack.append((cv, inner))
                else:
                    found.add(_null_lists_in(child, inner, positive, depth + 1))
        return "false" if "false" in found else ("refuse" if "refuse" in found else None)
    if kind in ("Column", "Literal"):
        return None
    if kind == "InList":
        items = [_item_kind(item) for item in v.list()]
        # lists inside the operand or an item (CASE WHEN i NOT IN (5, NULL) ...) are below it
        below = [_null_lists_in(e, False, False, depth + 1) for e in [v.expr(), *v.list()]]
        inside = "refuse" if any(below) else None
        if all(k == "value" for k in items):
            return inside
        if v.negated() and conjunct and "null" in items:
            return "false"
        if not v.negated() and positive:
            return inside  # under AND/OR alone a NULL item selects as FALSE does
        return "refuse"
    if depth > 200:
        return "refuse"
    # any other node (NOT, comparisons, CASE, functions, IS [NOT] TRUE, ...): a list below it
    # sits where NULL and FALSE differ
    try:
        operands = [op for op in expr.rex_call_operands() if op.canonical_name() != expr.canonical_name()]
    except Exception:  # noqa: BLE001 - no operands to look into: no claim about them
        return None
    found = {_null_lists_in(op, False, False, depth + 1) for op in operands}
    return "refuse" if found - {None} else None


def _item_kind(expr: Any) -> str:
    """An IN-list item: ``"value"`` (a literal that is not NULL), ``"null"`` or ``"unknown"``
    (an expression, which may be NULL)."""
    kind, v = _kind(expr)
    if kind == "Cast":  # a cast that cannot be done is an error, never NULL
        return _item_kind(v.expr())
    if kind == "TryCast":  # TRY_CAST('abc' AS BIGINT) is NULL
        return "null" if _item_kind(v.expr()) == "null" else "unknown"
    if kind == "Literal":
        null = str(v.data_type()) == "Null" or re.fullmatch(r"\w+\(NULL\)", expr.canonical_name())
        return "null" if null else "value"
    return "unknown"
