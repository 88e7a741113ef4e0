"""Corrupt and hostile logs found by the bad-input sweep: each gives a clear error of the package's
own type naming the file or version, or is read correctly; never a hang, a raw dependency error
or wrong rows. Tables are copies of the bundled example (``trips``: partitioned by city, change
data feed on, commits 0..5) edited in ``tmp_path``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from conftest import commit_path, copy_table, log_dir

import delta_datafusion as dd
from delta_datafusion import DeltaTable
from delta_datafusion.errors import DeltaError, LogCorruptError, NonContiguousVersionsError

TRIPS = Path(dd.__file__).parent / "examples" / "trips"


@pytest.fixture
def trips(tmp_path: Path) -> Path:
    return copy_table(TRIPS, tmp_path / "trips")


def _sql(path: Path, query: str) -> list[dict]:
    from datafusion import SessionContext

    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(path))
    return ctx.sql(query).to_pylist()


def _edit(path: Path, fn) -> None:
    """Rewrite each action of a commit file with ``fn(action) -> action | None`` (None drops it)."""
    out = []
    for line in path.read_text().splitlines():
        if line.strip():
            new = fn(json.loads(line))
            if new is not None:
                out.append(json.dumps(new))
    path.write_text("\n".join(out) + "\n")


@pytest.mark.parametrize("version", [10_000_000, 9_000_000_000_000_000_000])
def test_stray_commit_far_ahead_is_a_gap_not_a_hang(trips: Path, version: int) -> None:
    shutil.copy(commit_path(trips, 1), log_dir(trips) / f"{version:020d}.json")
    started = time.monotonic()
    with pytest.raises(
        NonContiguousVersionsError, match=rf"missing 6\.\.{version - 1} between 0 and {version}"
    ):
        DeltaTable(str(trips)).snapshot()
    with pytest.raises(DeltaError, match=r"6\.\."):
        DeltaTable(str(trips)).changes(0, version)
    assert time.monotonic() - started < 10  # it used to list every missing version
    assert DeltaTable(str(trips)).snapshot(version=5).version == 5


def test_commit_version_beyond_a_long(trips: Path) -> None:
    shutil.copy(commit_path(trips, 1), log_dir(trips) / ("9" * 20 + ".json"))
    with pytest.raises(LogCorruptError, match=r"99999999999999999999\.json: a commit version beyond"):
        DeltaTable(str(trips)).snapshot()
