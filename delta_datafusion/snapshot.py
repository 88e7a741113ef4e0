"""A consistent snapshot of a Delta table at one version.

Loading is eager for what every use needs (segment, protocol, metadata, schema) so that errors
surface when the snapshot is created; the file replay runs on first use and is cached.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arguments import integer
from .arrays import as_array
from .arrow_threads import arrow_threads
from .cached import cached_property
from .errors import (
    DeltaError,
    LogCorruptError,
    MissingLogFileError,
    MissingProtocolError,
    VersionNotFoundError,
)
from .log.actions import (
    CommitData,
    commit_schema,
    file_action_types,
    find_protocol_and_metadata,
    forget_parquet,
    parse_json_actions,
    partition_values_type,
    read_commits,
)
from .log.checkpoint import (
    LEAF_COLUMNS,
    CheckpointManifest,
    LeafFile,
    check_json_lines,
    checkpoint_protocol_metadata,
    read_leaf,
    read_manifest,
    table_ids,
)
from .log.checksum import VersionChecksum
from .log.segment import LogSegment
from .lru import LruCache
from .partition_values import typed_partition_column
from .protocol import Metadata, Protocol, require_metadata
from .replay import (
    RAW_ADD_FIELDS,
    child,
    file_keys,
    flatten_file_actions,
    latest_domains,
    latest_txns,
    newest_per_key,
    surviving_checkpoint_adds,
    valid_rows,
    with_keys,
    with_locations,
)
from .stats import stats_types, typed_stats
from .storage import Storage
from .thread_pools import ProcessPool

if TYPE_CHECKING:
    from .scan import Scan

T = TypeVar("T")

#: How many checkpoint leaves (V2 sidecars, multi-part parts) a snapshot reads at once, on threads
#: (pyarrow releases the GIL). 1 reads them one after another, i.e. fully sequential replay (not
#: even a single leaf's read overlapped with the commit replay).
#: None: one per core for local tables, 8 for object stores (where reads wait on the network).
#: Locally the work is CPU-bound and each leaf's read already uses pyarrow's own pool, so a
#: leaf per core pays when the cores are free and costs when they are not (1M adds in 8 sidecars
#: on 2 cores, alternating in one process: quiet, 2 leaves at once against one, wall median
#: 1.34-1.39 s vs 1.54-1.59 s for +6-15 % CPU; with other work holding the cores, +18-23 % CPU
#: and no better wall, 34 pairs); 8 at once: +0.46 GB peak.
LEAF_THREADS: int | None = None


def _few_touched(keys: pa.Array | None, n_adds: int) -> bool:
    """Whether the commit keys can drop at most a small share of ``n_adds`` checkpoint adds."""
    return keys is not None and len(keys) * 8 <= n_adds


def _leaf_threads(storage: Storage) -> int:
    """How many leaves of a checkpoint with several are read at once."""
    if LEAF_THREADS is not None:
        return max(1, LEAF_THREADS)
    return local_leaf_threads() if storage.is_local else 8


def local_leaf_threads() -> int:
    """The default for local tables: a leaf per core (see LEAF_THREADS)."""
    return max(1, os.cpu_count() or 1)


def _overlap_single_leaf(storage: Storage) -> bool:
    """Whether a one-leaf checkpoint may be read on a thread while the commits replay on the
    caller's: two different jobs, not several leaves competing for pyarrow's pool."""
    if LEAF_THREADS is not None:
        return LEAF_THREADS > 1
    return not storage.is_local or (os.cpu_count() or 1) > 1


#: The add stats of a one-leaf checkpoint, read apart from the rest of the leaf
#: (:data:`_LEAF_REST_COLUMNS`) so that their parse, most of a load's work, runs while the rest is
#: read and replayed (see :meth:`Snapshot._typed_single_leaf`).
_LEAF_STATS_COLUMNS = ["add.stats", "add.stats_parsed"]
#: The rest: what the typed files take (not ``dataChange``, which scan metadata has no column for)
_LEAF_REST_COLUMNS = [
    f"add.{f}" for f in RAW_ADD_FIELDS if f not in {"stats", "stats_parsed", "dataChange"}
] + [c for c in LEAF_COLUMNS if c != "add"]


#: The flat add columns :meth:`TableVersionView.scan_file_table` reads (version: in its errors).
_TYPED_FROM = [
    "path",
    "location",
    "partitionValues",
    "size",
    "modificationTime",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "version",
]


@dataclass
class _StatsApart:
    """A leaf's add stats read before the rest of the leaf, their typing started on a thread."""

    valid: pa.Array  # which rows of the leaf are adds: the rest's read must have the same
    stats: pa.Array  # the adds' stats strings
    parsed: pa.Array | None  # their stats_parsed, when the checkpoint has it
    typed: Future  # the typed stats of every add

    def lines_up(self, rest: pa.Table) -> bool:
        """Whether the rest of the leaf, read apart, has its adds in the same rows."""
        return "add" in rest.column_names and _validity(rest.column("add")).equals(self.valid)

    def restore(self, flat: pa.Table) -> pa.Table:
        """The flat adds of the rest with their raw stats put back (as read whole)."""
        flat = flat.set_column(flat.schema.get_field_index("stats"), "stats", self.stats)
        return flat if self.parsed is None else flat.append_column("stats_parsed", self.parsed)


#: Columns of the scan-metadata file table, in order.
FILE_COLUMNS = [
    "path",
    "location",
    "size",
    "modification_time",
    "partition_values",
    "stats",
    "deletion_vector",
    "base_row_id",
    "default_row_commit_version",
]


@dataclass
class CommitLog:
    """The parsed commit part of a segment: one Arrow table of actions plus per-row versions."""

    data: list[CommitData]
    actions: pa.Table
    versions: pa.Array

    def file_actions(self, name: str, storage: Storage, physical_partitions: list[str]) -> pa.Table:
        flat = flatten_file_actions(
            self.actions.column(name),
            physical_partitions,
            self.versions,
            f"{name} actions of {storage.root_uri}",
        )
        return with_keys(storage, flat)


@dataclass
class _CheckpointPass:
    """What replay keeps of a checkpoint (see :attr:`Snapshot._checkpoint_pass`)."""

    adds: list[pa.Table]
    txn: list[pa.Array]
    domains: list[pa.Array]


class TableVersionView:
    """What a table version exposes from its metadata and storage; shared by :class:`Snapshot`
    and the snapshot stand-in that parallel workers rebuild from serialized state."""

    storage: Storage
    metadata: Metadata
    version: int

    @property
    def schema(self) -> pa.Schema:
        """Logical Arrow schema (what SQL sees)."""
        return self.metadata.arrow_schema

    @property
    def physical_schema(self) -> pa.Schema:
        return self.metadata.physical_schema

    @property
    def partition_columns(self) -> list[str]:
        """The table's partition columns, in the metadata's order (logical names)."""
        return list(self.metadata.partition_columns)

    @property
    def properties(self) -> dict[str, str]:
        """The table's configuration (``delta.*`` and other properties), as the log writes them."""
        return dict(self.metadata.configuration)

    @property
    def table_root(self) -> str:
        return self.storage.root_uri

    @property
    def checkpoint_version(self) -> int | None:
        """Version of the checkpoint the table version is replayed from (None: commits only)."""
        raise NotImplementedError

    def log_file_of(self, version: int, location: str | None = None) -> str | None:
        """The log file holding a live file action replayed at ``version`` (of data file
        ``location``), for an error to name; None when not known here."""
        return None

    def log_file_of_location(self, location: str) -> str | None:
        """The log file holding the live add of data file ``location`` (see :meth:`log_file_of`)."""
        return None

    def leaf_adds(self, table: pa.Table, commit_keys: pa.Array | None, source: str | None = None) -> pa.Table:
        """Surviving flat adds of one checkpoint leaf (or manifest) table: those whose key no
        commit after the checkpoint touched. ``source``: the file read (see located_leaf_adds)."""
        flat = self.located_leaf_adds(table, source)
        loc, dv = as_array(flat.column("location")), as_array(flat.column("deletionVector"))
        flat = flat.append_column("key", file_keys(loc, dv))
        return flat if commit_keys is None else surviving_checkpoint_adds(flat, commit_keys)

    def located_leaf_adds(self, table: pa.Table, source: str | None = None) -> pa.Table:
        """Every flat add of one checkpoint leaf (or manifest) table, with its ``location`` and
        the checkpoint's version; no ``key`` (see :func:`~.replay.touched_files`). ``source``:
        the part or sidecar file the table was read from, named in an error (the checkpoint's
        version alone does not say which of its files holds a wrongly typed field)."""
        where = f"checkpoint {self.checkpoint_version} of {self.storage.root_uri}"
        phys = self.metadata.physical_partition_columns()
        if "add" in table.column_names:
            adds = table.column("add")
        else:  # a part without adds (Spark writes multi-part checkpoints whose parts lack the column)
            adds = pa.array([], file_action_types(partition_values_type(phys))["add"])
        flat = with_locations(
            self.storage,
            flatten_file_actions(
                adds,
                phys,
                where=where if source is None else f"{where}, file {source}",
            ),
        )
        return flat.append_column(
            "version", pa.nulls(flat.num_rows, pa.int64()).fill_null(self.checkpoint_version)
        )

    def to_scan_files(
        self,
        raw: pa.Table,
        stats_columns: Collection[str] | None = None,
        partition_values: pa.Array | None = None,
    ) -> pa.Table:
        """Flat raw adds -> the typed scan-metadata file table (FILE_COLUMNS).

        ``stats_columns``: type only these columns' bounds (all when None).
        ``partition_values``: already typed partition values of ``raw``."""
        pv = self.typed_partitions(raw) if partition_values is None else partition_values
        stats_col = as_array(raw.column("stats")) if "stats" in raw.column_names else None
        parsed = as_array(raw.column("stats_parsed")) if "stats_parsed" in raw.column_names else None
        stats = typed_stats(self.metadata, stats_col, parsed, raw.num_rows, stats_columns)
        return self.scan_file_table(raw, stats, pv)

    def scan_file_table(
        self, raw: pa.Table, stats: pa.Array, partition_values: pa.Array | None = None
    ) -> pa.Table:
        """:meth:`to_scan_files` with the stats already typed (every column's bounds)."""
        pv = self.typed_partitions(raw) if partition_values is None else partition_values
        return pa.table(
            {
                "path": raw.column("path"),
                "location": raw.column("location"),
                "size": raw.column("size"),
                "modification_time": raw.column("modificationTime"),
                "partition_values": pv,
                "stats": stats,
                "deletion_vector": raw.column("deletionVector"),
                "base_row_id": raw.column("baseRowId"),
                "default_row_commit_version": raw.column("defaultRowCommitVersion"),
            }
        )

    def typed_partitions(self, raw: pa.Table) -> pa.Array:
        """Typed partition values (a struct) of flat raw adds."""
        md = self.metadata
        pv = typed_partition_column(
            raw,
            md.physical_partition_columns(),
            [md.arrow_schema.field(c) for c in md.partition_columns],
            f"{self.storage.root_uri} at version {self.version}",
            self.log_file_of,
        )
        # a checkpoint's partitionValues_parsed is not used: the strings are required (a file
        # without them is refused) and win where the two disagree, as Spark and delta-kernel-rs
        # read them
        return pv


def latest_protocol_metadata(
    storage: Storage,
    segment: LogSegment,
    newest_first: Iterable[CommitData],
    checksum: VersionChecksum | None = None,
) -> tuple[Protocol, Metadata, bool]:
    """The protocol and metadata in force at the segment's version, and whether the metadata is
    the checkpoint's (no later commit replaced it). ``newest_first``: the segment's commits,
    newest first; consumed only until both actions are found, so a lazy reader of them reads
    no further (the checkpoint's are read when the commits after it have none).

    ``checksum``: a version checksum of the segment (see :func:`.log.checksum.checksum_for`),
    read instead of the commits at and before its version. Its protocol and metadata are taken
    only if this reader takes them as it would the log's; otherwise (as when it cannot be read)
    the search goes on through the commits, so a checksum never changes an error either."""
    commits = iter(newest_first)
    seen: list[CommitData] = []
    found = _search_protocol_metadata(storage, segment, commits, seen, checksum)
    if found.from_checksum:
        try:
            return _checked_protocol_metadata(storage, segment, found, checksum)
        except DeltaError:  # not a protocol or metadata this reader takes: the log decides
            found = _search_protocol_metadata(storage, segment, itertools.chain(seen, commits), [], None)
    return _checked_protocol_metadata(storage, segment, found, None)


@dataclass
class _FoundProtocolMetadata:
    """The newest protocol and metaData actions a search found, and the files they are from."""

    protocol: dict | None = None
    metadata: dict | None = None
    p_where: str | None = None
    m_where: str | None = None
    from_checksum: bool = False

    def take(self, protocol: dict | None, metadata: dict | None, where: str) -> bool:
        """Keep what is newer than found so far; True when both are found."""
        if protocol is not None and self.protocol is None:
            self.protocol, self.p_where = protocol, where
        if metadata is not None and self.metadata is None:
            self.metadata, self.m_where = metadata, where
        return self.protocol is not None and self.metadata is not None


def _search_protocol_metadata(
    storage: Storage,
    segment: LogSegment,
    commits: Iterator[CommitData],
    seen: list[CommitData],
    checksum: VersionChecksum | None,
) -> _FoundProtocolMetadata:
    """Search the commits (newest first) until both actions are found; the checksum's when the
    commits after it have not both (none at or before its version is read then); the
    checkpoint's last. Commits taken are added to ``seen``."""
    found = _FoundProtocolMetadata()
    # the commits come as the segment's, newest first: those after the checksum are taken first
    newer = segment.version - checksum.version if checksum is not None else len(segment.commits)
    for part in (itertools.islice(commits, newer), commits):
        for c in part:
            seen.append(c)
            p, m = find_protocol_and_metadata(c.data, c.info.path, c.escaped_letter)
            if (p is not None or m is not None) and found.take(p, m, c.info.path):
                return found
        if checksum is not None and part is not commits:
            pm = checksum.protocol_metadata(storage)
            if pm is not None:  # both (the commits after it gave one at most): the search ends
                found.from_checksum = True
                found.take(*pm, checksum.file.path)
                return found
    ckpt = segment.checkpoint
    if ckpt is not None:
        (protocol, p_where), (metadata, m_where) = checkpoint_protocol_metadata(storage, ckpt)
        found.take(protocol, None, p_where)
        found.take(None, metadata, m_where)
    if found.protocol is None or found.metadata is None:
        # found by a byte search: a commit that is not JSON at all must be called corrupt
        for c in reversed(seen):
            check_json_lines(c.data, c.info.path)
    return found


def _odd_one(sources: list[pa.Table], names: list[str]) -> str | None:
    """After the raw adds of ``sources`` failed to concatenate: the name of the one source without
    which the others do (the damaged part of a checkpoint), None when no single one is odd (two
    sources, or too many to try: up to 64 concatenations on this error path)."""
    if len(sources) != len(names) or not 2 < len(sources) <= 64:
        return None
    odd = []
    for i in range(len(sources)):
        try:
            pa.concat_tables(sources[:i] + sources[i + 1 :], promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            continue
        odd.append(names[i])
    return odd[0] if len(odd) == 1 else None


def _checked_protocol_metadata(
    storage: Storage, segment: LogSegment, found: _FoundProtocolMetadata, checksum: VersionChecksum | None
) -> tuple[Protocol, Metadata, bool]:
    """The actions found, validated (a protocol this reader cannot honour is refused)."""
    where_table = f"{storage.root} at version {segment.version}"
    if found.protocol is None:
        raise MissingProtocolError(
            f"{where_table}: no protocol action found in the log{_checkpoint_lacks(segment, 'protocol')}"
        )
    p_where, m_where = found.p_where, found.m_where
    proto = Protocol.from_action(found.protocol, p_where)
    proto.check_readable(p_where)  # before the metadata: it may be newer
    md = require_metadata(
        Metadata.from_action(found.metadata, m_where, proto) if found.metadata is not None else None,
        where_table,
        _checkpoint_lacks(segment, "metaData"),
    )
    if checksum is not None and m_where == checksum.file.path:
        # the in-commit timestamp settings are read by history and time travel: a checksum's
        # must be readable and cannot enable them from a later version than its own
        ict = md.ict_enablement
        if ict is not None and ict[0] > checksum.version:
            raise LogCorruptError(f"{m_where}: in-commit timestamps enabled after its version")
    ckpt = segment.checkpoint
    return proto, md, ckpt is not None and any(m_where == part.path for part in ckpt.parts)


def _checkpoint_lacks(segment: LogSegment, action: str) -> str:
    """What a missing protocol or metaData error adds when the segment starts at a checkpoint: that
    checkpoint (which must hold both) has none, nor any commit after it; the commits before it are
    not read, so naming only the table left the damaged file to be found."""
    ckpt = segment.checkpoint
    if ckpt is None:
        return ""
    files = (
        ckpt.parts[0].path if len(ckpt.parts) == 1 else f"{len(ckpt.parts)} parts from {ckpt.parts[0].path}"
    )
    return (
        f": the checkpoint of version {ckpt.version} ({files}) holds no {action} action, which every "
        f"checkpoint must, and no commit after it has one"
    )


class Snapshot(TableVersionView):
    """The table at ``version``: protocol, metadata, schema, and (lazily) its live files."""

    def __init__(self, storage: Storage, segment: LogSegment, commit_data: list[CommitData] | None = None):
        self.storage = storage
        self.segment = segment
        self.version = segment.version
        self._lock = threading.Lock()
        self._commit_data = commit_data if commit_data is not None else read_commits(storage, segment.commits)
        self.protocol, self.metadata = self._load_protocol_metadata()

    # -- protocol & metadata ------------------------------------------------------------------
    def _load_protocol_metadata(self) -> tuple[Protocol, Metadata]:
        protocol, metadata, self.metadata_from_checkpoint = latest_protocol_metadata(
            self.storage, self.segment, reversed(self._commit_data)
        )
        return protocol, metadata

    @property
    def checkpoint_version(self) -> int | None:
        return self.segment.checkpoint_version

    @property
    def commit_data(self) -> list[CommitData]:
        """The commit files of the segment, as read."""
        return self._commit_data

    def log_file_of_location(self, location: str) -> str | None:
        """Error path only: the log file holding the live add of data file ``location`` (found
        among the raw adds, which are replayed for it if the scan typed its files without them)."""
        try:
            raw = self.raw_files
            at = pc.index(raw.column("location"), location).as_py()
            return None if at < 0 else self.log_file_of(raw.column("version")[at].as_py(), location)
        except (DeltaError, pa.ArrowException):  # the error being reported is the one to raise
            return None

    def log_file_of(self, version: int, location: str | None = None) -> str | None:
        """Error path only: the commit file of ``version``, or the checkpoint file whose adds hold
        ``location`` when the checkpoint is one file or its replay kept each file's adds apart."""
        for c in self._commit_data:
            if c.version == version:
                return c.info.path
        manifest = self.checkpoint_manifest if version == self.checkpoint_version else None
        if manifest is None:
            return None
        inline = [manifest.checkpoint.parts[0].path] if manifest.inline is not None else []
        files = [*inline, *(leaf.path for leaf in manifest.leaves)]
        if len(files) == 1:
            return files[0]
        if location is None:
            return None
        try:  # its raw adds, one table per file in this order (read again if files() typed them apart)
            done = self._checkpoint_pass
        except (DeltaError, pa.ArrowException):  # the error being reported is the one to raise
            return None
        if len(done.adds) != len(files):
            return None
        for name, adds in zip(files, done.adds, strict=True):
            if (
                "location" in adds.column_names
                and pc.any(pc.equal(adds.column("location"), location)).as_py()
            ):
                return name
        return None

    # -- commits ---------------------------------------------------------------------------
    @cached_property
    def commit_log(self) -> CommitLog:
        schema = commit_schema(partition_values_type(self.metadata.physical_partition_columns()))
        blobs = [c.data for c in self._commit_data]
        actions, counts = parse_json_actions(
            blobs,
            schema,
            [c.info.path for c in self._commit_data],
            [c.escaped_letter for c in self._commit_data],
        )
        versions = pa.array([c.version for c in self._commit_data], pa.int64())
        per_row = pa.array(np.repeat(versions.to_numpy(), counts), pa.int64())
        return CommitLog(self._commit_data, actions, per_row)

    def commit_timestamp(self, version: int | None = None) -> int:
        """Commit timestamp (ms) of ``version`` (this snapshot's by default), as ``history()`` and
        time travel have it: the in-commit timestamp when the latest metadata has them enabled
        from that version on, else the file modification time made strictly increasing (which
        needs the whole log listed). The change feed's ``_commit_timestamp`` is the same time."""
        from .table import DeltaTable, relisting

        version = self.version if version is None else integer(version, "version")
        if version > self.version:
            raise VersionNotFoundError(f"version {version} is after this snapshot's version {self.version}")
        table = DeltaTable.from_storage(self.storage)
        # a commit removed after the listing (a concurrent log cleanup) is listed again, as history() is
        return relisting(lambda: table.timeline().timestamp(version))

    # -- replay ----------------------------------------------------------------------------
    @cached_property
    def _commit_replay(self) -> tuple[pa.Table, pa.Array]:
        """(live adds from commits, keys of every file action in the commits)."""
        if not self._commit_data:
            # the segment is its checkpoint alone: nothing to replay, no key to anti-join against
            # (flattening empty action columns costs ~1.5 ms of every query on such a table)
            return _empty_raw(), pa.array([], pa.string())
        parts = self.metadata.physical_partition_columns()
        adds = self.commit_log.file_actions("add", self.storage, parts)
        removes = self.commit_log.file_actions("remove", self.storage, parts)
        return newest_per_key(adds, removes, f"table {self.storage.root_uri}")

    @cached_property
    def checkpoint_manifest(self) -> CheckpointManifest | None:
        ckpt = self.segment.checkpoint
        if ckpt is None:
            return None
        return read_manifest(
            self.storage, self.segment.log_dir, ckpt, self.metadata.physical_partition_columns()
        )

    @cached_property
    def _checkpoint_pass(self) -> _CheckpointPass:
        """One read of the checkpoint: per source (manifest inline actions, then each leaf) the
        surviving raw adds, plus the small txn/domainMetadata columns."""
        return self._read_checkpoint_pass(typed=False)

    def _read_checkpoint_pass(self, typed: bool) -> _CheckpointPass:
        """:attr:`_checkpoint_pass`, or with ``typed`` the surviving adds typed (what ``files()``
        keeps of them; not cached, the raw adds are not kept).

        Leaves (sidecars / parts) are read on threads (pyarrow releases the GIL) and reduced to
        what replay needs inside the thread, so whole leaf tables are not all held at once (1M adds
        in 8 sidecars: sequential scan_metadata() peak RSS 1.9 GB before this, 0.8-0.9 GB raw,
        0.6 typed)."""
        manifest = self.checkpoint_manifest
        out = _CheckpointPass([], [], [])
        if manifest is None:
            return out
        leaves = manifest.leaves
        prefetch = None
        if (
            len(leaves) == 1
            and self._commit_data
            and "_commit_replay" not in self.__dict__
            and _overlap_single_leaf(self.storage)
        ):
            # one leaf (a classic checkpoint): read it while the commits replay on this thread
            # (pyarrow releases the GIL; 3,000-commit log: about 4 ms of its 55). Not when no
            # commit follows the checkpoint: nothing to overlap, and starting and waiting for the
            # thread cost each query on such a table about 0.3 ms (TPC-H lineitem, 112 files)
            prefetch = _on_thread(lambda: self._read_leaf(leaves[0]), "delta-checkpoint-read")
        _, keys = self._commit_replay

        sources = len(leaves) + (manifest.inline is not None)
        repeats = manifest.checkpoint.kind == "multi" and sources > 1  # checked by their keys

        def reduce(
            table: pa.Table, source: str
        ) -> tuple[pa.Table, pa.Array | None, pa.Array | None, pa.Array | None]:
            txn = table.column("txn") if "txn" in table.column_names else None
            dom = table.column("domainMetadata") if "domainMetadata" in table.column_names else None
            if not typed:
                adds = project_raw(self.leaf_adds(table, keys, source))
                return adds, txn, dom, adds.column("key")
            flat = self.leaf_adds(table, None, source)
            del table
            adds, key = self._surviving_typed_adds(flat, keys, repeats)
            return adds, txn, dom, key

        inline = manifest.inline
        parts = [reduce(inline, manifest.checkpoint.parts[0].path)] if inline is not None else []
        threads = min(len(leaves), _leaf_threads(self.storage))
        if prefetch is not None:
            parts.append(reduce(prefetch.result(), leaves[0].path))
        elif threads <= 1:
            parts += [reduce(self._read_leaf(leaf), leaf.path) for leaf in leaves]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                parts += list(pool.map(lambda leaf: reduce(self._read_leaf(leaf), leaf.path), leaves))
        if repeats:
            _refuse_repeated_adds([key for _, _, _, key in parts], manifest.checkpoint.parts[0].path)
        for adds, txn, dom, _ in parts:
            out.adds.append(adds)
            if txn is not None:
                out.txn.append(txn)
            if dom is not None:
                out.domains.append(dom)
        return out

    def _surviving_typed_adds(
        self, flat: pa.Table, keys: pa.Array, with_keys: bool
    ) -> tuple[pa.Table, pa.ChunkedArray | None]:
        """The typed adds of a leaf's flat adds that no commit touched, and their keys if asked
        for (each is a copy of the kept strings: only a multi-part checkpoint's check needs them). When the
        commits touched few of them, every add is typed and the touched rows dropped after:
        dropping them from the raw adds first copies every stats string (1M adds in 8 sidecars,
        leaves one at a time: CPU -7 %, peak RSS 746 -> 585 MB)."""
        key = flat.column("key")
        raw = project_raw(flat)
        if not len(keys) or not raw.num_rows:
            return self.to_scan_files(raw), key if with_keys else None
        keep = pc.invert(pc.is_in(key, value_set=keys))
        if _few_touched(keys, raw.num_rows):
            try:
                return self.to_scan_files(raw).filter(keep), key.filter(keep) if with_keys else None
            except Exception:  # noqa: BLE001 - typed again below, where a real error repeats
                # a file a later commit removed may not fit the current schema (a column's type
                # changed by an overwrite): type only the survivors
                pass
        raw = raw.filter(keep)
        return self.to_scan_files(raw), raw.column("key") if with_keys else None

    def _raw_sources(self) -> list[pa.Table]:
        """Raw adds of the live files: from the commits, then from each checkpoint source."""
        checkpoint = self._checkpoint_pass  # first: it overlaps its reads with the commit replay
        live, _ = self._commit_replay
        return [project_raw(live), *checkpoint.adds]

    @cached_property
    def raw_files(self) -> pa.Table:
        """Flat raw add actions of the live files (strings as in the log, stats unparsed)."""
        sources = self._raw_sources()
        try:
            return pa.concat_tables(sources, promote_options="permissive")
        except (pa.ArrowTypeError, pa.ArrowInvalid) as e:  # e.g. checkpoint parts typing stats_parsed apart
            where = self.segment.checkpoint.parts[0].path if self.segment.checkpoint else self.table_root
            manifest = self.checkpoint_manifest
            if manifest is not None:  # the sources: the commits, the manifest's own adds, each leaf
                names = [
                    self.table_root,
                    *([manifest.checkpoint.parts[0].path] if manifest.inline is not None else []),
                ]
                where = _odd_one(sources, [*names, *(leaf.path for leaf in manifest.leaves)]) or where
            raise LogCorruptError(
                f"{where}: the checkpoint's parts or the commits disagree on add fields: {e}"
            ) from e

    def _read_leaf(self, leaf: LeafFile, columns: Sequence[str] | None = None) -> pa.Table:
        """A checkpoint leaf's action columns; the one this snapshot's metadata was read from at
        load is checked to be that table's still. A classic checkpoint is named by its version
        alone: a folder deleted and written again since holds another table's there. One of
        another size fails to parse (see _raise_if_replaced); one of the same size parsed, and
        its files were read as this snapshot's. The check reads one more column, the metaData
        row's id (as the parallel phase two does)."""
        ckpt = self.segment.checkpoint
        partitioned = bool(self.metadata.partition_columns)
        if not (self.metadata_from_checkpoint and ckpt is not None and leaf.path == ckpt.parts[0].path):
            return read_leaf(self.storage, leaf, columns, partitioned)
        table = read_leaf(self.storage, leaf, [*(columns or LEAF_COLUMNS), "metaData.id"], partitioned)
        if "metaData" not in table.column_names:
            return table
        ids = set(table_ids(table.column("metaData")))
        if ids and ids != {self.metadata.id}:
            raise DeltaError(
                f"{self.table_root} was replaced by another table after it was opened (its checkpoint "
                f"{leaf.path} is of table id {sorted(ids)[0]} now, not {self.metadata.id}); open it again"
            )
        return table.drop_columns(["metaData"])

    def _typed_single_leaf(self) -> pa.Table | None:
        """The typed files of a table whose checkpoint is one leaf (a classic checkpoint), with
        the leaf's adds typed on a thread while the commits replay and are typed on this one;
        None when this does not apply (see :attr:`_files`)."""
        manifest = self.checkpoint_manifest
        if (
            manifest is None
            or not self._commit_data  # no commit to replay meanwhile: the thread only costs
            or len(manifest.leaves) != 1
            or manifest.inline is not None
            or "_checkpoint_pass" in self.__dict__
            or "_commit_replay" in self.__dict__
            or not _overlap_single_leaf(self.storage)
        ):
            return None
        leaf = manifest.leaves[0]
        keys_ready: Future = Future()  # the commit keys; None: the commit replay failed
        # at most one file action a line: a bound of the commit keys known before they are
        actions = sum(c.data.count(b"\n") + 1 for c in self._commit_data)

        # the leaf's txn and domainMetadata columns as soon as it is read: the caller makes the
        # transactions and domains of them while the stats are typed (None: the read failed)
        side: Future = Future()

        def work() -> tuple | None:
            try:
                return read_and_type()
            finally:
                if not side.done():
                    side.set_result(None)

        def read_and_type() -> tuple | None:
            apart = self._stats_apart(leaf, actions)
            if apart is None:
                table = self._read_leaf(leaf)
            else:  # on this thread: pyarrow's pool is parsing the stats
                with arrow_threads(False):
                    table = self._read_leaf(leaf, _LEAF_REST_COLUMNS)
            if apart is not None and not apart.lines_up(table):  # never seen: read it whole
                apart, table = None, self._read_leaf(leaf)
            flat = self.leaf_adds(table, None, leaf.path)
            txn = table.column("txn") if "txn" in table.column_names else None
            dom = table.column("domainMetadata") if "domainMetadata" in table.column_names else None
            del table
            side.set_result((txn, dom))
            if apart is not None:
                try:
                    return self._typed_apart(flat, apart, keys_ready), None
                except Exception:  # noqa: BLE001 - typed again below, where a real error repeats
                    flat = apart.restore(flat)  # as read whole, for the typing below
            elif not keys_ready.done() or _few_touched(keys_ready.result(), flat.num_rows):
                # type every add now and drop the touched ones after, unless the commits are known
                # to touch many of them: filtering the raw adds first copies their stats strings
                try:
                    return self.to_scan_files(flat), flat.column("key")
                except Exception:  # noqa: BLE001 - typed again below, where a real error repeats
                    # a file a later commit removed may not fit the current schema (a column's
                    # type changed by an overwrite): wait for the keys, then type the rest
                    pass
            keys = keys_ready.result()
            if keys is None:  # the caller failed: nothing to type
                return None
            # the commit keys are known: drop the files they touch before typing
            return self.to_scan_files(surviving_checkpoint_adds(flat, keys)), None

        result = _on_thread(work, "delta-checkpoint-scan-files")
        try:
            live, keys = self._commit_replay
        except BaseException:
            keys_ready.set_result(None)
            raise
        keys_ready.set_result(keys)
        commits = self.to_scan_files(project_raw(live)) if live.num_rows else None
        # keep the small results, not the checkpoint's columns; made while the stats are typed
        # (after the typing they lengthened the load by their ~0.4 ms)
        leaf_columns = side.result()
        if leaf_columns is not None:  # else the read failed: its error comes with the result
            txn, dom = leaf_columns
            transactions = self._transactions_with([txn] if txn is not None else [])
            domains = self._domains_with([dom] if dom is not None else [])
            del txn, dom, leaf_columns
        typed, key = result.result()
        if key is not None and len(keys) and typed.num_rows:
            typed = typed.filter(pc.invert(pc.is_in(key, value_set=keys)))
        self.__dict__["transactions"] = transactions
        self.__dict__["domain_metadata"] = domains
        parts = [t for t in (commits, typed) if t is not None]
        return pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]

    def _typed_apart(self, flat: pa.Table, apart: _StatsApart, keys_ready: Future) -> pa.Table:
        """The typed files of a leaf's flat adds whose stats are typed apart, less those the
        commits touched: the rest is filtered while the stats are still parsed (after the parse,
        the whole typed table's filter took 2.4 ms with both cores otherwise idle), and the typed
        stats after it."""
        keys = keys_ready.result()
        if keys is None:  # the caller failed: nothing to type
            raise DeltaError("the commit replay failed")
        keep = None
        if len(keys) and flat.num_rows:
            keep = pc.invert(pc.is_in(flat.column("key"), value_set=keys))
            flat = flat.select([c for c in _TYPED_FROM if c in flat.column_names]).filter(keep)
        partition_values = self.typed_partitions(flat)  # before the wait: the stats take longest
        stats = apart.typed.result()
        return self.scan_file_table(flat, stats if keep is None else stats.filter(keep), partition_values)

    def _stats_apart(self, leaf: LeafFile, commit_actions: int) -> _StatsApart | None:
        """The leaf's add stats read on their own, their typing started on a thread; None when
        the leaf is to be read whole: the commits may remove many of its adds (more than
        :func:`_few_touched` allows: typed after they are dropped), or the stats cannot be read
        apart (an error is then reported by the whole read), or the leaf is on an object store
        (a second request after the first: a round trip of latency for ~5 ms of CPU)."""
        if not self.storage.is_local:
            return None
        try:
            with arrow_threads(False):  # a few columns: cheaper on one thread (21k adds: 2.1 -> 1.6 ms)
                table = read_leaf(
                    self.storage, leaf, _LEAF_STATS_COLUMNS, bool(self.metadata.partition_columns)
                )
            if "add" not in table.column_names:
                return None
            adds = table.column("add")
            valid = _validity(adds)
            adds = as_array(adds)
            rows = valid_rows(adds, valid)
            if commit_actions * 8 > len(rows):
                return None
            stats = child(rows, "stats", pa.string())
            parsed = child(rows, "stats_parsed") if rows.type.get_field_index("stats_parsed") >= 0 else None
        except Exception:  # noqa: BLE001 - the whole read that follows reports it
            return None
        md, n = self.metadata, len(rows)
        typed = _on_thread(lambda: typed_stats(md, stats, parsed, n), "delta-checkpoint-stats")
        return _StatsApart(valid, stats, parsed, typed)

    def _read_or_relisted(self, read: Callable[[Snapshot], T]) -> T:
        """``read(self)``, or, when the checkpoint it reads is gone, ``read`` of this version built
        again from a new listing. The checkpoint is read on first use, after the listing: a log
        cleanup in between may have removed it. The new listing's snapshot is another object
        (never the old listing's commits with the new one's checkpoint): threads replaying this
        one are not mixed."""
        try:
            return read(self)
        except MissingLogFileError:
            if self.segment.checkpoint is None:
                raise
        except LogCorruptError:
            _raise_if_replaced(self)
            raise
        from .table import relisting

        return relisting(lambda: read(_listed_again(self)))

    @cached_property
    def _files(self) -> pa.Table:
        snap, files = self._read_or_relisted(lambda s: (s, s._replayed_files()))
        if snap is not self:  # listed again: its transactions and domains are this version's
            self.__dict__["transactions"] = snap.transactions
            self.__dict__["domain_metadata"] = snap.domain_metadata
        return files

    def _replayed_files(self) -> pa.Table:
        # Typed source by source (smaller parse buffers); then the raw strings are dropped: planning
        # uses the typed table from now on.
        fast = self._typed_single_leaf()
        if fast is not None:  # it kept the transactions and domains itself
            self._drop_raw()
            return fast
        if self.checkpoint_manifest is not None and "_checkpoint_pass" not in self.__dict__:
            files = self._typed_checkpoint_files()
            if files is not None:
                return files
        sources = self._raw_sources()
        nonempty = [raw for raw in sources if raw.num_rows] or [
            pa.concat_tables(sources, promote_options="permissive")
        ]
        typed = [self.to_scan_files(raw) for raw in nonempty]
        files = pa.concat_tables(typed, promote_options="permissive") if len(typed) > 1 else typed[0]
        if self.checkpoint_manifest is not None:
            self.transactions, self.domain_metadata  # noqa: B018 - keep these small results
            self.__dict__.pop("_checkpoint_pass", None)
        self.__dict__.pop("_typed_memo", None)
        self.__dict__.pop("_plan_memo", None)  # plans hold slices of the raw adds
        self.__dict__.pop("raw_files", None)
        return files

    def _typed_checkpoint_files(self) -> pa.Table | None:
        """The typed files of the commits and of each checkpoint source, typed source by source
        with the raw adds dropped as soon as each is typed (the transactions and domains kept);
        None when there is no live file (the table's empty file table is typed as before)."""
        checkpoint = self._read_checkpoint_pass(typed=True)
        live, _ = self._commit_replay
        parts = [t for t in checkpoint.adds if t.num_rows]
        if not parts and not live.num_rows:  # no live file: typed from every source's raw adds
            return None
        if live.num_rows:
            parts.insert(0, self.to_scan_files(project_raw(live)))
        self.__dict__["transactions"] = self._transactions_with(checkpoint.txn)
        self.__dict__["domain_metadata"] = self._domains_with(checkpoint.domains)
        self.__dict__.pop("_typed_memo", None)
        self.__dict__.pop("_plan_memo", None)  # plans hold slices of the raw adds
        self.__dict__.pop("raw_files", None)
        return pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]

    def _drop_raw(self) -> None:
        """Forget the raw adds and the checkpoint's raw read once the typed files are built
        (with the transactions and domains kept): planning uses the typed table from then on."""
        self.__dict__.pop("_typed_memo", None)
        self.__dict__.pop("_plan_memo", None)  # plans hold slices of the raw adds
        self.__dict__.pop("raw_files", None)
        self.__dict__.pop("_checkpoint_pass", None)

    def select_files(self, predicate: Any = None, row_counts: bool = True) -> tuple[pa.Table, int, int]:
        """Live files that may hold rows matching ``predicate`` (a predicate tree), for planning.

        Returns ``(files, total, after_partition_pruning)``. Partition pruning runs first on the
        typed partition values; statistics are then typed only for the surviving files and only
        for the columns the predicate reads (``numRecords`` always), so a query does not pay for
        parsing every file's stats of every column. Uses :meth:`files` when already built.

        ``row_counts=False``: the caller reads a stored column of every file it keeps, so no row
        count is taken from the log (read/known_rows.py); without a predicate on a data column the
        stats are then not parsed at all (left null: the files' JSON, ~0.8 ms a query over 100
        files, was parsed for a ``numRecords`` that a ``SELECT * ... LIMIT 10`` never used, and
        ~0.5-1 ms for the 16 files of a partition-pruned sum, whose files are chosen and wholly
        matched by their partition values alone).
        """
        from .predicate import TRUE, referenced_columns, split_by_columns
        from .skipping import file_keep_mask

        parts = self.partition_columns
        schema = self.schema
        pred = TRUE if predicate is None else predicate
        part_pred = split_by_columns(pred, parts)[0] if parts else TRUE
        with self._lock:
            built = self.__dict__.get("_files")
        raw = None
        if built is None:
            try:
                raw = self.raw_files
                # files() building the typed table meanwhile dropped raw values made before it
                # did, not these: made after, they would stay for the snapshot's life
                with self._lock:
                    if "_files" in self.__dict__:
                        self._drop_raw()
            except MissingLogFileError:
                if self.segment.checkpoint is None:
                    raise
                built = self.files()  # the checkpoint is gone: listed again (see _files)
            except LogCorruptError:
                _raise_if_replaced(self)
                raise
        # stage 1: partition pruning, on the built file table or on the typed partition values
        if built is not None:
            candidates, pv, total = built, None, built.num_rows
        else:
            candidates = raw
            total = candidates.num_rows
            # typed here when partition pruning needs them (else when the files are typed: not
            # on a query whose typed files the snapshot kept, see _typed_candidates)
            pv = self.typed_partitions(candidates) if part_pred != TRUE else None
        keep = None
        if part_pred != TRUE and total:
            table = built if built is not None else pa.table({"partition_values": pv})
            keep = file_keep_mask(part_pred, table, schema, parts)
            candidates = candidates.filter(keep)
            pv = None if pv is None else pv.filter(keep)
        after_parts = candidates.num_rows
        # stage 2: statistics of the survivors (typed here for just the predicate's columns)
        data_columns = referenced_columns(pred) - set(parts)
        if built is not None:
            files = candidates
        elif not data_columns and not row_counts:  # nothing reads the stats: left unknown, unparsed
            unknown = pa.nulls(candidates.num_rows, stats_types(self.metadata, ())[1])
            files = self.scan_file_table(candidates, unknown, pv)
        else:
            files = self._typed_candidates(raw, candidates, keep, data_columns, pv)
        if pred != part_pred and files.num_rows:
            files = files.filter(file_keep_mask(pred, files, schema, parts))
        return files, total, after_parts

    def _typed_candidates(
        self,
        raw: pa.Table,
        candidates: pa.Table,
        keep: pa.Array | None,
        columns: Collection[str],
        pv: pa.Array | None,
    ) -> pa.Table:
        """``to_scan_files`` of the raw adds partition pruning kept (``keep`` of ``raw``; None:
        all), typed for ``columns``: kept per snapshot for the last few (kept rows, columns), as
        a registered table is queried again and again (TPC-H lineitem, 96 files: the stats JSON
        parse was ~2-3 ms of each stats-pruned query). Tables of more than ``TYPED_MEMO_MAX_FILES`` are
        typed every time (the memo would hold their statistics again)."""
        if candidates.num_rows > TYPED_MEMO_MAX_FILES:
            return self.to_scan_files(candidates, stats_columns=columns, partition_values=pv)
        kept = None if keep is None else np.packbits(keep.to_numpy(zero_copy_only=False)).tobytes()
        key = (id(raw), kept, frozenset(columns))
        with self._lock:
            memo = self.__dict__.setdefault("_typed_memo", {})
            hit = memo.get(key)
        if hit is not None and hit[0] is raw:
            return hit[1]
        files = self.to_scan_files(candidates, stats_columns=columns, partition_values=pv)
        with self._lock:
            memo = self.__dict__.setdefault("_typed_memo", {})
            while len(memo) >= TYPED_MEMO_SIZE:
                memo.pop(next(iter(memo)))
            memo[key] = (raw, files)  # raw held: its id stays its own while the entry lives
        return files

    def remembered_plan(self, key: Hashable | None, make: Callable[[], T]) -> T:
        """``make()``, kept under ``key`` for the last PLAN_MEMO_SIZE keys (None: not kept). A scan's
        plan (the files it keeps, their units) depends only on the snapshot and the query's filter,
        so queries repeated on a registered table plan each filter once (TPC-H lineitem, 96-112
        files: ~2 ms of pruning, units and statistics filters a query). Tables of more
        than ``TYPED_MEMO_MAX_FILES`` files are planned every time (a plan holds its files)."""
        if key is None or self._many_files():
            return make()
        with self._lock:
            memo = self.__dict__.get("_plan_memo")
            if memo is None:
                memo = self.__dict__["_plan_memo"] = LruCache(PLAN_MEMO_SIZE)
        return memo.get_or_make(key, make)

    def _many_files(self) -> bool:
        """More live files than the memos of planning keep plans for (not known yet: not many)."""
        built = self.__dict__.get("_files")
        raw = built if built is not None else self.__dict__.get("raw_files")
        return raw is not None and raw.num_rows > TYPED_MEMO_MAX_FILES

    def files(self) -> pa.Table:
        """All live files with typed partition values, stats and deletion vectors."""
        with self._lock:
            return self._files

    @cached_property
    def transactions(self) -> dict[str, int]:
        """Latest version of each application transaction (``txn`` actions)."""
        # not through files() when the checkpoint is gone: files() holds the snapshot's lock while
        # it reads the transactions (which waits for this property's lock: a deadlock)
        return self._read_or_relisted(lambda s: s._transactions_with(s._checkpoint_pass.txn))

    @cached_property
    def domain_metadata(self) -> dict[str, str]:
        """Active domain metadata configurations by domain name."""
        return self._read_or_relisted(
            lambda s: s._domains_with(s._checkpoint_pass.domains)
        )  # see transactions

    def _transactions_with(self, checkpoint_txn: list[pa.Array]) -> dict[str, int]:
        cols = [self.commit_log.actions.column("txn").combine_chunks()[::-1]]
        return latest_txns(cols + list(checkpoint_txn))

    def _domains_with(self, checkpoint_domains: list[pa.Array]) -> dict[str, str]:
        cols = [self.commit_log.actions.column("domainMetadata").combine_chunks()[::-1]]
        return latest_domains(cols + list(checkpoint_domains))

    # -- scans -----------------------------------------------------------------------------
    def scan(self, columns: list[str] | None = None, predicate: Any = None) -> Scan:
        """A read of ``columns`` (all when None) of the rows matching ``predicate`` (SQL text, a
        pyarrow expression, read as DataFusion means it: NaN above every number, ``isin`` as SQL
        ``IN``, or a package predicate): it prunes files, then filters rows exactly."""
        from .scan import Scan

        return Scan(self, columns=columns, predicate=predicate)

    def __repr__(self) -> str:
        return f"Snapshot({self.storage.root_uri!r}, version={self.version})"


#: Typings of planning candidates kept per snapshot (see Snapshot._typed_candidates), and the
#: most files a kept typing may have.
TYPED_MEMO_SIZE = 4
TYPED_MEMO_MAX_FILES = 100_000
#: Scan plans kept per snapshot (see Snapshot.remembered_plan).
PLAN_MEMO_SIZE = 16

_RAW_COLUMNS = [
    "path",
    "location",
    "partitionValues",
    "size",
    "modificationTime",
    "stats",
    "stats_parsed",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "version",
    "key",
]


def _raise_if_replaced(snap: Snapshot) -> None:
    """After a checkpoint of ``snap`` failed to parse: the DeltaError of :func:`_listed_again` if
    the folder was written again since the listing (another table's checkpoint under the listed
    name, read at the listed size, fails so: "Unexpected end of stream"); nothing otherwise, and
    the caller raises its error (a checkpoint corrupt in this table)."""
    if snap.segment.checkpoint is not None:
        _listed_again(snap)


def _listed_again(old: Snapshot) -> Snapshot:
    """``old``'s version from a new listing of the log (a file gone again is a
    MissingLogFileError, for :func:`~delta_datafusion.table.relisting` to list once more)."""
    from .table import DeltaTable

    table = DeltaTable.from_storage(old.storage)
    if old.segment.checkpoint is not None:
        forget_parquet(old.storage, (part.path for part in old.segment.checkpoint.parts))
    try:
        fresh = table.snapshot(old.version, listing=table.listing())
    except VersionNotFoundError as e:
        raise VersionNotFoundError(
            f"a log cleanup removed the files of version {old.version} of {old.table_root}, which "
            f"this snapshot reads, after it was loaded; open it again ({e})"
        ) from e
    if not _same_table_version(old, fresh):
        # the folder was deleted and written again up to the same version: not the table opened
        raise DeltaError(
            f"{old.table_root} was replaced by another table after it was opened (version "
            f"{old.version} has another protocol or metadata now); open it again"
        )
    return fresh


def _same_table_version(a: Snapshot, b: Snapshot) -> bool:
    """Do two listings' snapshots of one version describe the same table? Compared by what they
    mean, not the log's text: a checkpoint may write the schema string in another JSON form
    (spacing, key order) than the commits it replaces."""
    ma, mb = a.metadata, b.metadata
    return (
        a.protocol == b.protocol
        and ma.id == mb.id
        and ma.partition_columns == mb.partition_columns
        and ma.column_mapping_mode == mb.column_mapping_mode
        and ma.configuration == mb.configuration
        and ma.arrow_schema.equals(mb.arrow_schema, check_metadata=True)
        and ma.physical_schema.equals(mb.physical_schema, check_metadata=True)
    )


#: The helper threads of snapshot loads, kept from load to load: one pool a role, named by it.
#: A new thread a task allocated, under pyarrow's default mimalloc pool, from a new heap: fresh
#: pages each load (3,000-commit log, 12 loads a process, medians of 16 alternating fresh-process
#: pairs: minor faults 74 -> 34 a warm load, sys 7.1 -> 4.4 ms, peak RSS 222 -> 208 MB; CPU and
#: wall unchanged within noise). The pools' threads are not daemons: an exit waits for work
#: in progress (a daemon thread killed inside pyarrow at exit crashed the process, 2 exits in 3
#: with 8 stats typings in progress). The stats typing and the leaf read wait on nothing; the
#: scan-files work waits on a stats typing and on the caller's commit keys, so a task never
#: waits on one queued behind it in its own pool.
_HELPER_POOLS = {
    name: ProcessPool(name, min_workers=2)
    for name in ("delta-checkpoint-read", "delta-checkpoint-stats", "delta-checkpoint-scan-files")
}


def _on_thread(work: Callable[[], Any], name: str) -> Future:
    """``work()`` on a helper thread of role ``name`` (pyarrow releases the GIL); its result or
    exception comes back through the future, to be raised on the caller's thread. Once the
    interpreter's exit has begun the pools take no work: a thread of its own then, as before."""
    try:
        return _HELPER_POOLS[name].get().submit(work)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        pass
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(work())
        except BaseException as e:  # noqa: BLE001 - raised again on the caller's thread
            future.set_exception(e)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def _validity(column: pa.ChunkedArray) -> pa.Array:
    """Which rows of a column are not null, as one array."""
    return pa.chunked_array([c.is_valid() for c in column.chunks], pa.bool_()).combine_chunks()


def _refuse_repeated_adds(part_keys: list[pa.ChunkedArray | None], where: str) -> None:
    """The parts of a multi-part checkpoint hold each live file once; a part that repeats
    another's files (a copied part) would give their rows twice."""
    keys = [k for k in part_keys if k is not None and len(k)]
    if not keys:
        return
    keys = pa.chunked_array([c for k in keys for c in k.chunks], pa.string())
    if pc.count_distinct(keys).as_py() != len(keys):
        raise LogCorruptError(f"{where}: the parts of this multi-part checkpoint list a file more than once")


def project_raw(t: pa.Table) -> pa.Table:
    return t.select([c for c in _RAW_COLUMNS if c in t.column_names])


def _empty_raw() -> pa.Table:
    return pa.table({"path": pa.array([], pa.string()), "key": pa.array([], pa.string())})


def count_rows(files: pa.Table) -> int | None:
    """Live row count from stats minus deletion-vector cardinalities (None if stats are missing)."""
    if files.num_rows == 0:
        return 0
    num = pc.struct_field(files.column("stats").combine_chunks(), "numRecords")
    if num.null_count:
        return None
    deleted = pc.struct_field(files.column("deletion_vector").combine_chunks(), "cardinality")
    return int(pc.sum(num).as_py()) - int(pc.sum(pc.fill_null(deleted, 0)).as_py() or 0)


__all__ = ["Snapshot", "FILE_COLUMNS", "LeafFile", "count_rows"]
