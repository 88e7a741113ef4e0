"""Checkpoint reading: classic (single/multi-part) and V2 (JSON or parquet manifest + sidecars).

A checkpoint is split into its *manifest* (protocol, metaData, txn, domainMetadata, sidecar
references and any inline file actions) and its *leaves*: the parquet files holding the bulk of
the add actions (the parts of a classic checkpoint, or the sidecars of a V2 checkpoint). Leaves
are independent, which is what parallel replay distributes.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..errors import LogCorruptError, MissingLogFileError, ParallelStateError
from ..storage import FileInfo, Storage, normalized_path
from .actions import (
    LOG_PARQUET_OPTIONS,
    checkpoint_read_errors,
    commit_schema,
    file_identity,
    find_protocol_and_metadata,
    open_parquet,
    parse_json_actions,
    partition_values_type,
    present_columns,
    protocol_from_checkpoint_row,
    read_parquet_actions,
    small_read_threads,
)
from .segment import Checkpoint

LEAF_COLUMNS = ["add", "txn", "domainMetadata"]
#: How errors name a checkpoint leaf file.
LEAF_WHAT = "checkpoint sidecar or part"


@dataclass(frozen=True)
class LeafFile:
    """One parquet file of add actions belonging to a checkpoint; row_groups=None means all."""

    path: str
    size: int = 0
    row_groups: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        """A caller's leaf (the parallel phase takes them from anywhere): a size of None or text
        failed later with a bare TypeError. (Row groups are checked against the file when read.)"""
        if not isinstance(self.path, str):
            raise ParallelStateError(f"leaf file path {self.path!r} is not a string")
        if not isinstance(self.size, int) or isinstance(self.size, bool) or self.size < 0:
            raise ParallelStateError(
                f"leaf file {self.path}: size {self.size!r} is not a byte count (0 when unknown)"
            )

    def describe(self) -> str:
        rg = "" if self.row_groups is None else f" row groups {list(self.row_groups)}"
        return posixpath.basename(self.path) + rg


def _row_group_index(g: object, count: int) -> bool:
    return isinstance(g, int) and not isinstance(g, bool) and 0 <= g < count


def check_row_groups(leaf: LeafFile, count: int) -> None:
    """Refuse row groups of ``leaf`` that its file of ``count`` row groups does not have (a
    caller's LeafFile: pyarrow raised a bare IndexError, and read True as row group 1)."""
    if leaf.row_groups is None:
        return
    bad = [g for g in leaf.row_groups if not _row_group_index(g, count)]
    if bad:
        raise ParallelStateError(
            f"leaf file {leaf.path} has {count} row groups (0..{count - 1}): row groups {bad!r} of "
            f"{list(leaf.row_groups)!r} are not among them"
        )


@dataclass
class CheckpointManifest:
    """What the sequential phase reads of a checkpoint."""

    checkpoint: Checkpoint
    inline: pa.Table | None  # action columns found in the manifest itself (V2), else None
    leaves: list[LeafFile]


#: An action found in a checkpoint (None: not there) and the path of the part it is in.
Found = tuple[dict | None, str]


def checkpoint_protocol_metadata(storage: Storage, ckpt: Checkpoint) -> tuple[Found, Found]:
    """Protocol and metaData stored in a checkpoint, read with column projection, each with the
    part that holds it (any part of a multi-part checkpoint may: errors name that one)."""
    protocol = metadata = None
    p_where = m_where = ckpt.parts[0].path
    for part in ckpt.parts:
        if part.name.endswith(".json"):
            data = _read(storage, part)
            if not data.strip():
                raise LogCorruptError(f"{part.path}: the checkpoint manifest is empty")
            p, m = find_protocol_and_metadata(data, part.path)
            if p is None or m is None:
                check_json_lines(data, part.path)  # a truncated manifest is corrupt, not protocol-less
        else:
            found = read_parquet_actions(storage, part, ["protocol", "metaData"])
            if not found.num_columns and len(ckpt.parts) == 1:
                raise LogCorruptError(f"{part.path}: no protocol or metaData column: not a checkpoint")
            with checkpoint_read_errors(part.path):  # its strings are decoded here (UTF-8 checked)
                p, m = protocol_from_checkpoint_row(found)
        if not protocol:
            protocol, p_where = p, part.path
        if not metadata:
            metadata, m_where = m, part.path
        if protocol and metadata:
            break
    return (protocol, p_where), (metadata, m_where)


def check_json_lines(data: bytes, where: str) -> None:
    """Raise LogCorruptError naming the file and line if any line of an NDJSON file is not JSON."""
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            json.loads(line)
        except (ValueError, RecursionError) as e:
            raise LogCorruptError(f"{where}: malformed JSON action on line {n}: {e}") from e


def _read(storage: Storage, part: FileInfo) -> bytes:
    """A JSON checkpoint manifest, whole: a read shorter than the listed size (a store that ends
    a read early) would drop its last actions, the sidecar references among them."""
    try:
        return storage.read_listed(part.path, part.listed_size)
    except MissingLogFileError as e:
        raise MissingLogFileError(f"checkpoint file {part.path} is missing") from e


def sidecar_path(storage: Storage, log_dir: str, path: str, manifest: str) -> str:
    """Sidecar paths are relative to ``_delta_log/_sidecars/`` unless absolute; either way the file
    must be in that folder (the protocol keeps sidecars there), so a manifest cannot pull another
    table's (or any other) files into this one."""
    folder = normalized_path(posixpath.join(log_dir, "_sidecars"))
    path = unquote(path)  # URI-encoded in the log, like add paths
    if "://" in path or path.startswith("/") or path.startswith("file:"):
        full = normalized_path(storage.resolve(path))
    else:  # a store that names files by URL requests the name percent-encoded, as resolve() does
        full = normalized_path(posixpath.join(folder, quote(path) if storage.url_quoted else path))
    if not full.startswith(folder + "/"):
        raise LogCorruptError(
            f"{manifest}: sidecar {path!r} is outside {folder} (sidecars must be in the table's "
            "_delta_log/_sidecars folder)"
        )
    return full


def read_manifest(
    storage: Storage, log_dir: str, ckpt: Checkpoint, physical_partitions: list[str]
) -> CheckpointManifest:
    """Classify a checkpoint into manifest and leaves.

    Classic and multi-part checkpoints are their own leaves, unless a classic-named file holds
    V2 content (sidecar rows), in which case it is a manifest too.
    """
    if ckpt.kind == "v2" and ckpt.parts[0].name.endswith(".json"):
        part = ckpt.parts[0]
        schema = commit_schema(partition_values_type(physical_partitions))
        data = _read(storage, part)
        if not data.strip():
            raise LogCorruptError(f"{part.path}: the checkpoint manifest is empty")
        table, _ = parse_json_actions([data], schema, [part.path])
        sidecars = _sidecar_rows(table)
        leaves = [LeafFile(sidecar_path(storage, log_dir, p, part.path), max(0, s or 0)) for p, s in sidecars]
        return CheckpointManifest(ckpt, table, _unique_leaves(_sized(storage, leaves), part.path))
    leaves: list[LeafFile] = []
    inline_tables = []
    for part in ckpt.parts:
        if _no_sidecar_rows(storage, part.path):
            leaves.append(LeafFile(part.path, part.size or 0))
            continue
        side = read_parquet_actions(storage, part, ["sidecar"])
        sidecars = _sidecar_rows(side) if side.num_columns else []
        if sidecars:
            inline_tables.append(read_parquet_actions(storage, part, LEAF_COLUMNS))
            leaves.extend(
                LeafFile(sidecar_path(storage, log_dir, p, part.path), max(0, s or 0)) for p, s in sidecars
            )
        else:
            leaves.append(LeafFile(part.path, part.size or 0))
    inline = pa.concat_tables(inline_tables, promote_options="permissive") if inline_tables else None
    if ckpt.kind == "classic" and not inline_tables:
        _require_add_column(storage, ckpt.parts[0].path)
    return CheckpointManifest(ckpt, inline, _unique_leaves(_sized(storage, leaves), ckpt.parts[0].path))


def _sized(storage: Storage, leaves: list[LeafFile]) -> list[LeafFile]:
    """``leaves``, their sizes (the manifest's ``sizeInBytes``, the listing's) noted for their
    opens: an object store asked each sidecar's size first, a round trip before its read."""
    storage.note_sizes((leaf.path, leaf.size) for leaf in leaves)
    return leaves


def _unique_leaves(leaves: list[LeafFile], manifest: str) -> list[LeafFile]:
    """A leaf named twice would give its files twice."""
    seen: set[str] = set()
    for leaf in leaves:
        if leaf.path in seen:
            raise LogCorruptError(f"{manifest}: sidecar {leaf.path} is listed more than once")
        seen.add(leaf.path)
    return leaves


def _require_add_column(storage: Storage, path: str) -> None:
    """A classic checkpoint always has the ``add`` column (empty when the table has no files);
    a parquet file without it is something else, and reading it as "no files" loses rows."""
    with checkpoint_read_errors(path):
        names = open_parquet(storage, path).schema_arrow.names
    if "add" not in names:
        raise LogCorruptError(
            f"{path}: checkpoint has no add column (it holds {names[:8]}): not a checkpoint"
        )


def _no_sidecar_rows(storage: Storage, path: str) -> bool:
    """True when the part's footer statistics show ``sidecar.path`` null in every row (classic
    checkpoints written with a V2-ready schema carry an all-null sidecar column); reading the
    column to find that out costs ~0.5 ms of every query. Unknown (no statistics, unreadable
    footer): False, and the column is read."""
    try:
        with checkpoint_read_errors(path):
            md = open_parquet(storage, path).metadata
    except (LogCorruptError, MissingLogFileError):
        return False  # the read that follows reports it
    schema = md.schema
    leaf = next((j for j in range(len(schema)) if schema.column(j).path == "sidecar.path"), None)
    if leaf is None:
        return False
    for g in range(md.num_row_groups):
        rg = md.row_group(g)
        st = rg.column(leaf).statistics
        if st is None or not st.has_null_count or st.null_count != rg.num_rows:
            return False
    return md.num_row_groups > 0


def _sidecar_rows(table: pa.Table) -> list[tuple[str, int | None]]:
    if "sidecar" not in table.column_names:
        return []
    col = table.column("sidecar").combine_chunks()
    rows = col.filter(col.is_valid()).to_pylist()
    out = []
    for r in rows:
        if not r or not r.get("path"):
            raise LogCorruptError(f"checkpoint has a sidecar action without a path: {r!r}")
        out.append((r["path"], r.get("sizeInBytes")))
    return out


#: The key and value leaves of a checkpoint's ``add.partitionValues`` map.
PARTITION_VALUE_LEAVES = frozenset(
    {"add.partitionValues.key_value.key", "add.partitionValues.key_value.value"}
)


def dictionary_leaves(md: pq.FileMetaData, row_groups: Sequence[int] | None) -> list[str]:
    """The partition value leaves to read as dictionaries (their codes and distinct strings, not
    every entry's string: k300_ckpt's 300k adds 11.6 -> 2.9 ms, and 1.5 ms to decode them once):
    where the writer dictionary-encoded them, as it does few distinct values (a dictionary page and
    under two bytes a value besides a page's worth, where a plain string takes four and more: not
    values it wrote plain, which a dictionary read would hash), and the read is of one row
    group (pyarrow cannot read a nested column whose dictionaries differ between row groups)."""
    groups = range(md.num_row_groups) if row_groups is None else row_groups
    if len(groups) != 1 or not _row_group_index(groups[0], md.num_row_groups):
        return []  # (a row group it does not have is refused when the leaf is read)
    rg, schema = md.row_group(groups[0]), md.schema
    out = []
    for j in range(md.num_columns):
        col = schema.column(j)
        if col.path in PARTITION_VALUE_LEAVES and col.physical_type == "BYTE_ARRAY":
            chunk = rg.column(j)
            if chunk.has_dictionary_page and chunk.total_uncompressed_size < 2 * chunk.num_values + 1024:
                out.append(col.path)
    return out


@contextlib.contextmanager
def open_leaf(
    storage: Storage, path: str, dictionaries: bool = False, row_groups: Sequence[int] | None = None
) -> Iterator[pq.ParquetFile]:
    """A reader of its own, closed on exit: a ParquetFile must not be shared between threads
    (concurrent row-group reads through one reader crash or hang; seen in parallel replay).
    ``dictionaries``: partition values read as dictionaries where :func:`dictionary_leaves`
    allows it for a read of ``row_groups`` (None: all)."""
    # the planning reads' handle (if any) has parsed this footer already: its FileMetaData is
    # immutable and can be shared (a 60-column checkpoint footer: 0.40 -> 0.09 ms to open; on an
    # object store, one footer request fewer)
    planned = storage.__dict__.get("_log_parquet", {}).get(path)
    metadata = planned.metadata if planned is not None else None
    as_dictionary = None
    if dictionaries and metadata is not None:
        as_dictionary = dictionary_leaves(metadata, row_groups) or None
    if storage.is_local:
        pf = pq.ParquetFile(
            path,
            filesystem=storage.arrow_fs,
            metadata=metadata,
            read_dictionary=as_dictionary,
            **LOG_PARQUET_OPTIONS,
        )
        try:
            yield pf
        finally:
            pf.close()
    else:
        with storage.open_remote(path) as fh:
            yield pq.ParquetFile(fh, metadata=metadata, read_dictionary=as_dictionary, **LOG_PARQUET_OPTIONS)


def table_ids(metadata: pa.ChunkedArray) -> list[str]:
    """The ids of the metaData actions in a checkpoint's ``metaData`` column (null rows are
    other actions)."""
    md = metadata.combine_chunks()
    rows = md.filter(md.is_valid())
    if not len(rows) or rows.type.get_field_index("id") < 0:
        return []
    return pc.struct_field(rows, "id").to_pylist()


#: Leaf columns not read where the footer says every row of them is null: absent, replay reads them
#: as null (no transactions, domain metadata, deletion vectors or row ids), and most checkpoints
#: have them all null, which decoding costs anyway (21k adds: ~1.5 ms of a leaf's ~5 ms).
SKIPPED_WHEN_NULL = frozenset(
    {"txn", "domainMetadata", "add.deletionVector", "add.baseRowId", "add.defaultRowCommitVersion"}
)


def leaf_paths(md: pq.FileMetaData) -> list[str]:
    """The dotted path of each leaf column of a parquet file, in column order (each costs a
    ColumnSchema object: listed once for all the columns a read asks about)."""
    schema = md.schema
    return [schema.column(j).path for j in range(md.num_columns)]


def _all_null(
    md: pq.FileMetaData, column: str, row_groups: Sequence[int] | None, paths: Sequence[str] | None = None
) -> bool:
    """Whether the footer's statistics show every value under ``column`` (a top-level column or
    ``top.field``, none of them repeated) null in the row groups read; unknown counts are not.
    ``paths``: :func:`leaf_paths` of ``md``, if listed already."""
    prefix = column + "."
    schema = md.schema
    paths = leaf_paths(md) if paths is None else paths
    leaves = [j for j, path in enumerate(paths) if (path + ".").startswith(prefix)]
    if not leaves or any(schema.column(j).max_repetition_level for j in leaves):
        return False
    groups = range(md.num_row_groups) if row_groups is None else row_groups
    for g in groups:
        rg = md.row_group(g)
        for j in leaves:
            st = rg.column(j).statistics
            if st is None or not st.has_null_count or st.null_count != rg.num_rows:
                return False
    return len(groups) > 0


#: A local leaf of at most this many rows whose footer the planning reads parsed (a classic
#: checkpoint's one file: its protocol and metaData were read through that handle) is read through
#: their handle, under its lock, not a reader of its own: opening one (a ParquetFile, its schema's
#: paths) was ~1 ms of CPU of a 96-file table's registration and first query (li_flat), more than
#: the read of its adds. Only while the file is the one the handle opened (same device, inode, size
#: and modification time): a table written again since has another file under the name, read anew
#: (and found to be another table's). Larger leaves get a reader of their own, read while other
#: reads of the table run; so does a partitioned table's leaf of more than
#: DICTIONARY_READ_MIN_ROWS rows whose partition values a reader of its own reads as dictionaries
#: (:func:`dictionary_leaves`; an unpartitioned table's are empty maps, dictionary-encoded too,
#: read as they come); and a leaf on an object store.
SHARED_READER_MAX_ROWS = 10_000
#: A partitioned table's leaf of at most this many rows is read through the shared handle even
#: where a reader of its own would read its partition values as dictionaries: their strings
#: decode in microseconds, and the second open of the checkpoint cost more (li_part, 112 adds:
#: ParquetFile opens a fresh query 2 -> 1).
DICTIONARY_READ_MIN_ROWS = 1_000


@contextlib.contextmanager
def _shared_or_own_reader(storage: Storage, leaf: LeafFile, partitioned: bool) -> Iterator[pq.ParquetFile]:
    """The planning reads' handle of a small leaf (see :data:`SHARED_READER_MAX_ROWS`), held
    under their lock; else :func:`open_leaf`'s reader of its own."""
    planned = storage.__dict__.get("_log_parquet", {}).get(leaf.path)
    opened = getattr(planned, "delta_identity", None)  # local files only
    if (
        opened is not None
        and planned.metadata.num_rows <= SHARED_READER_MAX_ROWS
        and file_identity(leaf.path) == opened  # not a file written again under its name since
        and not (
            partitioned
            and planned.metadata.num_rows > DICTIONARY_READ_MIN_ROWS
            and dictionary_leaves(planned.metadata, leaf.row_groups)
        )
    ):
        with storage.__dict__.setdefault("_log_parquet_lock", threading.Lock()):
            yield planned
        return
    with open_leaf(storage, leaf.path, dictionaries=True, row_groups=leaf.row_groups) as pf:
        yield pf


def read_leaf(
    storage: Storage, leaf: LeafFile, columns: Sequence[str] | None = None, partitioned: bool = True
) -> pa.Table:
    """Read a leaf's action columns (whole file or the given row groups); those of
    :data:`SKIPPED_WHEN_NULL` only when some row has a value. ``partitioned=False``: the table
    has no partition columns (see :data:`SHARED_READER_MAX_ROWS`)."""
    storage.note_sizes(((leaf.path, leaf.size),))  # a parallel worker's storage was not told
    leaf_file = _shared_or_own_reader(storage, leaf, partitioned)
    with checkpoint_read_errors(leaf.path, LEAF_WHAT, storage), leaf_file as pf:
        check_row_groups(leaf, pf.metadata.num_row_groups)
        if "/_sidecars/" in leaf.path and not {"add", "remove"} & set(pf.schema_arrow.names):
            raise LogCorruptError(
                f"{leaf.path}: sidecar has neither an add nor a remove column: not a sidecar"
            )
        present = present_columns(pf, columns or LEAF_COLUMNS)
        if SKIPPED_WHEN_NULL.intersection(present):
            md = pf.metadata
            paths = leaf_paths(md)
            present = [
                c
                for c in present
                if c not in SKIPPED_WHEN_NULL or not _all_null(md, c, leaf.row_groups, paths)
            ]
        threads = small_read_threads(pf)
        if leaf.row_groups is None:
            return pf.read(columns=present, use_threads=threads)
        return pf.read_row_groups(list(leaf.row_groups), columns=present, use_threads=threads)
