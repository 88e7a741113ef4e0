"""Tables on a non-local fsspec filesystem read exactly like their local copies.

Corpus tables covering every layout that takes a different I/O path off the local disk (V2
checkpoints with sidecars, multi-part checkpoints, deletion vectors, column mapping,
percent-encoded paths, cdc files) are uploaded to fsspec's in-memory filesystem and read through
``memory://`` URIs: listing via ``fs.ls``, log reads via ``fs.open``, checkpoint leaves and data
through ``PyFileSystem(FSSpecHandler)``, change-feed footers on threads. Every query must give the
local copy's rows and pruning figures, and no read may write to the store.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pytest
from conftest import corpus_table, in_zone, metadata_action

fsspec = pytest.importorskip("fsspec")
from datafusion import SessionContext  # noqa: E402
from fsspec.implementations.memory import MemoryFileSystem  # noqa: E402
from fsspec.spec import AbstractBufferedFile  # noqa: E402

import delta_datafusion as dd  # noqa: E402

TABLES = [
    "table-with-dv-small",
    "dv-with-columnmapping",
    "v2-checkpoint-parquet",
    "v2-checkpoints-json-with-sidecars",
    "parquet_row_group_skipping",
    "v1-multi-part-struct-stats-only",
    "timestamp-partitioned-table",
    "cdf-table",
    "cdf-table-with-dv",
    "cdf-column-mapping-name-mode",
    "cdf-table-backtick-column-names",
]


@pytest.fixture
def store() -> Iterator[tuple[object, str]]:
    """(memory filesystem, a fresh root folder in it); removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/dd-test-{uuid.uuid4().hex}"
    yield fs, root
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _upload(fs, local: Path, root: str) -> str:
    for dirpath, _dirs, files in os.walk(local):
        for name in files:
            path = Path(dirpath) / name
            fs.pipe(f"{root}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return f"memory://{root}"


def _listing(fs, root: str) -> dict[str, int]:
    return {p: fs.info(p)["size"] for p in fs.find(root)}


def _rows(t: pa.Table) -> list[str]:
    return sorted(map(str, t.to_pylist()))


def _versions(local: Path) -> list[int]:
    log = local / "_delta_log"
    return sorted(int(n[:20]) for n in os.listdir(log) if n.endswith(".json") and n[:20].isdigit())


@pytest.mark.parametrize("name", TABLES)
def test_memory_store_reads_like_local(store, name: str) -> None:
    fs, root = store
    local = corpus_table(name)
    uri = _upload(fs, local, root)
    before = _listing(fs, root)

    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "loc", str(local))
    dd.register_table(ctx, "mem", uri)
    want = ctx.sql("SELECT * FROM loc").to_arrow_table()
    got = ctx.sql("SELECT * FROM mem").to_arrow_table()
    assert got.schema == want.schema
    assert got.num_rows == want.num_rows and _rows(got) == _rows(want)

    # the same pruning figures and rows under a filter on an integer column
    col = next((f.name for f in want.schema if pa.types.is_integer(f.type)), None)
    values = sorted(v for v in want.column(col).to_pylist() if v is not None) if col else []
    if values:
        where = f'"{col}" >= {values[len(values) // 2]}'
        figures = [
            re.findall(r"(files_total|after_partition_pruning|after_stats_pruning)=(\d+)", text)
            for text in (dd.explain(ctx, f"SELECT * FROM {t} WHERE {where}") for t in ("loc", "mem"))
        ]
        assert figures[0] and figures[0] == figures[1], figures
        a = ctx.sql(f"SELECT * FROM loc WHERE {where}").to_arrow_table()
        b = ctx.sql(f"SELECT * FROM mem WHERE {where}").to_arrow_table()
        assert a.num_rows and _rows(a) == _rows(b)

    # time travel to the first commit
    first = _versions(local)[0] if _versions(local) else None
    if first is not None:
        try:
            old = dd.DeltaTable(str(local)).snapshot(version=first).scan().to_table()
        except dd.DeltaError:
            old = None
        if old is not None:
            old_mem = dd.DeltaTable(uri).snapshot(version=first).scan().to_table()
            assert _rows(old_mem) == _rows(old)

    snap = dd.DeltaTable(str(local)).snapshot()
    # the change feed, when the table has one (commit timestamps come from file times: dropped)
    if snap.properties.get("delta.enableChangeDataFeed") == "true":
        start = next(
            v
            for v in _versions(local)
            if dd.DeltaTable(str(local)).snapshot(version=v).properties.get("delta.enableChangeDataFeed")
            == "true"
        )
        sql = "SELECT * FROM table_changes('{}', {})"
        a = ctx.sql(sql.format(local, start)).to_arrow_table().drop_columns(["_commit_timestamp"])
        b = ctx.sql(sql.format(uri, start)).to_arrow_table().drop_columns(["_commit_timestamp"])
        assert a.num_rows == b.num_rows and _rows(a) == _rows(b)
        n = a.num_rows
        filtered = "SELECT count(*) AS n FROM table_changes('{}', {}) WHERE _change_type <> 'insert'"
        assert (
            ctx.sql(filtered.format(uri, start)).to_pydict()["n"]
            == ctx.sql(filtered.format(local, start)).to_pydict()["n"]
        )
        assert n > 0

    assert _listing(fs, root) == before, "a read wrote to the store"


def test_memory_store_missing_data_file_is_named(store) -> None:
    fs, root = store
    uri = _upload(fs, corpus_table("table-with-dv-small"), root)
    victim = next(p for p in fs.find(root) if p.endswith(".parquet") and "_delta_log" not in p)
    fs.rm(victim)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", uri)
    with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
        ctx.sql("SELECT * FROM t").to_arrow_table()
    err = dd.from_datafusion(info.value)
    assert isinstance(err, dd.errors.DataFileNotFoundError), info.value
    assert victim.rsplit("/", 1)[1] in str(err)


def test_memory_store_folder_catalog(store) -> None:
    """``register_catalog`` on a ``memory://`` folder serves its tables from that store (their
    locations keep the protocol), in SQL and in ``table_changes()`` by qualified name."""
    fs, root = store
    for name in ("cdf-table", "table-with-dv-small"):
        _upload(fs, corpus_table(name), f"{root}/{name.replace('-', '_')}")
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_catalog(ctx, "lake", f"memory://{root}")
    assert ctx.sql("SHOW TABLES").to_pydict()["table_name"].count("cdf_table") == 1
    got = ctx.sql("SELECT * FROM lake.default.table_with_dv_small").to_arrow_table()
    dd.register_table(ctx, "dv_local", str(corpus_table("table-with-dv-small")))
    want = ctx.sql("SELECT * FROM dv_local").to_arrow_table()
    assert got.num_rows and _rows(got) == _rows(want)
    sql = "SELECT _change_type, count(*) AS n FROM table_changes('{}', 0) GROUP BY 1 ORDER BY 1"
    by_name = ctx.sql(sql.format("lake.default.cdf_table")).to_pydict()
    by_path = ctx.sql(sql.format(corpus_table("cdf-table"))).to_pydict()
    assert by_name == by_path and sum(by_name["n"]) > 0


class _TokenMemoryFS(MemoryFileSystem):
    """The in-memory store behind a required credential (like an object store's key)."""

    protocol = "ddtoken"

    def __init__(self, token: str | None = None, **kwargs):
        if token != "s3cret":
            raise PermissionError("ddtoken: bad or missing token")
        super().__init__(**kwargs)


class _SlowConnectMemoryFS(MemoryFileSystem):
    """The in-memory store whose connection waits for ``gate`` (an authentication round trip)."""

    protocol = "ddslowconnect"
    cachable = False

    def __init__(self, gate=None, **kwargs):
        if gate is not None:
            gate["connecting"].set()
            gate["release"].wait(60)
        super().__init__(**kwargs)


def test_a_store_connecting_does_not_hold_up_opening_another() -> None:
    """Two tables on two stores opened on two threads: while one store's filesystem connects
    (it may authenticate over the network), the other table opens. The filesystem was a cached
    property holding one lock per class while computing (before Python 3.12): every other
    Storage waited for that connection."""
    import threading

    from delta_datafusion.storage import Storage

    fsspec.register_implementation("ddslowconnect", _SlowConnectMemoryFS, clobber=True)
    gate = {"connecting": threading.Event(), "release": threading.Event()}
    opened: dict = {}

    def open_store(key, options):
        try:
            opened[key] = Storage("ddslowconnect://bucket/t", options).fs
        except Exception as e:  # noqa: BLE001 - asserted below
            opened[key] = e

    slow = threading.Thread(target=open_store, args=("slow", {"gate": gate}), daemon=True)
    slow.start()
    try:
        assert gate["connecting"].wait(30)
        other = threading.Thread(target=open_store, args=("other", {}), daemon=True)
        other.start()
        other.join(30)  # a hang, not a time limit: it waited for the other store's connection
        assert not other.is_alive(), "opening a table waited for another store's connection"
        assert isinstance(opened["other"], _SlowConnectMemoryFS) and "slow" not in opened
    finally:
        gate["release"].set()
    slow.join(30)
    assert isinstance(opened["slow"], _SlowConnectMemoryFS)


def test_storage_options_reach_every_route(store) -> None:
    """A store that needs a credential: the storage options given at registration are used for
    the table's reads and for ``table_changes()`` on it, by registered name, by catalog name and
    after CREATE EXTERNAL TABLE ... OPTIONS; without them the error is the package's own."""
    fsspec.register_implementation("ddtoken", _TokenMemoryFS, clobber=True)
    fs, root = store
    _upload(fs, corpus_table("cdf-table"), f"{root}/cdf_table")
    uri = f"ddtoken://{root}/cdf_table"
    opts = {"token": "s3cret"}
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "local_cdf", str(corpus_table("cdf-table")))
    by_type = "SELECT _change_type, count(*) AS n FROM table_changes('{}', 0) GROUP BY 1 ORDER BY 1"
    want = ctx.sql(by_type.format("local_cdf")).to_pydict()
    rows = ctx.sql("SELECT count(*) AS n FROM local_cdf").to_pydict()

    with pytest.raises(dd.DeltaError, match="cannot open filesystem for 'ddtoken://.*PermissionError"):
        dd.register_table(ctx, "nope", uri)

    dd.register_table(ctx, "t", uri, storage_options=opts)
    assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict() == rows
    assert ctx.sql(by_type.format("t")).to_pydict() == want

    dd.register_catalog(ctx, "lake", f"ddtoken://{root}", storage_options=opts)
    assert ctx.sql("SELECT count(*) AS n FROM lake.default.cdf_table").to_pydict() == rows
    assert ctx.sql(by_type.format("lake.default.cdf_table")).to_pydict() == want

    ctx.sql(
        f"CREATE EXTERNAL TABLE ext STORED AS DELTA LOCATION '{uri}' OPTIONS ('token' 's3cret')"
    ).collect()
    assert ctx.sql("SELECT count(*) AS n FROM ext").to_pydict() == rows
    assert ctx.sql(by_type.format("ext")).to_pydict() == want


def _library_request(timeout: int = 0, client_kwargs: dict | None = None) -> None:
    """The library beneath a store (a session, an HTTP client): takes only its own keywords."""
    _library_session(**(client_kwargs or {}))


def _library_session(trust_env: bool = False) -> None:
    pass


class _PassOnMemoryFS(MemoryFileSystem):
    """An in-memory store that takes any option and hands it to the library beneath at each
    request, as s3fs (aiobotocore) and fsspec's HTTP filesystem (aiohttp) do."""

    protocol = "ddpasson"

    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def ls(self, path, detail=True, **kwargs):
        _library_request(**self.kwargs)
        return super().ls(path, detail=detail, **kwargs)


class _BuggyMemoryFS(_PassOnMemoryFS):
    """A store whose own bug is a TypeError about a keyword no storage option gave."""

    protocol = "ddbuggy"

    def ls(self, path, detail=True, **kwargs):
        _library_request(**self.kwargs, attempts=2)
        return super().ls(path, detail=detail, **kwargs)


class _OwnOptionBugMemoryFS(MemoryFileSystem):
    """A store that takes ``timeout`` itself (a named parameter) but, by a bug of its own, hands
    it to a library call that does not take it."""

    protocol = "ddownbug"

    def __init__(self, timeout: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.timeout = timeout

    def ls(self, path, detail=True, **kwargs):
        _library_session(timeout=self.timeout)
        return super().ls(path, detail=detail, **kwargs)


class _StrictMemoryFS(MemoryFileSystem):
    """An in-memory store whose constructor takes only the options it knows."""

    protocol = "ddstrict"

    def __init__(self, timeout: int = 0):
        super().__init__()


def test_a_storage_option_the_filesystem_refuses_is_an_argument_error(store, tmp_path: Path):
    """A misspelt option of a store that passes options on (s3fs, HTTP) failed only at the first
    listing, as a StorageError (which says a retry may help) quoting another library's TypeError;
    one refused on opening was a plain DeltaError. Both name the option and the store now; another
    TypeError of the store stays a StorageError, as does one naming an option the store's own
    constructor takes (a bug of the store)."""
    for cls in (_PassOnMemoryFS, _BuggyMemoryFS, _StrictMemoryFS, _OwnOptionBugMemoryFS):
        fsspec.register_implementation(cls.protocol, cls, clobber=True)
    fs, root = store
    uri = _upload(fs, corpus_table("cdf-table"), f"{root}/cdf_table")
    passon, strict = uri.replace("memory://", "ddpasson://"), uri.replace("memory://", "ddstrict://")
    assert dd.DeltaTable(passon, {"timeout": 5}).snapshot().version == dd.DeltaTable(uri).snapshot().version
    cases = [
        (
            passon,
            {"timeout": 5, "nonsense_opt": 1},
            r"ddpasson filesystem \(_PassOnMemoryFS\) .* option 'nonsense_opt'",
        ),
        (passon, {"client_kwargs": {"trust_envv": True}}, r"option 'client_kwargs' key 'trust_envv'"),
        (strict, {"nonsense_opt": 1}, r"ddstrict://.* option 'nonsense_opt'"),
    ]
    for location, options, message in cases:
        with pytest.raises(dd.errors.ArgumentError, match=message):
            dd.DeltaTable(location, options).snapshot()
    ctx = SessionContext()
    dd.register(ctx)
    with pytest.raises(dd.errors.ArgumentError, match="'nonsense_opt'"):
        dd.register_catalog(ctx, "lake", f"ddpasson://{root}", storage_options={"nonsense_opt": 1})
        ctx.sql("SELECT * FROM lake.default.cdf_table").collect()
    with pytest.raises(dd.errors.StorageError, match="unexpected keyword argument 'attempts'"):
        dd.DeltaTable(uri.replace("memory://", "ddbuggy://"), {"timeout": 5}).snapshot()
    # an option the store names as its own parameter is taken: a TypeError about it is the
    # store's bug, not the user's option (it was "does not take the storage option 'timeout'")
    with pytest.raises(dd.errors.StorageError, match="unexpected keyword argument 'timeout'") as caught:
        dd.DeltaTable(uri.replace("memory://", "ddownbug://"), {"timeout": 5}).snapshot()
    assert not isinstance(caught.value, dd.errors.ArgumentError)


class _CachingMemoryFileSystem(MemoryFileSystem):
    """A memory filesystem that caches listings until told otherwise, as s3fs, gcsfs and adlfs do."""

    protocol = "cachingmem"

    def ls(self, path, detail=True, **kwargs):
        path = self._strip_protocol(path)
        if path not in self.dircache:
            self.dircache[path] = super().ls(path, detail=True, **kwargs)
        entries = self.dircache[path]
        return entries if detail else [e["name"] for e in entries]

    def invalidate_cache(self, path=None):
        if path is None:
            self.dircache.clear()
        else:
            self.dircache.pop(self._strip_protocol(path), None)


def test_listing_caches_never_hide_new_commits(tmp_path) -> None:
    """A filesystem that caches directory listings (fsspec shares one instance per protocol and
    options) still shows each new commit to a new snapshot, a folder catalog and table_changes."""
    from deltalake import write_deltalake

    fsspec.register_implementation("cachingmem", _CachingMemoryFileSystem, clobber=True)
    fs = fsspec.filesystem("cachingmem")
    local = tmp_path / "t"
    root = f"/dd-test-{uuid.uuid4().hex}"
    write_deltalake(
        str(local), pa.table({"id": [1, 2]}), configuration={"delta.enableChangeDataFeed": "true"}
    )
    uri = _upload(fs, local, f"{root}/t").replace("memory://", "cachingmem://")
    try:
        assert dd.DeltaTable(uri).snapshot().version == 0
        ctx = SessionContext()
        dd.register(ctx)
        dd.register_catalog(ctx, "lake", f"cachingmem://{root}")
        assert ctx.sql("SELECT count(*) AS n FROM lake.default.t").to_pydict() == {"n": [2]}
        write_deltalake(str(local), pa.table({"id": [3]}), mode="append")
        name = "00000000000000000001.json"
        fs.pipe(f"{root}/t/_delta_log/{name}", (local / "_delta_log" / name).read_bytes())
        for f in local.glob("*.parquet"):
            if not fs.exists(f"{root}/t/{f.name}"):
                fs.pipe(f"{root}/t/{f.name}", f.read_bytes())
        assert dd.DeltaTable(uri).snapshot().version == 1
        assert ctx.sql("SELECT count(*) AS n FROM lake.default.t").to_pydict() == {"n": [3]}
        got = ctx.sql(f"SELECT max(_commit_version) AS v FROM table_changes('{uri}', 0)").to_pydict()
        assert got == {"v": [1]}
        # a table created after the catalog listed its folder shows up too
        _upload(fs, local, f"{root}/u")
        assert ctx.sql("SELECT count(*) AS n FROM lake.default.u").to_pydict() == {"n": [3]}
    finally:
        fs.rm(root, recursive=True)


def test_filesystems_whose_invalidate_cache_differs_still_read(store) -> None:
    """invalidate_cache is an optimisation of the filesystem's: one that takes other arguments or
    fails is left alone, and the table still reads."""

    class NoPath(MemoryFileSystem):
        protocol = "nopathmem"

        def invalidate_cache(self):  # type: ignore[override]
            pass

    class Failing(MemoryFileSystem):
        protocol = "failingmem"

        def invalidate_cache(self, path=None):
            raise NotImplementedError

    fs, root = store
    uri = _upload(fs, corpus_table("cdf-table"), root)
    for cls in (NoPath, Failing):
        fsspec.register_implementation(cls.protocol, cls, clobber=True)
        other = uri.replace("memory://", f"{cls.protocol}://")
        assert dd.DeltaTable(other).snapshot().version == dd.DeltaTable(uri).snapshot().version


class _FlakyMemoryFS(MemoryFileSystem):
    """The in-memory store with requests that fail as a network does: ``broken`` maps a path
    suffix to "error" (the open fails), "once" (the next open fails, later ones do not), "short"
    (the read returns half the bytes), "list" or "isdir" (those calls time out)."""

    protocol = "ddflaky"
    broken: dict[str, str] = {}

    def _open(self, path, mode="rb", **kwargs):
        for suffix, how in list(self.broken.items()):
            if path.endswith(suffix) and how == "once":
                del self.broken[suffix]
                raise ConnectionError("connection reset by peer")
            if path.endswith(suffix) and how == "error":
                raise ConnectionError("connection reset by peer")
            if path.endswith(suffix) and how == "short":
                import io

                data = super()._open(path, mode, **kwargs).read()
                return io.BytesIO(data[: len(data) // 2])
        return super()._open(path, mode, **kwargs)

    def isdir(self, path):
        if any(path.rstrip("/").endswith(s) and how == "isdir" for s, how in self.broken.items()):
            raise TimeoutError("timed out")
        return super().isdir(path)

    def ls(self, path, detail=True, **kwargs):
        if any(path.rstrip("/").endswith(s) and how == "list" for s, how in self.broken.items()):
            raise TimeoutError("timed out")
        return super().ls(path, detail=detail, **kwargs)


@pytest.fixture
def flaky(store):
    fsspec.register_implementation("ddflaky", _FlakyMemoryFS, clobber=True)
    _FlakyMemoryFS.broken = {}
    yield store
    _FlakyMemoryFS.broken = {}


def test_failed_requests_are_storage_errors_naming_the_file(flaky) -> None:
    """A store's ConnectionError or timeout names no file and was raised as it was (log files),
    or named another data file than the one that failed; a read that ends early dropped a commit's
    last actions silently."""
    fs, root = flaky
    local = corpus_table("cdf-table")
    _upload(fs, local, f"{root}/t")
    uri = f"ddflaky://{root}/t"
    want = _rows(dd.DeltaTable(str(local)).snapshot().scan().to_table())
    for suffix, how, message in [
        ("00000000000000000001.json", "error", r"cannot read .*00000000000000000001\.json: ConnectionError"),
        (
            "00000000000000000001.json",
            "short",
            r"cannot read .*00000000000000000001\.json: got \d+ of its \d+ bytes",
        ),
        ("_delta_log", "list", r"cannot list .*_delta_log: TimeoutError"),
    ]:
        _FlakyMemoryFS.broken = {suffix: how}
        with pytest.raises(dd.StorageError, match=message):
            dd.DeltaTable(uri).snapshot()
        ctx = SessionContext()
        dd.register(ctx)
        with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
            ctx.sql(f"SELECT count(*) FROM table_changes('{uri}', 0)").collect()
        assert isinstance(dd.from_datafusion(info.value), dd.StorageError), info.value
    _FlakyMemoryFS.broken = {}
    assert _rows(dd.DeltaTable(uri).snapshot().scan().to_table()) == want  # nothing kept the failure
    # a checkpoint's parquet: the store failed, the file is not corrupt
    _upload(fs, corpus_table("app-txn-checkpoint"), f"{root}/ck")
    _FlakyMemoryFS.broken = {".checkpoint.parquet": "error"}
    with pytest.raises(dd.StorageError, match=r"cannot (open|read) .*\.checkpoint\.parquet: ConnectionError"):
        dd.DeltaTable(f"ddflaky://{root}/ck").snapshot().files()
    for error in (PermissionError("denied"), RuntimeError("HttpResponseError 503")):  # any store error

        class _Failing(_FlakyMemoryFS):
            protocol = "ddfailing"

            def _open(self, path, mode="rb", _e=error, **kwargs):
                if path.endswith(".checkpoint.parquet"):
                    raise _e
                return super()._open(path, mode, **kwargs)

        fsspec.register_implementation("ddfailing", _Failing, clobber=True)
        with pytest.raises(dd.StorageError, match=r"\.checkpoint\.parquet: .*"):
            dd.DeltaTable(f"ddfailing://{root}/ck").snapshot().files()
    # a V2 JSON manifest read short would lose its sidecar references
    _upload(fs, corpus_table("v2-checkpoints-json-with-sidecars"), f"{root}/v2")
    manifest = max(  # the newest checkpoint: the latest snapshot's
        p for p in fs.find(f"{root}/v2/_delta_log") if ".checkpoint." in p and p.endswith(".json")
    )
    _FlakyMemoryFS.broken = {manifest.rsplit("/", 1)[1]: "short"}
    with pytest.raises(dd.StorageError, match=r"got \d+ of its \d+ bytes"):
        dd.DeltaTable(f"ddflaky://{root}/v2").snapshot().files()
    # a catalog root the store cannot look at
    _FlakyMemoryFS.broken = {root.lstrip("/"): "isdir"}
    with pytest.raises(dd.StorageError, match="cannot look up .*TimeoutError"):
        dd.register_catalog(SessionContext(), "lake", f"ddflaky://{root}")
    _FlakyMemoryFS.broken = {}
    victim = sorted(p for p in fs.find(f"{root}/t") if p.endswith(".parquet") and "_delta_log" not in p)[-1]
    _FlakyMemoryFS.broken = {victim.rsplit("/", 1)[1]: "error"}
    # a data file the store fails to give: a store error too (it was a plain DeltaError), in SQL too
    with pytest.raises(dd.StorageError, match=f"data file .*{victim.rsplit('/', 1)[1]}.*ConnectionError"):
        dd.DeltaTable(uri).snapshot().scan().to_table()
    ctx = SessionContext()
    dd.register_table(ctx, "t", uri)
    with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
        ctx.sql("SELECT * FROM t").collect()
    assert isinstance(dd.from_datafusion(info.value), dd.StorageError), info.value
    # a store's own (HTTP client's) error on a data file escaped as a raw RuntimeError

    class _HttpFailing(_FlakyMemoryFS):
        protocol = "ddhttpfailing"

        def _open(self, path, mode="rb", **kwargs):
            if path.endswith(victim.rsplit("/", 1)[1]):
                raise RuntimeError("HttpResponseError 503")
            return super()._open(path, mode, **kwargs)

    fsspec.register_implementation("ddhttpfailing", _HttpFailing, clobber=True)
    _FlakyMemoryFS.broken = {}
    http_uri = uri.replace("ddflaky://", "ddhttpfailing://")
    with pytest.raises(dd.StorageError, match="RuntimeError: HttpResponseError 503"):
        dd.DeltaTable(http_uri).snapshot().scan().to_table()
    # a corrupt file is corrupt, also when read while the caller handles a store's error
    _FlakyMemoryFS.broken = {}
    fs.pipe(victim, b"\0" * 64)
    with pytest.raises(dd.DeltaError) as info:
        try:
            raise ConnectionError("an earlier failure the caller is handling")
        except ConnectionError:
            dd.DeltaTable(uri).snapshot().scan().to_table()
    assert type(info.value) is dd.DeltaError, info.value


def test_a_footer_read_failing_once_changes_no_rows(flaky, tmp_path) -> None:
    """A file's footer is read ahead of its rows to choose the path that reads it: in column
    mapping id mode, whether it names its columns otherwise than the physical names (read by
    field id); under a string filter, whether it stores the column as a string_view (cast before
    the filter). When that read failed and the file's own read then did not, the file took the
    dataset path, which finds columns by name: an id-mode file named the Iceberg way read as
    NULLs (its rows silently left out by the filter), and a string_view file failed the scan
    (no kernel for string = string_view)."""
    import json

    import pyarrow.parquet as pq

    fs, root = flaky

    def table(name: str, schema: dict, config: dict, files: dict[str, pa.Table]) -> str:
        features = ["columnMapping"] if config else []
        protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": features}
        protocol["writerFeatures"] = features
        actions = [{"protocol": protocol}, metadata_action(schema, configuration=config, table_id=name)]
        for file, rows in files.items():
            pq.write_table(rows, tmp_path / file)
            data = (tmp_path / file).read_bytes()
            fs.pipe(f"{root}/{name}/{file}", data)
            add = {"path": file, "partitionValues": {}, "size": len(data), "modificationTime": 0}
            actions.append({"add": add | {"dataChange": True}})
        log = "".join(json.dumps(a) + "\n" for a in actions)
        fs.pipe(f"{root}/{name}/_delta_log/{0:020d}.json", log.encode())
        return f"ddflaky://{root}/{name}"

    def field(name: str, typ: str, fid: int) -> dict:
        md = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": f"col-{fid}"}
        return {"name": name, "type": typ, "nullable": True, "metadata": md}

    def rows(names: tuple[str, str], ids: list[int], text: pa.DataType = pa.string()) -> pa.Table:
        fields = [
            pa.field(n, t, metadata={"PARQUET:field_id": str(i + 1)})
            for i, (n, t) in enumerate(zip(names, (pa.int64(), text), strict=True))
        ]
        return pa.table(
            [pa.array(ids, pa.int64()), pa.array([f"v{i}" for i in ids], text)], schema=pa.schema(fields)
        )

    by_id = table(
        "ids",
        {"type": "struct", "fields": [field("id", "long", 1), field("s", "string", 2)]},
        {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": "2"},
        {"spark.parquet": rows(("col-1", "col-2"), [1, 2]), "iceberg.parquet": rows(("id", "s"), [3, 4])},
    )
    plain_schema = {
        "type": "struct",
        "fields": [
            {"name": n, "type": t, "nullable": True, "metadata": {}}
            for n, t in (("id", "long"), ("s", "string"))
        ],
    }
    views = table(
        "views",
        plain_schema,
        {},
        {"a.parquet": rows(("id", "s"), [1, 2]), "b.parquet": rows(("id", "s"), [3, 4], pa.string_view())},
    )
    want = [{"id": i, "s": f"v{i}"} for i in (2, 3, 4)]
    for uri, victim in ((by_id, "iceberg.parquet"), (views, "b.parquet")):
        _FlakyMemoryFS.broken = {victim: "once"}
        got = dd.DeltaTable(uri).snapshot().scan(predicate="s >= 'v2'").to_table()
        assert "once" not in _FlakyMemoryFS.broken.values()  # the premise: a read of it failed
        assert sorted(got.to_pylist(), key=lambda r: r["id"]) == want, uri
        _FlakyMemoryFS.broken = {victim: "once"}
        ctx = SessionContext()
        dd.register_table(ctx, "t", uri)
        assert ctx.sql("SELECT * FROM t WHERE s >= 'v2' ORDER BY id").to_pylist() == want, uri


def test_a_failing_table_leaves_only_itself_out_of_a_catalog(flaky) -> None:
    """information_schema: a store error on one table's log hid every table of the catalog
    (DataFusion drops the whole list when listing raises anything but the package's errors)."""
    fs, root = flaky
    for name in ("a", "b", "c"):
        _upload(fs, corpus_table("cdf-table"), f"{root}/{name}")
    _FlakyMemoryFS.broken = {f"{root}/b/_delta_log/00000000000000000000.json": "error"}
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", f"ddflaky://{root}")
    names = ctx.sql(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'lake' AND table_schema = 'default'"
    ).to_pydict()
    assert sorted(names["table_name"]) == ["a", "c"]


@pytest.fixture
def ftp_root(tmp_path) -> Iterator[tuple[Path, str]]:
    """(a local folder, the ``ftp://127.0.0.1:<port>`` URL serving it read-only): a real FTP server
    (pyftpdlib) on a thread, stopped afterwards."""
    yield from _ftp_serving(tmp_path / "served")


def _ftp_serving(root: Path, login: tuple[str, str] | None = None) -> Iterator[tuple[Path, str]]:
    """``root`` served read-only by a real FTP server (pyftpdlib) on a thread: anonymously, or to
    the one ``login`` (user, password) given."""
    import logging
    import threading

    from pyftpdlib.authorizers import DummyAuthorizer
    from pyftpdlib.handlers import FTPHandler
    from pyftpdlib.servers import FTPServer

    logging.getLogger("pyftpdlib").setLevel(logging.WARNING)
    root.mkdir()
    authorizer = DummyAuthorizer()
    if login is None:
        authorizer.add_anonymous(str(root))
    else:
        authorizer.add_user(login[0], login[1], str(root))
    handler = type("Handler", (FTPHandler,), {"authorizer": authorizer})
    server = FTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"timeout": 0.1}, daemon=True)
    thread.start()
    try:
        yield root, f"ftp://127.0.0.1:{server.socket.getsockname()[1]}"
    finally:
        server.close_all()
        thread.join()


@pytest.mark.filterwarnings("ignore:The asyn(core|chat) module is deprecated:DeprecationWarning")
def test_ftp_tables_read_through_one_connection_at_a_time(ftp_root) -> None:
    """fsspec's FTP filesystem is one ftplib connection, which threads cannot share, and the
    package reads commits, checkpoint leaves and data files on threads: reads from a real FTP
    server failed nearly every time (mixed replies, hung transfers). Its calls now take turns;
    every route gives the local copy's rows, and the change feed its commit times (the MLSD
    listing's ``modify`` facts)."""
    import deltalake

    local, url = ftp_root
    t = local / "t"
    conf = {"delta.enableChangeDataFeed": "true"}
    for i in range(12):
        rows = pa.table({"id": list(range(i * 10, i * 10 + 10)), "p": [i % 3] * 10})
        deltalake.write_deltalake(str(t), rows, mode="append", partition_by=["p"], configuration=conf)
        if i == 5:
            deltalake.DeltaTable(str(t)).create_checkpoint()
    remote = f"{url}/t"
    assert dd.DeltaTable(remote).snapshot().scan().to_table().sort_by("id") == (
        dd.DeltaTable(str(t)).snapshot().scan().to_table().sort_by("id")
    )
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", remote)
    dd.register_catalog(ctx, "ftp", url)
    total = {"n": [120], "s": [sum(range(120))]}
    assert ctx.sql("SELECT count(*) AS n, sum(id) AS s FROM t WHERE id >= 0").to_pydict() == total
    assert ctx.sql("SELECT count(*) AS n, sum(id) AS s FROM ftp.default.t").to_pydict() == total
    assert ctx.sql("SELECT id FROM t WHERE p = 1 AND id < 50 ORDER BY id").to_pydict() == {
        "id": list(range(10, 20)) + list(range(40, 50))
    }
    changes = ctx.sql(
        f"SELECT _commit_version AS v, count(*) AS n, min(_commit_timestamp) AS ts FROM table_changes('{remote}', 3) "
        "GROUP BY 1 ORDER BY 1"
    ).to_pydict()
    assert changes["v"] == list(range(3, 12)) and changes["n"] == [10] * 9
    assert all(ts is not None for ts in changes["ts"]) and changes["ts"] == sorted(changes["ts"])
    cached = f"simplecache::{remote}"  # a chained URL whose inner store is FTP takes turns too
    assert dd.DeltaTable(cached).snapshot().scan(columns=["id"]).to_table().num_rows == 120


@pytest.mark.filterwarnings("ignore:The asyn(core|chat) module is deprecated:DeprecationWarning")
def test_ftp_login_options_may_decode_the_urls_and_an_ipv6_host_drop_its_brackets(tmp_path) -> None:
    """A URL's user and password are percent-encoded (``ann%40example.com``, as fsspec hands them
    on), an IPv6 host is bracketed (and without a port fsspec cuts it at its last colon): options
    naming the same login decoded, or the same host bare, were refused as naming another store.
    A login differing only in case is another user (another home folder): refused, as another
    password is, which no message shows."""
    import socket

    user, password = "Ann@example.com", "p@ss:w/rd"
    served = _ftp_serving(tmp_path / "served", (user, password))
    local, url = next(served)
    try:
        import deltalake

        deltalake.write_deltalake(str(local / "t"), pa.table({"x": [1, 2]}))
        port = url.rsplit(":", 1)[1]
        remote = f"ftp://Ann%40example.com:p%40ss%3Aw%2Frd@127.0.0.1:{port}/t"
        decoded = {"username": user, "password": password}
        assert dd.DeltaTable(remote, decoded).snapshot().scan().to_table().column("x").to_pylist() == [1, 2]
        for other in ({"username": "ann@example.com"}, {"password": "P@ss:w/rd"}):
            with pytest.raises(dd.errors.ArgumentError, match="names another store") as caught:
                dd.DeltaTable(remote, {**decoded, **other})
            assert "w/rd" not in str(caught.value) and "w%2Frd" not in str(caught.value)
    finally:
        next(served, None)
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    loopback = "0:0:0:0:0:0:0:1"  # written in full: '::' would read as a chained URL
    for uri in (f"ftp://[{loopback}]:{closed}/t", f"ftp://[{loopback}]/t"):
        with pytest.raises(dd.StorageError, match="cannot open filesystem"):  # not refused: tried
            dd.DeltaTable(uri, {"host": loopback, "port": closed, "timeout": 2})
    with pytest.raises(dd.errors.ArgumentError, match="'host' names another store"):
        dd.DeltaTable(f"ftp://[{loopback}]:{closed}/t", {"host": "0:0:0:0:0:0:0:2"})


def test_a_gist_token_in_the_url_and_another_in_the_options_are_not_shown() -> None:
    """fsspec's gist store takes a URL's password as its token: refused when an option gives
    another, without showing either (the message showed both)."""
    pytest.importorskip("requests")
    with pytest.raises(dd.errors.ArgumentError, match="'token' names another store") as caught:
        dd.DeltaTable("gist://:urltoken123@abc/t", {"token": "optiontoken456"})
    assert "urltoken123" not in str(caught.value) and "optiontoken456" not in str(caught.value)


def test_ftp_listing_times_are_commit_times() -> None:
    """An FTP listing (MLSD) gives modification times as ``modify`` facts, YYYYMMDDHHMMSS[.fff]
    in UTC (RFC 3659): read as such, where the change feed and time travel by timestamp failed
    ("FTPFileSystem gives no modification time")."""
    import datetime as dt

    from delta_datafusion.storage import _mtime_ms

    at = dt.datetime(2024, 5, 1, 12, 30, 15, tzinfo=dt.timezone.utc)
    assert _mtime_ms({"modify": "20240501123015"}) == int(at.timestamp()) * 1000
    assert _mtime_ms({"modify": "20240501123015.25"}) == int(at.timestamp()) * 1000 + 250
    assert _mtime_ms({"modify": "2024-05-01"}) is None  # not the fact's form: no time


def test_listing_times_keep_their_millisecond() -> None:
    """Store listings give times as datetimes (s3fs, adlfs), ISO text (gcsfs) or seconds
    (SFTP, in-memory stores). Through ``int(seconds * 1000)`` a whole millisecond could read as
    the one before (2004-05-11T10:12:09.281Z gave ...280: the float product rounds below the
    integer near 2004 and 2038); each form now reads its own millisecond."""
    import datetime as dt

    from delta_datafusion.storage import _mtime_ms

    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    for at in (
        dt.datetime(2004, 5, 11, 10, 12, 9, 281000, tzinfo=dt.timezone.utc),
        dt.datetime(2038, 6, 1, 8, 0, 0, 7000, tzinfo=dt.timezone.utc),
        dt.datetime(2023, 11, 14, 22, 13, 20, 123999, tzinfo=dt.timezone.utc),
    ):
        ms = (at - epoch) // dt.timedelta(milliseconds=1)
        assert _mtime_ms({"LastModified": at}) == ms, at
        assert _mtime_ms({"last_modified": at.replace(tzinfo=None)}) == ms, at  # naive: UTC
        assert _mtime_ms({"updated": at.isoformat().replace("+00:00", "Z")}) == ms, at
        assert _mtime_ms({"created": (at - epoch).total_seconds()}) == ms, at
    assert _mtime_ms({"mtime": 1_700_000_000}) == 1_700_000_000_000
    assert _mtime_ms({"mtime": "abc", "created": 1.5}) == 1500  # a field that is no time is skipped


def test_a_store_that_cannot_be_reached_raises_storage_error():
    """README: a request the store fails (a network error) raises StorageError. fsspec's FTP
    filesystem connects when it is opened, so the refusal comes before any listing."""
    import socket

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(dd.StorageError, match=f"cannot open filesystem for 'ftp://127.0.0.1:{port}/t'"):
        dd.DeltaTable(f"ftp://127.0.0.1:{port}/t").snapshot()


@pytest.mark.parametrize("errno_, text", [(-2, "Name or service not known"), (113, "No route to host")])
def test_a_host_that_cannot_be_found_or_routed_to_raises_storage_error(monkeypatch, errno_, text):
    """A name that does not resolve (socket.gaierror) or a host with no route (EHOSTUNREACH) are
    OSErrors but not ConnectionErrors: opening the FTP filesystem raised a bare DeltaError."""
    import socket

    def fail(*args, **kwargs):
        raise (socket.gaierror if errno_ < 0 else OSError)(errno_, text)

    monkeypatch.setattr(socket, "create_connection", fail)
    with pytest.raises(
        dd.StorageError, match=f"cannot open filesystem for 'ftp://no-such-host.invalid/t'.*{text}"
    ):
        dd.DeltaTable("ftp://no-such-host.invalid/t").snapshot()


class _LoginMemoryFS(MemoryFileSystem):
    """An in-memory store whose URL carries a login, as ftp://user:password@host/... does."""

    protocol = "ddlogin"

    def __init__(self, host=None, port=None, username=None, password=None, **kwargs):
        super().__init__(**kwargs)

    @classmethod
    def _strip_protocol(cls, path):
        from fsspec.utils import infer_storage_options

        return super()._strip_protocol(infer_storage_options(path)["path"]) if "://" in path else path

    @staticmethod
    def _get_kwargs_from_urls(path):
        from fsspec.utils import infer_storage_options

        opts = infer_storage_options(path)
        return {k: opts[k] for k in ("host", "port", "username", "password") if k in opts}


def test_a_missing_table_is_named_without_the_urls_password():
    """The not-found error names an object store's table by its URL (not the bare path), and an
    unreachable store's by the URL given: a URL carrying a password showed it in the message."""
    fsspec.register_implementation("ddlogin", _LoginMemoryFS, clobber=True)
    with pytest.raises(
        dd.TableNotFoundError, match=r"^ddlogin://reader:\*\*\*@host:21/no/t is not a Delta"
    ) as e:
        dd.DeltaTable("ddlogin://reader:s3cret@host:21/no/t").snapshot()
    assert "s3cret" not in str(e.value)
    import socket

    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(dd.StorageError, match=rf"'ftp://reader:\*\*\*@127.0.0.1:{port}/t'") as e:
        dd.DeltaTable(f"ftp://reader:s3cret@127.0.0.1:{port}/t").snapshot()
    assert "s3cret" not in str(e.value)


def test_no_message_shows_the_password_of_a_tables_url(tmp_path: Path):
    """Messages name tables and data files by URL: on a store whose URL carries a login, a
    change feed refused for its table (CDF off) and a missing data file showed the password."""
    from deltalake import write_deltalake

    fsspec.register_implementation("ddlogin", _LoginMemoryFS, clobber=True)
    local = tmp_path / "t"
    write_deltalake(str(local), pa.table({"id": [1, 2]}))
    mem = MemoryFileSystem()
    root = f"/login-{uuid.uuid4().hex}"
    mem.put(str(local), root, recursive=True)
    table = dd.DeltaTable(f"ddlogin://reader:s3cret@host:21{root}")
    assert table.snapshot().scan().to_table().num_rows == 2
    with pytest.raises(dd.CdfNotEnabledError) as e:
        table.changes(0).to_table()
    assert "reader:***@host" in str(e.value) and "s3cret" not in str(e.value)
    for f in mem.find(root):
        if f.endswith(".parquet"):
            mem.rm(f)
    with pytest.raises(dd.DeltaError) as e:
        dd.DeltaTable(f"ddlogin://reader:s3cret@host:21{root}").snapshot().scan().to_table()
    assert "reader:***@host" in str(e.value) and "s3cret" not in str(e.value)


def test_a_table_pickles_after_its_store_connected(tmp_path):
    """A DeltaTable (and its Storage) pickled, e.g. to send it to a process pool or a Dask worker,
    also after its filesystem was made: the per-instance locks of its cached values are not
    pickled (a lock cannot be), and the copy builds its own."""
    import pickle

    import deltalake

    t = tmp_path / "t"
    deltalake.write_deltalake(str(t), pa.table({"id": [1, 2, 3]}))
    table = dd.DeltaTable(str(t))
    table.storage.fs, table.storage.arrow_fs  # noqa: B018 - made (and locked) before the pickle
    copy = pickle.loads(pickle.dumps(table))
    assert copy.snapshot().scan().to_table().column("id").to_pylist() == [1, 2, 3]
    assert copy.storage.fs is not None


def test_a_table_pickles_after_its_checkpoint_was_read(tmp_path):
    """A DeltaTable pickled after a snapshot read its checkpoint: the handle's open checkpoint
    reader and its lock are not pickled (a lock cannot be: 'cannot pickle _thread.lock'); the
    copy opens its own."""
    import pickle

    import deltalake

    t = str(tmp_path / "t")
    for i in range(3):
        deltalake.write_deltalake(t, pa.table({"id": [i]}), mode="append")
    deltalake.DeltaTable(t).create_checkpoint()
    table = dd.DeltaTable(t)
    assert table.snapshot().scan().to_table().num_rows == 3  # the checkpoint read
    copy = pickle.loads(pickle.dumps(table))
    assert sorted(copy.snapshot().scan().to_table().column("id").to_pylist()) == [0, 1, 2]


class _BucketMemoryFS(MemoryFileSystem):
    """The in-memory store naming files as object stores do (s3fs, gcsfs, adlfs): ``bucket/key``,
    with no leading slash."""

    protocol = "ddbucket"
    root_marker = ""

    @classmethod
    def _strip_protocol(cls, path):
        if path.startswith("ddbucket://"):
            path = path[len("ddbucket://") :]
        return path.strip("/")

    def split_path(self, path):
        """Bucket and key, as s3fs, gcsfs and adlfs split a path."""
        bucket, _, key = self._strip_protocol(path).partition("/")
        return bucket, key


def _paths(batches) -> list[str]:
    return sorted(p for m in batches for p in m.files.column("path").to_pylist())


@pytest.mark.parametrize("name", ["v2-checkpoint-parquet", "v1-multi-part-struct-stats-only"])
def test_parallel_scan_metadata_on_a_bucket_store(name: str) -> None:
    """The parallel phase's leaves carry the store's own paths (``container/t/_delta_log/...``
    on Azure, S3 and GCS): they were taken as paths relative to the table root and refused as
    "not in" its log folder, so every checkpointed table on such a store failed."""
    from delta_datafusion.parallel import ParallelScanMetadata, run_parallel, split_leaves

    fsspec.register_implementation("ddbucket", _BucketMemoryFS, clobber=True)
    fs = fsspec.filesystem("ddbucket")
    bucket = f"dd-bucket-{uuid.uuid4().hex}"
    local = corpus_table(name)
    try:
        for dirpath, _dirs, files in os.walk(local):
            for f in files:
                path = Path(dirpath) / f
                fs.pipe(f"{bucket}/t/{path.relative_to(local).as_posix()}", path.read_bytes())
        uri = f"ddbucket://{bucket}/t"
        want = _paths(dd.DeltaTable(str(local)).snapshot().scan().scan_metadata())
        assert want and _paths(run_parallel(dd.DeltaTable(uri).snapshot().scan())) == want
        # the leaves split over workers, each with the state's bytes
        phase = dd.DeltaTable(uri).snapshot().scan().parallel_scan_metadata()
        first = list(phase)
        after = phase.finish()
        assert after.files and all(f.path.startswith(f"{bucket}/t/_delta_log/") for f in after.files)
        groups = split_leaves(after.files, 2, after.state.storage)
        leaves = [m for g in groups for m in ParallelScanMetadata(after.state.to_bytes(), g)]
        assert _paths(first + leaves) == want
        # a leaf of another table in the same bucket is still refused
        other = after.files[0].path.replace(f"{bucket}/t/", f"{bucket}/u/")
        with pytest.raises(dd.ParallelStateError, match="is not in"):
            list(ParallelScanMetadata(after.state, [other]))
    finally:
        fs.rm(bucket, recursive=True)


def test_an_absolute_log_path_on_a_bucket_store_is_in_the_tables_bucket() -> None:
    """A log path '/t/part-1.parquet' (absolute, no scheme) on a bucket store names a file in the
    table's own bucket, as the URL reference resolves against s3://bkt/t/ (delta-kernel-rs joins it
    so). It was read as 'bucket/key' of a bucket named 't': its remove written as the full URI
    did not cancel it, and files() kept the removed file."""
    import io
    import json

    import pyarrow.parquet as pq

    fsspec.register_implementation("ddbucket", _BucketMemoryFS, clobber=True)
    fs = fsspec.filesystem("ddbucket")
    bucket = f"dd-bucket-{uuid.uuid4().hex}"
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}

    def data(ids: list[int]) -> bytes:
        out = io.BytesIO()
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)
        return out.getvalue()

    def add(path: str, body: bytes) -> dict:
        return {
            "add": {
                "path": path,
                "partitionValues": {},
                "size": len(body),
                "modificationTime": 1,
                "dataChange": True,
            }
        }

    first, second = data([1, 2]), data([3])
    commits = [
        [
            {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
            metadata_action(schema),
            add("part-0.parquet", first),
        ],
        [add("/t/part-1.parquet", second)],
        [
            {
                "remove": {
                    "path": f"ddbucket://{bucket}/t/part-1.parquet",
                    "deletionTimestamp": 2,
                    "dataChange": True,
                }
            }
        ],
    ]
    try:
        fs.pipe(f"{bucket}/t/part-0.parquet", first)
        fs.pipe(f"{bucket}/t/part-1.parquet", second)
        for v, actions in enumerate(commits):
            text = "\n".join(json.dumps(a) for a in actions) + "\n"
            fs.pipe(f"{bucket}/t/_delta_log/{v:020d}.json", text.encode())
        table = dd.DeltaTable(f"ddbucket://{bucket}/t")
        assert table.snapshot(1).files().column("location").to_pylist() == [
            f"{bucket}/t/part-0.parquet",
            f"{bucket}/t/part-1.parquet",
        ]
        assert sorted(table.snapshot(1).scan().to_table().column("id").to_pylist()) == [1, 2, 3]
        assert table.snapshot(2).files().column("location").to_pylist() == [f"{bucket}/t/part-0.parquet"]
        ctx = SessionContext()
        dd.register_table(ctx, "t", f"ddbucket://{bucket}/t")
        assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict() == {"n": [2]}
    finally:
        fs.rm(bucket, recursive=True)


@pytest.mark.parametrize(
    ("path", "removed_as"),
    [
        ("/t//part-1.parquet", "ddbucket://{bucket}/t//part-1.parquet"),
        ("ddbucket://{bucket}/t//part-1.parquet", "/t//part-1.parquet"),
        ("x//part-1.parquet", "ddbucket://{bucket}/t/x//part-1.parquet"),
        ("//t/part-1.parquet", "ddbucket://{bucket}/t/part-1.parquet"),
    ],
)
def test_a_log_path_with_an_empty_segment_on_a_bucket_store_is_refused(
    tmp_path, path: str, removed_as: str
) -> None:
    """A key with an empty segment ('//') names no one object of a bucket ('t//x' and 't/x' are
    two objects): delta-rs (deltalake 1.6 on a moto S3 server) drops empty segments and reads
    '/t//x' and '//t/x' as 't/t/x' (relative), delta-kernel-rs refuses such a key, and a leading
    '//' is a URL naming another bucket. Ours folded '/t//x' to 't/x' but kept 'x//y' and the URI
    form's '//': the same file written both ways was two files, so a remove in the other
    spelling did not cancel the add and files() kept a removed file. Refused, naming the path;
    a local folder's 'x//y' is one folder as before."""
    keys = ("t//part-1.parquet", "t/part-1.parquet", "t/x//part-1.parquet", "t/x/part-1.parquet")
    with _added_then_removed(path, removed_as, keys) as (uri, path, commits, body):
        refused = re.escape(repr(path)) + r", a key with an empty segment \('//'\)"
        for version in (1, 2):
            with pytest.raises(dd.UnsupportedFeatureError, match=refused):
                dd.DeltaTable(uri).snapshot(version).files()
        with pytest.raises(dd.UnsupportedFeatureError, match=refused):
            dd.DeltaTable(uri).snapshot().scan().to_table()
        ctx = SessionContext()
        with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
            dd.register_table(ctx, "t", uri)
            ctx.sql("SELECT * FROM t").collect()
        assert isinstance(dd.from_datafusion(info.value), dd.UnsupportedFeatureError), info.value
    if path.startswith("x//"):  # a local folder: the same log reads
        import json

        local = tmp_path / "t"
        (local / "x").mkdir(parents=True)
        (local / "x" / "part-1.parquet").write_bytes(body)
        (local / "_delta_log").mkdir()
        for v, actions in enumerate(commits[:2]):
            text = "".join(json.dumps(a) + "\n" for a in actions)
            (local / "_delta_log" / f"{v:020d}.json").write_text(text)
        assert dd.DeltaTable(str(local)).snapshot().scan().to_table().column("id").to_pylist() == [1]


@contextlib.contextmanager
def _added_then_removed(path: str, removed_as: str, keys: tuple[str, ...]) -> Iterator[tuple]:
    """A one-column table in a fresh bucket of the bucket-style store: version 1 adds the file
    at log path ``path``, version 2 removes it as ``removed_as`` (both may name the bucket as
    '{bucket}'); a one-row parquet file is stored at each of ``keys`` (under the bucket). Yields
    (the table's URI, ``path`` formatted, the commits' actions, the file's bytes); the bucket
    is removed afterwards."""
    import io
    import json

    import pyarrow.parquet as pq

    fsspec.register_implementation("ddbucket", _BucketMemoryFS, clobber=True)
    fs = fsspec.filesystem("ddbucket")
    bucket = f"dd-bucket-{uuid.uuid4().hex}"
    path = path.format(bucket=bucket)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    out = io.BytesIO()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), out)
    body = out.getvalue()
    add = {"path": path, "partitionValues": {}, "size": len(body), "modificationTime": 1}
    start = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, metadata_action(schema)]
    remove = {"path": removed_as.format(bucket=bucket), "deletionTimestamp": 2, "dataChange": True}
    commits = [start, [{"add": add | {"dataChange": True}}], [{"remove": remove}]]
    try:
        for key in keys:
            fs.pipe(f"{bucket}/{key}", body)
        for v, actions in enumerate(commits):
            text = "".join(json.dumps(a) + "\n" for a in actions)
            fs.pipe(f"{bucket}/t/_delta_log/{v:020d}.json", text.encode())
        yield f"ddbucket://{bucket}/t", path, commits, body
    finally:
        fs.rm(bucket, recursive=True)


@pytest.mark.parametrize(
    ("path", "removed_as"),
    [
        ("../u/part-1.parquet", "ddbucket://{bucket}/u/part-1.parquet"),
        ("ddbucket://{bucket}/t/../u/part-1.parquet", "../u/part-1.parquet"),
        ("/t/../u/part-1.parquet", "ddbucket://{bucket}/t/x/../../u/part-1.parquet"),
        ("./x/./part-1.parquet", "x/part-1.parquet"),
    ],
)
def test_a_log_paths_dot_segments_on_a_bucket_store_are_resolved(path: str, removed_as: str) -> None:
    """Dot segments of a key are resolved as in a URL ('t/../u/x' is 'u/x'), as delta-kernel-rs
    (a URL join, checked in its scan) and Spark (Hadoop paths are normalized URIs) read them.
    Ours resolved them only in '/t/../u/x' (posixpath.normpath) and asked the bucket for the key
    't/../u/x' as written for a relative path and the URI form (a moto S3 server keeps such a
    key as one object): the same file written two ways was two files, and files() kept a
    removed one."""
    keys = ("u/part-1.parquet", "t/x/part-1.parquet")
    with _added_then_removed(path, removed_as, keys) as (uri, _path, _commits, _body):
        bucket = uri.removeprefix("ddbucket://").split("/", 1)[0]
        key = "t/x" if "x/" in _path else "u"
        table = dd.DeltaTable(uri)
        assert table.snapshot(1).files().column("location").to_pylist() == [f"{bucket}/{key}/part-1.parquet"]
        assert table.snapshot(1).scan().to_table().column("id").to_pylist() == [1]
        assert table.snapshot(2).files().num_rows == 0


class _BlobNotFound(Exception):
    """Like azure.core's ResourceNotFoundError: not an OSError; its HTTP status says what it is."""

    status_code = 404


class _AzureLikeFile(AbstractBufferedFile):
    """A blob opened with a known size: no request until the first read, which fails for a blob
    deleted since with the store's own error (adlfs lets ResourceNotFoundError through there)."""

    def _fetch_range(self, start, end):
        data = MemoryFileSystem.store.get(self.path)
        if data is None:
            raise _BlobNotFound("The specified blob does not exist.\nErrorCode:BlobNotFound")
        return data.getvalue()[start:end]


class _AzureLikeMemoryFS(MemoryFileSystem):
    """The in-memory store opening files of a known size as adlfs does; ``before_open`` (a
    callable taking the path) runs first, e.g. a concurrent log cleanup."""

    protocol = "ddazurelike"
    before_open = None

    def _open(self, path, mode="rb", size=None, **kwargs):
        if type(self).before_open is not None:
            type(self).before_open(self._strip_protocol(path))
        if size is None:
            return super()._open(path, mode=mode, **kwargs)
        return _AzureLikeFile(self, self._strip_protocol(path), mode, size=size, cache_type="none")


@pytest.fixture
def azure_like(store):
    fsspec.register_implementation("ddazurelike", _AzureLikeMemoryFS, clobber=True)
    yield store
    _AzureLikeMemoryFS.before_open = None


def test_a_blob_deleted_after_listing_is_missing_not_a_store_failure(azure_like, tmp_path) -> None:
    """A commit removed between the listing and its read on a store whose reads report it with
    their own not-found error (adlfs: azure's ResourceNotFoundError, HTTP 404, not an OSError)
    was a StorageError: the snapshot did not list again after a concurrent log cleanup, and a
    pinned listing's error did not say the commit was gone."""
    from deltalake import DeltaTable as WriterTable
    from deltalake import write_deltalake

    fs, root = azure_like
    local = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(local), pa.table({"id": [i]}), mode="append")
    uri = f"ddazurelike://{root}"
    _upload(fs, local, root)
    table = dd.DeltaTable(uri)
    listing = table.listing()
    fs.rm(f"{root}/_delta_log/00000000000000000001.json")
    with pytest.raises(dd.MissingLogFileError, match=r"00000000000000000001\.json disappeared"):
        table.snapshot(listing=listing)

    # a checkpoint and log cleanup between a snapshot's listing and its commit reads
    WriterTable(str(local)).create_checkpoint()
    _upload(fs, local, root)
    for name in ("00000000000000000002.checkpoint.parquet", "_last_checkpoint"):
        fs.rm(f"{root}/_delta_log/{name}")
    cleaned: list[str] = []

    def cleanup(path: str) -> None:
        if not cleaned and path.endswith(".json"):
            cleaned.append(path)
            for name in ("00000000000000000002.checkpoint.parquet", "_last_checkpoint"):
                fs.pipe(f"{root}/_delta_log/{name}", (local / "_delta_log" / name).read_bytes())
            for v in (0, 1):
                fs.rm(f"{root}/_delta_log/{v:020d}.json")

    _AzureLikeMemoryFS.before_open = staticmethod(cleanup)
    snap = dd.DeltaTable(uri).snapshot()
    assert cleaned and snap.version == 2
    assert sorted(snap.scan().to_table().column("id").to_pylist()) == [0, 1, 2]


@pytest.fixture
def web_server(tmp_path) -> Iterator[tuple[Path, str]]:
    """(folder, its URL): the folder served by Python's HTTP server on 127.0.0.1 (no Range
    support, no modification times: enough for a table's snapshot and a scan of small files)."""
    for folder, url, _refused in _web_serving(tmp_path / "served"):
        yield folder, url


@pytest.fixture
def refusing_web_server(tmp_path) -> Iterator[tuple[Path, str, dict[str, int]]]:
    """:func:`web_server`, with a dict: a request for a path ending in one of its keys is
    answered with that key's HTTP status (403, 500), as a server refusing one file does."""
    yield from _web_serving(tmp_path / "served")


@pytest.fixture
def ranged_web_server(tmp_path) -> Iterator[tuple[Path, str]]:
    """:func:`web_server` answering Range requests (``bytes=a-b``) as web servers and object
    stores' HTTP endpoints do: parquet footers (a checkpoint's) are read by ranges."""
    for folder, url, _refused in _web_serving(tmp_path / "served", ranges=True):
        yield folder, url


def _web_serving(folder: Path, ranges: bool = False) -> Iterator[tuple[Path, str, dict[str, int]]]:
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    pytest.importorskip("aiohttp")
    refused: dict[str, int] = {}

    class _Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_head(self):
            status = next((v for k, v in refused.items() if self.path.endswith(k)), None)
            if status is not None:
                self.send_error(status)
                return None
            return super().send_head()

        def do_GET(self):
            wanted = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", "")) if ranges else None
            if wanted is None:
                return super().do_GET()
            data = Path(self.translate_path(self.path)).read_bytes()
            start = int(wanted.group(1))
            end = min(int(wanted.group(2)) if wanted.group(2) else len(data) - 1, len(data) - 1)
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.send_header("Content-Length", str(end + 1 - start))
            self.end_headers()
            self.wfile.write(data[start : end + 1])
            return None

    folder.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield folder, f"http://127.0.0.1:{server.server_address[1]}", refused
    server.shutdown()
    server.server_close()


def test_a_data_file_a_web_server_answers_404_is_missing(web_server) -> None:
    """aiohttp's error for a 404 carries ``.status``, not ``.status_code``: a data file gone from
    a web server was a StorageError ("cannot read data file ...: ClientResponseError: 404"), a
    failed request a retry may mend, where local folders and other stores say the file is missing
    (DataFileNotFoundError)."""
    import shutil

    folder, url = web_server
    shutil.copytree(corpus_table("table-with-dv-small"), folder / "t")
    data = next((folder / "t").glob("*.parquet"))
    data.unlink()
    for uri in (str(folder / "t"), f"{url}/t"):
        with pytest.raises(dd.DataFileNotFoundError, match=re.escape(data.name) + ".* is missing"):
            dd.DeltaTable(uri).snapshot().scan().to_table()


def test_a_checkpoint_a_web_server_lists_without_a_size_is_read(ranged_web_server) -> None:
    """fsspec's HTTP listing gives no sizes ("size": None): the listing read that as 0 bytes, so
    every checkpoint served over HTTP was ignored as empty, and a table whose commits before its
    checkpoint were cleaned up failed ("commit 0 is missing ... empty checkpoint files (0 bytes)
    ignored") though it reads from a local folder. An unknown size is asked of the store, and a
    checkpoint is ignored only when it is 0 bytes."""
    deltalake = pytest.importorskip("deltalake")
    folder, url = ranged_web_server
    local = folder / "t"
    for i in range(3):
        deltalake.write_deltalake(str(local), pa.table({"x": [i]}), mode="append")
    deltalake.DeltaTable(str(local)).create_checkpoint()
    deltalake.write_deltalake(str(local), pa.table({"x": [9]}), mode="append")
    for v in (0, 1):  # a log cleanup up to the checkpoint at version 2
        (local / "_delta_log" / f"{v:020d}.json").unlink()
    for uri in (str(local), f"{url}/t"):
        snap = dd.DeltaTable(uri).snapshot()
        assert snap.version == 3
        assert sorted(snap.scan().to_table().column("x").to_pylist()) == [0, 1, 2, 9]


def test_a_checkpoint_of_0_bytes_a_web_server_lists_without_a_size_is_ignored(web_server) -> None:
    """The other side of the rule above: a checkpoint that is 0 bytes on the server (a writer that
    failed) is still ignored, as from a local folder, and the commits give the table."""
    deltalake = pytest.importorskip("deltalake")
    folder, url = web_server
    local = folder / "t"
    for i in range(3):
        deltalake.write_deltalake(str(local), pa.table({"x": [i]}), mode="append")
    (local / "_delta_log" / f"{2:020d}.checkpoint.parquet").write_bytes(b"")
    for uri in (str(local), f"{url}/t"):
        assert sorted(dd.DeltaTable(uri).snapshot().scan().to_table().column("x").to_pylist()) == [0, 1, 2]


def test_a_web_server_gives_no_commit_times_and_says_what_to_do(web_server) -> None:
    """fsspec's HTTP listing has no times, and a server's Last-Modified (a request per commit
    file) has whole seconds and is when its copy was written: cdf-table's four commits, copied
    within 3 ms, would all read as one second, every time unlike the local read's. The refusal
    said only that HTTPFileSystem gives no modification time; it says why and what to do. Reads
    by version, and timestamps of a table with in-commit timestamps, work."""
    import shutil

    folder, url = web_server
    for name in ("cdf-table", "cdc_ict_table"):
        shutil.copytree(corpus_table(name), folder / name)
    table = dd.DeltaTable(f"{url}/cdf-table")
    said = r"HTTPFileSystem gives no modification time .*whole seconds.*delta\.enableInCommitTimestamps"
    for refused in (
        table.history,
        lambda: table.snapshot(timestamp="2030-01-01"),
        lambda: table.changes(0).to_table(),
    ):
        with pytest.raises(dd.UnsupportedFeatureError, match=said):
            refused()
    local = dd.DeltaTable(str(folder / "cdf-table"))
    assert _rows(table.snapshot(2).scan().to_table()) == _rows(local.snapshot(2).scan().to_table())
    ict, local_ict = dd.DeltaTable(f"{url}/cdc_ict_table"), dd.DeltaTable(str(folder / "cdc_ict_table"))
    assert _rows(ict.changes(0).to_table()) == _rows(local_ict.changes(0).to_table())


def test_a_scan_reading_a_strings_footer_first_names_a_file_a_web_server_lacks(web_server) -> None:
    """A scan of string columns reads one file's footer first to choose their decoding, a probe
    whose failure the scan itself reports; the probe let aiohttp's own 404 error through (not an
    OSError), so the user got ``ClientResponseError: 404`` instead of the package's error naming
    the vacuumed file."""
    import shutil

    folder, url = web_server
    shutil.copytree(corpus_table("snapshot-vacuumed"), folder / "t")  # version 0's files are gone
    for uri in (str(folder / "t"), f"{url}/t"):
        with pytest.raises(dd.DataFileNotFoundError, match=r"part-00000-\S+\.parquet is missing"):
            dd.DeltaTable(uri).snapshot(0).scan(predicate="col1 >= 1").to_table()
        ctx = SessionContext()
        dd.register_table(ctx, "t", uri, version=0)
        with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
            ctx.sql("SELECT * FROM t WHERE col1 >= 1").collect()
        assert isinstance(dd.from_datafusion(info.value), dd.DataFileNotFoundError), info.value


@pytest.mark.parametrize("status", [403, 500])
def test_a_data_file_a_web_server_refuses_is_a_storage_error_naming_it(refusing_web_server, status) -> None:
    """A footer read ahead of a file's rows (the string decoding's probe of a filtered scan, here
    also of the change feed's) let a store's own error through as it was: aiohttp's
    ``ClientResponseError: 403`` (or 500) escaped the scan, where the read itself reports a store
    refusing a file as a StorageError naming it. Nothing is missing: no DataFileNotFoundError."""
    import shutil

    folder, url, refused = refusing_web_server
    shutil.copytree(corpus_table("snapshot-vacuumed"), folder / "t")
    shutil.copytree(corpus_table("cdc_ict_table"), folder / "c")  # in-commit timestamps: a feed on HTTP
    victim = sorted(p.name for p in (folder / "t").glob("*.parquet"))[0]  # the footer probed first
    added = "part-00000-5" + next(p.name for p in (folder / "c").rglob("part-00000-5*.parquet"))[12:]
    cdc = sorted(p.name for p in (folder / "c" / "_change_data").rglob("*.parquet"))[0]
    reads = [
        (victim, lambda: dd.DeltaTable(f"{url}/t").snapshot().scan(predicate="col1 >= 1").to_table()),
        (added, lambda: dd.DeltaTable(f"{url}/c").changes(0, predicate="age >= 0").to_table()),
        (cdc, lambda: dd.DeltaTable(f"{url}/c").changes(0).to_table()),
    ]
    for name, read in reads:
        refused.clear()
        refused[name] = status
        with pytest.raises(
            dd.StorageError, match=rf"cannot read (one of \d+ )?data files? .*{re.escape(name)}"
        ):
            read()
    refused.clear()
    refused[victim] = status
    ctx = SessionContext()
    dd.register_table(ctx, "t", f"{url}/t")
    with pytest.raises(Exception) as info:  # noqa: B017 - DataFusion flattens the type away
        ctx.sql("SELECT * FROM t WHERE col1 >= 1").collect()
    assert isinstance(dd.from_datafusion(info.value), dd.StorageError), info.value
    assert victim in str(info.value)


class _WebHdfsShapedFS(MemoryFileSystem):
    """An in-memory store whose listings are shaped as fsspec's WebHDFS gives them: the time is
    ``modificationTime`` (integer milliseconds, HDFS's FileStatus) and no other time field, and
    ``modified()`` is local wall-clock time without a zone (``datetime.fromtimestamp``)."""

    protocol = "ddwebhdfs"
    times: ClassVar[dict[str, int]] = {}

    def ls(self, path, detail=True, **kwargs):
        out = super().ls(path, detail=True, **kwargs)
        shaped = [
            {"name": e["name"], "length": e["size"], "size": e["size"], "type": e["type"]}
            | ({"modificationTime": self.times[e["name"]]} if e["name"] in self.times else {})
            for e in out
        ]
        return shaped if detail else [e["name"] for e in shaped]

    def info(self, path, **kwargs):
        e = super().info(path, **kwargs)
        name = e["name"]
        return {"name": name, "length": e["size"], "size": e["size"], "type": e["type"]} | (
            {"modificationTime": self.times[name]} if name in self.times else {}
        )

    def modified(self, path):
        import datetime as dt

        return dt.datetime.fromtimestamp(self.info(path)["modificationTime"] / 1000)


def test_webhdfs_listing_times_are_its_milliseconds(store) -> None:
    """fsspec's WebHDFS gives a file's time as ``modificationTime`` (ms), a key the listing did
    not read: commit times came from ``modified()``, a naive local time read as UTC, so on a
    machine whose zone is not UTC every commit time was off by the zone's offset."""
    fsspec.register_implementation("ddwebhdfs", _WebHdfsShapedFS, clobber=True)
    fs, root = store
    uri = _upload(fs, corpus_table("cdf-table"), f"{root}/cdf_table")
    commits = sorted(p for p in fs.find(f"{root}/cdf_table/_delta_log") if p.endswith(".json"))
    base = 1_700_000_000_123
    _WebHdfsShapedFS.times = {p: base + 1000 * i for i, p in enumerate(commits)}
    with in_zone("America/New_York"):
        history = dd.DeltaTable(uri.replace("memory://", "ddwebhdfs://")).history()
        assert history.column("timestamp").to_pylist() == [base + 1000 * i for i in range(len(commits))]
