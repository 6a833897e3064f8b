"""Fires that wait for their session: taken up again when it can take them (a
reminder's backlog as its latest fire), listed with their reminders (still the
user's until their turn starts), and the re-base of a busy session's repeating
reminders once it is idle again."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import Connection, or_, select, update

from ..audit import EventKind, Surface
from ..models import CLAIMED, OCC_CANCELLED, SKIPPED, WAITING, Fire, Outcome, Reminder, WaitFor
from ..protocol.framing import latest_per_reminder, superseded_note
from . import schema as t
from .dialect import Dialect, chunks
from .events import event_row, write_events
from .lite import UNCOUNTED_SQL
from .outcomes import write_outcomes
from .quarantine import readable_fire
from .records import fold_waiting
from .role import Role
from .rows import FIRE_COLUMNS, reminder_from_row, reminder_to_row, whole_rows

log = logging.getLogger(__name__)


class Waiting(Role):
    """Fired occurrences waiting for delivery, and re-basing."""

    def claim_waiting(
        self,
        *,
        now_us: int,
        owner: str,
        lease_us: int,
        sessions: Iterable[str | None] | None,
        limit: int = 500,
    ) -> list[Fire]:
        """Take fired occurrences that wait for delivery (optionally only for ``sessions``)."""
        o = t.occurrences.c
        token = uuid.uuid4().hex
        with self.write(notify=False) as conn:
            stmt = (
                select(*FIRE_COLUMNS)
                .join(t.reminders, t.reminders.c.id == o.reminder_id)
                .where(o.state == WAITING)
                .order_by(o.due_at, o.id)
                .limit(limit)
            )
            if sessions is not None:
                wanted = list(sessions)
                named = [s for s in wanted if s is not None]
                conds = []
                if named:
                    conds.append(o.session_id.in_(named))
                if None in wanted:
                    conds.append(o.session_id.is_(None))
                if not conds:
                    return []
                stmt = stmt.where(or_(*conds))
            stmt = self.dialect.skip_locked(stmt, of=t.occurrences)
            rows = conn.execute(stmt).all()
            if not rows:
                return []
            ids = [r._mapping["occ_id"] for r in rows]
            conn.execute(
                update(t.occurrences)
                .where(o.id.in_(ids), o.state == WAITING)
                .values(
                    state=CLAIMED,
                    owner=owner,
                    token=token,
                    lease_until=now_us + lease_us,
                    attempts=o.attempts + 1,
                )
            )
            fires = [
                f for f in (readable_fire(conn, r, token, now_us) for r in rows) if f is not None
            ]
            write_events(conn, [])  # a quarantine's
            return self._latest(conn, fires, now_us)

    def supersede(self, fires: Sequence[Fire], *, now_us: int) -> list[Fire]:
        """Of claimed ``fires`` that go in one turn, a reminder's backlog goes as its
        latest (:func:`~remindkit.protocol.framing.latest_per_reminder`): the earlier
        ones are recorded ``skipped`` (superseded) and the latest's ``missed`` counts
        them, in one transaction. Returns the fires that go."""
        _kept, superseded = latest_per_reminder([f for f in fires if f.wait_for != WaitFor.REBASE])
        if not superseded:
            return list(fires)
        with self.write() as conn:
            return self._latest(conn, fires, now_us)

    def _latest(
        self, conn: Connection, fires: list[Fire] | Sequence[Fire], now_us: int
    ) -> list[Fire]:
        """:meth:`supersede` in the caller's transaction (fires waiting to be re-based
        are left as they are: a re-base skips them all)."""
        backlog = [f for f in fires if f.wait_for != WaitFor.REBASE]
        kept, superseded = latest_per_reminder(backlog)
        if not superseded:
            return list(fires)
        o = t.occurrences.c
        stale = write_outcomes(
            conn,
            self.dialect,
            [
                Outcome(
                    occurrence_id=old.occurrence_id,
                    token=old.token,
                    state=SKIPPED,
                    error=superseded_note(new),
                )
                for old, new in superseded
            ],
            now_us,
        )
        if stale:
            log.warning("superseded fires %s were taken over by another engine", stale)
        for f in {new.occurrence_id: new for _old, new in superseded}.values():
            conn.execute(
                update(t.occurrences)
                .where(o.id == f.occurrence_id, o.token == f.token, o.state == CLAIMED)
                .values(missed=f.missed)
            )
        going = {f.occurrence_id: f for f in kept}
        gone = {old.occurrence_id for old, _new in superseded}
        return [going.get(f.occurrence_id, f) for f in fires if f.occurrence_id not in gone]

    def uncounted(self, reminder_ids: Sequence[str], *, now_us: int) -> dict[str, tuple[int, int]]:
        """Per reminder, the fires its claim has counted that have not happened at
        ``now_us`` (:data:`~remindkit.store.lite.UNCOUNTED_WHERE`: claimed ahead of their
        due time, or waiting to be re-based): how many, and the earliest due (µs)."""
        ids = sorted(set(reminder_ids))
        if not ids:
            return {}
        d = self.dialect
        out: dict[str, tuple[int, int]] = {}
        with self.read() as conn:
            for chunk in chunks(ids):
                sql = UNCOUNTED_SQL.format(ids=", ".join(["?"] * len(chunk)))
                for rid, n, due in d.fetch(conn, sql.replace("?", d.placeholder), (*chunk, now_us)):
                    out[rid] = (int(n), int(due))
        return out

    def waiting_sessions(self) -> list[str | None]:
        """Sessions that have fired occurrences waiting for delivery."""
        with self.read() as conn:
            return [r[0] for r in conn.execute(_WAITING_SESSIONS)]

    def waiting_of(
        self, reminder_ids: Sequence[str]
    ) -> dict[str, tuple[str | None, str | None, int, int]]:
        """Per reminder with fires that wait for their session: (wait_for, reason of the
        earliest, its due time, how many)."""
        if not reminder_ids:
            return {}
        with self.read() as conn:
            return waiting_of(conn, reminder_ids)

    def rebasing(self, reminder_ids: Iterable[str]) -> set[str]:
        """Which of these reminders have a fire waiting to be re-based."""
        o = t.occurrences.c
        ids = sorted(set(reminder_ids))
        if not ids:
            return set()
        with self.read() as conn:
            return {
                r[0]
                for r in conn.execute(
                    select(o.reminder_id)
                    .where(o.reminder_id.in_(ids), o.state == WAITING, o.wait_for == WaitFor.REBASE)
                    .distinct()
                )
            }

    def reminders_of(self, reminder_ids: Iterable[str]) -> dict[str, Reminder]:
        """These reminders as they are now (to compute their re-base, see :meth:`rebase`)."""
        c = t.reminders.c
        ids = sorted(set(reminder_ids))
        out: dict[str, Reminder] = {}
        with self.read() as conn:
            for chunk in chunks(ids):
                rows = conn.execute(select(t.reminders).where(c.id.in_(list(chunk)))).all()
                whole = whole_rows(rows)
                for row in rows:
                    rem = reminder_from_row(row, whole=whole)
                    out[rem.id] = rem
        return out

    def rebase(
        self,
        fires: Sequence[Fire],
        *,
        now_us: int,
        pushed: Mapping[str, tuple[int, Reminder | None]],
        note: str,
    ) -> tuple[list[int], list[int]] | None:
        """The re-base of a busy session's repeating reminders, in one transaction:
        each reminder of ``fires`` becomes its re-based value (``pushed``: reminder id
        -> (the version it was computed from, the re-based reminder, or None: left as
        it is), computed by the engine from :meth:`reminders_of`), its fires that came
        due during the turn are recorded ``skipped`` (re-based), and its claimed
        occurrences that have not fired yet are cancelled (they would repeat a
        position). Returns (stale occurrence ids, cancelled ones), or None when a
        reminder changed since it was read (nothing is written: compute again)."""
        c, o = t.reminders.c, t.occurrences.c
        first: dict[str, int] = {}
        for f in fires:
            first[f.reminder_id] = min(first.get(f.reminder_id, f.position), f.position)
        outcomes = [
            Outcome(
                occurrence_id=f.occurrence_id,
                token=f.token,
                state=SKIPPED,
                error=note,
                fired_at_us=None,
            )
            for f in fires
        ]
        with self.write() as conn:
            rows = conn.execute(
                self.dialect.for_update(
                    select(c.id, c.version).where(c.id.in_(sorted(first))).order_by(c.id)
                )
            ).all()
            if any(rid not in pushed or pushed[rid][0] != version for rid, version in rows):
                return None
            ours = {f.occurrence_id for f in fires}
            cancelled: list[int] = []
            for rid, _version in rows:
                new = pushed[rid][1]
                if new is None:
                    continue
                rem = new
                values = {
                    k: v for k, v in reminder_to_row(new).items() if k not in ("id", "created_at")
                }
                values.update(version=rem.version + 1, updated_at=now_us)
                conn.execute(
                    update(t.reminders)
                    .where(c.id == rem.id, c.version == rem.version)
                    .values(**values)
                )
                write_events(
                    conn,
                    [
                        event_row(
                            EventKind.MODIFIED,
                            Surface.ENGINE,
                            at_us=now_us,
                            session=rem.session,
                            reminder_id=rem.id,
                            detail={
                                "rebased": True,
                                "position": first[rem.id],
                                "next_fire_at": values["next_fire_at"],
                            },
                        )
                    ],
                )
                ahead = [
                    r[0]
                    for r in conn.execute(
                        select(o.id)
                        .where(
                            o.reminder_id == rem.id,
                            o.state == CLAIMED,
                            o.fired_at.is_(None),
                            o.due_at > now_us,
                        )
                        .order_by(o.id)
                    )
                ]
                ahead = [i for i in ahead if i not in ours]
                if ahead:
                    conn.execute(
                        update(t.occurrences)
                        .where(o.id.in_(ahead), o.state == CLAIMED)
                        .values(
                            state=OCC_CANCELLED,
                            error="superseded: its reminder was re-based",
                            owner=None,
                            token=None,
                            lease_until=None,
                        )
                    )
                    cancelled += ahead
            stale = write_outcomes(conn, self.dialect, outcomes, now_us)
        return stale, cancelled


def waiting_of(
    conn: Connection, reminder_ids: Sequence[str]
) -> dict[str, tuple[str | None, str | None, int, int]]:
    """:meth:`Claims.waiting_of` in the caller's transaction."""
    o = t.occurrences.c
    out: dict[str, tuple[str | None, str | None, int, int]] = {}
    for chunk in chunks(reminder_ids):
        rows = conn.execute(
            select(o.reminder_id, o.wait_for, o.error, o.due_at)
            .where(o.reminder_id.in_(list(chunk)), o.state == WAITING)
            .order_by(o.reminder_id, o.due_at)
        )
        fold_waiting(rows, out)
    return out


def waiting_in_session(
    conn: Connection, dialect: Dialect, session: str
) -> dict[str, tuple[str | None, str | None, int, int]]:
    """:func:`waiting_of` for the reminders of one session (a fire's occurrence
    carries its reminder's session): one indexed read through the driver, where
    the ``IN`` of a session's 200 reminder ids cost SQLAlchemy more than the list."""
    mark = dialect.placeholder
    rows = dialect.fetch(
        conn,
        "SELECT reminder_id, wait_for, error, due_at FROM occurrences "
        f"WHERE session_id = {mark} AND state = {mark} ORDER BY reminder_id, due_at",
        (session, WAITING),
    )
    return fold_waiting(rows, {})


_WAITING_SESSIONS = (
    select(t.occurrences.c.session_id).where(t.occurrences.c.state == WAITING).distinct()
)


__all__ = ["Waiting", "fold_waiting", "waiting_in_session", "waiting_of"]
