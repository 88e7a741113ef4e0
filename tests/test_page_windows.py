"""Change-feed reads of large files stop at the end of the rows their page index leaves to a
filter (read/page_windows.py): pyarrow decodes every row of a file it scans, so a key range over
sorted ids decoded the whole file. Checked by the rows pulled from pyarrow's file reader, and by
the rows against the whole feed filtered by DataFusion (the windows only decide where a read
stops: every row still passes the filter)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from corpus_compare import assert_same_rows

deltalake = pytest.importorskip("deltalake")
from deltalake import DeltaTable as DLTable  # noqa: E402
from deltalake import WriterProperties, write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion import DeltaTable  # noqa: E402
from delta_datafusion.read import reader as reader_module  # noqa: E402

pytestmark = pytest.mark.usefixtures("fresh_change_feed_cache")

CDF = {"delta.enableChangeDataFeed": "true"}
#: pages of about 1,000 rows (the writer checks the limit every 1,024 rows: the first file's id
#: pages start at rows 0, 1,000, 2,024, 3,048 | 4,000, 5,096, 6,120, 7,144 | 8,000, 9,192),
#: row groups of 4,000 (3 in the first file: 4,000 + 4,000 + 2,000)
PROPS = WriterProperties(data_page_row_count_limit=1000, write_batch_size=1000, max_row_group_size=4000)


def rows(ids: np.ndarray) -> pa.Table:
    """Sorted ids with a gap (0..4,999 then 10,000..14,999 in the first file); ``v`` is NULL for
    ids 3,000..3,999 (the page of rows 3,048..3,999 is all NULL) and every id ending in 7; ``d``
    a date per 100 ids."""
    v = pa.array((ids // 10).astype(np.int32), mask=((ids >= 3000) & (ids < 4000)) | (ids % 10 == 7))
    days = (ids // 100).astype(np.int32)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "v": v,
            "d": pa.array(days, pa.int32()).cast(pa.date32()),
            "s": pa.array([f"s{i % 13}" for i in ids]),
        }
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """v0: one file of 10,000 sorted rows; v1: a delete (cdc file); v2: an append of 20,000..20,999."""
    p = tmp_path_factory.mktemp("pw") / "t"
    ids = np.concatenate([np.arange(0, 5000), np.arange(10000, 15000)]).astype(np.int64)
    write_deltalake(str(p), rows(ids), configuration=CDF, writer_properties=PROPS)
    DLTable(str(p)).delete("id >= 4500 AND id < 4510")
    write_deltalake(
        str(p), rows(np.arange(20000, 21000, dtype=np.int64)), mode="append", writer_properties=PROPS
    )
    return p


@pytest.fixture
def small_files_too(monkeypatch):
    """The table's files are small: windows for files of any size (not raising: the tests also
    run, and fail, against a reader without windows)."""
    monkeypatch.setattr(reader_module, "WINDOW_MIN_BYTES", 0, raising=False)


@pytest.fixture
def pulled(monkeypatch) -> dict[str, int]:
    """File name -> rows pulled from pyarrow's parquet file reader."""
    out: dict[str, int] = {}
    orig = pq.ParquetFile.iter_batches

    def spy(self, *a, **k):
        for b in orig(self, *a, **k):
            out[self._spied_name] = out.get(self._spied_name, 0) + b.num_rows
            yield b

    orig_init = pq.ParquetFile.__init__

    def init(self, source, *a, **k):
        orig_init(self, source, *a, **k)
        self._spied_name = Path(str(source)).name

    monkeypatch.setattr(pq.ParquetFile, "__init__", init)
    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
    return out


def first_file(table: Path) -> str:
    return next(Path(a["path"]).name for a in DeltaTable(str(table)).snapshot(0).files().to_pylist())


def new_ctx():
    from datafusion import SessionContext

    ctx = SessionContext()
    dd.register(ctx)
    return ctx


def test_key_range_decodes_a_file_only_to_its_window(table, small_files_too, pulled):
    got = new_ctx().sql(f"SELECT * FROM table_changes('{table}', 0) WHERE id >= 2500 AND id < 3500")
    t = got.to_arrow_table()
    assert t.num_rows == 1000
    # pages of rows 2,024..3,999 may hold the range: the file is read from its first row group
    # (rows 0..3,999) and no further; before, pyarrow's scanner decoded all 10,000 rows
    assert pulled.get(first_file(table)) == 4000


def test_window_in_a_later_row_group_and_an_empty_window(table, small_files_too, pulled):
    ctx = new_ctx()
    t = ctx.sql(
        f"SELECT id FROM table_changes('{table}', 0) WHERE id BETWEEN 12100 AND 12150"
    ).to_arrow_table()
    assert sorted(t.column("id").to_pylist()) == list(range(12100, 12151))
    # pages of rows 6,120..7,999 in the second row group (4,000..7,999): read from 4,000 to 8,000
    assert pulled.get(first_file(table)) == 4000
    pulled.clear()
    # v is NULL on rows 3,048..3,999 (a NULL page) and below 300 before, at least 400 after:
    # no page of any file can hold v in 300..399, nothing is decoded
    t = ctx.sql(f"SELECT * FROM table_changes('{table}', 0) WHERE v >= 300 AND v < 400").to_arrow_table()
    assert t.num_rows == 0
    assert pulled == {}


FILTERS = [
    "id >= 2500 AND id < 3500",
    "id < 1000",
    "id >= 14999",
    "id > 14000 OR id < 5",
    "id IN (3, 4504, 4512, 12345, 20999)",
    "id BETWEEN 6000 AND 7000",
    "NOT (id >= 100)",
    "id = 4999 OR id = 10000",
    "v IS NULL AND id < 5000",
    "v IS NOT NULL AND id BETWEEN 2990 AND 4010",
    "v > 1000 AND v <= 1010",
    "v < 10 OR s = 's3'",
    "d = DATE '1970-01-31'",
    "d >= DATE '1970-02-20' AND id < 12000",
    "id >= 4500 AND id < 4520 AND _change_type = 'delete'",
    "id >= 4500 AND id < 4520",
    "_commit_version = 2 AND id < 20100",
    "id > 100000",
    "s = 's5' AND id BETWEEN 1000 AND 1100",
    "NOT (id < 14900 OR v IS NULL)",
]


@pytest.mark.parametrize("where", FILTERS)
def test_windowed_reads_give_the_same_rows(table, small_files_too, where):
    ctx = new_ctx()
    ctx.register_record_batches("full", [DeltaTable(str(table)).changes(0).to_table().to_batches()])
    got = ctx.sql(f"SELECT * FROM table_changes('{table}', 0) WHERE {where}").to_arrow_table()
    exp = ctx.sql(f"SELECT * FROM full WHERE {where}").to_arrow_table()
    assert_same_rows(got, exp, where)
    # the Python API reads through the same reader
    api = DeltaTable(str(table)).changes(0, predicate=where).to_table()
    assert_same_rows(api, exp, where)


def test_row_window_of_the_file(table):
    from delta_datafusion.read.page_windows import row_window

    snap = DeltaTable(str(table)).snapshot(0)
    f = snap.files().to_pylist()[0]
    location = str(table / f["path"])
    feed = DeltaTable(str(table)).changes(0)
    rs = feed.feed.reader().rs
    storage = DeltaTable(str(table)).storage

    def window(where: str, judged=("id", "v", "d")):
        pred = DeltaTable(str(table)).changes(0, predicate=where).predicate
        w = row_window(storage, location, f["size"], pred, rs.logical, {c: c for c in judged})
        return None if w is None else (w.start, w.stop, w.groups, w.first_row)

    assert window("id >= 2500 AND id < 3500") == (2024, 4000, [0], 0)
    assert window("id >= 12100 AND id < 12200") == (6120, 8000, [1], 4000)
    # the page of rows 4,000..5,095 holds ids 4,000..4,999 and 10,000..10,095: it may hold 6,000
    assert window("id BETWEEN 6000 AND 7000") == (4000, 5096, [1], 4000)
    assert window("id > 100000") == (0, 0, [], 0)
    # a NULL page (rows 3,048..3,999) never satisfies a comparison
    assert window("v >= 300 AND v < 400") == (0, 0, [], 0)
    # every page of v holds NULLs (ids ending in 7): only id's pages bound the window
    assert window("v IS NULL AND id >= 3000 AND id < 3100") == (2024, 4000, [0], 0)
    assert window("d = DATE '1970-04-11'") == (4000, 6120, [1], 4000)  # day 100: ids 10,000..10,099
    # id's pages leave rows 0..999, d's rows 4,000..6,119: no row is in both, nothing to read
    assert window("id < 1000 AND d = DATE '1970-04-11'") == (0, 0, [], 0)
    # strings are not judged; an OR reaching past the judged columns keeps everything
    assert window("s = 's1'", judged=("s",)) is None
    assert window("id < 10 OR s = 's1'") == (0, 10000, [0, 1, 2], 0)


def test_a_window_at_the_end_of_a_row_group_reads_the_file_as_before(tmp_path, small_files_too, pulled):
    """Rows before a window are decoded too: a window ending a one-row-group file saves nothing,
    and the file is scanned as before (li_flat's key range: windows of the last 1,073 and the
    first 61,440 of 62,513 rows made the query slower)."""
    p = tmp_path / "one_group"
    write_deltalake(
        str(p),
        rows(np.arange(0, 10000, dtype=np.int64)),
        configuration=CDF,
        writer_properties=WriterProperties(data_page_row_count_limit=1000, write_batch_size=1000),
    )
    got = new_ctx().sql(f"SELECT id FROM table_changes('{p}', 0) WHERE id >= 9900").to_arrow_table()
    assert sorted(got.column("id").to_pylist()) == list(range(9900, 10000))
    assert pulled == {}
    # a window in the first half of the file still stops the read there
    got = new_ctx().sql(f"SELECT id FROM table_changes('{p}', 0) WHERE id < 100").to_arrow_table()
    assert got.num_rows == 100
    assert list(pulled.values()) == [1000]


def test_a_file_added_then_removed_in_the_range_gives_both_windows(tmp_path, small_files_too):
    """A file added and removed within the range is two change sources of one location (its
    inserts and its deletes), each with a window. Windows were kept by location, so one source
    replaced the other and the other's rows went missing (the inserts of a file deleted later)."""
    import json

    p = tmp_path / "t"
    write_deltalake(
        str(p), rows(np.arange(0, 10000, dtype=np.int64)), configuration=CDF, writer_properties=PROPS
    )
    log = p / "_delta_log"
    (add,) = [
        a["add"] for a in map(json.loads, (log / f"{0:020d}.json").read_text().splitlines()) if "add" in a
    ]
    remove = {"path": add["path"], "deletionTimestamp": 1, "dataChange": True, "extendedFileMetadata": True}
    remove |= {"partitionValues": {}, "size": add["size"]}
    (log / f"{1:020d}.json").write_text(json.dumps({"remove": remove}) + "\n")
    sql = (
        f"SELECT _change_type, _commit_version, count(*) AS n FROM table_changes('{p}', 0, 1) WHERE id < 100"
    )
    got = new_ctx().sql(sql + " GROUP BY _change_type, _commit_version ORDER BY _commit_version").to_pylist()
    assert got == [
        {"_change_type": "insert", "_commit_version": 0, "n": 100},
        {"_change_type": "delete", "_commit_version": 1, "n": 100},
    ]
