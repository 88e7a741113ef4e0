"""Whether pyarrow may use its own thread pool for the work of the current task.

Phase two of parallel replay runs one task per CPU; each task then reads and parses on one thread,
because pyarrow's pool would only add coordination overhead on cores the other tasks already use
(1M adds in 8 sidecars on 2 workers: 2.1-2.5 -> 1.95 CPU-s, 1.13 -> 1.04 s). A context variable,
so that the setting follows the task and never leaks into other threads.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

_USE_THREADS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "delta_datafusion_arrow_threads", default=True
)


def use_threads() -> bool:
    """The ``use_threads`` argument for pyarrow reads and parses in this context."""
    return _USE_THREADS.get()


@contextmanager
def arrow_threads(enabled: bool) -> Iterator[None]:
    """Run the block with pyarrow's thread pool enabled or not."""
    token = _USE_THREADS.set(enabled)
    try:
        yield
    finally:
        _USE_THREADS.reset(token)
