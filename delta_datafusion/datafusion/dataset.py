"""A pyarrow ``Dataset`` that DataFusion scans: the bridge from a query to scan units.

datafusion-python wraps any ``pyarrow.dataset.Dataset`` as a table provider. It calls
``scanner(columns, filter)`` once for the projected schema, ``get_fragments(filter)`` once to
plan partitions, and ``fragment.scanner(...).to_batches()`` per partition on tokio threads. The
filter it passes holds every pushed conjunct and is declared Exact, so rows must be filtered with
SQL semantics: the filter is parsed into the package's predicate tree, which prunes files and
builds the SQL-exact row filter. (See ../shared/docs/datafusion-python-integration.md.)
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import operator
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds

from ..errors import DeltaError, PredicateError
from ..log.actions import CommitData

# Imported eagerly: every query parses its pushed filter, and the substrait protobuf modules
# take ~0.25 s to import, which would otherwise land on the first query of a process.
from ..predicate import BoolLiteral
from ..predicate_parse import expression_text, from_pyarrow
from ..read import UnitReader
from ..read import reader as reader_module
from ..scan_unit import FileUnits, LazyUnits, ScanUnit
from ..thread_pools import ProcessPool


@dataclass
class ScanPlanInfo:
    """What planning did for one filter; shown by :func:`delta_datafusion.explain`."""

    table: str
    version: int | None
    filter: str
    files_total: int
    files_after_partition_pruning: int
    files_after_stats_pruning: int
    fragments: int
    extra: dict[str, Any] = field(default_factory=dict)
    #: the pushed filter as the package's predicate tree (None: no filter)
    predicate: Any = field(default=None, repr=False, compare=False)
    #: the thread that planned it (a statement is planned on the thread that runs it)
    thread: int = field(default=0, repr=False, compare=False)

    def describe(self) -> str:
        text = (
            f"DeltaScan: table={self.table} version={self.version} files_total={self.files_total} "
            f"after_partition_pruning={self.files_after_partition_pruning} "
            f"after_stats_pruning={self.files_after_stats_pruning} fragments={self.fragments} "
            f"pushed_filter=[{self.filter}]"
        )
        if self.extra:
            text += " " + " ".join(f"{k}={v}" for k, v in self.extra.items())
        return text


#: planner(predicate) -> (units, info without fragments); see also :func:`row_counts_wanted`
Planner = Callable[[Any], tuple[Sequence[ScanUnit], ScanPlanInfo]]

# False while a scan that reads a stored column of every file it keeps is planned on this thread
# (see DeltaDataset.get_fragments)
_ROW_COUNTS: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "delta_datafusion_row_counts", default=True
)


def row_counts_wanted() -> bool:
    """May the scan being planned count rows from the log (read/known_rows.py)? False when it
    reads a stored column of every file: a planner may then leave the files' row counts unknown."""
    return _ROW_COUNTS.get()


def target_fragments() -> int:
    """One fragment per two cores. Each fragment's pyarrow scan decodes on pyarrow's own threads,
    and the Python of every fragment takes turns on the GIL, so one scan already keeps the cores
    busy: more fragments only oversubscribe them (measured with 2 cores, 4 -> 2 fragments: change
    feed 493 -> 467 ms, TPC-H Q6 350 -> 331 ms, 2,050 small files 652 -> 605 ms). DataFusion
    spreads the batches of a one-partition scan over its partitions itself (a round-robin
    repartition above it). With one fragment a ``LIMIT`` query decodes one file's first rows, not
    one per fragment: the others' are decoded for nothing, as DataFusion does not pass a Python
    dataset the limit (2 cores, 2 -> 1 fragment, CPU a query with those decodes included:
    ``SELECT * LIMIT 10`` ~28 -> ~19 ms; TPC-H Q6 and Q1, the selective queries: the same or
    less)."""
    return max(1, (os.cpu_count() or 1) // 2)


def balance(units: Sequence[ScanUnit], groups: int) -> list[Sequence[ScanUnit]]:
    """Files to groups by bytes, largest first: the largest few each to the least loaded group,
    then the rest, in size order, fill each group up to an even share (computed over the sizes
    at once; one large file among small ones is then not joined by as many small files as the
    others get). A table's files or a feed's sources (:class:`LazyUnits`) stay rows of their table, made into
    units only when a group is read (a heap over 200,000 units cost ~0.4 s a query)."""
    if not len(units):
        return []
    groups = max(1, min(groups, len(units)))
    if isinstance(units, LazyUnits):
        sizes = units.sizes()
    else:
        sizes = np.fromiter((u.size or 0 for u in units), np.int64, len(units))
    order = np.argsort(-sizes, kind="stable")
    weight = np.maximum(sizes[order], 1)  # an empty or unknown size still costs a file's open
    group_of = np.empty(len(units), np.intp)
    load = np.zeros(groups, np.int64)
    head = min(len(units), BALANCED_ONE_BY_ONE * groups)  # >= groups: no group is left empty
    for i in range(head):
        g = int(np.argmin(load))
        group_of[i] = g
        load[g] += weight[i]
    tail = weight[head:]
    if len(tail):
        by_load = np.argsort(load, kind="stable")
        room = np.cumsum(np.maximum((load.sum() + tail.sum()) / groups - load[by_load], 0))
        middle = np.cumsum(tail) - tail / 2
        group_of[head:] = by_load[np.minimum(np.searchsorted(room, middle, side="right"), groups - 1)]
    picked = [order[group_of == g] for g in range(groups)]
    if isinstance(units, LazyUnits):
        return [units.take(idx) for idx in picked]
    return [[units[i] for i in idx] for idx in picked]


#: balance places this many files per group one by one, the largest (the rest fill the groups)
BALANCED_ONE_BY_ONE = 4


class _ScanThreads:
    """Batches being produced for DataFusion, and an exit guard.

    DataFusion runs scans on its tokio threads, and after a LIMIT is satisfied a task may still pull
    a batch after the query has returned. If the interpreter exits meanwhile, that thread is
    killed inside Python or pyarrow code and the process aborts ("FATAL: exception not
    rethrown", exit code 134; a plain pyarrow dataset does the same). So at exit no new batch is
    started (a scan asking for one fails), and the exit waits until no batch has been in
    progress for ``QUIET`` seconds (the thread still hands its last batch to DataFusion after it
    leaves Python).
    """

    QUIET = 0.05

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # also in a forked child: the parent's scans in progress are not the child's to wait for
        self._cond = threading.Condition()
        self._running = 0
        self._last = 0.0
        self._closing = False
        # scans DataFusion still holds (a stream read partly): closed at exit, see drain()
        self._open: weakref.WeakSet = weakref.WeakSet()
        self._closed: weakref.WeakSet = weakref.WeakSet()

    def track(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        inner = iter(batches)
        try:
            with self._cond:
                self._open.add(inner)
        except TypeError:  # not a generator: nothing to close at exit
            pass
        return self.guard(inner)

    def guard(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        it = iter(batches)
        try:
            while True:
                with self._cond:
                    if self._closing:
                        raise _exiting()
                    self._running += 1
                try:
                    batch = next(it, None)
                finally:
                    with self._cond:
                        self._running -= 1
                        self._last = time.monotonic()
                        self._cond.notify_all()
                        closing = self._closing
                if batch is None:
                    if closing and it in self._closed:  # closed at exit, not finished
                        raise _exiting()
                    return
                yield batch
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                try:
                    close()  # ends the pyarrow scan under it (its read-ahead included)
                except ValueError:  # being closed by close_open_scans on another thread
                    pass

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Work for a query outside a batch: planning parses the log and statistics in pyarrow
        (a thread killed inside pyarrow.json at exit aborted the process). None starts at exit,
        and the exit waits for those running."""
        with self._cond:
            if self._closing:
                raise _exiting()
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                self._running -= 1
                self._last = time.monotonic()
                self._cond.notify_all()

    def drain(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._closing = True
        self.wait_idle(timeout)
        self.close_open_scans()

    def close_open_scans(self) -> None:
        """A stream DataFusion holds half read keeps a pyarrow scanner whose read-ahead runs on
        pyarrow's I/O threads; left open while the interpreter tears down, it crashed the process
        (SIGSEGV in ReadAsync; TPC-H lineitem, a stream read for one batch: 4 exits in 6). Closing
        the scans ends them first."""
        with self._cond:
            open_scans = list(self._open)
        for scan in open_scans:
            with self._cond:
                self._closed.add(scan)  # before closing: its guard must not take the end as done
            try:
                scan.close()
            except Exception:  # noqa: BLE001 - one running right now (the wait timed out)
                with self._cond:
                    self._closed.discard(scan)

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until no batch has been in progress for ``QUIET`` seconds (bounded by ``timeout``):
        after a LIMIT query returns, DataFusion may still start a scan of its other partitions."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                now = time.monotonic()
                quiet_for = now - self._last
                if (self._running == 0 and quiet_for >= self.QUIET) or now >= deadline:
                    return
                self._cond.wait(min(deadline - now, max(self.QUIET - quiet_for, 0.005)))


def _exiting() -> DeltaError:
    """Never a silently short result: a query still running at exit fails."""
    return DeltaError("the Python interpreter is exiting: Delta scans are stopped")


SCAN_THREADS = _ScanThreads()
atexit.register(SCAN_THREADS.drain)
os.register_at_fork(after_in_child=SCAN_THREADS._reset)


class _Scanner:
    """What DataFusion needs from a scanner: ``projected_schema`` and ``to_batches()``."""

    def __init__(self, schema: pa.Schema, batches: Callable[[], Iterator[pa.RecordBatch]]):
        self.projected_schema = schema
        self._batches = batches

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        return SCAN_THREADS.track(self._batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self._batches()), schema=self.projected_schema)


#: Batches under SMALL_BATCH rows (small files, cdc files, filtered files) are merged up to
#: COALESCE_ROWS before DataFusion sees them: every batch costs a fixed hand-over and aggregation
#: step there (benchmarks: count+sum over 2,050 files of 100 rows 600 -> 482 ms; full change
#: feed 499 -> 383 ms; li_part selective queries unchanged). Large batches pass as they are.
SMALL_BATCH = 16384
COALESCE_ROWS = 65536


def _merged(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """The batches as one: pa.concat_batches copies even a single batch (the cdf benchmark's full
    feed: the streamed first file's second 8,192-row batch, 0.7 MB, copied for nothing)."""
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


#: the process's merging threads (see coalesce_small)
_merge_pool = ProcessPool("delta-merge", min_workers=2).get


def _merge_off_thread(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    with SCAN_THREADS.busy():  # the exit waits for it (a thread killed inside pyarrow aborts)
        return _merged(batches)


def _merge_later(batches: list[pa.RecordBatch]) -> Future[pa.RecordBatch] | None:
    """The merge of ``batches`` started on a merging thread (a Future), None when the pool takes
    no more work (the interpreter is shutting down: the caller merges them itself)."""
    try:
        return _merge_pool().submit(_merge_off_thread, batches)
    except RuntimeError:  # "cannot schedule new futures after (interpreter) shutdown"
        return None


def coalesce_small(batches: Iterator[pa.RecordBatch], metadata: Any) -> Iterator[pa.RecordBatch]:
    """The batches with small ones merged (in order); the first passes at once, so a LIMIT query
    still gets its rows from the first file. Merged batches start at twice the first's rows and
    double up to COALESCE_ROWS: a LIMIT needing a few rows more than the first file holds reads a
    few files more, not the whole partition (10,000 one-row files, LIMIT 10: 2.1 -> 0.2 s), while
    a full scan hands over at most ~16 batches more. A small batch with no small neighbour to
    merge with passes as it is (a concat of one batch copies it).

    Merges of COALESCE_ROWS (the doubling done) run on a merging thread while the next small
    batches are read, one at a time per scan: on the thread pulling the batches the copy held
    up the scan (pyarrow reads only a few small files ahead). The cdf benchmark's full feed in
    SQL (~47 MB of 322 small batches merged into ~10): CPU of the pulling thread 106 -> 84 ms a
    warm query, 122 -> 96 ms a process's first (the Python API's read: 91 / 108 ms); the
    process's CPU unchanged (2 cores, other load; fresh processes, medians)."""
    pending: list[pa.RecordBatch] = []
    rows = 0
    target = 0  # rows that make a merged batch; set by the first batch
    merging: Future[pa.RecordBatch] | None = None  # the merge running on a merging thread
    for b in batches:
        if merging is not None and merging.done():
            yield merging.result().replace_schema_metadata(metadata)
            merging = None
        if not target or b.num_rows >= SMALL_BATCH:
            target = target or min(2 * max(b.num_rows, 1), COALESCE_ROWS)
            if merging is not None:
                yield merging.result().replace_schema_metadata(metadata)
                merging = None
            if pending:
                yield _merged(pending).replace_schema_metadata(metadata)
                pending, rows, target = [], 0, min(2 * target, COALESCE_ROWS)
            yield b.replace_schema_metadata(metadata)
            continue
        pending.append(b)
        rows += b.num_rows
        if rows >= target:
            if merging is not None:
                yield merging.result().replace_schema_metadata(metadata)
                merging = None
            merging = None if target < COALESCE_ROWS else _merge_later(pending)
            if merging is None:  # still doubling (a LIMIT's first rows), or shutting down: merged here
                yield _merged(pending).replace_schema_metadata(metadata)
            pending, rows, target = [], 0, min(2 * target, COALESCE_ROWS)
    if merging is not None:
        yield merging.result().replace_schema_metadata(metadata)
    if pending:
        yield _merged(pending).replace_schema_metadata(metadata)


#: A fragment of a table's files that reads their data makes units of its first FIRST_PART files
#: and reads them before the rest: a LIMIT met by the first files leaves the others' units unmade
#: (200,000 files, LIMIT 10: 200,000 units made before, ~1.6 s). The rest is read in parts of
#: read.reader.PART_FILES files, each part's units made as its read starts (bounded memory; each
#: pyarrow scan fills and drains its read-ahead: 25,000 small files, ~4-6 % more CPU, same wall).
FIRST_PART = 64


def read_in_parts(
    reader: UnitReader,
    units: Sequence[ScanUnit],
    columns: Sequence[str],
    predicate: Any,
    batch_size: int | None,
) -> Iterator[pa.RecordBatch]:
    """``reader.read(units, ...)``; a table's files (:class:`FileUnits`) whose data is read, the
    first FIRST_PART files, then the rest a part of PART_FILES at a time (those answered from the
    log are counted at once, see read/known_rows.py)."""
    if not isinstance(units, FileUnits) or not any(c in reader.rs.file_columns for c in columns):
        yield from reader.read(units, columns, predicate, batch_size)
        return
    first = min(FIRST_PART, len(units))
    yield from reader.read(units.slice(0, first), columns, predicate, batch_size)
    step = reader_module.PART_FILES  # a part's units are made when its read starts
    for start in range(first, len(units), step):
        part = units.slice(start, min(start + step, len(units)))
        yield from reader.read(part, columns, predicate, batch_size, first_rows_early=False)


class UnitGroupFragment:
    """One DataFusion partition: a group of scan units read by one pyarrow scan."""

    def __init__(self, dataset: DeltaDataset, units: Sequence[ScanUnit], predicate: Any):
        self.dataset = dataset
        self.units = units
        self.predicate = predicate

    def scanner(
        self,
        schema: pa.Schema | None = None,
        columns: Sequence[str] | None = None,
        filter: Any = None,
        batch_size: int | None = None,
        **_: Any,
    ) -> _Scanner:  # noqa: A002
        cols = self.dataset.output_columns(columns)
        out = self.dataset.projected_schema(cols)
        reader, units, pred = self.dataset.reader, self.units, self.predicate
        md = out.metadata

        def batches() -> Iterator[pa.RecordBatch]:
            return coalesce_small(read_in_parts(reader, units, cols, pred, batch_size), md)

        return _Scanner(out, batches)

    def __repr__(self) -> str:
        return f"DeltaFragment(files={len(self.units)})"


# A table provider gives back nothing but its schema, and asking for it calls this Python
# ``schema`` property on the asking thread: with the probe active there, the lookup learns which
# dataset (if any) a session's table is (see table_function._delta_table_named).
_IDENTITY_PROBE = threading.local()


def lookup_dataset(get_table: Callable[[], Any]) -> DeltaDataset | None:
    """``dataset_behind(get_table())``; a DeltaError a catalog provider of this package raised
    while ``get_table`` ran (datafusion-python turns it into a KeyError) is raised as itself."""
    _IDENTITY_PROBE.error = None
    _IDENTITY_PROBE.in_lookup = True
    try:
        table = get_table()
    except Exception as e:
        cause = _IDENTITY_PROBE.error
        if cause is not None:
            raise cause from e
        raise
    finally:
        _IDENTITY_PROBE.in_lookup = False
        _IDENTITY_PROBE.error = None
    return dataset_behind(table)


def note_provider_error(error: Exception) -> None:
    """Called by this package's catalog providers when opening a table fails (see lookup_dataset)."""
    if getattr(_IDENTITY_PROBE, "in_lookup", False):
        _IDENTITY_PROBE.error = error


# The plans made on this thread while dd.explain runs its statement (None: not explaining). The
# datasets the session holds before and after the statement miss one that another thread put
# there in between and replaced again (a folder-catalog table a writer commits to, a refresh).
_RECORDING: contextvars.ContextVar[list[ScanPlanInfo] | None] = contextvars.ContextVar(
    "delta_datafusion_recorded_plans", default=None
)


@contextlib.contextmanager
def recording_plans() -> Iterator[list[ScanPlanInfo]]:
    """The scans planned on this thread inside the block, in order."""
    recorded: list[ScanPlanInfo] = []
    token = _RECORDING.set(recorded)
    try:
        yield recorded
    finally:
        _RECORDING.reset(token)


# (weak reference to the dataset, the columns) of the scanner DataFusion asked a dataset for
# last on this thread: DataFusion plans a scan on one thread, scanner() then get_fragments()
_PLANNED_SCAN = threading.local()

_PROBES = threading.Lock()
_PROBING = 0  # lookups in progress (any thread): DeltaDataset.schema is the probing property


def dataset_behind(table: Any) -> DeltaDataset | None:
    """The :class:`DeltaDataset` a ``datafusion.Table`` serves, None for any other table."""
    global _PROBING
    with _PROBES:
        _PROBING += 1
        if _PROBING == 1:
            DeltaDataset.schema = DeltaDataset._probing_schema
    _IDENTITY_PROBE.found = None
    _IDENTITY_PROBE.active = True
    try:
        table.schema  # noqa: B018 - the provider calls DeltaDataset.schema on this thread
    finally:
        _IDENTITY_PROBE.active = False
        with _PROBES:
            _PROBING -= 1
            if _PROBING == 0:
                DeltaDataset.schema = DeltaDataset._plain_schema
    found, _IDENTITY_PROBE.found = _IDENTITY_PROBE.found, None
    return found


class DeltaDataset(ds.Dataset):
    """A Delta table (or change feed) as a pyarrow Dataset for ``datafusion.Table``."""

    def __init__(
        self,
        schema: pa.Schema,
        reader: UnitReader,
        planner: Planner,
        label: str,
        storage: Any = None,
        commits: Sequence[CommitData] = (),
    ):
        # ds.Dataset's own __init__ is not meant to be called; everything here is plain Python.
        self._schema = schema
        self.reader = reader
        self.planner = planner
        self.label = label
        #: the table's Storage (None for a change feed): table_changes() on this table reads it
        self.storage = storage
        #: the commits the table's snapshot read (it holds them anyway): table_changes() on this
        #: table takes them instead of reading them again
        self.commits = commits
        self._lock = threading.Lock()
        # every planning in order (bounded), for dd.explain: a query may scan one table twice
        self._history: deque[ScanPlanInfo] = deque(maxlen=64)
        self.plans_made = 0

    # DataFusion reads .schema many times per query; it must be cheap and never raise. Outside
    # lookups (dataset_behind) it runs no Python code: a Ctrl-C handler run inside a Python
    # property raised there, and datafusion-python panics on an error reading a dataset's schema
    # (PanicException instead of KeyboardInterrupt: 30 Ctrl-Cs in 400).
    _plain_schema = property(operator.attrgetter("_schema"))

    @property
    def _probing_schema(self) -> pa.Schema:
        if getattr(_IDENTITY_PROBE, "active", False):
            _IDENTITY_PROBE.found = self
        return self._schema

    schema = _plain_schema

    def projected_schema(self, columns: Sequence[str]) -> pa.Schema:
        # Schema metadata must survive projection, even an empty one (count(*)): DataFusion
        # compares the physical and logical schemas including metadata.
        return pa.schema([self._schema.field(c) for c in columns], metadata=self._schema.metadata)

    def output_columns(self, columns: Sequence[str] | None) -> list[str]:
        return list(self._schema.names) if columns is None else list(columns)

    def _predicate(self, filter: Any) -> Any:  # noqa: A002
        if filter is None:
            return None
        if isinstance(filter, pa.Scalar):  # a contradiction folded by DataFusion (e.g. a = 0 AND a = 1)
            return BoolLiteral(bool(filter.as_py()) if filter.is_valid else None)
        try:
            pred = from_pyarrow(filter, self._schema)
        except PredicateError as e:
            raise DeltaError(
                f"{self.label}: cannot interpret pushed filter {expression_text(filter)}: {e}"
            ) from e
        if self._kernel_gaps_possible(pred):
            from ..scan import check_evaluable

            try:  # refused while planning, naming the filter, not later as if a data file were bad
                check_evaluable(pred, self._schema)
            except PredicateError as e:
                raise PredicateError(f"{self.label}: {e}") from e
        return pred

    def _kernel_gaps_possible(self, pred: Any) -> bool:
        """DataFusion coerces a pushed filter's types itself; what pyarrow may still lack kernels
        for is a comparison on a nested or binary column (`l = [3]`). Checking costs ~0.5 ms, so
        only filters on such columns are checked."""
        from ..predicate import referenced_columns

        raw_kinds = (pa.types.is_nested, pa.types.is_binary, pa.types.is_large_binary)
        raw_kinds += (pa.types.is_fixed_size_binary, pa.types.is_binary_view)
        for name in referenced_columns(pred):
            i = self._schema.get_field_index(name)
            if i < 0 or any(kind(self._schema.field(i).type) for kind in raw_kinds):
                return True
        return False

    def scanner(self, columns: Sequence[str] | None = None, filter: Any = None, **_: Any) -> _Scanner:  # noqa: A002
        cols = self.output_columns(columns)
        out = self.projected_schema(cols)
        # DataFusion plans a scan by asking for this scanner's schema, then for the fragments
        # (the columns do not reach get_fragments): the columns are kept for that call
        _PLANNED_SCAN.columns = (weakref.ref(self), cols)

        def everything() -> Iterator[pa.RecordBatch]:
            for frag in self.get_fragments(filter, cols):
                yield from frag.scanner(columns=cols).to_batches()

        return _Scanner(out, everything)

    def _reads_stored_columns(self, columns: Sequence[str] | None) -> bool:
        """Does a scan of ``columns`` read a column stored in the files (so that no file's rows
        are counted from the log)? False when not known (``columns`` None)."""
        return columns is not None and any(c in self.reader.rs.file_columns for c in columns)

    def _planned_columns(self) -> Sequence[str] | None:
        """The columns of this dataset's scanner made last on this thread (taken once), None when
        its last scanner was another dataset's (the planner then keeps the row counts)."""
        planned, _PLANNED_SCAN.columns = getattr(_PLANNED_SCAN, "columns", None), None
        if planned is None or planned[0]() is not self:
            return None
        return planned[1]

    def get_fragments(
        self,
        filter: Any = None,  # noqa: A002
        columns: Sequence[str] | None = None,
    ) -> list[UnitGroupFragment]:
        """The partitions of a scan under ``filter``; ``columns`` (else those of the scanner
        DataFusion asked for just before) tell the planner whether rows may be counted from the
        log: a scan reading a stored column reads every file, so the row counts (the files' stats
        JSON, without a filter) are not parsed."""
        pred = self._predicate(filter)
        planned = self._planned_columns()
        token = _ROW_COUNTS.set(not self._reads_stored_columns(columns if columns is not None else planned))
        try:
            with SCAN_THREADS.busy():
                units, info = self.planner(pred)
        finally:
            _ROW_COUNTS.reset(token)
        info.predicate = pred
        groups = balance(units, target_fragments())
        info.fragments = len(groups)
        info.thread = threading.get_ident()
        with self._lock:
            self._history.append(info)
            self.plans_made += 1
        recorded = _RECORDING.get()
        if recorded is not None:
            recorded.append(info)
        # Always at least one (possibly empty) fragment: with zero partitions DataFusion 55
        # fails to plan ORDER BY above the scan (SanityCheckPlan).
        return [UnitGroupFragment(self, g, pred) for g in groups] or [UnitGroupFragment(self, [], pred)]

    def to_table(self, columns: Sequence[str] | None = None, filter: Any = None, **kw: Any) -> pa.Table:  # noqa: A002
        return self.scanner(columns=columns, filter=filter).to_table()

    def count_rows(self, filter: Any = None, **_: Any) -> int:  # noqa: A002
        return self.to_table(columns=[], filter=filter).num_rows

    @property
    def last_plan(self) -> ScanPlanInfo | None:
        """The most recent planning (None before the first)."""
        with self._lock:
            return self._history[-1] if self._history else None

    def plans_since(self, count: int, thread: int | None = None) -> list[ScanPlanInfo]:
        """The plans made after the first ``count`` (see :attr:`plans_made`), oldest first; only
        those planned on ``thread`` if given (other threads may be querying the same table)."""
        with self._lock:
            new = self.plans_made - count
            plans = list(self._history)[-new:] if new > 0 else []
        return [p for p in plans if thread is None or p.thread == thread]

    def __repr__(self) -> str:
        return f"DeltaDataset({self.label})"
