"""Adding a reminder, through the database driver alone: the one implementation of a
create, run by the store (:meth:`remindkit.store.reminders.Reminders.add_reminder`, on
SQLite and PostgreSQL) and by the command line's store of a SQLite file that no engine
serves (:class:`remindkit.store.lite.LiteStore`), which must not pay for importing
SQLAlchemy (``remindkit remind`` is timed against ``python -c pass``).

A create is one write transaction (``BEGIN IMMEDIATE`` on SQLite; on PostgreSQL a
transaction advisory lock, so that two processes cannot both pass a limit or a label
check): the session made on first use, the live reminder of the same label cancelled
(replaced) with its pending fires, the limits on active reminders checked, the
reminder's row, its ``created`` event (and a ``replaced`` event for each one
replaced), and, when asked, the engines alive on the store. Every statement is plain
SQL written with ``?`` and given the driver's placeholder once. The caller opens the
transaction (:class:`Tx`), commits it and then hints engines, with
:attr:`Tx.added_due_us`: when what it only added first fires.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from ..audit import EventKind, Surface, detail_json
from ..checks import session_project
from ..clock import format_utc, to_us
from ..errors import Conflict, LimitExceeded, NotFound, StoreError
from ..models import ACTIVE, SESSION_ACTIVE, SESSION_DELETED, Reminder
from ..settings import Limits
from .records import REMINDER_COLUMNS, REMINDER_FIELDS, reminder_values

LIMIT_LOCK = int(hashlib.sha1(b"remindkit-limits").hexdigest()[:15], 16)
EVENTS_LOCK = int(hashlib.sha1(b"remindkit-events").hexdigest()[:15], 16)
EVENT_COLUMNS = ("at", "kind", "surface", "session_id", "reminder_id", "occurrence_id", "detail")
EventRow = tuple[int, str, str, "str | None", "str | None", "int | None", "str | None"]
IN_CHUNK = 500  # ids in one IN (...): SQLite allows few bound parameters a statement
ATTEMPTS = 3  # a create that meets a unique constraint another process just took

ADVISORY_LOCK_SQL = "SELECT pg_advisory_xact_lock(?)"
SESSION_STATE_SQL = "SELECT state, project FROM sessions WHERE id = ?"
SESSION_COLUMNS = ("id", "adapter", "config", "state", "created_at", "last_active_at", "project")
INSERT_SESSION_SQL = (
    f"INSERT INTO sessions ({', '.join(SESSION_COLUMNS)})"
    f" VALUES ({', '.join(['?'] * len(SESSION_COLUMNS))})"
)
LIVE_LABEL_SQL = (
    "SELECT id FROM reminders WHERE session_id = ? AND label = ? AND state IN ('active', 'paused')"
)
LIVE_LABEL_NO_SESSION_SQL = (
    "SELECT id FROM reminders WHERE session_id IS NULL AND label = ?"
    " AND state IN ('active', 'paused')"
)
REPLACE_SQL = (
    "UPDATE reminders SET state = 'cancelled', last_error = ?, next_fire_at = NULL,"
    " updated_at = ?, version = version + 1 WHERE id = ?"
)
# the limits count active reminders (the fourth seed's "20 active"): a paused one does not
# count until it is resumed, which is refused past the limit
COUNT_ACTIVE_IN_SESSION_SQL = (
    "SELECT COUNT(*) FROM reminders WHERE session_id = ? AND state = 'active'"
)
PROJECT_OF_SESSION_SQL = "SELECT project FROM sessions WHERE id = ?"
COUNT_ACTIVE_IN_PROJECT_SQL = (
    "SELECT COUNT(*) FROM reminders JOIN sessions ON sessions.id = reminders.session_id"
    " WHERE sessions.project = ? AND reminders.state = 'active'"
)
COUNT_ACTIVE_SQL = "SELECT COUNT(*) FROM reminders WHERE state = 'active'"
INSERT_REMINDER_SQL = (
    f"INSERT INTO reminders ({REMINDER_COLUMNS}) VALUES ({', '.join(['?'] * len(REMINDER_FIELDS))})"
)
INSERT_EVENTS_SQL = (
    f"INSERT INTO events ({', '.join(EVENT_COLUMNS)})"
    f" VALUES ({', '.join(['?'] * len(EVENT_COLUMNS))})"
)
LIVE_ENGINES_SQL = "SELECT host, pid FROM engines WHERE heartbeat_at >= ?"
# A cancelled reminder's fires that were not delivered yet: waiting ones, and claimed
# ones not yet due (see cancel_pending); {ids} is the list of marks
CANCEL_PENDING_SQL = (
    "UPDATE occurrences SET state = 'cancelled', error = 'reminder cancelled', owner = NULL,"
    " token = NULL, lease_until = NULL WHERE reminder_id IN ({ids}) AND (state = 'waiting'"
    " OR (state = 'claimed' AND fired_at IS NULL AND due_at > ?))"
)

_WITH_MARK: dict[tuple[str, str], str] = {}


def with_mark(sql: str, mark: str) -> str:
    """``sql`` with the driver's placeholder ``mark`` for each ``?`` (none is in a literal)."""
    key = (sql, mark)
    found = _WITH_MARK.get(key)
    if found is None:
        found = _WITH_MARK[key] = sql if mark == "?" else sql.replace("?", mark)
    return found


class Added(NamedTuple):
    reminder: Reminder
    replaced: list[str]
    engines: list[tuple[str, int]]  # (host, pid) of live engines, when asked for


class Clash(Exception):
    """A statement broke a unique constraint (another process took the same label at
    the same moment): the transaction rolls back and the create tries again."""


class Tx:
    """One write transaction on a driver's connection, already begun. ``dbapi``: the
    driver's module (its ``IntegrityError`` and ``Error``); ``locks_rows``: PostgreSQL
    (advisory locks), not SQLite (whose write lock is held from ``BEGIN IMMEDIATE``).
    A broken constraint raises :class:`Clash`, any other driver error
    ``store_unavailable``."""

    def __init__(self, conn: Any, *, dbapi: Any, mark: str, locks_rows: bool) -> None:
        self.conn = conn
        self.dbapi = dbapi
        self.mark = mark
        self.locks_rows = locks_rows
        self.added_due_us: int | None = None  # set by only_added

    def run(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of ``sql`` (written with ``?``), none for a statement without."""
        try:
            cur = self.conn.execute(with_mark(sql, self.mark), tuple(params))
            try:
                return cur.fetchall() if cur.description is not None else []
            finally:
                cur.close()
        except self.dbapi.Error as exc:
            raise self._error(exc) from exc

    def run_many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if len(rows) == 1:
            self.run(sql, rows[0])
        elif rows:
            cur = self.conn.cursor()
            try:
                cur.executemany(with_mark(sql, self.mark), rows)
            except self.dbapi.Error as exc:
                raise self._error(exc) from exc
            finally:
                cur.close()

    def _error(self, exc: Exception) -> Exception:
        if isinstance(exc, self.dbapi.IntegrityError):
            return Clash(str(exc))
        return StoreError(f"the store is unavailable: {exc}", code="store_unavailable")

    def advisory_lock(self, key: int) -> None:
        """Hold the advisory lock ``key`` until the transaction ends (PostgreSQL)."""
        if self.locks_rows:
            self.run(ADVISORY_LOCK_SQL, (key,))

    def only_added(self, due_us: int) -> None:
        """This transaction only adds a reminder first due at ``due_us``
        (``remindkit.store.db.Db.only_added``): the earlier one is kept."""
        known = self.added_due_us
        self.added_due_us = due_us if known is None else min(known, due_us)


def new_session_row(session_id: str, now_us: int) -> dict[str, Any]:
    """The row of a session made on first use (no adapter), in its id's project."""
    return {
        "id": session_id,
        "adapter": None,
        "config": json.dumps({}),
        "state": SESSION_ACTIVE,
        "created_at": now_us,
        "last_active_at": now_us,
        "project": session_project(session_id),
    }


def event_row(
    kind: EventKind,
    surface: Surface | str,
    *,
    at_us: int,
    session: str | None,
    reminder_id: str | None,
    occurrence_id: int | None = None,
    detail: Mapping[str, Any] | None = None,
) -> EventRow:
    return (
        at_us,
        str(kind),
        str(surface),
        session,
        reminder_id,
        occurrence_id,
        detail_json(detail),
    )


def insert_events(tx: Tx, rows: Sequence[EventRow]) -> None:
    """Insert event rows as the transaction's last statement (on PostgreSQL under the
    events lock: ids are handed out in commit order, see ``remindkit.store.events``)."""
    if rows:
        tx.advisory_lock(EVENTS_LOCK)
        for i in range(0, len(rows), 5000):
            tx.run_many(INSERT_EVENTS_SQL, rows[i : i + 5000])


def cancel_pending(tx: Tx, reminder_ids: Sequence[str], *, now_us: int) -> None:
    """A cancelled reminder's fires that were not yet delivered are cancelled too:
    waiting ones, and claimed ones that are not due yet. A claimed one whose due
    time has come is firing (its engine records ``fired_at`` with its next batch),
    so it is left to finish: a turn that cancels the reminder it was fired by
    (an agent stopping its own polling callback) keeps that fire recorded as
    delivered."""
    ids = list(reminder_ids)
    for i in range(0, len(ids), IN_CHUNK):
        chunk = ids[i : i + IN_CHUNK]
        sql = CANCEL_PENDING_SQL.format(ids=", ".join("?" * len(chunk)))
        tx.run(sql, (*chunk, now_us))


@contextlib.contextmanager
def transaction(conn: Any, *, dbapi: Any, mark: str, locks_rows: bool) -> Iterator[Tx]:
    """One write transaction on a driver's connection (in autocommit mode: the
    transaction is ours to begin): ``BEGIN IMMEDIATE`` on SQLite (PostgreSQL's driver
    begins one with the first statement), committed when the block ends, rolled back
    if it raises; a commit that fails is ``store_unavailable``. The store's pooled
    connection (:meth:`remindkit.store.db.Db.driver_write`) and the command line's
    SQLite file (:class:`remindkit.store.lite.LiteStore`) both write through it; each
    hints engines after it."""
    tx = Tx(conn, dbapi=dbapi, mark=mark, locks_rows=locks_rows)
    if not locks_rows:
        tx.run("BEGIN IMMEDIATE")
    try:
        yield tx
    except BaseException:
        with contextlib.suppress(Exception):
            conn.rollback()
        raise
    try:
        conn.commit()
    except dbapi.Error as exc:
        with contextlib.suppress(Exception):
            conn.rollback()
        raise StoreError(f"the store is unavailable: {exc}", code="store_unavailable") from exc


def add_reminder(
    begin: Callable[[], contextlib.AbstractContextManager[Tx]],
    rem: Reminder,
    *,
    limits: Limits,
    now_us: int,
    replace_label: bool = True,
    surface: Surface | str = Surface.API,
    alive_since_us: int | None = None,
    project: str | None = None,
) -> Added:
    """Insert ``rem`` in a write transaction of ``begin()`` (which commits it when the
    block ends, and hints engines then); an active reminder with the same label in its
    session is cancelled (replaced). Raises ``too_many_reminders`` /
    ``session_deleted``. Writes a ``created`` event (and ``replaced`` for each one
    replaced). With ``alive_since_us``, also reads (host, pid) of the engines whose
    heartbeat is that recent, in the same transaction (is the new reminder armed?). A
    new session is made in its id's project (:func:`~remindkit.checks.session_key`);
    with ``project``, a session of another project, or a new id of another project's
    namespace, is not found (``session_not_found``). A unique constraint met (a label
    taken by another process at the same moment) is tried again, then ``conflict``."""
    for _attempt in range(ATTEMPTS):
        try:
            with begin() as tx:
                replaced = _add(
                    tx, rem, limits=limits, now_us=now_us, replace_label=replace_label,
                    project=project,
                )  # fmt: skip
                events = [
                    event_row(
                        EventKind.REPLACED,
                        surface,
                        at_us=now_us,
                        session=rem.session,
                        reminder_id=old,
                        detail={"by": rem.id, "label": rem.label},
                    )
                    for old in replaced
                ]
                events.append(
                    event_row(
                        EventKind.CREATED,
                        surface,
                        at_us=now_us,
                        session=rem.session,
                        reminder_id=rem.id,
                        detail=created_detail(rem),
                    )
                )
                insert_events(tx, events)
                if not replaced and rem.state == ACTIVE and rem.next_fire_at is not None:
                    tx.only_added(to_us(rem.next_fire_at))
                engines: list[tuple[str, int]] = []
                if alive_since_us is not None:
                    engines = [(r[0], r[1]) for r in tx.run(LIVE_ENGINES_SQL, (alive_since_us,))]
            return Added(rem, replaced, engines)
        except Clash:
            pass
    raise Conflict("another process changed this label at the same moment; retry", code="conflict")


def _add(
    tx: Tx,
    rem: Reminder,
    *,
    limits: Limits,
    now_us: int,
    replace_label: bool,
    project: str | None,
) -> list[str]:
    tx.advisory_lock(LIMIT_LOCK)
    replaced: list[str] = []
    if rem.session is not None:
        found = tx.run(SESSION_STATE_SQL, (rem.session,))
        sess = found[0] if found else None
        if sess is None:
            if project is not None and session_project(rem.session) != project:
                raise NotFound(  # an id of another project's namespace: not this one's
                    f"No session by the id of {rem.session!r} in project {project!r} was found",
                    code="session_not_found",
                    session=rem.session,
                )
            row = new_session_row(rem.session, now_us)
            tx.run(INSERT_SESSION_SQL, tuple(row[c] for c in SESSION_COLUMNS))
        elif project is not None and sess[1] != project:
            raise NotFound(
                f"No session by the id of {rem.session!r} in project {project!r} was found",
                code="session_not_found",
                session=rem.session,
            )
        elif sess[0] == SESSION_DELETED:
            raise Conflict(
                f"session {rem.session!r} was deleted",
                code="session_deleted",
                session=rem.session,
            )
    if rem.label is not None and replace_label:
        if rem.session is None:
            old = tx.run(LIVE_LABEL_NO_SESSION_SQL, (rem.label,))
        else:
            old = tx.run(LIVE_LABEL_SQL, (rem.session, rem.label))
        for (old_id,) in old:
            tx.run(REPLACE_SQL, (f"replaced by {rem.id}", now_us, old_id))
            cancel_pending(tx, [old_id], now_us=now_us)
            replaced.append(old_id)
    if limits.per_session is not None and rem.session is not None:
        n = tx.run(COUNT_ACTIVE_IN_SESSION_SQL, (rem.session,))[0][0]
        if n >= limits.per_session:
            raise LimitExceeded(
                f"session {rem.session!r} already has {n} active reminders (limit {limits.per_session}); "
                "cancel one first",
                code="too_many_reminders",
                limit=limits.per_session,
                scope="session",
            )
    if limits.per_project is not None and rem.session is not None:
        project = tx.run(PROJECT_OF_SESSION_SQL, (rem.session,))[0][0]
        n = tx.run(COUNT_ACTIVE_IN_PROJECT_SQL, (project,))[0][0]
        if n >= limits.per_project:
            raise LimitExceeded(
                f"project {project!r} already has {n} active reminders (limit {limits.per_project})",
                code="too_many_reminders",
                limit=limits.per_project,
                scope="project",
            )
    if limits.total is not None:
        n = tx.run(COUNT_ACTIVE_SQL)[0][0]
        if n >= limits.total:
            raise LimitExceeded(
                f"the store already has {n} active reminders (limit {limits.total})",
                code="too_many_reminders",
                limit=limits.total,
                scope="total",
            )
    tx.run(INSERT_REMINDER_SQL, reminder_values(rem))
    return replaced


def created_detail(rem: Reminder) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schedule": rem.schedule.describe(),
        "next_fire_at": format_utc(rem.next_fire_at),
        "source": rem.source,
    }
    if rem.label is not None:
        out["label"] = rem.label
    return out


__all__ = [
    "Added",
    "Clash",
    "EventRow",
    "Tx",
    "add_reminder",
    "cancel_pending",
    "created_detail",
    "event_row",
    "insert_events",
    "new_session_row",
    "with_mark",
]
