"""A small thread-safe least-recently-used cache, shared by the process-wide caches (change
feeds, commit timelines, parquet footer statistics)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

V = TypeVar("V")
_MISSING = object()


class LruCache(Generic[V]):
    """At most ``size`` entries; the least recently used one goes first. Values are made outside
    the lock (two threads may make the same value; one is kept)."""

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: object = None) -> V | object:
        with self._lock:
            if key not in self._items:
                return default
            self._items.move_to_end(key)
            return self._items[key]

    def put_many(self, items: Iterable[tuple[Hashable, V]]) -> None:
        with self._lock:
            for key, value in items:
                self._items[key] = value
                self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def put(self, key: Hashable, value: V) -> None:
        self.put_many([(key, value)])

    def get_or_make(
        self, key: Hashable, make: Callable[[], V], still_valid: Callable[[V], bool] | None = None
    ) -> V:
        """The cached value, if any and ``still_valid`` accepts it; else a new one, cached."""
        hit = self.get(key, _MISSING)
        if hit is not _MISSING and (still_valid is None or still_valid(hit)):  # type: ignore[arg-type]
            return hit  # type: ignore[return-value]
        value = make()
        self.put(key, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
