"""Cron on local wall time: table of DST cases plus properties over many zones."""

from __future__ import annotations

import functools
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, available_timezones

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remindkit.errors import InvalidSchedule
from remindkit.schedules.cron import compile_cron, next_cron_time
from remindkit.schedules.zones import is_nonexistent, wall_to_instant

UTC = timezone.utc
NY = ZoneInfo("America/New_York")


def fires(expr: str, zone, start: datetime, n: int) -> list[datetime]:
    out, t = [], start
    for _ in range(n):
        t = next_cron_time(expr, zone, t)
        assert t is not None
        out.append(t)
    return out


def local(dts):
    return [d.astimezone(NY).isoformat() for d in dts]


@pytest.mark.parametrize(
    "expr, start, expected",
    [
        # The released CronTrigger skips this day (the day after spring-forward).
        (
            "30 0 * * *",
            "2025-03-08T12:00:00Z",
            ["2025-03-09T00:30:00-05:00", "2025-03-10T00:30:00-04:00", "2025-03-11T00:30:00-04:00"],
        ),
        (
            "0 0 * * *",
            "2025-03-08T12:00:00Z",
            ["2025-03-09T00:00:00-05:00", "2025-03-10T00:00:00-04:00", "2025-03-11T00:00:00-04:00"],
        ),
        # Fall back: 01:30 happens twice; fire once, at the earlier instant.
        (
            "30 1 * * *",
            "2025-11-01T12:00:00Z",
            ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"],
        ),
        # 02:30 does not exist on 2025-03-09: fire once when the gap ends, at 03:00 EDT.
        (
            "30 2 * * *",
            "2025-03-08T12:00:00Z",
            ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"],
        ),
        # Several wall times in the gap merge into the gap's end.
        (
            "*/30 * * * *",
            "2025-03-09T06:10:00Z",
            ["2025-03-09T01:30:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-09T03:30:00-04:00"],
        ),
        # Weekdays follow crontab: 1-5 is Monday to Friday; 0 and 7 are Sunday.
        (
            "0 0 9 * * 1-5",
            "2025-11-28T12:00:00Z",
            ["2025-11-28T09:00:00-05:00", "2025-12-01T09:00:00-05:00", "2025-12-02T09:00:00-05:00"],
        ),
        (
            "0 9 * * 0",
            "2025-11-28T12:00:00Z",
            ["2025-11-30T09:00:00-05:00", "2025-12-07T09:00:00-05:00"],
        ),
        ("0 9 * * 7", "2025-11-28T12:00:00Z", ["2025-11-30T09:00:00-05:00"]),
        (
            "0 9 * * 5-7",
            "2025-11-27T12:00:00Z",
            [
                "2025-11-28T09:00:00-05:00",
                "2025-11-29T09:00:00-05:00",
                "2025-11-30T09:00:00-05:00",
                "2025-12-05T09:00:00-05:00",
            ],
        ),
        (
            "0 9 * * sat,sun",
            "2025-11-27T12:00:00Z",
            ["2025-11-29T09:00:00-05:00", "2025-11-30T09:00:00-05:00"],
        ),
        ("15 10 1 jan *", "2025-11-27T12:00:00Z", ["2026-01-01T10:15:00-05:00"]),
    ],
    ids=lambda v: v if isinstance(v, str) and " " in v else None,
)
def test_new_york(expr, start, expected):
    start_dt = datetime.fromisoformat(start.replace("Z", "+00:00"))
    assert local(fires(expr, NY, start_dt, len(expected))) == expected


def test_released_crontrigger_would_skip_march_10():
    """Guard that the case we work around is real in the pinned APScheduler."""
    from apscheduler.triggers.cron import CronTrigger

    trig = CronTrigger(hour=0, minute=30, timezone=NY)
    prev = datetime(2025, 3, 9, 0, 30, tzinfo=NY)
    nxt = trig.get_next_fire_time(prev, prev + timedelta(seconds=1))
    assert nxt.date().isoformat() == "2025-03-11"


@pytest.mark.parametrize(
    "expr",
    [
        "* * *",
        "1 2 3 4 5 6 7",
        "61 * * * *",
        "* 25 * * *",
        "0 9 * * 8",
        "0 9 * * 5-1",
        "0 9 * * x",
        "0 9 * * */0",
        "L * * * *",
        "0 9 ? * *;",
        "a" * 300,
    ],
)
def test_bad_cron(expr):
    with pytest.raises(InvalidSchedule) as exc:
        compile_cron(expr)
    assert exc.value.code == "invalid_cron"


def test_never_fires_returns_none():
    assert next_cron_time("0 0 30 2 *", NY, datetime(2025, 1, 1, tzinfo=UTC)) is None


# -- properties over zones and years -------------------------------------------------------

ZONES = sorted(
    z
    for z in available_timezones()
    if "/" in z and not z.startswith(("Etc/", "SystemV/", "posix/", "right/"))
)
SPECIAL = [
    "America/New_York",
    "Australia/Lord_Howe",
    "Europe/Dublin",
    "America/Sao_Paulo",
    "Asia/Beirut",
    "America/Havana",
    "Africa/Casablanca",
    "Pacific/Apia",
    "America/Santiago",
    "Asia/Tehran",
]
EXPRS = [
    "30 0 * * *",
    "0 0 * * *",
    "30 1 * * *",
    "30 2 * * *",
    "*/15 * * * *",
    "0 */3 * * *",
    "45 23 * * *",
    "0 9 * * 1-5",
    "5 0,1,2,3 * * 0",
    "0 0 1 * *",
]


def matching_walls(expr: str, start_wall: datetime, end_wall: datetime) -> list[datetime]:
    trig = compile_cron(expr)
    out, w = [], start_wall
    while True:
        w = trig.next_wall(w)
        if w is None or w > end_wall:
            return out
        out.append(w)


@functools.lru_cache(maxsize=4096)
def transitions(zone_name: str, year: int) -> tuple[datetime, ...]:
    """UTC instants in ``year`` where the zone's offset changes (to the hour)."""
    zone = ZoneInfo(zone_name)
    out = []
    t = datetime(year, 1, 1, tzinfo=UTC)
    prev = t.astimezone(zone).utcoffset()
    while t.year == year:
        nxt = t + timedelta(hours=6)
        off = nxt.astimezone(zone).utcoffset()
        if off != prev:
            lo, hi = t, nxt
            while hi - lo > timedelta(minutes=1):
                mid = lo + (hi - lo) / 2
                if mid.astimezone(zone).utcoffset() == prev:
                    lo = mid
                else:
                    hi = mid
            out.append(hi)
            prev = off
        t = nxt
    return tuple(out)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    zone_name=st.one_of(st.sampled_from(SPECIAL), st.sampled_from(ZONES)),
    expr=st.sampled_from(EXPRS),
    year=st.integers(2000, 2040),
    pick=st.integers(0, 10_000),
    shift_h=st.integers(-40, 8),
)
def test_each_matching_wall_time_fires_exactly_once(zone_name, expr, year, pick, shift_h):
    """Over a 3-day window around a DST transition (or any day, for zones without):
    every fire instant exists and strictly increases, and every matching local wall
    time fires exactly once (at its earlier instant if repeated, at the end of the
    gap if skipped). The search always terminates."""
    zone = ZoneInfo(zone_name)
    found = transitions(zone_name, year)
    if found:
        start = found[pick % len(found)] + timedelta(hours=shift_h)
    else:
        start = datetime(year, 1, 1, tzinfo=UTC) + timedelta(days=pick % 365)
    end = start + timedelta(days=3)
    got, t = [], start
    while True:
        t = next_cron_time(expr, zone, t)
        if t is None or t > end:
            break
        got.append(t)
    assert got == sorted(set(got)), "fire times strictly increase"
    for inst in got:
        wall = inst.astimezone(zone).replace(tzinfo=None)
        assert not is_nonexistent(wall, zone)
    # Every matching wall time between the two ends maps to exactly one fire.
    first_wall = (start.astimezone(zone) + timedelta(hours=3)).replace(tzinfo=None)
    last_wall = (end.astimezone(zone) - timedelta(hours=3)).replace(tzinfo=None)
    expected = sorted(
        {wall_to_instant(w, zone) for w in matching_walls(expr, first_wall, last_wall)}
    )
    inner = [g for g in got if expected and expected[0] <= g <= expected[-1]]
    assert inner == expected
