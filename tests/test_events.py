"""The engine's in-process events: classes a subscriber picks, made only for someone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from remindkit import events as ev
from remindkit.models import AlertState, Fire

FIRE = Fire(1, "rem_1", "s1", datetime(2026, 1, 5, 9, tzinfo=timezone.utc), "ring")


def test_a_subscriber_gets_the_events_of_its_class_and_the_base_gets_all() -> None:
    events = ev.Events()
    fired: list[ev.Fired] = []
    every: list[ev.EngineEvent] = []
    events.subscribe(ev.Fired, fired.append)
    events.subscribe(ev.EngineEvent, every.append)
    events.emit(ev.Fired, FIRE)
    events.emit(ev.Alerted, FIRE, AlertState.DONE)
    events.emit(ev.Failed, "s1", [FIRE], reason="the agent's turn failed")
    assert fired == [ev.Fired(FIRE)]
    assert every == [
        ev.Fired(FIRE),
        ev.Alerted(FIRE, AlertState.DONE),
        ev.Failed("s1", [FIRE], "the agent's turn failed"),
    ]


def test_no_event_is_made_when_no_one_listens() -> None:
    """A burst of 10,000 fires makes no Fired while nothing subscribed to it."""
    made: list[object] = []

    @dataclass(frozen=True)
    class Counted(ev.Fired):
        def __post_init__(self) -> None:
            made.append(self)

    events = ev.Events()
    events.subscribe(ev.Written, lambda _e: None)
    events.emit(Counted, FIRE)
    assert made == []
    events.subscribe(Counted, lambda _e: None)
    events.emit(Counted, FIRE)
    assert len(made) == 1


def test_unsubscribe_and_a_failing_subscriber_never_reach_the_emitter() -> None:
    events = ev.Events()
    got: list[ev.EngineEvent] = []

    def broken(_e: ev.EngineEvent) -> None:
        raise RuntimeError("a UI bug")

    events.subscribe(ev.Written, broken)
    stop = events.subscribe(ev.Written, got.append)
    events.emit(ev.Written)  # the broken one is logged, the next still called
    stop()
    events.emit(ev.Written)
    assert got == [ev.Written()]
