"""The two-phase API: the sequential phase, its outcome, and the parallel phase over some leaves.

This is the surface a caller distributing replay by hand uses (after delta-kernel-rs'
``parallel_scan_metadata``): iterate :class:`SequentialPhase`, call ``finish()``, and run
:class:`ParallelScanMetadata` over any split of the leaf files wherever the state can travel.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa

from ..arrow_threads import arrow_threads
from ..errors import ParallelStateError
from ..log.checkpoint import CheckpointManifest, LeafFile
from ..scan import Scan, ScanMetadata
from ..snapshot import Snapshot, project_raw
from .split import as_leaf, refuse_overlaps
from .state import ParallelState, empty_file_table


@dataclass(frozen=True)
class Done:
    """The sequential phase produced everything: no checkpoint leaves to process."""


@dataclass(frozen=True)
class Parallel:
    """Leaf files still to process with :class:`ParallelScanMetadata` (any split, any workers)."""

    state: ParallelState
    files: list[LeafFile]


class SequentialPhase(Iterator[ScanMetadata]):
    """Phase one: commits and the checkpoint manifest, yielding ScanMetadata; then :meth:`finish`."""

    def __init__(self, scan: Scan):
        self.scan = scan
        self._gen: Iterator[ScanMetadata] | None = None
        self._exhausted = False
        self._keys: pa.Array | None = None
        self._leaves: list[LeafFile] = []
        self._result: Done | Parallel | None = None
        self._manifest: tuple[CheckpointManifest | None] | None = None
        self._ahead: Parallel | None = None
        self._lock = threading.Lock()

    def __iter__(self) -> SequentialPhase:
        return self

    def __next__(self) -> ScanMetadata:
        with self._lock:
            if self._gen is None:
                self._gen = self._run()
            try:
                return next(self._gen)
            except StopIteration:
                self._exhausted = True
                raise

    def prepare(self) -> Parallel | None:
        """Read the checkpoint manifest (the phase's first step) and return its leaf files with a
        state that has no seen keys yet (None: no leaf), so that a driver can start reading and
        typing leaves (:meth:`ParallelState.leaf_adds`, :meth:`~ParallelState.typed_ahead`) while
        the commits are replayed. Only dropping the touched adds needs :meth:`finish`'s state,
        which is this one with the seen keys."""
        with self._lock:
            if self._ahead is None:
                manifest = self._read_manifest()
                if manifest is None or not manifest.leaves:
                    return None
                leaves = list(manifest.leaves)
                state = ParallelState.from_scan(self.scan, pa.array([], pa.string()), leaves)
                self._ahead = Parallel(state, leaves)
            return self._ahead

    def _read_manifest(self) -> CheckpointManifest | None:
        """The checkpoint manifest, read once (the caller holds the lock)."""
        if self._manifest is None:
            snap, manifest = _with_manifest(self.scan.snapshot)
            if snap is not self.scan.snapshot:  # listed again: both phases read that listing's files
                self.scan = copy.copy(self.scan)
                self.scan.snapshot = snap
            self._manifest = (manifest,)
        return self._manifest[0]

    def _run(self) -> Iterator[ScanMetadata]:
        manifest = self._read_manifest()
        snap = self.scan.snapshot
        live, keys = snap._commit_replay
        files = snap.to_scan_files(project_raw(live)) if live.num_rows else empty_file_table(snap)
        yield self.scan.pruned_metadata(files, source="commits")
        if manifest is not None and manifest.inline is not None:
            raw = project_raw(snap.leaf_adds(manifest.inline, keys, manifest.checkpoint.parts[0].path))
            if raw.num_rows:
                files = snap.to_scan_files(raw)
                yield self.scan.pruned_metadata(files, source="checkpoint manifest")
        self._keys = keys
        self._leaves = list(manifest.leaves) if manifest is not None else []

    def finish(self) -> Done | Parallel:
        """``Done()`` or ``Parallel(state, files)``; only after the phase was iterated to its end."""
        with self._lock:
            if not self._exhausted:
                raise ParallelStateError(
                    "SequentialPhase.finish() called before the sequential phase was iterated to its end: "
                    "consume every ScanMetadata it yields first"
                )
            if self._result is None:
                if not self._leaves:
                    self._result = Done()
                elif self._ahead is not None:  # the same snapshot and leaves (see prepare)
                    self._result = Parallel(self._ahead.state.with_seen_keys(self._keys), list(self._leaves))
                else:
                    state = ParallelState.from_scan(self.scan, self._keys, self._leaves)
                    self._result = Parallel(state, list(self._leaves))
            return self._result


def _with_manifest(snap: Snapshot) -> tuple[Snapshot, CheckpointManifest | None]:
    """``snap`` and its checkpoint manifest, read before anything is yielded: a checkpoint a log
    cleanup removed since the snapshot was listed is listed again, as ``files()`` does (see
    ``Snapshot._files``), never the old listing's commits with the new one's checkpoint."""
    return snap._read_or_relisted(lambda s: (s, s.checkpoint_manifest))


class ParallelScanMetadata(Iterator[ScanMetadata]):
    """Phase two over some leaf files: one ScanMetadata per leaf (or row-group range).

    ``arrow_threads=False`` reads and parses each leaf on the calling thread only: for a task
    that runs beside as many other tasks as there are CPUs (see :mod:`.arrow_threads`)."""

    def __init__(
        self, state: ParallelState | bytes, files: Iterable[LeafFile | str], arrow_threads: bool = True
    ):
        if isinstance(state, bytes | bytearray | memoryview):
            state = ParallelState.from_bytes(state)
        if not isinstance(state, ParallelState):
            raise ParallelStateError(f"expected a ParallelState or its bytes, got {type(state).__qualname__}")
        self.state = state
        if files is None or isinstance(files, str | bytes) or not isinstance(files, Iterable):
            raise ParallelStateError(
                f"files must be a list of checkpoint leaf files (LeafFile or path), got {type(files).__qualname__}"
            )
        self.files = [as_leaf(f) for f in files]
        refuse_overlaps(self.files, state.storage)
        self.arrow_threads = bool(arrow_threads)
        self._it = iter(self.files)

    def __iter__(self) -> ParallelScanMetadata:
        return self

    def __next__(self) -> ScanMetadata:
        leaf = next(self._it)
        with arrow_threads(self.arrow_threads):
            return self.state.scan_leaf(leaf)
