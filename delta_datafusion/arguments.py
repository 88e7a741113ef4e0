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
