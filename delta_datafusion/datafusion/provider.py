"""The Delta table provider: a snapshot served to DataFusion with projection and filter pushdown."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pyarrow as pa

from ..log.actions import forget_all_parquet
from ..predicate import literal_count
from ..scan import ScanMetadata
from ..scan_unit import FileUnits
from ..snapshot import Snapshot
from .dataset import DeltaDataset, ScanPlanInfo, row_counts_wanted


def provider_schema(snapshot: Snapshot) -> pa.Schema:
    """The table's logical schema with no schema-level metadata.

    DataFusion 55 fails ``count(*)`` over ``UNION ALL`` of two inputs whose schema metadata differ
    ("Physical input schema should be the same as the one converted from logical input schema",
    plain pyarrow datasets too), so a per-table location or version there would break unions of
    two Delta tables or versions. Field metadata (column mapping) does not matter to it."""
    return snapshot.schema.remove_metadata()


#: Plans of predicates with more literals than this are not kept (a key as large as the filter,
#: hashed and compared on every query; the change feed's plan cache has the same bound).
PLAN_KEY_MAX_LITERALS = 500


def plan_key(pred: Any, row_counts: bool) -> Hashable | None:
    """What a table scan's plan depends on besides its snapshot: the pushed filter (the package's
    predicate tree, whose literals compare by type and value) and whether rows may be counted
    from the log. None: not kept (a long filter, or one that cannot be hashed)."""
    if pred is not None and literal_count(pred) > PLAN_KEY_MAX_LITERALS:
        return None
    key = (pred, row_counts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def table_dataset(snapshot: Snapshot, label: str | None = None) -> DeltaDataset:
    """A DataFusion-ready dataset over one snapshot (whose checkpoint, read when the first query
    plans, is listed again if a log cleanup removed it since: see ``Snapshot._files``).

    Once a plan has read the files, the local checkpoint files the snapshot's table handle holds
    open are closed: ``register_table``, ``CREATE EXTERNAL TABLE`` and a folder catalog's lookups
    make a handle each, which reads them no more, and every registered or catalog table held its
    checkpoint's descriptor for the process's life (a deleted one too). An object store's handles
    hold no descriptor (opening one again is a request): kept."""
    scan = snapshot.scan()
    reader = scan.reader()
    label = label or snapshot.table_root

    def plan(pred: Any, row_counts: bool) -> tuple[FileUnits, int, int]:
        files, total, after_parts = snapshot.select_files(pred, row_counts)
        if snapshot.storage.is_local:
            forget_all_parquet(snapshot.storage)  # read (see above)
        return ScanMetadata(files).scan_units(snapshot, pred), total, after_parts

    def planner(pred: Any) -> tuple[list, ScanPlanInfo]:
        row_counts = row_counts_wanted()
        units, total, after_parts = snapshot.remembered_plan(
            plan_key(pred, row_counts), lambda: plan(pred, row_counts)
        )
        info = ScanPlanInfo(
            label, snapshot.version, "" if pred is None else str(pred), total, after_parts, len(units), 0
        )
        return units, info

    # the commits table_changes() on this table may take: those whose file time came with the
    # snapshot's listing (one read after the registration could be a rewritten file's; local
    # listings give none)
    commits = [c for c in snapshot.commit_data if c.info.known_mtime is not None]
    return DeltaDataset(provider_schema(snapshot), reader, planner, label, snapshot.storage, commits)
