"""Typed partition values: Delta's string-serialized partition values -> Arrow columns.

Vectorized per partition column with Arrow casts. Empty strings and JSON nulls are null.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import as_array
from .errors import LogCorruptError, UnsupportedFeatureError

#: (version of a file action, its data file's location or None) -> the log file holding the
#: action, None when unknown: what errors name
LogFileOf = Callable[[int, str | None], str | None]


def map_to_struct(values: pa.Array, physical_names: list[str]) -> pa.StructArray:
    """Checkpoint ``partitionValues`` (map<string,string>) -> struct<physical name: string>."""
    values = as_array(values)
    n = len(values)
    uniform = _uniform_entries(values, physical_names)
    if uniform is not None:
        return pa.StructArray.from_arrays(uniform, names=physical_names)
    if pa.types.is_dictionary(values.keys.type) or pa.types.is_dictionary(values.items.type):
        # read as dictionaries (log/checkpoint.py dictionary_leaves): looked up as strings
        values = values.cast(pa.map_(_plain_type(values.keys.type), _plain_type(values.items.type)))
    children = []
    if n and physical_names:
        # One pass over the map entries instead of pc.map_lookup per column (about 50x faster on
        # 300k rows): entry -> owning row via the offsets, then the first match per row wins.
        offsets = values.offsets  # of this (possibly sliced) array, into the unsliced keys/items
        start, stop = offsets[0].as_py(), offsets[-1].as_py()
        keys = values.keys.slice(start, stop - start)
        items = values.items.slice(start, stop - start)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets.to_numpy(zero_copy_only=False)))
        valid = values.is_valid()
    for name in physical_names:
        if n == 0:
            children.append(pa.array([], pa.string()))
            continue
        hits = np.flatnonzero(pc.fill_null(pc.equal(keys, name), False).to_numpy(zero_copy_only=False))
        pos = np.full(n, -1, dtype=np.int64)
        pos[rows[hits][::-1]] = hits[::-1]  # reversed: the first entry of a row wins
        col = items.take(pa.array(pos, mask=pos < 0)).cast(pa.string())
        if values.null_count:
            col = pc.if_else(valid, col, pa.scalar(None, pa.string()))
        children.append(col)
    if not physical_names:
        return (
            pa.StructArray.from_arrays([], fields=[], mask=None)
            if n == 0
            else pa.array([{}] * n, pa.struct([]))
        )
    # a null map stays a null struct: the caller refuses it (partitionValues is required)
    mask = pc.invert(values.is_valid()) if values.null_count else None
    return pa.StructArray.from_arrays(children, names=physical_names, mask=mask)


def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _strings(t: pa.DataType) -> bool:
    """Strings, or a dictionary of strings."""
    return _plain_type(t) == pa.string()


def _uniform_entries(values: pa.MapArray, physical_names: list[str]) -> list[pa.Array] | None:
    """The value columns of maps that all hold the partition columns in the same order and nothing
    else (what writers write: Spark and deltalake), found without a key lookup per entry: with one
    partition column its values are the map's own (21k adds: ~0.5 -> ~0.1 ms). Keys and values may
    be dictionaries (decoded once here). None otherwise."""
    k, n = len(physical_names), len(values)
    if not (n and k) or values.null_count or not (_strings(values.keys.type) and _strings(values.items.type)):
        return None
    offsets = values.offsets.to_numpy(zero_copy_only=False)
    start = int(offsets[0])
    if int(offsets[-1]) - start != n * k or not (np.diff(offsets) == k).all():
        return None
    if not _keys_in_order(values.keys.slice(start, n * k), physical_names, n):
        return None
    items = values.items.slice(start, n * k)
    if pa.types.is_dictionary(items.type):
        items = items.dictionary.take(items.indices)
    if k == 1:
        return [items]
    return [items.take(pa.array(np.arange(i, n * k, k))) for i in range(k)]


def _keys_in_order(keys: pa.Array, physical_names: list[str], n: int) -> bool:
    """Whether ``keys`` are the names, in order, ``n`` times over (no null among them)."""
    k = len(physical_names)
    names = pa.array(physical_names, pa.string())
    if pa.types.is_dictionary(keys.type):  # compared by code: the name each code stands for
        position = pc.index_in(keys.dictionary, value_set=names).take(keys.indices)
        found = pc.fill_null(position, -1).to_numpy(zero_copy_only=False)
        return bool(np.array_equal(found, np.tile(np.arange(k), n)))
    pattern = names[0] if k == 1 else names.take(pa.array(np.tile(np.arange(k), n)))
    return bool(pc.all(pc.fill_null(pc.equal(keys, pattern), False)).as_py())


def parse_column(raw: pa.Array, target: pa.DataType, column: str) -> pa.Array:
    """Parse one partition column's serialized values into ``target``."""
    raw = raw.cast(pa.string()) if raw.type != pa.string() else raw
    raw = pc.if_else(pc.equal(raw, ""), pa.scalar(None, pa.string()), raw)
    try:
        parsed = _parse(raw, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        bad = _first_unparseable(raw, target)
        error: LogCorruptError | UnsupportedFeatureError
        if bad is not None and _far_year(bad, target):
            error = _beyond_python(column, bad, target)
        else:
            error = LogCorruptError(
                f"partition column {column!r}: value {bad!r} cannot be read as {target}: {str(e).splitlines()[0]}"
            )
        error.unparseable = bad  # type: ignore[union-attr]  # for the caller to find the file that holds it
        raise error from e
    if pa.types.is_date32(target) or pa.types.is_timestamp(target):
        # four-digit years parse from 0000 on; scan units hold values as Python's, from year 1
        first = pa.array([_YEAR_ONE], pa.int64()).cast(pa.timestamp("us")).cast(target)[0]
        early = pc.fill_null(pc.less(parsed, first), False)
        if pc.any(early).as_py():
            bad = raw[pc.index(early, True).as_py()].as_py()
            error = _beyond_python(column, bad, target)
            error.unparseable = bad  # type: ignore[attr-defined]
            raise error
    return parsed


#: 0001-01-01T00:00:00 in microseconds since the epoch: the first instant Python's dates hold
_YEAR_ONE = -62_135_596_800_000_000


def _beyond_python(column: str, value: str, target: pa.DataType) -> UnsupportedFeatureError:
    return UnsupportedFeatureError(
        f"partition column {column!r}: value {value!r} is a {target} beyond the years 1..9999, "
        "which this reader cannot hold partition values in"
    )


#: Dates and times beyond the years 0000..9999 as Spark and deltalake write them, with a sign or
#: more digits ("+10183-09-21", "-0221-09-04 19:33:20"): valid, but not Python dates
_FAR_DATE = re.compile(r"[+-]\d{4,}-\d{2}-\d{2}|\d{5,}-\d{2}-\d{2}")
_FAR_TIME = re.compile(r"([+-]\d{4,}|\d{5,})-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z?")


def _far_year(value: str, target: pa.DataType) -> bool:
    if pa.types.is_date(target):
        return _FAR_DATE.fullmatch(value) is not None
    return pa.types.is_timestamp(target) and _FAR_TIME.fullmatch(value) is not None


_OFFSET = r"[+-]\d{2}:?\d{2}$"


def _parse(raw: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_string(target):
        return raw
    if pa.types.is_binary(target):
        return raw.cast(pa.binary())
    if pa.types.is_timestamp(target):
        # Delta writes "yyyy-MM-dd HH:mm:ss[.SSSSSS]" (UTC) or ISO-8601 with a trailing Z; some
        # writers keep a zone offset ("...T01:00:00+01:00"), which a zoned column converts to UTC
        naive = pc.replace_substring_regex(raw, r"Z$", "")
        with_offset = pc.fill_null(pc.match_substring_regex(naive, _OFFSET), False)
        if target.tz and pc.any(with_offset).as_py():
            utc = pc.if_else(with_offset, naive, pa.scalar(None, pa.string())).cast(pa.timestamp("us", "UTC"))
            plain = pc.if_else(with_offset, pa.scalar(None, pa.string()), naive).cast(pa.timestamp("us"))
            return pc.if_else(with_offset, utc, plain.cast(pa.timestamp("us", "UTC"))).cast(target)
        parsed = naive.cast(pa.timestamp("us"))
        return parsed.cast(target) if target.tz else parsed
    if pa.types.is_boolean(target):
        lowered = pc.utf8_lower(raw)
        return lowered.cast(pa.bool_())
    if pa.types.is_null(target):
        return pa.nulls(len(raw))
    return raw.cast(target)


#: A failing part of at most this many values is searched one value at a time.
ROW_BY_ROW_MAX = 16


def _fails(raw: pa.Array, target: pa.DataType) -> bool:
    try:
        _parse(raw, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return True
    return False


def _first_unparseable(raw: pa.Array, target: pa.DataType) -> str | None:
    """The first value (in order) that ``target`` refuses. The failing batch is halved (the first
    half that fails holds it) instead of parsing every value alone: one bad value after 1,000,000
    good ones took 8 s (int64) to 42 s (timestamps) to name."""
    while len(raw) > ROW_BY_ROW_MAX:
        half = len(raw) // 2
        head, tail = raw.slice(0, half), raw.slice(half)
        if _fails(head, target):
            raw = head
        elif _fails(tail, target):
            raw = tail
        else:  # neither half fails alone: search the whole part value by value
            break
    for v in raw.to_pylist():
        if v is not None and _fails(pa.array([v], pa.string()), target):
            return v
    return None


def typed_partition_values(
    raw: pa.StructArray | None, physical: list[str], logical_fields: list[pa.Field], num_rows: int
) -> pa.StructArray:
    """struct<physical: string> -> struct<logical: typed>."""
    if not logical_fields:
        return pa.array([{}] * num_rows, pa.struct([])) if num_rows else pa.array([], pa.struct([]))
    children = []
    for phys, f in zip(physical, logical_fields, strict=True):
        if raw is None:
            children.append(pa.nulls(num_rows, f.type))
            continue
        col = (
            pc.struct_field(raw, phys)
            if raw.type.get_field_index(phys) >= 0
            else pa.nulls(num_rows, pa.string())
        )
        col = as_array(col)
        try:
            children.append(parse_column(col, f.type, f.name))
        except (LogCorruptError, UnsupportedFeatureError) as e:
            bad = getattr(e, "unparseable", None)
            e.row = None if bad is None else pc.index(col, pa.scalar(bad, col.type)).as_py()
            raise
    return pa.StructArray.from_arrays(children, fields=[pa.field(f.name, f.type) for f in logical_fields])


def typed_partition_column(
    raw: pa.Table,
    physical: list[str],
    logical_fields: list[pa.Field],
    where: str,
    log_file: LogFileOf | None = None,
) -> pa.StructArray:
    """Typed partition values of flat raw file actions (their ``partitionValues`` column); a
    value that cannot be typed is reported with ``where`` (which table, which version), the data
    file and the version of its action, and the log file holding that action (``log_file``, asked
    on the error path only)."""
    n = raw.num_rows
    if physical and n and raw.column("partitionValues").null_count:
        # required on add and cdc actions: read as NULLs, the file's rows would lose their values
        row = pc.index(raw.column("partitionValues").is_null(), True).as_py()
        raise LogCorruptError(
            f"{where}: {_action_at(raw, row, log_file)} has no partitionValues (a required field)"
        )
    try:
        return typed_partition_values(
            as_array(raw.column("partitionValues")) if n else None, physical, logical_fields, n
        )
    except (LogCorruptError, UnsupportedFeatureError) as e:
        row = getattr(e, "row", None)
        if row is None or row < 0 or "path" not in raw.column_names:
            raise type(e)(f"{where}: {e}") from e
        raise type(e)(f"{where}: {e} ({_action_at(raw, row, log_file)})") from e


def _action_at(raw: pa.Table, row: int, log_file: LogFileOf | None) -> str:
    """'data file <path> of version <v> in <log file>': which action of ``raw`` is at ``row``."""
    names = [c for c in ("path", "location", "version") if c in raw.column_names]
    action = raw.slice(row, 1).select(names).to_pylist()[0]
    out = f"data file {action.get('path', '?')}"
    version = action.get("version")
    if version is None:
        return out
    source = log_file(version, action.get("location")) if log_file is not None else None
    return f"{out} of version {version}" + (f" in {source}" if source else "")
