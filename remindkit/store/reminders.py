"""The reminders of the store: adding (with label replacement and limits), finding,
counting, modifying, importing and exporting them, and their fires' history.

Every mutation is one transaction that either commits whole or changes nothing.
On SQLite a write transaction starts with ``BEGIN IMMEDIATE`` (see ``db.py``); on
PostgreSQL rows are locked ``FOR UPDATE`` and limit checks take a transaction
advisory lock, so two processes cannot both pass a limit or a label check.
After a commit the store sends a wake-up hint to engines (``wake.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from sqlalchemy import (
    Connection,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from ..audit import EventKind, Surface
from ..clock import format_utc, from_us, to_us
from ..errors import Conflict, InvalidInput, LimitExceeded, NotFound, StoreError
from ..models import (
    ACTIVE,
    CANCELLED,
    FAILED,
    LIVE_STATES,
    Occurrence,
    Reminder,
    Session,
)
from ..settings import Limits
from . import schema as t
from .create import (
    INSERT_REMINDER_SQL,
    LIMIT_LOCK,
    Added,
    Tx,
    add_reminder,
    cancel_pending,
    new_session_row,
    with_mark,
)
from .dialect import chunks
from .events import EventRow, changes, event_row, write_events
from .projects import LIVE_IN_PROJECT, PROJECT_OF_SESSION
from .records import attach_waiting as _attach_waiting
from .role import Role
from .rows import (
    REMINDER_COLUMNS,
    occurrence_from_row,
    readable_reminders,
    reminder_to_row,
    reminder_values,
    reminders_of_tuples,
    session_from_row,
    session_to_row,
)
from .waiting import waiting_in_session, waiting_of

log = logging.getLogger(__name__)

# Statements of the limits on imports and resumes, built once: building a statement per
# call costs more than running it on SQLite (SQLAlchemy derives a cache key from each).
_R = t.reminders.c
# the limits count active reminders (the fourth seed's "20 active"): a paused one does not
# count until it is resumed, which is refused past the limit
_COUNT_LIVE_IN_SESSION = (
    select(func.count())
    .select_from(t.reminders)
    .where(_R.session_id == bindparam("sid"), _R.state == ACTIVE)
)
_COUNT_LIVE = select(func.count()).select_from(t.reminders).where(_R.state == ACTIVE)


def _check_import_limits(
    conn: Connection, reminders: Sequence[Reminder], limits: Limits, lines: Sequence[int] | None
) -> None:
    live = [(i, r) for i, r in enumerate(reminders) if r.state == ACTIVE]
    if not live:
        return
    total = int(conn.execute(_COUNT_LIVE).scalar_one())
    per: dict[str, int] = {}
    for i, rem in live:
        total += 1
        where = f"line {lines[i]}: " if lines is not None else ""
        if limits.total is not None and total > limits.total:
            raise InvalidInput(
                f"{where}the store would have more than {limits.total} active reminders",
                code="invalid_import",
                limit=limits.total,
                scope="total",
            )
        if rem.session is not None and limits.per_session is not None:
            if rem.session not in per:
                per[rem.session] = int(
                    conn.execute(_COUNT_LIVE_IN_SESSION, {"sid": rem.session}).scalar_one()
                )
            per[rem.session] += 1
            if per[rem.session] > limits.per_session:
                raise InvalidInput(
                    f"{where}session {rem.session!r} would have more than {limits.per_session} "
                    "active reminders",
                    code="invalid_import",
                    limit=limits.per_session,
                    scope="session",
                )


def _check_active_limits(conn: Connection, activated: Sequence[Reminder], limits: Limits) -> None:
    """Reminders just made active again (written in this transaction): the active ones
    now keep every limit, per session, per project and in all, else
    ``too_many_reminders`` (the caller's transaction rolls back)."""
    if not activated:
        return
    sessions = sorted({r.session for r in activated if r.session is not None})
    if limits.per_session is not None:
        for sid in sessions:
            n = int(conn.execute(_COUNT_LIVE_IN_SESSION, {"sid": sid}).scalar_one())
            if n > limits.per_session:
                raise LimitExceeded(
                    f"session {sid!r} would have {n} active reminders (limit "
                    f"{limits.per_session}); cancel or pause one first",
                    code="too_many_reminders",
                    limit=limits.per_session,
                    scope="session",
                )
    if limits.per_project is not None:
        projects = sorted(
            {conn.execute(PROJECT_OF_SESSION, {"sid": sid}).scalar_one() for sid in sessions}
        )
        for project in projects:
            n = int(conn.execute(LIVE_IN_PROJECT, {"p": project}).scalar_one())
            if n > limits.per_project:
                raise LimitExceeded(
                    f"project {project!r} would have {n} active reminders (limit "
                    f"{limits.per_project}); cancel or pause one first",
                    code="too_many_reminders",
                    limit=limits.per_project,
                    scope="project",
                )
    if limits.total is not None:
        n = int(conn.execute(_COUNT_LIVE).scalar_one())
        if n > limits.total:
            raise LimitExceeded(
                f"the store would have {n} active reminders (limit {limits.total}); "
                "cancel or pause one first",
                code="too_many_reminders",
                limit=limits.total,
                scope="total",
            )


_BY_ID = select(t.reminders).where(t.reminders.c.id == bindparam("id"))


class Reminders(Role):
    """Reminders and their history."""

    def add_reminder(
        self,
        rem: Reminder,
        *,
        limits: Limits,
        now_us: int,
        replace_label: bool = True,
        surface: Surface | str = Surface.API,
        alive_since_us: int | None = None,
        project: str | None = None,
    ) -> Added:
        """Insert ``rem`` (:func:`remindkit.store.create.add_reminder`: the one create,
        which the command line's driver-only store runs too), in one write transaction
        through the driver (:meth:`Db.driver_write`)."""
        return add_reminder(
            self.db.driver_write,
            rem,
            limits=limits,
            now_us=now_us,
            replace_label=replace_label,
            surface=surface,
            alive_since_us=alive_since_us,
            project=project,
        )

    def import_rows(
        self,
        reminders: Sequence[Reminder],
        sessions: Sequence[Session],
        *,
        replace_existing: bool,
        now_us: int = 0,
        surface: Surface | str = Surface.IMPORT,
        limits: Limits | None = None,
        lines: Sequence[int] | None = None,
    ) -> int:
        """Bulk insert in one transaction (``remindkit import``), with a ``created``
        event per reminder. With ``limits``, the live reminders after the import stay
        within them, as for ``remind``, else the whole import is refused
        (``invalid_import`` naming the line, from ``lines``)."""
        with self.write() as conn:
            ids = [r.id for r in reminders]
            existing: set[str] = set()
            for chunk in chunks(ids):
                existing.update(
                    row[0]
                    for row in conn.execute(
                        select(t.reminders.c.id).where(t.reminders.c.id.in_(chunk))
                    )
                )
            if existing and not replace_existing:
                raise Conflict(
                    f"{len(existing)} reminder ids already exist (e.g. {sorted(existing)[0]}); "
                    "use --replace to overwrite them",
                    code="already_exists",
                )
            if existing:
                for chunk in chunks(sorted(existing)):
                    conn.execute(delete(t.reminders).where(t.reminders.c.id.in_(chunk)))
            if limits is not None:
                _check_import_limits(conn, reminders, limits, lines)
            have_sessions = {row[0] for row in conn.execute(select(t.sessions.c.id))}
            new_sessions = [session_to_row(s) for s in sessions if s.id not in have_sessions]
            if new_sessions:
                conn.execute(insert(t.sessions), new_sessions)
            implied = (
                {r.session for r in reminders if r.session}
                - have_sessions
                - {s.id for s in sessions}
            )
            if implied:
                now = max((to_us(r.created_at) for r in reminders if r.created_at), default=0)
                conn.execute(insert(t.sessions), [new_session_row(s, now) for s in sorted(implied)])
            rows = [reminder_values(r) for r in reminders]
            # Plain executemany: the rows are validated domain values already, and
            # SQLAlchemy's per-row parameter processing would halve the rate.
            sql = with_mark(INSERT_REMINDER_SQL, self.dialect.placeholder)
            for batch in chunks(rows, 5000):
                self.dialect.execute_many(conn, sql, batch)
            # The same few details over and over: each is made (and encoded) once.
            details: dict[tuple[str, bool], EventRow] = {}
            events: list[EventRow] = []
            for r in reminders:
                key = (r.state, r.id in existing)
                proto = details.get(key)
                if proto is None:
                    proto = details[key] = event_row(
                        EventKind.CREATED,
                        surface,
                        at_us=now_us,
                        session=None,
                        reminder_id=None,
                        detail={
                            "imported": True,
                            "state": r.state,
                            **({"replaced_existing": True} if key[1] else {}),
                        },
                    )
                events.append((proto[0], proto[1], proto[2], r.session, r.id, None, proto[6]))
            write_events(conn, events)
        return len(rows)

    def get_reminder(self, reminder_id: str) -> Reminder | None:
        with self.read() as conn:
            row = conn.execute(_BY_ID, {"id": reminder_id}).first()
        if row is None:
            return None
        got = readable_reminders([row])
        if not got:
            raise StoreError(
                f"reminder {reminder_id} cannot be read (see `remindkit status`)",
                code="unreadable_row",
            )
        return self._with_delivery(got)[0]

    def find_reminders(
        self,
        *,
        session: str | None | type[Any] = Any,
        states: Iterable[str] | None = None,
        label: str | None = None,
        ids: Iterable[str] | None = None,
        limit: int | None = None,
        order: str = "created",
    ) -> list[Reminder]:
        if (
            isinstance(session, str)
            and label is None
            and ids is None
            and limit is None
            and order == "created"
        ):
            return self._session_list(session, None if states is None else tuple(states))
        stmt = select(t.reminders)
        stmt = _filter(stmt, session=session, states=states, label=label, ids=ids)
        if order == "next":
            stmt = stmt.order_by(
                t.reminders.c.next_fire_at.is_(None), t.reminders.c.next_fire_at, t.reminders.c.id
            )
        else:
            stmt = stmt.order_by(t.reminders.c.created_at, t.reminders.c.id)
        if limit is not None:
            stmt = stmt.limit(limit)
        with self.read() as conn:
            found = readable_reminders(conn.execute(stmt))
        return self._with_delivery(found)

    def _session_list(self, session: str, states: tuple[str, ...] | None) -> list[Reminder]:
        """A session's reminders in creation order, and their waiting fires, from one
        read through the driver's cursor (what every list, pill and page asks for)."""
        d = self.dialect
        mark = d.placeholder
        sql = f"SELECT {REMINDER_COLUMNS} FROM reminders WHERE session_id = {mark}"
        if states is not None:
            sql += f" AND state IN ({', '.join([mark] * len(states))})"
        sql += " ORDER BY created_at, id"
        with self.read() as conn:
            found = reminders_of_tuples(d.fetch(conn, sql, (session, *(states or ()))))
            if not any(r.state in LIVE_STATES for r in found):
                return found
            return _attach_waiting(found, waiting_in_session(conn, d, session))

    def _with_delivery(
        self, rems: list[Reminder], conn: Connection | None = None
    ) -> list[Reminder]:
        """Attach the fires that wait for their session to the live reminders they belong to."""
        live = [r.id for r in rems if r.state in LIVE_STATES]
        if not live:
            return rems
        if conn is None:
            with self.read() as conn:
                waiting = waiting_of(conn, live)
        else:
            waiting = waiting_of(conn, live)
        return _attach_waiting(rems, waiting)

    def count_reminders(
        self, *, session: str | None | type[Any] = Any, states: Iterable[str] | None = None
    ) -> int:
        stmt = _filter(
            select(func.count()).select_from(t.reminders), session=session, states=states
        )
        with self.read() as conn:
            return int(conn.execute(stmt).scalar_one())

    def modify(
        self,
        fn: Callable[[Reminder], Reminder | None],
        *,
        now_us: int,
        ids: Sequence[str] | None = None,
        session: str | None | type[Any] = Any,
        label: str | None = None,
        states: Iterable[str] | None = None,
        require_all: bool = True,
        event: EventKind = EventKind.MODIFIED,
        surface: Surface | str = Surface.ENGINE,
        limits: Limits | None = None,
    ) -> list[tuple[Reminder, Reminder]]:
        """Apply ``fn`` to each selected reminder under the write lock.

        ``fn`` returns the new value, or None to leave it unchanged; it may raise
        a ``RemindkitError``, which rolls everything back. Returns (old, new)
        pairs of the reminders that changed. With ``ids`` and ``require_all``, an
        unknown id raises ``not_found`` and nothing changes. Each change writes an
        ``event`` (by ``surface``) in the same transaction. A new label that a live
        reminder of the session has already raises ``already_exists``. With
        ``limits``, reminders made active again (a resume) must leave every limit on
        active reminders kept (per session, per project, in all), as a create must;
        else ``too_many_reminders`` and nothing changes.
        """
        try:
            return self._modify(
                fn,
                now_us=now_us,
                ids=ids,
                session=session,
                label=label,
                states=states,
                require_all=require_all,
                event=event,
                surface=surface,
                limits=limits,
            )
        except IntegrityError:
            raise Conflict(
                "a live reminder of this session already has that label", code="already_exists"
            ) from None

    def _modify(
        self,
        fn: Callable[[Reminder], Reminder | None],
        *,
        now_us: int,
        ids: Sequence[str] | None,
        session: str | None | type[Any],
        label: str | None,
        states: Iterable[str] | None,
        require_all: bool,
        event: EventKind,
        surface: Surface | str,
        limits: Limits | None = None,
    ) -> list[tuple[Reminder, Reminder]]:
        with self.write() as conn:
            if limits is not None:  # taken first, as a create takes it: no deadlock with one
                self.dialect.advisory_xact_lock(conn, LIMIT_LOCK)
            stmt = _filter(
                select(t.reminders), session=session, states=states, label=label, ids=ids
            )
            # Locked in id order, as every writer of reminders locks them (no deadlocks).
            stmt = self.dialect.for_update(stmt.order_by(t.reminders.c.id))
            current = sorted(
                readable_reminders(conn.execute(stmt)),
                key=lambda r: (r.created_at or from_us(0), r.id),
            )
            if ids is not None and require_all:
                found = {r.id for r in current}
                for rid in ids:
                    if rid not in found:
                        raise NotFound.reminder(rid)
            changed: list[tuple[Reminder, Reminder]] = []
            for old in current:
                new = fn(old)
                if new is None or new == old:
                    continue
                new = replace(new, updated_at=from_us(now_us), version=old.version + 1)
                row = reminder_to_row(new)
                result = conn.execute(
                    update(t.reminders)
                    .where(t.reminders.c.id == old.id, t.reminders.c.version == old.version)
                    .values(**{k: v for k, v in row.items() if k not in ("id", "created_at")})
                )
                if result.rowcount != 1:
                    raise Conflict(
                        f"reminder {old.id} changed concurrently; retry", code="conflict"
                    )
                changed.append((old, new))
            if limits is not None:
                _check_active_limits(
                    conn,
                    [new for old, new in changed if new.state == ACTIVE and old.state != ACTIVE],
                    limits,
                )
            ended = [
                new.id for old, new in changed if new.state == CANCELLED and old.state != CANCELLED
            ]
            if ended:
                self._cancel_pending(conn, ended, now_us=now_us)
            write_events(
                conn,
                [
                    event_row(
                        event,
                        surface,
                        at_us=now_us,
                        session=new.session,
                        reminder_id=new.id,
                        detail={k: [_plain(a), _plain(b)] for k, (a, b) in changes(old, new)},
                    )
                    for old, new in changed
                ],
            )
            return changed

    def _cancel_pending(
        self, conn: Connection, reminder_ids: Sequence[str], *, now_us: int
    ) -> None:
        """:func:`remindkit.store.create.cancel_pending` in ``conn``'s transaction."""
        d = self.dialect
        tx = Tx(
            conn.connection.driver_connection,
            dbapi=conn.dialect.loaded_dbapi,
            mark=d.placeholder,
            locks_rows=d.locks_rows,
        )
        cancel_pending(tx, reminder_ids, now_us=now_us)

    # -- history -------------------------------------------------------------------------

    def history(
        self,
        *,
        reminder_id: str | None = None,
        session: str | None = None,
        limit: int = 100,
        states: Iterable[str] | None = None,
    ) -> list[Occurrence]:
        stmt = select(t.occurrences)
        if reminder_id is not None:
            stmt = stmt.where(t.occurrences.c.reminder_id == reminder_id)
        if session is not None:
            stmt = stmt.where(
                or_(t.occurrences.c.session_id == session, t.occurrences.c.delivered_to == session)
            )
        if states is not None:
            stmt = stmt.where(t.occurrences.c.state.in_(list(states)))
        stmt = stmt.order_by(t.occurrences.c.due_at.desc(), t.occurrences.c.id.desc()).limit(limit)
        with self.read() as conn:
            return [occurrence_from_row(r) for r in conn.execute(stmt)]

    def quarantined(self) -> list[tuple[str, str]]:
        """(id, reason) of reminders an engine set aside (:mod:`.quarantine`): a row it
        could not read, or whose plan it refused."""
        c = t.reminders.c
        with self.read() as conn:
            rows = conn.execute(
                select(c.id, c.last_error)
                .where(c.state == FAILED, c.quarantine.is_not(None))
                .order_by(c.updated_at)
            ).all()
        return [(r[0], r[1]) for r in rows]

    def export_rows(self) -> tuple[list[Reminder], list[Session]]:
        with self.read() as conn:
            rems = readable_reminders(
                conn.execute(
                    select(t.reminders).order_by(t.reminders.c.created_at, t.reminders.c.id)
                )
            )
            sess = [
                session_from_row(r)
                for r in conn.execute(select(t.sessions).order_by(t.sessions.c.id))
            ]
        return rems, sess


def _filter(stmt, *, session=Any, states=None, label=None, ids=None):
    c = t.reminders.c
    if session is not Any:
        stmt = stmt.where(c.session_id.is_(None) if session is None else c.session_id == session)
    if states is not None:
        stmt = stmt.where(c.state.in_(list(states)))
    if label is not None:
        stmt = stmt.where(c.label == label)
    if ids is not None:
        stmt = stmt.where(c.id.in_(list(ids)))
    return stmt


def _plain(value: Any) -> Any:
    return format_utc(value) if hasattr(value, "tzinfo") else value


__all__ = ["Added", "Reminders"]
