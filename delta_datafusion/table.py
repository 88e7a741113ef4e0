"""``DeltaTable``: the entry point. A location plus storage options; snapshots on demand."""

from __future__ import annotations

import contextlib
import itertools
import numbers
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from .arguments import integer
from .errors import ArgumentError, LogCorruptError, MissingLogFileError
from .log.actions import CommitData, read_commits, read_newest_first
from .log.checkpoint import check_json_lines
from .log.checksum import checksum_for
from .log.segment import LogListing, build_segment, list_log
from .protocol import Metadata
from .snapshot import Snapshot, latest_protocol_metadata
from .storage import Storage
from .timestamps import CommitTimeline, to_millis

if TYPE_CHECKING:
    from .changes import ChangeScan


#: Commits :meth:`DeltaTable.history` reads at once (in parallel on object stores) and holds.
_HISTORY_BATCH = 64

#: The columns of :meth:`DeltaTable.history`.
HISTORY_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("timestamp", pa.int64()),
        ("operation", pa.string()),
        ("commit_info", pa.string()),
    ]
)

#: Listings of ``_delta_log`` tried again when a file they named is gone before it is read.
LISTING_RETRIES = 2

T = TypeVar("T")


def relisting(attempt: Callable[[], T]) -> T:
    """``attempt()``, which lists ``_delta_log`` and reads what the listing names, run again
    (``LISTING_RETRIES`` times at most) when a file listed is gone before it is read: a
    checkpoint and log cleanup by a concurrent writer. Spark lists again too, rather than fail."""
    for _ in range(LISTING_RETRIES):
        try:
            return attempt()
        except MissingLogFileError:
            continue
    return attempt()


#: Epoch milliseconds of 9999-12-31T23:59:59.999Z, the latest time ISO-8601 text and ``datetime``
#: reach.
LAST_EPOCH_MILLIS = 253_402_300_799_999


def _check_epoch_millis(timestamp: Any) -> None:
    """An integer ``timestamp`` is epoch milliseconds; one after the year 9999 is refused:
    microseconds or nanoseconds (``time.time_ns()``, ``pandas.Timestamp.value``) read as
    milliseconds are a time far ahead, whose "latest commit at or before" is the latest version,
    read without a word. (One before the year 1 is "before the earliest commit", an error.)"""
    if not isinstance(timestamp, numbers.Integral) or isinstance(timestamp, bool):
        return
    if timestamp > LAST_EPOCH_MILLIS:
        raise ArgumentError(
            f"timestamp {int(timestamp)} read as epoch milliseconds is after the year 9999 (an integer "
            "timestamp counts milliseconds since 1970-01-01 UTC: microseconds or nanoseconds?)"
        )


class DeltaTable:
    """A Delta table at a location (local path, ``file://`` or any fsspec URL)."""

    def __init__(self, uri: str, storage_options: dict[str, Any] | None = None):
        self.storage = Storage(uri, storage_options)
        self.uri = self.storage.uri

    @classmethod
    def from_storage(cls, storage: Storage) -> DeltaTable:
        """The table of an opened :class:`Storage` (no second parse of its location)."""
        table = cls.__new__(cls)
        table.uri, table.storage = storage.uri, storage
        return table

    def listing(self) -> LogListing:
        """One listing of the table's _delta_log (pass it on to avoid listing again)."""
        return list_log(self.storage)

    def latest_version(self) -> int:
        """The newest version in the log (one listing of ``_delta_log`` per call)."""
        return self.listing().latest_version()

    def snapshot(
        self, version: int | None = None, timestamp: Any = None, listing: LogListing | None = None
    ) -> Snapshot:
        """The table at ``version``, or as of ``timestamp`` (latest commit at or before it), or latest.

        ``timestamp``: a datetime (naive means UTC), a date (its midnight UTC), an ISO-8601
        string, a numpy datetime64 or an integer of epoch milliseconds."""
        if version is not None and timestamp is not None:
            raise ArgumentError("pass either version or timestamp, not both")
        if version is not None:
            version = integer(version, "version")  # numpy integers too, as table_changes takes them
        if timestamp is not None:
            _check_epoch_millis(timestamp)
            timestamp = to_millis(timestamp)  # a timestamp it cannot read fails before any read
        if listing is not None and not isinstance(listing, LogListing):
            raise ArgumentError(
                f"listing must be a LogListing from DeltaTable.listing(), got {type(listing).__name__}"
            )
        if listing is None:
            return relisting(lambda: self._snapshot(version, timestamp, self.listing()))
        return self._snapshot(version, timestamp, listing)

    def _snapshot(self, version: int | None, timestamp: Any, listing: LogListing) -> Snapshot:
        if timestamp is None:
            return Snapshot(self.storage, build_segment(listing, version))
        latest, timeline = self._latest_and_timeline(listing)
        version = timeline.version_at_or_before(timestamp)
        if version == latest.version:
            return latest
        segment = build_segment(listing, version)
        # the commits the latest snapshot read already (same checkpoint): not read again
        read = {c.version: c for c in latest.commit_data}
        reuse = [read[v] for v, _ in segment.commits] if all(v in read for v, _ in segment.commits) else None
        return Snapshot(self.storage, segment, reuse)

    def timeline(self, listing: LogListing | None = None) -> CommitTimeline:
        """The commits' timestamps as time travel and ``changes()`` use them: ``timestamp(v)``
        (ms), ``version_at_or_before(t)`` and ``version_at_or_after(t)``."""
        listing = listing if listing is not None else self.listing()
        return CommitTimeline(self.storage, listing, self._latest_metadata(listing, {}))

    def _latest_and_timeline(self, listing: LogListing) -> tuple[Snapshot, CommitTimeline]:
        """The latest snapshot and the commit timeline: the latest metadata says whether
        commits carry in-commit timestamps."""
        latest = Snapshot(self.storage, build_segment(listing, None))
        return latest, CommitTimeline(self.storage, listing, latest.metadata)

    def _latest_metadata(self, listing: LogListing, read: dict[int, CommitData]) -> Metadata:
        """The latest metadata, as the latest snapshot has it, from the commits read newest first
        until protocol and metaData are found, or the newest version checksum file (Spark writes
        one per commit) when the commits after it have not both: the snapshot reads every commit
        after its checkpoint. Those read are left in ``read`` (by version). The reads end with
        the search, a failed one too (its exception would otherwise hold the reading threads)."""
        segment = build_segment(listing, None)
        checksum = checksum_for(listing, segment)
        # the commits at and before the checksum's version are read only if it cannot be used
        # (no read ahead of those while the commits after it are searched)
        newer, older = segment.commits, ()
        if checksum is not None:
            newer = tuple((v, f) for v, f in segment.commits if v > checksum.version)
            older = segment.commits[: len(segment.commits) - len(newer)]
        with (
            contextlib.closing(read_newest_first(self.storage, newer, read)) as first,
            contextlib.closing(read_newest_first(self.storage, older, read)) as then,
        ):
            commits = itertools.chain(first, then)
            return latest_protocol_metadata(self.storage, segment, commits, checksum)[1]

    def history(self, limit: int | None = None) -> pa.Table:
        """One row per available commit, oldest first: version, timestamp (ms; the in-commit
        timestamp when enabled, else the file modification time made strictly increasing),
        operation and commit_info (the commit's ``commitInfo`` action as JSON text: parameters,
        metrics, engine, user; NULL without one). ``limit``: only the newest ``limit`` commits
        (each listed commit is a read)."""
        if limit is not None and integer(limit, "limit") < 0:
            raise ArgumentError(f"limit must be at least 0, got {limit!r}")
        return relisting(lambda: self._history(limit))

    def _history(self, limit: int | None) -> pa.Table:
        """:meth:`history` from one listing; each commit is read once, for its timestamp and
        commitInfo (in batches, so that a long log is not held in memory at once)."""
        import io

        listing = self.listing()
        versions = listing.commit_versions
        if limit is not None:
            versions = versions[len(versions) - min(int(limit), len(versions)) :]
        read: dict[int, CommitData] = {}
        timeline = CommitTimeline(self.storage, listing, self._latest_metadata(listing, read))
        wanted = set(versions)
        read = {v: c for v, c in read.items() if v in wanted}
        rows = []
        for start in range(0, len(versions), _HISTORY_BATCH):
            batch = versions[start : start + _HISTORY_BATCH]
            more = [(v, listing.commits[v]) for v in batch if v not in read]
            read.update((c.version, c) for c in read_commits(self.storage, more))
            for v in batch:
                commit = read.pop(v)
                data = commit.data
                info, text = {}, None
                for line in io.BytesIO(data):
                    if b'"commitInfo"' in line:
                        info, text = _commit_info(line, commit.info.path) or ({}, None)
                        break
                else:  # none (rare: writers write one): a commit cut before it is damaged too
                    check_json_lines(data, commit.info.path)
                op = info.get("operation")
                rows.append(
                    {
                        "version": v,
                        "timestamp": timeline.timestamp(v, data),
                        "operation": op if isinstance(op, str) else None,
                        "commit_info": text,
                    }
                )
        return pa.Table.from_pylist(rows, HISTORY_SCHEMA)

    def changes(
        self, start: Any, end: Any = None, columns: list[str] | None = None, predicate: Any = None
    ) -> ChangeScan:
        """The change data feed of versions ``start..end`` (inclusive; ``end`` None = latest).

        ``start``/``end`` are versions (int) or timestamps (datetime, date, ISO string). Returns a
        :class:`~delta_datafusion.changes.ChangeScan`: ``.files()`` is the change-scan metadata,
        ``.to_reader()`` streams the rows (table columns plus ``_change_type``,
        ``_commit_version``, ``_commit_timestamp``), ``.to_table()`` collects them. ``predicate``
        (SQL text, a pyarrow expression or a package predicate) prunes commits and files and
        filters rows.
        """
        from .changes import changes

        return changes(self, start, end, columns=columns, predicate=predicate)

    def __repr__(self) -> str:
        return f"DeltaTable({self.uri!r})"


def _commit_info(line: bytes, path: str) -> tuple[dict, str | None] | None:
    """The ``commitInfo`` object of a commit line and its JSON text; None when the line is not
    what the protocol describes (commitInfo is informational: history still lists the version).
    A line that is not JSON at all is a damaged commit ``path`` (cut short, overwritten), which
    every other read refuses: LogCorruptError."""
    import json

    try:
        action = json.loads(line)
    except RecursionError:  # JSON nested deeper than Python parses: valid, but not a commitInfo
        return None
    except ValueError as e:
        raise LogCorruptError(f"{path}: cannot parse the commitInfo line: {e}") from e
    info = action.get("commitInfo") if isinstance(action, dict) else None
    if not isinstance(info, dict):
        return None
    return info, _value_text(line, action) or _json_text(info)


def _value_text(line: bytes, action: dict) -> str | None:
    """The text of the value of ``line``'s one key, ``action`` being the line parsed: the
    commitInfo as written, not written again (a third of history()'s time on a long log)."""
    if len(action) != 1 or line.count(b'"commitInfo"') != 1:  # a key written twice: the last one counts
        return None
    try:
        text = line.decode().strip()
    except UnicodeDecodeError:
        return None
    inner = text[1:-1].strip()
    if not inner.startswith('"commitInfo"'):  # the key written with escapes
        return None
    value = inner[len('"commitInfo"') :].lstrip()
    return value[1:].strip() if value.startswith(":") else None


def _json_text(info: dict) -> str | None:
    """``info`` as compact JSON text (None if it nests too deeply to write back)."""
    import json

    try:
        return json.dumps(info, separators=(",", ":"))  # ASCII: a lone surrogate escape stays text
    except (ValueError, RecursionError):
        return None
