"""Data files storing a column as another type than the table's, read through SQL with and without
filters: the filtered read must give the rows of the unfiltered one (filtered by DataFusion in
memory), whatever the file stores.

Each table is hand-written (one ``_delta_log`` commit over parquet files written here), so the
stored types are exactly those named: writers differ in what they store for one Delta type
(delta-rs before 0.15 stored a ``timestamp`` column of naive Arrow timestamps without
``isAdjustedToUTC``; Spark stores INT96; others milliseconds or nanoseconds), and type widening
leaves files of the old type (PROTOCOL.md, Type Widening). delta-kernel-rs reads any timestamp
as the table's timestamp type (ensure_data_types: "timestamps are able to be cast between each
other"), as the unfiltered read here does.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datafusion import SessionContext

import delta_datafusion as dd

TIMES = [dt.datetime(2024, 1, 1, 12, 0, 0, 123000), dt.datetime(1900, 1, 1), dt.datetime(1970, 1, 1)]

#: (how the file stores the column, its Arrow type, pq.write_table options)
STORED_TIMESTAMPS = [
    ("utc_us", pa.timestamp("us", tz="UTC"), {}),
    ("utc_ms", pa.timestamp("ms", tz="UTC"), {}),
    ("utc_ns", pa.timestamp("ns", tz="UTC"), {"version": "2.6"}),
    ("paris_us", pa.timestamp("us", tz="Europe/Paris"), {}),
    ("naive_us", pa.timestamp("us"), {}),
    ("naive_ms", pa.timestamp("ms"), {}),
    ("naive_ns", pa.timestamp("ns"), {"version": "2.6"}),
    ("int96", pa.timestamp("us"), {"use_deprecated_int96_timestamps": True}),
]


def _table(root: Path, fields: list[dict[str, Any]], files: list[tuple[pa.Table, dict[str, Any]]]) -> Path:
    """A table of ``fields`` (Delta schema fields) whose data files are ``files`` as written."""
    (root / "_delta_log").mkdir(parents=True)
    schema = {"type": "struct", "fields": fields}
    actions: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "stored-types",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
            }
        },
    ]
    for i, (data, options) in enumerate(files):
        name = f"part-{i}.parquet"
        pq.write_table(data, root / name, **options)
        size = (root / name).stat().st_size
        add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": 0, "dataChange": True}
        actions.append({"add": add})
    (root / "_delta_log" / f"{0:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))
    return root


def _filtered_in_memory(root: Path, where: str) -> list[dict[str, Any]]:
    """The rows of the unfiltered read, filtered by DataFusion over them in memory."""
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    rows = ctx.sql("SELECT * FROM t").to_arrow_table()
    mem = SessionContext()
    mem.register_record_batches("m", [rows.to_batches()])
    return mem.sql(f"SELECT * FROM m WHERE {where} ORDER BY id").to_pylist()


def _filtered(root: Path, where: str) -> list[dict[str, Any]]:
    ctx = SessionContext()
    dd.register_table(ctx, "t", str(root))
    return ctx.sql(f"SELECT * FROM t WHERE {where} ORDER BY id").to_pylist()


@pytest.mark.parametrize("delta_type", ["timestamp", "timestamp_ntz"])
@pytest.mark.parametrize("stored", [s[0] for s in STORED_TIMESTAMPS])
def test_filters_on_timestamps_stored_with_another_zone_or_unit(
    tmp_path: Path, delta_type: str, stored: str
) -> None:
    """A timestamp filter over a file storing the column with the other time-zone kind (a naive
    timestamp in a ``timestamp`` table, a UTC one in a ``timestamp_ntz`` table) failed where the
    unfiltered read of the same file works: pyarrow judged the file's row-group statistics, of
    the stored type, against the literal of the table's ("Cannot compare timestamp with timezone
    to timestamp without timezone", "Function 'equal' has no kernel matching input types
    (timestamp[us], timestamp[ms, tz=UTC])")."""
    _, typ, options = next(s for s in STORED_TIMESTAMPS if s[0] == stored)
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "ts": pa.array(TIMES, typ)})
    # (no NULL in it: pyarrow judged a column with NULLs otherwise, and did not fail), and a file
    # storing the table's own type beside it
    own = pa.timestamp("us", tz="UTC" if delta_type == "timestamp" else None)
    plain = pa.table({"id": pa.array([4, 5], pa.int64()), "ts": pa.array([TIMES[0], None], own)})
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "ts", "type": delta_type, "nullable": True, "metadata": {}},
    ]
    root = _table(tmp_path / "t", fields, [(data, options), (plain, {})])
    zone = "Z" if delta_type == "timestamp" else ""
    for where in [
        f"ts > TIMESTAMP '2000-01-01T00:00:00{zone}'",
        f"ts = TIMESTAMP '2024-01-01T12:00:00.123{zone}'",
        f"ts < TIMESTAMP '1950-01-01T00:00:00{zone}' OR id = 3",
        "ts IS NULL",
    ]:
        want = _filtered_in_memory(root, where)
        assert want, where  # the premise: the filter keeps rows
        assert _filtered(root, where) == want, where
