"""Process-wide thread pools, made on first use and anew in a forked child."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor


class ProcessPool:
    """One ThreadPoolExecutor for the whole process. A forked child gets a new one: the parent's
    threads do not exist there (work submitted to the parent's pool would never run)."""

    def __init__(self, thread_name_prefix: str, min_workers: int = 1):
        self._prefix = thread_name_prefix
        self._min_workers = min_workers
        self._lock = threading.Lock()
        self._pool: tuple[int, ThreadPoolExecutor] | None = None
        os.register_at_fork(after_in_child=self._forget_lock)

    def _forget_lock(self) -> None:
        self._lock = threading.Lock()  # a thread holding it at the fork does not exist in the child

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pool[0] != os.getpid():
                workers = max(self._min_workers, os.cpu_count() or 1)
                self._pool = (os.getpid(), ThreadPoolExecutor(workers, thread_name_prefix=self._prefix))
            return self._pool[1]
