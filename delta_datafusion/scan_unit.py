"""The unit of reading shared by table scans and change scans.

A :class:`ScanUnit` is one data file plus everything needed to turn its physical rows into
logical rows: partition values, which rows to read (deletion vectors), and constant columns
(for the change feed: ``_change_type``, ``_commit_version``, ``_commit_timestamp``).

Row selection: rows in ``drop_rows`` are skipped; when ``only_rows`` is set, only rows in it are
read. A table scan sets ``drop_rows`` to the file's deletion vector; a change scan of a
deletion-vector update reads ``only_rows = new DV`` minus ``drop_rows = old DV`` (newly deleted
rows) and vice versa (undeleted rows).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import DeletionVectorError

#: The change feed's columns (constants of a change scan's units; cdc files store the first).
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"


@dataclass(frozen=True)
class ScanUnit:
    location: str
    size: int
    partition_values: dict[str, Any] = field(default_factory=dict)
    drop_rows: dict | None = None  # deletion vector descriptor (log dict form)
    only_rows: dict | None = None
    constants: dict[str, Any] = field(default_factory=dict)
    num_records: int | None = None
    #: the file stores ``_change_type`` itself (cdc files)
    has_change_type_column: bool = False
    #: planning proved from statistics that the filter is TRUE for every row of the file
    all_rows_match: bool = False

    @property
    def needs_row_selection(self) -> bool:
        return self.drop_rows is not None or self.only_rows is not None


#: a unit -> the log file holding its file action (its deletion vector descriptor), None when
#: unknown: asked on the error path only, for a descriptor error to name the file to repair
LogFileOfUnit = Callable[["ScanUnit"], "str | None"]


def logged_in(source: str | None) -> str:
    """' (logged in <source>)', or nothing when the log file is not known."""
    return f" (logged in {source})" if source else ""


def dv_or_none(descriptor: dict | None, location: str) -> dict | None:
    """A deletion vector descriptor from the log, or None when the action has none (a null
    struct reads as a dict of nulls). One with fields but no storageType is refused: read as
    none, its deleted rows would come back."""
    if descriptor and descriptor.get("storageType"):
        return descriptor
    if descriptor and any(v is not None for v in descriptor.values()):
        e = DeletionVectorError(
            f"data file {location}: its deletion vector descriptor has no storageType (a required field): "
            f"{descriptor}"
        )
        e.location = location  # for callers to name the table, version and log file
        raise e
    return None


def has_descriptor(dv: pa.Array) -> pa.Array:
    """Per row of a deletion-vector struct column: does it hold a descriptor (a storageType)?
    False for a null struct, a null or empty storageType."""
    if dv.type.get_field_index("storageType") < 0:
        return pa.array(np.zeros(len(dv), bool))
    return pc.not_equal(pc.fill_null(pc.struct_field(dv, "storageType"), ""), "")


def check_deletion_vectors(files: pa.Table) -> None:
    """Refuse, as :func:`dv_or_none` does, a deletion vector descriptor with fields but no
    storageType, over the whole column (no descriptor made per file)."""
    if files.num_rows == 0:
        return
    dv = files.column("deletion_vector").combine_chunks()
    names = [f.name for f in dv.type]
    if "storageType" not in names or dv.null_count == len(dv):  # no descriptor: nothing to refuse
        return
    children = dict(zip(names, dv.flatten(), strict=True))  # nulls of the struct included
    no_type = pc.equal(pc.fill_null(children.pop("storageType"), ""), "")
    some_field = None
    for child in children.values():
        valid = pc.is_valid(child)
        some_field = valid if some_field is None else pc.or_(some_field, valid)
    if some_field is None:
        return
    bad = pc.and_(no_type, some_field)
    if pc.any(bad).as_py():
        i = pc.index(bad, True).as_py()
        dv_or_none(dv[i].as_py(), files.column("location")[i].as_py())


class LazyUnits(Sequence[ScanUnit]):
    """Scan units of a table with a row per file (or change source), made only when first
    iterated or indexed (:meth:`_make` says how); counted, sized and split without them."""

    def __init__(self, rows: pa.Table):
        self._rows = rows
        self._units: list[ScanUnit] | None = None
        self._lock = threading.Lock()

    def _make(self) -> list[ScanUnit]:
        raise NotImplementedError

    def take(self, indices: np.ndarray) -> LazyUnits:
        """The units of the rows at ``indices``, in that order (none made)."""
        raise NotImplementedError

    def _made(self) -> list[ScanUnit]:
        with self._lock:  # a fragment's units may be asked for from two threads
            if self._units is None:
                self._units = self._make()
            return self._units

    def __len__(self) -> int:
        return self._rows.num_rows

    @overload
    def __getitem__(self, i: int) -> ScanUnit: ...
    @overload
    def __getitem__(self, i: slice) -> list[ScanUnit]: ...
    def __getitem__(self, i: int | slice) -> ScanUnit | list[ScanUnit]:
        return self._made()[i]

    def __iter__(self) -> Iterator[ScanUnit]:
        return iter(self._made())

    def sizes(self) -> np.ndarray:
        """Each row's size in bytes (0 where unknown), as ``ScanUnit.size``."""
        return pc.fill_null(self._rows.column("size"), 0).to_numpy().astype(np.int64, copy=False)


class FileUnits(LazyUnits):
    """The scan units of a scan-metadata table, made when first iterated or indexed.

    A query over many files would otherwise pay one Python object per selected file before it
    reads any (200,000 files: ~1.4 s and a dozen full garbage collections per ``count(*)``):
    rows known from the log are counted from the table's columns (read/known_rows.py), and
    fragments are planned as slices of the table (datafusion/dataset.py ``balance``), so only the
    files a scan reads become units. Descriptors are checked now, as making the units would."""

    def __init__(
        self,
        files: pa.Table,
        partition_columns: Sequence[str],
        all_rows_match: pa.Array | pa.ChunkedArray | None = None,
        _checked: bool = False,
    ):
        if not _checked:
            check_deletion_vectors(files)
        super().__init__(files)
        self.files = files
        self.partition_columns = list(partition_columns)
        #: per file, see ScanUnit.all_rows_match (None: no file is marked)
        self.all_rows_match = all_rows_match

    def _make(self) -> list[ScanUnit]:
        return units_from_files(self.files, self.partition_columns, self.all_rows_match)

    def slice(self, start: int, stop: int) -> FileUnits:
        """The units of files ``start`` to ``stop`` (none made)."""
        match = None if self.all_rows_match is None else self.all_rows_match[start:stop]
        files = self.files.slice(start, max(stop - start, 0))
        return FileUnits(files, self.partition_columns, match, _checked=True)

    def take(self, indices: np.ndarray) -> FileUnits:
        """The units of the files at ``indices``, in that order (none made)."""
        idx = pa.array(indices, pa.int64())
        match = None if self.all_rows_match is None else self.all_rows_match.take(idx)
        return FileUnits(self.files.take(idx), self.partition_columns, match, _checked=True)


def units_from_files(
    files: pa.Table, partition_columns: list[str], all_rows_match: pa.Array | None = None
) -> list[ScanUnit]:
    """Scan-metadata rows -> scan units (one Python object per selected file); ``all_rows_match``
    marks the files whose every row satisfies the query's filter (see skipping.file_all_match_mask)."""
    if files.num_rows == 0:
        return []
    locations = files.column("location").to_pylist()
    sizes = files.column("size").to_pylist()
    pvs = files.column("partition_values").to_pylist() if partition_columns else [{}] * files.num_rows
    dvs = files.column("deletion_vector").to_pylist()
    stats = files.column("stats").combine_chunks()
    nums = (
        pc.struct_field(stats, "numRecords").to_pylist()
        if stats.type.get_field_index("numRecords") >= 0
        else [None] * len(locations)
    )
    matches = all_rows_match.to_pylist() if all_rows_match is not None else [False] * len(locations)
    return [
        ScanUnit(
            location=loc,
            size=size or 0,
            partition_values=pv or {},
            drop_rows=dv_or_none(dv, loc),
            num_records=num,
            all_rows_match=bool(ok),
        )
        for loc, size, pv, dv, num, ok in zip(locations, sizes, pvs, dvs, nums, matches, strict=True)
    ]
