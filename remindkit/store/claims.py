"""Claiming occurrences and the leases on claims.

An occurrence is keyed ``UNIQUE(reminder_id, due_at)``. An engine claims due
reminders in one write transaction: it inserts the occurrence rows as
``claimed`` with its owner id, a fresh token and a lease, and advances each
reminder (next fire, fired count, state) with a compare-and-set on its version.
SQLite serialises this with ``BEGIN IMMEDIATE``; PostgreSQL with
``FOR UPDATE SKIP LOCKED`` (the state predicate repeated in the outer UPDATE).

A claim's lease is renewed by its engine (``Turns.renew_leases``); after it
expires another engine takes the occurrence over with a new token
(:meth:`Claims.reclaim_expired`), and the old owner's acknowledgement
(``remindkit/store/outcomes.py``) then matches no row and is refused. A row that
cannot be read or planned is quarantined (``remindkit/store/quarantine.py``).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import (
    ARRAY,
    Connection,
    Text,
    and_,
    any_,
    bindparam,
    exists,
    func,
    or_,
    select,
    update,
)

from .. import failpoints
from ..audit import EventKind, Surface
from ..clock import format_utc, from_us
from ..models import ACTIVE, CLAIMED, DONE, AlertState, Fire, Plan, Reminder
from . import schema as t
from .coordination import PAUSED_ALL
from .dialect import Dialect, chunks, pg_columns
from .events import event_row, write_events
from .projects import disabled_projects_sessions
from .quarantine import quarantine, readable_fire
from .role import Role
from .rows import FIRE_COLUMNS, fire_of, reminder_from_row, whole_rows

log = logging.getLogger(__name__)


def _not_claimed_yet():
    """The reminder's next occurrence has no row yet (a final one, claimed and not
    yet fired, keeps the reminder active at its time: see claim_due).

    A probe of the occurrence key for each reminder looked at, never a join:
    ``OFFSET 0`` keeps PostgreSQL from turning the ``NOT EXISTS`` into an anti-join,
    which it planned as a merge on the due time alone when the statistics were
    older than a burst, every claimed occurrence against every due reminder of the
    same instant (3,000 claimed, 20,000 due at once: three million rows compared,
    0.6 s a batch). SQLite probes so anyway."""
    o, c = t.occurrences.c, t.reminders.c
    return ~exists(select(o.id).where(o.reminder_id == c.id, o.due_at == c.next_fire_at).offset(0))


def _project_on():
    """Reminders of a project whose ``reminders`` feature is off are not claimed."""
    c = t.reminders.c
    return or_(c.session_id.is_(None), c.session_id.not_in(disabled_projects_sessions()))


def _still_unclaimed(conn: Connection, rems: list[Reminder]) -> list[Reminder]:
    """The reminders among ``rems`` (just locked) that no engine claimed meanwhile.

    On PostgreSQL the locking select judges "not claimed yet" by the snapshot its
    statement began with; a row another engine claimed and committed in between is
    locked all the same (its own columns are checked again, the subquery is not).
    Claiming it again would insert an occurrence that exists, waiting on whichever
    transaction is writing that occurrence now, which may in turn wait for the row
    we hold: a deadlock. A second statement sees every commit made before it, one
    for the whole batch (the ids as one array: ``= ANY``)."""
    rows = conn.execute(_still_unclaimed_select(), {"ids": [r.id for r in rems]})
    current = {row[0]: row[1] for row in rows}
    return [r for r in rems if current.get(r.id) == r.version]


@functools.cache
def _still_unclaimed_select() -> Any:
    c = t.reminders.c
    return select(c.id, c.version).where(
        c.id == any_(bindparam("ids", type_=ARRAY(Text))), _not_claimed_yet()
    )


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


# PostgreSQL: a claim's occurrence rows as one array per column, unnested by the server.
# SQLAlchemy's executemany with RETURNING renders a statement of 13 parameters a row
# (13,000 for a batch of 1,000), which cost 100-300 ms to build, send and parse; the
# arrays cost 20-50 ms.
_OCC_COLUMNS = (
    ("reminder_id", "text"),
    ("due_at", "bigint"),
    ("session_id", "text"),
    ("state", "text"),
    ("owner", "text"),
    ("token", "text"),
    ("lease_until", "bigint"),
    ("fired_at", "bigint"),
    ("missed", "integer"),
    ("position", "integer"),
    ("attempts", "integer"),
    ("error", "text"),
    ("alert", "text"),
)
_INSERT_UNNEST = (
    f"INSERT INTO occurrences ({', '.join(c for c, _ in _OCC_COLUMNS)}) "
    f"SELECT * FROM unnest({', '.join(f'%s::{ty}[]' for _, ty in _OCC_COLUMNS)}) "
    "ON CONFLICT (reminder_id, due_at) DO NOTHING "
    "RETURNING id, reminder_id, due_at, state"
)


def _insert_occurrences(
    conn: Connection, dialect: Dialect, rows: list[dict[str, Any]]
) -> list[tuple[int, str, int, str]]:
    """Insert claimed (and skipped) occurrence rows, leaving any that exist; returns
    (id, reminder_id, due_at, state) of those inserted."""
    if not dialect.locks_rows:
        return [tuple(r) for r in conn.execute(_claim_insert(dialect), rows).all()]
    return [tuple(r) for r in dialect.fetch(conn, _INSERT_UNNEST, pg_columns(rows, _OCC_COLUMNS))]


_REM_COLUMNS = (
    ("b_id", "text"),
    ("b_version", "integer"),
    ("next_fire_at", "bigint"),
    ("state", "text"),
    ("fired_count", "integer"),
    ("snoozed", "boolean"),
    ("version", "integer"),
    ("updated_at", "bigint"),
)
_UPDATE_UNNEST = (
    "UPDATE reminders SET next_fire_at = u.next_fire_at, state = u.state, "
    "fired_count = u.fired_count, snoozed = u.snoozed, version = u.version, "
    "updated_at = u.updated_at "
    f"FROM unnest({', '.join(f'%s::{ty}[]' for _, ty in _REM_COLUMNS)}) "
    f"AS u({', '.join(c for c, _ in _REM_COLUMNS)}) "
    f"WHERE reminders.id = u.b_id AND reminders.version = u.b_version "
    f"AND reminders.state = '{ACTIVE}'"
)


def _update_claimed(conn: Connection, dialect: Dialect, rows: list[dict[str, Any]]) -> None:
    """Advance the claimed reminders (compare-and-set on their version); on PostgreSQL
    in one statement over arrays, as :func:`_insert_occurrences` inserts."""
    if not dialect.locks_rows:
        conn.execute(_claim_update(), rows)
        return
    dialect.run(conn, _UPDATE_UNNEST, pg_columns(rows, _REM_COLUMNS))


class _Rollback(Exception):
    """Raised to roll back a transaction that was run only to compile its statements."""


def _no_plan(rem: Reminder) -> Plan:
    raise AssertionError("warm() claims nothing")


class Claims(Role):
    """Claiming due reminders, taking over lapsed claims, and what to wait for."""

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

        The claim is committed without a sync to disk (``durable=False``): lost to a
        power cut, its reminders are due again and are claimed again, as if the cut
        had come before it. What the fires then lead to (a delivery, a hand-over, an
        alert's state) is synced, and that sync takes this claim with it. An overdue
        fire no longer waits for a sync before it goes out.
        """
        token = uuid.uuid4().hex
        fires: list[Fire] = []
        with self.write(notify=False, durable=False) as conn:
            if _paused_all(conn):
                return [], 0
            self.dialect.walk_in_order(conn)
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
                            "alert": AlertState.PENDING if (rem.alarm or rem.announce) else None,
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
                inserted = _insert_occurrences(conn, self.dialect, occ_rows)
            else:
                inserted = []
            if rem_updates:
                _update_claimed(conn, self.dialect, sorted(rem_updates, key=lambda r: r["b_id"]))
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
            for occ_id, rid, due_us, occ_state in inserted:
                if occ_state != CLAIMED:
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
        expired_before: Callable[[str], int] | None = None,
    ) -> list[Fire]:
        """Take over claimed occurrences whose owner's lease ran out (it crashed or
        froze), never our own (we still hold those in hand). ``expired_before(owner)``
        can give an owner known to be alive a later point: only its claims whose lease
        ran out before that instant are taken. The owners are read first, without a
        lock, and only the claims that may be taken are locked: a scan that locked a
        live owner's lapsed claims only to spare them made that owner's renewal, which
        skips locked rows, leave them out, round after round, until they were old
        enough to be taken (PostgreSQL, four engines under load: fires delivered
        twice). With ``ids``: take exactly these claims of ours back with a new token
        (adopting orphans)."""
        o = t.occurrences.c
        token = uuid.uuid4().hex
        with self.write(notify=False) as conn:
            stmt = select(*FIRE_COLUMNS, o.token.label("old_token"), o.owner, o.lease_until).join(
                t.reminders, t.reminders.c.id == o.reminder_id
            )
            if ids is None:
                owners = conn.execute(
                    select(o.owner)
                    .where(o.state == CLAIMED, o.lease_until < now_us, o.owner != owner)
                    .distinct()
                ).scalars()
                lapsed = [
                    and_(o.owner == who, o.lease_until < min(now_us, expired_before(who)))
                    if expired_before is not None
                    else o.owner == who
                    for who in owners
                    if who is not None
                ]
                if not lapsed:
                    return []
                stmt = stmt.where(o.state == CLAIMED, o.lease_until < now_us, or_(*lapsed))
            else:
                stmt = stmt.where(o.state == CLAIMED, o.owner == owner, o.id.in_(list(ids)))
            stmt = stmt.order_by(o.due_at).limit(limit)
            stmt = self.dialect.skip_locked(stmt, of=t.occurrences)
            rows = conn.execute(stmt).all()
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
                f for f in (readable_fire(conn, r, token, now_us) for r in rows) if f is not None
            ]
            write_events(conn, [])  # a quarantine's
        return fires

    def own_claims(self, *, owner: str) -> list[int]:
        """Ids of the occurrences this owner holds claimed."""
        with self.read() as conn:
            return [r[0] for r in conn.execute(_OWN_CLAIMS, {"owner": owner})]

    # -- what to wait for ----------------------------------------------------------------

    def next_due_us(self, *, leave_alerts: bool = False) -> tuple[int | None, int | None]:
        """(earliest due reminder, earliest lease expiry of a claimed occurrence)."""
        with self.read() as conn:
            if _paused_all(conn):
                due = None
            else:
                self.dialect.walk_in_order(conn)
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
                _update_claimed(
                    conn,
                    self.dialect,
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
                _insert_occurrences(conn, self.dialect, [row, {**row, "due_at": 1}])
                raise _Rollback
        except Exception as exc:
            log.debug("warming the store's statements failed: %s", exc)


def _paused_all(conn: Connection) -> bool:
    return conn.execute(_PAUSED_ALL).scalar() == "1"


# Built once: an engine runs these at every change it hears of.
_PAUSED_ALL = select(t.flags.c.value).where(t.flags.c.name == PAUSED_ALL)
# The earliest by an ordered walk of the (state, next_fire_at) index that stops at the
# first match, not min(): PostgreSQL does not turn a min() over an anti-join into
# that walk, and scanned, sorted and merged the whole table instead (100,000 stored:
# a quarter of a second, at every change an engine hears of).
_NEXT_DUE = (
    select(t.reminders.c.next_fire_at)
    .where(
        t.reminders.c.state == ACTIVE,
        t.reminders.c.next_fire_at.is_not(None),  # min() skipped them; SQLite sorts them first
        _not_claimed_yet(),
        _project_on(),
    )
    .order_by(t.reminders.c.next_fire_at)
    .limit(1)
)
_NEXT_DUE_NO_ALERTS = _NEXT_DUE.where(
    t.reminders.c.alarm.is_(False), t.reminders.c.announce.is_(None)
)
_O = t.occurrences.c
_OWN_CLAIMS = select(_O.id).where(_O.state == CLAIMED, _O.owner == bindparam("owner"))
_NEXT_LEASE = select(func.min(t.occurrences.c.lease_until)).where(t.occurrences.c.state == CLAIMED)


__all__ = ["Claims"]
