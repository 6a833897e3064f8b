"""Crontab compatibility: the fields as cronie reads them (man 5 crontab), croner's
``L`` and ``#``, and a brute-force check of the day-of-month / day-of-week rule.

The expected fire times below were worked out from the documented rules and a
calendar, not taken from remindkit's output.
"""

from __future__ import annotations

import functools
from datetime import date, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from remindkit.errors import InvalidSchedule
from remindkit.schedules import Schedule, build_schedule, first_fire, next_after
from remindkit.schedules.cron import compile_cron, next_cron_time

UTC = timezone.utc


def fires(expr: str, start: str, n: int) -> list[str]:
    t = datetime.fromisoformat(start).replace(tzinfo=UTC)
    out = []
    for _ in range(n):
        nxt = next_cron_time(expr, UTC, t)
        assert nxt is not None
        out.append(nxt.strftime("%Y-%m-%d %H:%M:%S"))
        t = nxt
    return out


CRONIE = [
    # Both day fields restricted: either matches (the 1st, and Mondays). 2000-03-27 is a Monday.
    (
        "0 0 1 * 1",
        "2000-03-26",
        ["2000-03-27 00:00:00", "2000-04-01 00:00:00", "2000-04-03 00:00:00"],
    ),
    (
        "0 0 0 1 * 1",
        "2000-03-26",
        ["2000-03-27 00:00:00", "2000-04-01 00:00:00", "2000-04-03 00:00:00"],
    ),
    # Friday or the 13th; 2026-02-13 is both, and fires once.
    (
        "0 0 13 * 5",
        "2026-02-01",
        ["2026-02-06 00:00:00", "2026-02-13 00:00:00", "2026-02-20 00:00:00"],
    ),
    (
        "0 0 1,15 * fri",
        "2025-11-30",
        [
            "2025-12-01 00:00:00",
            "2025-12-05 00:00:00",
            "2025-12-12 00:00:00",
            "2025-12-15 00:00:00",
            "2025-12-19 00:00:00",
        ],
    ),
    # A day field that starts with "*" makes both required: odd days that are Mondays.
    (
        "0 0 */2 * 1",
        "2025-11-30",
        ["2025-12-01 00:00:00", "2025-12-15 00:00:00", "2025-12-29 00:00:00"],
    ),
    (
        "0 0 1 * */7",
        "2025-01-01",
        ["2025-06-01 00:00:00", "2026-02-01 00:00:00"],
    ),  # the 1st on a Sunday
    ("0 0 * * 1", "2025-11-30", ["2025-12-01 00:00:00", "2025-12-08 00:00:00"]),
    ("0 0 1 * *", "2025-11-30", ["2025-12-01 00:00:00", "2026-01-01 00:00:00"]),
    # Macros.
    ("@yearly", "2025-06-01 12:00", ["2026-01-01 00:00:00", "2027-01-01 00:00:00"]),
    ("@annually", "2025-06-01 12:00", ["2026-01-01 00:00:00"]),
    ("@monthly", "2025-06-01 12:00", ["2025-07-01 00:00:00", "2025-08-01 00:00:00"]),
    ("@weekly", "2025-06-01 12:00", ["2025-06-08 00:00:00", "2025-06-15 00:00:00"]),  # Sundays
    ("@daily", "2025-06-01 12:00", ["2025-06-02 00:00:00", "2025-06-03 00:00:00"]),
    ("@midnight", "2025-06-01 12:00", ["2025-06-02 00:00:00"]),
    ("@hourly", "2025-06-01 12:00", ["2025-06-01 13:00:00", "2025-06-01 14:00:00"]),
    ("@DAILY", "2025-06-01 12:00", ["2025-06-02 00:00:00"]),
    # Steps past the range: the first value only.
    ("*/100 * * * *", "2025-06-01 12:30", ["2025-06-01 13:00:00", "2025-06-01 14:00:00"]),
    ("0 0 */31 * *", "2025-06-15", ["2025-07-01 00:00:00", "2025-08-01 00:00:00"]),
    ("0 0 1 */12 *", "2025-06-15", ["2026-01-01 00:00:00", "2027-01-01 00:00:00"]),
    ("5-6/2 * * * *", "2025-06-01 12:00", ["2025-06-01 12:05:00", "2025-06-01 13:05:00"]),
    # "N/s" is "N-max/s": minutes 10, 30, 50; weekdays 5-7 (Friday to Sunday); 1, 3, 5, 7.
    (
        "10/20 9 * * *",
        "2025-06-01",
        [
            "2025-06-01 09:10:00",
            "2025-06-01 09:30:00",
            "2025-06-01 09:50:00",
            "2025-06-02 09:10:00",
        ],
    ),
    (
        "0 9 * * 5/1",
        "2025-11-24",
        [
            "2025-11-28 09:00:00",
            "2025-11-29 09:00:00",
            "2025-11-30 09:00:00",
            "2025-12-05 09:00:00",
        ],
    ),
    (
        "0 9 * * 1/2",
        "2025-11-24 12:00",
        [
            "2025-11-26 09:00:00",
            "2025-11-28 09:00:00",
            "2025-11-30 09:00:00",
            "2025-12-01 09:00:00",
        ],
    ),
    ("0 0 1 jan/6 *", "2025-02-01", ["2025-07-01 00:00:00", "2026-01-01 00:00:00"]),
    # croner: L in day of month, nL / n#L / n#k in day of week.
    (
        "0 0 L * *",
        "2024-01-15",
        [
            "2024-01-31 00:00:00",
            "2024-02-29 00:00:00",
            "2024-03-31 00:00:00",
            "2024-04-30 00:00:00",
        ],
    ),
    ("0 0 L 2 *", "2027-03-01", ["2028-02-29 00:00:00", "2029-02-28 00:00:00"]),
    (
        "0 0 * * 5L",
        "2024-01-01",
        ["2024-01-26 00:00:00", "2024-02-23 00:00:00", "2024-03-29 00:00:00"],
    ),
    ("0 0 * * 5#L", "2024-01-01", ["2024-01-26 00:00:00", "2024-02-23 00:00:00"]),
    (
        "0 0 * * fri#2",
        "2024-01-01",
        ["2024-01-12 00:00:00", "2024-02-09 00:00:00", "2024-03-08 00:00:00"],
    ),
    ("0 0 * * 1#5", "2024-01-01", ["2024-01-29 00:00:00", "2024-04-29 00:00:00"]),
    (
        "0 0 * * mon-wed#1",
        "2024-01-01",
        ["2024-01-02 00:00:00", "2024-01-03 00:00:00", "2024-02-05 00:00:00"],
    ),
    (
        "0 0 15 * 5L",
        "2024-01-01",
        ["2024-01-15 00:00:00", "2024-01-26 00:00:00", "2024-02-15 00:00:00"],
    ),
]


@pytest.mark.parametrize("expr, start, expected", CRONIE, ids=[c[0] for c in CRONIE])
def test_crontab_table(expr: str, start: str, expected: list[str]) -> None:
    assert fires(expr, start, len(expected)) == expected


@pytest.mark.parametrize(
    "expr",
    [
        "0 9 * * ¹",
        "0 9 * * \u0663",
        "\u0660 9 * * *",
        "0 9 \u0661\u0665 * *",
        "0\u00a09 * * *",
        "0 9 * * mon\u200b",
        "0 0 * * 5#6",
        "0 0 * * 5#0",
        "0 0 * * L",
        "0 0 L-1 * *",
        "0 0 * * *#2",
        "0 0 2L * *",
        "0 0 1#2 * *",
        "@reboot",
        "@every 5m",
        "@",
        "*/0 * * * *",
        "60 * * * *",
        "0 0 0 * *",
        "0 0 32 * *",
        "0 0 * 13 *",
        "0 0 * 0 *",
        "0 0 * * 8",
        "0 24 * * *",
        "0 0 * * 5-1",
        "0 0 ? * *",
        "0 0 * ? *",
        "0 0 * * ?/2",
        "0 0 * * 1,",
        "1-2-3 * * * *",
    ],
)
def test_invalid_is_invalid_cron(expr: str) -> None:
    with pytest.raises(InvalidSchedule) as exc:
        compile_cron(expr)
    assert exc.value.code == "invalid_cron"


NEVER = [
    "0 0 30 2 *",
    "0 0 31 2 *",
    "0 0 31 4 *",
    "0 0 31 4,6,9,11 *",
    "0 0 0 30 2 *",
    "0 0 31 2 */7",
    "0 0 30,31 feb *",
    "0 0 30 2 */2",
]


@pytest.mark.parametrize("expr", NEVER)
def test_rules_that_never_fire_are_known_without_a_search(expr: str) -> None:
    rule = compile_cron(expr)
    assert rule.never_fires()
    assert next_cron_time(expr, UTC, datetime(2026, 1, 1, tzinfo=UTC)) is None
    with pytest.raises(InvalidSchedule) as exc:
        build_schedule(
            now=datetime(2026, 1, 1, tzinfo=UTC),
            default_tz="Europe/Berlin",
            cron=expr,
            repeat="forever",
        )
    assert exc.value.code == "no_future_fire"


@pytest.mark.parametrize(
    "expr", ["0 0 30 2 1", "0 0 29 2 *", "0 0 31 * *", "0 0 L 2 *", "0 0 * 2 1#5", "0 12 29 2 */7"]
)
def test_rare_rules_still_fire(expr: str) -> None:
    """Day 30 or Monday in February; leap days; 5th Monday of a February (leap years
    whose February starts on a Monday: 2016, 2044); 29 February on a Sunday (2032)."""
    assert not compile_cron(expr).never_fires()
    assert next_cron_time(expr, UTC, datetime(2026, 1, 1, tzinfo=UTC)) is not None


def test_every_month_shape_occurs_in_the_calendar() -> None:
    """The claim behind ``never_fires``: every month starts on each weekday in some
    year, February of leap years too (so each (length, first weekday) of a month occurs)."""
    seen: set[tuple[int, int, int]] = set()
    for year in range(2000, 2400):
        for month in range(1, 13):
            first = date(year, month, 1)
            length = ((first.replace(day=28) + timedelta(days=4)).replace(day=1) - first).days
            seen.add((month, length, first.isoweekday() % 7))
    lengths = {
        1: [31],
        2: [28, 29],
        3: [31],
        4: [30],
        5: [31],
        6: [30],
        7: [31],
        8: [31],
        9: [30],
        10: [31],
        11: [30],
        12: [31],
    }
    assert seen == {(m, n, w) for m, ns in lengths.items() for n in ns for w in range(7)}


# -- a brute-force evaluator, written from the crontab rules ------------------------------------

_LO_HI = {"minute": (0, 59), "hour": (0, 23), "day": (1, 31), "month": (1, 12), "weekday": (0, 7)}


@st.composite
def field_text(draw: st.DrawFn, name: str) -> str:
    lo, hi = _LO_HI[name]
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        form = draw(
            st.sampled_from(
                ["*", "*/s", "a", "a-b", "a-b/s", "a/s"]
                + (["L"] if name == "day" else [])
                + (["aL", "a#k"] if name == "weekday" else [])
            )
        )
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, hi))
        s = draw(st.integers(1, hi - lo + 3))
        parts.append(
            form.replace("a-b", f"{a}-{b}")
            .replace("a", str(a))
            .replace("s", str(s))
            .replace("k", str(draw(st.integers(1, 5))))
        )
    return ",".join(parts)


@functools.lru_cache(maxsize=4096)
def allowed(text: str, name: str) -> frozenset[int]:
    """Plain values of a field: ``*``, ``*/s``, ``a``, ``a-b``, ``a-b/s``, ``a/s``."""
    lo, hi = _LO_HI[name]
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step = part.partition("/")
        if "L" in rng or "#" in rng:
            continue
        first, last = (lo, hi) if rng == "*" else (int(rng.split("-")[0]), int(rng.split("-")[-1]))
        if step and "-" not in rng and rng != "*":
            last = hi
        out |= set(range(first, last + 1, int(step or 1)))
    return frozenset({v % 7 for v in out} if name == "weekday" else out)


def day_matches(day_text: str, dow_text: str, d: date) -> bool:
    length = ((d.replace(day=28) + timedelta(days=4)).replace(day=1) - d.replace(day=1)).days
    wd = d.isoweekday() % 7
    by_day = d.day in allowed(day_text, "day") or ("L" in day_text.split(",") and d.day == length)
    by_dow = wd in allowed(dow_text, "weekday")
    for part in dow_text.split(","):
        if part.endswith("L") and int(part[:-1]) % 7 == wd and d.day + 7 > length:
            by_dow = True
        if (
            "#" in part
            and int(part.split("#")[0]) % 7 == wd
            and (d.day - 1) // 7 + 1 == int(part.split("#")[1])
        ):
            by_dow = True
    if day_text.startswith("*") or dow_text.startswith("*"):
        return by_day and by_dow
    return by_day or by_dow


def brute_next(fields: list[str], start: datetime, days: int) -> datetime | None:
    """Walk minute by minute (on days that match) from just after ``start``."""
    minute, hour, day, month, dow = fields
    mins, hours, months = allowed(minute, "minute"), allowed(hour, "hour"), allowed(month, "month")
    t = start.replace(second=0, microsecond=0) + timedelta(minutes=1)
    end = start + timedelta(days=days)
    while t <= end:
        if t.month in months and day_matches(day, dow, t.date()):
            while True:
                if t.hour in hours and t.minute in mins:
                    return t
                t += timedelta(minutes=1)
                if t.hour == 0 and t.minute == 0:
                    break
        else:
            t = (t + timedelta(days=1)).replace(hour=0, minute=0)
    return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    minute=field_text("minute"),
    hour=field_text("hour"),
    day=field_text("day"),
    month=field_text("month"),
    dow=field_text("weekday"),
    star=st.sampled_from(["neither", "day", "weekday"]),
    start=st.datetimes(datetime(2000, 1, 1), datetime(2039, 12, 31)),
)
def test_or_semantics_agree_with_brute_force(minute, hour, day, month, dow, star, start) -> None:
    """In UTC, over random rules (a day field left ``*`` a third of the time), the next
    fire is the first minute the brute-force walk finds, within 4 years; rules that
    never fire agree too."""
    day = "*" if star == "day" else day
    dow = "*" if star == "weekday" else dow
    fields = [minute, hour, day, month, dow]
    got = next_cron_time(" ".join(fields), UTC, start.replace(tzinfo=UTC))
    window = 4 * 366
    expected = brute_next(fields, start, window)
    if expected is None:
        assert got is None or got.replace(tzinfo=None) > start + timedelta(days=window)
    else:
        assert got is not None and got.replace(tzinfo=None) == expected


# -- intervals and --until ---------------------------------------------------------------------


def test_every_whole_day_alone_keeps_the_wall_time_across_dst() -> None:
    """Made at 09:00 EST the day before spring-forward: fires at 09:00 EDT, not 10:00."""
    now = datetime(2025, 3, 8, 14, 0, tzinfo=UTC)  # 09:00 EST
    s = build_schedule(now=now, default_tz="America/New_York", every="1d", repeat="forever")
    first = first_fire(s, now)
    assert first == datetime(2025, 3, 9, 13, 0, tzinfo=UTC)  # 09:00 EDT, 23 h later
    second = next_after(s, first)
    assert second == datetime(2025, 3, 10, 13, 0, tzinfo=UTC)
    week = build_schedule(now=now, default_tz="America/New_York", every="7d", repeat="forever")
    assert first_fire(week, now) == datetime(2025, 3, 15, 13, 0, tzinfo=UTC)
    hours = build_schedule(now=now, default_tz="America/New_York", every="25h", repeat="forever")
    assert first_fire(hours, now) == now + timedelta(hours=25)  # not whole days: elapsed time


def test_every_whole_day_made_in_a_coming_gap_keeps_its_wall_time_afterwards() -> None:
    """Made at 02:30 EST the day before spring-forward: 02:30 does not exist the next day,
    so the first fire is the gap's end (03:00 EDT); after that it is 02:30 again."""
    now = datetime(2025, 3, 8, 7, 30, tzinfo=UTC)  # 02:30 EST
    s = build_schedule(now=now, default_tz="America/New_York", every="1d", repeat="forever")
    first = first_fire(s, now)
    assert first == datetime(2025, 3, 9, 7, 0, tzinfo=UTC)  # 03:00 EDT, the gap's end
    second = next_after(s, first)
    assert second == datetime(2025, 3, 10, 6, 30, tzinfo=UTC)  # 02:30 EDT
    assert next_after(s, second) == datetime(2025, 3, 11, 6, 30, tzinfo=UTC)
    # it survives the store's round trip
    again = Schedule.from_json(s.to_json())
    assert again == s and next_after(again, first) == second
    # and a day not in a gap keeps no extra field
    plain = build_schedule(now=now + timedelta(hours=2), default_tz="America/New_York", every="1d")
    assert plain.wall is None and "wall" not in plain.to_json()


@pytest.mark.parametrize("kind", ["every", "cron"])
def test_until_is_inclusive(kind: str) -> None:
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    until = "2026-01-01T15:00:00Z"
    if kind == "every":
        s = build_schedule(now=now, default_tz="UTC", every="1h", until=until, repeat="forever")
    else:
        s = build_schedule(
            now=now, default_tz="UTC", cron="0 * * * *", until=until, repeat="forever"
        )
    got = []
    t = first_fire(s, now)
    while t is not None:
        got.append(t.hour)
        t = next_after(s, t)
    assert got == [13, 14, 15]
    # a fire exactly at --until is the only one: still accepted
    one = build_schedule(now=now, default_tz="UTC", every="3h", until=until, repeat="forever")
    assert first_fire(one, now) == datetime(2026, 1, 1, 15, 0, tzinfo=UTC)
