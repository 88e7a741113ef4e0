"""Commit timestamps and timestamp -> version resolution (time travel and change ranges).

A commit's timestamp is its in-commit timestamp (``commitInfo.inCommitTimestamp``) from the
version in-commit timestamps were enabled at, and the commit file's modification time before
that. Modification times are made strictly increasing as Delta does, so that a timestamp maps
to one version.
"""

from __future__ import annotations

import datetime as dt
import numbers
import re
from bisect import bisect_left, bisect_right

import numpy as np

from .arguments import is_version_text
from .errors import ArgumentError, DeltaError, LogCorruptError, MissingLogFileError, VersionNotFoundError
from .log.actions import parse_action
from .log.segment import LogListing
from .protocol import Metadata
from .storage import Storage


def read_in_commit_timestamp(data: bytes, where: str) -> int:
    """The ``inCommitTimestamp`` of a commit (its commitInfo must be the first action)."""
    for line in data.splitlines():
        line = line.strip()
        if not line:
            continue
        action = parse_action(line, where)
        info = action.get("commitInfo") if isinstance(action, dict) else None
        ict = info.get("inCommitTimestamp") if isinstance(info, dict) else None
        if isinstance(ict, int) and not isinstance(ict, bool):  # a JSON true is no timestamp
            return ict
        break
    raise LogCorruptError(
        f"{where}: in-commit timestamps are enabled but the first action has no commitInfo.inCommitTimestamp"
    )


def to_millis(value: object) -> int:
    """Accept datetime/date, ISO strings, numpy datetime64, or integers (ms since epoch, numpy
    integers too); naive values are UTC. Text of digits alone is refused: it is a version where a
    version or a time is taken (``table_changes``), and as a time it could be a basic-form date or
    epoch seconds or milliseconds."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return to_micros(value) // 1000


def to_micros(value: object, argument: str = "timestamp") -> int:
    """Like :func:`to_millis` but keeps microseconds."""
    if isinstance(value, bool):
        raise ArgumentError(f"{argument} must be a timestamp, got {value!r}")
    if isinstance(value, numbers.Integral):
        return int(value) * 1000
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            raise ArgumentError(f"{argument} must be a timestamp, got {value!r}")
        return _datetime64_micros(value, argument)
    if isinstance(value, str):
        if is_version_text(value.strip()):
            raise ArgumentError(
                f"{argument} {value!r}: digits alone are not read as a time (they could be a basic-form "
                "date, epoch seconds or epoch milliseconds; where a version or a time is taken, as by "
                "table_changes, they are a version): write an ISO-8601 date or time ('2024-01-01', "
                "'2024-01-01T12:00:00Z', '20240101T120000Z') or give epoch milliseconds as an integer"
            )
        parsed = parse_iso(value)
        if parsed is None:
            raise ArgumentError(f"{argument} {value!r} is not an ISO-8601 timestamp")
        value = parsed[0]
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days * 86_400_000_000
    raise ArgumentError(
        f"{argument} must be a datetime, date, ISO string or epoch milliseconds, got {value!r}"
    )


#: ISO-8601 calendar date and time, each part extended or basic (consistently): date, then
#: optionally time (hours, minutes, seconds, a fraction of a second of any length) and an offset
#: (``Z`` or hours, minutes, seconds, with or without colons).
_ISO = re.compile(
    r"([0-9]{4})(-?)([0-9]{2})\2([0-9]{2})"
    r"(?:[Tt ]([0-9]{2})(?:(:?)([0-9]{2})(?:\6([0-9]{2})(?:[.,]([0-9]+))?)?)?"
    r"([Zz]|([+-])([0-9]{2})(?:(:?)([0-9]{2})(?:\13([0-9]{2})(?:\.([0-9]+))?)?)?)?)?"
)


def parse_iso(text: str) -> tuple[dt.datetime, bool] | None:
    """An ISO-8601 calendar date or date and time (``Z``/``z`` or an offset; naive is left naive),
    and whether it had digits below the microsecond (dropped here: a caller rounding up adds
    one); None when it is not one. Parsed by this grammar, then checked by
    ``datetime.fromisoformat`` in the extended form every supported Python reads: the same
    answer on Python 3.10 and 3.11, whose own readers differ (3.11 also takes a fraction of an
    hour as one of a second, and reads ``2024-01-02+05:00`` as 05:00)."""
    m = _ISO.fullmatch(text.strip())
    if m is None:
        return None
    year, _, month, day, hh, _, mm, ss, fraction, zone, sign, zh, _, zm, zs, zf = m.groups()
    out = f"{year}-{month}-{day}"
    finer = False
    if hh is not None:
        out += f"T{hh}:{mm or '00'}:{ss or '00'}"
        if fraction:
            finer = any(d != "0" for d in fraction[6:])
            out += "." + fraction[:6].ljust(6, "0")
        if zone in ("Z", "z"):
            out += "+00:00"
        elif zone:
            out += f"{sign}{zh}:{zm or '00'}"
            if zs:
                out += f":{zs}" + (f".{zf[:6].ljust(6, '0')}" if zf else "")
    try:
        return dt.datetime.fromisoformat(out), finer
    except ValueError:
        return None


#: Microseconds per numpy datetime64 unit (calendar units Y and M go through days).
_MICROS_PER = {"W": 7 * 86_400_000_000, "D": 86_400_000_000, "h": 3_600_000_000, "m": 60_000_000}
_MICROS_PER |= {"s": 1_000_000, "ms": 1_000, "us": 1}
_SUB_MICRO = {"ns": 10**3, "ps": 10**6, "fs": 10**9, "as": 10**12}
#: Years 1..9999, as datetime takes them.
_MICROS_RANGE = (-62_135_596_800_000_000, 253_402_300_799_999_999)


def below_micros(value: np.datetime64) -> bool:
    """Does a numpy datetime64 hold a part below the microsecond (floored away by to_micros)?"""
    unit, count = np.datetime_data(value.dtype)
    return unit in _SUB_MICRO and int(value.astype(np.int64)) * count % _SUB_MICRO[unit] != 0


def _datetime64_micros(value: np.datetime64, argument: str) -> int:
    """Microseconds since the epoch, floored, in Python integers (numpy's own unit casts wrap
    around silently beyond their range)."""
    unit, count = np.datetime_data(value.dtype)
    n = int(value.astype(np.int64)) * count
    if unit in _SUB_MICRO:
        micros = n // _SUB_MICRO[unit]
    elif unit in _MICROS_PER:
        micros = n * _MICROS_PER[unit]
    elif abs(n) <= 120_000:  # Y or M: within years 1..9999 give or take; days are exact
        micros = int(np.datetime64(n, unit).astype("datetime64[D]").astype(np.int64)) * _MICROS_PER["D"]
    else:
        micros = None
    if micros is None or not _MICROS_RANGE[0] <= micros <= _MICROS_RANGE[1]:
        raise ArgumentError(f"{argument} {value!r} is outside the years 1..9999")
    return micros


class CommitTimeline:
    """Timestamps (ms) of the commits in a listing, computed lazily for ICT versions."""

    def __init__(self, storage: Storage, listing: LogListing, metadata: Metadata):
        self.storage = storage
        self.listing = listing
        self.versions = listing.commit_versions
        try:
            self.ict = metadata.ict_enablement
        except LogCorruptError as e:
            raise LogCorruptError(f"{storage.root_uri}: {e}") from e
        if self.ict is not None and self.versions and self.ict[0] > self.versions[-1]:
            # the timestamps after the enablement timestamp would be looked for among no commits
            raise LogCorruptError(
                f"{storage.root_uri}: table property delta.inCommitTimestampEnablementVersion is "
                f"{self.ict[0]}, after the latest version {self.versions[-1]}"
            )
        self._cache: dict[int, int] = {}
        self._mono: dict[int, int] | None = None  # see _by_file_time
        self._file_times: dict[int, int] = {}

    def _by_file_time(self) -> dict[int, int]:
        """Timestamps of the commits before in-commit timestamps were enabled (all, without
        them): file modification times, each made greater than the one before. Read on first
        need: a store that gives no modification times (zip) still answers for ICT commits."""
        mono = self._mono
        if mono is None:
            files: dict[int, int] = {}
            mono, last = {}, None
            for v in self.versions:
                if self.ict is not None and v >= self.ict[0]:
                    break
                t = files[v] = self.listing.commits[v].mtime_ms
                if last is not None and t <= last:
                    t = last + 1
                mono[v] = last = t
            self._file_times, self._mono = files, mono
        return mono

    def same_file_times(self, listing: LogListing, upto: int | None = None) -> bool:
        """Whether ``listing`` gives the commits this timeline takes from file times the same
        times (every one counts: each timestamp is made greater than all before it); ``upto``:
        only the timestamps of versions up to it are used."""
        try:
            self._by_file_time()
        except MissingLogFileError:
            return False
        except DeltaError:  # no modification times on this store: none are used, none can change
            return True
        commits = listing.commits
        return all(
            v in commits and commits[v].mtime_ms == t
            for v, t in self._file_times.items()
            if upto is None or v <= upto
        )

    def timestamp(self, version: int, data: bytes | None = None) -> int:
        """``data``: the commit's bytes, when the caller has read them (not read again)."""
        if self.ict is None or version < self.ict[0]:
            mono = self._by_file_time()
            if version in mono:
                return mono[version]
        if version not in self.listing.commits:
            have = f"{self.versions[0]}..{self.versions[-1]}" if self.versions else "none"
            raise VersionNotFoundError(
                f"no commit file for version {version} in {self.listing.log_dir} (log cleaned up or "
                f"never written); commits available: {have}"
            )
        if version not in self._cache:
            info = self.listing.commits[version]
            if data is None:
                data = self.storage.read_listed(info.path, info.listed_size)
            self._cache[version] = read_in_commit_timestamp(data, info.path)
        return self._cache[version]

    def _range_text(self) -> str:
        first, last = self.versions[0], self.versions[-1]
        try:
            start = f"{_fmt(self.timestamp(first))} (version {first})"
        except DeltaError:
            if self.ict is None or self.ict[0] > last:
                raise
            # a store without modification times: the commits before in-commit timestamps have none
            ict = self.versions[bisect_left(self.versions, self.ict[0])]
            start = f"{_fmt(self.timestamp(ict))} (version {ict}; the commits before it have no time on this store)"
        return f"{start} .. {_fmt(self.timestamp(last))} (version {last})"

    def version_at_or_before(self, timestamp: object) -> int:
        """Latest version whose commit timestamp is <= ``timestamp`` (time travel 'as of'):
        anything :func:`to_millis` takes, an integer being milliseconds since the epoch."""
        ts_ms = to_millis(timestamp)
        if not self.versions:
            raise VersionNotFoundError(f"{self.listing.log_dir} has no commit files to resolve timestamps")
        idx = self._bisect(ts_ms)
        if idx < 0:
            raise VersionNotFoundError(
                f"timestamp {_fmt(ts_ms)} is before the earliest commit; available history: {self._range_text()}"
            )
        return self.versions[idx]

    def version_at_or_after(self, timestamp: object) -> int:
        """Earliest version whose commit timestamp is >= ``timestamp`` (start of a change range),
        given as to :meth:`version_at_or_before`."""
        ts_ms = to_millis(timestamp)
        if not self.versions:
            raise VersionNotFoundError(f"{self.listing.log_dir} has no commit files to resolve timestamps")
        idx = self._bisect(ts_ms)
        if idx < 0 and self.versions[0] > 0:
            # the commits before the earliest one left were cleaned up: one of them may have
            # been at or after the timestamp, so starting later would leave changes out
            first = self.versions[0]
            raise VersionNotFoundError(
                f"timestamp {_fmt(ts_ms)} is before the earliest commit still in the log (version {first} at "
                f"{_fmt(self.timestamp(first))}); versions 0..{first - 1} were cleaned up, so the first commit at "
                "or after the timestamp is not known: start at that commit's timestamp or version, or later"
            )
        if idx >= 0 and self.timestamp(self.versions[idx]) == ts_ms:
            return self.versions[idx]
        if idx + 1 >= len(self.versions):
            raise VersionNotFoundError(
                f"timestamp {_fmt(ts_ms)} is after the latest commit; available history: {self._range_text()}"
            )
        return self.versions[idx + 1]

    def _bisect(self, ts_ms: int) -> int:
        """Index of the last version with timestamp <= ts, or -1 (binary search; ICT files read lazily).

        With in-commit timestamps enabled at some version, a timestamp at or after the enablement
        timestamp is looked for among the ICT commits only, an earlier one among the commits
        before by modification time (PROTOCOL.md): the two parts need not be in order with each
        other (clock skew between the file store and the writer)."""
        lo, hi = 0, len(self.versions)
        if self.ict is not None:
            split = bisect_left(self.versions, self.ict[0])
            if ts_ms >= self.ict[1]:
                lo = split
            else:
                hi = split

        class _Keys:
            def __len__(_self) -> int:
                return hi

            def __getitem__(_self, i: int) -> int:
                return self.timestamp(self.versions[i])

        return bisect_right(_Keys(), ts_ms, lo, hi) - 1


def _fmt(ms: int) -> str:
    try:
        return dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc).isoformat()
    except (OverflowError, ValueError, OSError):  # outside years 1..9999: a message, not a crash
        return f"{ms} ms from 1970-01-01T00:00:00+00:00"
