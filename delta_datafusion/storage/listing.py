"""Listing entries: local folders are listed by name only (a log can hold thousands of files), and
an object store's entry times are read from whichever field its filesystem fills."""

from __future__ import annotations

import datetime
import os
import re
import struct
from collections.abc import Callable
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from ..errors import DeltaError, MissingLogFileError, StorageError, UnsupportedFeatureError


class FileInfo:
    """One listed object: full path (without protocol), name, size, modification time (ms) and
    the entity tag the listing gave (None when it gave none).

    Local listings do not stat every entry (a log can hold thousands of files); size and
    modification time are read on first use.
    """

    __slots__ = ("path", "name", "_size", "_mtime_ms", "_fs", "etag")

    def __init__(
        self,
        path: str,
        name: str,
        size: int | None = None,
        mtime_ms: int | None = None,
        fs: Any = None,
        etag: str | None = None,
    ):
        self.path = path
        self.name = name
        self._size = size
        self._mtime_ms = mtime_ms
        self._fs = fs  # the fsspec filesystem to ask for what the listing did not say (None: local)
        #: changes with the bytes: S3 and Azure times are whole seconds, so a file written again
        #: within the second its first version was read has that version's size and time
        self.etag = etag

    def _stat(self) -> None:
        if self._fs is not None:
            self._mtime_ms = _fs_mtime_ms(self._fs, self.path)
            return
        try:
            st = os.stat(self.path)
        except FileNotFoundError as e:  # listed, then removed (log cleanup, a concurrent writer)
            raise MissingLogFileError(f"{self.path} disappeared after the folder was listed") from e
        self._size, self._mtime_ms = st.st_size, st.st_mtime_ns // 1_000_000

    @property
    def size(self) -> int | None:
        """The size; None where an object store's listing gave none (HTTP): not asked here, as
        cache keys read it for every commit of a range (a request each)."""
        if self._size is None and self._fs is None:
            self._stat()
        return self._size

    def mtime_or_none(self) -> int | None:
        """The modification time, or None where the filesystem gives none (zip): for cache keys,
        which must not fail where reads need no times."""
        try:
            return self.mtime_ms
        except MissingLogFileError:
            raise
        except DeltaError:
            return None

    def size_not_kept(self) -> int | None:
        """The size, for a check that must not stand in for a later read's own look: a local
        file's is asked each time and not kept (the read that follows finds a file removed since
        the listing missing, which lists the log again); a store file's the listing did not give
        (HTTP) is asked of the store; None where the store cannot tell."""
        if self._size is not None:
            return self._size
        if self._fs is not None:
            return _fs_size(self._fs, self.path)
        try:
            return os.stat(self.path).st_size
        except FileNotFoundError as e:
            raise MissingLogFileError(f"{self.path} disappeared after the folder was listed") from e

    @property
    def listed_size(self) -> int | None:
        """The size the listing gave, without asking the filesystem (None for local listings)."""
        return self._size

    @property
    def known_mtime(self) -> int | None:
        """The modification time known so far (the listing's, or one read since), without asking
        the filesystem."""
        return self._mtime_ms

    @property
    def mtime_ms(self) -> int:
        if self._mtime_ms is None:
            self._stat()
        return self._mtime_ms

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FileInfo) and self.path == other.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"FileInfo({self.path!r})"


def _local_names(path: str) -> list[str]:
    """Names of the files in a local folder, in the folder's order (os.scandir, no stat per
    entry)."""
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it if not e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except PermissionError as e:
        raise StorageError(f"cannot list {path}: permission denied") from e
    except OSError as e:  # a symlink loop, a name too long, an I/O error: not a crash
        raise StorageError(f"cannot list {path}: {e.strerror or e}") from e
    return names


def _fs_size(fs: Any, path: str) -> int | None:
    """A store file's size its listing did not give (one request); None where the store cannot
    tell (no Content-Length) or the request fails: the read that follows reports its own error."""
    try:
        size = fs.size(path)
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{path} disappeared after the folder was listed") from e
    except Exception:  # noqa: BLE001 - any filesystem's own error: left to the read
        return None
    return int(size) if size is not None else None


def _fs_mtime_ms(fs: Any, path: str) -> int:
    """Modification time from ``fs.modified`` for listings that carry none. A filesystem that
    cannot tell is an error: a made-up time would give wrong commit timestamps."""
    try:
        modified = fs.modified(path)
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{path} disappeared after the folder was listed") from e
    except Exception as e:  # noqa: BLE001 - NotImplementedError and any filesystem's own error
        kind = type(getattr(fs, "wrapped", fs)).__name__
        why = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__  # zip's has no text
        raise UnsupportedFeatureError(
            f"{path}: {kind} gives no modification time ({why}); commit timestamps (time travel "
            f"by timestamp, history(), _commit_timestamp) need one, or in-commit timestamps"
            f"{_web_times(fs)}{_zip_times(fs)}"
        ) from e
    return _datetime_ms(modified)


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MS = datetime.timedelta(milliseconds=1)


def _datetime_ms(t: datetime.datetime) -> int:
    """Milliseconds since the epoch, floored in integers (a naive time is UTC): through a float,
    ``int(t.timestamp() * 1000)`` reads some whole milliseconds 1 ms early (times near 2004 and
    2038, where the product rounds below the integer)."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.timezone.utc)
    return (t - _EPOCH) // _MS


def _seconds_ms(v: Any) -> int:
    """Seconds as a number (or its text) -> milliseconds, floored in decimal: a float is taken as
    the shortest decimal that reads back as it (1700000000.124, not the binary value just below),
    so a time given to the millisecond or microsecond keeps its millisecond."""
    d = Decimal(v) if isinstance(v, (str, int)) else Decimal(repr(float(v)))
    return int((d * 1000).to_integral_value(rounding=ROUND_FLOOR))


def _stat_ms(path: str) -> int:
    """A local file's modification time in milliseconds, from its nanoseconds (the plain-path
    listing's rule): a float of seconds cannot tell a time 0.1 us below a millisecond from it."""
    return os.stat(path).st_mtime_ns // 1_000_000


def _local_files(fs: Any) -> Callable[[str], str] | None:
    """For a chain whose files are local files under caching layers (``simplecache::file://``),
    the local path of one of its paths (the layers name files as the local filesystem does);
    None for any other filesystem."""
    from fsspec.implementations.cached import CachingFileSystem
    from fsspec.implementations.local import LocalFileSystem

    inner, seen = fs, 0
    while isinstance(inner, CachingFileSystem) and seen < 8:
        inner, seen = inner.fs, seen + 1
    if seen and isinstance(inner, LocalFileSystem):
        return inner._strip_protocol
    return None


def _web_times(fs: Any) -> str:
    """Why a web server's times are not taken for commit times, and what to do instead (for the
    message of an HTTP store). Its listing (links of an HTML page) has none; its Last-Modified
    header, one request per commit file, has whole seconds (RFC 9110 dates) where local times
    have milliseconds, and is the time the server's copy of the file was written, not the
    commit's: a table published by copying its folder read every commit in one second."""
    if not {"http", "https"} & _protocols(fs):
        return ""
    return (
        ". A web server's Last-Modified has whole seconds and tells when its copy of the file was "
        "written, not when it was committed, so it is not taken for commit times: read the table "
        "from its own store (a local folder, S3, GCS, Azure), or have the writer enable in-commit "
        "timestamps (delta.enableInCommitTimestamps); reads by version need no times"
    )


def _zip_times(fs: Any) -> str:
    """Why a zip archive's entries gave no time (for the message of a zip store): see
    :func:`_zip_extended_time`."""
    if "zip" not in _protocols(fs):
        return ""
    return (
        ". A zip entry's own time is its writer's local wall-clock time, in no zone the archive "
        "records, so it is not taken; archives written with extended timestamps (Info-ZIP's zip "
        "writes them, Python's zipfile does not) give UTC times"
    )


def _protocols(fs: Any) -> set[str]:
    protocols = getattr(getattr(fs, "wrapped", fs), "protocol", ())
    return set(protocols if isinstance(protocols, (tuple, list)) else (protocols,))


_MLSD_TIME = re.compile(r"^[0-9]{14}(\.[0-9]+)?$")


def _etag(entry: dict[str, Any]) -> str | None:
    """The entity tag an fsspec listing entry carries (s3fs ``ETag``, gcsfs and adlfs ``etag``)."""
    for key in ("ETag", "etag"):
        v = entry.get(key)
        if isinstance(v, str) and v:
            return v
    return None


def _mtime_ms(entry: dict[str, Any]) -> int | None:
    """The modification time (ms) an fsspec listing entry carries, None when it has none."""
    modify = entry.get("modify")  # FTP's MLSD fact (RFC 3659): YYYYMMDDHHMMSS[.fff] in UTC
    if isinstance(modify, str) and _MLSD_TIME.match(modify):
        whole, _, fraction = modify.partition(".")
        t = datetime.datetime.strptime(whole, "%Y%m%d%H%M%S").replace(tzinfo=datetime.timezone.utc)
        return _datetime_ms(t) + int((fraction + "000")[:3])
    hdfs = entry.get("modificationTime")  # WebHDFS's FileStatus: integer milliseconds
    if isinstance(hdfs, int) and not isinstance(hdfs, bool):
        return hdfs
    if "date_time" in entry:  # a zip entry (fsspec's ZipFileSystem lists its ZipInfo fields)
        extended = _zip_extended_time(entry.get("extra"))
        if extended is not None:
            return extended
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        v = entry.get(key)
        if v is None:
            continue
        if isinstance(v, str):
            try:
                v = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                pass
        if isinstance(v, datetime.datetime):
            return _datetime_ms(v)
        try:
            return _seconds_ms(v)
        except (TypeError, ValueError, ArithmeticError):  # decimal's InvalidOperation for 'abc'
            continue
    return None


#: Info-ZIP's extended timestamp extra field (0x5455, "UT"): a flags byte, then the times its
#: bits 0..2 name, each 4 bytes little-endian; in the central directory only the modification
#: time follows (its flags still describe the local header's fields)
_ZIP_EXTENDED_TIME = 0x5455


def _zip_extended_time(extra: Any) -> int | None:
    """The modification time (ms) of a zip entry's extended timestamp field, None without one.
    Its DOS time (``date_time``) is never taken: the writing machine's local wall-clock time, in
    no zone the archive records (and in 2-second steps); the extended field is UTC seconds,
    read unsigned (a commit is not older than 1970; a signed read ends in 2038)."""
    if not isinstance(extra, bytes):
        return None
    at = 0
    while at + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, at)
        data = extra[at + 4 : at + 4 + size]
        if tag == _ZIP_EXTENDED_TIME and len(data) >= 5 and data[0] & 1:
            return struct.unpack_from("<I", data, 1)[0] * 1000
        at += 4 + size
    return None


def forget_listing(fs: Any, path: str) -> None:
    """Drop a filesystem's cached listing of ``path``: object-store filesystems cache listings per
    instance and fsspec shares instances, so a cached listing of ``_delta_log`` would hide every
    commit made after it. Only an optimisation of theirs is lost; a filesystem whose
    ``invalidate_cache`` takes other arguments or fails is left as it is."""
    try:
        fs.invalidate_cache(path)
    except Exception:  # noqa: BLE001, S110 - see above
        pass
