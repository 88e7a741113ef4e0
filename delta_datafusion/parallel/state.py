"""The parallel state: what a worker of the parallel phase needs, and its bytes.

A worker gets no Snapshot: :class:`ParallelState` holds the seen keys, protocol, metaData, table
root, storage options, checkpoint version, selected columns and predicate, replays one leaf
against them, and serializes to compact, versioned bytes (no pickle) that a worker on another
machine checks before trusting: same format, same package version, intact checksum.
"""

from __future__ import annotations

import copy
import hashlib
import json
import posixpath
import struct
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import as_array
from ..errors import DeltaError, ParallelStateError
from ..log.actions import checkpoint_read_errors, file_action_types, partition_values_type
from ..log.checkpoint import LEAF_WHAT, LeafFile, read_leaf, table_ids
from ..log.segment import checkpoint_file_version
from ..protocol import Metadata, Protocol
from ..replay import RAW_ADD_FIELDS, flatten_file_actions, touched_files, with_keys
from ..scan import Scan, ScanMetadata
from ..snapshot import TableVersionView, project_raw
from ..storage import Storage
from .predicate_json import decode_value, encode_value
from .split import leaf_location, split_leaves

if TYPE_CHECKING:
    from ..predicate import Predicate

# Byte layout of a state (all integers big-endian): a magic header, the format and package
# versions, a JSON header and the sorted unique seen keys as a zstd-compressed Arrow IPC stream,
# closed by a BLAKE2b checksum::
#
#     MAGIC (8) | format version u16 | len u8 + package version (ASCII) | total length u64
#     | len u32 + JSON header | len u64 + Arrow IPC stream of the sorted unique seen keys | BLAKE2b-128

#: First bytes of every serialized state (PNG-style: non-ASCII first byte, CR/LF to catch text mangling).
MAGIC = b"\x89DDFPS\r\n"
#: Version of the byte layout below; bump on any incompatible change.
FORMAT_VERSION = 2
_DIGEST = 16  # BLAKE2b digest size closing the blob
_FIXED = struct.Struct(">HB")  # format version, package-version length
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_HEADER_KEYS = (
    "table_root",
    "storage_options",
    "version",
    "checkpoint_version",
    "protocol",
    "metaData",
    "columns",
    "predicate",
    "num_keys",
    "leaves",
    "checkpoint_table_id",
)
#: Types the header fields must have (None allowed) before the state is rebuilt from them.
_HEADER_TYPES: dict[str, type | tuple[type, ...]] = {
    "table_root": str,
    "storage_options": dict,
    "version": int,
    "checkpoint_version": int,
    "protocol": dict,
    "metaData": dict,
    "columns": list,
    "num_keys": int,
    "leaves": list,
    "checkpoint_table_id": str,
}


#: The add fields phase two reads: those the typed files take, not ``dataChange`` (scan metadata
#: has no column for it) nor ``tags`` (a map per add; 1M adds in 8 sidecars: the reads 285 ->
#: 264 ms CPU).
LEAF_ADD_COLUMNS = [f"add.{f}" for f in RAW_ADD_FIELDS if f != "dataChange"]


def _package_version() -> str:
    from .. import __version__

    return __version__


# ==============================================================================================
# Reconstructing protocol / metaData actions
# ==============================================================================================


def metadata_action(md: Metadata) -> dict[str, Any]:
    """The metaData action (JSON form) that :meth:`Metadata.from_action` turns back into ``md``."""
    return {
        "id": md.id,
        "name": md.name,
        "description": md.description,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": md.schema_string,
        "partitionColumns": list(md.partition_columns),
        "configuration": dict(md.configuration),
        "createdTime": md.created_time,
    }


def protocol_action(p: Protocol) -> dict[str, Any]:
    action: dict[str, Any] = {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
    }
    if p.reader_features or p.min_reader_version >= 3:
        action["readerFeatures"] = sorted(p.reader_features)
    if p.writer_features or p.min_writer_version >= 7:
        action["writerFeatures"] = sorted(p.writer_features)
    return action


def _storage_from_root(table_root: str, options: dict[str, Any]) -> Storage:
    # root_uri of a local table is "file://" + the plain path: keep it verbatim (no URL unquoting).
    if table_root.startswith("file://"):
        return Storage(table_root[len("file://") :] or "/", options)
    return Storage(table_root, options)


class _StateTable(TableVersionView):
    """A Snapshot stand-in built from a :class:`ParallelState`. Leaf replay and typing are the
    shared TableVersionView code, so the two phases can never disagree with ``scan_metadata()``
    on how an add becomes a scan-metadata row."""

    def __init__(self, state: ParallelState):
        self.storage = state.storage
        self.metadata = state.metadata
        self.protocol = state.protocol
        self.version = state.version
        self._checkpoint_version = state.checkpoint_version
        #: the leaf file this view replays, None for the state's own view (see :meth:`reading`)
        self.leaf: str | None = None

    @property
    def checkpoint_version(self) -> int | None:
        return self._checkpoint_version

    def reading(self, leaf: str) -> _StateTable:
        """A view of the same table that replays the leaf file ``leaf``, for errors to name it.
        A view of its own per leaf: one state reads several leaves on threads at once."""
        view = copy.copy(self)
        view.leaf = leaf
        return view

    def log_file_of(self, version: int, location: str | None = None) -> str | None:
        """The leaf file this view replays: it holds every add a worker types (they are the
        checkpoint's, of its version)."""
        return self.leaf if version == self._checkpoint_version else None

    def __repr__(self) -> str:
        return f"ParallelState table {self.table_root!r} at version {self.version}"


@dataclass(frozen=True)
class LeafAdds:
    """One leaf's adds between the two steps of phase two (see :meth:`ParallelState.leaf_adds`):
    the flat adds with their locations and, when typed ahead, all of them typed (``typing_failed``:
    typing all of them failed, so only the survivors are typed)."""

    leaf: LeafFile
    view: _StateTable
    flat: pa.Table
    typed: pa.Table | None = None
    typing_failed: bool = False


# ==============================================================================================
# State
# ==============================================================================================


class ParallelState:
    """What a worker of the parallel phase needs: seen keys plus the table's replay context.

    Built by :meth:`SequentialPhase.finish` (sharing the snapshot's storage and parsed metadata) or
    by :meth:`from_bytes`. Immutable once built and safe to share between threads.
    """

    def __init__(
        self,
        *,
        table_root: str,
        storage_options: dict[str, Any] | None,
        version: int,
        checkpoint_version: int,
        protocol: dict[str, Any],
        metadata: dict[str, Any],
        seen_keys: pa.Array,
        columns: Sequence[str] | None = None,
        predicate: Predicate | None = None,
        leaves: Sequence[str] | None = None,
        checkpoint_table_id: str | None = None,
        _storage: Storage | None = None,
        _metadata: Metadata | None = None,
        _protocol: Protocol | None = None,
    ):
        self.table_root = table_root
        self.storage_options = dict(storage_options or {})
        self.version = int(version)
        self.checkpoint_version = int(checkpoint_version)
        self.protocol_action = protocol
        self.metadata_action = metadata
        if isinstance(seen_keys, pa.ChunkedArray):
            seen_keys = seen_keys.combine_chunks()
        self.seen_keys: pa.Array = seen_keys.cast(pa.string())
        self.columns = list(columns) if columns is not None else None
        self.predicate = predicate
        #: the checkpoint's leaf files, as paths relative to ``_delta_log``: the only files a
        #: worker of this state reads (None: any leaf of the checkpoint's version)
        self.leaves = tuple(leaves) if leaves is not None else None
        #: the table id a classic or multi-part checkpoint's metaData holds (None for V2: its
        #: leaves are sidecars, named uniquely)
        self.checkpoint_table_id = checkpoint_table_id
        where = f"parallel state of {table_root} at version {version}"
        self.storage = (
            _storage if _storage is not None else _storage_from_root(table_root, self.storage_options)
        )
        self.protocol = _protocol if _protocol is not None else Protocol.from_action(protocol, where)
        if _protocol is None:
            self.protocol.check_readable(where)
        self.metadata = (
            _metadata if _metadata is not None else Metadata.from_action(metadata, where, self.protocol)
        )
        self._table = _StateTable(self)
        # A real Scan over the stand-in: pruning is Scan.prune itself.
        self.scan = Scan(self._table, columns=self.columns, predicate=predicate)

    # -- construction from the sequential phase ----------------------------------------------
    @classmethod
    def from_scan(cls, scan: Scan, seen_keys: pa.Array, leaves: Sequence[LeafFile] = ()) -> ParallelState:
        snap = scan.snapshot
        checkpoint_version = snap.checkpoint_version
        if checkpoint_version is None:
            raise ParallelStateError(f"{snap!r} has no checkpoint: there is no parallel phase to run")
        return cls(
            table_root=snap.storage.root_uri,
            storage_options=snap.storage.storage_options,
            version=snap.version,
            checkpoint_version=checkpoint_version,
            protocol=protocol_action(snap.protocol),
            metadata=metadata_action(snap.metadata),
            seen_keys=_unique_keys(seen_keys),
            columns=scan.columns,
            predicate=scan.predicate,
            leaves=sorted({_relative_to_log(snap.storage, leaf.path) for leaf in leaves}),
            checkpoint_table_id=_checkpoint_table_id(snap),
            _storage=snap.storage,
            _metadata=snap.metadata,
            _protocol=snap.protocol,
        )

    def with_seen_keys(self, seen_keys: pa.Array) -> ParallelState:
        """This state with other seen keys (a state made before the commits were replayed, see
        :meth:`SequentialPhase.prepare`), sharing its storage and parsed metadata."""
        return ParallelState(**{**self._arguments(), "seen_keys": _unique_keys(seen_keys)})

    def _arguments(self) -> dict[str, Any]:
        """The constructor's arguments that make this state again (parsed metadata shared)."""
        return {
            "table_root": self.table_root,
            "storage_options": self.storage_options,
            "version": self.version,
            "checkpoint_version": self.checkpoint_version,
            "protocol": self.protocol_action,
            "metadata": self.metadata_action,
            "seen_keys": self.seen_keys,
            "columns": self.columns,
            "predicate": self.predicate,
            "leaves": self.leaves,
            "checkpoint_table_id": self.checkpoint_table_id,
            "_storage": self.storage,
            "_metadata": self.metadata,
            "_protocol": self.protocol,
        }

    # -- the work of one leaf ---------------------------------------------------------------------
    def check_leaf(self, leaf: LeafFile) -> None:
        """Refuse a leaf that cannot belong to this state's checkpoint: outside the table's
        ``_delta_log``, or a classic / multi-part checkpoint file of another version (sidecar names
        carry no version)."""
        log_dir = _log_dir(self.storage)
        path = leaf_location(self.storage, leaf.path)
        if not path.startswith(log_dir):
            raise ParallelStateError(
                f"leaf file {leaf.path} is not in {log_dir} (the state is for table {self.table_root})"
            )
        if self.leaves is not None and path[len(log_dir) :] not in self.leaves:
            raise ParallelStateError(
                f"leaf file {leaf.path} is not one of the {len(self.leaves)} leaf files of the checkpoint at "
                f"version {self.checkpoint_version} the state was made from"
            )
        version = checkpoint_file_version(posixpath.basename(path))
        if version is not None and version != self.checkpoint_version:
            raise ParallelStateError(
                f"leaf file {leaf.path} belongs to the checkpoint at version {version}, but the state "
                f"was made from the checkpoint at version {self.checkpoint_version}"
            )

    def _check_same_file(self, leaf: LeafFile, location: str) -> None:
        """A classic checkpoint part is named by version alone: if the table was dropped and
        written again since the sequential phase, the name holds another file. Its size (from the
        sequential phase's listing, when the leaf carries one) tells."""
        if not leaf.size:
            return
        with checkpoint_read_errors(location, LEAF_WHAT):
            size = self.storage.info(location).size
        if size != leaf.size:
            raise ParallelStateError(
                f"leaf file {leaf.path} has {size} bytes, but {leaf.size} when the sequential phase listed it: "
                f"the table at {self.table_root} changed since (dropped and written again?)"
            )

    def _check_same_table(self, metadata: pa.ChunkedArray, leaf: LeafFile) -> None:
        """The checkpoint part holding the metaData action must name the table the sequential
        phase read it as."""
        if self.checkpoint_table_id is None:
            return
        ids = set(table_ids(metadata))
        if ids and ids != {self.checkpoint_table_id}:
            raise ParallelStateError(
                f"leaf file {leaf.path} belongs to table id {sorted(map(str, ids))[0]}, but the state was made "
                f"from table id {self.checkpoint_table_id}: the table at {self.table_root} was replaced since"
            )

    def scan_leaf(self, leaf: LeafFile) -> ScanMetadata:
        """Surviving, typed and pruned adds of one leaf file (or row-group range of one)."""
        return self.surviving_leaf(self.leaf_adds(leaf))

    def leaf_adds(self, leaf: LeafFile) -> LeafAdds:
        """Phase two's first step, which needs no seen key: one leaf file (or row-group range)
        checked, read and flattened to its adds with their locations."""
        self.check_leaf(leaf)
        # read the checked location, not the path as given (relative, ../, file:// spellings)
        location = leaf_location(self.storage, leaf.path)
        sidecar = "/_sidecars/" in location  # its name is unique (a UUID); a classic part's is not
        if not sidecar:
            self._check_same_file(leaf, location)
        table = read_leaf(
            self.storage,
            replace(leaf, path=location),
            LEAF_ADD_COLUMNS if sidecar else [*LEAF_ADD_COLUMNS, "metaData.id"],
        )
        if "metaData" in table.column_names:
            self._check_same_table(table.column("metaData"), leaf)
            table = table.drop_columns(["metaData"])
        view = self._table.reading(location)
        return LeafAdds(leaf, view, view.located_leaf_adds(table, location))

    def typed_ahead(self, adds: LeafAdds) -> LeafAdds:
        """``adds`` with every add typed, before the seen keys are known (a driver decoding leaves
        while the sequential phase still replays the commits); :meth:`surviving_leaf` then drops
        the touched ones. Unchanged when they do not type (a file a later commit removed may not
        fit the current schema): the survivors are typed then, where a real error repeats."""
        raw = project_raw(adds.flat)
        if raw.num_rows == 0:
            return adds
        try:
            return replace(adds, typed=self._typed(adds.view, raw))
        except Exception:  # noqa: BLE001 - typed again in surviving_leaf (see the docstring)
            return replace(adds, typing_failed=True)

    def surviving_leaf(self, adds: LeafAdds) -> ScanMetadata:
        """Phase two's second step: the adds of :meth:`leaf_adds` that no commit touched (this
        state's seen keys), typed and pruned."""
        files = self._surviving_typed(adds.view, adds.flat, adds.typed, not adds.typing_failed)
        return self.scan.pruned_metadata(files, leaf=adds.leaf.describe())

    def _surviving_typed(
        self, view: _StateTable, flat: pa.Table, typed: pa.Table | None = None, all_typable: bool = True
    ) -> pa.Table:
        """The typed files of a leaf's flat adds that no commit touched (``typed``: all of them
        typed already; ``all_typable`` False: typing all of them failed, see :meth:`typed_ahead`).

        A worker needs no raw adds afterwards (a snapshot keeps them for planning), so when the
        commits touched few of them (an eighth at most) every add is typed and the touched rows
        are dropped from the typed table: dropping them from the raw adds first copies every
        stats string (1M adds in 8 sidecars, ~360 touched per sidecar: ~20 ms of a sidecar's
        ~230 ms CPU)."""
        raw = project_raw(flat)
        if raw.num_rows == 0 or len(self.seen_keys) == 0:
            return typed if typed is not None else self._typed(view, raw)
        loc, dv = as_array(flat.column("location")), as_array(flat.column("deletionVector"))
        touched = touched_files(loc, dv, self.seen_keys)
        if touched.true_count == 0:
            return typed if typed is not None else self._typed(view, raw)
        keep = pc.invert(touched)
        if typed is not None:
            return typed.filter(keep)
        if all_typable and touched.true_count * 8 <= raw.num_rows:
            try:
                return self._typed(view, raw).filter(keep)
            except Exception:  # noqa: BLE001 - typed again below, where a real error repeats
                # a file a later commit removed may not fit the current schema (a column's type
                # changed by an overwrite): type only the survivors
                pass
        return self._typed(view, raw.filter(keep))

    def _typed(self, view: _StateTable, raw: pa.Table) -> pa.Table:
        if raw.num_rows == 0:
            return self.empty_files
        return view.to_scan_files(raw)

    @cached_property
    def empty_files(self) -> pa.Table:
        """A zero-row scan-metadata table with the table's file-column types."""
        return empty_file_table(self._table)

    # -- bytes ------------------------------------------------------------------------------------
    def header(self) -> dict[str, Any]:
        """The JSON part of the serialized state."""
        return {
            "table_root": self.table_root,
            "storage_options": self.storage_options,
            "version": self.version,
            "checkpoint_version": self.checkpoint_version,
            "protocol": self.protocol_action,
            "metaData": self.metadata_action,
            "columns": self.columns,
            "predicate": None if self.predicate is None else encode_value(self.predicate),
            "num_keys": len(self.seen_keys),
            "leaves": None if self.leaves is None else list(self.leaves),
            "checkpoint_table_id": self.checkpoint_table_id,
        }

    def to_bytes(self) -> bytes:
        """Compact versioned bytes: magic, versions, total length, JSON header, keys IPC, checksum."""
        try:
            header = json.dumps(self.header(), separators=(",", ":"), allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise ParallelStateError(
                f"cannot serialize the parallel state of {self.table_root}: storage options and predicate "
                f"must be JSON-serializable ({e})"
            ) from e
        keys = _keys_ipc(self.seen_keys)
        pkg = _package_version().encode("ascii")
        body = b"".join([_U32.pack(len(header)), header, _U64.pack(len(keys)), keys])
        total = len(MAGIC) + _FIXED.size + len(pkg) + _U64.size + len(body) + _DIGEST
        head = MAGIC + _FIXED.pack(FORMAT_VERSION, len(pkg)) + pkg + _U64.pack(total)
        blob = head + body
        return blob + hashlib.blake2b(blob, digest_size=_DIGEST).digest()

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> ParallelState:
        """Rebuild a state; refuses foreign, other-version, truncated or corrupted bytes."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ParallelStateError(f"a parallel state is bytes, got {type(data).__qualname__}")
        data = bytes(data)
        n = len(data)
        if n < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
            raise ParallelStateError(
                f"not a delta_datafusion parallel state: bad magic header {data[: len(MAGIC)]!r} "
                f"(expected {MAGIC!r}, {n} bytes given)"
            )
        pos = len(MAGIC)
        if n < pos + _FIXED.size:
            raise ParallelStateError(f"parallel state is truncated: {n} bytes, too short for its header")
        fmt, pkg_len = _FIXED.unpack_from(data, pos)
        pos += _FIXED.size
        if fmt != FORMAT_VERSION:
            raise ParallelStateError(
                f"parallel state has format version {fmt}; this delta_datafusion ({_package_version()}) "
                f"reads format version {FORMAT_VERSION}"
            )
        if n < pos + pkg_len + _U64.size:
            raise ParallelStateError(f"parallel state is truncated: {n} bytes, too short for its header")
        pkg = data[pos : pos + pkg_len].decode("ascii", errors="replace")
        pos += pkg_len
        if pkg != _package_version():
            raise ParallelStateError(
                f"parallel state was written by delta_datafusion {pkg}, this is delta_datafusion "
                f"{_package_version()}: driver and workers must run the same package version"
            )
        (total,) = _U64.unpack_from(data, pos)
        pos += _U64.size
        if n < total:
            raise ParallelStateError(f"parallel state is truncated: {n} of {total} bytes")
        if n > total:
            raise ParallelStateError(
                f"parallel state is corrupted: {n - total} unexpected bytes after its end"
            )
        digest = hashlib.blake2b(data[:-_DIGEST], digest_size=_DIGEST).digest()
        if digest != data[-_DIGEST:]:
            raise ParallelStateError("parallel state is corrupted: checksum mismatch")
        try:
            (hlen,) = _U32.unpack_from(data, pos)
            pos += _U32.size
            header = json.loads(data[pos : pos + hlen].decode("utf-8"))
            pos += hlen
            (klen,) = _U64.unpack_from(data, pos)
            pos += _U64.size
            keys = _keys_from_ipc(data[pos : pos + klen])
        except (struct.error, UnicodeDecodeError, ValueError, RecursionError, pa.ArrowException) as e:
            raise ParallelStateError(f"parallel state is corrupted: {type(e).__name__}: {e}") from e
        if not isinstance(header, dict) or any(k not in header for k in _HEADER_KEYS):
            missing = [k for k in _HEADER_KEYS if not isinstance(header, dict) or k not in header]
            raise ParallelStateError(f"parallel state is corrupted: header lacks {missing}")
        if header["num_keys"] != len(keys):
            raise ParallelStateError(
                f"parallel state is corrupted: header announces {header['num_keys']} keys, found {len(keys)}"
            )
        try:
            predicate = None if header["predicate"] is None else decode_value(header["predicate"])
        except (DeltaError, KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
            raise ParallelStateError(
                f"parallel state is corrupted: its predicate: {type(e).__name__}: {e}"
            ) from e
        bad = [k for k, t in _HEADER_TYPES.items() if header[k] is not None and not isinstance(header[k], t)]
        if bad:
            raise ParallelStateError(f"parallel state is corrupted: header fields {bad} have the wrong type")
        try:
            return cls(
                table_root=header["table_root"],
                storage_options=header["storage_options"],
                version=header["version"],
                checkpoint_version=header["checkpoint_version"],
                protocol=header["protocol"],
                metadata=header["metaData"],
                seen_keys=keys,
                columns=header["columns"],
                predicate=predicate,
                leaves=header["leaves"],
                checkpoint_table_id=header["checkpoint_table_id"],
            )
        except ParallelStateError:
            raise
        except (DeltaError, KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
            raise ParallelStateError(f"parallel state cannot be rebuilt: {type(e).__name__}: {e}") from e

    # -- helpers ----------------------------------------------------------------------------------
    def split(self, files: Sequence[LeafFile], parts: int) -> list[list[LeafFile]]:
        """:func:`split_leaves` with this table's storage."""
        return split_leaves(files, parts, self.storage)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ParallelState):
            return NotImplemented
        return self.header() == other.header() and self.seen_keys.equals(other.seen_keys)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"ParallelState({self.table_root!r}, version={self.version}, checkpoint={self.checkpoint_version}, "
            f"{len(self.seen_keys)} seen keys, predicate={'yes' if self.predicate is not None else 'no'})"
        )


def _unique_keys(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.string())
    uniq = pc.unique(keys.drop_null()) if len(keys) else keys
    # Sorted: the bytes do not depend on commit order, and zstd compresses shared prefixes better.
    return pc.take(uniq, pc.sort_indices(uniq)) if len(uniq) else uniq


def _ipc_options() -> pa.ipc.IpcWriteOptions:
    codec = "zstd" if pa.Codec.is_available("zstd") else ("lz4" if pa.Codec.is_available("lz4") else None)
    return pa.ipc.IpcWriteOptions(compression=codec)


def _keys_ipc(keys: pa.Array) -> bytes:
    batch = pa.record_batch([keys], names=["key"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema, options=_ipc_options()) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _keys_from_ipc(data: bytes) -> pa.Array:
    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    if table.column_names != ["key"] or table.schema.field(0).type != pa.string():
        raise ValueError(f"unexpected key table schema {table.schema}")
    return table.column(0).combine_chunks()


def empty_file_table(table: Any) -> pa.Table:
    phys = table.metadata.physical_partition_columns()
    add_type = file_action_types(partition_values_type(phys))["add"]
    flat = with_keys(table.storage, flatten_file_actions(pa.array([], add_type), phys))
    flat = flat.append_column("version", pa.array([], pa.int64()))
    return table.to_scan_files(project_raw(flat))


def _checkpoint_table_id(snap: Any) -> str | None:
    """The table id a classic or multi-part checkpoint's metaData holds (the snapshot's own when
    no later commit replaced the metadata; else read: one column, ~3 ms for 300k adds). V2
    checkpoints' leaves are sidecars, named uniquely: no id needed."""
    if getattr(snap, "metadata_from_checkpoint", False):
        return snap.metadata.id
    ckpt = snap.segment.checkpoint
    if ckpt is None or ckpt.kind == "v2":
        return None
    for part in ckpt.parts:
        # a reader of its own: the planning reads' cached one must not be read from several
        # threads (sequential phases finished on threads at once crashed in pyarrow)
        found = read_leaf(snap.storage, LeafFile(part.path, part.size or 0), ["metaData.id"])
        ids = table_ids(found.column("metaData")) if "metaData" in found.column_names else []
        if ids:
            return ids[0]
    return None


def _log_dir(storage: Storage) -> str:
    return storage.join("_delta_log").rstrip("/") + "/"


def _relative_to_log(storage: Storage, path: str) -> str:
    log_dir = _log_dir(storage)
    full = leaf_location(storage, path)
    return full[len(log_dir) :] if full.startswith(log_dir) else full
