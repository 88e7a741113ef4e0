"""What a failed read raises: the package's own error naming the table version and the data file,
and saying why where it can be found out (a missing file, a column stored as a type the table
cannot read it as, a store that failed and may succeed on a retry), else the reader's own words."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DataFileNotFoundError, DeltaError, StorageError
from ..read_schema import ConversionError, ReadSchema, cast_may_fail, readable_as
from ..scan_unit import COMMIT_VERSION, ScanUnit
from ..storage import Storage, store_not_found
from .footer_probe import probed_footer

#: Files of a failed read checked for existence on an object store, beyond those the error names.
MAX_EXISTENCE_CHECKS = 64

#: Files of a failed scan decoded again to find the one an error naming no file came from (a
#: corrupt page): pyarrow's scanner reads up to 4 files ahead of the one it hands on, so that file
#: is among the first few the scan had not handed on whole. Small files are read further ahead
#: (the 9th of 12 files of 2 KB was seen failing first), so more are decoded while those decoded
#: hold under DECODED_AGAIN_BYTES (as the log gives their sizes), up to MAX_SMALL_DECODED_AGAIN.
MAX_DECODED_AGAIN = 6
DECODED_AGAIN_BYTES = 16 << 20
MAX_SMALL_DECODED_AGAIN = 64

#: What reading a data file raises of its own (a damaged footer or page: the OS's and pyarrow's
#: errors, UnicodeDecodeError for a column name that is not UTF-8; the type checks); anything else
#: came from an fsspec store itself (an HTTP client's error). Both name the file (file_error).
_READ_ERRORS = (OSError, pa.ArrowException, UnicodeDecodeError, ConversionError)


class ReadErrors:
    """Names the failed reads of one reader (``where``: its table and version)."""

    def __init__(self, storage: Storage, rs: ReadSchema, where: str):
        self.storage = storage
        self.rs = rs
        self.where = where

    def read_error(
        self, units: Sequence[ScanUnit], e: Exception, columns: Mapping[str, Sequence[str]] | None = None
    ) -> Exception:
        """What a failed read of ``units`` raises: the package's own errors as they are (they name
        their file already), anything else (pyarrow's, a store's) as :meth:`file_error`."""
        if isinstance(e, DeltaError) and not isinstance(e, ConversionError):
            return e
        return self.file_error(units, e, columns)

    def file_error(
        self, units: Sequence[ScanUnit], e: Exception, columns: Mapping[str, Sequence[str]] | None = None
    ) -> DeltaError:
        """``columns``: per file, the physical columns the failed scan read from it (to find the
        file an error naming none came from, see :meth:`_undecodable_file`)."""
        named = _named_in(units, str(e))
        where = self.where
        # the store failed (network, timeout, access): a retry may succeed, the file is not bad;
        # one that could not be reached is not asked again whether the file exists (on Azure each
        # request to a store that is down takes ~80 s of retries); a denied read may be a missing
        # file (S3 without ListBucket answers 403)
        store_failed = _store_failure(e)
        unreachable = store_failed and not any(isinstance(c, PermissionError) for c in _causes(e))
        try:
            missing = [] if unreachable else self._missing_files(units, named)
        except StorageError as denied:  # a file or folder the store does not let us look at
            return StorageError(f"{where}: {denied}")
        if missing:
            # in a change feed, the commit whose change needs the file (not the range's end)
            versions = {u.constants.get(COMMIT_VERSION) for u in units if u.location == missing[0]}
            versions.discard(None)
            of = f" (of the change at version {min(versions)})" if versions else ""
            return DataFileNotFoundError(
                f"{where}: data file {missing[0]}{of} is missing (removed by VACUUM or deleted outside Delta)"
            )
        reason = str(e).splitlines()[0][:400]
        if not isinstance(e, _READ_ERRORS):
            reason = f"{type(e).__name__}: {reason}"  # a store's own error: its type says what
        resized = None if store_failed else self._resized_file(named or units)
        if resized is not None:
            location, real, logged = resized
            return DeltaError(
                f"{where}: data file {location} is {real} bytes, but the log says {logged} (the file "
                f"was replaced outside Delta, or the log is wrong): {reason}"
            )
        # a file that does not decode at its own types (a damaged page or footer) is named before
        # looking for a file storing another type: a type that may not cast (Spark's INT96
        # timestamps are nanoseconds) named a healthy file for another file's damaged page
        undecodable = []
        if not store_failed and not isinstance(e, ConversionError):
            undecodable = self._undecodable_file(named or units, columns)
        culprit = None if store_failed or undecodable else self._mismatched_file(units)
        if culprit is not None:
            location, column, stored, expected = culprit
            return DeltaError(
                f"{where}: data file {location} stores column {self.rs.column_text(column)} as {stored}, "
                f"but the table schema says {expected} ({reason})"
            )
        named = undecodable or named
        kind = StorageError if store_failed else DeltaError
        if len(units) == 1 or named:
            location = (named or units)[0].location
            reason = reason.removeprefix(f"{location}: ")  # the store's error named it already
            return kind(f"{where}: cannot read data file {location}: {reason}")
        return kind(
            f"{where}: cannot read one of {len(units)} data files (the first is {units[0].location}): {reason}"
        )

    def _missing_files(self, units: Sequence[ScanUnit], named: list[ScanUnit]) -> list[str]:
        """After a failed read: data files of ``units`` that do not exist, those the error
        ``named`` first. On object stores each check is a request, so at most 64 unnamed files are
        checked (a 300k-file scan checked every file: 300,000 requests before the error)."""
        named_locations = {u.location for u in named}
        others = [u for u in units if u.location not in named_locations]
        if not self.storage.is_local:
            others = others[:MAX_EXISTENCE_CHECKS]
        for group in (named, others):
            try:
                missing = [u.location for u in group if not self.storage.exists(u.location)]
            except StorageError:
                if group is others and named:  # the error named its file: that one is the culprit
                    return []
                raise
            if missing:
                return missing
        return []

    def _resized_file(self, units: Sequence[ScanUnit]) -> tuple[str, int, int] | None:
        """After a failed read on an object store, whose data files are read by the size the log
        gives (pyarrow looks for the footer where the log says a file ends): the first file (of at
        most MAX_EXISTENCE_CHECKS) whose size is not the logged one, with both sizes. Local files
        are read by their own size. A store not telling a file's size (an HTTP server sending no
        Content-Length: 0) says nothing of it."""
        if self.storage.is_local:
            return None
        for u in [u for u in units if u.size][:MAX_EXISTENCE_CHECKS]:  # 0: not logged, opened by its own
            try:
                real = self.storage.info(u.location).size
            except (DeltaError, OSError):  # the store will not say (denied, an option refused): no verdict
                return None
            if real and real != u.size:
                return u.location, real, u.size
        return None

    def _undecodable_file(
        self, units: Sequence[ScanUnit], columns: Mapping[str, Sequence[str]] | None
    ) -> list[ScanUnit]:
        """After a failed read: the first file (of at most MAX_DECODED_AGAIN, more if they are
        small) whose ``columns`` (None: all) cannot be decoded, if one is found. A damaged page
        header can end a column early without an error batch by batch (the scan's own check of
        the columns' lengths fails): fewer rows than the footer holds is undecodable too."""
        decoded = 0
        for i, u in enumerate(units[:MAX_SMALL_DECODED_AGAIN]):
            if i >= MAX_DECODED_AGAIN and decoded >= DECODED_AGAIN_BYTES:
                break
            decoded += u.size or DECODED_AGAIN_BYTES  # a size not logged: taken as large
            try:
                pf = pq.ParquetFile(u.location, filesystem=self.storage.arrow_fs)
                stored = set(pf.schema_arrow.names)
                wanted = None if columns is None else [c for c in columns.get(u.location, ()) if c in stored]
                rows = sum(batch.num_rows for batch in pf.iter_batches(columns=wanted))
                if rows != pf.metadata.num_rows:
                    return [u]
            except _READ_ERRORS:
                return [u]
            except Exception:  # noqa: BLE001 - the store failing now says nothing of the file
                return []
        return []

    def _mismatched_file(self, units: Sequence[ScanUnit]) -> tuple[str, str, pa.DataType, pa.DataType] | None:
        """After a failed read: the first file (of at most 1,000) storing a table column as a
        type it cannot be read as (see :func:`readable_as`), to name it in the error."""
        expected = {f.name: f.type for f in self.rs.physical}
        wider = None  # else the first column stored wider than the table's type: a value may not fit
        for u in units[:1000]:
            footer = probed_footer(u.location, self.storage.arrow_fs)
            if footer is None:
                return None  # unreadable: the original error says more
            for f in footer.schema.to_arrow_schema():
                want = expected.get(f.name)
                if want is not None and not readable_as(f.type, want):
                    return u.location, f.name, f.type, want
                if wider is None and want is not None and cast_may_fail(f.type, want):
                    wider = (u.location, f.name, f.type, want)
        return wider


def _store_failure(e: BaseException) -> bool:
    """Did a read fail because the store did? pyarrow wraps an fsspec store's ConnectionError,
    TimeoutError or PermissionError in an OSError whose cause it is, and lets other exceptions of
    the store's (an HTTP client's) through as they are."""
    if not isinstance(e, _READ_ERRORS):  # a store's own (HTTP client's) error, but not found
        return not store_not_found(e)
    return any(isinstance(c, (ConnectionError, TimeoutError, PermissionError)) for c in _causes(e))


def _causes(e: BaseException) -> list[BaseException]:
    """``e`` and its explicit causes (``__context__`` is whatever the caller was handling
    meanwhile)."""
    out: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and all(cur is not c for c in out):
        out.append(cur)
        cur = cur.__cause__
    return out


def _named_in(units: Sequence[ScanUnit], error: str) -> list[ScanUnit]:
    """The units whose file an error message names (by location or local path)."""
    return [u for u in units if u.location in error or _local_path(u.location) in error]


def _local_path(location: str) -> str:
    """``location`` without a ``file://`` scheme, as pyarrow names local files in its errors."""
    return location[len("file://") :] if location.startswith("file://") else location
