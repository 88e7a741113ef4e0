"""Filesystems that threads cannot share (one FTP control connection, one SFTP channel), made to
take turns: the log and data files are read on threads."""

from __future__ import annotations

import threading
import weakref
from typing import Any

#: fsspec protocols whose filesystem instance is one connection that threads cannot share: ftplib's
#: FTP sends one command at a time on its control connection, and two threads' transfers mixed
#: the replies ("error_reply: 150 File status okay", hung passive connections; 14 failures in 14
#: reads of a small table). Commits, checkpoint leaves and data files are read on threads, so
#: every call on such a filesystem and its files takes turns (one connection is serial anyway).
#: fsspec's SFTP filesystem is one paramiko SFTPClient: opens from two threads at once wait
#: forever for their replies (paramiko 5.1 against OpenSSH 9.2's internal-sftp: 2 hangs in 2
#: runs of 4 threads opening 8 files 50 times, 0 with one lock; a table read hung 3 times in 3).
SERIAL_PROTOCOLS = frozenset({"ftp", "sftp", "ssh"})


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


#: One lock per filesystem instance, not per table: fsspec hands every table of one server with
#: the same options the same cached instance (one connection), so two tables read at once (a join
#: of both) must take turns with each other too.
_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _connection_lock(fs: Any) -> threading.RLock:
    with _LOCKS_GUARD:
        lock = _LOCKS.get(fs)
        if lock is None:
            lock = _LOCKS[fs] = threading.RLock()
        return lock


class _SerialFileSystem:
    """An fsspec filesystem whose calls, and the I/O calls of the files it opens, are made one at
    a time (see :data:`SERIAL_PROTOCOLS`); attributes that are not methods pass through."""

    _FILE_CALLS = frozenset({"read", "readinto", "readline", "readlines", "seek", "tell", "close", "size"})

    def __init__(self, fs: Any):
        self.wrapped = fs
        self._lock = _connection_lock(fs)

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
