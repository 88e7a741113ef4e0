"""The columns a file's rows take from its scan unit, not from the file: partition values and
change-feed constants (``_change_type`` of adds and removes, ``_commit_version``,
``_commit_timestamp``). pyarrow's scanner fills a projected column from a fragment's guarantee
with a new array per batch (the cdf benchmark's full feed: 2M rows of four such columns, ~30 ms
of CPU, most of it writing and faulting in fresh memory); here each value's array is made once
per read and every batch takes a zero-copy slice of it."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ..scan_unit import ScanUnit
from .known_rows import value_key


def unit_value(unit: ScanUnit, name: str) -> tuple[bool, Any]:
    """(is ``name`` a column the unit gives a value for, that value). A change-feed constant wins
    over a partition value of the same name, as in the fragment guarantee."""
    if name in unit.constants:
        return True, unit.constants[name]
    if name in unit.partition_values:
        return True, unit.partition_values[name]
    return False, None


#: Bytes of value arrays one read keeps for its next batches (batches handed on keep their own).
CACHED_BYTES = 16 << 20


def repeated(scalar: pa.Scalar, n: int) -> pa.Array:
    """``pa.repeat(scalar, n)``, made from one numpy fill for numbers, dates, times and strings:
    pa.repeat builds them value by value (6,000 rows: ~20 us for an int64 or timestamp, ~57 us
    for a string; numpy 5-8 us). Other types (booleans, decimals, nested) by pa.repeat."""
    typ = scalar.type
    one = pa.array([scalar], typ)
    if pa.types.is_integer(typ) or pa.types.is_floating(typ) or pa.types.is_temporal(typ):
        width = typ.bit_width // 8
        if width in (1, 2, 4, 8):  # the value's bits, as stored (-0.0 and NaN payloads kept)
            bits = np.frombuffer(one.buffers()[1], dtype=f"<u{width}", count=1)
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.full(n, bits[0]))])
    if pa.types.is_string(typ) or pa.types.is_binary(typ):
        data = one.buffers()[2]
        size = 0 if data is None else data.size
        if size * n < 2**31:  # int32 offsets
            offsets = (
                np.arange(0, (n + 1) * size, size, dtype=np.int32) if size else np.zeros(n + 1, np.int32)
            )
            body = data.to_pybytes() * n if size else b""
            return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(body)])
    return pa.repeat(scalar, n)


class RepeatedValues:
    """Arrays of one value repeated, for one read: each (column, value) is made once, at the
    longest length asked for so far, and every batch takes a zero-copy slice of it. The oldest go
    beyond CACHED_BYTES (a scan over many partitions would keep one per value). Not shared by
    threads (one read's batches are made on one thread)."""

    def __init__(self) -> None:
        # (column, value's type, value) -> (the column's type, an array of that value of that type,
        # the longest made so far). The type is compared, not hashed: hashing a timestamp type
        # with a time zone costs ~1.2 us, and each batch asks for three or four arrays (the cdf
        # benchmark's full feed: 1,156 asks); a reader asks with the same type object each time.
        self._arrays: dict[tuple[str, type, Any], tuple[pa.DataType, pa.Array]] = {}
        self._bytes = 0

    def array(self, name: str, typ: pa.DataType, value: Any, n: int) -> pa.Array:
        """``n`` rows of ``value`` (None: NULL) as column ``name`` of type ``typ``."""
        key = (name, type(value), value_key(value))  # -0.0 and 0.0 apart
        try:
            found = self._arrays.get(key)
        except TypeError:  # an unhashable value: made for this batch
            found, key = None, None
        arr = None
        if found is not None and (found[0] is typ or found[0].equals(typ)):
            arr = found[1]
        if arr is None or len(arr) < n:
            arr = pa.nulls(n, typ) if value is None else repeated(pa.scalar(value, typ), n)
            if key is not None:
                self._keep(key, typ, arr)
        return arr if len(arr) == n else arr.slice(0, n)

    def _keep(self, key: tuple[str, type, Any], typ: pa.DataType, arr: pa.Array) -> None:
        old = self._arrays.pop(key, None)
        self._bytes += arr.nbytes - (old[1].nbytes if old is not None else 0)
        self._arrays[key] = (typ, arr)
        while self._bytes > CACHED_BYTES and len(self._arrays) > 1:
            self._bytes -= self._arrays.pop(next(iter(self._arrays)))[1].nbytes


class ConstantColumns:
    """Completes scanned batches with their unit's constant columns, for one read.

    ``logical``: the output columns (logical names), ``fields``: their physical fields, the
    batches' schema; ``scanned``: the physical names of the columns the scanner yields. A column
    scanned for a unit that gives a value for it (``_change_type`` of an add read beside
    change-data files, which store it) takes the value."""

    def __init__(
        self,
        logical: Sequence[str],
        fields: Sequence[pa.Field],
        scanned: Sequence[str],
        valued: Collection[str],
    ):
        self.schema = pa.schema(fields)
        position = {name: i for i, name in enumerate(scanned)}
        #: per output column: its logical name, type and place among the scanned ones (None: not
        #: scanned, every unit gives its value)
        self._columns = [
            (name, f.type, position.get(f.name)) for name, f in zip(logical, fields, strict=True)
        ]
        #: no column takes a unit's value (``valued``: those that may): the scanned columns, in
        #: the output's order (None: as they are)
        self._scanned_only: list[int] | None = None
        self._as_scanned = not any(name in valued for name in logical)
        if self._as_scanned:
            order = [at for _, _, at in self._columns]
            self._scanned_only = None if order == list(range(len(scanned))) else order
        #: each value's array, made once for this read
        self.values = RepeatedValues()
        #: the columns a unit may give (or must: not scanned) as (output position, name, field,
        #: scanned or not), when the other output columns are the scanned ones in their order:
        #: each batch then takes those in place (None: arranged from all the batch's columns)
        self._in_place = self._in_place_columns(list(fields), valued, len(scanned))

    def _in_place_columns(
        self, fields: list[pa.Field], valued: Collection[str], n_scanned: int
    ) -> list[tuple[int, str, pa.Field, pa.DataType, bool]] | None:
        if [at for _, _, at in self._columns if at is not None] != list(range(n_scanned)):
            return None  # scanned in another order, or read only by a filter
        return [
            (i, name, fields[i], fields[i].type, at is not None)
            for i, (name, _, at) in enumerate(self._columns)
            if at is None or name in valued
        ]

    def complete(self, batch: pa.RecordBatch, unit: ScanUnit) -> pa.RecordBatch:
        """``batch`` (the scanned columns of ``unit``'s file) as the output columns."""
        if self._as_scanned:  # count(*) too: the rows without columns (arrays would give none)
            return batch if self._scanned_only is None else batch.select(self._scanned_only)
        if self._in_place is not None:
            out = self._completed_in_place(batch, unit)
            if out.schema.equals(self.schema, check_metadata=True):
                return out
        return self._arranged(batch, unit)

    def _completed_in_place(self, batch: pa.RecordBatch, unit: ScanUnit) -> pa.RecordBatch:
        """The unit's values added to (or put over) the batch's own columns, at their places:
        ~1 us a column, where taking the batch's columns as Python objects and making a batch of
        them (:meth:`_arranged`) costs ~20 us a batch (the full feed: 334 batches)."""
        n = batch.num_rows
        array = self.values.array
        for i, name, field, typ, scanned in self._in_place:
            given, value = unit_value(unit, name)
            if not scanned:  # a value the unit lacks is NULL, as the scanner read it
                batch = batch.add_column(i, field, array(name, typ, value, n))
            elif given:
                batch = batch.set_column(i, field, array(name, typ, value, n))
        return batch

    def _arranged(self, batch: pa.RecordBatch, unit: ScanUnit) -> pa.RecordBatch:
        """The output columns picked from the batch's columns and the unit's values (scanned
        columns not in the output order, or some only read by a filter)."""
        n = batch.num_rows
        scanned = batch.columns
        arrays = []
        for name, typ, at in self._columns:
            given, value = unit_value(unit, name)
            if given or at is None:  # a value the unit lacks is NULL, as the scanner read it
                arrays.append(self.values.array(name, typ, value, n))
            else:
                arrays.append(scanned[at])
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
