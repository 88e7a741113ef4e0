"""A workaround for datafusion-python 55 building pyarrow filters from constant conjuncts.

DataFusion turns each pushed filter into a pyarrow expression by calling ``operator.and_``,
``operator.or_`` and ``operator.invert`` on the converted parts; a literal becomes a pyarrow
*scalar*, not an expression. When the optimizer folds a conjunct to a constant that comes first
(``id BETWEEN NULL AND 2`` -> ``NULL AND id <= 2``; a contradiction ``(id = 1 AND id = 2) AND
s = 'a'`` -> ``false AND s = 'a'``), ``operator.and_(BooleanScalar, Expression)`` raises
TypeError and the query fails before the provider is called (a plain pyarrow dataset too). Two
folded constants (``x IN (NULL) AND s IN (NULL)``) meet as two scalars, whose ``&`` pyarrow
sends to a bitwise kernel that has no boolean version (ArrowNotImplementedError).

The three functions are wrapped so that exactly those cases, a pyarrow scalar operand where
the call raised TypeError or ArrowNotImplementedError, are retried with the scalar as an expression literal
(``pc.scalar``; AND/OR of expressions are Kleene, as in SQL). Every other call, and every other
outcome, is the original function's.
"""

from __future__ import annotations

import operator
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_LOCK = threading.Lock()
_MARK = "__delta_datafusion_wrapped__"


def _as_expr(x: Any) -> Any:
    return pc.scalar(x) if isinstance(x, pa.Scalar) else x


def _wrap(original: Any) -> Any:
    def wrapped(*operands: Any) -> Any:
        try:
            return original(*operands)
        except (TypeError, pa.ArrowNotImplementedError):
            if any(isinstance(x, pa.Scalar) for x in operands):
                return original(*(_as_expr(x) for x in operands))
            raise

    setattr(wrapped, _MARK, original)
    wrapped.__name__ = original.__name__
    wrapped.__doc__ = original.__doc__
    return wrapped


def install() -> None:
    """Wrap ``operator.and_``, ``or_`` and ``invert`` once per process (idempotent)."""
    with _LOCK:
        for name in ("and_", "or_", "invert"):
            current = getattr(operator, name)
            if not hasattr(current, _MARK):
                setattr(operator, name, _wrap(current))
