"""Delta schema JSON <-> Arrow, column mapping, and the typed schemas derived from a table schema.

A Delta schema is kept as its parsed JSON (plain dicts) and converted on demand to:
- the *logical* Arrow schema (user-facing names, what SQL sees),
- the *physical* Arrow schema (names as stored in parquet under column mapping),
- the stats schema used to parse ``add.stats`` JSON (physical names, leaves only).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from .errors import SchemaError, UnsupportedFeatureError

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
FIELD_ID_KEY = "delta.columnMapping.id"
PARQUET_FIELD_ID = b"PARQUET:field_id"
_FIELD_ID_TEXT = PARQUET_FIELD_ID.decode()

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "void": pa.null(),
}
_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
VARIANT_TYPE = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])


def parse_schema_string(
    schema_string: str | None, where: str, known: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Parse ``metaData.schemaString``; ``where`` names the log file for errors. ``known``: the
    fields of a schema this function accepted; when the schema starts with them (see
    :func:`known_prefix`), only the fields after them are checked again (those of the top level
    are still unique)."""
    if not schema_string:
        raise SchemaError(f"{where}: metaData has no schemaString")
    if not isinstance(schema_string, str):
        raise SchemaError(
            f"{where}: metaData.schemaString is not a string: {json.dumps(schema_string)[:120]}"
        )
    try:
        schema = json.loads(schema_string)
    except (ValueError, RecursionError) as e:
        raise SchemaError(f"{where}: schemaString is not valid JSON: {e}") from e
    if not isinstance(schema, dict) or schema.get("type") != "struct" or "fields" not in schema:
        raise SchemaError(f"{where}: schemaString is not a struct type")
    skip = known_prefix(schema["fields"], known)
    _check_field_shapes(schema, where, skip=skip)
    _check_unique_names(schema, where, skip)
    return schema


def known_prefix(fields: Any, known: list[dict[str, Any]] | None) -> int:
    """``len(known)`` when ``fields`` starts with fields equal to ``known``, else 0. Checks that
    pass for a field pass for an equal one: a schema that appends columns to one already checked
    (each commit of a schema-merging writer) checks only those (a range of 1,000 such commits
    checked 500,000 fields)."""
    if not known or not isinstance(fields, list) or len(fields) < len(known):
        return 0
    return len(known) if fields[: len(known)] == known else 0


def _encodable(text: str) -> bool:
    """UTF-8 encodable (JSON's ``\\ud800`` escapes decode to lone surrogates, which are not)."""
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _check_field_shapes(dtype: Any, where: str, path: tuple[str, ...] = (), skip: int = 0) -> None:
    """Every struct's ``fields`` is a list of objects with a string ``name`` and a ``type``
    (``skip``: top-level fields known to be; see :func:`known_prefix`)."""
    if not isinstance(dtype, dict):
        return
    at = ".".join(path) or "the top level"
    kind = dtype.get("type")
    if kind == "struct":
        fields = dtype.get("fields")
        if not isinstance(fields, list):
            raise SchemaError(f"{where}: schemaString: the fields of the struct at {at} are not a list")
        for f in itertools.islice(fields, skip, None):
            if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
                raise SchemaError(
                    f"{where}: schemaString: a field of the struct at {at} is not an object with a string "
                    f"name and a type: {json.dumps(f)[:120]}"
                )
            md = f.get("metadata")
            physical = md.get("delta.columnMapping.physicalName") if isinstance(md, dict) else None
            if (md is not None and not isinstance(md, dict)) or (
                physical is not None and not isinstance(physical, str)
            ):
                raise SchemaError(
                    f"{where}: schemaString: the metadata of field {'.'.join((*path, f['name']))} is not an "
                    f"object with a string physical name: {json.dumps(md)[:120]}"
                )
            if not _encodable(f["name"]) or not _encodable(json.dumps(md, ensure_ascii=False) if md else ""):
                raise SchemaError(f"{where}: schemaString: field name or metadata is not valid Unicode text")
            _check_field_shapes(f["type"], where, (*path, f["name"]))
    elif kind == "array":
        _check_field_shapes(dtype.get("elementType"), where, (*path, "element"))
    elif kind == "map":
        _check_field_shapes(dtype.get("keyType"), where, (*path, "key"))
        _check_field_shapes(dtype.get("valueType"), where, (*path, "value"))


def _type_nodes(
    dtype: Any, path: tuple[str, ...] = (), skip: int = 0
) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every type of a Delta schema JSON type, nested structs, arrays and maps included, with the
    path of field names (``element``, ``key``, ``value`` inside containers) leading to it;
    ``skip``: the types inside that many leading fields of a struct ``dtype`` are left out."""
    yield path, dtype
    if not isinstance(dtype, dict):
        return
    kind = dtype.get("type")
    if kind == "struct":
        for f in itertools.islice(dtype.get("fields") or (), skip, None):
            if isinstance(f, dict):
                yield from _type_nodes(f.get("type"), (*path, str(f.get("name"))))
    elif kind == "array":
        yield from _type_nodes(dtype.get("elementType"), (*path, "element"))
    elif kind == "map":
        yield from _type_nodes(dtype.get("keyType"), (*path, "key"))
        yield from _type_nodes(dtype.get("valueType"), (*path, "value"))


def _struct_fields(dtype: Any, skip: int = 0) -> Iterator[tuple[tuple[str, ...], list[dict[str, Any]]]]:
    """(path, fields) of every struct in a Delta schema JSON type (well-formed fields only), the
    top level's first; ``skip``: the structs inside that many leading top-level fields are left
    out (the top level still lists them)."""
    for path, node in _type_nodes(dtype, skip=skip):
        if isinstance(node, dict) and node.get("type") == "struct" and isinstance(node.get("fields"), list):
            yield path, [f for f in node["fields"] if isinstance(f, dict) and isinstance(f.get("name"), str)]


def annotated_field(dtype: Any, skip: int = 0, skipped: str | None = None) -> str | None:
    """The first field (dotted path) with a column-mapping physical name, top-level fields first,
    then nested ones. ``skip``: the nested fields of that many leading top-level fields are not
    walked: ``skipped`` is the answer for a schema of those fields (see :func:`known_prefix`)."""
    for path, fields in _struct_fields(dtype, skip):
        if path and skipped is not None:  # no top-level field has it: the skipped ones come first
            return skipped
        for f in fields:
            if PHYSICAL_NAME_KEY in (f.get("metadata") or {}):
                return ".".join((*path, f["name"]))
    return skipped


def text_metadata(fields: list[dict[str, Any]]) -> bool:
    """Is every metadata value of these (well-formed) fields, nested ones too, a string? Equal
    fields then convert to equal Arrow fields: a number or boolean may equal another kind of
    value that converts otherwise (``1 == True``, but their Arrow metadata is "1" and "true")."""
    return all(
        all(isinstance(v, str) for v in (f.get("metadata") or {}).values())
        for _, level in _struct_fields({"type": "struct", "fields": fields})
        for f in level
    )


def _check_unique_names(schema: Any, where: str, skip: int = 0) -> None:
    """Column names are unique per struct, ignoring case (as Delta writers require); ``skip``:
    see :func:`_struct_fields`."""
    for path, fields in _struct_fields(schema, skip):
        seen: dict[str, str] = {}
        for f in fields:
            key = f["name"].lower()
            if key in seen:
                at = ".".join(path) or "the top level"
                raise SchemaError(
                    f"{where}: schemaString has columns {seen[key]!r} and {f['name']!r} at {at}: "
                    "column names must be unique (ignoring case)"
                )
            seen[key] = f["name"]


def check_unique_physical_names(schema: Any, mode: str, where: str, skip: int = 0) -> None:
    """Column mapping: physical names are unique per struct as well. Two columns under one would
    read the same parquet column, and their stats bounds would be one JSON key given twice (on
    which pyarrow's JSON reader crashes the process). ``skip``: see :func:`_struct_fields`."""
    if mode not in ("name", "id"):
        return
    for path, fields in _struct_fields(schema, skip):
        seen: dict[str, str] = {}
        for f in fields:
            physical = (f.get("metadata") or {}).get(PHYSICAL_NAME_KEY)
            if not isinstance(physical, str):
                continue  # missing: refused when converted (see physical_name)
            if physical in seen:
                at = ".".join(path) or "the top level"
                raise SchemaError(
                    f"{where}: schemaString gives columns {seen[physical]!r} and {f['name']!r} at {at} "
                    f"the same physical name {physical!r}: physical names must be unique"
                )
            seen[physical] = f["name"]


_INT_RANK = {pa.int8(): 1, pa.int16(): 2, pa.int32(): 3, pa.int64(): 4}
TYPE_CHANGES_KEY = "delta.typeChanges"


def is_supported_type_change(old: pa.DataType, new: pa.DataType) -> bool:
    """The type changes PROTOCOL.md's type widening allows (files written before are read through
    a cast); nested types field by field (fields matched by physical name: added ones read as
    NULL, dropped ones are not read)."""
    if old == new:
        return True
    if old in _INT_RANK and new in _INT_RANK:
        return _INT_RANK[old] <= _INT_RANK[new]
    if old in _INT_RANK and pa.types.is_float64(new):
        return _INT_RANK[old] <= 3  # byte, short, int -> double (not long)
    if pa.types.is_float32(old) and pa.types.is_float64(new):
        return True
    if pa.types.is_date32(old) and pa.types.is_timestamp(new) and new.tz is None:
        return True
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        # decimal(p, s) -> decimal(p + k1, s + k2), k1 >= k2 >= 0
        return new.scale >= old.scale and (new.precision - new.scale) >= (old.precision - old.scale)
    if old in _INT_RANK and pa.types.is_decimal(new):
        # room for every value before the point: byte 3 digits, short 5, int 10, long 20. The
        # protocol text asks 10 for byte and short too, but Delta-Spark writes byte -> decimal(4, 1)
        # and short -> decimal(6, 1) (the corpus's type-widening table), which lose nothing
        return new.precision - new.scale >= {1: 3, 2: 5, 3: 10, 4: 20}[_INT_RANK[old]]
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        old_fields = {f.name: f.type for f in old}
        return all(is_supported_type_change(old_fields[f.name], f.type) for f in new if f.name in old_fields)
    if pa.types.is_list(old) and pa.types.is_list(new):
        return is_supported_type_change(old.value_type, new.value_type)
    if pa.types.is_map(old) and pa.types.is_map(new):
        return is_supported_type_change(old.key_type, new.key_type) and is_supported_type_change(
            old.item_type, new.item_type
        )
    return False


def check_type_changes(schema: dict[str, Any], where: str, skip: int = 0) -> None:
    """Refuse a schema recording (``delta.typeChanges``) a type change the protocol's type
    widening does not allow: files written before it would be cast into values they never held
    (PROTOCOL.md: readers must fail on any unsupported type change). ``skip``: see
    :func:`_struct_fields`."""
    for path, fields in _struct_fields(schema, skip):
        for f in fields:
            changes = (f.get("metadata") or {}).get(TYPE_CHANGES_KEY)
            if changes is None:
                continue
            column = ".".join((*path, f["name"]))
            if not isinstance(changes, list) or not all(isinstance(c, dict) for c in changes):
                raise SchemaError(f"{where}: column {column!r} has malformed {TYPE_CHANGES_KEY} metadata")
            for change in changes:
                old, new = change.get("fromType"), change.get("toType")
                text = f"{old} -> {new}"
                if change.get("fieldPath"):
                    text += f" (at {change['fieldPath']})"
                try:
                    if not isinstance(old, str) or not isinstance(new, str):
                        raise SchemaError("fromType and toType must be type names")
                    old_type, new_type = delta_type_to_arrow(old), delta_type_to_arrow(new)
                except SchemaError as e:
                    raise SchemaError(
                        f"{where}: column {column!r} has malformed {TYPE_CHANGES_KEY} metadata ({text}: {e})"
                    ) from e
                if not is_supported_type_change(old_type, new_type):
                    raise UnsupportedFeatureError(
                        f"{where}: column {column!r} records the type change {text} in {TYPE_CHANGES_KEY}, "
                        "which is not a type widening the protocol allows: its older files cannot be read"
                    )


def delta_type_to_arrow(dtype: Any, mode: str = "none", physical: bool = False) -> pa.DataType:
    """Convert a Delta type (string or dict) to Arrow; nested field names follow ``physical``."""
    if isinstance(dtype, str):
        if dtype in _PRIMITIVES:
            return _PRIMITIVES[dtype]
        m = _DECIMAL.match(dtype)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2))
            if not 1 <= precision <= 38:
                raise SchemaError(f"decimal precision {precision} is outside 1..38 in type {dtype!r}")
            if not 0 <= scale <= precision:  # Spark's and the kernel's rule; DataFusion panics otherwise
                raise SchemaError(f"decimal scale {scale} is outside 0..{precision} in type {dtype!r}")
            return pa.decimal128(precision, scale)
        if dtype == "variant":
            return VARIANT_TYPE
        raise SchemaError(f"unknown Delta type {dtype!r}")
    if not isinstance(dtype, dict):
        raise SchemaError(f"malformed Delta type {dtype!r}")
    kind = dtype.get("type")
    if kind == "struct":
        return pa.struct([delta_field_to_arrow(f, mode, physical) for f in dtype.get("fields", [])])
    # Elements and map values are nullable whatever containsNull / valueContainsNull say, as
    # fields are (delta_field_to_arrow): a file may hold NULLs there anyway, and DataFusion's
    # array and map kernels panic on NULLs a schema declared impossible.
    if kind == "array":
        item = delta_type_to_arrow(dtype["elementType"], mode, physical)
        return pa.list_(pa.field("element", item, True))
    if kind == "map":
        key = delta_type_to_arrow(dtype["keyType"], mode, physical)
        value = delta_type_to_arrow(dtype["valueType"], mode, physical)
        return pa.map_(key, pa.field("value", value, True))
    raise SchemaError(f"unknown Delta type {dtype!r}")


def physical_name(field: dict[str, Any], mode: str) -> str:
    if mode in ("name", "id"):
        name = (field.get("metadata") or {}).get(PHYSICAL_NAME_KEY)
        if not name:
            raise SchemaError(
                f"column mapping mode {mode!r} but field {field.get('name')!r} has no {PHYSICAL_NAME_KEY}"
            )
        return name
    return field["name"]


def delta_field_to_arrow(field: dict[str, Any], mode: str = "none", physical: bool = False) -> pa.Field:
    try:
        name = physical_name(field, mode) if physical else field["name"]
        arrow_type = delta_type_to_arrow(field["type"], mode, physical)
    except KeyError as e:
        raise SchemaError(f"schema field {field!r} lacks {e}") from e
    md = {}
    for k, v in (field.get("metadata") or {}).items():
        md[k] = v if isinstance(v, str) else json.dumps(v)
    if physical:
        # the physical schema's parquet field ids are what the reader resolves columns by: only
        # id mode's, never a key of that name the field's own metadata carries
        md.pop(_FIELD_ID_TEXT, None)
        if mode == "id" and FIELD_ID_KEY in (field.get("metadata") or {}):
            md[_FIELD_ID_TEXT] = str(field["metadata"][FIELD_ID_KEY])
    # Nullable always: a reader must not promise non-null to DataFusion (it would simplify away
    # IS NULL checks) since old files or widened schemas can still hold nulls.
    return pa.field(name, arrow_type, True, metadata=md or None)


def to_arrow_schema(schema: dict[str, Any], mode: str = "none", physical: bool = False) -> pa.Schema:
    return pa.schema([delta_field_to_arrow(f, mode, physical) for f in schema["fields"]])


def _stats_value_type(dtype: Any) -> pa.DataType | None:
    """Arrow type of a min/max stat for a Delta type, or None when stats are not collected."""
    if isinstance(dtype, str):
        if dtype in ("binary", "boolean", "void", "variant"):
            return None
        return delta_type_to_arrow(dtype)
    return None  # arrays and maps carry no min/max


def stats_schemas(schema: dict[str, Any], mode: str, partition_columns: list[str]) -> tuple[pa.DataType, ...]:
    """Arrow types for (minValues/maxValues, nullCount) structs, by physical or logical names.

    Returns ``(minmax_physical, nullcount_physical, minmax_logical, nullcount_logical)``.
    Partition columns carry no stats.
    """
    parts = set(partition_columns)

    def build(fields: list[dict], physical: bool, counts: bool) -> pa.DataType:
        out = []
        for f in fields:
            name = physical_name(f, mode) if physical else f["name"]
            t = f["type"]
            if isinstance(t, dict) and t.get("type") == "struct":
                sub = build(t["fields"], physical, counts)
                if sub.num_fields:
                    out.append(pa.field(name, sub))
            elif counts:
                out.append(pa.field(name, pa.int64()))
            else:
                vt = _stats_value_type(t)
                if vt is not None:
                    out.append(pa.field(name, vt))
        return pa.struct(out)

    top = [f for f in schema["fields"] if f["name"] not in parts]
    return (
        build(top, True, False),
        build(top, True, True),
        build(top, False, False),
        build(top, False, True),
    )


def column_mapping_mode(configuration: dict[str, str]) -> str:
    """The mode, lowercased: Delta-Spark reads the property ignoring case and keeps the value as
    written (``Name``)."""
    raw = (configuration or {}).get("delta.columnMapping.mode", "none") or "none"
    mode = raw.lower()
    if mode not in ("none", "name", "id"):
        raise SchemaError(f"unknown delta.columnMapping.mode {raw!r} (known: none, name, id)")
    return mode


def logical_to_physical_names(schema: dict[str, Any], mode: str) -> dict[str, str]:
    """Top-level logical -> physical column names."""
    return {f["name"]: physical_name(f, mode) for f in schema["fields"]}


def relabel(arr: pa.Array, target: pa.DataType) -> pa.Array:
    """Give ``arr`` the field names of ``target`` position by position (physical -> logical).

    Arrow casts match struct fields by name, so renaming needs a rebuild. Types that differ
    only in names are relabelled recursively through structs, lists and maps.
    """
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([relabel(c, target) for c in arr.chunks], target)
    t = arr.type
    # nothing to rename (and a struct without fields, rebuilt from no children, would have no rows)
    if t == target:
        return arr
    if pa.types.is_struct(t) and pa.types.is_struct(target) and t.num_fields == target.num_fields:
        kids = [relabel(arr.field(i), target.field(i).type) for i in range(t.num_fields)]
        mask = pc.invert(arr.is_valid()) if arr.null_count else None
        return pa.StructArray.from_arrays(kids, fields=list(target), mask=mask)
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and (
        pa.types.is_list(target) or pa.types.is_large_list(target)
    ):
        values = relabel(arr.flatten(), target.value_type)
        if arr.offset or arr.null_count:
            # flatten() drops nulls/slices: rebuild through offsets that honour them
            values = relabel(arr.values.slice(0), target.value_type)
            offsets = arr.offsets
            cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
            return cls.from_arrays(offsets, values, type=target, mask=pc.invert(arr.is_valid()))
        cls = pa.LargeListArray if pa.types.is_large_list(target) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=target)
    if pa.types.is_map(t) and pa.types.is_map(target):
        keys = relabel(arr.keys, target.key_type)
        items = relabel(arr.items, target.item_type)
        mask = pc.invert(arr.is_valid()) if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    if t != target:
        return arr.cast(target)
    return arr
