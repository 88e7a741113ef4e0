"""Table references as SQL reads them: ``[catalog.[schema.]]table``, unquoted parts lower-cased.

register_table, table_changes and the CLI compare and show names the way DataFusion resolves
them, so that ``Trips``, ``trips`` and ``public.trips`` are one table and ``"Trips"`` another.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

#: A part SQL reads as it is written, without quotes.
_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")
#: DataFusion lower-cases unquoted identifiers in ASCII only (``Ä`` and ``ä`` are two tables).
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
#: The catalog and schema a shorter name means in a session of the default configuration.
DEFAULTS = ("datafusion", "public")


def sql_lower(part: str) -> str:
    """An unquoted identifier part as DataFusion normalizes it."""
    return part.translate(_ASCII_LOWER)


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
    return tuple(p if quoted else sql_lower(p) for p, quoted in parts)


def names_column(written: str, column: str) -> bool:
    """Does the identifier ``written`` (as DataFusion hands PARTITIONED BY names over: quotes
    kept) name ``column``? A quoted one is its text; an unquoted one names the column spelled as
    written or lower-cased (as DataFusion reads it in a session of the default configuration)."""
    parts = split_reference(written)
    if parts is None or len(parts) != 1:
        return False
    text, was_quoted = parts[0]
    return text == column if was_quoted else column in (text, sql_lower(text))


def full_name(parts: Sequence[str]) -> tuple[str, ...]:
    """(catalog, schema, table), the default catalog and schema filling in what is left out."""
    return (*DEFAULTS[: 3 - len(parts)], *parts)


def same_table(a: str, b: str) -> bool:
    """Do two names given to register_table (or the CLI) name one table, as SQL resolves them
    in a session of the default configuration (``t``, ``T`` and ``public.t`` do; ``"T"`` and
    ``other.t`` do not)? A session configured with other defaults sees fewer spellings as one."""
    na, nb = normalized(a), normalized(b)
    if na is None or nb is None:
        return a == b
    return full_name(na) == full_name(nb)


def same_as_flattened(flat: str, name: str) -> bool:
    """Like :func:`same_table`, for ``flat`` a name DataFusion has already normalized and joined
    with dots, quotes dropped (CREATE EXTERNAL TABLE's ``"My.T"`` arrives as ``My.T``), whose
    parts are no longer known."""
    parts = normalized(name)
    if parts is None:
        return False
    want = ".".join(full_name(parts))
    return want in (flat, f"{DEFAULTS[0]}.{flat}", ".".join((*DEFAULTS, flat)))


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
