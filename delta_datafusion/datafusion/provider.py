"""The Delta table provider: a snapshot served to DataFusion with projection and filter pushdown."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..errors import DeltaError, MissingLogFileError, VersionNotFoundError
from ..scan import ScanMetadata
from ..snapshot import Snapshot
from ..table import DeltaTable, relisting
from .dataset import DeltaDataset, ScanPlanInfo


def provider_schema(snapshot: Snapshot) -> pa.Schema:
    """The table's logical schema with no schema-level metadata.

    DataFusion 55 fails ``count(*)`` over ``UNION ALL`` of two inputs whose schema metadata differ
    ("Physical input schema should be the same as the one converted from logical input schema",
    plain pyarrow datasets too), so a per-table location or version there would break unions of
    two Delta tables or versions. Field metadata (column mapping) does not matter to it."""
    return snapshot.schema.remove_metadata()


def table_dataset(snapshot: Snapshot, label: str | None = None) -> DeltaDataset:
    """A DataFusion-ready dataset over one snapshot."""
    scan = snapshot.scan()
    reader = scan.reader()
    label = label or snapshot.table_root
    current = [snapshot]  # replaced by the same version listed again (see _listed_again)

    def planner(pred: Any) -> tuple[list, ScanPlanInfo]:
        snap = old = current[0]
        try:
            files, total, after_parts = snap.select_files(pred)
        except MissingLogFileError:
            # the checkpoint is read on first planning, after the snapshot was listed: a log
            # cleanup in between removed it. The whole version is built again from a new listing
            # (never the old listing's commits with the new one's checkpoint)
            snap = current[0] = relisting(lambda: _listed_again(old, label))
            files, total, after_parts = snap.select_files(pred)
        info = ScanPlanInfo(
            label, snap.version, "" if pred is None else str(pred), total, after_parts, files.num_rows, 0
        )
        return ScanMetadata(files).scan_units(snap, pred), info

    return DeltaDataset(provider_schema(snapshot), reader, planner, label, snapshot.storage)


def _listed_again(old: Snapshot, label: str) -> Snapshot:
    """``old``'s version from a new listing of the log, its files read (a file gone again is a
    MissingLogFileError, for :func:`relisting` to list once more)."""
    table = DeltaTable.from_storage(old.storage)
    try:
        fresh = table.snapshot(old.version, listing=table.listing())
    except VersionNotFoundError as e:
        raise VersionNotFoundError(
            f"{label}: a log cleanup removed the files of version {old.version} of {old.table_root}, "
            f"which this query reads, after the table was opened; open it again ({e})"
        ) from e
    if not _same_table_version(old, fresh):
        # the folder was deleted and written again up to the same version: not the table opened
        raise DeltaError(
            f"{label}: {old.table_root} was replaced by another table after it was opened (version "
            f"{old.version} has another protocol or metadata now); open it again"
        )
    fresh.files()
    return fresh


def _same_table_version(a: Snapshot, b: Snapshot) -> bool:
    """Do two listings' snapshots of one version describe the same table? Compared by what they
    mean, not the log's text: a checkpoint may write the schema string in another JSON form
    (spacing, key order) than the commits it replaces."""
    ma, mb = a.metadata, b.metadata
    return (
        a.protocol == b.protocol
        and ma.id == mb.id
        and ma.partition_columns == mb.partition_columns
        and ma.column_mapping_mode == mb.column_mapping_mode
        and ma.configuration == mb.configuration
        and ma.arrow_schema.equals(mb.arrow_schema, check_metadata=True)
        and ma.physical_schema.equals(mb.physical_schema, check_metadata=True)
    )
