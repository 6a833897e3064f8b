"""remindkit: durable reminders for LLM agent sessions.

Set a reminder in a conversation; remindkit keeps it in a SQLAlchemy store
(SQLite by default, PostgreSQL to scale), alerts the person when it comes due,
and hands a hidden ``<schedule-fired>`` message back to the session that set it,
as a new turn, never in the middle of one.

    >>> import remindkit as rk
    >>> graph = rk.build()              # the configured store, settings, clock  # doctest: +SKIP
    >>> graph.api.create("Check the deploy", session="s1", in_="5m")            # doctest: +SKIP
    >>> engine = graph.engine(alerter="local").start()                         # doctest: +SKIP

:func:`build` is the composition root every surface runs on (see
:mod:`remindkit.wiring`): its :class:`~remindkit.wiring.Graph` holds the store, the
reminders API (``graph.api``) and makes engines with their alerter attached.

In a notebook, ``rk.chat(...)`` and ``rk.panel(chat)`` (see ``remindkit.notebook``;
loaded on first use, so ``import remindkit`` needs no ipywidgets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .audit import Event, EventKind, Surface
    from .chats.session import ChatSession
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
    from .models import Fire, Occurrence, Reminder, ReminderSpec, Session
    from .notebook.panels import Panel
    from .reminders import Reminders
    from .schedules import Schedule, parse_duration
    from .settings import Limits, Settings
    from .store import SqlStore, open_store
    from .wiring import Graph, build

# Loaded on first use, so that `import remindkit` (and the command line) does not pay for
# SQLAlchemy, the engine or the alerts until they are needed, nor a command run every
# second (status --line) for the audit vocabulary.
_LAZY = {
    "Event": "audit",
    "EventKind": "audit",
    "Surface": "audit",
    "Clock": "clock",
    "FakeClock": "clock",
    "SystemClock": "clock",
    "Conflict": "errors",
    "InvalidInput": "errors",
    "InvalidSchedule": "errors",
    "LimitExceeded": "errors",
    "NotFound": "errors",
    "RemindkitError": "errors",
    "StoreError": "errors",
    "Limits": "settings",
    "Settings": "settings",
    "Engine": "engine",
    "Events": "events",
    "Fire": "models",
    "Occurrence": "models",
    "Reminder": "models",
    "ReminderSpec": "models",
    "Session": "models",
    "Reminders": "reminders",
    "Schedule": "schedules",
    "parse_duration": "schedules",
    "SqlStore": "store",
    "open_store": "store",
    "Graph": "wiring",
    "build": "wiring",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'remindkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"


def chat(base_url: str | None = None, model: Any = None, **kwargs: Any) -> ChatSession:
    """A chat whose reminders come back to it, with an engine in this kernel:
    ``rk.chat(base_url=URL, model=NAME)`` or ``rk.chat(model=fn_or_model)``.
    See :func:`remindkit.notebook.session.chat`."""
    from .notebook.session import chat as _chat

    return _chat(base_url, model, **kwargs)


def panel(chat: ChatSession | None = None, **kwargs: Any) -> Panel:
    """The notebook widget panel (countdown pills, a form, the chat view) for a
    chat, or for a store's reminders. See :func:`remindkit.notebook.panels.panel`."""
    from .notebook import require_widgets

    require_widgets()
    from .notebook.panels import panel as _panel

    return _panel(chat, **kwargs)


__all__ = [
    "Clock",
    "Conflict",
    "Engine",
    "Event",
    "EventKind",
    "Events",
    "FakeClock",
    "Fire",
    "Graph",
    "InvalidInput",
    "InvalidSchedule",
    "LimitExceeded",
    "Limits",
    "NotFound",
    "Occurrence",
    "Reminder",
    "ReminderSpec",
    "Reminders",
    "RemindkitError",
    "Schedule",
    "Session",
    "Settings",
    "SqlStore",
    "StoreError",
    "Surface",
    "SystemClock",
    "build",
    "chat",
    "open_store",
    "panel",
    "parse_duration",
]
