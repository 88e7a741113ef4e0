"""The change data feed (CDF): the rows inserted, deleted and updated between two versions.

Semantics follow PROTOCOL.md (Add CDC File, Deletion Vectors, In-Commit Timestamps) and
delta-kernel-rs ``table_changes``:

* a commit holding ``cdc`` actions contributes only its change data files; the files store
  ``_change_type`` themselves, ``_commit_version`` / ``_commit_timestamp`` are constants;
* any other commit contributes its ``add`` (``insert``) and ``remove`` (``delete``) actions with
  ``dataChange = true``; ``dataChange = false`` actions (OPTIMIZE, ...) contribute nothing;
* an ``add`` with a deletion vector contributes its rows not deleted by that vector, a ``remove``
  with one its rows that were still live (the vector's rows are skipped);
* a commit that removes a file and re-adds the same path (a new deletion vector) contributes only
  the rows whose deletion state changed: rows in the new vector but not the old one as ``delete``,
  rows in the old vector but not the new one as ``insert`` (un-deleted);
* ``_commit_timestamp`` is the in-commit timestamp where in-commit timestamps are enabled, else the
  commit file's modification time (made strictly increasing, as time travel does), as
  ``timestamp[us, UTC]``;
* timestamps resolve to versions like time travel: a start timestamp selects the first commit at
  or after it, an end timestamp the last commit at or before it; ``end`` is inclusive;
* the change data feed must be enabled (``delta.enableChangeDataFeed``) at the start version and in
  every ``metaData`` action inside the range, else :class:`~.errors.CdfNotEnabledError` names the
  version. Protocols in the range must be readable.
* the output schema is the end version's schema plus ``_change_type``, ``_commit_version`` and
  ``_commit_timestamp``. Schema changes inside the range are allowed as long as the columns read
  are compatible (same physical column, same or widened type, same partitioning); columns added
  later read as NULL for older changes. Reading an incompatible column is a
  :class:`~.errors.ChangeDataFeedError` naming the column and the version. When the start commit
  itself changes the schema, the files it removes are checked against the schema before it.

Planning (:meth:`ChangeFeed.plan`) works on one Arrow table of *change sources* (one row per file
to read, with kind, change type, version, timestamp, typed partition values and stats, and the
row selection) and prunes them in three stages before any data is read: by the conjuncts on the
change columns (evaluated on each source's constants; a cdc file may hold any change type), then
by partition values, then by file statistics (adds and removes that carry stats; cdc files have
none and are kept). Rows are read by :class:`~.read.UnitReader`, which fills partition values and
the change constants and applies row selection, projection and the row filter.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .change_range import clear_timelines, resolve_range
from .errors import (
    CdfNotEnabledError,
    ChangeDataFeedError,
    DeltaError,
    LogCorruptError,
    SchemaError,
    VersionNotFoundError,
)
from .footers import FooterStats, clear_footer_cache, footer_stats, footer_type_ok, typed_values
from .log.actions import (
    DV_TYPE,
    CommitData,
    commit_schema,
    find_protocol_and_metadata,
    parse_json_actions,
    partition_values_type,
    read_commits,
)
from .log.segment import LogListing, build_segment, list_log, missing_versions
from .lru import LruCache
from .partition_values import typed_partition_column
from .protocol import Metadata, Protocol, clear_schema_cache
from .replay import decode_paths, file_keys, flatten_file_actions, resolve_paths
from .scan_unit import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION, ScanUnit, dv_or_none
from .schema import FIELD_ID_KEY, is_supported_type_change, logical_to_physical_names, physical_name
from .stats import bounds_survive_widening, typed_stats, widened_columns
from .timestamps import CommitTimeline, read_in_commit_timestamp

if TYPE_CHECKING:
    from .read import UnitReader
    from .table import DeltaTable

CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(COMMIT_VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, TIMESTAMP_TYPE),
)
#: The change types the protocol defines; a cdc file may hold any of them (and, from
#: non-standard writers, other strings: see :func:`_change_type_candidates`).
STANDARD_CHANGE_TYPES = ("insert", "delete", "update_preimage", "update_postimage")

#: Source kinds in the change-source table.
KIND_CDC, KIND_ADD, KIND_REMOVE, KIND_DV_UPDATE = "cdc", "add", "remove", "dv_update"


#: Columns of :attr:`ChangeFeed.sources` (and :meth:`ChangeScan.files`), in order.
SOURCE_COLUMNS = [
    "kind",
    "change_type",
    "version",
    "timestamp",
    "path",
    "location",
    "size",
    "partition_values",
    "stats",
    "deletion_vector",
    "only_rows",
    "drop_rows",
]


def _with_add_stats(removes: pa.Table, adds: pa.Table) -> pa.Table:
    """Removes without statistics (deltalake writes them so) take those of an add in the range
    of the same file with the same deletion vector: the rows the remove deletes are the rows
    live in that add, which its statistics describe (tight bounds with a deletion vector are
    tight to exactly those rows). ``count(*)`` then needs no open of the removed file, which may
    be vacuumed, and filters can prune it."""
    if removes.num_rows == 0 or adds.num_rows == 0:
        return removes
    stats = removes.column("stats").combine_chunks()
    if stats.null_count == 0:
        return removes
    known = adds.filter(adds.column("stats").is_valid())
    if known.num_rows == 0:
        return removes

    def keys(t: pa.Table) -> pa.Array:
        return file_keys(t.column("location").combine_chunks(), t.column("deletionVector").combine_chunks())

    at = pc.index_in(keys(removes), value_set=keys(known))
    inherited = pc.coalesce(stats, known.column("stats").combine_chunks().take(at))
    return removes.set_column(removes.schema.get_field_index("stats"), "stats", inherited)


# --------------------------------------------------------------------------------------------
# Schema compatibility across the range
# --------------------------------------------------------------------------------------------


def _retyped_columns(segments: list[tuple[int, Metadata]]) -> set[tuple[str, ...]]:
    """End-schema columns whose type differs under an earlier metadata of the range. Files
    written then carry bounds in the old type's form (a float -0.1 is -0.10000000149011612 read as
    a double), which need not bound the values as read now; a ``delta.typeChanges`` entry says
    so, but writers may remove it once every live file has the new type, while a range's older
    files are still read."""
    end = segments[-1][1]
    out: set[tuple[str, ...]] = set()

    def walk(old: pa.DataType, phys: pa.DataType, logical: pa.DataType, path: tuple[str, ...]) -> None:
        if old == phys:
            return
        if pa.types.is_struct(old) and pa.types.is_struct(phys):  # fields added later have no bounds
            old_fields = {f.name: f.type for f in old}
            for pf, lf in zip(phys, logical, strict=True):
                if pf.name in old_fields:
                    walk(old_fields[pf.name], pf.type, lf.type, (*path, lf.name))
            return
        if bounds_survive_widening(old) and is_supported_type_change(old, phys):
            return  # integer, decimal and date bounds are the same values in the wider type
        out.add(path)

    for (_, md), (_, newer) in zip(segments[:-1], segments[1:], strict=True):
        if md.schema_string == end.schema_string or _appends_columns(md, newer):
            continue  # an appended column has no older type: ``newer`` gives all ``md`` would
        old_types = {f.name: f.type for f in md.physical_schema}
        for logical, phys in zip(end.arrow_schema, end.physical_schema, strict=True):
            if phys.name in old_types:
                walk(old_types[phys.name], phys.type, logical.type, (logical.name,))
    return out


def _same_layout(a: Metadata, b: Metadata) -> bool:
    """Do files written under ``a`` and ``b`` store the same columns the same way? (A metaData
    action that only sets table properties changes nothing a change feed reads files by.)"""
    return (
        a.column_mapping_mode == b.column_mapping_mode
        and a.partition_columns == b.partition_columns
        and (a.schema_json is b.schema_json or a.schema_string == b.schema_string)
    )


def _appends_columns(older: Metadata, newer: Metadata) -> bool:
    """Is ``newer``'s schema ``older``'s with top-level columns appended, without column mapping
    (names unique ignoring case, so a column is found by its name)? Each commit of a schema-merging
    writer adding a column is one: its columns are read from older files as from ``newer``'s."""
    if older.column_mapping_mode != "none" or newer.column_mapping_mode != "none":
        return False
    old, new = older.schema_json["fields"], newer.schema_json["fields"]
    return len(old) <= len(new) and (old is new or new[: len(old)] == old)


def _layout_changes(segments: list[tuple[int, Metadata]]) -> list[tuple[int, Metadata]]:
    """``segments`` without those of the same layout as the one before (see :func:`_same_layout`):
    the first of each run, the last one last (the end's metadata, as in ``segments``)."""
    out: list[tuple[int, Metadata]] = []
    for v, md in segments:
        if out and _same_layout(out[-1][1], md):
            continue
        out.append((v, md))
    if out[-1][1] is not segments[-1][1]:
        out[-1] = (out[-1][0], segments[-1][1])
    return out


def _incompatible_columns(chain: Sequence[Metadata], memo: dict | None = None) -> dict[str, str]:
    """End-schema columns that cannot be read from files written under ``chain[0]`` (name ->
    reason); ``chain`` is the metadata in force from then to the end (``chain[-1]``), in order.

    A column is followed back through every metadata change: by field id (or physical name)
    where column mapping is on at both sides of a change, by logical name where it is off at
    either (removing the mapping stores fields under their names again; an upgrade keeps the
    names fields have). A column with no counterpart was added later and is NULL for older
    changes; one stored under another physical name then (at any depth), repartitioned, or
    retyped incompatibly cannot be read from those files."""
    old, end = chain[0], chain[-1]
    if (
        old.schema_string == end.schema_string
        and old.partition_columns == end.partition_columns
        and old.column_mapping_mode == end.column_mapping_mode
        and all(m.column_mapping_mode == end.column_mapping_mode for m in chain)
    ):
        return {}
    # the reader finds a column by field id when both ends are in id mode, else by physical name;
    # ids identify fields only if the mapping stayed in id mode throughout
    by_id = all(m.column_mapping_mode == "id" for m in chain)
    # without any mapping, a field is its name: one dropped and added again is the same field
    unmapped = all(m.column_mapping_mode == "none" for m in chain)
    out: dict[str, str] = {}
    taken = None  # the physical names older files store, for fields added later
    for f in end.schema_json["fields"]:
        name = f["name"]
        phys = physical_name(f, end.column_mapping_mode)
        # unmapped, each step finds it by name: where it is at every step, old has it by that name
        traced = None if unmapped else _trace_back([f], chain, memo)
        if traced is None and unmapped:
            # a column dropped and added back is the same column: its partitioning and type
            # are checked as for one never dropped
            olds = old.schema_json["fields"]
            same = _sibling_index(olds, "name").get(name)
            if same is None:  # renamed by case only (Delta names are case-insensitive)
                same = _sibling_index(olds, "lower").get(name.lower())
            traced = None if same is None else [same]
        if traced is None:
            # added later (a partition column too): NULL for older changes, unless their files
            # hold another field under the name it is read by
            if not by_id and not unmapped:
                if taken is None:
                    taken = _physical_names(old.schema_json["fields"], old.column_mapping_mode)
                if phys in taken:
                    out[name] = f"older files store another field as {phys!r}"
            continue
        of = traced[-1]
        if not by_id and not unmapped:
            moved = _stored_elsewhere([f], traced, chain, memo)
            if moved is not None:
                path, was = moved
                out[name] = (
                    f"field {'.'.join(path)} was stored as {was!r} (column mapping {old.column_mapping_mode!r} "
                    f"then {end.column_mapping_mode!r})"
                )
                continue
        end_part = name in end.partition_columns
        old_part = of["name"] in old.partition_columns
        if old_part != end_part:
            out[name] = "partitioning changed" + (" (was a partition column)" if old_part else "")
            continue
        old_t = old.physical_schema.field(physical_name(of, old.column_mapping_mode)).type
        new_t = end.physical_schema.field(phys).type
        if not is_supported_type_change(old_t, new_t):
            out[name] = f"type changed from {old_t} to {new_t}"
    return out


def _struct_fields(t: Any) -> list[dict]:
    """The children of a Delta schema type: a struct's fields; for an array its element, for a
    map its key and value, as unnamed (``"container": True``) children matched by position."""
    if not isinstance(t, dict):
        return []
    if t.get("type") == "struct":
        return t.get("fields", [])
    if t.get("type") == "array":
        return [{"name": "element", "type": t.get("elementType"), "container": True}]
    if t.get("type") == "map":
        return [
            {"name": "key", "type": t.get("keyType"), "container": True},
            {"name": "value", "type": t.get("valueType"), "container": True},
        ]
    return []


def _physical_names(fields: list[dict], mode: str) -> set[str]:
    return {physical_name(f, mode) for f in fields if not f.get("container")}


#: id(siblings) -> (siblings, {lookup kind: {key: first sibling with it}}); the list is kept so
#: that its id is not reused while the entry lives
_SIBLING_INDEX: dict[int, tuple[list[dict], dict[str, dict[Any, dict]]]] = {}


_AMBIGUOUS: dict = {}


def _sibling_index(siblings: list[dict], kind: str) -> dict[Any, dict]:
    """``siblings`` by container name, field id, name or physical name (``phys:<mode>``), first
    one winning: a field traced through many schema changes of many columns looked each step up
    by a scan of its siblings (a range over 30 changes of 300 columns planned for 8 s)."""
    entry = _SIBLING_INDEX.get(id(siblings))
    if entry is None or entry[0] is not siblings:
        if len(_SIBLING_INDEX) > 4096:
            _SIBLING_INDEX.clear()
        entry = _SIBLING_INDEX[id(siblings)] = (siblings, {})
    built = entry[1].get(kind)
    if built is None:
        built = {}
        for s in siblings:
            if kind == "container":
                key = s["name"] if s.get("container") else None
            elif s.get("container"):
                continue
            elif kind == "id":
                key = (s.get("metadata") or {}).get(FIELD_ID_KEY)
            elif kind == "name":
                key = s["name"]
            elif kind == "lower":  # a name two fields share ignoring case matches neither
                key = s["name"].lower()
                if key in built:
                    built[key] = _AMBIGUOUS
                    continue
            else:
                try:
                    key = physical_name(s, kind.split(":", 1)[1])
                except SchemaError:
                    continue
            if key is not None and key not in built:
                built[key] = s
        if kind == "lower":
            built = {k: v for k, v in built.items() if v is not _AMBIGUOUS}
        entry[1][kind] = built
    return built


def _counterpart(field: dict, siblings: list[dict], newer: str, older: str) -> dict | None:
    """The field of ``siblings`` (under mapping mode ``older``) that ``field`` (under ``newer``)
    was before a metadata change."""
    if field.get("container"):
        return _sibling_index(siblings, "container").get(field["name"])
    if newer != "none" and older != "none":
        fid = field.get("metadata", {}).get(FIELD_ID_KEY)
        if fid is not None:
            return _sibling_index(siblings, "id").get(fid)
    if newer == "none":  # no mapping now: a removal keeps the logical names
        return _sibling_index(siblings, "name").get(field["name"])
    # both mapped (no id): the same physical name; an upgrade to a mapping keeps the names the
    # fields had as their physical names
    return _sibling_index(siblings, f"phys:{older}").get(physical_name(field, newer))


def _trace_back(path: list[dict], chain: Sequence[Metadata], memo: dict | None = None) -> list[dict] | None:
    """A field path (top-level field, then fields inside it) of ``chain[-1]``'s schema followed
    back to ``chain[0]``'s; None when the field did not exist then.

    ``memo``: traces over chains that all end at the same metadata, keyed by path and chain
    length; with the trace over ``chain[1:]`` known, one step remains (tracing every column over
    every suffix of a range's metadata changes was quadratic in their number)."""
    if memo is None:
        traced: list[dict] | None = path
        for newer, older in zip(reversed(chain[1:]), reversed(chain[:-1]), strict=True):
            traced = _trace_step(traced, newer, older)
            if traced is None:
                return None
        return traced
    # container children are made anew by each _struct_fields call: keyed by their name (their
    # parent precedes them in the path), other fields by identity (the end schema's own dicts)
    fields = tuple(("container", f["name"]) if f.get("container") else id(f) for f in path)
    key = (fields, len(chain))
    if key not in memo:
        shorter = (fields, len(chain) - 1)
        if len(chain) < 2:
            memo[key] = path
        elif shorter in memo:
            later = memo[shorter]
            memo[key] = None if later is None else _trace_step(later, chain[1], chain[0])
        else:
            memo[key] = _trace_back(path, chain)
    return memo[key]


def _trace_step(path: list[dict], newer: Metadata, older: Metadata) -> list[dict] | None:
    """``path`` under ``newer``'s schema -> the same fields under ``older``'s (None: absent)."""
    siblings, found = older.schema_json["fields"], []
    for f in path:
        c = _counterpart(f, siblings, newer.column_mapping_mode, older.column_mapping_mode)
        if c is None:
            return None
        found.append(c)
        siblings = _struct_fields(c["type"])
    return found


def _stored_elsewhere(
    end_path: list[dict], old_path: list[dict], chain: Sequence[Metadata], memo: dict | None = None
) -> tuple[list[str], str] | None:
    """(the field's names, its old physical name) for the first field at or below ``end_path``
    that older files store under another physical name than the end's schema reads."""
    old_mode, end_mode = chain[0].column_mapping_mode, chain[-1].column_mapping_mode
    if not end_path[-1].get("container"):
        was = physical_name(old_path[-1], old_mode)
        if was != physical_name(end_path[-1], end_mode):
            return [f["name"] for f in end_path], was
    old_children = _struct_fields(old_path[-1]["type"])
    for child in _struct_fields(end_path[-1]["type"]):
        traced = _trace_back([*end_path, child], chain, memo)
        if traced is not None:
            found = _stored_elsewhere([*end_path, child], traced, chain, memo)
            if found is not None:
                return found
        elif not child.get("container") and physical_name(child, end_mode) in _physical_names(
            old_children, old_mode
        ):
            # added later, but older files hold another field under the name it is read by
            return [f["name"] for f in (*end_path, child)], "another field's name"
    return None


# --------------------------------------------------------------------------------------------
# The change feed of a version range
# --------------------------------------------------------------------------------------------


@dataclass
class PlanResult:
    """What :meth:`ChangeFeed.plan` selected and how many sources each pruning stage left."""

    units: list[ScanUnit]
    selected: pa.Table
    total: int
    after_change: int
    after_partition: int
    after_stats: int
    predicate: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class ChangeFeed:
    """The change sources of ``start..end`` of a table (immutable, cached, shareable)."""

    def __init__(self, table: DeltaTable, start: int, end: int, listing: LogListing | None = None):
        from .snapshot import Snapshot

        self.table = table
        self.storage = storage = table.storage
        self.start = start
        self.end = end
        #: the timeline the commit timestamps taken from file times came from (see same_file_times)
        self._file_timeline: CommitTimeline | None = None
        listing = listing if listing is not None else table.listing()
        where = storage.root_uri
        _require_commits(listing, start, end, where)
        # The start snapshot gives protocol and metadata in force at the start. Its commits and
        # the range's are read in one batch, each once (on an object store, a round trip each).
        segment = build_segment(listing, start)
        older = [(v, info) for v, info in segment.commits if v < start]
        in_range = [(v, listing.commits[v]) for v in range(start, end + 1)]
        read = {c.version: c for c in read_commits(storage, older + in_range)}
        commits = [read[v] for v, _ in in_range]
        start_snap = Snapshot(storage, segment, [read[v] for v, _ in segment.commits])
        if not start_snap.metadata.change_data_feed_enabled:
            raise CdfNotEnabledError(
                f"change data feed is not enabled at version {start} of {where} (table property "
                f"delta.enableChangeDataFeed is not 'true'); it must be enabled for every version of the range "
                f"{start}..{end}"
            )
        # Walk the protocol/metaData actions of the range (byte search: cheap for big commits).
        segments: list[tuple[int, Metadata]] = [(start, start_snap.metadata)]
        if start > 0 and commits and find_protocol_and_metadata(commits[0].data, commits[0].info.path)[1]:
            # The start commit changes the metadata: the files it removes were written under the
            # schema before it, which decides whether they can be read with the end schema.
            try:
                before = Snapshot(storage, build_segment(listing, start - 1)).metadata
            except DeltaError:  # the earlier version is gone (log cleaned up): nothing to compare
                before = None
            if before is not None:
                segments.insert(0, (start - 1, before))
        protocol = start_snap.protocol
        # in-commit timestamps as configured at each commit (they may be switched off mid-range)
        current = start_snap.metadata
        self._ict: dict[int, tuple[int, int] | None] = {
            start: _ict_of(current, f"{where} at version {start}")
        }
        for c in commits:
            if c.version == start:
                continue
            p, m = find_protocol_and_metadata(c.data, c.info.path)
            if p is not None:
                protocol = Protocol.from_action(p, c.info.path)
                protocol.check_readable(c.info.path, defer_variant=True)
            md = Metadata.from_action(m, c.info.path, protocol) if m is not None else None
            if md is not None:
                current = md
            elif p is not None:
                current = dataclasses.replace(current, ict_feature=protocol.supports_in_commit_timestamps)
            self._ict[c.version] = _ict_of(current, c.info.path)
            if p is not None:
                in_force = md if md is not None else segments[-1][1]
                protocol.check_readable(c.info.path, in_force.schema_json)
            if md is not None:
                if not md.change_data_feed_enabled:
                    raise CdfNotEnabledError(
                        f"change data feed is not enabled at version {c.version} of {where} (its metaData "
                        f"action does not set delta.enableChangeDataFeed=true); the range {start}..{end} must "
                        f"have it enabled for every version"
                    )
                segments.append((c.version, md))
        self.protocol = protocol
        self.metadata: Metadata = segments[-1][1]
        self.segments = segments
        #: the segments where the schema, partitioning or mapping mode changed (what the schema
        #: checks compare), so that property-only metaData commits cost nothing there
        self.layouts = _layout_changes(segments)
        self.incompatible = self._schema_changes(self.layouts)
        md = self.metadata
        clash = [f.name for f in CHANGE_FIELDS if f.name in md.arrow_schema.names]
        if clash:
            raise ChangeDataFeedError(
                f"{where}: the table has a column named {clash[0]!r} at version {end}, the name of a change "
                f"feed column: its change data feed cannot be read (Spark refuses such tables too)"
            )
        self.partition_columns = list(md.partition_columns)
        self.schema = pa.schema(
            list(md.arrow_schema) + list(CHANGE_FIELDS), metadata=md.arrow_schema.metadata
        )
        self.physical_partitions = md.physical_partition_columns()
        self.commit_timestamps = self._timestamps(table, listing, commits)
        self.sources = self._build_sources(commits)
        self._kinds = np.asarray(self.sources.column("kind").to_pylist(), dtype=object)
        self._physical_names = logical_to_physical_names(md.schema_json, md.column_mapping_mode)
        self._change_types = np.asarray(self.sources.column("change_type").to_pylist(), dtype=object)

    # -- construction ----------------------------------------------------------------------
    def _schema_changes(self, segments: list[tuple[int, Metadata]]) -> dict[str, list[tuple[int, int, str]]]:
        """Column -> [(first version, last version, reason)] of the ranges it cannot be read from;
        ``segments``: where the layout changed (:func:`_layout_changes`)."""
        found: list[tuple[int, int, dict[str, str]]] = []
        memo: dict = {}  # traces over the shorter suffixes, computed first
        later: dict[str, str] = {}  # the columns found for the range after segment i
        unmapped = segments[-1][1].column_mapping_mode == "none"  # no mapping after segment i
        for i in reversed(range(len(segments) - 1)):
            md, newer = segments[i][1], segments[i + 1][1]
            unmapped = unmapped and md.column_mapping_mode == "none"
            if unmapped and md.partition_columns == newer.partition_columns and _appends_columns(md, newer):
                # files written under md hold newer's columns but the appended ones: those are
                # refused as they are after it, the appended ones are NULL (a range of k commits
                # each adding a column compared k schemas of up to k columns: 1,000 took 8 s)
                names = {f["name"].lower() for f in md.schema_json["fields"]} if later else ()
                columns = {c: why for c, why in later.items() if c.lower() in names}
            else:
                columns = _incompatible_columns([m for _, m in segments[i:]], memo)
            found.append((segments[i][0], segments[i + 1][0] - 1, columns))
            later = columns
        out: dict[str, list[tuple[int, int, str]]] = {}
        for v, last, columns in reversed(found):
            for col, why in columns.items():
                out.setdefault(col, []).append((v, last, why))
        return out

    def _timestamps(self, table: DeltaTable, listing: LogListing, commits) -> np.ndarray:
        """Commit timestamps (us) of start..end: a commit's in-commit timestamp where the table
        had them enabled at that commit (as delta-kernel-rs and Spark do), else its file's
        modification time."""
        out = np.zeros(self.end - self.start + 1, dtype=np.int64)

        def uses_ict(v: int) -> bool:
            ict = self._ict[v]
            return ict is not None and v >= ict[0]

        need_mtime = [c for c in commits if not uses_ict(c.version)]
        if need_mtime:
            timeline = self._file_timeline = CommitTimeline(self.storage, listing, self.metadata)
            for c in need_mtime:
                out[c.version - self.start] = timeline.timestamp(c.version) * 1000
        for c in commits:
            if uses_ict(c.version):
                out[c.version - self.start] = read_in_commit_timestamp(c.data, c.info.path) * 1000
        return out

    def same_file_times(self, listing: LogListing) -> bool:
        """Whether the commit file times this feed's timestamps came from are still those of
        ``listing`` (True when none came from file times)."""
        return self._file_timeline is None or self._file_timeline.same_file_times(listing, upto=self.end)

    def _build_sources(self, commits: list[CommitData]) -> pa.Table:
        """The change sources of the range (SOURCE_COLUMNS), in commit order: a commit's cdc
        files if it has any; else its dataChange adds (inserts) and removes (deletes), and for a
        file removed and added again with another deletion vector, the rows whose state changed."""
        cdc, adds, removes = self._file_actions(commits)
        pieces: list[pa.Table] = []
        if cdc.num_rows:
            pieces.append(_piece(cdc, KIND_CDC, None, None, None, with_stats=False))
        # Pairs: a remove and an add of the same file in one commit (deletion vector updates).
        add_pk = _pair_key(adds)
        rem_pk = _pair_key(removes)
        if adds.num_rows and removes.num_rows:
            paired_add = pc.is_in(add_pk, value_set=rem_pk)
            paired_rem = pc.is_in(rem_pk, value_set=add_pk)
        else:
            paired_add = pa.array(np.zeros(adds.num_rows, dtype=bool))
            paired_rem = pa.array(np.zeros(removes.num_rows, dtype=bool))
        plain_adds = adds.filter(pc.invert(paired_add))
        plain_removes = removes.filter(pc.invert(paired_rem))
        if plain_adds.num_rows:
            dv = plain_adds.column("deletionVector").combine_chunks()
            pieces.append(_piece(plain_adds, KIND_ADD, "insert", None, dv))
        if plain_removes.num_rows:
            if self.physical_partitions:
                self._refuse_removes_without_partition_values(plain_removes)
            dv = plain_removes.column("deletionVector").combine_chunks()
            pieces.append(_piece(plain_removes, KIND_REMOVE, "delete", None, dv))
        if pc.any(paired_add).as_py():
            pieces += _dv_update_pieces(adds.filter(paired_add), removes, rem_pk)
        if not pieces:
            raw = _empty_raw_sources(self.physical_partitions)
        else:
            raw = pa.concat_tables(pieces, promote_options="permissive")
            raw = raw.take(pc.sort_indices(raw, sort_keys=[("version", "ascending"), ("order", "ascending")]))
        return self._typed_sources(raw)

    def _refuse_removes_without_partition_values(self, removes: pa.Table) -> None:
        """A remove written without extended file metadata may leave out its partition values
        (PROTOCOL.md): its deleted rows' partition columns are unknown, and reading them as NULL
        would be wrong. Refused, as Spark (DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA) and
        deltalake do."""
        missing = removes.column("partitionValues").is_null()
        if not pc.any(missing).as_py():
            return
        first = removes.filter(missing).slice(0, 1).to_pylist()[0]
        raise ChangeDataFeedError(
            f"table_changes on {self.storage.root_uri} {self.start}..{self.end}: the remove of data file "
            f"{first['path']} at version {first['version']} has no partitionValues (written without "
            "extendedFileMetadata), so the partition values of its deleted rows are unknown"
        )

    def _file_actions(self, commits: list[CommitData]) -> tuple[pa.Table, pa.Table, pa.Table]:
        """(cdc, adds, removes) of the commits, flat, with decoded paths and locations; adds and
        removes only with dataChange and only from commits without cdc files."""
        storage, parts = self.storage, self.physical_partitions
        aliases = self._partition_aliases()
        read_parts = parts + [a for names in aliases.values() for a in names]
        schema = _changes_commit_schema(partition_values_type(read_parts))
        actions, counts = parse_json_actions(
            [c.data for c in commits], schema, [c.info.path for c in commits]
        )
        per_row = pa.array(
            np.repeat(np.array([c.version for c in commits], dtype=np.int64), counts), pa.int64()
        )

        def flat(name: str) -> pa.Table:
            t = flatten_file_actions(
                actions.column(name), read_parts, per_row, f"{name} actions of {storage.root_uri}"
            )
            if aliases:
                pv = _merged_partition_values(t.column("partitionValues").combine_chunks(), parts, aliases)
                t = t.set_column(t.schema.get_field_index("partitionValues"), "partitionValues", pv)
            if t.num_rows == 0:
                return t.append_column("location", pa.array([], pa.string()))
            decoded = decode_paths(t.column("path"))
            t = t.set_column(t.schema.get_field_index("path"), "path", decoded)
            return _once_per_commit(t.append_column("location", resolve_paths(storage, decoded)))

        cdc = flat("cdc")
        cdc_versions = (
            pc.unique(cdc.column("version").combine_chunks()) if cdc.num_rows else pa.array([], pa.int64())
        )

        def data_change(t: pa.Table) -> pa.Table:
            if t.num_rows == 0:
                return t
            keep = pc.fill_null(t.column("dataChange"), True)
            if len(cdc_versions):
                keep = pc.and_(keep, pc.invert(pc.is_in(t.column("version"), value_set=cdc_versions)))
            return t.filter(keep)

        adds = flat("add")
        return cdc, data_change(adds), data_change(_with_add_stats(flat("remove"), adds))

    def _partition_aliases(self) -> dict[str, list[str]]:
        """Partition column -> the names it had in another case under the range's earlier
        metadata (an overwrite repartitioning by ``k`` instead of ``K``): the older changes'
        ``partitionValues`` use those keys. Delta names are case-insensitive; read exactly,
        their values were NULL."""
        out: dict[str, list[str]] = {}
        for p in self.physical_partitions:
            folded = p.lower()
            for _, md in self.layouts[:-1]:
                for q in md.physical_partition_columns():
                    if q != p and q.lower() == folded and q not in self.physical_partitions:
                        names = out.setdefault(p, [])
                        if q not in names:
                            names.append(q)
        return out

    def _typed_sources(self, raw: pa.Table) -> pa.Table:
        md = self.metadata
        n = raw.num_rows
        pv = typed_partition_column(
            raw,
            self.physical_partitions,
            [md.arrow_schema.field(c) for c in md.partition_columns],
            f"table_changes on {self.storage.root_uri} {self.start}..{self.end}",
        )
        retyped = _retyped_columns(self.layouts)
        # a widening recorded only earlier in the range (writers may drop delta.typeChanges once
        # every live file has the new type, while the range still removes older files)
        layouts = self.layouts
        for i, (_, earlier) in enumerate(layouts[:-1]):
            if i + 2 < len(layouts) and _appends_columns(earlier, layouts[i + 1][1]):
                continue  # its fields and more are walked next
            retyped |= widened_columns(earlier.schema_json)
        stats = typed_stats(md, raw.column("stats").combine_chunks(), None, n, forget=retyped)
        versions = raw.column("version").combine_chunks()
        ts = (
            self.commit_timestamps[pc.subtract(versions, self.start).to_numpy(zero_copy_only=False)]
            if n
            else []
        )
        return pa.table(
            {
                "kind": raw.column("kind"),
                "change_type": raw.column("change_type"),
                "version": versions,
                "timestamp": pa.array(np.asarray(ts, dtype=np.int64), pa.int64()).cast(TIMESTAMP_TYPE),
                "path": raw.column("path"),
                "location": raw.column("location"),
                "size": raw.column("size"),
                "partition_values": pv,
                "stats": stats,
                "deletion_vector": raw.column("deletionVector"),
                "only_rows": raw.column("only_rows"),
                "drop_rows": raw.column("drop_rows"),
            }
        )

    # -- planning --------------------------------------------------------------------------
    def _keep(
        self,
        pred: Any,
        rows: np.ndarray,
        stats: pa.Array | None = None,
        type_ranges: dict[int, tuple[str, str]] | None = None,
    ) -> np.ndarray:
        """For each source index in ``rows``: may it hold a row for which ``pred`` is TRUE?

        Adds and removes are judged on their constants, partition values and stats. A cdc file
        stores ``_change_type`` per row, so it is judged once per value it may hold (see
        :func:`_change_type_candidates`); ``type_ranges`` (position in ``rows`` -> footer min/max
        of ``_change_type``) narrows those values. ``stats`` replaces the sources' stats.
        """
        from .predicate import TRUE
        from .skipping import file_keep_mask

        if pred is None or pred == TRUE or len(rows) == 0:
            return np.ones(len(rows), dtype=bool)
        is_cdc = self._kinds[rows] == KIND_CDC
        ct_rows = self._change_types[rows]
        literals, safe = _change_type_literals(pred)
        cdc_pred = pred if safe else _without_column(pred, CHANGE_TYPE)
        out = np.zeros(len(rows), dtype=bool)
        for group_pred, members in ((pred, np.flatnonzero(~is_cdc)), (cdc_pred, np.flatnonzero(is_cdc))):
            if len(members) == 0:
                continue
            if group_pred == TRUE:
                out[members] = True
                continue
            pos: list[int] = []
            types: list[str | None] = []
            for i in members:
                if not is_cdc[i]:
                    pos.append(i)
                    types.append(ct_rows[i])
                    continue
                values = (
                    _change_type_candidates(literals, (type_ranges or {}).get(int(i))) if safe else [None]
                )
                pos.extend([i] * len(values))
                types.extend(values)
            pos_arr = np.asarray(pos, dtype=np.int64)
            files = self._judged_files(
                rows[pos_arr], types, stats.take(pa.array(pos_arr)) if stats is not None else None
            )
            mask = file_keep_mask(
                group_pred, files, self.schema, self.partition_columns + list(CHANGE_COLUMNS)
            )
            hit = np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
            out[pos_arr[hit]] = True
        return out

    def _judged_files(
        self, sources: np.ndarray, change_types: Sequence[str | None], stats: pa.Array | None
    ) -> pa.Table:
        """The ``partition_values`` / ``stats`` table the skipping evaluators judge: the change
        columns of each source join its partition values as constants."""
        src = self.sources
        take = pa.array(sources)
        pv = src.column("partition_values").combine_chunks().take(take)
        kids = list(pv.flatten()) if pv.type.num_fields else []
        names = [pv.type.field(i).name for i in range(pv.type.num_fields)]
        kids += [
            pa.array(list(change_types), pa.string()),
            src.column("version").combine_chunks().take(take),
            src.column("timestamp").combine_chunks().take(take),
        ]
        names += list(CHANGE_COLUMNS)
        st = stats if stats is not None else src.column("stats").combine_chunks().take(take)
        return pa.table({"partition_values": pa.StructArray.from_arrays(kids, names=names), "stats": st})

    def _all_match(self, pred: Any, rows: np.ndarray) -> np.ndarray:
        """For each source index in ``rows``: is ``pred`` TRUE for every change row it yields?

        Proved for add, remove and deletion-vector-diff sources from their constants, partition
        values and statistics (a diff's statistics bound the rows it yields: see
        :func:`_stats_of_newly_deleted`); never for cdc files, whose ``_change_type`` is per row. Such sources answer
        ``count(*)`` and change-column-only queries from ``numRecords`` (see read.py).
        """
        from .skipping import file_all_match_mask

        out = np.zeros(len(rows), dtype=bool)
        members = np.flatnonzero(self._kinds[rows] != KIND_CDC)
        if len(members) == 0:
            return out
        files = self._judged_files(rows[members], list(self._change_types[rows[members]]), None)
        mask = file_all_match_mask(pred, files, self.schema, self.partition_columns + list(CHANGE_COLUMNS))
        out[members] = np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
        return out

    def plan(self, pred: Any = None, footers: bool = True) -> PlanResult:
        """Sources that may hold rows matching ``pred`` (a predicate tree over :attr:`schema`).

        Stages: change columns, then partition values, then statistics: Delta stats of adds and
        removes; for sources without them (cdc files, removes without stats) the parquet footer
        statistics, read only when the predicate constrains ``_change_type`` or data columns
        (``footers=False`` turns that off). Footers are cached per file (data files never change).
        """
        from .predicate import TRUE, referenced_columns, split_by_columns

        src = self.sources
        total = src.num_rows
        rows = np.arange(total)
        after_change = after_part = total
        extra: dict[str, Any] = {"range": f"{self.start}..{self.end}"}
        if pred is not None and pred != TRUE and total:
            change_pred = split_by_columns(pred, CHANGE_COLUMNS)[0]
            rows = rows[self._keep(change_pred, rows)]
            after_change = len(rows)
            # A filter on a column whose schema changed in the range is judged only after the
            # refusal check: pruning by partition values or stats would judge older files by a
            # layout they were not written with (a column that became a partition column looks
            # NULL in them) and drop their rows silently instead of refusing.
            changed = sorted(referenced_columns(pred) & set(self.incompatible))
            if changed and len(rows):
                self.check_columns(changed, self.units(src.take(pa.array(rows, pa.int64()))))
            part_pred = split_by_columns(pred, list(CHANGE_COLUMNS) + self.partition_columns)[0]
            if part_pred != change_pred:
                rows = rows[self._keep(part_pred, rows)]
            after_part = len(rows)
            if pred != part_pred:  # the filter reads data columns too: their stats prune further
                rows = rows[self._keep(pred, rows)]
            data_cols = (
                referenced_columns(pred) - set(self.partition_columns) - {COMMIT_VERSION, COMMIT_TIMESTAMP}
            )
            if footers and data_cols and len(rows):
                rows, read = self._footer_prune(pred, rows, data_cols)
                extra["footers_read"] = read
        selected = src.take(pa.array(rows, pa.int64())) if len(rows) != total else src
        matching = self._all_match(pred, rows) if pred is not None and pred != TRUE and len(rows) else None
        return PlanResult(
            self.units(selected, matching),
            selected,
            total,
            after_change,
            after_part,
            len(rows),
            pred,
            extra,
        )

    def _footer_prune(self, pred: Any, rows: np.ndarray, columns: set[str]) -> tuple[np.ndarray, int]:
        """Prune sources without Delta stats by their parquet footer statistics."""
        nums = pc.struct_field(self.sources.column("stats").combine_chunks(), "numRecords")
        no_stats = np.asarray(nums.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        is_cdc = self._kinds == KIND_CDC
        sel = rows[no_stats[rows] & (is_cdc[rows] | bool(columns - {CHANGE_TYPE}))]
        if len(sel) == 0:
            return rows, 0
        locations = self.sources.column("location").take(pa.array(sel)).to_pylist()
        sizes = self.sources.column("size").take(pa.array(sel)).to_pylist()
        wanted = {self._physical_names.get(c, c) for c in columns}
        infos = footer_stats(self.storage, list(zip(locations, sizes, strict=True)), wanted)
        stats, ranges = self._footer_struct(infos, wanted, is_cdc[sel])
        keep = self._keep(pred, sel, stats=stats, type_ranges=ranges)
        dropped = set(sel[~keep].tolist())
        return np.asarray([r for r in rows if r not in dropped], dtype=np.int64), len(sel)

    def _footer_struct(
        self, infos: list[FooterStats | None], wanted: set[str], cdc: np.ndarray
    ) -> tuple[pa.Array, dict[int, tuple[str, str]]]:
        """Footer statistics as the feed's stats struct (logical names), plus cdc type ranges."""
        stats_type = self.sources.column("stats").type
        mm_type = stats_type.field("minValues").type
        nc_type = stats_type.field("nullCount").type
        n = len(infos)
        mins, maxs, nulls = [], [], []
        for f in mm_type:
            phys = self._physical_names.get(f.name, f.name)
            if phys not in wanted or pa.types.is_nested(f.type) or not footer_type_ok(f.type):
                mins.append(pa.nulls(n, f.type))
                maxs.append(pa.nulls(n, f.type))
                continue
            lo = [(i.columns.get(phys) or (None, None, None))[0] if i else None for i in infos]
            hi = [(i.columns.get(phys) or (None, None, None))[1] if i else None for i in infos]
            mins.append(typed_values(lo, f.type))
            maxs.append(typed_values(hi, f.type))
        for f in nc_type:
            phys = self._physical_names.get(f.name, f.name)
            if phys not in wanted or pa.types.is_struct(f.type):
                nulls.append(pa.nulls(n, f.type))
                continue
            nulls.append(
                typed_values(
                    [(i.columns.get(phys) or (None, None, None))[2] if i else None for i in infos], f.type
                )
            )
        num = pa.array([i.num_rows if i else None for i in infos], pa.int64())
        children = [
            num,
            pa.StructArray.from_arrays(mins, fields=list(mm_type)),
            pa.StructArray.from_arrays(maxs, fields=list(mm_type)),
            pa.StructArray.from_arrays(nulls, fields=list(nc_type)),
            pa.nulls(n, pa.bool_()),
        ]
        stats = pa.StructArray.from_arrays(children, fields=list(stats_type))
        ranges = {}
        for k, info in enumerate(infos):
            if cdc[k] and info is not None:
                lo, hi, _ = info.columns.get(CHANGE_TYPE) or (None, None, None)
                if isinstance(lo, str) and isinstance(hi, str) and len(hi.encode()) < 28:
                    ranges[k] = (lo, hi)
        return stats, ranges

    def units(self, sources: pa.Table, all_rows_match: np.ndarray | None = None) -> list[ScanUnit]:
        """Change sources -> scan units with the change columns as constants (``all_rows_match``:
        per source, the query's filter is proved TRUE for all its rows)."""
        n = sources.num_rows
        if n == 0:
            return []
        cols = {
            c: sources.column(c).to_pylist() for c in ("kind", "change_type", "version", "location", "size")
        }
        ts = sources.column("timestamp").cast(pa.int64()).to_pylist()
        pvs = sources.column("partition_values").to_pylist() if self.partition_columns else [{}] * n
        only = sources.column("only_rows").to_pylist()
        drop = sources.column("drop_rows").to_pylist()
        nums = pc.struct_field(sources.column("stats").combine_chunks(), "numRecords").to_pylist()
        out = []
        for i in range(n):
            is_cdc = cols["kind"][i] == KIND_CDC
            constants = {COMMIT_VERSION: cols["version"][i], COMMIT_TIMESTAMP: ts[i]}
            if not is_cdc:
                constants[CHANGE_TYPE] = cols["change_type"][i]
            out.append(
                ScanUnit(
                    location=cols["location"][i],
                    size=cols["size"][i] or 0,
                    partition_values=pvs[i] or {},
                    drop_rows=dv_or_none(drop[i], cols["location"][i]),
                    only_rows=dv_or_none(only[i], cols["location"][i]),
                    constants=constants,
                    num_records=nums[i],
                    has_change_type_column=is_cdc,
                    all_rows_match=bool(all_rows_match[i]) if all_rows_match is not None else False,
                )
            )
        return out

    def check_columns(self, columns: Sequence[str], units: Sequence[ScanUnit]) -> None:
        """Refuse to read columns whose schema changed incompatibly in the versions of ``units``."""
        bad = [c for c in columns if c in self.incompatible]
        if not bad:
            return
        # Files added (or cdc files written) at version v were written with the schema in force at
        # v; a file removed at v (or whose deletion vector changed at v) may be older, so it may
        # have been written under any schema in force at or before v.
        # A removed file the range itself added earlier was written at that add.
        written: set[int] = set()
        maybe_older: set[int] = set()
        removed_known: set[tuple[int, int]] = set()  # (removed at, written at)
        added_in_range: dict[str, int] | None = None
        for u in units:
            v = u.constants.get(COMMIT_VERSION)
            if v is None:
                continue
            old = not u.has_change_type_column and (
                u.constants.get(CHANGE_TYPE) == "delete" or u.only_rows is not None
            )
            if not old:
                written.add(v)
                continue
            if added_in_range is None:
                added_in_range = self._first_adds()
            at = added_in_range.get(u.location)
            if at is not None and at <= v:
                removed_known.add((v, at))
            else:
                maybe_older.add(v)
        for c in bad:
            for first, last, why in self.incompatible[c]:
                hit = sorted(v for v in written if first <= v <= last)
                known = sorted((v, at) for v, at in removed_known if first <= at <= last)
                removed = sorted(v for v in maybe_older if first <= v)
                if hit or known or removed:
                    if hit:
                        which = f"changes of versions {first}..{last}"
                    elif known:
                        which = f"files removed at version {known[0][0]} (written at version {known[0][1]})"
                    else:
                        which = f"files removed at version {removed[0]} (possibly written before version {last + 1})"
                    # the ranges are the schemas it differs in from the end's: the change the reason
                    # names is where the run of ranges with that reason, from this one on, ends
                    changed_at = last + 1
                    for f2, l2, why2 in sorted(self.incompatible[c]):
                        if f2 == changed_at and why2 == why:
                            changed_at = l2 + 1
                    raise ChangeDataFeedError(
                        f"table_changes on {self.storage.root_uri} {self.start}..{self.end}: column {c!r} cannot be "
                        f"read for {which}: its schema {why} at version {changed_at} (the output uses the schema of "
                        f"version {self.end}). Read a range that starts after the change, filter on "
                        f"_commit_version, or leave the column out"
                    )

    def _first_adds(self) -> dict[str, int]:
        """Location -> the first version of the range that added the file (add sources)."""
        src = self.sources
        adds = src.filter(pc.equal(src.column("kind"), KIND_ADD)).select(["location", "version"])
        first = adds.group_by("location").aggregate([("version", "min")])
        return dict(
            zip(first.column("location").to_pylist(), first.column("version_min").to_pylist(), strict=True)
        )

    def reader(self) -> UnitReader:
        from .read import UnitReader
        from .read_schema import make_read_schema

        md = self.metadata
        rs = make_read_schema(
            md.arrow_schema, md.physical_schema, self.partition_columns, list(CHANGE_FIELDS)
        )
        return UnitReader(self.storage, rs, self.storage.root_uri, self.end)

    def __repr__(self) -> str:
        return f"ChangeFeed({self.storage.root_uri!r}, {self.start}..{self.end}, sources={self.sources.num_rows})"


# --------------------------------------------------------------------------------------------
# Pruning helpers: change types of cdc files, parquet footer statistics
# --------------------------------------------------------------------------------------------

#: Stands for "a change type equal to none of the predicate's literals".
_OTHER_TYPE = "\x00other change type"


def _change_type_literals(pred: Any) -> tuple[list[str | None], bool]:
    """The string literals ``_change_type`` is compared with, and whether every use of the column
    is an equality test (``=``, ``!=``, ``[NOT] IN``, ``IS [NOT] NULL`` against literals).

    With equality tests only, every value that is not one of the literals behaves alike, so a cdc
    file (whose change types are unknown before reading it) is judged on the literals plus one
    stand-in for any other value (and NULL, when the predicate tests for it). Range comparisons on
    ``_change_type`` are not used to prune cdc files (writers may use other values than the four
    standard ones).
    """
    from .predicate import And, Column, Comparison, In, IsNotNull, IsNull, Literal, Not, Or

    literals: list[str | None] = []
    safe = True

    def lit_str(x: Any) -> None:
        nonlocal safe
        if not isinstance(x, Literal):
            safe = False
        elif x.value.is_valid:
            if not (pa.types.is_string(x.type) or pa.types.is_large_string(x.type)):
                safe = False
            elif x.value.as_py() not in literals:
                literals.append(x.value.as_py())

    def is_ct(x: Any) -> bool:
        return isinstance(x, Column) and x.name == CHANGE_TYPE

    def walk(p: Any) -> None:
        nonlocal safe
        if isinstance(p, (And, Or)):
            for c in p.children:
                walk(c)
        elif isinstance(p, Not):
            walk(p.child)
        elif isinstance(p, Comparison):
            if is_ct(p.left) or is_ct(p.right):
                if p.op not in ("=", "!=") or (is_ct(p.left) and is_ct(p.right)):
                    safe = False
                lit_str(p.right if is_ct(p.left) else p.left)
        elif isinstance(p, In):
            if is_ct(p.operand):
                for v in p.values:
                    lit_str(v)
        elif isinstance(p, (IsNull, IsNotNull)):
            if is_ct(p.operand) and None not in literals:
                literals.append(None)

    walk(pred)
    return literals, safe


def _change_type_candidates(literals: list[str | None], footer: tuple[str, str] | None) -> list[str | None]:
    """Change types to try for a cdc file: the literals and "any other value" (within the file's
    footer min/max when known; min and max are values the file holds). NULL is tried only when
    the predicate tests for it (it is then among ``literals``)."""
    if footer is None:
        return (
            list(STANDARD_CHANGE_TYPES)
            + [v for v in literals if v not in STANDARD_CHANGE_TYPES]
            + [_OTHER_TYPE]
        )
    lo, hi = footer
    out: list[str | None] = [v for v in literals if v is None or lo <= v <= hi]
    for v in (lo, hi):
        if v not in out:
            out.append(v)
    if lo != hi:
        out.append(_OTHER_TYPE)  # a value strictly between min and max, equal to no literal
    return out


def _without_column(pred: Any, column: str) -> Any:
    """``pred`` without the conjuncts that reference ``column`` (a weaker predicate)."""
    from .predicate import conjunction, conjuncts, referenced_columns

    return conjunction(c for c in conjuncts(pred) if column not in referenced_columns(c))


def _merged_partition_values(
    pv: pa.StructArray, parts: list[str], aliases: dict[str, list[str]]
) -> pa.StructArray:
    """``pv`` read with the aliases' keys too -> one child per partition column (its own key
    first). A null map stays null (it is refused later)."""
    children = []
    for p in parts:
        values = pv.field(p)
        if p in aliases:
            values = pc.coalesce(values, *(pv.field(a) for a in aliases[p]))
        children.append(values)
    mask = pc.invert(pv.is_valid()) if pv.null_count else None
    return pa.StructArray.from_arrays(children, names=parts, mask=mask)


def _changes_commit_schema(pv: pa.DataType) -> pa.Schema:
    """The commit schema with ``remove.stats`` (removes may carry stats; used for skipping)."""
    base = commit_schema(pv)
    fields = []
    for f in base:
        if f.name == "remove" and f.type.get_field_index("stats") < 0:
            f = pa.field("remove", pa.struct(list(f.type) + [pa.field("stats", pa.string())]))
        fields.append(f)
    return pa.schema(fields)


def _pair_key(t: pa.Table) -> pa.Array:
    if t.num_rows == 0:
        return pa.array([], pa.string())
    return pc.binary_join_element_wise(
        t.column("version").combine_chunks().cast(pa.string()), t.column("location").combine_chunks(), "\x00"
    )


def _dv_ids(dv: pa.Array) -> pa.Array:
    st = pc.struct_field(dv, "storageType")
    p = pc.struct_field(dv, "pathOrInlineDv")
    off = pc.fill_null(pc.struct_field(dv, "offset").cast(pa.string()), "")
    return pc.binary_join_element_wise(st, p, off, "@")


def _as_dv(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None:
        return pa.nulls(n, DV_TYPE)
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.type != DV_TYPE:
        arr = arr.cast(DV_TYPE)
    return arr


_ORDER = {KIND_CDC: 0, KIND_REMOVE: 1, KIND_DV_UPDATE: 2, KIND_ADD: 3}


def _dv_update_pieces(readds: pa.Table, removes: pa.Table, rem_pk: pa.Array) -> list[pa.Table]:
    """Sources for files removed and added again in one commit with another deletion vector:
    rows in the new vector and not the old are deleted; rows in the old and not the new are
    inserted again (restored). ``readds``: the adds that pair with one of ``removes``."""
    idx = pc.index_in(_pair_key(readds), value_set=rem_pk)
    old_dv = removes.column("deletionVector").combine_chunks().take(idx)
    new_dv = readds.column("deletionVector").combine_chunks()
    same = pc.fill_null(pc.equal(_dv_ids(old_dv), _dv_ids(new_dv)), False)
    pieces = []
    # (change type, the vector whose rows are read, the vector whose rows are left out, the
    # statistics that bound those rows)
    for change, only, drop, stats in (
        ("delete", new_dv, old_dv, _stats_of_newly_deleted(readds, removes, idx)),
        ("insert", old_dv, new_dv, None),
    ):
        selected = pc.and_(only.is_valid(), pc.invert(same))
        if pc.any(selected).as_py():
            rows = readds.filter(selected)
            if stats is not None:
                rows = rows.set_column(rows.schema.get_field_index("stats"), "stats", stats.filter(selected))
            pieces.append(_piece(rows, KIND_DV_UPDATE, change, only.filter(selected), drop.filter(selected)))
    return pieces


def _stats_of_newly_deleted(readds: pa.Table, removes: pa.Table, idx: pa.Array) -> pa.Array:
    """Statistics bounding the rows a new deletion vector deletes. The new add's may not: with
    ``tightBounds`` they describe only the rows still live. The remove's describe the rows live
    before (those rows among them), so they are used, or the add's when known to be wide (not
    tight), else none (no pruning)."""
    new = readds.column("stats").combine_chunks().cast(pa.string())
    old = removes.column("stats").combine_chunks().cast(pa.string()).take(idx)
    wide = pc.fill_null(pc.match_substring_regex(new, r'"tightBounds"\s*:\s*false'), False)
    return pc.if_else(old.is_valid(), old, pc.if_else(wide, new, pa.scalar(None, pa.string())))


def _ict_of(md: Metadata, where: str) -> tuple[int, int] | None:
    """:attr:`Metadata.ict_enablement`, its error naming where the metadata is in force."""
    try:
        return md.ict_enablement
    except LogCorruptError as e:
        raise LogCorruptError(f"{where}: {e}") from e


def _piece(
    t: pa.Table,
    kind: str,
    change_type: str | None,
    only: pa.Array | None,
    drop: pa.Array | None,
    with_stats: bool = True,
) -> pa.Table:
    n = t.num_rows
    stats = t.column("stats") if (with_stats and "stats" in t.column_names) else pa.nulls(n, pa.string())
    return pa.table(
        {
            "kind": pa.array([kind] * n, pa.string()),
            "order": pa.array(np.full(n, _ORDER[kind], dtype=np.int8)),
            "change_type": pa.array([change_type] * n, pa.string()),
            "version": t.column("version"),
            "path": t.column("path"),
            "location": t.column("location"),
            "size": t.column("size"),
            "partitionValues": t.column("partitionValues"),
            "stats": stats.cast(pa.string()),
            "deletionVector": _as_dv(t.column("deletionVector"), n),
            "only_rows": _as_dv(only, n),
            "drop_rows": _as_dv(drop, n),
        }
    )


def _empty_raw_sources(parts: list[str]) -> pa.Table:
    return pa.table(
        {
            "kind": pa.array([], pa.string()),
            "order": pa.array([], pa.int8()),
            "change_type": pa.array([], pa.string()),
            "version": pa.array([], pa.int64()),
            "path": pa.array([], pa.string()),
            "location": pa.array([], pa.string()),
            "size": pa.array([], pa.int64()),
            "partitionValues": pa.array([], partition_values_type(parts)),
            "stats": pa.array([], pa.string()),
            "deletionVector": pa.array([], DV_TYPE),
            "only_rows": pa.array([], DV_TYPE),
            "drop_rows": pa.array([], DV_TYPE),
        }
    )


# --------------------------------------------------------------------------------------------
# Cache of change feeds (the SQL function runs on every planning, EXPLAIN included)
# --------------------------------------------------------------------------------------------

FEED_CACHE_SIZE = 16
_FEEDS: LruCache[ChangeFeed] = LruCache(FEED_CACHE_SIZE)


def load_change_feed(table: DeltaTable, start: Any, end: Any = None) -> ChangeFeed:
    """The :class:`ChangeFeed` of a range given by versions or timestamps (LRU-cached).

    The cache key is the table location, storage options, the resolved versions and the size and
    modification time of every commit file in the range; a cached feed whose commit timestamps
    came from file times is also checked against the times of the commits before the range (each
    timestamp is made greater than every earlier one), so rewritten or re-timed commits (and a new
    latest version when ``end`` is omitted) are never served stale.
    """
    listing = list_log(table.storage)
    s, e = resolve_range(table, start, end, listing)
    _require_commits(listing, s, e, table.storage.root_uri)
    commit_state = tuple(
        (v, listing.commits[v].size, listing.commits[v].mtime_or_none())
        if v in listing.commits
        else (v, None, None)
        for v in range(s, e + 1)
    )
    key = (*table.storage.cache_key, s, e, commit_state)
    return _FEEDS.get_or_make(
        key, lambda: ChangeFeed(table, s, e, listing), lambda f: f.same_file_times(listing)
    )


def _once_per_commit(actions: pa.Table) -> pa.Table:
    """File actions with one row per (version, file, deletion vector): a commit listing the same
    action twice changes the file once (as replay has it), not twice."""
    n = actions.num_rows
    if n < 2:
        return actions
    dv = (
        actions.column("deletionVector").combine_chunks()
        if "deletionVector" in actions.column_names
        else None
    )
    locations = actions.column("location").combine_chunks()
    keys = locations if dv is None else file_keys(locations, dv)
    rows = pa.table({"v": actions.column("version"), "k": keys, "i": pa.array(np.arange(n, dtype=np.int64))})
    last = rows.group_by(["v", "k"], use_threads=False).aggregate([("i", "max")]).column("i_max")
    if len(last) == n:
        return actions
    return actions.take(pa.array(np.sort(last.to_numpy())))


def _require_commits(listing: LogListing, start: int, end: int, where: str) -> None:
    missing = missing_versions(listing, start, end)
    if missing:
        have = listing.commit_versions
        span = f"{have[0]}..{have[-1]}" if have else "none"
        gaps = missing_versions(listing, have[0], have[-1]) if have else None
        if gaps:
            span += f" without {gaps}"
        which = (
            f"files of versions {missing} of {where} are"
            if ("," in missing or ".." in missing)
            else f"file of version {missing} of {where} is"
        )
        raise VersionNotFoundError(
            f"table_changes: the commit {which} not available (log cleaned up or never written); "
            f"commits available: {span}"
        )


def clear_cache() -> None:
    """Forget cached change feeds, commit timelines, footer statistics and parsed schemas."""
    _FEEDS.clear()
    clear_schema_cache()
    clear_timelines()
    clear_footer_cache()


# --------------------------------------------------------------------------------------------
# The Python API: DeltaTable.changes(...)
# --------------------------------------------------------------------------------------------


class ChangeScan:
    """A planned read of a change range: the selected change sources and their rows.

    ``files()`` is the change-scan metadata (one row per file to read: kind, change type, commit
    version and timestamp, partition values, stats, and the row selection as deletion-vector
    descriptors ``only_rows`` / ``drop_rows``); ``to_reader()`` streams the rows as a
    ``pyarrow.RecordBatchReader`` in commit order; ``to_table()`` collects them.
    """

    def __init__(self, feed: ChangeFeed, columns: Sequence[str] | None = None, predicate: Any = None):
        from .scan import requested_columns, sql_predicate

        self.feed = feed
        schema = feed.schema
        columns = requested_columns(columns, schema.names, f"the change feed of {feed.storage.root_uri}")
        self.columns = list(columns) if columns is not None else list(schema.names)
        #: see Scan.sql_filter: SQL text DataFusion applies a part of above the scan
        self.predicate, self.sql_filter = sql_predicate(predicate, schema)
        self._plan: PlanResult | None = None

    @property
    def start_version(self) -> int:
        return self.feed.start

    @property
    def end_version(self) -> int:
        return self.feed.end

    @property
    def schema(self) -> pa.Schema:
        s = self.feed.schema
        return pa.schema([s.field(c) for c in self.columns], metadata=s.metadata)

    @property
    def plan(self) -> PlanResult:
        if self._plan is None:
            self._plan = self.feed.plan(self.predicate)
        return self._plan

    def files(self) -> pa.Table:
        """The selected change sources (see :data:`SOURCE_COLUMNS`)."""
        return self.plan.selected

    def scan_units(self) -> list[ScanUnit]:
        return list(self.plan.units)

    def _needed_columns(self) -> list[str]:
        from .predicate import referenced_columns

        cols = list(self.columns)
        if self.predicate is not None:
            cols += sorted(referenced_columns(self.predicate))
        return cols

    def to_batches(self, batch_size: int | None = None) -> Iterator[pa.RecordBatch]:
        """The change rows in commit order, in batches of at most ``batch_size`` rows (in no
        particular order when DataFusion applies a part of a SQL predicate)."""
        from .read import batches_of_at_most

        if self.sql_filter is not None:
            from .datafusion.table_function import ChangesDataset
            from .scan import rows_through_datafusion

            where = f"the change feed of {self.feed.storage.root_uri} {self.feed.start}..{self.feed.end}"
            dataset = ChangesDataset(self.feed, f"table_changes({self.feed.storage.root_uri})", None)
            rows = rows_through_datafusion(dataset, self.schema, self.sql_filter, where)
            yield from _with_metadata(batches_of_at_most(rows, batch_size), self.schema)
            return
        units = self.plan.units
        self.feed.check_columns(self._needed_columns(), units)
        reader = self.feed.reader()
        out = self.schema
        # Commit order: the units of one commit are read together (one pyarrow scan), commit after
        # commit; rows within a commit come in no particular order.
        runs: list[list[ScanUnit]] = []
        for u in units:
            if not runs or u.constants.get(COMMIT_VERSION) != runs[-1][0].constants.get(COMMIT_VERSION):
                runs.append([])
            runs[-1].append(u)
        for i, run in enumerate(runs):
            # only the first commit's read hurries its first rows (time to the first batch)
            batches = reader.read(run, self.columns, self.predicate, batch_size, first_rows_early=i == 0)
            yield from _with_metadata(batches_of_at_most(batches, batch_size), out)

    def to_reader(self, batch_size: int | None = None) -> pa.RecordBatchReader:
        """The change rows, streamed (nothing is read before the first batch is pulled)."""
        from .read import checked_batch_size

        checked_batch_size(batch_size)  # refused now, not at the first batch
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches(batch_size))

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.to_batches()), schema=self.schema)

    def __repr__(self) -> str:
        return f"ChangeScan({self.feed.storage.root_uri!r}, {self.feed.start}..{self.feed.end}, columns={self.columns})"


def _with_metadata(batches: Iterator[pa.RecordBatch], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    md = schema.metadata
    for b in batches:
        yield b.replace_schema_metadata(md) if md else b


def changes(
    table: DeltaTable,
    start: Any,
    end: Any = None,
    columns: Sequence[str] | None = None,
    predicate: Any = None,
) -> ChangeScan:
    """``DeltaTable.changes``: see :class:`ChangeScan`."""
    return ChangeScan(load_change_feed(table, start, end), columns, predicate)


__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_FIELDS",
    "ChangeFeed",
    "ChangeScan",
    "PlanResult",
    "SOURCE_COLUMNS",
    "changes",
    "clear_cache",
    "load_change_feed",
]
