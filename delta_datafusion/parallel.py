"""Two-phase (distributed) scan-metadata replay.

The design follows delta-kernel-rs' ``parallel_scan_metadata``: log replay is split into

1. a **sequential phase** (:class:`SequentialPhase`, returned by ``Scan.parallel_scan_metadata()``)
   that replays the commits after the checkpoint and the checkpoint *manifest* (the inline actions
   of a V2 checkpoint). It yields :class:`~.scan.ScanMetadata` batches like ``scan_metadata()`` and
   remembers the key (resolved path + deletion-vector id) of every file action it saw;
2. a **parallel phase** (:class:`ParallelScanMetadata`) over the checkpoint *leaves*: the sidecars of
   a V2 checkpoint or the parts of a (multi-part) classic checkpoint. A checkpoint holds reconciled
   state (one add per key), so a leaf's adds only need to be checked against the keys the commits
   touched, never against other leaves: any partition of the leaves (and of their row groups) over
   any number of workers gives, together with the sequential output, exactly ``scan_metadata()``.

After iterating the sequential phase, :meth:`SequentialPhase.finish` returns :class:`Done` or
:class:`Parallel` ``(state, files)``. :class:`ParallelState` is everything a worker needs and
nothing more (no Snapshot): seen keys, protocol, metaData, table root, storage options, checkpoint
version, selected columns and predicate. It serializes to compact, versioned bytes
(:meth:`ParallelState.to_bytes`): a magic header, the format and package versions, a JSON header
and the seen keys as a zstd-compressed Arrow IPC stream, closed by a BLAKE2b checksum. No pickle.

Byte layout of a state (all integers big-endian)::

    MAGIC (8) | format version u16 | len u8 + package version (ASCII) | total length u64
    | len u32 + JSON header | len u64 + Arrow IPC stream of the sorted unique seen keys | BLAKE2b-128

Running the second phase:

* :func:`run_parallel` runs both phases, on a local thread pool by default (pyarrow's parquet
  reader, compute kernels and JSON stats parser release the GIL) or on any
  ``concurrent.futures.Executor``. Process pools get the state bytes and a file list per task and
  run the top-level, picklable :func:`scan_leaf_files`; their result tables come back as Arrow
  IPC files in ``/dev/shm`` that the driver memory-maps (``transport="shared"``, the default for a
  ``ProcessPoolExecutor``) instead of being pickled through a pipe (``transport="pickle"``);
* :func:`run_with_dask` does the same on a ``distributed.Client``: the state bytes are broadcast
  once to the workers, each task gets one group of leaf files;
* :func:`split_leaves` partitions leaf files into balanced groups, splitting large leaves (a single
  big classic checkpoint, say) into row-group ranges (:func:`expand_leaf`), which the reference
  implementation cannot do.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import importlib
import json
import math
import os
import posixpath
import struct
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .arguments import integer
from .arrow_threads import arrow_threads
from .errors import ArgumentError, DeltaError, LogCorruptError, ParallelStateError, StorageError
from .log.actions import checkpoint_read_errors, file_action_types, partition_values_type
from .log.checkpoint import LEAF_WHAT, LeafFile, open_leaf, read_leaf
from .log.segment import checkpoint_file_version, is_multi_part_checkpoint
from .protocol import Metadata, Protocol
from .replay import file_keys, flatten_file_actions, with_keys
from .scan import Scan, ScanMetadata
from .snapshot import TableVersionView, _project_raw
from .storage import Storage

if TYPE_CHECKING:
    from .predicate import Predicate

__all__ = [
    "FORMAT_VERSION",
    "Done",
    "Parallel",
    "ParallelScanMetadata",
    "ParallelState",
    "SequentialPhase",
    "concat_files",
    "execute_parallel",
    "expand_leaf",
    "run_parallel",
    "run_with_dask",
    "scan_leaf_files",
    "scan_leaf_files_shared",
    "shared_dir",
    "split_leaves",
]

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


def _package_version() -> str:
    from . import __version__

    return __version__


# ==============================================================================================
# Predicate <-> JSON: a generic walk over the (frozen) dataclass tree
# ==============================================================================================
#
# Values are JSON scalars, lists, or tagged objects: {"$dc": ..., "fields": ...} (a dataclass of
# this package, rebuilt through its constructor so its validation runs), {"$tuple": [...]},
# {"$frozenset": [...]}, {"$dict": {...}}, {"$float": "nan"|"inf"|"-inf"}, {"$bytes": b64},
# {"$enum": ...}, and Arrow values: {"$arrow_type": name} / {"$scalar": value, "type": name} for
# simple types, else {"$arrow_type_ipc": b64} / {"$arrow_scalar_ipc": b64} (Arrow IPC, so any type
# and value round-trips exactly: time zones, decimals, NaN). Only classes inside this package are
# ever instantiated.

_PACKAGE = __name__.rpartition(".")[0]


def _b64(data: bytes | pa.Buffer) -> str:
    return base64.b64encode(memoryview(data)).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve_class(ref: str) -> type:
    module, _, qualname = ref.partition(":")
    if not (module == _PACKAGE or module.startswith(_PACKAGE + ".")) or not qualname:
        raise ParallelStateError(f"predicate refers to class {ref!r} outside the {_PACKAGE} package")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ParallelStateError(f"predicate refers to unknown class {ref!r}") from e
    if not isinstance(obj, type):
        raise ParallelStateError(f"predicate refers to {ref!r}, which is not a class")
    return obj


#: Types written by name in predicate JSON (others go through Arrow IPC).
_ALIASED_TYPES = {
    str(t): t
    for t in (
        pa.null(),
        pa.bool_(),
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.uint8(),
        pa.uint16(),
        pa.uint32(),
        pa.uint64(),
        pa.float32(),
        pa.float64(),
        pa.string(),
        pa.large_string(),
    )
}


def _type_alias(t: pa.DataType) -> str | None:
    name = str(t)
    return name if _ALIASED_TYPES.get(name) == t else None


def _alias_type(name: str) -> pa.DataType:
    try:
        return _ALIASED_TYPES[name]
    except (KeyError, TypeError):
        raise ParallelStateError(f"malformed predicate JSON: unknown type name {name!r}") from None


def _scalar_array(s: pa.Scalar) -> pa.Array:
    try:
        return pa.array([s], type=s.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError):
        return pa.array([s.as_py()], type=s.type)


def encode_value(obj: Any) -> Any:
    """A JSON-able form of a predicate tree (or any value inside one)."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int) and not isinstance(obj, enum.Enum):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    if isinstance(obj, enum.Enum):
        return {"$enum": _class_ref(type(obj)), "name": obj.name}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: encode_value(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
        return {"$dc": _class_ref(type(obj)), "fields": fields}
    if isinstance(obj, tuple):
        return {"$tuple": [encode_value(v) for v in obj]}
    if isinstance(obj, list):
        return [encode_value(v) for v in obj]
    if isinstance(obj, frozenset | set):
        return {"$frozenset": [encode_value(v) for v in sorted(obj, key=repr)]}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise ParallelStateError(f"cannot serialize a predicate dict with non-string keys: {obj!r}")
        return {"$dict": {k: encode_value(v) for k, v in obj.items()}}
    if isinstance(obj, bytes | bytearray):
        return {"$bytes": _b64(bytes(obj))}
    if isinstance(obj, pa.DataType):
        alias = _type_alias(obj)
        if alias is not None:
            return {"$arrow_type": alias}
        return {"$arrow_type_ipc": _b64(pa.schema([pa.field("t", obj)]).serialize())}
    if isinstance(obj, pa.Scalar):
        alias = _type_alias(obj.type)
        value = obj.as_py() if alias is not None else None
        if alias is not None and (value is None or isinstance(value, bool | int | str)):
            return {"$scalar": value, "type": alias}
        if alias is not None and isinstance(value, float) and math.isfinite(value):
            return {"$scalar": value, "type": alias}
        batch = pa.record_batch([_scalar_array(obj)], names=["v"])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        return {"$arrow_scalar_ipc": _b64(sink.getvalue())}
    raise ParallelStateError(f"cannot serialize predicate value of type {type(obj).__qualname__}: {obj!r}")


def decode_value(doc: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if doc is None or isinstance(doc, bool | int | float | str):
        return doc
    if isinstance(doc, list):
        return [decode_value(v) for v in doc]
    if not isinstance(doc, dict) or not doc:
        raise ParallelStateError(f"malformed predicate JSON: {doc!r}")
    tag = next(iter(doc))
    try:
        if tag == "$dc":
            cls = _resolve_class(doc["$dc"])
            if not dataclasses.is_dataclass(cls):
                raise ParallelStateError(f"predicate class {doc['$dc']!r} is not a dataclass")
            kwargs = {k: decode_value(v) for k, v in doc["fields"].items()}
            return cls(**kwargs)
        if tag == "$tuple":
            return tuple(decode_value(v) for v in doc["$tuple"])
        if tag == "$frozenset":
            return frozenset(decode_value(v) for v in doc["$frozenset"])
        if tag == "$dict":
            return {k: decode_value(v) for k, v in doc["$dict"].items()}
        if tag == "$float":
            return float(doc["$float"])
        if tag == "$bytes":
            return _unb64(doc["$bytes"])
        if tag == "$enum":
            return _resolve_class(doc["$enum"])[doc["name"]]
        if tag == "$arrow_type":
            return _alias_type(doc["$arrow_type"])
        if tag == "$arrow_type_ipc":
            return pa.ipc.read_schema(pa.py_buffer(_unb64(doc["$arrow_type_ipc"]))).field(0).type
        if tag == "$scalar":
            return pa.scalar(doc["$scalar"], type=_alias_type(doc["type"]))
        if tag == "$arrow_scalar_ipc":
            table = pa.ipc.open_stream(pa.py_buffer(_unb64(doc["$arrow_scalar_ipc"]))).read_all()
            return table.column(0)[0]
    except ParallelStateError:
        raise
    except (DeltaError, KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise ParallelStateError(f"malformed predicate JSON at {tag}: {type(e).__name__}: {e}") from e
    raise ParallelStateError(f"malformed predicate JSON: unknown tag {tag!r}")


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

    @property
    def checkpoint_version(self) -> int | None:
        return self._checkpoint_version

    def __repr__(self) -> str:
        return f"ParallelState table {self.table_root!r} at version {self.version}"


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
            self.protocol.check_readable(where, defer_variant=True)
        self.metadata = (
            _metadata if _metadata is not None else Metadata.from_action(metadata, where, self.protocol)
        )
        if _protocol is None:
            self.protocol.check_readable(where, self.metadata.schema_json)
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

    # -- the work of one leaf ---------------------------------------------------------------------
    def check_leaf(self, leaf: LeafFile) -> None:
        """Refuse a leaf that cannot belong to this state's checkpoint: outside the table's
        ``_delta_log``, or a classic / multi-part checkpoint file of another version (sidecar names
        carry no version)."""
        log_dir = _log_dir(self.storage)
        path = _leaf_location(self.storage, leaf.path)
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
        ids = set(_table_ids(metadata))
        if ids and ids != {self.checkpoint_table_id}:
            raise ParallelStateError(
                f"leaf file {leaf.path} belongs to table id {sorted(map(str, ids))[0]}, but the state was made "
                f"from table id {self.checkpoint_table_id}: the table at {self.table_root} was replaced since"
            )

    def scan_leaf(self, leaf: LeafFile) -> ScanMetadata:
        """Surviving, typed and pruned adds of one leaf file (or row-group range of one)."""
        self.check_leaf(leaf)
        # read the checked location, not the path as given (relative, ../, file:// spellings)
        location = _leaf_location(self.storage, leaf.path)
        sidecar = "/_sidecars/" in location  # its name is unique (a UUID); a classic part's is not
        if not sidecar:
            self._check_same_file(leaf, location)
        table = read_leaf(
            self.storage, replace(leaf, path=location), ["add"] if sidecar else ["add", "metaData.id"]
        )
        if "metaData" in table.column_names:
            self._check_same_table(table.column("metaData"), leaf)
            table = table.drop_columns(["metaData"])
        raw = _project_raw(self._table.leaf_adds(table, self.seen_keys))
        files = self._typed(raw)
        return self.scan.pruned_metadata(files, leaf=leaf.describe())

    def _typed(self, raw: pa.Table) -> pa.Table:
        if raw.num_rows == 0:
            return self.empty_files
        return self._table.to_scan_files(raw)

    @cached_property
    def empty_files(self) -> pa.Table:
        """A zero-row scan-metadata table with the table's file-column types."""
        return _empty_files(self._table)

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


def _empty_files(table: Any) -> pa.Table:
    phys = table.metadata.physical_partition_columns()
    add_type = file_action_types(partition_values_type(phys))["add"]
    flat = with_keys(table.storage, flatten_file_actions(pa.array([], add_type), phys))
    flat = flat.append_column("version", pa.array([], pa.int64()))
    return table.to_scan_files(_project_raw(flat))


# ==============================================================================================
# Phases
# ==============================================================================================


@dataclass(frozen=True)
class Done:
    """The sequential phase produced everything: no checkpoint leaves to process."""


@dataclass(frozen=True)
class Parallel:
    """Leaf files still to process with :class:`ParallelScanMetadata` (any split, any workers)."""

    state: ParallelState
    files: list[LeafFile]


class SequentialPhase(Iterator[ScanMetadata]):
    """Phase one: commits and the checkpoint manifest, yielding ScanMetadata; then :meth:`finish`."""

    def __init__(self, scan: Scan):
        self.scan = scan
        self._gen: Iterator[ScanMetadata] | None = None
        self._exhausted = False
        self._keys: pa.Array | None = None
        self._leaves: list[LeafFile] = []
        self._result: Done | Parallel | None = None
        self._lock = threading.Lock()

    def __iter__(self) -> SequentialPhase:
        return self

    def __next__(self) -> ScanMetadata:
        with self._lock:
            if self._gen is None:
                self._gen = self._run()
            try:
                return next(self._gen)
            except StopIteration:
                self._exhausted = True
                raise

    def _run(self) -> Iterator[ScanMetadata]:
        snap = self.scan.snapshot
        live, keys = snap._commit_replay
        files = snap.to_scan_files(_project_raw(live)) if live.num_rows else _empty_files(snap)
        yield self.scan.pruned_metadata(files, source="commits")
        manifest = snap.checkpoint_manifest
        if manifest is not None and manifest.inline is not None:
            raw = _project_raw(snap.leaf_adds(manifest.inline, keys))
            if raw.num_rows:
                files = snap.to_scan_files(raw)
                yield self.scan.pruned_metadata(files, source="checkpoint manifest")
        self._keys = keys
        self._leaves = list(manifest.leaves) if manifest is not None else []

    def finish(self) -> Done | Parallel:
        """``Done()`` or ``Parallel(state, files)``; only after the phase was iterated to its end."""
        with self._lock:
            if not self._exhausted:
                raise ParallelStateError(
                    "SequentialPhase.finish() called before the sequential phase was iterated to its end: "
                    "consume every ScanMetadata it yields first"
                )
            if self._result is None:
                if not self._leaves:
                    self._result = Done()
                else:
                    state = ParallelState.from_scan(self.scan, self._keys, self._leaves)
                    self._result = Parallel(state, list(self._leaves))
            return self._result


class ParallelScanMetadata(Iterator[ScanMetadata]):
    """Phase two over some leaf files: one ScanMetadata per leaf (or row-group range).

    ``arrow_threads=False`` reads and parses each leaf on the calling thread only: for a task
    that runs beside as many other tasks as there are CPUs (see :mod:`.arrow_threads`)."""

    def __init__(
        self, state: ParallelState | bytes, files: Iterable[LeafFile | str], arrow_threads: bool = True
    ):
        if isinstance(state, bytes | bytearray | memoryview):
            state = ParallelState.from_bytes(state)
        if not isinstance(state, ParallelState):
            raise ParallelStateError(f"expected a ParallelState or its bytes, got {type(state).__qualname__}")
        self.state = state
        if files is None or isinstance(files, str | bytes) or not isinstance(files, Iterable):
            raise ParallelStateError(
                f"files must be a list of checkpoint leaf files (LeafFile or path), got {type(files).__qualname__}"
            )
        self.files = [_as_leaf(f) for f in files]
        _refuse_overlaps(self.files, state.storage)
        self.arrow_threads = bool(arrow_threads)
        self._it = iter(self.files)

    def __iter__(self) -> ParallelScanMetadata:
        return self

    def __next__(self) -> ScanMetadata:
        leaf = next(self._it)
        with arrow_threads(self.arrow_threads):
            return self.state.scan_leaf(leaf)


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
        ids = _table_ids(found.column("metaData")) if "metaData" in found.column_names else []
        if ids:
            return ids[0]
    return None


def _table_ids(metadata: pa.ChunkedArray) -> list[str]:
    """The ids of the metaData actions in a checkpoint's ``metaData`` column (null rows are
    other actions)."""
    md = metadata.combine_chunks()
    rows = md.filter(md.is_valid())
    if not len(rows) or rows.type.get_field_index("id") < 0:
        return []
    return pc.struct_field(rows, "id").to_pylist()


def _leaf_location(storage: Storage, path: str) -> str:
    """A leaf path resolved against the table and normalized (no '..' escaping the log folder)."""
    return posixpath.normpath(storage.resolve(path))


def _log_dir(storage: Storage) -> str:
    return storage.join("_delta_log").rstrip("/") + "/"


def _relative_to_log(storage: Storage, path: str) -> str:
    log_dir = _log_dir(storage)
    full = _leaf_location(storage, path)
    return full[len(log_dir) :] if full.startswith(log_dir) else full


def _refuse_overlaps(files: Sequence[LeafFile], storage: Storage) -> None:
    """The same leaf (or row group) twice would yield its files twice."""
    seen: dict[str, set[int] | None] = {}
    for f in files:
        where = _leaf_location(storage, f.path)
        groups = None if f.row_groups is None else set(f.row_groups)
        if groups is not None and len(groups) != len(f.row_groups):
            raise ParallelStateError(f"leaf file {f.path} lists a row group twice: {list(f.row_groups)}")
        if where in seen:
            before = seen[where]
            if before is None or groups is None or before & groups:
                raise ParallelStateError(
                    f"leaf file {f.path} is given twice (overlapping row groups): each leaf, or each row "
                    "group of it, must be in exactly one split"
                )
            before |= groups
        else:
            seen[where] = groups


def _as_leaf(f: LeafFile | str) -> LeafFile:
    if isinstance(f, LeafFile):
        return f
    if isinstance(f, str):
        return LeafFile(f)
    raise ParallelStateError(f"expected a LeafFile or a path, got {type(f).__qualname__}")


# ==============================================================================================
# Splitting leaves (and row groups of large leaves) into balanced groups
# ==============================================================================================


def _local_storage() -> Storage:
    return Storage("/")


def _row_group_weights(leaf: LeafFile, storage: Storage) -> list[tuple[int, int]]:
    """(row-group index, uncompressed bytes) of the row groups a leaf covers."""
    with checkpoint_read_errors(leaf.path, LEAF_WHAT), open_leaf(storage, leaf.path) as pf:
        md = pf.metadata
    groups = range(md.num_row_groups) if leaf.row_groups is None else leaf.row_groups
    return [(i, max(1, md.row_group(i).total_byte_size)) for i in groups]


def _linear_partition(weights: Sequence[float], parts: int) -> list[int]:
    """Group index of each item, contiguous groups balanced by cumulative weight."""
    total = float(sum(weights)) or 1.0
    out, acc = [], 0.0
    for w in weights:
        mid = acc + w / 2.0
        out.append(min(parts - 1, int(mid * parts / total)))
        acc += w
    return out


def _merge(leaf: LeafFile, indices: list[int], all_groups: int | None) -> LeafFile:
    if leaf.row_groups is None and all_groups is not None and indices == list(range(all_groups)):
        return leaf
    return LeafFile(leaf.path, leaf.size, tuple(indices))


def expand_leaf(leaf: LeafFile, chunks: int | None = None, storage: Storage | None = None) -> list[LeafFile]:
    """Split one leaf into row-group ranges: one per row group, or ``chunks`` balanced contiguous ones.

    Reads only the parquet footer. The ranges partition the leaf's rows exactly.
    """
    storage = storage or _local_storage()
    rgs = _row_group_weights(leaf, storage)
    if not rgs:
        return [leaf]
    if chunks is None or chunks >= len(rgs):
        return [LeafFile(leaf.path, leaf.size, (i,)) for i, _ in rgs]
    assign = _linear_partition([w for _, w in rgs], max(1, chunks))
    out: dict[int, list[int]] = {}
    for (i, _), g in zip(rgs, assign, strict=True):
        out.setdefault(g, []).append(i)
    return [LeafFile(leaf.path, leaf.size, tuple(v)) for _, v in sorted(out.items())]


def split_leaves(
    files: Sequence[LeafFile], parts: int, storage: Storage | None = None, *, max_share: float = 0.5
) -> list[list[LeafFile]]:
    """Partition leaf files into at most ``parts`` non-empty, balanced, contiguous groups.

    Files are weighted by size. A file bigger than ``max_share`` of one group's fair share (or of
    unknown size, when it may need it) is split into its row groups, weighted by their uncompressed
    size scaled to the file's size; a group receiving several row groups of a file gets one
    ``LeafFile`` with those row groups (the whole file when it got all of them). Reads parquet
    footers only for the files it splits. Every row of every file lands in exactly one group.
    """
    files = [_as_leaf(f) for f in files]
    parts = integer(parts, "parts")
    if parts < 1:
        raise ArgumentError(f"parts must be at least 1, got {parts}")
    if not files:
        return []
    storage = storage or _local_storage()
    _refuse_overlaps(files, storage)
    if parts == 1:
        return [list(files)]
    sizes = []
    for f in files:
        size = f.size
        if size <= 0:
            try:
                size = storage.info(f.path).size
            except (OSError, StorageError):  # only a weight for balancing: the read reports it
                size = 1
        sizes.append(max(1, size))
    fair = sum(sizes) / parts
    # units: (file index, row-group index or None, weight)
    units: list[tuple[int, int | None, float]] = []
    n_groups: dict[int, int] = {}
    for i, (f, size) in enumerate(zip(files, sizes, strict=True)):
        if size > max_share * fair:
            rgs = _row_group_weights(f, storage)
            if len(rgs) > 1:
                n_groups[i] = len(rgs)
                rg_total = float(sum(w for _, w in rgs))
                units.extend((i, rg, size * w / rg_total) for rg, w in rgs)
                continue
        units.append((i, None, float(size)))
    assign = _linear_partition([w for _, _, w in units], parts)
    groups: dict[int, dict[int, list[int] | None]] = {}
    for (i, rg, _), g in zip(units, assign, strict=True):
        per_file = groups.setdefault(g, {})
        if rg is None:
            per_file[i] = None
        else:
            lst = per_file.setdefault(i, [])
            assert lst is not None
            lst.append(rg)
    out = []
    for g in sorted(groups):
        leaves = []
        for i, rgs in groups[g].items():
            f = files[i]
            leaves.append(f if rgs is None else _merge(f, rgs, n_groups[i]))
        out.append(leaves)
    return out


# ==============================================================================================
# Execution helpers
# ==============================================================================================

_STATE_CACHE: dict[bytes, ParallelState] = {}
_STATE_CACHE_LOCK = threading.Lock()
_STATE_CACHE_SIZE = 4


def _cached_state(state_bytes: bytes) -> ParallelState:
    digest = hashlib.blake2b(state_bytes, digest_size=16).digest()
    with _STATE_CACHE_LOCK:
        state = _STATE_CACHE.get(digest)
    if state is None:
        state = ParallelState.from_bytes(state_bytes)
        with _STATE_CACHE_LOCK:
            while len(_STATE_CACHE) >= _STATE_CACHE_SIZE:
                _STATE_CACHE.pop(next(iter(_STATE_CACHE)))
            _STATE_CACHE[digest] = state
    return state


def scan_leaf_files(
    state_bytes: bytes, files: Sequence[LeafFile | str], arrow_threads: bool = True
) -> list[ScanMetadata]:
    """Worker entry point (top-level, picklable): phase two over ``files`` from serialized state.

    The decoded state is cached per process (by digest), so a worker running many tasks of one
    scan decodes it once. ``arrow_threads`` as in :class:`ParallelScanMetadata`.
    """
    state = _cached_state(bytes(state_bytes))
    return list(ParallelScanMetadata(state, files, arrow_threads))


@dataclass(frozen=True)
class _SharedBatch:
    """A ScanMetadata whose file table waits in an Arrow IPC file (tmpfs) for the driver to map."""

    path: str
    files_before_pruning: int
    extra: dict[str, Any]


def shared_dir() -> str:
    """Where workers on this machine leave result tables: ``/dev/shm`` when usable, else the temp dir."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


def scan_leaf_files_shared(
    state_bytes: bytes, files: Sequence[LeafFile | str], directory: str, arrow_threads: bool = True
) -> list[Any]:
    """Like :func:`scan_leaf_files`, for workers on the driver's machine: each batch's table is written
    as an Arrow IPC file in ``directory`` (normally tmpfs) and only its name travels back, so the
    driver maps it instead of unpickling a copy. Falls back to returning the batch when it cannot write.
    """
    out: list[Any] = []
    for batch in scan_leaf_files(state_bytes, files, arrow_threads):
        path = None
        try:
            fd, path = tempfile.mkstemp(prefix="delta-leaf-", suffix=".arrow", dir=directory)
            os.close(fd)
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batch.files.schema) as writer:
                writer.write_table(batch.files)
            out.append(_SharedBatch(path, batch.files_before_pruning, batch.extra))
        except OSError:
            if path is not None:
                _unlink(path)
            out.append(batch)
    return out


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _receive(items: list[Any]) -> list[ScanMetadata]:
    """Map shared batches (zero-copy; the file is unlinked at once, the mapping lives on)."""
    out = []
    try:
        for item in items:
            if isinstance(item, _SharedBatch):
                table = pa.ipc.open_file(pa.memory_map(item.path)).read_all()
                _unlink(item.path)
                out.append(
                    ScanMetadata(table, files_before_pruning=item.files_before_pruning, extra=item.extra)
                )
            else:
                out.append(item)
    finally:
        for item in items:
            if isinstance(item, _SharedBatch):
                _unlink(item.path)
    return out


def _discard(futures: Sequence[Any]) -> None:
    """After a failure: wait for the other tasks, then drop the shared files of those that finished."""
    from concurrent.futures import wait

    wait(futures)
    for f in futures:
        if not f.cancelled() and f.exception() is None:
            _discard_items(f.result())


def _scan_leaves_local(
    state: ParallelState, files: Sequence[LeafFile], threads: bool = True
) -> list[ScanMetadata]:
    return list(ParallelScanMetadata(state, files, threads))


def _arrow_threads_for(tasks: int) -> bool:
    """pyarrow's own pool only while the tasks leave this machine's CPUs idle."""
    return tasks < _default_workers()


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _check_transport(transport: str) -> None:
    if transport not in ("auto", "pickle", "shared"):
        raise ArgumentError(f"transport must be 'auto', 'pickle' or 'shared', got {transport!r}")


def execute_parallel(
    state: ParallelState,
    files: Sequence[LeafFile],
    executor: Executor | None = None,
    workers: int | None = None,
    transport: str = "auto",
) -> list[ScanMetadata]:
    """Run phase two over ``files`` and return its batches (in a deterministic order).

    The leaves are split into ``workers`` balanced groups (:func:`split_leaves`; default: the
    executor's worker count, else the usable CPUs), one task per group.

    * no executor: inline when there is a single group, else on a private thread pool;
    * a ``ThreadPoolExecutor``: the in-memory state is shared, nothing is serialized;
    * any other executor: tasks get the state bytes and a file list. With ``transport="shared"``
      (the default, ``"auto"``, for a ``ProcessPoolExecutor``, whose workers share this machine)
      result tables come back as Arrow IPC files in ``/dev/shm`` that are memory-mapped here;
      with ``"pickle"`` (``"auto"`` for other executors, which may be remote) they are pickled.
    """
    _check_transport(transport)
    files = [_as_leaf(f) for f in files]
    if not files:
        return []
    workers = workers or getattr(executor, "_max_workers", None) or _default_workers()
    groups = split_leaves(files, workers, state.storage)
    local = isinstance(executor, ThreadPoolExecutor | ProcessPoolExecutor) or executor is None
    # several tasks on this machine's CPUs: each parses on its own thread only
    threads = _arrow_threads_for(min(len(groups), workers)) if local else True
    if executor is None:
        if len(groups) <= 1:
            return _refuse_repeated_files(_scan_leaves_local(state, files), files)
        with ThreadPoolExecutor(len(groups), thread_name_prefix="delta-leaf") as pool:
            results = list(pool.map(lambda g: _scan_leaves_local(state, g, threads), groups))
        return _refuse_repeated_files([m for batch in results for m in batch], files)
    if isinstance(executor, ThreadPoolExecutor):
        futures = [executor.submit(_scan_leaves_local, state, g, threads) for g in groups]
        return _refuse_repeated_files([m for f in futures for m in f.result()], files)
    shared = transport == "shared" or (transport == "auto" and isinstance(executor, ProcessPoolExecutor))
    blob = state.to_bytes()
    if shared:
        directory = shared_dir()
        futures = [executor.submit(scan_leaf_files_shared, blob, g, directory, threads) for g in groups]
    else:
        futures = [executor.submit(scan_leaf_files, blob, g, threads) for g in groups]
    try:
        out = [m for f in futures for m in _receive(f.result())]
    except BaseException:
        _discard(futures)
        raise
    return _refuse_repeated_files(out, files)


def _refuse_repeated_files(batches: list[ScanMetadata], leaves: Sequence[LeafFile]) -> list[ScanMetadata]:
    """The parts of a multi-part checkpoint hold each live file once. A part repeating another's
    files (a copied part) gives their rows twice; the sequential replay refuses it, and so does
    this union of the workers' batches (one worker sees only its own parts)."""
    parts = {leaf.path for leaf in leaves if is_multi_part_checkpoint(posixpath.basename(leaf.path))}
    if len(parts) < 2:
        return batches
    keys = [
        file_keys(
            b.files.column("location").combine_chunks(), b.files.column("deletion_vector").combine_chunks()
        )
        for b in batches
        if b.num_files
    ]
    if keys:
        every = pa.concat_arrays(keys)
        if pc.count_distinct(every).as_py() != len(every):
            first = min(parts)
            raise LogCorruptError(
                f"{first}: the parts of this multi-part checkpoint list a file more than once"
            )
    return batches


def run_parallel(
    scan: Scan, executor: Executor | None = None, workers: int | None = None, transport: str = "auto"
) -> list[ScanMetadata]:
    """Both phases: the sequential batches, then the leaves' batches (see :func:`execute_parallel`).

    The union of the returned batches' files is exactly ``scan.scan_metadata()``'s.
    """
    _check_transport(transport)
    phase = scan.parallel_scan_metadata()
    out = list(phase)
    after = phase.finish()
    if isinstance(after, Parallel):
        out.extend(execute_parallel(after.state, after.files, executor, workers, transport))
    return out


def _is_local_cluster(client: Any) -> bool:
    hosts = set()
    for addr in client.scheduler_info().get("workers", {}):
        host = addr.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        hosts.add(host)
    return bool(hosts) and hosts <= {"127.0.0.1", "localhost", "::1"}


def run_with_dask(
    scan: Scan, client: Any, workers: int | None = None, transport: str = "auto"
) -> list[ScanMetadata]:
    """Both phases, the second on a ``distributed.Client``.

    The state bytes are broadcast once to every worker (``client.scatter``); each task is
    :func:`scan_leaf_files` over one balanced group of leaf files (``workers`` groups, default:
    the cluster's total thread count); results are gathered back in group order. ``transport``
    as in :func:`execute_parallel`; ``"auto"`` uses shared files only when every worker listens on
    a loopback address (so it is on this machine), else Dask's own serialization.
    """
    _check_transport(transport)
    phase = scan.parallel_scan_metadata()
    out = list(phase)
    after = phase.finish()
    if isinstance(after, Done):
        return out
    if workers is None:
        info = client.scheduler_info()
        workers = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()) or 1
    groups = split_leaves(after.files, workers, after.state.storage)
    blob = after.state.to_bytes()
    on_this_machine = _is_local_cluster(client)
    shared = transport == "shared" or (transport == "auto" and on_this_machine)
    # several tasks on this machine's CPUs: each parses on its own thread only
    threads = _arrow_threads_for(min(len(groups), workers)) if on_this_machine else True
    state_future = client.scatter(blob, broadcast=True, hash=False)
    if shared:
        directory = shared_dir()
        futures = [
            client.submit(scan_leaf_files_shared, state_future, g, directory, threads, pure=False)
            for g in groups
        ]
    else:
        futures = [client.submit(scan_leaf_files, state_future, g, threads, pure=False) for g in groups]
    try:
        results = client.gather(futures)
    except BaseException:
        from distributed import wait

        wait(futures)
        for f in futures:
            if f.status == "finished":
                _discard_items(f.result())
        raise
    finally:
        client.cancel([state_future])
    leaf_batches = [m for items in results for m in _receive(items)]
    return out + _refuse_repeated_files(leaf_batches, after.files)


def _discard_items(items: Sequence[Any]) -> None:
    for item in items or []:
        if isinstance(item, _SharedBatch):
            _unlink(item.path)


def concat_files(batches: Iterable[ScanMetadata]) -> pa.Table:
    """One file table from ScanMetadata batches."""
    tables = [b.files for b in batches]
    if not tables:
        raise DeltaError("no ScanMetadata batches to concatenate")
    return pa.concat_tables(tables, promote_options="permissive")
