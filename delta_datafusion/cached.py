"""A cached property computed once per instance under that instance's own lock.

``functools.cached_property`` before Python 3.12 holds one lock per property per class while it
computes: two snapshots of two tables replaying their logs on two threads ran one after the other,
and a computation that waited for another thread needing the same property of another instance
never ended. From 3.12 on it holds no lock: concurrent callers each compute the value.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")

#: Instance ``__dict__`` key of the per-property locks.
_LOCKS = "_cached_property_locks"


class _Locks(dict):
    """An instance's per-property locks; pickled (and deep-copied) as none, so an instance that
    pickled before it had locks still does (a lock cannot be pickled)."""

    def __reduce__(self) -> tuple:
        return _Locks, ()


class cached_property(Generic[T]):
    """Like :func:`functools.cached_property` (the value is kept in the instance ``__dict__``
    under the property's name, which code may also set, read or drop directly), but computed
    under a lock of the instance and property: once per instance even with concurrent callers,
    instances of a class do not wait for each other, and an exception is not kept."""

    def __init__(self, func: Callable[[Any], T]):
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_property[T]:
        if instance is None:
            return self
        cache = instance.__dict__
        # dict.setdefault is atomic: racing threads get the same lock
        lock = cache.setdefault(_LOCKS, _Locks()).setdefault(self.name, threading.RLock())
        with lock:
            if self.name in cache:  # computed by the thread this one waited for
                return cache[self.name]
            value = self.func(instance)
            cache[self.name] = value
            return value
