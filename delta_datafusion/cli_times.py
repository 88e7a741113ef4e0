"""Timestamps and times in the CLI's table format as DataFusion's ``show()`` (arrow-rs) writes them,
so a value reads the same in a table, in ``--format csv/json`` and in DataFusion's own output:
RFC 3339 with a ``T``, the fraction in 3, 6 or 9 digits as the value needs (none when zero), ``Z``
for a zero offset, and a sign on a year beyond 0-9999 (``+10000-01-01T00:00:00``). Python's
``str(datetime)`` wrote ``2024-01-01 11:20:00+00:00`` and every digit of the unit."""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import pyarrow as pa

#: Nanoseconds in one step of each Arrow time unit.
UNIT_NANOS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_DAY = 86_400 * 1_000_000_000
#: Days in 400 Gregorian years: dates repeat with this period, so any day maps into Python's range.
_CYCLE = 146_097
_EPOCH = dt.date(1970, 1, 1).toordinal()


def fraction(nanos: int) -> str:
    """The fraction of a second: empty, or 3, 6 or 9 digits, the fewest that hold it."""
    if nanos == 0:
        return ""
    if nanos % 1_000_000 == 0:
        return f".{nanos // 1_000_000:03d}"
    if nanos % 1_000 == 0:
        return f".{nanos // 1_000:06d}"
    return f".{nanos:09d}"


def clock(nanos: int) -> str:
    """A time of day from nanoseconds after midnight."""
    seconds, rest = divmod(nanos, 1_000_000_000)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}{fraction(rest)}"


def _day(days: int) -> str:
    """A date from days since 1970-01-01, any year (chrono's form: a sign outside 0-9999)."""
    cycles, ordinal = divmod(days + _EPOCH - 1, _CYCLE)  # ordinal 0.. within years 1..400
    date = dt.date.fromordinal(ordinal + 1)
    year = date.year + 400 * cycles
    shown = f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"
    return f"{shown}-{date.month:02d}-{date.day:02d}"


def _zone(seconds: int) -> str:
    if seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    minutes = abs(seconds) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


@functools.lru_cache(maxsize=64)
def _fixed_offset(tz: str) -> int | None:
    """Seconds east of UTC of a fixed-offset zone name (``+01:00``, ``-0530``, ``UTC``), else None."""
    if tz.upper() in ("UTC", "Z", "ETC/UTC", "GMT"):
        return 0
    if tz[:1] not in "+-" or not tz[1:].replace(":", "").isdigit():
        return None
    digits = tz[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return (hours * 3600 + minutes * 60) * (-1 if tz[0] == "-" else 1)


#: The instants whose offset a named zone is asked for; one outside takes the offset at the nearest
#: end. From the year 2 (Python's range, with room for any offset) to the end of 2099: DataFusion's
#: zone rules (chrono-tz) end with the last change of 2099 and keep its offset for every later
#: year, where Python's zoneinfo goes on with summer time (America/New_York in July 2100: -05:00 in
#: DataFusion's output, -04:00 in Python's).
_ASKABLE = (
    int(dt.datetime(2, 1, 1, tzinfo=dt.timezone.utc).timestamp()),
    int(dt.datetime(2099, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc).timestamp()),
)


def _offset(nanos: int, tz: str) -> int:
    """Seconds east of UTC in zone ``tz`` at the instant ``nanos`` after the epoch (an unknown zone
    name: 0, the instant shown in UTC, which is still the instant)."""
    fixed = _fixed_offset(tz)
    if fixed is not None:
        return fixed
    try:
        from zoneinfo import ZoneInfo

        zone = ZoneInfo(tz)
    except (KeyError, ValueError, OSError):  # ZoneInfoNotFoundError is a KeyError
        return 0
    seconds = min(max(nanos // 1_000_000_000, _ASKABLE[0]), _ASKABLE[1])
    at = dt.datetime.fromtimestamp(seconds, dt.timezone.utc).astimezone(zone)
    offset = at.utcoffset()
    return int(offset.total_seconds()) if offset is not None else 0


def instant(nanos: int, tz: str | None) -> str:
    """A timestamp of ``nanos`` after the epoch: wall-clock time when ``tz`` is None, else the time
    in that zone with its offset."""
    offset = 0 if tz is None else _offset(nanos, tz)
    days, rest = divmod(nanos + offset * 1_000_000_000, _DAY)
    text = f"{_day(days)}T{clock(rest)}"
    return text if tz is None else text + _zone(offset)


def time_values(column: Any) -> list[str | None] | None:
    """The text of each value of a timestamp or time column, None for a null; None when the
    column is neither."""
    t = column.type
    if pa.types.is_timestamp(t):
        scale, tz = UNIT_NANOS[t.unit], t.tz
        return [None if v is None else instant(v * scale, tz) for v in column.cast(pa.int64()).to_pylist()]
    if pa.types.is_time(t):
        scale = UNIT_NANOS[t.unit]
        wide = pa.int64() if pa.types.is_time64(t) else pa.int32()
        return [None if v is None else clock(v * scale) for v in column.cast(wide).to_pylist()]
    return None


def shown(v: dt.datetime | dt.time) -> str:
    """A timestamp or time inside a nested value (a struct field, a list item), from Python's."""
    nanos = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000_000 + v.microsecond * 1000
    nanos += getattr(v, "nanosecond", 0)  # pandas' Timestamp, which pyarrow gives when pandas is there
    if isinstance(v, dt.time):
        return clock(nanos)
    text = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{clock(nanos)}"
    offset = v.utcoffset()
    return text if offset is None else text + _zone(int(offset.total_seconds()))
