"""Fixed intervals and catch-up over every IANA zone, 2000-2040, around real DST changes.

* ``every`` shorter than a day, or not a whole number of days, counts elapsed
  time: each fire is the anchor plus a whole number of intervals, the first one
  after the instant asked about.
* ``every`` of whole days keeps the anchor's local wall time; on a day where
  that time does not exist it fires when the gap ends, where it is repeated at
  its earlier instant, and the next day it is back on the wall time.
* ``due_between`` (what a restart fires after an outage) gives the latest
  occurrence <= now and the number of occurrences, which match a brute-force
  enumeration by the reference; with a small ``cap`` the count stops at the cap
  and says so, and the latest is still right.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from remindkit.schedules.spec import Schedule, due_between, next_after

from .bounded import bounded_call
from .cron_oracle import (
    ALL_ZONES,
    SPECIAL_ZONES,
    UTC,
    YEARS,
    CronRule,
    changed_wall,
    cron_rules,
    expected_fires,
    readings,
    wall_instant,
    wall_of,
    window_start,
)

pytestmark = pytest.mark.reliability

DAY = 86_400
CALL_BOUND_S = 2.0
CI = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOAK = settings(max_examples=20_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

zones = st.one_of(st.sampled_from(SPECIAL_ZONES), st.sampled_from(ALL_ZONES))
years = st.integers(*YEARS)
picks = st.integers(0, 10_000)
shifts = st.integers(-5 * DAY, DAY)


def bounded(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    return bounded_call(CALL_BOUND_S, fn, *args, **kwargs)


# -- every, elapsed time ---------------------------------------------------------------------


def _elapsed(
    zone_name: str, year: int, pick: int, shift_s: int, every_s: int, probes: list[int]
) -> None:
    anchor, _ = window_start(zone_name, year, pick, shift_s)
    s = Schedule("every", zone_name, first_at=anchor, every_s=every_s, repeat=None)
    step = timedelta(seconds=every_s)
    for offset in probes:
        t = anchor + timedelta(seconds=offset)
        r = bounded(next_after, s, t)
        assert r is not None and r > t
        assert (r - anchor) % step == timedelta(0), "a whole number of intervals after the anchor"
        assert r == anchor or r - step <= t, "the first such instant after t"


_elapsed_args = dict(
    zone_name=zones,
    year=years,
    pick=picks,
    shift_s=shifts,
    every_s=st.integers(60, 30 * DAY).filter(lambda n: n % DAY != 0),
    probes=st.lists(st.integers(-DAY, 40 * DAY), min_size=1, max_size=20),
)
test_every_elapsed = CI(given(**_elapsed_args)(_elapsed))


# -- every, whole days on wall time ----------------------------------------------------------


def _calendar(
    zone_name: str, year: int, pick: int, shift_s: int, days: int, n: int, aim: float | None
) -> None:
    """``aim``: put the anchor on the wall time of a gap or a repeated hour, one or
    two intervals before that day (else anchor ``shift_s`` from a transition)."""
    zone = ZoneInfo(zone_name)
    target = None if aim is None else changed_wall(zone_name, year, pick, aim)
    if target is not None:
        anchor = wall_instant(target - timedelta(days=days * (1 + pick % 2)), zone_name)
        event("anchor aimed at a gap or repeated hour")
    else:
        anchor, has_transition = window_start(zone_name, year, pick, shift_s)
        event("window holds a DST change" if has_transition else "zone has no change that year")
    anchor = anchor.replace(microsecond=0)
    s = Schedule("every", zone_name, first_at=anchor, every_s=days * DAY, repeat=None)
    anchor_wall = wall_of(anchor, zone)
    got, t = [], anchor - timedelta(microseconds=1)
    for _ in range(n):
        t = bounded(next_after, s, t)
        got.append(t)
    expected = [anchor] + [
        wall_instant(anchor_wall + timedelta(days=k * days), zone_name) for k in range(1, n)
    ]
    assert got == expected
    assert all(a < b for a, b in zip(got, got[1:], strict=False))
    for k, f in enumerate(got[1:], 1):
        wall = wall_of(f, zone)
        meant = anchor_wall + timedelta(days=k * days)
        assert readings(wall, zone)[0] == f, "the earlier instant of its wall time, which exists"
        if len(readings(meant, zone)) == 2:
            event("a whole-day interval met a repeated hour")
        if wall != meant:
            event("a whole-day interval fell in a gap")
            assert not readings(meant, zone), (
                f"{f} moved off {meant} although that wall time exists"
            )
            assert wall > meant and f == wall_instant(meant, zone_name), (
                "it fires when the gap ends"
            )


_calendar_args = dict(
    zone_name=zones,
    year=years,
    pick=picks,
    shift_s=st.integers(-3 * DAY, DAY),
    days=st.integers(1, 3),
    n=st.integers(2, 8),
    aim=st.one_of(st.none(), st.floats(0, 1, exclude_max=True)),
)
test_every_whole_days_keep_wall_time = CI(given(**_calendar_args)(_calendar))
test_every_whole_days_keep_wall_time_soak = pytest.mark.timeout(1_800)(
    pytest.mark.soak(SOAK(given(**_calendar_args)(_calendar)))
)


@pytest.mark.parametrize(
    "zone_name, anchor, expected",
    [
        # 02:30 does not exist on 9 March 2025 in New York: that day fires at 03:00, then 02:30 again.
        (
            "America/New_York",
            "2025-03-08T02:30:00-05:00",
            ["2025-03-08T02:30:00-05:00", "2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"],
        ),
        # 01:30 happens twice on 2 November 2025: the earlier one.
        (
            "America/New_York",
            "2025-11-01T01:30:00-04:00",
            ["2025-11-01T01:30:00-04:00", "2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"],
        ),
        # Midnight does not exist in Sao Paulo on 4 November 2018.
        (
            "America/Sao_Paulo",
            "2018-11-03T00:00:00-03:00",
            ["2018-11-03T00:00:00-03:00", "2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"],
        ),
        # Half-hour DST at Lord Howe.
        (
            "Australia/Lord_Howe",
            "2024-10-05T02:15:00+10:30",
            ["2024-10-05T02:15:00+10:30", "2024-10-06T02:30:00+11:00", "2024-10-07T02:15:00+11:00"],
        ),
    ],
)
def test_daily_across_changes(zone_name: str, anchor: str, expected: list[str]) -> None:
    zone = ZoneInfo(zone_name)
    first = datetime.fromisoformat(anchor).astimezone(UTC)
    s = Schedule("every", zone_name, first_at=first, every_s=DAY, repeat=None)
    got, t = [], first - timedelta(seconds=1)
    for _ in expected:
        t = next_after(s, t)
        got.append(t.astimezone(zone).isoformat())
    assert got == expected


# -- due_between -----------------------------------------------------------------------------


def _occurrences(
    s: Schedule, rule: CronRule | None, start: datetime, end: datetime
) -> list[datetime]:
    """Brute force from the reference: occurrences in [start, end] (``start`` is one)."""
    if s.until is not None:
        end = min(end, s.until)
    if rule is not None:
        return [start] + expected_fires(rule, s.tz, start, end)
    assert s.first_at is not None and s.every_s
    out, k = [], 0
    while True:
        if s.calendar_days:
            wall = wall_of(s.first_at, ZoneInfo(s.tz)) + timedelta(seconds=k * s.every_s)
            inst = s.first_at if k == 0 else wall_instant(wall, s.tz)
        else:
            inst = s.first_at + timedelta(seconds=k * s.every_s)
        if inst > end:
            return out
        if inst >= start:
            out.append(inst)
        k += 1


@st.composite
def catch_up_cases(draw: st.DrawFn) -> tuple[Schedule, CronRule | None, datetime, datetime, int]:
    zone_name = draw(zones)
    t0, _ = window_start(zone_name, draw(years), draw(picks), draw(st.integers(-3 * DAY, DAY)))
    t0 = t0.replace(microsecond=0)
    kind = draw(st.sampled_from(["cron", "every", "days"]))
    rule: CronRule | None = None
    if kind == "cron":
        rule = draw(cron_rules())
        s = Schedule("cron", zone_name, cron=rule.text, repeat=None)
        start = next_after(s, t0)
        assume(start is not None)
        assert start is not None
        assert expected_fires(rule, zone_name, t0, start) == [start], (
            "start is the rule's first fire after t0"
        )
        per_day = rule.per_day
    else:
        every_s = (
            draw(st.integers(1, 3)) * DAY if kind == "days" else draw(st.integers(60, 3 * DAY))
        )
        s = Schedule("every", zone_name, first_at=t0, every_s=every_s, repeat=None)
        start = t0
        per_day = max(1, DAY // every_s)
    span = timedelta(seconds=draw(st.integers(0, min(10 * DAY, 3_000 * DAY // per_day))))
    now = start + span + timedelta(microseconds=draw(st.integers(0, 999_999)))
    if draw(st.booleans()):
        until = start + timedelta(seconds=draw(st.integers(0, int(span.total_seconds()) + DAY)))
        s = Schedule(
            s.kind,
            s.tz,
            first_at=s.first_at,
            every_s=s.every_s,
            cron=s.cron,
            repeat=None,
            until=until,
        )
    cap = draw(st.one_of(st.just(10_000), st.integers(1, 40)))
    return s, rule, start, now, cap


def _catch_up(case: tuple[Schedule, CronRule | None, datetime, datetime, int]) -> None:
    s, rule, start, now, cap = case
    latest, count, exact = bounded(due_between, s, start, now, cap=cap)
    expected = _occurrences(s, rule, start, now)
    assert latest == expected[-1], "the latest occurrence <= now"
    assert latest <= now
    if exact:
        assert count == len(expected)
    else:
        event("count stopped at the cap")
        assert count == cap <= len(expected)
    if len(expected) < cap:
        assert exact, "an exact count below the cap"


test_due_between_matches_brute_force = CI(given(case=catch_up_cases())(_catch_up))
test_due_between_matches_brute_force_soak = pytest.mark.timeout(1_800)(
    pytest.mark.soak(SOAK(given(case=catch_up_cases())(_catch_up)))
)
