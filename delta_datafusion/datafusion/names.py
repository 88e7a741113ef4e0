"""Table references as SQL reads them: ``[catalog.[schema.]]table``, unquoted parts lower-cased.

register_table, table_changes and the CLI compare and show names the way DataFusion resolves
them, so that ``Trips``, ``trips`` and ``public.trips`` are one table and ``"Trips"`` another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A part SQL reads as it is written, without quotes.
_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")


def split_reference(name: str) -> list[tuple[str, bool]] | None:
    """A dotted table reference as (part, was it double-quoted) pairs; None if malformed."""
    parts: list[tuple[str, bool]] = []
    i, n = 0, len(name)
    while True:
        if i < n and name[i] == '"':
            j, text = i + 1, []
            while True:
                k = name.find('"', j)
                if k < 0:
                    return None
                text.append(name[j:k])
                if name[k + 1 : k + 2] == '"':  # "" inside quotes is one quote
                    text.append('"')
                    j = k + 2
                    continue
                break
            parts.append(("".join(text), True))
            i = k + 1
        else:
            k = name.find(".", i)
            k = n if k < 0 else k
            if k == i:
                return None
            parts.append((name[i:k], False))
            i = k
        if i == n:
            return parts
        if name[i] != ".":
            return None
        i += 1


def normalized(name: str) -> tuple[str, ...] | None:
    """The parts SQL resolves ``name`` to (unquoted ones lower-cased); None if malformed."""
    parts = split_reference(name)
    if parts is None or not 1 <= len(parts) <= 3:
        return None
    return tuple(p if quoted else p.lower() for p, quoted in parts)


def same_table(a: str, b: str) -> bool:
    """Do two names given to register_table (or the CLI) name one table? Parts are compared as
    SQL resolves them, a shorter name matching the end of a longer one (``t`` and
    ``public.t``: the default catalog and schema fill in the rest)."""
    na, nb = normalized(a), normalized(b)
    if na is None or nb is None:
        return a == b
    short, long = sorted((na, nb), key=len)
    return long[len(long) - len(short) :] == short


def quoted(parts: Sequence[str]) -> str:
    """Every part quoted: DataFusion takes the parts as they are."""
    return ".".join('"' + p.replace('"', '""') + '"' for p in parts)


def sql_name(parts: Sequence[str]) -> str:
    """A table reference as SQL has to spell it: parts quoted where they need it."""
    return ".".join(p if _PLAIN.fullmatch(p) else quoted((p,)) for p in parts)


def relation_readings(relation: str) -> list[tuple[str, ...]]:
    """The (catalog, schema) or (schema,) parts a flattened relation may stand for, the most
    split first: DataFusion joins a column reference's relation parts with dots and drops their
    quotes, so ``x.y`` is catalog ``x`` schema ``y``, or schema ``"x.y"``."""
    splits = [(relation[:i], relation[i + 1 :]) for i, c in enumerate(relation) if c == "."]
    return [r for r in [*splits, (relation,)] if all(r)]
