"""The helper threads of a snapshot load (checkpoint stats typed while the rest is read and the
commits replay): reused from load to load, waited for at exit, and what the caller's thread does
while the stats are typed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

import delta_datafusion.snapshot as snapshot_module
from delta_datafusion.table import DeltaTable

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def checkpoint_and_commits(tmp_path: Path) -> Path:
    """A checkpoint of 240 adds (JSON stats, 80 partitions), then a delete and an append: a load
    types the checkpoint's stats on a helper thread while the commits replay on the caller's."""
    rows = pa.table({"id": pa.array(range(240), pa.int64()), "p": [f"p{i % 80}" for i in range(240)]})
    deltalake.write_deltalake(str(tmp_path), rows, partition_by=["p"])
    deltalake.DeltaTable(str(tmp_path)).create_checkpoint()
    deltalake.DeltaTable(str(tmp_path)).delete("p = 'p3'")
    more = pa.table({"id": pa.array([1000, 1001], pa.int64()), "p": ["p5", "p90"]})
    deltalake.write_deltalake(str(tmp_path), more, partition_by=["p"], mode="append")
    return tmp_path


def test_loads_reuse_the_helper_threads(checkpoint_and_commits: Path, monkeypatch) -> None:
    """Each load handed its work to two new threads (under pyarrow's default mimalloc pool a new
    thread also allocates from fresh memory); the loads after the first start none."""
    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)  # the helper threads, whatever the CPUs
    path = str(checkpoint_and_commits)
    first = DeltaTable(path).snapshot().files()
    started: list[str] = []
    real_start = threading.Thread.start

    def spy(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", spy)
    for _ in range(8):
        assert DeltaTable(path).snapshot().files().equals(first)
    # a pool may add a worker when one has not yet marked itself idle: at most one a pool
    assert len(started) <= 2, started


def test_exit_waits_for_a_stats_typing_in_progress(checkpoint_and_commits: Path) -> None:
    """A load that fails on the caller's thread (a damaged commit) while the checkpoint's stats
    are typed on a helper thread: the process exits after the typing ends, not inside it (a
    daemon thread killed inside pyarrow at exit crashed the process: 2 exits in 3 with 8 typings
    in progress)."""
    log = checkpoint_and_commits / "_delta_log"
    newest = sorted(log.glob("*.json"))[-1]
    newest.write_text(newest.read_text() + '{"add": {"path": "broken\n')
    marker = checkpoint_and_commits.parent / "typed"
    script = textwrap.dedent(
        f"""
        import time
        import delta_datafusion.snapshot as snapshot_module
        from delta_datafusion.errors import LogCorruptError
        from delta_datafusion.table import DeltaTable

        snapshot_module.LEAF_THREADS = 2
        real = snapshot_module.typed_stats

        def slow(md, stats, parsed, n, *a, **k):
            out = real(md, stats, parsed, n, *a, **k)
            if n > 10:  # the checkpoint's 80 adds (not the commits' 2), typed on the helper thread
                time.sleep(0.5)
                open({str(marker)!r}, "w").close()
            return out

        snapshot_module.typed_stats = slow
        try:
            DeltaTable({str(checkpoint_and_commits)!r}).snapshot().files()
        except LogCorruptError:
            print("failed", flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "failed"
    assert marker.exists()  # the typing ran to its end before the process exited


def test_transactions_and_partitions_are_done_while_the_stats_are_typed(
    checkpoint_and_commits: Path, monkeypatch
) -> None:
    """What the typed files need besides the checkpoint's stats (its typed partition values, the
    snapshot's transactions and domains) is done while the stats are still being typed, not
    after: the stats typing is the longest part of the load and the rest only waited for it."""
    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)
    path = str(checkpoint_and_commits)
    whole = DeltaTable(path).snapshot().files()
    events: list[str] = []
    others_done = threading.Event()
    real_typed = snapshot_module.typed_stats
    real_txn = snapshot_module.Snapshot._transactions_with
    real_pv = snapshot_module.Snapshot.typed_partitions

    def slow_typing(md, stats, parsed, n, *a, **k):
        out = real_typed(md, stats, parsed, n, *a, **k)
        if n > 10:  # the checkpoint's 80 adds: ends once the rest is done (at most 2 s)
            others_done.wait(2.0)
            events.append("checkpoint stats typed")
        return out

    def note(event: str) -> None:
        events.append(event)
        if {"transactions", "checkpoint partitions typed"} <= set(events):
            others_done.set()

    def transactions(self, checkpoint_txn):
        note("transactions")
        return real_txn(self, checkpoint_txn)

    def partitions(self, raw):
        if raw.num_rows > 10:  # the checkpoint's 80 adds, not the commits' 2
            note("checkpoint partitions typed")
        return real_pv(self, raw)

    monkeypatch.setattr(snapshot_module, "typed_stats", slow_typing)
    monkeypatch.setattr(snapshot_module.Snapshot, "_transactions_with", transactions)
    monkeypatch.setattr(snapshot_module.Snapshot, "typed_partitions", partitions)
    snap = DeltaTable(path).snapshot()
    files = snap.files()
    assert files.equals(whole)
    assert snap.transactions == {}
    assert sorted(events[:2]) == ["checkpoint partitions typed", "transactions"], events
    assert events[2:] == ["checkpoint stats typed"], events


def test_a_load_once_the_pools_take_no_work_runs_on_threads_of_its_own(
    checkpoint_and_commits: Path, monkeypatch
) -> None:
    """Once the interpreter's exit has begun the helper pools refuse work ("cannot schedule new
    futures after interpreter shutdown"); a load then still runs, on threads of its own."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setattr(snapshot_module, "LEAF_THREADS", 2)
    path = str(checkpoint_and_commits)
    whole = DeltaTable(path).snapshot().files()
    closed = ThreadPoolExecutor(1)
    closed.shutdown()
    for pool in snapshot_module._HELPER_POOLS.values():
        monkeypatch.setattr(pool, "get", lambda: closed)
    with pytest.raises(RuntimeError):
        closed.submit(lambda: None)  # the premise
    snap = DeltaTable(path).snapshot()
    assert snap.files().equals(whole)
    assert snap.transactions == {}
