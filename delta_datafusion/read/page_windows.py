"""Row windows from a parquet file's page index: the rows of a file outside which no row can
satisfy a filter, judged from the per-page min/max (ColumnIndex) and row offsets (OffsetIndex)
writers put beside the footer (delta-rs and parquet-mr do by default).

pyarrow 26 reads no page index: a filtered scan decodes every row of a file. Its readers decode
pages lazily, though, so a read that stops at the window's end decodes only the pages before it
(a key range over sorted ids: rows 61,440..81,920 of 187,500 decode rows 0..81,920); the rows
before the window are decoded too (pyarrow cannot skip them), then dropped. Only top-level signed
integer and date columns of flat schemas are judged (their page bounds are plain little-endian
integers); anything else, an unreadable or unusual footer, keeps the whole file.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from ..storage import Storage

#: Bytes read from the file's end for the footer and, usually, the page index before it.
TAIL_READ = 64 * 1024

# thrift compact protocol type codes
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
_INT32, _INT64 = 1, 2  # parquet physical types
_CONVERTED_OK = {None, 6, 15, 16, 17, 18}  # none, DATE, INT_8..INT_64 (signed)


class _Thrift:
    """A reader of thrift compact structs, as parsed dicts (field id -> value)."""

    def __init__(self, data: bytes | memoryview, pos: int = 0):
        self.b = data
        self.p = pos

    def _varint(self) -> int:
        out = shift = 0
        while True:
            x = self.b[self.p]
            self.p += 1
            out |= (x & 0x7F) << shift
            if not x & 0x80:
                return out
            shift += 7

    def _int(self) -> int:
        v = self._varint()
        return (v >> 1) ^ -(v & 1)

    def value(self, t: int) -> Any:
        if t == _TRUE:
            return True
        if t == _FALSE:
            return False
        if t == _BYTE:
            self.p += 1
            return self.b[self.p - 1]
        if t in (_I16, _I32, _I64):
            return self._int()
        if t == _DOUBLE:
            self.p += 8
            return struct.unpack_from("<d", self.b, self.p - 8)[0]
        if t == _BINARY:
            n = self._varint()
            self.p += n
            return bytes(self.b[self.p - n : self.p])
        if t in (_LIST, _SET):
            head = self.b[self.p]
            self.p += 1
            n, et = head >> 4, head & 15
            if n == 15:
                n = self._varint()
            if et in (_TRUE, _FALSE):  # list elements: one byte each, 1 for true
                self.p += n
                return [x == _TRUE for x in self.b[self.p - n : self.p]]
            return [self.value(et) for _ in range(n)]
        if t == _MAP:
            n = self._varint()
            if n == 0:
                return {}
            head = self.b[self.p]
            self.p += 1
            return {self.value(head >> 4): self.value(head & 15) for _ in range(n)}
        if t == _STRUCT:
            return self.struct()
        raise ValueError(f"thrift type {t}")

    def struct(self) -> dict[int, Any]:
        out: dict[int, Any] = {}
        last = 0
        while True:
            head = self.b[self.p]
            self.p += 1
            if head == _STOP:
                return out
            delta = head >> 4
            fid = last + delta if delta else self._int()
            out[fid] = self.value(head & 15)
            last = fid


@dataclass(frozen=True)
class RowWindow:
    """Rows ``start..stop`` (global row numbers) of a file of ``num_rows`` rows may match; the
    row groups ``groups`` hold them (the first starts at row ``first_row``)."""

    start: int
    stop: int
    num_rows: int
    groups: list[int]
    first_row: int


def _leaf_elements(schema: list[dict]) -> dict[str, dict] | None:
    """Top-level leaf column name -> its schema element (None for a schema that is not flat)."""
    if not schema or any(5 in e and e[5] for e in schema[1:]):
        return None
    return {e[4].decode(): e for e in schema[1:] if 4 in e}


def judged_type(arrow_type: pa.DataType) -> bool:
    """Whether a column of this (logical) type is judged by its page bounds."""
    signed = pa.types.is_integer(arrow_type) and pa.types.is_signed_integer(arrow_type)
    return signed or pa.types.is_date32(arrow_type)


def _bound_format(element: dict, chunk_type: int, arrow_type: pa.DataType) -> str | None:
    """The struct format of the column's page bounds (signed little-endian integers), or None
    when they are not judged (unsigned or other logical types, a type the table reads another
    way)."""
    if element.get(6) not in _CONVERTED_OK:
        return None
    logical = element.get(10)
    if logical is not None:
        if 10 in logical:  # INTEGER: signed only
            if not logical[10].get(2, False):
                return None
        elif 6 not in logical:  # DATE
            return None
    if chunk_type == _INT64 and pa.types.is_int64(arrow_type):
        return "<q"
    if chunk_type == _INT32 and (
        pa.types.is_int32(arrow_type)
        or pa.types.is_int16(arrow_type)
        or pa.types.is_int8(arrow_type)
        or pa.types.is_date32(arrow_type)
    ):
        return "<i"
    return None


def row_window(
    storage: Storage, location: str, size: int, pred: Any, logical: pa.Schema, judged: dict[str, str]
) -> RowWindow | None:
    """The rows of the file that may satisfy ``pred``, judged by the page bounds of the
    ``judged`` columns (logical name -> physical name); None: unknown, read it whole.

    Each column's pages are judged with only that column's bounds known (every other column
    may hold anything), so a row that satisfies ``pred`` lies in a kept page of every judged
    column: the window runs from the latest first kept row to the earliest last one."""
    from ..skipping import file_keep_mask

    try:
        tail = storage.read_range(location, max(0, size - TAIL_READ), min(size, TAIL_READ))
        base = size - len(tail)
        n = int.from_bytes(tail[-8:-4], "little")
        if tail[-4:] != b"PAR1" or not 0 < n <= len(tail) - 8:
            return None  # an encrypted footer, or one larger than the tail
        meta = _Thrift(memoryview(tail), len(tail) - 8 - n).struct()
        leaves = _leaf_elements(meta.get(2) or [])
        groups = meta.get(4) or []
        if leaves is None or not groups:
            return None
        total = meta[3]
        offsets = np.cumsum([0] + [g[3] for g in groups])
        if offsets[-1] != total:
            return None
        lo, hi = 0, total
        seen = False
        for name, phys in sorted(judged.items()):
            element = leaves.get(phys)
            idx = logical.get_field_index(name)
            if element is None or idx < 0:
                continue
            typ = logical.field(idx).type
            pages = _pages(storage, location, tail, base, groups, phys, element, typ)
            if pages is None:
                continue
            starts, stops, mins, maxs, nulls = pages
            stats = pa.StructArray.from_arrays(
                [
                    pa.array(stops - starts, pa.int64()),
                    pa.StructArray.from_arrays([pa.array(mins, typ)], names=[name]),
                    pa.StructArray.from_arrays([pa.array(maxs, typ)], names=[name]),
                    pa.StructArray.from_arrays([pa.array(nulls, pa.int64())], names=[name]),
                ],
                names=["numRecords", "minValues", "maxValues", "nullCount"],
            )
            mask = file_keep_mask(pred, pa.table({"stats": stats}), logical, [])
            kept = np.flatnonzero(np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool))
            seen = True
            if len(kept) == 0:
                return RowWindow(0, 0, total, [], 0)
            lo, hi = max(lo, int(starts[kept[0]])), min(hi, int(stops[kept[-1]]))
        if not seen:
            return None
        if hi <= lo:  # no row is in a kept page of every judged column
            return RowWindow(0, 0, total, [], 0)
        rgs = [g for g in range(len(groups)) if offsets[g] < hi and offsets[g + 1] > lo]
        return RowWindow(lo, hi, total, rgs, int(offsets[rgs[0]]))
    except Exception:  # noqa: BLE001 - an unusual footer or index: the file is read whole
        return None


def _pages(
    storage: Storage,
    location: str,
    tail: bytes,
    base: int,
    groups: list[dict],
    phys: str,
    element: dict,
    typ: pa.DataType,
):
    """Per page of the column over all row groups: (start rows, stop rows, mins, maxs, null
    counts), or None when a row group has no usable index for it."""
    starts: list[int] = []
    stops: list[int] = []
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[Any] = []
    row = 0

    def index_bytes(offset: int, length: int) -> memoryview:
        if offset >= base and offset + length <= base + len(tail):
            return memoryview(tail)[offset - base : offset - base + length]
        return memoryview(storage.read_range(location, offset, length))

    for g in groups:
        chunk = next((c for c in g[1] if c.get(3, {}).get(3) == [phys.encode()]), None)
        if chunk is None or not all(k in chunk for k in (4, 5, 6, 7)):
            return None
        fmt = _bound_format(element, chunk[3][1], typ)
        if fmt is None:
            return None
        oi = _Thrift(index_bytes(chunk[4], chunk[5])).struct()
        ci = _Thrift(index_bytes(chunk[6], chunk[7])).struct()
        locs = oi[1]
        null_pages, lo_b, hi_b = ci[1], ci[2], ci[3]
        counts = ci.get(5)
        if not (len(locs) == len(null_pages) == len(lo_b) == len(hi_b)):
            return None
        if counts is not None and len(counts) != len(locs):
            return None
        rows = g[3]
        if not locs or locs[0][3] != 0:
            return None
        for k, loc in enumerate(locs):
            first = loc[3]
            last = locs[k + 1][3] if k + 1 < len(locs) else rows
            if not 0 <= first < last <= rows:
                return None
            starts.append(row + first)
            stops.append(row + last)
            if null_pages[k]:
                mins.append(None)
                maxs.append(None)
                nulls.append(last - first)
                continue
            mins.append(struct.unpack(fmt, lo_b[k])[0])
            maxs.append(struct.unpack(fmt, hi_b[k])[0])
            nulls.append(counts[k] if counts is not None else None)
        row += rows
    if pa.types.is_date32(typ):
        import datetime as dt

        epoch = dt.date(1970, 1, 1)
        mins = [None if v is None else epoch + dt.timedelta(days=v) for v in mins]
        maxs = [None if v is None else epoch + dt.timedelta(days=v) for v in maxs]
    return np.asarray(starts, np.int64), np.asarray(stops, np.int64), mins, maxs, nulls
