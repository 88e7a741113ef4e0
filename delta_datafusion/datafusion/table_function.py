"""``table_changes(table, start [, end])``: the change data feed as a SQL table function.

Installed in a session by :func:`delta_datafusion.register` (``install_table_changes``)::

    SELECT * FROM table_changes('s3://bucket/events', 5, 9)
    SELECT * FROM table_changes(events, TIMESTAMP '2024-05-01 00:00:00')   -- registered name
    SELECT id, _change_type FROM table_changes('events', 0) WHERE _commit_version >= 3

* ``table``: a Delta table registered in the session through this package (``register_table``,
  ``CREATE EXTERNAL TABLE ... STORED AS DELTA``), given as a string literal or a bare identifier;
  a table of a Delta folder catalog registered through it (``register_catalog``: DataFusion
  resolves the name, default catalog and schema included); anything else is a path or URI.
* ``start`` / ``end``: versions (integers) or timestamps (``TIMESTAMP '...'`` literals, dates, or
  ISO-8601 strings, UTC unless they carry an offset); ``end`` is inclusive and defaults to the
  latest version. A start timestamp selects the first commit at or after it, an end timestamp the
  last commit at or before it.

The result has the table's columns (end-version schema, logical names) plus ``_change_type``,
``_commit_version`` (bigint) and ``_commit_timestamp`` (timestamp, UTC). Filters on the change
columns prune commits and change files before any data is read, partition filters prune by
partition values and data filters by file statistics (see :mod:`delta_datafusion.changes`).

The function runs on every planning (EXPLAIN included), so change feeds are LRU-cached by
``(location, start version, end version)`` (:func:`delta_datafusion.changes.load_change_feed`).
Errors raised here reach the user as ``ValueError`` from ``ctx.sql()`` with the exception class
name and message in the text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from datafusion import SessionContext, Table, udtf

from ..changes import ChangeFeed, load_change_feed
from ..changes.version_range import Instant, as_bound
from ..errors import (
    ArgumentError,
    DeltaError,
    InvalidRangeError,
    StorageError,
    TableNotFoundError,
    VersionNotFoundError,
)
from ..log.actions import CommitData
from ..table import DeltaTable
from .dataset import SCAN_THREADS, DeltaDataset, ScanPlanInfo, lookup_dataset
from .names import normalized, quoted, relation_readings, split_reference, sql_name
from .statement import planning_for, statement_pins, table_key

FUNCTION_NAME = "table_changes"

# --------------------------------------------------------------------------------------------
# Plans of the change scans of each session (for delta_datafusion.explain)
# --------------------------------------------------------------------------------------------


class _SessionPlans:
    """The change scans of a session's most recent planning.

    Every ``table_changes`` call of one statement happens during its logical planning, before
    any of its scans is planned (``get_fragments``); so a call that comes after a scan was
    planned starts a new statement and drops the plans of the previous one.
    """

    def __init__(self) -> None:
        self.calls = 0  # table_changes calls so far (explain adds plans only for its own calls)
        self.scanned = False
        self.datasets: set[int] = set()
        self.plans: OrderedDict[int, ScanPlanInfo] = OrderedDict()

    def called(self, dataset: ChangesDataset) -> None:
        self.calls += 1
        if self.scanned:
            self.scanned = False
            self.datasets.clear()
            self.plans.clear()
        self.datasets.add(id(dataset))

    def planned(self, dataset: ChangesDataset, info: ScanPlanInfo) -> None:
        if id(dataset) not in self.datasets:
            # a dataset of an earlier statement planned again (a DataFrame collected twice)
            self.datasets = {id(dataset)}
            self.plans.clear()
        self.scanned = True
        self.plans[id(dataset)] = info


# Per session and thread: a statement is planned (its table_changes calls, then its scans) on
# the thread that runs it, so threads sharing a session do not see each other's plans.
_SESSIONS: dict[tuple[str, int], _SessionPlans] = {}
_SESSIONS_LOCK = threading.Lock()


def _session_plans(session_id: str) -> _SessionPlans:
    key = (session_id, threading.get_ident())
    with _SESSIONS_LOCK:
        plans = _SESSIONS.get(key)
        if plans is None:
            plans = _SESSIONS[key] = _SessionPlans()
        return plans


def forget_session_plans(session_id: str) -> None:
    with _SESSIONS_LOCK:
        for key in [k for k in _SESSIONS if k[0] == session_id]:
            del _SESSIONS[key]


def table_changes_calls(session_id: str) -> int:
    """How many ``table_changes`` calls the session has planned so far on this thread."""
    with _SESSIONS_LOCK:
        plans = _SESSIONS.get((session_id, threading.get_ident()))
        return plans.calls if plans is not None else 0


def recent_plans(session_id: str) -> list[ScanPlanInfo]:
    """The change scans planned by the session's most recent statement on this thread (one per
    call)."""
    with _SESSIONS_LOCK:
        plans = _SESSIONS.get((session_id, threading.get_ident()))
        return list(plans.plans.values()) if plans is not None else []


# --------------------------------------------------------------------------------------------
# The dataset
# --------------------------------------------------------------------------------------------


class ChangesDataset(DeltaDataset):
    """A change range served to DataFusion; records its plans for EXPLAIN."""

    def __init__(self, feed: ChangeFeed, label: str, session_id: str | None = None):
        self.feed = feed
        self.session_id = session_id
        # no schema-level metadata: it would break UNION ALL of two feeds (see provider_schema)
        schema = feed.schema.remove_metadata()

        def planner(pred: Any) -> tuple[list, ScanPlanInfo]:
            res = feed.plan(pred)
            info = ScanPlanInfo(
                label,
                feed.end,
                "" if pred is None else str(pred),
                res.total,
                res.after_partition,
                res.after_stats,
                0,
                extra={"changes": f"{feed.start}..{feed.end}", "after_change_pruning": res.after_change},
            )
            if "footers_read" in res.extra:
                info.extra["footers_read"] = res.extra["footers_read"]
            return res.units, info

        super().__init__(schema, feed.reader(), planner, label)
        if session_id is not None:
            _session_plans(session_id).called(self)

    def scanner(self, columns: Sequence[str] | None = None, filter: Any = None, **kw: Any):  # noqa: A002
        # DataFusion asks for the projected schema first: refuse incompatible columns here, at planning.
        cols = self.output_columns(columns)
        if self.feed.incompatible:
            from ..predicate import referenced_columns

            pred = self._predicate(filter)
            needed = set(cols) | (referenced_columns(pred) if pred is not None else set())
            if needed & set(self.feed.incompatible):
                units = self.feed.plan(pred).units
                self.feed.check_columns(sorted(needed), units)
        return super().scanner(columns=columns, filter=filter, **kw)

    def get_fragments(self, filter: Any = None, columns: Sequence[str] | None = None):  # noqa: A002
        frags = super().get_fragments(filter, columns)
        if self.session_id is not None and self.last_plan is not None:
            _session_plans(self.session_id).planned(self, self.last_plan)
        return frags

    def __repr__(self) -> str:
        return f"ChangesDataset({self.label})"


# --------------------------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------------------------


def _literal(arg: Any) -> pa.Scalar | None:
    if arg.variant_name() != "Literal":
        return None
    return arg.python_value()


_NANOS_PER = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def _is_text(t: pa.DataType) -> bool:
    """String literals: SQL VARCHAR / TEXT casts are string views in DataFusion 55."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)


@dataclass(frozen=True)
class _TableArgument:
    """table_changes' first argument."""

    shown: str  #: for messages
    readings: list[tuple[str, ...]] | None  #: an identifier's possible parts; None for a string
    path: str  #: the text tried as a path or URI when no table of the session has the name


def _table_argument(arg: Any) -> _TableArgument:
    """An identifier arrives as a column reference whose relation (catalog and schema) and name
    DataFusion has parsed: the name keeps its dots (``lake."default.x"`` is not
    ``lake.default.x``), the relation is flattened (``"x.y".t`` and ``x.y.t`` both give ``x.y``),
    so each way of reading the relation is a candidate (see :func:`relation_readings`)."""
    kind = arg.variant_name()
    if kind == "Column":
        column = arg.to_variant()
        relation, name = column.relation(), column.name()
        readings = [(*r, name) for r in relation_readings(relation)] if relation else [(name,)]
        shown = sql_name(readings[0]) if len(readings) == 1 else arg.canonical_name()
        return _TableArgument(shown, readings, ".".join(readings[0]))
    value = _literal(arg)
    if value is None or not _is_text(value.type):
        raise ArgumentError(
            f"table_changes: the first argument must be a table name or a location string, got {arg.canonical_name()}"
        )
    text = value.as_py()
    if not text:
        raise ArgumentError("table_changes: the table name or location must not be empty")
    return _TableArgument(text, None, text)


def _bound_argument(arg: Any, which: str, table: str) -> int | Instant | None:
    """``start`` or ``end`` of ``table_changes`` on ``table`` (the name or location as given,
    for errors: one statement may read several feeds)."""
    value = _literal(arg)
    if value is None:
        raise ArgumentError(
            f"table_changes on {table}: {which} must be a literal version or timestamp, "
            f"got the expression {arg.canonical_name()}"
        )
    t = value.type
    if not value.is_valid:
        if which == "start":
            raise InvalidRangeError(f"table_changes on {table}: start must not be NULL")
        return None
    if pa.types.is_integer(t):
        return as_bound(value.as_py(), which, table)
    if pa.types.is_timestamp(t):
        # from the stored integer: a cast to nanoseconds overflows outside years 1677..2262
        ns = value.cast(pa.int64()).as_py() * _NANOS_PER[t.unit]
        return Instant.from_nanos(ns, round_up=which == "start")
    if pa.types.is_date(t) or _is_text(t):
        return as_bound(value.as_py(), which, table)
    raise ArgumentError(
        f"table_changes on {table}: {which} must be a version (integer) or a timestamp, "
        f"got {arg.canonical_name()} ({t})"
    )


def _references(arg: _TableArgument) -> list[tuple[str, ...]]:
    """Spellings of the argument as ([catalog, [schema,]] table) parts, most likely first.

    An identifier's are DataFusion's own. A string is read as SQL reads a table reference
    (unquoted parts lower-cased), then with its parts as written (folder-catalog tables may have
    upper-case names)."""
    if arg.readings is not None:
        spellings = [list(r) for r in arg.readings]
    else:
        parts = split_reference(arg.shown)
        if parts is None:
            return []
        written = [p for p, _ in parts]
        as_sql = list(normalized(arg.shown) or written)
        spellings = [as_sql] + ([written] if written != as_sql else [])
    return [tuple(parts) for parts in spellings if 1 <= len(parts) <= 3 and all(parts)]


#: Seconds a table lookup (a folder catalog listing a remote store, say) may take.
LOOKUP_TIMEOUT_S = 300.0


def _on_lookup_thread(fn: Callable[[], Any], what: str) -> Any:
    """``fn()`` on a thread of its own: a daemon, so a slow lookup neither holds up other
    sessions' lookups nor the interpreter's exit."""
    box: dict[str, Any] = {}
    pins = statement_pins()  # the lookup is part of the statement being planned here

    def target() -> None:
        try:
            with planning_for(pins):
                box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box["error"] = e

    thread = threading.Thread(target=target, name="delta-table-lookup", daemon=True)
    thread.start()
    thread.join(LOOKUP_TIMEOUT_S)
    if thread.is_alive():
        raise DeltaError(f"table_changes: looking up {what} took longer than {LOOKUP_TIMEOUT_S:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _delta_table_named(session: SessionContext, ref: tuple[str, ...]) -> DeltaDataset | None | bool:
    """The Delta dataset the session's table ``ref`` serves; False when the session has no such
    table, None when it is some other kind of table (in memory, a view, another provider).

    The catalog lookup is async in datafusion-python and panics on the planning thread a table
    function runs on; on another thread it works (integration notes, section 5)."""
    spelled = quoted(ref)
    try:
        if not session.table_exist(spelled):
            return False
    except Exception:  # noqa: BLE001 - a reference the session cannot parse names no table
        return False

    try:
        return _on_lookup_thread(lambda: lookup_dataset(lambda: session.table_provider(spelled)), spelled)
    except DeltaError:
        raise  # the table's own error (a catalog table whose log is broken), or the timeout
    except Exception as e:  # noqa: BLE001 - dropped between the two calls, or another failure
        try:
            still = session.table_exist(spelled)
        except Exception:  # noqa: BLE001
            still = False
        if not still:
            return False
        raise DeltaError(f"table_changes: the session's table {spelled} cannot be opened: {e}") from e


def _registered_names(session: SessionContext) -> str:
    """The Delta tables registered through the package that the session still holds, for messages."""
    from .session import registered_tables

    out = set()
    for name, flattened, _ in registered_tables(session.session_id()):
        # register_table's names as SQL reads them ("Trips" is trips); CREATE EXTERNAL TABLE's
        # arrive flattened without quotes ("Upper" as Upper, "My.T" as My.T): quoted first
        spellings = [(name, list(normalized(name) or [name])), (quoted((name,)), [name])]
        for spelling, shown in reversed(spellings) if flattened else spellings:
            try:
                if session.table_exist(spelling):
                    out.add(sql_name(shown))
                    break
            except Exception:  # noqa: BLE001, S112 - a spelling the session cannot parse
                continue
    return ", ".join(sorted(out)) or "none"


def _resolve_table(
    session: SessionContext, arg: _TableArgument
) -> tuple[DeltaTable, bool, Sequence[CommitData]]:
    """The table the argument means in the session (as SELECT resolves it), else a path or URI;
    whether it is a path (its existence is checked only if reading its log fails: on an object
    store that check is a request); and the commits its registered snapshot read (none for a
    path). An identifier whose relation holds a dot may name tables in two ways (``"x.y".t``:
    schema ``x.y``, or catalog ``x`` schema ``y``): when both exist, it is refused rather than
    guessed."""
    found_refs = []
    for ref in _references(arg):
        found = _delta_table_named(session, ref)
        if found is False:
            continue
        found_refs.append((ref, found))
        if arg.readings is None or len(arg.readings) == 1:
            break  # a string's spellings are tried in order; the first table found is it
    if len(found_refs) > 1:
        which = " and ".join(sql_name(ref) for ref, _ in found_refs)
        raise TableNotFoundError(
            f"table_changes: {arg.shown} may name {which}, both tables of this session; give the name "
            "as a string with the dotted parts quoted, e.g. table_changes('\"x.y\".t', 0)"
        )
    if found_refs:
        ref, found = found_refs[0]
        if found is None or found.storage is None:
            raise TableNotFoundError(
                f"table_changes: {arg.shown!r} is a table of this session ({sql_name(ref)}) but not a Delta "
                "table registered through delta_datafusion (register_table, CREATE EXTERNAL TABLE ... STORED "
                "AS DELTA or register_catalog)"
            )
        return DeltaTable.from_storage(found.storage), False, found.commits
    try:
        return DeltaTable(arg.path), True, ()
    except (ArgumentError, StorageError):
        raise  # a location whose options (or environment) name another store; a store failing
    except DeltaError as e:  # a location it cannot open: a malformed URI, a store it lacks a package for
        raise _no_such_table(session, arg, e) from e


def _no_such_table(
    session: SessionContext, arg: _TableArgument, unopened: DeltaError | None = None
) -> TableNotFoundError:
    """``unopened``: why the argument, taken as a location, could not be opened (else: it was
    opened, and nothing is there)."""
    if any(_delta_table_named(session, ref) is not False for ref in _references(arg)):
        # not there when looked up, there now: registered again on another thread meanwhile
        # (register_table drops the name and adds it back), as a plain query can see it
        return TableNotFoundError(
            f"table_changes: {arg.shown!r} was being registered again (on another thread) while this "
            "query planned: run the query again"
        )
    what = "table name" if arg.readings is not None else "table name or location"
    where = "no such path exists" if unopened is None else f"as a location it cannot be opened: {unopened}"
    return TableNotFoundError(
        f"table_changes: {arg.shown!r} is not a table of this session and {where} "
        f"(a {what}; Delta tables registered in this session: {_registered_names(session)})"
        + _other_case_hint(session, arg)
    )


def _other_case_hint(session: SessionContext, arg: _TableArgument) -> str:
    """A table of the session named like the argument but in another case (a folder catalog's
    ``MyT``, which an unquoted identifier cannot name: SQL reads it as ``myt``), for messages."""
    from .session import schema_table_names

    found = set()
    for ref in _references(arg):
        *relation, name = ref
        try:
            catalog = session.catalog(relation[0]) if len(relation) == 2 else session.catalog()
            schema = catalog.schema(relation[-1]) if relation else catalog.schema()
            # a folder catalog's schema lists its folder, without opening every table
            if hasattr(schema, "names_in_other_case"):
                names = schema.names_in_other_case(name)
            else:
                names = schema_table_names(schema)
        except Exception:  # noqa: BLE001, S112 - no such catalog or schema: nothing to suggest
            continue
        found.update(sql_name((*relation, n)) for n in names if n != name and n.lower() == name.lower())
    if not found:
        return ""
    shown = ", ".join(sorted(found))
    if arg.readings is not None:
        return f"; the session has {shown}: SQL reads unquoted names in lower case, quote it"
    return f"; the session has {shown} (names differing in case are different tables)"


def _exists(table: DeltaTable) -> bool:
    try:
        return table.storage.exists(table.storage.root)
    except StorageError:
        raise  # the store failed: not "no such path"
    except (DeltaError, OSError):
        return False


def _table_changes(*args: Any, session: SessionContext) -> Table:
    if len(args) not in (2, 3):
        raise ArgumentError(f"table_changes(table, start [, end]) takes 2 or 3 arguments, got {len(args)}")
    arg = _table_argument(args[0])
    name = arg.shown
    start = _bound_argument(args[1], "start", name)
    end = _bound_argument(args[2], "end", name) if len(args) == 3 else None
    table, is_path, known = _resolve_table(session, arg)
    # without an end, "latest" is the version this statement already saw of the table, if any
    pins = statement_pins() if end is None else None
    key = table_key(table.storage)
    pinned = None if pins is None else pins.get(key)
    try:
        with SCAN_THREADS.busy():  # loading the feed parses its commits in pyarrow
            feed = load_change_feed(table, start, end if pinned is None else pinned, known)
    except TableNotFoundError as e:
        if is_path and not _exists(table):
            raise _no_such_table(session, arg) from e
        raise TableNotFoundError(f"{e} (registered Delta tables: {_registered_names(session)})") from e
    except InvalidRangeError as e:
        if pinned is None:
            raise
        raise VersionNotFoundError(
            f"{e}: this statement already read the table at version {pinned}, which ends "
            "every range of it without an end in the statement (newer commits landed while it was "
            "planned; run it again, or give the end)"
        ) from e
    if pins is not None:
        pins.setdefault(key, feed.end)
    dataset = ChangesDataset(feed, f"table_changes({name}, {feed.start}..{feed.end})", session.session_id())
    return Table(dataset)


TABLE_CHANGES = udtf(_table_changes, FUNCTION_NAME, with_session=True)


def install_table_changes(ctx: SessionContext) -> SessionContext:
    """Register ``table_changes`` in ``ctx`` (done by :func:`delta_datafusion.register`)."""
    from .session import track_session

    ctx.register_udtf(TABLE_CHANGES)
    track_session(ctx)  # the session's plans are forgotten with it
    return ctx


__all__ = ["ChangesDataset", "TABLE_CHANGES", "install_table_changes", "recent_plans"]
