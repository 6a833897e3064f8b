"""Domain values: reminders, occurrences (fires), sessions.

Frozen dataclasses; the store maps its rows to these, so nothing outside
``remindkit.store`` imports SQLAlchemy. ``to_dict`` gives the stable ``--json``
shapes (times RFC 3339 UTC with ``Z``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .clock import format_utc
from .schedules import Schedule
from .schedules.zones import get_zone

# Reminder states
ACTIVE, PAUSED, DONE, CANCELLED, FAILED = "active", "paused", "done", "cancelled", "failed"
REMINDER_STATES = (ACTIVE, PAUSED, DONE, CANCELLED, FAILED)
LIVE_STATES = (ACTIVE, PAUSED)  # labels are unique among these

# Occurrence states
CLAIMED = "claimed"  # an engine holds it (lease) to alert and hand it to delivery
WAITING = "waiting"  # fired; waits for its session to be idle or reachable
DELIVERING = "delivering"  # a turn is running with it (lease)
DELIVERED = "delivered"
SKIPPED = "skipped"  # by policy: busy-skip, catch-up skip
OCC_FAILED = "failed"
OCC_CANCELLED = "cancelled"  # its reminder was cancelled before it was delivered
OCC_FINAL = (DELIVERED, SKIPPED, OCC_FAILED, OCC_CANCELLED)

MISFIRE_POLICIES = ("latest", "skip", "all")
BUSY_POLICIES = ("wait", "rebase", "skip")
URGENCIES = ("low", "normal", "critical")


@dataclass(frozen=True)
class Reminder:
    id: str
    session: str | None
    text: str
    schedule: Schedule
    state: str = ACTIVE
    label: str | None = None
    next_fire_at: datetime | None = None
    fired_count: int = 0
    alarm: bool = False
    announce: str | None = None
    urgency: str = "normal"
    misfire: str = "latest"
    catchup_cap: int = 10
    on_busy: str = "wait"
    last_error: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    source: str = "api"
    slot: int | None = None
    snoozed: bool = False
    version: int = 1

    @property
    def kind(self) -> str:
        return self.schedule.kind

    @property
    def remaining(self) -> int | None:
        """Fires left, None when forever."""
        if self.schedule.repeat is None:
            return None
        return max(0, self.schedule.repeat - self.fired_count)

    def local_next(self) -> str | None:
        if self.next_fire_at is None:
            return None
        return self.next_fire_at.astimezone(get_zone(self.schedule.tz)).isoformat()

    def to_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "id": self.id,
            "session": self.session,
            "label": self.label,
            "text": self.text,
            "kind": s.kind,
            "state": self.state,
            "next_fire_at": format_utc(self.next_fire_at),
            "next_fire_local": self.local_next(),
            "tz": s.tz,
            "schedule": s.describe(),
            "every_s": s.every_s,
            "cron": s.cron,
            "until": format_utc(s.until),
            "repeat": s.repeat,
            "fired_count": self.fired_count,
            "remaining": self.remaining,
            "alarm": self.alarm,
            "announce": self.announce,
            "urgency": self.urgency,
            "misfire": self.misfire,
            "on_busy": self.on_busy,
            "last_error": self.last_error,
            "source": self.source,
            "slot": self.slot,
            "created_at": format_utc(self.created_at),
            "updated_at": format_utc(self.updated_at),
        }


@dataclass(frozen=True)
class Occurrence:
    """One fire of a reminder: keyed by (reminder_id, due_at), the idempotency key."""

    id: int
    reminder_id: str
    due_at: datetime
    state: str
    session: str | None = None
    fired_at: datetime | None = None
    delivered_at: datetime | None = None
    missed: int = 0
    position: int | None = None  # 1-based fire number of its reminder
    attempts: int = 0
    error: str | None = None
    delivered_to: str | None = None
    alert: str | None = None
    owner: str | None = None

    @property
    def key(self) -> str:
        return occurrence_key(self.reminder_id, self.due_at)

    @property
    def late_ms(self) -> int | None:
        if self.fired_at is None:
            return None
        return int((self.fired_at - self.due_at).total_seconds() * 1000)

    @property
    def outcome(self) -> str:
        return self.state

    def to_dict(self) -> dict[str, Any]:
        return {
            "reminder_id": self.reminder_id,
            "key": self.key,
            "session": self.session,
            "due_at": format_utc(self.due_at),
            "fired_at": format_utc(self.fired_at),
            "late_ms": self.late_ms,
            "delivered_at": format_utc(self.delivered_at),
            "delivered_to": self.delivered_to,
            "outcome": self.state,
            "missed": self.missed,
            "position": self.position,
            "attempts": self.attempts,
            "error": self.error,
        }


def occurrence_key(reminder_id: str, due_at: datetime) -> str:
    return f"{reminder_id}@{format_utc(due_at)}"


@dataclass(frozen=True)
class Fire:
    """What an engine fires: an occurrence together with its reminder's content."""

    occurrence_id: int
    reminder_id: str
    session: str | None
    due_at: datetime
    text: str
    label: str | None = None
    kind: str = "after"
    position: int = 1
    repeat: int | None = 1
    missed: int = 0
    alarm: bool = False
    announce: str | None = None
    urgency: str = "normal"
    on_busy: str = "wait"
    token: str = ""
    fired_at: datetime | None = None
    alert: str | None = None
    every_s: int | None = None
    wait_reason: str | None = None  # why a waiting occurrence waited (its recorded error)

    @property
    def key(self) -> str:
        return occurrence_key(self.reminder_id, self.due_at)

    @property
    def wants_alert(self) -> bool:
        return self.alarm or bool(self.announce)


# Session states
SESSION_ACTIVE, SESSION_CLOSED, SESSION_DELETED = "active", "closed", "deleted"


@dataclass(frozen=True)
class Session:
    id: str
    adapter: str | None = None  # "command", "python", "openai", or None (no delivery yet)
    config: dict[str, Any] = field(default_factory=dict)
    state: str = SESSION_ACTIVE
    created_at: datetime | None = None
    last_active_at: datetime | None = None
    busy: bool = False  # marked busy by an external agent (`remindkit session busy`)
    busy_since: datetime | None = None
    in_turn: bool = False  # a turn runs through remindkit (lease held)
    parent_id: str | None = None  # fresh-session fallback: the session it replaced
    title: str | None = None

    @property
    def idle(self) -> bool:
        return not self.busy and not self.in_turn

    def to_dict(self) -> dict[str, Any]:
        config = {k: ("***" if "key" in k.lower() else v) for k, v in self.config.items()}
        return {
            "id": self.id,
            "adapter": self.adapter,
            "config": config,
            "state": self.state,
            "created_at": format_utc(self.created_at),
            "last_active_at": format_utc(self.last_active_at),
            "busy": self.busy or self.in_turn,
            "parent_id": self.parent_id,
            "title": self.title,
        }


# Message kinds in a transcript
CHAT, FIRED_TURN, FEEDBACK, TOOL_RESULT = "chat", "fired", "feedback", "tool"


@dataclass(frozen=True)
class Message:
    """One message of a transcript that remindkit keeps (OpenAI chat roles).

    ``kind`` says where a user-role message came from: typed (``chat``), a fired
    reminder (``fired``, hidden), or the report of tags that were not carried
    out (``feedback``, hidden)."""

    session: str
    role: str  # system | user | assistant | tool
    content: str | None = None
    kind: str = CHAT
    hidden: bool = False
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    seq: int = 0
    id: int = 0
    created_at: datetime | None = None

    def to_openai(self) -> dict[str, Any]:
        # "" and never null: llama-cpp-python's server refuses a null content (HTTP 500) and
        # Ollama a null or missing one (400); OpenAI, llama.cpp and vLLM take "" too
        out: dict[str, Any] = {"role": self.role, "content": self.content or ""}
        if self.tool_calls:
            out["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None and self.role == "tool":
            out["name"] = self.name
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "session": self.session, "seq": self.seq, "role": self.role, "kind": self.kind,
            "content": self.content, "hidden": self.hidden, "tool_calls": list(self.tool_calls),
            "tool_call_id": self.tool_call_id, "name": self.name, "created_at": format_utc(self.created_at),
        }
