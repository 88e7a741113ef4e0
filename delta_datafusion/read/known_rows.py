"""Rows known from the log: when no data column is asked for (count(*), partition columns,
change-feed constants) and the filter is TRUE for every row of a unit, the unit yields numRecords
minus its deletion vector's cardinality rows of its own values, its file unopened. These are the
checks that the log's figures can be trusted and the batches built from them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..scan_unit import FileUnits, ScanUnit, has_descriptor


def constant_columns(unit: ScanUnit, columns: Sequence[str]) -> bool:
    """Are all ``columns`` partition values or constants of the unit (not stored in its file)?"""
    return all(
        c in unit.partition_values or (c in unit.constants and not unit.has_change_type_column)
        for c in columns
    )


def constant_batches(
    counted: Sequence[tuple[ScanUnit, int]], columns: Sequence[str], schema: pa.Schema, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """Batches of ``n`` rows of each unit's partition values / constants (rows known from the log);
    units with the same values share their batches."""
    rows: dict[tuple, tuple[tuple, int]] = {}
    for u, n in counted:
        values = tuple(u.partition_values[c] if c in u.partition_values else u.constants[c] for c in columns)
        key = tuple(value_key(v) for v in values)
        rows[key] = (values, rows[key][1] + n if key in rows else n)
    return value_batches(rows.values(), schema, batch_size)


def value_batches(
    groups: Iterable[tuple[tuple, int]], schema: pa.Schema, batch_size: int
) -> Iterator[pa.RecordBatch]:
    """Batches of ``total`` rows of each group's ``values`` (one per column of ``schema``; no
    column: one batch of all the rows); a full batch is built once and repeated."""
    if not len(schema):
        total = sum(n for _, n in groups)
        if total:
            yield pa.RecordBatch.from_arrays([pa.nulls(total)], names=["n"]).select([])
        return
    for values, total in groups:
        scalars = [pa.array([v], f.type)[0] for v, f in zip(values, schema, strict=True)]
        full = None
        while total > 0:
            n = min(total, batch_size)
            if n == batch_size and full is not None:
                batch = full
            else:
                batch = pa.RecordBatch.from_arrays([pa.repeat(sc, n) for sc in scalars], schema=schema)
                if n == batch_size:
                    full = batch
            yield batch
            total -= n


def known_file_rows(
    units: FileUnits, columns: Sequence[str], every_row_matches: bool
) -> tuple[list[tuple[tuple, int]], FileUnits]:
    """:func:`known_row_count` and :func:`constant_columns` over a table's files at once: (the
    known rows as groups of (partition values, rows), the units still to read). Computed from
    the scan-metadata columns, so the files answered from the log never become units (a
    ``count(*)`` over 200,000 files made 200,000). ``every_row_matches``: there is no filter,
    else a file's ``all_rows_match`` decides."""
    files = units.files
    stats = files.column("stats").combine_chunks()
    parts = set(units.partition_columns)
    if not len(units) or stats.type.get_field_index("numRecords") < 0 or not parts.issuperset(columns):
        return [], units
    num = pc.struct_field(stats, "numRecords")
    if not pa.types.is_integer(num.type):
        return [], units
    num = num.cast(pa.int64())
    dv = files.column("deletion_vector").combine_chunks()
    dv_fields = dict(zip([f.name for f in dv.type], dv.flatten(), strict=True))
    has_dv = has_descriptor(dv)
    card = dv_fields.get("cardinality")
    if card is None or not pa.types.is_integer(card.type):
        card = pa.nulls(len(dv), pa.int64())
    card = card.cast(pa.int64())
    card_ok = pc.and_kleene(pc.greater_equal(card, 0), pc.less_equal(card, num))
    live = pc.if_else(has_dv, pc.if_else(card_ok, pc.subtract(num, card), None), num)
    trusted = pc.and_kleene(pc.greater_equal(num, 0), pc.less_equal(num, MAX_TRUSTED_ROWS))
    known = pc.and_kleene(trusted, pc.is_valid(live))
    if not every_row_matches:
        match = units.all_rows_match
        known = pc.and_kleene(known, pc.fill_null(match, False)) if match is not None else None
    pv = files.column("partition_values").combine_chunks() if columns else None
    if known is not None and pv is not None:
        known = pc.and_kleene(known, pc.is_valid(pv))  # a file without values is read
    known = np.zeros(len(units), bool) if known is None else pc.fill_null(known, False).to_numpy(False)
    rest = units if not known.any() else units.take(np.flatnonzero(~known))
    counted = np.flatnonzero(known & (pc.fill_null(live, 0).to_numpy(False) > 0))
    if not len(counted):
        return [], rest
    rows = pc.take(live, counted)
    if not columns:
        return [((), int(pc.sum(rows).as_py()))], rest
    values = [pc.take(pc.struct_field(pv, c), counted) for c in columns]
    # float values grouped by their bits: -0.0 and 0.0 are two values (see value_key)
    keys = {f"k{j}": _bits(v) for j, v in enumerate(values)}
    table = pa.table({**keys, "n": rows, "i": pa.array(np.arange(len(counted)))})
    grouped = table.group_by(list(keys), use_threads=False).aggregate([("n", "sum"), ("i", "min")])
    grouped = grouped.sort_by("i_min")  # in the order of the files, as constant_batches
    firsts = grouped.column("i_min").to_pylist()
    totals = grouped.column("n_sum").to_pylist()
    return [(tuple(v[i].as_py() for v in values), n) for i, n in zip(firsts, totals, strict=True)], rest


def _bits(values: pa.Array) -> pa.Array:
    """Floats as the integers of their bits (grouping keeps -0.0 and 0.0 apart); others as they are."""
    if pa.types.is_floating(values.type):
        return values.view({16: pa.int16(), 32: pa.int32()}.get(values.type.bit_width, pa.int64()))
    return values


def value_key(value: Any) -> Any:
    """``value`` as a key that keeps apart what ``==`` merges: the float partition values -0.0
    and 0.0 are two values (their rows must keep their own sign)."""
    return (value, math.copysign(1.0, value)) if isinstance(value, float) else value


#: More rows than a data file is taken to hold: statistics claiming more are read, not trusted.
MAX_TRUSTED_ROWS = 2**31 - 1


def known_row_count(unit: ScanUnit) -> int | None:
    """Live rows of a unit known from the log alone, or None when the file must be read (also
    when the log's figures are impossible: a negative or huge numRecords, a deletion vector
    deleting fewer than none or more rows than the file has; the read then checks the file)."""
    n = unit.num_records
    if n is None or unit.only_rows is not None or not 0 <= n <= MAX_TRUSTED_ROWS:
        return None
    if unit.drop_rows is None:
        return n
    cardinality = unit.drop_rows.get("cardinality")
    if not isinstance(cardinality, int) or not 0 <= cardinality <= n:
        return None
    return n - cardinality
