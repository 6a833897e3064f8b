"""What the notebook widgets show, as plain data.

Pure: no clock, no I/O, no ipywidgets. The widgets turn reminders into
:class:`Pill` values and a transcript into :class:`Line` values here, and the
browser counts the pills down from their due times (``due_ms``); the Python
twins of that countdown (:func:`seconds_left`, :func:`format_left`) are what the
tests check and what a text view would print.

A fired turn never shows its ``<schedule-fired>`` block: it becomes one short
marker line, ``⏰ check back fired 14:05``, followed by the agent's reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any

from ..clock import to_us
from ..models import ACTIVE, Message, Reminder
from ..protocol.display import fired_labels, fired_time, transcript_view

TEXT_PREVIEW = 120
LABEL_PREVIEW = 40
TRANSCRIPT_LINES = 200


@dataclass(frozen=True)
class Pill:
    """One live reminder as a pill: what it is, and when it is due."""

    id: str
    session: str | None
    label: str
    text: str
    kind: str  # after | at | every | cron
    schedule: str  # "in 5m", "every 2m x30", ...
    state: str  # active | paused
    due_ms: int | None  # next fire, milliseconds since the epoch (the browser counts down to it)
    remaining: int | None  # fires left, None when forever
    alarm: bool
    announce: str | None
    waiting: str | None = None  # why a fire of it that came due waits (its session), or None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "label": self.label,
            "text": self.text,
            "kind": self.kind,
            "schedule": self.schedule,
            "state": self.state,
            "due_ms": self.due_ms,
            "remaining": self.remaining,
            "alarm": self.alarm,
            "announce": self.announce,
            "waiting": self.waiting,
        }


def pill(rem: Reminder) -> Pill:
    return Pill(
        id=rem.id,
        session=rem.session,
        label=rem.label or _preview(rem.text, LABEL_PREVIEW),
        text=_preview(rem.text, TEXT_PREVIEW),
        kind=rem.kind,
        schedule=rem.schedule.describe(),
        state=rem.state,
        due_ms=None if rem.next_fire_at is None else to_us(rem.next_fire_at) // 1000,
        remaining=rem.remaining,
        alarm=rem.alarm,
        announce=rem.announce,
        waiting=None if rem.delivery is None else (rem.delivery.reason or "waits for its session"),
    )


def pills(reminders: Sequence[Reminder]) -> list[Pill]:
    """Active ones by due time, then paused ones (by label)."""
    active = sorted(
        (r for r in reminders if r.state == ACTIVE and r.next_fire_at is not None),
        key=lambda r: (r.next_fire_at, r.id),
    )
    counted = {r.id for r in active}
    rest = sorted(
        (r for r in reminders if r.id not in counted), key=lambda r: (r.label or r.text, r.id)
    )
    return [pill(r) for r in (*active, *rest)]


def seconds_left(due_ms: int | None, now_ms: int) -> int | None:
    """Whole seconds until ``due_ms``, rounded up (a pill shows 0:01 until the
    last second has passed); 0 once due; None when not scheduled."""
    if due_ms is None:
        return None
    return max(0, -((now_ms - due_ms) // 1000))


def format_left(seconds: int | None) -> str:
    """``0:05``, ``12:30``, ``1:02:03``, ``3d 04:05``: the countdown text of a pill."""
    if seconds is None:
        return "–"
    days, rest = divmod(max(0, seconds), 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}:{minutes:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


# -- the transcript --------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One line of the chat view: ``you``, ``agent`` or ``fired`` (a marker)."""

    seq: int
    who: str
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "who": self.who, "text": self.text}


def chat_lines(
    messages: Sequence[Message], zone: tzinfo, *, limit: int = TRANSCRIPT_LINES
) -> list[Line]:
    """What a person sees of a transcript: typed messages, one marker per fired
    turn (with the fire time in ``zone``), and replies without their tags.
    Feedback blocks, tool traffic and empty replies are hidden."""
    lines = transcript_view(messages, lambda m: fired_marker(m.content or "", zone, m.created_at))
    return [Line(*v) for v in lines[-limit:]]


def fired_marker(message: str, zone: tzinfo, fallback: datetime | None = None) -> str:
    """``⏰ check back fired 14:05`` for a ``<schedule-fired>`` message (labels of
    every block, the fire time of the first one in ``zone``)."""
    labels = fired_labels(message)
    when = fired_time(message) or fallback
    text = "⏰ " + (", ".join(labels) if labels else "reminder") + " fired"
    if when is not None:
        text += " " + when.astimezone(zone).strftime("%H:%M")
    return text


def _preview(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


__all__ = [
    "Line",
    "Pill",
    "chat_lines",
    "fired_marker",
    "fired_time",
    "format_left",
    "pill",
    "pills",
    "seconds_left",
]
