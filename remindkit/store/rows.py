"""Rows <-> domain values. The only place that knows both shapes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from ..checks import session_project
from ..clock import from_us, to_us
from ..models import (
    AdapterName,
    AlertState,
    FallbackPolicy,
    Fire,
    Message,
    MessageKind,
    Occurrence,
    OccurrenceState,
    Reminder,
    Role,
    Session,
    SessionState,
    WaitFor,
    by_value,
)
from . import schema as t
from .create import new_session_row as new_session_row  # re-exported
from .records import REMINDER_COLUMNS as REMINDER_COLUMNS  # the driver-level mapping, re-exported
from .records import REMINDER_FIELDS, _reminder_of_mapping, _reminder_of_values, wait_for_of
from .records import reminder_values as reminder_values
from .records import reminders_of_tuples as reminders_of_tuples

log = logging.getLogger(__name__)
_REMINDER_FIELDS = REMINDER_FIELDS
if tuple(c.name for c in t.reminders.c) != REMINDER_FIELDS:  # records.py lists them by hand
    raise RuntimeError("the reminders table's columns moved: reorder records.REMINDER_FIELDS")


def _dt(us: int | None):
    return None if us is None else from_us(int(us))


def _us(dt):
    return None if dt is None else to_us(dt)


# values -> enum members (a value not among them stays as read: models.by_value)
_OCC_STATE = by_value(OccurrenceState)
_ALERT = by_value(AlertState)
_SESSION_STATE = by_value(SessionState)
_FALLBACK = by_value(FallbackPolicy)
_ADAPTER = by_value(AdapterName)
_ROLE = by_value(Role)
_KIND = by_value(MessageKind)


def _alert(value: str | None) -> AlertState | None:
    return None if value is None else _ALERT.get(value, value)  # type: ignore[arg-type]


def whole_rows(rows: Sequence[Any]) -> bool:
    """Whether the rows of one result are whole ``reminders`` rows. Asked once per
    result: a row's ``_fields`` builds a new view of the result's keys each time
    (a few microseconds a row, on every row a claim reads)."""
    return bool(rows) and tuple(rows[0]._fields) == _REMINDER_FIELDS


def reminder_from_row(row: Any, *, whole: bool | None = None) -> Reminder:
    """The reminder a ``reminders`` row holds. A whole row (``select(reminders)``) is
    looked up by its values first: listings read the same rows again and again, and a
    row's values are all a reminder is made of (any change makes a new key).
    ``whole``: what :func:`whole_rows` said of the row's result (asked when not given)."""
    if whole is None:
        whole = tuple(row._fields) == _REMINDER_FIELDS
    if whole:
        return _reminder_of_values(tuple(row))
    return _reminder_of_mapping(row._mapping)


def reminder_to_row(r: Reminder) -> dict[str, Any]:
    return dict(zip(_REMINDER_FIELDS, reminder_values(r), strict=True))


def readable_reminders(rows: Iterable[Any]) -> list[Reminder]:
    """Rows that map to reminders; an unreadable one is left out (and logged):
    the engine quarantines it when it comes due, and `remindkit status` lists it."""
    out = []
    rows = list(rows)
    whole = whole_rows(rows)
    for row in rows:
        try:
            out.append(reminder_from_row(row, whole=whole))
        except Exception as exc:
            log.warning(
                "reminder %s cannot be read: %s: %s", row._mapping["id"], type(exc).__name__, exc
            )
    return out


# An occurrence joined with its reminder (``select(*FIRE_COLUMNS).join(...)``).
FIRE_COLUMNS = (
    t.occurrences.c.id.label("occ_id"),
    t.occurrences.c.due_at,
    t.occurrences.c.token,
    t.occurrences.c.missed,
    t.occurrences.c.position,
    t.occurrences.c.alert,
    t.occurrences.c.fired_at,
    t.occurrences.c.session_id.label("occ_session"),
    t.occurrences.c.error.label("occ_error"),
    t.occurrences.c.wait_for.label("occ_wait_for"),
    t.reminders,
)


def fire_of(
    rem: Reminder,
    *,
    occurrence_id: int,
    session: str | None,
    due_us: int,
    position: int,
    missed: int,
    token: str,
    alert: AlertState | None,
    fired_at: datetime | None = None,
    wait_for: WaitFor | None = None,
) -> Fire:
    """The fire of one occurrence of ``rem``."""
    return Fire(
        occurrence_id=occurrence_id,
        reminder_id=rem.id,
        session=session,
        due_at=from_us(due_us),
        text=rem.text,
        label=rem.label,
        kind=rem.kind,
        position=position,
        repeat=rem.schedule.repeat,
        missed=missed,
        alarm=rem.alarm,
        announce=rem.announce,
        urgency=rem.urgency,
        on_busy=rem.on_busy,
        token=token,
        fired_at=fired_at,
        alert=alert,
        every_s=rem.schedule.every_s,
        wait_for=wait_for,
    )


def fire_from_joined(row: Any, token: str) -> Fire:
    """A row of ``FIRE_COLUMNS`` as the fire it is, under ``token``."""
    m = row._mapping
    return fire_of(
        reminder_from_row(row, whole=False),
        occurrence_id=m["occ_id"],
        session=m["occ_session"],
        due_us=m["due_at"],
        position=m["position"] or 1,
        missed=m["missed"],
        token=token,
        alert=_alert(m["alert"]),
        fired_at=_dt(m["fired_at"]),
        wait_for=wait_for_of(m["occ_wait_for"]),
    )


def occurrence_from_row(row: Any) -> Occurrence:
    m = row._mapping
    return Occurrence(
        id=m["id"],
        reminder_id=m["reminder_id"],
        due_at=from_us(m["due_at"]),
        state=_OCC_STATE.get(m["state"], m["state"]),
        session=m["session_id"],
        fired_at=_dt(m["fired_at"]),
        delivered_at=_dt(m["delivered_at"]),
        missed=m["missed"],
        position=m["position"],
        attempts=m["attempts"],
        error=m["error"],
        delivered_to=m["delivered_to"],
        alert=_alert(m["alert"]),
        owner=m["owner"],
        wait_for=wait_for_of(m["wait_for"]),
        handed_at=_dt(m["handed_at"]),
    )


SESSION_FIELDS = tuple(c.name for c in t.sessions.c)


def session_from_row(row: Any, now_us: int | None = None) -> Session:
    return session_of_mapping(row._mapping, now_us)


def session_of_values(values: Sequence[Any], now_us: int | None = None) -> Session:
    """:func:`session_from_row` for a plain tuple in ``sessions`` column order
    (:data:`SESSION_FIELDS`), as a driver's cursor returns it."""
    return session_of_mapping(dict(zip(SESSION_FIELDS, values, strict=True)), now_us)


def session_of_mapping(m: Any, now_us: int | None = None) -> Session:
    in_turn = m["turn_token"] is not None and (now_us is None or (m["turn_until"] or 0) > now_us)
    return Session(
        id=m["id"],
        adapter=_ADAPTER.get(m["adapter"], m["adapter"]),
        config=json.loads(m["config"]) if m["config"] not in (None, "", "{}") else {},
        state=_SESSION_STATE.get(m["state"], m["state"]),
        created_at=_dt(m["created_at"]),
        last_active_at=_dt(m["last_active_at"]),
        busy=m["busy_since"] is not None,
        busy_since=_dt(m["busy_since"]),
        in_turn=in_turn,
        parent_id=m["parent_id"],
        title=m["title"],
        fallback=_FALLBACK.get(m["fallback"], m["fallback"]),
        failures=m["failures"],
        last_error=m["last_error"],
    )


def session_to_row(s: Session) -> dict[str, Any]:
    return {
        "id": s.id,
        "adapter": s.adapter,
        "config": json.dumps(s.config, sort_keys=True),
        "state": s.state,
        "created_at": _us(s.created_at),
        "last_active_at": _us(s.last_active_at),
        "busy_since": _us(s.busy_since),
        "parent_id": s.parent_id,
        "title": s.title,
        "fallback": s.fallback,
        "project": session_project(s.id),  # a new row's project is its id's namespace
    }


def message_from_row(row: Any) -> Message:
    m = row._mapping
    calls = json.loads(m["tool_calls"]) if m["tool_calls"] else []
    return Message(
        session=m["session_id"],
        role=_ROLE.get(m["role"], m["role"]),
        content=m["content"],
        kind=_KIND.get(m["kind"], m["kind"]),
        hidden=bool(m["hidden"]),
        tool_calls=tuple(calls),
        tool_call_id=m["tool_call_id"],
        name=m["name"],
        seq=m["seq"],
        id=m["id"],
        created_at=from_us(m["created_at"]),
    )


def message_to_row(msg: Message, session_id: str, seq: int, now_us: int) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "seq": seq,
        "role": msg.role,
        "kind": msg.kind,
        "content": msg.content,
        "hidden": msg.hidden,
        "tool_calls": json.dumps(list(msg.tool_calls)) if msg.tool_calls else None,
        "tool_call_id": msg.tool_call_id,
        "name": msg.name,
        "created_at": now_us,
    }


class MappedRow:
    """A plain mapping that reads like a result row (``row._mapping``)."""

    def __init__(self, mapping: dict[str, Any]) -> None:
        self._mapping = mapping
