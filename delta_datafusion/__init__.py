"""delta-datafusion: a pure-Python Delta Lake reader for Apache DataFusion."""

import importlib.util as _importlib_util
import sys as _sys

# pyarrow checks numpy inputs for numpy.ma.MaskedArray, which imports numpy.ma (~40 ms) on the
# first conversion, i.e. inside a process's first query; pay it with the package import instead.
import numpy.ma as _numpy_ma  # noqa: F401

# pyarrow infers the type of every Python value passed to a compute function, and each inference
# tries `import dateutil.relativedelta`. Without python-dateutil that failing import scans
# sys.path every time: ~0.2 ms per call, ~50 calls (2-3 ms) per planned query (measured). Record
# the absence once; the import still fails the same way (ImportError) for everyone else.
if "dateutil.relativedelta" not in _sys.modules and _importlib_util.find_spec("dateutil") is None:
    _sys.modules["dateutil.relativedelta"] = None  # type: ignore[assignment]

from .errors import (
    ArgumentError,
    CdfNotEnabledError,
    ChangeDataFeedError,
    DataFileNotFoundError,
    DeletionVectorError,
    DeltaError,
    InvalidProtocolError,
    InvalidRangeError,
    LogCorruptError,
    MissingLogFileError,
    MissingMetadataError,
    MissingProtocolError,
    NonContiguousVersionsError,
    ParallelStateError,
    PredicateError,
    SchemaError,
    StorageError,
    TableNotFoundError,
    UnsupportedFeatureError,
    VersionNotFoundError,
    from_datafusion,
)
from .scan import Scan, ScanMetadata
from .snapshot import Snapshot
from .table import DeltaTable

__version__ = "0.1.0"


_LAZY = ("register", "register_table", "register_catalog", "explain")


def __getattr__(name: str):
    # The DataFusion glue is imported lazily so log replay works without importing datafusion.
    if name in _LAZY:
        from . import datafusion as _df

        return getattr(_df, name)
    raise AttributeError(f"module 'delta_datafusion' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "ArgumentError",
    "DeltaTable",
    "Snapshot",
    "Scan",
    "ScanMetadata",
    "DeltaError",
    "TableNotFoundError",
    "LogCorruptError",
    "MissingLogFileError",
    "NonContiguousVersionsError",
    "InvalidProtocolError",
    "MissingProtocolError",
    "MissingMetadataError",
    "UnsupportedFeatureError",
    "VersionNotFoundError",
    "SchemaError",
    "StorageError",
    "DataFileNotFoundError",
    "DeletionVectorError",
    "ChangeDataFeedError",
    "CdfNotEnabledError",
    "InvalidRangeError",
    "PredicateError",
    "ParallelStateError",
    "from_datafusion",
    "register",
    "register_table",
    "register_catalog",
    "explain",
]
