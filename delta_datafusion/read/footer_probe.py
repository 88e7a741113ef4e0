"""A data file's footer read ahead of its rows, to choose how to read it or what to name in an
error: a read that may fail (the file missing, a store refusing a request for a moment) without
failing the scan, whose own read of the file then reports what is wrong."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq


def probed_footer(location: str, arrow_fs: Any) -> pq.FileMetaData | None:
    """The footer of the data file at ``location``, or None when it cannot be read now.

    Not only OSError and pyarrow's errors: pyarrow passes a store's own exception through as the
    store raised it (fsspec's HTTP filesystem raises aiohttp's ClientResponseError for a 403 or a
    500), and that one too is the scan's read to report, as a StorageError naming the file. The
    caller decides only from the footer, so nothing but the read is inside the ``try``."""
    try:
        with pq.ParquetFile(location, filesystem=arrow_fs) as pf:
            return pf.metadata
    except Exception:  # noqa: BLE001 - every store raises its own kinds; the read reports them
        return None
