"""Pure schedule logic: durations, zones, cron and the next fire time.

Nothing here reads the clock or does I/O; ``now`` is always a parameter.
"""

from .cron import compile_cron, next_cron_time
from .durations import format_countdown, format_duration, parse_duration
from .resume import resume_next, resume_schedule
from .spec import (
    KINDS,
    Schedule,
    build_schedule,
    due_between,
    first_fire,
    next_after,
    parse_repeat,
)
from .zones import get_zone, local_zone_name, wall_to_instant

__all__ = [
    "KINDS",
    "Schedule",
    "build_schedule",
    "compile_cron",
    "due_between",
    "first_fire",
    "format_countdown",
    "format_duration",
    "get_zone",
    "local_zone_name",
    "next_after",
    "resume_next",
    "resume_schedule",
    "next_cron_time",
    "parse_duration",
    "parse_repeat",
    "wall_to_instant",
]
