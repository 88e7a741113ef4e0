"""The CLI's inspection commands: ``history``, ``files`` and ``changes`` print a table's commits,
live files and change feed without SQL, through the Python API (:meth:`DeltaTable.history`,
:meth:`Snapshot.files` / :meth:`Snapshot.scan`, :meth:`DeltaTable.changes`), in the table format
of ``sql`` (:func:`.cli.print_table`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

import pyarrow as pa
import pyarrow.compute as pc

from .arguments import is_version_text
from .cli import _storage_options, first_rows, print_table, shown_rows
from .cli_output import CHUNK_ROWS, write_rows
from .errors import ArgumentError


def history(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The commits, newest first (as ``DESCRIBE HISTORY`` lists them)."""
    from .table import DeltaTable

    out = out or sys.stdout
    table = DeltaTable(args.uri, storage_options=_storage_options(args.option, "history"))
    hist = table.history(limit=_history_limit(args))
    hist = hist.take(pa.array(range(hist.num_rows - 1, -1, -1), pa.int64()))
    infos = [_info(text) for text in hist.column("commit_info").to_pylist()]
    columns: dict[str, pa.Array] = {
        "version": hist.column("version"),
        "timestamp": hist.column("timestamp").cast(pa.timestamp("ms", tz="UTC")),
        "operation": hist.column("operation"),
    }
    # who and what wrote it: shown when some commit says (deltalake names no user)
    for name, keys in (("user", ("userName", "userId")), ("engine", ("engineInfo", "clientVersion"))):
        values = [next((str(i[k]) for k in keys if i.get(k) is not None), None) for i in infos]
        if any(v is not None for v in values):
            columns[name] = pa.array(values, pa.string())
    for name, key in (("parameters", "operationParameters"), ("metrics", "operationMetrics")):
        columns[name] = _fields_column([i.get(key) for i in infos], args.format)
    shown = pa.table(columns)
    if args.format != "table":
        write_rows(shown.to_batches(), shown.schema, args.format, out)
        return 0
    print_table(shown, out, max_rows=hist.num_rows)
    return 0


def _history_limit(args: argparse.Namespace) -> int | None:
    """The newest commits to list: --limit, or --max-rows as the other commands name a row cap;
    the two given with different numbers are refused (which one was meant?)."""
    limit, max_rows = args.limit, getattr(args, "max_rows", None)
    if limit is not None and max_rows is not None and limit != max_rows:
        raise ArgumentError(
            f"--limit {limit} and --max-rows {max_rows} both give the number of commits to list: give one"
        )
    return max_rows if limit is None else limit


def _info(text: str | None) -> dict[str, Any]:
    return json.loads(text) if text is not None else {}


def _fields_column(maps: list[Any], fmt: str) -> pa.Array:
    """A commitInfo map per commit as the format shows it: ``key=value, ...`` in the table, an
    object in JSON lines and that object as JSON text in CSV (which holds no nested values). Its
    values are text, as Spark's DESCRIBE HISTORY types these maps (map<string,string>): text as
    it is, other values (deltalake writes metrics as numbers) as their JSON."""
    texts = [
        {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in m.items()}
        if isinstance(m, dict)
        else None
        for m in maps
    ]
    if fmt == "json":
        entries = [list(m.items()) if m is not None else None for m in texts]
        return pa.array(entries, pa.map_(pa.string(), pa.string()))
    if fmt == "csv":
        return pa.array([json.dumps(m) if m is not None else None for m in texts], pa.string())
    return pa.array([_pairs(m) for m in maps], pa.string())


def _pairs(fields: Any) -> str | None:
    """A commitInfo map as ``key=value, ...`` (text values as they are, others as JSON)."""
    if not isinstance(fields, dict):
        return None
    return ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in fields.items())


def files(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The live files (by path) with size, partition values, numRecords and deletion vectors;
    ``--where`` keeps those a scan with that predicate reads."""
    from .table import DeltaTable

    out = out or sys.stdout
    table = DeltaTable(args.uri, storage_options=_storage_options(args.option, "files"))
    snap = table.snapshot(version=args.version, timestamp=args.timestamp)
    live = snap.files()
    kept = live if args.where is None else snap.scan(predicate=args.where).files()
    # only the rows printed are taken in path order: sorting the whole table copied every file's
    # typed stats (300k files: +740 MB, 2.1 s CPU)
    order = pc.sort_indices(kept.column("path"))
    if args.format != "table":
        if args.max_rows is not None:
            order = order[: args.max_rows]
        rows = (
            _file_rows(kept.take(order[i : i + CHUNK_ROWS]), snap.partition_columns).to_batches()
            for i in range(0, len(order), CHUNK_ROWS)
        )
        schema = _file_rows(kept.slice(0, 0), snap.partition_columns).schema
        write_rows((b for chunk in rows for b in chunk), schema, args.format, out)
        return 0
    max_rows = shown_rows(args)
    if args.where is None:
        print(
            f"version {snap.version}: {live.num_rows} live file{'' if live.num_rows == 1 else 's'}", file=out
        )
    else:
        print(
            f"version {snap.version}: {kept.num_rows} of {live.num_rows} live files kept by --where", file=out
        )
    shown = _file_rows(kept.take(order[:max_rows]), snap.partition_columns)
    print_table(shown, out, max_rows=max_rows, total_rows=kept.num_rows)
    return 0


def _file_rows(files: pa.Table, partition_columns: list[str]) -> pa.Table:
    """What ``files`` shows of live files: path, partition values, size, numRecords, deletion
    vector and its deleted rows."""
    dv = files.column("deletion_vector")
    columns: dict[str, Any] = {"path": files.column("path")}
    if partition_columns:
        columns["partition_values"] = files.column("partition_values")
    columns["size"] = files.column("size")
    columns["num_records"] = pc.struct_field(files.column("stats"), "numRecords")
    columns["deletion_vector"] = pc.is_valid(dv)
    columns["deleted_rows"] = pc.struct_field(dv, "cardinality")
    return pa.table(columns)


def changes(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The change feed's rows of START..END (commit order), as ``table_changes()`` gives them;
    the change columns always shown."""
    from .changes import CHANGE_COLUMNS, ChangeScan
    from .scan import requested_columns
    from .table import DeltaTable

    out = out or sys.stdout
    if is_version_text(args.start) and args.end is not None and is_version_text(args.end):
        if int(args.end) < int(args.start):
            raise ArgumentError(
                f"END {args.end} is before START {args.start} (the range START..END includes both)"
            )
    table = DeltaTable(args.uri, storage_options=_storage_options(args.option, "changes"))
    scan = table.changes(args.start, args.end, predicate=args.where)
    wanted = [c.strip() for spec in args.columns or [] for c in spec.split(",")]
    if wanted:
        of = f"the change feed of {scan.feed.storage.root_uri}"
        try:
            checked = requested_columns(wanted, scan.schema.names, of) or []
        except ArgumentError as e:
            raise ArgumentError(f"--columns: {e}") from e
        chosen = checked + [c for c in CHANGE_COLUMNS if c not in checked]
        scan = ChangeScan(scan.feed, chosen, args.where)
    if args.format != "table":
        write_rows(scan.to_batches(), scan.schema, args.format, out, args.max_rows)
        return 0
    print(f"changes of versions {scan.start_version}..{scan.end_version}", file=out)
    max_rows = shown_rows(args)
    head, total = first_rows(scan.to_batches(), max_rows)  # streamed
    shown = pa.Table.from_batches(head, schema=scan.schema)
    print_table(shown, out, max_rows=max_rows, total_rows=total)
    return 0


def change_bound(text: str) -> str:
    """START / END of ``changes``: a version (digits) or an ISO-8601 time, kept as text (the
    API reads both); a signed number is refused here, naming the argument."""
    text = text.strip()
    if not text:
        raise argparse.ArgumentTypeError("expected a version or an ISO-8601 time, got ''")
    if text[0] in "+-" and is_version_text(text[1:]):
        raise argparse.ArgumentTypeError(f"a version is a whole number from 0, got {text!r}")
    return text
