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


#: Held while an instance's locks are made (once per instance).
_MAKING = threading.Lock()


class _Locks(dict):
    """An instance's per-property locks; pickled (and deep-copied) as none, so an instance that
    pickled before it had locks still does (a lock cannot be pickled). ``owner`` is the id of
    the instance they belong to: a shallow copy's ``__dict__`` holds its original's locks, which
    it must not share (its computations would wait for the original's)."""

    def __init__(self, owner: int = 0):
        super().__init__()
        self.owner = owner

    def __reduce__(self) -> tuple:
        return _Locks, ()


def _locks_of(instance: object) -> _Locks:
    """The per-property locks of ``instance``, made on first use (also in place of a copied
    original's: an instance's id differs from every other live instance's)."""
    cache = instance.__dict__
    locks = cache.get(_LOCKS)
    if locks is None or locks.owner != id(instance):
        with _MAKING:  # racing threads get the same locks
            locks = cache.get(_LOCKS)
            if locks is None or locks.owner != id(instance):
                locks = cache[_LOCKS] = _Locks(id(instance))
    return locks


class cached_property(Generic[T]):
    """Like :func:`functools.cached_property` (the value is kept in the instance ``__dict__``
    under the property's name, which code may also set, read or drop directly), but computed
    under a lock of the instance and property: once per instance even with concurrent callers,
    instances of a class do not wait for each other, and an exception is not kept."""

    def __init__(self, func: Callable[[Any], T]):
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__
        self._named = False

    def __set_name__(self, owner: type, name: str) -> None:
        if self._named and name != self.name:  # the value would be kept under one name only
            raise TypeError(f"cannot assign one cached_property to two names ({self.name!r} and {name!r})")
        self.name, self._named = name, True

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> cached_property[T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> T | cached_property[T]:
        if instance is None:
            return self
        cache = instance.__dict__
        # dict.setdefault is atomic: racing threads get the same lock
        lock = _locks_of(instance).setdefault(self.name, threading.RLock())
        with lock:
            if self.name in cache:  # computed by the thread this one waited for
                return cache[self.name]
            value = self.func(instance)
            cache[self.name] = value
            return value
