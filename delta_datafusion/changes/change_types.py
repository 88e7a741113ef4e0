"""Which ``_change_type`` values a cdc file may hold for a predicate. An add or a remove has one
change type, a constant; a cdc file stores one per row, unknown before it is read, so a filter on
``_change_type`` may prune it only where every value it could hold is ruled out."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..scan_unit import CHANGE_TYPE

#: The change types the protocol defines; a cdc file may hold any of them (and, from
#: non-standard writers, other strings: see :func:`change_type_candidates`).
STANDARD_CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")


#: Stands for "a change type equal to none of the predicate's literals".
_OTHER_TYPE = "\x00other change type"


def change_type_literals(pred: Any) -> tuple[list[str | None], bool]:
    """The string literals ``_change_type`` is compared with, and whether every use of the column
    is an equality test (``=``, ``!=``, ``[NOT] IN``, ``IS [NOT] NULL`` against literals).

    With equality tests only, every value that is not one of the literals behaves alike, so a cdc
    file (whose change types are unknown before reading it) is judged on the literals plus one
    stand-in for any other value (and NULL, when the predicate tests for it). Range comparisons on
    ``_change_type`` are not used to prune cdc files (writers may use other values than the four
    standard ones).
    """
    from ..predicate import And, Column, Comparison, In, IsNotNull, IsNull, Literal, Not, Or

    literals: list[str | None] = []
    safe = True

    def lit_str(x: Any) -> None:
        nonlocal safe
        if not isinstance(x, Literal):
            safe = False
        elif x.value.is_valid:
            if not (pa.types.is_string(x.type) or pa.types.is_large_string(x.type)):
                safe = False
            elif x.value.as_py() not in literals:
                literals.append(x.value.as_py())

    def is_ct(x: Any) -> bool:
        return isinstance(x, Column) and x.name == CHANGE_TYPE

    def walk(p: Any) -> None:
        nonlocal safe
        if isinstance(p, (And, Or)):
            for c in p.children:
                walk(c)
        elif isinstance(p, Not):
            walk(p.child)
        elif isinstance(p, Comparison):
            if is_ct(p.left) or is_ct(p.right):
                if p.op not in ("=", "!=") or (is_ct(p.left) and is_ct(p.right)):
                    safe = False
                lit_str(p.right if is_ct(p.left) else p.left)
        elif isinstance(p, In):
            if is_ct(p.operand):
                for v in p.values:
                    lit_str(v)
        elif isinstance(p, (IsNull, IsNotNull)):
            if is_ct(p.operand) and None not in literals:
                literals.append(None)

    walk(pred)
    return literals, safe


def change_type_candidates(literals: list[str | None], footer: tuple[str, str] | None) -> list[str | None]:
    """Change types to try for a cdc file: the literals and "any other value" (within the file's
    footer min/max when known; min and max are values the file holds). NULL is tried only when
    the predicate tests for it (it is then among ``literals``)."""
    if footer is None:
        return (
            list(STANDARD_CHANGE_TYPES)
            + [v for v in literals if v not in STANDARD_CHANGE_TYPES]
            + [_OTHER_TYPE]
        )
    lo, hi = footer
    out: list[str | None] = [v for v in literals if v is None or lo <= v <= hi]
    for v in (lo, hi):
        if v not in out:
            out.append(v)
    if lo != hi:
        out.append(_OTHER_TYPE)  # a value strictly between min and max, equal to no literal
    return out


def without_column(pred: Any, column: str) -> Any:
    """``pred`` without the conjuncts that reference ``column`` (a weaker predicate)."""
    from ..predicate import conjunction, conjuncts, referenced_columns

    return conjunction(c for c in conjuncts(pred) if column not in referenced_columns(c))
