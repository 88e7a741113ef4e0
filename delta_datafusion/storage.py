"""A thin I/O layer over fsspec: listing, whole-file and range reads, and pyarrow filesystems.

The log and scan code never touches fsspec or the local filesystem directly; everything goes
through :class:`Storage`, so any fsspec protocol (with storage options) works the same way.
"""

from __future__ import annotations

import contextlib
import datetime
import io
import os
import posixpath
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from .cached import cached_property
from .errors import (
    ArgumentError,
    DeltaError,
    MissingLogFileError,
    StorageError,
    TableNotFoundError,
)


class FileInfo:
    """One listed object: full path (without protocol), name, size and modification time (ms).

    Local listings do not stat every entry (a log can hold thousands of files); size and
    modification time are read on first use.
    """

    __slots__ = ("path", "name", "_size", "_mtime_ms", "_fs")

    def __init__(
        self, path: str, name: str, size: int | None = None, mtime_ms: int | None = None, fs: Any = None
    ):
        self.path = path
        self.name = name
        self._size = size
        self._mtime_ms = mtime_ms
        self._fs = fs  # the fsspec filesystem to ask for what the listing did not say (None: local)

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
    def size(self) -> int:
        if self._size is None:
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

    @property
    def listed_size(self) -> int | None:
        """The size the listing gave, without asking the filesystem (None for local listings)."""
        return self._size

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


def _split_uri(uri: str) -> tuple[str, str]:
    """Return (protocol, path-without-protocol) for a path or URI.

    Non-file URLs keep everything after ``protocol://`` (fsspec treats '#' and '?' as path
    characters); file URIs follow RFC 8089: percent-decoded, no host other than localhost."""
    if uri.split(":", 1)[0].lower() in ("file", "local") and ("#" in uri or "?" in uri):
        # RFC 8089 would drop a fragment or query silently, and read another folder than the
        # name says ("file:///x/t#v2" is /x/t); a '#' or '?' in a folder name is written %23, %3F
        raise DeltaError(
            f"{uri!r}: a file URI cannot have a '#' fragment or '?' query; write '#' as %23 and '?' "
            "as %3F, or give a plain path"
        )
    if uri.split(":", 1)[0].lower() in ("file", "local") and any(c in uri for c in "\t\r\n"):
        # URL parsing deletes tabs and line breaks: "file:///x/a\nb" would read /x/ab
        raise DeltaError(f"{uri!r}: a file URI cannot hold a tab or line break; give a plain path")
    if "://" not in uri:
        if uri[:5].lower() == "file:":
            path = unquote(uri[5:]) or "/"
            if not path.startswith("/"):
                raise DeltaError(f"{uri!r}: a file URI needs an absolute path (file:///abs/path)")
            return "file", path
        return "file", os.path.abspath(os.path.expanduser(uri))
    scheme, rest = uri.split("://", 1)
    protocol = scheme.lower()
    if protocol in ("file", "local"):
        parts = urlsplit(uri)
        if parts.netloc not in ("", "localhost"):
            raise DeltaError(
                f"{uri!r}: file URIs with a host ({parts.netloc!r}) are not supported; "
                f"write file:///absolute/path or a plain path"
            )
        return "file", unquote(parts.path) or "/"
    return protocol, rest.rstrip("/")


_PROTOCOL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")


def _is_chained(uri: str) -> bool:
    """An fsspec chained URL (``simplecache::s3://b/t``, ``zip://t::file:///a.zip``): its first
    link starts with a protocol. A local folder may have '::' in its name (``/x/a::b``)."""
    if "::" not in uri:
        return False
    first = uri.split("::", 1)[0]
    return bool(_PROTOCOL.match(first.split("://", 1)[0])) and (
        "://" in first or first.lower() in _fsspec_protocols()
    )


def _fsspec_protocols() -> frozenset[str]:
    import fsspec

    return frozenset(p.lower() for p in fsspec.available_protocols())


def _chain_child(uri: str, name: str) -> str:
    """A chained fsspec URL (``simplecache::s3://b/t``, ``zip://t::file:///a.zip``) for ``name``
    below its root: the path lives in the first link that has one."""
    links = uri.split("::")
    for i, link in enumerate(links):
        if "://" in link:
            protocol, path = link.split("://", 1)
            links[i] = f"{protocol}://{path.rstrip('/') + '/' if path.rstrip('/') else ''}{name}"
            return "::".join(links)
    raise DeltaError(f"{uri!r}: no link of this chained URL names a path")


#: OSErrors about a path, not the network: opening a filesystem with them is a DeltaError.
_PATH_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


def _open_error(uri: str, e: Exception, options: dict[str, Any]) -> DeltaError:
    """A filesystem that could not be opened: a StorageError when the store could not be reached
    (FTP connects on opening; a retry may succeed): refused, timed out, but also a host name that
    does not resolve (socket.gaierror) or no route to it, OSErrors that are not ConnectionErrors;
    a TableNotFoundError when what it opens is not there (a zip archive); else a DeltaError
    (options, auth, protocol, a missing key or credentials file)."""
    network = isinstance(e, OSError) and not isinstance(e, _PATH_ERRORS)
    missing = isinstance(e, FileNotFoundError) and _names_location(e, uri, options)
    cls = StorageError if network else TableNotFoundError if missing else DeltaError
    what = " (so there is no table there)" if missing else ""
    return cls(f"cannot open filesystem for {uri!r}{what}: {type(e).__name__}: {e}")


def _names_location(e: FileNotFoundError, uri: str, options: dict[str, Any]) -> bool:
    """Whether the missing file is the location opened (an archive named in the URL or by an
    ``fo`` option), not a file another option names (a key file: the store's error, not "no
    table there")."""
    if e.filename is None:
        return False
    archives = [options.get("fo")] + [v.get("fo") for v in options.values() if isinstance(v, dict)]
    return str(e.filename) in uri or str(e.filename) in {str(a) for a in archives if a is not None}


class Storage:
    """Access to one table root on some filesystem."""

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None):
        if isinstance(uri, os.PathLike):
            uri = os.fspath(uri)
        if not isinstance(uri, str) or not uri:
            raise ArgumentError(f"table URI must be a non-empty string or path, got {uri!r}")
        if "\x00" in uri:
            raise DeltaError(f"table URI {uri!r} contains a NUL character")
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ArgumentError(
                f"storage_options for {uri!r} must be a dict of filesystem options, got "
                f"{type(storage_options).__name__}: {storage_options!r}"
            )
        self.storage_options = dict(storage_options or {})
        self.uri = uri
        self._url_options: dict[str, Any] = {}  # what the URL itself says (host, port, account)
        self._protocols: frozenset[str] = frozenset()  # the names of the table's store's protocol
        self._fs_class: Any = None
        self.chained = _is_chained(uri)
        if self.chained:  # fsspec URL chaining: the filesystems and the path come from fsspec
            self.protocol = "chain"
            path = self._open_chain(uri)
        else:
            self.protocol, path = _split_uri(uri)
            if not self.is_local:
                path = self._url_path(uri)
        if not self.is_local:
            self.fs  # noqa: B018 - fail early on an unknown protocol or bad options
        self.root = path.rstrip("/") if path not in ("/", "") else path
        self._known_sizes: dict[str, int] = {}  # sizes from the log and listings (note_sizes)

    def _open_chain(self, uri: str) -> str:
        import fsspec.core

        try:
            fs, path = fsspec.core.url_to_fs(uri, **self.storage_options)
        except Exception as e:  # noqa: BLE001 - any filesystem's own error (auth, options, protocol)
            raise _open_error(uri, e, self.storage_options) from e
        self.__dict__["fs"] = _serialized_if_needed(fs)
        return path

    def _url_path(self, uri: str) -> str:
        """The path within the store as its filesystem names it, and the options the URL itself
        carries (an FTP host and port, an Azure account): an HTTP filesystem names files by their
        whole URL, other stores by what follows the protocol."""
        import fsspec

        try:
            cls = fsspec.get_filesystem_class(self.protocol)
            self._url_options = dict(cls._get_kwargs_from_urls(uri) or {})
        except Exception as e:  # noqa: BLE001 - an unknown protocol, a library not installed
            raise DeltaError(f"cannot open filesystem for {uri!r}: {type(e).__name__}: {e}") from e
        self._fs_class = cls
        protocols = cls.protocol if isinstance(cls.protocol, (tuple, list)) else (cls.protocol,)
        self._protocols = frozenset(p.lower() for p in protocols) | {self.protocol}
        return self._store_path(uri)

    def _store_path(self, uri: str) -> str:
        """A URI of the table's store -> the path its filesystem opens (the root and absolute
        log paths alike, so that both name a file the same way)."""
        scheme = uri.split("://", 1)[0].lower()
        try:
            path = self._fs_class._strip_protocol(uri)
        except Exception as e:  # noqa: BLE001 - a filesystem's own parsing error
            raise DeltaError(
                f"{uri!r}: not a path of the {self.protocol} store ({type(e).__name__}: {e})"
            ) from e
        path = (path if isinstance(path, str) else str(path)).rstrip("/") or "/"
        if path.lower().startswith(scheme + "://") and scheme not in ("http", "https"):
            # a filesystem subclass registered under another name may strip only its parent's
            # protocol; outside HTTP, a store's paths are what follows the protocol
            path = path.split("://", 1)[1].rstrip("/") or "/"
        return path

    @cached_property
    def fs(self) -> Any:  # fsspec.AbstractFileSystem (fsspec is imported on demand)
        """The fsspec filesystem (imported on demand: local tables do not need fsspec)."""
        import fsspec

        try:
            fs = fsspec.filesystem(self.protocol, **{**self._url_options, **self.storage_options})
        except Exception as e:  # noqa: BLE001 - any filesystem's own error (auth, options, protocol)
            raise _open_error(self.uri, e, self.storage_options) from e
        return _serialized_if_needed(fs)

    # -- naming -------------------------------------------------------------------------
    @property
    def is_local(self) -> bool:
        return self.protocol in ("file", "local")

    @property
    def root_uri(self) -> str:
        """The table root as a URI (``file:///...`` for local tables)."""
        if self.is_local:
            return "file://" + self.root
        if self.chained or self._url_options:
            # a chain, or a URL whose host/port/account the path does not keep: the URL as given
            return self.uri.rstrip("/")
        return self.root if "://" in self.root else f"{self.protocol}://{self.root}"

    @property
    def cache_key(self) -> tuple[str, tuple]:
        """The table location and storage options: what identifies the table in a process cache
        (the same folder read with other credentials is another entry)."""
        options = tuple(sorted((str(k), repr(v)) for k, v in self.storage_options.items()))
        return self.root_uri, options

    def join(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def child_location(self, *parts: str) -> str:
        """A location below the root that opens on the same filesystem: a plain path for local
        folders, ``protocol://path`` otherwise (``join`` drops the protocol)."""
        if self.chained:
            return _chain_child(self.uri, posixpath.join(*parts))
        if self._url_options:  # keep the URL's host, port or account
            return self.root_uri + "/" + posixpath.join(*parts)
        path = self.join(*parts)
        return path if self.is_local or "://" in path else f"{self.protocol}://{path}"

    def resolve(self, path: str) -> str:
        """Resolve a log path, already URL-decoded once, against the table root.

        Relative paths are joined to the root; absolute paths and URIs are kept, and never decoded
        or URL-parsed again: ``file:///t/a%20b`` names the file ``a%20b``, and '#' and '?' are file
        name characters, not a fragment or a query.
        """
        if self.url_quoted:
            return self._url_of(path)
        if path[:5].lower() == "file:":
            rest = path[5:]
            if rest.startswith("//"):  # file://[host]/path: empty or localhost authority
                slash = rest.find("/", 2)
                rest = rest[slash:] if slash >= 0 else "/"
            if not rest.startswith("/"):
                # not a URI: a relative path whose first folder has a colon ('file:k=a/...', a
                # partition column named 'file:k'), as the reference readers take it
                return posixpath.join(self.root, path)
            if not self.is_local and not self.chained:
                raise self._elsewhere(path, "file")
            return rest
        if "://" in path:
            if self.chained:
                return path.split("://", 1)[1].rstrip("/")
            scheme = path.split("://", 1)[0].lower()
            if self.is_local:
                if scheme != "local":
                    raise self._elsewhere(path, scheme)
                return self.resolve("file" + path[5:])
            if scheme not in self._protocols:
                raise self._elsewhere(path, scheme)
            try:
                where = dict(self._fs_class._get_kwargs_from_urls(path) or {})
            except Exception:  # noqa: BLE001 - a filesystem's own parsing error
                where = None
            if where != self._url_options:  # another host, port or account of the same kind
                raise self._elsewhere(
                    path, f"{scheme}, {where or 'no host'} instead of {self._url_options or 'no host'}"
                )
            return self._store_path(path)
        if path.startswith("/"):
            return path
        return posixpath.join(self.root, path)

    @property
    def url_quoted(self) -> bool:
        """Whether the store names files by URL (HTTP), whose paths must be percent-encoded: a
        log path decoded once names the file ``x=A%2FA``, requested as ``x=A%252FA``."""
        return not self.is_local and "://" in self.root  # a local folder may be named a://b

    def _url_of(self, path: str) -> str:
        """A log path (decoded once) as a URL of the table's URL-named store."""
        parts = urlsplit(self.root)
        origin = f"{parts.scheme}://{parts.netloc}"
        if "://" in path:
            scheme = path.split("://", 1)[0].lower()
            given = urlsplit(path)
            if scheme not in self._protocols and not self.chained or given.netloc != parts.netloc:
                raise self._elsewhere(path, f"{scheme}://{given.netloc}")
            return f"{origin}{quote(given.path)}"
        if path.startswith("/"):
            return origin + quote(path)
        return self.root + "/" + quote(path)

    def _elsewhere(self, path: str, scheme: str) -> DeltaError:
        from .errors import UnsupportedFeatureError

        return UnsupportedFeatureError(
            f"{self.root_uri}: the log names the file {path!r} on another filesystem ({scheme}) than "
            f"the table's ({self.protocol}); files on other stores are not read (a reader of the "
            "table's store would read whatever that path holds there)"
        )

    # -- reads --------------------------------------------------------------------------
    def list_names(self, path: str) -> tuple[list[str], dict[str, FileInfo] | None]:
        """Names of the files directly under ``path``, sorted, and their FileInfo when the listing
        gave more than names (object stores); local listings make FileInfo objects on demand."""
        if self.is_local:
            return _local_names(path), None
        files = self.list_dir(path)
        return [f.name for f in files], {f.name: f for f in files}

    def list_dir(self, path: str) -> list[FileInfo]:
        """Files directly under ``path`` sorted by name; empty when the folder does not exist."""
        if self.is_local:
            return _list_local(path)
        forget_listing(self.fs, path)
        try:
            with store_errors("list", path):
                entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        out = []
        for e in entries:
            if e.get("type") == "directory":
                continue
            full = e["name"]
            out.append(
                FileInfo(full, posixpath.basename(full), int(e.get("size") or 0), _mtime_ms(e), self.fs)
            )
        out.sort(key=lambda f: f.name)
        return out

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists; a StorageError when the store cannot tell (no permission to
        look: "missing" would send the user looking for a VACUUM that never happened)."""
        if self.is_local:
            try:
                os.stat(path)
            except PermissionError as e:
                raise StorageError(f"cannot look up {path}: permission denied") from e
            except (OSError, ValueError):  # not there, a symlink loop, a name too long
                return False
            return True
        with store_errors("look up", path):
            return bool(self.fs.exists(path))

    def isdir(self, path: str) -> bool:
        if self.is_local:
            return os.path.isdir(path)
        with store_errors("look up", path):
            return bool(self.fs.isdir(path))

    def open_remote(self, path: str) -> Any:
        """A file of a remote store opened for pyarrow, its failed requests StorageError; opened
        with the size its listing gave when :meth:`note_sizes` was told it."""
        with store_errors("open", path):
            return _StoreFile(self._open(path, self._known_sizes.get(self.fs._strip_protocol(path))), path)

    def _open(self, path: str, size: int | None = None):
        """Opened for reading. A remote file whose size is known is opened with it: object-store
        filesystems (s3fs, gcsfs, HTTP) otherwise ask the store for the size first, a round trip
        before the read (one per commit of a snapshot)."""
        if self.is_local:
            return open(path, "rb")  # noqa: SIM115
        if size:
            try:
                return self.fs.open(path, "rb", size=size)
            except TypeError:  # a filesystem whose open takes no size
                pass
        return self.fs.open(path, "rb")

    def read_bytes(self, path: str, size: int | None = None) -> bytes:
        """The whole file (``size``: what a listing said it holds). Not found stays
        FileNotFoundError (callers say what was missing); any other failure of the store is a
        StorageError naming the file."""
        with store_errors("read", path):
            with self._open(path, size) as f:
                return f.read()

    def read_listed(self, path: str, size: int | None = None) -> bytes:
        """Read a log file a listing named: gone by now (log cleanup, a concurrent writer) is a
        MissingLogFileError naming it; fewer bytes than the listing's ``size`` is a StorageError
        (a store that ends a read early must not drop a commit's last actions)."""
        try:
            data = self.read_bytes(path, size)
        except FileNotFoundError as e:
            raise MissingLogFileError(f"{path} disappeared after the folder was listed") from e
        if size is not None and len(data) < size:
            raise StorageError(f"cannot read {path}: got {len(data)} of its {size} bytes")
        return data

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (fewer at the end of the file). On a remote store one
        ranged request: opening the file would ask the store for its size first, and read ahead
        a whole block (s3fs: 50 MB) for a deletion vector of a few bytes."""
        with store_errors("read", path):
            if self.is_local:
                with open(path, "rb") as f:
                    f.seek(offset)
                    return f.read(length)
            data = self.fs.cat_file(path, start=offset, end=offset + length)
            if len(data) > length:  # an HTTP server that ignores Range sends the whole file
                data = data[offset : offset + length]
            return data

    def info(self, path: str) -> FileInfo:
        with store_errors("look up", path):
            if self.is_local:
                st = os.stat(path)
                return FileInfo(path, posixpath.basename(path), st.st_size, st.st_mtime_ns // 1_000_000)
            e = self.fs.info(path)
        return FileInfo(path, posixpath.basename(path), int(e.get("size") or 0), _mtime_ms(e), self.fs)

    # -- pyarrow ------------------------------------------------------------------------
    @cached_property
    def arrow_fs(self) -> pafs.FileSystem:
        """A pyarrow filesystem for data reads: native where one exists, else fsspec-wrapped."""
        if self.is_local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(_LogSizedHandler(self.fs, self._known_sizes))

    def note_sizes(self, files: Iterable[tuple[str, int | None]]) -> None:
        """Remember the sizes the log gives for data files (``(location, size)``), so that
        :attr:`arrow_fs` opens them without asking the store (see :class:`_LogSizedHandler`)."""
        if self.is_local:
            return
        strip = self.fs._strip_protocol
        sizes = self._known_sizes
        if len(sizes) > 1_000_000:  # bounded like the other per-file caches
            sizes.clear()
        for location, size in files:
            if size:
                sizes[strip(location)] = int(size)


class _LogSizedHandler(pafs.FSSpecHandler):
    """pyarrow's fsspec handler, opening files whose size the log gave without asking the store.

    The stock handler asks whether the file exists, then fsspec asks its size: two metadata
    round trips per data file on an object store, before any byte is read (a 200-file scan at
    20 ms per request: 606 requests, 6.9 s; 202 requests, 2.4 s without them). A missing file
    still fails, at its first read, with its path in the error (a store's own not-found message
    may not say which key), so the reader names it. Ranges are read as pyarrow asks for
    them, no fsspec read-ahead past each range (measured at 20 ms per request, 200 small files:
    fetching each file whole on its first read made 202 requests instead of 402 but took 4.3 s
    instead of 2.3 s, as pyarrow overlaps its range reads and not its opens). Files of unknown
    size open the stock way."""

    def __init__(self, fs: Any, sizes: dict[str, int]):
        super().__init__(fs)
        self._sizes = sizes

    def open_input_file(self, path: str) -> pa.PythonFile:
        size = self._sizes.get(self.fs._strip_protocol(path))
        if size is None:
            return super().open_input_file(path)
        try:
            handle = self.fs.open(path, mode="rb", size=size, cache_type="none")
        except TypeError:  # a filesystem whose open takes neither keyword
            return super().open_input_file(path)
        except FileNotFoundError:
            raise
        except OSError as e:  # a network error or a timeout: the message names no file
            raise OSError(f"{path}: {type(e).__name__}: {e}") from e
        return pa.PythonFile(_NamedMissing(handle, path, size), mode="r")


#: fsspec protocols whose filesystem instance is one connection that threads cannot share: ftplib's
#: FTP sends one command at a time on its control connection, and two threads' transfers mixed
#: the replies ("error_reply: 150 File status okay", hung passive connections; 14 failures in 14
#: reads of a small table). Commits, checkpoint leaves and data files are read on threads, so
#: every call on such a filesystem and its files takes turns (one connection is serial anyway).
SERIAL_PROTOCOLS = frozenset({"ftp"})


def _serialized_if_needed(fs: Any) -> Any:
    """``fs``, or ``fs`` behind one lock when it, or a filesystem it wraps (a chained URL's
    caching layer), is of a :data:`SERIAL_PROTOCOLS` protocol."""
    inner, seen = fs, 0
    while inner is not None and seen < 8:
        protocol = getattr(inner, "protocol", ())
        protocols = protocol if isinstance(protocol, (tuple, list)) else (protocol,)
        if SERIAL_PROTOCOLS & {str(p).lower() for p in protocols}:
            return _SerialFileSystem(fs)
        inner, seen = getattr(inner, "fs", None), seen + 1
    return fs


class _SerialFileSystem:
    """An fsspec filesystem whose calls, and the I/O calls of the files it opens, are made one at
    a time (see :data:`SERIAL_PROTOCOLS`); attributes that are not methods pass through."""

    _FILE_CALLS = frozenset({"read", "readinto", "readline", "readlines", "seek", "tell", "close", "size"})

    def __init__(self, fs: Any):
        self.wrapped = fs
        self._lock = threading.RLock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.wrapped, name)
        if not callable(attr):
            return attr
        lock = self._lock

        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                out = attr(*args, **kwargs)
            return _SerialFile(out, lock) if name == "open" else out

        return call

    def __reduce__(self) -> tuple:
        return _SerialFileSystem, (self.wrapped,)

    def __repr__(self) -> str:
        return f"serialized {self.wrapped!r}"


class _SerialFile:
    """A file of a :class:`_SerialFileSystem`: its I/O takes the filesystem's lock."""

    def __init__(self, handle: Any, lock: threading.RLock):
        self._handle = handle
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._handle, name)
        if name not in _SerialFileSystem._FILE_CALLS:
            return attr
        lock = self._lock

        def call(*args: Any, **kwargs: Any) -> Any:
            with lock:
                return attr(*args, **kwargs)

        return call

    def __enter__(self) -> _SerialFile:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@contextlib.contextmanager
def store_errors(what: str, path: str) -> Iterator[None]:
    """A failed request to the store as a StorageError naming the path (a store's own message,
    a ConnectionError or a timeout, often names none); not found passes through as it is."""
    try:
        yield
    except (FileNotFoundError, NotADirectoryError, DeltaError):
        raise
    except PermissionError as e:
        raise StorageError(f"cannot {what} {path}: permission denied") from e
    except Exception as e:  # noqa: BLE001 - every store raises its own kinds
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


def _local_names(path: str) -> list[str]:
    """Sorted names of the files in a local folder (os.scandir, no stat per entry)."""
    try:
        with os.scandir(path) as it:
            names = [e.name for e in it if not e.is_dir()]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except PermissionError as e:
        raise StorageError(f"cannot list {path}: permission denied") from e
    except OSError as e:  # a symlink loop, a name too long, an I/O error: not a crash
        raise StorageError(f"cannot list {path}: {e.strerror or e}") from e
    names.sort()  # names, not objects by key: 3,000 log files 2.3 -> 1.0 ms
    return names


def _list_local(path: str) -> list[FileInfo]:
    """Names only; sizes and mtimes are read lazily."""
    prefix = path.rstrip("/") + "/"
    return [FileInfo(prefix + n, n) for n in _local_names(path)]


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
        raise DeltaError(
            f"{path}: {kind} gives no modification time ({why}); commit timestamps (time travel "
            "by timestamp, history(), _commit_timestamp) need one, or in-commit timestamps"
        ) from e
    if getattr(modified, "tzinfo", None) is None:
        modified = modified.replace(tzinfo=datetime.timezone.utc)
    return int(modified.timestamp() * 1000)


_MLSD_TIME = re.compile(r"^[0-9]{14}(\.[0-9]+)?$")


def _mtime_ms(entry: dict[str, Any]) -> int | None:
    """The modification time (ms) an fsspec listing entry carries, None when it has none."""
    modify = entry.get("modify")  # FTP's MLSD fact (RFC 3659): YYYYMMDDHHMMSS[.fff] in UTC
    if isinstance(modify, str) and _MLSD_TIME.match(modify):
        whole, _, fraction = modify.partition(".")
        t = datetime.datetime.strptime(whole, "%Y%m%d%H%M%S").replace(tzinfo=datetime.timezone.utc)
        return int(t.timestamp()) * 1000 + int((fraction + "000")[:3])
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
            if v.tzinfo is None:
                v = v.replace(tzinfo=datetime.timezone.utc)
            return int(v.timestamp() * 1000)
        try:
            return int(float(v) * 1000)
        except (TypeError, ValueError):
            continue
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
