"""Command line: ``delta-datafusion demo | sql | info | history | files | changes`` (no command: ``demo``).

``demo`` runs SQL over the bundled example table (a partitioned table with the change feed
enabled, updated and deleted from), showing pruning, time travel and ``table_changes()``.
``sql`` runs one statement over Delta tables, ``info`` describes a table; ``history``, ``files``
and ``changes`` (in :mod:`.cli_inspect`) print its commits, live files and change feed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import unicodedata
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from .arguments import is_version_text
from .cli_output import FORMATS, write_object, write_rows
from .cli_times import UNIT_NANOS, time_values
from .cli_times import shown as shown_time
from .errors import ArgumentError, VersionNotFoundError, describe


def example_table() -> Path:
    """Path of the bundled example table ``trips``."""
    return Path(str(resources.files("delta_datafusion") / "examples" / "trips"))


def _show(ctx, sql: str, out) -> None:
    print(f"\n> {sql}", file=out)
    table = ctx.sql(sql).to_arrow_table()
    print_table(table, out, max_rows=20)


def print_table(table, out: TextIO, max_rows: int, total_rows: int | None = None) -> None:
    """:func:`_format` of ``table`` printed to ``out``, escaped as ``out``'s encoding shows it."""
    print(_format(table, max_rows, total_rows, getattr(out, "encoding", None)), file=out)


def _format(table, max_rows: int = 20, total_rows: int | None = None, encoding: str | None = None) -> str:
    """``table`` as text, its first ``max_rows`` rows shown; ``total_rows``: the rows of the
    result when ``table`` holds only the first ones (a streamed result). ``encoding``: the output
    stream's, whose escapes of what it cannot show (``\\xe9``, see :func:`main`) the column widths
    count."""
    cols = table.column_names
    if not cols:  # DDL; slicing a table without columns reports rows it does not have
        return f"({_rows(table.num_rows)})"
    shown = table.slice(0, max_rows)
    columns = [_values(shown.column(i)) for i in range(shown.num_columns)]
    cells = [[_shown(_cell(v), encoding) for v in row] for row in zip(*columns, strict=True)]
    names = [_shown(_printable(c), encoding) for c in cols]
    widths = [max([_width(c)] + [_width(row[i]) for row in cells]) for i, c in enumerate(names)]
    line = " | ".join(_pad(c, w) for c, w in zip(names, widths, strict=True))
    sep = "-+-".join("-" * w for w in widths)
    body = [" | ".join(_pad(v, w) for v, w in zip(row, widths, strict=True)) for row in cells]
    total = table.num_rows if total_rows is None else total_rows
    hidden = total - shown.num_rows
    more = [f"... {hidden} more {_rows(hidden, count=False)}"] if hidden > 0 else []
    return "\n".join([line, sep, *body, *more, f"({_rows(total)})"])


def _cell(v: Any) -> str:
    """A value as one line of the table: NULL for a null, also inside a struct, list or map
    (Python would show ``None``), and a line break or other control character in text escaped
    (printed as is, it started a line that looked like another row); binary and intervals as
    DataFusion shows them (``0102ff``, ``1 mons 2 hours``), not as Python's ``b'...'`` and
    ``MonthDayNano(...)``."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, pa.MonthDayNano):
        return _interval(v)
    if isinstance(v, dt.timedelta):  # inside a list or struct (a column's are written by _values)
        nanos = getattr(v, "value", None)  # pandas' Timedelta, which pyarrow gives for nanoseconds
        return _duration(nanos if isinstance(nanos, int) else v // dt.timedelta(microseconds=1) * 1000)
    if isinstance(v, (dt.datetime, dt.time)):  # inside a list or struct (as for durations)
        return shown_time(v)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_printable(str(k))}: {_inner(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        if v and all(isinstance(x, tuple) and len(x) == 2 for x in v):  # a map's (key, value) pairs
            return "{" + ", ".join(f"{_inner(k)}: {_inner(x)}" for k, x in v) + "}"
        return "[" + ", ".join(_inner(x) for x in v) + "]"
    return _printable(str(v))


def _shown(text: str, encoding: str | None) -> str:
    """``text`` as a stream of ``encoding`` that escapes what it cannot encode writes it."""
    if encoding is None or text.isascii():
        return text
    try:
        text.encode(encoding)
        return text
    except (UnicodeError, LookupError):
        return text.encode(encoding, "backslashreplace").decode(encoding, "replace")


def _interval(v: pa.MonthDayNano) -> str:
    seconds, nanos = divmod(abs(v.nanoseconds), 1_000_000_000)
    sign = "-" if v.nanoseconds < 0 else ""
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    parts = [f"{v.months} mons" if v.months else "", f"{v.days} days" if v.days else ""]
    parts += [f"{sign}{hours} hours" if hours else "", f"{sign}{minutes} mins" if minutes else ""]
    if seconds or nanos:
        parts.append(f"{sign}{seconds}.{nanos:09d} secs" if nanos else f"{sign}{seconds} secs")
    return " ".join(p for p in parts if p) or "0 secs"


def _float(v: float) -> str:
    """``v`` as DataFusion writes it: NaN, and an exponent without a plus sign or leading zeros
    (1e16, 1e-7: Python writes 1e+16, 1e-07)."""
    if v != v:
        return "NaN"
    text = repr(v)
    mantissa, e, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent)}" if e else text


def _duration(nanos: int) -> str:
    """A duration as DataFusion shows it, in seconds as ISO 8601 writes them (``PT1.5S``,
    ``-PT68400S``, ``P0D``); Python's "-1 day, 5:00:00" for -19 hours reads as something else."""
    if nanos == 0:
        return "P0D"
    seconds, fraction = divmod(abs(nanos), 1_000_000_000)
    digits = f".{fraction:09d}".rstrip("0") if fraction else ""
    return f"{'-' if nanos < 0 else ''}PT{seconds}{digits}S"


def _inner(v: Any) -> str:
    """A value inside a nested one: text quoted, as Python shows it."""
    return repr(v) if isinstance(v, str) else _cell(v)


def _printable(text: str) -> str:
    """``text`` with the characters a terminal does not show as one (line breaks, tabs, other
    control and invisible characters) written as Python escapes."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _width(text: str) -> int:
    """Terminal columns of ``text``: East Asian wide characters take two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text
    )


def _pad(text: str, width: int) -> str:
    return text + " " * (width - _width(text))


def _values(column: Any) -> list[Any]:
    """A column's values as Python shows them, or as Arrow writes them where Python has no value
    for them (nanosecond times such as ``now()``'s, dates beyond the year 9999 that a table may
    hold: ``to_pylist`` fails on those)."""
    t = column.type
    times = time_values(column)  # as DataFusion shows them, in any unit and year
    if times is not None:
        return times
    if pa.types.is_duration(t):  # exact, also in nanoseconds, which Python's timedelta lacks
        scale = UNIT_NANOS[t.unit]
        return [None if v is None else _duration(v * scale) for v in column.cast(pa.int64()).to_pylist()]
    if _leaves(t, pa.types.is_float32) != t:
        # a float32 widened to a Python float shows digits it does not hold (0.1 as
        # 0.10000000149011612): its shortest text read back as a double keeps only its own
        column = column.cast(_leaves(t, pa.types.is_float32, pa.string())).cast(
            _leaves(t, pa.types.is_float32, pa.float64())
        )
    try:
        return column.to_pylist()
    except (ValueError, OverflowError):
        return column.cast(_leaves(column.type, _is_time)).to_pylist()


def _is_time(t: Any) -> bool:
    return pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t) or pa.types.is_duration(t)


def _leaves(t: Any, which: Any, to: Any = None) -> Any:
    """``t`` with the types ``which`` picks, nested ones too, replaced by ``to`` (default: strings);
    ``t`` itself when it has none."""
    if which(t):
        return to or pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_leaves(f.type, which, to)) for f in t])
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field.with_type(_leaves(t.value_type, which, to))
        return pa.large_list(item) if pa.types.is_large_list(t) else pa.list_(item)
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(_leaves(t.key_type, which, to)),
            t.item_field.with_type(_leaves(t.item_type, which, to)),
        )
    return t


def _rows(n: int, count: bool = True) -> str:
    word = "row" if n == 1 else "rows"
    return f"{n} {word}" if count else word


def demo(out: TextIO | None = None) -> int:
    out = out or sys.stdout
    from datafusion import SessionContext

    from . import explain, register, register_table
    from .table import DeltaTable

    path = example_table()
    snap = DeltaTable(str(path)).snapshot()
    print(f"Example table: {path}", file=out)
    print(
        f"version {snap.version}, partitioned by {snap.partition_columns}, {snap.files().num_rows} live files",
        file=out,
    )
    print("schema:", ", ".join(f"{f.name} {f.type}" for f in snap.schema), file=out)

    ctx = SessionContext()
    register(ctx)
    register_table(ctx, "trips", str(path))
    _show(
        ctx,
        "SELECT city, count(*) AS trips, round(sum(fare), 2) AS revenue FROM trips GROUP BY city ORDER BY city",
        out,
    )
    q = "SELECT trip_id, rider, fare FROM trips WHERE city = 'Porto' AND trip_id < 45 ORDER BY trip_id"
    _show(ctx, q, out)
    print("\nEXPLAIN (with Delta pruning):", file=out)
    print(explain(ctx, q), file=out)
    location = str(path).replace("'", "''")  # an SQL string literal, whatever folder holds the package
    ctx.sql(f"CREATE EXTERNAL TABLE trips_v2 STORED AS DELTA LOCATION '{location}' OPTIONS ('version' '2')")
    _show(ctx, "SELECT count(*) AS rows_at_v2 FROM trips_v2", out)
    _show(
        ctx,
        "SELECT _commit_version, _change_type, count(*) AS n FROM table_changes('trips', 3) "
        "GROUP BY 1, 2 ORDER BY 1, 2",
        out,
    )
    _show(
        ctx,
        "SELECT c.trip_id, c._change_type, c.fare, t.rider FROM table_changes('trips', 3, 3) c "
        "JOIN trips t ON c.trip_id = t.trip_id WHERE c._change_type = 'update_postimage' ORDER BY 1",
        out,
    )
    return 0


def sql(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    from datafusion import SessionContext

    from . import register, register_table
    from .datafusion.names import same_table
    from .datafusion.session import explain_statement, is_explain

    ctx = SessionContext()
    register(ctx)
    given: list[tuple[str, str]] = []
    tables = []
    for spec in args.table or []:
        name, _, uri = spec.partition("=")
        if not uri:
            raise ArgumentError(f"--table expects NAME=URI, got {spec!r}")
        # as SQL reads names: T, t and public.t are one table, "T" another
        earlier = next((s for n, s in given if same_table(n, name)), None)
        if earlier is not None:
            raise ArgumentError(f"--table names {name!r} twice (also as {earlier!r})")
        given.append((name, spec))
        tables.append((name, uri))
    as_of = _as_of(args.as_of, [n for n, _ in tables])
    options = _storage_options(args.option, "sql", [n for n, _ in tables])
    if options and not tables:  # table_changes('<uri>', ...) of a location takes no options
        raise ArgumentError(
            "--option applies to the tables given with --table, and none is given (table_changes() of a "
            "location reads it without options: give the table with --table NAME=URI and name it)"
        )
    for name, uri in tables:
        version, timestamp = as_of.get(name, (None, None))
        try:
            register_table(ctx, name, uri, version, timestamp, storage_options=options)
        except VersionNotFoundError as e:
            from .changes.version_range import date_digits_hint

            hint = date_digits_hint(str(version)) if version is not None else ""
            if not hint:
                raise
            raise VersionNotFoundError(f"--as-of {name}={version}: {e}{hint}") from e
    fmt = getattr(args, "format", "table")
    names = [n for n, _ in tables]
    try:
        if fmt == "table" and is_explain(args.query):  # plans are lines: a table cell would escape them
            print(explain_statement(ctx, args.query), file=out)
            return 0
        df = ctx.sql(args.query)
    except Exception as e:
        hint = unknown_table_hint(e, names)
        if hint is None:
            raise
        raise hint from e
    batches = (b.to_pyarrow() for b in df.execute_stream())
    if fmt != "table":
        write_rows(batches, df.schema(), fmt, out, args.max_rows)
        return 0
    # streamed: the whole result held to print its first rows took 1.45 GB for li_flat's 6M rows
    max_rows = shown_rows(args)
    head, total = first_rows(batches, max_rows)
    # the batches' own schema: DataFusion's planned one may say a field is nullable where they do not
    shown = pa.Table.from_batches(head) if head else df.schema().empty_table()
    print_table(shown, out, max_rows=max_rows, total_rows=total)
    return 0


def unknown_table_hint(e: Exception, names: list[str]) -> ArgumentError | None:
    """DataFusion's "table '...' not found" as the mistake it is on this command line (a table
    not given with --table, or named otherwise: `FROM 'path/to/t'`, `FROM trips` for `--table
    t=...`), saying which tables were given; None for any other error."""
    import re

    from .errors import from_datafusion

    if re.search(r"\btable '.*' not found", str(e)) is None or from_datafusion(e) is not None:
        return None
    given = f"tables given: {', '.join(names)}" if names else "no table given"
    return ArgumentError(f"{str(e).strip()} ({given}; name each Delta table with --table NAME=URI)")


#: Rows a table prints unless --max-rows says otherwise.
TABLE_ROWS = 50


def shown_rows(args: argparse.Namespace) -> int:
    """The rows to print as a table: --max-rows, else TABLE_ROWS."""
    return TABLE_ROWS if getattr(args, "max_rows", None) is None else args.max_rows


def first_rows(batches: Iterable[pa.RecordBatch], max_rows: int) -> tuple[list[pa.RecordBatch], int]:
    """The batches of a stream's first ``max_rows`` rows, and how many rows it has: only the rows
    printed are held, all are counted."""
    head: list[pa.RecordBatch] = []
    total = 0
    for batch in batches:
        if total < max_rows:
            head.append(batch.slice(0, max_rows - total))
        total += batch.num_rows
    return head, total


def _as_of(specs: list[str] | None, names: list[str]) -> dict[str, tuple[int | None, str | None]]:
    """``--as-of NAME=WHEN`` -> {table name as --table gave it: (version, timestamp)}: WHEN is a
    version (digits 0-9) or a time (ISO-8601)."""
    from .datafusion.names import same_table

    out: dict[str, tuple[int | None, str | None]] = {}
    for spec in specs or []:
        name, _, when = (part.strip() for part in spec.partition("="))
        if not name or not when:
            raise ArgumentError(f"--as-of expects NAME=WHEN (a version or an ISO-8601 time), got {spec!r}")
        table = next((n for n in names if same_table(n, name)), None)
        if table is None:
            raise ArgumentError(f"--as-of names {name!r}, which no --table gives (tables: {names})")
        if table in out:
            raise ArgumentError(f"--as-of names {name!r} twice")
        digits = is_version_text(when)
        if not digits and when[:1] in "+-" and is_version_text(when[1:]):
            raise ArgumentError(f"--as-of {spec.strip()}: a version is a whole number from 0, got {when!r}")
        if not digits:
            from .timestamps import to_micros

            try:  # refused here, naming the flag: the table's own error would name the value only
                to_micros(when)
            except ArgumentError as e:
                raise ArgumentError(f"--as-of {name}={when}: {e}") from e
        out[table] = (int(when), None) if digits else (None, when)
    return out


def info(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    from .table import DeltaTable

    table = DeltaTable(args.uri, storage_options=_storage_options(args.option, "info"))
    snap = table.snapshot(version=args.version, timestamp=args.timestamp)
    facts = table_facts(snap)
    if getattr(args, "format", "table") == "json":
        write_object(facts, out)
        return 0
    protocol = snap.protocol
    print(f"table: {facts['table']}", file=out)
    print(f"version: {facts['version']}", file=out)
    print(
        f"protocol: reader {protocol.min_reader_version}, writer {protocol.min_writer_version}, "
        f"features {sorted(protocol.reader_features | protocol.writer_features)}",
        file=out,
    )
    print(f"partition columns: {facts['partition_columns']}", file=out)
    props = facts["properties"]
    print(
        "properties:" + "".join(f"\n  {k} = {props[k]}" for k in sorted(props))
        if props
        else "properties: none",
        file=out,
    )
    unknown = facts["files_of_unknown_size"]
    unknown_text = f" ({unknown} of unknown size)" if unknown else ""
    print(f"live files: {facts['live_files']}, bytes: {facts['bytes']}{unknown_text}", file=out)
    declared = {f.get("name"): f for f in facts["schema"].get("fields", [])}
    print("columns:", file=out)
    for f in snap.schema:
        delta = declared.get(f.name, {})
        # a VARIANT is served as its parquet struct of binaries: say so
        kind = f"variant, read as {f.type}" if delta.get("type") == "variant" else f"{f.type}"
        # served nullable whatever the table declares (a file may hold NULLs): say what it declares
        kind += " not null" if delta.get("nullable") is False else ""
        print(f"  {f.name}: {kind}", file=out)
    return 0


def table_facts(snap: Any) -> dict[str, Any]:
    """What ``info`` tells of a snapshot, as ``--format json`` writes it: the protocol and the
    schema as the log's protocol action and schema string have them (Delta's own JSON), the
    sum of the live files' sizes and how many files the log gives no size."""
    import pyarrow.compute as pc

    p = snap.protocol
    protocol: dict[str, Any] = {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
    }
    if p.min_reader_version >= 3:
        protocol["readerFeatures"] = sorted(p.reader_features)
    if p.min_writer_version >= 7:
        protocol["writerFeatures"] = sorted(p.writer_features)
    sizes = snap.files().column("size")
    return {
        "table": snap.table_root,
        "version": snap.version,
        "protocol": protocol,
        "partition_columns": list(snap.partition_columns),
        "properties": dict(snap.properties),
        "live_files": len(sizes),
        "bytes": pc.sum(sizes).as_py() or 0,
        "files_of_unknown_size": sizes.null_count,
        "schema": snap.metadata.schema_json,
    }


def _storage_options(
    specs: list[str] | None, command: str, tables: list[str] | None = None
) -> dict[str, Any] | None:
    """``--option KEY=VALUE`` flags as storage options, read as SQL ``OPTIONS`` are: a
    ``storage.`` prefix is dropped, 'true'/'false' become booleans and plain integers ints
    (spaces around the key and value are dropped: ``anon= false`` is not the string ' false').
    ``command`` and ``tables`` (the ``--table`` names) word the refusal of a version or time."""
    if not specs:
        return None
    from .arguments import misspelt_option
    from .datafusion.session import option_value

    options: dict[str, Any] = {}
    for spec in specs:
        key, eq, value = (part.strip() for part in spec.partition("="))
        key = key.removeprefix("storage.")
        if not eq or not key:
            raise ArgumentError(f"--option expects KEY=VALUE, got {spec!r}")
        pin = misspelt_option(key)
        if pin is not None:
            # SQL OPTIONS' pins, not a filesystem's options; a look-alike ('versoin') would reach
            # the filesystem, which ignores it or passes it on: the latest version, silently
            meant = "" if key == pin else f" (did you mean {pin!r}?)"
            raise ArgumentError(
                f"--option {key}=... is not a storage option{meant}: {_pin_hint(command, pin, value, tables)}"
            )
        if key in options:
            raise ArgumentError(f"--option gives {key!r} twice")
        options[key] = option_value(value)
    return options


def _pin_hint(command: str, key: str, value: str, tables: list[str] | None) -> str:
    """How ``command`` reads a table at a version or time, for ``--option version=...``."""
    if command in ("info", "files"):
        return f"`{command}` takes --{key} {value}"
    if command == "history":
        return "`history` lists the commits (--limit N: the newest N)"
    if command == "changes":
        return "`changes` takes the range as START [END] (versions or times)"
    name = tables[0] if tables and len(tables) == 1 else "NAME"
    return f"`sql` takes --as-of {name}={value} (for each --table to pin)"


def _non_negative(text: str) -> int:
    if not is_version_text(text.strip()):
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return int(text)


def typed_text(text: str) -> str:
    """``text`` from the command line as the UTF-8 it was typed as. Under a locale that is not
    UTF-8 (``LC_ALL=C`` with ``PYTHONUTF8=0``) Python keeps each byte past ASCII as a lone
    surrogate, from which SQL text and names cannot be encoded ("surrogates not allowed"); text
    whose bytes are not UTF-8 is left as it came."""
    if text.isascii() or not any("\udc80" <= c <= "\udcff" for c in text):
        return text
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8")
    except UnicodeError:
        return text


def _typed_text(args: argparse.Namespace) -> None:
    """The SQL text, predicates, column and table names among ``args`` as :func:`typed_text`.
    Paths keep the form the filesystem calls take (Python's own, surrogates included)."""
    for key in ("query", "where"):
        if isinstance(getattr(args, key, None), str):
            setattr(args, key, typed_text(getattr(args, key)))
    for key in ("columns", "as_of"):
        if getattr(args, key, None):
            setattr(args, key, [typed_text(v) for v in getattr(args, key)])
    if getattr(args, "table", None):  # NAME=URI: the name only
        args.table = [typed_text(n) + eq + uri for n, eq, uri in (t.partition("=") for t in args.table)]


def _command(sub: Any, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose own --help starts with what it does, as the command list says it."""
    return sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".")


def main(argv: list[str] | None = None) -> int:
    from . import __version__
    from .cli_inspect import change_bound

    parser = argparse.ArgumentParser(
        prog="delta-datafusion", description=__doc__.splitlines()[0].replace("``", "")
    )
    parser.add_argument("--version", action="version", version=f"delta-datafusion {__version__}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser(
        "demo",
        help="run SQL over the bundled example Delta table (the default)",
        description="Print the bundled example table's path (try the other commands on it), then run "
        "SQL over it: a GROUP BY, a pruned filter and its EXPLAIN, time travel and table_changes().",
    )
    p_sql = _command(sub, "sql", "run one SQL query over Delta tables")
    p_sql.add_argument("query", help="one SQL statement (table_changes() is available)")
    p_sql.add_argument(
        "--table",
        action="append",
        metavar="NAME=URI",
        help="a Delta table to query as NAME (repeatable); SQL reads unquoted names in lower case",
    )
    p_sql.add_argument(
        "--as-of",
        action="append",
        metavar="NAME=WHEN",
        help="read the --table NAME at a version (digits) or at the latest commit at or before a time "
        "(ISO-8601 with dashes: 2024-05-01 or 2024-05-01T12:00:00Z; 20240501 is a version) instead of "
        "its latest (repeatable)",
    )
    p_info = _command(sub, "info", "describe a Delta table: version, protocol, partitioning, schema")
    p_info.add_argument("uri", help="the table's path or URL")
    p_info.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="table: lines of text (default); json: one JSON object (version, protocol and schema as "
        "the Delta log writes them, partition columns, properties, live files and bytes)",
    )
    p_hist = _command(sub, "history", "list a Delta table's commits, newest first")
    p_hist.add_argument("uri", help="the table's path or URL")
    p_hist.add_argument(
        "--limit", type=_non_negative, default=None, help="only the newest N commits (default: all)"
    )
    p_hist.add_argument(
        "--max-rows",
        type=_non_negative,
        default=None,
        help="as --limit (the name the other commands give the rows to print)",
    )
    p_files = _command(sub, "files", "list a Delta table's live data files")
    p_files.add_argument("uri", help="the table's path or URL")
    p_files.add_argument(
        "--where",
        metavar="PREDICATE",
        default=None,
        help="only the files a scan with this SQL predicate reads (pruned by partition values and "
        "file statistics), e.g. --where \"city = 'Porto' AND fare > 10\"",
    )
    p_changes = _command(sub, "changes", "print a Delta table's change data feed (as table_changes())")
    p_changes.add_argument("uri", help="the table's path or URL")
    p_changes.add_argument(
        "start", type=change_bound, help="the first version (digits) or time (ISO-8601) of the range"
    )
    p_changes.add_argument(
        "end",
        type=change_bound,
        nargs="?",
        default=None,
        help="the last version or time of the range, included (default: the latest version)",
    )
    p_changes.add_argument(
        "--columns",
        action="append",
        metavar="A,B,...",
        help="the table columns to print, comma-separated (repeatable; default: all); _change_type, "
        "_commit_version and _commit_timestamp are always printed",
    )
    p_changes.add_argument(
        "--where",
        metavar="PREDICATE",
        default=None,
        help="only the change rows matching this SQL predicate, e.g. --where \"_change_type = 'delete'\"",
    )
    for p in (p_sql, p_files, p_changes):
        p.add_argument(
            "--max-rows",
            type=_non_negative,
            default=None,
            help=f"rows to print (default {TABLE_ROWS} as a table, all as csv or json)",
        )
    for p in (p_sql, p_hist, p_files, p_changes):
        p.add_argument(
            "--format",
            choices=FORMATS,
            default="table",
            help="table: aligned text (default); csv: a header line, then comma-separated rows; json: "
            "one JSON object a line; csv and json as DataFusion writes them (NULL an empty field or "
            "an absent key; csv: a struct as a column per field, lists and maps refused), all rows "
            "streamed, no summary lines",
        )
    for p, whose in (
        (p_sql, "the --table tables'"),
        (p_info, "the table's"),
        (p_hist, "the table's"),
        (p_files, "the table's"),
        (p_changes, "the table's"),
    ):
        p.add_argument(
            "--option",
            action="append",
            metavar="KEY=VALUE",
            help=f"a storage option for {whose} filesystem (repeatable; 'true'/'false' and integers "
            "typed), e.g. --option anon=true",
        )
    for p in (p_info, p_files):
        when = p.add_mutually_exclusive_group()
        when.add_argument("--version", type=_non_negative, default=None, help="the table at this version")
        when.add_argument(
            "--timestamp",
            default=None,
            help="the table at this time (ISO-8601, e.g. 2024-05-01T12:00:00Z; the latest commit at or "
            "before it; digits alone are refused: --version takes a version)",
        )
    args = parser.parse_args(argv)
    _typed_text(args)
    # a terminal or pipe that is not UTF-8 (PYTHONIOENCODING=ascii, a C locale) gets escapes for
    # what it cannot show (a non-ASCII table path, values), not an error instead of the output
    if hasattr(sys.stdout, "reconfigure"):
        try:
            sys.stdout.reconfigure(errors="backslashreplace")
        except (ValueError, OSError):  # a stream that cannot change (already written, closed)
            pass
    try:
        if args.command in (None, "demo"):
            return demo()
        if args.command == "sql":
            return sql(args)
        if args.command == "info":
            return info(args)
        from .cli_inspect import changes, files, history

        return {"history": history, "files": files, "changes": changes}[args.command](args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 128 + 2  # the status of a tool stopped by SIGINT
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly with the status of a tool killed by
        # SIGPIPE, as other command line tools do; stdout points at devnull so that the
        # interpreter's final flush does not fail again
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13
    except Exception as e:  # noqa: BLE001 - DataFusion wraps the package's errors into its own
        # one line, as scripts read it: DataFusion's messages may span several ("Schema error: No
        # field named x.\nValid fields are ...", "DELETE operation ...\ncaused by\n...")
        text = " ".join(line.strip() for line in typed_text(describe(e)).splitlines() if line.strip())
        print(f"error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
