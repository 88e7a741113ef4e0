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
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..storage import Storage

TableKey = tuple[str, tuple]

_PINS: contextvars.ContextVar[dict[TableKey, int] | None] = contextvars.ContextVar(
    "delta_datafusion_statement_pins", default=None
)
_MARK = "_delta_datafusion_statements"


def table_key(storage: Storage) -> TableKey:
    return storage.cache_key


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
    """Make each ``sql`` / ``sql_with_options`` call on ``ctx`` a statement with its own pins.

    The session's class becomes a subclass whose two methods set the pins around the inherited
    ones (idempotent): copies of the session stay independent, signatures are unchanged, and a
    later patch of ``SessionContext.sql`` still runs. A session whose ``sql`` the caller replaced
    on the instance keeps that replacement and goes unpinned."""
    cls = type(ctx)
    if getattr(cls, _MARK, False):
        return
    ctx.__class__ = _tracked_class(cls)


_TRACKED_CLASSES: dict[type, type] = {}


def _tracked_class(cls: type) -> type:
    tracked = _TRACKED_CLASSES.get(cls)
    if tracked is None:

        def sql(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _statement():
                return super(tracked, self).sql(*args, **kwargs)

        def sql_with_options(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _statement():
                return super(tracked, self).sql_with_options(*args, **kwargs)

        namespace: dict[str, Any] = {_MARK: True, "__module__": cls.__module__, "__doc__": cls.__doc__}
        for name, fn in (("sql", sql), ("sql_with_options", sql_with_options)):
            base = getattr(cls, name, None)
            if base is not None:
                namespace[name] = functools.wraps(base)(fn)
        tracked = type(cls.__name__, (cls,), namespace)
        tracked.__qualname__ = cls.__qualname__
        _TRACKED_CLASSES[cls] = tracked
    return tracked


@contextmanager
def _statement() -> Iterator[None]:
    """A statement's pins; a statement inside another (sql_with_options calls sql) shares them."""
    if _PINS.get() is not None:
        yield
        return
    with planning_for({}):
        yield
