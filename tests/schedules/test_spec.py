"""A schedule's stored form: the JSON a store row holds for it."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from remindkit.clock import UTC, format_utc, parse_utc
from remindkit.schedules.spec import Schedule

T = datetime(2026, 12, 1, 8, 30, 0, 250_000, tzinfo=UTC)

SCHEDULES = [
    Schedule("at", "UTC", first_at=T),
    Schedule("after", "Europe/Berlin", first_at=T, delay_s=90),
    Schedule("every", "America/New_York", first_at=T, every_s=86_400, repeat=None),
    Schedule(
        "every", "Asia/Kolkata", first_at=T, every_s=600, repeat=7, until=T + timedelta(days=3)
    ),
    Schedule(
        "every", "Europe/Berlin", first_at=T, every_s=86_400, repeat=3, wall="2026-03-29T02:30:00"
    ),
    Schedule("cron", "Europe/Zürich", cron="0 9 * * 1-5", repeat=None),
    Schedule("cron", "UTC", cron='5 4 * * "\\ é', repeat=12, until=T),
]


def reference(s: Schedule) -> str:
    """The stored form as json.dumps writes it."""
    data: dict[str, object] = {"v": 1, "kind": s.kind, "tz": s.tz, "repeat": s.repeat}
    if s.first_at is not None:
        data["first_at"] = format_utc(s.first_at)
    for key in ("every_s", "cron", "delay_s", "wall"):
        if getattr(s, key) is not None:
            data[key] = getattr(s, key)
    if s.until is not None:
        data["until"] = format_utc(s.until)
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s.kind}-{s.tz}")
def test_the_stored_form_is_sorted_compact_json_and_reads_back(schedule: Schedule) -> None:
    text = schedule.to_json()
    assert text == reference(schedule)
    assert Schedule.from_json(text) == schedule
    assert schedule.to_json() is text  # immutable: written once


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T08:30:00Z", datetime(2026, 12, 1, 8, 30, tzinfo=UTC)),
        ("2026-12-01T08:30:00z", datetime(2026, 12, 1, 8, 30, tzinfo=UTC)),
        ("2026-12-01T08:30:00.250+00:00", T),
        ("2026-12-01T09:30:00.250+01:00", T),
    ],
)
def test_instants_are_read_in_utc(text: str, expected: datetime) -> None:
    got = parse_utc(text)
    assert got == expected and got.tzinfo is UTC


def test_an_instant_without_an_offset_is_refused() -> None:
    with pytest.raises(ValueError, match="no UTC offset"):
        parse_utc("2026-12-01T08:30:00")
