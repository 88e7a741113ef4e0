"""Requests made side by side on an object store, recorded on an in-memory fsspec filesystem.

On S3, GCS or Azure each request is a round trip of 10-50 ms: what a read costs is the longest
chain of requests made one after another, not their number. Independent objects (the tables of a
folder catalog, the commits of a snapshot, the deletion vectors of a scan) are asked for at once.

The store here holds each gated request until a few are in flight together, or a short while has
passed: requests made one after another never overlap, whatever the timing, so the highest number
in flight at once tells concurrent reads from serial ones (wall time is not measured).
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

fsspec = pytest.importorskip("fsspec")
deltalake = pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from fsspec.implementations.memory import MemoryFileSystem  # noqa: E402
from fsspec.spec import AbstractBufferedFile  # noqa: E402

import delta_datafusion as dd  # noqa: E402

#: requests held until this many are in flight together (or HOLD_S has passed); the hold is long
#: enough that threads started side by side on a loaded 2-core CI machine still meet (a request
#: made alone waits it out, which only the serial code being caught pays in full)
TOGETHER = 4
HOLD_S = 0.5


class _Recorder:
    """Every request (kind, path), and the most requests the gated ones had in flight at once."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.gated: Callable[[str, str], bool] = lambda kind, path: False
        self.in_flight = 0
        self.most = 0
        self.together = TOGETHER
        self._cond = threading.Condition()
        self._depth = threading.local()

    def reset(self, gated: Callable[[str, str], bool], together: int = TOGETHER) -> None:
        with self._cond:
            self.calls.clear()
            self.gated, self.in_flight, self.most, self.together = gated, 0, 0, together

    def request(self, kind: str, path: str, fn: Callable[[], object]) -> object:
        depth = getattr(self._depth, "n", 0)
        if depth:  # a call the store makes inside another (its _open asks isfile): no request
            return fn()
        gated = self.gated(kind, path)
        with self._cond:
            self.calls.append((kind, path))
            if gated:
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
                self._cond.notify_all()
                self._cond.wait_for(lambda: self.most >= self.together, timeout=HOLD_S)
        self._depth.n = 1
        try:
            return fn()
        finally:
            self._depth.n = 0
            if gated:
                with self._cond:
                    self.in_flight -= 1


REC = _Recorder()


class _GatedFile(AbstractBufferedFile):
    """A file read by ranged requests, each one recorded as a ``read`` (as s3fs's file objects
    read); the store's own ranged requests (``cat_file``) are recorded as ``get``."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        return REC.request("read", self.path, lambda: MemoryFileSystem.store[self.path].getvalue()[start:end])


def _recorded(kind: str, method):
    def call(self, path, *args, **kwargs):
        return REC.request(kind, self._strip_protocol(path), lambda: method(self, path, *args, **kwargs))

    return call


class _GatedStore(MemoryFileSystem):
    """The in-memory store as an object store: listings, lookups and ranged reads are requests;
    an open given the size asks nothing (s3fs), one without it asks for the size first."""

    protocol = "ddgated"
    ls = _recorded("ls", MemoryFileSystem.ls)
    info = _recorded("info", MemoryFileSystem.info)
    exists = _recorded("exists", MemoryFileSystem.exists)
    isdir = _recorded("isdir", MemoryFileSystem.isdir)
    isfile = _recorded("isfile", MemoryFileSystem.isfile)
    cat_file = _recorded("get", MemoryFileSystem.cat_file)

    def _open(self, path, mode="rb", size=None, cache_type="none", **kwargs):
        path = self._strip_protocol(path)
        if size is None:
            size = self.info(path)["size"]
        elif path not in MemoryFileSystem.store:
            raise FileNotFoundError(path)
        return _GatedFile(self, path, mode, size=size, cache_type=cache_type)


@pytest.fixture
def store() -> Iterator[tuple[MemoryFileSystem, str]]:
    fsspec.register_implementation("ddgated", _GatedStore, clobber=True)
    fs = fsspec.filesystem("memory")
    root = f"/dd-flight-{uuid.uuid4().hex}"
    REC.reset(lambda kind, path: False)
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _upload(fs: MemoryFileSystem, local: Path, root: str) -> None:
    for path in local.rglob("*"):
        if path.is_file():
            fs.pipe(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())


def _appends(path: Path, commits: int) -> Path:
    for i in range(commits):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())})
        deltalake.write_deltalake(str(path), rows, mode="append")
    return path


def _log_listing(kind: str, path: str) -> bool:
    return kind == "ls" and path.endswith("/_delta_log")


def test_show_tables_opens_a_catalogs_tables_side_by_side(tmp_path: Path, store) -> None:
    """SHOW TABLES opens every table of a folder catalog (one that fails is left out): each
    is a listing and its commits, a chain of round trips per table, which ran table after table
    (20 tables at 20 ms a request: 102 requests, 2.1 s). The tables open side by side now, with
    the same requests."""
    fs, root = store
    for i in range(20):
        _upload(fs, _appends(tmp_path / f"t{i:02d}", 1), f"{root}/t{i:02d}")
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", f"ddgated://{root}")
    REC.reset(_log_listing)
    names = ctx.sql("SHOW TABLES").to_pydict()["table_name"]
    assert {f"t{i:02d}" for i in range(20)} <= set(names)
    assert REC.most >= TOGETHER, REC.calls  # 1 when opened one after another
    listings = Counter(path for kind, path in REC.calls if _log_listing(kind, path))
    # each table's log listed twice (the names, then information_schema's lookup), as before
    assert listings == {f"{root}/t{i:02d}/_delta_log": 2 for i in range(20)}, listings
    # the folder listed for the names, and once more as the cache of opened tables grows past 16
    # (tables opened side by side all crossed that mark: one listing each)
    assert [kind for kind, path in REC.calls if path == root] == ["ls", "ls"], REC.calls
    commits = Counter(path for kind, path in REC.calls if kind == "read" and path.endswith(".json"))
    assert commits == {f"{root}/t{i:02d}/_delta_log/{0:020d}.json": 1 for i in range(20)}, commits

    # a table that cannot be opened (its first commit gone, no checkpoint) is still left out,
    # and so is a folder holding no table
    first = f"{root}/t03/_delta_log/{0:020d}.json"
    fs.pipe(f"{root}/t03/_delta_log/{1:020d}.json", fs.cat(first))
    fs.rm(first)
    fs.pipe(f"{root}/notes/readme.txt", b"not a table")
    names = ctx.sql("SHOW TABLES").to_pydict()["table_name"]
    assert {f"t{i:02d}" for i in range(20) if i != 3} <= set(names)
    assert "t03" not in names and "notes" not in names


def test_tables_opened_side_by_side_are_pinned_for_the_statement(tmp_path: Path, store) -> None:
    """The tables a statement lists are opened for that statement on the helper threads too: each
    one's version is pinned, so the statement's later references to it read that version (see
    delta_datafusion.datafusion.statement)."""
    from delta_datafusion.datafusion.statement import planning_for

    fs, root = store
    for i in range(3):
        _upload(fs, _appends(tmp_path / f"t{i}", 2), f"{root}/t{i}")
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", f"ddgated://{root}")
    pins: dict = {}
    with planning_for(pins):
        names = ctx.catalog("lake").schema("default").table_names
    assert sorted(names) == ["t0", "t1", "t2"]
    assert sorted((key[0].rsplit("/", 1)[-1], v) for key, v in pins.items()) == [
        ("t0", 1),
        ("t1", 1),
        ("t2", 1),
    ]


def _commit_read(kind: str, path: str) -> bool:
    return kind == "read" and path.endswith(".json") and "/_delta_log/" in path


@pytest.mark.parametrize("commits", [2, 3])
def test_a_few_commits_are_read_side_by_side(tmp_path: Path, store, commits: int) -> None:
    """A snapshot's commits are read at once on an object store; two or three were read one
    after another (a round trip each), as most tables' newest versions after a checkpoint are."""
    fs, root = store
    _upload(fs, _appends(tmp_path / "t", commits), root)
    REC.reset(_commit_read)
    snap = dd.DeltaTable(f"ddgated://{root}").snapshot()
    assert snap.version == commits - 1
    reads = Counter(path for kind, path in REC.calls if _commit_read(kind, path))
    assert reads == {f"{root}/_delta_log/{v:020d}.json": 1 for v in range(commits)}, reads
    assert REC.most == commits, REC.calls  # 1 when read one after another


def _dv_table(path: Path, files: int) -> Path:
    """``files`` data files of 10 rows (ids 10*i ..), then one commit giving each a deletion
    vector file of its own ('p', relative) deleting its rows 0 and 3."""
    import json
    import struct
    import time
    import zlib

    from pyroaring import BitMap64

    _appends(path, files)
    log = path / "_delta_log"
    adds = []
    for v in range(files):
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
    actions: list[dict] = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        }
    ]
    now = int(time.time() * 1000)
    (path / "dv").mkdir()
    for i, add in enumerate(adds):
        payload = struct.pack("<i", 1681511377) + BitMap64([0, 3]).serialize()
        framed = len(payload).to_bytes(4, "big") + payload + zlib.crc32(payload).to_bytes(4, "big")
        (path / "dv" / f"d{i}.bin").write_bytes(b"\x01" + framed)
        dv = {"storageType": "p", "pathOrInlineDv": f"dv/d{i}.bin", "offset": 1}
        dv |= {"sizeInBytes": len(payload), "cardinality": 2}
        actions.append({"remove": {"path": add["path"], "deletionTimestamp": now, "dataChange": True}})
        actions.append({"add": {**add, "dataChange": True, "deletionVector": dv}})
    (log / f"{files:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return path


def _dv_read(kind: str, path: str) -> bool:
    return kind == "get" and path.endswith(".bin")


def test_deletion_vectors_of_a_scan_are_read_side_by_side(tmp_path: Path, store) -> None:
    """Files with deletion vectors are read one by one, each after its vector: the vectors of
    the files ahead are read meanwhile (they were read one at a time, each a round trip before
    its file's), each once."""
    fs, root = store
    local = _dv_table(tmp_path / "t", 8)
    _upload(fs, local, root)
    want = sorted(i * 10 + k for i in range(8) for k in range(10) if k not in (0, 3))
    assert sorted(dd.DeltaTable(str(local)).snapshot().scan().to_table().column("id").to_pylist()) == want
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddgated://{root}")
    REC.reset(_dv_read)
    assert sorted(ctx.sql("SELECT id FROM t").to_pydict()["id"]) == want
    reads = Counter(path for kind, path in REC.calls if _dv_read(kind, path))
    assert reads == {f"{root}/dv/d{i}.bin": 1 for i in range(8)}, reads
    assert REC.most >= 2, REC.calls  # 1 when read one after another


def _footer_read(kind: str, path: str) -> bool:
    return kind == "get" and "/_change_data/" in path


def test_change_data_footers_are_read_side_by_side(tmp_path: Path, store) -> None:
    """A change feed filtered on a data column reads its change-data files' footers for their
    statistics first: a few were read one after another (more than 4 at once), each a round
    trip before the data reads; each footer is read once."""
    fs, root = store
    local = tmp_path / "c"
    rows = pa.table({"id": pa.array(range(40), pa.int64()), "part": ["a", "b"] * 20})
    deltalake.write_deltalake(
        str(local), rows, partition_by=["part"], configuration={"delta.enableChangeDataFeed": "true"}
    )
    for i in range(3):  # one change-data file each
        deltalake.DeltaTable(str(local)).update(updates={"id": "id + 100"}, predicate=f"id = {i}")
    _upload(fs, local, root)
    ctx = SessionContext()
    dd.register(ctx)
    REC.reset(_footer_read)
    sql = f"SELECT id, _change_type FROM table_changes('ddgated://{root}', 1, 3) WHERE id < 5 ORDER BY 2, 1"
    got = ctx.sql(sql).to_pydict()
    assert got == {"id": [0, 1, 2], "_change_type": ["update_preimage"] * 3}
    footers = Counter(path for kind, path in REC.calls if _footer_read(kind, path))
    assert len(footers) == 3 and set(footers.values()) == {1}, REC.calls
    assert REC.most == 3, REC.calls  # 1 when read one after another


def _data_read(kind: str, path: str) -> bool:
    return kind == "read" and path.endswith(".parquet") and "/_delta_log/" not in path


def test_files_with_deletion_vectors_are_opened_ahead(tmp_path: Path, store) -> None:
    """The files read by the row-selection path (deletion vectors) are opened ahead, side by side,
    as their vectors are: each file's first request (its footer, the whole of a small file) was
    one round trip after another. Each file is still read once."""
    fs, root = store
    _upload(fs, _dv_table(tmp_path / "t", 8), root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddgated://{root}")
    REC.reset(_data_read)
    assert len(ctx.sql("SELECT id FROM t").to_pydict()["id"]) == 8 * 8
    reads = Counter(path for kind, path in REC.calls if _data_read(kind, path))
    assert len(reads) == 8 and set(reads.values()) == {1}, reads
    assert REC.most >= 2, REC.calls  # 1 when read one after another


def test_units_prepared_ahead_fail_in_order_and_named(tmp_path: Path, store) -> None:
    """A file or deletion vector that fails while prepared ahead fails its own unit's read, named
    and typed as read in turn; a LIMIT met by the first file opened no other file."""
    fs, root = store
    _upload(fs, _dv_table(tmp_path / "t", 6), root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddgated://{root}")
    REC.reset(_data_read)
    assert len(ctx.sql("SELECT id FROM t LIMIT 1").to_pydict()["id"]) == 1
    assert len([c for c in REC.calls if _data_read(*c)]) == 1, REC.calls

    victim = sorted(p for p in fs.find(root) if _data_read("read", p))[3]
    fs.rm(victim)
    with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion's, carrying the package's
        ctx.sql("SELECT id FROM t").collect()
    err = dd.from_datafusion(info.value)
    assert isinstance(err, dd.DataFileNotFoundError), info.value
    assert victim.rsplit("/", 1)[1] in str(err)

    other = f"{root}/copy"  # another table: the vectors read above are cached for the first
    _upload(fs, tmp_path / "t", other)
    fs.pipe(f"{other}/dv/d4.bin", b"\x01" + b"\x00" * 40)
    with pytest.raises(dd.DeletionVectorError, match="dv/d4.bin"):
        dd.DeltaTable(f"ddgated://{other}").snapshot().scan().to_table()


def test_small_data_files_are_read_eight_at_once(tmp_path: Path, store) -> None:
    """A scan of small files (under 1 MB) on an object store reads 8 at once, as many as pyarrow's
    I/O threads: its default read-ahead of 4 files made a chain of a round trip per 4 files
    (60 files at 20 ms a request: 17 round trips). Each file is still read once."""
    fs, root = store
    _upload(fs, _appends(tmp_path / "t", 16), root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddgated://{root}")
    REC.reset(_data_read, together=8)
    got = ctx.sql("SELECT sum(id) AS s FROM t WHERE id >= 0").to_pydict()
    assert got == {"s": [sum(range(160))]}
    reads = Counter(path for kind, path in REC.calls if _data_read(kind, path))
    assert len(reads) == 16 and set(reads.values()) == {1}, reads
    assert REC.most > 4, REC.most  # pyarrow's default: 4 files at once


def test_readers_held_open_share_the_threads_that_read_ahead(tmp_path: Path, store) -> None:
    """Each reader of files with deletion vectors prepares the units ahead on threads. A server
    holds many streams open at once (each query's scan, each reader a client keeps): a pool of
    its own per reader kept up to 16 threads each for the reader's life (6 readers: ~60 threads),
    where one pool for the process bounds them all."""
    from delta_datafusion.read.selected_rows import AHEAD

    fs, root = store
    _upload(fs, _dv_table(tmp_path / "t", 12), root)
    snap = dd.DeltaTable(f"ddgated://{root}").snapshot()
    REC.reset(lambda kind, path: True, together=2 * AHEAD)  # a slow store: reads overlap
    readers = []
    for _ in range(6):
        reader = iter(snap.scan().to_batches())
        assert sum(next(reader).num_rows for _ in range(6)) == 6 * 8
        readers.append(reader)
    ahead = [t.name for t in threading.enumerate() if t.name.startswith("delta-ahead")]
    assert len(ahead) <= 2 * AHEAD, ahead
    rest = [b.num_rows for r in readers for b in r]  # each reader finishes, rows all there
    assert sum(rest) == 6 * 6 * 8
