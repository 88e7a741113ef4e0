"""Deletion vectors: descriptors, decoding and per-batch keep masks (PROTOCOL.md "Deletion Vectors").

A deletion vector (DV) marks rows of one data file as deleted without rewriting the file. It is
stored inline in the log (``storageType`` ``'i'``, Z85 text) or in a DV file next to the data
(``'u'``: path derived from a UUID, ``'p'``: absolute path). Either way the payload is the magic
number 1681511377 (little-endian int32) followed by a 64-bit RoaringBitmap in the "portable"
format; files additionally frame each DV with a big-endian size and a big-endian CRC-32.

The bitmap is decoded with pyroaring's ``BitMap64.deserialize``, which reads the portable 64-bit
format directly (verified bucket by bucket against an independent decoder in the tests), so no
per-row Python work is done anywhere: masks are built with Arrow compute kernels.
"""

from __future__ import annotations

import threading
import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import AbstractBitMap64, BitMap64, FrozenBitMap64

from .errors import DeletionVectorError
from .storage import Storage

__all__ = [
    "DV_MAGIC",
    "DeletionVectorCache",
    "DeletionVectorDescriptor",
    "default_cache",
    "deleted_row_mask",
    "load_deleted_rows",
    "z85_decode",
]

#: First four bytes (little-endian int32) of every serialized DV in the portable format.
DV_MAGIC = 1681511377
#: Magic of the Java-native "RoaringBitmapArray" layout; Delta writers use the portable one for DVs.
_NATIVE_MAGIC = 1681511376
#: Row indexes are signed 64-bit in Delta: every bucket key must have its top bit clear.
_MAX_ROW_INDEX = (1 << 63) - 1
#: When a DV starts this close to the file start, read from byte 0 too and check the version byte.
_VERSION_CHECK_WINDOW = 4096
_UUID_Z85_LEN = 20

# -- Z85 (https://rfc.zeromq.org/spec/32/) ------------------------------------------------------

_Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_DIGIT = {c: i for i, c in enumerate(_Z85_ALPHABET)}
_U32_MAX = 0xFFFFFFFF


def _z85_value(chunk: str, pos: int) -> int:
    value = 0
    for i, char in enumerate(chunk):
        digit = _Z85_DIGIT.get(char)
        if digit is None:
            raise ValueError(f"invalid z85 character {char!r} at position {pos + i}")
        value = value * 85 + digit
    return value


def z85_decode(text: str) -> bytes:
    """Decode Z85 text as Delta writers produce it (RFC 32 plus two tail conventions).

    - Plain RFC 32: every 5 characters give 4 bytes (Delta-Spark pads the bytes to a multiple of
      4 and relies on ``sizeInBytes`` to drop the padding).
    - The Rust ``z85`` crate (delta-rs, delta-kernel-rs writers) encodes a 1-3 byte tail as a
      full 5-character chunk whose leading ``'#'`` characters count the missing bytes: ``##093``
      is ``00093`` = 0x00000300 with 2 bytes dropped, i.e. ``03 00``. No RFC chunk can start with
      ``'#'`` (84 * 85**4 > 2**32), so this is unambiguous.
    - A truncated last chunk of n (2-4) characters gives n-1 bytes (the classic Ascii85 tail):
      it is padded with the highest digit ``'#'`` and the extra bytes are dropped.
    """
    full, rest = divmod(len(text), 5)
    if rest == 1:
        raise ValueError(f"z85 text of length {len(text)} ends in a 1-character chunk")
    out = bytearray()
    for i in range(full):
        pos = 5 * i
        chunk = text[pos : pos + 5]
        if chunk[0] == "#" and i == full - 1 and not rest:
            missing = len(chunk) - len(chunk.lstrip("#"))
            if missing > 3:
                raise ValueError(f"invalid z85 tail chunk {chunk!r} at position {pos}")
            keep = 4 - missing
            value = _z85_value("0" * missing + chunk[missing:], pos)
            if value >= 1 << (8 * keep):
                raise ValueError(f"z85 tail chunk {chunk!r} at position {pos} does not fit {keep} bytes")
            out += value.to_bytes(4, "big")[missing:]
            continue
        value = _z85_value(chunk, pos)
        if value > _U32_MAX:
            raise ValueError(f"z85 chunk {chunk!r} at position {pos} overflows 32 bits")
        out += value.to_bytes(4, "big")
    if rest:
        pos = 5 * full
        value = _z85_value(text[pos:] + "#" * (5 - rest), pos)
        if value > _U32_MAX:
            raise ValueError(f"z85 tail {text[pos:]!r} at position {pos} overflows 32 bits")
        out += value.to_bytes(4, "big")[: rest - 1]
    return bytes(out)


# -- descriptor ---------------------------------------------------------------------------------

_FIELDS = (
    ("storageType", "storage_type"),
    ("pathOrInlineDv", "path_or_inline_dv"),
    ("sizeInBytes", "size_in_bytes"),
    ("cardinality", "cardinality"),
)


@dataclass(frozen=True)
class DeletionVectorDescriptor:
    """The ``deletionVector`` struct of an ``add``/``remove`` action, validated on construction."""

    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    cardinality: int

    def __post_init__(self) -> None:
        if self.storage_type not in ("u", "p", "i"):
            raise DeletionVectorError(
                f"unknown deletion vector storageType {self.storage_type!r} (expected 'u', 'p' or 'i')"
            )
        if not isinstance(self.path_or_inline_dv, str) or not self.path_or_inline_dv:
            raise DeletionVectorError(f"deletion vector pathOrInlineDv must be a non-empty string: {self!r}")
        for name in ("size_in_bytes", "cardinality"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise DeletionVectorError(f"deletion vector {name} must be a non-negative integer: {self!r}")
        if self.offset is not None:
            if not isinstance(self.offset, int) or isinstance(self.offset, bool) or self.offset < 0:
                raise DeletionVectorError(f"deletion vector offset must be a non-negative integer: {self!r}")
            if self.storage_type == "i":
                raise DeletionVectorError(f"inline deletion vector must not have an offset: {self!r}")
        if self.storage_type == "u" and len(self.path_or_inline_dv) < _UUID_Z85_LEN:
            raise DeletionVectorError(
                f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} is shorter than the "
                f"{_UUID_Z85_LEN}-character encoded UUID"
            )

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DeletionVectorDescriptor:
        """Build from the log's camelCase dict (JSON commit or checkpoint row)."""
        if not isinstance(d, dict):
            raise DeletionVectorError(f"deletionVector must be an object, got {type(d).__name__}")
        values: dict[str, Any] = {}
        for key, attr in _FIELDS:
            if d.get(key) is None:
                raise DeletionVectorError(f"deletionVector is missing required field {key!r}: {d!r}")
            values[attr] = d[key]
        try:
            values["size_in_bytes"] = int(values["size_in_bytes"])
            values["cardinality"] = int(values["cardinality"])
            offset = d.get("offset")
            values["offset"] = None if offset is None else int(offset)
        except (TypeError, ValueError) as e:
            raise DeletionVectorError(f"deletionVector has a non-integer field: {d!r}") from e
        return cls(**values)

    @property
    def unique_id(self) -> str:
        """``<storageType><pathOrInlineDv>[@<offset>]``: with the path, the key of a logical file."""
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    def file_path(self, storage: Storage) -> str | None:
        """Full path of the DV file (``'u'`` and ``'p'``); None for an inline DV.

        ``'u'``: ``<root>/<prefix>/deletion_vector_<uuid>.bin``, the UUID being the last 20 Z85
        characters and the prefix whatever comes before. ``'p'``: the path as logged (URL-encoded
        like an add path), resolved by the table's storage, so it must live on the same filesystem.
        """
        if self.storage_type == "i":
            return None
        if self.storage_type == "p":
            return storage.resolve(unquote(self.path_or_inline_dv))
        prefix = self.path_or_inline_dv[:-_UUID_Z85_LEN]
        encoded = self.path_or_inline_dv[-_UUID_Z85_LEN:]
        try:
            dv_uuid = uuid.UUID(bytes=z85_decode(encoded))
        except ValueError as e:
            raise DeletionVectorError(
                f"deletion vector pathOrInlineDv {self.path_or_inline_dv!r} does not end in a Z85 UUID: {e}"
            ) from e
        name = f"deletion_vector_{dv_uuid}.bin"
        return storage.join(prefix, name) if prefix else storage.join(name)


# -- decoding -----------------------------------------------------------------------------------

_B = TypeVar("_B", BitMap64, FrozenBitMap64)


def _check_magic(data: bytes | memoryview, where: str) -> None:
    magic = int.from_bytes(data[:4], "little", signed=True)
    if magic == _NATIVE_MAGIC:
        raise DeletionVectorError(f"{where}: unsupported native RoaringBitmap serialization (magic {magic})")
    if magic != DV_MAGIC:
        raise DeletionVectorError(f"{where}: bad magic number {magic} (expected {DV_MAGIC})")


def _inline_payload(descriptor: DeletionVectorDescriptor) -> bytes:
    """Magic + bitmap of an inline DV: no size prefix and no checksum, unlike DV files."""
    where = "inline DV"
    try:
        raw = z85_decode(descriptor.path_or_inline_dv)
    except ValueError as e:
        raise DeletionVectorError(f"{where}: {e}") from e
    size = descriptor.size_in_bytes
    # Delta-Spark pads to a multiple of 4 bytes before encoding; sizeInBytes drops the padding.
    if not size <= len(raw) <= size + 3:
        raise DeletionVectorError(f"{where}: decodes to {len(raw)} bytes but sizeInBytes is {size}")
    if size < 4:
        raise DeletionVectorError(f"{where}: truncated ({size} bytes, no room for the magic number)")
    data = raw[:size]
    _check_magic(data, where)
    return data


def _file_payload(descriptor: DeletionVectorDescriptor, storage: Storage, path: str) -> memoryview:
    """Magic + bitmap of a DV stored in a file, after checking version, size and CRC-32.

    File layout: 1 version byte (1), then per DV at ``offset``: big-endian u32 size, ``size``
    bytes (magic + bitmap), big-endian CRC-32 of those bytes. An absent offset means the first DV,
    right after the version byte (reading at 0 would hit the version byte itself).
    """
    offset = 1 if descriptor.offset is None else descriptor.offset
    where = f"deletion vector file {path} (offset {offset})"
    size = descriptor.size_in_bytes
    need = 4 + size + 4
    start = 0 if offset <= _VERSION_CHECK_WINDOW else offset
    try:
        raw = memoryview(storage.read_range(path, start, offset - start + need))  # slices: no copies
    except FileNotFoundError as e:
        raise DeletionVectorError(f"{where}: file not found") from e
    except OSError as e:
        raise DeletionVectorError(f"{where}: cannot read: {e}") from e
    if start == 0:
        if not raw:
            raise DeletionVectorError(f"{where}: file is empty")
        if raw[0] != 1:
            raise DeletionVectorError(f"{where}: unsupported DV file format version {raw[0]}")
        raw = raw[offset:]
    if not raw:  # nothing at the offset: the read (or the version window) ended before it
        raise DeletionVectorError(f"{where}: the offset is at or beyond the end of the file")
    if len(raw) < 4:
        raise DeletionVectorError(f"{where}: truncated, file ends before the size field")
    stored_size = int.from_bytes(raw[:4], "big")
    if stored_size != size:
        raise DeletionVectorError(f"{where}: size mismatch, file says {stored_size} bytes, log says {size}")
    if len(raw) < need:
        raise DeletionVectorError(
            f"{where}: truncated, {len(raw)} of {need} bytes (size + bitmap + checksum) present"
        )
    if size < 4:
        raise DeletionVectorError(f"{where}: truncated ({size} bytes, no room for the magic number)")
    data = raw[4 : 4 + size]
    _check_magic(data, where)
    stored_crc = int.from_bytes(raw[4 + size : need], "big")
    crc = zlib.crc32(data)
    if crc != stored_crc:
        raise DeletionVectorError(
            f"{where}: checksum mismatch, stored CRC-32 {stored_crc:#010x}, computed {crc:#010x}"
        )
    return data


def _where(descriptor: DeletionVectorDescriptor, storage: Storage) -> str:
    """How errors name a DV: "inline DV" or its file."""
    return (
        "inline DV"
        if descriptor.storage_type == "i"
        else f"deletion vector file {descriptor.file_path(storage)}"
    )


def _load(descriptor: DeletionVectorDescriptor, storage: Storage, cls: type[_B]) -> _B:
    """The decoded bitmap, its bytes checked (the cardinality is checked per descriptor, by
    :func:`_check_cardinality`: a cached bitmap may be named by another descriptor)."""
    if descriptor.storage_type == "i":
        data = _inline_payload(descriptor)
    else:
        path = descriptor.file_path(storage)
        assert path is not None
        data = _file_payload(descriptor, storage, path)
    where = _where(descriptor, storage)
    if len(data) == 4:  # pyroaring raises IndexError on no bytes at all
        raise DeletionVectorError(f"{where}: corrupt roaring bitmap: no bytes after the magic number")
    try:
        bitmap = cls.deserialize(data[4:])
    except (ValueError, TypeError) as e:
        raise DeletionVectorError(f"{where}: corrupt roaring bitmap: {e}") from e
    if bitmap and bitmap.max() > _MAX_ROW_INDEX:
        raise DeletionVectorError(f"{where}: row index {bitmap.max()} has the sign bit set")
    return bitmap


def _check_cardinality(
    bitmap: AbstractBitMap64, descriptor: DeletionVectorDescriptor, storage: Storage
) -> None:
    if len(bitmap) != descriptor.cardinality:
        raise DeletionVectorError(
            f"{_where(descriptor, storage)}: cardinality mismatch, bitmap has {len(bitmap)} rows, "
            f"log says {descriptor.cardinality}"
        )


def load_deleted_rows(descriptor: DeletionVectorDescriptor, storage: Storage) -> BitMap64:
    """Decode and verify one DV: the row indexes (0-based, within its data file) it deletes.

    Raises DeletionVectorError naming the file (or "inline DV") for a missing file, truncation,
    size/version/magic/CRC mismatch, an undecodable bitmap or a cardinality that differs from
    the log. Prefer :class:`DeletionVectorCache` when several readers may need the same DV.
    """
    bitmap = _load(descriptor, storage, BitMap64)
    _check_cardinality(bitmap, descriptor, storage)
    return bitmap


# -- masks --------------------------------------------------------------------------------------


def _constant_mask(value: bool, length: int) -> pa.BooleanArray:
    """All-True / all-False array straight from a byte buffer (``pa.repeat`` is ~50x slower)."""
    bits = (b"\xff" if value else b"\x00") * ((length + 7) // 8)
    return pa.Array.from_buffers(pa.bool_(), length, [None, pa.py_buffer(bits)])


def deleted_row_mask(deleted: AbstractBitMap64, start: int, length: int) -> pa.BooleanArray:
    """Keep-mask (True = row survives) for rows ``[start, start + length)`` of a data file.

    Meant for batch-by-batch reads: ``batch.filter(deleted_row_mask(dv, rows_before, len(batch)))``.
    Works on the bitmap range only (roaring intersection, then Arrow kernels), so the cost is
    proportional to the window, with no Python loop over rows or deletions.
    """
    if start < 0 or length < 0:
        raise ValueError(f"row window must be non-negative, got start={start}, length={length}")
    end = start + length
    count = deleted.range_cardinality(start, end) if length else 0
    if count == 0 or count == length:
        return _constant_mask(count == 0, length)
    selected = deleted
    if count != len(deleted):
        window = BitMap64()
        window.add_range(start, end)
        selected = deleted.intersection(window)
    if start:
        selected = selected.shift(-start)  # positions relative to the window
    # array('Q') -> Arrow without copying; positions are < length, so int64 is exact.
    indexes = selected.to_array()
    positions = pa.Array.from_buffers(pa.int64(), count, [None, pa.py_buffer(indexes)])
    # inverse_permutation writes a value at every deleted position and leaves the other slots
    # null (= kept); a 32-bit output is 2-8x faster than ``scatter`` or a 64-bit output.
    out_type = pa.int32() if count < 1 << 31 else pa.int64()
    marked = pc.inverse_permutation(positions, max_index=length - 1, output_type=out_type)
    return pc.is_null(marked)


# -- cache --------------------------------------------------------------------------------------

#: Stored bytes of deletion vectors the process cache keeps. Bounded by count alone (4,096), a
#: process reading tables whose files have large vectors (a 1M-row file with half its rows
#: deleted: ~130 KB) could keep ~0.5-0.9 GB.
DV_CACHE_BYTES = 256 * 1024 * 1024


class DeletionVectorCache:
    """Process-wide, thread-safe memo of decoded DVs keyed by (table root URI, DV unique id,
    sizeInBytes): the size is part of what the bytes were checked against; the cardinality is
    checked on every get, so a descriptor that lies about either is refused even when another
    one decoded the same bytes first.

    Several scan threads often need the same DV (one per row group of a data file); each DV is
    read and decoded once. Bitmaps are returned frozen because they are shared between threads.
    Concurrent requests for the same DV wait for the first one instead of decoding it again;
    failures are not cached. At most ``max_entries`` DVs are kept, of at most ``max_bytes``
    stored bytes together (their ``sizeInBytes``, about their size in memory; the least
    recently used evicted first, the newest kept whatever its size).
    """

    def __init__(self, max_entries: int = 4096, max_bytes: int = DV_CACHE_BYTES):
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._bytes = 0  # the kept DVs' sizeInBytes (the last part of their keys)
        self._lock = threading.Lock()
        self._bitmaps: OrderedDict[tuple[str, str, int], FrozenBitMap64] = OrderedDict()
        self._loading: dict[tuple[str, str, int], threading.Lock] = {}

    def get(self, descriptor: DeletionVectorDescriptor, storage: Storage) -> FrozenBitMap64:
        """The deleted row indexes of ``descriptor``, decoded at most once per key."""
        bitmap = self._get(
            (storage.root_uri, descriptor.unique_id, descriptor.size_in_bytes), descriptor, storage
        )
        _check_cardinality(bitmap, descriptor, storage)
        return bitmap

    def _get(
        self, key: tuple[str, str, int], descriptor: DeletionVectorDescriptor, storage: Storage
    ) -> FrozenBitMap64:
        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit
            key_lock = self._loading.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                hit = self._lookup(key)
            if hit is not None:
                return hit
            try:
                bitmap = _load(descriptor, storage, FrozenBitMap64)
            except BaseException:
                with self._lock:
                    self._loading.pop(key, None)
                raise
            with self._lock:
                if key not in self._bitmaps:
                    self._bytes += key[2]
                self._bitmaps[key] = bitmap
                self._loading.pop(key, None)
                while len(self._bitmaps) > self.max_entries or (
                    self._bytes > self.max_bytes and len(self._bitmaps) > 1
                ):
                    self._bytes -= self._bitmaps.popitem(last=False)[0][2]
            return bitmap

    def _lookup(self, key: tuple[str, str, int]) -> FrozenBitMap64 | None:
        bitmap = self._bitmaps.get(key)
        if bitmap is not None:
            self._bitmaps.move_to_end(key)
        return bitmap

    def clear(self) -> None:
        with self._lock:
            self._bitmaps.clear()
            self._bytes = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._bitmaps)


#: The cache readers share unless they are given another one.
default_cache = DeletionVectorCache()
