"""When a paused reminder fires next once it is resumed: a pure function of its
schedule, what it has fired, and ``now``. Resuming starts the count again from now."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from .spec import Schedule, next_after


def resume_schedule(
    schedule: Schedule, now: datetime, *, next_fire_at: datetime | None = None, fired_count: int = 0
) -> tuple[Schedule, datetime | None]:
    """The schedule of a resumed reminder and its next fire, counted from now.

    * an interval (``every``, a ``set_callback`` timer): one period from now, and the
      anchor moves there (the fires after it keep that grid);
    * a delay (``in 5m``): the whole delay from now;
    * a time (``at``): kept if still ahead, else it fires at once;
    * a calendar (``cron``): its next match after now.

    The next fire is None when the repeat count is used up, or the interval's next
    fire falls past ``until`` (the reminder is done)."""
    if schedule.kind == "after" and schedule.delay_s:
        nxt = now + timedelta(seconds=schedule.delay_s)
        return replace(schedule, first_at=nxt), nxt
    if not schedule.repeating:
        first = schedule.first_at
        assert first is not None
        if next_fire_at is not None and next_fire_at > now:
            return schedule, next_fire_at
        return schedule, (first if first > now else now)
    if schedule.repeat is not None and fired_count >= schedule.repeat:
        return schedule, None
    if schedule.kind == "every" and schedule.every_s:
        nxt = now + timedelta(seconds=schedule.every_s)
        if schedule.until is not None and nxt > schedule.until:
            return schedule, None
        return replace(schedule, first_at=nxt, wall=None), nxt
    return schedule, next_after(schedule, now)


def resume_next(
    schedule: Schedule, now: datetime, *, next_fire_at: datetime | None = None, fired_count: int = 0
) -> datetime | None:
    """The next fire of :func:`resume_schedule`."""
    return resume_schedule(schedule, now, next_fire_at=next_fire_at, fired_count=fired_count)[1]
