"""Batch sizes: the Python API's ``batch_size`` argument (checked, and honoured by zero-copy
slices) and the sizes pyarrow decodes in. Apart from the reader because the Python API's scans
(table and change feed) check and apply ``batch_size`` themselves."""

from __future__ import annotations

import numbers
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from ..errors import ArgumentError

#: Batch size for pyarrow decoding: DataFusion's 8192 costs 1.5-2x more CPU (measured).
MIN_BATCH_SIZE = 131072
#: The largest batch pyarrow's readers take (a C int); a larger ``batch_size`` decodes in these.
MAX_BATCH_SIZE = 2**31 - 1


def checked_batch_size(batch_size: Any) -> int | None:
    """The Python API's ``batch_size`` argument: None or a positive integer."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
        raise ArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


def batches_of_at_most(batches: Iterator[pa.RecordBatch], batch_size: int | None) -> Iterator[pa.RecordBatch]:
    """The Python API's ``batch_size``: decoding uses large batches (MIN_BATCH_SIZE), handed out
    in zero-copy slices of at most ``batch_size`` rows."""
    if batch_size is None:
        yield from batches
        return
    batch_size = checked_batch_size(batch_size)
    for batch in batches:
        if batch.num_rows <= batch_size:
            yield batch
            continue
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)
