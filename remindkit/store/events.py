"""Writing and reading the audit trail (``events`` table; values in ``remindkit.audit``).

Every writer calls :func:`write_events` inside the transaction of the change it
records, as that transaction's last statement. On PostgreSQL it first takes a
transaction advisory lock, so that event ids are handed out in commit order and a
reader tailing by id never skips one that commits late; the lock is held only
from that insert to the commit. SQLite writers are serialised anyway.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, select

from ..audit import READ_MAX, Event, EventKind, Surface
from ..clock import from_us
from ..errors import InvalidInput
from . import schema as t
from .create import EVENT_COLUMNS as _COLUMNS
from .create import EVENTS_LOCK as _EVENTS_LOCK
from .create import EventRow, event_row
from .db import DEFERRED_EVENTS
from .dialect import Dialect, chunks
from .role import Role

log = logging.getLogger(__name__)


def defer_events(conn: Connection, rows: Sequence[EventRow]) -> None:
    """Queue events to be written by this transaction's :func:`write_events` (for a
    change made in the middle of a transaction, e.g. a quarantine during a claim)."""
    conn.info.setdefault(DEFERRED_EVENTS, []).extend(rows)


def write_events(conn: Connection, rows: Sequence[EventRow]) -> None:
    """Insert event rows (and any deferred ones) in the caller's transaction, as its
    last statement."""
    pending = conn.info.pop(DEFERRED_EVENTS, None)
    if pending:
        rows = [*pending, *rows]
    if not rows:
        return
    dialect = Dialect.of(conn)
    dialect.advisory_xact_lock(conn, _EVENTS_LOCK)
    mark = dialect.placeholder
    # Plain executemany: 10,000 outcomes at once must cost little beside their own writes.
    sql = f"INSERT INTO events ({', '.join(_COLUMNS)}) VALUES ({', '.join([mark] * len(_COLUMNS))})"
    for chunk in chunks(rows, 5000):
        dialect.execute_many(conn, sql, chunk)


def event_from_row(row: Any) -> Event:
    m = row._mapping
    return _event_of(
        m["id"], m["at"], m["kind"], m["surface"], m["session_id"], m["reminder_id"], m["detail"]
    )


def _event_of(
    id_: int,
    at: int,
    kind_text: str,
    surface_text: str,
    session: str | None,
    reminder_id: str | None,
    detail_text: str | None,
) -> Event:
    try:
        detail = json.loads(detail_text) if detail_text else {}
    except ValueError:
        detail = {"unreadable": True}
    kind: EventKind | str
    surface: Surface | str
    try:
        kind = EventKind(kind_text)
    except ValueError:  # written by a newer remindkit: shown as it is
        kind = kind_text
    try:
        surface = Surface(surface_text)
    except ValueError:
        surface = surface_text
    return Event(
        id=id_,
        at=from_us(at),
        kind=kind,  # type: ignore[arg-type]
        surface=surface,  # type: ignore[arg-type]
        session=session,
        reminder_id=reminder_id,
        detail=detail if isinstance(detail, dict) else {"value": detail},
    )


# A tail's statement (Events.tail): the events, a fired one's reminder as it is now
# (the fields an event stream shows), the session's project.
_TAIL_SQL = (
    "SELECT e.id, e.at, e.kind, e.surface, e.session_id, e.reminder_id, e.detail,"
    " r.id, r.text, r.label, r.alarm, r.announce, r.urgency, s.project"
    " FROM events e"
    " LEFT JOIN reminders r ON e.kind = 'fired' AND r.id = e.reminder_id"
    " LEFT JOIN sessions s ON s.id = e.session_id"
    " WHERE e.id > {mark} ORDER BY e.id LIMIT {mark}"
)
FIRED_FIELDS = ("text", "label", "alarm", "announce", "urgency")
Tailed = tuple[Event, "dict[str, Any] | None", "str | None"]


def _check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= READ_MAX:
        raise InvalidInput(f"limit must be 1-{READ_MAX} (got {limit!r})", code="invalid_argument")
    return limit


class Events(Role):
    """Reading the audit trail."""

    def events_after(
        self,
        after_id: int = 0,
        *,
        limit: int = 100,
        reminder_id: str | None = None,
        session: str | None = None,
    ) -> list[Event]:
        """Events with an id above ``after_id``, oldest first, at most ``limit``
        (1-1000) per call: a reader tails the trail by passing the last id it saw."""
        limit = _check_limit(limit)
        if isinstance(after_id, bool) or not isinstance(after_id, int) or after_id < 0:
            raise InvalidInput(
                f"after_id must be a whole number >= 0 (got {after_id!r})", code="invalid_argument"
            )
        e = t.events.c
        stmt = select(t.events).where(e.id > after_id)
        stmt = _scoped(stmt, reminder_id=reminder_id, session=session).order_by(e.id).limit(limit)
        with self.read() as conn:
            return [event_from_row(r) for r in conn.execute(stmt)]

    def tail(self, after_id: int = 0, *, limit: int = 100) -> list[Tailed]:
        """:meth:`events_after` for a reader that streams the trail (the HTTP API's
        event feed), from one statement run through the driver: each event with, for
        a ``fired`` one, its reminder's ``FIRED_FIELDS`` as they are now (None if it
        is gone), and the project of its session's row (None without one). What a
        fire's way to the streams waited on: SQLAlchemy's statement, then a read of
        the reminder of its own."""
        limit = _check_limit(limit)
        if isinstance(after_id, bool) or not isinstance(after_id, int) or after_id < 0:
            raise InvalidInput(
                f"after_id must be a whole number >= 0 (got {after_id!r})", code="invalid_argument"
            )
        out: list[Tailed] = []
        for row in self.db.query(
            _TAIL_SQL.format(mark=self.dialect.placeholder), (after_id, limit)
        ):
            fired = None
            if row[7] is not None:
                fired = {
                    "text": row[8],
                    "label": row[9],
                    "alarm": bool(row[10]),
                    "announce": row[11],
                    "urgency": row[12],
                }
            out.append((_event_of(*row[:7]), fired, row[13]))
        return out

    def recent_events(
        self,
        *,
        limit: int = 50,
        reminder_id: str | None = None,
        session: str | None = None,
    ) -> list[Event]:
        """The newest ``limit`` events (1-1000), oldest first."""
        limit = _check_limit(limit)
        e = t.events.c
        stmt = (
            _scoped(select(t.events), reminder_id=reminder_id, session=session)
            .order_by(e.id.desc())
            .limit(limit)
        )
        with self.read() as conn:
            rows = [event_from_row(r) for r in conn.execute(stmt)]
        rows.reverse()
        return rows

    def last_event_id(self) -> int:
        with self.read() as conn:
            return int(
                conn.execute(select(t.events.c.id).order_by(t.events.c.id.desc()).limit(1)).scalar()
                or 0
            )


def _scoped(stmt: Any, *, reminder_id: str | None, session: str | None) -> Any:
    e = t.events.c
    if reminder_id is not None:
        stmt = stmt.where(e.reminder_id == reminder_id)
    if session is not None:
        stmt = stmt.where(e.session_id == session)
    return stmt


def changes(
    old: Any,
    new: Any,
    fields: Sequence[str] = ("state", "next_fire_at", "label", "last_error", "snoozed"),
) -> Iterator[tuple[str, list[Any]]]:
    """(field, [before, after]) for the fields that differ between two reminders."""
    for name in fields:
        a, b = getattr(old, name), getattr(new, name)
        if a != b:
            yield name, [a, b]


__all__ = [
    "FIRED_FIELDS",
    "Events",
    "EventRow",
    "changes",
    "defer_events",
    "event_from_row",
    "event_row",
    "write_events",
]
