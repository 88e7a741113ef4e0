"""String columns read as dictionaries (see ``UnitReader._format``), turned back into strings.

pyarrow's cast of a dictionary to its values takes the values row by row (VarBinaryTakeExec,
~5-7 ns a row on a 3-value flag column). Low-cardinality columns are mostly codes of one width
(TPC-H l_returnflag, l_linestatus: one byte): their strings are the dictionary's bytes taken as
fixed-width values by the indices, and their offsets a fixed stride shared by every batch (~1 ns
a row on 131,072-row batches). Other dictionaries keep pyarrow's cast.
"""

from __future__ import annotations

import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..read_schema import cast_column
from .batches import MIN_BATCH_SIZE

#: Offsets of one stride are kept for batches of up to this many rows (4 bytes a row and stride).
KEPT_OFFSETS_ROWS = 1 << 20
#: Strides whose offsets are kept at once, the first kept going first when another is met: a
#: process reading tables whose codes have many widths kept a buffer per width it ever met
#: (512 KB to 4 MB each; 40 widths: 21 MB). One met again is made again (~0.1 ms a buffer).
KEPT_OFFSET_WIDTHS = 8

_offsets: dict[int, pa.Buffer] = {}  # stride -> int32 offsets 0, w, 2w, ... (immutable, shared)
_offsets_lock = threading.Lock()


def decoded(arr: pa.Array, typ: pa.DataType) -> pa.Array:
    """``arr`` as ``typ``: a dictionary array of strings whose values all have one byte width is
    gathered by pyarrow's take of fixed-width values, anything else cast by pyarrow
    (:func:`.read_schema.cast_column`)."""
    width = _one_width(arr, typ)
    if width is None:
        return cast_column(arr, typ)
    dictionary = arr.dictionary
    start = int(np.frombuffer(dictionary.buffers()[1], np.int32, 1, dictionary.offset * 4)[0])
    codes = pa.Array.from_buffers(
        pa.uint8() if width == 1 else pa.binary(width),
        len(dictionary),
        [None, dictionary.buffers()[2].slice(start, len(dictionary) * width)],
    )
    # a NULL row's index is not read (its bytes are zeros), so whatever it holds is harmless
    taken = pc.take(codes, arr.indices)
    validity, data = taken.buffers()[:2]
    n = len(taken)
    return pa.Array.from_buffers(
        pa.string(), n, [validity, _stride_offsets(width, n), data], taken.null_count
    )


def _one_width(arr: pa.Array, typ: pa.DataType) -> int | None:
    """The byte width all of ``arr``'s dictionary values have, when :func:`decoded` gathers them:
    string values without NULLs, a string result that fits int32 offsets."""
    if typ != pa.string() or not pa.types.is_dictionary(arr.type) or arr.type.value_type != pa.string():
        return None
    dictionary = arr.dictionary
    if len(dictionary) == 0 or dictionary.null_count:
        return None
    at = np.frombuffer(dictionary.buffers()[1], np.int32, len(dictionary) + 1, dictionary.offset * 4)
    widths = np.diff(at)
    width = int(widths[0])
    if width <= 0 or not (widths == width).all() or (len(arr) + 1) * width >= 2**31:
        return None
    return width


def _stride_offsets(width: int, n: int) -> pa.Buffer:
    """Offsets 0, width, 2 * width, ...: a buffer of at least n + 1 of them, in Arrow's memory
    (a buffer wrapping a Python object would take the GIL wherever DataFusion frees a batch)."""
    kept = _offsets.get(width)
    if kept is not None and kept.size >= (n + 1) * 4:
        return kept
    rows = max(n, MIN_BATCH_SIZE)
    buf = pa.allocate_buffer((rows + 1) * 4)
    np.multiply(np.arange(rows + 1, dtype=np.int32), width, out=np.frombuffer(buf, np.int32))
    if rows <= KEPT_OFFSETS_ROWS:
        with _offsets_lock:
            _offsets.pop(width, None)
            while len(_offsets) >= KEPT_OFFSET_WIDTHS:
                del _offsets[next(iter(_offsets))]
            _offsets[width] = buf
    return buf
