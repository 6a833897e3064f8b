"""The audit trail: every change to a reminder, as an event.

A change made through the reminders API (create, cancel, pause, ...) and an
outcome the engine records (fired, delivered, failed, ...) each write one
:class:`Event` in the same transaction as the change itself, so there is no
change without its event and no event without its change. Event ids only grow;
a reader tails the trail by id (``SqlStore.events.events_after``), e.g. a server-sent
event stream resuming from ``Last-Event-ID``.

Pure values only: the store writes and reads the rows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._compat import StrEnum
from .clock import format_utc

DETAIL_MAX = 1_000  # characters of an event's JSON detail
DETAIL_VALUE_MAX = 200  # characters of one string value in it
READ_MAX = 1_000  # events returned by one read at most


class EventKind(StrEnum):
    # changes made by a person or an agent
    CREATED = "created"
    MODIFIED = "modified"
    PAUSED = "paused"
    RESUMED = "resumed"
    SNOOZED = "snoozed"
    CANCELLED = "cancelled"
    REPLACED = "replaced"  # a new reminder took its label
    # outcomes recorded by an engine
    FIRED = "fired"
    DELIVERED = "delivered"
    ALERTED = "alerted"  # a fire for the person alone: alerted, no agent to hand it to
    FAILED = "failed"
    SKIPPED = "skipped"
    WAITING = "waiting"


class Surface(StrEnum):
    """What made a change: the command line, an agent's tool call or reply tag, a
    notebook widget, the tray, an HTTP or MCP client, Telegram, an engine, an import."""

    CLI = "cli"
    TOOL = "tool"
    TAG = "tag"
    NOTEBOOK = "notebook"
    TRAY = "tray"
    API = "api"
    MCP = "mcp"
    TELEGRAM = "telegram"
    ENGINE = "engine"
    IMPORT = "import"


@dataclass(frozen=True)
class Event:
    id: int
    at: datetime
    kind: EventKind
    surface: Surface
    session: str | None
    reminder_id: str | None
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": format_utc(self.at),
            "kind": str(self.kind),
            "surface": str(self.surface),
            "session": self.session,
            "reminder_id": self.reminder_id,
            "detail": dict(self.detail),
        }


_DETAIL_JSON = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), default=str
)  # built once


def detail_json(detail: Mapping[str, Any] | None) -> str | None:
    """``detail`` as JSON of at most :data:`DETAIL_MAX` characters: long strings are
    cut to :data:`DETAIL_VALUE_MAX`; a detail still too long keeps only its keys."""
    if not detail:
        return None
    small = {str(k)[:DETAIL_VALUE_MAX]: _small(v) for k, v in detail.items()}
    out = _DETAIL_JSON.encode(small)
    if len(out) > DETAIL_MAX:
        out = json.dumps({"truncated": True, "keys": sorted(small)[:20]}, ensure_ascii=False)[
            :DETAIL_MAX
        ]
    return out


def _small(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= DETAIL_VALUE_MAX else value[: DETAIL_VALUE_MAX - 1] + "…"
    if isinstance(value, datetime):
        return format_utc(value)
    if isinstance(value, (list, tuple)):
        return [_small(v) for v in value[:20]]
    if isinstance(value, Mapping):
        return {str(k)[:DETAIL_VALUE_MAX]: _small(v) for k, v in list(value.items())[:20]}
    return value


def parse_surface(value: object) -> Surface:
    try:
        return Surface(str(value))
    except ValueError:
        from .errors import InvalidInput

        allowed = ", ".join(s.value for s in Surface)
        raise InvalidInput(
            f"surface must be one of {allowed} (got {value!r})", code="invalid_argument"
        ) from None


__all__ = [
    "DETAIL_MAX",
    "DETAIL_VALUE_MAX",
    "READ_MAX",
    "Event",
    "EventKind",
    "Surface",
    "detail_json",
    "parse_surface",
]
