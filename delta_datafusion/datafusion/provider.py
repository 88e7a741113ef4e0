"""The Delta table provider: a snapshot served to DataFusion with projection and filter pushdown."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..scan import ScanMetadata
from ..snapshot import Snapshot
from .dataset import DeltaDataset, ScanPlanInfo, row_counts_wanted


def provider_schema(snapshot: Snapshot) -> pa.Schema:
    """The table's logical schema with no schema-level metadata.

    DataFusion 55 fails ``count(*)`` over ``UNION ALL`` of two inputs whose schema metadata differ
    ("Physical input schema should be the same as the one converted from logical input schema",
    plain pyarrow datasets too), so a per-table location or version there would break unions of
    two Delta tables or versions. Field metadata (column mapping) does not matter to it."""
    return snapshot.schema.remove_metadata()


def table_dataset(snapshot: Snapshot, label: str | None = None) -> DeltaDataset:
    """A DataFusion-ready dataset over one snapshot (whose checkpoint, read when the first query
    plans, is listed again if a log cleanup removed it since: see ``Snapshot._files``)."""
    scan = snapshot.scan()
    reader = scan.reader()
    label = label or snapshot.table_root

    def planner(pred: Any) -> tuple[list, ScanPlanInfo]:
        files, total, after_parts = snapshot.select_files(pred, row_counts_wanted())
        info = ScanPlanInfo(
            label, snapshot.version, "" if pred is None else str(pred), total, after_parts, files.num_rows, 0
        )
        return ScanMetadata(files).scan_units(snapshot, pred), info

    # the commits table_changes() on this table may take: those whose file time came with the
    # snapshot's listing (one read after the registration could be a rewritten file's; local
    # listings give none)
    commits = [c for c in snapshot.commit_data if c.info.known_mtime is not None]
    return DeltaDataset(provider_schema(snapshot), reader, planner, label, snapshot.storage, commits)
