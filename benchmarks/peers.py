"""Peer engines' case functions, the engine registry (with the hook for our engine), and the
benchmark suites built from them.

Case-function contracts (one per *kind*; our engine implements the same signatures in
``benchmarks/ours.py`` and is picked up automatically, see :func:`ours_engines`):

* ``snapshot(path) -> pa.Table`` with columns ``path`` (``add.path`` exactly as in the log) and
  ``size_bytes``: the live files of the latest snapshot (log replay).
* ``sql(path, sql) -> materialized result``: the table is registered as ``t``; ``sql`` is one of
  :mod:`queries`.
* ``cdf(path, starting_version, ending_version, predicate=None, columns=None) -> pa.Table``: the
  change data feed (``_change_type``, ``_commit_version``, ``_commit_timestamp`` plus data columns).

Every call must start from the table path (no snapshot cache between repetitions) and return a
materialized result. Imports in the engine's module run outside the timer; for peers here they are
declared with ``@needs`` (this module imports nothing heavy at top level) or done in a
``@prepared`` factory (DuckDB's connection with ``LOAD delta``).

Run the peer suites: ``python benchmarks/peers.py [snapshot] [scan] [selective] [cdf] [first_rows] [--procs 2 --reps 3]``.
"""

from __future__ import annotations

import argparse
import glob
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import datagen  # noqa: E402
import queries  # noqa: E402
from harness import Case, bench_main, cast_views, needs, prepared  # noqa: E402

# --------------------------------------------------------------------------------------------------
# deltalake (delta-rs)


@needs("deltalake", "pyarrow")
def dl_load(path: str) -> int:
    """``DeltaTable(path)``: snapshot load only; returns the version."""
    from deltalake import DeltaTable

    return DeltaTable(path).version()


@needs("deltalake", "pyarrow")
def dl_add_actions(path: str):
    """``DeltaTable(path).get_add_actions(flatten=True)`` -> (path, size_bytes)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    adds = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    return adds.select(["path", "size_bytes"])


@needs("deltalake", "pyarrow")
def dl_file_uris(path: str) -> int:
    """``DeltaTable(path).file_uris()``; returns the number of files."""
    from deltalake import DeltaTable

    return len(DeltaTable(path).file_uris())


@needs("deltalake", "pyarrow")
def dl_querybuilder_sql(path: str, sql: str):
    """deltalake ``QueryBuilder().register("t", DeltaTable(path)).execute(sql)``."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    return pa.table(QueryBuilder().register("t", DeltaTable(path)).execute(sql))


@prepared
def dl_querybuilder_prereg_sql(path: str, sql: str):
    """deltalake ``QueryBuilder().register("t", DeltaTable(path))`` once, outside the timer; each
    repetition runs ``.execute(sql)`` on that registration."""
    import pyarrow as pa
    from deltalake import DeltaTable, QueryBuilder

    qb = QueryBuilder().register("t", DeltaTable(path))
    return lambda: pa.table(qb.execute(sql))


@needs("deltalake", "pyarrow")
def dl_load_cdf(
    path: str,
    starting_version: int,
    ending_version: int | None = None,
    predicate: str | None = None,
    columns: list[str] | None = None,
    cast_utf8: bool = False,
):
    """``DeltaTable(path).load_cdf(...)`` -> pa.Table. string_view columns stay string_view unless
    ``cast_utf8`` (the fingerprint casts them anyway, outside the timer)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    t = pa.table(
        DeltaTable(path).load_cdf(
            starting_version=starting_version,
            ending_version=ending_version,
            predicate=predicate,
            columns=columns,
        )
    )
    return cast_views(t) if cast_utf8 else t


# --------------------------------------------------------------------------------------------------
# datafusion-python


@needs("datafusion", "pyarrow", "deltalake")
def df_ffi_sql(path: str, sql: str):
    """datafusion 55 ``register_table("t", DeltaTable(path))`` (delta-rs FFI provider, no pushdown)."""
    from datafusion import SessionContext
    from deltalake import DeltaTable

    ctx = SessionContext()
    ctx.register_table("t", DeltaTable(path))
    return ctx.sql(sql).to_arrow_table()


def _register_parquet(ctx, path: str, partition_cols: list[str] | None) -> None:
    import pyarrow as pa

    cols = [(c, pa.string()) for c in (partition_cols or [])]
    ctx.register_parquet("t", path, table_partition_cols=cols, file_extension=".parquet")


@needs("datafusion", "pyarrow")
def df_parquet_sql(path: str, sql: str, partition_cols: list[str] | None = None):
    """CEILING (not a Delta reader): ``register_parquet("t", <table dir>)`` per run, then SQL.
    Valid only on append-only tables (it ignores the log; ``_delta_log`` is skipped as hidden)."""
    from datafusion import SessionContext

    ctx = SessionContext()
    _register_parquet(ctx, path, partition_cols)
    return ctx.sql(sql).to_arrow_table()


@prepared
def df_parquet_prereg_sql(path: str, sql: str, partition_cols: list[str] | None = None):
    """CEILING: the parquet directory registered once outside the timer; SQL only."""
    from datafusion import SessionContext

    ctx = SessionContext()
    _register_parquet(ctx, path, partition_cols)
    return lambda: ctx.sql(sql).to_arrow_table()


# --------------------------------------------------------------------------------------------------
# DuckDB + delta extension


def duck_connect():
    """A duckdb connection with the PyPI delta extension loaded (its version must equal duckdb's)."""
    import duckdb
    import duckdb_extension_delta

    pattern = os.path.join(
        os.path.dirname(duckdb_extension_delta.__file__), "extensions", "**", "*.duckdb_extension"
    )
    ext = glob.glob(pattern, recursive=True)[0]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    con.execute("SET enable_progress_bar = false")
    return con


def _sq(s: str) -> str:
    return s.replace("'", "''")


def _duck_arrow(rel):
    return rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.fetch_arrow_table()


@prepared
def duck_delta_sql(path: str, sql: str):
    """duckdb ``CREATE OR REPLACE VIEW t AS SELECT * FROM delta_scan(path)`` per run, then ``sql``."""
    con = duck_connect()

    def run():
        con.execute(f"CREATE OR REPLACE VIEW t AS SELECT * FROM delta_scan('{_sq(path)}')")
        return _duck_arrow(con.execute(sql))

    return run


@prepared
def duck_prune_all(path: str, where: str):
    """duckdb ``count(*) FROM delta_scan(path) WHERE <predicate that prunes every file>``: log replay
    without reading data."""
    con = duck_connect()
    return lambda: con.execute(
        f"SELECT count(*) AS n FROM delta_scan('{_sq(path)}') WHERE {where}"
    ).fetchall()[0][0]


@prepared
def duck_list_files(path: str):
    """duckdb ``count(*) FROM delta_list_files(path)``."""
    con = duck_connect()
    return lambda: con.execute(f"SELECT count(*) AS n FROM delta_list_files('{_sq(path)}')").fetchall()[0][0]


@prepared
def duck_parquet_sql(path: str, sql: str, partition_cols: list[str] | None = None):
    """CEILING: duckdb ``read_parquet('<dir>/**/*.parquet', hive_partitioning=...)`` as view ``t``."""
    con = duck_connect()
    hive = "true" if partition_cols else "false"
    glob_path = os.path.join(path, "**", "*.parquet")

    def run():
        con.execute(
            f"CREATE OR REPLACE VIEW t AS SELECT * FROM read_parquet('{_sq(glob_path)}', hive_partitioning={hive})"
        )
        return _duck_arrow(con.execute(sql))

    return run


# --------------------------------------------------------------------------------------------------
# Polars


@needs("polars", "deltalake")
def polars_delta_sql(path: str, sql: str):
    """polars ``SQLContext(t=pl.scan_delta(path)).execute(sql).collect()``."""
    import polars as pl

    return pl.SQLContext(t=pl.scan_delta(path)).execute(sql).collect()


@needs("polars", "deltalake")
def polars_schema(path: str) -> int:
    """polars ``scan_delta(path).collect_schema()`` (snapshot load); returns the column count."""
    import polars as pl

    return len(pl.scan_delta(path).collect_schema())


@needs("polars")
def polars_parquet_sql(path: str, sql: str, partition_cols: list[str] | None = None):
    """CEILING: polars ``scan_parquet('<dir>/**/*.parquet', hive_partitioning=...)`` via SQLContext."""
    import polars as pl

    lf = pl.scan_parquet(os.path.join(path, "**", "*.parquet"), hive_partitioning=bool(partition_cols))
    return pl.SQLContext(t=lf).execute(sql).collect()


# --------------------------------------------------------------------------------------------------
# engine registry and the hook for our engine


@dataclass
class Engine:
    label: str
    fn: str  # "module:function"
    check: str | None = "result"  # fingerprint class; None = result not compared
    extra: Callable[[str], dict] | None = None  # table name -> extra kwargs
    tables: tuple[str, ...] | None = None  # only these tables (None = all)


# Partition columns for the directory-based ceilings (they don't read the Delta schema).
PARTITION_COLS = {"li_part": ["l_shipmode"], "cdf": ["part"]}


def _partition_kw(table: str) -> dict:
    cols = PARTITION_COLS.get(table)
    return {"partition_cols": cols} if cols else {}


SNAPSHOT_ENGINES = [
    Engine("deltalake DeltaTable(path)", "peers:dl_load", check=None),
    Engine("deltalake .get_add_actions(flatten=True)", "peers:dl_add_actions", check="files"),
    Engine(
        "duckdb delta_scan count(*) WHERE <prunes all files>",
        "peers:duck_prune_all",
        check="zero",
        extra=lambda table: {"where": queries.PRUNE_ALL[table]},
    ),
    Engine("polars scan_delta().collect_schema()", "peers:polars_schema", check=None),
]

SQL_ENGINES = [
    Engine("deltalake QueryBuilder", "peers:dl_querybuilder_sql"),
    Engine("deltalake QueryBuilder, registered once (SQL only)", "peers:dl_querybuilder_prereg_sql"),
    Engine("datafusion 55 register_table(DeltaTable) (FFI)", "peers:df_ffi_sql"),
    Engine("duckdb delta_scan", "peers:duck_delta_sql"),
    Engine("polars scan_delta (SQLContext)", "peers:polars_delta_sql"),
    Engine("CEILING datafusion register_parquet(dir) per run", "peers:df_parquet_sql", extra=_partition_kw),
    Engine(
        "CEILING datafusion, registered once (SQL only)", "peers:df_parquet_prereg_sql", extra=_partition_kw
    ),
]
SQL_CEILINGS_EXTRA = [  # opt-in with --all-ceilings
    Engine("CEILING duckdb read_parquet(glob)", "peers:duck_parquet_sql", extra=_partition_kw),
    Engine("CEILING polars scan_parquet(glob)", "peers:polars_parquet_sql", extra=_partition_kw),
]

CDF_ENGINES = [Engine("deltalake load_cdf", "peers:dl_load_cdf")]

BASELINES = {
    "snapshot": "deltalake .get_add_actions(flatten=True)",
    "sql": "deltalake QueryBuilder",
    "cdf": "deltalake load_cdf",
}

OURS_MODULE = "ours"
OURS_FUNCTIONS = {"snapshot": "snapshot", "sql": "sql", "cdf": "cdf"}
OURS_CHECK = {"snapshot": "files", "sql": "result", "cdf": "result"}


def ours_engines(kind: str) -> list[Engine]:
    """Our engine's entries for ``kind`` ("snapshot", "sql" or "cdf").

    The hook: create ``benchmarks/ours.py`` with a function per kind, same signature and result
    contract as the peers' (see the module doc)::

        def snapshot(path): ...                        # -> pa.Table[path, size_bytes]
        def sql(path, sql): ...                        # -> pa.Table
        def cdf(path, starting_version, ending_version, predicate=None, columns=None): ...

    Each defined function becomes an engine labelled "ours". To measure several variants, define
    ``ENGINES = {"sql": {"ours": "ours:sql", "ours (no pushdown)": "ours:sql_nopush"}, ...}``.
    """
    if importlib.util.find_spec(OURS_MODULE) is None:
        return []
    mod = importlib.import_module(OURS_MODULE)
    variants = getattr(mod, "ENGINES", {}).get(kind)
    if variants:
        return [Engine(label, ref, check=OURS_CHECK[kind]) for label, ref in variants.items()]
    fn = OURS_FUNCTIONS[kind]
    if hasattr(mod, fn):
        return [Engine("ours", f"{OURS_MODULE}:{fn}", check=OURS_CHECK[kind])]
    return []


def engines(kind: str, include_ours: bool = True, all_ceilings: bool = False) -> list[Engine]:
    """Our engine (if the hook exists) first, then the peers of ``kind``."""
    peers = {"snapshot": SNAPSHOT_ENGINES, "sql": SQL_ENGINES, "cdf": CDF_ENGINES}[kind]
    if kind == "sql" and all_ceilings:
        peers = peers + SQL_CEILINGS_EXTRA
    return (ours_engines(kind) if include_ours else []) + list(peers)


# --------------------------------------------------------------------------------------------------
# suites


def _available(name: str, quick: bool, warn: bool = True) -> tuple[str, str] | None:
    """(table name, path) if table ``name`` (or its quick variant) is built, else None."""
    real = datagen.table_name(name, quick)
    if datagen.is_built(real):
        return real, datagen.table_path(real)
    if warn:
        flag = " --quick" if quick and real != name else ""
        print(f"skipping {real}: not built (python benchmarks/datagen.py {name}{flag})", file=sys.stderr)
    return None


def _engine_case(e: Engine, table: str, kwargs: dict, section: str, group: str, **kw) -> Case:
    kwargs = dict(kwargs)
    if e.extra:
        kwargs.update(e.extra(table))
    return Case(e.fn, kwargs, engine=e.label, group=group, section=section, check=e.check, **kw)


SNAPSHOT_TABLES = ["k300", "k300_ckpt", "many", "many_nockpt", "cdf", "li_part", "loglong", "loglong_nockpt"]


def snapshot_cases(args: argparse.Namespace, engine_list: list[Engine] | None = None) -> list[Case]:
    """(a) snapshot load / log replay: every snapshot engine on every built table."""
    section = "(a) snapshot load / log replay"
    out = []
    for name in getattr(args, "tables", None) or SNAPSHOT_TABLES:
        avail = _available(name, args.quick)
        if not avail:
            continue
        table, path = avail
        big = table.startswith("k300")
        for e in engine_list or engines("snapshot", not args.no_ours):
            if e.tables and table not in e.tables:
                continue
            out.append(_engine_case(e, table, {"path": path}, section, table, procs=1 if big else None))
    return out


SCAN_GROUPS = [  # (group label, table, query name)
    ("Q1 li_part", "li_part", "q1"),
    ("Q6 li_part", "li_part", "q6"),
    ("Q1 li_flat", "li_flat", "q1"),
    ("Q6 li_flat", "li_flat", "q6"),
    ("count+sum many", "many", "many_count_sum"),
]
SELECTIVE_GROUPS = [
    ("li_part l_shipmode='AIR' (partition)", "li_part", "sel_air"),
    ("li_part l_orderkey 3.00M..3.06M (stats)", "li_part", "sel_keyrange"),
    ("li_flat l_orderkey 3.00M..3.06M (stats)", "li_flat", "sel_keyrange"),
]


FIRST_ROWS_GROUPS = [
    ("li_part SELECT * LIMIT 10", "li_part", "first_rows"),
    ("li_flat SELECT * LIMIT 10", "li_flat", "first_rows"),
]


def _sql_cases(
    args, section: str, groups, engine_list: list[Engine] | None, compare: bool = True
) -> list[Case]:
    """``compare=False``: the engines may return different rows (LIMIT without ORDER BY), so
    results are not fingerprinted against each other."""
    out = []
    for group, name, q in groups:
        avail = _available(name, args.quick)
        if not avail:
            continue
        table, path = avail
        label = group if table == name else f"{group} ({table})"
        for e in engine_list or engines("sql", not args.no_ours, args.all_ceilings):
            if e.tables and table not in e.tables:
                continue
            case = _engine_case(e, table, {"path": path, "sql": queries.SQL[q]}, section, label)
            if not compare:
                case.check = None
            out.append(case)
    return out


def scan_cases(args: argparse.Namespace, engine_list: list[Engine] | None = None) -> list[Case]:
    """(b) full-scan aggregates: TPC-H Q1/Q6 on li_part/li_flat, count+sum over many."""
    return _sql_cases(args, "(b) full-scan aggregates", SCAN_GROUPS, engine_list)


def selective_cases(args: argparse.Namespace, engine_list: list[Engine] | None = None) -> list[Case]:
    """(c) selective scans: partition-pruned and stats-pruned count(*), sum(l_extendedprice)."""
    return _sql_cases(
        args, "(c) selective scans: count(*), sum(l_extendedprice) WHERE ...", SELECTIVE_GROUPS, engine_list
    )


def first_rows_cases(args: argparse.Namespace, engine_list: list[Engine] | None = None) -> list[Case]:
    """(e) time to the first rows: ``SELECT * ... LIMIT 10`` (any 10 rows; not compared)."""
    return _sql_cases(args, "(e) first rows: SELECT * FROM t LIMIT 10", FIRST_ROWS_GROUPS, engine_list, False)


def cdf_cases(args: argparse.Namespace, engine_list: list[Engine] | None = None) -> list[Case]:
    """(d) change data feed on ``cdf``: per version range, plain read and predicate/column variants."""
    avail = _available("cdf", False)
    if not avail:
        return []
    table, path = avail
    out = []
    for rng, (start, end) in queries.CDF_RANGES.items():
        variants = queries.CDF_VARIANTS if rng in queries.CDF_FULL_RANGES else {"read": {}}
        for vname, vkw in variants.items():
            kwargs = {"path": path, "starting_version": start, "ending_version": end, **vkw}
            for e in engine_list or engines("cdf", not args.no_ours):
                out.append(_engine_case(e, table, kwargs, f"(d) change data feed {rng}", vname))
    return out


SUITES = {
    "snapshot": snapshot_cases,
    "scan": scan_cases,
    "selective": selective_cases,
    "cdf": cdf_cases,
    "first_rows": first_rows_cases,
}
SUITE_KIND = {"snapshot": "snapshot", "scan": "sql", "selective": "sql", "cdf": "cdf"}


def suite_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--no-ours", action="store_true", help="leave out benchmarks/ours.py even if present")
    ap.add_argument("--all-ceilings", action="store_true", help="also duckdb/polars raw-parquet ceilings")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = [a for a in argv if a in SUITES] or list(SUITES)
    rest = [a for a in argv if a not in SUITES]

    def build(args):
        cases = []
        for s in chosen:
            cases += SUITES[s](args)
        return cases

    baseline = list(dict.fromkeys(BASELINES[SUITE_KIND[s]] for s in chosen))
    bench_main(
        build,
        description="peer reference suites: " + ", ".join(SUITES) + " (default all)",
        baseline=baseline,
        argv=rest,
        extra_args=suite_args,
    )


if __name__ == "__main__":
    main()
