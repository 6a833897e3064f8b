"""A reference for the time properties, written apart from ``remindkit.schedules``.

* :class:`CronRule` is a crontab rule held as sets of allowed values, with the
  text remindkit is given; :func:`cron_rules` is a hypothesis strategy that
  builds both at once (lists, ranges, steps, names, 0 and 7 for Sunday, five or
  six fields), so what a rule means never comes from the code under test.
* :func:`transitions` finds a zone's offset changes by scanning UTC;
  :func:`wall_instant` maps a local wall time to the instant it fires at by the
  documented rules: an ambiguous wall time at its earlier instant, a
  nonexistent one at the end of its gap.

Day of month and weekday combine as in cronie (man 5 crontab): when both are
restricted a day matches if either does; when either field's text starts with ``*``
both must match (``*`` itself allows every day, so that is the other field alone).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo, available_timezones

from hypothesis import strategies as st

UTC = timezone.utc
ALL_ZONES = sorted(available_timezones())
# 30-minute DST, negative DST, transitions at midnight (Sao Paulo until 2019, Havana,
# Beirut, Santiago, Asuncion, Tehran until 2022, Cairo), a skipped day (Apia 2011),
# three-hour jumps (Casey), two-hour ones (Troll), and the usual northern ones.
SPECIAL_ZONES = [
    "Australia/Lord_Howe",
    "Europe/Dublin",
    "America/Sao_Paulo",
    "America/Havana",
    "Asia/Beirut",
    "America/Santiago",
    "America/Asuncion",
    "Asia/Tehran",
    "Africa/Cairo",
    "Pacific/Apia",
    "Antarctica/Casey",
    "Antarctica/Troll",
    "America/New_York",
    "Europe/Berlin",
    "Africa/Casablanca",
]
YEARS = (2000, 2040)

MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
DOW_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

# name, lowest, highest value in crontab
_FIELDS = {
    "second": (0, 59),
    "minute": (0, 59),
    "hour": (0, 23),
    "day": (1, 31),
    "month": (1, 12),
    "weekday": (0, 7),
}


@dataclass(frozen=True)
class CronRule:
    text: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday .. 6
    day_or: bool = False  # both day fields restricted and neither starts with "*"

    def __repr__(self) -> str:
        return f"CronRule({self.text!r})"

    def matches_day(self, d: date) -> bool:
        if d.month not in self.months:
            return False
        by_day, by_weekday = d.day in self.days, d.isoweekday() % 7 in self.weekdays
        return (by_day or by_weekday) if self.day_or else (by_day and by_weekday)

    def matches(self, wall: datetime) -> bool:
        return (
            self.matches_day(wall.date())
            and wall.hour in self.hours
            and wall.minute in self.minutes
            and wall.second in self.seconds
            and wall.microsecond == 0
        )

    @property
    def per_day(self) -> int:
        return len(self.seconds) * len(self.minutes) * len(self.hours)

    def walls(self, start: datetime, last_day: date) -> Iterator[datetime]:
        """Matching wall times >= ``start``, in order, on days up to ``last_day``."""
        d = start.date()
        first = (start.hour, start.minute, start.second + (1 if start.microsecond else 0))
        while d <= last_day:
            if self.matches_day(d):
                for h in self.hours:
                    if d == start.date() and h < first[0]:
                        continue
                    for m in self.minutes:
                        if d == start.date() and (h, m) < first[:2]:
                            continue
                        for s in self.seconds:
                            if d == start.date() and (h, m, s) < first:
                                continue
                            yield datetime(d.year, d.month, d.day, h, m, s)
            d += timedelta(days=1)

    def first_day(self, start: date, days: int) -> date | None:
        return next(
            (
                start + timedelta(days=i)
                for i in range(days)
                if self.matches_day(start + timedelta(days=i))
            ),
            None,
        )


# -- generating rules ------------------------------------------------------------------------


@st.composite
def _part(draw: st.DrawFn, field: str) -> tuple[str, set[int]]:
    """One comma-separated part of a field: its text and the values it allows.

    Steps may pass the end of the range (``*/60``, ``5-6/2``) and ``a/s`` means
    ``a-max/s``, as cronie reads them (the weekday's max is 7, Sunday again)."""
    lo, hi = _FIELDS[field]
    names = MONTH_NAMES if field == "month" else DOW_NAMES if field == "weekday" else None
    named = names is not None and draw(st.booleans())
    form = draw(st.sampled_from(["*", "*/s", "a", "a-b", "a-b/s", "a/s"]))
    top = 6 if field == "weekday" else hi  # "*" in the weekday field means Sunday..Saturday
    if form == "*":
        return "*", set(range(lo, top + 1))
    if form == "*/s":
        step = draw(st.integers(1, hi - lo + 3))
        return f"*/{step}", set(range(lo, hi + 1, step))
    a = draw(st.integers(lo, hi))
    if form == "a":
        return _name(a, names if named else None), {a}
    if form == "a/s":  # the name "sun" is 0 (cronie), so "sun/s" starts on 0, not 7
        step = draw(st.integers(1, hi - lo + 3))
        start = 0 if named and field == "weekday" and a == 7 else a
        return f"{_name(a, names if named else None)}/{step}", set(range(start, hi + 1, step))
    if form == "a-b/s" and a == hi:
        a -= 1
    # "sun-sun" would be Sunday alone: a named range from Sunday ends by Saturday
    b_hi = 6 if named and field == "weekday" and a == 0 else hi
    b = draw(st.integers(a if form == "a-b" else a + 1, b_hi))
    text = f"{_name(a, names if named else None)}-{_name(b, names if named else None)}"
    if form == "a-b":
        return text, set(range(a, b + 1))
    step = draw(st.integers(1, b - a + 2))
    return f"{text}/{step}", set(range(a, b + 1, step))


def _name(value: int, names: list[str] | None) -> str:
    if names is None:
        return str(value)
    if names is MONTH_NAMES:
        return names[value - 1]
    return names[value % 7]  # "fri-sun": Sunday closes the week


@st.composite
def _field(draw: st.DrawFn, field: str, *, sparse: bool = False) -> tuple[str, set[int]]:
    count = draw(st.integers(1, 3))
    parts = [draw(_part(field)) for _ in range(count)]
    if sparse and draw(st.booleans()):  # keep rules from firing every second most of the time
        a = draw(st.integers(*_FIELDS[field]))
        parts = [(str(a), {a})]
    values: set[int] = set()
    for _, v in parts:
        values |= v
    return ",".join(t for t, _ in parts), values


@st.composite
def cron_rules(draw: st.DrawFn, *, daily: bool = False) -> CronRule:
    """A random crontab rule of 5 fields, or 6 with seconds first. ``daily``: one time
    of day, and the day, month and weekday fields restricted more often (for long
    windows that test those fields)."""
    six = draw(st.booleans())
    one = st.just(True) if daily else st.booleans()
    sec_text, secs = draw(_field("second", sparse=True)) if six else ("0", {0})
    if daily:
        sec_text, secs = (str(min(secs)), {min(secs)}) if six else (sec_text, secs)
    min_text, mins = draw(_field("minute", sparse=True))
    hour_text, hours = draw(_field("hour", sparse=daily))
    if daily and draw(one):
        min_text, mins = str(min(mins)), {min(mins)}
        hour_text, hours = str(min(hours)), {min(hours)}
    odds = 1 if daily else 3
    day_text, days = (
        draw(_field("day")) if draw(st.integers(0, odds)) == 0 else ("*", set(range(1, 32)))
    )
    month_text, months = (
        draw(_field("month")) if draw(st.integers(0, odds)) == 0 else ("*", set(range(1, 13)))
    )
    dow_text, dows = (
        draw(_field("weekday")) if draw(st.integers(0, odds)) == 0 else ("*", set(range(7)))
    )
    fields = [min_text, hour_text, day_text, month_text, dow_text]
    if six:
        fields.insert(0, sec_text)
    return CronRule(
        text=" ".join(fields),
        seconds=tuple(sorted(secs)),
        minutes=tuple(sorted(mins)),
        hours=tuple(sorted(hours)),
        days=frozenset(days),
        months=frozenset(months),
        weekdays=frozenset(d % 7 for d in dows),
        day_or=not day_text.startswith("*") and not dow_text.startswith("*"),
    )


@st.composite
def aimed_rules(draw: st.DrawFn, wall: datetime) -> CronRule:
    """A rule that matches ``wall`` (a time in a gap or a repeated hour) and a few others."""
    six = draw(st.booleans())
    secs = {wall.second} | set(draw(st.lists(st.integers(0, 59), max_size=2))) if six else {0}
    mins = {wall.minute} | set(draw(st.lists(st.integers(0, 59), max_size=3)))
    hours = {wall.hour} | set(draw(st.lists(st.integers(0, 23), max_size=2)))
    days = (
        set(range(1, 32))
        if draw(st.booleans())
        else {wall.day} | set(draw(st.lists(st.integers(1, 31), max_size=3)))
    )
    fields = [",".join(map(str, sorted(v))) for v in (mins, hours)]
    fields += ["*" if len(days) == 31 else ",".join(map(str, sorted(days))), "*", "*"]
    if six:
        fields.insert(0, ",".join(map(str, sorted(secs))))
    return CronRule(
        " ".join(fields),
        tuple(sorted(secs)),
        tuple(sorted(mins)),
        tuple(sorted(hours)),
        frozenset(days),
        frozenset(range(1, 13)),
        frozenset(range(7)),
    )


# -- zones -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8192)
def transitions(zone_name: str, year: int) -> tuple[datetime, ...]:
    """UTC instants in ``year`` (to the second) where the zone's UTC offset changes."""
    zone = ZoneInfo(zone_name)
    out = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    prev = t.astimezone(zone).utcoffset()
    while t.year == year:
        nxt = t + timedelta(hours=6)
        off = nxt.astimezone(zone).utcoffset()
        if off != prev:
            lo, hi = t, nxt
            while hi - lo > timedelta(seconds=1):
                mid = lo + (hi - lo) / 2
                mid = mid.replace(microsecond=0)
                if mid.astimezone(zone).utcoffset() == prev:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
            prev = off
        t = nxt
    return tuple(out)


def wall_of(instant: datetime, zone: ZoneInfo) -> datetime:
    return instant.astimezone(zone).replace(tzinfo=None, fold=0)


def readings(wall: datetime, zone: ZoneInfo) -> list[datetime]:
    """The instants whose local wall time is ``wall`` (none in a gap, two in an overlap)."""
    out = set()
    for fold in (0, 1):
        u = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if wall_of(u, zone) == wall:
            out.add(u)
    return sorted(out)


def wall_instant(wall: datetime, zone_name: str) -> datetime:
    """When a rule's wall time fires: its earlier instant, or the end of its DST gap."""
    zone = ZoneInfo(zone_name)
    found = readings(wall, zone)
    if found:
        return found[0]
    # In a gap: the two readings bracket the transition, which is the gap's end.
    a = wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
    b = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
    lo, hi = min(a, b), max(a, b)
    candidates = [t for y in {lo.year, hi.year} for t in transitions(zone_name, y) if lo < t <= hi]
    assert len(candidates) == 1, f"no single transition for {wall} in {zone_name}: {candidates}"
    return candidates[0]


def in_gap(wall: datetime, zone_name: str) -> bool:
    return not readings(wall, ZoneInfo(zone_name))


def expected_fires(
    rule: CronRule, zone_name: str, start: datetime, end: datetime
) -> list[datetime]:
    """Fire instants in (start, end] for ``rule``: every matching wall time mapped by
    :func:`wall_instant`, once. The mapping never decreases as the wall time grows
    (an instant's wall time maps back to the earliest instant showing it), so wall
    times before ``start``'s own cannot fire after ``start``."""
    zone = ZoneInfo(zone_name)
    out: list[datetime] = []
    last_day = wall_of(end, zone).date() + timedelta(days=2)
    for wall in rule.walls(wall_of(start, zone), last_day):
        inst = wall_instant(wall, zone_name)
        if inst > end:
            break
        if inst > start and (not out or inst != out[-1]):
            assert not out or inst > out[-1], "the wall-time mapping went backwards"
            out.append(inst)
    return out


def window_start(zone_name: str, year: int, pick: int, shift_s: int) -> tuple[datetime, bool]:
    """An instant ``shift_s`` from one of the zone's transitions in ``year`` (so that the
    window holds a DST change), or a day of the year when the zone has none."""
    found = transitions(zone_name, year)
    if found:
        return found[pick % len(found)] + timedelta(seconds=shift_s), True
    return datetime(year, 1, 1, tzinfo=UTC) + timedelta(
        days=pick % 365, seconds=shift_s % 86_400
    ), False


def changed_wall(zone_name: str, year: int, pick: int, fraction: float) -> datetime | None:
    """A local wall time inside the gap or the repeated hours of one of the zone's
    transitions in ``year`` (None when the zone has none)."""
    found = transitions(zone_name, year)
    if not found:
        return None
    zone = ZoneInfo(zone_name)
    t = found[pick % len(found)]
    before, after = wall_of(t - timedelta(seconds=1), zone) + timedelta(seconds=1), wall_of(t, zone)
    lo, hi = min(before, after), max(before, after)
    return (lo + (hi - lo) * fraction).replace(microsecond=0)


def nearest(instants: tuple[datetime, ...], t: datetime) -> datetime | None:
    i = bisect.bisect_left(instants, t)
    near = [instants[j] for j in (i - 1, i) if 0 <= j < len(instants)]
    return min(near, key=lambda x: abs(x - t)) if near else None
