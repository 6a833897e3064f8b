"""When a paused reminder fires next once it is resumed: a pure function of its
schedule, what it has fired, and ``now``."""

from __future__ import annotations

from datetime import datetime

from .spec import Schedule, next_after


def resume_next(
    schedule: Schedule, now: datetime, *, next_fire_at: datetime | None = None, fired_count: int = 0
) -> datetime | None:
    """Next fire of a resumed reminder, computed from now.

    A one-shot keeps its time if that is still ahead, else fires at once; a
    repeating one takes its next anchor-aligned occurrence after now (None when
    its repeat count is used up)."""
    if not schedule.repeating:
        first = schedule.first_at
        assert first is not None
        if next_fire_at is not None and next_fire_at > now:
            return next_fire_at
        return first if first > now else now
    if schedule.repeat is not None and fired_count >= schedule.repeat:
        return None
    return next_after(schedule, now)
