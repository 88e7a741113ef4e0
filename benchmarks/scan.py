"""Scan benchmark (provider issue): TPC-H lineitem SF1 as Delta tables, our provider vs peers.

Runs, in one run and in fresh processes per case: TPC-H Q1 and Q6 on ``li_part`` (partitioned by
l_shipmode, 112 files) and ``li_flat`` (96 files), a partition-pruned and a stats-pruned query, for
this project's provider ("ours"), deltalake's QueryBuilder, the datafusion FFI route, DuckDB
``delta_scan``, Polars ``scan_delta`` and DataFusion reading the same parquet files directly (the
decode ceiling), and the time to the first rows (``SELECT * ... LIMIT 10``). Prints warm and
first-query times, ratios against deltalake QueryBuilder and against the ceiling, and peak memory.

Build the data first: ``python benchmarks/datagen.py li_part li_flat`` (see benchmarks/README.md).
Usage: ``python benchmarks/scan.py [--procs 2 --reps 3] [--wait-quiet 30]``.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import peers  # noqa: E402
from harness import bench_main, format_table  # noqa: E402

CEILING = "CEILING datafusion register_parquet(dir) per run"


def build(args):
    return peers.scan_cases(args) + peers.selective_cases(args) + peers.first_rows_cases(args)


def main(argv=None):
    results = bench_main(
        build,
        description=__doc__.splitlines()[0],
        baseline="deltalake QueryBuilder",
        argv=argv,
        extra_args=peers.suite_args,
    )
    if results:
        print("\n## Ratios against the decode ceiling (" + CEILING + ")\n")
        print(format_table(results, baseline=CEILING))


if __name__ == "__main__":
    main()
