"""The schedule of a reminder: what kind, when first, how it repeats, until when.

A :class:`Schedule` is a frozen value validated where it is built
(:func:`build_schedule`). Everything here is pure: ``now`` is a parameter.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from .._compat import quick_init
from ..clock import UTC, format_utc, parse_utc
from ..errors import InvalidSchedule
from .cron import compile_cron, next_cron_time
from .durations import format_duration, parse_duration
from .zones import get_zone, instant_to_wall, parse_local_or_instant, wall_to_instant

Kind = Literal["after", "at", "every", "cron"]
KINDS = ("after", "at", "every", "cron")
DAY = 86_400
# the schedule's inputs as the command line names them (build_schedule's refusals)
CLI_WORDS = {k: f"--{k}" for k in ("in", "at", "every", "cron", "repeat", "until")}
MAX_REPEAT = 1_000_000_000  # fires of one series: far beyond any real one, well inside 64 bits


_json_str = json.encoder.encode_basestring_ascii  # a JSON string literal, as json.dumps writes it


@quick_init
@dataclass(frozen=True)
class Schedule:
    kind: Kind
    tz: str
    first_at: datetime | None = None  # after/at: the due instant; every: the anchor
    every_s: int | None = None
    cron: str | None = None
    repeat: int | None = 1  # number of fires; None = forever
    until: datetime | None = None
    delay_s: int | None = None  # kind "after": the delay as given
    # whole-day "every" whose first fire fell in a DST gap (moved to the gap's end): the
    # local wall time it keeps from then on (naive ISO), so 02:30 stays 02:30 afterwards
    wall: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InvalidSchedule(f"unknown schedule kind {self.kind!r}", code="invalid_schedule")
        for name in ("first_at", "until"):
            value = getattr(self, name)
            if value is not None and (value.tzinfo is None or value.utcoffset() != timedelta(0)):
                raise ValueError(f"Schedule.{name} must be an aware UTC datetime")
        if self.kind in ("after", "at") and (self.first_at is None or self.repeat != 1):
            raise ValueError("one-shot schedules need first_at and repeat=1")
        if self.kind == "every" and (not self.every_s or self.first_at is None):
            raise ValueError("every needs every_s and an anchor")
        if self.kind == "cron" and not self.cron:
            raise ValueError("cron needs an expression")

    @property
    def repeating(self) -> bool:
        return self.kind in ("every", "cron")

    @property
    def calendar_days(self) -> bool:
        """Whole-day intervals keep the local wall time across DST changes."""
        return self.every_s is not None and self.every_s > 0 and self.every_s % DAY == 0

    def describe(self) -> str:
        """Short human form: ``in 5m``, ``at 2026-12-01T08:00:00Z``, ``every 2m x30``, ``cron '0 9 * * 1-5' Europe/Berlin``."""
        known = self.__dict__.get("_described")
        if known is None:
            known = self.__dict__["_described"] = self._describe()  # immutable: once is enough
        return known

    def _describe(self) -> str:
        if self.kind == "after":
            text = f"in {format_duration(self.delay_s or 0)}"
        elif self.kind == "at":
            text = f"at {format_utc(self.first_at)}"
        elif self.kind == "every":
            text = f"every {format_duration(self.every_s or 0)}"
        else:
            text = f"cron '{self.cron}' {self.tz}"
        if self.repeating:
            text += " forever" if self.repeat is None else f" x{self.repeat}"
            if self.until is not None:
                text += f" until {format_utc(self.until)}"
        return text

    def to_json(self) -> str:
        """The stored form: compact JSON with sorted keys, the same text that
        ``json.dumps(..., separators=(",", ":"), sort_keys=True)`` writes, put
        together by hand (a fifth of the time; every create and import writes one)
        and kept, since a schedule is immutable."""
        known = self.__dict__.get("_json")
        if known is not None:
            return known
        q = _json_str
        parts = []
        if self.cron is not None:
            parts.append('"cron":' + q(self.cron))
        if self.delay_s is not None:
            parts.append(f'"delay_s":{int(self.delay_s)}')
        if self.every_s is not None:
            parts.append(f'"every_s":{int(self.every_s)}')
        if self.first_at is not None:
            parts.append('"first_at":' + q(str(format_utc(self.first_at))))
        parts.append('"kind":' + q(self.kind))
        parts.append('"repeat":' + ("null" if self.repeat is None else str(int(self.repeat))))
        parts.append('"tz":' + q(self.tz))
        if self.until is not None:
            parts.append('"until":' + q(str(format_utc(self.until))))
        parts.append('"v":1')
        if self.wall is not None:
            parts.append('"wall":' + q(self.wall))
        text = self.__dict__["_json"] = "{" + ",".join(parts) + "}"
        return text

    @classmethod
    def from_json(cls, text: str) -> Schedule:
        """The schedule a store row holds (its ``spec``). Schedules are immutable, and a
        listing reads the same rows again and again: the last few thousand are kept."""
        if cls is Schedule:
            return _schedule_from_json(text)
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Schedule:
        if not isinstance(data, dict) or data.get("v") != 1:
            raise ValueError(f"unsupported schedule {data!r}"[:200])
        return cls(
            kind=data["kind"],
            tz=data["tz"],
            first_at=parse_utc(data["first_at"]) if data.get("first_at") else None,
            every_s=data.get("every_s"),
            cron=data.get("cron"),
            repeat=data.get("repeat"),
            until=parse_utc(data["until"]) if data.get("until") else None,
            delay_s=data.get("delay_s"),
            wall=data.get("wall"),
        )


@functools.lru_cache(maxsize=4096)
def _schedule_from_json(text: str) -> Schedule:
    return Schedule.from_dict(json.loads(text))


def parse_repeat(value: object) -> int | None:
    """``N`` fires (1 <= N <= :data:`MAX_REPEAT`), or ``forever`` / ``-1`` / ``inf`` -> None.
    Digits are ASCII digits; a longer number is ``invalid_repeat``, never a conversion
    of thousands of digits (which Python refuses past 4,300 with a ``ValueError``)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise _bad_repeat(value)
    if isinstance(value, int):
        if value == -1:
            return None
        if 1 <= value <= MAX_REPEAT:
            return value
        raise _bad_repeat(value)
    text = str(value).strip().lower()
    if text in ("forever", "inf", "infinite", "-1"):
        return None
    if 0 < len(text) <= len(str(MAX_REPEAT)) and all(c in "0123456789" for c in text):
        n = int(text)
        if 1 <= n <= MAX_REPEAT:
            return n
    raise _bad_repeat(value)


def build_schedule(
    *,
    now: datetime,
    default_tz: str,
    tz: str | None = None,
    in_: str | int | None = None,
    at: str | datetime | None = None,
    every: str | int | None = None,
    cron: str | None = None,
    repeat: object = None,
    until: str | datetime | None = None,
    min_period_s: int = 60,
    horizon_s: int = 366 * DAY,
    words: Mapping[str, str] | None = None,
) -> Schedule:
    """Validate user input and build a :class:`Schedule`; raise ``InvalidSchedule``.
    ``words``: how the asking surface names ``in``, ``at``, ``every``, ``cron``,
    ``repeat`` and ``until`` in its refusals (the command line's flags by default)."""
    w = {**CLI_WORDS, **(words or {})}
    zone_name = tz or default_tz
    get_zone(zone_name)
    if in_ is not None and at is not None:
        raise _conflict(f"give either {w['in']} or {w['at']}, not both")
    if every is not None and cron is not None:
        raise _conflict(f"give either {w['every']} or {w['cron']}, not both")
    if cron is not None and (in_ is not None or at is not None):
        raise _conflict(f"{w['cron']} sets its own times; it does not take {w['in']} or {w['at']}")
    if in_ is None and at is None and every is None and cron is None:
        raise InvalidSchedule(
            f"say when: give {w['in']}, {w['at']}, {w['every']} or {w['cron']}",
            code="missing_schedule",
        )
    repeating = every is not None or cron is not None
    if not repeating and repeat is not None and parse_repeat(repeat) != 1:
        raise _bad_repeat(repeat, f"{w['repeat']} needs {w['every']} or {w['cron']}")
    if not repeating and until is not None:
        raise _conflict(f"{w['until']} needs {w['every']} or {w['cron']}")
    repeat_n = parse_repeat(repeat) if repeating else 1

    start: datetime | None = None
    delay_s: int | None = None
    if in_ is not None:
        delay_s = parse_duration(in_)
        if delay_s > horizon_s:
            raise _horizon(horizon_s)
        start = now + timedelta(seconds=delay_s)
    elif at is not None:
        start = _instant(at, zone_name, now)
        if start <= now:
            raise InvalidSchedule(
                f"{format_utc(start)} is not in the future (now is {format_utc(now)})",
                code="time_not_future",
            )
        if (start - now).total_seconds() > horizon_s:
            raise _horizon(horizon_s)

    until_at = _instant(until, zone_name, now) if until is not None else None

    if every is not None:
        every_s = parse_duration(every)
        if every_s < min_period_s:
            raise _too_short(every_s, min_period_s)
        if every_s > horizon_s:
            raise _horizon(horizon_s)
        wall = None
        if start is not None:
            anchor = start
        else:
            anchor, wall = _one_period_from(now, every_s, zone_name)
        sched = Schedule(
            "every",
            zone_name,
            first_at=anchor,
            every_s=every_s,
            repeat=repeat_n,
            until=until_at,
            wall=wall,
        )
    elif cron is not None:
        expr = " ".join(str(cron).split())
        compile_cron(expr)
        sched = Schedule("cron", zone_name, cron=expr, repeat=repeat_n, until=until_at)
        gap = cron_min_gap(expr, zone_name, now)
        if gap is not None and gap < min_period_s:
            raise _too_short(gap, min_period_s, cron=True)
    else:
        assert start is not None
        kind: Kind = "after" if in_ is not None else "at"
        return Schedule(kind, zone_name, first_at=start, delay_s=delay_s)

    first = first_fire(sched, now)
    if first is None:
        if until_at is not None:
            raise InvalidSchedule(
                f"{w['until']} {format_utc(until_at)} comes before the first fire",
                code="until_not_after_start",
            )
        raise InvalidSchedule(f"{sched.describe()} never fires", code="no_future_fire")
    if (first - now).total_seconds() > horizon_s:
        raise _horizon(horizon_s)
    return sched


def _one_period_from(now: datetime, every_s: int, zone_name: str) -> tuple[datetime, str | None]:
    """The first fire of ``--every`` given alone: one interval from now; for whole days,
    the same local wall time that many days later (so 09:00 stays 09:00 across DST).
    When that wall time is in a DST gap the first fire is the gap's end, and the wall
    time to keep afterwards is returned beside it."""
    if every_s % DAY:
        return now + timedelta(seconds=every_s), None
    zone = get_zone(zone_name)
    wall = instant_to_wall(now, zone) + timedelta(days=every_s // DAY)
    first = wall_to_instant(wall, zone, gap="end")
    return first, (wall.isoformat() if instant_to_wall(first, zone) != wall else None)


def _instant(value: str | datetime, zone_name: str, now: datetime) -> datetime:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidSchedule(
                "naive datetimes are not accepted; attach a zone", code="invalid_time"
            )
        return value.astimezone(UTC)
    return parse_local_or_instant(value, zone_name, now=now)


# -- occurrence arithmetic ---------------------------------------------------------------


def first_fire(s: Schedule, now: datetime) -> datetime | None:
    """The first nominal fire of a new schedule made at ``now``."""
    if s.kind == "cron":
        return next_after(s, now)
    first = s.first_at
    if first is not None and s.until is not None and first > s.until:
        return None
    return first


def next_after(s: Schedule, t: datetime) -> datetime | None:
    """The first nominal occurrence strictly after ``t`` (ignores the repeat count)."""
    if s.kind in ("after", "at"):
        assert s.first_at is not None
        return s.first_at if s.first_at > t else None
    if s.kind == "cron":
        assert s.cron is not None
        nxt = next_cron_time(s.cron, get_zone(s.tz), t)
    else:
        nxt = _next_every(s, t)
    if nxt is not None and s.until is not None and nxt > s.until:
        return None
    return nxt


def _next_every(s: Schedule, t: datetime) -> datetime:
    assert s.first_at is not None and s.every_s
    anchor = s.first_at
    if t < anchor:
        return anchor
    if not s.calendar_days:
        step = timedelta(seconds=s.every_s)
        k = (t - anchor) // step + 1
        return anchor + k * step
    days = s.every_s // DAY
    zone = get_zone(s.tz)
    anchor_wall = datetime.fromisoformat(s.wall) if s.wall else instant_to_wall(anchor, zone)
    k = max(0, (t - anchor) // timedelta(days=days) - 1)
    while True:
        cand = wall_to_instant(anchor_wall + timedelta(days=k * days), zone, gap="end")
        if cand > t:
            return cand
        k += 1


def due_between(
    s: Schedule, start: datetime, now: datetime, *, cap: int = 10_000
) -> tuple[datetime, int, bool]:
    """Occurrences of ``s`` in ``[start, now]`` where ``start`` is a nominal occurrence <= now.

    Returns ``(latest, count, exact)``: the latest occurrence <= now, how many
    there are (``start`` included), and whether the count is exact (it stops at
    ``cap`` steps for dense cron rules; ``latest`` is always exact).
    """
    if s.kind in ("after", "at"):
        return start, 1, True
    if s.kind == "every" and not s.calendar_days:
        assert s.every_s
        step = timedelta(seconds=s.every_s)
        k = (now - start) // step
        latest = start + k * step
        if s.until is not None and latest > s.until:
            k = (s.until - start) // step
            latest = start + k * step
        return latest, int(k) + 1, True
    # Find the latest occurrence first, walking back from now (a few steps whatever
    # the outage), then count forward from ``start`` up to ``cap`` steps.
    latest = latest_at_or_before(s, start, now)
    count, cursor = 1, start
    while count < cap and cursor < latest:
        nxt = next_after(s, cursor)
        if nxt is None or nxt > latest:
            break
        count, cursor = count + 1, nxt
    return latest, count, cursor >= latest


# Windows probed back from a moment to find the occurrence before it: the first window that
# holds one is walked forward, so a dense rule costs a step or two and a sparse one a few probes.
_BACK_WINDOWS = tuple(
    timedelta(seconds=n)
    for n in (
        1,
        60,
        600,
        3_600,
        6 * 3_600,
        DAY,
        7 * DAY,
        32 * DAY,
        100 * DAY,
        400 * DAY,
        1_500 * DAY,
        4_000 * DAY,
    )
)
MAX_WALK = 5_000  # steps of one window's forward walk (a rule with bursts)


def _windows(span: timedelta) -> Iterator[timedelta]:
    yield from _BACK_WINDOWS
    window = _BACK_WINDOWS[-1]
    while window < span:  # an outage longer than the last window: keep doubling back to start
        window *= 2
        yield window


def latest_at_or_before(s: Schedule, start: datetime, end: datetime) -> datetime:
    """The latest occurrence of ``s`` in ``[start, end]`` (``start`` is one)."""
    if s.until is not None and s.until < end:
        end = s.until
    return previous_before(s, start, end, inclusive=True) or start


def previous_before(
    s: Schedule, start: datetime, t: datetime, *, inclusive: bool = False
) -> datetime | None:
    """The latest occurrence of ``s`` that is ``>= start`` and ``< t`` (``<= t`` with
    ``inclusive``), found by probing windows back from ``t``; None if only ``start``
    could be and it is not before ``t``. Bounded: at most a dozen probes and
    :data:`MAX_WALK` steps in the window that holds the answer."""

    def before(x: datetime) -> bool:
        return x <= t if inclusive else x < t

    for window in _windows(t - start):
        probe = t - window
        if probe <= start:
            cursor: datetime | None = start
        else:
            cursor = next_after(s, probe - timedelta(microseconds=1))
        if cursor is None or not before(cursor):
            if probe <= start:
                break
            continue
        found = cursor
        for _ in range(MAX_WALK):
            cursor = next_after(s, found)
            if cursor is None or not before(cursor):
                break
            found = cursor
        return found
    return start if before(start) else None


def cron_min_gap(expr: str, zone_name: str, now: datetime, samples: int = 400) -> int | None:
    """Smallest gap in seconds between consecutive fires over the next ``samples`` fires
    (and at least two days). None when it fires fewer than twice."""
    zone = get_zone(zone_name)
    prev = next_cron_time(expr, zone, now)
    if prev is None:
        return None
    best: float | None = None
    horizon = now + timedelta(days=2)
    for i in range(samples * 4):
        nxt = next_cron_time(expr, zone, prev)
        if nxt is None:
            break
        gap = (nxt - prev).total_seconds()
        best = gap if best is None else min(best, gap)
        prev = nxt
        if i >= samples and prev > horizon:
            break
    return None if best is None else int(best)


def _conflict(msg: str) -> InvalidSchedule:
    return InvalidSchedule(msg, code="conflicting_schedule")


def _horizon(horizon_s: int) -> InvalidSchedule:
    return InvalidSchedule(
        f"reminders reach at most {horizon_s // DAY} days ahead", code="horizon_exceeded"
    )


def _too_short(got: int | float, minimum: int, *, cron: bool = False) -> InvalidSchedule:
    what = "this cron rule fires every" if cron else "the interval is"
    return InvalidSchedule(
        f"{what} {format_duration(got)}; repeating reminders need at least {format_duration(minimum)}",
        code="interval_too_short",
    )


def _bad_repeat(value: object, why: str = "") -> InvalidSchedule:
    return InvalidSchedule(
        why
        or f"repeat {_shown(value)} is not valid; give a count from 1 to {MAX_REPEAT:,}, or -1 / forever",
        code="invalid_repeat",
    )


def _shown(value: object) -> str:
    """``value`` for a message, short: a number of thousands of digits cannot even be
    turned into text (Python's limit on int-to-str conversion), a string is cut."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"(a number of {value.bit_length()} bits)"
    text = repr(value) if isinstance(value, str | int | float) else f"({type(value).__name__})"
    return text if len(text) <= 40 else text[:37] + "..."
