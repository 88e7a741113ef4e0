"""Query texts and per-table predicates shared by every engine (see shared/docs/peers.md).

Every SQL text reads the table registered as ``t`` and aliases every output column, so the same
text runs unchanged in deltalake's QueryBuilder, DataFusion, DuckDB (a view ``t`` over
``delta_scan``) and Polars' ``SQLContext``, and the results can be fingerprinted by column name.
"""

from __future__ import annotations

# TPC-H Q1 with the usual 90-day delta precomputed: l_shipdate <= DATE '1998-12-01' - 90 days.
Q1 = """
SELECT
    l_returnflag,
    l_linestatus,
    sum(l_quantity) AS sum_qty,
    sum(l_extendedprice) AS sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    avg(l_quantity) AS avg_qty,
    avg(l_extendedprice) AS avg_price,
    avg(l_discount) AS avg_disc,
    count(*) AS count_order
FROM t
WHERE l_shipdate <= DATE '1998-09-02'
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus
""".strip()

# TPC-H Q6, standard parameters.
Q6 = """
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM t
WHERE l_shipdate >= DATE '1994-01-01'
  AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07
  AND l_quantity < 24
""".strip()

# Partition-pruned: 16 of li_part's 112 files, 858,104 rows.
SEL_AIR = "SELECT count(*) AS n, sum(l_extendedprice) AS s FROM t WHERE l_shipmode = 'AIR'"

# Stats-pruned (1 % of the key range): li_part 12/112 files, li_flat 2/96 files, 59,968 rows.
KEY_LO, KEY_HI = 3_000_000, 3_060_000
SEL_KEYRANGE = (
    f"SELECT count(*) AS n, sum(l_extendedprice) AS s FROM t WHERE l_orderkey BETWEEN {KEY_LO} AND {KEY_HI}"
)

# Full scan of the 2,050 tiny files of `many` (205,000 rows).
MANY_COUNT_SUM = "SELECT count(*) AS n, sum(v) AS s FROM t"

# name -> SQL, for scan benchmarks
# Time to the first rows: any 10 rows of every column.
FIRST_ROWS = "SELECT * FROM t LIMIT 10"

SQL = {
    "first_rows": FIRST_ROWS,
    "q1": Q1,
    "q6": Q6,
    "sel_air": SEL_AIR,
    "sel_keyrange": SEL_KEYRANGE,
    "many_count_sum": MANY_COUNT_SUM,
}

# Predicates that prune every file of a table (snapshot-load cases: the engine must replay the log
# but reads no data). From peers.md: partition_col='nope' (k300), part='nope', l_shipmode='nope',
# id < -1 (many).
PRUNE_ALL = {
    "k300": "partition_col = 'nope'",
    "k300_ckpt": "partition_col = 'nope'",
    "many": "id < -1",
    "many_nockpt": "id < -1",
    "many_quick": "id < -1",
    "many_quick_nockpt": "id < -1",
    "cdf": "part = 'nope'",
    "li_part": "l_shipmode = 'nope'",
    "li_flat": "l_orderkey < -1",
    "loglong": "part = 'nope'",
    "loglong_nockpt": "part = 'nope'",
    "loglong_quick": "part = 'nope'",
    "loglong_quick_nockpt": "part = 'nope'",
}

# Change data feed: version ranges of the `cdf` table (v0..v54) and load_cdf variants.
CDF_RANGES = {
    "v0..v54 (all)": (0, 54),
    "v45..v54": (45, 54),
    "v26..v54": (26, 54),
    "one UPDATE commit (v41)": (41, 41),
    "one MERGE commit (v46)": (46, 46),
}
CDF_VARIANTS = {
    "read": {},
    "part='p3'": {"predicate": "part = 'p3'"},
    "_change_type='delete'": {"predicate": "_change_type = 'delete'"},
    "id in [500k,600k)": {"predicate": "id >= 500000 AND id < 600000"},
    "columns=[id,_change_type,_commit_version]": {"columns": ["id", "_change_type", "_commit_version"]},
}
# Ranges measured with every variant (the others only with "read"), as in peers.md.
CDF_FULL_RANGES = ("v0..v54 (all)", "v45..v54", "one UPDATE commit (v41)", "one MERGE commit (v46)")
