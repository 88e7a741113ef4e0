"""The reader of scan units: :class:`UnitReader` chooses how each unit's rows are read (from the
log, by the dataset path, by the row-selection path) and holds the dataset (fast) path: one
pyarrow dataset scan over a group of files, partition values and constant columns given as
fragment guarantees for the filter and added to the batches after the scan (read/constants.py),
the SQL-exact row filter pushed into pyarrow."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from ..errors import ChangeDataFeedError
from ..read_schema import ReadSchema, conform, same_storage
from ..scan_unit import CHANGE_TYPE, FileUnits, LogFileOfUnit, ScanUnit
from ..storage import Storage
from .batches import MAX_BATCH_SIZE, MIN_BATCH_SIZE
from .constants import ConstantColumns, RepeatedValues
from .dictionaries import decoded
from .file_checks import FileChecks
from .footer_probe import probed_footer
from .known_rows import constant_batches, constant_columns, known_file_rows, known_row_count, value_batches
from .nan_filters import float_positions, positive_nans, split_nan_sensitive
from .page_windows import RowWindow, judged_type, row_window
from .read_errors import ReadErrors
from .selected_rows import SelectedRows, to_logical

#: Batch size of an unfiltered scan's first row group (time to the first rows).
FIRST_BATCH_ROWS = 8192

#: Files at least this large are read up to the end of their page index's row window (see
#: page_windows) by readers that use windows: finding it costs a read and a parse in Python
#: (~0.5 ms), against ~4-10 ms of decoding a megabyte.
WINDOW_MIN_BYTES = 1 << 20

#: Files per pyarrow scan of the dataset path. A fragment keeps its file's footer once scanned
#: (~11 KB of memory for a small file of three columns) and a dataset keeps its fragments, so one
#: scan of a group's files held them all to its end (200,000 small files, a full scan: 2.6 GB ->
#: 0.47 GB peak RSS). Each scan ends with its read-ahead drained, so parts are not made smaller.
PART_FILES = 4096
#: ... and at most this many files times the table's columns (a footer grows with its columns:
#: ~3-4 KB of memory a column, 250 to 2,000 columns)
PART_FILE_COLUMNS = 1 << 15

#: pyarrow's read-ahead on local files (its defaults, 16 batches of 4 files, hide object-store
#: latency): DataFusion runs two scans at once, so 8 files were decoded side by side on 2 cores,
#: more memory in flight (page faults) for no more parallelism. Measured on a quiet host, fresh
#: processes of 5 warm runs, 4 alternating pairs: TPC-H Q1 on lineitem SF1 faster in all 8 pairs
#: (medians 442 -> 416 ms partitioned, 425 -> 414 ms flat; CPU -5 to -13 %, peak RSS -10 to -60
#: MB); Q6 171 -> 165 / 180 -> 155 ms; one file ahead made Q6 slower (215 ms).
LOCAL_READAHEAD = {"batch_readahead": 4, "fragment_readahead": 2}
#: ... and on object stores, for a part of small files only (:func:`_small_file`): pyarrow's
#: default of 4 files at once makes a chain of a round trip per 4 small files (60 files at 20 ms
#: a request: 17 round trips, 14 with 8). 8 is as many as pyarrow's I/O threads read at once;
#: small files keep what they hold ahead small.
REMOTE_SMALL_FILES_READAHEAD = {"fragment_readahead": 8}


def _in_parts(units: Sequence[ScanUnit], columns: int) -> list[Sequence[ScanUnit]]:
    """``units`` in consecutive slices, each of at most PART_FILES and PART_FILE_COLUMNS /
    ``columns`` files."""
    step = max(1, min(PART_FILES, PART_FILE_COLUMNS // max(columns, 1)))
    return [units[i : i + step] for i in range(0, len(units), step)]


#: Files under this size are small for :meth:`UnitReader._small_files_format`: the change feed's
#: change-data files and small appends (1,000-12,500 rows), not a table's compacted files.
SMALL_FILE_BYTES = 1 << 20


def _small_file(unit: ScanUnit) -> bool:
    """A file of known size under SMALL_FILE_BYTES."""
    return 0 < (unit.size or 0) < SMALL_FILE_BYTES


def _guarantee(unit: ScanUnit, rs: ReadSchema) -> ds.Expression | None:
    """Partition values and constants as a fragment guarantee (what a filter on them reads)."""
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


def _unit_of(
    fragment: ds.Fragment, candidates: list[ScanUnit], guarantees: dict[int, ds.Expression | None]
) -> ScanUnit:
    """The unit a scanned fragment was made for, among the units of its file: the one whose
    guarantee it carries (units of one file with the same guarantee give the same rows)."""
    if len(candidates) == 1:
        return candidates[0]
    expr = fragment.partition_expression
    for u in candidates:
        mine = guarantees.get(id(u))
        if mine is not None and expr.equals(mine):
            return u
    # none made (a unit without values): the one without a guarantee
    return next((u for u in candidates if guarantees.get(id(u)) is None), candidates[0])


def _not_read_whole(units: Sequence[ScanUnit], path: str | None) -> Sequence[ScanUnit]:
    """The units from the one at ``path`` on: a scan yields file after file, so a failure while it
    hands on ``path``'s rows is not in a file before it (narrows the files an error may name)."""
    for i, u in enumerate(units if path is not None else ()):
        if u.location == path:
            return units[i:]
    return units


def _stores_change_types(units: Sequence[ScanUnit]) -> bool:
    """Does a unit store ``_change_type`` (a cdc file)? Asked of a feed's sources at once."""
    from ..changes.feed import FeedUnits

    if isinstance(units, FeedUnits):
        return units.any_change_data()
    return any(u.has_change_type_column for u in units)


class UnitReader:
    """Reads groups of scan units for one table version; safe to use from several threads."""

    def __init__(
        self,
        storage: Storage,
        rs: ReadSchema,
        table_label: str,
        version: int | None,
        page_windows: bool = False,
        log_file: LogFileOfUnit | None = None,
    ):
        """``page_windows``: filtered reads of large files stop at the end of the rows their
        page index leaves to match (see :meth:`_windows`). ``log_file``: the log file of a
        unit's action, for a deletion vector error to name (asked on the error path only)."""
        self.storage = storage
        self.rs = rs
        self.label = table_label
        self.version = version
        self.page_windows = page_windows
        self._lock = threading.Lock()
        self._fmt: ds.ParquetFileFormat | None = None
        self._plain_fmt: ds.ParquetFileFormat | None = None  # see _small_files_format
        self._readahead = LOCAL_READAHEAD if storage.is_local else {}
        #: physical names of the string columns (the ones the format's choice is about)
        self._strings = frozenset(
            f.name for f in rs.physical if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        )
        self._physical_types = dict(zip(rs.physical.names, rs.physical.types, strict=True))
        # the table (and version) for error messages
        where = f"table {table_label}" + (f" version {version}" if version is not None else "")
        self.errors = ReadErrors(storage, rs, where)
        self.checks = FileChecks(storage, rs, where, self.errors)
        self.selected_rows = SelectedRows(storage, rs, where, self.checks, self.errors, log_file)

    # -- public -----------------------------------------------------------------------------
    def read(
        self,
        units: Sequence[ScanUnit],
        columns: Sequence[str],
        predicate: Any = None,
        batch_size: int | None = None,
        first_rows_early: bool = True,
        in_order: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        """Batches of ``columns`` (logical names) for the rows where ``predicate`` is TRUE.

        ``predicate`` is a :mod:`.predicate` tree; it is turned into an SQL-exact pyarrow filter.
        The units must come from planning with this same predicate: their ``all_rows_match``
        flags (rows counted from the log, row filters left out) refer to it.
        ``first_rows_early``: an unfiltered read yields its first rows in a small batch before the
        first row group is decoded whole (for a LIMIT); a caller that has already yielded rows
        passes False (small batches cost more CPU per row).
        ``in_order``: the rows come in the order of ``units``, file after file; only for units
        :meth:`reads_in_order` accepts.
        """
        batches = self._read(units, columns, predicate, batch_size, first_rows_early, in_order)
        # every batch has the columns' logical fields, in order (see read_schema.conform)
        floats = float_positions(pa.schema([self.rs.logical.field(c) for c in columns]))
        if floats:
            batches = positive_nans(batches, floats)
        if CHANGE_TYPE not in columns or not _stores_change_types(units):
            return batches
        return self._checked_change_types(batches, units)

    def reads_in_order(self, units: Sequence[ScanUnit], columns: Sequence[str], predicate: Any) -> bool:
        """Can :meth:`read` give the rows of ``units`` in their order? One pyarrow scan yields its
        files' batches in order, and an unfiltered read of stored columns from files read whole,
        each once, is one scan (a file naming a column in another case is read where it comes).
        Any other read sorts its units by how they are read (row selection, field ids, counts)."""
        if predicate is not None or self.rs.id_mode or not any(c in self.rs.file_columns for c in columns):
            return False
        if any(u.needs_row_selection for u in units):
            return False
        return len({u.location for u in units}) == len(units)

    def _checked_change_types(
        self, batches: Iterator[pa.RecordBatch], units: Sequence[ScanUnit]
    ) -> Iterator[pa.RecordBatch]:
        """Change types are never null: only a change-data file without the column makes one."""
        for batch in batches:
            if batch.column(CHANGE_TYPE).null_count:
                cdc = [u.location for u in units if u.has_change_type_column]
                missing = self._without_change_type(cdc)
                if missing is not None:
                    raise ChangeDataFeedError(
                        f"table {self.label}: a change data file has no {CHANGE_TYPE} column ({missing})"
                    )
                which = cdc[0] if len(cdc) == 1 else f"one of {len(cdc)} read together, the first {cdc[0]}"
                raise ChangeDataFeedError(
                    f"table {self.label}: a change data file holds a NULL {CHANGE_TYPE} ({which}); a change "
                    "data file stores the change type of every row"
                )
            yield batch

    def _without_change_type(self, locations: list[str]) -> str | None:
        """After a NULL change type: the first change data file (of at most 1,000) whose footer has
        no change type column (a batch does not say which file it came from, and the change feed
        reads many commits' files in one scan)."""
        for location in locations[:1000]:
            footer = probed_footer(location, self.storage.arrow_fs)
            if footer is None:
                return None  # unreadable: the reader's own error would have said so
            if CHANGE_TYPE not in footer.schema.to_arrow_schema().names:
                return location
        return None

    def _read(
        self,
        units: Sequence[ScanUnit],
        columns: Sequence[str],
        predicate: Any = None,
        batch_size: int | None = None,
        first_rows_early: bool = True,
        in_order: bool = False,
    ) -> Iterator[pa.RecordBatch]:
        from ..predicate import TRUE, referenced_columns, to_pyarrow

        in_order = in_order and predicate is None  # an in-place read of a file is unfiltered
        out_schema = pa.schema([self.rs.logical.field(c) for c in columns])
        bs = min(max(batch_size or 0, MIN_BATCH_SIZE), MAX_BATCH_SIZE)
        variants = self.rs.variant_columns
        if variants:
            variants = variants.intersection(columns) | (
                variants & referenced_columns(predicate) if predicate is not None else frozenset()
            )
        if variants:
            self.checks.refuse_shredded_variants(units, variants)
        if not any(c in self.rs.file_columns for c in columns):
            # Only row counts, partition values or constants are asked for (count(*), GROUP BY a
            # partition column, count by _change_type): a file whose rows all match (see
            # _all_rows_match) gives its stats' numRecords minus its deletion vector's cardinality
            # rows of its own values, unopened.
            from ..changes.feed import FeedUnits

            if isinstance(units, FileUnits):  # a table's files: counted without making units
                groups, units = known_file_rows(units, columns, predicate is None or predicate == TRUE)
                yield from value_batches(groups, out_schema, bs)
            elif isinstance(units, FeedUnits) and (sources := units.counted(columns)) is not None:
                # a feed's sources: the same, all but the sources read
                every = predicate is None or predicate == TRUE
                groups, rest = known_file_rows(sources, columns, every)  # type: ignore[arg-type]
                units = units if rest is sources else rest
                yield from value_batches(groups, out_schema, bs)
            else:
                matching = self._all_rows_match(units, predicate)
                counted = [
                    (u, known_row_count(u) if ok and constant_columns(u, columns) else None)
                    for u, ok in zip(units, matching, strict=True)
                ]
                yield from constant_batches([(u, n) for u, n in counted if n], columns, out_schema, bs)
                units = [u for u, n in counted if n is None]
        # the files to read (not those answered from the log)
        self.storage.note_sizes((u.location, u.size) for u in units)
        plain = [u for u in units if not u.needs_row_selection]
        selected = [u for u in units if u.needs_row_selection]
        if plain and self.rs.id_mode:
            # files naming columns differently from the physical names are read by field id
            by_id = [self.checks.read_by_id(u) for u in plain]
            selected = selected + [u for u, renamed in zip(plain, by_id, strict=True) if renamed]
            plain = [u for u, renamed in zip(plain, by_id, strict=True) if not renamed]
        if plain and predicate is not None:
            text_cols = self.checks.filtered_text_columns(predicate)
            time_cols = self.checks.filtered_timestamp_columns(predicate)
            if text_cols or time_cols:
                # pyarrow cannot compare a string literal with a string_view column stored by some
                # writers (delta-rs UPDATE/MERGE), nor a timestamp literal with the statistics of
                # a file storing the column with the other kind of time zone (delta-rs releases
                # before its timestamp_ntz support, early 2024, wrote naive timestamps in
                # `timestamp` columns): such files are read, cast, then filtered.
                odd = [self.checks.filter_trips_on(u, text_cols, time_cols) for u in plain]
                if any(odd):
                    selected = selected + [u for u, v in zip(plain, odd, strict=True) if v]
                    plain = [u for u, v in zip(plain, odd, strict=True) if not v]
        if plain and predicate is not None:
            # A predicate on a unit's own constants (partition values, change-feed columns) that
            # planning proved TRUE for the unit needs no row filter (a partition-pruned TPC-H
            # query over 16 files: 16 -> 13 ms); statistics-proven ones keep it (statistics can
            # be wrong, and the filter is what reads the data: the corpus table parsed-stats
            # would give NULL rows under IS NOT NULL, test_corpus_filters.py).
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
        if plain and predicate is not None and self.page_windows and not self.rs.id_mode:
            windowed = self._windows(plain, predicate)
            if windowed:
                taken = {id(u) for u, _ in windowed}
                plain = [u for u in plain if id(u) not in taken]
                lfilter = to_pyarrow(predicate)
                fcols = sorted(referenced_columns(predicate))
                for u, w in windowed:
                    yield from self.selected_rows.read(u, columns, lfilter, fcols, out_schema, bs, w)
        if plain:
            renamed = self.rs.renamed_paths
            scan_pred, post_pred = split_nan_sensitive(predicate, self.rs.logical)
            pfilter = None if scan_pred is None else to_pyarrow(scan_pred, rename=renamed or None)
            post = None if post_pred is None else to_pyarrow(post_pred, rename=renamed or None)
            post_cols = [] if post_pred is None else sorted(referenced_columns(post_pred))
            filter_cols = [] if scan_pred is None else sorted(referenced_columns(scan_pred))
            selected = selected + (
                yield from self._read_plain(
                    plain,
                    columns,
                    pfilter,
                    out_schema,
                    bs,
                    post,
                    post_cols,
                    first_rows_early,
                    filter_cols,
                    in_order,
                )
            )
        if selected:
            lfilter = None if predicate is None else to_pyarrow(predicate)
            fcols = sorted(referenced_columns(predicate)) if predicate is not None else []
            yield from self.selected_rows.read_each(selected, columns, lfilter, fcols, out_schema, bs)

    def _windows(self, units: Sequence[ScanUnit], predicate: Any) -> list[tuple[ScanUnit, RowWindow]]:
        """(unit, window) of the files of at least WINDOW_MIN_BYTES whose page index spares at
        least a quarter of their rows from decoding. pyarrow decodes every row of a file it scans;
        read by :class:`.SelectedRows` up to the window's end, the pages after it are not decoded
        (the change feed's key range over sorted ids: 8 files of 187,500 rows decoded to row
        81,920). Per unit, not per location: a change feed's file added and removed in its range
        is two units of one location (its inserts and its deletes)."""
        from ..predicate import referenced_columns

        phys = self.rs.to_physical()
        judged = {c: phys[c] for c in referenced_columns(predicate) if c in self.rs.file_columns}
        if not any(judged_type(self.rs.logical.field(c).type) for c in judged):
            return []
        out: list[tuple[ScanUnit, RowWindow]] = []
        for u in units:
            if u.all_rows_match or (u.size or 0) < WINDOW_MIN_BYTES:
                continue
            w = row_window(self.storage, u.location, u.size, predicate, self.rs.logical, judged)
            # the rows decoded run from the window's first row group's start (pyarrow cannot
            # skip rows): a window ending a one-row-group file saves nothing
            if w is not None and (w.stop - w.first_row) * 4 <= w.num_rows * 3:
                out.append((u, w))
        return out

    def _all_rows_match(self, units: Sequence[ScanUnit], predicate: Any) -> list[bool]:
        """Per unit: is ``predicate`` TRUE for every row? Planning decides it (``all_rows_match``:
        partition values, change-feed constants or exact statistics; see
        skipping.file_all_match_mask); without a predicate every row matches."""
        from ..predicate import TRUE

        if predicate is None or predicate == TRUE:
            return [True] * len(units)
        return [u.all_rows_match for u in units]

    def _format(
        self, sample: ScanUnit, footer: pq.FileMetaData | None = None, read: Collection[str] | None = None
    ) -> ds.ParquetFileFormat:
        """The parquet format for fast-path reads, chosen once per reader from one file's footer
        (``footer``: the sample's, already read).

        Low-cardinality string columns (small dictionary pages) are decoded as dictionaries and
        turned into strings after the scan's filter (:meth:`_dataset_schema`); decoding them so was
        measured 2x cheaper than pyarrow's plain string decode, cast by the dataset then
        (TPC-H l_returnflag: 0.40 s -> 0.21 s for 6M rows), while high-cardinality ones would be
        2x slower that way, so they keep the plain decode. A scan whose ``read`` columns (the
        physical names of the file columns it reads; None: any) hold no string column is not
        affected by the choice, and does not wait for a footer read (TPC-H selective queries:
        one footer read less before the scan starts). An unfiltered scan of many small files
        reads those without dictionaries (:meth:`_small_files_format`).
        """
        with self._lock:  # held while choosing: scan partitions start together, one reads the footer
            if self._fmt is None:
                if read is not None and self._strings.isdisjoint(read):
                    return self._make_format([])
                self._fmt = self._choose_format(sample, footer)
            return self._fmt

    def _choose_format(self, sample: ScanUnit, footer: pq.FileMetaData | None = None) -> ds.ParquetFileFormat:
        dict_cols: list[str] = []
        strings = self._strings
        if strings and footer is None:
            footer = probed_footer(sample.location, self.storage.arrow_fs)  # None: the read reports it
        if strings and footer is not None and footer.num_row_groups:
            rg = footer.row_group(0)
            for i in range(rg.num_columns):
                col = rg.column(i)
                name = col.path_in_schema
                if name in strings and col.has_dictionary_page and col.dictionary_page_offset is not None:
                    dict_bytes = col.data_page_offset - col.dictionary_page_offset
                    if 0 < dict_bytes * 10 < col.total_compressed_size:
                        dict_cols.append(name)
        return self._make_format(dict_cols)

    def _make_format(self, dict_cols: list[str]) -> ds.ParquetFileFormat:
        opts: dict[str, Any] = {"coerce_int96_timestamp_unit": "us"}
        if dict_cols:
            opts["dictionary_columns"] = dict_cols
        scan_opts = None
        if self.storage.is_local:
            # pre-buffering coalesces ranged reads for object stores; on local files it only adds
            # async overhead (measured: 2,050 small files 680 -> 600 ms, lineitem Q1 scan -7 %)
            scan_opts = ds.ParquetFragmentScanOptions(pre_buffer=False)
        return ds.ParquetFileFormat(read_options=opts, default_fragment_scan_options=scan_opts)

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
        in_order=False,
    ) -> Generator[pa.RecordBatch, None, list[ScanUnit]]:
        """Read ``units`` with pyarrow's dataset scanner. Returns the units left unread because
        their files name a column in another case (see :meth:`.FileChecks.checked`): the scanner
        would read those columns as NULL, so they are read by :meth:`_read_selected` (``in_order``,
        an unfiltered read: at once, where their rows come)."""
        phys_names = self.rs.to_physical()
        fs = self.storage.arrow_fs
        # Columns a unit gives the values of (partition values, change-feed constants) are added
        # to each batch here (see read/constants.py), not filled by the scanner: only stored ones
        # are scanned (the change type too when change-data files store it), and the columns the
        # post filter reads, then dropped (the fragment guarantees fill those).
        with_cdc = any(u.has_change_type_column for u in units)
        stored_out = [c for c in columns if c in self.rs.file_columns or (c == CHANGE_TYPE and with_cdc)]
        scan_cols = list(
            dict.fromkeys([phys_names[c] for c in stored_out] + [phys_names[c] for c in post_columns])
        )
        out_fields = [self.rs.physical.field(self.rs.logical.get_field_index(c)) for c in columns]
        valued = [c for c in columns if c not in self.rs.file_columns]
        constants = ConstantColumns(columns, out_fields, scan_cols, valued)
        # a filtered scan needs the units' values as fragment guarantees (pyarrow's filter and the
        # post filter read them); an unfiltered one does not (~20 us a file), except to tell the
        # units of one file apart (a change feed's add and later remove of it), see _unit_of
        guaranteed = pfilter is not None or post is not None
        units_at: dict[str, list[ScanUnit]] = {}
        for u in units:
            units_at.setdefault(u.location, []).append(u)
        guarantees: dict[int, ds.Expression | None] = {}  # per unit, as its fragment is made
        # per file, the columns the scan reads from it, the pushed filter's included (partition
        # values and constants come from the log even where a file holds a copy)
        logical = list(dict.fromkeys(list(columns) + list(post_columns) + list(filter_columns)))
        # two lists shared by every file (change-data files also store the change type): one
        # list per file cost ~1.5 s of a 200,000-file scan, most of it in the garbage collector
        stored = [phys_names[c] for c in logical if c in self.rs.file_columns]
        with_type = [phys_names[c] for c in logical if c in self.rs.file_columns or c == CHANGE_TYPE]
        stored_cols = {u.location: with_type if u.has_change_type_column else stored for u in units}
        read_cols = set(with_type if any(u.has_change_type_column for u in units) else stored)
        other_case: set[str] = set()
        stream = pfilter is None and post is None and first_rows_early
        footer = None
        rest = None  # the streamed first file's other row groups
        if stream:
            # Unfiltered (a LIMIT's first rows): the dataset scanner decodes a whole row group
            # before its first batch; the first row group streams in small batches instead
            # (lineitem, SELECT * LIMIT 10: first batch 10 -> 4 ms). The format is chosen after,
            # from the footer the stream has read: no footer read before the first rows
            try:
                rest, footer = yield from self._stream_first_row_group(
                    units[0], columns, out_schema, bs, constants.values
                )
            except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
                raise self.errors.read_error(units[:1], e) from e  # the one file it reads
        fmt = self._format(units[0], footer, read_cols)
        small_fmt = self._small_files_format(fmt, units, pfilter is None and post is None)
        schema, undictionary = self._dataset_schema(
            small_fmt or fmt, scan_cols, stored_out, filter_columns, post_columns
        )
        # The first file is scanned on its own: pyarrow's scanner reads several files ahead before
        # its first batch, which a LIMIT query would pay in full (TPC-H lineitem, SELECT * LIMIT
        # 10: 190 -> 40 ms); full scans measured the same either way. A streamed first file leaves
        # only its other row groups to scan.
        width = len(self.rs.physical)
        if stream:
            parts = [units[:1] if rest else [], *_in_parts(units[1:], width)]
        elif len(units) > 1 and first_rows_early:
            parts = [units[:1], *_in_parts(units[1:], width)]
        else:
            parts = _in_parts(units, width)
        read_now: set[str] = set()
        path = None  # the file whose rows the scan is handing on (see _not_read_whole)
        try:
            for i, part_units in enumerate(parts):
                if not part_units:
                    continue
                # a part's fragments are made when the scan reaches it: a LIMIT met by the first
                # file leaves the others' unmade (~3 us a file, ~30 us with partition values)
                for u in part_units:
                    if guaranteed or len(units_at[u.location]) > 1:
                        guarantees[id(u)] = _guarantee(u, self.rs)
                part = [
                    (small_fmt if small_fmt is not None and _small_file(u) else fmt).make_fragment(
                        u.location,
                        fs,
                        partition_expression=guarantees.get(id(u)),
                        row_groups=rest if stream and i == 0 else None,
                        file_size=u.size or None,
                    )
                    for u in part_units
                ]
                dataset = ds.FileSystemDataset(part, schema, fmt, fs)
                readahead = self._readahead
                if not readahead and all(_small_file(u) for u in part_units):
                    readahead = REMOTE_SMALL_FILES_READAHEAD
                scanner = dataset.scanner(
                    columns=scan_cols, filter=pfilter, batch_size=bs, use_threads=True, **readahead
                )
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
                        if self.checks.checked(path, tagged.fragment.physical_schema, stored_cols[path]):
                            other_case.add(path)
                            if in_order:
                                unit = next(u for u in units if u.location == path)
                                yield from self._read_selected(unit, columns, None, [], out_schema, bs)
                                read_now.add(path)
                            continue
                    batch = tagged.record_batch
                    if post is not None:
                        batch = batch.filter(post)
                    if undictionary is not None:
                        batch = undictionary(batch)
                    unit = _unit_of(tagged.fragment, units_at[path], guarantees)
                    yield conform(constants.complete(batch, unit), out_schema)
                for frag in part:  # files that gave no rows were read as well (a filter on them)
                    if frag.path not in checked and self.checks.checked(
                        frag.path, frag.physical_schema, stored_cols[frag.path]
                    ):
                        other_case.add(frag.path)
                # this part's fragments (and the footers they hold) go before the next is made
                part = dataset = scanner = tagged = frag = batch = None
        except Exception as e:  # noqa: BLE001 - a store's own error too: named, typed
            raise self.errors.read_error(_not_read_whole(units, path), e, stored_cols) from e
        return [u for u in units if u.location in other_case - read_now]

    def _small_files_format(
        self, fmt: ds.ParquetFileFormat, units: Sequence[ScanUnit], unfiltered: bool
    ) -> ds.ParquetFileFormat | None:
        """The format an unfiltered scan reads its small files with (:func:`_small_file`), None
        when every file is read with ``fmt``.

        ``fmt``'s dictionary columns pay in large files (many rows a value); a small file's
        dictionary holds about as many values as it has rows, and reading it as a dictionary
        then turning it into strings costs more than decoding the strings (the cdf benchmark's
        full feed, 320 files under 1 MB: 247 -> 196 ms CPU for their stored columns). Such a
        scan declares its string columns as strings, so the scanner itself turns the large
        files' dictionaries into strings, on its threads, with a cast slower than
        :func:`.dictionaries.decoded` for one-byte codes (~5 against ~1 ns a row): only a scan
        with at least one small file per megabyte of large files reads them this way (a small
        file read plain saves ~0.15 ms, a megabyte of one-byte codes cast costs about that).
        The full feed as a whole: 344 -> 275 ms CPU (decoding alone, pyarrow scans of its files,
        11 alternating runs, medians)."""
        if not unfiltered or not fmt.read_options.dictionary_columns:
            return None
        small = sum(1 for u in units if _small_file(u))
        large_bytes = sum(u.size for u in units if u.size and not _small_file(u))
        if not small or small * SMALL_FILE_BYTES < large_bytes:
            return None
        with self._lock:
            if self._plain_fmt is None:
                self._plain_fmt = self._make_format([])
            return self._plain_fmt

    def _dataset_schema(
        self,
        fmt: ds.ParquetFileFormat,
        scan_cols: Sequence[str],
        stored_out: Sequence[str],
        filter_columns: Sequence[str],
        post_columns: Sequence[str],
    ) -> tuple[pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch] | None]:
        """The schema a scan's dataset declares, and what turns its batches into the physical
        types (None: nothing to turn).

        String columns ``fmt`` reads as dictionaries (see :meth:`_format`) are declared with that
        type, and turned into strings here (:func:`.dictionaries.decoded`). Declared as strings,
        the scanner cast every row before its filter ran, and that filter then copied the
        strings; this way it copies their indices, and only the rows it keeps are turned, by a
        faster gather for codes of one width. Columns a filter reads (``filter_columns``,
        ``post_columns``, logical names) keep their type: pyarrow's string functions do not all
        take dictionaries. Only stored columns: partition values and constants are fragment
        guarantees of the column's type."""
        dicts = fmt.read_options.dictionary_columns
        if not dicts:
            return self.rs.physical, None
        phys = self.rs.to_physical()
        read_by_filters = {phys[c] for c in (*post_columns, *filter_columns)}
        as_dict = {
            phys[c]
            for c in stored_out
            if c in self.rs.file_columns
            and c != CHANGE_TYPE
            and phys[c] in dicts
            and phys[c] not in read_by_filters
        }
        if not as_dict:
            return self.rs.physical, None
        schema = pa.schema(
            [
                f.with_type(pa.dictionary(pa.int32(), f.type)) if f.name in as_dict else f
                for f in self.rs.physical
            ],
            metadata=self.rs.physical.metadata,
        )
        out = pa.schema([self.rs.physical.field(c) for c in scan_cols])
        at = [i for i, c in enumerate(scan_cols) if c in as_dict]

        def undictionary(batch: pa.RecordBatch) -> pa.RecordBatch:
            arrays = batch.columns
            for i in at:
                arrays[i] = decoded(arrays[i], out.field(i).type)
            return pa.RecordBatch.from_arrays(arrays, schema=out)

        return schema, undictionary

    def _stream_first_row_group(
        self, unit: ScanUnit, columns: Sequence[str], out_schema: pa.Schema, bs: int, values: RepeatedValues
    ) -> Generator[pa.RecordBatch, None, tuple[list[int], pq.FileMetaData]]:
        """Yield the unit's first row group, its first rows in a small batch; return its other
        row groups and its footer. ``values``: the read's value arrays (the scan after takes the
        same)."""
        pf = pq.ParquetFile(unit.location, filesystem=self.storage.arrow_fs, coerce_int96_timestamp_unit="us")
        footer = pf.metadata
        groups = footer.num_row_groups
        if groups == 0:
            return [], footer
        phys_names = self.rs.to_physical()
        file_schema = pf.schema_arrow
        # cdc files store _change_type themselves (it is not a constant of the unit)
        stored = self.rs.file_columns | ({CHANGE_TYPE} if unit.has_change_type_column else set())
        needed = [c for c in columns if c in stored]
        # names only: a type the dataset converts is refused there, by its own path's error
        if self.checks.checked(unit.location, file_schema, [phys_names[c] for c in needed], types=False):
            return list(range(groups)), footer  # the dataset path hands it to the row-selection path
        stored_types = dict(zip(file_schema.names, file_schema.types, strict=True))
        read_cols = [phys_names[c] for c in needed if phys_names[c] in stored_types]
        if len(stored_types) < len(file_schema):  # a name stored twice: pyarrow's lookup refuses it
            stored_types = {c: file_schema.field(c).type for c in read_cols}
        physical = self._physical_types
        if not all(same_storage(stored_types[c], physical[c]) for c in read_cols):
            return list(range(groups)), footer  # types the dataset converts (or refuses) its own way
        # The row group is handed on in batches doubling up to ``bs`` rows (as many rows as handed
        # on before): each batch costs a conversion to the logical columns here and a copy where
        # DataFusion's small batches are merged (a 187,500-row group in 23 batches: 9 ms of CPU
        # more than the dataset path's read of it), while a LIMIT still waits for at most as
        # many rows again as it has. The reader decodes each batch at its size (pyarrow's reader
        # takes a new batch size for its next batch): decoded in 8,192-row batches and joined,
        # the row group was copied once more and cost 23 small decodes (the cdf benchmark's full
        # feed read as the SQL scan reads it: 315 -> 312 ms CPU, the pulling thread 41.8 -> 40.0).
        # A batch holds at most ``bs`` rows (the rest waits for the next); a reader that keeps
        # its first size gives small batches, joined as before.
        resize = getattr(pf.reader, "set_batch_size", None)
        pending: list[pa.RecordBatch] = []
        rows = handed = 0
        for raw in pf.iter_batches(
            batch_size=FIRST_BATCH_ROWS, row_groups=[0], columns=read_cols, use_threads=True
        ):
            pending.append(raw)
            rows += raw.num_rows
            if rows >= min(handed, bs):
                batch = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
                take = min(rows, bs)
                yield self._streamed(batch.slice(0, take), unit, needed, columns, out_schema, values)
                handed += take
                rows -= take
                pending = [batch.slice(take)] if rows else []
                if resize is not None and min(handed, bs) > FIRST_BATCH_ROWS:
                    resize(min(handed, bs) - rows)  # the next batch: the rest of its rows
        if pending:
            batch = pending[0] if len(pending) == 1 else pa.concat_batches(pending)
            yield self._streamed(batch, unit, needed, columns, out_schema, values)
        return list(range(1, groups)), footer

    def _streamed(
        self,
        batch: pa.RecordBatch,
        unit: ScanUnit,
        needed: list[str],
        columns: Sequence[str],
        out_schema: pa.Schema,
        values: RepeatedValues,
    ) -> pa.RecordBatch:
        """A streamed file batch as a batch of the logical ``columns``."""
        return conform(to_logical(batch, unit, columns, needed, self.rs, values), out_schema)

    # -- row-selection path -------------------------------------------------------------------
    def _read_selected(
        self, unit, columns, row_filter, filter_columns, out_schema, bs
    ) -> Iterator[pa.RecordBatch]:
        """One unit by the row-selection path (:class:`.SelectedRows`)."""
        return self.selected_rows.read(unit, columns, row_filter, filter_columns, out_schema, bs)
