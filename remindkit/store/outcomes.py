"""Acknowledging fires: the outcomes of claimed occurrences written with their
tokens, fire times marked, the alert state compared and set.

Every write about a claimed occurrence carries its claim's token; after a lease
expires another engine may take the occurrence over with a new token, and the old
owner's acknowledgement then matches no row and is refused. With an outcome, a
reminder whose final occurrence has ended is done (:func:`settle`), and one whose
fire failed for good is paused with ``last_error`` (:func:`pause_failed`); each
outcome is an event of the audit trail, written in the same transaction.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    BigInteger,
    Boolean,
    Connection,
    Text,
    bindparam,
    case,
    exists,
    func,
    select,
    update,
)

from ..audit import DETAIL_VALUE_MAX, EventKind, Surface
from ..clock import format_utc, from_us
from ..models import (
    ACTIVE,
    CLAIMED,
    DELIVERED,
    DONE,
    FAILED,
    PAUSED,
    WAITING,
    AlertState,
    Outcome,
)
from . import schema as t
from .dialect import Dialect, chunks, pg_array, pg_columns
from .events import EventRow, event_row, write_events
from .role import Role

log = logging.getLogger(__name__)


class Outcomes(Role):
    """Outcomes of claimed occurrences (``finish``), fire times and alert states."""

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
        token no longer matched (the lease was taken over): those writes are refused.

        Fire times, and fires that wait without having been handed to anyone, are
        committed without a sync to disk (``durable=False``; the next synced commit
        syncs them too). A power cut that loses them loses their events too, and
        leaves the claims as they were: taken over, they fire again, as they would
        had the cut come before the fire, and nothing was delivered in between. What
        a repeat would make wrong (a delivery, a hand-over to a turn, a failure, an
        end) is synced before this returns. The sync cost every fire's event on its
        way to the streams 2-4 ms here (``bench/api_speed.py``)."""
        if not outcomes and not fired:
            return []
        # Other engines need a hint only when a fire now waits for delivery; UIs re-read.
        notify = bool(fired) or any(o.state == WAITING for o in outcomes)
        with self.write(notify=notify, durable=any(map(_repeat_is_wrong, outcomes))) as conn:
            if fired:
                self._mark_fired(conn, fired)
            return write_outcomes(conn, self.dialect, outcomes, now_us)

    def set_alert(
        self, occurrence_id: int, token: str, *, expect: AlertState, to: AlertState
    ) -> bool:
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


def write_outcomes(
    conn: Connection, dialect: Dialect, outcomes: Sequence[Outcome], now_us: int | None = None
) -> list[int]:
    """:meth:`Outcomes.finish` in the caller's transaction (a re-base writes its
    skipped fires so). Returns the ids refused (their claim was taken over)."""
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
    if dialect.locks_rows:  # one statement over an array, locking in id order
        held.update(
            (row[0], _Held(*row))
            for row in dialect.fetch(conn, _HELD_PG, [pg_array(ids, "integer")])
        )
    else:
        for chunk in chunks(ids):
            held.update((row[0], row) for row in conn.execute(_HELD, {"ids": list(chunk)}))
    ok = [r for r in rows if (h := held.get(r["b_id"])) is not None and h.token == r["b_token"]]
    if ok:
        _finish(conn, dialect, ok)
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


def settle(conn: Connection, occurrence_ids: Sequence[int], now_us: int | None) -> None:
    """A reminder whose final occurrence has now ended (delivered, failed, skipped,
    cancelled) is done. One whose final fire still waits for its session stays
    active: listed, and cancellable until its turn starts."""
    dialect = Dialect.of(conn)
    if dialect.locks_rows:
        # One statement over an array each: the reminders locked in id order, as
        # every writer of reminders locks them, then those still final are done.
        if not occurrence_ids:
            return
        occ = pg_array(occurrence_ids, "integer")
        rids = [r[0] for r in dialect.fetch(conn, _SETTLE_LOCK_PG, [occ, occ])]
        if rids:
            dialect.run(conn, _SETTLE_LOCKED_PG, [now_us, pg_array(rids, "text"), occ])
        return
    for chunk in chunks(occurrence_ids):
        conn.execute(_SETTLE, {"occ": list(chunk), "now": now_us})


def _settle_statements() -> Any:
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
    return update(t.reminders).where(*final).values(**values)


# Built once: settle() runs with every batch of outcomes.
_SETTLE = _settle_statements()

# PostgreSQL: settle()'s statements over arrays, the same conditions as
# _settle_statements(). The reminders are found by key (``= ANY(ARRAY(...))``, an
# init plan and index lookups; ``IN (subquery)`` may be planned as a semi-join over
# a scan of the table), the ``FOR UPDATE`` above the sort locks them in id order.
_FINAL_PG = (
    f"(reminders.state || '') IN ('{ACTIVE}', '{PAUSED}') "
    "AND EXISTS (SELECT 1 FROM occurrences o WHERE o.reminder_id = reminders.id "
    "AND o.due_at = reminders.next_fire_at AND o.id = ANY(%(occ)s::integer[]) "
    f"AND o.fired_at IS NOT NULL AND o.state NOT IN ('{CLAIMED}', '{WAITING}'))"
)
_SETTLE_LOCK_PG = (
    "SELECT reminders.id FROM reminders WHERE reminders.id = ANY(ARRAY("
    "SELECT ended.reminder_id FROM occurrences ended WHERE ended.id = ANY(%(occ)s::integer[])"
    f")) AND {_FINAL_PG} ORDER BY reminders.id FOR UPDATE"
).replace("%(occ)s", "%s")
_SETTLE_LOCKED_PG = (
    f"UPDATE reminders SET state = '{DONE}', next_fire_at = NULL, version = reminders.version + 1, "
    "updated_at = coalesce(%s::bigint, reminders.updated_at) "
    f"WHERE reminders.id = ANY(%s::text[]) AND {_FINAL_PG}"
).replace("%(occ)s", "%s")


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


# Outcome events are built here without the general detail_json: a burst writes
# thousands at once, and their details are known to be small (only an error is cut).
_ENGINE = Surface.ENGINE.value
_FIRED = EventKind.FIRED.value
_OUTCOME_KINDS = {
    "delivered": EventKind.DELIVERED.value,
    "alerted": EventKind.ALERTED.value,
    "failed": EventKind.FAILED.value,
    "skipped": EventKind.SKIPPED.value,
    WAITING: EventKind.WAITING.value,
    "cancelled": EventKind.CANCELLED.value,
}


def _repeat_is_wrong(o: Outcome) -> bool:
    """Whether firing ``o``'s occurrence again, had its write been lost, would be wrong:
    anything but a wait of a fire that nobody took (see ``Outcomes.finish``)."""
    return o.state != WAITING or o.handed_at_us is not None or o.pause or o.reply is not None


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


class _Held(NamedTuple):
    """A claimed occurrence as :data:`_HELD_PG` returns it (the fields of :data:`_HELD`)."""

    id: int
    token: str | None
    fired_at: int | None
    reminder_id: str
    session_id: str | None
    due_at: int
    error: str | None


# PostgreSQL: _HELD over an array, locked in id order (the lock is taken above the sort).
_HELD_PG = (
    "SELECT id, token, fired_at, reminder_id, session_id, due_at, error FROM occurrences "
    f"WHERE id = ANY(%s::integer[]) AND state = '{CLAIMED}' ORDER BY id FOR UPDATE"
)

# PostgreSQL: _FINISH for every outcome at once, its parameters one array per column.
# The rows it updates are those _HELD_PG locked (their token matched), so it waits
# for no lock.
_FINISH_COLUMNS = (
    ("b_id", "integer"),
    ("b_token", "text"),
    ("state", "text"),
    ("error", "text"),
    ("b_fired", "bigint"),
    ("b_delivered", "bigint"),
    ("b_to", "text"),
    ("b_alert", "text"),
    ("b_keep", "boolean"),
    ("b_wait", "text"),
    ("b_handed", "bigint"),
)
_FINISH_PG = (
    "UPDATE occurrences SET state = u.state, error = u.error, "
    "fired_at = coalesce(occurrences.fired_at, u.b_fired), "
    "delivered_at = coalesce(u.b_delivered, occurrences.delivered_at), "
    "delivered_to = coalesce(u.b_to, occurrences.delivered_to), "
    "alert = coalesce(u.b_alert, occurrences.alert), "
    "wait_for = u.b_wait, "
    "handed_at = coalesce(u.b_handed, occurrences.handed_at), "
    "owner = CASE WHEN u.b_keep THEN occurrences.owner END, "
    "token = CASE WHEN u.b_keep THEN occurrences.token END, "
    "lease_until = CASE WHEN u.b_keep THEN occurrences.lease_until END "
    f"FROM unnest({', '.join(f'%s::{ty}[]' for _, ty in _FINISH_COLUMNS)}) "
    f"AS u({', '.join(c for c, _ in _FINISH_COLUMNS)}) "
    "WHERE occurrences.id = u.b_id AND occurrences.token = u.b_token "
    f"AND occurrences.state = '{CLAIMED}'"
)


def _finish(conn: Connection, dialect: Dialect, ok: list[dict[str, Any]]) -> None:
    """Write the outcomes whose claim is held (``ok``, in id order): on PostgreSQL in
    one statement over arrays, where each id appears once (an ``UPDATE ... FROM``
    applies one row of the join to each target row; a repeated id keeps the
    statement per row, which applies each in turn)."""
    if dialect.locks_rows and len({r["b_id"] for r in ok}) == len(ok):
        dialect.run(conn, _FINISH_PG, pg_columns(ok, _FINISH_COLUMNS))
    else:
        dialect.run_many(conn, _FINISH, ok)


_UNFIRED = select(_O.id, _O.token, _O.reminder_id, _O.session_id, _O.due_at).where(
    _O.id.in_(bindparam("ids", expanding=True)), _O.fired_at.is_(None)
)
_MARK_FIRED = (
    update(t.occurrences)
    .where(_O.id == bindparam("b_id"), _O.token == bindparam("b_token"), _O.fired_at.is_(None))
    .values(fired_at=bindparam("b_fired"))
)


__all__ = ["Outcomes", "pause_failed", "settle", "write_outcomes"]
