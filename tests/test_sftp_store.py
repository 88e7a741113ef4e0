"""sftp:// tables against a real SFTP server on loopback (paramiko's server side, in process).

fsspec's SFTP filesystem is one paramiko SFTPClient (one SSH channel), whose requests from two
threads at once hang waiting for a reply; the package reads commits, checkpoint leaves and data
files on threads, so an sftp:// table hung on its first listing of more than one commit.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import delta_datafusion as dd

paramiko = pytest.importorskip("paramiko")

_USER, _PASSWORD = "ann", "secret"


class _Login(paramiko.ServerInterface):
    """One user with a password, sessions only (the sftp subsystem runs in one)."""

    def get_allowed_auths(self, username: str) -> str:
        return "password"

    def check_auth_password(self, username: str, password: str) -> int:
        ok = (username, password) == (_USER, _PASSWORD)
        return paramiko.AUTH_SUCCESSFUL if ok else paramiko.AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return paramiko.OPEN_SUCCEEDED
        return paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED


class _Handle(paramiko.SFTPHandle):
    """An open file; its attributes (fstat) are the local file's."""

    def stat(self):
        return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))


class _ReadOnlyFiles(paramiko.SFTPServerInterface):
    """The local filesystem, read-only, under the client's absolute paths: what a read needs."""

    def _attrs(self, path: str, name: str | None = None):
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(path), name)
        except OSError as e:
            return paramiko.SFTPServer.convert_errno(e.errno)

    def stat(self, path: str):
        return self._attrs(path)

    lstat = stat

    def list_folder(self, path: str):
        try:
            names = sorted(os.listdir(path))
        except OSError as e:
            return paramiko.SFTPServer.convert_errno(e.errno)
        return [self._attrs(os.path.join(path, n), n) for n in names]

    def open(self, path: str, flags: int, attr):
        if flags & (os.O_WRONLY | os.O_RDWR):
            return paramiko.sftp.SFTP_PERMISSION_DENIED
        try:
            handle = _Handle(flags)
            handle.readfile = open(path, "rb")  # noqa: SIM115 - closed by the handle
        except OSError as e:
            return paramiko.SFTPServer.convert_errno(e.errno)
        handle.filename = path
        return handle


@pytest.fixture(scope="module")
def sftp_server() -> Iterator[dict[str, object]]:
    """The storage options of a real SFTP server on 127.0.0.1 serving this machine's files
    read-only, stopped afterwards."""
    key = paramiko.RSAKey.generate(2048)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)  # accept() wakes to see the stop (closing does not wake it)
    transports: list[paramiko.Transport] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:  # closed: the fixture is done
                return
            conn.settimeout(None)
            transport = paramiko.Transport(conn)
            transport.add_server_key(key)
            transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _ReadOnlyFiles)
            transport.start_server(server=_Login())
            transports.append(transport)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield {"port": listener.getsockname()[1], "username": _USER, "password": _PASSWORD}
    finally:
        stop.set()
        thread.join()
        listener.close()
        for transport in transports:
            transport.close()


def _finished(work, seconds: float = 120) -> tuple[bool, object]:
    """``work()`` run on a thread: (whether it returned within ``seconds``, its result). A hang
    is a failed test, not a stuck run."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["value"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    return not thread.is_alive(), out.get("value")


def test_sftp_tables_read_through_one_request_at_a_time(tmp_path: Path, sftp_server) -> None:
    import deltalake
    from conftest import in_zone

    t = tmp_path / "t"
    for i in range(8):
        rows = pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": [i % 3] * 10})
        deltalake.write_deltalake(str(t), rows, mode="append", partition_by=["p"])
        if i == 4:
            deltalake.DeltaTable(str(t)).create_checkpoint()
    base = 1_700_000_001  # whole seconds: an SFTP listing's times have no fraction (SSH v3 attrs)
    for i, commit in enumerate(sorted((t / "_delta_log").glob("*.json"))):
        os.utime(commit, (base + 10 * i, base + 10 * i))
    local = dd.DeltaTable(str(t))
    remote = f"sftp://127.0.0.1{t}"
    done, rows = _finished(lambda: dd.DeltaTable(remote, sftp_server).snapshot().scan().to_table())
    assert done, "reading the table over SFTP hung"
    assert not isinstance(rows, BaseException), rows
    assert rows.sort_by("id") == local.snapshot().scan().to_table().sort_by("id")
    with in_zone("America/New_York"):  # listing times are aware UTC datetimes: no zone enters
        done, history = _finished(lambda: dd.DeltaTable(remote, sftp_server).history())
        assert done, "reading the history over SFTP hung"
        assert history.column("timestamp").to_pylist() == [1000 * (base + 10 * i) for i in range(8)]


def test_two_sftp_tables_on_one_server_read_at_once(tmp_path: Path, sftp_server) -> None:
    """fsspec hands every table on one server with the same options one filesystem instance (one
    SFTP channel); each table's storage took turns behind a lock of its own, so two tables read at
    once (a join of both) still sent requests on the one channel together: 20 reads on 4 threads
    took 67 s (replies waited for), 1.6 s with one lock a channel."""
    import deltalake

    from delta_datafusion.storage import Storage

    paths = []
    for name in ("a", "b"):
        t = tmp_path / name
        for i in range(6):
            rows = pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": [i % 3] * 10})
            deltalake.write_deltalake(str(t), rows, mode="append", partition_by=["p"])
        paths.append(t)
    remote = [f"sftp://127.0.0.1{t}" for t in paths]
    a, b = (Storage(uri, sftp_server) for uri in remote)
    assert a.fs.wrapped is b.fs.wrapped  # the premise: fsspec's instance cache shares the channel
    assert a.fs._lock is b.fs._lock, "two tables on one SFTP channel take turns behind two locks"

    def both() -> list[pa.Table]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as pool:
            reads = [
                pool.submit(lambda u=u: dd.DeltaTable(u, sftp_server).snapshot().scan().to_table())
                for u in remote * 4
            ]
            return [r.result() for r in reads]

    done, tables = _finished(both)
    assert done, "reading two tables of one SFTP server at once hung"
    assert not isinstance(tables, BaseException), tables
    for t, path in zip(tables, paths * 4, strict=True):
        assert t.sort_by("id") == dd.DeltaTable(str(path)).snapshot().scan().to_table().sort_by("id")
