"""The package's cached property: one computation per instance under the instance's own lock."""

from __future__ import annotations

import copy
import threading

import deltalake
import pyarrow as pa
import pytest

from delta_datafusion import DeltaTable
from delta_datafusion.cached import cached_property


def test_a_copy_of_a_snapshot_does_not_wait_for_the_originals_computation(tmp_path, monkeypatch):
    """A shallow copy (``copy.copy``) of a snapshot made after it computed a value shared the
    original's locks: the copy's commit replay waited for the original's, and for ever when the
    original's waited on the copy."""
    from delta_datafusion import snapshot as snapshot_module

    deltalake.write_deltalake(str(tmp_path), pa.table({"x": [1, 2]}))
    deltalake.write_deltalake(str(tmp_path), pa.table({"x": [3]}), mode="append")
    original = DeltaTable(str(tmp_path)).snapshot()
    original.commit_log  # noqa: B018 - the original has its locks before the copy
    duplicate = copy.copy(original)
    replaying, release = threading.Event(), threading.Event()
    real_newest = snapshot_module.newest_per_key

    def first_held_until_released(adds, removes, where):
        if not replaying.is_set():  # the original's commit replay
            replaying.set()
            release.wait(60)
        return real_newest(adds, removes, where)

    monkeypatch.setattr(snapshot_module, "newest_per_key", first_held_until_released)
    results: dict = {}
    held = threading.Thread(target=lambda: results.update(held=original.raw_files.num_rows), daemon=True)
    held.start()
    try:
        assert replaying.wait(30)
        other = threading.Thread(
            target=lambda: results.update(copy=duplicate.raw_files.num_rows), daemon=True
        )
        other.start()
        other.join(30)  # a hang, not a time limit: the copy waited for the original's lock
        assert not other.is_alive(), "the copy waited for the original's computation"
        assert results == {"copy": 2}
    finally:
        release.set()
    held.join(30)
    assert results == {"copy": 2, "held": 2}


def test_one_cached_property_under_two_names_is_refused():
    """As with functools.cached_property: one property assigned to two names would keep its value
    under the last name only (the first name computing under the lock on every access)."""
    with pytest.raises((TypeError, RuntimeError)) as e:  # RuntimeError wrapping it before 3.12

        class Twice:
            @cached_property
            def a(self) -> int:
                return 1

            b = a

    assert "two names ('a' and 'b')" in str(e.value.__cause__ or e.value)
