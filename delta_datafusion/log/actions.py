"""Delta actions parsed into Arrow with explicit schemas.

Commits are newline-delimited JSON; all commits of a segment are concatenated and parsed in one
``pyarrow.json`` call (multi-threaded, no Python per action). ``protocol`` and ``metaData`` are
rare and are located by a byte search and parsed with ``json``. Checkpoints (and V2 sidecars) are
parquet files read with column projection.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
import pyarrow.parquet as pq

from ..arrow_threads import use_threads
from ..errors import DeltaError, LogCorruptError, MissingLogFileError, StorageError
from ..storage import FileInfo, Storage
from ..thread_pools import ProcessPool

DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
DOMAIN_TYPE = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])
COMMIT_INFO_TYPE = pa.struct(
    [("timestamp", pa.int64()), ("inCommitTimestamp", pa.int64()), ("operation", pa.string())]
)
SIDECAR_TYPE = pa.struct(
    [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]
)
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64())])


def partition_values_type(physical_partition_columns: Sequence[str]) -> pa.DataType:
    """``partitionValues`` as a struct of strings keyed by physical partition column names."""
    return pa.struct([(c, pa.string()) for c in physical_partition_columns])


def file_action_types(pv: pa.DataType) -> dict[str, pa.DataType]:
    """Arrow types of add / remove / cdc given the partitionValues struct type."""
    add = [
        ("path", pa.string()),
        ("partitionValues", pv),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("deletionVector", DV_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
    remove = [
        ("path", pa.string()),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("partitionValues", pv),
        ("size", pa.int64()),
        ("deletionVector", DV_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
    cdc = [("path", pa.string()), ("partitionValues", pv), ("size", pa.int64()), ("dataChange", pa.bool_())]
    if pv.num_fields == 0:  # pyarrow.json cannot fill an empty struct; keep a typed null column
        add = [f for f in add if f[0] != "partitionValues"]
        remove = [f for f in remove if f[0] != "partitionValues"]
        cdc = [f for f in cdc if f[0] != "partitionValues"]
    return {"add": pa.struct(add), "remove": pa.struct(remove), "cdc": pa.struct(cdc)}


def commit_schema(pv: pa.DataType) -> pa.Schema:
    types = file_action_types(pv)
    return pa.schema(
        [
            ("add", types["add"]),
            ("remove", types["remove"]),
            ("cdc", types["cdc"]),
            ("txn", TXN_TYPE),
            ("domainMetadata", DOMAIN_TYPE),
            ("commitInfo", COMMIT_INFO_TYPE),
            ("checkpointMetadata", CHECKPOINT_METADATA_TYPE),
            ("sidecar", SIDECAR_TYPE),
        ]
    )


# -- protocol / metaData ------------------------------------------------------------------

_PM_KEYS = (b'"protocol"', b'"metaData"')
#: A JSON escape of an ASCII letter (``\u0061`` is ``a``): the one way a key made of letters, as
#: every action and field name searched for here is, can be written other than as itself
#: (``"remov\u0065"`` is the key ``remove``), which JSON parsers decode. No writer known writes
#: one; where one occurs, the byte searches for keys as written cannot tell which keys are there,
#: and take every key (or line) that may be one as there: read as absent, a remove did not remove,
#: a deletion vector deleted nothing, a new schema was not seen. ``re`` finds its literal head about
#: as fast as ``bytes.find`` finds one key (15 MB of commits: ~6 ms), once a commit (see
#: :attr:`CommitData.escaped_letter`).
_ESCAPED_LETTER = re.compile(rb"\\u00[4-7][0-9a-fA-F]")


def has_escaped_letter(data: bytes) -> bool:
    """Does ``data`` hold a JSON escape of an ASCII letter (see :data:`_ESCAPED_LETTER`)?"""
    return _ESCAPED_LETTER.search(data) is not None


def parse_action(line: bytes, where: str, at: str = "") -> Any:
    """One JSON action line; malformed JSON is a :class:`LogCorruptError` naming ``where``."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as e:
        raise LogCorruptError(f"{where}: malformed JSON action{at}: {e}") from e


def find_protocol_and_metadata(
    data: bytes, where: str, escaped: bool | None = None
) -> tuple[dict | None, dict | None]:
    """Return the protocol and metaData actions of one commit (or JSON checkpoint), if present.

    Only lines that mention the keys are decoded, so a 15 MB commit of adds costs two byte scans,
    and a third for keys written with escapes (``escaped``: whether there are any, if known; see
    :data:`_ESCAPED_LETTER`), whose lines are decoded too.
    """
    protocol = metadata = None
    starts = set()
    for key in _PM_KEYS:
        pos = data.find(key)
        while pos != -1:
            start = data.rfind(b"\n", 0, pos) + 1
            starts.add(start)
            end = data.find(b"\n", pos)
            pos = -1 if end == -1 else data.find(key, end)
    if escaped is None or escaped:
        for m in _ESCAPED_LETTER.finditer(data):
            starts.add(data.rfind(b"\n", 0, m.start()) + 1)
    for start in sorted(starts):
        end = data.find(b"\n", start)
        line = data[start : len(data) if end == -1 else end].strip()
        if not line:
            continue
        action = parse_action(line, where, f" at byte {start}")
        if not isinstance(action, dict):
            raise LogCorruptError(f"{where}: action at byte {start} is not a JSON object")
        for key in ("protocol", "metaData"):
            value = action.get(key)
            if value is not None and not isinstance(value, dict):
                raise LogCorruptError(
                    f"{where}: the {key} action at byte {start} is not a JSON object: {value!r:.80}"
                )
        if isinstance(action.get("protocol"), dict) and protocol is None:
            protocol = action["protocol"]
        if isinstance(action.get("metaData"), dict) and metadata is None:
            metadata = action["metaData"]
    return protocol, metadata


# -- commits --------------------------------------------------------------------------------


@dataclass
class CommitData:
    """Raw bytes of one commit file."""

    version: int
    info: FileInfo
    data: bytes
    _escaped: bool | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def escaped_letter(self) -> bool:
        """Whether the commit holds a JSON escape of an ASCII letter (:data:`_ESCAPED_LETTER`):
        searched once, for the protocol/metaData search and the parse of its actions alike."""
        if self._escaped is None:
            self._escaped = has_escaped_letter(self.data)
        return self._escaped


def read_commits(storage: Storage, commits: Sequence[tuple[int, FileInfo]]) -> list[CommitData]:
    """Read commit files (side by side on remote stores, where each read is a round trip: two or
    three commits, the usual tail after a checkpoint, were read one after another); order is
    preserved."""
    if storage.is_local or len(commits) < 2:
        return [_read_commit(storage, c) for c in commits]
    with ThreadPoolExecutor(min(16, len(commits))) as pool:
        return list(pool.map(lambda c: _read_commit(storage, c), commits))


def _read_commit(storage: Storage, item: tuple[int, FileInfo]) -> CommitData:
    v, info = item
    return CommitData(v, info, storage.read_listed(info.path, info.listed_size))


def read_newest_first(
    storage: Storage, commits: Sequence[tuple[int, FileInfo]], read: dict[int, CommitData]
) -> Iterator[CommitData]:
    """The commits newest first, read as they are asked for. On an object store the reads run
    ahead, as many as commits were taken so far (up to 16 in flight, like read_commits): a
    search that stops early reads few more than it took, a long one waits on no batch.
    Commits in ``read`` are not read again; those read here are added to it."""
    todo = list(reversed(commits))
    if storage.is_local:
        for item in todo:
            if item[0] not in read:
                read[item[0]] = _read_commit(storage, item)
            yield read[item[0]]
        return
    pool = ThreadPoolExecutor(16)
    ahead: dict[int, Future[CommitData]] = {}
    submitted = 0
    try:
        for taken, (v, _) in enumerate(todo):
            while submitted < min(len(todo), 2 * taken + 1, taken + 16):
                item = todo[submitted]
                if item[0] not in read:
                    ahead[item[0]] = pool.submit(_read_commit, storage, item)
                submitted += 1
            if v not in read:
                read[v] = ahead.pop(v).result()
            yield read[v]
    finally:
        pool.shutdown(cancel_futures=True)  # a search that stopped: the reads not started are not made


def _blank(data: bytes) -> bool:
    return not data or data.isspace()  # isspace() stops at the first non-space byte


def _count_nonblank(data: bytes) -> int:
    """Number of non-blank lines (pyarrow.json skips blank lines)."""
    return sum(1 for line in data.splitlines() if line.strip())


def _is_utf8(data: bytes) -> bool:
    """UTF-8 validity, checked by Arrow in place (a Python decode of a 79 MB commit: ~100 ms and
    its copy in memory; this: ~9 ms)."""
    offsets = pa.py_buffer(np.array([0, len(data)], dtype=np.int64))
    try:
        pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)]).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def parse_json_actions(
    blobs: Sequence[bytes], schema: pa.Schema, where: Sequence[str], escaped: Sequence[bool] | None = None
) -> tuple[pa.Table, np.ndarray]:
    """Parse several NDJSON blobs in one pass; also return the row count of each blob.

    Rows are attributed to blobs by newline counts; when pyarrow's row count disagrees (blank
    lines inside a file), lines are counted exactly, and a parse error is retried per file so
    the error names the file. ``escaped``: whether each blob holds a key written with escapes, if
    known (see :data:`_ESCAPED_LETTER`).
    """
    norm = [b if b.endswith(b"\n") or _blank(b) else b + b"\n" for b in blobs]
    for b, w in zip(norm, where, strict=True):
        if not b.isascii() and not _is_utf8(b):  # pyarrow's reader does not check UTF-8
            try:
                b.decode("utf-8")
            except UnicodeDecodeError as e:
                raise LogCorruptError(
                    f"{w}: not UTF-8 text (byte {e.start}: {b[e.start : e.start + 4]!r})"
                ) from e
    counts = np.array([0 if _blank(b) else b.count(b"\n") for b in norm], dtype=np.int64)
    buf = b"".join(b for b, c in zip(norm, counts, strict=True) if c)
    if not buf:
        return schema.empty_table(), counts
    try:
        any_escaped = None if escaped is None else any(escaped)
        table = _conform(read_ndjson(buf, _present_schema(buf, schema, any_escaped)), schema)
    except pa.ArrowInvalid:
        table = None
    if table is not None and table.num_rows != int(counts.sum()):
        counts = np.array([0 if _blank(b) else _count_nonblank(b) for b in norm], dtype=np.int64)
    if table is None or table.num_rows != int(counts.sum()):
        tables = []
        for b, w in zip(norm, where, strict=True):
            if _blank(b):
                continue
            try:
                tables.append(read_ndjson(b, schema))
            except pa.ArrowInvalid as e:
                raise LogCorruptError(f"{w}: cannot parse commit JSON: {_short(e)}") from e
        table = pa.concat_tables(tables) if tables else schema.empty_table()
        counts = np.array([0 if _blank(b) else len(read_ndjson(b, schema)) for b in norm], dtype=np.int64)
    return table, counts


#: Nested add/remove keys checked for presence: an absent key in the explicit schema costs the
#: parser a null column per row (measured on the 300k-add log: deletionVector 63 ms, stats 20 ms,
#: baseRowId 16 ms, defaultRowCommitVersion 12 ms).
_OPTIONAL_NESTED = ("deletionVector", "stats", "baseRowId", "defaultRowCommitVersion")
#: Top-level actions parsed even when absent (checkpointMetadata: its null column is cheap).
_ALWAYS_PARSED = frozenset({"checkpointMetadata"})
#: Keys present in a log are usually present near its start; this prefix is checked key by key.
_HEAD = 1 << 18
#: Below this size, one byte search per key is cheaper than setting up a regex pass.
_SMALL = 1 << 22


def present_keys(buf: bytes, keys: Sequence[str], escaped: bool | None = None) -> set[str]:
    """The keys that occur as ``"key"`` somewhere in ``buf`` (a key inside a string value counts too,
    which only costs parse time); all of them where a key may be written with escapes (``escaped``,
    if known; see :data:`_ESCAPED_LETTER`) and some are not found as written.

    A byte search per absent key scans the whole buffer (15-35 ms per 46 MB, 8 absent keys on the
    300k-add log ~0.2 s); instead one regex alternation of all keys not seen in the head runs over
    the buffer in chunks on pyarrow's threads (RE2, GIL released: 37 ms for the same 8 keys).
    """
    found = _keys_as_written(buf, keys)
    if len(found) < len(keys) and (has_escaped_letter(buf) if escaped is None else escaped):
        return set(keys)
    return found


def _keys_as_written(buf: bytes, keys: Sequence[str]) -> set[str]:
    quoted = {k: b'"' + k.encode() + b'"' for k in keys}
    if len(buf) <= _SMALL:
        return {k for k, q in quoted.items() if q in buf}
    found = {k for k, q in quoted.items() if buf.find(q, 0, _HEAD) >= 0}
    rest = [k for k in keys if k not in found]
    start = 0
    while rest:
        hit = _first_key_from(buf, start, rest)
        if hit is None:
            break
        key, start = hit
        found.add(key)
        rest.remove(key)
    return found


#: the process's threads searching commits for action keys
_search_pool = ProcessPool("delta-keys").get


def _binary_slices(data: pa.Buffer, bounds: Sequence[tuple[int, int]]) -> list[pa.Array]:
    """Zero-copy one-element binary arrays over slices of ``data``."""
    out = []
    for lo, hi in bounds:
        offsets = pa.py_buffer(np.array([0, hi - lo], dtype=np.int64).tobytes())
        out.append(pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, data.slice(lo, hi - lo)]))
    return out


def _first_key_from(buf: bytes, start: int, keys: Sequence[str]) -> tuple[str, int] | None:
    """(a key occurring at or after ``start``, the start of the chunk holding it), or None."""
    alternation = "|".join(re.escape(k) for k in keys)
    pattern = f'"({alternation})"'
    overlap = max(len(k) for k in keys) + 2
    step = max(_HEAD, -(-(len(buf) - start) // 8))
    bounds = [(lo, min(len(buf), lo + step + overlap)) for lo in range(start, len(buf), step)]
    chunks = _binary_slices(pa.py_buffer(buf), bounds)
    hits = list(_search_pool().map(lambda a: bool(pc.match_substring_regex(a, pattern)[0].as_py()), chunks))
    for (lo, _), chunk, hit in zip(bounds, chunks, hits, strict=True):
        if hit:
            got = pc.extract_regex(chunk, f'"(?P<key>{alternation})"')[0]["key"].as_py()
            return got.decode(), lo
    return None


def _present_schema(buf: bytes, schema: pa.Schema, escaped: bool | None = None) -> pa.Schema:
    """Drop action types (and a few optional add/remove fields) whose key never occurs.

    Building all-null struct columns is what makes a wide explicit schema slow (measured: 2.3 s ->
    0.8 s on the 300k-add log).
    """
    top = [f.name for f in schema if f.name not in _ALWAYS_PARSED]
    present = present_keys(buf, [*top, *_OPTIONAL_NESTED], escaped)
    absent = {k for k in _OPTIONAL_NESTED if k not in present}

    def keep_nested(f: pa.Field) -> pa.Field:
        if pa.types.is_struct(f.type) and absent:
            kids = [c for c in f.type if c.name not in absent]
            return pa.field(f.name, pa.struct(kids)) if kids else f
        return f

    return pa.schema([keep_nested(f) for f in schema if f.name in _ALWAYS_PARSED or f.name in present])


def _conform_array(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    if arr.type == typ:
        return arr
    if pa.types.is_struct(typ):
        kids = [
            _conform_array(arr.field(f.name), f.type)
            if arr.type.get_field_index(f.name) >= 0
            else pa.nulls(len(arr), f.type)
            for f in typ
        ]
        return pa.StructArray.from_arrays(kids, fields=list(typ), mask=pc.invert(arr.is_valid()))
    return arr.cast(typ)


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Re-add the fields :func:`_present_schema` dropped, as nulls, so callers see one schema."""
    n = table.num_rows
    cols = []
    for f in schema:
        if f.name in table.column_names:
            col = table.column(f.name)
            if col.type != f.type:
                col = pa.chunked_array([_conform_array(c, f.type) for c in col.chunks], f.type)
            cols.append(col)
        else:
            cols.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(cols, schema=schema)


#: A line that is JSON ``null`` (a line's end can be ``null`` in no other NDJSON object):
#: pyarrow 26's reader crashes the process on one with an explicit schema.
_NULL_LINE = re.compile(rb"null[ \t\r]*(?:\n|\Z)")


def _leaf_count(types: Iterable[pa.DataType]) -> int:
    """Leaf fields under ``types`` (struct children counted, a list/map as one)."""
    n, stack = 0, list(types)
    while stack:
        t = stack.pop()
        if pa.types.is_struct(t):
            stack.extend(t.field(i).type for i in range(t.num_fields))
        else:
            n += 1
    return n


#: Bytes of NDJSON per leaf field of the schema below which a block costs more than it saves.
_BLOCK_BYTES_PER_LEAF = 8 << 10


def ndjson_block_size(nbytes: int, schema: pa.Schema) -> int:
    """Block size for parsing ``nbytes`` of NDJSON with ``schema``.

    An eighth of the buffer (256 KB-16 MB) lets pyarrow parse on all cores (a block is parsed by
    one thread: 21k stats lines, 76 ms -> 40 ms on 2 cores). But each block also costs in
    proportion to the schema's leaf fields, so wide schemas need large blocks (stats of 2,000
    columns, 6.4 MB: 8 blocks 629 ms, 2 blocks 408 ms, 1 block 267 ms)."""
    floor = max(1 << 18, _leaf_count(f.type for f in schema) * _BLOCK_BYTES_PER_LEAF)
    return max(floor, min(1 << 24, nbytes // 8))


def read_ndjson(buf: bytes | pa.Buffer, schema: pa.Schema, objects_only: bool = False) -> pa.Table:
    """One pyarrow.json parse of NDJSON with an explicit schema (unknown fields ignored)."""
    if not objects_only and _NULL_LINE.search(buf):  # objects_only: the caller knows every line is
        raise pa.ArrowInvalid("a line is JSON null, not an object")
    opts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    block = ndjson_block_size(len(buf), schema)
    while True:
        # one block is parsed by one thread: on the caller's, it need not wait behind another
        # parse's blocks in pyarrow's pool (a snapshot typing its commits' few stats while the
        # checkpoint's are parsed: 1 ms alone, 20 ms queued)
        threads = use_threads() and len(buf) > block
        try:
            return pajson.read_json(
                pa.BufferReader(buf),
                read_options=pajson.ReadOptions(block_size=block, use_threads=threads),
                parse_options=opts,
            )
        except pa.ArrowInvalid as e:
            if "straddling" in str(e) and block <= len(buf):  # a line longer than a block
                block = min(len(buf) + 1, block * 8)
                continue
            raise


def _short(e: Exception) -> str:
    return str(e).splitlines()[0][:300]


# -- checkpoints ---------------------------------------------------------------------------

#: How every reader of a log parquet file (checkpoint part, sidecar) is opened. Spark writes a
#: checkpoint's ``stats_parsed`` timestamps as INT96 (spark.sql.parquet.outputTimestampType's
#: default); read as nanoseconds, a bound outside 1677..2262 (a year-1 placeholder) overflowed
#: and the leaf's cast failed for every file of the checkpoint, whose timestamp bounds were then
#: all unknown. As microseconds (as data files are read) each keeps its own.
LOG_PARQUET_OPTIONS: dict[str, str] = {"coerce_int96_timestamp_unit": "us"}


def open_parquet(storage: Storage, path: str) -> pq.ParquetFile:
    """Open a checkpoint part once per table handle for the planning reads (protocol/metaData,
    sidecar references, inline actions), which run on one thread. Leaf reads, which may run on
    several threads, use :func:`log.checkpoint.open_leaf` instead, but for a small local leaf
    still the file this opened (see :data:`log.checkpoint.SHARED_READER_MAX_ROWS`)."""
    cache = storage.__dict__.setdefault("_log_parquet", {})
    pf = cache.get(path)
    if pf is None:
        if storage.is_local:
            opened = file_identity(path)  # before the open: a file replaced meanwhile differs
            pf = pq.ParquetFile(path, filesystem=storage.arrow_fs, **LOG_PARQUET_OPTIONS)
            pf.delta_identity = opened  # see log.checkpoint.SHARED_READER_MAX_ROWS
        else:
            pf = pq.ParquetFile(storage.open_remote(path), **LOG_PARQUET_OPTIONS)
        if len(cache) > 64:
            cache.clear()
        cache[path] = pf
        _keep_latest_checkpoints(cache)
    return pf


#: The checkpoints (all parts of each) whose files :func:`open_parquet` keeps open per table
#: handle: those most recently opened. A handle kept for a long-lived process while a writer
#: checkpoints held every checkpoint it had read open, one more file per checkpoint written,
#: deleted ones too (a log cleanup's disk space not given back); an older checkpoint read again
#: is opened again (one footer read).
KEPT_CHECKPOINTS = 2


def _keep_latest_checkpoints(cache: dict[str, pq.ParquetFile]) -> None:
    """Drop the files of all but the :data:`KEPT_CHECKPOINTS` checkpoints opened last (a
    checkpoint's files are named by its version first; the cache keeps the order of opening).
    The paths are copied first (one C call): other threads' planning reads may change the cache."""
    paths = list(cache)
    versions = list(dict.fromkeys(os.path.basename(p)[:20] for p in reversed(paths)))
    if len(versions) <= KEPT_CHECKPOINTS:
        return
    kept = set(versions[:KEPT_CHECKPOINTS])
    for path in paths:
        if os.path.basename(path)[:20] not in kept:
            cache.pop(path, None)


def file_identity(path: str) -> tuple[int, ...] | None:
    """What tells a local file from another written under its name since (device, inode, size,
    modification time in ns); None when it cannot be read."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def forget_parquet(storage: Storage, paths: Iterable[str]) -> None:
    """Drop the files :func:`open_parquet` holds open for ``paths``: a log listed again may name
    another file under the same name (the folder written again), whose footer differs; a table
    handle that has read its checkpoint's files may read it no more. A reader using one keeps it
    open until its read ends."""
    cache = storage.__dict__.get("_log_parquet", {})
    for path in paths:
        cache.pop(path, None)


def forget_all_parquet(storage: Storage) -> None:
    """Drop every file :func:`open_parquet` holds open for the table handle ``storage``."""
    forget_parquet(storage, list(storage.__dict__.get("_log_parquet", {})))


@contextlib.contextmanager
def checkpoint_read_errors(
    path: str, what: str = "checkpoint file", storage: Storage | None = None
) -> Iterator[None]:
    """Turn a failed read of checkpoint parquet ``path`` into the package's errors, naming it:
    MissingLogFileError when the file is gone, LogCorruptError when it cannot be parsed.
    ``storage``: where the file was opened at a size noted from the log (see :func:`resized`)."""
    try:
        yield
    except FileNotFoundError as e:
        raise MissingLogFileError(f"{what} {path} is missing") from e
    except (ConnectionError, TimeoutError, PermissionError) as e:  # the store failed: not corrupt
        raise StorageError(f"cannot read {path}: {type(e).__name__}: {e}") from e
    except StorageError as e:  # a store's refusal of a range past the end too (S3: InvalidRange)
        wrong = _wrong_size(storage, path, what, e) if _answered(e) else None
        if wrong is not None:
            raise wrong from e
        raise
    except (pa.ArrowException, OSError) as e:  # ArrowNotImplementedError too: a damaged footer
        if "No such file" in str(e):  # how pyarrow's local filesystem reports a missing file
            raise MissingLogFileError(f"{what} {path} is missing") from e
        raise _wrong_size(storage, path, what, e) or LogCorruptError(
            f"{path}: cannot read checkpoint parquet: {_short(e)}"
        ) from e
    except UnicodeDecodeError as e:  # a column name or string that is not UTF-8
        raise LogCorruptError(f"{path}: checkpoint parquet holds text that is not UTF-8: {_short(e)}") from e


def _answered(e: BaseException) -> bool:
    """Did the store answer (a refusal, not a network failure or a timeout)? Asking it again
    for a size is then one quick request (a store that is down retries each for ~80 s)."""
    cur: BaseException | None = e
    for _ in range(8):  # the explicit causes
        if cur is None:
            return True
        if isinstance(cur, (ConnectionError, TimeoutError, PermissionError)):
            return False
        cur = cur.__cause__
    return True


def _wrong_size(storage: Storage | None, path: str, what: str, e: BaseException) -> LogCorruptError | None:
    """The error for log file ``path``, read at a size the log gave that is not its own (see
    :func:`resized`), None when the size is right or unknown."""
    sizes = None if storage is None else resized(storage, path)
    if sizes is None:
        return None
    real, noted = sizes
    said = (
        f"its checkpoint manifest says sizeInBytes {noted}"
        if "/_sidecars/" in path
        else f"it had {noted} when the log was listed"
    )
    return LogCorruptError(
        f"{what} {path} is {real} bytes, but {said} (it is read at that size on an object store): "
        f"cannot read checkpoint parquet: {_short(e)}"
    )


def resized(storage: Storage, path: str) -> tuple[int, int] | None:
    """After a failed read of a log file an object store opened at the size the log gave (a V2
    manifest's ``sizeInBytes``, a listing's): (its real size, that size) when they differ. One
    request, made on the error path only; a store that will not say gives no verdict."""
    noted = storage.noted_size(path)
    if not noted:
        return None
    try:
        real = storage.info(path).size
    except (DeltaError, OSError):  # denied, an option refused: no verdict
        return None
    return (real, noted) if real and real != noted else None


def present_columns(pf: pq.ParquetFile, columns: Sequence[str]) -> list[str]:
    """The requested top-level columns that the parquet file has (old checkpoints lack some);
    ``"metaData.id"`` asks for one field of a struct column (read alone: 300k adds, 15 -> 3 ms)."""
    names = set(pf.schema_arrow.names)
    out = []
    for c in columns:
        top, _, field = c.partition(".")
        if top not in names:
            continue
        if field:
            t = pf.schema_arrow.field(top).type
            if not pa.types.is_struct(t) or t.get_field_index(field) < 0:
                continue
        out.append(c)
    return out


#: Checkpoint files of at most this many rows are read on the caller's thread: their columns
#: decode in tens of microseconds, less than handing them to pyarrow's pool and waiting costs
#: (a 98-row checkpoint, protocol and metaData: 0.15 -> 0.12 ms; its add, txn and domainMetadata
#: 0.24 -> 0.19 ms, quiet host), more so when other work holds the cores and the pool's threads
#: wait to run.
THREADED_READ_MIN_ROWS = 10_000


def small_read_threads(pf: pq.ParquetFile) -> bool:
    """The ``use_threads`` of a read of ``pf``: pyarrow's pool where allowed (see
    :func:`use_threads`), not for a file of fewer than THREADED_READ_MIN_ROWS rows."""
    return use_threads() and pf.metadata.num_rows >= THREADED_READ_MIN_ROWS


def read_parquet_actions(storage: Storage, info: FileInfo | str, columns: Sequence[str]) -> pa.Table:
    """Read the top-level action columns that exist in a checkpoint parquet file.

    The reader is shared by the snapshots of one table handle, which threads may build at once:
    reads through it take turns (concurrent reads through one ParquetFile crash pyarrow)."""
    path = info.path if isinstance(info, FileInfo) else info
    lock = storage.__dict__.setdefault("_log_parquet_lock", threading.Lock())
    with checkpoint_read_errors(path), lock:
        pf = open_parquet(storage, path)
        return pf.read(columns=present_columns(pf, columns), use_threads=small_read_threads(pf))


def protocol_from_checkpoint_row(table: pa.Table) -> tuple[dict | None, dict | None]:
    """The protocol and metaData of a parquet checkpoint (first non-null row of each column)."""
    protocol = metadata = None
    for name in ("protocol", "metaData"):
        if name not in table.column_names:
            continue
        col = table.column(name)
        valid = col.filter(col.is_valid())
        if len(valid):
            value = valid[0].as_py()
            if name == "metaData":
                value = _normalize_metadata(value)
                metadata = value
            else:
                protocol = value
    return protocol, metadata


def _normalize_metadata(md: dict[str, Any]) -> dict[str, Any]:
    """Parquet maps arrive as lists of (key, value) pairs; turn them into dicts like JSON has."""
    out = dict(md)
    conf = out.get("configuration")
    if isinstance(conf, list):
        out["configuration"] = {k: v for k, v in conf}
    fmt = out.get("format")
    if isinstance(fmt, dict) and isinstance(fmt.get("options"), list):
        fmt = dict(fmt)
        fmt["options"] = {k: v for k, v in fmt["options"]}
        out["format"] = fmt
    return out
