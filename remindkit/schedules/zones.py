"""Time zones and local wall times.

Rules: a local time inside a DST gap is an error when the user
typed it (``nonexistent_local_time``); when a repeating rule produces it, it
fires once when the gap ends, as Vixie cron does. An ambiguous (repeated) wall
time always means its earlier instant.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..clock import UTC
from ..errors import InvalidSchedule


@functools.lru_cache(maxsize=512)
def get_zone(name: str) -> tzinfo:
    """Resolve an IANA zone name (``UTC`` included) or raise ``unknown_time_zone``."""
    if (
        not isinstance(name, str)
        or not name
        or len(name) > 64
        or ".." in name
        or name.startswith("/")
    ):
        raise _unknown(name)
    if name.upper() in ("UTC", "Z", "ETC/UTC"):
        return ZoneInfo("UTC")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError, TypeError):
        raise _unknown(name) from None


def local_zone_name() -> str:
    """The machine's IANA zone name, or ``UTC`` when it cannot be named."""
    try:
        from tzlocal import get_localzone_name

        name = get_localzone_name()
        if name:
            get_zone(name)
            return str(name)
    except Exception:
        pass
    return "UTC"


def is_nonexistent(wall: datetime, zone: tzinfo) -> bool:
    """True when the naive wall time falls in a DST gap of ``zone``."""
    aware = wall.replace(tzinfo=zone, fold=0)
    back = aware.astimezone(UTC).astimezone(zone)
    return back.replace(tzinfo=None) != wall


def wall_to_instant(wall: datetime, zone: tzinfo, *, gap: str = "end") -> datetime:
    """Map a naive local wall time to an aware UTC instant.

    ``gap="end"`` maps a nonexistent time to the instant the gap ends (the
    clock jumps from 02:00 EST straight to 03:00 EDT, so 02:30 -> 03:00 EDT);
    ``gap="error"`` raises ``nonexistent_local_time``. An ambiguous time takes
    the earlier instant.
    """
    if wall.tzinfo is not None:
        raise ValueError("wall time must be naive")
    early = wall.replace(tzinfo=zone, fold=0)
    if not is_nonexistent(wall, zone):
        a = early.astimezone(UTC)
        b = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
        return min(a, b)
    if gap == "error":
        raise InvalidSchedule(
            f"{wall.isoformat(sep=' ')} does not exist in {zone}: the clocks skip it (daylight saving)",
            code="nonexistent_local_time",
        )
    return gap_end(wall, zone)


def gap_end(wall: datetime, zone: tzinfo) -> datetime:
    """The first instant after the DST gap that contains ``wall``."""
    # The two readings of a nonexistent time bracket the transition instant.
    lo = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    hi = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if lo > hi:
        lo, hi = hi, lo
    after = hi.astimezone(zone).utcoffset()
    # Smallest whole second in (lo, hi] whose offset is already the new one.
    lo_s, hi_s = int(lo.timestamp()), int(hi.timestamp())
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if datetime.fromtimestamp(mid, UTC).astimezone(zone).utcoffset() == after:
            hi_s = mid
        else:
            lo_s = mid
    return datetime.fromtimestamp(hi_s, UTC)


def instant_to_wall(instant: datetime, zone: tzinfo) -> datetime:
    """Aware instant -> naive local wall time (fold dropped)."""
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def parse_local_or_instant(text: str, zone_name: str, *, now: datetime) -> datetime:
    """Parse ``--at``: an RFC 3339 instant with offset, a local ``YYYY-MM-DDTHH:MM[:SS]``
    in ``zone_name``, or a bare ``HH:MM[:SS]`` meaning its next occurrence."""
    s = str(text).strip()
    if not s or len(s) > 64:
        raise _bad_time(text)
    if len(s) <= 8 and ":" in s and "T" not in s.upper() and "-" not in s:
        return _next_time_of_day(s, zone_name, now=now)
    candidate = s.replace(" ", "T", 1) if " " in s and "T" not in s.upper() else s
    candidate = candidate.replace("Z", "+00:00").replace("z", "+00:00")
    try:
        dt = datetime.fromisoformat(candidate)
    except ValueError:
        raise _bad_time(text) from None
    if dt.tzinfo is not None:
        return dt.astimezone(UTC)
    if len(candidate) <= 10:  # a bare date means midnight local
        dt = datetime(dt.year, dt.month, dt.day)
    return wall_to_instant(dt, get_zone(zone_name), gap="error")


def _next_time_of_day(s: str, zone_name: str, *, now: datetime) -> datetime:
    parts = s.split(":")
    try:
        if len(parts) not in (2, 3):
            raise ValueError
        h, m = int(parts[0]), int(parts[1])
        sec = int(parts[2]) if len(parts) == 3 else 0
        zone = get_zone(zone_name)
        today = now.astimezone(zone).date()
        wall = datetime(today.year, today.month, today.day, h, m, sec)
    except ValueError:
        raise _bad_time(s) from None
    for _ in range(3):
        if not is_nonexistent(wall, zone):
            inst = wall_to_instant(wall, zone)
            if inst > now:
                return inst
        wall += timedelta(days=1)
    raise _bad_time(s)


def _unknown(name: object) -> InvalidSchedule:
    return InvalidSchedule(
        f"{name!r} is not a known IANA time zone (for example Europe/Berlin, America/New_York, UTC)",
        code="unknown_time_zone",
    )


def _bad_time(text: object) -> InvalidSchedule:
    return InvalidSchedule(
        f"{text!r} is not a time; use RFC 3339 with an offset (2026-12-01T09:00:00+01:00), "
        "a local date-time with --tz (2026-12-01T09:00), or HH:MM",
        code="invalid_time",
    )
