"""delta-datafusion: a pure-Python Delta Lake reader for Apache DataFusion."""

from .errors import DeltaError
from .scan import Scan, ScanMetadata
from .snapshot import Snapshot
from .table import DeltaTable

__all__ = ["DeltaTable", "Snapshot", "Scan", "ScanMetadata", "DeltaError"]
__version__ = "0.1.0"
