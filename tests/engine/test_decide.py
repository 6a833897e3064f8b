"""Every row of the delivery decision tables (``remindkit.engine.decide``)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from remindkit.engine.decide import (
    Action,
    Target,
    TurnOutcome,
    after_fallback,
    after_turn,
    route,
)
from remindkit.models import Fire, Session, SessionState, WaitFor

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)


def fire(
    n: int,
    *,
    on_busy: str = "wait",
    every_s: int | None = None,
    wait_for: str | None = None,
    rid: str | None = None,
    alert: str | None = None,
) -> Fire:
    return Fire(
        occurrence_id=n,
        reminder_id=rid or f"rem_{n}",
        session="s",
        due_at=T0,
        text=f"t{n}",
        on_busy=on_busy,
        every_s=every_s,
        wait_for=wait_for,
        position=n,
        alert=alert,
    )


IDLE = Session("s", adapter="command")
BUSY = Session("s", adapter="command", busy=True)
IN_TURN = Session("s", adapter="command", in_turn=True)
DELETED = Session("s", adapter="command", state=SessionState.DELETED)
NO_ADAPTER = Session("s", adapter=None)  # a session of the person's alone (the web page's)
COMMAND_ELSEWHERE = Session("s", adapter="command")
FAILING = Session("s", adapter="command", failures=3)
FAILING_NO_FALLBACK = Session("s", adapter="command", failures=3, fallback="none")

WAIT, REBASE, SKIP = fire(1), fire(2, on_busy="rebase", every_s=5), fire(3, on_busy="skip")
ONE_SHOT_REBASE = fire(4, on_busy="rebase")  # nothing to re-base by: it just waits
REBASE_WAITING = fire(5, on_busy="rebase", every_s=5, wait_for=WaitFor.REBASE)
ALERTED = fire(7, alert="done")  # its alarm or announcement reached the person
ALERT_FAILED, MUTED = fire(8, alert="failed"), fire(9, alert="muted")


def summary(decisions) -> list[tuple[str, list[int], str | None]]:  # type: ignore[no-untyped-def]
    return [(d.action.value, [f.occurrence_id for f in d.fires], d.wait_for) for d in decisions]


ROUTE_ROWS = [
    ("no session, no alert", [WAIT], Target(None), [("wait", [1], "session")]),
    # a fire for the person alone ends once the person was alerted; one not reached waits
    (
        "no session: alerted ones end",
        [ALERTED, WAIT, ALERT_FAILED, MUTED],
        Target(None),
        [("alerted", [7], None), ("wait", [1, 8, 9], "session")],
    ),
    ("deleted session: fail and pause", [WAIT, REBASE], Target(DELETED), [("fail", [1, 2], None)]),
    ("no adapter at all", [WAIT], Target(NO_ADAPTER, adapter=False), [("wait", [1], "session")]),
    (
        "no adapter at all: alerted ones end",
        [ALERTED, ALERT_FAILED],
        Target(NO_ADAPTER, adapter=False),
        [("alerted", [7], None), ("wait", [8], "session")],
    ),
    (
        "an adapter this process lacks: it waits, alerted or not",
        [ALERTED, WAIT],
        Target(COMMAND_ELSEWHERE, adapter=False),
        [("wait", [7, 1], "session")],
    ),
    (
        "not reachable here (a python session of a process that is gone): it waits",
        [ALERTED],
        Target(IDLE, reachable=False, why_not="not registered in this process"),
        [("wait", [7], "session")],
    ),
    (
        "not reachable from this process",
        [WAIT],
        Target(IDLE, reachable=False, why_not="registered elsewhere"),
        [("wait", [1], "session")],
    ),
    (
        "busy and not reachable here: skip and rebase still apply",
        [WAIT, REBASE, SKIP],
        Target(BUSY, reachable=False, why_not="its hooks take it"),
        [("skip", [3], None), ("wait", [2], "rebase"), ("wait", [1], "session")],
    ),
    # case 1 of the issue: a one-shot due while busy waits (and stays cancellable)
    ("busy elsewhere: wait", [WAIT], Target(BUSY), [("wait", [1], "idle")]),
    ("busy elsewhere: skip", [SKIP], Target(BUSY), [("skip", [3], None)]),
    # case 2: a repeating rebase fire waits to be re-based
    ("busy elsewhere: rebase", [REBASE], Target(BUSY), [("wait", [2], "rebase")]),
    (
        "busy: rebase without a period waits",
        [ONE_SHOT_REBASE],
        Target(IN_TURN),
        [("wait", [4], "idle")],
    ),
    (
        "busy, all policies",
        [WAIT, REBASE, SKIP],
        Target(IN_TURN),
        [("skip", [3], None), ("wait", [2], "rebase"), ("wait", [1], "idle")],
    ),
    (
        "our own turn: queue for the next",
        [WAIT],
        Target(IDLE, our_turn=True),
        [("queue", [1], None)],
    ),
    (
        "our own turn: skip and rebase still apply",
        [SKIP, REBASE],
        Target(IDLE, our_turn=True),
        [("skip", [3], None), ("wait", [2], "rebase")],
    ),
    ("idle: deliver", [WAIT, SKIP], Target(IDLE), [("deliver", [1, 3], None)]),
    (
        "idle: a fire that waited to be re-based is re-based",
        [REBASE_WAITING, WAIT],
        Target(IDLE),
        [("rebase", [5], None), ("deliver", [1], None)],
    ),
    # a fire of the same reminder claimed ahead joins the re-base, never takes the position twice
    (
        "idle: another fire of a reminder being re-based",
        [fire(6, on_busy="rebase", every_s=5, rid="rem_5")],
        Target(IDLE, rebasing={"rem_5"}),
        [("rebase", [6], None)],
    ),
]


@pytest.mark.parametrize(
    ("fires", "target", "expected"), [r[1:] for r in ROUTE_ROWS], ids=[r[0] for r in ROUTE_ROWS]
)
def test_route(fires, target, expected) -> None:  # type: ignore[no-untyped-def]
    assert summary(route(fires, target)) == expected


def test_route_says_why_a_fire_for_the_person_ends_or_waits() -> None:
    alerted, waits = route([ALERTED, ALERT_FAILED], Target(NO_ADAPTER, adapter=False))
    assert (
        alerted.reason == "alerted only: session s has no agent to hand it to (no delivery adapter)"
    )
    assert "no delivery adapter" in (waits.reason or "")
    assert "its alert was failed: the person was not reached" in (waits.reason or "")
    (alone,) = route([ALERTED], Target(None))
    assert alone.reason == "alerted only: no agent session to hand it to"


def test_route_deleted_pauses_and_breaker_goes_first() -> None:
    (d,) = route([WAIT], Target(DELETED))
    assert d.pause and "deleted" in (d.reason or "")
    (d,) = route([WAIT], Target(FAILING))  # case 3: a session failing 3 times in a row
    assert d.action == Action.DELIVER and d.fallback_first
    (d,) = route([WAIT], Target(FAILING, breaker_after=4))
    assert not d.fallback_first
    (d,) = route([WAIT], Target(FAILING_NO_FALLBACK))
    assert not d.fallback_first
    assert route([], Target(IDLE)) == []


AFTER_ROWS = [
    ("delivered", TurnOutcome(ok=True), "delivered", None, False),
    ("session became busy", TurnOutcome(ok=False, busy=True), "wait", "idle", False),
    (
        "unreachable, within the window",
        TurnOutcome(ok=False, retry=True, error="refused"),
        "wait",
        "retry",
        False,
    ),
    (
        "unreachable for too long",
        TurnOutcome(ok=False, retry=True, within_retry=False, error="refused"),
        "fail",
        None,
        True,
    ),
    (
        "failed at once: fallback",
        TurnOutcome(ok=False, instant=True, error="no such session"),
        "fallback",
        None,
        False,
    ),
    # case 3: the fallback is a per-session setting, and the same command again is not one
    (
        "failed at once, fallback none",
        TurnOutcome(ok=False, instant=True, fallback="none"),
        "fail",
        None,
        True,
    ),
    (
        "failed at once, same command",
        TurnOutcome(ok=False, instant=True, fallback_distinct=False),
        "fail",
        None,
        True,
    ),
    (
        "failed at once after the fallback",
        TurnOutcome(ok=False, instant=True, fallback_tried=True),
        "fail",
        None,
        True,
    ),
    ("failed after running", TurnOutcome(ok=False, error="exit 1"), "fail", None, True),
]


@pytest.mark.parametrize(
    ("outcome", "action", "wait_for", "pause"),
    [r[1:] for r in AFTER_ROWS],
    ids=[r[0] for r in AFTER_ROWS],
)
def test_after_turn(outcome, action, wait_for, pause) -> None:  # type: ignore[no-untyped-def]
    d = after_turn(outcome)
    assert (d.action.value, d.wait_for, d.pause) == (action, wait_for, pause)


def test_after_turn_reasons() -> None:
    assert "same command" in (
        after_turn(TurnOutcome(ok=False, instant=True, fallback_distinct=False)).reason or ""
    )
    assert "given up" in (
        after_turn(TurnOutcome(ok=False, retry=True, within_retry=False)).reason or ""
    )


def test_after_fallback() -> None:
    """The fresh session's turn after FALLBACK: delivered, or failed and paused with both
    reasons; none could take it: failed with the first reason."""
    none = after_fallback("s1", "cannot resume", None, None)
    assert (none.action, none.pause) == (Action.FAIL, True)
    assert none.reason == "cannot resume (no fresh session could take it)"
    took = after_fallback("s1", "cannot resume", "s1~ab", TurnOutcome(ok=True))
    assert took.action == Action.DELIVERED
    both = after_fallback("s1", "cannot resume", "s1~ab", TurnOutcome(ok=False, error="down"))
    assert (both.action, both.pause) == (Action.FAIL, True)
    assert both.reason == "session s1: cannot resume; fresh session s1~ab: down"
