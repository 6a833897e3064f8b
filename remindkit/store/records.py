"""The ``reminders`` table's rows as a database driver returns them (tuples in column
order) and the reminders they hold, both ways, without SQLAlchemy: for statements run
through the driver (every create, a session's list) and for the command line's reads
of a store with no engine (:mod:`remindkit.store.lite`), which must not pay for
importing SQLAlchemy. :mod:`remindkit.store.rows` checks that these columns are the
table's (``schema.reminders``) and maps SQLAlchemy's rows with the same functions."""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..clock import from_us, to_us
from ..models import (
    LIVE_STATES,
    WAITING,
    BusyPolicy,
    Delivery,
    MisfirePolicy,
    Quarantine,
    Reminder,
    ReminderState,
    Source,
    Urgency,
    WaitFor,
    by_value,
)
from ..schedules import Schedule

log = logging.getLogger(__name__)

# the reminders table's columns, in order (reminder_values lists them by hand)
REMINDER_FIELDS: tuple[str, ...] = tuple(
    [
        "id",
        "session_id",
        "label",
        "text",
        "kind",
        "spec",
        "tz",
        "state",
        "next_fire_at",
        "fired_count",
        "alarm",
        "announce",
        "urgency",
        "misfire",
        "catchup_cap",
        "on_busy",
        "last_error",
        "source",
        "slot",
        "snoozed",
        "created_at",
        "updated_at",
        "version",
        "quarantine",
    ]
)
REMINDER_COLUMNS = ", ".join(REMINDER_FIELDS)  # for statements run through the driver
# a reminder's waiting fires: (wait_for, reason of the earliest, its due time µs, how many)
Waiting = dict[str, tuple[str | None, str | None, int, int]]


def _dt(us: int | None):
    return None if us is None else from_us(int(us))


# values -> enum members (a value not among them stays as read: models.by_value)
_STATE = by_value(ReminderState)
_URGENCY = by_value(Urgency)
_MISFIRE = by_value(MisfirePolicy)
_ON_BUSY = by_value(BusyPolicy)
_SOURCE = by_value(Source)
_WAIT_FOR = by_value(WaitFor)
_QUARANTINE = by_value(Quarantine)


def wait_for_of(value: str | None) -> WaitFor | None:
    return None if value is None else _WAIT_FOR.get(value, value)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=8192)
def _reminder_of_values(values: tuple[Any, ...]) -> Reminder:
    return _reminder_of_mapping(dict(zip(REMINDER_FIELDS, values, strict=True)))


def _reminder_of_mapping(m: Any) -> Reminder:
    return Reminder(
        id=m["id"],
        session=m["session_id"],
        label=m["label"],
        text=m["text"],
        schedule=Schedule.from_json(m["spec"]),
        state=_STATE.get(m["state"], m["state"]),
        next_fire_at=_dt(m["next_fire_at"]),
        fired_count=m["fired_count"],
        alarm=bool(m["alarm"]),
        announce=m["announce"],
        urgency=_URGENCY.get(m["urgency"], m["urgency"]),
        misfire=_MISFIRE.get(m["misfire"], m["misfire"]),
        catchup_cap=m["catchup_cap"],
        on_busy=_ON_BUSY.get(m["on_busy"], m["on_busy"]),
        last_error=m["last_error"],
        created_at=_dt(m["created_at"]),
        updated_at=_dt(m["updated_at"]),
        source=_SOURCE.get(m["source"], m["source"]),
        slot=m["slot"],
        snoozed=bool(m["snoozed"]),
        version=m["version"],
        quarantine=None
        if m["quarantine"] is None
        else _QUARANTINE.get(m["quarantine"], m["quarantine"]),
    )


def reminder_values(r: Reminder) -> tuple[Any, ...]:
    """A reminder's ``reminders`` row as values in column order
    (:data:`REMINDER_COLUMNS`), for an ``INSERT`` through the driver: every create
    makes one, an import one per line (no dict in between)."""
    s = r.schedule
    return (
        r.id,
        r.session,
        r.label,
        r.text,
        s.kind,
        s.to_json(),
        s.tz,
        r.state,
        None if r.next_fire_at is None else to_us(r.next_fire_at),
        r.fired_count,
        r.alarm,
        r.announce,
        r.urgency,
        r.misfire,
        r.catchup_cap,
        r.on_busy,
        r.last_error,
        r.source,
        r.slot,
        r.snoozed,
        None if r.created_at is None else to_us(r.created_at),
        None if r.updated_at is None else to_us(r.updated_at),
        r.version,
        r.quarantine,
    )


def reminders_of_tuples(rows: Iterable[Sequence[Any]]) -> list[Reminder]:
    """:func:`readable_reminders` for plain tuples in ``reminders`` column order, as a
    driver's cursor returns them (:meth:`Dialect.fetch`)."""
    out = []
    for row in rows:
        try:
            out.append(_reminder_of_values(tuple(row)))
        except Exception as exc:
            log.warning("reminder %s cannot be read: %s: %s", row[0], type(exc).__name__, exc)
    return out


def fold_waiting(rows: Iterable[Any], out: Waiting) -> Waiting:
    """Waiting fires by reminder, from rows of (reminder id, wait_for, error, due µs) in
    reminder and due order: the earliest's wait, reason and due time, and how many."""
    for rid, wait_for, error, due in rows:
        if rid in out:
            w, e, d, n = out[rid]
            out[rid] = (w, e, d, n + 1)
        else:
            out[rid] = (wait_for, error, due, 1)
    return out


def attach_waiting(rems: list[Reminder], waiting: Waiting) -> list[Reminder]:
    """The reminders, each live one with the fires that wait for its session."""
    if not waiting:
        return rems
    out = []
    for r in rems:
        w = waiting.get(r.id) if r.state in LIVE_STATES else None
        if w is not None:
            wait_for, reason, due_us, count = w
            delivery = Delivery(WAITING, wait_for_of(wait_for), reason, from_us(due_us), count)
            r = replace(r, delivery=delivery)
        out.append(r)
    return out
