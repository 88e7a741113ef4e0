"""Each data file's stored columns are checked against the table schema (names in another case,
types the table cannot read as they are), but a schema is checked once per read, not once per
file: on a table of 5,000 columns the checks cost ~30 ms a file, and every file of a table
repeats the same few schemas."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from deltalake import DeltaTable as DLTable  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.read import file_checks, read_errors, selected_rows  # noqa: E402

COLUMNS = 30


def _rows(start: int, n: int = 5) -> pa.Table:
    ids = list(range(start, start + n))
    cols = {"id": pa.array(ids, pa.int64())}
    cols.update({f"c{i}": pa.array([x * i for x in ids], pa.int32()) for i in range(COLUMNS)})
    return pa.table(cols)


@pytest.fixture
def many_files(tmp_path: Path) -> Path:
    """Six data files of one schema, then an update and a delete writing change data files."""
    p = tmp_path / "t"
    write_deltalake(str(p), _rows(0), configuration={"delta.enableChangeDataFeed": "true"})
    for v in range(1, 6):
        write_deltalake(str(p), _rows(v * 100), mode="append")
    DLTable(str(p)).update(updates={"c1": "c1 + 1"}, predicate="id < 3")
    DLTable(str(p)).delete("id = 101")
    return p


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    calls = {"case": 0, "types": 0}
    case, types = file_checks.case_insensitive_columns, file_checks.readable_as

    def counted_case(*args, **kw):
        calls["case"] += 1
        return case(*args, **kw)

    def counted_types(*args, **kw):
        calls["types"] += 1
        return types(*args, **kw)

    # in each module of the reader that calls them
    for module in (file_checks, selected_rows):
        monkeypatch.setattr(module, "case_insensitive_columns", counted_case)
    for module in (file_checks, read_errors):
        monkeypatch.setattr(module, "readable_as", counted_types)
    return calls


def test_scan_checks_one_schema_once(many_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = dd.DeltaTable(str(many_files)).snapshot()
    assert len(snap.files()) >= 6
    calls = _count_checks(monkeypatch)
    out = snap.scan().to_table()
    assert out.num_rows == 29 and out.num_columns == COLUMNS + 1
    # one schema, one set of columns read: checked once (was once per file, 7 files)
    assert calls["case"] == 1
    assert calls["types"] == COLUMNS + 1


def test_change_feed_checks_each_schema_once(many_files: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_checks(monkeypatch)
    out = dd.DeltaTable(str(many_files)).changes(0).to_table()
    assert out.num_rows == 30 + 3 * 2 + 1
    # data files and change data files (which store _change_type too): two schemas, two checks
    assert calls["case"] <= 2
    assert calls["types"] <= 2 * (COLUMNS + 2)
