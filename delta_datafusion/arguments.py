"""Checks of the Python API's arguments: a wrong type is an :class:`ArgumentError` (a
``DeltaError``, ``ValueError`` and ``TypeError``) naming the argument, not a ``TypeError`` from
deep inside."""

from __future__ import annotations

import numbers

from .errors import ArgumentError


def is_version_text(text: str) -> bool:
    """Is ``text`` a version as written in text: ASCII digits only (``str.isdigit()`` is also true
    for '²' or '٣', which ``int()`` refuses or reads as another number, and ``int()`` takes '1_000')."""
    return text.isascii() and text.isdigit()


def integer(value: object, argument: str) -> int:
    """``value`` as an int (numpy integers too); bools and other types are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentError(f"{argument} must be an integer, got {value!r}")
    return int(value)


def misspelt_option(key: str) -> str | None:
    """'version' or 'timestamp' when ``key`` looks like a misspelling of it: the same first
    letter, about the same length, at most two edits ('versoin', 'timestmp', 'time_stamp'; not
    'versioned', 'version_id' or 'person')."""
    k = key.lower()
    for word in ("version", "timestamp"):
        if k == word or (k[:1] == word[0] and abs(len(k) - len(word)) <= 1 and _edits(k, word) <= 2):
            return word  # 'Version' too: only the lower-case key is the Delta option
    return None


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (short option names only)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]
