"""remindkit: durable reminders for LLM agent sessions.

Set a reminder in a conversation; remindkit keeps it in a SQLAlchemy store
(SQLite by default, PostgreSQL to scale), alerts the person when it comes due,
and hands a hidden ``<schedule-fired>`` message back to the session that set it,
as a new turn, never in the middle of one.

    >>> import remindkit as rk                                       # doctest: +SKIP
    >>> api = rk.Reminders(rk.open_store())                          # doctest: +SKIP
    >>> api.create("Check the deploy", session="s1", in_="5m")       # doctest: +SKIP
"""

from .clock import Clock, FakeClock, SystemClock
from .engine import Engine
from .errors import (
    Conflict,
    InvalidInput,
    InvalidSchedule,
    LimitExceeded,
    NotFound,
    RemindkitError,
    StoreError,
)
from .events import Events
from .models import Fire, Occurrence, Reminder, Session
from .reminders import Reminders
from .schedules import Schedule, parse_duration
from .settings import Limits, Settings
from .store import SqlStore, open_store

__version__ = "0.1.0"

__all__ = [
    "Clock",
    "Conflict",
    "Engine",
    "Events",
    "FakeClock",
    "Fire",
    "InvalidInput",
    "InvalidSchedule",
    "LimitExceeded",
    "Limits",
    "NotFound",
    "Occurrence",
    "Reminder",
    "Reminders",
    "RemindkitError",
    "Schedule",
    "Session",
    "Settings",
    "SqlStore",
    "StoreError",
    "SystemClock",
    "open_store",
    "parse_duration",
]
