"""The package's exception types.

Every error a user can provoke (bad table, bad argument, corrupt file, unsupported feature) is
raised as a subclass of :class:`DeltaError`, with a message naming the file, version or argument.
"""

from __future__ import annotations

import ast
import re

#: The password of a URL's login (``scheme://user:password@host``), group 1 all before it.
_URL_PASSWORD = re.compile(r"(://[^/@:\s]*:)[^/@\s]*@")


def without_password(text: str) -> str:
    """``text`` with the password of every URL login in it (``ftp://user:password@host``) masked."""
    return _URL_PASSWORD.sub(r"\1***@", text)


class DeltaError(Exception):
    """Base class of every error raised by delta_datafusion. A message never shows the password
    of a URL's login: messages name tables and files by URL, which may carry one."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(without_password(a) if isinstance(a, str) else a for a in args))


class ArgumentError(DeltaError, ValueError, TypeError):
    """An argument has the wrong type or value (a version that is not an integer, a bad
    timestamp string, an empty name): also a ``ValueError`` and a ``TypeError``, so code written
    against Python's conventions catches it."""


class StorageError(DeltaError):
    """The filesystem failed a listing or a read (network, timeout, I/O): the path and the
    store's own error are named; a retry may succeed."""


class TableNotFoundError(DeltaError):
    """The location is not a Delta table (no ``_delta_log`` or an empty one)."""


class LogCorruptError(DeltaError):
    """A log file (commit, checkpoint, sidecar, ``_last_checkpoint``) cannot be parsed."""


class MissingLogFileError(LogCorruptError):
    """A file the log refers to (checkpoint part, sidecar) is missing."""


class NonContiguousVersionsError(LogCorruptError):
    """The commit versions in ``_delta_log`` have a gap."""


class InvalidProtocolError(DeltaError):
    """The protocol action is malformed or asks for reader versions no reader supports."""


class MissingProtocolError(DeltaError):
    """No protocol action in the log up to the requested version."""


class MissingMetadataError(DeltaError):
    """No metaData action in the log up to the requested version."""


class UnsupportedFeatureError(DeltaError):
    """The table uses a reader feature this package does not implement."""


class VersionNotFoundError(DeltaError):
    """A requested version or timestamp is outside the table's available history."""


class SchemaError(DeltaError):
    """A Delta schema string cannot be parsed or converted."""


class DataFileNotFoundError(DeltaError):
    """A data file listed in the snapshot is missing (for example, vacuumed)."""


class DeletionVectorError(DeltaError):
    """A deletion vector cannot be read: missing file, bad magic, checksum mismatch, truncated."""

    #: the data file whose descriptor is at fault, where the raiser knows it (callers add the
    #: table, version and log file to the message)
    location: str | None = None


class ChangeDataFeedError(DeltaError):
    """The change data feed cannot be read for the requested range."""


class CdfNotEnabledError(ChangeDataFeedError):
    """``delta.enableChangeDataFeed`` is not set for a version in the requested range."""


class InvalidRangeError(ChangeDataFeedError):
    """The start/end of a change range are inconsistent (start after end, a bad bound type);
    bounds outside the history raise :class:`VersionNotFoundError`."""


class PredicateError(DeltaError):
    """A predicate cannot be interpreted."""


class ParallelStateError(DeltaError):
    """Serialized parallel-replay state is corrupt or from another package version."""


# ----------------------------------------------------------------------------------------------
# Package errors that crossed DataFusion
# ----------------------------------------------------------------------------------------------

# ``table_changes()`` errors arrive as "PyErr { type: <class 'delta_datafusion.errors.X'>, value:
# X('message'), traceback: ... }", scan errors as "... External error: X: message".
_PYERR = re.compile(
    r"PyErr \{ type: <class '(?:[\w.]+\.)?(\w+)'>, value: \w+\((?P<msg>(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"))\)"
)
_EXTERNAL = re.compile(r"External error: (\w+): (.*)", re.DOTALL)


def from_datafusion(exc: BaseException) -> DeltaError | None:
    """The package error behind an exception raised by DataFusion (``ctx.sql(...)``, ``collect``),
    rebuilt with its own type and message, or None when the error is not one of the package's.

    DataFusion turns the errors of a Python table function or scan into its own exception with the
    original class name in the text, so ``except CdfNotEnabledError`` cannot catch them directly::

        try:
            ctx.sql("SELECT * FROM table_changes('t', 0)").collect()
        except Exception as e:
            err = from_datafusion(e)
            if isinstance(err, CdfNotEnabledError): ...
    """
    if isinstance(exc, DeltaError):
        return exc
    text = str(exc)
    found = _PYERR.search(text)
    if found:
        name = found.group(1)
        try:
            message = ast.literal_eval(found.group("msg"))
        except (SyntaxError, ValueError):
            return None
    else:
        found = _EXTERNAL.search(text)
        if not found:
            return None
        name, message = found.group(1), found.group(2).strip()
    cls = globals().get(name)
    if not (isinstance(cls, type) and issubclass(cls, DeltaError)):
        return None
    return cls(message)


def describe(exc: BaseException) -> str:
    """``"ClassName: message"`` of a package error (also one wrapped by DataFusion), else of the
    exception itself."""
    err = from_datafusion(exc)
    if err is not None:
        return f"{type(err).__name__}: {err}"
    return f"{type(exc).__name__}: {exc}"
