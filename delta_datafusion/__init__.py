"""delta-datafusion: a pure-Python Delta Lake reader for Apache DataFusion."""

from .errors import DeltaError
from .scan import Scan, ScanMetadata
from .snapshot import Snapshot
from .table import DeltaTable

__version__ = "0.1.0"


def __getattr__(name: str):
    # The DataFusion glue is imported lazily so log replay works without importing datafusion.
    if name in ("register", "register_table", "register_catalog", "explain"):
        from . import datafusion as _df

        return getattr(_df, name)
    raise AttributeError(name)


__all__ = [
    "DeltaTable",
    "Snapshot",
    "Scan",
    "ScanMetadata",
    "DeltaError",
    "register",
    "register_table",
    "register_catalog",
    "explain",
]
