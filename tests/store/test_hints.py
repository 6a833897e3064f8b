"""The wake-up hints a write sends, on both stores: one that only added a reminder
says when it first fires; any other says nothing more than "look"."""

from __future__ import annotations

import select
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from remindkit.alerts import NullAlerter
from remindkit.clock import to_us
from remindkit.engine import Engine
from remindkit.reminders import Reminders
from remindkit.store import SqlStore
from remindkit.store.wake import Listener
from remindkit.wakeup import parse_hint


@pytest.fixture
def listener(store: SqlStore) -> Iterator[Listener]:
    got = store.wake.listen()
    assert got is not None, "this store offers no hints"
    yield got
    got.close()


def hints_after(store: SqlStore, listener: Listener, write) -> set[int | None]:  # type: ignore[no-untyped-def]
    """What the hints of ``write`` say (run under an origin of its own, so that a
    hint of an earlier write still on its way is told apart): the first fire of
    what it only added, or None."""
    origin = f"write-{uuid.uuid4().hex[:8]}"
    with store.origin(origin):
        write()
    deadline = time.monotonic() + 10
    got: set[int | None] = set()
    while not got and time.monotonic() < deadline:
        select.select([listener.fileno()], [], [], max(0.0, deadline - time.monotonic()))
        got = {due for o, due in map(parse_hint, listener.drain()) if o == origin}
    return got


def test_adding_a_reminder_hints_its_first_fire(store, clock, settings, listener) -> None:
    api = Reminders(store, clock=clock, settings=settings)
    made = []
    hints = hints_after(
        store, listener, lambda: made.append(api.create("soon", session="s1", in_="90s"))
    )
    assert made[0].next_fire_at is not None
    assert hints == {to_us(made[0].next_fire_at)}


def test_other_writes_hint_only_that_something_changed(store, clock, settings, listener) -> None:
    api = Reminders(store, clock=clock, settings=settings)
    api.create("standup", session="s1", label="standup", in_="1h")
    made = []
    # a new reminder that replaces a live one of the same label also cancels that one
    assert hints_after(
        store,
        listener,
        lambda: made.append(api.create("standup", session="s1", label="standup", in_="2h")),
    ) == {None}
    rid = made[0].id
    assert hints_after(store, listener, lambda: api.pause([rid], session="s1")) == {None}
    assert hints_after(store, listener, lambda: api.resume([rid], session="s1")) == {None}
    assert hints_after(store, listener, lambda: api.cancel([rid], session="s1")) == {None}


def test_an_engine_takes_an_added_reminders_first_fire_from_the_hint(
    store, clock, settings
) -> None:
    """The engine's store thread, told by a hint that another's write only added a
    reminder, does not read the store for when its next fire is due: it takes the
    earlier of the two, and fires the new reminder on time. Any other hint: a read."""
    from remindkit.models import Session

    engine = Engine(store, clock=clock, settings=settings, inline=True, alerter=NullAlerter())
    turns: list[str] = []
    store.sessions.put_session(Session("s1", adapter="python"), now_us=clock.now_us())
    engine.adapters.get("python").register("s1", lambda message, fires: turns.append(message))
    api = Reminders(store, clock=clock, settings=settings)
    waiter = engine._pokes["store"]
    reads: list[int] = []
    real = store.claims.next_due_us

    def counted(**kw):  # type: ignore[no-untyped-def]
        reads.append(1)
        return real(**kw)

    try:
        with waiter.listening(store.wake, ignore=engine.id):
            api.create("far", session="s1", in_="1h")
            assert waiter.wait(10.0) is True  # its hint, out of the way of the next ones
            engine.tick()  # knows its next fire: in an hour
            store.claims.next_due_us = counted
            soon = api.create("soon", session="s1", in_="30s")
            assert waiter.wait(10.0) is True
            assert waiter.added_due_us == to_us(soon.next_fire_at)
            engine._hinted(waiter.added_due_us)
            nxt = engine.tick()
            assert reads == []
            assert nxt <= soon.next_fire_at  # it wakes for the new one, not in an hour
            clock.set(soon.next_fire_at + timedelta(milliseconds=1))
            engine.tick()
            engine.tick()
            assert any("soon" in m for m in turns)
            reads.clear()
            api.cancel([r.id for r in api.list(session="s1")], session="s1")
            assert waiter.wait(10.0) is True and waiter.added_due_us is None
            engine._hinted(waiter.added_due_us)
            engine.tick()
            assert reads, "a hint of any other change reads the store again"
    finally:
        store.claims.next_due_us = real
        engine.shutdown()
