"""Parquet footer statistics of data files the log gives no statistics for (change data files,
removes without stats): min, max and null count per top-level column, cached per file (data files
never change), read on threads for remote stores. Change-feed planning prunes with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..lru import LruCache
from ..storage import Storage


@dataclass(frozen=True)
class FooterStats:
    """Min, max and null count per top-level column (physical names) of one parquet file.

    ``covered`` lists the columns looked at (a column in ``covered`` but not in ``columns`` has no
    usable statistics)."""

    num_rows: int
    columns: dict[str, tuple[Any, Any, int | None]]
    covered: frozenset[str] = frozenset()
    #: the parquet field ids of the covered columns that have one (column mapping id mode finds
    #: columns by them); None when not looked at
    ids: dict[str, str] | None = None


FOOTER_CACHE_SIZE = 65536
_FOOTERS: LruCache[FooterStats | None] = LruCache(FOOTER_CACHE_SIZE)
_UNSEEN = object()
_FOOTER_PHYSICAL = {"INT32", "INT64", "FLOAT", "DOUBLE", "BYTE_ARRAY"}

try:  # FileMetaData's unpickler: parses serialized footer bytes (see _parsed_footer)
    from pyarrow._parquet import _reconstruct_filemetadata as _parse_footer
except ImportError:  # pragma: no cover - another pyarrow layout: the reader is used
    _parse_footer = None


#: Bytes read from a file's end for its footer in one request, as pyarrow's reader does: the
#: footer of a change-data file (~2 KB) and of most data files fits.
FOOTER_READ = 64 * 1024
#: ... from a local file, where a second read for a larger footer costs a system call, not a
#: round trip: copying 64 KB took longer than the read (the cdf benchmark's 204 change-data
#: footers, ~1.8 KB each: 9.4-14 -> 6.6-7.1 us a tail)
LOCAL_FOOTER_READ = 16 * 1024


def _parsed_footer(storage: Storage, location: str, size: int | None) -> Any:
    """The ``pq.FileMetaData`` of a file whose size the log gives, parsed from its last bytes.

    ``pq.ParquetReader().open`` also builds an Arrow reader (its schema manifest) that planning
    never uses: parsing the footer alone costs about a third less CPU (204 change-data footers
    of the cdf benchmark: 7.8 -> 5.1 ms). pyarrow exposes that parse only as the unpickler of
    ``FileMetaData``; where it is missing or fails, the store refuses the tail's range, or the
    file does not end with a plain footer (an encrypted footer, a size the log got wrong), the
    reader opens the file as before.
    """
    import pyarrow.parquet as pq

    if size and size > 12 and _parse_footer is not None:
        try:
            md = _tail_footer(storage, location, size)
        except Exception:  # noqa: BLE001 - a range refused, a private function: the reader decides
            md = None
        if md is not None:
            return md
    # the reader under pq.read_metadata, without its Python wrapper: 0.19 -> 0.11 ms per file
    reader = pq.ParquetReader()
    with storage.arrow_fs.open_input_file(location) as f:
        reader.open(f)
        return reader.metadata


def _tail_footer(storage: Storage, location: str, size: int) -> Any:
    """The footer parsed from the file's last bytes; None when they do not end with a plain one."""
    first = LOCAL_FOOTER_READ if storage.is_local else FOOTER_READ
    tail = storage.read_range(location, max(0, size - first), min(size, first))
    n = int.from_bytes(tail[-8:-4], "little")
    if len(tail) != min(size, first) or tail[-4:] != b"PAR1" or not 0 < n <= size - 12:
        return None
    if n + 8 > len(tail):  # a wide table's footer: one more read, of exactly the rest
        tail = storage.read_range(location, size - 8 - n, n) + tail[-8:]
    return _parse_footer(pa.py_buffer(tail[len(tail) - 8 - n : -8]))


def read_footer(
    storage: Storage, location: str, wanted: frozenset[str], size: int | None = None, ids: bool = False
) -> FooterStats | None:
    """Statistics of the ``wanted`` top-level columns, merged over the file's row groups
    (``size``: the file's size in the log; ``ids``: their field ids too, see :class:`FooterStats`)."""
    try:
        md = _parsed_footer(storage, location, size)
    except Exception:  # noqa: BLE001 - unreadable footer: no statistics (the read reports errors)
        return None
    cols: dict[str, tuple[Any, Any, int | None]] = {}
    schema = md.schema
    # schema.names makes a column object per column: asked once, not per wanted column (the
    # statistics of 204 change-data footers: 5.0 -> 2.5 ms)
    for j, name in enumerate(schema.names):
        if name not in wanted or schema.column(j).path != name:
            continue
        merged = None
        for g in range(md.num_row_groups):
            c = md.row_group(g).column(j)
            physical = c.physical_type
            st = c.statistics
            if physical not in _FOOTER_PHYSICAL or st is None or not st.has_min_max:
                merged = None
                break
            if physical == "BYTE_ARRAY" and str(st.logical_type) != "String":
                merged = None
                break
            lo, hi = st.min, st.max
            nulls = st.null_count if st.has_null_count else None
            if merged is not None:
                try:
                    lo, hi = min(merged[0], lo), max(merged[1], hi)
                except TypeError:
                    merged = None
                    break
                nulls = None if merged[2] is None or nulls is None else merged[2] + nulls
            merged = (lo, hi, nulls)
        if merged is not None:
            cols[name] = merged
    return FooterStats(md.num_rows, cols, wanted, _field_ids(schema, wanted) if ids else None)


def stores_column(storage: Storage, location: str, size: int | None, name: str) -> bool | None:
    """Whether the file stores ``name`` as a top-level column; None when its footer cannot be
    read (the read reports that). For the rare file whose footer gives no statistics of it."""
    try:
        md = _parsed_footer(storage, location, size)
    except Exception:  # noqa: BLE001 - the read reports an unreadable file
        return None
    schema = md.schema
    return any(n == name and schema.column(j).path == name for j, n in enumerate(schema.names))


def _field_ids(schema: Any, wanted: frozenset[str]) -> dict[str, str]:
    """The parquet field ids of the ``wanted`` top-level columns of a footer's schema."""
    out = {}
    for f in schema.to_arrow_schema():
        fid = (f.metadata or {}).get(b"PARQUET:field_id")
        if f.name in wanted and fid is not None:
            out[f.name] = fid.decode()
    return out


def footer_stats(
    storage: Storage, files: Sequence[tuple[str, int]], wanted: set[str], ids: bool = False
) -> list[FooterStats | None]:
    """Footer statistics of the ``wanted`` columns of ``(location, size)`` files (cached per file;
    data files never change), with their field ids when ``ids``. On remote stores, footers not
    cached yet are read on threads."""
    out: list[FooterStats | None] = [None] * len(files)
    want = frozenset(wanted)
    todo: list[tuple[int, frozenset[str]]] = []
    for k, key in enumerate(files):
        hit = _FOOTERS.get(key, _UNSEEN)
        if hit is _UNSEEN:
            todo.append((k, want))
        elif hit is None or (want <= hit.covered and (not ids or hit.ids is not None)):
            out[k] = hit
        else:
            todo.append((k, want | hit.covered))
    if not todo:
        return out
    storage.note_sizes(files)

    def one(item: tuple[int, frozenset[str]]) -> FooterStats | None:
        location, size = files[item[0]]
        return read_footer(storage, location, item[1], size, ids)

    # Local footers are read one after another on the caller's thread. The parse holds the GIL
    # (pyarrow 26's _reconstruct_filemetadata has no nogil section), so threads only add hand-offs
    # (the cdf benchmark's 204 change-data footers, one task each: 5.3 -> 7-11 ms). pyarrow's own
    # reads release it but cost more CPU a footer than the tail read and parse here (~25 us):
    # ParquetReader.open ~39 us, a dataset fragment's ensure_complete_metadata ~47 us, and a
    # dataset count_rows that reads every fragment's footer on pyarrow's IO threads ~95 us. The
    # scan reads a kept file's footer again: make_fragment takes no FileMetaData.
    if len(todo) > 1 and not storage.is_local:  # remote stores: overlap the round trips
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(16, len(todo))) as pool:  # as many as commits (read_commits)
            got = list(pool.map(one, todo))
    else:
        got = [one(t) for t in todo]
    for (k, _), info in zip(todo, got, strict=True):
        out[k] = info
    _FOOTERS.put_many((files[k], info) for (k, _), info in zip(todo, got, strict=True))
    return out


def footer_type_ok(t: pa.DataType) -> bool:
    return (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date32(t)
        or pa.types.is_timestamp(t)
    )


def typed_values(values: list[Any], typ: pa.DataType) -> pa.Array:
    """Python footer values -> an array of ``typ`` (nulls where they do not convert)."""
    try:
        return pa.array(values, typ)
    except (
        pa.ArrowInvalid,
        pa.ArrowTypeError,
        pa.ArrowNotImplementedError,
        TypeError,
        ValueError,
        OverflowError,
    ):
        out = []
        for v in values:
            try:
                out.append(pa.scalar(v, typ).as_py())
            except Exception:  # noqa: BLE001
                out.append(None)
        try:
            return pa.array(out, typ)
        except Exception:  # noqa: BLE001
            return pa.nulls(len(values), typ)


def clear_footer_cache() -> None:
    _FOOTERS.clear()
