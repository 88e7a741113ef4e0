"""The CLI's machine-readable output (``--format csv`` / ``json``): rows written by DataFusion's
own CSV and JSON-lines writers (arrow-rs), so values read as DataFusion writes them (decimals
and timestamps exact, ISO-8601 times, binary as hex, NULL as an empty CSV field or an absent JSON
key). DataFusion writes only to files, so each chunk of up to CHUNK_ROWS rows goes through a
temporary file and is copied to the output: rows are streamed, never all held."""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from .errors import ArgumentError

#: Rows written per DataFusion write (each costs a few ms: a plan and a temporary file).
CHUNK_ROWS = 65536

FORMATS = ("table", "csv", "json")


def write_rows(
    batches: Iterable[pa.RecordBatch], schema: pa.Schema, fmt: str, out: Any, max_rows: int | None = None
) -> int:
    """Write the first ``max_rows`` rows (None: all) of ``batches`` to ``out`` as ``fmt`` ('csv':
    with a header line, also for no rows; 'json': one object a line); the rows written. Struct
    columns are flattened for CSV (``partition_values.city``); lists and maps are refused there."""
    from datafusion import SessionContext

    if fmt == "csv":
        schema = _csv_schema(schema)
    # DataFusion's writers take no two columns named alike (a self-join's a.id and b.id): CSV
    # gets them under positional names and its header from here; a JSON object cannot hold both
    alike = _names_alike(schema.names, fmt)
    sink = _binary(out)
    if alike:
        _write_header(schema.names, sink)
    ctx = SessionContext()
    written = 0
    with tempfile.TemporaryDirectory(prefix="delta-datafusion-") as folder:
        target = os.path.join(folder, f"rows.{fmt}")
        for chunk in _chunks(batches, max_rows):
            if fmt == "csv":
                chunk = _flattened(chunk)
            table = pa.Table.from_batches(chunk)
            if alike:
                table = table.rename_columns([f"c{i}" for i in range(table.num_columns)])
            df = ctx.from_arrow(table, name="rows")
            if fmt == "csv":
                df.write_csv(target, with_header=written == 0 and not alike)
            else:
                df.write_json(target)
            ctx.deregister_table("rows")  # from_arrow registers the chunk: it would stay held
            with open(target, "rb") as f:
                sink.write(f.read())
            os.remove(target)
            written += sum(b.num_rows for b in chunk)
    if fmt == "csv" and not written and not alike:
        _write_header(schema.names, sink)
    sink.flush()
    return written


def _names_alike(names: list[str], fmt: str) -> bool:
    """Whether columns share a name, which CSV writes as it is; refused for JSON (ArgumentError)."""
    repeated = [n for n in dict.fromkeys(names) if names.count(n) > 1]
    if repeated and fmt == "json":
        first = repeated[0]
        raise ArgumentError(
            f"--format json: {names.count(first)} columns are named {first!r} (an object holds a key "
            "once): name them apart in the query (... AS other_name), or use --format csv"
        )
    return bool(repeated)


def _write_header(names: list[str], sink: Any) -> None:
    """A CSV header line of ``names``, quoted where needed."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerow(names)
    sink.write(text.getvalue().encode("utf-8"))


def write_object(value: Any, out: Any) -> None:
    """``value`` as one line of JSON, UTF-8 as the rows are (``info --format json``)."""
    import json

    sink = _binary(out)
    sink.write((json.dumps(value, ensure_ascii=False) + "\n").encode("utf-8"))
    sink.flush()


def _binary(out: Any) -> Any:
    """The byte stream under a text stream (UTF-8 whatever the terminal's encoding: CSV and
    JSON are data, not text to show); a stream of text only gets the bytes decoded."""
    buffer = getattr(out, "buffer", None)
    if buffer is not None:
        out.flush()
        return buffer
    return _TextSink(out)


class _TextSink:
    def __init__(self, out: Any):
        self.out = out

    def write(self, data: bytes) -> None:
        self.out.write(data.decode("utf-8"))

    def flush(self) -> None:
        self.out.flush()


def _chunks(batches: Iterable[pa.RecordBatch], max_rows: int | None) -> Iterator[list[pa.RecordBatch]]:
    """Batches grouped into chunks of at least CHUNK_ROWS rows (the last may hold fewer), cut at
    ``max_rows``; empty batches are dropped."""
    pending: list[pa.RecordBatch] = []
    rows = total = 0
    for batch in batches:
        if max_rows is not None and total + batch.num_rows > max_rows:
            batch = batch.slice(0, max_rows - total)
        if batch.num_rows:
            pending.append(batch)
            rows += batch.num_rows
            total += batch.num_rows
        if rows >= CHUNK_ROWS:
            yield pending
            pending, rows = [], 0
        if max_rows is not None and total >= max_rows:
            break
    if pending:
        yield pending


def _csv_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with struct columns flattened; a list or map column is refused, naming it."""
    fields = _flattened_fields(schema)
    for f in fields:
        if pa.types.is_nested(f.type):
            raise ArgumentError(
                f"--format csv: column {f.name!r} is a {f.type} (CSV holds no nested values); "
                "use --format json"
            )
    return pa.schema(fields)


def _flattened_fields(schema: pa.Schema) -> list[pa.Field]:
    out: list[pa.Field] = []
    for f in schema:
        if pa.types.is_struct(f.type):
            out.extend(_flattened_fields(pa.schema([c.with_name(f"{f.name}.{c.name}") for c in f.type])))
        else:
            out.append(f)
    return out


def _flattened(chunk: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """The chunk's struct columns flattened (a NULL struct gives NULL fields)."""
    table = pa.Table.from_batches(chunk)
    while any(pa.types.is_struct(t) for t in table.schema.types):
        table = table.flatten()
    return table.to_batches()
