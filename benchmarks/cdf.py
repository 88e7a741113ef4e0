"""Change data feed benchmark: ``table_changes()`` (SQL through DataFusion) vs deltalake ``load_cdf``.

Table: ``cdf`` from :mod:`datagen` (``python benchmarks/datagen.py cdf``): change data feed
enabled, 1.5M rows partitioned by ``part`` (p0..p7), then 54 commits of appends, updates,
deletes, merges, an OPTIMIZE and a staging partition's append / replaceWhere overwrite /
partition delete; checkpoint at v25 (see shared/docs/peers.md).

Queries (every engine gets the same version range, filter and columns; deltalake runs in its best
mode, with ``predicate=`` and ``columns=`` pushed into ``load_cdf``):

* full feed v0..v54, all columns; beside it (not compared: no change columns) the decode floor,
  pyarrow's scan of the same files with the reader's format (see :func:`pyarrow_floor`);
* one commit: the UPDATE v41 and the MERGE v46;
* partition-filtered: ``part = 'p3'``;
* key-range-filtered: ``id >= 500000 AND id < 600000``, all columns and projected to
  ``id, _change_type, _commit_version``;
* change-type-filtered: ``_change_type = 'delete'``, all columns and projected;
* aggregate ``SELECT _change_type, count(*) ... GROUP BY 1`` over the full feed (ours streams the
  rows through DataFusion; deltalake has to read the feed: once with all columns, once with
  ``columns=['_change_type']``, then a pyarrow group-by). Peak memory is the point here; ours also
  runs with ``ARROW_DEFAULT_MEMORY_POOL=system`` (pyarrow 26's default mimalloc pool keeps ~50-70 MB
  of arenas resident after reading many small files, although the rows stream).

Every repetition starts from the table path: a new ``SessionContext`` (ours: the change-feed,
timeline and footer caches are cleared first) or a new deltalake ``DeltaTable``. The row "process
caches kept" does not clear them: its warm repetitions show a process that queries the same range
again (change feed and parquet footers cached; the data files are read again). ``_commit_timestamp``
is dropped from both results before fingerprinting (deltalake reports ``commitInfo.timestamp``,
ours the commit file modification time; the column is a constant per commit either way).

Run: ``python benchmarks/cdf.py --procs 1 --reps 3`` (one fresh process per case: ``first`` = its
first query, ``warm`` = the median of the later ones). Writes nothing unless ``--json``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datagen  # noqa: E402
from harness import Case, bench_main, needs, prepared  # noqa: E402

OURS = "ours table_changes() SQL"
OURS_CACHED = "ours table_changes() SQL, process caches kept"
OURS_PY = "ours DeltaTable.changes().to_table()"
FLOOR = "pyarrow decode floor (the same files, stored columns only)"
DL = "deltalake load_cdf"
DL_AGG_FULL = "deltalake load_cdf (all columns) + pyarrow group_by"

KEY = "id >= 500000 AND id < 600000"
PROJECTED = ["id", "_change_type", "_commit_version"]


def _drop_ts(t):
    return t.drop_columns(["_commit_timestamp"]) if "_commit_timestamp" in t.column_names else t


def _sql_literal(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


# --------------------------------------------------------------------------------------------------
# case functions


# The package's modules are imported before timing (as deltalake's native library is at import).
OURS_MODULES = (
    "datafusion",
    "pyarrow",
    "pyarrow.dataset",
    "pyarrow.parquet",
    "delta_datafusion",
    "delta_datafusion.changes",
    "delta_datafusion.read",
    "delta_datafusion.dv",
    "delta_datafusion.predicate",
    "delta_datafusion.skipping",
    "delta_datafusion.datafusion.table_function",
)


@needs(*OURS_MODULES)
def ours_sql(
    path: str,
    start: int,
    end: int,
    where: str | None = None,
    columns: list[str] | None = None,
    select: str | None = None,
    group_by: str | None = None,
    keep_caches: bool = False,
):
    """``SELECT <columns> FROM table_changes(path, start, end) [WHERE ...]`` -> pa.Table.

    The change-feed, timeline and footer caches are cleared first unless ``keep_caches`` (then the
    warm repetitions show a session that queries the same range again)."""
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.changes import clear_cache

    if not keep_caches:
        clear_cache()
    ctx = SessionContext()
    dd.register(ctx)
    cols = select or (", ".join(columns) if columns else "*")
    q = f"SELECT {cols} FROM table_changes({_sql_literal(path)}, {start}, {end})"
    if where:
        q += f" WHERE {where}"
    if group_by:
        q += f" GROUP BY {group_by}"
    return _drop_ts(ctx.sql(q).to_arrow_table())


@needs(*OURS_MODULES)
def ours_python(path: str, start: int, end: int, columns: list[str] | None = None):
    """``DeltaTable(path).changes(start, end, columns).to_table()``."""
    from delta_datafusion import DeltaTable
    from delta_datafusion.changes import clear_cache

    clear_cache()
    return _drop_ts(DeltaTable(path).changes(start, end, columns=columns).to_table())


@prepared
def pyarrow_floor(path: str, start: int, end: int):
    """The decode floor of ours: one pyarrow dataset scan of the files the feed reads, with the
    reader's own formats (dictionary columns for large files, none for small ones; no
    pre-buffering) and read-ahead, their stored columns only -> pa.Table. No log, planning,
    change-feed or partition columns, no DataFusion: what ``table_changes()`` pays on top of
    this is ours to cut; this itself is pyarrow's decoding.
    The files are listed untimed (by our planning, so the file list is exactly the feed's)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from delta_datafusion import DeltaTable
    from delta_datafusion.read.batches import MIN_BATCH_SIZE
    from delta_datafusion.read.reader import LOCAL_READAHEAD, _small_file

    scan = DeltaTable(path).changes(start, end)
    units = scan.scan_units()
    reader = scan.feed.reader()
    fmt = reader._format(units[0])  # the format the reader chooses for this read
    # ... and the one it reads small files with, declaring strings as strings (see
    # UnitReader._small_files_format): the rows then come as the feed's (not as dictionaries)
    small_fmt = reader._small_files_format(fmt, units, True)
    formats = [small_fmt if small_fmt is not None and _small_file(u) else fmt for u in units]
    fs = scan.feed.storage.arrow_fs
    locations = [u.location for u in units]
    # the stored columns: a data file's, and the change type that change-data files add
    samples = [units[0]] + [u for u in units if u.has_change_type_column][:1]
    schema = pa.unify_schemas(
        [fmt.make_fragment(u.location, fs).physical_schema.remove_metadata() for u in samples]
    )
    if small_fmt is not None:
        schema = pa.schema([reader.rs.physical.field(f.name) for f in schema])

    def run():
        parts = [f.make_fragment(loc, fs) for f, loc in zip(formats, locations, strict=True)]
        dataset = ds.FileSystemDataset(parts, schema, fmt, fs)
        return dataset.scanner(batch_size=MIN_BATCH_SIZE, use_threads=True, **LOCAL_READAHEAD).to_table()

    return run


@needs("deltalake", "pyarrow")
def dl_cdf(path: str, start: int, end: int, predicate: str | None = None, columns: list[str] | None = None):
    """``DeltaTable(path).load_cdf(start, end, predicate=, columns=)`` -> pa.Table."""
    import pyarrow as pa
    from deltalake import DeltaTable

    t = pa.table(
        DeltaTable(path).load_cdf(
            starting_version=start, ending_version=end, predicate=predicate, columns=columns
        )
    )
    return _drop_ts(t)


@needs("deltalake", "pyarrow")
def dl_cdf_count_by_type(path: str, start: int, end: int, columns: list[str] | None = None):
    """deltalake has no SQL over the feed: read it (``columns=``) and count by ``_change_type`` in pyarrow."""
    import pyarrow as pa
    from deltalake import DeltaTable

    t = pa.table(DeltaTable(path).load_cdf(starting_version=start, ending_version=end, columns=columns))
    ct = t.column("_change_type").cast(pa.string())
    counts = pa.table({"_change_type": ct}).group_by("_change_type").aggregate([("_change_type", "count")])
    return counts.rename_columns(["_change_type", "n"])


# --------------------------------------------------------------------------------------------------
# cases


def cases(args) -> list[Case]:
    if not datagen.is_built("cdf"):
        print("the cdf table is not built: python benchmarks/datagen.py cdf", file=sys.stderr)
        return []
    path = datagen.table_path("cdf")
    out: list[Case] = []

    def add(section: str, group: str, ours_kw: dict, dl_kw: dict, py_kw: dict | None = None) -> None:
        out.append(Case("cdf:ours_sql", {"path": path, **ours_kw}, engine=OURS, group=group, section=section))
        out.append(
            Case(
                "cdf:ours_sql",
                {"path": path, **ours_kw, "keep_caches": True},
                engine=OURS_CACHED,
                group=group,
                section=section,
            )
        )
        if py_kw is not None:
            out.append(
                Case("cdf:ours_python", {"path": path, **py_kw}, engine=OURS_PY, group=group, section=section)
            )
        out.append(Case("cdf:dl_cdf", {"path": path, **dl_kw}, engine=DL, group=group, section=section))

    rng = {"start": 0, "end": 54}
    sec = "change data feed of cdf (v0..v54 unless noted)"
    add(sec, "full feed v0..v54", dict(rng), dict(rng), dict(rng))
    # not a result to compare (no change columns): the decoding ours and the others cannot avoid
    out.append(
        Case(
            "cdf:pyarrow_floor",
            {"path": path, **rng},
            engine=FLOOR,
            group="full feed v0..v54",
            section=sec,
            check=None,
        )
    )
    add(sec, "one UPDATE commit v41", {"start": 41, "end": 41}, {"start": 41, "end": 41})
    add(sec, "one MERGE commit v46", {"start": 46, "end": 46}, {"start": 46, "end": 46})
    add(sec, "part = 'p3'", {**rng, "where": "part = 'p3'"}, {**rng, "predicate": "part = 'p3'"})
    add(sec, "key range", {**rng, "where": KEY}, {**rng, "predicate": KEY})
    add(
        sec,
        "_change_type = 'delete'",
        {**rng, "where": "_change_type = 'delete'"},
        {**rng, "predicate": "_change_type = 'delete'"},
    )
    sec_p = "projected to id, _change_type, _commit_version (v0..v54)"
    add(
        sec_p,
        "full feed",
        {**rng, "columns": PROJECTED},
        {**rng, "columns": PROJECTED},
        {**rng, "columns": PROJECTED},
    )
    add(
        sec_p,
        "key range",
        {**rng, "where": KEY, "columns": PROJECTED},
        {**rng, "predicate": KEY, "columns": PROJECTED},
    )
    add(
        sec_p,
        "_change_type = 'delete'",
        {**rng, "where": "_change_type = 'delete'", "columns": PROJECTED},
        {**rng, "predicate": "_change_type = 'delete'", "columns": PROJECTED},
    )
    sec_a = "aggregate: count(*) by _change_type over v0..v54 (memory)"
    group = "count by _change_type"
    out.append(
        Case(
            "cdf:ours_sql",
            {"path": path, **rng, "select": "_change_type, count(*) AS n", "group_by": "_change_type"},
            engine=OURS,
            group=group,
            section=sec_a,
        )
    )
    # The same query with Arrow's system allocator: the rows stream (Arrow's pool peaks at a few
    # MB), and most of the RSS growth is pages pyarrow's default mimalloc pool keeps, which the variable avoids.
    out.append(
        Case(
            "cdf:ours_sql",
            {"path": path, **rng, "select": "_change_type, count(*) AS n", "group_by": "_change_type"},
            engine=OURS + " (ARROW_DEFAULT_MEMORY_POOL=system)",
            group=group,
            section=sec_a,
            env={"ARROW_DEFAULT_MEMORY_POOL": "system"},
        )
    )
    out.append(
        Case(
            "cdf:dl_cdf_count_by_type",
            {"path": path, **rng, "columns": ["_change_type"]},
            engine=DL + " (columns=[_change_type]) + pyarrow group_by",
            group=group,
            section=sec_a,
        )
    )
    out.append(
        Case(
            "cdf:dl_cdf_count_by_type", {"path": path, **rng}, engine=DL_AGG_FULL, group=group, section=sec_a
        )
    )
    return out


if __name__ == "__main__":
    bench_main(cases, description=__doc__.splitlines()[0], baseline=DL)
