"""Next fire of cron rules over every IANA zone, 2000-2040, around real DST changes.

The rules are generated (lists, ranges, steps, names, 5 or 6 fields) and their
meaning comes from the reference in ``cron_oracle``, not from the code under
test. Properties, for a window around one of the zone's transitions:

* every fire is the earliest instant that shows its local wall time (so no
  nonexistent time, and the earlier instant of a repeated hour), or the end of
  a DST gap that swallowed a matching wall time;
* fires strictly increase, and are exactly the matching wall times mapped by
  the documented rules, each once;
* each call of ``next_cron_time`` returns within a bound, also for rules that
  never fire (30 February), and None only when no day ever matches.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

from remindkit.schedules.cron import next_cron_time

from .bounded import time_limit
from .cron_oracle import (
    ALL_ZONES,
    SPECIAL_ZONES,
    UTC,
    YEARS,
    CronRule,
    aimed_rules,
    changed_wall,
    cron_rules,
    expected_fires,
    in_gap,
    readings,
    transitions,
    wall_instant,
    wall_of,
    window_start,
)

pytestmark = pytest.mark.reliability

CALL_BOUND_S = 2.0  # one next_cron_time call, worst case seen ~0.1 s (a rule that never fires)
MAX_FIRES = 1_500
CI = settings(max_examples=1_200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOAK = settings(max_examples=30_000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def note(what: str) -> None:
    """A hypothesis event (shown by --hypothesis-show-statistics) when inside a given test."""
    if currently_in_test_context():
        event(what)


def bounded_next(expr: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    with time_limit(CALL_BOUND_S, f"next_cron_time({expr!r}, {zone}, {after})"):
        return next_cron_time(expr, zone, after)


def fires_between(
    rule: CronRule, zone_name: str, start: datetime, end: datetime
) -> tuple[list[datetime], datetime]:
    """Fires in (start, end] from the code under test (at most MAX_FIRES; ``end``
    is pulled in to the last one when the cap is hit)."""
    zone = ZoneInfo(zone_name)
    got: list[datetime] = []
    t = start
    while len(got) < MAX_FIRES:
        nxt = bounded_next(rule.text, zone, t)
        if nxt is None or nxt > end:
            return got, end
        assert nxt > t, f"{nxt} does not come after {t}"
        got.append(nxt)
        t = nxt
    return got, got[-1]


def check_window(rule: CronRule, zone_name: str, start: datetime, end: datetime) -> list[datetime]:
    zone = ZoneInfo(zone_name)
    got, end = fires_between(rule, zone_name, start, end)
    assert all(a < b for a, b in zip(got, got[1:], strict=False)), "fires strictly increase"
    for f in got:
        wall = wall_of(f, zone)
        shown = readings(wall, zone)
        assert shown[0] == f, f"{f} is not the earliest instant showing {wall}"
        if len(shown) == 2:
            note("a fire at a repeated wall time")
        if not rule.matches(wall):
            note("a fire for a wall time in a gap")
            # Only a gap's end may fire for a wall time other than its own.
            before = wall_of(f - timedelta(microseconds=1), zone)
            swallowed = [
                w
                for w in rule.walls(before, wall.date())
                if before < w < wall and in_gap(w, zone_name)
            ]
            assert swallowed, (
                f"{f} ({wall} local) matches no field of {rule.text!r} and ends no gap"
            )
            assert wall_instant(swallowed[0], zone_name) == f
    expected = expected_fires(rule, zone_name, start, end)
    assert got == expected, _diff(got, expected, zone)
    return got


def _diff(got: list[datetime], expected: list[datetime], zone: ZoneInfo) -> str:
    extra = sorted(set(got) - set(expected))[:5]
    missing = sorted(set(expected) - set(got))[:5]
    show = lambda xs: [x.astimezone(zone).isoformat() for x in xs]  # noqa: E731
    return f"fired but should not: {show(extra)}; should fire but did not: {show(missing)}"


zones = st.one_of(st.sampled_from(SPECIAL_ZONES), st.sampled_from(ALL_ZONES))


@st.composite
def windows(draw: st.DrawFn) -> tuple[str, datetime, datetime, CronRule]:
    """A zone, a window and a rule, one of three ways: a rule aimed at a wall time in a
    gap or repeated hour, in a window up to 30 h before it; any rule in a window of 1 h to
    3 days from one of the zone's changes; or a once-a-day rule (day, month and weekday
    fields restricted more often) in a window of up to 400 days."""
    zone_name, year, pick = draw(zones), draw(st.integers(*YEARS)), draw(st.integers(0, 10_000))
    way = draw(st.sampled_from(["aimed", "short", "long"]))
    target = changed_wall(zone_name, year, pick, draw(st.floats(0, 1, exclude_max=True)))
    if way == "aimed" and target is not None:
        rule = draw(aimed_rules(target))
        if rule.seconds == (0,):
            target = target.replace(second=0)
        start = wall_instant(target, zone_name) - timedelta(
            seconds=draw(st.integers(1, 30 * 3_600))
        )
        span_s = draw(st.integers(3_600, 3 * 86_400))
        event("rule aimed at a gap or repeated hour")
    else:
        long = way == "long"
        rule = draw(cron_rules(daily=long))
        start, has_transition = window_start(
            zone_name, year, pick, draw(st.integers(-36 * 3_600, 6 * 3_600))
        )
        span_s = draw(
            st.integers(3 * 86_400, 400 * 86_400) if long else st.integers(3_600, 3 * 86_400)
        )
        event(
            "long window"
            if long
            else "window holds a DST change"
            if has_transition
            else "zone has no change that year"
        )
    start += timedelta(microseconds=pick % 3 * 250_000)  # not always on a whole second
    span = timedelta(seconds=min(span_s, max(3_600, 2_000 * 86_400 // max(1, rule.per_day))))
    return zone_name, start, start + span, rule


def _cron_window(case: tuple[str, datetime, datetime, CronRule]) -> None:
    zone_name, start, end, rule = case
    got = check_window(rule, zone_name, start, end)
    if not got and bounded_next(rule.text, ZoneInfo(zone_name), start) is None:
        # It never fires: then no day ever matches (day, month and weekday repeat every 28 years here).
        assert rule.first_day(wall_of(start, ZoneInfo(zone_name)).date(), 366 * 28) is None, (
            rule.text
        )


test_cron_window_around_transitions = CI(given(case=windows())(_cron_window))
test_cron_window_around_transitions_soak = pytest.mark.timeout(1_800)(
    pytest.mark.soak(SOAK(given(case=windows())(_cron_window)))
)


# -- every zone, deterministically -----------------------------------------------------------

SWEEP_RULES = [
    CronRule(
        "*/30 * * * *",
        (0,),
        (0, 30),
        tuple(range(24)),
        frozenset(range(1, 32)),
        frozenset(range(1, 13)),
        frozenset(range(7)),
    ),
    CronRule(
        "0 0 * * *",
        (0,),
        (0,),
        (0,),
        frozenset(range(1, 32)),
        frozenset(range(1, 13)),
        frozenset(range(7)),
    ),
]


def _sweep(zone_names: list[str], years: range) -> int:
    checked = 0
    for i, zone_name in enumerate(zone_names):
        for year in years:
            for t in transitions(zone_name, year):
                rule = SWEEP_RULES[(i + year) % len(SWEEP_RULES)]
                check_window(rule, zone_name, t - timedelta(hours=26), t + timedelta(hours=26))
                checked += 1
    return checked


def test_every_zone_one_year() -> None:
    """Every zone (all of ``available_timezones()``), the transitions of one year
    (changing with the zone so that 2000-2040 is spread over), half-hourly and
    midnight rules over a two-day window around each."""
    years = YEARS[1] - YEARS[0] + 1
    checked = 0
    for i, zone_name in enumerate(ALL_ZONES):
        checked += _sweep(
            [zone_name], range(YEARS[0] + i * 7 % years, YEARS[0] + i * 7 % years + 1)
        )
    assert checked > 300  # the windows did hold DST changes


@pytest.mark.soak
@pytest.mark.timeout(1_800)
def test_every_zone_every_year() -> None:
    """Every zone, every transition from 2000 to 2040 (about 18,500)."""
    assert _sweep(ALL_ZONES, range(YEARS[0], YEARS[1] + 1)) > 18_000


# -- the named special cases -----------------------------------------------------------------


def rule(text: str) -> CronRule:
    """A 5-field rule of single values or ``*`` (enough for the table below)."""
    minute, hour, day, month, dow = text.split()

    def values(field: str, lo: int, hi: int) -> set[int]:
        return set(range(lo, hi + 1)) if field == "*" else {int(v) for v in field.split(",")}

    return CronRule(
        text,
        (0,),
        tuple(sorted(values(minute, 0, 59))),
        tuple(sorted(values(hour, 0, 23))),
        frozenset(values(day, 1, 31)),
        frozenset(values(month, 1, 12)),
        frozenset(v % 7 for v in values(dow, 0, 6)),
        day_or=day != "*" and dow != "*",
    )


def local(instants: list[datetime], zone_name: str) -> list[str]:
    return [i.astimezone(ZoneInfo(zone_name)).isoformat() for i in instants]


SPECIAL_CASES = [
    # 30-minute DST: 02:00 -> 02:30 in October, 02:00 -> 01:30 in April.
    (
        "Australia/Lord_Howe",
        "15 2 * * *",
        "2024-10-05T12:00:00Z",
        2,
        ["2024-10-06T02:30:00+11:00", "2024-10-07T02:15:00+11:00"],
    ),
    (
        "Australia/Lord_Howe",
        "45 1 * * *",
        "2024-04-06T12:00:00Z",
        2,
        ["2024-04-07T01:45:00+11:00", "2024-04-08T01:45:00+10:30"],
    ),
    # Negative DST (winter is the "daylight" rule): offsets change at 01:00 UTC as in London.
    (
        "Europe/Dublin",
        "30 1 * * *",
        "2024-03-30T12:00:00Z",
        2,
        ["2024-03-31T02:00:00+01:00", "2024-04-01T01:30:00+01:00"],
    ),
    (
        "Europe/Dublin",
        "30 1 * * *",
        "2024-10-26T12:00:00Z",
        2,
        ["2024-10-27T01:30:00+01:00", "2024-10-28T01:30:00+00:00"],
    ),
    # Midnight does not exist: daily 00:00 fires at 01:00, the day goes on.
    (
        "America/Sao_Paulo",
        "0 0 * * *",
        "2018-11-03T12:00:00Z",
        3,
        ["2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00", "2018-11-06T00:00:00-02:00"],
    ),
    (
        "America/Havana",
        "0 0 * * *",
        "2024-03-09T12:00:00Z",
        2,
        ["2024-03-10T01:00:00-04:00", "2024-03-11T00:00:00-04:00"],
    ),
    (
        "Asia/Beirut",
        "30 0 * * *",
        "2024-03-30T12:00:00Z",
        2,
        ["2024-03-31T01:00:00+03:00", "2024-04-01T00:30:00+03:00"],
    ),
    (
        "America/Santiago",
        "0 0 * * *",
        "2024-09-07T12:00:00Z",
        2,
        ["2024-09-08T01:00:00-03:00", "2024-09-09T00:00:00-03:00"],
    ),
    (
        "America/Asuncion",
        "0 0 * * *",
        "2023-09-30T12:00:00Z",
        2,
        ["2023-10-01T01:00:00-03:00", "2023-10-02T00:00:00-03:00"],
    ),
    # Midnight happens twice (fall back from 00:00 to 23:00): the hour before fires once.
    (
        "America/Havana",
        "30 0 * * *",
        "2024-11-02T12:00:00Z",
        2,
        ["2024-11-03T00:30:00-04:00", "2024-11-04T00:30:00-05:00"],
    ),
    (
        "America/Santiago",
        "30 23 * * *",
        "2024-04-06T12:00:00Z",
        2,
        ["2024-04-06T23:30:00-03:00", "2024-04-07T23:30:00-04:00"],
    ),
    (
        "Asia/Beirut",
        "30 23 * * *",
        "2024-10-26T12:00:00Z",
        2,
        ["2024-10-26T23:30:00+03:00", "2024-10-27T23:30:00+02:00"],
    ),
    # A skipped day: Apia went from 29 December 2011 to 31 December.
    (
        "Pacific/Apia",
        "0 9 * * *",
        "2011-12-28T20:00:00Z",
        3,
        ["2011-12-29T09:00:00-10:00", "2011-12-31T00:00:00+14:00", "2011-12-31T09:00:00+14:00"],
    ),
    # Three hours back at Casey (02:00 +11 -> 23:00 +08): the repeated hours already
    # fired before the change, so from 01:30 the next fire is 02:00 +08, 3.5 hours later.
    (
        "Antarctica/Casey",
        "0 * * * *",
        "2010-03-04T14:30:00Z",
        2,
        ["2010-03-05T02:00:00+08:00", "2010-03-05T03:00:00+08:00"],
    ),
]


@pytest.mark.parametrize(
    "zone_name, expr, start, n, expected",
    SPECIAL_CASES,
    ids=[f"{c[0]} {c[1]} {c[2][:10]}" for c in SPECIAL_CASES],
)
def test_special_zones(zone_name: str, expr: str, start: str, n: int, expected: list[str]) -> None:
    zone = ZoneInfo(zone_name)
    t = datetime.fromisoformat(start.replace("Z", "+00:00"))
    got = []
    for _ in range(n):
        t = bounded_next(expr, zone, t)
        assert t is not None
        got.append(t)
    assert local(got, zone_name) == expected
    # and the oracle agrees, so the table and the generated tests speak of the same rules
    begin = datetime.fromisoformat(start.replace("Z", "+00:00"))
    assert expected_fires(rule(expr), zone_name, begin, got[-1]) == got


def test_midnight_zones_do_change_at_midnight() -> None:
    """The zones named for midnight transitions really have them in 2000-2040,
    so the generated windows over them test what they claim to."""
    for zone_name, year in [
        ("America/Sao_Paulo", 2018),
        ("America/Havana", 2024),
        ("Asia/Beirut", 2024),
        ("America/Santiago", 2024),
        ("America/Asuncion", 2023),
    ]:
        zone = ZoneInfo(zone_name)
        at_midnight = [
            t
            for t in transitions(zone_name, year)
            if wall_of(t - timedelta(seconds=1), zone).time().isoformat() == "23:59:59"
            or wall_of(t, zone).time().isoformat() == "00:00:00"
        ]
        assert at_midnight, zone_name
    assert SPECIAL_ZONES[:2] == ["Australia/Lord_Howe", "Europe/Dublin"]


def test_never_firing_rules_terminate_quickly() -> None:
    zone = ZoneInfo("Australia/Lord_Howe")
    for expr in ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 */7", "0 0 0 30 2 *"]:
        assert bounded_next(expr, zone, datetime(2030, 1, 1, tzinfo=UTC)) is None
    # a rule that fires once in 28 years is still found: 29 February that is a Sunday
    # ("*/7" is 0 and 7, both Sunday; it starts with "*", so both day fields must match)
    got = bounded_next("0 12 29 2 */7", zone, datetime(2004, 3, 1, tzinfo=UTC))
    assert got is not None and got.astimezone(zone).date() == date(2032, 2, 29)


def test_the_oracle_rejects_a_wrong_answer() -> None:
    """The comparison can fail: a list with one fire moved by an hour is refused."""
    zone_name = "America/New_York"
    start = datetime(2025, 11, 1, 12, tzinfo=UTC)
    good = expected_fires(rule("30 1 * * *"), zone_name, start, start + timedelta(days=2))
    assert local(good, zone_name) == ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"]
    assert date(2025, 11, 2) == good[0].astimezone(ZoneInfo(zone_name)).date()


@pytest.mark.parametrize(
    "field, days",
    [
        ("0-7", "0123456"),
        ("1-7", "0123456"),
        ("0-7/2", "0246"),
        ("5-7", "056"),
        ("7", "0"),
        ("7-7", "0"),
        ("fri-sun", "056"),
        ("mon-sun", "0123456"),
        ("7-1", "01"),
        ("*/3", "036"),
        ("1-5", "12345"),
        ("0,7", "0"),
    ],
)
def test_weekday_fields(field: str, days: str) -> None:
    """Crontab weekdays, 0 and 7 both Sunday: ``0-7`` is every day (it once meant Sunday only)."""
    zone = ZoneInfo("Europe/Berlin")
    t = datetime(2026, 1, 4, tzinfo=UTC)  # a Sunday
    seen = set()
    for _ in range(len(days) * 3):
        t = bounded_next(f"0 12 * * {field}", zone, t)
        assert t is not None
        seen.add(str(t.astimezone(zone).isoweekday() % 7))
    assert "".join(sorted(seen)) == days


@pytest.mark.parametrize(
    "field, months",
    [
        ("jan-jun/2", [1, 3, 5]),
        ("1-6/2", [1, 3, 5]),
        ("jan/3", [1, 4, 7, 10]),
        ("mar-may", [3, 4, 5]),
        ("JAN,dec", [1, 12]),
        ("*/4", [1, 5, 9]),
    ],
)
def test_month_fields(field: str, months: list[int]) -> None:
    """Month names with a step keep the step (APScheduler's name pattern dropped it:
    ``jan-jun/2`` fired in every month from January to June)."""
    zone = ZoneInfo("Europe/Berlin")
    t, seen = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(seconds=1), set()
    for _ in range(12):
        t = bounded_next(f"0 12 1 {field} *", zone, t)
        assert t is not None
        seen.add(t.astimezone(zone).month)
    assert sorted(seen) == months


@pytest.mark.parametrize(
    "expr", ["0 0 lastly * *", "0 0 1st * *", "0 0 ? * *", "0 0 * janx *", "0 0 * feb-jan *"]
)
def test_sloppy_fields_are_refused(expr: str) -> None:
    from remindkit.errors import InvalidSchedule
    from remindkit.schedules.cron import compile_cron

    with pytest.raises(InvalidSchedule) as exc:
        compile_cron(expr)
    assert exc.value.code == "invalid_cron" and str(exc.value).count("cron expression") == 1
