"""Storage: the one layer over fsspec the log and scan code read through, so any fsspec protocol
(with storage options) works the same way."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

import pyarrow.fs as pafs

from ..arguments import misspelt_option
from ..cached import cached_property
from ..errors import ArgumentError, DeltaError, MissingLogFileError, StorageError, UnsupportedFeatureError
from .arrow import _LogSizedHandler
from .handles import _StoreFile, store_errors
from .listing import FileInfo, _etag, _local_files, _local_names, _mtime_ms, _stat_ms, forget_listing
from .serial import _serialized_if_needed
from .uri import _chain_child, _check_url_options, _is_chained, _open_error, _split_uri


class Storage:
    """Access to one table root on some filesystem."""

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None):
        if isinstance(uri, os.PathLike):
            uri = os.fspath(uri)
        if not isinstance(uri, str) or not uri:
            raise ArgumentError(f"table URI must be a non-empty string or path, got {uri!r}")
        if "\x00" in uri:
            raise ArgumentError(f"table URI {uri!r} contains a NUL character")
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ArgumentError(
                f"storage_options for {uri!r} must be a dict of filesystem options, got "
                f"{type(storage_options).__name__}: {storage_options!r}"
            )
        self.storage_options = dict(storage_options or {})
        for key in self.storage_options:
            pin = misspelt_option(key) if isinstance(key, str) else None
            if pin is not None:
                # SQL OPTIONS' pins (README likens the two), or look-alikes ('versoin'): no filesystem
                # takes them, and passed on they would read the latest version silently
                meant = "" if key == pin else f" (did you mean {pin!r}?)"
                raise ArgumentError(
                    f"storage option {key!r} is not a filesystem option{meant}: pin a table's version or "
                    "time with version=/timestamp= (snapshot(), register_table()) or SQL OPTIONS ('version' ...)"
                )
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

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without the handle's open checkpoint readers and their lock (see
        :func:`~delta_datafusion.log.actions.read_parquet_actions`), which cannot be pickled: the
        copy opens its own."""
        state = dict(self.__dict__)
        state.pop("_log_parquet", None)
        state.pop("_log_parquet_lock", None)
        return state

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
            # fsspec's ValueError: no filesystem has the protocol, the URL itself is mistaken
            cls = ArgumentError if isinstance(e, ValueError) else DeltaError
            raise cls(f"cannot open filesystem for {uri!r}: {type(e).__name__}: {e}") from e
        _check_url_options(uri, self._url_options, self.storage_options, os.environ)
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
            raise _open_error(self.uri, e, self.storage_options, self._fs_class) from e
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
            stored = self._store_path(path)
            return self._object(stored, path) if self.names_keys else stored
        if self.names_keys:
            # an absolute path is one in the table's own bucket, as a URL reference '/t/x'
            # resolves against s3://bkt/t/ (RFC 3986, as delta-kernel-rs joins it); read as
            # 'bucket/key' it named a bucket 't'
            bucket = self.root.split("/", 1)[0]
            return self._object(bucket + path if path.startswith("/") else f"{self.root}/{path}", path)
        if path.startswith("/"):
            return path
        return posixpath.join(self.root, path)

    def _object(self, full: str, path: str) -> str:
        """The 'bucket/key' a log ``path`` names on a bucket store (``full``: joined to the
        root), its key's dot segments resolved as in a URL: '/t/../u/x', 'x/../../u/x' and
        's3://bkt/t/../u/x' are all 'bkt/u/x', as delta-kernel-rs (a URL join) and Spark (Hadoop
        paths are normalized URIs) read them (a bucket could also hold the key as written; the
        reference readers do not read that one). A key with an empty segment is refused (see
        :meth:`_empty_segment`)."""
        bucket, _, key = full.partition("/")
        if key.startswith("/") or "//" in key:
            raise self._empty_segment(path)
        if "." in key and any(part in (".", "..") for part in key.split("/")):
            return bucket + posixpath.normpath("/" + key)
        return full

    @property
    def names_keys(self) -> bool:
        """Whether files are objects of a bucket store (S3, GCS, Azure), named 'bucket/key': a
        key is a name, in which 'a//b' and 'a/b' are two objects (see :meth:`_empty_segment`)."""
        return not self.is_local and not self.chained and self._bucket_store

    @cached_property
    def _bucket_store(self) -> bool:
        """Whether the store names files 'bucket/key' (s3fs, gcsfs, adlfs: no root marker, and a
        ``split_path`` into bucket and key); an archive's or a plain path store's are not."""
        return getattr(self.fs, "root_marker", "/") == "" and callable(getattr(self.fs, "split_path", None))

    @property
    def url_quoted(self) -> bool:
        """Whether the store names files by URL (HTTP), whose paths must be percent-encoded: a
        log path decoded once names the file ``x=A%2FA``, requested as ``x=A%252FA``."""
        return not self.is_local and "://" in self.root  # a local folder may be named a://b

    def _url_of(self, path: str) -> str:
        """A log path (decoded once) as a URL of the table's URL-named store."""
        parts = urlsplit(self.root)
        origin = f"{parts.scheme}://{parts.netloc}"
        if path[:5].lower() == "file:" and path[5:].startswith("/"):  # file:/x, a file URI as file:///x
            raise self._elsewhere(path, "file")
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
        return UnsupportedFeatureError(
            f"{self.root_uri}: the log names the file {path!r} on another filesystem ({scheme}) than "
            f"the table's ({self.protocol}); files on other stores are not read (a reader of the "
            "table's store would read whatever that path holds there)"
        )

    def _empty_segment(self, path: str) -> DeltaError:
        """A log path whose key has an empty segment ('//') names no one object: a bucket holds
        'a//b' and 'a/b' as two, delta-rs reads the path with its empty segments dropped,
        delta-kernel-rs refuses it (object_store keys have none), and a leading '//' is, as a URL
        reference, another bucket (RFC 3986). Refused rather than read as one of them."""
        return UnsupportedFeatureError(
            f"{self.root_uri}: the log names the file {path!r}, a key with an empty segment ('//'): "
            f"on the {self.protocol} store 'a//b' and 'a/b' are different objects and Delta readers "
            "disagree on which one it names (a leading '//' even names another bucket), so it is not read"
        )

    # -- reads --------------------------------------------------------------------------
    def request_errors(self, what: str, path: str) -> Any:
        """:func:`store_errors` for a request of this store: a storage option the filesystem
        refuses only when it makes its first request (s3fs, HTTP) is named as an ArgumentError."""
        if self.is_local:
            return store_errors(what, path)
        cls = self._fs_class or type(self.fs)
        name = cls.__name__
        return store_errors(what, path, self.storage_options, f"the {self.protocol} filesystem ({name})", cls)

    def list_names(self, path: str) -> tuple[list[str], dict[str, FileInfo] | None]:
        """Names of the files directly under ``path`` (in no particular order: a local folder's
        own), and their FileInfo when the listing gave more than names (object stores); local
        listings make FileInfo objects on demand."""
        if self.is_local:
            return _local_names(path), None
        files = self.list_dir(path)
        return [f.name for f in files], {f.name: f for f in files}

    def list_dir(self, path: str) -> list[FileInfo]:
        """Files directly under ``path`` on an object store, sorted by name, with the details the
        listing gives; empty when the folder does not exist (local folders: :meth:`list_names`)."""
        forget_listing(self.fs, path)
        try:
            with self.request_errors("list", path):
                entries = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []
        out = []
        for e in entries:
            if e.get("type") == "directory":
                continue
            out.append(self._file_info(e["name"], e))
        out.sort(key=lambda f: f.name)
        return out

    def _file_info(self, path: str, e: dict[str, Any]) -> FileInfo:
        """A FileInfo from a listing or info entry of the store. Local files under a chain's caching
        layers take their time from the file's nanoseconds, as plain paths do (the entry's float
        seconds read a time just below a millisecond as the next one)."""
        local = self._local_files
        if local is not None:
            try:
                mtime = _stat_ms(local(path))
            except OSError:  # gone since the listing: the entry's time, as before
                mtime = _mtime_ms(e)
        else:
            mtime = _mtime_ms(e)
        # None where the entry has no size (HTTP listings): 0 would read every file as empty
        size = e.get("size")
        size = int(size) if size is not None else None
        return FileInfo(path, posixpath.basename(path), size, mtime, self.fs, _etag(e))

    @cached_property
    def _local_files(self) -> Any:
        """See :func:`~.listing._local_files` (None off chains: no fsspec import for local tables)."""
        return _local_files(self.fs) if self.chained else None

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
        with self.request_errors("look up", path):
            return bool(self.fs.exists(path))

    def isdir(self, path: str) -> bool:
        if self.is_local:
            return os.path.isdir(path)
        with self.request_errors("look up", path):
            return bool(self.fs.isdir(path))

    def open_remote(self, path: str) -> Any:
        """A file of a remote store opened for pyarrow, its failed requests StorageError; opened
        with the size its listing gave when :meth:`note_sizes` was told it."""
        with self.request_errors("open", path):
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
        with self.request_errors("read", path):
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
        with self.request_errors("read", path):
            if self.is_local:
                return _local_range(path, offset, length)
            data = self.fs.cat_file(path, start=offset, end=offset + length)
            if len(data) > length:  # an HTTP server that ignores Range sends the whole file
                data = data[offset : offset + length]
            return data

    def info(self, path: str) -> FileInfo:
        with self.request_errors("look up", path):
            if self.is_local:
                st = os.stat(path)
                return FileInfo(path, posixpath.basename(path), st.st_size, st.st_mtime_ns // 1_000_000)
            e = self.fs.info(path)
        return self._file_info(path, e)

    # -- pyarrow ------------------------------------------------------------------------
    @cached_property
    def arrow_fs(self) -> pafs.FileSystem:
        """A pyarrow filesystem for data reads: native where one exists, else fsspec-wrapped."""
        if self.is_local:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(_LogSizedHandler(self.fs, self._known_sizes))

    def noted_size(self, path: str) -> int | None:
        """The size :meth:`note_sizes` was told for ``path`` (remote stores; None: not told)."""
        return None if self.is_local else self._known_sizes.get(self.fs._strip_protocol(path))

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


def _local_range(path: str, offset: int, length: int) -> bytes:
    """``length`` bytes of a local file at ``offset`` (fewer at its end), read on a bare
    descriptor: opening a buffered file object costs more than reading a parquet footer (the
    cdf benchmark's key-range planning reads 204 change-data footers: 31 -> 13 us a file)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        out = _pread(fd, length, offset)
        while 0 < len(out) < length:  # a read may stop short of the end (a signal)
            more = _pread(fd, length - len(out), offset + len(out))
            if not more:
                break
            out += more
        return out
    finally:
        os.close(fd)


def _pread(fd: int, length: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, length, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # Windows
    return os.read(fd, length)
