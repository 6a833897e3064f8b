"""What claiming a due reminder does: pure functions of the reminder and ``now``.

Missed while no engine ran: an overdue one-shot fires once; a
repeating reminder follows its ``misfire`` policy:

* ``latest`` (default): fire the latest missed occurrence once; the record
  says how many earlier ones were missed;
* ``skip``: fire none of them (a ``skipped`` record says how many), unless the
  occurrence is only a little late (within ``grace``);
* ``all``: fire the missed occurrences, at most ``catchup_cap`` of them (the
  latest ones); the rest are recorded as missed.

Missed occurrences do not count against the repeat count; fires do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from datetime import datetime, timedelta

from ..clock import to_us
from ..errors import PlanRefused
from ..models import ACTIVE, DONE, Fire, Plan, PlannedFire, Reminder
from ..schedules import due_between, next_after
from ..schedules.spec import previous_before

GRACE = timedelta(seconds=60)
COUNT_STEPS = (
    400  # missed occurrences counted one by one at most (beyond: "at least"), inside the claim
)


def guarded_plan(rem: Reminder, now: datetime, *, catchup_max: int) -> Plan:
    """:func:`plan_fire`, within the engine's own bounds whoever wrote the row: a
    catch-up cap above ``catchup_max``, an interval under a second, or a plan of
    more than ``catchup_max`` fires is refused (and the row quarantined)."""
    s = rem.schedule
    if rem.catchup_cap > catchup_max or rem.catchup_cap < 1:
        raise PlanRefused(
            f"catch-up cap {rem.catchup_cap} is outside 1-{catchup_max} (REMINDKIT_CATCHUP_MAX)"
        )
    if s.kind == "every" and (not isinstance(s.every_s, int) or s.every_s < 1):
        raise PlanRefused(f"interval {s.every_s!r} is not a positive number of seconds")
    plan = plan_fire(rem, now)
    if len(plan.fires) > catchup_max:
        raise PlanRefused(f"{len(plan.fires)} fires at once is past the catch-up cap {catchup_max}")
    return plan


def plan_fire(
    rem: Reminder, now: datetime, *, catchup_cap: int | None = None, grace: timedelta = GRACE
) -> Plan:
    assert rem.next_fire_at is not None, "only reminders with a next fire are claimed"
    s = rem.schedule
    due = rem.next_fire_at
    fired = rem.fired_count

    if rem.snoozed:
        # A snoozed fire is an extra one; the series (if any) continues after it.
        position = max(1, fired)
        nxt = _next_series(rem, max(due, now), fired)
        state = ACTIVE if nxt is not None else DONE
        return Plan(
            (PlannedFire(to_us(due), 0, position),), (), _us(nxt), state, fired, snoozed=False
        )

    if not s.repeating:
        return Plan((PlannedFire(to_us(due), 0, 1),), (), None, DONE, fired + 1)

    if due > now:
        dues, missed_before = [due], 0
    else:
        latest, count, _exact = due_between(s, due, now, cap=COUNT_STEPS)
        if rem.misfire == "skip" and now - latest > grace:
            skipped = (PlannedFire(to_us(latest), count, 0),)
            nxt = _next_series(rem, latest, fired)
            return Plan((), skipped, _us(nxt), ACTIVE if nxt is not None else DONE, fired)
        if rem.misfire == "all" and count > 1:
            cap = max(1, catchup_cap if catchup_cap is not None else rem.catchup_cap)
            dues = _last_n(rem, due, latest, min(cap, count))
            missed_before = count - len(dues)
        else:  # "latest", or "skip" whose latest occurrence is only a little late
            dues, missed_before = [latest], count - 1

    remaining = None if s.repeat is None else max(0, s.repeat - fired)
    if remaining is not None:
        dues = dues[-remaining:] if remaining else []
    fires = tuple(
        PlannedFire(to_us(d), missed_before if i == 0 else 0, fired + i + 1)
        for i, d in enumerate(dues)
    )
    fired_count = fired + len(fires)
    last = dues[-1] if dues else due
    nxt = _next_series(rem, last, fired_count)
    return Plan(fires, (), _us(nxt), ACTIVE if nxt is not None else DONE, fired_count)


def rebase_positions(fires: Iterable[Fire]) -> dict[str, int]:
    """Each re-based reminder's position to fire next: that of its earliest fire
    that came due while its session was busy."""
    first: dict[str, int] = {}
    for f in fires:
        first[f.reminder_id] = min(first.get(f.reminder_id, f.position), f.position)
    return first


def rebased(rem: Reminder, now: datetime, position: int) -> Reminder | None:
    """The re-base of ``rem`` at ``now`` (policy rebase, its session idle again):
    its next fire is one full period from now (the anchor moves with it) at
    ``position``, the place of the fire that came due while its session was busy
    (recorded skipped, not fired). None: ``rem`` is left as it is (not active or
    done, or no period to re-base by)."""
    if rem.state not in (ACTIVE, DONE) or not rem.schedule.every_s:
        return None
    nxt = now + timedelta(seconds=rem.schedule.every_s)
    fired = max(0, position - 1)
    sched = replace(rem.schedule, first_at=nxt)
    if sched.until is not None and nxt > sched.until:
        return replace(rem, state=DONE, next_fire_at=None, fired_count=fired)
    if sched.repeat is not None and fired >= sched.repeat:
        return replace(rem, state=DONE, next_fire_at=None, fired_count=fired)
    return replace(
        rem, schedule=sched, state=ACTIVE, next_fire_at=nxt, snoozed=False, fired_count=fired
    )


def _next_series(rem: Reminder, after: datetime, fired_count: int) -> datetime | None:
    s = rem.schedule
    if not s.repeating:
        return None
    if s.repeat is not None and fired_count >= s.repeat:
        return None
    return next_after(s, after)


def _last_n(rem: Reminder, first: datetime, latest: datetime, n: int) -> list[datetime]:
    """The last ``n`` occurrences in [first, latest], oldest first."""
    s = rem.schedule
    if s.kind == "every" and not s.calendar_days and s.every_s:
        step = timedelta(seconds=s.every_s)
        out = [latest - i * step for i in range(n)]
        return sorted(d for d in out if d >= first)
    out = [latest]  # walk back from the latest: at most n steps, whatever the outage
    while len(out) < n:
        prev = previous_before(s, first, out[-1])
        if prev is None:
            break
        out.append(prev)
    return out[::-1]


def _us(dt: datetime | None) -> int | None:
    return None if dt is None else to_us(dt)


__all__ = ["PlanRefused", "guarded_plan", "plan_fire", "rebase_positions", "rebased"]
