"""Per-file statistics: ``add.stats`` JSON (or checkpoint ``stats_parsed``) -> typed Arrow structs.

All stats strings of a batch are joined into one NDJSON buffer and parsed by ``pyarrow.json``
with a schema derived from the table schema, so parsing costs no Python per file. Stats that
cannot be parsed (garbage, NaN literals, wrong types) become null, which the skipping code
treats as "unknown": never a reason to drop a file.
"""

from __future__ import annotations

import collections
import io
import json
from collections.abc import Collection
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson

from .arrays import as_array
from .log.actions import read_ndjson
from .protocol import Metadata
from .schema import relabel, stats_schemas
from .strings import any_contains_byte, string_bytes


def _json_parse_type(t: pa.DataType) -> pa.DataType:
    """pyarrow.json cannot read dates from strings; parse them as strings and cast after."""
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _json_parse_type(f.type)) for f in t])
    if pa.types.is_date(t):
        return pa.string()
    return t


def stats_types(md: Metadata, columns: Collection[str] | None = None) -> tuple[pa.DataType, pa.DataType]:
    """(physical, logical) Arrow types of the stats struct: every column's bounds, or only those
    of the top-level ``columns`` (logical names; planning types just what a predicate reads)."""
    schema_json = md.schema_json
    if columns is not None:
        wanted = set(columns)
        schema_json = {
            **schema_json,
            "fields": [f for f in schema_json.get("fields", []) if f["name"] in wanted],
        }
    mm_p, nc_p, mm_l, nc_l = stats_schemas(schema_json, md.column_mapping_mode, list(md.partition_columns))

    def full(mm: pa.DataType, nc: pa.DataType) -> pa.DataType:
        fields = [("numRecords", pa.int64())]
        # With a column subset, structs left empty are omitted (empty structs lose their length
        # in Arrow); skipping reads an absent field as "unknown".
        if columns is None or mm.num_fields:
            fields += [("minValues", mm), ("maxValues", mm)]
        if columns is None or nc.num_fields:
            fields.append(("nullCount", nc))
        fields.append(("tightBounds", pa.bool_()))
        return pa.struct(fields)

    return full(mm_p, nc_p), full(mm_l, nc_l)


def _cast_from_parse(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast the parse-typed array to the target type; unparseable leaves become null."""
    if pa.types.is_struct(target):
        if not pa.types.is_struct(arr.type):  # bounds of another kind (a column retyped since)
            return pa.nulls(len(arr), target)
        # children by position, flattened once (each by-name lookup scans the fields: quadratic in
        # the column count, 2,000 columns took seconds); a name given twice is unknown
        names = [f.name for f in arr.type]
        counts = collections.Counter(names)
        flat = {n: c for n, c in zip(names, arr.flatten(), strict=True) if counts[n] == 1}
        children: list[pa.Array | None] = []
        # date strings and decimals of one type are converted together, in one pyarrow call per
        # type: a wide table's thousands of such columns cost a few calls, not a few each
        together: dict[tuple[pa.DataType, pa.DataType], list[int]] = {}
        for f in target:
            child, typ = flat.get(f.name), f.type
            if child is None:
                children.append(_cast_from_parse(pa.nulls(len(arr), typ), typ))
            elif typ.id not in _CONVERTED_IDS and child.type == typ:
                children.append(child)  # what the call would return, without the call
            elif _converted_together(child.type, typ):
                together.setdefault((child.type, typ), []).append(len(children))
                children.append(child)
            else:
                children.append(_cast_from_parse(child, typ))
        for (_, typ), positions in together.items():
            done = _cast_leaves([children[i] for i in positions], typ)
            for i, a in zip(positions, done, strict=True):
                children[i] = a
        # no null object: no mask to compute (two compute calls a struct, every query's stats);
        # a struct without children takes its length from its mask
        mask = pc.invert(arr.is_valid()) if arr.null_count or not children else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    try:
        return _cast_leaf(arr, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return pa.nulls(len(arr), target)


_STRING_IDS = frozenset(t.id for t in (pa.string(), pa.large_string()))
_DATE_IDS = frozenset(t.id for t in (pa.date32(), pa.date64()))
_DECIMAL_IDS = frozenset(t(1, 0).id for t in (pa.decimal32, pa.decimal64, pa.decimal128, pa.decimal256))
#: target types whose values :func:`_cast_from_parse` changes even from the same type
_CONVERTED_IDS = _DECIMAL_IDS | {pa.struct([]).id}


def _converted_together(stored: pa.DataType, target: pa.DataType) -> bool:
    """Leaves :func:`_cast_leaves` converts as one array: dates parsed from strings, and
    decimals checked against their precision."""
    if target.id in _DATE_IDS:
        return stored.id in _STRING_IDS
    return target.id in _DECIMAL_IDS and stored == target


def _cast_leaf(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """A leaf of the parse type as ``target``; raises what pyarrow's cast raises."""
    if arr.type == target:
        return _within_precision(arr) if pa.types.is_decimal(target) else arr
    if pa.types.is_date(target) and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        return pc.strptime(arr, format="%Y-%m-%d", unit="s", error_is_null=True).cast(pa.date32())
    return arr.cast(target)


def _cast_leaves(arrays: list[pa.Array], target: pa.DataType) -> list[pa.Array]:
    """:func:`_cast_from_parse` of each of ``arrays`` (of one type and length, every value
    converted on its own), done on them joined: one pyarrow call instead of one per column."""
    if len(arrays) == 1:
        return [_cast_from_parse(arrays[0], target)]
    try:  # joining fails too past 2 GiB of strings (int32 offsets): then each alone as well
        whole = pa.concat_arrays(arrays)
        done = _cast_leaf(whole, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return [_cast_from_parse(a, target) for a in arrays]  # which of them fails: each alone
    if done is whole:
        return arrays
    n = len(arrays[0])
    # each its own copy (2 us a column): a slice carries the joined array, which a pickle (a
    # remote executor's results) then holds once per column
    return [pa.concat_arrays([done.slice(k * n, n)]) for k in range(len(arrays))]


def _within_precision(arr: pa.Array) -> pa.Array:
    """Decimal bounds with more digits than their type holds become null: pyarrow's JSON reader
    keeps them (deltalake logs a decimal(38,10) maximum as the double 1e+28, 39 digits) and an
    array holding them fails validation and conversion."""
    t = arr.type
    if arr.null_count == len(arr):
        return arr
    wide = pa.decimal256(76, t.scale)
    limit = pa.scalar(Decimal(10) ** (t.precision - t.scale), wide)
    fits = pc.less(pc.abs(arr.cast(wide)), limit)
    if pc.all(pc.fill_null(fits, True)).as_py():
        return arr
    return pc.if_else(fits, arr, pa.scalar(None, t))


def parse_stats_json(stats: pa.Array, physical_type: pa.DataType) -> pa.StructArray:
    """Parse a string array of stats JSON into ``physical_type`` (nulls where absent/garbage)."""
    n = len(stats)
    if n == 0:
        return pa.array([], physical_type)
    stats = as_array(stats)
    if stats.null_count:
        # Parse only the rows that have stats, then scatter back (nulls elsewhere).
        valid = stats.is_valid()
        n_valid = len(stats) - stats.null_count
        if n_valid == 0:
            return pa.nulls(n, physical_type)
        parsed = parse_stats_json(stats.filter(valid), physical_type)
        positions = pc.subtract(pc.cumulative_sum(valid.cast(pa.int64())), 1)
        take_idx = pc.if_else(valid, positions, pa.scalar(None, pa.int64()))
        return parsed.take(take_idx)
    parse_type = _json_parse_type(physical_type)
    return _cast_from_parse(_parse_objects(stats, parse_type), physical_type)


#: A batch of stats strings whose parse fails is halved until the failing parts have at most this
#: many rows, which are parsed one by one: one bad string in 100,000 cost 24 s when the whole
#: batch went row by row.
ROW_BY_ROW_MAX = 16


def _parse_objects(stats: pa.Array, parse_type: pa.DataType) -> pa.StructArray:
    """Non-null stats strings parsed as one NDJSON buffer; a batch that fails is split in halves
    (the good halves stay one parse each) down to :data:`ROW_BY_ROW_MAX` rows."""
    n = len(stats)
    try:
        # each stats object is the value of one NDJSON line of its own (see _wrapped_lines)
        if not pc.all(pc.starts_with(stats, "{")).as_py():
            raise ValueError("a stats value that is not a JSON object")  # parsed row by row below
        schema = pa.schema([pa.field(WRAPPED_FIELD, parse_type)])
        table = read_ndjson(_wrapped_lines(stats), schema, objects_only=True)
        if table.num_rows != n:
            raise ValueError("row count mismatch")
        parsed = table.column(WRAPPED_FIELD).combine_chunks()
        return pa.StructArray.from_arrays(parsed.flatten(), fields=list(parse_type))
    except (pa.ArrowInvalid, ValueError):
        finite = _non_finite_as_null(stats)
        if finite is not None:  # parsed again whole: a table with NaN in every file stays one parse
            return _parse_objects(finite, parse_type)
        if n <= ROW_BY_ROW_MAX:
            return _parse_rows_individually(stats, parse_type)
        half = n // 2
        parts = [
            _parse_objects(stats.slice(0, half), parse_type),
            _parse_objects(stats.slice(half), parse_type),
        ]
        return pa.concat_arrays(parts)


#: A value ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (colon first: a key or a string's inside
#: has none before its opening quote, and a string's own quotes are escaped): how Spark (Jackson)
#: and the Java kernel write a float column's non-finite bounds (Spark's max of a column holding
#: NaN is NaN). pyarrow reads no float from a string, and the whole object was dropped with it
#: (numRecords, null counts, every other column's bounds).
_NON_FINITE_VALUE = r':(\s*)"(?:NaN|-?Infinity)"'


def _non_finite_as_null(stats: pa.Array) -> pa.Array | None:
    """``stats`` with non-finite bounds written as strings read as null (unknown, as NaN bounds are
    anyway; a string column's bound equal to such a text is unknown too); None when none is."""
    if not pc.any(pc.match_substring_regex(stats, _NON_FINITE_VALUE)).as_py():
        return None
    return pc.replace_substring_regex(stats, _NON_FINITE_VALUE, r":\1null")


#: Each stats string is parsed as the value of this field of a line of its own (in a batch
#: and row by row alike).
WRAPPED_FIELD = "s"
_WRAP_OPEN = "{" + f'"{WRAPPED_FIELD}":'
_WRAP_SEPARATOR = "}\n" + _WRAP_OPEN


def _wrapped_lines(strings: pa.Array) -> pa.Buffer:
    """The strings as one NDJSON buffer of lines ``{"s":<string>}`` (newlines inside them become
    spaces), built with one copy: the strings, an empty one before and after, joined as the one
    list of a list array, the separator's halves at the ends cut off.

    Stats are joined to their files by position, so a string that is not one whole object must
    fail the parse (then parsed row by row: garbage is null) rather than shift the objects after
    it onto other files. Joined as plain lines, half an object in one string and its rest in the
    next parsed as one object, two objects in one string as two, and with both in a batch the
    count still matched. As a line's value, every string opens an object of its own at the top
    level, which must close before the next line's begins (an unclosed one leaves ``}`` followed
    by ``{``: invalid), so a parse that succeeds has read one object a string, in order."""
    if any_contains_byte(strings, ord("\n")):
        strings = pc.replace_substring(strings, "\n", " ")
    if not (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)):
        strings = strings.cast(pa.large_string())
    offsets, _ = string_bytes(strings)
    framed_offsets = np.concatenate([offsets[:1], offsets, offsets[-1:]])
    framed = pa.Array.from_buffers(
        strings.type, len(strings) + 2, [None, pa.py_buffer(framed_offsets), strings.buffers()[2]]
    )
    whole = pa.ListArray.from_arrays(pa.array([0, len(framed)], pa.int32()), framed)
    joined = pc.binary_join(whole, pa.scalar(_WRAP_SEPARATOR, strings.type))
    offsets, _ = string_bytes(joined)
    # cut: '}\n' before the first line, '\n{"s":' after the last
    start, end = int(offsets[0]) + 2, int(offsets[-1]) - (len(_WRAP_SEPARATOR) - 1)
    return joined.buffers()[2].slice(start, end - start)


def _parse_rows_individually(stats: pa.Array, parse_type: pa.DataType) -> pa.Array:
    """Slow path for batches containing malformed stats: parse each row, garbage -> null. Rows
    stay Arrow arrays (a round trip through Python objects fails on a decimal that pyarrow's
    JSON reader parsed beyond its type's precision)."""
    schema = pa.schema([pa.field(WRAPPED_FIELD, parse_type)])
    opts = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    missing = pa.nulls(1, parse_type)
    out = []
    for s in stats.to_pylist():
        value = missing
        if s is not None:
            try:
                obj = json.loads(s)
                if isinstance(obj, dict):
                    value = _parse_one(s, obj, opts)
            except (ValueError, RecursionError, pa.ArrowInvalid):
                value = missing
        out.append(value)
    return pa.concat_arrays(out)


def _parse_one(text: str, obj: dict, opts: pajson.ParseOptions) -> pa.Array:
    """One stats object (valid JSON) as a one-row array: from its own text, so that numbers keep
    every digit (through Python a decimal bound became a float: 1.12345678901234567891 read
    as 1.1234567890123457), else from Python's reading of it (e.g. a key given twice)."""

    def row(line: str) -> pa.Array:
        return (
            pajson.read_json(io.BytesIO(line.encode()), parse_options=opts)
            .column(WRAPPED_FIELD)
            .combine_chunks()
        )

    try:  # newlines outside strings (valid JSON has no others) are whitespace
        return row(_WRAP_OPEN + text.replace("\r", " ").replace("\n", " ") + "}")
    except pa.ArrowInvalid:
        return row(json.dumps({WRAPPED_FIELD: obj}))


def coerce_parsed(stats_parsed: pa.Array, physical_type: pa.DataType) -> pa.StructArray:
    """Checkpoint ``stats_parsed`` cast field by field onto the current stats type."""
    return _cast_from_parse(as_array(stats_parsed), physical_type)


def typed_stats(
    md: Metadata,
    stats: pa.Array | None,
    stats_parsed: pa.Array | None,
    num_rows: int,
    columns: Collection[str] | None = None,
    forget: Collection[tuple[str, ...]] = (),
) -> pa.StructArray:
    """Stats struct with logical names: from ``stats_parsed`` where present, else the JSON.

    ``columns``: type only these top-level columns' bounds (all when None). ``forget``: column
    paths whose bounds are dropped, besides the widened ones (see :func:`widened_columns`)."""
    physical, logical = stats_types(md, columns)
    if stats is None and stats_parsed is None:
        result = pa.nulls(num_rows, physical)
    elif stats_parsed is None:
        result = parse_stats_json(stats, physical)
    else:
        from_struct = coerce_parsed(stats_parsed, physical)
        if stats is None:
            result = from_struct
        else:
            use_json = pc.and_(pc.invert(stats_parsed.is_valid()), stats.is_valid())
            if pc.any(use_json).as_py():
                from_json = parse_stats_json(
                    pc.if_else(use_json, stats, pa.scalar(None, pa.string())), physical
                )
                result = pc.if_else(use_json, from_json, from_struct)
            else:
                result = from_struct
    result = relabel(as_array(result), logical)
    widened = widened_columns(md.schema_json) | set(forget)
    return _forget_bounds(result, widened) if widened else result


#: Delta types whose statistics, read as any type they may widen to, are the widened values
#: exactly: integers (as integers, doubles or decimals), decimals (more digits or scale) and
#: dates (midnight of a timestamp_ntz)
_EXACT_WIDENING_SOURCES = ("byte", "short", "integer", "long", "date")


def bounds_survive_widening(old: str | pa.DataType) -> bool:
    """Whether min/max written for a column of type ``old`` bound its values once widened."""
    if isinstance(old, pa.DataType):
        return pa.types.is_integer(old) or pa.types.is_decimal(old) or pa.types.is_date32(old)
    return isinstance(old, str) and (old in _EXACT_WIDENING_SOURCES or old.startswith("decimal("))


def _changes_bounds(changes: Any) -> bool:
    """Whether a ``delta.typeChanges`` list makes older files' bounds unusable: a change of the
    field itself from a type whose printed bounds are not the widened values (a float 3.4 is
    3.4000000953674316 read as double), or an entry this reader cannot judge. Changes of array
    elements or map keys/values (``fieldPath``) leave the field's own bounds alone (it has none)."""
    if not isinstance(changes, list):
        return True
    for change in changes:
        if not isinstance(change, dict):
            return True
        if change.get("fieldPath"):
            continue
        if not bounds_survive_widening(change.get("fromType")):
            return True
    return False


def widened_columns(schema_json: dict) -> set[tuple[str, ...]]:
    """Paths of columns widened (``delta.typeChanges``) from a type whose bounds do not carry
    over: files written before the change keep their min/max printed in the old type's shortest
    form, so for a float those are not bounds of the widened doubles; they are dropped and
    pruning keeps such files. Integer, decimal and date bounds are exact in the new type.
    """
    out: set[tuple[str, ...]] = set()

    def walk(fields: list[dict], prefix: tuple[str, ...]) -> None:
        for f in fields:
            path = prefix + (f["name"],)
            changes = (f.get("metadata") or {}).get("delta.typeChanges")
            if changes and _changes_bounds(changes):
                out.add(path)
            t = f.get("type")
            if isinstance(t, dict) and t.get("type") == "struct":
                walk(t["fields"], path)

    walk(schema_json.get("fields", []), ())
    return out


def _forget_bounds(stats: pa.StructArray, paths: set[tuple[str, ...]]) -> pa.StructArray:
    def drop(arr: pa.StructArray, prefix: tuple[str, ...]) -> pa.StructArray:
        kids, changed = [], False
        for i, f in enumerate(arr.type):
            child = original = arr.field(i)
            path = prefix + (f.name,)
            if path in paths:
                child = pa.nulls(len(arr), f.type)
            elif pa.types.is_struct(f.type):
                child = drop(child, path)
            changed = changed or child is not original
            kids.append(child)
        if not changed:  # also a struct without fields, which from_arrays would rebuild with no rows
            return arr
        return pa.StructArray.from_arrays(
            kids, fields=list(arr.type), mask=pc.invert(arr.is_valid()) if arr.null_count else None
        )

    kids = []
    for i, f in enumerate(stats.type):
        child = stats.field(i)
        if f.name in ("minValues", "maxValues") and pa.types.is_struct(f.type):
            child = drop(child, ())
        kids.append(child)
    return pa.StructArray.from_arrays(
        kids, fields=list(stats.type), mask=pc.invert(stats.is_valid()) if stats.null_count else None
    )
