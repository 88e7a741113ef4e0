"""DataFusion integration: table provider, table factory, folder catalog, table_changes()."""

from . import filter_operators
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

# before any query: see filter_operators (constant conjuncts in pushed filters)
filter_operators.install()

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
