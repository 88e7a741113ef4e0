"""The change feed of one version range (:class:`ChangeFeed`): its commits' protocol and
metadata checked, its change sources typed, and the planning that prunes those sources for a
predicate. It is the immutable, shareable unit the cache keeps and scans plan from."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import struct_of
from ..errors import (
    CdfNotEnabledError,
    ChangeDataFeedError,
    DeletionVectorError,
    DeltaError,
    LogCorruptError,
    VersionNotFoundError,
)
from ..log.actions import (
    CommitData,
    find_protocol_and_metadata,
    parse_json_actions,
    partition_values_type,
    read_commits,
)
from ..log.segment import LogListing, build_segment, missing_versions
from ..lru import LruCache
from ..partition_values import LogFileOf, typed_partition_column
from ..protocol import Metadata, Protocol
from ..read_schema import field_id
from ..replay import decode_paths, flatten_file_actions, resolve_paths
from ..scan_unit import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    LazyUnits,
    ScanUnit,
    check_deletion_vectors,
    dv_or_none,
    has_descriptor,
    logged_in,
)
from ..schema import logical_to_physical_names
from ..stats import typed_stats, widened_columns
from ..timestamps import CommitTimeline
from .change_types import change_type_candidates, change_type_literals, without_column
from .footers import FooterStats, footer_stats, footer_type_ok, stores_column, typed_values
from .schema_compat import appends_columns, incompatible_columns, layout_changes, retyped_columns
from .sources import (
    KIND_ADD,
    KIND_CDC,
    KIND_REMOVE,
    changes_commit_schema,
    dv_update_pieces,
    empty_raw_sources,
    merged_partition_values,
    once_per_commit,
    pair_key,
    piece,
    with_add_stats,
)
from .version_range import table_timeline

if TYPE_CHECKING:
    from ..read import UnitReader
    from ..storage.listing import FileInfo
    from ..table import DeltaTable


CHANGE_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)


TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")


CHANGE_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(COMMIT_VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, TIMESTAMP_TYPE),
)


#: Predicates whose selected sources one feed remembers.
PLAN_CACHE_SIZE = 16
#: A predicate with more literals is pruned on every statement, not remembered: hashing,
#: comparing and printing its key cost more than pruning (an IN list of 1,000 ints: 4.3 ms
#: against 2.8 ms; of 100,000 strings: 400 ms against 80 ms), and 16 remembered ones of that
#: size held 600 MB of literals per feed.
PLAN_CACHE_MAX_LITERALS = 500


@dataclass(frozen=True)
class _Selection:
    """What pruning selected for one predicate: source indices, the sources proved to match
    whole, and the counts after each stage (a few bytes per selected source, not scan units)."""

    rows: np.ndarray
    matching: np.ndarray | None
    after_change: int
    after_partition: int
    extra: dict[str, Any]


@dataclass
class PlanResult:
    """What :meth:`ChangeFeed.plan` selected and how many sources each pruning stage left."""

    units: Sequence[ScanUnit]  # a FeedUnits: made when a read first asks
    selected: pa.Table
    total: int
    after_change: int
    after_partition: int
    after_stats: int
    predicate: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


class FeedUnits(LazyUnits):
    """The scan units of selected change sources, made when first iterated or indexed.

    ``files()``, EXPLAIN and a plan's file counts need none: made on every plan, the units of a
    warm feed of 42,000 sources cost ~150 ms CPU a plan, nearly all of ``files()`` (see
    :class:`~delta_datafusion.scan_unit.FileUnits`, the same for a table's files). Descriptors
    are checked now, as making the units would."""

    def __init__(
        self,
        feed: ChangeFeed,
        sources: pa.Table,
        all_rows_match: np.ndarray | None = None,
        _checked: bool = False,
    ):
        if not _checked:
            for col in ("drop_rows", "only_rows"):
                try:
                    check_deletion_vectors(
                        pa.table(
                            {"deletion_vector": sources.column(col), "location": sources.column("location")}
                        )
                    )
                except DeletionVectorError as e:
                    at = pc.index(sources.column("location"), getattr(e, "location", None)).as_py()
                    raise feed.dv_error(e, sources.column("version")[max(at, 0)].as_py()) from e
        super().__init__(sources)
        self.feed = feed
        self.sources = sources
        self.all_rows_match = all_rows_match

    def _make(self) -> list[ScanUnit]:
        return self.feed.units(self.sources, self.all_rows_match)

    def take(self, indices: np.ndarray) -> FeedUnits:
        """The units of the sources at ``indices``, in that order (none made)."""
        match = None if self.all_rows_match is None else self.all_rows_match[indices]
        return FeedUnits(self.feed, self.sources.take(pa.array(indices, pa.int64())), match, _checked=True)

    def any_change_data(self) -> bool:
        """Is one of the sources a cdc file (a unit with ``has_change_type_column``)?"""
        return bool(pc.any(pc.equal(self.sources.column("kind"), KIND_CDC)).as_py())

    def counted(self, columns: Sequence[str]) -> SourceCounts | None:
        """These sources as :func:`~delta_datafusion.read.known_rows.known_file_rows` counts a
        table's files, for a read of ``columns`` that are partition values or change constants
        (None when one is neither)."""
        known = set(CHANGE_COLUMNS) | set(self.feed.partition_columns)
        return SourceCounts(self, columns) if known.issuperset(columns) else None


class SourceCounts:
    """Change sources seen as a table's files by ``known_file_rows``: the rows of each source
    known from the log (numRecords less the drop_rows cardinality) and its values of the read
    columns, so ``count(*)`` and change-column-only reads make units only for the sources read
    (a full feed of 42,000 sources made 42,000). numRecords is hidden where the per-unit checks
    (``known_row_count``, ``constant_columns``) would read the file: a source keeping some rows
    (only_rows), a cdc file asked for a change column (its constants are not trusted), a source
    without partition values."""

    def __init__(self, units: FeedUnits, columns: Sequence[str]):
        src = units.sources
        n = src.num_rows
        self.units = units
        self.partition_columns = list(columns)
        match = units.all_rows_match
        self.all_rows_match = None if match is None else pa.array(match, pa.bool_())
        stats = src.column("stats").combine_chunks()
        if stats.type.get_field_index("numRecords") >= 0:
            num = pc.struct_field(stats, "numRecords")
        else:
            num = pa.nulls(n, pa.int64())
        unknown = has_descriptor(src.column("only_rows").combine_chunks())
        pv = src.column("partition_values").combine_chunks()
        parts = {f.name for f in pv.type} if units.feed.partition_columns else set()
        parts &= set(units.feed.partition_columns)
        constants = {
            COMMIT_VERSION: src.column("version"),
            COMMIT_TIMESTAMP: src.column("timestamp").cast(pa.int64()),
            CHANGE_TYPE: src.column("change_type"),
        }
        values = []
        for c in columns:
            if c in parts:
                values.append(pc.struct_field(pv, c))
                unknown = pc.or_(unknown, pc.is_null(pv))
            elif c in units.feed.partition_columns:
                values.append(pa.nulls(n, pa.null()))  # not among the source's values: read
                unknown = pa.array(np.ones(n, bool))
            else:  # a change constant (the read's caller asks for no stored column)
                values.append(constants[c].combine_chunks())
                unknown = pc.or_(unknown, pc.equal(src.column("kind").combine_chunks(), KIND_CDC))
        num = pc.if_else(unknown, pa.scalar(None, num.type), num)
        files = {
            "stats": pa.StructArray.from_arrays([num], names=["numRecords"]),
            "deletion_vector": src.column("drop_rows").combine_chunks(),
        }
        if columns:
            files["partition_values"] = pa.StructArray.from_arrays(values, names=list(columns))
        self.files = pa.table(files)

    def __len__(self) -> int:
        return self.files.num_rows

    def take(self, indices: np.ndarray) -> FeedUnits:
        return self.units.take(indices)


class ChangeFeed:
    """The change sources of ``start..end`` of a table (immutable, cached, shareable)."""

    def __init__(
        self,
        table: DeltaTable,
        start: int,
        end: int,
        listing: LogListing | None = None,
        known: Sequence[CommitData] = (),
    ):
        """``known``: commits already read (a registered table's snapshot's); those the listing
        still names unchanged are not read again."""
        from ..snapshot import Snapshot

        self.table = table
        self.storage = storage = table.storage
        self.start = start
        self.end = end
        #: the timeline the commit timestamps came from, and what they depend on (see same_file_times)
        self._file_timeline: CommitTimeline | None = None
        self._latest = -1
        self._latest_ict: tuple[int, int] | None = None
        self._uses_ict = False
        listing = listing if listing is not None else table.listing()
        where = storage.root_uri
        require_commits(listing, start, end, where)
        # The start snapshot gives protocol and metadata in force at the start. Its commits and
        # the range's are read in one batch, each once (on an object store, a round trip each).
        segment = build_segment(listing, start)
        older = [(v, info) for v, info in segment.commits if v < start]
        in_range = [(v, listing.commits[v]) for v in range(start, end + 1)]
        read = reuse_commits(known, older + in_range)
        wanted = [(v, info) for v, info in older + in_range if v not in read]
        read.update((c.version, c) for c in read_commits(storage, wanted))
        commits = [read[v] for v, _ in in_range]
        start_snap = Snapshot(storage, segment, [read[v] for v, _ in segment.commits])
        _require_feed(start_snap.metadata, start_snap.protocol, start, where, start, end, None)
        # Walk the protocol/metaData actions of the range (byte search: cheap for big commits).
        segments: list[tuple[int, Metadata]] = [(start, start_snap.metadata)]
        first = commits[0] if start > 0 and commits else None
        if (
            first is not None
            and find_protocol_and_metadata(first.data, first.info.path, first.escaped_letter)[1]
        ):
            # The start commit changes the metadata: the files it removes were written under the
            # schema before it, which decides whether they can be read with the end schema.
            try:
                prior = build_segment(listing, start - 1)
                # its commits were read for the start snapshot, unless it starts at another checkpoint
                reused = [read.get(v) for v, _ in prior.commits]
                before = Snapshot(storage, prior, reused if None not in reused else None).metadata
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
            p, m = find_protocol_and_metadata(c.data, c.info.path, c.escaped_letter)
            if p is not None:
                protocol = Protocol.from_action(p, c.info.path)
                protocol.check_readable(c.info.path)
            md = Metadata.from_action(m, c.info.path, protocol) if m is not None else None
            if md is not None:
                current = md
            elif p is not None:
                current = dataclasses.replace(current, ict_feature=protocol.supports_in_commit_timestamps)
            self._ict[c.version] = _ict_of(current, c.info.path)
            if md is not None or p is not None:
                _require_feed(current, protocol, c.version, where, start, end, md is not None)
            if md is not None:
                segments.append((c.version, md))
        self.protocol = protocol
        self.metadata: Metadata = segments[-1][1]
        self.segments = segments
        #: the segments where the schema, partitioning or mapping mode changed (what the schema
        #: checks compare), so that property-only metaData commits cost nothing there
        self.layouts = layout_changes(segments)
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
        self.commit_timestamps = self._timestamps(listing, commits)
        #: the listed commit files (errors name them; a reference, nothing is copied)
        self._commit_files = listing.commits
        self.sources = self._build_sources(commits)
        self._kinds = np.asarray(self.sources.column("kind").to_pylist(), dtype=object)
        self._physical_names = logical_to_physical_names(md.schema_json, md.column_mapping_mode)
        #: id mode: physical name -> field id, by which a file's columns are found (its footer's too)
        self._field_ids = (
            {f.name: field_id(f).decode() for f in md.physical_schema if field_id(f) is not None}
            if md.column_mapping_mode == "id"
            else None
        )
        self._change_types = np.asarray(self.sources.column("change_type").to_pylist(), dtype=object)
        #: the sources each planned predicate selected (see :meth:`plan`): a statement repeated on
        #: the same range plans again, and pruning (stats, footers) costs more than the read setup
        self._selections: LruCache[_Selection] = LruCache(PLAN_CACHE_SIZE)

    # -- construction ----------------------------------------------------------------------
    def _schema_changes(self, segments: list[tuple[int, Metadata]]) -> dict[str, list[tuple[int, int, str]]]:
        """Column -> [(first version, last version, reason)] of the ranges it cannot be read from;
        ``segments``: where the layout changed (:func:`layout_changes`)."""
        found: list[tuple[int, int, dict[str, str]]] = []
        memo: dict = {}  # traces over the shorter suffixes, computed first
        later: dict[str, str] = {}  # the columns found for the range after segment i
        unmapped = segments[-1][1].column_mapping_mode == "none"  # no mapping after segment i
        for i in reversed(range(len(segments) - 1)):
            md, newer = segments[i][1], segments[i + 1][1]
            unmapped = unmapped and md.column_mapping_mode == "none"
            if unmapped and md.partition_columns == newer.partition_columns and appends_columns(md, newer):
                # files written under md hold newer's columns but the appended ones: those are
                # refused as they are after it, the appended ones are NULL (a range of k commits
                # each adding a column compared k schemas of up to k columns: 1,000 took 8 s)
                names = {f["name"].lower() for f in md.schema_json["fields"]} if later else ()
                columns = {c: why for c, why in later.items() if c.lower() in names}
            else:
                columns = incompatible_columns([m for _, m in segments[i:]], memo)
            found.append((segments[i][0], segments[i + 1][0] - 1, columns))
            later = columns
        out: dict[str, list[tuple[int, int, str]]] = {}
        for v, last, columns in reversed(found):
            for col, why in columns.items():
                out.setdefault(col, []).append((v, last, why))
        return out

    def _timestamps(self, listing: LogListing, commits: list[CommitData]) -> np.ndarray:
        """Commit timestamps (us) of start..end as ``history()`` and time travel have them, which is
        how a range's timestamp bounds select commits: PROTOCOL.md's rule from the latest table
        properties (a commit's in-commit timestamp from the latest enablement version on, else its
        file time made strictly increasing). delta-kernel-rs gives every commit made while in-commit
        timestamps were enabled its in-commit timestamp, also once a later commit switched them off
        (or on again, from a later version): a row's ``_commit_timestamp`` could then lie outside
        the range that selected it (Spark's CDCReader names the file times as the ideal there)."""
        uses_ict = any(
            self._ict[c.version] is not None and c.version >= self._ict[c.version][0] for c in commits
        )
        self._latest = listing.latest_version()
        if uses_ict and self.end < self._latest:
            # whether those in-commit timestamps still count is the latest properties' call
            timeline = table_timeline(self.table, listing)
        else:
            # the end's properties are the latest; or no commit of the range had in-commit
            # timestamps, and the latest properties enable them (if at all) after the range
            timeline = CommitTimeline(self.storage, listing, self.metadata)
        self._file_timeline = timeline
        self._latest_ict = timeline.ict if uses_ict else None
        self._uses_ict = uses_ict
        out = np.zeros(self.end - self.start + 1, dtype=np.int64)
        for c in commits:
            out[c.version - self.start] = timeline.timestamp(c.version, c.data) * 1000
        return out

    def same_file_times(self, listing: LogListing) -> bool:
        """Whether the commit timestamps of this feed are still those ``listing`` gives: the file
        times they came from are unchanged, and when some came from in-commit timestamps, the
        latest properties still enable them from the same version (a later commit may switch them
        off)."""
        if not self._file_timeline.same_file_times(listing, upto=self.end):
            return False
        if not self._uses_ict or self.end == self._latest == listing.latest_version():
            return True  # no in-commit timestamp used, or the end's properties still the latest
        return table_timeline(self.table, listing).ict == self._latest_ict

    def _build_sources(self, commits: list[CommitData]) -> pa.Table:
        """The change sources of the range (SOURCE_COLUMNS), in commit order: a commit's cdc
        files if it has any; else its dataChange adds (inserts) and removes (deletes), and for a
        file removed and added again with another deletion vector, the rows whose state changed."""
        cdc, adds, removes = self._file_actions(commits)
        pieces: list[pa.Table] = []
        if cdc.num_rows:
            pieces.append(piece(cdc, KIND_CDC, None, None, None, with_stats=False))
        # Pairs: a remove and an add of the same file in one commit (deletion vector updates).
        add_pk = pair_key(adds)
        rem_pk = pair_key(removes)
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
            pieces.append(piece(plain_adds, KIND_ADD, "insert", None, dv))
        if plain_removes.num_rows:
            if self.physical_partitions:
                self._refuse_removes_without_partition_values(plain_removes)
            dv = plain_removes.column("deletionVector").combine_chunks()
            pieces.append(piece(plain_removes, KIND_REMOVE, "delete", None, dv))
        if pc.any(paired_add).as_py():
            pieces += dv_update_pieces(adds.filter(paired_add), removes, rem_pk)
        if not pieces:
            raw = empty_raw_sources(self.physical_partitions)
        else:
            raw = pa.concat_tables(pieces, promote_options="permissive")
            raw = raw.take(pc.sort_indices(raw, sort_keys=[("version", "ascending"), ("order", "ascending")]))
        return self._typed_sources(raw, lambda v, _: self._commit_file(v))

    def _refuse_removes_without_partition_values(self, removes: pa.Table) -> None:
        """A remove written without extended file metadata may leave out its partition values
        (PROTOCOL.md): its deleted rows' partition columns are unknown, and reading them as NULL
        would be wrong. Refused, as Spark (DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA) and
        deltalake do."""
        missing = removes.column("partitionValues").is_null()
        if not pc.any(missing).as_py():
            return
        first = removes.filter(missing).slice(0, 1).to_pylist()[0]
        commit = self._commit_file(first["version"])
        raise ChangeDataFeedError(
            f"table_changes on {self.storage.root_uri} {self.start}..{self.end}: the remove of data file "
            f"{first['path']} at version {first['version']}{f' ({commit})' if commit else ''} has no "
            "partitionValues (written without extendedFileMetadata), so the partition values of its "
            "deleted rows are unknown"
        )

    def _file_actions(self, commits: list[CommitData]) -> tuple[pa.Table, pa.Table, pa.Table]:
        """(cdc, adds, removes) of the commits, flat, with decoded paths and locations; adds and
        removes only with dataChange and only from commits without cdc files."""
        storage, parts = self.storage, self.physical_partitions
        aliases = self._partition_aliases()
        read_parts = parts + [a for names in aliases.values() for a in names]
        schema = changes_commit_schema(partition_values_type(read_parts))
        actions, counts = parse_json_actions(
            [c.data for c in commits],
            schema,
            [c.info.path for c in commits],
            [c.escaped_letter for c in commits],
        )
        per_row = pa.array(
            np.repeat(np.array([c.version for c in commits], dtype=np.int64), counts), pa.int64()
        )

        def flat(name: str) -> pa.Table:
            t = flatten_file_actions(
                actions.column(name), read_parts, per_row, f"{name} actions of {storage.root_uri}"
            )
            if aliases:
                pv = merged_partition_values(t.column("partitionValues").combine_chunks(), parts, aliases)
                t = t.set_column(t.schema.get_field_index("partitionValues"), "partitionValues", pv)
            if t.num_rows == 0:
                return t.append_column("location", pa.array([], pa.string()))
            decoded = decode_paths(t.column("path"))
            t = t.set_column(t.schema.get_field_index("path"), "path", decoded)
            return once_per_commit(t.append_column("location", resolve_paths(storage, decoded)))

        cdc = flat("cdc")
        cdc_versions = (
            pc.unique(cdc.column("version").combine_chunks()) if cdc.num_rows else pa.array([], pa.int64())
        )

        def data_change(t: pa.Table, kind: str) -> pa.Table:
            if t.num_rows == 0:
                return t
            if len(cdc_versions):
                t = t.filter(pc.invert(pc.is_in(t.column("version"), value_set=cdc_versions)))
            flag = t.column("dataChange")
            if flag.null_count:
                self._refuse_missing_data_change(t, kind)
            return t.filter(flag)

        adds = flat("add")
        return cdc, data_change(adds, "add"), data_change(with_add_stats(flat("remove"), adds), "remove")

    def _refuse_missing_data_change(self, t: pa.Table, kind: str) -> None:
        """``dataChange`` is required on add and remove, and it decides whether a commit without
        cdc files contributes the action's rows: a missing one is not guessed (the kernel's
        table_changes fails on it too)."""
        first = t.filter(t.column("dataChange").is_null()).slice(0, 1).to_pylist()[0]
        version = first["version"]
        raise LogCorruptError(
            f"table_changes on {self.storage.root_uri} {self.start}..{self.end}: the {kind} of data file "
            f"{first['path']} at version {version} ({version:020d}.json) has no dataChange (a required "
            "field), so whether it changed the table's rows is unknown"
        )

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

    def _typed_sources(self, raw: pa.Table, log_file: LogFileOf) -> pa.Table:
        """``log_file``: the commit file of a version, for an error to name."""
        md = self.metadata
        n = raw.num_rows
        pv = typed_partition_column(
            raw,
            self.physical_partitions,
            [md.arrow_schema.field(c) for c in md.partition_columns],
            f"table_changes on {self.storage.root_uri} {self.start}..{self.end}",
            log_file,
        )
        retyped = retyped_columns(self.layouts)
        # a widening recorded only earlier in the range (writers may drop delta.typeChanges once
        # every live file has the new type, while the range still removes older files)
        layouts = self.layouts
        for i, (_, earlier) in enumerate(layouts[:-1]):
            if i + 2 < len(layouts) and appends_columns(earlier, layouts[i + 1][1]):
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
        :func:`change_type_candidates`); ``type_ranges`` (position in ``rows`` -> footer min/max
        of ``_change_type``) narrows those values. ``stats`` replaces the sources' stats.
        """
        from ..predicate import TRUE, referenced_columns
        from ..skipping import file_keep_mask

        if pred is None or pred == TRUE or len(rows) == 0:
            return np.ones(len(rows), dtype=bool)
        is_cdc = self._kinds[rows] == KIND_CDC
        ct_rows = self._change_types[rows]
        literals, safe = change_type_literals(pred)
        cdc_pred = pred if safe else without_column(pred, CHANGE_TYPE)
        # a predicate that does not read the change type (a partition filter) judges a cdc file
        # once, not once per change type it may hold (the cdf benchmark's part = 'p3': 1,144
        # judged rows -> 328)
        by_type = safe and CHANGE_TYPE in referenced_columns(cdc_pred)
        out = np.zeros(len(rows), dtype=bool)
        for cdc, group_pred, members in (
            (False, pred, np.flatnonzero(~is_cdc)),
            (True, cdc_pred, np.flatnonzero(is_cdc)),
        ):
            if len(members) == 0:
                continue
            if group_pred == TRUE:
                out[members] = True
                continue
            if not cdc:  # adds and removes: judged once, on their own change type
                pos_arr, types = members, list(ct_rows[members])
            elif not by_type:
                pos_arr, types = members, [None] * len(members)
            else:  # cdc files by type: once per value each may hold (a footer was read for each)
                pos, types = [], []
                for i in members:
                    values = change_type_candidates(literals, (type_ranges or {}).get(int(i)))
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
        values and statistics (a diff's statistics bound the rows it yields, see
        :mod:`.sources`); never for cdc files, whose ``_change_type`` is per row. Such sources
        answer ``count(*)`` and change-column-only queries from ``numRecords`` (see
        read/known_rows.py).
        """
        from ..skipping import file_all_match_mask

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
        from ..predicate import TRUE, literal_count

        src = self.sources
        total = src.num_rows
        if pred is None or pred == TRUE or not total:
            sel = _Selection(np.arange(total), None, total, total, {"range": f"{self.start}..{self.end}"})
        elif literal_count(pred) > PLAN_CACHE_MAX_LITERALS:
            sel = self._select(pred, footers)
        else:
            # the selection depends only on the feed's sources and its files' footers, which never
            # change. Predicates compare by value (literals by type and value; -0.0 and 0.0
            # differ, as in an IN list); the key holds their SQL text too.
            key = (footers, pred, str(pred))
            sel = self._selections.get_or_make(key, lambda: self._select(pred, footers))
        rows = sel.rows
        selected = src.take(pa.array(rows, pa.int64())) if len(rows) != total else src
        return PlanResult(
            FeedUnits(self, selected, sel.matching),
            selected,
            total,
            sel.after_change,
            sel.after_partition,
            len(rows),
            pred,
            dict(sel.extra),
        )

    def _select(self, pred: Any, footers: bool) -> _Selection:
        """The pruning stages of :meth:`plan` for a predicate that is not TRUE."""
        from ..predicate import referenced_columns, split_by_columns

        src = self.sources
        rows = np.arange(src.num_rows)
        extra: dict[str, Any] = {"range": f"{self.start}..{self.end}"}
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
        matching = self._all_match(pred, rows) if len(rows) else None
        rows.setflags(write=False)
        if matching is not None:
            matching.setflags(write=False)
        return _Selection(rows, matching, after_change, after_part, extra)

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
        by_id = self._field_ids is not None
        infos = footer_stats(self.storage, list(zip(locations, sizes, strict=True)), wanted, by_id)
        if CHANGE_TYPE in wanted:
            self._refuse_cdc_without_change_type(sel, infos, is_cdc[sel])
        stats, ranges = self._footer_struct(infos, wanted, is_cdc[sel])
        keep = self._keep(pred, sel, stats=stats, type_ranges=ranges)
        return rows[~np.isin(rows, sel[~keep])], len(sel)

    def _refuse_cdc_without_change_type(
        self, sel: np.ndarray, infos: list[FooterStats | None], cdc: np.ndarray
    ) -> None:
        """A change data file must store a change type for every row (PROTOCOL.md). Without the
        column, or with NULLs in it, the read gives NULL change types, which the reader refuses,
        but only in rows that reach it: a filter on ``_change_type`` drops them first and the
        commit would read as changing less, or nothing. The filter is what reads these footers,
        so it is refused here: by the footer's null count of the column; a footer without
        statistics of it (no writer's) is looked at again for the column itself (an unreadable
        footer is left to the read to report)."""
        for k, info in enumerate(infos):
            if not cdc[k] or info is None:
                continue
            found = info.columns.get(CHANGE_TYPE)
            if found is not None and not found[2]:
                continue  # stored, no NULL (or an unknown null count: the reader checks what it reads)
            row = (
                self.sources.slice(int(sel[k]), 1)
                .select(["path", "location", "size", "version"])
                .to_pylist()[0]
            )
            if found is not None:
                why = f"holds {found[2]} NULL {CHANGE_TYPE} value(s)"
            elif stores_column(self.storage, row["location"], row["size"], CHANGE_TYPE) is False:
                why = f"has no {CHANGE_TYPE} column"
            else:
                continue
            commit = self._commit_file(row["version"])
            raise ChangeDataFeedError(
                f"table_changes on {self.storage.root_uri} {self.start}..{self.end}: the change data file "
                f"{row['path']} of version {row['version']}{logged_in(commit)} {why}; a change data file "
                "stores the change type of every row (PROTOCOL.md, Change Data Files)"
            )

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
            found = [self._footer_column(i, phys) for i in infos]
            lo = [c[0] for c in found]
            hi = [c[1] for c in found]
            mins.append(typed_values(lo, f.type))
            maxs.append(typed_values(hi, f.type))
        for f in nc_type:
            phys = self._physical_names.get(f.name, f.name)
            if phys not in wanted or pa.types.is_struct(f.type):
                nulls.append(pa.nulls(n, f.type))
                continue
            nulls.append(typed_values([self._footer_column(i, phys)[2] for i in infos], f.type))
        num = pa.array([i.num_rows if i else None for i in infos], pa.int64())
        children = [
            num,
            struct_of(mins, list(mm_type), n),
            struct_of(maxs, list(mm_type), n),
            struct_of(nulls, list(nc_type), n),
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

    def _footer_column(self, info: FooterStats | None, phys: str) -> tuple[Any, Any, int | None]:
        """(min, max, null count) of a physical column in a footer, all None when unknown: in id
        mode a file column of that name with another field id is another column (the read gives
        the table's as NULL), so its statistics say nothing of it."""
        found = info.columns.get(phys) if info is not None else None
        if found is None:
            return None, None, None
        if self._field_ids is not None and (info.ids or {}).get(phys) != self._field_ids.get(phys):
            return None, None, None
        return found

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
        try:
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
        except DeletionVectorError as e:  # a descriptor without storageType: which commit holds it
            raise self.dv_error(e, cols["version"][len(out)]) from e
        return out

    def dv_error(self, e: DeletionVectorError, version: Any) -> DeletionVectorError:
        """``e`` (a descriptor without storageType) naming the range and the commit holding it."""
        return DeletionVectorError(
            f"table_changes on {self.storage.root_uri} {self.start}..{self.end}, version {version}, "
            f"{e}{logged_in(self._commit_file(version))}"
        )

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
        from ..read import UnitReader
        from ..read_schema import make_read_schema

        md = self.metadata
        rs = make_read_schema(
            md.arrow_schema, md.physical_schema, self.partition_columns, list(CHANGE_FIELDS)
        )
        # page windows: local files only (on an object store the index is a request per file)
        return UnitReader(
            self.storage,
            rs,
            self.storage.root_uri,
            self.end,
            page_windows=self.storage.is_local,
            log_file=lambda u: self._commit_file(u.constants.get(COMMIT_VERSION)),
        )

    def _commit_file(self, version: int | None) -> str | None:
        """The commit file of ``version`` in the range (for errors to name)."""
        info = self._commit_files.get(version) if version is not None else None
        return None if info is None else info.path

    def __repr__(self) -> str:
        return f"ChangeFeed({self.storage.root_uri!r}, {self.start}..{self.end}, sources={self.sources.num_rows})"


def reuse_commits(
    known: Sequence[CommitData], wanted: Sequence[tuple[int, FileInfo]]
) -> dict[int, CommitData]:
    """Version -> commit of ``known`` that is the file ``wanted`` (a listing's) names: same
    path, size, modification time and entity tag (commit files are not rewritten, but a table
    removed and written again at its location has new ones, on S3 with the old times when that
    happens within a second). A commit of ``known`` whose time is not known is read again (see
    ``provider.table_dataset``)."""
    by_version = {c.version: c for c in known}
    out: dict[int, CommitData] = {}
    for v, info in wanted:
        c = by_version.get(v)
        if (
            c is not None
            and c.info.path == info.path
            and len(c.data) == info.size
            and c.info.known_mtime is not None
            and c.info.etag == info.etag
            and c.info.known_mtime == info.mtime_or_none()
        ):
            out[v] = CommitData(v, info, c.data)
    return out


def _require_feed(
    md: Metadata, protocol: Protocol, version: int, where: str, start: int, end: int, changed: bool | None
) -> None:
    """The change data feed must be enabled at every version of the range: the property set and
    the protocol binding writers to it (delta-kernel-rs: the feature enabled). ``changed``: the
    version's commit has a metaData action (True), only a protocol action (False), or it is the
    start (None)."""
    if md.change_data_feed_enabled and protocol.supports_change_data_feed:
        return
    if not md.change_data_feed_enabled:
        why = (
            "its metaData action does not set delta.enableChangeDataFeed=true"
            if changed
            else "table property delta.enableChangeDataFeed is not 'true'"
        )
    else:
        features = ", ".join(sorted(protocol.writer_features)) or "none"
        why = (
            f"delta.enableChangeDataFeed is set, but its protocol (writer version {protocol.min_writer_version}"
            + (f", writer features: {features}" if protocol.min_writer_version >= 7 else "")
            + ") does not support the changeDataFeed feature, so writers need not have written the cdc files "
            "of its updates (PROTOCOL.md, Writer Requirements for AddCDCFile)"
        )
    raise CdfNotEnabledError(
        f"change data feed is not enabled at version {version} of {where} ({why}); it must be enabled for "
        f"every version of the range {start}..{end}"
    )


def _ict_of(md: Metadata, where: str) -> tuple[int, int] | None:
    """:attr:`Metadata.ict_enablement`, its error naming where the metadata is in force."""
    try:
        return md.ict_enablement
    except LogCorruptError as e:
        raise LogCorruptError(f"{where}: {e}") from e


def require_commits(listing: LogListing, start: int, end: int, where: str) -> None:
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
        # a feed needs the table's state at its start too: from the oldest checkpoint on, when
        # the first commits are gone (commit 2 listed, a checkpoint at 3: the feed starts at 3)
        first = listing.earliest_version() if have else None
        starts = f"; a change feed can start at version {first} or later" if have and first > have[0] else ""
        if have and not listing.checkpoints and 0 not in listing.commits:
            starts = (
                "; with commit 0 gone and no checkpoint, no version's state is known: no feed can be read"
            )
        raise VersionNotFoundError(
            f"table_changes: the commit {which} not available (log cleaned up or never written); "
            f"commits available: {span}{starts}"
        )
