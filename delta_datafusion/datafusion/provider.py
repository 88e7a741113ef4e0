"""The Delta table provider: a snapshot served to DataFusion with projection and filter pushdown."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..scan import ScanMetadata
from ..snapshot import Snapshot
from .dataset import DeltaDataset, ScanPlanInfo

TABLE_URI_KEY = b"delta.table_uri"
VERSION_KEY = b"delta.version"


def provider_schema(snapshot: Snapshot, extra: dict[bytes, bytes] | None = None) -> pa.Schema:
    md = {TABLE_URI_KEY: snapshot.table_root.encode(), VERSION_KEY: str(snapshot.version).encode()}
    md.update(extra or {})
    return snapshot.schema.with_metadata(md)


def table_dataset(snapshot: Snapshot, label: str | None = None) -> DeltaDataset:
    """A DataFusion-ready dataset over one snapshot."""
    scan = snapshot.scan()
    reader = scan.reader()
    label = label or snapshot.table_root

    def planner(pred: Any) -> tuple[list, ScanPlanInfo]:
        files, total, after_parts = snapshot.select_files(pred)
        info = ScanPlanInfo(
            label, snapshot.version, "" if pred is None else str(pred), total, after_parts, files.num_rows, 0
        )
        return ScanMetadata(files).scan_units(snapshot, pred), info

    return DeltaDataset(provider_schema(snapshot), reader, planner, label)
