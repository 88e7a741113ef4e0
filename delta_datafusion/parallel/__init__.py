"""Two-phase (distributed) scan-metadata replay.

The design follows delta-kernel-rs' ``parallel_scan_metadata``: log replay is split into

1. a **sequential phase** (:class:`SequentialPhase`, returned by ``Scan.parallel_scan_metadata()``)
   that replays the commits after the checkpoint and the checkpoint *manifest* (the inline actions
   of a V2 checkpoint). It yields :class:`~delta_datafusion.scan.ScanMetadata` batches like
   ``scan_metadata()`` and remembers the key (resolved path + deletion-vector id) of every file
   action it saw;
2. a **parallel phase** (:class:`ParallelScanMetadata`) over the checkpoint *leaves*: the sidecars of
   a V2 checkpoint or the parts of a (multi-part) classic checkpoint. A checkpoint holds reconciled
   state (one add per key), so a leaf's adds only need to be checked against the keys the commits
   touched, never against other leaves: any partition of the leaves (and of their row groups) over
   any number of workers gives, together with the sequential output, exactly ``scan_metadata()``.

Modules, by job:

* ``phases``: :class:`SequentialPhase`, its outcome (:class:`Done` or :class:`Parallel`
  ``(state, files)``) and :class:`ParallelScanMetadata`;
* ``state``: :class:`ParallelState`, everything a worker needs and nothing more, and its
  versioned, checksummed bytes (:meth:`ParallelState.to_bytes`; no pickle);
* ``predicate_json``: the scan's predicate as JSON inside those bytes;
* ``split``: :func:`split_leaves` partitions leaf files into balanced groups, splitting large
  leaves into row-group ranges (:func:`expand_leaf`), which the reference implementation cannot do;
* ``execute``: :func:`run_parallel` runs both phases on local threads or any
  ``concurrent.futures.Executor`` (process pools get state bytes and return tables through
  ``/dev/shm``), :func:`run_with_dask` on a ``distributed.Client``. On threads the leaves start
  while the commits replay (:meth:`SequentialPhase.prepare`), handed out one at a time (the
  last ones split between the threads).
"""

from .execute import (
    concat_files,
    execute_parallel,
    run_parallel,
    run_with_dask,
    scan_leaf_files,
    scan_leaf_files_shared,
    shared_dir,
)
from .phases import Done, Parallel, ParallelScanMetadata, SequentialPhase
from .predicate_json import decode_value, encode_value
from .split import expand_leaf, split_leaves
from .state import FORMAT_VERSION, MAGIC, ParallelState

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "Done",
    "Parallel",
    "ParallelScanMetadata",
    "ParallelState",
    "SequentialPhase",
    "concat_files",
    "decode_value",
    "encode_value",
    "execute_parallel",
    "expand_leaf",
    "run_parallel",
    "run_with_dask",
    "scan_leaf_files",
    "scan_leaf_files_shared",
    "shared_dir",
    "split_leaves",
]
