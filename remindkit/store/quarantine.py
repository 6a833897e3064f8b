"""Rows an engine will not carry out, set aside (``failed``, with the reason) and never
deleted: a reminder row that cannot be read (a hand edit, a newer remindkit,
damage), or whose plan the engine refuses (past its own bounds: see
:func:`remindkit.engine.plan.guarded_plan`). Such a row never again stops the
engine that tried to claim it; ``remindkit status`` lists it."""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import Connection, update

from ..audit import EventKind, Surface
from ..errors import PlanRefused
from ..models import FAILED, OCC_FAILED, Fire, Quarantine
from . import schema as t
from .events import defer_events, event_row
from .rows import fire_from_joined

log = logging.getLogger(__name__)


def quarantine(conn: Connection, reminder_id: str, exc: BaseException, *, now_us: int) -> None:
    """A reminder row that cannot be read (a hand edit, a newer remindkit, damage),
    or whose plan the engine refuses (:class:`~remindkit.errors.PlanRefused`), is set
    aside as ``failed`` with its :class:`~remindkit.models.Quarantine` and the reason,
    never deleted, and never again stops the engine that tried to claim it."""
    if isinstance(exc, PlanRefused):
        kind, said = Quarantine.REFUSED_PLAN, exc.message  # str() would put its code first
    else:
        kind, said = Quarantine.UNREADABLE_ROW, str(exc)
    why = f"quarantined: {kind.replace('_', ' ')} ({type(exc).__name__}: {said})"[:500]
    log.error("reminder %s %s", reminder_id, why)
    conn.execute(
        update(t.reminders)
        .where(t.reminders.c.id == reminder_id)
        .values(
            state=FAILED,
            quarantine=kind,
            next_fire_at=None,
            last_error=why,
            version=t.reminders.c.version + 1,
        )
    )
    defer_events(
        conn,
        [
            event_row(
                EventKind.FAILED,
                Surface.ENGINE,
                at_us=now_us,
                session=None,
                reminder_id=reminder_id,
                detail={"error": why},
            )
        ],
    )


def readable_fire(conn: Connection, row: Any, token: str, now_us: int) -> Fire | None:
    try:
        return fire_from_joined(row, token)
    except Exception as exc:
        m = row._mapping
        quarantine(conn, m["id"], exc, now_us=now_us)
        conn.execute(
            update(t.occurrences)
            .where(t.occurrences.c.id == m["occ_id"])
            .values(
                state=OCC_FAILED,
                error="its reminder is unreadable (quarantined)",
                owner=None,
                token=None,
                lease_until=None,
            )
        )
        return None


__all__ = ["quarantine", "readable_fire"]
