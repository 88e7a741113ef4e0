"""Predicates as JSON, for the parallel state's header.

A worker rebuilds the scan's predicate from the state bytes, which carry no pickle: this module
writes a predicate tree (frozen dataclasses of this package, tuples, Arrow types and scalars) as
tagged JSON and reads it back, instantiating only classes of this package by module path.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import math
from typing import Any

import pyarrow as pa

from ..errors import DeltaError, ParallelStateError

# Values are JSON scalars, lists, or tagged objects: {"$dc": ..., "fields": ...} (a dataclass of
# this package, rebuilt through its constructor so its validation runs), {"$tuple": [...]},
# {"$frozenset": [...]}, {"$dict": {...}}, {"$float": "nan"|"inf"|"-inf"}, {"$bytes": b64},
# {"$enum": ...}, and Arrow values: {"$arrow_type": name} / {"$scalar": value, "type": name} for
# simple types, else {"$arrow_type_ipc": b64} / {"$arrow_scalar_ipc": b64} (Arrow IPC, so any type
# and value round-trips exactly: time zones, decimals, NaN). Only classes inside the delta_datafusion
# package are ever instantiated.

#: The top-level package (not this subpackage): predicate classes live in its other modules.
_PACKAGE = __name__.split(".", 1)[0]


def _b64(data: bytes | pa.Buffer) -> str:
    return base64.b64encode(memoryview(data)).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve_class(ref: str) -> type:
    module, _, qualname = ref.partition(":")
    if not (module == _PACKAGE or module.startswith(_PACKAGE + ".")) or not qualname:
        raise ParallelStateError(f"predicate refers to class {ref!r} outside the {_PACKAGE} package")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ParallelStateError(f"predicate refers to unknown class {ref!r}") from e
    if not isinstance(obj, type):
        raise ParallelStateError(f"predicate refers to {ref!r}, which is not a class")
    return obj


#: Types written by name in predicate JSON (others go through Arrow IPC).
_ALIASED_TYPES = {
    str(t): t
    for t in (
        pa.null(),
        pa.bool_(),
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.uint8(),
        pa.uint16(),
        pa.uint32(),
        pa.uint64(),
        pa.float32(),
        pa.float64(),
        pa.string(),
        pa.large_string(),
    )
}


def _type_alias(t: pa.DataType) -> str | None:
    name = str(t)
    return name if _ALIASED_TYPES.get(name) == t else None


def _alias_type(name: str) -> pa.DataType:
    try:
        return _ALIASED_TYPES[name]
    except (KeyError, TypeError):
        raise ParallelStateError(f"malformed predicate JSON: unknown type name {name!r}") from None


def _scalar_array(s: pa.Scalar) -> pa.Array:
    try:
        return pa.array([s], type=s.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError):
        return pa.array([s.as_py()], type=s.type)


def encode_value(obj: Any) -> Any:
    """A JSON-able form of a predicate tree (or any value inside one)."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int) and not isinstance(obj, enum.Enum):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
    if isinstance(obj, enum.Enum):
        return {"$enum": _class_ref(type(obj)), "name": obj.name}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        fields = {f.name: encode_value(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init}
        return {"$dc": _class_ref(type(obj)), "fields": fields}
    if isinstance(obj, tuple):
        return {"$tuple": [encode_value(v) for v in obj]}
    if isinstance(obj, list):
        return [encode_value(v) for v in obj]
    if isinstance(obj, frozenset | set):
        return {"$frozenset": [encode_value(v) for v in sorted(obj, key=repr)]}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise ParallelStateError(f"cannot serialize a predicate dict with non-string keys: {obj!r}")
        return {"$dict": {k: encode_value(v) for k, v in obj.items()}}
    if isinstance(obj, bytes | bytearray):
        return {"$bytes": _b64(bytes(obj))}
    if isinstance(obj, pa.DataType):
        alias = _type_alias(obj)
        if alias is not None:
            return {"$arrow_type": alias}
        return {"$arrow_type_ipc": _b64(pa.schema([pa.field("t", obj)]).serialize())}
    if isinstance(obj, pa.Scalar):
        alias = _type_alias(obj.type)
        value = obj.as_py() if alias is not None else None
        if alias is not None and (value is None or isinstance(value, bool | int | str)):
            return {"$scalar": value, "type": alias}
        if alias is not None and isinstance(value, float) and math.isfinite(value):
            return {"$scalar": value, "type": alias}
        batch = pa.record_batch([_scalar_array(obj)], names=["v"])
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, batch.schema) as w:
            w.write_batch(batch)
        return {"$arrow_scalar_ipc": _b64(sink.getvalue())}
    raise ParallelStateError(f"cannot serialize predicate value of type {type(obj).__qualname__}: {obj!r}")


def decode_value(doc: Any) -> Any:
    """Inverse of :func:`encode_value`."""
    if doc is None or isinstance(doc, bool | int | float | str):
        return doc
    if isinstance(doc, list):
        return [decode_value(v) for v in doc]
    if not isinstance(doc, dict) or not doc:
        raise ParallelStateError(f"malformed predicate JSON: {doc!r}")
    tag = next(iter(doc))
    try:
        if tag == "$dc":
            cls = _resolve_class(doc["$dc"])
            if not dataclasses.is_dataclass(cls):
                raise ParallelStateError(f"predicate class {doc['$dc']!r} is not a dataclass")
            kwargs = {k: decode_value(v) for k, v in doc["fields"].items()}
            return cls(**kwargs)
        if tag == "$tuple":
            return tuple(decode_value(v) for v in doc["$tuple"])
        if tag == "$frozenset":
            return frozenset(decode_value(v) for v in doc["$frozenset"])
        if tag == "$dict":
            return {k: decode_value(v) for k, v in doc["$dict"].items()}
        if tag == "$float":
            return float(doc["$float"])
        if tag == "$bytes":
            return _unb64(doc["$bytes"])
        if tag == "$enum":
            return _resolve_class(doc["$enum"])[doc["name"]]
        if tag == "$arrow_type":
            return _alias_type(doc["$arrow_type"])
        if tag == "$arrow_type_ipc":
            return pa.ipc.read_schema(pa.py_buffer(_unb64(doc["$arrow_type_ipc"]))).field(0).type
        if tag == "$scalar":
            return pa.scalar(doc["$scalar"], type=_alias_type(doc["type"]))
        if tag == "$arrow_scalar_ipc":
            table = pa.ipc.open_stream(pa.py_buffer(_unb64(doc["$arrow_scalar_ipc"]))).read_all()
            return table.column(0)[0]
    except ParallelStateError:
        raise
    except (DeltaError, KeyError, TypeError, ValueError, pa.ArrowException) as e:
        raise ParallelStateError(f"malformed predicate JSON at {tag}: {type(e).__name__}: {e}") from e
    raise ParallelStateError(f"malformed predicate JSON: unknown tag {tag!r}")
