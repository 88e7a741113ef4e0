"""Scan units are made only for the files a query reads.

A query over a table of many files paid one :class:`ScanUnit` per selected file before reading
any (200,000 files: ~1.4 s and a dozen full garbage collections per ``count(*)``). Rows known
from the log are counted from the scan-metadata columns, fragments are slices of that table, and
a fragment reads its first files before it makes the units of the rest. Each test counts the units
made and checks the rows against a query that reads the data.
"""

from __future__ import annotations

import gc
import time
import weakref
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from conftest import corpus_table  # noqa: E402
from datafusion import SessionContext  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.scan_unit import ScanUnit  # noqa: E402

APPENDS = 12
GROUPS = 4  # partition values of g; one file per partition per append
ROWS = 25  # per file


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """APPENDS x GROUPS files of ROWS rows; file (a, g) holds ids (a * GROUPS + g) * ROWS + 0..ROWS-1."""
    path = tmp_path_factory.mktemp("many") / "t"
    for a in range(APPENDS):
        ids = [(a * GROUPS + g) * ROWS + r for g in range(GROUPS) for r in range(ROWS)]
        data = pa.table({"id": pa.array(ids, pa.int64()), "g": pa.array([i // ROWS % GROUPS for i in ids])})
        write_deltalake(str(path), data, partition_by=["g"], mode="append")
    return path


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Locations of the scan units constructed while the test runs."""
    out: list[str] = []
    real = ScanUnit.__init__

    def counting(self, *args, **kwargs):
        real(self, *args, **kwargs)
        out.append(self.location)

    monkeypatch.setattr(ScanUnit, "__init__", counting)
    return out


def _settled() -> None:
    """A LIMIT query's other partitions may still start a scan after it returned."""
    from delta_datafusion.datafusion.dataset import SCAN_THREADS

    for _ in range(2):
        SCAN_THREADS.wait_idle()
        time.sleep(0.1)


def test_count_star_from_the_log_makes_no_units(table: Path, made: list[str]) -> None:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    n = APPENDS * GROUPS * ROWS
    assert ctx.sql("SELECT count(*) AS n FROM t").to_pydict()["n"] == [n]
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE g = 2").to_pydict()["n"] == [n // GROUPS]
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE id >= 100").to_pydict()["n"] == [n - 100]
    assert made == []
    want = [{"g": g, "n": n // GROUPS} for g in range(GROUPS)]
    assert ctx.sql("SELECT g, count(*) AS n FROM t GROUP BY g ORDER BY g").to_pylist() == want
    assert made == []
    # a filter the statistics do not prove for every row reads the files it keeps, and only those
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE id % 2 = 0").to_pydict()["n"] == [n // 2]
    assert len(made) == APPENDS * GROUPS
    made.clear()
    assert ctx.sql("SELECT count(*) AS n FROM t WHERE id >= 110").to_pydict()["n"] == [n - 110]
    assert len(made) == 1  # the file holding ids 100..124, which straddles the bound, is read


def test_point_query_makes_the_unit_of_its_file(table: Path, made: list[str]) -> None:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    k = 5 * GROUPS * ROWS + 2 * ROWS + 7  # append 5, g = 2
    assert ctx.sql(f"SELECT id, g FROM t WHERE id = {k}").to_pylist() == [{"id": k, "g": 2}]
    assert len(made) == 1


def test_limit_makes_units_for_the_first_files_only(
    table: Path, made: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from delta_datafusion.datafusion import dataset

    monkeypatch.setattr(dataset, "FIRST_PART", 2, raising=False)  # fragments of 24 files
    ctx = SessionContext()
    ds = dd.register_table(ctx, "t", str(table))
    assert ctx.sql("SELECT id FROM t LIMIT 3").to_arrow_table().num_rows == 3
    _settled()
    assert 0 < len(made) <= 2 * ds.last_plan.fragments, made  # each fragment's first two files
    made.clear()
    ids = sorted(ctx.sql("SELECT id FROM t").to_pydict()["id"])
    assert ids == list(range(APPENDS * GROUPS * ROWS))  # the first files, then the rest, once
    assert sorted(made) == sorted(set(made)) and len(made) == APPENDS * GROUPS


@pytest.mark.parametrize("per_part", [4, 1])
def test_a_scan_lets_the_fragments_it_has_read_go(
    table: Path, made: list[str], monkeypatch: pytest.MonkeyPatch, per_part: int
) -> None:
    """A pyarrow fragment keeps its file's footer once scanned (~11 KB of memory for a file of
    three columns), and a dataset keeps its fragments: a full scan of 200,000 files held 3.0 GB at
    its end. A scan makes its fragments a part of PART_FILES files at a time, the earlier part let
    go first, and a table's files become units part by part as well. A wide table's scans (here
    PART_FILE_COLUMNS as small as it goes: one file a scan) split each of those parts again, each
    let go before the next as well."""
    import pyarrow.dataset as pads

    from delta_datafusion.datafusion import dataset
    from delta_datafusion.read import reader

    monkeypatch.setattr(reader, "PART_FILES", 4, raising=False)
    if per_part == 1:
        monkeypatch.setattr(reader, "PART_FILE_COLUMNS", 1)
    monkeypatch.setattr(dataset, "FIRST_PART", 2)
    monkeypatch.setattr(dataset, "target_fragments", lambda: 1)  # one scan: no other's parts
    real = pads.FileSystemDataset
    made_sets: list[weakref.ref] = []
    held: list[int] = []  # at each dataset made: the fragments of the datasets alive with it
    given = 0
    ahead: list[int] = []  # at each dataset made: units made for files not yet given to a scan

    def tracking(fragments, *args, **kwargs):
        nonlocal given
        gc.collect()
        alive = [d for d in (r() for r in made_sets) if d is not None]
        held.append(len(fragments) + sum(len(list(d.get_fragments())) for d in alive))
        given += len(fragments)
        ahead.append(len(made) - given)
        made_sets.append(weakref.ref(out := real(fragments, *args, **kwargs)))
        return out

    monkeypatch.setattr(pads, "FileSystemDataset", tracking)
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(table))
    ids = sorted(ctx.sql("SELECT id FROM t").to_pydict()["id"])
    assert ids == list(range(APPENDS * GROUPS * ROWS))
    assert len(held) >= APPENDS * GROUPS // per_part - 1 and max(held) <= per_part, held
    # (the first file, streamed without a dataset; a table part's units are made at once)
    assert max(ahead) <= 1 + 4 - per_part, ahead
    assert sorted(made) == sorted(set(made)) and len(made) == APPENDS * GROUPS


def test_counts_from_the_log_with_deletion_vectors(made: list[str]) -> None:
    """numRecords minus each deletion vector's cardinality, computed over the table's columns."""
    for name in ("table-with-dv-small", "with-short-dv", "dv-with-columnmapping"):
        ctx = SessionContext()
        dd.register_table(ctx, "t", str(corpus_table(name)))
        made.clear()
        n = ctx.sql("SELECT count(*) AS n FROM t").to_pydict()["n"][0]
        assert made == [], name
        assert n == ctx.sql("SELECT * FROM t").to_arrow_table().num_rows, name


def test_fragments_balance_one_large_file_with_small_ones(tmp_path: Path) -> None:
    """A compacted file and small appends after it: the large file's fragment takes no small
    file while another fragment can (an even count of files per fragment made the large one's
    fragment read half the small files too, ~1.5x the wall time of the scan on two cores)."""
    from delta_datafusion.datafusion.dataset import balance

    path = str(tmp_path / "t")
    write_deltalake(path, pa.table({"id": pa.array(range(100_000), pa.int64())}))
    for i in range(12):
        write_deltalake(path, pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    units = dd.DeltaTable(path).snapshot().scan().scan_units()
    big = max(units, key=lambda u: u.size)
    assert big.size > sum(u.size for u in units) - big.size  # larger than all the others
    for groups in (2, 3):
        parts = balance(units, groups)
        assert sorted(u.location for g in parts for u in g) == sorted(u.location for u in units)
        assert [[u.location for u in g] for g in parts if big in g] == [[big.location]], groups
        assert [list(g) for g in balance(list(units), groups)] == [list(g) for g in parts]  # change feeds
    assert balance(units, 100) and all(len(g) == 1 for g in balance(units, 100))
    assert balance([], 4) == []


@pytest.fixture(scope="module")
def feed_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The change feed on: 3 appends of GROUPS files of ROWS rows (ids as in ``table``)."""
    path = tmp_path_factory.mktemp("feed") / "t"
    _feed_appends(path)
    return path


def _feed_appends(path: Path) -> None:
    """3 appends of GROUPS files of ROWS rows, partitioned by ``g``, the change feed on."""
    for a in range(3):
        ids = [(a * GROUPS + g) * ROWS + r for g in range(GROUPS) for r in range(ROWS)]
        data = pa.table({"id": pa.array(ids, pa.int64()), "g": pa.array([i // ROWS % GROUPS for i in ids])})
        write_deltalake(
            str(path),
            data,
            partition_by=["g"],
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )


def test_change_feed_plans_make_units_only_for_reads(feed_table: Path, made: list[str]) -> None:
    """``files()`` and EXPLAIN of a change range made one unit per source (a warm feed of 42,000
    sources: ~150 ms CPU a plan); a read makes those of the sources it reads."""
    from delta_datafusion.changes import clear_cache

    clear_cache()
    assert dd.DeltaTable(str(feed_table)).changes(0).files().num_rows == 3 * GROUPS
    assert dd.DeltaTable(str(feed_table)).changes(0, predicate="g = 2").files().num_rows == 3
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(feed_table))
    ctx.sql("EXPLAIN SELECT * FROM table_changes('t', 0) WHERE g = 2").collect()
    assert made == []
    got = ctx.sql("SELECT count(*) AS n FROM table_changes('t', 0) WHERE g = 2 AND id % 2 = 0")
    even = sum(((a * GROUPS + 2) * ROWS + r) % 2 == 0 for a in range(3) for r in range(ROWS))
    assert got.to_pydict()["n"] == [even]
    assert sorted(made) == sorted(
        dd.DeltaTable(str(feed_table)).changes(0, predicate="g = 2").files()["location"].to_pylist()
    )


@pytest.fixture(scope="module")
def feed_with_deletes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``feed_table``'s appends, then a delete and an update (cdc files) of part of them."""
    from deltalake import DeltaTable

    path = tmp_path_factory.mktemp("feed_dml") / "t"
    _feed_appends(path)
    DeltaTable(str(path)).delete("id % 7 = 0 AND g = 1")
    DeltaTable(str(path)).update(updates={"id": "id + 1000"}, predicate="g = 3 AND id < 100")
    return path


@pytest.mark.parametrize(
    "select, where",
    [
        ("count(*)", ""),
        ("count(*)", "WHERE g = 2"),
        ("count(*)", "WHERE _commit_version >= 3"),
        ("_change_type, count(*)", "GROUP BY _change_type"),
        ("g, _commit_version, count(*)", "GROUP BY g, _commit_version"),
        ("_commit_timestamp, count(*)", "WHERE _change_type = 'insert' GROUP BY _commit_timestamp"),
    ],
)
def test_change_feed_counts_from_the_log_make_units_only_for_reads(
    feed_with_deletes: Path, made: list[str], select: str, where: str
) -> None:
    """Rows of the feed known from the log are counted from the sources' columns (a count over
    42,000 sources made 42,000 units, ~230 ms CPU); only the sources read (here the cdc files,
    which have no stats) become units. Checked against the same query reading every file's ``id``."""
    from delta_datafusion.changes import clear_cache

    clear_cache()
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(feed_with_deletes))
    cols = select.rsplit(",", 1)[0] if "," in select else ""
    order = f"ORDER BY {cols}" if cols else ""
    got = ctx.sql(f"SELECT {select} FROM table_changes('t', 0) {where} {order}").to_pylist()
    sources = dd.DeltaTable(str(feed_with_deletes)).changes(0).files()
    read = ["cdc" in k for k in sources["kind"].to_pylist()]
    assert len(made) <= sum(read)  # the cdc files (no stats here); every add is counted from the log
    assert len(made) < sources.num_rows
    want = ctx.sql(
        f"SELECT {select.replace('count(*)', 'count(id)')} FROM table_changes('t', 0) {where} {order}"
    ).to_pylist()
    assert [list(r.values()) for r in got] == [list(r.values()) for r in want]
    assert got[0][list(got[0])[-1]] > 0
