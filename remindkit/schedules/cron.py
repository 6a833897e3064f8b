"""Cron expressions (5 fields, or 6 with seconds first) evaluated on local wall time.

APScheduler 3.11's ``CronTrigger`` does the field arithmetic, but we never let
it see a zone with DST: it runs on a naive wall-clock surrogate (the local wall
time written as if it were UTC), where every day has 24 hours. The wall times it
finds are then mapped to instants with our rules (``zones.wall_to_instant``):

* a wall time in a DST gap fires once, when the gap ends;
* an ambiguous wall time fires once, at its earlier instant;
* so each matching local wall time fires exactly once and instants strictly
  increase. (The released trigger, run in the zone itself, skips a daily 00:30 on
  New York's 2025-03-10, fires a daily 01:30 twice on 2025-11-02, and returns the
  nonexistent 02:30 on 2025-03-09.)

Day of week follows crontab (0 or 7 = Sunday), not APScheduler 3's 0 = Monday.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, tzinfo
from typing import TYPE_CHECKING

from ..clock import UTC
from ..errors import InvalidSchedule
from .zones import instant_to_wall, wall_to_instant

if TYPE_CHECKING:  # loaded on the first cron rule: a reminder without one never pays for it
    from apscheduler.triggers.cron import CronTrigger

_DOW_NAMES = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
_DOW_INDEX = {name: i for i, name in enumerate(_DOW_NAMES)}
_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_MONTH_INDEX = {name: i + 1 for i, name in enumerate(_MONTHS)}
_NAME = re.compile(r"[a-z]+")
_DAY_PART = re.compile(r"(?:\*|\d+(?:-\d+)?)(?:/\d+)?|last")
_MAX_STEPS = 200_000


@functools.lru_cache(maxsize=1024)
def compile_cron(expr: str) -> CronTrigger:
    """Parse ``expr`` into a CronTrigger on the UTC wall-clock surrogate."""
    if not isinstance(expr, str) or len(expr) > 200:
        raise _bad(expr, "too long")
    fields = expr.split()
    if len(fields) == 5:
        second, (minute, hour, day, month, dow) = "0", fields
    elif len(fields) == 6:
        second, minute, hour, day, month, dow = fields
    else:
        raise _bad(expr, f"has {len(fields)} fields; use 5 (min hour day month weekday) or 6 (seconds first)")
    for name, value in (("second", second), ("minute", minute), ("hour", hour), ("month", month)):
        if not _plain_field(value):
            raise _bad(expr, f"the {name} field {value!r} is not valid")
    if not all(_DAY_PART.fullmatch(part) for part in day.lower().split(",")):
        raise _bad(expr, f"the day field {day!r} is not valid")
    month = _translate_month(month, expr)
    dow = _translate_dow(dow, expr)
    from apscheduler.triggers.cron import CronTrigger

    try:
        return CronTrigger(
            second=second,
            minute=minute,
            hour=hour,
            day=day.lower(),
            month=month,
            day_of_week=dow,
            timezone=UTC,
        )
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise _bad(expr, str(exc)) from None


def _plain_field(value: str) -> bool:
    allowed = set("0123456789*,-/") | set("abcdefghijklmnopqrstuvwxyz")
    return bool(value) and set(value.lower()) <= allowed


def _translate_dow(field: str, expr: str) -> str:
    """Crontab weekday field -> APScheduler names (``1-5`` -> ``mon,tue,wed,thu,fri``)."""
    if field in ("*", "?"):
        return "*"
    days: set[int] = set()
    for part in field.lower().split(","):
        step = 1
        if "/" in part:
            part, _, step_s = part.partition("/")
            if not step_s.isdigit() or int(step_s) < 1:
                raise _bad(expr, f"weekday step {step_s!r} is not valid")
            step = int(step_s)
        if part == "*":
            lo, hi = 0, 6
        elif "-" in part:
            a, _, b = part.partition("-")
            lo, hi = _dow_value(a, expr), _dow_value(b, expr)  # 0-7: "0-7" is every day
            if lo == 7 and hi != 7:  # "7-1": Sunday to Monday
                lo = 0
            if hi == 0 and lo > 0:  # "fri-sun": Sunday closes the week
                hi = 7
            if lo > hi:
                raise _bad(expr, f"weekday range {part!r} runs backwards")
        else:
            lo = hi = _dow_value(part, expr) % 7
            if step != 1:
                hi = 6
        for d in range(lo, hi + 1, step):
            days.add(d % 7)
    if not days:
        raise _bad(expr, "the weekday field matches no day")
    return ",".join(_DOW_NAMES[d] for d in sorted(days))


def _translate_month(field: str, expr: str) -> str:
    """Month names -> numbers (``jan-jun/2`` -> ``1-6/2``). APScheduler's pattern for
    names stops before a step, so ``jan-jun/2`` would silently fire every month to June."""

    def number(m: re.Match[str]) -> str:
        if m.group(0) not in _MONTH_INDEX:
            raise _bad(expr, f"month {m.group(0)!r} is not 1-12 or jan..dec")
        return str(_MONTH_INDEX[m.group(0)])

    return _NAME.sub(number, field.lower())


def _dow_value(token: str, expr: str) -> int:
    """0-7 (both 0 and 7 are Sunday; the caller folds 7 where it is not a range's end)."""
    token = token.strip()
    if token.isdigit() and 0 <= int(token) <= 7:
        return int(token)
    if token in _DOW_INDEX:
        return _DOW_INDEX[token]
    raise _bad(expr, f"weekday {token!r} is not 0-7 or sun..sat")


def next_wall_match(trigger: CronTrigger, wall: datetime) -> datetime | None:
    """The first naive wall time strictly after ``wall`` that matches."""
    surrogate = wall.replace(tzinfo=UTC) + timedelta(microseconds=1)
    nxt = trigger.get_next_fire_time(None, surrogate)
    return None if nxt is None else nxt.replace(tzinfo=None)


def next_cron_time(expr: str, zone: tzinfo, after: datetime) -> datetime | None:
    """The first fire instant strictly after the aware instant ``after``."""
    trigger = compile_cron(expr)
    wall = instant_to_wall(after, zone)
    # After a fall-back, wall times already passed come round again; they map to
    # their earlier instant, which is <= after, so they are skipped: they fired.
    for _ in range(_MAX_STEPS):
        nxt = next_wall_match(trigger, wall)
        if nxt is None:
            return None
        instant = wall_to_instant(nxt, zone, gap="end")
        if instant > after:
            return instant
        wall = nxt
    return None


def _bad(expr: object, why: str) -> InvalidSchedule:
    return InvalidSchedule(
        f"cron expression {expr!r} {why}. Use 5 fields (minute hour day month weekday) "
        "or 6 with seconds first, e.g. '0 9 * * 1-5' or '0 0 9 * * 1-5'",
        code="invalid_cron",
    )


__all__ = ["compile_cron", "next_cron_time", "next_wall_match"]
