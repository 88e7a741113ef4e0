"""How a table's columns are found in its data files.

The logical schema (what queries see) maps onto the physical one (what files store): column
mapping gives physical names, and in id mode parquet field ids, which win over names. A file's
stored types may differ from the declared ones in ways writers legitimately produce (string
views, INT96 timestamps, narrower integers, widened types): :func:`readable_as` says which read
as the declared type unchanged, and :func:`conform` casts a batch to exactly the output schema.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from .errors import DeltaError
from .lru import LruCache
from .schema import VARIANT_TYPE, is_supported_type_change, relabel


class ConversionError(DeltaError):
    """A file column that cannot be read as the table type; the reader names the file."""


def is_view(t: pa.DataType) -> bool:
    """Does the type hold string or binary views (for which pyarrow lacks some kernels)?"""
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return True
    if pa.types.is_struct(t):
        return any(is_view(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return is_view(t.value_type)
    return False


_FIELD_ID = b"PARQUET:field_id"


def field_id(f: pa.Field) -> bytes | None:
    """The parquet field id of a field (column mapping id mode), None without one."""
    return (f.metadata or {}).get(_FIELD_ID)


_UNMATCHED = "\x00unmatched:"

#: For the fields of a file struct, the table struct's field each one is (None: no table field).
FieldPairing = Callable[[pa.StructType, pa.StructType], list["pa.Field | None"]]


def _renamed_nested(
    file_type: pa.DataType, phys_type: pa.DataType, pair: FieldPairing, unmatched: str = _UNMATCHED
) -> pa.DataType:
    """``file_type`` with every nested struct field renamed to the physical field ``pair`` says
    it is; fields without one get ``unmatched`` before their names. A VARIANT's struct is left as
    stored: its fields are found by their names, value and metadata (writers give them no field
    ids, nor other names)."""
    if pa.types.is_struct(file_type) and pa.types.is_struct(phys_type):
        if phys_type == VARIANT_TYPE:
            return file_type
        fields = []
        for f, target in zip(file_type, pair(file_type, phys_type), strict=True):
            if target is None:
                fields.append(f.with_name(unmatched + f.name))
            else:
                typ = _renamed_nested(f.type, target.type, pair, unmatched)
                fields.append(f.with_name(target.name).with_type(typ))
        return pa.struct(fields)
    if pa.types.is_list(file_type) and pa.types.is_list(phys_type):
        value = _renamed_nested(file_type.value_type, phys_type.value_type, pair, unmatched)
        return pa.list_(file_type.value_field.with_type(value))
    if pa.types.is_large_list(file_type) and pa.types.is_large_list(phys_type):
        value = _renamed_nested(file_type.value_type, phys_type.value_type, pair, unmatched)
        return pa.large_list(file_type.value_field.with_type(value))
    if pa.types.is_map(file_type) and pa.types.is_map(phys_type):
        return pa.map_(
            _renamed_nested(file_type.key_type, phys_type.key_type, pair, unmatched),
            file_type.item_field.with_type(
                _renamed_nested(file_type.item_type, phys_type.item_type, pair, unmatched)
            ),
        )
    return file_type


def _pair_by_id(file_type: pa.StructType, phys_type: pa.StructType) -> list[pa.Field | None]:
    targets = {field_id(f): f for f in phys_type if field_id(f) is not None}
    return [targets.get(field_id(f)) if field_id(f) is not None else None for f in file_type]


def named_by_id(file_type: pa.DataType, phys_type: pa.DataType) -> pa.DataType:
    """``file_type`` with every nested field renamed to the physical field of the same parquet
    field id (column mapping id mode); fields without a match get a name no target has."""
    return _renamed_nested(file_type, phys_type, _pair_by_id)


def match_ignoring_case(
    file_names: Sequence[str], table_names: Sequence[str], wanted: Sequence[str] | None = None
) -> dict[str, str]:
    """File column -> table column: the same name, else the one name that differs only in case
    (Delta names are case-insensitive, and Spark resolves parquet columns so: a file written with
    ``ID`` holds the table's ``id``). A name taken exactly on either side is not matched again.
    Several candidates either way are ambiguous: :class:`ConversionError`, raised only for the
    ``wanted`` table names when given (the columns a read needs)."""
    on_table = set(table_names)
    in_file = set(file_names)
    out = {n: n for n in file_names if n in on_table}
    loose_files: dict[str, list[str]] = {}
    for n in file_names:
        if n not in on_table:
            loose_files.setdefault(n.lower(), []).append(n)
    if not loose_files:
        return out
    loose_tables: dict[str, list[str]] = {}
    for n in table_names:
        if n not in in_file:
            loose_tables.setdefault(n.lower(), []).append(n)
    keys = loose_tables.keys() if wanted is None else {w.lower() for w in wanted if w not in in_file}
    for key in keys:
        tables, files = loose_tables.get(key), loose_files.get(key)
        if not tables or not files:
            continue
        if len(files) > 1 or len(tables) > 1:
            raise ConversionError(
                f"the file's {', '.join(map(repr, files))} and the table's {', '.join(map(repr, tables))} "
                "differ only in case: which is which is ambiguous"
            )
        out[files[0]] = tables[0]
    return out


def _pair_ignoring_case(file_type: pa.StructType, phys_type: pa.StructType) -> list[pa.Field | None]:
    by_name = {f.name: f for f in phys_type}
    pairs = match_ignoring_case([f.name for f in file_type], list(by_name))
    return [by_name[pairs[f.name]] if f.name in pairs else None for f in file_type]


def named_ignoring_case(file_type: pa.DataType, phys_type: pa.DataType) -> pa.DataType:
    """``file_type`` with every nested field renamed to the physical field it matches ignoring
    case (:func:`match_ignoring_case`); fields of no table field keep their names (no table
    field has them), so the type is unchanged when every name agrees."""
    return _renamed_nested(file_type, phys_type, _pair_ignoring_case, unmatched="")


def _renamed_by_case(file_type: pa.DataType, phys_type: pa.DataType) -> bool:
    """Would :func:`named_ignoring_case` rename a nested field? One walk, nothing built."""
    if pa.types.is_struct(file_type) and pa.types.is_struct(phys_type):
        targets = {f.name: f for f in phys_type}
        names = {f.name for f in file_type}
        loose = {n.lower() for n in targets if n not in names}
        for f in file_type:
            target = targets.get(f.name)
            if target is None:
                if f.name.lower() in loose:
                    return True
            elif _renamed_by_case(f.type, target.type):
                return True
        return False
    if (pa.types.is_list(file_type) and pa.types.is_list(phys_type)) or (
        pa.types.is_large_list(file_type) and pa.types.is_large_list(phys_type)
    ):
        return _renamed_by_case(file_type.value_type, phys_type.value_type)
    if pa.types.is_map(file_type) and pa.types.is_map(phys_type):
        return _renamed_by_case(file_type.key_type, phys_type.key_type) or _renamed_by_case(
            file_type.item_type, phys_type.item_type
        )
    return False


def case_insensitive_columns(
    file_schema: pa.Schema, physical: pa.Schema, wanted: Sequence[str]
) -> dict[str, tuple[str, pa.DataType]] | None:
    """For a file naming some of the ``wanted`` physical columns (or their nested fields) in
    another case: physical column -> (the file's column, the file's type renamed to the physical
    names). None when every wanted name is found as it is (the common case, decided without
    building anything)."""
    present = set(file_schema.names)
    missing = [w for w in wanted if w not in present]
    pairs = match_ignoring_case(file_schema.names, physical.names, missing) if missing else {}
    source = {table: file for file, table in pairs.items() if file != table}
    renamed = {
        w
        for w in wanted
        if w in present and _renamed_by_case(file_schema.field(w).type, physical.field(w).type)
    }
    if not source and not renamed:
        return None
    out: dict[str, tuple[str, pa.DataType]] = {}
    for w in wanted:
        name = w if w in present else source.get(w)
        if name is None:
            continue
        stored = file_schema.field(name).type
        typ = named_ignoring_case(stored, physical.field(w).type) if w in renamed or name != w else stored
        out[w] = (name, typ)
    return out


def id_mode_columns(file_schema: pa.Schema, physical: pa.Schema) -> dict[str, tuple[str, pa.DataType]] | None:
    """Column mapping id mode resolves columns by parquet field id, not by name (PROTOCOL.md).
    For a file whose names differ from the physical ones (e.g. converted from Iceberg): physical
    column -> (the file's column, the file's type renamed by id). None when names already agree."""
    by_id = {field_id(f): f for f in file_schema if field_id(f) is not None}
    if not by_id and len(file_schema) and any(field_id(pf) is not None for pf in physical):
        # PROTOCOL.md: such a file is refused or read as all NULLs; by name it could read a
        # dropped column that another has replaced under the same physical name
        raise ConversionError(
            "column mapping id mode finds columns by parquet field id, and this file has none"
        )
    out: dict[str, tuple[str, pa.DataType]] = {}
    differs = False
    for pf in physical:
        fid = field_id(pf)
        f = by_id.get(fid) if fid is not None else None
        if f is None:
            # a file column of this name with another id, or none in a file that has ids, is
            # another column (one dropped and added again, say): the table's reads as NULL
            i = file_schema.get_field_index(pf.name)
            if fid is not None and i >= 0 and field_id(file_schema.field(i)) != fid:
                differs = True
            continue
        typ = named_by_id(f.type, pf.type)
        differs = differs or f.name != pf.name or typ != f.type
        out[pf.name] = (f.name, typ)
    return out if differs else None


@dataclass(frozen=True)
class ReadSchema:
    """How logical columns map onto the files.

    ``logical``: the table's logical schema plus any constant (virtual) columns.
    ``physical``: the same columns as stored in files (physical names; constants by their names).
    ``file_columns``: logical names of the columns stored in data files.
    """

    logical: pa.Schema
    physical: pa.Schema
    file_columns: frozenset[str]

    def to_physical(self) -> dict[str, str]:
        """Logical -> physical column names; made once (every read asks: a change feed reads
        commit by commit), so treat it as read-only."""
        return self._to_physical

    @cached_property
    def _to_physical(self) -> dict[str, str]:
        return {lf.name: pf.name for lf, pf in zip(self.logical, self.physical, strict=True)}

    def column_text(self, physical: str) -> str:
        """A stored column as errors name it: by the name queries use, with the physical one where
        column mapping stores it under another (a file's ``col-5f1c...`` names no column a user
        knows)."""
        logical = self._to_logical.get(physical)
        if logical is None or logical == physical:
            return repr(physical)
        return f"{logical!r} (physical name {physical!r})"

    @cached_property
    def _to_logical(self) -> dict[str, str]:
        return {pf.name: lf.name for lf, pf in zip(self.logical, self.physical, strict=True)}

    @cached_property
    def renamed_paths(self) -> dict[tuple[str, ...], str]:
        """Logical -> physical names that differ (column mapping), each field by its logical path
        (nested struct fields included): the rename a row filter needs (predicate.to_pyarrow).
        Paths are tuples, so a top-level column named "s.x" is not the field x of s."""
        out: dict[tuple[str, ...], str] = {}

        def walk(logical: pa.DataType, physical: pa.DataType, prefix: tuple[str, ...]) -> None:
            if not (pa.types.is_struct(logical) and pa.types.is_struct(physical)):
                return
            for lf, pf in zip(logical, physical, strict=False):
                path = (*prefix, lf.name)
                if lf.name != pf.name:
                    out[path] = pf.name
                walk(lf.type, pf.type, path)

        for lf, pf in zip(self.logical, self.physical, strict=True):
            if lf.name != pf.name:
                out[(lf.name,)] = pf.name
            walk(lf.type, pf.type, (lf.name,))
        return out

    @cached_property
    def physical_key(self) -> bytes:
        """The physical schema with its field metadata (ids, names), as a hashable key."""
        return self.physical.serialize().to_pybytes()

    @cached_property
    def id_mode(self) -> bool:
        """Column mapping id mode: the physical schema carries parquet field ids."""
        return any(field_id(f) is not None for f in self.physical)

    @cached_property
    def variant_columns(self) -> frozenset[str]:
        """Logical names of the stored columns holding a VARIANT (nested ones included)."""
        return frozenset(
            lf.name
            for lf, pf in zip(self.logical, self.physical, strict=True)
            if lf.name in self.file_columns and holds_variant(pf.type)
        )


#: Prefix of a partition column's read name when its own name is taken (see make_read_schema).
PARTITION_PREFIX = "\x00partition:"


def make_read_schema(
    logical: pa.Schema,
    physical: pa.Schema,
    partition_columns: Sequence[str],
    constants: Sequence[pa.Field] = (),
) -> ReadSchema:
    """Logical/physical schemas for reading; partition and constant columns keep logical names,
    unless a partition column's name is a stored column's physical name (column mapping renames
    can make it so: data column b stored as ``a`` next to partition column a). Then it is read
    under a name no file column has (filled from the unit's values)."""
    parts = set(partition_columns)
    stored = {pf.name for lf, pf in zip(logical, physical, strict=True) if lf.name not in parts}
    phys_fields = []
    for lf, pf in zip(logical, physical, strict=True):
        if lf.name not in parts:
            phys_fields.append(pf)
            continue
        name = lf.name
        while name in stored:
            name = PARTITION_PREFIX + name
        phys_fields.append(pa.field(name, lf.type))
    file_cols = frozenset(f.name for f in logical if f.name not in parts)
    log = pa.schema(list(logical) + list(constants), metadata=logical.metadata)
    phy = pa.schema(phys_fields + list(constants))
    return ReadSchema(log, phy, file_cols)


def cast_may_fail(stored: pa.DataType, declared: pa.DataType) -> bool:
    """A stored type read through a cast that can fail on values: a wider integer (or one of the
    other signedness), a decimal of more digits, a finer timestamp unit; at any depth of a struct
    (fields by name), list or map."""
    if pa.types.is_struct(stored) and pa.types.is_struct(declared):
        wanted = {f.name: f.type for f in declared}
        return any(f.name in wanted and cast_may_fail(f.type, wanted[f.name]) for f in stored)
    if _is_list(stored) and _is_list(declared):
        return cast_may_fail(stored.value_type, declared.value_type)
    if pa.types.is_map(stored) and pa.types.is_map(declared):
        return cast_may_fail(stored.key_type, declared.key_type) or cast_may_fail(
            stored.item_type, declared.item_type
        )
    if pa.types.is_integer(stored) and pa.types.is_integer(declared):
        return stored.bit_width > declared.bit_width or (
            pa.types.is_unsigned_integer(stored) != pa.types.is_unsigned_integer(declared)
        )
    if pa.types.is_decimal(stored) and pa.types.is_decimal(declared):
        return stored.precision > declared.precision
    if pa.types.is_timestamp(stored) and pa.types.is_timestamp(declared):
        order = ["s", "ms", "us", "ns"]
        return order.index(stored.unit) > order.index(declared.unit)
    return False


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t)


def holds_variant(t: pa.DataType) -> bool:
    if t == VARIANT_TYPE:
        return True
    if pa.types.is_struct(t):
        return any(holds_variant(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return holds_variant(t.value_type)
    if pa.types.is_map(t):
        return holds_variant(t.key_type) or holds_variant(t.item_type)
    return False


def shredded_field(stored: pa.DataType, declared: pa.DataType, path: str) -> str | None:
    """The path of a variant that ``stored`` (a file's type) keeps shredded, if any: a struct
    with a field other than value, metadata and ignorable ``_``-prefixed ones, or without value."""
    if declared == VARIANT_TYPE:
        if not pa.types.is_struct(stored):
            return None  # not a struct at all: the read reports the type mismatch
        names = {f.name for f in stored}
        extra = sorted(n for n in names if n not in ("value", "metadata") and not n.startswith("_"))
        return f"{path!r} (field {extra[0]!r})" if extra else (None if "value" in names else f"{path!r}")
    if pa.types.is_struct(declared) and pa.types.is_struct(stored):
        for f in declared:
            idx = stored.get_field_index(f.name)
            if idx >= 0:
                found = shredded_field(stored.field(idx).type, f.type, f"{path}.{f.name}")
                if found:
                    return found
        return None
    lists = (pa.types.is_list, pa.types.is_large_list)
    if any(k(declared) for k in lists) and any(k(stored) for k in lists):
        return shredded_field(stored.value_type, declared.value_type, f"{path}[]")
    if pa.types.is_map(declared) and pa.types.is_map(stored):
        return shredded_field(stored.item_type, declared.item_type, f"{path}[value]")
    return None


def has_float(t: pa.DataType) -> bool:
    if pa.types.is_floating(t):
        return True
    if pa.types.is_struct(t):
        return any(has_float(f.type) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return has_float(t.value_type)
    if pa.types.is_map(t):
        return has_float(t.key_type) or has_float(t.item_type)
    return False


def cast_column(arr: pa.Array, typ: pa.DataType, by_name: bool = False) -> pa.Array:
    """``arr`` as ``typ``. Same shape: fields renamed by position (physical -> logical names),
    unless ``by_name``: then pyarrow's cast matches struct fields by name (file -> physical)."""
    if arr.type == typ:
        return arr
    try:
        if not by_name and same_shape(arr.type, typ):
            return relabel(arr, typ)
        return arr.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ConversionError(f"cannot convert column of type {arr.type} to the table type {typ}: {e}") from e


def same_storage(file_type: pa.DataType, table_type: pa.DataType) -> bool:
    """Does a file column hold the table type as is (string views for strings included)?"""
    if file_type == table_type:
        return True
    text = (pa.string(), pa.large_string(), pa.string_view())
    raw = (pa.binary(), pa.large_binary(), pa.binary_view())
    return (file_type in text and table_type in text) or (file_type in raw and table_type in raw)


def readable_as(stored: pa.DataType, declared: pa.DataType) -> bool:
    """Can a file column of type ``stored`` be read as the table's ``declared`` type without
    changing its values? Yes for the same type, for other encodings of it that writers use
    (string / large / view types and unannotated binary for strings, fixed-size binaries and
    lists, the storage of Arrow extension types, any timestamp unit or zone
    (INT96), integer widths (an overflowing value fails the cast), decimal precision at the same
    scale (likewise), dictionaries, all-null columns), for the type widenings the protocol allows,
    and for nested types field by field (fields by name; missing ones read as NULL)."""
    if isinstance(stored, pa.BaseExtensionType):  # restored from a writer's Arrow schema (json, uuid)
        stored = stored.storage_type
    if same_storage(stored, declared) or pa.types.is_null(stored) or pa.types.is_null(declared):
        return True
    if pa.types.is_dictionary(stored):
        return readable_as(stored.value_type, declared)
    text = (pa.string(), pa.large_string(), pa.string_view())
    raw = (pa.binary(), pa.large_binary(), pa.binary_view())
    stored_raw = stored in raw or pa.types.is_fixed_size_binary(stored)
    if (stored_raw and (declared in text or declared in raw)) or (stored in text and declared in raw):
        return True  # strings written without the UTF8 annotation, bytes with it, fixed-length bytes
    for same_kind in (pa.types.is_integer, pa.types.is_timestamp, pa.types.is_date):
        if same_kind(stored) and same_kind(declared):
            return True
    if pa.types.is_decimal(stored) and pa.types.is_decimal(declared) and stored.scale == declared.scale:
        return True
    if pa.types.is_struct(stored) and pa.types.is_struct(declared):
        fields = {f.name: f.type for f in stored}
        return all(readable_as(fields[f.name], f.type) for f in declared if f.name in fields)
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_list_view, pa.types.is_large_list_view)
    lists += (pa.types.is_fixed_size_list,)  # polars' Array, deltalake's fixed-size lists
    if any(k(stored) for k in lists) and any(k(declared) for k in lists):
        return readable_as(stored.value_type, declared.value_type)
    if pa.types.is_map(stored) and pa.types.is_map(declared):
        return readable_as(stored.key_type, declared.key_type) and readable_as(
            stored.item_type, declared.item_type
        )
    return is_supported_type_change(stored, declared)


def same_shape(a: pa.DataType, b: pa.DataType) -> bool:
    """Equal up to field names (physical vs logical)."""
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return a.num_fields == b.num_fields and all(
            same_shape(a.field(i).type, b.field(i).type) for i in range(a.num_fields)
        )
    if (pa.types.is_list(a) and pa.types.is_list(b)) or (
        pa.types.is_large_list(a) and pa.types.is_large_list(b)
    ):
        return same_shape(a.value_type, b.value_type)
    if pa.types.is_map(a) and pa.types.is_map(b):
        return same_shape(a.key_type, b.key_type) and same_shape(a.item_type, b.item_type)
    return a == b


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast to exactly the output schema (DataFusion does not check batch types), every struct's
    NULLs in its fields too (see :func:`with_struct_nulls`)."""
    if len(schema) == 0:
        return batch.select([])
    nested = _struct_columns(schema)
    if batch.schema == schema:
        if not nested:
            return batch
        arrays = batch.columns
    else:
        arrays = [cast_column(batch.column(i), f.type) for i, f in enumerate(schema)]
    for i in nested:
        arrays[i] = with_struct_nulls(arrays[i])
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: output schemas -> their columns holding structs, by identity (a read passes one schema object
#: for all its batches; hashing a schema costs ~1 us a field)
_STRUCT_COLUMNS: LruCache[tuple[pa.Schema, tuple[int, ...]]] = LruCache(64)


def _struct_columns(schema: pa.Schema) -> tuple[int, ...]:
    """The positions of ``schema``'s columns whose type holds a struct (through lists and maps)."""
    found = _STRUCT_COLUMNS.get_or_make(
        id(schema),
        lambda: (schema, tuple(i for i, t in enumerate(schema.types) if _holds_struct(t))),
        lambda hit: hit[0] is schema,
    )
    return found[1]


def _holds_struct(t: pa.DataType) -> bool:
    if pa.types.is_struct(t):
        return True
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _holds_struct(t.value_type)
    if pa.types.is_map(t):
        return _holds_struct(t.key_type) or _holds_struct(t.item_type)
    return False


def with_struct_nulls(arr: pa.Array) -> pa.Array:
    """``arr`` with each NULL struct's fields NULL too, through lists and maps (``arr`` itself
    when nothing changes). Arrow leaves a field's values under a NULL struct undefined, and
    parquet readers fill a required field's with values (0), while DataFusion 55 reads a field
    (``s['a']``, ``l[2]['a']``) by the field's own validity only: ``s['a'] = 0`` matched rows
    where ``s`` is NULL."""
    t = arr.type
    if pa.types.is_struct(t) and t.num_fields:
        kids = arr.flatten() if arr.null_count else [arr.field(i) for i in range(t.num_fields)]
        fixed = [with_struct_nulls(k) for k in kids]
        if not arr.null_count and all(f is k for f, k in zip(fixed, kids, strict=True)):
            return arr
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(fixed, fields=list(t), mask=mask)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        values = arr.values
        fixed = with_struct_nulls(values)
        if fixed is values:
            return arr
        if arr.offset and arr.null_count:  # pyarrow takes no validity with sliced offsets
            return with_struct_nulls(pa.concat_arrays([arr]))
        cls = pa.LargeListArray if pa.types.is_large_list(t) else pa.ListArray
        return cls.from_arrays(arr.offsets, fixed, type=t, mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        keys, items = arr.keys, arr.items
        fixed_keys, fixed_items = with_struct_nulls(keys), with_struct_nulls(items)
        if fixed_keys is keys and fixed_items is items:
            return arr
        if arr.offset and arr.null_count:  # as for lists
            return with_struct_nulls(pa.concat_arrays([arr]))
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, fixed_keys, fixed_items, type=t, mask=mask)
    return arr
