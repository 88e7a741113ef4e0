"""Installing Delta support in a DataFusion ``SessionContext``.

- :func:`register_table`: one table under a name (pinned to a version / timestamp / latest);
- ``CREATE EXTERNAL TABLE t STORED AS DELTA LOCATION '...' [OPTIONS (...)]`` via a factory;
- :func:`register_catalog`: every Delta table under a folder, listed by SHOW TABLES;
- ``table_changes()``: the change feed as a table function (installed by :func:`register`).

``table_changes('name')`` resolves a name as SELECT does, through the session's catalogs (see
table_function). The package also keeps a registry of the Delta tables registered through it, per
session id, for ``explain`` and for error messages.
"""

from __future__ import annotations

import contextvars
import re
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, unquote

from datafusion import SessionContext, Table
from datafusion.catalog import CatalogProvider, SchemaProvider, TableProviderFactory

from ..arguments import misspelt_option
from ..errors import ArgumentError, DeltaError, TableNotFoundError, from_datafusion
from ..log.actions import forget_all_parquet
from ..storage import Storage, forget_listing
from ..table import DeltaTable, relisting
from ..timestamps import to_micros
from .dataset import SCAN_THREADS, DeltaDataset, lookup_dataset, note_provider_error, recording_plans
from .names import names_column, same_as_flattened, same_table
from .provider import table_dataset
from .statement import TableKey, statement_pins, table_key, track_statements

# The Delta tables registered through the package, per session id: (name as registered, from
# CREATE EXTERNAL TABLE?) -> datasets, weakly. The flag matters because DataFusion hands the factory
# its name flattened without quotes (names.same_as_flattened): register_table's "Trips" (trips)
# and CREATE EXTERNAL TABLE "Trips" (Trips) are two tables both named Trips here. table_changes
# resolves names through the session itself; this serves register_table, explain and messages.
# DataFusion holds a dataset while its table is registered; once it is dropped the entry dies with
# it (a service registering and dropping a table per request kept every snapshot: 10 MB and an
# open checkpoint file each).
_REGISTRY: dict[str, dict[tuple[str, bool], list[weakref.ref[DeltaDataset]]]] = {}
_REGISTRY_LOCK = threading.Lock()
#: register_table's check-swap-remember, one at a time (registration is not a hot path)
_REGISTER_LOCK = threading.Lock()
# folder catalogs registered per session (dd.explain reports their tables' scans too)
_CATALOGS: dict[str, list[DeltaSchemaProvider]] = {}
#: Tables of a folder catalog on an object store opened at once when it lists them (SHOW TABLES,
#: information_schema): each open is a chain of round trips (its log's listing, then its commits
#: or checkpoint), made table after table before (20 tables at 20 ms a request: 2.1 s).
CATALOG_OPENS = 8


_TRACKED: set[str] = set()


def track_session(ctx: SessionContext) -> None:
    """Forget the session's registered tables, catalogs and plans when its ``SessionContext`` is
    garbage collected (a process making a session per request would otherwise keep every
    snapshot it ever registered)."""
    try:
        track_statements(ctx)
    except (AttributeError, TypeError):  # a session object that takes no attributes: unpinned
        pass
    sid = ctx.session_id()
    _forget_pending()
    with _REGISTRY_LOCK:
        if sid in _TRACKED:
            return
        _TRACKED.add(sid)
    try:
        weakref.finalize(ctx, _forget_session, sid)
    except TypeError:  # a context that cannot be weakly referenced: kept for the process
        pass


#: Sessions collected since the last registry call, forgotten by the next one (_forget_pending).
_PENDING_FORGET: list[str] = []


def _forget_session(session_id: str) -> None:
    """The session's finalizer. It runs whenever the garbage collector does, possibly on a thread
    that holds one of the registry locks (an allocation under the lock): taking the lock here
    deadlocked, so the session is only queued (list.append is atomic)."""
    _PENDING_FORGET.append(session_id)


def _forget_pending() -> None:
    """Forget the sessions collected since the last call; called before the registry is used."""
    from .table_function import forget_session_plans

    while _PENDING_FORGET:
        try:
            session_id = _PENDING_FORGET.pop()
        except IndexError:  # another thread took the last one
            return
        with _REGISTRY_LOCK:
            _REGISTRY.pop(session_id, None)
            _PRUNED_TO.pop(session_id, None)
            _CATALOGS.pop(session_id, None)
            _TRACKED.discard(session_id)
        forget_session_plans(session_id)


#: session id -> how many names its registry kept after its last full pruning
_PRUNED_TO: dict[str, int] = {}


def _remember(session_id: str, name: str, dataset: DeltaDataset, flattened: bool = False) -> None:
    _forget_pending()
    with _REGISTRY_LOCK:
        entries = _REGISTRY.setdefault(session_id, {})
        # a list: two CREATE OR REPLACE of one name run their factories before DataFusion
        # registers either, and only one of them ends up served (the other's dataset dies).
        # Only this name's dead entries go here (pruning every name on each registration made
        # registering N tables quadratic: 4,000 took 24 s); lookups prune the rest (_live).
        key = (name, flattened)
        refs = [ref for ref in entries.get(key, []) if ref() is not None]
        refs.append(weakref.ref(dataset))
        entries[key] = refs
        if len(entries) > 2 * _PRUNED_TO.get(session_id, 0) + 16:  # amortized: dropped tables go
            _PRUNED_TO[session_id] = len(_live(entries))


def registered_tables(session_id: str) -> list[tuple[str, bool, DeltaDataset]]:
    """(name as registered, whether CREATE EXTERNAL TABLE's, dataset) of the tables registered in
    the session that still exist (dropped ones are forgotten)."""
    _forget_pending()
    with _REGISTRY_LOCK:
        return [
            (name, flat, d) for (name, flat), ds in _live(_REGISTRY.get(session_id, {})).items() for d in ds
        ]


def _live(
    entries: dict[tuple[str, bool], list[weakref.ref[DeltaDataset]]],
) -> dict[tuple[str, bool], list[DeltaDataset]]:
    """The datasets of a session's entries that still exist; dead ones are removed (call under
    _REGISTRY_LOCK)."""
    out = {}
    for key in list(entries):
        alive = [(ref, d) for ref in entries[key] if (d := ref()) is not None]
        if alive:
            entries[key] = [ref for ref, _ in alive]
            out[key] = [d for _, d in alive]
        else:
            del entries[key]
    return out


def _registered_dataset(ctx: SessionContext, name: str) -> DeltaDataset | None:
    """The dataset the session's table ``name`` serves, if the package registered it there under
    this name, however spelled (``Trips``, ``trips`` and ``public.trips`` are one table); None
    for a table a user put there after dropping it, or under another name (a copy of one)."""
    try:
        held = lookup_dataset(lambda: ctx.table_provider(name))
    except Exception:  # noqa: BLE001 - not a table this package can look behind
        return None
    if held is None:  # another kind of table
        return None
    return held if _entries_naming(ctx.session_id(), held, name) else None


def _entries_naming(session_id: str, dataset: DeltaDataset, name: str) -> list[tuple[str, bool]]:
    """The registry entries of ``dataset`` under ``name`` however spelled."""
    _forget_pending()
    with _REGISTRY_LOCK:
        entries = _REGISTRY.get(session_id, {})
        return [
            (n, flattened)
            for (n, flattened), refs in entries.items()
            if any(ref() is dataset for ref in refs)
            and (same_as_flattened(n, name) if flattened else same_table(n, name))
        ]


def _forget_dataset(session_id: str, dataset: DeltaDataset, name: str) -> None:
    """Drop the registry entries a registration of ``name`` replaced."""
    keys = _entries_naming(session_id, dataset, name)
    with _REGISTRY_LOCK:
        entries = _REGISTRY.get(session_id, {})
        for key in keys:
            refs = [ref for ref in entries.get(key, []) if ref() is not dataset]
            if refs:
                entries[key] = refs
            else:
                entries.pop(key, None)


def open_dataset(
    uri: str,
    storage_options: dict | None = None,
    version: int | None = None,
    timestamp: Any = None,
    label: str | None = None,
) -> DeltaDataset:
    snapshot = DeltaTable(uri, storage_options).snapshot(version=version, timestamp=timestamp)
    return table_dataset(snapshot, label=label or uri)


def _require_context(ctx: Any, what: str) -> None:
    if not isinstance(ctx, SessionContext):
        raise ArgumentError(f"{what}: expected a datafusion SessionContext, got {type(ctx).__name__}")


def register_table(
    ctx: SessionContext,
    name: str,
    uri: str,
    version: int | None = None,
    timestamp: Any = None,
    storage_options: dict[str, Any] | None = None,
) -> DeltaDataset:
    """Register the Delta table at ``uri`` as ``name`` (snapshot pinned at registration).

    Registering a name this function registered before replaces it (how a session sees newer
    commits); a name some other table holds is refused."""
    _require_context(ctx, "register_table")
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"table name must be a non-empty string, got {name!r}")
    dataset = open_dataset(uri, storage_options, version, timestamp, label=name)
    # check, swap and remember at once: a thread refreshing the same name in between would see
    # the session hold a dataset the registry does not know yet, and be refused
    with _REGISTER_LOCK:
        try:
            replaced = _registered_dataset(ctx, name) if ctx.table_exist(name) else None
            # a table gone since table_exist (a CREATE OR REPLACE on another thread) is no refusal
            if replaced is None and ctx.table_exist(name):
                raise DeltaError(
                    f"register_table: {name!r} names a table this session already has, which "
                    "register_table did not register under this name; deregister it first (in a "
                    "session whose default catalog or schema is not datafusion.public, spell the "
                    "name as it was registered)"
                )
            if replaced is not None:
                ctx.deregister_table(name)
                _forget_dataset(ctx.session_id(), replaced, name)
            ctx.register_table(name, Table(dataset))
        except DeltaError:
            raise
        except Exception as e:  # noqa: BLE001 - DataFusion's errors: an unknown schema in 'a.b', ...
            # the name is what DataFusion refused (an unknown catalog or schema, a folder catalog's
            # refusal, which comes back wrapped by DataFusion: its own words)
            why = from_datafusion(e) or str(e).splitlines()[0]
            raise ArgumentError(f"register_table: cannot register {name!r}: {why}") from e
        track_session(ctx)
        _remember(ctx.session_id(), name, dataset)
    return dataset


# -- CREATE EXTERNAL TABLE ... STORED AS DELTA ---------------------------------------------


def _split_options(options: dict[str, str]) -> tuple[int | None, Any, dict[str, str]]:
    """Options with or without DataFusion's 'format.' prefix: version, timestamp, storage options."""
    version = timestamp = None
    storage: dict[str, str] = {}
    for key, value in options.items():
        k = key[len("format.") :] if key.startswith("format.") else key
        if k == "version":
            # ASCII digits only: int() also takes '٣' (Arabic-Indic three) and '1_000'
            if not re.fullmatch(r"\s*-?[0-9]+\s*", value):
                raise ArgumentError(f"OPTIONS 'version' must be an integer, got {value!r}")
            version = int(value)
        elif k == "timestamp":
            to_micros(value, "OPTIONS 'timestamp'")  # refused before the table is opened, named so
            timestamp = value
        else:
            storage[k[len("storage.") :] if k.startswith("storage.") else k] = option_value(value)
    return version, timestamp, storage


_INTEGER = re.compile(r"^-?(0|[1-9][0-9]*)$")


def option_value(text: str) -> Any:
    """SQL OPTIONS are strings; fsspec filesystems take typed arguments. 'true'/'false' become
    booleans and plain decimal integers ints (no leading zeros: '007' stays text); anything else
    stays a string, as do all options given from Python."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if _INTEGER.match(text):
        return int(text)
    return text


class DeltaTableFactory(TableProviderFactory):
    """Serves ``STORED AS DELTA``; remembers tables under the session it was installed in."""

    def __init__(self, session_id: str):
        self.session_id = session_id

    def create(self, cmd: Any) -> Table:
        locations = cmd.locations()
        if not locations:
            raise ArgumentError(f"CREATE EXTERNAL TABLE {cmd.name()}: LOCATION is required for a Delta table")
        declared = cmd.schema().field_names()
        version, timestamp, storage = _split_options(dict(cmd.options()))
        # look-alikes of 'version' / 'timestamp' are refused below with the OPTIONS named (the
        # storage refuses them too, in the Python API's words)
        table = DeltaTable(locations[0], {k: v for k, v in storage.items() if not misspelt_option(k)} or None)
        if storage and table.storage.is_local:
            # a misspelt 'version' would otherwise silently read the latest version
            raise ArgumentError(
                f"CREATE EXTERNAL TABLE {cmd.name()}: unknown OPTIONS {sorted(storage)} for a local Delta table "
                "(accepted: 'version', 'timestamp'; storage options apply to object stores)"
            )
        near = {k: m for k in storage if (m := misspelt_option(k))}
        if near:
            # object stores take any option (fsspec passes unknown ones on): a misspelt 'version'
            # would silently read the latest version there too
            k, m = next(iter(near.items()))
            raise ArgumentError(
                f"CREATE EXTERNAL TABLE {cmd.name()}: OPTIONS key {k!r} is not a Delta option (did you mean {m!r}?) "
                "and looks too much like one to pass to the filesystem"
            )
        with SCAN_THREADS.busy():
            snapshot = table.snapshot(version=version, timestamp=timestamp)
        dataset = table_dataset(snapshot, label=str(cmd.name()))
        declared_parts = list(cmd.table_partition_cols())
        parts = snapshot.partition_columns
        if declared_parts and not (
            len(declared_parts) == len(parts) and all(map(names_column, declared_parts, parts))
        ):
            raise ArgumentError(
                f"CREATE EXTERNAL TABLE {cmd.name()}: PARTITIONED BY {declared_parts} does not match the Delta "
                f"table at {locations[0]}, partitioned by {snapshot.partition_columns or 'nothing'}"
            )
        if declared:
            names = set(dataset.schema.names)
            unknown = [c for c in declared if c not in names]
            if unknown:
                raise ArgumentError(
                    f"CREATE EXTERNAL TABLE {cmd.name()}: declared columns {unknown} are not in the Delta "
                    f"table at {locations[0]} (columns: {dataset.schema.names})"
                )
            # The table always has the Delta schema's columns and types (datafusion-python hands
            # the factory the declared names only): a partial list would silently mean nothing.
            named = set(declared)
            missing = [c for c in dataset.schema.names if c not in named]
            if missing:
                raise ArgumentError(
                    f"CREATE EXTERNAL TABLE {cmd.name()}: the column list leaves out {missing} of the Delta "
                    f"table at {locations[0]}; name every column or none (the Delta schema gives the "
                    "columns and types; select the columns you want in queries or a view)"
                )
        _remember(self.session_id, str(cmd.name()), dataset, flattened=True)
        return Table(dataset)


# -- catalogs of tables under a folder -------------------------------------------------------


def _pin(pins: dict[TableKey, int] | None, key: TableKey, version: int) -> None:
    """Pin ``version`` of the table ``key`` for the statement being planned (if any)."""
    if pins is not None:
        pins[key] = version


class DeltaSchemaProvider(SchemaProvider):
    """Every Delta table directly under ``root`` (a folder holding ``_delta_log``), by folder name."""

    def __init__(self, root: str, storage_options: dict[str, Any] | None = None):
        self.storage = Storage(root, storage_options)
        self.storage_options = dict(storage_options or {})
        self._cache: dict[str, tuple[tuple, Table, DeltaDataset]] = {}
        self._lock = threading.Lock()
        self._pruned_to = 0  # tables cached after the last pruning (_prune)

    def _folders(self) -> list[str]:
        """The folders under the root that may hold a table (whether they do is known once
        their log is listed, which :attr:`table_names` does for each)."""
        fs = self.storage.fs
        if not self.storage.is_local:
            forget_listing(fs, self.storage.root)  # a cached listing would hide tables made since
        try:
            with self.storage.request_errors("list", self.storage.root):
                entries = fs.ls(self.storage.root, detail=True)
        except FileNotFoundError as e:
            raise TableNotFoundError(f"catalog root {self.storage.root} does not exist") from e
        names = []
        for e in entries:
            path = e["name"].rstrip("/")
            base = path.rsplit("/", 1)[-1]
            if self.storage.url_quoted:  # a web server's listing: URLs, names percent-encoded
                base = unquote(base)
            if base.startswith(".") or not base or "/" in base:
                continue
            # a symlinked folder is listed with type 'other' (or 'link') by some filesystems
            if e.get("type") != "directory" and not (e.get("type") in ("other", "link") and fs.isdir(path)):
                continue
            names.append(base)
        return sorted(names)

    # datafusion-python reads table_names with getattr (does not call it): a property works.
    @property
    def table_names(self) -> list[str]:  # type: ignore[override]
        """The tables that open: DataFusion's information_schema (SHOW TABLES, SHOW COLUMNS,
        ...) looks up every listed table of every catalog, so one that fails would fail those
        queries for the whole session. A table left out here still gives its error to a query
        naming it. (Listing opens each table, as information_schema's lookups did anyway; they
        then hit the cache.)"""
        folders = self._folders()
        self._forget_gone(folders)
        return [name for name, opens in zip(folders, self._open_each(folders), strict=True) if opens]

    def _open_each(self, folders: list[str]) -> list[bool]:
        """Whether each folder's table opens; on an object store up to :data:`CATALOG_OPENS` at
        once, each in a copy of the caller's context (the statement's pins, see .statement)."""
        if self.storage.is_local or len(folders) < 2:
            return [self._opens(name) for name in folders]
        context = contextvars.copy_context()
        with ThreadPoolExecutor(min(CATALOG_OPENS, len(folders)), thread_name_prefix="delta-catalog") as pool:
            return list(pool.map(lambda name: context.copy().run(self._opens, name), folders))

    def _opens(self, name: str) -> bool:
        try:
            if self._table(name) is None:
                return False
            self._close_log_files(name)
        except DeltaError:
            return False
        return True

    def _close_log_files(self, name: str) -> None:
        """Close the local checkpoint files the cached snapshot of ``name`` holds open for the
        read of its files to come: listed, not queried, every table of the catalog held one (a
        catalog of N tables, N descriptors after SHOW TABLES); its first query opens it again.
        An object store's handle holds no descriptor (opening it again is a request): kept."""
        with self._lock:
            cached = self._cache.get(name)
        if cached is not None and cached[2].storage.is_local:
            forget_all_parquet(cached[2].storage)

    def names(self) -> set[str]:
        """:attr:`table_names` as a set: ``ctx.catalog(c).schema(s)`` hands this provider back
        itself (datafusion wraps only its own schemas in a ``Schema``, which has ``names()``)."""
        return set(self.table_names)

    def table_exist(self, name: str) -> bool:
        return self._listing(name) is not None

    def names_in_other_case(self, name: str) -> list[str]:
        """The tables named ``name`` in another case, for messages: the root is listed and only
        the folders so named are checked (:attr:`table_names` opens every table)."""
        low = name.lower()
        return [n for n in self._folders() if n != name and n.lower() == low and self.table_exist(n)]

    def _listing(self, name: str) -> tuple[DeltaTable, Any] | None:
        """The table folder ``name`` and its log listing, None when it holds no Delta table.

        One name, one listing of its ``_delta_log``: the catalog folder is not listed (a query
        naming one table of N cost a listing of the folder and N existence checks)."""
        if not name or name.startswith(".") or "/" in name or "\\" in name:
            return None  # what _folders never lists: hidden entries, paths
        if "::" in name and (self.storage.chained or not self.storage.is_local):
            return None  # it would read as an fsspec URL chain (a local folder may be named a::b)
        folder = quote(name) if self.storage.url_quoted else name  # requested by its URL there
        table = DeltaTable(self.storage.child_location(folder), self.storage_options)
        try:
            return table, table.listing()
        except TableNotFoundError:
            return None  # no such folder, no _delta_log, or no commit yet (a writer's first moment)

    def table(self, name: str) -> Table | None:
        try:
            return self._table(name)
        except DeltaError as e:
            note_provider_error(e)  # table_changes() raises it as itself, not as a lookup failure
            raise

    def _table(self, name: str) -> Table | None:
        with SCAN_THREADS.busy():  # a snapshot load parses the log in pyarrow (see busy)
            return relisting(lambda: self._table_once(name))

    def _table_once(self, name: str) -> Table | None:
        found = self._listing(name)
        if found is None:
            with self._lock:
                self._cache.pop(name, None)  # its folder is gone: so is its snapshot
            return None
        table, listing = found
        newest_version = listing.latest_version()
        latest = newest_version
        pins = statement_pins()
        key = table_key(table.storage)
        if pins is not None:  # one version of the table per statement (see .statement); a table
            # written again from scratch since the pin is read as it is now
            latest = min(pins.get(key, newest_version), newest_version)
        # the newest log file's size and time too: a table deleted and written again can come
        # back at the same version
        commit, checkpoints = listing.commits.get(latest), listing.checkpoints.get(latest)
        newest = commit if commit is not None else (checkpoints[0].parts[0] if checkpoints else None)
        state = None if newest is None else (latest, newest.size, newest.mtime_or_none())
        with self._lock:
            cached = self._cache.get(name)
            if cached and state is not None and cached[0] == state:
                _pin(pins, key, latest)
                return cached[1]
        dataset = table_dataset(table.snapshot(latest, listing=listing), label=name)
        # pinned once opened: an attempt whose commits a log cleanup removed (relisting tries
        # again) must not hold the retry, and the statement, to a version the log no longer has
        _pin(pins, key, latest)
        provider = Table(dataset)
        if state is not None and latest == newest_version:  # the cache holds the newest version only
            with self._lock:
                self._cache[name] = (state, provider, dataset)
                prune = len(self._cache) > 2 * self._pruned_to + 16
                if prune:  # one pruning at a time: tables opened side by side all cross the mark
                    self._pruned_to = len(self._cache)
            if prune:
                self._prune()
        return provider

    def _prune(self) -> None:
        """Drop the cached tables whose folders are gone. A service whose tables come and go
        (each queried while it exists, never named again) kept a snapshot per table ever seen;
        the root is listed once each time the cache doubles."""
        try:
            folders = self._folders()
        except DeltaError:  # not listable now: tried again at the next doubling
            with self._lock:
                self._pruned_to = len(self._cache)
            return
        self._forget_gone(folders)

    def _forget_gone(self, folders: list[str]) -> None:
        """Keep only the cached tables named like one of ``folders`` (ignoring case: a store
        that ignores it finds a folder under either spelling)."""
        listed = {f.casefold() for f in folders}
        with self._lock:
            for name in [n for n in self._cache if n.casefold() not in listed]:
                del self._cache[name]
            self._pruned_to = len(self._cache)

    def datasets(self) -> list[DeltaDataset]:
        """The datasets of the tables opened so far (latest version of each)."""
        with self._lock:
            return [entry[2] for entry in self._cache.values()]

    def register_table(self, name: str, table: Any) -> None:
        raise DeltaError("tables cannot be added to a Delta folder catalog; write them with a Delta writer")

    def deregister_table(self, name: str, cascade: bool = True) -> None:
        raise DeltaError("tables cannot be removed from a Delta folder catalog")

    @property
    def owner_name(self) -> str | None:  # type: ignore[override]
        """A folder has no owner. datafusion-python 55 reads this attribute for
        information_schema.schemata without calling it and shows its text (SchemaProvider's
        method: ``<bound method ...>`` with an address); only a failed lookup gives NULL."""
        raise AttributeError("owner_name")


class DeltaCatalogProvider(CatalogProvider):
    def __init__(self, schemas: dict[str, DeltaSchemaProvider]):
        self._schemas = schemas

    def schema_names(self) -> set[str]:
        return set(self._schemas)

    def schema(self, name: str) -> DeltaSchemaProvider | None:
        return self._schemas.get(name)

    def register_schema(self, name: str, schema: Any) -> None:
        raise DeltaError("schemas cannot be added to a Delta folder catalog")

    def deregister_schema(self, name: str, cascade: bool = True) -> None:
        raise DeltaError("schemas cannot be removed from a Delta folder catalog")


def register_catalog(
    ctx: SessionContext,
    catalog: str,
    root: str,
    schema: str = "default",
    storage_options: dict[str, Any] | None = None,
) -> DeltaSchemaProvider:
    """Serve every Delta table under ``root`` as ``catalog.schema.<folder name>``.

    Each query reads a table's latest version (one version per statement). Registering a folder
    catalog's name again replaces it; the name of another catalog holding tables is refused (over
    an empty ``datafusion``, the default catalog, pass ``schema="public"``)."""
    _require_context(ctx, "register_catalog")
    for what, name in (("catalog", catalog), ("schema", schema)):
        if not isinstance(name, str) or not name.strip():
            raise ArgumentError(f"register_catalog: the {what} name must be a non-empty string, got {name!r}")
    provider = DeltaSchemaProvider(root, storage_options)
    storage = provider.storage
    if not storage.isdir(storage.root):
        raise TableNotFoundError(f"register_catalog({catalog!r}): {root} is not a folder")
    if storage.isdir(storage.join("_delta_log")):
        raise ArgumentError(
            f"register_catalog({catalog!r}): {root} is a Delta table, not a folder of Delta tables "
            "(a catalog serves the tables in the folder's subfolders): use register_table for it"
        )
    provider._folders()  # a root the store will not list fails here, not in every later query
    with _REGISTER_LOCK:  # check, swap and remember at once (as register_table does)
        replaced = _replaced_catalog(ctx, catalog, schema)
        ctx.register_catalog_provider(catalog, DeltaCatalogProvider({schema: provider}))
        track_session(ctx)
        with _REGISTRY_LOCK:
            kept = _CATALOGS.setdefault(ctx.session_id(), [])
            if replaced is not None:  # its snapshots would otherwise live as long as the session
                old = {id(p) for p in replaced._schemas.values()}
                kept[:] = [p for p in kept if id(p) not in old]
            kept.append(provider)
    return provider


def schema_table_names(schema: Any) -> list[str]:
    """The table names of a schema of a session's catalog: a native schema lists them by
    ``names()``; a Python one is itself, with ``table_names`` a method (datafusion's base class)
    or a property (a folder catalog's, which opens every table)."""
    if hasattr(schema, "names"):
        return list(schema.names())
    names = schema.table_names
    return list(names() if callable(names) else names)


def _replaced_catalog(ctx: SessionContext, catalog: str, schema: str) -> DeltaCatalogProvider | None:
    """The folder catalog the session serves as ``catalog``, which registering the name again
    replaces (None: no such catalog, or an empty one, such as the default catalog a session is
    configured with to make the folder catalog its default). Another catalog holding tables is
    refused: DataFusion would drop it with every table in it (over ``datafusion``, the default
    catalog, every table registered so far). So is an empty one with a schema other than
    ``schema``: it may be the session's default schema, where unqualified names resolve and
    ``register_table`` registers, and DataFusion's 'failed to resolve schema' would follow."""
    if catalog not in ctx.catalog_names():
        return None
    held = ctx.catalog(catalog)
    if isinstance(getattr(held, "catalog", None), DeltaCatalogProvider):
        return held.catalog
    tables = sorted(f"{s}.{t}" for s in held.schema_names() for t in schema_table_names(held.schema(s)))
    if tables:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise ArgumentError(
            f"register_catalog({catalog!r}): the session already has a catalog {catalog!r} holding tables "
            f"({shown}), not a Delta folder catalog; registering over it would drop them: choose another name"
        )
    schemas = sorted(held.schema_names())
    dropped = [s for s in schemas if s != schema]
    if len(schemas) > 1:  # one schema= cannot keep them all
        raise ArgumentError(
            f"register_catalog({catalog!r}): the session's catalog {catalog!r} has the schemas "
            f"{', '.join(repr(s) for s in schemas)}, and a folder catalog serves one: serving {schema!r} "
            f"would drop {', '.join(repr(s) for s in dropped)} (unqualified table names resolve in the "
            "session's default schema): choose another catalog name"
        )
    if dropped:
        raise ArgumentError(
            f"register_catalog({catalog!r}): the session's catalog {catalog!r} has the schema(s) "
            f"{', '.join(repr(s) for s in dropped)}, which a folder catalog serving only {schema!r} would "
            f"drop (unqualified table names resolve in the session's default schema): pass "
            f"schema={dropped[0]!r}, or choose another catalog name"
        )
    return None


# -- everything at once -------------------------------------------------------------------------


def register(ctx: SessionContext) -> SessionContext:
    """Install the DELTA table factory and the ``table_changes`` table function."""
    _require_context(ctx, "register")
    ctx.register_table_factory("DELTA", DeltaTableFactory(ctx.session_id()))
    track_session(ctx)
    try:
        from .table_function import install_table_changes
    except ImportError:  # change feed not available in this build
        return ctx
    install_table_changes(ctx)
    return ctx


def _session_datasets(session_id: str) -> list[DeltaDataset]:
    """Datasets the session can scan: registered tables and folder-catalog tables opened so far."""
    out = [d for _, _, d in registered_tables(session_id)]
    with _REGISTRY_LOCK:
        providers = list(_CATALOGS.get(session_id, ()))
    for provider in providers:
        out.extend(provider.datasets())
    return out


def explain(ctx: SessionContext, sql: str) -> str:
    """``EXPLAIN`` with a DeltaScan line per Delta table scan: files total and after pruning.

    DataFusion prints a Python dataset only as ``DatasetExec: number_of_fragments=N``; the Delta
    planning figures are recorded during planning and added under each such line.
    """
    _require_context(ctx, "explain")
    if not isinstance(sql, str) or not sql.strip():
        raise ArgumentError(f"explain: the query must be a non-empty SQL string, got {sql!r}")
    if is_explain(sql):
        raise ArgumentError("explain: pass the query itself; explain() adds the EXPLAIN")
    return explain_statement(ctx, f"EXPLAIN {sql}")


# what SQL may put before a statement's first word: white space, -- and /* */ comments
_EXPLAIN = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*explain\b", re.IGNORECASE | re.DOTALL)


def is_explain(sql: str) -> bool:
    """Whether ``sql`` is an ``EXPLAIN`` statement (any form: ANALYZE, VERBOSE, FORMAT)."""
    return _EXPLAIN.match(sql) is not None


def explain_statement(ctx: SessionContext, statement: str) -> str:
    """The plans of an ``EXPLAIN`` statement (any form) line by line under their kind, and a
    DeltaScan line per Delta table scan it planned (what :func:`explain` prints)."""
    from .table_function import recent_plans, table_changes_calls

    sid = ctx.session_id()
    # the datasets themselves are kept: one refreshed by another thread meanwhile (replaced in
    # the session) may be the one this statement planned, and its id must not be reused
    before = [(d, d.plans_made) for d in _session_datasets(sid)]
    calls_before = table_changes_calls(sid)
    with recording_plans() as recorded:
        rows = ctx.sql(statement).to_pydict()
    plans = []
    me = threading.get_ident()  # planning runs on this thread; others may share the session
    counted = {id(d): n for d, n in before}
    datasets = [d for d, _ in before] + [d for d in _session_datasets(sid) if id(d) not in counted]
    for d in datasets:  # one line per scan: a table scanned twice shows twice
        plans.extend(d.plans_since(counted.get(id(d), 0), thread=me))
    if table_changes_calls(sid) != calls_before:  # this statement called table_changes
        plans.extend(recent_plans(sid))
    # and those of datasets another thread put in the session meanwhile and replaced again
    shown = {id(p) for p in plans}
    plans.extend(p for p in recorded if id(p) not in shown)
    failed = [(k, p) for k, p in zip(rows["plan_type"], rows["plan"], strict=True) if k.endswith(" failed")]
    if failed:
        # DataFusion's EXPLAIN shows the planning step that failed as a row, where running the
        # statement raises that error: so does explain()
        kind, plan = failed[0]
        step = kind.removeprefix("logical_plan after ").removesuffix(" failed")
        raise DeltaError(f"explain: the statement cannot be planned: {step} failed: {' '.join(plan.split())}")
    lines = []
    for kind, plan in zip(rows["plan_type"], rows["plan"], strict=True):
        lines.append(f"{kind}:")
        lines.extend("  " + line for line in plan.splitlines())
    if plans:
        lines.append("delta:")
        lines.extend("  " + p.describe() for p in plans)
    return "\n".join(lines)
