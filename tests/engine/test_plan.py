"""Catch-up planning: pure function of the reminder and now."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from remindkit.clock import from_us
from remindkit.engine.plan import plan_fire
from remindkit.models import ACTIVE, DONE, Reminder
from remindkit.schedules import Schedule, next_after, resume_next, resume_schedule

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def every(minutes=10, repeat=None, **kw):
    s = Schedule("every", "UTC", first_at=T0, every_s=minutes * 60, repeat=repeat)
    return Reminder(id="rem_x", session="s1", text="t", schedule=s, next_fire_at=T0, **kw)


def dues(plan):
    return [from_us(f.due_us) for f in plan.fires]


def test_on_time_fire():
    p = plan_fire(every(), T0)
    assert dues(p) == [T0] and p.fires[0].missed == 0 and p.fires[0].position == 1
    assert from_us(p.next_fire_us) == T0 + timedelta(minutes=10)
    assert p.state == ACTIVE and p.fired_count == 1


def test_pre_claim_in_the_future_has_no_catch_up():
    p = plan_fire(every(), T0 - timedelta(milliseconds=200))
    assert dues(p) == [T0]


@pytest.mark.parametrize(
    "policy, late, expect_dues, expect_missed, skipped",
    [
        ("latest", timedelta(minutes=35), [T0 + timedelta(minutes=30)], 3, 0),
        ("latest", timedelta(seconds=5), [T0], 0, 0),
        ("skip", timedelta(minutes=35), [], None, 4),
        ("skip", timedelta(seconds=30), [T0], 0, 0),
        ("all", timedelta(minutes=35), [T0 + timedelta(minutes=m) for m in (0, 10, 20, 30)], 0, 0),
        (
            "all",
            timedelta(hours=5),
            [T0 + timedelta(minutes=m) for m in range(210, 310, 10)],
            21,
            0,
        ),
    ],
    ids=["latest", "latest-just-late", "skip", "skip-within-grace", "all", "all-capped"],
)
def test_missed_policies(policy, late, expect_dues, expect_missed, skipped):
    p = plan_fire(every(misfire=policy, catchup_cap=10), T0 + late)
    assert dues(p) == expect_dues
    if expect_dues:
        assert p.fires[0].missed == expect_missed
        assert [f.position for f in p.fires] == list(range(1, len(expect_dues) + 1))
    assert sum(f.missed for f in p.skipped) == skipped
    # The next fire is the first occurrence after now, on the anchor grid.
    nxt = from_us(p.next_fire_us)
    assert nxt > T0 + late and (nxt - T0) % timedelta(minutes=10) == timedelta(0)


def test_repeat_count_is_exact_and_ends():
    r = every(repeat=3)
    p = plan_fire(r, T0 + timedelta(hours=1))
    assert len(p.fires) == 1 and p.fired_count == 1
    r2 = Reminder(**{**r.__dict__, "fired_count": 2, "next_fire_at": T0 + timedelta(minutes=20)})
    p2 = plan_fire(r2, T0 + timedelta(minutes=20))
    assert p2.state == DONE and p2.next_fire_us is None and p2.fired_count == 3


def test_all_policy_respects_remaining_repeats():
    r = every(repeat=3, misfire="all", catchup_cap=10)
    p = plan_fire(r, T0 + timedelta(hours=1))
    assert len(p.fires) == 3 and p.state == DONE


def test_one_shot_overdue_fires_once():
    s = Schedule("after", "UTC", first_at=T0, delay_s=60)
    r = Reminder(id="rem_y", session=None, text="t", schedule=s, next_fire_at=T0)
    p = plan_fire(r, T0 + timedelta(days=3))
    assert dues(p) == [T0] and p.state == DONE and p.fired_count == 1


def test_resume_counts_again_from_now():
    """Resuming starts the count again from now (the fourth seed; ``resume --help``):
    an interval fires one period after now and its anchor moves there; a delay runs
    whole from now; a calendar keeps its calendar; a time stays where it was."""
    now = T0 + timedelta(minutes=25)
    sched, nxt = resume_schedule(every().schedule, now)
    assert nxt == now + timedelta(minutes=10) and sched.first_at == nxt
    assert next_after(sched, nxt) == nxt + timedelta(minutes=10)  # the grid moved with it
    assert resume_next(every().schedule, now) == now + timedelta(minutes=10)
    # an interval whose repeat is used up, or whose next fire is past its end: none
    assert resume_schedule(every(repeat=3).schedule, now, fired_count=3)[1] is None
    ends = replace(every().schedule, until=now + timedelta(minutes=5))
    assert resume_schedule(ends, now)[1] is None
    # a delay: the whole delay from now, due or not while paused
    delay = Schedule("after", "UTC", first_at=T0, delay_s=300)
    sched, nxt = resume_schedule(delay, now, next_fire_at=T0)
    assert nxt == now + timedelta(minutes=5) and sched.first_at == nxt
    # a calendar: its next match after now
    hourly = Schedule("cron", "UTC", cron="0 * * * *", repeat=None)
    assert resume_schedule(hourly, now) == (hourly, T0 + timedelta(hours=1))
    # a time: kept while ahead, at once once missed
    s = Schedule("at", "UTC", first_at=T0)
    assert resume_next(s, T0 - timedelta(minutes=5), next_fire_at=T0) == T0
    late = T0 + timedelta(minutes=5)
    assert resume_next(s, late, next_fire_at=T0) == late
