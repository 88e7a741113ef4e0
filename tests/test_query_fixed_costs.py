"""Work every query on a freshly opened table pays whatever it reads: what a table without
deletion vectors, or stats objects without nulls, or a small checkpoint, do not need done. Each
test pins one piece of such work away, and checks that the result is what it was."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import delta_datafusion as dd
import delta_datafusion.datafusion  # noqa: F401 - register_table
from delta_datafusion import replay, scan_unit
from delta_datafusion.log.actions import DV_TYPE


class _ComputeSpy:
    """Stands for ``pyarrow.compute`` in one module: the names of the functions it looks up."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def __getattr__(self, name: str):
        self.used.append(name)
        return getattr(pc, name)


def test_an_all_null_deletion_vector_column_is_not_taken_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint without deletion vectors stores their column as an all-null struct: replay
    read each of its five fields and built the struct again (~10 compute calls a query)."""
    looked_at: list[str] = []
    real = replay.child

    def spying(struct, name, typ=None):
        looked_at.append(name)
        return real(struct, name, typ)

    monkeypatch.setattr(replay, "child", spying)
    dv = pa.array([None, None, None], DV_TYPE)
    out = replay._dv_column(dv, 3)
    assert out.type == DV_TYPE and out.null_count == 3 and len(out) == 3
    assert looked_at == []
    # one descriptor among nulls: read field by field, as before
    some = pa.array(
        [None, {"storageType": "u", "pathOrInlineDv": "ab", "sizeInBytes": 3, "cardinality": 1}], DV_TYPE
    )
    out = replay._dv_column(some, 2)
    assert looked_at and out.to_pylist() == some.to_pylist()


def test_files_without_deletion_vectors_are_not_checked_field_by_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """check_deletion_vectors refuses a descriptor without a storageType; with none at all it has
    nothing to look at (it compared and combined each field: ~10 compute calls a query)."""
    files = pa.table({"location": ["/t/a", "/t/b"], "deletion_vector": pa.array([None, None], DV_TYPE)})
    spy = _ComputeSpy()
    monkeypatch.setattr(scan_unit, "pc", spy)
    scan_unit.check_deletion_vectors(files)
    assert spy.used == []
    bad = pa.table(
        {
            "location": ["/t/a", "/t/b"],
            "deletion_vector": pa.array(
                [None, {"storageType": None, "pathOrInlineDv": "ab", "sizeInBytes": 3, "cardinality": 1}],
                DV_TYPE,
            ),
        }
    )
    with pytest.raises(dd.errors.DeletionVectorError, match="/t/b"):
        scan_unit.check_deletion_vectors(bad)
