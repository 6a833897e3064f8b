"""remindkit._compat: the quick __init__ of frozen dataclasses, and the pause of the
garbage collector an import runs under."""

from __future__ import annotations

import dataclasses
import gc
import inspect
from datetime import UTC, datetime

import pytest

from remindkit._compat import collector_paused, quick_init
from remindkit.engine import decide
from remindkit.errors import InvalidSchedule
from remindkit.models import Delivery, Fire, Occurrence, Outcome, Plan, Reminder, Session
from remindkit.schedules.spec import Schedule
from remindkit.sessions.base import TurnResult

QUICK = [Reminder, Delivery, Occurrence, Fire, Session, Plan, Outcome, Schedule, TurnResult]
QUICK += [decide.Target, decide.Decision, decide.TurnOutcome, decide.TurnDecision]


@pytest.mark.parametrize("cls", QUICK, ids=lambda c: c.__name__)
def test_the_quick_init_takes_what_the_dataclass_declares(cls):
    """Same parameters in the same order with the same defaults; the generated
    __init__ replaced (no object.__setattr__ per field); still frozen."""
    assert cls.__init__.__code__.co_filename == "<string>"
    params = list(inspect.signature(cls).parameters.values())
    fields = [f for f in dataclasses.fields(cls) if f.init]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields, strict=True):
        if f.default is not dataclasses.MISSING:
            assert p.default is f.default
        elif f.default_factory is dataclasses.MISSING:
            assert p.default is inspect.Parameter.empty


def test_an_instance_equals_field_by_field_and_stays_frozen():
    due = datetime(2026, 12, 1, 9, tzinfo=UTC)
    sched = Schedule("at", "UTC", first_at=due)
    rem = Reminder("rem_1", "s1", "text", sched, label="l", next_fire_at=due)
    expected = {f.name: f.default for f in dataclasses.fields(Reminder)} | {
        "id": "rem_1",
        "session": "s1",
        "text": "text",
        "schedule": sched,
        "label": "l",
        "next_fire_at": due,
    }
    assert {f.name: getattr(rem, f.name) for f in dataclasses.fields(Reminder)} == expected
    assert rem == Reminder("rem_1", "s1", "text", sched, label="l", next_fire_at=due)
    assert dataclasses.replace(rem, text="other").text == "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        rem.text = "changed"  # type: ignore[misc]
    # a default factory gives each instance its own value
    assert decide.TurnDecision(decide.Action.DELIVERED).notes == ()


def test_post_init_still_checks():
    with pytest.raises(InvalidSchedule):
        Schedule("weekly", "UTC")
    with pytest.raises(ValueError):
        Schedule("at", "UTC")  # a one-shot needs first_at


def test_quick_init_refuses_what_it_cannot_copy():
    @dataclasses.dataclass
    class Plain:
        x: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        x: int

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class KwOnly:
        x: int

    for cls in (Plain, Slotted, KwOnly):
        with pytest.raises(TypeError):
            quick_init(cls)


def test_the_collector_is_paused_inside_and_restored_after():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # the host had it off: it stays off
    finally:
        gc.enable()


def test_a_str_enum_member_is_its_string_in_every_spelling():
    """Typed fields read from the store show as they did when they were strings: in a
    tuple, a dataclass's repr, JSON, an f-string."""
    import json

    from remindkit.models import ReminderState

    done = ReminderState.DONE
    assert done == "done" and str(done) == "done" and f"{done}" == "done"
    assert repr(done) == "'done'" and repr(("x", done)) == "('x', 'done')"
    assert json.dumps([done]) == '["done"]' and ReminderState("done") is done
