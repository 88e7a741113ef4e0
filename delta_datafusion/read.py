"""Reading scan units into Arrow batches with the table's logical schema.

Rows known from the log come first: when no data column is asked for (count(*), partition
columns, change-feed constants) and the filter is TRUE for every row of a unit (decided by its
partition values / constants, or proved by planning from its statistics), the unit yields
numRecords minus its deletion vector's cardinality rows of those values, unopened.
Everything else is read by one of two paths, both yielding batches cast exactly to the requested
output schema:

- fast path (files without row selection): one pyarrow dataset scan over a group of files, with
  partition values and constant columns given as fragment guarantees (pyarrow fills them) and
  the SQL-exact row filter pushed into pyarrow (row-group pruning included);
- row-selection path (deletion vectors, change-feed DV diffs): each file read in order, rows
  masked by position, then the filter and projection applied.

Column mapping: files are read with the physical schema (physical names, nested too), the filter
is renamed to physical names, and the output is renamed back to logical names (the mapping and
the stored-type rules are in :mod:`.read_schema`).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from .dv import DeletionVectorDescriptor, default_cache, deleted_row_mask
from .errors import (
    ArgumentError,
    ChangeDataFeedError,
    DataFileNotFoundError,
    DeletionVectorError,
    DeltaError,
    StorageError,
    UnsupportedFeatureError,
)
from .read_schema import (
    ConversionError,
    ReadSchema,
    case_insensitive_columns,
    cast_column,
    cast_may_fail,
    conform,
    field_id,
    has_float,
    id_mode_columns,
    is_view,
    readable_as,
    same_storage,
    shredded_field,
)
from .scan_unit import CHANGE_TYPE, COMMIT_VERSION, ScanUnit
from .schema import relabel
from .storage import Storage

#: Batch size for pyarrow decoding: DataFusion's 8192 costs 1.5-2x more CPU (measured).
MIN_BATCH_SIZE = 131072
#: The largest batch pyarrow's readers take (a C int); a larger ``batch_size`` decodes in these.
MAX_BATCH_SIZE = 2**31 - 1


def checked_batch_size(batch_size: Any) -> int | None:
    """The Python API's ``batch_size`` argument: None or a positive integer."""
    if batch_size is None:
        return None
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size <= 0:
        raise ArgumentError(f"batch_size must be a positive integer, got {batch_size!r}")
    return int(batch_size)


def batches_of_at_most(batches: Iterator[pa.RecordBatch], batch_size: int | None) -> Iterator[pa.RecordBatch]:
    """The Python API's ``batch_size``: decoding uses large batches (MIN_BATCH_SIZE), handed out
    in zero-copy slices of at most ``batch_size`` rows."""
    if batch_size is None:
        yield from batches
        return
    batch_size = checked_batch_size(batch_size)
    for batch in batches:
        if batch.num_rows <= batch_size:
            yield batch
            continue
        for start in range(0, batch.num_rows, batch_size):
            yield batch.slice(start, batch_size)


#: Batch size of an unfiltered scan's first row group (time to the first rows).
FIRST_BATCH_ROWS = 8192
#: Files of a failed read checked for existence on an object store, beyond those the error names.
MAX_EXISTENCE_CHECKS = 64


#: What reading a data file raises of its own (the OS, pyarrow, the type checks); anything else
#: came from an fsspec store itself (an HTTP client's error). Both name the file (_file_error).
_READ_ERRORS = (OSError, pa.ArrowException, ConversionError)

# Facts read once from a data file's footer, per (location, size)
_FOOTER_LOCK = threading.Lock()
_VIEW_CACHE: dict[tuple[str, int], frozenset[str]] = {}
_ID_CACHE: dict[tuple[str, int], dict[str, tuple[str, pa.DataType]] | None] = {}


def _guarantee(unit: ScanUnit, rs: ReadSchema) -> ds.Expression | None:
    """Partition values and constants as a fragment guarantee (pyarrow fills these columns)."""
    expr = None
    values = dict(unit.partition_values)
    values.update(unit.constants)
    for name, value in values.items():
        idx = rs.logical.get_field_index(name)
        if idx < 0:
            continue
        typ = rs.logical.field(idx).type
        field = ds.field(rs.physical.field(idx).name)  # the name the scan reads it under
        term = field.is_null() if value is None else (field == pa.scalar(value, typ))
        expr = term if expr is None else expr & term
    return expr


class UnitReader:
    """Reads groups of scan units for one table version; safe to use from several threads."""

    def __init__(self, storage: Storage, rs: ReadSchema, table_label: str, version: int | None):
        self.storage = storage
        self.rs = rs
        self.label = table_label
        self.version = version
        self._lock = threading.Lock()
        self._fmt: ds.ParquetFileFormat | None = None
        # per reader: the fact depends on which columns of this table version are variants
        self._shredded: dict[tuple[str, int], tuple[tuple[str, str], ...]] = {}
        # file schemas found to name the columns read as the table does (False), and with types
        # it can read (True); see :meth:`_checked`: every file of a table repeats a few schemas
        self._clean: dict[tuple[bytes, tuple[str, ...]], bool] = {}
        self._physical_types = dict(zip(rs.physical.names, rs.physical.types, strict=True))

    @property
    def _where(self) -> str:
        """The table (and version) for error messages."""
        return f"table {self.label}" + (f" version {self.version}" if self.version is not None else "")

    # -- public -----------------------------------------------------------------------------
    def read(
        self,
        units: Sequence[ScanUnit],
        columns: Sequence[str],
        predicate: Any = None,
        batch_size: int | None = None,
        first_rows_early: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        """Batches of ``columns`` (logical names) for the rows where ``predicate`` is TRUE.

        ``predicate`` is a :mod:`.predicate` tree; it is turned into an SQL-exact pyarrow filter.
        The units must come from planning with this same predicate: their ``all_rows_match``
        flags (rows counted from the log, row filters left out) refer to it.
        ``first_rows_early``: an unfiltered read yields its first rows in small batches before the
        first row group is decoded whole (for a LIMIT); a caller that has already yielded rows
        passes False (small batches cost more CPU per row).
        """
        batches = self._read(units, columns, predicate, batch_size, first_rows_early)
        if CHANGE_TYPE not in columns or not any(u.has_change_type_column for u in units):
            return batches
        return self._checked_change_types(batches, units)

    def _checked_change_types(
        self, batches: Iterator[pa.RecordBatch], units: Sequence[ScanUnit]
    ) -> Iterator[pa.RecordBatch]:
        """Change types are never null: only a change-data file without the column makes one."""
        for batch in batches:
            if batch.column(CHANGE_TYPE).null_count:
                cdc = [u.location for u in units if u.has_change_type_column]
                which = cdc[0] if len(cdc) == 1 else f"one of {len(cdc)} read together, the first {cdc[0]}"
                raise ChangeDataFeedError(
                    f"table {self.label}: a change data file has no {CHANGE_TYPE} column ({which})"
                )
            yield batch

    def _read(
        self,
        units: Sequence[ScanUnit],
        columns: Sequence[str],
        predicate: Any = None,
        batch_size: int | None = None,
        first_rows_early: bool = True,
    ) -> Iterator[pa.RecordBatch]:
        from .predicate import referenced_columns, to_pyarrow

        out_schema = pa.schema([self.rs.logical.field(c) for c in columns])
        bs = min(max(batch_size or 0, MIN_BATCH_SIZE), MAX_BATCH_SIZE)
        self.storage.note_sizes((u.location, u.size) for u in units)
        variants = self.rs.variant_columns
        if variants:
            variants = variants.intersection(columns) | (
                variants & referenced_columns(predicate) if predicate is not None else frozenset()
            )
        if variants:
            self._refuse_shredded_variants(units, variants)
        if not any(c in self.rs.file_columns for c in columns):
            # Only row counts, partition values or constants are asked for (count(*), GROUP BY a
            # partition column, count by _change_type): a file whose rows all match (see
            # _all_rows_match) gives its stats' numRecords minus its deletion vector's cardinality
            # rows of its own values, unopened.
            matching = self._all_rows_match(units, predicate)
            counted = [
                (u, _known_row_count(u) if ok and _constant_columns(u, columns) else None)
                for u, ok in zip(units, matching, strict=True)
            ]
            yield from _constant_batches([(u, n) for u, n in counted if n], columns, out_schema, bs)
            units = [u for u, n in counted if n is None]
        plain = [u for u in units if not u.needs_row_selection]
        selected = [u for u in units if u.needs_row_selection]
        if plain and self.rs.id_mode:
            # files naming columns differently from the physical names are read by field id
            by_id = [self._id_columns(u) is not None for u in plain]
            selected = selected + [u for u, renamed in zip(plain, by_id, strict=True) if renamed]
            plain = [u for u, renamed in zip(plain, by_id, strict=True) if not renamed]
        if plain and predicate is not None:
            text_cols = self._filtered_text_columns(predicate)
            if text_cols:
                # pyarrow cannot compare a string literal with a string_view column stored by some
                # writers (delta-rs UPDATE/MERGE); files storing a filtered column as a view are
                # read, cast, then filtered.
                views = [u for u in plain if self._view_columns(u) & text_cols]
                if views:
                    plain = [u for u in plain if not (self._view_columns(u) & text_cols)]
                    selected = selected + views
        if plain and predicate is not None:
            # A predicate on a unit's own constants (partition values, change-feed columns) that
            # planning proved TRUE for the unit needs no row filter (a partition-pruned TPC-H
            # query over 16 files: 16 -> 13 ms); statistics-proven ones keep it (statistics can
            # be wrong, and the filter is what reads the data).
            on = referenced_columns(predicate)
            decided = [
                u.all_rows_match and on <= (u.partition_values.keys() | u.constants.keys()) for u in plain
            ]
            if any(decided):
                selected = selected + (
                    yield from self._read_plain(
                        [u for u, d in zip(plain, decided, strict=True) if d],
                        columns,
                        None,
                        out_schema,
                        bs,
                        first_rows_early=False,
                    )
                )
                plain = [u for u, d in zip(plain, decided, strict=True) if not d]
                first_rows_early = False
        if plain:
            renamed = self.rs.renamed_paths
            scan_pred, post_pred = self._split_nan_sensitive(predicate)
            pfilter = None if scan_pred is None else to_pyarrow(scan_pred, rename=renamed or None)
            post = None if post_pred is None else to_pyarrow(post_pred, rename=renamed or None)
            post_cols = [] if post_pred is None else sorted(referenced_columns(post_pred))
            filter_cols = [] if scan_pred is None else sorted(referenced_columns(scan_pred))
            selected = selected + (
                yield from self._read_plain(
                    plain, columns, pfilter, out_schema, bs, post, post_cols, first_rows_early, filter_cols
                )
            )
        if selected:
            lfilter = None if predicate is None else to_pyarrow(predicate)
            fcols = sorted(referenced_columns(predicate)) if predicate is not None else []
            for u in selected:
                yield from self._read_selected(u, columns, lfilter, fcols, out_schema, bs)

    def _split_nan_sensitive(self, predicate: Any) -> tuple[Any, Any]:
        """``(scan, post)``: the conjuncts pyarrow may use to skip row groups, and those on
        floating-point columns, applied to the rows after reading.

        Parquet writers leave NaN out of min/max statistics, and pyarrow's row-group skipping
        trusts them: a row group holding 0.1 and NaN has min = max = 0.1, so pyarrow rewrites
        ``f`` as 0.1 and drops the group for ``f > 2.0`` (SQL orders NaN above every number) or
        ``f <> 0.1``. So a conjunct on a float column reaches the scanner only when no NaN value
        can satisfy it (:func:`_false_for_nan`): then the statistics still bound every matching
        row, and pyarrow's skipping stays right (it still filters the rows it reads).
        """
        from .predicate import TRUE, conjunction, conjuncts, referenced_columns

        if predicate is None or predicate == TRUE:
            return predicate, None
        floats = {f.name for f in self.rs.logical if has_float(f.type)}
        scan, post = [], []
        for c in conjuncts(predicate):
            (post if referenced_columns(c) & floats and not _false_for_nan(c, floats) else scan).append(c)
        if not post:
            return predicate, None
        return (conjunction(scan) if scan else None), conjunction(post)

    def _all_rows_match(self, units: Sequence[ScanUnit], predicate: Any) -> list[bool]:
        """Per unit: is ``predicate`` TRUE for every row? Planning decides it (``all_rows_match``:
        partition values, change-feed constants or exact statistics; see
        skipping.file_all_match_mask); without a predicate every row matches."""
        from .predicate import TRUE

        if predicate is None or predicate == TRUE:
            return [True] * len(units)
        return [u.all_rows_match for u in units]

    def _format(self, sample: ScanUnit) -> ds.ParquetFileFormat:
        """The parquet format for fast-path reads, chosen once per reader from one file's footer.

        Low-cardinality string columns (small dictionary pages) are decoded as dictionaries and
        cast to string by the dataset: measured 2x cheaper than pyarrow's plain string decode
        (TPC-H l_returnflag: 0.40 s -> 0.21 s for 6M rows), while high-cardinality ones would be
        2x slower that way, so they keep the plain decode.
        """
        with self._lock:  # held while choosing: scan partitions start together, one reads the footer
            if self._fmt is None:
                self._fmt = self._choose_format(sample)
            return self._fmt

    def _choose_format(self, sample: ScanUnit) -> ds.ParquetFileFormat:
        dict_cols: list[str] = []
        strings = {
            pf.name
            for pf in self.rs.physical
            if pa.types.is_string(pf.type) or pa.types.is_large_string(pf.type)
        }
        if strings:
            try:
                md = pq.ParquetFile(sample.location, filesystem=self.storage.arrow_fs).metadata
                if md.num_row_groups:
                    rg = md.row_group(0)
                    for i in range(rg.num_columns):
                        col = rg.column(i)
                        name = col.path_in_schema
                        if (
                            name in strings
                            and col.has_dictionary_page
                            and col.dictionary_page_offset is not None
                        ):
                            dict_bytes = col.data_page_offset - col.dictionary_page_offset
                            if 0 < dict_bytes * 10 < col.total_compressed_size:
                                dict_cols.append(name)
            except (OSError, pa.ArrowInvalid):
                dict_cols = []
        opts: dict[str, Any] = {"coerce_int96_timestamp_unit": "us"}
        if dict_cols:
            opts["dictionary_columns"] = dict_cols
        scan_opts = None
        if self.storage.is_local:
            # pre-buffering coalesces ranged reads for object stores; on local files it only adds
            # async overhead (measured: 2,050 small files 680 -> 600 ms, lineitem Q1 scan -7 %)
            scan_opts = ds.ParquetFragmentScanOptions(pre_buffer=False)
        return ds.ParquetFileFormat(read_options=opts, default_fragment_scan_options=scan_opts)

    def _filtered_text_columns(self, predicate: Any) -> frozenset[str]:
        """Physical names of the string/binary file columns the predicate reads."""
        from .predicate import referenced_columns

        phys = self.rs.to_physical()
        out = set()
        for name in referenced_columns(predicate):
            idx = self.rs.logical.get_field_index(name)
            if idx >= 0 and name in self.rs.file_columns:
                t = self.rs.logical.field(idx).type
                if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t):
                    out.add(phys[name])
        return frozenset(out)

    def _view_columns(self, unit: ScanUnit) -> frozenset[str]:
        """Top-level columns the file stores as string_view/binary_view (footer read once, cached)."""
        return self._footer_fact(
            _VIEW_CACHE,
            unit,
            lambda schema: frozenset(f.name for f in schema if is_view(f.type)),
            frozenset(),
        )

    def _refuse_shredded_variants(self, units: Sequence[ScanUnit], columns: frozenset[str]) -> None:
        """A shredded VARIANT keeps part of its data outside ``value`` (``typed_value``), which
        reading the struct of binaries would silently lose: such a file is refused (the tables
        that may hold one, with ``variantShredding-preview``, are refused before this)."""
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
            for name, (logical, want) in declared.items():
                idx = schema.get_field_index(name)
                found = shredded_field(schema.field(idx).type, want, logical) if idx >= 0 else None
                if found:
                    out.append((name, found))
            return tuple(out)

        for u in units:
            found = self._footer_fact(self._shredded, u, shredded, None)
            if found is None:  # footer unreadable (perhaps for a moment): unchecked is unread
                try:
                    found = shredded(pq.read_schema(u.location, filesystem=self.storage.arrow_fs))
                except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
                    raise self._read_error([u], e) from e
            where = [w for name, w in found if name in wanted]
            if where:
                raise UnsupportedFeatureError(
                    f"{self._where}: data file {u.location} stores the VARIANT {where[0]} "
                    "shredded (fields besides value and metadata): shredded variants are not "
                    "reassembled by this reader"
                )

    def _id_columns(self, unit: ScanUnit) -> dict[str, tuple[str, pa.DataType]] | None:
        """:func:`id_mode_columns` of a file (footer read once, cached)."""
        try:
            return self._footer_fact(
                _ID_CACHE,
                unit,
                lambda schema: id_mode_columns(schema, self.rs.physical),
                None,
                # the mapping depends on the schema read with (a file is read at several versions)
                self.rs.physical_key,
            )
        except ConversionError as e:  # a file without field ids
            raise self._file_error([unit], e) from e

    def _footer_fact(
        self,
        cache: dict,
        unit: ScanUnit,
        derive: Callable[[pa.Schema], Any],
        unreadable: Any,
        depends_on: Any = None,
    ) -> Any:
        """``derive(file schema)`` of a data file, cached per file (data files never change, so the
        footer is read once per process) and per ``depends_on`` (whatever else ``derive`` reads);
        ``unreadable`` when the footer cannot be read (the read itself reports that). Each cache is
        bounded like the other per-file caches."""
        key = (unit.location, unit.size, depends_on)
        with _FOOTER_LOCK:
            if key in cache:
                return cache[key]
        try:
            found = derive(pq.read_schema(unit.location, filesystem=self.storage.arrow_fs))
        except (OSError, pa.ArrowInvalid):
            return unreadable  # not cached: the failure may pass
        with _FOOTER_LOCK:
            if len(cache) >= 65536:
                cache.clear()
            cache[key] = found
        return found

    # -- fast path ---------------------------------------------------------------------------
    def _read_plain(
        self,
        units,
        columns,
        pfilter,
        out_schema,
        bs,
        post=None,
        post_columns=(),
        first_rows_early=True,
        filter_columns=(),
    ) -> Generator[pa.RecordBatch, None, list[ScanUnit]]:
        """Read ``units`` with pyarrow's dataset scanner. Returns the units left unread because
        their files name a column in another case (see :meth:`_named_otherwise`): the scanner
        would read those columns as NULL, so they are read by :meth:`_read_selected`."""
        phys_names = self.rs.to_physical()
        fs = self.storage.arrow_fs
        fmt = self._format(units[0])
        frags = [
            fmt.make_fragment(
                u.location, fs, partition_expression=_guarantee(u, self.rs), file_size=u.size or None
            )
            for u in units
        ]
        phys_cols = [phys_names[c] for c in columns]
        # columns the post filter reads are scanned too, then dropped
        scan_cols = list(dict.fromkeys(phys_cols + [phys_names[c] for c in post_columns]))
        # per file, the columns the scan reads from it, the pushed filter's included (partition
        # values and constants come from the log even where a file holds a copy)
        logical = list(dict.fromkeys(list(columns) + list(post_columns) + list(filter_columns)))
        stored_cols = {
            u.location: [
                phys_names[c]
                for c in logical
                if c in self.rs.file_columns or (c == CHANGE_TYPE and u.has_change_type_column)
            ]
            for u in units
        }
        # The first file is scanned on its own: pyarrow's scanner reads several files ahead before
        # its first batch, which a LIMIT query would pay in full (TPC-H lineitem, SELECT * LIMIT
        # 10: 190 -> 40 ms); full scans measured the same either way.
        parts = [frags[:1], frags[1:]] if len(frags) > 1 and first_rows_early else [frags]
        other_case: set[str] = set()
        try:
            if pfilter is None and post is None and first_rows_early:
                # Unfiltered (a LIMIT's first rows): the dataset scanner decodes a whole row group
                # before its first batch; the first row group streams in small batches instead
                # (lineitem, SELECT * LIMIT 10: first batch 10 -> 4 ms).
                rest = yield from self._stream_first_row_group(units[0], columns, out_schema)
                first = (
                    []
                    if not rest
                    else [
                        fmt.make_fragment(
                            units[0].location,
                            fs,
                            partition_expression=_guarantee(units[0], self.rs),
                            row_groups=rest,
                            file_size=units[0].size or None,
                        )
                    ]
                )
                parts = [first, frags[1:]]
            for part in parts:
                if not part:
                    continue
                dataset = ds.FileSystemDataset(part, self.rs.physical, fmt, fs)
                scanner = dataset.scanner(columns=scan_cols, filter=pfilter, batch_size=bs, use_threads=True)
                # pyarrow casts each file's columns to the table's types, whatever they are
                # (numeric strings to numbers, timestamps to dates): every file's stored types are
                # checked, from the footer the scan has read (cached in the fragment)
                checked: set[str] = set()
                for tagged in scanner.scan_batches():
                    path = tagged.fragment.path
                    if path in other_case:
                        continue
                    if path not in checked:
                        checked.add(path)
                        if self._checked(path, tagged.fragment.physical_schema, stored_cols[path]):
                            other_case.add(path)
                            continue
                    batch = tagged.record_batch
                    if post is not None:
                        batch = batch.filter(post)
                        if len(scan_cols) != len(phys_cols):
                            batch = batch.select(phys_cols)
                    yield conform(batch, out_schema)
                for frag in part:  # files that gave no rows were read as well (a filter on them)
                    if frag.path not in checked and self._checked(
                        frag.path, frag.physical_schema, stored_cols[frag.path]
                    ):
                        other_case.add(frag.path)
        except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
            raise self._read_error(units, e) from e
        return [u for u in units if u.location in other_case]

    def _clean_key(self, stored: pa.Schema, columns: Sequence[str]) -> tuple[bytes, tuple[str, ...]]:
        """What :meth:`_checked` remembers a clean file schema by: its serialized bytes (exact:
        names, types, nesting; 1 ms for 5,000 columns, where pyarrow's schema comparison computes
        a fingerprint costing 5 ms) and the columns read from it."""
        return stored.serialize().to_pybytes(), tuple(columns)

    def _remember_clean(self, key: tuple[bytes, tuple[str, ...]], types: bool) -> None:
        if len(self._clean) >= 32:  # a few schemas per table; bounded, the keys are large
            self._clean.clear()
        self._clean[key] = types

    def _checked(self, location: str, stored: pa.Schema, columns: Sequence[str], types: bool = True) -> bool:
        """:meth:`_named_otherwise`, and (``types``) :meth:`_check_stored_types` for a file that
        is not. The checks cost ~30 ms a file at 5,000 columns, so a schema that passed them is
        remembered and not checked again (errors are not remembered: each file names itself)."""
        key = self._clean_key(stored, columns)
        known = self._clean.get(key)  # None: not checked; False: names only; True: types too
        if known or (known is not None and not types):
            return False
        if known is None and self._named_otherwise(location, stored, columns):
            return True
        if types:
            self._check_stored_types(location, stored, columns)
        self._remember_clean(key, types)
        return False

    def _named_otherwise(self, location: str, stored: pa.Schema, columns: Sequence[str]) -> bool:
        """Does the file name one of ``columns`` (physical names), or a field nested in one, only
        in another case? Not in id mode, where field ids decide."""
        if self.rs.id_mode:
            return False
        try:
            return case_insensitive_columns(stored, self.rs.physical, columns) is not None
        except ConversionError as e:
            raise DeltaError(f"{self._where}: data file {location}: {e}") from e

    def _stream_first_row_group(
        self, unit: ScanUnit, columns: Sequence[str], out_schema: pa.Schema
    ) -> Iterator[pa.RecordBatch]:
        """Yield the unit's first row group in small batches; return its other row groups."""
        pf = pq.ParquetFile(unit.location, filesystem=self.storage.arrow_fs, coerce_int96_timestamp_unit="us")
        groups = pf.metadata.num_row_groups
        if groups == 0:
            return []
        phys_names = self.rs.to_physical()
        file_schema = pf.schema_arrow
        # cdc files store _change_type themselves (it is not a constant of the unit)
        stored = self.rs.file_columns | ({CHANGE_TYPE} if unit.has_change_type_column else set())
        needed = [c for c in columns if c in stored]
        # names only: a type the dataset converts is refused there, by its own path's error
        if self._checked(unit.location, file_schema, [phys_names[c] for c in needed], types=False):
            return list(range(groups))  # the dataset path hands it to the row-selection path
        stored_types = dict(zip(file_schema.names, file_schema.types, strict=True))
        read_cols = [phys_names[c] for c in needed if phys_names[c] in stored_types]
        if len(stored_types) < len(file_schema):  # a name stored twice: pyarrow's lookup refuses it
            stored_types = {c: file_schema.field(c).type for c in read_cols}
        physical = self._physical_types
        if not all(same_storage(stored_types[c], physical[c]) for c in read_cols):
            return list(range(groups))  # types the dataset converts (or refuses) its own way
        for raw in pf.iter_batches(
            batch_size=FIRST_BATCH_ROWS, row_groups=[0], columns=read_cols, use_threads=True
        ):
            yield conform(self._to_logical(raw, unit, needed).select(list(columns)), out_schema)
        return list(range(1, groups))

    # -- row-selection path -------------------------------------------------------------------
    def _read_selected(
        self, unit, columns, row_filter, filter_columns, out_schema, bs
    ) -> Iterator[pa.RecordBatch]:
        drop = self._bitmap(unit.drop_rows, unit)
        only = self._bitmap(unit.only_rows, unit)
        phys_names = self.rs.to_physical()
        # cdc files store _change_type themselves (it is not a constant of the unit)
        stored = self.rs.file_columns | ({CHANGE_TYPE} if unit.has_change_type_column else set())
        needed = [c for c in dict.fromkeys(list(columns) + list(filter_columns)) if c in stored]
        try:
            pf = pq.ParquetFile(
                unit.location, filesystem=self.storage.arrow_fs, coerce_int96_timestamp_unit="us"
            )
            file_schema = pf.schema_arrow
            rows = pf.metadata.num_rows
            for dv, what in ((drop, "deletion vector"), (only, "rows-to-keep deletion vector")):
                if dv is not None and len(dv) and dv.max() >= rows:
                    raise DeletionVectorError(
                        f"{self._where}: the {what} of data file {unit.location} names "
                        f"row {dv.max()}, but the file has {rows} rows"
                    )
            phys_needed = [phys_names[c] for c in needed]
            key = None if self.rs.id_mode else self._clean_key(file_schema, phys_needed)
            known = None if key is None else self._clean.get(key)  # as in _checked
            if self.rs.id_mode:
                by_id = id_mode_columns(file_schema, self.rs.physical)
            elif known is not None:  # a schema checked before: names as the table's
                by_id = None
            else:  # a file naming columns in another case than the table
                by_id = case_insensitive_columns(file_schema, self.rs.physical, phys_needed)
            if by_id is not None:  # file column -> physical name, nested fields renamed by id or case
                wanted = {phys_names[c] for c in needed}
                sources = {by_id[p][0]: (p, by_id[p][1]) for p in wanted if p in by_id}
                # a stored column that is not a table column (a cdc file's _change_type) has no
                # field id: it is found by name
                for p in wanted - by_id.keys():
                    i, j = file_schema.get_field_index(p), self.rs.physical.get_field_index(p)
                    if i >= 0 and j >= 0 and field_id(self.rs.physical.field(j)) is None and p not in sources:
                        sources[p] = (p, file_schema.field(i).type)
                # the stored types, under the physical names the field ids give
                as_table = pa.schema([pa.field(p, t) for p, t in sources.values()])
                self._check_stored_types(unit.location, as_table, [p for p, _ in sources.values()])
                read_cols = list(sources)
            else:
                if not known:
                    self._check_stored_types(unit.location, file_schema, phys_needed)
                    if key is not None:
                        self._remember_clean(key, True)
                present = set(file_schema.names)
                read_cols = [phys_names[c] for c in needed if phys_names[c] in present]
            start = 0
            for raw in pf.iter_batches(batch_size=bs, columns=read_cols, use_threads=True):
                if by_id is not None and raw.num_columns:
                    raw = pa.RecordBatch.from_arrays(
                        [relabel(raw.column(name), sources[name][1]) for name in raw.schema.names],
                        names=[sources[name][0] for name in raw.schema.names],
                    )
                n = raw.num_rows
                mask = None
                if drop is not None:
                    mask = deleted_row_mask(drop, start, n)
                if only is not None:
                    keep_only = pc.invert(deleted_row_mask(only, start, n))
                    mask = keep_only if mask is None else pc.and_(mask, keep_only)
                start += n
                # logical first: pyarrow cannot filter the string_view columns some writers store
                batch = self._to_logical(raw, unit, needed)
                batch = batch.filter(mask) if mask is not None else batch
                if row_filter is not None and batch.num_rows:
                    batch = batch.filter(row_filter)
                # _to_logical adds every partition value and constant: keep the requested columns
                # in the requested order (conform casts by position)
                batch = batch.select(list(columns))
                yield conform(batch, out_schema)
        except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
            raise self._read_error([unit], e) from e

    def _to_logical(self, batch: pa.RecordBatch, unit: ScanUnit, needed: Sequence[str]) -> pa.RecordBatch:
        """Physical file batch -> logical columns incl. partition values and constants."""
        n = batch.num_rows
        arrays, fields = [], []
        for f, pf in zip(self.rs.logical, self.rs.physical, strict=True):
            name = f.name
            if name in unit.partition_values or name in unit.constants:
                value = unit.partition_values.get(name, unit.constants.get(name))
                arr = pa.nulls(n, f.type) if value is None else pa.repeat(pa.scalar(value, f.type), n)
            elif name in needed:
                idx = batch.schema.get_field_index(pf.name)
                if idx < 0:
                    arr = pa.nulls(n, f.type)
                else:
                    # to the physical type first: nested fields are matched by (physical) name,
                    # whatever their order or number in this file; then renamed position by position
                    arr = cast_column(cast_column(batch.column(idx), pf.type, by_name=True), f.type)
            else:
                continue
            arrays.append(arr)
            fields.append(pa.field(name, f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)) if fields else batch.select([])

    def _bitmap(self, dv: dict | None, unit: ScanUnit):
        if dv is None:
            return None
        try:
            return default_cache.get(DeletionVectorDescriptor.from_dict(dv), self.storage)
        except DeletionVectorError as e:
            if unit.location in str(e):
                raise
            raise DeletionVectorError(f"{self._where}, data file {unit.location}: {e}") from e

    def _read_error(self, units: Sequence[ScanUnit], e: Exception) -> Exception:
        """What a failed read of ``units`` raises: the package's own errors as they are (they name
        their file already), anything else (pyarrow's, a store's) as :meth:`_file_error`."""
        if isinstance(e, DeltaError) and not isinstance(e, ConversionError):
            return e
        return self._file_error(units, e)

    def _file_error(self, units: Sequence[ScanUnit], e: Exception) -> DeltaError:
        named = _named_in(units, str(e))
        where = self._where
        try:
            missing = self._missing_files(units, named)
        except StorageError as denied:  # a file or folder the store does not let us look at
            return StorageError(f"{where}: {denied}")
        if missing:
            # in a change feed, the commit whose change needs the file (not the range's end)
            versions = {u.constants.get(COMMIT_VERSION) for u in units if u.location == missing[0]}
            versions.discard(None)
            of = f" (of the change at version {min(versions)})" if versions else ""
            return DataFileNotFoundError(
                f"{where}: data file {missing[0]}{of} is missing (removed by VACUUM or deleted outside Delta)"
            )
        reason = str(e).splitlines()[0][:400]
        if not isinstance(e, _READ_ERRORS):
            reason = f"{type(e).__name__}: {reason}"  # a store's own error: its type says what
        # the store failed (network, timeout, access): a retry may succeed, the file is not bad
        store_failed = _store_failure(e)
        culprit = None if store_failed else self._mismatched_file(units)
        if culprit is not None:
            location, column, stored, expected = culprit
            return DeltaError(
                f"{where}: data file {location} stores column {column!r} as {stored}, but the table "
                f"schema says {expected} ({reason})"
            )
        kind = StorageError if store_failed else DeltaError
        if len(units) == 1 or named:
            location = (named or units)[0].location
            reason = reason.removeprefix(f"{location}: ")  # the store's error named it already
            return kind(f"{where}: cannot read data file {location}: {reason}")
        return kind(
            f"{where}: cannot read one of {len(units)} data files (the first is {units[0].location}): {reason}"
        )

    def _missing_files(self, units: Sequence[ScanUnit], named: list[ScanUnit]) -> list[str]:
        """After a failed read: data files of ``units`` that do not exist, those the error
        ``named`` first. On object stores each check is a request, so at most 64 unnamed files are
        checked (a 300k-file scan checked every file: 300,000 requests before the error)."""
        named_locations = {u.location for u in named}
        others = [u for u in units if u.location not in named_locations]
        if not self.storage.is_local:
            others = others[:MAX_EXISTENCE_CHECKS]
        for group in (named, others):
            try:
                missing = [u.location for u in group if not self.storage.exists(u.location)]
            except StorageError:
                if group is others and named:  # the error named its file: that one is the culprit
                    return []
                raise
            if missing:
                return missing
        return []

    def _check_stored_types(self, location: str, stored: pa.Schema, columns: Sequence[str]) -> None:
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
                    f"{self._where}: data file {location} stores column {name!r} as {have}, but the table "
                    f"schema says {want}, and that is not a type change Delta allows (PROTOCOL.md type widening)"
                )

    def _mismatched_file(self, units: Sequence[ScanUnit]) -> tuple[str, str, pa.DataType, pa.DataType] | None:
        """After a failed read: the first file (of at most 1,000) storing a table column as a
        type it cannot be read as (see :func:`readable_as`), to name it in the error."""
        expected = {f.name: f.type for f in self.rs.physical}
        wider = None  # else the first column stored wider than the table's type: a value may not fit
        for u in units[:1000]:
            try:
                schema = pq.read_schema(u.location, filesystem=self.storage.arrow_fs)
            except (OSError, pa.ArrowInvalid):
                return None  # unreadable: the original error says more
            for f in schema:
                want = expected.get(f.name)
                if want is not None and not readable_as(f.type, want):
                    return u.location, f.name, f.type, want
                if wider is None and want is not None and cast_may_fail(f.type, want):
                    wider = (u.location, f.name, f.type, want)
        return wider


def _false_for_nan(pred: Any, floats: set[str]) -> bool:
    """Is ``pred`` never TRUE for a row whose float columns hold NaN (whatever the rest holds),
    and safe from pyarrow's float statistics otherwise?

    Shapes known safe: ``f < c``, ``f <= c`` and ``f = c`` against non-NaN literals (NaN sorts
    above every number and equals only NaN), IS [NOT] NULL (statistics count nulls exactly),
    comparisons not touching a float column, and AND / OR of such shapes. Anything else (``f >
    c``, ``<>``, NOT, two float columns compared) is not. Neither is ``f IN (...)``: pyarrow drops
    a row group of zeros (statistics min -0.0, max +0.0) for ``f IN (0.0, ...)``, its set lookup
    telling -0.0 from 0.0."""
    from .predicate import And, Column, Comparison, In, IsNotNull, IsNull, Literal, Or

    if isinstance(pred, (And, Or)):
        return all(_false_for_nan(c, floats) for c in pred.children)
    if isinstance(pred, (IsNull, IsNotNull)):
        return True
    if isinstance(pred, In):
        on_float = isinstance(pred.operand, Column) and pred.operand.name in floats
        return not on_float and not pred.negated and not any(v.is_nan for v in pred.values)
    if isinstance(pred, Comparison):
        left, right, op = pred.left, pred.right, pred.op
        if isinstance(left, Literal) and isinstance(right, Column):
            left, right, op = right, left, {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
        if not (isinstance(left, Column) and left.name in floats):
            return not (isinstance(right, Column) and right.name in floats)
        return isinstance(right, Literal) and not right.is_nan and op in ("<", "<=", "=")
    return False


def _constant_columns(unit: ScanUnit, columns: Sequence[str]) -> bool:
    """Are all ``columns`` partition values or constants of the unit (not stored in its file)?"""
    return all(
        c in unit.partition_values or (c in unit.constants and not unit.has_change_type_column)
        for c in columns
    )


def _constant_batches(
    counted: Sequence[tuple[ScanUnit, int]], columns: Sequence[str], schema: pa.Schema, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """Batches of ``n`` rows of each unit's partition values / constants (rows known from the log);
    units with the same values share their batches, and a full batch is built once and repeated."""
    if not columns:
        total = sum(n for _, n in counted)
        if total:
            yield pa.RecordBatch.from_arrays([pa.nulls(total)], names=["n"]).select([])
        return
    rows: dict[tuple, int] = {}
    for u, n in counted:
        key = tuple(u.partition_values[c] if c in u.partition_values else u.constants[c] for c in columns)
        rows[key] = rows.get(key, 0) + n
    for values, total in rows.items():
        scalars = [pa.array([v], f.type)[0] for v, f in zip(values, schema, strict=True)]
        full = None
        while total > 0:
            n = min(total, batch_size)
            if n == batch_size and full is not None:
                batch = full
            else:
                batch = pa.RecordBatch.from_arrays([pa.repeat(sc, n) for sc in scalars], schema=schema)
                if n == batch_size:
                    full = batch
            yield batch
            total -= n


#: More rows than a data file is taken to hold: statistics claiming more are read, not trusted.
MAX_TRUSTED_ROWS = 2**31 - 1


def _known_row_count(unit: ScanUnit) -> int | None:
    """Live rows of a unit known from the log alone, or None when the file must be read (also
    when the log's figures are impossible: a negative or huge numRecords, a deletion vector
    deleting fewer than none or more rows than the file has; the read then checks the file)."""
    n = unit.num_records
    if n is None or unit.only_rows is not None or not 0 <= n <= MAX_TRUSTED_ROWS:
        return None
    if unit.drop_rows is None:
        return n
    cardinality = unit.drop_rows.get("cardinality")
    if not isinstance(cardinality, int) or not 0 <= cardinality <= n:
        return None
    return n - cardinality


def _store_failure(e: BaseException) -> bool:
    """Did a read fail because the store did? pyarrow wraps an fsspec store's ConnectionError,
    TimeoutError or PermissionError in an OSError whose cause it is, and lets other exceptions of
    the store's (an HTTP client's) through as they are."""
    if not isinstance(e, _READ_ERRORS):  # a store's own (HTTP client's) error
        return True
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, (ConnectionError, TimeoutError, PermissionError)):
            return True
        seen.add(id(cur))
        # the explicit cause only: __context__ is whatever the caller was handling meanwhile
        cur = cur.__cause__
    return False


def _named_in(units: Sequence[ScanUnit], error: str) -> list[ScanUnit]:
    """The units whose file an error message names (by location or local path)."""
    return [u for u in units if u.location in error or _local_path(u.location) in error]


def _local_path(location: str) -> str:
    """``location`` without a ``file://`` scheme, as pyarrow names local files in its errors."""
    return location[len("file://") :] if location.startswith("file://") else location
