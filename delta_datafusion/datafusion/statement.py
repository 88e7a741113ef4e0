"""One version per table for each SQL statement, for the tables that resolve "latest" as it is planned.

Folder-catalog tables and ``table_changes()`` without an end resolve the latest version while
DataFusion plans them, each reference on its own. A statement naming one table twice (a
self-join, a UNION ALL, a table and its change feed) would mix two versions if a commit landed
in between. The first resolution in a statement pins the version for the rest of it.

A statement is one call of ``sql`` / ``sql_with_options`` on a session the package has seen
(:func:`track_statements`, done when anything is registered in it): datafusion-python plans the
statement inside that call and calls catalog lookups and table functions back on the same thread,
so a context variable set around the call reaches them. Work outside such a call (the Python
API) is not pinned.
"""

from __future__ import annotations

import contextvars
import functools
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..change_range import options_key
from ..storage import Storage

TableKey = tuple[str, tuple]

_PINS: contextvars.ContextVar[dict[TableKey, int] | None] = contextvars.ContextVar(
    "delta_datafusion_statement_pins", default=None
)
_ENTRY_POINTS = ("sql", "sql_with_options")
_MARK = "_delta_datafusion_statements"


def table_key(storage: Storage) -> TableKey:
    return storage.root_uri, options_key(storage.storage_options)


def statement_pins() -> dict[TableKey, int] | None:
    """Versions pinned so far by the statement being planned (None: not inside a statement)."""
    return _PINS.get()


@contextmanager
def planning_for(pins: dict[TableKey, int] | None) -> Iterator[None]:
    """Run a lookup on a helper thread as part of the statement whose ``pins`` are given."""
    token = _PINS.set(pins)
    try:
        yield
    finally:
        _PINS.reset(token)


def track_statements(ctx: Any) -> None:
    """Make each ``sql`` call on ``ctx`` a statement with its own pins (idempotent).

    The wrappers are instance attributes that reach the session through a weak reference, so
    they neither keep it alive nor change the class."""
    if getattr(ctx, _MARK, False):
        return
    ref = weakref.ref(ctx)
    for name in _ENTRY_POINTS:
        method = getattr(type(ctx), name, None)
        if method is None:
            continue
        setattr(ctx, name, _statement_entry(ref, method))
    setattr(ctx, _MARK, True)


def _statement_entry(ref: weakref.ref, method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def entry(*args: Any, **kwargs: Any) -> Any:
        ctx = ref()
        if ctx is None:  # pragma: no cover - the wrapper lives in the session's own __dict__
            raise ReferenceError("the SessionContext is gone")
        if _PINS.get() is not None:  # sql_with_options calls sql: one statement
            return method(ctx, *args, **kwargs)
        token = _PINS.set({})
        try:
            return method(ctx, *args, **kwargs)
        finally:
            _PINS.reset(token)

    return entry
