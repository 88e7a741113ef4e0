"""Each data file's stored columns checked against the table schema, and the facts read from its
footer that decide which path reads it. pyarrow's dataset scanner reads a column named in another
case as NULL and casts whatever type a file stores to the table's (numeric strings to numbers),
and reading a shredded VARIANT as its binaries loses its typed values: a file's rows are trusted
only after these checks. They cost ~30 ms a file at 5,000 columns, so a schema that passed is
remembered per reader, and footer facts are cached per file for the process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import DeltaError, UnsupportedFeatureError
from ..read_schema import (
    ConversionError,
    ReadSchema,
    case_insensitive_columns,
    id_mode_columns,
    is_view,
    readable_as,
    shredded_field,
)
from ..scan_unit import ScanUnit
from ..storage import Storage
from .footer_probe import probed_footer
from .read_errors import ReadErrors

# Facts read once from a data file's footer, per (location, size)
_FOOTER_LOCK = threading.Lock()
_FILTER_TYPES_CACHE: dict[tuple[str, int], tuple[frozenset[str], frozenset[tuple[str, Zones]]]] = {}
_ID_CACHE: dict[tuple[str, int], dict[str, tuple[str, pa.DataType]] | None] = {}
#: A footer fact not known: the footer could not be read (not cached; the read reports why).
_UNREAD = object()
# one object per distinct fact: a table's files repeat a few schemas, and a field-id mapping is
# as large as the table is wide (65,536 files x 5,000 columns would otherwise hold 3e8 entries)
_SHARED_FACTS: dict[Any, Any] = {}


class FileChecks:
    """The file checks of one reader (``where``: its table and version), shared by its threads."""

    def __init__(self, storage: Storage, rs: ReadSchema, where: str, errors: ReadErrors):
        self.storage = storage
        self.rs = rs
        self.where = where
        self.errors = errors
        # per reader: the fact depends on which columns of this table version are variants
        self._shredded: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {}
        # file schemas found to name the columns read as the table does (False), and with types
        # it can read (True); see :meth:`checked`: every file of a table repeats a few schemas
        self.clean_schemas: dict[tuple[bytes, tuple[str, ...]], bool] = {}

    def checked(self, location: str, stored: pa.Schema, columns: Sequence[str], types: bool = True) -> bool:
        """:meth:`_named_otherwise`, and (``types``) :meth:`check_stored_types` for a file that
        is not. The checks cost ~30 ms a file at 5,000 columns, so a schema that passed them is
        remembered and not checked again (errors are not remembered: each file names itself)."""
        key = self.clean_key(stored, columns)
        known = self.clean_schemas.get(key)  # None: not checked; False: names only; True: types too
        if known or (known is not None and not types):
            return False
        if known is None and self._named_otherwise(location, stored, columns):
            return True
        if types:
            self.check_stored_types(location, stored, columns)
        self.remember_clean(key, types)
        return False

    def clean_key(self, stored: pa.Schema, columns: Sequence[str]) -> tuple[bytes, tuple[str, ...]]:
        """What :meth:`checked` remembers a clean file schema by: its serialized bytes (exact:
        names, types, nesting; 1 ms for 5,000 columns, where pyarrow's schema comparison computes
        a fingerprint costing 5 ms) and the columns read from it."""
        return stored.serialize().to_pybytes(), tuple(columns)

    def remember_clean(self, key: tuple[bytes, tuple[str, ...]], types: bool) -> None:
        if len(self.clean_schemas) >= 32:  # a few schemas per table; bounded, the keys are large
            self.clean_schemas.clear()
        self.clean_schemas[key] = types

    def _named_otherwise(self, location: str, stored: pa.Schema, columns: Sequence[str]) -> bool:
        """Does the file name one of ``columns`` (physical names), or a field nested in one, only
        in another case? Not in id mode, where field ids decide."""
        if self.rs.id_mode:
            return False
        try:
            return case_insensitive_columns(stored, self.rs.physical, columns) is not None
        except ConversionError as e:
            raise DeltaError(f"{self.where}: data file {location}: {e}") from e

    def check_stored_types(self, location: str, stored: pa.Schema, columns: Sequence[str]) -> None:
        """Refuse a data file storing a table column as a type its values cannot be read as
        unchanged (see :func:`readable_as`): only a writer outside Delta makes one, and casting
        would give values the file never held."""
        for name in columns:
            i, j = stored.get_field_index(name), self.rs.physical.get_field_index(name)
            if i < 0 or j < 0:
                continue
            have, want = stored.field(i).type, self.rs.physical.field(j).type
            if not readable_as(have, want):
                raise DeltaError(
                    f"{self.where}: data file {location} stores column {self.rs.column_text(name)} as {have}, "
                    f"but the table schema says {want}, and that is not a type change Delta allows "
                    "(PROTOCOL.md type widening)"
                )

    def filtered_text_columns(self, predicate: Any) -> frozenset[str]:
        """Physical names of the string/binary file columns the predicate reads (a struct's
        too when a field of it is: a filter on ``st.b`` compares that field)."""
        from ..predicate import referenced_columns

        phys = self.rs.to_physical()
        out = set()
        for name in referenced_columns(predicate):
            idx = self.rs.logical.get_field_index(name)
            if idx >= 0 and name in self.rs.file_columns:
                if _holds_text(self.rs.logical.field(idx).type):
                    out.add(phys[name])
        return frozenset(out)

    def filtered_timestamp_columns(self, predicate: Any) -> dict[str, Zones]:
        """Physical name -> :func:`timestamp_zones` of the table's type, for the file columns
        holding timestamps that the predicate reads."""
        from ..predicate import referenced_columns

        phys = self.rs.to_physical()
        out = {}
        for name in referenced_columns(predicate):
            idx = self.rs.logical.get_field_index(name)
            if idx >= 0 and name in self.rs.file_columns:
                zones = timestamp_zones(self.rs.physical.field(idx).type)
                if zones:
                    out[phys[name]] = zones
        return out

    def filter_trips_on(self, unit: ScanUnit, text: frozenset[str], times: dict[str, Zones]) -> bool:
        """Does pyarrow's filter fail on the file's stored types? It does on a ``text`` column
        stored as string_view/binary_view, and on a ``times`` column whose timestamps the file
        stores with the other kind of time zone than the table (naive in a ``timestamp`` column,
        UTC in a ``timestamp_ntz`` one: their row-group statistics, of the stored type, are
        judged against the table type's literal). Such files are read by rows, cast, then
        filtered. Footer read once, cached; also True when it cannot be read now: the
        row-selection path reads the footer itself and reports a failed read."""
        facts = self._footer_fact(_FILTER_TYPES_CACHE, unit, _filter_type_facts, None, whole_footer=True)
        if facts is None:
            return True
        views, zones = facts
        if not views.isdisjoint(text):
            return True
        # a text-only filter does not walk the file's timestamp columns
        return bool(times) and any(
            name in times and other_zone(stored, times[name]) for name, stored in zones
        )

    def refuse_shredded_variants(self, units: Sequence[ScanUnit], columns: frozenset[str]) -> None:
        """A shredded VARIANT keeps part of its data outside ``value`` (``typed_value``), which
        reading the struct of binaries would silently lose: such a file is refused when a query
        reads the column (tables with ``variantShredding`` or its preview are read otherwise)."""
        phys = self.rs.to_physical()
        # every variant column of this version, in table order (one cached fact per file serves
        # any request)
        declared = {
            phys[c]: (c, self.rs.physical.field(phys[c]).type)
            for c in self.rs.logical.names
            if c in self.rs.variant_columns
        }
        wanted = {phys[c] for c in columns}

        def shredded(schema: pa.Schema) -> tuple[tuple[str, str], ...]:
            out = []
            for name, stored in self._stored_as_read(schema, list(declared)).items():
                logical, want = declared[name]
                found = shredded_field(stored, want, logical)
                if found:
                    out.append((name, found))
            return tuple(out)

        for u in units:
            found = self._footer_fact(self._shredded, u, shredded, None)
            if found is None:  # footer unreadable (perhaps for a moment): unchecked is unread
                try:
                    found = shredded(pq.read_schema(u.location, filesystem=self.storage.arrow_fs))
                except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
                    raise self.errors.read_error([u], e) from e
            where = [w for name, w in found if name in wanted]
            if where:
                raise UnsupportedFeatureError(
                    f"{self.where}: data file {u.location} stores the VARIANT {where[0]} "
                    "shredded (fields besides value and metadata): shredded variants are not "
                    "reassembled by this reader"
                )

    def _stored_as_read(self, schema: pa.Schema, names: Sequence[str]) -> dict[str, pa.DataType]:
        """The file's type of each of ``names`` (physical columns) it holds, found and its nested
        fields renamed as the read finds them: by field id in id mode, else by name, ignoring
        case where no name matches exactly. A file the read refuses to map (no field ids,
        ambiguous names) is looked up by the exact names: the read reports it."""
        try:
            if self.rs.id_mode:
                mapped = id_mode_columns(schema, self.rs.physical)
            else:
                mapped = case_insensitive_columns(schema, self.rs.physical, names)
        except ConversionError:
            mapped = None
        if mapped is not None:  # names found otherwise: what is not mapped is not read
            return {n: mapped[n][1] for n in names if n in mapped}
        return {n: schema.field(n).type for n in names if schema.get_field_index(n) >= 0}

    def read_by_id(self, unit: ScanUnit) -> bool:
        """In id mode: must the file be read by field id, its columns named otherwise than the
        physical names (:func:`id_mode_columns`; footer read once, cached)? Also when its footer
        cannot be read now: the dataset path finds columns by name and reads those a file names
        otherwise as NULL (a footer read failing for a moment, then the file read: NULL rows),
        where the row-selection path reads the footer itself, by id, and reports a failed read."""
        try:
            renamed = self._footer_fact(
                _ID_CACHE,
                unit,
                lambda schema: id_mode_columns(schema, self.rs.physical),
                _UNREAD,
                # the mapping depends on the schema read with (a file is read at several versions)
                self.rs.physical_key,
            )
        except ConversionError as e:  # a file without field ids
            raise self.errors.file_error([unit], e) from e
        return renamed is not None

    def _footer_fact(
        self,
        cache: dict,
        unit: ScanUnit,
        derive: Callable[[Any], Any],
        unreadable: Any,
        depends_on: Any = None,
        whole_footer: bool = False,
    ) -> Any:
        """``derive(file schema)`` of a data file (``whole_footer``: of its footer), cached per
        file (data files never change, so the footer is read once per process) and per
        ``depends_on`` (whatever else ``derive`` reads); ``unreadable`` when the footer cannot be
        read (the read itself reports that). Each cache is bounded like the other per-file
        caches."""
        key = (unit.location, unit.size, depends_on)
        with _FOOTER_LOCK:
            if key in cache:
                return cache[key]
        footer = probed_footer(unit.location, self.storage.arrow_fs)
        if footer is None:
            return unreadable  # not cached: the failure may pass
        found = derive(footer if whole_footer else footer.schema.to_arrow_schema())
        with _FOOTER_LOCK:
            if len(cache) >= 65536:
                cache.clear()
                _SHARED_FACTS.clear()
            try:
                found = _SHARED_FACTS.setdefault(_fact_key(found), found)
            except TypeError:  # a type pyarrow gives no hash (a Python extension type): unshared
                pass
            cache[key] = found
        return found


#: (path of struct field names under a column, does the timestamp there have a time zone)
Zones = frozenset[tuple[tuple[str, ...], bool]]


def timestamp_zones(t: pa.DataType, path: tuple[str, ...] = ()) -> Zones:
    """The timestamps of a type, through struct fields (the fields a filter compares), each by
    its path and whether it has a time zone."""
    return _zones(t, path, frozenset(), 0)[0]


def _zones(t: pa.DataType, path: tuple[str, ...], skipped: frozenset[int], leaf: int) -> tuple[Zones, int]:
    """:func:`timestamp_zones` of a file column whose first parquet leaf column is ``leaf``,
    leaving out the timestamps stored in the ``skipped`` leaves; and the leaves the column has
    (a struct's fields, a list's or a map's values: parquet stores them in schema order)."""
    if isinstance(t, pa.BaseExtensionType):
        t = t.storage_type
    if pa.types.is_timestamp(t):
        return (frozenset() if leaf in skipped else frozenset({(path, t.tz is not None)})), 1
    if pa.types.is_struct(t):
        found: set[tuple[tuple[str, ...], bool]] = set()
        used = 0
        for f in t:
            zones, n = _zones(f.type, (*path, f.name), skipped, leaf + used)
            found |= zones
            used += n
        return frozenset(found), used
    return frozenset(), _leaves(t)


def _leaves(t: pa.DataType) -> int:
    """The parquet leaf columns of a column of Arrow type ``t``."""
    if isinstance(t, pa.BaseExtensionType):
        return _leaves(t.storage_type)
    if pa.types.is_struct(t):
        return sum(_leaves(f.type) for f in t)
    if pa.types.is_map(t):
        return _leaves(t.key_type) + _leaves(t.item_type)
    if pa.types.is_dictionary(t):
        return _leaves(t.value_type)
    lists = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
    lists += (pa.types.is_list_view, pa.types.is_large_list_view)
    if any(k(t) for k in lists):
        return _leaves(t.value_type)
    return 1


def other_zone(stored: Zones, declared: Zones) -> bool:
    """Does a file store a timestamp of the table's (by its path) with the other kind of zone?"""
    wanted = dict(declared)
    return any(path in wanted and wanted[path] != zoned for path, zoned in stored)


def _filter_type_facts(footer: pq.FileMetaData) -> tuple[frozenset[str], frozenset[tuple[str, Zones]]]:
    """A file's columns that pyarrow's filter may fail on: those holding views, and the
    timestamps of each column holding some (see :meth:`FileChecks.filter_trips_on`), but for
    INT96 ones: pyarrow reads them as naive timestamps and judges them by no statistics, so a
    filter on them does not fail (Spark writes `timestamp` columns so by default: such files
    keep the dataset path). Were the leaves not found as counted, every timestamp counts."""
    schema = footer.schema.to_arrow_schema()
    views = frozenset(f.name for f in schema if is_view(f.type))
    int96 = frozenset(
        i for i in range(footer.num_columns) if footer.schema.column(i).physical_type == "INT96"
    )
    if int96 and sum(_leaves(f.type) for f in schema) != footer.num_columns:
        int96 = frozenset()
    zones = []
    leaf = 0
    for f in schema:
        found, n = _zones(f.type, (), int96, leaf)
        leaf += n
        if found:
            zones.append((f.name, found))
    return views, frozenset(zones)


def _fact_key(fact: Any) -> Any:
    """A hashable form of a footer fact, equal for equal facts (a dict by its items, in order)."""
    return (dict, tuple(fact.items())) if isinstance(fact, dict) else (type(fact), fact)


def _holds_text(t: pa.DataType) -> bool:
    """Is the type a string or binary, or a struct with one among its fields (at any depth)?"""
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
    ):
        return True
    return pa.types.is_struct(t) and any(_holds_text(f.type) for f in t)
