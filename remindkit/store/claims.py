"""Claiming occurrences, leases and acknowledgements.

An occurrence is keyed ``UNIQUE(reminder_id, due_at)``. An engine claims due
reminders in one write transaction: it inserts the occurrence rows as
``claimed`` with its owner id, a fresh token and a lease, and advances each
reminder (next fire, fired count, state) with a compare-and-set on its version.
SQLite serialises this with ``BEGIN IMMEDIATE``; PostgreSQL with
``FOR UPDATE SKIP LOCKED`` (the state predicate repeated in the outer UPDATE).

Every later write about a claimed occurrence carries its token; after a lease
expires another engine may take the occurrence over with a new token, and the
old owner's acknowledgement then matches no row and is refused.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Connection,
    Text,
    bindparam,
    case,
    exists,
    func,
    or_,
    select,
    update,
)

from .. import failpoints
from ..audit import DETAIL_VALUE_MAX, EventKind, Surface
from ..clock import format_utc, from_us
from ..models import (
    ACTIVE,
    CLAIMED,
    DELIVERED,
    DONE,
    FAILED,
    OCC_CANCELLED,
    OCC_FAILED,
    PAUSED,
    SKIPPED,
    WAITING,
    Fire,
    Outcome,
    Plan,
    PlannedFire,
    Reminder,
    WaitFor,
)
from . import schema as t
from .coordination import PAUSED_ALL
from .dialect import Dialect, chunks
from .events import EventRow, defer_events, event_row, write_events
from .projects import disabled_projects_sessions
from .role import Role
from .rows import (
    FIRE_COLUMNS,
    fire_from_joined,
    fire_of,
    reminder_from_row,
    reminder_to_row,
    whole_rows,
)

log = logging.getLogger(__name__)


def _not_claimed_yet():
    """The reminder's next occurrence has no row yet (a final one, claimed and not
    yet fired, keeps the reminder active at its time: see claim_due)."""
    o, c = t.occurrences.c, t.reminders.c
    return ~exists().where(o.reminder_id == c.id, o.due_at == c.next_fire_at)


def _project_on():
    """Reminders of a project whose ``reminders`` feature is off are not claimed."""
    c = t.reminders.c
    return or_(c.session_id.is_(None), c.session_id.not_in(disabled_projects_sessions()))


def settle(conn: Connection, occurrence_ids: Sequence[int], now_us: int | None) -> None:
    """A reminder whose final occurrence has now ended (delivered, failed, skipped,
    cancelled) is done. One whose final fire still waits for its session stays
    active: listed, and cancellable until its turn starts."""
    locks = Dialect.of(conn).locks_rows
    for chunk in chunks(occurrence_ids):
        params: dict[str, Any] = {"occ": list(chunk), "now": now_us}
        if locks:  # lock in id order, as every writer of reminders does
            ids = [r[0] for r in conn.execute(_SETTLE_LOCK, params)]
            if not ids:
                continue
            conn.execute(_SETTLE_LOCKED, {**params, "rids": ids})
        else:
            conn.execute(_SETTLE, params)


def _settle_statements() -> tuple[Any, Any, Any]:
    o, c = t.occurrences.c, t.reminders.c
    ended = t.occurrences.alias("ended")
    final = [
        # The reminders of these occurrences, looked up by id. The state is compared
        # as an expression (``state || ''``), which no index serves: SQLite would
        # otherwise walk the (state, next_fire_at) index, every active reminder,
        # for each batch of outcomes (100,000 stored: tens of ms a batch).
        c.id.in_(
            select(ended.c.reminder_id).where(ended.c.id.in_(bindparam("occ", expanding=True)))
        ),
        (c.state + "").in_((ACTIVE, PAUSED)),
        exists().where(
            o.reminder_id == c.id,
            o.due_at == c.next_fire_at,
            o.id.in_(bindparam("occ", expanding=True)),
            o.fired_at.is_not(None),
            o.state.not_in((CLAIMED, WAITING)),
        ),
    ]
    values = {
        "state": DONE,
        "next_fire_at": None,
        "version": c.version + 1,
        "updated_at": func.coalesce(bindparam("now", type_=BigInteger), c.updated_at),
    }
    lock = select(c.id).where(*final).order_by(c.id).with_for_update()
    plain = update(t.reminders).where(*final).values(**values)
    locked = (
        update(t.reminders)
        .where(c.id.in_(bindparam("rids", expanding=True)), *final)
        .values(**values)
    )
    return lock, plain, locked


# Built once: settle() runs with every batch of outcomes.
_SETTLE_LOCK, _SETTLE, _SETTLE_LOCKED = _settle_statements()


def pause_failed(
    conn: Connection, failed: Sequence[tuple[int, str | None]], now_us: int | None
) -> None:
    """After the final failure of a fire, its reminder is paused with
    ``last_error`` (``resume`` clears it); a one-shot, which has nothing left to
    fire, ends ``failed``."""
    o, c = t.occurrences.c, t.reminders.c
    stamp = now_us if now_us is not None else 0
    why = dict(failed)
    owners = sorted(
        conn.execute(select(o.reminder_id, o.id, o.session_id).where(o.id.in_(list(why)))).all()
    )
    events: list[EventRow] = []
    for (
        rid,
        occ_id,
        session,
    ) in owners:  # in reminder id order, as every writer of reminders locks them
        error = (why[occ_id] or "delivery failed")[:500]
        res = conn.execute(
            update(t.reminders)
            .where(c.id == rid, c.state.in_((ACTIVE, DONE)))
            .values(
                state=case(
                    (c.state == DONE, FAILED), (c.next_fire_at.is_(None), FAILED), else_=PAUSED
                ),
                last_error=error,
                version=c.version + 1,
                updated_at=func.coalesce(stamp or None, c.updated_at),
            )
        )
        if res.rowcount:
            events.append(
                event_row(
                    EventKind.PAUSED,
                    Surface.ENGINE,
                    at_us=stamp,
                    session=session,
                    reminder_id=rid,
                    occurrence_id=occ_id,
                    detail={"why": "delivery failed", "last_error": error},
                )
            )
    write_events(conn, events)


def quarantine(conn: Connection, reminder_id: str, exc: BaseException, *, now_us: int) -> None:
    """A reminder row that cannot be read (a hand edit, a newer remindkit, damage)
    is set aside as ``failed`` with the reason, never deleted, and never again
    stops the engine that tried to claim it."""
    kind = "refused plan" if type(exc).__name__ == "PlanRefused" else "unreadable row"
    why = f"quarantined: {kind} ({type(exc).__name__}: {exc})"[:500]
    log.error("reminder %s %s", reminder_id, why)
    conn.execute(
        update(t.reminders)
        .where(t.reminders.c.id == reminder_id)
        .values(state=FAILED, next_fire_at=None, last_error=why, version=t.reminders.c.version + 1)
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


def _readable_fire(conn: Connection, row: Any, token: str, now_us: int) -> Fire | None:
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


def _still_unclaimed(conn: Connection, rems: list[Reminder]) -> list[Reminder]:
    """The reminders among ``rems`` (just locked) that no engine claimed meanwhile.

    On PostgreSQL the locking select judges "not claimed yet" by the snapshot its
    statement began with; a row another engine claimed and committed in between is
    locked all the same (its own columns are checked again, the subquery is not).
    Claiming it again would insert an occurrence that exists, waiting on whichever
    transaction is writing that occurrence now, which may in turn wait for the row
    we hold: a deadlock. A second statement sees every commit made before it."""
    c = t.reminders.c
    current: dict[str, int] = {}
    for chunk in chunks([r.id for r in rems]):
        q = select(c.id, c.version).where(c.id.in_(list(chunk)), _not_claimed_yet())
        current.update((row[0], row[1]) for row in conn.execute(q))
    return [r for r in rems if current.get(r.id) == r.version]


@functools.cache
def _claim_select(dialect: Dialect, leave_alerts: bool):
    """The earliest due reminders, up to ``:batch`` due by ``:horizon`` (on
    PostgreSQL locked in id order, skipping rows another engine holds: engines never
    deadlock). ``leave_alerts``: not those with an alarm or an announcement."""
    c = t.reminders.c
    due = [
        c.state == ACTIVE,
        c.next_fire_at <= bindparam("horizon"),
        _not_claimed_yet(),
        _project_on(),
    ]
    if leave_alerts:
        due += [c.alarm.is_(False), c.announce.is_(None)]
    return dialect.first_unlocked(
        t.reminders, where=due, order_by=c.next_fire_at, limit=bindparam("batch")
    )


@functools.cache
def _claim_insert(dialect: Dialect):
    ins = dialect.insert(t.occurrences).on_conflict_do_nothing(
        index_elements=["reminder_id", "due_at"]
    )
    return ins.returning(
        t.occurrences.c.id,
        t.occurrences.c.reminder_id,
        t.occurrences.c.due_at,
        t.occurrences.c.state,
    )


@functools.cache
def _claim_update():
    """Built once: a statement built anew costs SQLAlchemy its cache key each time
    (near a millisecond for the claim's statements, on the path to an overdue fire)."""
    c = t.reminders.c
    return (
        update(t.reminders)
        .where(c.id == bindparam("b_id"), c.version == bindparam("b_version"), c.state == ACTIVE)
        .values(
            next_fire_at=bindparam("next_fire_at"),
            state=bindparam("state"),
            fired_count=bindparam("fired_count"),
            snoozed=bindparam("snoozed"),
            version=bindparam("version"),
            updated_at=bindparam("updated_at"),
        )
    )


class _Rollback(Exception):
    """Raised to roll back a transaction that was run only to compile its statements."""


def _no_plan(rem: Reminder) -> Plan:
    raise AssertionError("warm() claims nothing")


class Claims(Role):
    """Claiming due reminders and waiting fires, leases on claims, re-basing and
    acknowledging (``finish``)."""

    # -- claiming due reminders ----------------------------------------------------------

    def claim_due(
        self,
        *,
        now_us: int,
        horizon_us: int,
        owner: str,
        lease_us: int,
        limit: int,
        plan: Callable[[Reminder], Plan],
        leave_alerts: bool = False,
    ) -> tuple[list[Fire], int]:
        """Claim up to ``limit`` active reminders due by ``horizon_us``; returns the
        fires and how many reminders were claimed (a full batch means: claim again).

        ``leave_alerts``: another engine holds the alerter lease, so reminders
        with an alarm or an announcement are left for it.
        """
        token = uuid.uuid4().hex
        fires: list[Fire] = []
        with self.write(notify=False) as conn:
            if _paused_all(conn):
                return [], 0
            stmt = _claim_select(self.dialect, leave_alerts)
            rems = []
            rows = conn.execute(stmt, {"horizon": horizon_us, "batch": limit}).all()
            whole = whole_rows(rows)
            for r in rows:
                try:
                    rems.append(reminder_from_row(r, whole=whole))
                except Exception as exc:  # never let one bad row stop every reminder
                    quarantine(conn, r._mapping["id"], exc, now_us=now_us)
            if rems and self.dialect.locks_rows:
                rems = _still_unclaimed(conn, rems)
            if not rems:
                write_events(conn, [])  # a quarantine's
                return [], 0
            occ_rows: list[dict[str, Any]] = []
            rem_updates: list[dict[str, Any]] = []
            lease_until = now_us + lease_us
            planned = []
            for rem in rems:
                try:
                    planned.append((rem, plan(rem)))
                except Exception as exc:  # a schedule that cannot be computed (bad zone, bad cron)
                    quarantine(conn, rem.id, exc, now_us=now_us)
            for rem, p in planned:
                for f in p.fires:
                    occ_rows.append(
                        {
                            "reminder_id": rem.id,
                            "due_at": f.due_us,
                            "session_id": rem.session,
                            "state": CLAIMED,
                            "owner": owner,
                            "token": token,
                            "lease_until": lease_until,
                            "missed": f.missed,
                            "position": f.position,
                            "attempts": 1,
                            "alert": "pending" if (rem.alarm or rem.announce) else None,
                        }
                    )
                for f in p.skipped:
                    occ_rows.append(
                        {
                            "reminder_id": rem.id,
                            "due_at": f.due_us,
                            "session_id": rem.session,
                            "state": "skipped",
                            "owner": None,
                            "token": None,
                            "lease_until": None,
                            "missed": f.missed,
                            "position": None,
                            "attempts": 0,
                            "error": f"missed {f.missed} occurrence(s) while no engine ran (policy: skip)",
                            "alert": None,
                            "fired_at": None,
                        }
                    )
                state, nxt = p.state, p.next_fire_us
                if state == DONE and p.fires:
                    # Its last occurrence is claimed but has not fired: the reminder stays
                    # active (listed, cancellable) at that time until it fires (settle()).
                    state, nxt = ACTIVE, p.fires[-1].due_us
                rem_updates.append(
                    {
                        "b_id": rem.id,
                        "b_version": rem.version,
                        "next_fire_at": nxt,
                        "state": state,
                        "fired_count": p.fired_count,
                        "snoozed": p.snoozed,
                        "version": rem.version + 1,
                        "updated_at": now_us,
                    }
                )
            if occ_rows:
                for row in occ_rows:
                    row.setdefault("error", None)
                    row.setdefault("fired_at", None)
                inserted = conn.execute(_claim_insert(self.dialect), occ_rows).all()
            else:
                inserted = []
            if rem_updates:
                conn.execute(_claim_update(), sorted(rem_updates, key=lambda row: row["b_id"]))
            failpoints.hit("in_claim_txn")
            skipped_keys = {(rid, due) for _i, rid, due, st in inserted if st == "skipped"}
            write_events(
                conn,
                [
                    event_row(
                        EventKind.SKIPPED,
                        Surface.ENGINE,
                        at_us=now_us,
                        session=row["session_id"],
                        reminder_id=row["reminder_id"],
                        detail={
                            "due_at": format_utc(from_us(row["due_at"])),
                            "error": row["error"],
                        },
                    )
                    for row in occ_rows
                    if (row["reminder_id"], row["due_at"]) in skipped_keys
                ],
            )
            by_id = {r.id: r for r in rems}
            by_key = {(row["reminder_id"], row["due_at"]): row for row in occ_rows}
            for occ_id, rid, due_us, state in inserted:
                if state != CLAIMED:
                    continue
                rem = by_id[rid]
                row = by_key[(rid, due_us)]
                fires.append(
                    fire_of(
                        rem,
                        occurrence_id=occ_id,
                        session=rem.session,
                        due_us=due_us,
                        position=row["position"],
                        missed=row["missed"],
                        token=token,
                        alert=row["alert"],
                    )
                )
        fires.sort(key=lambda f: (f.due_at, f.occurrence_id))
        return fires, len(rems)

    def reclaim_expired(
        self,
        *,
        now_us: int,
        owner: str,
        lease_us: int,
        limit: int,
        ids: Sequence[int] | None = None,
        may_take: Callable[[str, int], bool] | None = None,
    ) -> list[Fire]:
        """Take over claimed occurrences whose owner's lease ran out (it crashed or
        froze), never our own (we still hold those in hand); ``may_take(owner,
        lease_until)`` can spare an owner known to be alive. With ``ids``: take
        exactly these claims of ours back with a new token (adopting orphans)."""
        o = t.occurrences.c
        token = uuid.uuid4().hex
        with self.write(notify=False) as conn:
            stmt = select(*FIRE_COLUMNS, o.token.label("old_token"), o.owner, o.lease_until).join(
                t.reminders, t.reminders.c.id == o.reminder_id
            )
            if ids is None:
                stmt = stmt.where(o.state == CLAIMED, o.lease_until < now_us, o.owner != owner)
            else:
                stmt = stmt.where(o.state == CLAIMED, o.owner == owner, o.id.in_(list(ids)))
            stmt = stmt.order_by(o.due_at).limit(limit)
            stmt = self.dialect.skip_locked(stmt, of=t.occurrences)
            rows = conn.execute(stmt).all()
            if may_take is not None:
                rows = [r for r in rows if may_take(r._mapping["owner"], r._mapping["lease_until"])]
            if not rows:
                return []
            # One set-based update (the rows are locked by our select on PostgreSQL and
            # under the write lock on SQLite), so the locks are held only briefly.
            by_id = {r._mapping["occ_id"]: r for r in rows}
            for chunk in chunks(list(by_id)):
                conn.execute(
                    update(t.occurrences)
                    .where(o.id.in_(list(chunk)), o.state == CLAIMED)
                    .values(
                        owner=owner,
                        token=token,
                        lease_until=now_us + lease_us,
                        attempts=o.attempts + 1,
                    )
                )
            fires = [
                f for f in (_readable_fire(conn, r, token, now_us) for r in rows) if f is not None
            ]
            write_events(conn, [])  # a quarantine's
        return fires

    def own_claims(self, *, owner: str) -> list[int]:
        """Ids of the occurrences this owner holds claimed."""
        with self.read() as conn:
            return [r[0] for r in conn.execute(_OWN_CLAIMS, {"owner": owner})]

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
                f for f in (_readable_fire(conn, r, token, now_us) for r in rows) if f is not None
            ]
            write_events(conn, [])  # a quarantine's
            return fires

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

    def rebase(
        self,
        fires: Sequence[Fire],
        *,
        now_us: int,
        push: Callable[[Reminder, int], Reminder | None],
        note: str,
    ) -> tuple[list[int], list[int]]:
        """The re-base of a busy session's repeating reminders, in one transaction:
        each reminder of ``fires`` is pushed (``push(reminder, first position)``, a
        pure function), its fires that came due during the turn are recorded
        ``skipped`` (re-based), and its claimed occurrences that have not fired yet
        are cancelled (they would repeat a position). Returns (stale occurrence ids,
        cancelled ones)."""
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
                    select(t.reminders).where(c.id.in_(sorted(first))).order_by(c.id)
                )
            ).all()
            ours = {f.occurrence_id for f in fires}
            cancelled: list[int] = []
            whole = whole_rows(rows)
            for row in rows:
                rem = reminder_from_row(row, whole=whole)
                new = push(rem, first[rem.id])
                if new is None:
                    continue
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
            stale = self._finish(conn, outcomes, now_us)
        return stale, cancelled

    # -- acknowledging -------------------------------------------------------------------

    def finish(
        self,
        outcomes: Sequence[Outcome],
        *,
        fired: Sequence[tuple[int, str, int]] = (),
        now_us: int | None = None,
    ) -> list[int]:
        """Write outcomes with their tokens, and the ``fired_at`` of fires that are
        still on their way (``mark_fired``), in one transaction, each with its event
        (``fired`` the first time a fire time is recorded, then the outcome; a fire
        that keeps waiting for the same reason adds none). Returns the ids whose
        token no longer matched (the lease was taken over): those writes are refused."""
        if not outcomes and not fired:
            return []
        # Other engines need a hint only when a fire now waits for delivery; UIs re-read.
        with self.write(notify=bool(fired) or any(o.state == WAITING for o in outcomes)) as conn:
            if fired:
                self._mark_fired(conn, fired)
            return self._finish(conn, outcomes, now_us)

    def _finish(
        self, conn: Connection, outcomes: Sequence[Outcome], now_us: int | None = None
    ) -> list[int]:
        if not outcomes:
            return []
        outcomes = sorted(outcomes, key=lambda item: item.occurrence_id)
        rows: list[dict[str, Any]] = [
            {
                "b_id": item.occurrence_id,
                "b_token": item.token,
                "state": item.state,
                "error": item.error,
                "b_fired": item.fired_at_us,
                "b_delivered": item.delivered_at_us,
                "b_to": item.delivered_to,
                "b_alert": item.alert,
                "b_keep": item.state == CLAIMED,
                "b_wait": item.wait_for if item.state == WAITING else None,
                "b_handed": item.handed_at_us,
            }
            for item in outcomes
        ]
        # Which ones still hold their claim (locked on PostgreSQL, in id order as every
        # writer of these rows locks them; under the write lock on SQLite); the others
        # were taken over or cancelled: refused.
        held: dict[int, Any] = {}
        ids = [r["b_id"] for r in rows]
        q = _HELD_LOCKED if self.dialect.locks_rows else _HELD
        for chunk in chunks(ids):
            held.update((row[0], row) for row in conn.execute(q, {"ids": list(chunk)}))
        ok = [r for r in rows if (h := held.get(r["b_id"])) is not None and h.token == r["b_token"]]
        if ok:
            self.dialect.run_many(conn, _FINISH, ok)
            stamps = [v for r in ok for v in (r["b_fired"], r["b_delivered"]) if v is not None]
            settle(conn, [r["b_id"] for r in ok], max(stamps) if stamps else None)
            pausing = {item.occurrence_id: item.error for item in outcomes if item.pause}
            if pausing:
                pause_failed(
                    conn,
                    [(r["b_id"], pausing[r["b_id"]]) for r in ok if r["b_id"] in pausing],
                    max(stamps) if stamps else None,
                )
            replies = {item.occurrence_id: item.reply for item in outcomes if item.reply}
            write_events(conn, _outcome_events(ok, held, now_us, replies))
        return [
            r["b_id"] for r in rows if (h := held.get(r["b_id"])) is None or h.token != r["b_token"]
        ]

    def set_alert(self, occurrence_id: int, token: str, *, expect: str, to: str) -> bool:
        """Compare-and-set the alert state; an alert plays only after winning ``pending -> playing``."""
        o = t.occurrences.c
        with self.write(notify=False) as conn:
            res = conn.execute(
                update(t.occurrences)
                .where(o.id == occurrence_id, o.token == token, o.alert == expect)
                .values(alert=to)
            )
            return res.rowcount == 1

    def mark_fired(self, items: Sequence[tuple[int, str, int]]) -> None:
        """Record ``fired_at`` for (occurrence_id, token, fired_at_us) without ending the claim."""
        if items:
            with self.write() as conn:
                self._mark_fired(conn, items)

    def _mark_fired(self, conn: Connection, items: Sequence[tuple[int, str, int]]) -> None:
        tokens = {i: tok for i, tok, _f in items}
        fresh: dict[int, Any] = {}  # not yet marked: these get a `fired` event
        ids = sorted(tokens)
        for chunk in chunks(ids):
            rows = conn.execute(_UNFIRED, {"ids": list(chunk)})
            fresh.update((row[0], row) for row in rows if row[1] == tokens[row[0]])
        self.dialect.run_many(
            conn,
            _MARK_FIRED,
            [{"b_id": i, "b_token": tok, "b_fired": f} for i, tok, f in sorted(items)],
        )
        write_events(conn, [_fired_event(fresh[i], f) for i, _tok, f in items if i in fresh])

    # -- what to wait for ----------------------------------------------------------------

    def next_due_us(self, *, leave_alerts: bool = False) -> tuple[int | None, int | None]:
        """(earliest due reminder, earliest lease expiry of a claimed occurrence)."""
        with self.read() as conn:
            if _paused_all(conn):
                due = None
            else:
                due = conn.execute(_NEXT_DUE_NO_ALERTS if leave_alerts else _NEXT_DUE).scalar()
            lease = conn.execute(_NEXT_LEASE).scalar()
        return due, lease

    def still_claimed(self, ids: Sequence[int], *, owner: str) -> list[int]:
        """Which of these occurrences this owner still holds (not cancelled or taken over)."""
        o = t.occurrences.c
        held: list[int] = []
        with self.read() as conn:
            for chunk in chunks(ids):
                held.extend(
                    r[0]
                    for r in conn.execute(
                        select(o.id).where(
                            o.id.in_(list(chunk)), o.owner == owner, o.state == CLAIMED
                        )
                    )
                )
        return held

    def release_claims(self, *, owner: str, ids: Sequence[int]) -> None:
        """Let other engines take these claims at once (a clean shutdown)."""
        if not ids:
            return
        o = t.occurrences.c
        with self.write() as conn:
            for chunk in chunks(ids):
                conn.execute(
                    update(t.occurrences)
                    .where(o.id.in_(list(chunk)), o.owner == owner, o.state == CLAIMED)
                    .values(lease_until=0)
                )

    def warm(self, *also: Callable[[], object]) -> None:
        """Run an engine's first statements once, claiming nothing, so that SQLAlchemy
        has compiled them before a fire that is overdue when the engine starts needs
        them (compiling them cold costs several milliseconds); ``also``: reads of other
        roles the engine starts with. Best effort."""
        try:
            # The first claim would copy a write-ahead log left by an earlier
            # process into the database otherwise (~10 ms per 4 MB).
            self.dialect.checkpoint(self.db.engine)
            self.next_due_us()
            for leave in (True, False):  # an engine's first claim leaves alerts, the rest may not
                self.claim_due(
                    now_us=0,
                    horizon_us=-1,
                    owner="",
                    lease_us=0,
                    limit=1,
                    plan=_no_plan,
                    leave_alerts=leave,
                )
            for read in also:
                read()
            # The claim's writes too (the call above found nothing to claim), rolled back.
            with contextlib.suppress(_Rollback), self.write(notify=False) as conn:
                row = {
                    "reminder_id": "",
                    "due_at": 0,
                    "session_id": None,
                    "state": CLAIMED,
                    "owner": "",
                    "token": "",
                    "lease_until": 0,
                    "missed": 0,
                    "position": 1,
                    "attempts": 1,
                    "alert": None,
                    "error": None,
                    "fired_at": None,
                }
                conn.execute(
                    _claim_update(),
                    [
                        {
                            "b_id": "",
                            "b_version": -1,
                            "next_fire_at": None,
                            "state": ACTIVE,
                            "fired_count": 0,
                            "snoozed": False,
                            "version": 0,
                            "updated_at": 0,
                        }
                    ],
                )
                conn.execute(_claim_insert(self.dialect), [row, {**row, "due_at": 1}]).all()
                raise _Rollback
        except Exception as exc:
            log.debug("warming the store's statements failed: %s", exc)


# Outcome events are built here without the general detail_json: a burst writes
# thousands at once, and their details are known to be small (only an error is cut).
_ENGINE = Surface.ENGINE.value
_FIRED = EventKind.FIRED.value
_OUTCOME_KINDS = {
    "delivered": EventKind.DELIVERED.value,
    "failed": EventKind.FAILED.value,
    "skipped": EventKind.SKIPPED.value,
    WAITING: EventKind.WAITING.value,
    "cancelled": EventKind.CANCELLED.value,
}


@functools.lru_cache(maxsize=4096)  # fires of a burst share their due times
def _due_json(due_us: int) -> str:
    return '{"due_at":' + f'"{format_utc(from_us(due_us))}"'


@functools.lru_cache(maxsize=4096)  # ... and their sessions and reasons
def _json_str(value: str) -> str:
    return json.dumps(value[:DETAIL_VALUE_MAX], ensure_ascii=False)


def _fired_event(held: Any, fired_us: int) -> EventRow:
    detail = f'{_due_json(held.due_at)},"late_ms":{(fired_us - held.due_at) // 1000}}}'
    return (fired_us, _FIRED, _ENGINE, held.session_id, held.reminder_id, held.id, detail)


def _outcome_events(
    ok: Sequence[dict[str, Any]],
    held: dict[int, Any],
    now_us: int | None,
    replies: dict[int, str] | None = None,
) -> list[EventRow]:
    out: list[EventRow] = []
    for r in ok:
        h = held[r["b_id"]]
        if h.fired_at is None and r["b_fired"] is not None:
            out.append(_fired_event(h, r["b_fired"]))
        kind = _OUTCOME_KINDS.get(r["state"])
        if kind is None or (kind == _OUTCOME_KINDS[WAITING] and r["error"] == h.error):
            continue
        at = now_us or r["b_delivered"] or r["b_fired"] or h.fired_at or h.due_at
        detail = _due_json(h.due_at)
        if r["b_to"] is not None:
            detail += ',"to":' + _json_str(r["b_to"])
        if r["error"] is not None:
            detail += ',"error":' + _json_str(r["error"])
        reply = replies.get(r["b_id"]) if replies else None
        if reply and r["state"] == DELIVERED:
            detail += ',"reply":' + _reply_json(reply)
        out.append((at, kind, _ENGINE, h.session_id, h.reminder_id, h.id, detail + "}"))
    return out


REPLY_CHARS = 400  # of the agent's reply kept in its delivered event (the transcript has it all)


def _reply_json(reply: str) -> str:
    """The start of a reply as a JSON string, short enough for an event's detail even
    when its characters need escapes."""
    text = reply[:REPLY_CHARS]
    encoded = _json_str(text + ("…" if len(reply) > len(text) else ""))
    while len(encoded) > 600:
        text = text[: len(text) // 2]
        encoded = _json_str(text + "…")
    return encoded


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


def fold_waiting(
    rows: Iterable[Any], out: dict[str, tuple[str | None, str | None, int, int]]
) -> dict[str, tuple[str | None, str | None, int, int]]:
    """Waiting fires by reminder: the earliest's wait, reason and due time, and how many."""
    for rid, wait_for, error, due in rows:
        if rid in out:
            w, e, d, n = out[rid]
            out[rid] = (w, e, d, n + 1)
        else:
            out[rid] = (wait_for, error, due, 1)
    return out


def _paused_all(conn: Connection) -> bool:
    return conn.execute(_PAUSED_ALL).scalar() == "1"


# Built once: an engine runs these at every change it hears of.
_PAUSED_ALL = select(t.flags.c.value).where(t.flags.c.name == PAUSED_ALL)
_NEXT_DUE = select(func.min(t.reminders.c.next_fire_at)).where(
    t.reminders.c.state == ACTIVE, _not_claimed_yet(), _project_on()
)
_NEXT_DUE_NO_ALERTS = _NEXT_DUE.where(
    t.reminders.c.alarm.is_(False), t.reminders.c.announce.is_(None)
)
_O = t.occurrences.c
_FINISH = (
    update(t.occurrences)
    .where(_O.id == bindparam("b_id"), _O.token == bindparam("b_token"), _O.state == CLAIMED)
    .values(
        state=bindparam("state"),
        error=bindparam("error"),
        fired_at=func.coalesce(_O.fired_at, bindparam("b_fired", type_=BigInteger)),
        delivered_at=func.coalesce(bindparam("b_delivered", type_=BigInteger), _O.delivered_at),
        delivered_to=func.coalesce(bindparam("b_to", type_=Text), _O.delivered_to),
        alert=func.coalesce(bindparam("b_alert", type_=Text), _O.alert),
        wait_for=bindparam("b_wait", type_=Text),
        handed_at=func.coalesce(bindparam("b_handed", type_=BigInteger), _O.handed_at),
        owner=case((bindparam("b_keep", type_=Boolean), _O.owner), else_=None),
        token=case((bindparam("b_keep", type_=Boolean), _O.token), else_=None),
        lease_until=case((bindparam("b_keep", type_=Boolean), _O.lease_until), else_=None),
    )
)
_HELD = (
    select(_O.id, _O.token, _O.fired_at, _O.reminder_id, _O.session_id, _O.due_at, _O.error)
    .where(_O.id.in_(bindparam("ids", expanding=True)), _O.state == CLAIMED)
    .order_by(_O.id)
)
_HELD_LOCKED = _HELD.with_for_update()
_UNFIRED = select(_O.id, _O.token, _O.reminder_id, _O.session_id, _O.due_at).where(
    _O.id.in_(bindparam("ids", expanding=True)), _O.fired_at.is_(None)
)
_MARK_FIRED = (
    update(t.occurrences)
    .where(_O.id == bindparam("b_id"), _O.token == bindparam("b_token"), _O.fired_at.is_(None))
    .values(fired_at=bindparam("b_fired"))
)
_WAITING_SESSIONS = (
    select(t.occurrences.c.session_id).where(t.occurrences.c.state == WAITING).distinct()
)
_OWN_CLAIMS = select(_O.id).where(_O.state == CLAIMED, _O.owner == bindparam("owner"))
_NEXT_LEASE = select(func.min(t.occurrences.c.lease_until)).where(t.occurrences.c.state == CLAIMED)


__all__ = ["Claims", "Outcome", "Plan", "PlannedFire", "settle", "waiting_of"]
