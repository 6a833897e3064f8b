"""Cron expressions (5 fields, or 6 with seconds first) evaluated on local wall time.

The fields read as crontab (cronie, Vixie cron) reads them, plus croner's ``L`` and ``#``:

* day of week 0-7, 0 and 7 both Sunday, names ``sun``..``sat``; months 1-12 or ``jan``..``dec``;
* lists ``a,b``, ranges ``a-b``, steps ``a-b/s``, ``*/s`` and ``a/s`` (= ``a-max/s``; so the
  weekday ``5/1`` is Friday to Sunday, 5-7); a step may pass the end of its range
  (``*/100`` in minutes is minute 0, ``5-6/2`` is minute 5), as in cronie;
* ``L`` in day of month is the month's last day; in day of week ``5L`` and ``5#L`` are the
  month's last Friday, ``5#2`` its second Friday (also on ranges: ``mon-fri#1``);
* when day of month and day of week are both restricted, a day matches when either
  does (OR); when either field starts with ``*`` (``*``, ``*/2``, ``?`` in day of week),
  both must match (AND), which is cronie's rule: ``0 0 */2 * 1`` is odd days that are
  Mondays, ``0 0 1 * 1`` is the 1st and every Monday;
* macros ``@yearly @annually @monthly @weekly @daily @midnight @hourly``;
* only ASCII is read: ``¹`` or Arabic-Indic digits are not digits (``invalid_cron``).

Matching wall times are found by our own field arithmetic on naive wall time, where
every day has 24 hours, and mapped to instants with our DST rules
(``zones.wall_to_instant``):

* a wall time in a DST gap fires once, when the gap ends;
* an ambiguous wall time fires once, at its earlier instant;
* so each matching local wall time fires exactly once and instants strictly
  increase. (cronie runs a job twice or skips it around DST changes; APScheduler 3's
  trigger, run in the zone itself, skips a daily 00:30 on New York's 2025-03-10, fires a
  daily 01:30 twice on 2025-11-02 and returns the nonexistent 02:30 on 2025-03-09.)

A rule that can never fire (``0 0 30 2 *``) is known when it is compiled, without a
search: see :meth:`CronRule.never_fires`.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, tzinfo

from ..clock import UTC
from ..errors import InvalidSchedule
from .zones import gap_end

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DOW_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_MONTH_NAMES = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_VALUE = r"(?:[0-9]+|[a-z]{3})"
# a list item: "*", "*/s", "a", "a-b", "a/s", "a-b/s", with a weekday suffix "#k", "#l" or "l"
_ITEM = re.compile(
    rf"(?P<star>[*?])(?:/(?P<sstep>[0-9]+))?"
    rf"|(?P<a>{_VALUE})(?:-(?P<b>{_VALUE}))?(?:/(?P<step>[0-9]+)|#(?P<nth>[0-9]+|l)|(?P<last>l))?",
    re.ASCII,
)
# month lengths a month can have (February 28 or 29)
_LENGTHS = {
    1: (31,),
    2: (28, 29),
    3: (31,),
    4: (30,),
    5: (31,),
    6: (30,),
    7: (31,),
    8: (31,),
    9: (30,),
    10: (31,),
    11: (30,),
    12: (31,),
}
_ALL_DAYS = frozenset(range(1, 32))
_ALL_WEEKDAYS = frozenset(range(7))
_SEARCH_MONTHS = 4_800 + 12  # the Gregorian calendar repeats every 400 years


@dataclass(frozen=True, eq=False)
class CronRule:
    """A compiled rule: allowed values per field and, per month shape, the matching days."""

    text: str
    seconds: tuple[int, ...]
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    months: tuple[int, ...]
    day_or: bool  # day of month OR day of week (both restricted, neither starts with "*")
    # (month length, weekday of the 1st, 0 = Sunday) -> bit d set when day d matches
    shapes: dict[tuple[int, int], int] = field(repr=False)
    never: bool = False  # :meth:`never_fires`, worked out once
    _next_sec: tuple[int, ...] = field(repr=False, default=())
    _next_min: tuple[int, ...] = field(repr=False, default=())
    _next_hour: tuple[int, ...] = field(repr=False, default=())
    _next_month: tuple[int, ...] = field(repr=False, default=())

    def never_fires(self) -> bool:
        """True when no day of any allowed month can ever match.

        Which days of a month match depends only on the month's length and the
        weekday of its 1st. In the Gregorian calendar every month starts on each of
        the seven weekdays in some year, February of leap years included (Feb 1 of
        2000, 2004, …, 2024 falls on all seven), so every (length, weekday) shape
        counted here occurs, and a rule fires iff one of its months has a shape with
        a matching day. The calendar repeats every 400 years (146,097 days, a whole
        number of weeks), so when one does, a search finds it within 4,800 months.
        """
        return self.never

    def next_wall(self, wall: datetime) -> datetime | None:
        """The first naive wall time strictly after ``wall`` that matches (None past year 9999)."""
        if self.never:
            return None
        y, mo, d = wall.year, wall.month, wall.day
        h, mi, s = wall.hour, wall.minute, wall.second + 1  # matches are whole seconds
        fresh = False  # True once we have moved to a later day (time starts at the first match)
        for _ in range(_SEARCH_MONTHS):
            if self._next_month[mo] != mo:
                nm = self._next_month[mo]
                if nm == 0:  # none left this year
                    y, mo = y + 1, self.months[0]
                else:
                    mo = nm
                d, fresh = 1, True
                if y > 9999:
                    return None
            length = _month_length(y, mo)
            mask = self.shapes[(length, (_weekday(y, mo, 1)))] >> d
            while mask:
                if mask & 1:
                    t = self._first_time() if fresh else self._time_from(h, mi, s)
                    if t is not None:
                        return datetime(y, mo, d, t[0], t[1], t[2])
                skip = ((mask & -mask).bit_length() - 1) if not (mask & 1) else 1
                mask >>= skip
                d += skip
                fresh = True
            # next month
            if mo == 12:
                y, mo = y + 1, 1
                if y > 9999:
                    return None
            else:
                mo += 1
            d, fresh = 1, True
        return None

    def _first_time(self) -> tuple[int, int, int]:
        return self.hours[0], self.minutes[0], self.seconds[0]

    def _time_from(self, h: int, mi: int, s: int) -> tuple[int, int, int] | None:
        """The first allowed time of day at or after h:mi:s (s may be 60)."""
        if s >= 60:
            s, mi = 0, mi + 1
            if mi >= 60:
                mi, h = 0, h + 1
                if h >= 24:
                    return None
        nh = self._next_hour[h]
        if nh < 0:
            return None
        if nh != h:
            return nh, self.minutes[0], self.seconds[0]
        nm = self._next_min[mi]
        if nm == mi:
            ns = self._next_sec[s]
            if ns >= 0:
                return h, mi, ns
            nm = self._next_min[mi + 1]
        if nm >= 0:
            return h, nm, self.seconds[0]
        nh = self._next_hour[h + 1]
        if nh < 0:
            return None
        return nh, self.minutes[0], self.seconds[0]


def _month_length(y: int, m: int) -> int:
    if m == 2:
        return 29 if y % 4 == 0 and (y % 100 != 0 or y % 400 == 0) else 28
    return _LENGTHS[m][0]


def _weekday(y: int, m: int, d: int) -> int:
    """0 = Sunday .. 6 = Saturday."""
    return (datetime(y, m, d).weekday() + 1) % 7


@functools.lru_cache(maxsize=256)
def _successors(values: tuple[int, ...], top: int) -> tuple[int, ...]:
    """table[v] = the smallest allowed value >= v, or -1; for v in 0..top+1."""
    allowed = set(values)
    out = [-1] * (top + 2)
    nxt = -1
    for v in range(top, -1, -1):
        if v in allowed:
            nxt = v
        out[v] = nxt
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def compile_cron(expr: str) -> CronRule:
    """Parse ``expr`` (or raise ``invalid_cron``) into a :class:`CronRule`."""
    if not isinstance(expr, str) or len(expr) > 200:
        raise _bad(expr, "too long")
    if not expr.isascii():
        raise _bad(expr, "holds characters other than ASCII (digits are 0-9)")
    text = expr.strip().lower()
    if text.startswith("@"):
        if text not in MACROS:
            raise _bad(expr, f"is not one of {', '.join(MACROS)}")
        text = MACROS[text]
    fields = text.split()
    if len(fields) == 5:
        second, (minute, hour, day, month, dow) = "0", fields
    elif len(fields) == 6:
        second, minute, hour, day, month, dow = fields
    else:
        raise _bad(
            expr,
            f"has {len(fields)} fields; use 5 (min hour day month weekday) or 6 (seconds first)",
        )
    seconds = _plain(expr, "second", second, 0, 59)
    minutes = _plain(expr, "minute", minute, 0, 59)
    hours = _plain(expr, "hour", hour, 0, 23)
    months = _plain(expr, "month", month, 1, 12, _MONTH_NAMES)
    dom, dom_last = _days(expr, day)
    weekdays, dow_last, dow_nth = _weekdays(expr, dow)
    day_or = not day.startswith(("*", "?")) and not dow.startswith(("*", "?"))
    shapes = _shapes(frozenset(dom), dom_last, weekdays, dow_last, dow_nth, day_or)
    next_month = tuple(max(0, v) for v in _successors(months, 12))  # 0: none left this year
    lengths = {n for m in months for n in _LENGTHS[m]}
    never = not any(shapes[(n, w)] for n in lengths for w in range(7))
    return CronRule(
        text=expr,
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        months=months,
        day_or=day_or,
        shapes=shapes,
        never=never,
        _next_sec=_successors(seconds, 59),
        _next_min=_successors(minutes, 59),
        _next_hour=_successors(hours, 23),
        _next_month=next_month,
    )


@functools.lru_cache(maxsize=256)
def _shapes(
    dom: frozenset[int],
    dom_last: bool,
    weekdays: frozenset[int],
    dow_last: frozenset[int],
    dow_nth: frozenset[tuple[int, int]],
    day_or: bool,
) -> dict[tuple[int, int], int]:
    """For each month length and weekday of the 1st: the bit mask of matching days."""
    dom_bits = sum(1 << d for d in dom)
    out: dict[tuple[int, int], int] = {}
    # bit d set when day d is an allowed weekday in a month that starts on a Sunday;
    # a month starting on weekday f looks like it shifted by f days
    sunday_first = sum(1 << d for d in range(1, 39) if (d - 1) % 7 in weekdays)
    for first in range(7):
        plain = sunday_first >> first
        for length in (28, 29, 30, 31):
            days = (1 << (length + 1)) - 2  # bits 1..length
            by_dow = plain
            for wd in dow_last:
                by_dow |= 1 << (length - (first + length - 1 - wd) % 7)
            for wd, k in dow_nth:
                d = 1 + (wd - first) % 7 + 7 * (k - 1)
                if d <= length:
                    by_dow |= 1 << d
            by_dom = dom_bits | (1 << length if dom_last else 0)
            out[(length, first)] = ((by_dom | by_dow) if day_or else (by_dom & by_dow)) & days
    return out


def _items(expr: str, what: str, text: str) -> list[re.Match[str]]:
    out = []
    for part in text.split(","):
        m = _ITEM.fullmatch(part)
        if m is None:
            raise _bad(expr, f"the {what} field {text!r} is not valid")
        out.append(m)
    return out


def _number(
    expr: str,
    what: str,
    token: str,
    lo: int,
    hi: int,
    names: list[str] | None,
    *,
    end: bool = False,
) -> int:
    if token.isdigit():  # ASCII only: the whole expression is ASCII
        value = int(token)
    elif names is not None and token in names:
        value = names.index(token) + (1 if names is _MONTH_NAMES else 0)
        if end and names is _DOW_NAMES and value == 0:
            value = 7  # "fri-sun": Sunday closes the week
    else:
        allowed = f"{lo}-{hi}" + (f" or {names[0]}..{names[-1]}" if names else "")
        raise _bad(expr, f"the {what} {token!r} is not {allowed}")
    if not lo <= value <= hi:
        raise _bad(expr, f"the {what} {token!r} is not {lo}-{hi}")
    return value


def _step(expr: str, what: str, token: str | None) -> int:
    if token is None:
        return 1
    step = int(token)
    if step < 1:
        raise _bad(expr, f"the {what} step {token!r} is not a whole number >= 1")
    return step


def _range(
    expr: str, what: str, m: re.Match[str], lo: int, hi: int, names: list[str] | None
) -> range:
    """Values of one list item (no suffix): ``*``, ``*/s``, ``a``, ``a-b``, ``a/s``, ``a-b/s``."""
    if m.group("star"):
        return range(lo, hi + 1, _step(expr, what, m.group("sstep")))
    a = _number(expr, what, m.group("a"), lo, hi, names)
    step = _step(expr, what, m.group("step"))
    if m.group("b") is not None:
        b = _number(expr, what, m.group("b"), lo, hi, names, end=True)
        if names is _DOW_NAMES and a == 7 and b != 7:
            a = 0  # "7-1": Sunday to Monday
        if names is _DOW_NAMES and a == 0 and b == 7 and not m.group("b").isdigit():
            b = 0  # "sun-sun" is Sunday alone
        if a > b:
            raise _bad(expr, f"the {what} range {m.group(0)!r} runs backwards")
        return range(a, b + 1, step)
    if m.group("step") is not None:
        return range(a, hi + 1, step)  # cronie: "a/s" is "a-max/s"
    return range(a, a + 1)


def _plain(
    expr: str, what: str, text: str, lo: int, hi: int, names: list[str] | None = None
) -> tuple[int, ...]:
    if text == "*":
        return tuple(range(lo, hi + 1))
    if text.isdigit() and len(text) <= 2 and lo <= int(text) <= hi:
        return (int(text),)
    values: set[int] = set()
    for m in _items(expr, what, text):
        if m.group("star") == "?" or m.group("nth") is not None or m.group("last") is not None:
            raise _bad(expr, f"the {what} field {text!r} is not valid")
        if m.group("a") and not m.group("a").isdigit() and names is None:
            raise _bad(expr, f"the {what} field {text!r} is not valid")
        values.update(_range(expr, what, m, lo, hi, names))
    return tuple(sorted(values))


def _days(expr: str, text: str) -> tuple[frozenset[int], bool]:
    if text == "*":
        return _ALL_DAYS, False
    values: set[int] = set()
    last = False
    for part in text.split(","):
        if part in ("l", "last"):
            last = True
            continue
        m = _ITEM.fullmatch(part)
        if (
            m is None
            or m.group("star") == "?"
            or m.group("nth")
            or m.group("last")
            or (m.group("a") and not m.group("a").isdigit())
        ):
            raise _bad(expr, f"the day field {text!r} is not valid")
        values.update(_range(expr, "day", m, 1, 31, None))
    return frozenset(values), last


def _weekdays(
    expr: str, text: str
) -> tuple[frozenset[int], frozenset[int], frozenset[tuple[int, int]]]:
    if text in ("*", "?"):
        return _ALL_WEEKDAYS, frozenset(), frozenset()
    plain: set[int] = set()
    last: set[int] = set()
    nth: set[tuple[int, int]] = set()
    for m in _items(expr, "weekday", text):
        if m.group("star") == "?":
            if m.group("sstep"):
                raise _bad(expr, f"the weekday field {text!r} is not valid")
            plain.update(range(7))
            continue
        days = {d % 7 for d in _range(expr, "weekday", m, 0, 7, _DOW_NAMES)}
        k = m.group("nth")
        if m.group("last") is not None or k == "l":
            last |= days
        elif k is not None:
            if not k.isdigit() or not 1 <= int(k) <= 5:
                raise _bad(expr, f"the weekday {m.group(0)!r} needs #1 to #5 or #L")
            nth |= {(d, int(k)) for d in days}
        else:
            plain |= days
    return frozenset(plain), frozenset(last), frozenset(nth)


def _to_instant(wall: datetime, zone: tzinfo) -> tuple[datetime, bool]:
    """``wall`` as an instant by our rules, and whether it is a repeated wall time."""
    off0 = zone.utcoffset(wall)
    off1 = zone.utcoffset(wall.replace(fold=1))
    if off0 == off1:
        assert off0 is not None
        return (wall - off0).replace(tzinfo=UTC), False
    assert off0 is not None and off1 is not None
    if off1 > off0:  # in a gap (PEP 495: fold=0 reads the offset before the change)
        return gap_end(wall, zone), False
    return (wall - off0).replace(tzinfo=UTC), True  # repeated: the earlier reading


def _overlap_end(wall: datetime, zone: tzinfo) -> datetime:
    """The first wall time after the repeated span that holds ``wall``."""
    off0 = zone.utcoffset(wall)
    assert off0 is not None
    return (_change_instant(wall, zone) + off0).replace(tzinfo=None)


def _change_instant(wall: datetime, zone: tzinfo) -> datetime:
    """The instant the offset changes inside the repeated span holding ``wall``."""
    off0, off1 = zone.utcoffset(wall), zone.utcoffset(wall.replace(fold=1))
    assert off0 is not None and off1 is not None
    lo = int((wall - off0).replace(tzinfo=UTC).timestamp())  # before the change
    hi = int((wall - off1).replace(tzinfo=UTC).timestamp())  # after it
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, UTC).astimezone(zone).utcoffset() == off1:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def next_cron_time(expr: str, zone: tzinfo, after: datetime) -> datetime | None:
    """The first fire instant strictly after the aware instant ``after``."""
    rule = compile_cron(expr)
    wall = after.astimezone(zone).replace(tzinfo=None, fold=0)
    # After a fall-back, wall times already passed come round again; they map to
    # their earlier instant, which is <= after, so they are skipped (they fired):
    # the search jumps to the end of the repeated span.
    for _ in range(64):
        nxt = rule.next_wall(wall)
        if nxt is None:
            return None
        instant, repeated = _to_instant(nxt, zone)
        if instant > after:
            return instant
        wall = _overlap_end(nxt, zone) - timedelta(microseconds=1) if repeated else nxt
    return None


def _bad(expr: object, why: str) -> InvalidSchedule:
    return InvalidSchedule(
        f"cron expression {expr!r} {why}. Use 5 fields (minute hour day month weekday) "
        "or 6 with seconds first, e.g. '0 9 * * 1-5' or '0 0 9 * * 1-5', or a macro such as @daily",
        code="invalid_cron",
    )


__all__ = ["MACROS", "CronRule", "compile_cron", "next_cron_time"]
