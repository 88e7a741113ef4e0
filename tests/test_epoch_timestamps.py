"""Time travel by an integer timestamp, which is epoch milliseconds.

An integer of microseconds or nanoseconds (``pandas.Timestamp.value`` is nanoseconds,
``time.time_ns()`` too) read as milliseconds is a time tens of thousands of years ahead, and "the
latest commit at or before it" is the latest version: the table was read at its latest version
without a word. No ISO-8601 text or ``datetime`` reaches past the year 9999, so an integer after
it is refused, naming the value and the unit it is read in (one before the year 1 was and is
"before the earliest commit").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from datafusion import SessionContext
from deltalake import write_deltalake

import delta_datafusion as dd
from delta_datafusion import DeltaTable
from delta_datafusion.errors import ArgumentError


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, list[int]]:
    """Three versions of one row each, and their commit times (ms)."""
    path = tmp_path / "t"
    for i in range(3):
        write_deltalake(str(path), pa.table({"id": [i]}), mode="append")
    timeline = DeltaTable(str(path)).timeline()
    return path, [timeline.timestamp(v) for v in range(3)]


def test_an_integer_in_microseconds_or_nanoseconds_is_refused(table: tuple[Path, list[int]]) -> None:
    path, ms = table
    t = DeltaTable(str(path))
    assert t.snapshot(timestamp=ms[1]).version == 1
    for wrong in (ms[1] * 1000, ms[1] * 1_000_000, np.int64(ms[1] * 1000)):
        with pytest.raises(ArgumentError, match=rf"timestamp {int(wrong)} .*epoch milliseconds.*year 9999"):
            t.snapshot(timestamp=wrong)
        with pytest.raises(ArgumentError, match=rf"timestamp {int(wrong)} .*epoch milliseconds"):
            dd.register_table(SessionContext(), "t", str(path), timestamp=wrong)


def test_integers_up_to_the_year_9999_are_read(table: tuple[Path, list[int]]) -> None:
    path, ms = table
    t = DeltaTable(str(path))
    assert t.snapshot(timestamp=253_402_300_799_999).version == 2  # 9999-12-31T23:59:59.999Z
    with pytest.raises(ArgumentError, match="after the year 9999"):
        t.snapshot(timestamp=253_402_300_800_000)
    # far in the past is no silent answer: before the earliest commit, as any time before it
    for past in (-62_135_596_800_000, -ms[1] * 1000, -(10**30)):
        with pytest.raises(dd.VersionNotFoundError, match="before the earliest commit"):
            t.snapshot(timestamp=past)
