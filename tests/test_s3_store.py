"""Tables in S3 read through s3fs from a moto S3 server on 127.0.0.1, as a user's bucket would be.

The in-memory filesystem of ``test_object_store.py`` names files ``/root/...``; s3fs names them
``bucket/key`` (no leading '/') and asks the store for a file's details before its first read
unless told otherwise, so paths, request counts and the store's own errors are checked here on
the real client library.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from conftest import corpus_table

s3fs = pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")
from datafusion import SessionContext  # noqa: E402
from moto.core.authorization import enable_iam_authentication  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.errors import from_datafusion  # noqa: E402

#: A V2 checkpoint with sidecars, a multi-part checkpoint, DVs with column mapping, escaped
#: partition folders and a change data feed.
TABLES = [
    "v2-checkpoints-json-with-sidecars",
    "v1-multi-part-struct-stats-only",
    "dv-with-columnmapping",
    "data-reader-escaped-chars",
    "cdf-table",
]


#: Addresses other than the loopback server's that a test tried to connect to (refused).
OFF_BOX: list[Any] = []


def _loopback_only(connect: Any) -> Any:
    def guarded(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1"):
            OFF_BOX.append(address)
            raise ConnectionRefusedError(f"test_s3_store: no connections off the machine ({address})")
        return connect(sock, address)

    return guarded


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """A moto S3 server on a free port of 127.0.0.1, stopped after the module's tests. botocore
    stays on this machine: no proxy from the environment (it carried the requests for 127.0.0.1
    to the proxy), no profile, config or endpoint of the user's, no EC2 metadata service; any
    other connection is refused and fails the test."""
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith("AWS_") or name.lower() in ("http_proxy", "https_proxy", "all_proxy"):
                mp.delenv(name)
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        for name in ("connect", "connect_ex"):
            mp.setattr(socket.socket, name, _loopback_only(getattr(socket.socket, name)))
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
        server.stop()


def _options(endpoint: str, **more: Any) -> dict[str, Any]:
    # a new s3fs instance per table: the request counts below see only their own calls
    return {"key": "k", "secret": "s", "endpoint_url": endpoint, "skip_instance_cache": True, **more}


@pytest.fixture
def bucket(endpoint: str) -> Iterator[tuple[Any, str]]:
    """(s3fs filesystem, a fresh bucket name); the bucket is removed afterwards."""
    OFF_BOX.clear()
    fs = s3fs.S3FileSystem(**_options(endpoint))
    name = f"dd-{uuid.uuid4().hex[:12]}"
    fs.mkdir(name)
    yield fs, name
    fs.rm(name, recursive=True)
    assert not OFF_BOX, f"connections off the machine: {OFF_BOX}"


def _upload(fs: Any, local: Path, prefix: str) -> str:
    for dirpath, _dirs, files in os.walk(local):
        for name in files:
            path = Path(dirpath) / name
            fs.pipe(f"{prefix}/{path.relative_to(local).as_posix()}", path.read_bytes())
    return f"s3://{prefix}"


def _rows(t: pa.Table) -> list[str]:
    return sorted(map(str, t.to_pylist()))


def _objects(fs: Any, prefix: str) -> dict[str, str]:
    fs.invalidate_cache()
    return {p: fs.info(p)["ETag"] for p in fs.find(prefix)}


def _parallel_files(snap: dd.Snapshot) -> list[str]:
    from delta_datafusion.parallel import Parallel, ParallelScanMetadata

    phase = snap.scan().parallel_scan_metadata()
    paths = [p for batch in phase for p in batch.files.column("path").to_pylist()]
    result = phase.finish()
    if isinstance(result, Parallel):
        for batch in ParallelScanMetadata(result.state.to_bytes(), result.files):
            paths += batch.files.column("path").to_pylist()
    return sorted(paths)


@pytest.fixture
def head_requests(monkeypatch) -> list[str]:
    """The keys s3fs sends HEAD requests for (a file's details)."""
    heads: list[str] = []
    call = s3fs.S3FileSystem._call_s3

    async def counting(self, method, *args, **kwargs):
        if method == "head_object":
            heads.append(kwargs.get("Key", ""))
        return await call(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counting)
    return heads


@pytest.mark.parametrize("name", TABLES)
def test_s3_tables_read_like_local(endpoint, bucket, name: str) -> None:
    fs, bucket_name = bucket
    local = corpus_table(name)
    uri = _upload(fs, local, f"{bucket_name}/tables/{name}")
    options = _options(endpoint)
    before = _objects(fs, bucket_name)

    want = dd.DeltaTable(str(local)).snapshot()
    snap = dd.DeltaTable(uri, storage_options=options).snapshot()
    assert snap.version == want.version
    assert sorted(snap.files().column("path").to_pylist()) == sorted(want.files().column("path").to_pylist())
    assert _rows(snap.scan().to_table()) == _rows(want.scan().to_table())
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "loc", str(local))
    dd.register_table(ctx, "s3", uri, storage_options=options)
    assert _rows(ctx.sql("SELECT * FROM s3").to_arrow_table()) == _rows(
        ctx.sql("SELECT * FROM loc").to_arrow_table()
    )
    if want.properties.get("delta.enableChangeDataFeed") == "true":
        sql = "SELECT * FROM table_changes('{}', 0)"
        a = ctx.sql(sql.format("loc")).to_arrow_table().drop_columns(["_commit_timestamp"])
        b = ctx.sql(sql.format("s3")).to_arrow_table().drop_columns(["_commit_timestamp"])
        assert a.num_rows and _rows(a) == _rows(b)

    # the parallel phase's leaves are store paths without a leading '/'
    if want.checkpoint_version is not None:
        assert _parallel_files(snap) == _parallel_files(want)
    assert _objects(fs, bucket_name) == before, "a read wrote to the bucket"


@pytest.mark.parametrize("name", ["v1-multi-part-struct-stats-only", "dv-with-columnmapping", "cdf-table"])
def test_s3_reads_ask_no_sizes(endpoint, bucket, head_requests, name: str) -> None:
    """Commits, checkpoint parts and data files open with the sizes the listing and the log
    give: no HEAD request each (s3fs asks for a file's details at its first read otherwise)."""
    fs, bucket_name = bucket
    uri = _upload(fs, corpus_table(name), f"{bucket_name}/t")
    snap = dd.DeltaTable(uri, storage_options=_options(endpoint)).snapshot()
    assert snap.scan().to_table().num_rows
    ctx = SessionContext()
    dd.register_table(ctx, "t", uri, storage_options=_options(endpoint))
    assert ctx.sql("SELECT * FROM t").to_arrow_table().num_rows
    assert head_requests == []


def test_s3_table_changes_on_a_registered_table_gets_no_commit_its_registration_read(
    endpoint, bucket, monkeypatch
) -> None:
    """The first ``table_changes`` over a registered table lists the log (its latest version)
    and takes the commits the registration read: no GET of them again (one GET each before)."""
    fs, bucket_name = bucket
    local = corpus_table("cdf-table")
    uri = _upload(fs, local, f"{bucket_name}/t")
    gets: list[str] = []
    call = s3fs.S3FileSystem._call_s3

    async def counting(self, method, *args, **kwargs):
        gets.append(f"{method} {kwargs.get('Key', kwargs.get('Prefix', ''))}")
        return await call(self, method, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counting)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", uri, storage_options=_options(endpoint))
    registered = {g for g in gets if g.startswith("get_object") and g.endswith(".json")}
    assert registered  # the premise
    gets.clear()
    got = ctx.sql("SELECT * FROM table_changes('t', 0)").to_arrow_table()
    assert not registered & set(gets), gets
    assert any(g.startswith("list_objects") for g in gets), gets
    want = ctx.sql(f"SELECT * FROM table_changes('{local}', 0)").to_arrow_table()
    drop = ["_commit_timestamp"]
    assert got.num_rows and _rows(got.drop_columns(drop)) == _rows(want.drop_columns(drop))


def test_s3_missing_data_file_is_named(endpoint, bucket) -> None:
    fs, bucket_name = bucket
    uri = _upload(fs, corpus_table("cdf-table"), f"{bucket_name}/t")
    options = _options(endpoint)
    victim = dd.DeltaTable(uri, storage_options=options).snapshot().files().column("path")[0].as_py()
    fs.rm(f"{bucket_name}/t/{victim}")

    with pytest.raises(dd.errors.DataFileNotFoundError, match=victim):
        dd.DeltaTable(uri, storage_options=options).snapshot().scan().to_table()
    ctx = SessionContext()
    dd.register_table(ctx, "t", uri, storage_options=options)
    with pytest.raises(Exception) as caught:
        ctx.sql("SELECT * FROM t").collect()
    error = from_datafusion(caught.value)
    assert isinstance(error, dd.errors.DataFileNotFoundError) and victim in str(error)


@pytest.mark.parametrize("off_by", [-100, 100, 100_000])
def test_s3_sidecar_whose_manifest_size_is_wrong_names_both_sizes(endpoint, bucket, off_by: int) -> None:
    """S3 reads a V2 sidecar at its manifest's sizeInBytes (no HEAD); a wrong one is the log's
    fault, named with both sizes, whatever s3fs makes of a range past the end or short of it."""
    fs, bucket_name = bucket
    uri = _upload(fs, corpus_table("v2-checkpoints-json-with-sidecars"), f"{bucket_name}/t")
    log = f"{bucket_name}/t/_delta_log"
    manifest = sorted(p for p in fs.ls(log, detail=False) if ".checkpoint." in p)[-1]
    text = fs.cat(manifest).decode()
    fs.pipe(
        manifest,
        re.sub(r'"sizeInBytes":(\d+)', lambda m: f'"sizeInBytes":{int(m.group(1)) + off_by}', text).encode(),
    )
    with pytest.raises(dd.errors.LogCorruptError) as caught:
        dd.DeltaTable(uri, storage_options=_options(endpoint)).snapshot().files()
    sidecar = next(p for p in fs.find(f"{log}/_sidecars") if p.rsplit("/", 1)[1] in str(caught.value))
    real = fs.info(sidecar)["size"]
    assert f"is {real} bytes, but its checkpoint manifest says sizeInBytes {real + off_by}" in str(
        caught.value
    )


def test_s3_wrong_credentials_are_a_storage_error_with_the_stores_reason(endpoint, bucket) -> None:
    fs, bucket_name = bucket
    uri = _upload(fs, corpus_table("table-with-dv-small"), f"{bucket_name}/t")
    with enable_iam_authentication():
        with pytest.raises(dd.errors.StorageError) as caught:
            dd.DeltaTable(uri, storage_options=_options(endpoint, key="nobody")).snapshot()
    message = str(caught.value)
    assert f"{bucket_name}/t/_delta_log" in message and "permission denied" in message
    assert "Access Key Id you provided does not exist" in message  # which of the store's reasons


def test_s3_a_misspelt_storage_option_is_an_argument_error_naming_it(endpoint, bucket) -> None:
    """s3fs takes any option and hands it on to aiobotocore (or botocore's Config) at its first
    request: a misspelt one was a StorageError, which says a retry may help, quoting their
    TypeError."""
    fs, name = bucket
    uri = _upload(fs, corpus_table("cdf-table"), f"{name}/t")
    cases = [
        ({"nonsense_opt": 1}, "'nonsense_opt'"),
        ({"config_kwargs": {"connect_timeoutt": 2}}, "'config_kwargs' key 'connect_timeoutt'"),
    ]
    for more, named in cases:
        refused = rf"S3FileSystem\) does not take the storage option {named}"
        with pytest.raises(dd.errors.ArgumentError, match=refused):
            dd.DeltaTable(uri, _options(endpoint, **more)).snapshot()
    local = dd.DeltaTable(str(corpus_table("cdf-table"))).snapshot().version
    options = _options(endpoint, config_kwargs={"connect_timeout": 2})
    assert dd.DeltaTable(uri, options).snapshot().version == local


def test_s3_without_credentials_says_how_a_public_bucket_is_read(endpoint, bucket, capsys) -> None:
    """No credentials anywhere (the endpoint fixture clears the environment and AWS files) is
    botocore's NoCredentialsError at the first request, whose words do not say that a public
    bucket is read with the option anon=True: the error says so, for Python, SQL and the CLI."""
    from delta_datafusion import cli

    fs, name = bucket
    uri = _upload(fs, corpus_table("cdf-table"), f"{name}/t")
    options = {"endpoint_url": endpoint, "skip_instance_cache": True}
    with pytest.raises(dd.errors.StorageError) as caught:
        dd.DeltaTable(uri, storage_options=options).snapshot()
    message = str(caught.value)
    assert f"{name}/t/_delta_log" in message and "NoCredentialsError" in message
    assert "storage_options={'anon': True}" in message and "--option anon=true" in message
    assert "OPTIONS ('anon' 'true')" in message

    argv = ["info", uri, "--option", f"endpoint_url={endpoint}", "--option", "skip_instance_cache=true"]
    assert cli.main(argv) == 2
    assert "--option anon=true" in capsys.readouterr().err
    fs.chmod(f"{name}/t", "public-read", recursive=True)  # a public bucket's objects
    assert cli.main([*argv, "--option", "anon=true"]) == 0  # read as the hint says
    local = dd.DeltaTable(str(corpus_table("cdf-table"))).snapshot().version
    assert f"version: {local}" in capsys.readouterr().out
