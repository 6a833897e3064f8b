"""Sessions: the conversations reminders belong to (their adapter, config, title,
busy mark and state)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import insert, select, update

from ..audit import EventKind, Surface
from ..errors import NotFound
from ..models import ACTIVE, PAUSED, SESSION_ACTIVE, SESSION_DELETED, Session
from . import schema as t
from .dialect import chunks
from .events import event_row, write_events
from .role import Role
from .rows import (
    SESSION_FIELDS,
    new_session_row,
    session_from_row,
    session_of_values,
    session_to_row,
)

_COLUMNS = ", ".join(SESSION_FIELDS)


class Sessions(Role):
    """Sessions of the store."""

    def put_session(self, sess: Session, *, now_us: int) -> Session:
        """Create or update a session's adapter, config and title (not its busy state)."""
        with self.write() as conn:
            row = conn.execute(
                self.dialect.for_update(select(t.sessions).where(t.sessions.c.id == sess.id))
            ).first()
            values = session_to_row(sess)
            if row is None:
                values["created_at"] = values["created_at"] or now_us
                values["last_active_at"] = values["last_active_at"] or now_us
                conn.execute(insert(t.sessions).values(**values))
            else:
                conn.execute(
                    update(t.sessions)
                    .where(t.sessions.c.id == sess.id)
                    .values(
                        adapter=values["adapter"],
                        config=values["config"],
                        title=values["title"],
                        state=values["state"],
                        parent_id=values["parent_id"],
                        fallback=values["fallback"],
                    )
                )
        got = self.get_session(sess.id)
        assert got is not None
        return got

    def get_session(self, session_id: str, *, now_us: int | None = None) -> Session | None:
        with self.read() as conn:
            row = conn.execute(select(t.sessions).where(t.sessions.c.id == session_id)).first()
        return None if row is None else session_from_row(row, now_us)

    def get_sessions(
        self, session_ids: Iterable[str], *, now_us: int | None = None
    ) -> dict[str, Session]:
        """Several sessions at once (missing ids are absent from the result). Each
        chunk of ids is one statement through the driver (``Db.query``): the engine
        loads the sessions of claimed fires with it, on the way to an overdue fire,
        where SQLAlchemy's transaction and statement cost more than the lookup."""
        ids = sorted(set(session_ids))
        out: dict[str, Session] = {}
        mark = self.dialect.placeholder
        for chunk in chunks(ids):
            sql = f"SELECT {_COLUMNS} FROM sessions WHERE id IN ({', '.join([mark] * len(chunk))})"
            for values in self.db.query(sql, tuple(chunk)):
                sess = session_of_values(values, now_us)
                out[sess.id] = sess
        return out

    def list_sessions(
        self, *, include_deleted: bool = False, now_us: int | None = None
    ) -> list[Session]:
        stmt = select(t.sessions).order_by(t.sessions.c.last_active_at.desc(), t.sessions.c.id)
        if not include_deleted:
            stmt = stmt.where(t.sessions.c.state != SESSION_DELETED)
        with self.read() as conn:
            return [session_from_row(r, now_us) for r in conn.execute(stmt)]

    def most_recent_session(self, *, exclude: Iterable[str] = ()) -> Session | None:
        stmt = (
            select(t.sessions)
            .where(t.sessions.c.state == SESSION_ACTIVE, t.sessions.c.adapter.is_not(None))
            .order_by(t.sessions.c.last_active_at.desc(), t.sessions.c.id)
        )
        excluded = list(exclude)
        if excluded:
            stmt = stmt.where(t.sessions.c.id.not_in(excluded))
        with self.read() as conn:
            row = conn.execute(stmt.limit(1)).first()
        return None if row is None else session_from_row(row)

    def set_session_busy(self, session_id: str, busy: bool, *, now_us: int) -> Session:
        with self.write() as conn:
            row = conn.execute(select(t.sessions.c.id).where(t.sessions.c.id == session_id)).first()
            if row is None:
                conn.execute(insert(t.sessions), new_session_row(session_id, now_us))
            conn.execute(
                update(t.sessions)
                .where(t.sessions.c.id == session_id)
                .values(busy_since=now_us if busy else None, last_active_at=now_us)
            )
        got = self.get_session(session_id, now_us=now_us)
        assert got is not None
        return got

    def delete_session(
        self, session_id: str, *, now_us: int, surface: Surface | str = Surface.API
    ) -> list[str]:
        """Mark the session deleted and pause its live reminders (``last_error`` says why)."""
        with self.write() as conn:
            row = conn.execute(
                self.dialect.for_update(select(t.sessions).where(t.sessions.c.id == session_id))
            ).first()
            if row is None:
                raise NotFound(
                    f"No session by the id of {session_id!r} was found", code="session_not_found"
                )
            conn.execute(
                update(t.sessions)
                .where(t.sessions.c.id == session_id)
                .values(state=SESSION_DELETED)
            )
            ids = [
                r[0]
                for r in conn.execute(
                    select(t.reminders.c.id).where(
                        t.reminders.c.session_id == session_id, t.reminders.c.state == ACTIVE
                    )
                )
            ]
            if ids:
                conn.execute(
                    update(t.reminders)
                    .where(t.reminders.c.id.in_(ids))
                    .values(
                        state=PAUSED,
                        last_error=f"session {session_id} was deleted",
                        updated_at=now_us,
                        version=t.reminders.c.version + 1,
                    )
                )
                write_events(
                    conn,
                    [
                        event_row(
                            EventKind.PAUSED,
                            surface,
                            at_us=now_us,
                            session=session_id,
                            reminder_id=rid,
                            detail={"why": f"session {session_id} was deleted"},
                        )
                        for rid in ids
                    ],
                )
            return ids


__all__ = ["Sessions"]
