"""Mute and quiet hours: parsing, the window over midnight, and the store flags
that every process sees."""

from __future__ import annotations

from datetime import datetime, time, timezone

import pytest

from remindkit.alerts.quiet import QuietHours, Switches, silence_at
from remindkit.clock import to_us
from remindkit.errors import InvalidInput
from remindkit.store import SqlStore


@pytest.mark.parametrize(
    ("text", "local", "inside"),
    [
        ("22:00-07:00", time(23, 30), True),
        ("22:00-07:00", time(3, 0), True),
        ("22:00-07:00", time(7, 0), False),
        ("22:00-07:00", time(21, 59), False),
        ("22:00-07:00", time(22, 0), True),
        ("12:30-13:30", time(13, 0), True),
        ("12:30-13:30", time(13, 30), False),
        ("12:30-13:30", time(0, 0), False),
    ],
    ids=[
        "late-evening",
        "night",
        "end-excluded",
        "before",
        "start-included",
        "lunch",
        "lunch-end",
        "midnight",
    ],
)
def test_quiet_hours_contain(text: str, local: time, inside: bool) -> None:
    q = QuietHours.parse(text)
    assert q is not None
    assert q.contains(local) is inside


@pytest.mark.parametrize("text", ["", "off", None, "none"])
def test_no_quiet_hours(text: str | None) -> None:
    assert QuietHours.parse(text) is None


@pytest.mark.parametrize("text", ["22-07", "25:00-07:00", "22:00-22:00", "soon", "10:61-11:00"])
def test_bad_quiet_hours_are_refused_with_a_code(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        QuietHours.parse(text)
    assert err.value.code == "invalid_quiet_hours"


def test_silence_uses_the_zone() -> None:
    now = datetime(2026, 1, 5, 22, 30, tzinfo=timezone.utc)  # 23:30 in Berlin, 17:30 in New York
    q = QuietHours.parse("23:00-06:00")
    assert silence_at(now, muted=False, quiet=q, tz="Europe/Berlin").silent
    assert not silence_at(now, muted=False, quiet=q, tz="America/New_York").silent
    muted = silence_at(now, muted=True, quiet=None, tz="UTC")
    assert muted.silent and muted.reason == "muted"


def test_switches_live_in_the_store_for_every_process(
    sqlite_store: SqlStore, sqlite_url: str, settings
) -> None:
    from remindkit.store import open_store

    now = datetime(2026, 1, 5, 12, 0, tzinfo=timezone.utc)
    mine = Switches(sqlite_store.coordination, env={})
    other_store = open_store(sqlite_url, settings=settings)
    other = Switches(other_store.coordination, env={})
    try:
        assert not other.silence(now, tz="UTC").silent
        mine.set_muted(True, now_us=to_us(now))
        assert other.muted and other.silence(now, tz="UTC").reason == "muted"
        mine.set_muted(False, now_us=to_us(now))
        mine.set_quiet_hours(QuietHours.parse("11:00-13:00"), now_us=to_us(now))
        assert other.silence(now, tz="UTC").reason == "quiet hours 11:00-13:00"
        mine.set_quiet_hours(None, now_us=to_us(now))
        assert not other.silence(now, tz="UTC").silent
    finally:
        other_store.close()


def test_environment_defaults_and_store_wins(sqlite_store: SqlStore) -> None:
    sw = Switches(
        sqlite_store.coordination,
        env={"REMINDKIT_MUTE": "1", "REMINDKIT_QUIET_HOURS": "01:00-02:00"},
    )
    assert sw.muted and str(sw.quiet_hours) == "01:00-02:00"
    sw.set_muted(False, now_us=0)
    assert not sw.muted
    assert not Switches(None, env={"REMINDKIT_QUIET_HOURS": "garbage"}).quiet_hours
