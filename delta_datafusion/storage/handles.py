"""File handles whose failures are the package's errors naming the file: a store's own message,
a ConnectionError or a timeout, often names none."""

from __future__ import annotations

import contextlib
import errno
import inspect
import io
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ..errors import ArgumentError, DeltaError, StorageError
from .credentials import no_credentials_hint


def with_known_size(handle: Any, size: int) -> Any:
    """``handle``, an fsspec file opened with the ``size`` the log or a listing gave, told that
    size as its details too: s3fs otherwise asks the store for them (a HEAD request, for an ETag
    check it skips when opened with a size) at the first read, one round trip before each data
    file's first bytes. Data files are never rewritten in place, so the check guards nothing."""
    if getattr(handle, "_details", 0) is None:  # fsspec's buffered file, details not asked yet
        handle.details = {"name": handle.path, "size": size, "type": "file"}
    return handle


def store_not_found(e: BaseException) -> bool:
    """Is ``e`` a store's own not-found error (not an OSError)? adlfs lets azure's
    ResourceNotFoundError (HTTP 404) through from the reads of a blob opened with a known size,
    fsspec's HTTP filesystem aiohttp's ClientResponseError (whose status is ``.status``)."""
    if isinstance(e, OSError):
        return False
    return 404 in (getattr(e, "status_code", None), getattr(e, "status", None))


def _not_found(e: BaseException, path: str) -> FileNotFoundError | None:
    """A store's own not-found error as a FileNotFoundError naming ``path``, else None (a blob
    deleted since it was listed is a missing file, not a failed request)."""
    if not store_not_found(e):
        return None
    first = str(e).split("\n", 1)[0]
    return FileNotFoundError(errno.ENOENT, f"{type(e).__name__}: {first}", path)


_UNEXPECTED_KEYWORD = re.compile(r"unexpected keyword argument '([^']+)'")


def refused_option(e: BaseException, options: Mapping[str, Any], fs_class: Any = None) -> str | None:
    """The storage option a filesystem refused with ``e`` (``'x'``, or ``'client_kwargs' key
    'x'``), else None. s3fs and fsspec's HTTP filesystem take any keyword and hand it on to the
    library beneath (aiobotocore, botocore's Config, aiohttp) at the first request, whose
    TypeError names only the keyword; a TypeError naming no option given is not the options'. Nor
    is one naming a parameter of ``fs_class``'s constructor: the filesystem takes that option,
    and the TypeError is a bug of its own (or of the library beneath)."""
    match = _UNEXPECTED_KEYWORD.search(str(e)) if isinstance(e, TypeError) else None
    if match is None:
        return None
    name = match.group(1)
    if name in options:
        return None if _takes(fs_class, name) else repr(name)
    held = [k for k, v in options.items() if isinstance(v, Mapping) and name in v]
    return f"{held[0]!r} key {name!r}" if held else None


def _takes(fs_class: Any, name: str) -> bool:
    """Whether the constructor of ``fs_class`` (or of a class it inherits) names the parameter
    ``name``, rather than taking it into ``**kwargs``."""
    for cls in getattr(fs_class, "__mro__", ()):
        init = cls.__dict__.get("__init__")
        try:
            param = inspect.signature(init).parameters.get(name) if init is not None else None
        except (TypeError, ValueError):  # a constructor in C, or not a function
            continue
        if param is not None and param.kind in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            return True
    return False


@contextlib.contextmanager
def store_errors(
    what: str,
    path: str,
    options: Mapping[str, Any] | None = None,
    store: str = "the filesystem",
    fs_class: Any = None,
) -> Iterator[None]:
    """A failed request to the store as a StorageError naming the path (a store's own message,
    a ConnectionError or a timeout, often names none); not found passes through as it is, a
    store's own not-found error as a FileNotFoundError; a storage option of ``options`` that
    ``store`` refused an ArgumentError naming it (no retry helps); no credentials found at all
    a StorageError saying how a public bucket is read."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError, DeltaError):
        raise
    except PermissionError as e:
        # a store's reason (s3fs: an unknown access key, a bad signature, a policy) tells what to
        # fix; an OSError of a local file only repeats the path
        reason = f" ({e})" if e.filename is None and str(e) else ""
        raise StorageError(f"cannot {what} {path}: permission denied{reason}") from e
    except Exception as e:  # noqa: BLE001 - every store raises its own kinds
        missing = _not_found(e, path)
        if missing is not None:
            raise missing from e
        refused = refused_option(e, options or {}, fs_class)
        if refused is not None:
            raise ArgumentError(
                f"cannot {what} {path}: {store} does not take the storage option {refused} "
                f"({type(e).__name__}: {e})"
            ) from e
        hint = no_credentials_hint(e)
        if hint is not None:  # the store's words say nothing of an option that fixes it
            raise StorageError(f"cannot {what} {path}: {hint} ({type(e).__name__}: {e})") from e
        raise StorageError(f"cannot {what} {path}: {type(e).__name__}: {e}") from e


class _FileProxy:
    """A store's file handle for pyarrow whose I/O calls go through :meth:`_call`, which names
    the file in their errors (a store's own message often names none); everything else is the
    handle's."""

    def __init__(self, handle: Any, path: str):
        self._handle = handle
        self._path = path

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._handle, name)
        if name not in ("read", "readinto", "seek", "tell", "size"):
            return attr
        return lambda *args, **kwargs: self._call(attr, args, kwargs)

    def _call(self, attr: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        raise NotImplementedError

    def __enter__(self) -> _FileProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        with store_errors("close", self._path):
            self._handle.close()


class _StoreFile(_FileProxy):
    """Failed requests are StorageError (pyarrow passes a Python exception from a file it reads
    through unchanged): a checkpoint the store failed to read is not a corrupt one. Not found
    stays FileNotFoundError."""

    def _call(self, attr: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        with store_errors("read", self._path):
            return attr(*args, **kwargs)


class _NamedMissing(_FileProxy):
    """Data-file reads: errors stay OSErrors (the reader turns them into its own), with the
    file named; not-found ones surface at the first read.

    pyarrow's first read of a parquet file is its last 64 KB, the footer: a smaller file is then
    read whole, and later reads (the column chunks) are served from those bytes instead of
    asking the store again (a scan of small files: 2 -> 1 request per file)."""

    def __init__(self, handle: Any, path: str, size: int | None = None):
        super().__init__(handle, path)
        self._size = size  # None once the bytes are held (or the size is unknown)

    def read(self, *args: Any) -> bytes:
        # only a read from byte 0 is the whole file: a log size smaller than the file (on a store
        # that opens by the real size) can equal the length of a read elsewhere
        at_start = bool(self._size) and self._call(self._handle.tell, (), {}) == 0
        data = self._call(self._handle.read, args, {})
        if at_start and len(data) == self._size:
            whole, self._handle, self._size = self._handle, io.BytesIO(data), None
            self._handle.seek(len(data))
            with store_errors("close", self._path):
                whole.close()
        return data

    def _call(self, attr: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
        try:
            return attr(*args, **kwargs)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{self._path}: {e}") from e
        except OSError as e:  # a network error or a timeout: the message names no file
            raise OSError(f"{self._path}: {type(e).__name__}: {e}") from e
        except Exception as e:  # noqa: BLE001 - a store's own error (an HTTP client's)
            missing = _not_found(e, self._path)  # a 404 is a missing file, as for other stores
            if missing is not None:
                raise missing from e
            raise
