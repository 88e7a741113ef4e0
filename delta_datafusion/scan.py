"""Scans: the files (and rows) of a snapshot that a query needs.

``Scan.scan_metadata()`` yields :class:`ScanMetadata` batches of the live files, pruned by the
predicate through partition values and file statistics (see :mod:`.skipping`). ``ScanMetadata``
turns into :class:`~.scan_unit.ScanUnit` objects, the one type the readers consume for both table
scans and change scans.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .errors import ArgumentError, DeletionVectorError, PredicateError
from .scan_unit import FileUnits, logged_in

if TYPE_CHECKING:
    from .parallel import SequentialPhase
    from .predicate import Predicate
    from .read import UnitReader
    from .snapshot import Snapshot


def requested_columns(columns: Sequence[str] | None, names: Sequence[str], of: str) -> list[str] | None:
    """``columns`` checked against the schema's ``names`` (None: every column); ``of`` names the
    table in the errors."""
    if columns is None:
        return None
    if isinstance(columns, (str, bytes)):
        raise ArgumentError(f"columns must be a list of column names, not a string ({columns!r})")
    if not isinstance(columns, Iterable):
        raise ArgumentError(f"columns must be a list of column names, got {columns!r}")
    columns = list(columns)
    odd = [c for c in columns if not isinstance(c, str)]
    if odd:
        raise ArgumentError(f"columns must be column names (strings), got {odd[0]!r} among them")
    repeated = sorted(c for c, n in Counter(columns).items() if n > 1)
    if repeated:
        raise ArgumentError(f"columns {repeated} are listed more than once")
    unknown = [c for c in columns if c not in names]
    if unknown:
        raise ArgumentError(f"unknown column(s) {unknown} for {of}; columns are {list(names)}")
    return columns


@dataclass
class ScanMetadata:
    """A batch of selected files: the scan-metadata columns of :data:`snapshot.FILE_COLUMNS`."""

    files: pa.Table
    #: how many files the batch had before pruning (for EXPLAIN / tests)
    files_before_pruning: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def num_files(self) -> int:
        return self.files.num_rows

    def scan_units(self, snapshot: Snapshot, predicate: Any = None) -> FileUnits:
        """The batch's files as scan units (made when first used); files whose every row makes ``predicate`` TRUE (by
        partition values or exact statistics) are marked, so queries that read no data column
        take their rows from the log (see read/known_rows.py)."""
        from .predicate import TRUE
        from .skipping import file_all_match_mask

        parts = snapshot.partition_columns
        matching = (
            file_all_match_mask(predicate, self.files, snapshot.schema, parts)
            if predicate is not None and predicate != TRUE and self.files.num_rows
            else None
        )
        try:
            return FileUnits(self.files, parts, matching)
        except DeletionVectorError as e:  # a descriptor without storageType: which table, which commit
            logged = logged_in(snapshot.log_file_of_location(e.location) if e.location else None)
            raise DeletionVectorError(
                f"table {snapshot.table_root} version {snapshot.version}, {e}{logged}"
            ) from e


def as_predicate(predicate: Any, schema: pa.Schema) -> Predicate | None:
    """Accept None, a package Predicate or a pyarrow compute Expression (what DataFusion passes);
    SQL text goes to :func:`sql_predicate`, which plans it through DataFusion."""
    if predicate is None:
        return None
    from .predicate import Predicate
    from .predicate_parse import FunctionNotSupportedError, bind_types, from_pyarrow

    if isinstance(predicate, pc.Expression):
        try:
            pred = from_pyarrow(predicate, schema)
        except FunctionNotSupportedError as e:
            # a function, cast or arithmetic: SQL text says the same, and DataFusion applies it
            raise PredicateError(
                f"{e}; give such a condition as SQL text, which DataFusion evaluates (predicate="
                '"starts_with(name, \'A\')", "CAST(id AS VARCHAR) = \'1\'", "id + 1 > 3")'
            ) from e
        pred = None if pred is None else bind_types(pred, schema)
    elif isinstance(predicate, Predicate):
        pred = bind_types(predicate, schema)
    else:
        raise ArgumentError(
            "predicate must be SQL text, a pyarrow.compute.Expression or a delta_datafusion Predicate, "
            f"got {type(predicate)}"
        )
    if pred is not None:
        check_evaluable(pred, schema)
    return pred


def sql_predicate(predicate: Any, schema: pa.Schema) -> tuple[Predicate | None, str | None]:
    """(the predicate a scan prunes and filters by, the SQL text to run through DataFusion when
    DataFusion applies a part of it above the scan, else None)."""
    if not isinstance(predicate, str):
        return as_predicate(predicate, schema), None
    from .datafusion.sql_predicate import plan_sql_predicate

    pred, rest = plan_sql_predicate(predicate, schema)
    if pred is not None:
        check_evaluable(pred, schema)
    return pred, predicate if rest else None


def rows_through_datafusion(
    dataset: Any, schema: pa.Schema, sql_filter: str, where: str
) -> Iterator[pa.RecordBatch]:
    """The rows of ``SELECT <schema's columns> FROM t WHERE <sql_filter>`` over ``dataset`` (this
    package's DataFusion dataset of a snapshot or a change feed), run by DataFusion: it hands the
    package's scan the part it can (pruning and filtering files as in any query) and applies the
    rest itself, exactly as in SQL."""
    from datafusion import SessionContext, Table

    from .errors import from_datafusion

    ctx = SessionContext()
    ctx.register_table("t", Table(dataset))
    select = ", ".join('"' + f.name.replace('"', '""') + '"' for f in schema) or "1"
    try:
        for batch in ctx.sql(f"SELECT {select} FROM t WHERE {sql_filter}").execute_stream():
            b = batch.to_pyarrow()
            if not len(schema):
                yield b.select([])  # no columns, the row count kept
                continue
            cols = [c if c.type == f.type else c.cast(f.type) for c, f in zip(b.columns, schema, strict=True)]
            yield pa.RecordBatch.from_arrays(cols, schema=schema)
    except Exception as e:  # noqa: BLE001 - DataFusion's errors, as the package's
        err = from_datafusion(e)
        if err is not None:
            raise err from e
        # the statement planned when the scan was built, so what fails now is evaluating the
        # predicate on a row (a cast of text that is no number, a division by zero)
        raise PredicateError(f"predicate {sql_filter!r} on {where}: {str(e).splitlines()[0]}") from e


def check_evaluable(pred: Any, schema: pa.Schema) -> None:
    """Refuse a predicate whose comparisons pyarrow cannot evaluate on the table's types (a
    boolean column against 1, a string against 1.5) now, naming it, instead of when (and only
    if) a file is read."""
    from . import predicate as P

    # the columns it reads, a row of NULLs and a row of plain values: pyarrow skips the kernels
    # (and their type checks) on no rows, some casts only happen for values (a binary column IN
    # (1) parses the column's values as integers), and a row of every column of a wide table cost
    # ~25 ms per 1,000 columns
    read = [schema.get_field_index(name) for name in sorted(P.referenced_columns(pred))]
    schema = pa.schema([schema.field(i) for i in read if i >= 0])
    try:
        sample = pa.Table.from_arrays([_sample_values(f.type) for f in schema], schema=schema)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        sample = schema.empty_table()
    try:
        sample.filter(P.to_pyarrow(pred))
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise P.PredicateError(
            f"predicate {pred} cannot be evaluated on the table's column types: {str(e).splitlines()[0]}"
            + _nested_hint(schema, str(e))
        ) from e


def _nested_hint(schema: pa.Schema, error: str) -> str:
    """How to compare a list, struct or map column (whose type pyarrow's ``error`` names) in SQL:
    DataFusion hands a comparison of the column itself to the scan as done (``l = [3]``), and
    pyarrow has no kernel for it; one of an expression of it (``coalesce(l, l)``, the same values)
    DataFusion evaluates itself."""
    nested = (pa.types.is_list, pa.types.is_large_list, pa.types.is_struct, pa.types.is_map)
    name = next(
        (f.name for f in schema if any(kind(f.type) for kind in nested) and str(f.type) in error), None
    )
    if name is None:
        return ""
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):  # as SQL has to spell it
        name = '"' + name.replace('"', '""') + '"'
    return (
        f" (pyarrow compares no lists, structs or maps; in SQL, write coalesce({name}, {name}) = ... "
        "to have DataFusion compare them)"
    )


def _sample_values(t: pa.DataType) -> pa.Array:
    """[NULL, a plain value of ``t``] (an empty string, zero, the epoch); [NULL, NULL] where ``t``
    has no such value at hand (nested types)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.array([None, ""], t)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.array([None, b""], t)
    if pa.types.is_boolean(t):
        return pa.array([None, False], t)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return pa.array([None, 0], pa.int8()).cast(t)
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return pa.array([None, 0], pa.int32() if t.bit_width == 32 else pa.int64()).view(t)
    return pa.nulls(2, t)


class Scan:
    """A planned read of one snapshot: which columns, which predicate."""

    def __init__(self, snapshot: Snapshot, columns: list[str] | None = None, predicate: Any = None):
        self.snapshot = snapshot
        schema = snapshot.schema
        columns = requested_columns(
            columns, schema.names, f"table {snapshot.table_root} at version {snapshot.version}"
        )
        self.columns = list(columns) if columns is not None else list(schema.names)
        #: SQL text of which DataFusion applies a part above the scan (a function, LIKE, a cast
        #: of a column): the rows are read through DataFusion, ``predicate`` prunes
        self.predicate, self.sql_filter = sql_predicate(predicate, schema)

    @property
    def schema(self) -> pa.Schema:
        s = self.snapshot.schema
        return pa.schema([s.field(c) for c in self.columns])

    def prune(self, files: pa.Table) -> pa.Table:
        """Keep the files that may hold rows matching the predicate."""
        if self.predicate is None or files.num_rows == 0:
            return files
        from .skipping import file_keep_mask

        mask = file_keep_mask(self.predicate, files, self.snapshot.schema, self.snapshot.partition_columns)
        return files.filter(mask)

    def pruned_metadata(self, files: pa.Table, **extra: Any) -> ScanMetadata:
        """One scan-metadata batch: ``files`` pruned, with how many there were before."""
        return ScanMetadata(self.prune(files), files_before_pruning=files.num_rows, extra=extra)

    def scan_metadata(self) -> Iterator[ScanMetadata]:
        """The selected live files, as one or more batches."""
        yield self.pruned_metadata(self.snapshot.files())

    def files(self) -> pa.Table:
        """The files :meth:`scan_metadata` keeps, as one table."""
        return pa.concat_tables([m.files for m in self.scan_metadata()])

    def scan_units(self) -> FileUnits:
        """The files to read, selected as a query selects them: only the predicate's columns'
        stats are typed (typing every column's cost seconds on a table of thousands of columns)."""
        files, _, _ = self.snapshot.select_files(self.predicate)
        return ScanMetadata(files).scan_units(self.snapshot, self.predicate)

    # -- reading ------------------------------------------------------------------------------
    def reader(self, constants: list[pa.Field] | None = None) -> UnitReader:
        from .read import UnitReader
        from .read_schema import make_read_schema

        snap = self.snapshot
        rs = make_read_schema(snap.schema, snap.physical_schema, snap.partition_columns, constants or [])
        return UnitReader(
            snap.storage,
            rs,
            snap.table_root,
            snap.version,
            log_file=lambda u: snap.log_file_of_location(u.location),
        )

    def to_batches(self, batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
        """The selected rows (deletion vectors applied, predicate applied exactly), in batches of
        at most ``batch_size`` rows."""
        from .read import batches_of_at_most

        if self.sql_filter is not None:
            batches = self._filtered_by_datafusion()
        else:
            batches = self.reader().read(self.scan_units(), self.columns, self.predicate, batch_size)
        yield from batches_of_at_most(batches, batch_size)

    def _filtered_by_datafusion(self) -> Iterator[pa.RecordBatch]:
        from .datafusion.provider import table_dataset

        where = f"table {self.snapshot.table_root} at version {self.snapshot.version}"
        return rows_through_datafusion(table_dataset(self.snapshot), self.schema, self.sql_filter, where)

    def to_reader(self, batch_size: int | None = None) -> pa.RecordBatchReader:
        """The selected rows, streamed (nothing is read before the first batch is pulled)."""
        from .read import checked_batch_size

        checked_batch_size(batch_size)  # refused now, not at the first batch
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches(batch_size))

    def to_table(self) -> pa.Table:
        """The selected rows, collected."""
        return pa.Table.from_batches(list(self.to_batches()), schema=self.schema)

    def parallel_scan_metadata(self) -> SequentialPhase:
        """Two-phase replay: a sequential phase over commits and the checkpoint manifest, then leaves."""
        from .parallel import SequentialPhase

        return SequentialPhase(self)
