"""A thin I/O layer over fsspec: listing, whole-file and range reads, and pyarrow filesystems.

The log and scan code never touches fsspec or the local filesystem directly; everything goes
through :class:`Storage`, so any fsspec protocol (with storage options) works the same way.
"""

from .handles import store_errors, store_not_found
from .listing import FileInfo, _mtime_ms, forget_listing
from .store import Storage
from .uri import normalized_path

__all__ = [
    "FileInfo",
    "Storage",
    "_mtime_ms",
    "forget_listing",
    "normalized_path",
    "store_errors",
    "store_not_found",
]
