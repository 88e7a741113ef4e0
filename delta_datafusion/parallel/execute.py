"""Running the parallel phase: local threads, any ``concurrent.futures`` executor, or Dask.

Drivers split the leaves, ship the state (in memory to threads, as bytes to processes and
Dask workers), and bring the result tables back, through ``/dev/shm`` files the driver maps
when the workers share its machine. Worker entry points are top-level so they pickle by name.
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import tempfile
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..arguments import integer
from ..arrow_threads import arrow_threads
from ..errors import ArgumentError, DeltaError, LogCorruptError, ParallelStateError
from ..log.checkpoint import LeafFile
from ..log.segment import is_multi_part_checkpoint
from ..replay import file_keys
from ..scan import Scan, ScanMetadata
from .phases import Done, Parallel, ParallelScanMetadata, SequentialPhase
from .split import as_leaf, split_leaves
from .state import LeafAdds, ParallelState

_STATE_CACHE: dict[bytes, ParallelState] = {}
_STATE_CACHE_LOCK = threading.Lock()
_STATE_CACHE_SIZE = 4


def _cached_state(state_bytes: bytes) -> ParallelState:
    digest = hashlib.blake2b(state_bytes, digest_size=16).digest()
    with _STATE_CACHE_LOCK:
        state = _STATE_CACHE.get(digest)
    if state is None:
        state = ParallelState.from_bytes(state_bytes)
        with _STATE_CACHE_LOCK:
            while len(_STATE_CACHE) >= _STATE_CACHE_SIZE:
                _STATE_CACHE.pop(next(iter(_STATE_CACHE)))
            _STATE_CACHE[digest] = state
    return state


def scan_leaf_files(
    state_bytes: bytes, files: Sequence[LeafFile | str], arrow_threads: bool = True
) -> list[ScanMetadata]:
    """Worker entry point (top-level, picklable): phase two over ``files`` from serialized state.

    The decoded state is cached per process (by digest), so a worker running many tasks of one
    scan decodes it once. ``arrow_threads`` as in :class:`ParallelScanMetadata`.
    """
    state = _cached_state(bytes(state_bytes))
    return list(ParallelScanMetadata(state, files, arrow_threads))


@dataclass(frozen=True)
class _SharedBatch:
    """A ScanMetadata whose file table waits in an Arrow IPC file (tmpfs) for the driver to map."""

    path: str
    files_before_pruning: int
    extra: dict[str, Any]


def shared_dir() -> str:
    """Where workers on this machine leave result tables: ``/dev/shm`` when usable, else the temp dir."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()


def scan_leaf_files_shared(
    state_bytes: bytes, files: Sequence[LeafFile | str], directory: str, arrow_threads: bool = True
) -> list[Any]:
    """Like :func:`scan_leaf_files`, for workers on the driver's machine: each batch's table is written
    as an Arrow IPC file in ``directory`` (normally tmpfs) and only its name travels back, so the
    driver maps it instead of unpickling a copy. Falls back to returning the batch when it cannot write.
    """
    out: list[Any] = []
    for batch in scan_leaf_files(state_bytes, files, arrow_threads):
        path = None
        try:
            fd, path = tempfile.mkstemp(prefix="delta-leaf-", suffix=".arrow", dir=directory)
            os.close(fd)
            with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, batch.files.schema) as writer:
                writer.write_table(batch.files)
            out.append(_SharedBatch(path, batch.files_before_pruning, batch.extra))
        except OSError:
            if path is not None:
                _unlink(path)
            out.append(batch)
    return out


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _receive(items: list[Any]) -> list[ScanMetadata]:
    """Map shared batches (zero-copy; the file is unlinked at once, the mapping lives on)."""
    out = []
    try:
        for item in items:
            if isinstance(item, _SharedBatch):
                table = pa.ipc.open_file(pa.memory_map(item.path)).read_all()
                _unlink(item.path)
                out.append(
                    ScanMetadata(table, files_before_pruning=item.files_before_pruning, extra=item.extra)
                )
            else:
                out.append(item)
    finally:
        for item in items:
            if isinstance(item, _SharedBatch):
                _unlink(item.path)
    return out


def _discard(futures: Sequence[Any]) -> None:
    """After a failure: wait for the other tasks, then drop the shared files of those that finished."""
    from concurrent.futures import wait

    wait(futures)
    for f in futures:
        if not f.cancelled() and f.exception() is None:
            _discard_items(f.result())


def _scan_leaves_local(
    state: ParallelState, files: Sequence[LeafFile], threads: bool = True
) -> list[ScanMetadata]:
    return list(ParallelScanMetadata(state, files, threads))


def _arrow_threads_for(tasks: int) -> bool:
    """pyarrow's own pool only while the tasks leave this machine's CPUs idle."""
    return tasks < _default_workers()


def _default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _check_transport(transport: str) -> None:
    if transport not in ("auto", "pickle", "shared"):
        raise ArgumentError(f"transport must be 'auto', 'pickle' or 'shared', got {transport!r}")


def _check_workers(workers: int | None) -> int | None:
    """None (the default count) or a count of at least one, checked before any work starts."""
    if workers is None:
        return None
    workers = integer(workers, "workers")
    if workers < 1:
        raise ArgumentError(f"workers must be at least 1 (or None for the default), got {workers}")
    return workers


def execute_parallel(
    state: ParallelState,
    files: Sequence[LeafFile],
    executor: Executor | None = None,
    workers: int | None = None,
    transport: str = "auto",
) -> list[ScanMetadata]:
    """Run phase two over ``files`` and return its batches (in a deterministic order).

    The leaves are split into ``workers`` balanced groups (:func:`split_leaves`; default: the
    executor's worker count, else the usable CPUs), one task per group.

    * no executor: inline when there is a single group, else on a private thread pool;
    * a ``ThreadPoolExecutor``: the in-memory state is shared, nothing is serialized;
    * any other executor: tasks get the state bytes and a file list. With ``transport="shared"``
      (the default, ``"auto"``, for a ``ProcessPoolExecutor``, whose workers share this machine)
      result tables come back as Arrow IPC files in ``/dev/shm`` that are memory-mapped here;
      with ``"pickle"`` (``"auto"`` for other executors, which may be remote) they are pickled.
    """
    _check_transport(transport)
    workers = _check_workers(workers)
    files = [as_leaf(f) for f in files]
    if not files:
        return []
    workers = workers or getattr(executor, "_max_workers", None) or _default_workers()
    groups = split_leaves(files, workers, state.storage)
    local = isinstance(executor, ThreadPoolExecutor | ProcessPoolExecutor) or executor is None
    # several tasks on this machine's CPUs: each parses on its own thread only
    threads = _arrow_threads_for(min(len(groups), workers)) if local else True
    if executor is None:
        if len(groups) <= 1:
            return _refuse_repeated_files(_scan_leaves_local(state, files, threads), files)
        with ThreadPoolExecutor(len(groups), thread_name_prefix="delta-leaf") as pool:
            results = list(pool.map(lambda g: _scan_leaves_local(state, g, threads), groups))
        return _refuse_repeated_files([m for batch in results for m in batch], files)
    if isinstance(executor, ThreadPoolExecutor):
        futures = [executor.submit(_scan_leaves_local, state, g, threads) for g in groups]
        return _refuse_repeated_files([m for f in futures for m in f.result()], files)
    shared = transport == "shared" or (transport == "auto" and isinstance(executor, ProcessPoolExecutor))
    blob = state.to_bytes()
    if shared:
        directory = shared_dir()
        futures = [executor.submit(scan_leaf_files_shared, blob, g, directory, threads) for g in groups]
    else:
        futures = [executor.submit(scan_leaf_files, blob, g, threads) for g in groups]
    try:
        out = [m for f in futures for m in _receive(f.result())]
    except BaseException:
        _discard(futures)
        raise
    return _refuse_repeated_files(out, files)


def _refuse_repeated_files(batches: list[ScanMetadata], leaves: Sequence[LeafFile]) -> list[ScanMetadata]:
    """The parts of a multi-part checkpoint hold each live file once. A part repeating another's
    files (a copied part) gives their rows twice; the sequential replay refuses it, and so does
    this union of the workers' batches (one worker sees only its own parts)."""
    parts = {leaf.path for leaf in leaves if is_multi_part_checkpoint(posixpath.basename(leaf.path))}
    if len(parts) < 2:
        return batches
    keys = [
        file_keys(
            b.files.column("location").combine_chunks(), b.files.column("deletion_vector").combine_chunks()
        )
        for b in batches
        if b.num_files
    ]
    if keys:
        every = pa.concat_arrays(keys)
        if pc.count_distinct(every).as_py() != len(every):
            first = min(parts)
            raise LogCorruptError(
                f"{first}: the parts of this multi-part checkpoint list a file more than once"
            )
    return batches


def run_parallel(
    scan: Scan, executor: Executor | None = None, workers: int | None = None, transport: str = "auto"
) -> list[ScanMetadata]:
    """Both phases: the sequential batches, then the leaves' batches (see :func:`execute_parallel`).

    The union of the returned batches' files is exactly ``scan.scan_metadata()``'s.
    """
    _check_transport(transport)
    workers = _check_workers(workers)
    phase = scan.parallel_scan_metadata()
    if executor is None or isinstance(executor, ThreadPoolExecutor):
        ahead = _run_ahead(phase, executor, workers)
        if ahead is not None:
            return ahead
    out = list(phase)
    after = phase.finish()
    if isinstance(after, Parallel):
        out.extend(execute_parallel(after.state, after.files, executor, workers, transport))
    return out


class _Abandoned(Exception):
    """The sequential phase failed: the leaves' tasks stop (its error is the one raised)."""


def _run_ahead(
    phase: SequentialPhase, executor: ThreadPoolExecutor | None, workers: int | None
) -> list[ScanMetadata] | None:
    """Both phases, the leaves started on threads as soon as the manifest lists them: reading
    and typing a leaf needs no seen key, so they run while this thread replays the commits (the
    sequential phase otherwise leaves the other cores idle), and each leaf's touched adds are
    dropped once :meth:`SequentialPhase.finish` has the keys. None when there is no leaf or a
    single group (run inline, as :func:`execute_parallel` does)."""
    ahead = phase.prepare()
    if ahead is None:
        return None
    workers = workers or getattr(executor, "_max_workers", None) or _default_workers()
    groups = split_leaves(ahead.files, workers, ahead.state.storage)
    if executor is None and len(groups) <= 1:
        return None
    queue = _LeafQueue([leaf for group in groups for leaf in group], len(groups))
    threads = _arrow_threads_for(min(len(groups), workers))
    keyed: Future[ParallelState] = Future()
    pool = executor or ThreadPoolExecutor(len(groups), thread_name_prefix="delta-leaf")
    try:
        futures = [pool.submit(_scan_leaves_ahead, ahead.state, keyed, queue, threads) for _ in groups]
        try:
            out = list(phase)
            after = phase.finish()
            if not isinstance(after, Parallel):  # prepare() found leaves: finish() has them too
                raise ParallelStateError(
                    f"{ahead.state!r}: the sequential phase lost the leaves it listed ({after!r})"
                )
            keyed.set_result(after.state)
        except BaseException:
            keyed.set_exception(_Abandoned())
            wait(futures)
            raise
        for f in futures:
            f.result()
    finally:
        if executor is None:
            pool.shutdown(wait=True)
    return out + _refuse_repeated_files(queue.results(), ahead.files)


#: Fewest adds of a piece when the last leaves' adds are shared between threads (see :class:`_LeafQueue`).
TAIL_PIECE_ROWS = 16_384
#: Pieces per thread a last leaf is split into: the threads end within about a piece of each
#: other (1M adds in 8 sidecars on 2 threads, 2 pieces a leaf of ~75 ms each: their ends a
#: median 63-84 ms apart in two sets of 15-16 runs; 7 pieces of ~21 ms: 21-34 ms).
TAIL_PIECES_PER_THREAD = 4


@dataclass(frozen=True, eq=False)  # offered pieces are told apart by identity
class _Piece:
    """Part ``part`` of the adds of leaf ``index`` (the whole adds when the leaf is not split)."""

    index: int
    part: int
    adds: LeafAdds


class _LeafQueue:
    """Leaves (or row-group ranges) handed out in order to whichever thread asks first, so a
    thread slowed down (by other work on its core) takes fewer of them instead of finishing last
    with a static share; their batches come back in the leaves' order.

    The last leaves are the exception: once no leaf is left to hand out, a leaf just read is split
    into :data:`TAIL_PIECES_PER_THREAD` pieces per thread (of :data:`TAIL_PIECE_ROWS` adds at
    least), offered to the threads that have nothing left to do (the reader types those nobody
    took itself). A thread with no leaf left waits for such pieces while others still read, so
    the threads end within a piece of each other instead of one typing a whole last leaf alone
    (1M adds in 8 sidecars on 2 threads: ~200 ms a leaf)."""

    def __init__(self, leaves: list[LeafFile], threads: int = 1):
        self._leaves = leaves
        self._threads = threads
        self._next = 0
        self._reading = 0  # leaves handed out and not read yet: they may still be split
        self._stopped = False
        self._offered: list[_Piece] = []
        self._batches: list[list[ScanMetadata | None] | None] = [None] * len(leaves)
        self._cond = threading.Condition()

    def take(self) -> tuple[int, LeafFile] | _Piece | None:
        """The next leaf to read, else a piece another thread offered, else None (waiting while a
        leaf handed out is still being read)."""
        with self._cond:
            while not self._stopped:
                if self._next < len(self._leaves):
                    i = self._next
                    self._next += 1
                    self._reading += 1
                    return i, self._leaves[i]
                if self._offered:
                    return self._offered.pop(0)
                if self._reading == 0:
                    break
                self._cond.wait()
            return None

    def read(self, i: int, adds: LeafAdds) -> list[_Piece]:
        """Leaf ``i`` was read: its pieces, the first for the reader, the others offered to the
        other threads (one piece when leaves are left to hand out or it is small)."""
        n = adds.flat.num_rows
        with self._cond:
            self._reading -= 1
            parts = self._threads * TAIL_PIECES_PER_THREAD if self._next >= len(self._leaves) else 1
            parts = max(1, min(parts, n // TAIL_PIECE_ROWS))
            bounds = [n * k // parts for k in range(parts + 1)]
            pieces = [
                _Piece(i, k, adds if parts == 1 else replace(adds, flat=adds.flat.slice(lo, hi - lo)))
                for k, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:], strict=True))
            ]
            self._batches[i] = [None] * parts
            self._offered.extend(pieces[1:])
            self._cond.notify_all()
        return pieces

    def reclaim(self, piece: _Piece) -> bool:
        """Take back an offered piece no other thread took (True: the caller types it)."""
        with self._cond:
            if piece in self._offered:
                self._offered.remove(piece)
                return True
            return False

    def stop(self) -> None:
        """A thread failed: the others take nothing more (its error is raised)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def put(self, piece: _Piece, batch: ScanMetadata) -> None:
        slots = self._batches[piece.index]
        if slots is None:  # pieces come from read(), which makes the slots
            raise ParallelStateError(f"{self._leaves[piece.index].describe()}: a piece of a leaf not read")
        slots[piece.part] = batch

    def results(self) -> list[ScanMetadata]:
        missing = [
            leaf.describe()
            for leaf, slots in zip(self._leaves, self._batches, strict=True)
            if slots is None or any(b is None for b in slots)
        ]
        if missing:  # every task finished without an error first
            raise ParallelStateError(f"leaves of the parallel phase were not scanned: {', '.join(missing)}")
        return [b for slots in self._batches if slots is not None for b in slots if b is not None]


def _scan_leaves_ahead(
    state: ParallelState, keyed: Future[ParallelState], queue: _LeafQueue, threads: bool
) -> None:
    """Scan leaves (and pieces of leaves, see :class:`_LeafQueue`) from ``queue`` until it is
    empty: each read (and, while the seen keys are still unknown, typed) with ``state``, then its
    touched adds dropped with the keyed state."""
    with arrow_threads(threads):
        try:
            while (item := queue.take()) is not None:
                if keyed.done() and keyed.exception() is not None:
                    queue.stop()
                    return  # the sequential phase failed: its error is raised, not ours
                if isinstance(item, _Piece):
                    queue.put(item, _surviving(state, keyed, item.adds))
                    continue
                i, leaf = item
                own, *offered = queue.read(i, state.leaf_adds(leaf))
                queue.put(own, _surviving(state, keyed, own.adds))
                for piece in offered:
                    if queue.reclaim(piece):
                        queue.put(piece, _surviving(state, keyed, piece.adds))
        except BaseException:
            queue.stop()
            raise


def _surviving(state: ParallelState, keyed: Future[ParallelState], adds: LeafAdds) -> ScanMetadata:
    """Typed ahead while the seen keys are unknown, then their touched adds dropped."""
    if not keyed.done():
        adds = state.typed_ahead(adds)
    return keyed.result().surviving_leaf(adds)


def _is_local_cluster(client: Any) -> bool:
    hosts = set()
    for addr in client.scheduler_info().get("workers", {}):
        host = addr.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
        hosts.add(host)
    return bool(hosts) and hosts <= {"127.0.0.1", "localhost", "::1"}


def run_with_dask(
    scan: Scan, client: Any, workers: int | None = None, transport: str = "auto"
) -> list[ScanMetadata]:
    """Both phases, the second on a ``distributed.Client``.

    The state bytes are broadcast once to every worker (``client.scatter``); each task is
    :func:`scan_leaf_files` over one balanced group of leaf files (``workers`` groups, default:
    the cluster's total thread count); results are gathered back in group order. ``transport``
    as in :func:`execute_parallel`; ``"auto"`` uses shared files only when every worker listens on
    a loopback address (so it is on this machine), else Dask's own serialization.
    """
    _check_transport(transport)
    workers = _check_workers(workers)
    phase = scan.parallel_scan_metadata()
    out = list(phase)
    after = phase.finish()
    if isinstance(after, Done):
        return out
    if workers is None:
        info = client.scheduler_info()
        workers = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()) or 1
    groups = split_leaves(after.files, workers, after.state.storage)
    blob = after.state.to_bytes()
    on_this_machine = _is_local_cluster(client)
    shared = transport == "shared" or (transport == "auto" and on_this_machine)
    # several tasks on this machine's CPUs: each parses on its own thread only
    threads = _arrow_threads_for(min(len(groups), workers)) if on_this_machine else True
    state_future = client.scatter(blob, broadcast=True, hash=False)
    if shared:
        directory = shared_dir()
        futures = [
            client.submit(scan_leaf_files_shared, state_future, g, directory, threads, pure=False)
            for g in groups
        ]
    else:
        futures = [client.submit(scan_leaf_files, state_future, g, threads, pure=False) for g in groups]
    try:
        results = client.gather(futures)
    except BaseException:
        from distributed import wait

        wait(futures)
        for f in futures:
            if f.status == "finished":
                _discard_items(f.result())
        raise
    finally:
        client.cancel([state_future])
    leaf_batches = [m for items in results for m in _receive(items)]
    return out + _refuse_repeated_files(leaf_batches, after.files)


def _discard_items(items: Sequence[Any]) -> None:
    for item in items or []:
        if isinstance(item, _SharedBatch):
            _unlink(item.path)


def concat_files(batches: Iterable[ScanMetadata]) -> pa.Table:
    """One file table from ScanMetadata batches."""
    tables = [b.files for b in batches]
    if not tables:
        raise DeltaError("no ScanMetadata batches to concatenate")
    return pa.concat_tables(tables, promote_options="permissive")
