"""The version range of a change feed: bounds given as versions or timestamps, resolved to
commit versions the way time travel resolves them (a start instant selects the first commit at or
after it, an end instant the last commit at or before it; ``end`` is inclusive)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..arguments import is_version_text
from ..errors import ArgumentError, InvalidRangeError, VersionNotFoundError
from ..log.segment import LogListing
from ..lru import LruCache
from ..timestamps import CommitTimeline, below_micros, parse_iso, to_micros

if TYPE_CHECKING:
    from ..table import DeltaTable


@dataclass(frozen=True)
class Instant:
    """A point in time in microseconds since the epoch (UTC); a change-range bound by time."""

    micros: int

    @classmethod
    def from_nanos(cls, ns: int, round_up: bool) -> Instant:
        return cls(-((-ns) // 1000) if round_up else ns // 1000)

    def __str__(self) -> str:
        return _fmt_us(self.micros)


def _fmt_us(us: int) -> str:
    try:
        return (dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(microseconds=us)).isoformat()
    except (OverflowError, ValueError):  # outside years 1..9999: a message, not a crash
        return f"{us} us from 1970-01-01T00:00:00+00:00"


class TextVersion(int):
    """A version given as text (``'3'``), which keeps that text for an error to quote."""

    text: str

    def __new__(cls, text: str) -> TextVersion:
        out = super().__new__(cls, int(text))
        out.text = text
        return out


def as_bound(value: Any, argument: str, table: str | None = None) -> int | Instant | None:
    """A version (int) or an :class:`Instant` from what a user passes (int, datetime, date, str);
    ``table`` (its name or location) is named in errors."""
    what = f"table_changes on {table}" if table else "table_changes"
    if value is None:
        return None
    if isinstance(value, (Instant, TextVersion)):
        return value
    if isinstance(value, bool):
        raise ArgumentError(f"{what}: {argument} must be a version or a timestamp, got {value!r}")
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if v < 0:
            raise InvalidRangeError(f"{what}: {argument} version must not be negative, got {v}")
        return v
    if isinstance(value, str):
        text = value.strip()
        if is_version_text(text):
            return TextVersion(text)
        parsed = parse_iso(text)
        if parsed is None:
            raise ArgumentError(
                f"{what}: {argument} {value!r} is neither a version nor an ISO-8601 timestamp"
            )
        value, finer = parsed
        if finer and argument == "start":  # the first commit at or after it: round up
            return Instant(to_micros(value) + 1)
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise ArgumentError(f"{what}: {argument} must be a version or a timestamp, got {value!r}")
        micros = to_micros(value, f"{what}: {argument}")  # floored
        return Instant(micros + 1 if argument == "start" and below_micros(value) else micros)
    if isinstance(value, dt.datetime) and hasattr(value, "value") and hasattr(value, "to_pydatetime"):
        # a pandas.Timestamp (a datetime subclass; ``value``: UTC nanoseconds, naive or not)
        # keeps its nanoseconds: a start rounds up to the next microsecond
        return Instant.from_nanos(int(value.value), round_up=argument == "start")
    if isinstance(value, dt.datetime):
        return Instant(to_micros(value))  # naive: UTC
    if isinstance(value, dt.date):
        return as_bound(dt.datetime(value.year, value.month, value.day), argument, table)
    raise ArgumentError(
        f"{what}: {argument} must be a version (integer) or a timestamp (datetime, date or ISO "
        f"string), got {value!r}"
    )


def resolve_range(
    table: DeltaTable, start: Any, end: Any, listing: LogListing | None = None
) -> tuple[int, int]:
    """(start version, end version) of a change range; ``end`` None means the latest version."""
    listing = listing if listing is not None else table.listing()
    where = table.storage.root_uri
    s = as_bound(start, "start", where)
    e = as_bound(end, "end", where)
    if s is None:
        raise InvalidRangeError(f"table_changes on {where}: a start version or timestamp is required")
    latest = listing.latest_version()
    timeline = None
    if isinstance(s, Instant) or isinstance(e, Instant):
        timeline = table_timeline(table, listing)
    if isinstance(s, Instant):
        ms = -((-s.micros) // 1000)  # commits are in ms: first commit at or after the instant
        try:
            s_v = timeline.version_at_or_after(ms)
        except VersionNotFoundError as err:
            raise VersionNotFoundError(f"table_changes on {where}: start {err}") from err
    else:
        s_v = s
    if e is None:
        e_v = latest
    elif isinstance(e, Instant):
        try:
            e_v = timeline.version_at_or_before(e.micros // 1000)
        except VersionNotFoundError as err:
            raise VersionNotFoundError(f"table_changes on {where}: end {err}") from err
    else:
        e_v = e
    if s_v > latest:
        raise VersionNotFoundError(
            f"table_changes: start version {s_v} is after the latest version {latest} of {where}"
            f"{_bound_hint(s)}"
        )
    if s_v > e_v:
        if isinstance(s, Instant) or isinstance(e, Instant):
            raise InvalidRangeError(
                f"table_changes: the range {_bound_text(s)} .. {_bound_text(e)} selects no commit of {where} "
                f"(start resolves to version {s_v}, end to version {e_v})"
            )
        raise InvalidRangeError(f"table_changes: start version {s_v} is after end version {e_v} of {where}")
    if e_v > latest:
        raise VersionNotFoundError(
            f"table_changes: end version {e_v} is after the latest version {latest} of {where}"
            f"{_bound_hint(e)}"
        )
    return int(s_v), int(e_v)  # plain ints (a TextVersion only serves the errors above)


def date_digits_hint(text: str) -> str:
    """For a version given as text of 8 digits that also read as a calendar date (``'20240101'``):
    how that date is written, since digits alone are a version where a version or a time is
    taken ('' for other text)."""
    text = text.strip()
    if len(text) != 8 or not text.isdigit():
        return ""
    try:
        day = dt.date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        return ""
    return f" ({text!r} is read as a version: digits alone are one here; the date is '{day.isoformat()}')"


def _bound_hint(bound: int | Instant | None) -> str:
    return date_digits_hint(bound.text) if isinstance(bound, TextVersion) else ""


def _bound_text(b: int | Instant | None) -> str:
    if b is None:
        return "latest"
    return f"version {b}" if isinstance(b, int) else f"timestamp {b}"


_TIMELINES: LruCache[CommitTimeline] = LruCache(8)


def table_timeline(table: DeltaTable, listing: LogListing) -> CommitTimeline:
    """The table's commit timeline, cached per listing state (the latest snapshot is loaded once)."""
    key = (*table.storage.cache_key, _listing_key(listing))
    # a copy or restore tool may have given an older commit file another time since
    return _TIMELINES.get_or_make(key, lambda: table.timeline(listing), lambda t: t.same_file_times(listing))


def _listing_key(listing: LogListing) -> tuple:
    versions = listing.commit_versions
    info = tuple((v, listing.commits[v].size, listing.commits[v].mtime_or_none()) for v in versions[-1:])
    return (len(versions), versions[0] if versions else None, info, tuple(sorted(listing.checkpoints)))


def clear_timelines() -> None:
    _TIMELINES.clear()
