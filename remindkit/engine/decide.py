"""Delivery decisions: a pure function of the due fires, their session's state and
the reminders' policies, like :func:`remindkit.engine.plan.plan_fire` for claiming.

The dispatcher (``engine/delivery.py``) gathers what it knows into a
:class:`Target`, asks :func:`route` what to do with a group of fires for one
session, carries the decisions out, runs the turn, and asks :func:`after_turn`
what the turn's result means. Nothing here reads the clock, the store or an
adapter, so the table in ``tests/engine/test_decide.py`` covers every row.

Routing (before a turn):

====================================  =========================================
the session                            decision per fire
====================================  =========================================
none (no session id, none active),     the person was alerted (its alert is
or one with no adapter at all (a       ``done``): ALERTED, the fire ends; else
session opened only in a web page)     WAIT for a session
deleted                                FAIL the fire, PAUSE its reminder
an adapter this process lacks, or      WAIT for a session (another engine may);
not reachable here                     when busy, skip and rebase still apply
busy, not by us (external or a turn    policy skip: SKIP; rebase (repeating):
elsewhere)                             WAIT to be re-based; wait: WAIT for idle
busy with our own turn                 skip: SKIP; rebase (repeating): WAIT to
                                       be re-based; wait: QUEUE for the next turn
idle                                   a fire waiting to be re-based (or of a
                                       reminder that has one): REBASE; the rest:
                                       DELIVER in one turn (fallback first when
                                       the session's breaker is open)
====================================  =========================================

After a turn (:func:`after_turn`, once per turn): busy → WAIT for idle; unreachable
and within the retry window → WAIT to retry; delivered → DELIVERED; failed at once
with a fallback that is really another session → FALLBACK (once: the fresh
session's turn is decided by :func:`after_fallback`: DELIVERED, or FAIL with both
reasons); otherwise FAIL and PAUSE (a repeating reminder is paused, a one-shot ends
``failed``; both keep ``last_error``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._compat import StrEnum, quick_init
from ..models import (
    AlertState,
    BusyPolicy,
    FallbackPolicy,
    Fire,
    Session,
    SessionState,
    WaitFor,
)


class Action(StrEnum):
    DELIVER = "deliver"  # run a turn with these fires now
    QUEUE = "queue"  # our own turn runs there: they go in the next one, right after it
    WAIT = "wait"  # record them waiting (``wait_for`` says for what)
    SKIP = "skip"  # record them skipped (policy skip)
    REBASE = "rebase"  # push the reminder one period past now; the fire is skipped (re-based)
    FAIL = "fail"  # record the fire failed; with ``pause`` also pause its reminder (``last_error``)
    FALLBACK = "fallback"  # re-send once into a fresh session
    DELIVERED = "delivered"  # the turn took them
    ALERTED = "alerted"  # for the person alone: alerted, and no agent to hand them to (they end)


@quick_init
@dataclass(frozen=True)
class Target:
    """What the dispatcher knows of the session a group of fires goes to."""

    session: Session | None
    adapter: bool = True  # this process has the session's adapter
    reachable: bool = True  # ... and can run a turn there now
    why_not: str | None = None  # why not, when not
    our_turn: bool = False  # a turn of ours runs there now
    rebasing: Collection[str] = ()  # reminders that have a fire waiting to be re-based
    breaker_after: int = 3  # failed turns in a row after which the fallback goes first


@quick_init
@dataclass(frozen=True)
class Decision:
    action: Action
    fires: tuple[Fire, ...]
    reason: str | None = None
    wait_for: WaitFor | None = None
    pause: bool = False  # with FAIL: also pause (or end, for a one-shot) the reminder
    fallback_first: bool = False  # with DELIVER: the session's breaker is open


def route(fires: Sequence[Fire], target: Target) -> list[Decision]:
    """Decide what happens to ``fires`` (one session's group) now."""
    sess = target.session
    if not fires:
        return []
    group = tuple(fires)
    if sess is None:
        return _for_person(
            group,
            "no agent session to hand it to",
            "no session to deliver to yet: it goes to the next session that is active",
        )
    if sess.state == SessionState.DELETED:
        return [Decision(Action.FAIL, group, f"session {sess.id} was deleted", pause=True)]
    if sess.adapter is None:  # a session of the person's alone (the web page's): no agent
        return _for_person(
            group,
            f"session {sess.id} has no agent to hand it to (no delivery adapter)",
            f"session {sess.id} has no delivery adapter: its fires wait until it has a way "
            f"in (remindkit session add {sess.id} --command ...)",
        )
    if not target.adapter:
        why = target.why_not or f"no {sess.adapter} adapter in this process"
        return [Decision(Action.WAIT, group, why, WaitFor.SESSION)]
    out: list[Decision] = []
    busy = target.our_turn or sess.busy or sess.in_turn
    if not target.reachable and not busy:
        why = target.why_not or f"session {sess.id} is not reachable from this process"
        return [Decision(Action.WAIT, group, why, WaitFor.SESSION)]
    if busy:  # the busy policies hold whoever takes the fire later (an MCP host's hooks)
        skip = tuple(f for f in group if f.on_busy == BusyPolicy.SKIP)
        rebase = tuple(f for f in group if _rebases(f))
        rest = tuple(f for f in group if f not in skip and f not in rebase)
        if skip:
            out.append(
                Decision(
                    Action.SKIP, skip, f"session {sess.id} was busy at the due time (policy: skip)"
                )
            )
        if rebase:
            out.append(
                Decision(
                    Action.WAIT,
                    rebase,
                    f"session {sess.id} was busy at the due time; re-based one "
                    "period after its turn ends",
                    WaitFor.REBASE,
                )
            )
        if rest and not target.reachable:
            why = target.why_not or f"session {sess.id} is not reachable from this process"
            out.append(Decision(Action.WAIT, rest, why, WaitFor.SESSION))
        elif rest:
            if target.our_turn:
                out.append(
                    Decision(Action.QUEUE, rest, f"session {sess.id} is in a turn; next turn")
                )
            else:
                out.append(
                    Decision(
                        Action.WAIT,
                        rest,
                        f"session {sess.id} is busy; waiting for it to be idle",
                        WaitFor.IDLE,
                    )
                )
        return out
    rebasing = set(target.rebasing) | {f.reminder_id for f in group if f.wait_for == WaitFor.REBASE}
    rebase = tuple(
        f
        for f in group
        if f.reminder_id in rebasing and f.every_s and f.on_busy == BusyPolicy.REBASE
    )
    deliver = tuple(f for f in group if f not in rebase)
    if rebase:
        out.append(
            Decision(
                Action.REBASE,
                rebase,
                "re-based: the session was busy when it came due (policy: "
                "rebase); it fires again one period after the turn ended",
            )
        )
    if deliver:
        first = sess.fallback == FallbackPolicy.FRESH and sess.failures >= target.breaker_after
        out.append(Decision(Action.DELIVER, deliver, fallback_first=first))
    return out


@quick_init
@dataclass(frozen=True)
class TurnOutcome:
    """What a turn reported (``sessions.base.TurnResult``), with what delivery knows."""

    ok: bool
    error: str | None = None
    instant: bool = False  # failed at once (the session could not be resumed)
    busy: bool = False  # not run: the session started a turn of its own
    retry: bool = False  # the agent could not be reached
    within_retry: bool = True  # the fires are still inside the retry window
    fallback_tried: bool = (
        False  # this was already the fallback's turn (or the fallback went first)
    )
    fallback: str = FallbackPolicy.FRESH  # the session's FallbackPolicy
    fallback_distinct: bool = (
        True  # a fresh session would really differ (not the same command again)
    )
    retry_hours: int = 1

    @classmethod
    def of(cls, result: Any, **known: Any) -> TurnOutcome:
        """From an adapter's ``TurnResult`` and what delivery knows besides."""
        return cls(
            ok=result.ok,
            error=result.error,
            instant=result.instant,
            busy=result.busy,
            retry=result.retry,
            **known,
        )


@quick_init
@dataclass(frozen=True)
class TurnDecision:
    action: Action
    reason: str | None = None
    wait_for: WaitFor | None = None
    pause: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)


def after_turn(t: TurnOutcome) -> TurnDecision:
    """Decide what a finished turn means for its fires."""
    if t.busy:  # the adapter's reason when it gives one (an MCP host that takes it later)
        return TurnDecision(
            Action.WAIT,
            t.error or "the session started a turn; waiting for it to be idle",
            WaitFor.IDLE,
        )
    if t.ok:
        return TurnDecision(Action.DELIVERED)
    if t.retry and t.within_retry:
        return TurnDecision(
            Action.WAIT, f"{t.error or 'agent unreachable'}; waiting to retry", WaitFor.RETRY
        )
    why = t.error or "turn failed"
    if t.retry:
        return TurnDecision(
            Action.FAIL,
            f"{why} (given up: tried for {t.retry_hours} h after the due time)",
            pause=True,
        )
    if t.instant and not t.fallback_tried:
        if t.fallback != FallbackPolicy.FRESH:
            return TurnDecision(
                Action.FAIL, f"{why} (no fallback: the session's fallback is none)", pause=True
            )
        if not t.fallback_distinct:
            return TurnDecision(
                Action.FAIL,
                f"{why} (no fallback: a fresh session would run the same command)",
                pause=True,
            )
        return TurnDecision(Action.FALLBACK, why)
    return TurnDecision(Action.FAIL, why, pause=True)


def after_fallback(
    session: str, error: str | None, fresh: str | None, second: TurnOutcome | None
) -> TurnDecision:
    """Decide what the re-send into a fresh session (``after_turn``'s FALLBACK) means
    for the fires: ``error``, why the turn in ``session`` failed; ``fresh``, the fresh
    session (None: none could take it); ``second``, its turn. Delivered when it took
    them; else FAIL and PAUSE with both reasons."""
    if fresh is None or second is None:
        return TurnDecision(Action.FAIL, f"{error} (no fresh session could take it)", pause=True)
    if second.ok:
        return TurnDecision(Action.DELIVERED)
    return TurnDecision(
        Action.FAIL,
        f"session {session}: {error}; fresh session {fresh}: {second.error}",
        pause=True,
    )


def _for_person(group: tuple[Fire, ...], alone: str, waits: str) -> list[Decision]:
    """Fires with no agent to hand them to: one whose alert reached the person (an alarm
    or announcement that played: ``done``) ends so, ALERTED; the others (no alert asked
    for, or it failed or was muted) WAIT for a session, as before."""
    alerted = tuple(f for f in group if f.alert == AlertState.DONE)
    rest = tuple(f for f in group if f.alert != AlertState.DONE)
    out: list[Decision] = []
    if alerted:
        out.append(Decision(Action.ALERTED, alerted, f"alerted only: {alone}"))
    if rest:
        why = waits
        failed = {f.alert for f in rest if f.alert in (AlertState.FAILED, AlertState.MUTED)}
        if failed:
            why += f" (its alert was {' or '.join(sorted(failed))}: the person was not reached)"
        out.append(Decision(Action.WAIT, rest, why, WaitFor.SESSION))
    return out


def _rebases(f: Fire) -> bool:
    """Policy rebase on a kind that has a period to re-base by (else it just waits)."""
    return f.on_busy == BusyPolicy.REBASE and bool(f.every_s)
