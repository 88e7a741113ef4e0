"""Requests a read makes of an object store, counted on an in-memory fsspec filesystem.

On an object store every request is a round trip (tens of milliseconds), so the reader must not
ask for what the log already says: data file sizes, or which tables a catalog folder holds when a
query names one of them. The counts here are exact for the in-memory store; s3fs-style stores make
the same calls.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet  # noqa: F401 - pa.parquet
import pytest
from conftest import write_commit

fsspec = pytest.importorskip("fsspec")
deltalake = pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from fsspec.implementations.memory import MemoryFileSystem  # noqa: E402
from fsspec.spec import AbstractBufferedFile  # noqa: E402

import delta_datafusion as dd  # noqa: E402

CALLS: list[tuple[str, str, int | None]] = []  # (kind, path, size given to open)


_DEPTH = threading.local()


def _counted(kind: str):
    """Record a call as a request unless the in-memory store makes it inside another (its
    ``_open`` checks parent folders with ``isfile``: bookkeeping, not requests)."""

    def wrap(method):
        def call(self, path, *args, **kwargs):
            depth = getattr(_DEPTH, "n", 0)
            if depth == 0:
                CALLS.append((kind, self._strip_protocol(path), kwargs.get("size")))
            _DEPTH.n = depth + 1
            try:
                if kind == "open":
                    kwargs.pop("size", None)
                    kwargs.pop("cache_type", None)
                return method(self, path, *args, **kwargs)
            finally:
                _DEPTH.n = depth

        return call

    return wrap


class _CountingMemoryFS(MemoryFileSystem):
    """The in-memory store, recording metadata requests and opens like an object store's log."""

    protocol = "ddcount"
    info = _counted("info")(MemoryFileSystem.info)
    ls = _counted("ls")(MemoryFileSystem.ls)
    exists = _counted("exists")(MemoryFileSystem.exists)
    isfile = _counted("isfile")(MemoryFileSystem.isfile)
    isdir = _counted("isdir")(MemoryFileSystem.isdir)
    _open = _counted("open")(MemoryFileSystem._open)


METADATA = {"info", "ls", "exists", "isfile", "isdir"}


@pytest.fixture
def store() -> Iterator[tuple[MemoryFileSystem, str]]:
    fsspec.register_implementation("ddcount", _CountingMemoryFS, clobber=True)
    fs = fsspec.filesystem("memory")
    root = f"/dd-req-{uuid.uuid4().hex}"
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _upload(fs: MemoryFileSystem, local: Path, root: str) -> None:
    for dirpath, _dirs, files in os.walk(local):
        for name in files:
            path = Path(dirpath) / name
            fs.pipe(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())


def _table(tmp_path: Path, name: str, files: int) -> Path:
    """A partitioned table with ``files`` data files (one append each)."""
    path = tmp_path / name
    for i in range(files):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "part": [f"p{i % 4}"] * 10})
        deltalake.write_deltalake(str(path), rows, partition_by=["part"], mode="append")
    return path


def _data_files(root: str) -> dict[str, int]:
    fs = fsspec.filesystem("memory")
    return {p: fs.info(p)["size"] for p in fs.find(root) if p.endswith(".parquet") and "_delta_log" not in p}


def test_data_files_open_with_the_logs_sizes(tmp_path: Path, store) -> None:
    """A scan asks the store nothing about its data files: it opens each with the size from the
    log (the stock pyarrow handler asked whether it exists and fsspec then asked its size)."""
    fs, root = store
    _upload(fs, _table(tmp_path, "t", 12), root)
    sizes = _data_files(root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddcount://{root}")
    CALLS.clear()
    assert ctx.sql("SELECT count(*) AS n, sum(id) AS s FROM t WHERE id >= 0").to_pydict() == {
        "n": [120],
        "s": [sum(range(120))],
    }
    on_data = [c for c in CALLS if c[1] in sizes]
    assert not [c for c in on_data if c[0] in METADATA], on_data
    opened = {path: size for kind, path, size in on_data if kind == "open"}
    assert opened == sizes  # every file opened, each with its true size


@pytest.mark.parametrize("protocol", ["ddcount", "dddetails"])
def test_missing_data_file_is_still_named(tmp_path: Path, store, protocol: str) -> None:
    """Opened with the log's size (ddcount), or read by ranged requests as on GCS and Azure
    (dddetails, see test_data_files_on_gcs_and_azure_ask_for_no_details): a data file that is
    gone is the missing file the reader names."""
    fsspec.register_implementation("dddetails", _DetailsOnOpenStore, clobber=True)
    fs, root = store
    _upload(fs, _table(tmp_path, "t", 3), root)
    victim = sorted(_data_files(root))[1]
    fs.rm(victim)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"{protocol}://{root}")
    err = _query_error(ctx, "SELECT * FROM t WHERE id >= 0")
    assert isinstance(err, dd.errors.DataFileNotFoundError), err
    assert f"{victim.rsplit('/', 1)[1]} is missing" in str(err)


def _query_error(ctx: SessionContext, sql: str) -> BaseException:
    """The package's error of a query that fails (DataFusion flattens its type away); the
    error as raised when it carries none."""
    with pytest.raises(Exception) as info:  # noqa: B017
        ctx.sql(sql).collect()
    return dd.from_datafusion(info.value) or info.value


def _log_only_table(local: Path, files: int, size: int = 100) -> None:
    """A one-commit log adding ``files`` data files f0.parquet ... (not written)."""
    (local / "_delta_log").mkdir(parents=True)
    schema = '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'
    meta = {
        "id": "x",
        "format": {"provider": "parquet"},
        "schemaString": schema,
        "partitionColumns": [],
        "configuration": {},
    }
    adds = [
        {
            "add": {
                "path": f"f{i}.parquet",
                "partitionValues": {},
                "size": size,
                "modificationTime": 0,
                "dataChange": True,
            }
        }
        for i in range(files)
    ]
    write_commit(
        local, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": meta}, *adds]
    )


def test_failed_read_checks_a_bounded_number_of_files(tmp_path: Path, store) -> None:
    """After a failed read whose error names no file, the reader looks for a missing file to
    name, checking at most 64 files (each check is a request; it checked every file)."""
    fs, root = store
    local = tmp_path / "t"
    _log_only_table(local, 300, size=len(b"not a parquet file"))
    _upload(fs, local, root)
    for i in range(300):  # every file exists and is corrupt: pyarrow's error names none of them
        fs.pipe(f"{root}/f{i}.parquet", b"not a parquet file")
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddcount://{root}")
    CALLS.clear()
    with pytest.raises(Exception) as info:  # noqa: B017
        ctx.sql("SELECT sum(id) FROM t").collect()
    assert "cannot read" in str(info.value), info.value
    checks = Counter(kind for kind, path, _ in CALLS if path.endswith(".parquet") and kind in METADATA)
    assert 0 < sum(checks.values()) <= 2 * 64, checks  # at most two scan partitions, each bounded


class _LazyMissingFile(AbstractBufferedFile):
    def _fetch_range(self, start, end):
        data = MemoryFileSystem.store.get(self.path)
        if data is None:  # like s3fs: the store's message does not name the key
            raise FileNotFoundError(2, "The specified key does not exist.")
        return data.getvalue()[start:end]


class _LazyStore(_CountingMemoryFS):
    """Opening with a known size asks nothing; a missing object fails at its first read."""

    protocol = "ddlazy"

    def _open(self, path, mode="rb", size=None, cache_type=None, **kwargs):
        if size is None:
            return super()._open(path, mode=mode, **kwargs)
        return _LazyMissingFile(self, self._strip_protocol(path), mode, size=size, cache_type="none")


def test_missing_data_file_named_when_the_store_fails_at_read(tmp_path: Path, store) -> None:
    """The open asks the store nothing, so a missing file fails at its first read, where a
    store's message may not name the key: the error still names the missing file, also when
    it is past the files checked for existence after an anonymous failure."""
    import io

    import pyarrow.parquet as pq

    fsspec.register_implementation("ddlazy", _LazyStore, clobber=True)
    fs, root = store
    buf = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), buf)
    local = tmp_path / "t"
    _log_only_table(local, 300, size=len(buf.getvalue()))
    _upload(fs, local, root)
    for i in range(300):
        if i != 250:
            fs.pipe(f"{root}/f{i}.parquet", buf.getvalue())
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddlazy://{root}")
    err = _query_error(ctx, "SELECT sum(id) FROM t")
    assert isinstance(err, dd.errors.DataFileNotFoundError), err
    assert "/f250.parquet is missing" in str(err)


def test_catalog_query_lists_only_the_named_table(tmp_path: Path, store) -> None:
    """A query naming one table of a folder catalog lists that table's log, not the folder and
    every other table in it."""
    fs, root = store
    for i in range(6):
        _upload(fs, _table(tmp_path, f"t{i}", 1), f"{root}/t{i}")
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", f"ddcount://{root}")
    CALLS.clear()
    assert ctx.sql("SELECT count(*) AS n FROM lake.default.t3").to_pydict() == {"n": [10]}
    touched = {path for _, path, _ in CALLS}
    assert root not in touched, CALLS  # the catalog folder itself is not listed
    assert not [p for p in touched if p.startswith(f"{root}/t") and not p.startswith(f"{root}/t3")], CALLS

    # a name is a folder name: an fsspec chain ("t3::memory") does not reach t3
    dd.register_catalog(ctx, "mem", f"memory://{root}")
    assert ctx.sql("SELECT count(*) AS n FROM mem.default.t3").to_pydict() == {"n": [10]}
    for chained in ("t3::memory", "t3::file"):
        with pytest.raises(Exception, match="not found"):
            ctx.sql(f'SELECT count(*) FROM mem.default."{chained}"').collect()

    CALLS.clear()
    names = ctx.sql("SHOW TABLES").to_pydict()["table_name"]
    assert {f"t{i}" for i in range(6)} <= set(names)
    root_listings = [c for c in CALLS if c[0] == "ls" and c[1] == root]
    assert len(root_listings) <= 2, root_listings  # not once per table


def test_last_checkpoint_is_not_read_and_the_greatest_checkpoint_of_a_version_is(
    tmp_path: Path, store
) -> None:
    """The listing decides, also between complete checkpoints of one version: the greatest in
    Spark's order (for two V2 checkpoints, the greater name), as delta-kernel-rs takes it, so
    ``_last_checkpoint`` is never read (it chose here before)."""
    from conftest import corpus_table

    fs, root = store
    local = corpus_table("v2-checkpoint-parquet")
    _upload(fs, local, root)
    uri = f"ddcount://{root}"
    want = sorted(dd.DeltaTable(str(local)).snapshot().files().column("path").to_pylist())
    real = "00000000000000000002.checkpoint.e8fa2696-9728-4e9c-b285-634743fdd4fb.parquet"
    smaller = "00000000000000000002.checkpoint.00000000-0000-0000-0000-000000000000.parquet"
    greater = "00000000000000000002.checkpoint.ffffffff-ffff-ffff-ffff-ffffffffffff.parquet"
    fs.pipe(f"{root}/_delta_log/{smaller}", b"not a parquet file")
    hint = fs.cat(f"{root}/_delta_log/_last_checkpoint")
    fs.pipe(f"{root}/_delta_log/_last_checkpoint", hint.replace(real.encode(), smaller.encode()))
    CALLS.clear()
    assert sorted(dd.DeltaTable(uri).snapshot().files().column("path").to_pylist()) == want
    assert not [c for c in CALLS if c[1].endswith("_last_checkpoint")], CALLS
    # a greater name at the version is read, whatever the hint names
    fs.pipe(f"{root}/_delta_log/{greater}", b"not a parquet file")
    fs.pipe(f"{root}/_delta_log/_last_checkpoint", hint)
    with pytest.raises(dd.DeltaError, match="ffffffff"):
        dd.DeltaTable(uri).snapshot().files()


def test_time_travel_by_timestamp_reads_each_commit_once(tmp_path: Path, store) -> None:
    """Resolving a timestamp needs the latest metadata (in-commit timestamps or not); the
    snapshot it resolves to reuses the commits that read already."""
    fs, root = store
    _upload(fs, _table(tmp_path, "t", 5), root)
    uri = f"ddcount://{root}"
    history = dd.DeltaTable(uri).history().to_pylist()
    at_v2 = next(h["timestamp"] for h in history if h["version"] == 2)
    CALLS.clear()
    snap = dd.DeltaTable(uri).snapshot(timestamp=at_v2)
    assert snap.version == 2
    opened = Counter(path for kind, path, _ in CALLS if kind == "open" and path.endswith(".json"))
    assert opened and max(opened.values()) == 1, opened
    assert sorted(snap.files().column("path").to_pylist()) == sorted(
        dd.DeltaTable(uri).snapshot(version=2).files().column("path").to_pylist()
    )


def test_table_changes_on_a_location_asks_nothing_before_listing_its_log(tmp_path: Path, store) -> None:
    """``table_changes('<uri>', ...)`` lists the table's log straight away; whether the location
    exists is asked only to word the error when there is no log (it was a request per query)."""
    fs, root = store
    path = tmp_path / "c"
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    deltalake.write_deltalake(str(path), rows, configuration={"delta.enableChangeDataFeed": "true"})
    deltalake.write_deltalake(str(path), rows, mode="append")
    _upload(fs, path, root)
    ctx = SessionContext()
    dd.register(ctx)
    CALLS.clear()
    got = ctx.sql(f"SELECT count(*) AS n FROM table_changes('ddcount://{root}', 0)").to_pydict()
    assert got == {"n": [4]}
    assert not [c for c in CALLS if c[1] == root and c[0] in METADATA], CALLS
    with pytest.raises(Exception, match="no such path exists"):
        ctx.sql(f"SELECT * FROM table_changes('ddcount://{root}-nope', 0)").collect()


class _HeadingStore(_CountingMemoryFS):
    """Opens files as s3fs, gcsfs and HTTP do without a listing cache: an open given no size asks
    the store for it (a HEAD request, counted as ``info``); ``cat_file`` is one GET."""

    protocol = "ddhead"
    cat_file = _counted("get")(MemoryFileSystem.cat_file)

    def _open(self, path, mode="rb", size=None, **kwargs):
        if size is None:
            self.info(path)
        return super()._open(path, mode, **kwargs)


def test_log_and_deletion_vector_reads_ask_no_sizes(store) -> None:
    """Commits and checkpoints are read with the sizes their listing gave, deletion vectors by a
    ranged read: no size request before any read (it was one per commit, two per checkpoint and
    one per deletion vector file, each a round trip, the checkpoint's on every first query)."""
    from conftest import corpus_table

    fsspec.register_implementation("ddhead", _HeadingStore, clobber=True)
    fs, root = store
    local = corpus_table("dv-with-columnmapping")  # checkpoint at 10, commits to 15, DV files
    _upload(fs, local, root)
    want = dd.DeltaTable(str(local)).snapshot().scan().to_table()
    CALLS.clear()
    snap = dd.DeltaTable(f"ddhead://{root}").snapshot()
    got = snap.scan().to_table()
    assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)
    assert not [c for c in CALLS if c[0] in METADATA and c[1] != f"{root}/_delta_log"], CALLS
    assert any(path.endswith(".bin") for kind, path, _ in CALLS if kind == "get"), CALLS  # DVs read


class _NoRangeStore(_HeadingStore):
    """A store whose ranged reads give the whole file, as an HTTP server ignoring Range does."""

    protocol = "ddnorange"

    def cat_file(self, path, start=None, end=None, **kwargs):
        return super().cat_file(path)


def test_ranged_reads_from_a_store_ignoring_ranges(tmp_path: Path, store) -> None:
    """A deletion vector is read by a ranged request; a store that answers with the whole file
    still gives the bytes at the offset (they were the file's first bytes), and a table with
    deletion vectors reads the same."""
    from conftest import corpus_table

    from delta_datafusion.storage import Storage

    fsspec.register_implementation("ddnorange", _NoRangeStore, clobber=True)
    fs, root = store
    fs.pipe(f"{root}/blob", bytes(range(100)))
    assert Storage(f"ddnorange://{root}").read_range(f"{root}/blob", 40, 5) == bytes(range(40, 45))
    assert Storage(f"ddnorange://{root}").read_range(f"{root}/blob", 98, 5) == bytes([98, 99])
    local = corpus_table("dv-with-columnmapping")
    _upload(fs, local, f"{root}/t")
    want = dd.DeltaTable(str(local)).snapshot().scan().to_table()
    got = dd.DeltaTable(f"ddnorange://{root}/t").snapshot().scan().to_table()
    assert sorted(got.to_pylist(), key=repr) == sorted(want.to_pylist(), key=repr)


class _SlowOpenStore(_CountingMemoryFS):
    """Opens take a while, as a round trip does (widens the window in which threads overlap)."""

    protocol = "ddslowopen"

    def _open(self, path, mode="rb", **kwargs):
        import time

        time.sleep(0.05)
        return super()._open(path, mode, **kwargs)


def test_scan_partitions_read_the_format_sample_once(tmp_path: Path, store) -> None:
    """The scan's parquet format is chosen from one file's footer, once per reader: partitions
    starting together each read it (one footer request per partition, before any scan)."""
    fsspec.register_implementation("ddslowopen", _SlowOpenStore, clobber=True)
    fs, root = store
    path = tmp_path / "s"
    deltalake.write_deltalake(str(path), pa.table({"id": [1, 2], "name": ["a", "b"]}))
    _upload(fs, path, root)
    scan = dd.DeltaTable(f"ddslowopen://{root}").snapshot().scan()
    reader, unit = scan.reader(), scan.scan_units()[0]
    reader.storage.note_sizes([(unit.location, unit.size)])
    barrier = threading.Barrier(4)

    def choose() -> None:
        barrier.wait()
        reader._format(unit)

    CALLS.clear()
    threads = [threading.Thread(target=choose) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len([c for c in CALLS if c[0] == "open" and c[1].endswith(".parquet")]) == 1, CALLS


def _text_table(tmp_path: Path, files: int) -> Path:
    """An unpartitioned table with a string column, ``files`` data files of one row group."""
    path = tmp_path / "text"
    for i in range(files):
        rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64()), "name": [f"n{i}"] * 10})
        deltalake.write_deltalake(str(path), rows, mode="append")
    return path


def _parquet_opens() -> list[int]:
    return sorted(Counter(p for kind, p, _ in CALLS if kind == "open" and p.endswith(".parquet")).values())


def test_first_rows_open_their_file_once(tmp_path: Path, store) -> None:
    """A LIMIT query's first file is opened once: the footer its streamed first row group reads
    also chooses the scan's format (the file was opened once more for that, before any row)."""
    fs, root = store
    _upload(fs, _text_table(tmp_path, 1), root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddcount://{root}")
    CALLS.clear()
    got = ctx.sql("SELECT * FROM t LIMIT 3").to_arrow_table()
    assert got.num_rows == 3 and got.column_names == ["id", "name"]
    assert _parquet_opens() == [1], CALLS


def test_scan_without_text_columns_reads_no_footer_for_the_format(tmp_path: Path, store) -> None:
    """The format's choice (dictionary decoding of string columns) needs a footer only when the
    scan reads a string column: a scan of numbers opens each file once (a footer request more
    before the scan started); a later scan of the text still makes the choice."""
    fs, root = store
    _upload(fs, _text_table(tmp_path, 2), root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddcount://{root}")
    CALLS.clear()
    assert ctx.sql("SELECT sum(id) AS s FROM t WHERE id >= 0").to_pydict() == {"s": [sum(range(20))]}
    assert _parquet_opens() == [1, 1], CALLS
    CALLS.clear()
    got = ctx.sql("SELECT name FROM t WHERE id >= 5").to_pydict()
    assert sorted(got["name"]) == ["n0"] * 5 + ["n1"] * 10
    assert _parquet_opens() == [1, 2], CALLS  # one file's footer read for the choice


def _cdf_table(tmp_path: Path) -> Path:
    """Six commits of two rows each, change feed on, no checkpoint."""
    path = tmp_path / "c"
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    deltalake.write_deltalake(str(path), rows, configuration={"delta.enableChangeDataFeed": "true"})
    for _ in range(5):
        deltalake.write_deltalake(str(path), rows, mode="append")
    return path


def test_table_changes_reads_each_commit_once(tmp_path: Path, store) -> None:
    """The start snapshot of a change range reuses the range's commits it needs (the start
    commit was read twice when the start snapshot also needed older commits)."""
    fs, root = store
    _upload(fs, _cdf_table(tmp_path), root)
    ctx = SessionContext()
    dd.register(ctx)
    CALLS.clear()
    got = ctx.sql(f"SELECT count(*) AS n FROM table_changes('ddcount://{root}', 3, 5)").to_pydict()
    assert got == {"n": [6]}
    opened = Counter(path for kind, path, _ in CALLS if kind == "open" and path.endswith(".json"))
    assert len(opened) == 6 and max(opened.values()) == 1, opened  # commits 0-5, each once


class _RangedFile(AbstractBufferedFile):
    def _fetch_range(self, start, end):
        CALLS.append(("range", self.path, end - start))
        return MemoryFileSystem.store[self.path].getvalue()[start:end]


class _RangeStore(_CountingMemoryFS):
    """Files read by ranged requests, each recorded, as an object store's are."""

    protocol = "ddrange"

    def _open(self, path, mode="rb", size=None, cache_type="none", **kwargs):
        size = size if size is not None else self.info(path)["size"]
        return _RangedFile(self, self._strip_protocol(path), mode, size=size, cache_type=cache_type)


def test_small_data_files_are_read_in_one_request(tmp_path: Path, store) -> None:
    """pyarrow first reads a parquet file's last 64 KB for its footer: a smaller file arrives
    whole, and its columns are not asked for again (they were, a second request per file)."""
    fsspec.register_implementation("ddrange", _RangeStore, clobber=True)
    fs, root = store
    _upload(fs, _table(tmp_path, "t", 6), root)
    sizes = _data_files(root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddrange://{root}")
    ctx.sql("SELECT max(id) FROM t").collect()  # the log read, and the format chosen from a footer
    CALLS.clear()
    got = ctx.sql("SELECT id, part FROM t WHERE id >= 0").to_pydict()
    assert sorted(got["id"]) == list(range(60))
    reads = Counter(path for kind, path, _ in CALLS if kind == "range")
    assert reads == dict.fromkeys(sizes, 1), reads
    assert sum(n for kind, _, n in CALLS if kind == "range") == sum(sizes.values())


class _DetailsOnOpenStore(_HeadingStore):
    """Opens files as gcsfs and adlfs do: the file object asks the store for the file's details
    (counted as ``info``) whatever size it is given. Registered under its own name, it names
    gcsfs's protocols, as a subclass of gcsfs's filesystem does; ``cat_file`` is one GET."""

    protocol = ("dddetails", "gs", "gcs")

    def _open(self, path, mode="rb", size=None, **kwargs):
        self.info(path)
        return super()._open(path, mode, **kwargs)


def test_data_files_on_gcs_and_azure_ask_for_no_details(tmp_path: Path, store) -> None:
    """gcsfs's and adlfs's file objects ask the store for a file's details when opened, whatever
    size they are given (one metadata request per data file and scan): data files of known size
    are read by ranged requests instead, the same bytes, a small file in one request."""
    fsspec.register_implementation("dddetails", _DetailsOnOpenStore, clobber=True)
    fs, root = store
    local = _table(tmp_path, "t", 6)
    n = 30_000  # one file larger than pyarrow's 64 KB footer read: read in several ranges
    big = pa.table({"id": pa.array(range(60, 60 + n), pa.int64()), "part": ["p9"] * n})
    deltalake.write_deltalake(str(local), big, partition_by=["part"], mode="append")
    _upload(fs, local, root)
    sizes = _data_files(root)
    assert max(sizes.values()) > 65536
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"dddetails://{root}")
    ctx.sql("SELECT max(id) FROM t").collect()  # the log read, and the format chosen from a footer
    CALLS.clear()
    got = ctx.sql("SELECT id, part FROM t WHERE id >= 0").to_pydict()
    assert sorted(got["id"]) == list(range(60 + n))
    on_data = [c for c in CALLS if c[1] in sizes]
    assert not [c for c in on_data if c[0] != "get"], on_data  # no details, no stock opens
    reads = Counter(path for _, path, _ in on_data)
    assert set(reads) == set(sizes)
    assert [p for p, k in reads.items() if k > 1] == [max(sizes, key=sizes.get)], reads


@pytest.mark.parametrize("off_by", [-1000, 1000])
def test_data_file_whose_size_is_not_the_logged_one_is_named_with_both_sizes(
    tmp_path: Path, store, off_by: int
) -> None:
    """Stores whose data files are read by the log's size (S3, GCS, Azure) cannot read a file
    whose log ``size`` is wrong (pyarrow looks for the footer where the log says the file ends):
    the error says which file and that its size is not the logged one, not only pyarrow's
    "magic bytes not found"."""
    fsspec.register_implementation("dddetails", _DetailsOnOpenStore, clobber=True)
    fs, root = store
    local = _table(tmp_path, "t", 3)
    log = sorted((local / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    victim = next(a["add"] for a in actions if "add" in a)
    real = victim["size"]
    victim["size"] = real + off_by
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    _upload(fs, local, root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"dddetails://{root}")
    err = _query_error(ctx, "SELECT * FROM t WHERE id >= 0")
    assert isinstance(err, dd.errors.DeltaError), err
    name = victim["path"].rsplit("/", 1)[1]
    assert name in str(err) and f"is {real} bytes" in str(err) and f"says {real + off_by}" in str(err), err


class _SizelessStore(_CountingMemoryFS):
    """Answers a file's details without its size, as an HTTP server sending no Content-Length
    does (fsspec's HTTP filesystem then gives ``size: None``)."""

    protocol = "ddsizeless"

    def info(self, path, **kwargs):
        return {**super().info(path, **kwargs), "size": None}


def test_corrupt_data_file_on_a_store_not_telling_its_size_is_not_called_resized(
    tmp_path: Path, store
) -> None:
    """A store that does not say how large a file is (size None, taken as 0): a corrupt data
    file of the logged size is a file that cannot be read, not one of 0 bytes."""
    fsspec.register_implementation("ddsizeless", _SizelessStore, clobber=True)
    fs, root = store
    local = _table(tmp_path, "t", 3)
    _upload(fs, local, root)
    victim = next(p for p in _data_files(root) if "part=p2" in p)
    data = bytearray(fs.cat(victim))
    data[4:40] = bytes(36)  # the same size, the first page unreadable
    fs.pipe(victim, bytes(data))
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddsizeless://{root}")
    err = _query_error(ctx, "SELECT * FROM t WHERE id >= 0")
    assert isinstance(err, dd.errors.DeltaError), err
    assert f"cannot read data file {victim}" in str(err) and "0 bytes" not in str(err), err


def test_data_file_larger_than_its_logged_size_reads_its_own_bytes(tmp_path: Path, store) -> None:
    """A log whose ``size`` is smaller than the file (64 KB for a larger one) on a store that opens
    by the file's real size: pyarrow's footer read (the last 64 KB) has exactly the logged size but
    does not start at byte 0, so it is not the whole file; holding it as such served the column
    reads from shifted bytes ("Couldn't deserialize thrift")."""
    fs, root = store
    local = tmp_path / "t"
    (local / "_delta_log").mkdir(parents=True)
    n = 20_000
    rows = pa.table({"id": pa.array(range(n), pa.int64()), "s": [f"{i:08d}" for i in range(n)]})
    pa.parquet.write_table(rows, local / "d.parquet", compression="none", use_dictionary=False)
    assert (local / "d.parquet").stat().st_size > 65536
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "s", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    write_commit(
        local,
        0,
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            {
                "metaData": {
                    "id": "t",
                    "format": {"provider": "parquet"},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": [],
                    "configuration": {},
                }
            },
            {
                "add": {
                    "path": "d.parquet",
                    "partitionValues": {},
                    "size": 65536,
                    "modificationTime": 0,
                    "dataChange": True,
                }
            },
        ],
    )
    _upload(fs, local, root)
    got = dd.DeltaTable(f"memory://{root}").snapshot().scan().to_table()
    assert got.sort_by("id").equals(rows)


class _ServiceRequestError(Exception):
    """Like azure.core's ServiceRequestError: the store could not be reached (not an OSError)."""


class _ResourceNotFoundError(Exception):
    """Like azure.core's ResourceNotFoundError: the blob is gone (HTTP 404, not an OSError)."""

    status_code = 404


class _UnreachableFile(AbstractBufferedFile):
    def _fetch_range(self, start, end):
        if MemoryFileSystem.store.get(self.path) is None:
            raise _ResourceNotFoundError("The specified blob does not exist.")
        raise _ServiceRequestError("Cannot connect to host 127.0.0.1:10000 [Connect call failed]")


class _UnreachableStore(_CountingMemoryFS):
    """Opening with a known size asks nothing (as adlfs); every data read then fails as a store
    that went down does, with the store's own error (the Azure SDK retries each request for ~80 s
    before it gives up)."""

    protocol = "ddunreachable"

    def _open(self, path, mode="rb", size=None, cache_type=None, **kwargs):
        if size is None or "/_delta_log/" in path:  # down after the log was read
            return super()._open(path, mode=mode, **kwargs)
        return _UnreachableFile(self, self._strip_protocol(path), mode, size=size, cache_type="none")


def test_a_store_gone_down_is_not_asked_whether_data_files_exist(tmp_path: Path, store) -> None:
    """A data read the store failed (unreachable, not "not found") was followed by an existence
    check of the file, a second request to the store that is down (on Azure another ~80 s of
    retries), whose failure then hid the read's own error ("cannot look up"). A blob that is gone
    (HTTP 404) is still named as missing."""
    fsspec.register_implementation("ddunreachable", _UnreachableStore, clobber=True)
    fs, root = store
    local = _table(tmp_path, "t", 1)
    _upload(fs, local, root)
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"ddunreachable://{root}")
    CALLS.clear()
    err = _query_error(ctx, "SELECT sum(id) FROM t")
    assert isinstance(err, dd.StorageError), err
    said = re.search(r"cannot read data file .*\.parquet: _ServiceRequestError: Cannot connect", str(err))
    assert said, err
    assert not [c for c in CALLS if c[0] in METADATA and c[1].endswith(".parquet")], CALLS
    victim = next(iter(_data_files(root)))
    fs.rm(victim)
    err = _query_error(ctx, "SELECT sum(id) FROM t")
    assert isinstance(err, dd.errors.DataFileNotFoundError), err
    assert f"{victim} is missing" in str(err)


def _commit_opens() -> Counter:
    return Counter(
        int(p.rsplit("/", 1)[1][:20]) for kind, p, _ in CALLS if kind == "open" and p.endswith(".json")
    )


def _one_row_appends(path: Path, n: int) -> None:
    """``n`` commits of one row each at ``path`` (the first creates the table)."""
    rows = pa.table({"id": pa.array([1], pa.int64())})
    for _ in range(n):
        deltalake.write_deltalake(str(path), rows, mode="append")


def _history_on_store(fs: MemoryFileSystem, path: Path, root: str) -> tuple[dd.DeltaTable, pa.Table]:
    """The table at ``path`` uploaded to ``root`` of the counting store, and its whole history;
    the calls recorded so far are forgotten."""
    _upload(fs, path, root)
    table = dd.DeltaTable(f"ddcount://{root}")
    full = table.history()
    CALLS.clear()
    return table, full


def test_history_with_a_limit_reads_back_to_the_latest_protocol_and_metadata_only(
    tmp_path: Path, store
) -> None:
    """``history(limit=3)`` needs the latest metadata (in-commit timestamps or not): it reads the
    commits newest first until protocol and metaData are found, each once (it built the latest
    snapshot, which reads every commit after the checkpoint, then read the chosen commits again)."""
    fs, root = store
    path = tmp_path / "h"
    _one_row_appends(path, 60)
    deltalake.DeltaTable(str(path)).alter.set_table_properties({"delta.enableChangeDataFeed": "true"})
    _one_row_appends(path, 3)  # versions 61-63
    table, full = _history_on_store(fs, path, root)
    assert table.history(limit=3) == full.slice(61)
    opened = _commit_opens()
    assert max(opened.values()) == 1, opened
    # 60 has protocol and metaData; the reads ahead in growing batches stop there too
    assert set(range(60, 64)) <= opened.keys() and len(opened) <= 8, opened


def test_history_with_a_limit_after_a_checkpoint_reads_only_the_commits_after_it(
    tmp_path: Path, store
) -> None:
    """The checkpoint gives protocol and metaData when the commits after it have none; the
    history of every commit reads each once too."""
    fs, root = store
    path = tmp_path / "h"
    _one_row_appends(path, 60)
    deltalake.DeltaTable(str(path)).create_checkpoint()  # at version 59
    _one_row_appends(path, 5)  # versions 60-64
    table, full = _history_on_store(fs, path, root)
    assert table.history(limit=3) == full.slice(62)
    assert _commit_opens() == Counter(dict.fromkeys(range(60, 65), 1))
    CALLS.clear()
    assert table.history() == full
    assert _commit_opens() == Counter(dict.fromkeys(range(65), 1))


@pytest.mark.parametrize("checksum_version", [63, 50])
def test_history_with_a_limit_reads_a_version_checksum_not_the_commits_before_it(
    tmp_path: Path, store, checksum_version: int
) -> None:
    """A version checksum file (Spark writes one per commit) gives the protocol and metadata at
    its version: the commits after it are read (their reads ahead stop there too), none before
    it. Without it all 64 were read (protocol and metaData in commit 0 only, no checkpoint)."""
    from test_version_checksums import _write_crc

    fs, root = store
    path = tmp_path / "h"
    _one_row_appends(path, 64)
    _write_crc(path, checksum_version)
    table, full = _history_on_store(fs, path, root)
    assert table.history(limit=3) == full.slice(61)
    assert _commit_opens() == Counter(dict.fromkeys(range(min(61, checksum_version + 1), 64), 1))
    assert [p for kind, p, _ in CALLS if kind == "open" and p.endswith(".crc")] == [
        f"{root}/_delta_log/{checksum_version:020d}.crc"
    ]


def test_a_failed_history_leaves_no_reading_threads_behind(tmp_path: Path, store) -> None:
    """The commits read newest first for the latest protocol and metadata are read by a pool of
    threads; a search that fails (an unreadable protocol) ends it at once, not when its exception
    is let go (a kept exception held up to 16 idle threads per call)."""
    fs, root = store
    path = tmp_path / "h"
    for i in range(40):
        deltalake.write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
    write_commit(path, 40, [{"protocol": {"minReaderVersion": 99, "minWriterVersion": 7}}])
    _upload(fs, path, root)
    table = dd.DeltaTable(f"ddcount://{root}")
    before = set(threading.enumerate())
    for call in (lambda: table.history(limit=3), table.timeline):
        with pytest.raises(dd.errors.InvalidProtocolError) as info:
            call()
        assert "00000000000000000040.json" in str(info.value)
        assert set(threading.enumerate()) - before == set(), info  # the exception still held


def test_table_changes_on_a_registered_table_reads_no_commit_its_registration_read(
    tmp_path: Path, store
) -> None:
    """``table_changes`` over a table registered through the package takes the commits its
    registered snapshot read (commit files do not change once written): only the log is listed
    again (it says what 'latest' is). Each commit was read a second time by the first query."""
    fs, root = store
    path = _cdf_table(tmp_path)
    _upload(fs, path, root)
    ctx = SessionContext()
    dd.register(ctx)
    CALLS.clear()
    dd.register_table(ctx, "t", f"ddcount://{root}")
    registered = {p for kind, p, _ in CALLS if kind == "open" and p.endswith(".json")}
    assert len(registered) == 6  # the premise: commits 0-5, no checkpoint
    CALLS.clear()
    got = ctx.sql("SELECT count(*) AS n FROM table_changes('t', 0)").to_pydict()
    assert got == {"n": [12]}
    opened = {p for kind, p, _ in CALLS if kind == "open" and p.endswith(".json")}
    assert not opened & registered, sorted(opened)
    assert [c for c in CALLS if c[0] == "ls"], CALLS  # the log is listed: 'latest' is its newest commit
    # a commit after the registration is read (and is the latest the feed ends at); the files
    # there already are not written again (that would give them new times: they would be read)
    deltalake.write_deltalake(str(path), pa.table({"id": pa.array([1, 2], pa.int64())}), mode="append")
    for f in sorted(path.rglob("*")):
        key = f"{root}/{f.relative_to(path).as_posix()}"
        if f.is_file() and not fs.exists(key):
            fs.pipe(key, f.read_bytes())
    CALLS.clear()
    got = ctx.sql("SELECT max(_commit_version) AS v, count(*) AS n FROM table_changes('t', 2)").to_pydict()
    assert got == {"v": [6], "n": [10]}
    opened = {p for kind, p, _ in CALLS if kind == "open" and p.endswith(".json")}
    assert opened == {f"{root}/_delta_log/{6:020d}.json"}, sorted(opened)


def _written_again(tmp_path: Path, fs, root: str, first_read, pause: float = 0.0) -> None:
    """A change-feed table (ids 1, 2 in two commits) at ``root``, read by ``first_read()``, then
    removed and written again there (ids 7, 8) with commits of the same sizes."""
    for i, ids in enumerate(([1, 2], [7, 8])):
        path = tmp_path / f"c{i}"
        rows = pa.table({"id": pa.array(ids, pa.int64())})
        deltalake.write_deltalake(str(path), rows, configuration={"delta.enableChangeDataFeed": "true"})
        deltalake.write_deltalake(str(path), rows, mode="append")
        for commit in (path / "_delta_log").glob("*.json"):
            # deltalake's commitInfo times the write: 1 ms or 12 ms would change the size
            commit.write_bytes(
                re.sub(rb'"execution_time_ms":\d+', b'"execution_time_ms":1', commit.read_bytes())
            )
        if i == 0:
            _upload(fs, path, root)
            first_read()
            before = len(fs.cat_file(f"{root}/_delta_log/{1:020d}.json"))
        else:
            fs.rm(root, recursive=True)
            time.sleep(pause)
            _upload(fs, path, root)
    assert len(fs.cat_file(f"{root}/_delta_log/{1:020d}.json")) == before  # the premise: same size


def test_table_changes_on_a_registered_table_reads_a_table_written_again_at_its_location(
    tmp_path: Path, store
) -> None:
    """The registered snapshot's commits are taken only while the listing names the same files
    (size and time): a table removed and written again at the location is read anew, not
    answered with the old commits (whose data files are gone)."""
    fs, root = store
    ctx = SessionContext()
    dd.register(ctx)
    # the store's times are in ms
    _written_again(tmp_path, fs, root, lambda: dd.register_table(ctx, "t", f"ddcount://{root}"), pause=0.01)
    got = ctx.sql("SELECT sum(id) AS s, count(*) AS n FROM table_changes('t', 0)").to_pydict()
    assert got == {"s": [30], "n": [4]}


class _SameSecondStore(_CountingMemoryFS):
    """An object store whose times are whole seconds (S3, Azure) and every file here was written
    in the same one; its listing carries each object's ETag (the MD5 of its bytes, as S3 gives
    for a single-part upload)."""

    protocol = "ddsecond"

    def ls(self, path, detail=True, **kwargs):
        out = super().ls(path, detail=detail, **kwargs)
        if not detail:
            return out
        return [
            {
                **e,
                "created": 1_700_000_000.0,
                "ETag": f'"{hashlib.md5(self.cat_file(e["name"])).hexdigest()}"',
            }
            if e.get("type") == "file"
            else e
            for e in out
        ]


def test_table_changes_on_a_registered_table_reads_a_table_written_again_in_the_same_second(
    tmp_path: Path, store
) -> None:
    """A table removed and written again at the location within the second its registration read
    it: same commit sizes and (whole-second) times, but other bytes. The listing's ETags tell
    them apart; the registration's commits (whose data files are gone) are not taken."""
    fs, root = store
    fsspec.register_implementation("ddsecond", _SameSecondStore, clobber=True)
    ctx = SessionContext()
    dd.register(ctx)
    _written_again(tmp_path, fs, root, lambda: dd.register_table(ctx, "t", f"ddsecond://{root}"))
    got = ctx.sql("SELECT sum(id) AS s, count(*) AS n FROM table_changes('t', 0)").to_pydict()
    assert got == {"s": [30], "n": [4]}


def test_table_changes_on_a_location_written_again_in_the_same_second_is_not_served_from_cache(
    tmp_path: Path, store
) -> None:
    """The change feed cache tells a commit written again within the second (same size and
    whole-second time, other bytes) by its ETag: the feed of the removed table is not served."""
    fs, root = store
    fsspec.register_implementation("ddsecond", _SameSecondStore, clobber=True)
    ctx = SessionContext()
    dd.register(ctx)
    query = f"SELECT sum(id) AS s, count(*) AS n FROM table_changes('ddsecond://{root}', 1)"

    def first_read() -> None:
        assert ctx.sql(query).to_pydict() == {"s": [3], "n": [2]}

    _written_again(tmp_path, fs, root, first_read)
    assert ctx.sql(query).to_pydict() == {"s": [15], "n": [2]}


def test_a_checkpoint_on_an_object_store_is_read_once_for_its_files(tmp_path: Path, store) -> None:
    """Locally a one-leaf checkpoint's add stats are read apart from the rest of it and parsed
    meanwhile; on an object store that would be a second request after the first (a round trip
    of latency for ~5 ms of CPU): there the leaf is read once, whole."""
    import delta_datafusion.snapshot as snapshot_module

    fs, root = store
    path = tmp_path / "t"
    rows = pa.table({"id": pa.array(range(240), pa.int64()), "p": [f"p{i % 80}" for i in range(240)]})
    deltalake.write_deltalake(str(path), rows, partition_by=["p"])
    deltalake.DeltaTable(str(path)).create_checkpoint()
    deltalake.write_deltalake(str(path), rows.slice(0, 1), partition_by=["p"], mode="append")
    _upload(fs, path, root)
    reads: list[object] = []
    real = snapshot_module.read_leaf

    def spy(storage, leaf, columns=None, *more):
        reads.append(columns)
        return real(storage, leaf, columns, *more) if columns is not None else real(storage, leaf)

    snapshot_module.LEAF_THREADS, old = 2, snapshot_module.LEAF_THREADS
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(snapshot_module, "read_leaf", spy)
            files = dd.DeltaTable(f"ddcount://{root}").snapshot().files()
            local = dd.DeltaTable(str(path)).snapshot().files()
    finally:
        snapshot_module.LEAF_THREADS = old
    assert files.num_rows == local.num_rows == 81
    # once whole on the store (the add struct whole, stats in it: "add", not "add.path", ...);
    # apart (2 reads) locally
    assert (reads[0] is None or "add" in reads[0]) and len(reads) == 3


@pytest.mark.parametrize(
    "name", ["v2-checkpoints-json-with-sidecars", "v2-parquet-sidecars-struct-stats-only"]
)
def test_sidecars_open_with_their_logged_sizes(store, name: str) -> None:
    """A V2 checkpoint's sidecars are opened with the size its manifest gives (``sizeInBytes``):
    each was asked for its size first, a round trip before its read (8 more requests and one more
    round trip in the chain for a table of 8 sidecars)."""
    from conftest import corpus_table

    fsspec.register_implementation("ddhead", _HeadingStore, clobber=True)
    fs, root = store
    local = corpus_table(name)
    _upload(fs, local, root)
    want = dd.DeltaTable(str(local)).snapshot().files().column("path").to_pylist()
    CALLS.clear()
    got = dd.DeltaTable(f"ddhead://{root}").snapshot().files().column("path").to_pylist()
    assert sorted(got) == sorted(want)
    sidecars = [c for c in CALLS if "/_sidecars/" in c[1]]
    assert sidecars and not [c for c in sidecars if c[0] in METADATA], sidecars


@pytest.mark.parametrize("via_bytes", [False, True])
def test_parallel_phase_opens_sidecars_with_their_logged_sizes(store, via_bytes: bool) -> None:
    """The parallel phase's workers open each sidecar with its manifest's size too, whether they
    get the scan's state or rebuild it from bytes (another process): they asked for each one's
    size first, a round trip more per sidecar than the snapshot's own read."""
    from conftest import corpus_table

    from delta_datafusion.parallel import Parallel, ParallelScanMetadata, ParallelState

    fsspec.register_implementation("ddhead", _HeadingStore, clobber=True)
    fs, root = store
    local = corpus_table("v2-checkpoints-json-with-sidecars")
    _upload(fs, local, root)
    want = dd.DeltaTable(str(local)).snapshot().files().column("path").to_pylist()
    phase = dd.DeltaTable(f"ddhead://{root}").snapshot().scan().parallel_scan_metadata()
    got = [p for batch in phase for p in batch.files.column("path").to_pylist()]
    after = phase.finish()
    assert isinstance(after, Parallel) and after.files
    state = ParallelState.from_bytes(after.state.to_bytes()) if via_bytes else after.state
    CALLS.clear()
    got += [
        p
        for batch in ParallelScanMetadata(state, after.files)
        for p in batch.files.column("path").to_pylist()
    ]
    assert sorted(got) == sorted(want)
    sidecars = [c for c in CALLS if "/_sidecars/" in c[1]]
    assert sidecars and not [c for c in sidecars if c[0] in METADATA], sidecars


@pytest.mark.parametrize("off_by", [-100, 100])
def test_sidecar_whose_logged_size_is_wrong_is_named(store, off_by: int) -> None:
    """A manifest whose ``sizeInBytes`` is not its sidecar's size: the sidecar, read by ranges at
    that size, cannot be read; the error is the package's and names it (no rows from shifted
    bytes) and both sizes (pyarrow's own words, "magic bytes not found", read as a damaged file)."""
    from conftest import corpus_table

    fsspec.register_implementation("ddrange", _RangeStore, clobber=True)
    fs, root = store
    _upload(fs, corpus_table("v2-checkpoints-json-with-sidecars"), root)
    latest = sorted(p for p in fs.ls(f"{root}/_delta_log", detail=False) if ".checkpoint." in p)[-1]
    text = fs.cat(latest).decode()
    assert '"sizeInBytes":' in text, text
    fs.pipe(
        latest,
        re.sub(r'"sizeInBytes":(\d+)', lambda m: f'"sizeInBytes":{int(m.group(1)) + off_by}', text).encode(),
    )
    with pytest.raises(dd.LogCorruptError) as info:
        dd.DeltaTable(f"ddrange://{root}").snapshot().files()
    assert "_delta_log/_sidecars/" in str(info.value), info.value
    # both sizes, so the reader can tell a wrong manifest from a damaged file
    sizes = re.findall(r'"sizeInBytes":(\d+)', text)
    sidecar = next(p for p in fs.find(f"{root}/_delta_log/_sidecars") if p in str(info.value))
    real = fs.info(sidecar)["size"]
    assert str(real) in sizes, (real, sizes)
    assert f"is {real} bytes, but its checkpoint manifest says sizeInBytes {real + off_by}" in str(
        info.value
    ), info.value


def test_parallel_phase_refuses_a_wrong_sidecar_size_as_the_snapshot_does(store) -> None:
    """Workers given the state as bytes read a sidecar at its manifest's size too: a wrong
    ``sizeInBytes`` is the same LogCorruptError naming both sizes, not a table read whole by one
    route and refused by the other."""
    from conftest import corpus_table

    from delta_datafusion.parallel import ParallelScanMetadata, ParallelState

    fsspec.register_implementation("ddrange", _RangeStore, clobber=True)
    fs, root = store
    _upload(fs, corpus_table("v2-checkpoints-json-with-sidecars"), root)
    latest = sorted(p for p in fs.ls(f"{root}/_delta_log", detail=False) if ".checkpoint." in p)[-1]
    text = fs.cat(latest).decode()
    fs.pipe(
        latest,
        re.sub(r'"sizeInBytes":(\d+)', lambda m: f'"sizeInBytes":{int(m.group(1)) + 100}', text).encode(),
    )
    phase = dd.DeltaTable(f"ddrange://{root}").snapshot().scan().parallel_scan_metadata()
    list(phase)
    after = phase.finish()
    state = ParallelState.from_bytes(after.state.to_bytes())
    with pytest.raises(dd.LogCorruptError) as info:
        list(ParallelScanMetadata(state, after.files))
    sidecar = next(p for p in fs.find(f"{root}/_delta_log/_sidecars") if p in str(info.value))
    real = fs.info(sidecar)["size"]
    assert f"is {real} bytes, but its checkpoint manifest says sizeInBytes {real + 100}" in str(info.value)
