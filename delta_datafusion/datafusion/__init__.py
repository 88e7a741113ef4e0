"""DataFusion integration: table provider, table factory, folder catalog, table_changes()."""

from .dataset import DeltaDataset, ScanPlanInfo
from .provider import table_dataset
from .session import (
    DeltaCatalogProvider,
    DeltaSchemaProvider,
    DeltaTableFactory,
    explain,
    register,
    register_catalog,
    register_table,
)

__all__ = [
    "DeltaDataset",
    "ScanPlanInfo",
    "table_dataset",
    "DeltaCatalogProvider",
    "DeltaSchemaProvider",
    "DeltaTableFactory",
    "explain",
    "register",
    "register_catalog",
    "register_table",
]
