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

from dataclasses import dataclass, field
from typing import Any

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


def dv_or_none(descriptor: dict | None, location: str) -> dict | None:
    """A deletion vector descriptor from the log, or None when the action has none (a null
    struct reads as a dict of nulls). One with fields but no storageType is refused: read as
    none, its deleted rows would come back."""
    if descriptor and descriptor.get("storageType"):
        return descriptor
    if descriptor and any(v is not None for v in descriptor.values()):
        raise DeletionVectorError(
            f"data file {location}: its deletion vector descriptor has no storageType (a required field): "
            f"{descriptor}"
        )
    return None


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
