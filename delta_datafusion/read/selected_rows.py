"""The row-selection path: units whose rows are chosen by position (deletion vectors, change-feed
deletion-vector diffs), and files the dataset scanner cannot read as the table does (columns named
by field id or in another case, string views under a filter), are read file by file: rows masked
by position, converted to the logical schema, then filtered and projected."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import Future

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..dv import DeletionVectorDescriptor, default_cache, deleted_row_mask
from ..errors import DeletionVectorError, DeltaError
from ..read_schema import (
    ReadSchema,
    case_insensitive_columns,
    cast_column,
    conform,
    field_id,
    id_mode_columns,
)
from ..scan_unit import CHANGE_TYPE, LogFileOfUnit, ScanUnit, logged_in
from ..schema import relabel
from ..storage import Storage
from ..thread_pools import ProcessPool
from .constants import RepeatedValues
from .file_checks import FileChecks
from .page_windows import RowWindow
from .read_errors import ReadErrors

#: Units :meth:`SelectedRows.read_each` prepares ahead at most (deletion vectors read, files opened).
AHEAD = 8
#: The threads preparing units ahead, one pool for every reader of the process: a pool per reader
#: kept up to 2 * AHEAD threads for the reader's life, and a server holds many streams open at once
#: (6 readers held open on a slow store: 41 threads; with this pool at most 16).
_ahead_pool = ProcessPool("delta-ahead", min_workers=2 * AHEAD).get


class SelectedRows:
    """The row-selection path of one reader (``where``: its table and version; ``log_file``: the
    log file of a unit's action, named in a deletion vector error)."""

    def __init__(
        self,
        storage: Storage,
        rs: ReadSchema,
        where: str,
        checks: FileChecks,
        errors: ReadErrors,
        log_file: LogFileOfUnit | None = None,
    ):
        self.storage = storage
        self.log_file = log_file
        self.rs = rs
        self.where = where
        self.checks = checks
        self.errors = errors

    def read(
        self,
        unit,
        columns,
        row_filter,
        filter_columns,
        out_schema,
        bs,
        window: RowWindow | None = None,
        opened: Future[pq.ParquetFile] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """One unit's rows: kept by its row selection, then ``row_filter`` (over ``columns`` and
        ``filter_columns``, logical names), as batches of ``out_schema`` of at most ``bs`` rows.
        ``window``: only its rows can pass the filter; the read stops at its end (pages after it
        are not decoded) and drops the rows before it. ``opened``: the file being opened ahead
        (:meth:`read_each`)."""
        drop = self._bitmap(unit.drop_rows, unit)
        only = self._bitmap(unit.only_rows, unit)
        phys_names = self.rs.to_physical()
        # cdc files store _change_type themselves (it is not a constant of the unit)
        stored = self.rs.file_columns | ({CHANGE_TYPE} if unit.has_change_type_column else set())
        out = list(columns)
        logical = list(dict.fromkeys(out + list(filter_columns)))
        needed = [c for c in logical if c in stored]
        values = RepeatedValues()  # this unit's partition values and constants, made once
        try:
            pf = opened.result() if opened is not None else self._open(unit)
            file_schema = pf.schema_arrow
            rows = pf.metadata.num_rows
            for dv, what in ((drop, "deletion vector"), (only, "rows-to-keep deletion vector")):
                if dv is not None and len(dv) and dv.max() >= rows:
                    raise DeletionVectorError(
                        f"{self.where}: the {what} of data file {unit.location} names "
                        f"row {dv.max()}, but the file has {rows} rows"
                    )
            phys_needed = [phys_names[c] for c in needed]
            key = None if self.rs.id_mode else self.checks.clean_key(file_schema, phys_needed)
            known = None if key is None else self.checks.clean_schemas.get(key)  # as in FileChecks.checked
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
                self.checks.check_stored_types(unit.location, as_table, [p for p, _ in sources.values()])
                read_cols = list(sources)
            else:
                if not known:
                    self.checks.check_stored_types(unit.location, file_schema, phys_needed)
                    if key is not None:
                        self.checks.remember_clean(key, True)
                present = set(file_schema.names)
                read_cols = [phys_names[c] for c in needed if phys_names[c] in present]
            start, stop, groups, size = 0, None, None, bs
            if window is not None:
                start, stop, groups = window.first_row, window.stop, window.groups
                if not groups:
                    return
                # batches that end at the window's end: no page after it is decoded
                k = -(-(stop - start) // bs)
                size = -(-(stop - start) // k)
            for raw in pf.iter_batches(
                batch_size=size, row_groups=groups, columns=read_cols, use_threads=True
            ):
                if stop is not None:  # rows start.. of the file; the window's are kept
                    skip = max(0, window.start - start)
                    keep = min(raw.num_rows, stop - start) - skip
                    if keep <= 0:  # before the window
                        start += raw.num_rows
                        continue
                    raw = raw.slice(skip, keep)
                    start += skip
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
                batch = to_logical(raw, unit, logical, needed, self.rs, values)
                batch = batch.filter(mask) if mask is not None else batch
                if row_filter is not None and batch.num_rows:
                    batch = batch.filter(row_filter)
                if logical != out:  # the filter's own columns go (conform casts by position)
                    batch = batch.select(out)
                yield conform(batch, out_schema)
                if stop is not None and start >= stop:
                    break  # before the reader decodes the next batch
        except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
            raise self.errors.read_error([unit], e) from e

    def read_each(
        self, units: Sequence[ScanUnit], columns, row_filter, filter_columns, out_schema, bs
    ) -> Iterator[pa.RecordBatch]:
        """:meth:`read` of each unit in turn. On an object store, where a unit's deletion vector
        and its file's first read (footer; a small file whole) are each a round trip, the units
        ahead are prepared meanwhile, side by side: vectors read into the process cache, files
        opened. As many ahead as units were read (up to :data:`AHEAD`), so a read stopped early
        (LIMIT) asked for few it did not use. A failure is raised by its unit's read, in order."""
        if self.storage.is_local or len(units) < 2:
            for u in units:
                yield from self.read(u, columns, row_filter, filter_columns, out_schema, bs)
            return
        pool = _ahead_pool()
        ahead: dict[int, tuple[Future[None], Future[pq.ParquetFile]]] = {}  # unit -> (vectors, file)
        try:
            for taken, u in enumerate(units):
                while len(ahead) + taken < min(len(units), 2 * taken + 1, taken + AHEAD):
                    k = taken + len(ahead)
                    ahead[k] = (pool.submit(self._warm, units[k]), pool.submit(self._open, units[k]))
                opened = ahead.pop(taken)[1]
                yield from self.read(u, columns, row_filter, filter_columns, out_schema, bs, opened=opened)
        finally:  # a read stopped early: what was not started is not done
            for pending in ahead.values():
                for future in pending:
                    future.cancel()

    def _open(self, unit: ScanUnit) -> pq.ParquetFile:
        return pq.ParquetFile(
            unit.location, filesystem=self.storage.arrow_fs, coerce_int96_timestamp_unit="us"
        )

    def _warm(self, unit: ScanUnit) -> None:
        """Read ``unit``'s deletion vectors into the process cache; a failure is left for the
        unit's own read to raise."""
        try:
            for dv in (unit.drop_rows, unit.only_rows):
                if dv is not None:
                    default_cache.get(DeletionVectorDescriptor.from_dict(dv), self.storage)
        except Exception:  # noqa: BLE001, S110 - raised by read(), in order and named
            pass

    def _bitmap(self, dv: dict | None, unit: ScanUnit):
        if dv is None:
            return None
        try:
            return default_cache.get(DeletionVectorDescriptor.from_dict(dv), self.storage)
        except DeletionVectorError as e:
            logged = logged_in(self.log_file(unit) if self.log_file is not None else None)
            if unit.location in str(e):
                if not logged:
                    raise
                raise DeletionVectorError(f"{e}{logged}") from e
            raise DeletionVectorError(f"{self.where}, data file {unit.location}: {e}{logged}") from e
        except DeltaError as e:  # the store's (a 'p' path on another store): its type, named
            logged = logged_in(self.log_file(unit) if self.log_file is not None else None)
            raise type(e)(f"{self.where}, deletion vector of data file {unit.location}: {e}{logged}") from e


def to_logical(
    batch: pa.RecordBatch,
    unit: ScanUnit,
    wanted: Sequence[str],
    needed: Sequence[str],
    rs: ReadSchema,
    values: RepeatedValues,
) -> pa.RecordBatch:
    """Physical file batch -> the logical columns ``wanted``, in that order: the stored ones
    (``needed``) converted, partition values and constants from ``values`` (each value's array
    made once per read, see read/constants.py; the columns not wanted are not made)."""
    n = batch.num_rows
    arrays, fields = [], []
    for name in wanted:
        i = rs.logical.get_field_index(name)
        if i < 0:
            raise KeyError(name)  # as a select of it would
        f, pf = rs.logical.field(i), rs.physical.field(i)
        if name in unit.partition_values or name in unit.constants:
            value = unit.partition_values.get(name, unit.constants.get(name))
            arr = values.array(name, f.type, value, n)
        elif name in needed:
            idx = batch.schema.get_field_index(pf.name)
            if idx < 0:
                arr = pa.nulls(n, f.type)
            else:
                # to the physical type first: nested fields are matched by (physical) name,
                # whatever their order or number in this file; then renamed position by position
                arr = cast_column(cast_column(batch.column(idx), pf.type, by_name=True), f.type)
        else:  # a value the unit lacks is NULL, as the dataset path reads it
            arr = values.array(name, f.type, None, n)
        arrays.append(arr)
        fields.append(pa.field(name, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields)) if fields else batch.select([])
