"""Delivery to sessions, driven by Engine.tick with a fake clock: idle only,
several fires in one turn, busy policies (wait, skip, re-base), the
fresh-session fallback, python sessions that register late, and two engines
sharing a store."""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

import httpx
import pytest

from remindkit import events as ev
from remindkit.agent.external import ExternalTurns
from remindkit.chats import ChatSession
from remindkit.clock import FakeClock, to_us
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.protocol.display import fired_keys
from remindkit.reminders import Reminders
from remindkit.sessions.command import CommandSession
from remindkit.sessions.openai import OpenAISessions
from remindkit.sessions.python import PythonSessions
from remindkit.sessions.registry import Adapters
from remindkit.settings import Settings
from remindkit.store import SqlStore

from ..agent.scripted import Script


def engine(store: SqlStore, clock: FakeClock, settings: Settings, **kw) -> Engine:  # type: ignore[no-untyped-def]
    return Engine(store, clock=clock, settings=settings, inline=True, **kw)


def step(eng: Engine, clock: FakeClock, seconds: float = 0) -> None:
    clock.advance(seconds)
    eng.tick(clock.now())
    eng.notice_change()
    eng.tick(clock.now())  # deliver what waited, now that outcomes are written


def outcomes(store: SqlStore, rid: str) -> list[tuple[str, str | None]]:
    return [(o.state, o.delivered_to) for o in reversed(store.reminders.history(reminder_id=rid))]


@pytest.fixture
def api(store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(store, clock=clock, settings=settings)


def test_busy_session_holds_the_fire_until_the_turn_ends(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    settings = replace(
        settings, lease_s=3600
    )  # the fake clock jumps; real leases are renewed as time passes
    eng = engine(store, clock, settings)
    model = Script("Noted, it is time.")
    chat = ChatSession(store, session="s1", model=model, engine=eng, clock=clock, settings=settings)
    rid = api.create("check the oven", session="s1", in_="1m").id
    model.gate = threading.Event()
    turn = threading.Thread(target=chat.send, args=("a long question",))
    turn.start()
    assert model.entered.wait(5)
    step(eng, clock, 61)
    assert outcomes(store, rid) == [("waiting", None)]  # alerted on time, held back
    assert len(model.calls) == 1
    model.gate.set()
    turn.join(5)
    step(eng, clock, 1)
    assert outcomes(store, rid) == [("delivered", "s1")]
    assert "check the oven" in model.last_user() and "<schedule-fired" in model.last_user()
    occ = store.reminders.history(reminder_id=rid)[0]
    assert occ.fired_at == occ.due_at + timedelta(
        seconds=1
    )  # fired (alerted) at the tick during the turn
    assert occ.delivered_at == occ.due_at + timedelta(seconds=2)  # delivered when the turn was over


def test_externally_busy_then_several_in_one_turn(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng = engine(store, clock, settings)
    model = Script("ok")
    ChatSession(store, session="s1", model=model, engine=eng, clock=clock, settings=settings)
    store.sessions.set_session_busy("s1", True, now_us=to_us(clock.now()))
    second = api.create("second", session="s1", in_="2m").id
    first = api.create("first", session="s1", in_="1m").id
    skipped = api.create("skip me", session="s1", in_="90s", on_busy="skip").id
    step(eng, clock, 60)
    step(eng, clock, 60)
    assert outcomes(store, first) == [("waiting", None)] and outcomes(store, second) == [
        ("waiting", None)
    ]
    assert outcomes(store, skipped) == [("skipped", None)]
    assert model.calls == []
    store.sessions.set_session_busy("s1", False, now_us=to_us(clock.now()))
    step(eng, clock, 1)
    assert len(model.calls) == 1
    msg = model.last_user()
    assert msg.count("<schedule-fired ") == 2 and msg.index('"first"') < msg.index('"second"')
    assert outcomes(store, first) == [("delivered", "s1")]


def test_a_backlog_comes_as_its_latest_fire(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    """A repeating reminder that came due five times while its session was busy (policy
    wait) comes as one block, its latest fire, with missed="4"; the four earlier fires
    are recorded skipped (superseded), never delivered. Another repeating reminder
    likewise; a one-shot as ever: one block each, ordered by due time."""
    eng = engine(store, clock, settings)
    model = Script("ok")
    ChatSession(store, session="s1", model=model, engine=eng, clock=clock, settings=settings)
    store.sessions.set_session_busy("s1", True, now_us=to_us(clock.now()))
    poll = api.create("poll the build", session="s1", every="1m").id
    once = api.create("the one-shot", session="s1", in_="150s").id
    slow = api.create("the slow one", session="s1", every="2m", repeat=10).id
    for _ in range(5):
        step(eng, clock, 60)
    assert model.calls == []
    store.sessions.set_session_busy("s1", False, now_us=to_us(clock.now()))
    step(eng, clock, 1)
    assert len(model.calls) == 1
    msg = model.last_user()
    assert msg.count("<schedule-fired ") == 3, msg
    blocks = re.findall(r"<schedule-fired ([^>]*)>", msg)
    assert [re.search(r'id="([^"]+)"', b).group(1) for b in blocks] == [once, slow, poll]  # type: ignore[union-attr]
    assert 'repeat="5/forever"' in blocks[2] and 'missed="4"' in blocks[2], blocks
    assert 'repeat="2/10"' in blocks[1] and 'missed="1"' in blocks[1], blocks
    assert "missed=" not in blocks[0]
    hist = list(reversed(store.reminders.history(reminder_id=poll)))
    assert [o.state for o in hist] == ["skipped"] * 4 + ["delivered"]
    assert all(o.error and o.error.startswith("superseded") for o in hist[:4]), hist
    assert hist[-1].missed == 4 and hist[-1].position == 5
    assert outcomes(store, once) == [("delivered", "s1")]
    step(eng, clock, 60)  # the next fires are their own, and nothing of the backlog comes again
    assert len(model.calls) == 2
    again = re.findall(r"<schedule-fired ([^>]*)>", model.last_user())
    assert len(again) == 2 and not any("missed=" in b for b in again), again
    assert sorted(re.search(r'repeat="([^"]+)"', b).group(1) for b in again) == [  # type: ignore[union-attr]
        "3/10",
        "6/forever",
    ]
    assert [o.state for o in store.reminders.history(reminder_id=poll)][:2] == [
        "delivered",
        "delivered",
    ]


def test_a_backlog_behind_our_own_turn_comes_as_its_latest_fire(store, settings) -> None:  # type: ignore[no-untyped-def]
    """Fires due while this engine's own fired turn runs go in the next turn: a
    reminder's backlog there as its latest fire too (a running engine, real time)."""
    from remindkit.clock import SystemClock

    settings = settings.with_limits(min_period_s=1)
    clock = SystemClock()
    api = Reminders(store, clock=clock, settings=settings)
    store.sessions.put_session(Session("s1", adapter="python"), now_us=to_us(clock.now()))
    eng = Engine(store, clock=clock, settings=settings)
    gate = threading.Event()
    turns: list[str] = []

    def handler(message: str, _fires: object) -> str:
        turns.append(message)
        if len(turns) == 1:
            assert gate.wait(30)
        return "ok"

    eng.adapters.get("python").register("s1", handler)
    eng.start()
    try:
        rid = api.create("poll", session="s1", every=1, repeat=30).id

        def fired() -> int:
            return sum(o.fired_at is not None for o in store.reminders.history(reminder_id=rid))

        assert wait_until(lambda: fired() >= 5, 30)  # 1 in the turn, 4 or more behind it
        gate.set()
        assert wait_until(lambda: len(turns) >= 2, 30)
        second = turns[1]
        assert second.count("<schedule-fired ") == 1, second
        missed = int(re.search(r'missed="(\d+)"', second).group(1))  # type: ignore[union-attr]
        assert missed >= 3
        hist = store.reminders.history(reminder_id=rid, limit=100)
        assert wait_until(
            lambda: (
                sum(
                    (o.error or "").startswith("superseded")
                    for o in store.reminders.history(reminder_id=rid, limit=100)
                )
                == missed
            ),
            10,
        ), hist
    finally:
        eng.stop()
        eng.close()


def wait_until(predicate: Callable[[], object], timeout: float) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def test_rebase_pushes_one_full_delay_after_the_turn(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    settings = replace(settings, lease_s=3600)
    from remindkit.agent import ToolContext, handle_tool_call

    eng = engine(store, clock, settings)
    model = Script("tick")
    chat = ChatSession(store, session="s1", model=model, engine=eng, clock=clock, settings=settings)
    start = clock.now()
    handle_tool_call(
        ToolContext(api, "s1"),
        "set_callback",
        {"action": "set", "message": "poll the build", "delay_seconds": 30, "repeat_count": 3},
    )
    step(eng, clock, 30)
    assert len(model.calls) == 1  # fired at t=30 while idle
    model.gate = threading.Event()
    model.entered.clear()  # set by the fired turn: wait for the new turn to hold the session
    turn = threading.Thread(target=chat.send, args=("long work",))
    clock.advance(20)
    turn.start()
    assert model.entered.wait(5)
    step(eng, clock, 15)  # t=65: due at 60 passed during the turn
    model.gate.set()
    turn.join(5)
    clock.advance(5)  # the turn ended at t=70
    step(eng, clock)
    (rem,) = api.list(session="s1")
    assert rem.next_fire_at == start + timedelta(seconds=100)  # one full delay after the turn
    assert rem.fired_count == 1 and rem.remaining == 2  # the re-based fire did not count
    assert [o.state for o in reversed(store.reminders.history(reminder_id=rem.id))] == [
        "delivered",
        "skipped",
    ]
    calls = len(model.calls)
    step(eng, clock, 29)
    assert len(model.calls) == calls
    step(eng, clock, 1)
    assert len(model.calls) == calls + 1
    assert "poll the build" in model.last_user()


def sh(script: str) -> list[str]:
    return [sys.executable, "-c", script]


OK_AGENT = (
    "import sys; data = sys.stdin.read(); print('fresh agent got', data.count('<schedule-fired'))"
)
FAIL_AGENT = "import sys; sys.stderr.write('cannot resume this session'); sys.exit(3)"


def command_engine(store, clock, settings) -> tuple[Engine, list]:  # type: ignore[no-untyped-def]
    turns = ExternalTurns(Reminders(store, clock=clock, settings=settings))
    eng = engine(
        store, clock, settings, adapters=Adapters(CommandSession(turns=turns), PythonSessions())
    )
    failed: list = []
    eng.events.subscribe(ev.Failed, lambda e: failed.append((e.session, e.reason)))
    return eng, failed


def test_command_message_is_framed_once(store, clock, settings, api, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A command session's fired message is framed once, by delivery: the turn
    recorder (ExternalTurns) hands over and keeps that same text."""
    import remindkit.agent.external as external
    import remindkit.engine.turns as turns

    framed: list[str] = []
    real = turns.frame_fired

    def counted(fires):  # type: ignore[no-untyped-def]
        framed.append(",".join(f.key for f in fires))
        return real(fires)

    monkeypatch.setattr(turns, "frame_fired", counted)
    monkeypatch.setattr(external, "frame_fired", counted)
    eng, failed = command_engine(store, clock, settings)
    store.sessions.put_session(
        Session("s1", adapter="command", config={"argv": sh(OK_AGENT)}), now_us=to_us(clock.now())
    )
    rid = api.create("follow up", session="s1", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid) == [("delivered", "s1")] and failed == []
    assert len(framed) == 1, framed
    kept = [m.content for m in store.transcripts.messages("s1") if m.role == "user"]
    assert len(kept) == 1 and "<schedule-fired" in (kept[0] or "")


def test_delivery_writes_carry_the_engine_origin(store, clock, settings, api, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Delivery's own writes (the turn claim's release, the fresh session, outcomes) give
    wake-up hints with the engine's origin, which the engine ignores: it does not read
    the store again after its own turns."""
    eng, _failed = command_engine(store, clock, settings)
    eng.adapters = Adapters(CommandSession(), PythonSessions())  # no transcript of its own
    eng.dispatcher.adapters = eng.adapters
    store.sessions.put_session(
        Session(
            "old", adapter="command", config={"argv": sh(FAIL_AGENT), "fresh_argv": sh(OK_AGENT)}
        ),
        now_us=to_us(clock.now()),
    )
    rid = api.create("follow up", session="old", in_="1m").id
    origins: list[str] = []
    real = store.db.wake.notify

    def record(origin: str = "", added_due_us: int | None = None) -> None:
        origins.append(origin)
        real(origin, added_due_us=added_due_us)

    monkeypatch.setattr(store.db.wake, "notify", record)
    clock.advance(60)
    eng.tick(clock.now())
    eng.tick(clock.now())
    [(state, to)] = outcomes(store, rid)
    assert state == "delivered" and to is not None and to.startswith("old~")
    assert origins and set(origins) == {eng.id}, origins


def test_fresh_session_fallback(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, failed = command_engine(store, clock, settings)
    store.sessions.put_session(
        Session(
            "old", adapter="command", config={"argv": sh(FAIL_AGENT), "fresh_argv": sh(OK_AGENT)}
        ),
        now_us=to_us(clock.now()),
    )
    rid = api.create("follow up", session="old", in_="1m").id
    step(eng, clock, 60)
    [(state, to)] = outcomes(store, rid)
    assert state == "delivered" and to is not None and to.startswith("old~")
    fresh = store.sessions.get_session(to)
    assert (
        fresh.parent_id == "old"
        and fresh.adapter == "command"
        and fresh.config["fallback_for"] == "old"
    )
    assert [m.role for m in store.transcripts.messages(to)] == ["user", "assistant"]
    assert store.transcripts.messages(to)[1].content.strip() == "fresh agent got 1"
    assert failed == []
    rid2 = api.create("again", session="old", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid2) == [("delivered", to)]  # the same fallback session again


def test_one_decision_per_turn(store, clock, settings, api, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A turn that fails at once and goes to its fresh session is decided once
    (``after_turn``), its fallback once (``after_fallback``): the first decision's
    reason is not written into the result for a second one to read."""
    from remindkit.engine import decide

    calls: list[str] = []
    real_turn, real_fallback = decide.after_turn, decide.after_fallback

    def counted_turn(t):  # type: ignore[no-untyped-def]
        calls.append(f"turn:{t.error}")
        return real_turn(t)

    def counted_fallback(*a):  # type: ignore[no-untyped-def]
        calls.append("fallback")
        return real_fallback(*a)

    monkeypatch.setattr(decide, "after_turn", counted_turn)
    monkeypatch.setattr(decide, "after_fallback", counted_fallback)
    eng, _failed = command_engine(store, clock, settings)
    store.sessions.put_session(
        Session(
            "old", adapter="command", config={"argv": sh(FAIL_AGENT), "fresh_argv": sh(OK_AGENT)}
        ),
        now_us=to_us(clock.now()),
    )
    rid = api.create("follow up", session="old", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid)[0][0] == "delivered"
    assert calls == ["turn:exit status 3: cannot resume this session", "fallback"], calls


FAIL_FRESH = "import sys; sys.stderr.write('no fresh sessions today'); sys.exit(4)"


def test_both_fail_is_recorded_and_told(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, failed = command_engine(store, clock, settings)
    store.sessions.put_session(
        Session(
            "old", adapter="command", config={"argv": sh(FAIL_AGENT), "fresh_argv": sh(FAIL_FRESH)}
        ),
        now_us=to_us(clock.now()),
    )
    rid = api.create("follow up", session="old", in_="1m").id
    step(eng, clock, 60)
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "failed"
    assert "session old: exit status 3: cannot resume this session" in occ.error
    assert "fresh session old~" in occ.error and "no fresh sessions today" in occ.error
    assert failed and failed[0][0] == "old"
    rem = api.get(rid)  # a one-shot whose final fire failed ends failed, and says why
    assert rem.state == "failed" and "cannot resume this session" in (rem.last_error or "")


def test_error_result_is_a_failed_turn(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, failed = command_engine(store, clock, settings)
    err = 'print(\'{"type": "result", "is_error": true, "result": "No conversation found"}\')'
    store.sessions.put_session(
        Session("s", adapter="command", config={"argv": sh(err)}), now_us=to_us(clock.now())
    )
    rid = api.create("x", session="s", in_="1m").id
    step(eng, clock, 60)
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "failed" and "No conversation found" in occ.error


def test_command_reply_tags_are_carried_out_and_feedback_returns(
    store, clock, settings, api
) -> None:  # type: ignore[no-untyped-def]
    eng, _ = command_engine(store, clock, settings)
    agent = (
        "import sys; d = sys.stdin.read(); "
        'print(\'<schedule label="next" delay="2m">again</schedule><schedule label="bad">x</schedule>\' '
        "if 'feedback' not in d else 'saw feedback')"
    )
    store.sessions.put_session(
        Session("c", adapter="command", config={"argv": sh(agent)}), now_us=to_us(clock.now())
    )
    api.create("first", session="c", in_="1m")
    step(eng, clock, 60)
    nxt = [r for r in api.list(session="c") if r.label == "next"]
    assert nxt and nxt[0].source == "tag"
    step(eng, clock, 120)
    last = store.transcripts.messages("c")[-1]
    assert last.role == "assistant" and last.content.strip() == "saw feedback"
    handed = [m for m in store.transcripts.messages("c") if m.kind == "fired"]
    assert len(handed) == 2


def test_command_turn_cut_short_hands_its_keys_over_again(
    store, clock, settings, api, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """Keys are taken when the command has answered: an engine that dies while the
    command runs leaves them untaken, so the turn that takes over hands them again
    (at-least-once, same keys); a repeat after a finished turn is dropped."""
    from remindkit.models import Fire

    log = tmp_path / "handed"
    agent = f"import os; open({str(log)!r}, 'a').write(os.environ['REMINDKIT_OCCURRENCE_KEYS'] + '\\n'); print('ok')"
    store.sessions.put_session(
        Session("c", adapter="command", config={"argv": sh(agent)}), now_us=to_us(clock.now())
    )
    due = clock.now() + timedelta(minutes=1)
    fires = [Fire(i, f"rem_{i}", "c", due, f"text {i}") for i in (1, 2)]
    dying = ExternalTurns(Reminders(store, clock=clock, settings=settings))
    assert (
        dying.begin("c", fires) is not None
    )  # the engine is killed here, before the command answers
    assert store.transcripts.taken_keys("c", [f.key for f in fires]) == set()
    again = CommandSession(turns=ExternalTurns(Reminders(store, clock=clock, settings=settings)))
    first = again.run_turn(store.sessions.get_session("c", now_us=to_us(clock.now())), "", fires)
    assert first.ok and not first.duplicate
    assert log.read_text().split() == [",".join(f.key for f in fires)]
    repeat = again.run_turn(store.sessions.get_session("c", now_us=to_us(clock.now())), "", fires)
    assert repeat.ok and repeat.duplicate  # its acknowledgement was lost: not handed a second time
    assert len(log.read_text().split()) == 1
    handed = [m for m in store.transcripts.messages("c") if m.kind == "fired"]
    assert len(handed) == 1 and all(f.key in fired_keys(handed[0].content or "") for f in fires)
    assert store.transcripts.messages("c")[-1].role == "assistant"


def test_python_session_registered_later(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng = engine(store, clock, settings)
    store.sessions.put_session(Session("nb", adapter="python"), now_us=to_us(clock.now()))
    rid = api.create("x", session="nb", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid) == [("waiting", None)]
    got = []
    eng.adapters.get("python").register(
        "nb", lambda message, fires: got.append(message) or "thanks"
    )
    eng.notice_change()
    step(eng, clock, 1)
    assert outcomes(store, rid) == [("delivered", "nb")] and len(got) == 1
    assert store.transcripts.messages("nb")[-1].content == "thanks"


def test_no_session_goes_to_the_most_recent(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng = engine(store, clock, settings)
    model = Script("ok")
    ChatSession(store, session="recent", model=model, engine=eng, clock=clock, settings=settings)
    rid = api.create("legacy", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid) == [("delivered", "recent")]


def test_deleted_session_pauses_its_reminders(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    rid = api.create("x", session="gone", in_="1m").id
    store.sessions.delete_session("gone", now_us=to_us(clock.now()))
    rem = api.get(rid)
    assert rem.state == "paused" and rem.last_error == "session gone was deleted"


def openai_transport(calls: list) -> httpx.MockTransport:  # type: ignore[type-arg]
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "on it"}}]}
        )

    return httpx.MockTransport(handler)


def test_two_engines_share_the_store_and_run_each_turn_once(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    calls: list = []
    engines = [
        engine(
            store,
            clock,
            settings,
            adapters=Adapters(
                OpenAISessions(
                    Reminders(store, clock=clock, settings=settings),
                    transport=openai_transport(calls),
                )
            ),
        )
        for _ in range(2)
    ]
    store.sessions.put_session(
        Session("o", adapter="openai", config={"base_url": "http://model.test/v1", "model": "m"}),
        now_us=to_us(clock.now()),
    )
    ids = [api.create(f"r{i}", session="o", in_=f"{60 + i}s").id for i in range(5)]
    for _ in range(3):
        clock.advance(2)
        for eng in engines:
            step(eng, clock, 30)
    keys = []
    for body in calls:
        user = [m["content"] for m in body["messages"] if m["role"] == "user"]
        keys += [
            line
            for text in user[-1:]
            for line in text.split('"')
            if "@" in line and line.startswith("rem_")
        ]
    assert sorted(set(keys)) == sorted(keys)  # no occurrence key handed over twice
    assert all(outcomes(store, r)[0][0] == "delivered" for r in ids)
    fired = [m for m in store.transcripts.messages("o") if m.kind == "fired"]
    assert sum(m.content.count("<schedule-fired ") for m in fired) == 5


def openai_engine(store, clock, settings, handler) -> tuple[Engine, list]:  # type: ignore[no-untyped-def]
    """An engine with the openai adapter on ``handler``, the session "o" on it, and
    the reasons of the failures it reports."""
    eng = engine(
        store,
        clock,
        settings,
        adapters=Adapters(
            OpenAISessions(
                Reminders(store, clock=clock, settings=settings),
                transport=httpx.MockTransport(handler),
            )
        ),
    )
    failed: list = []
    eng.events.subscribe(ev.Failed, lambda e: failed.append(e.reason))
    store.sessions.put_session(
        Session("o", adapter="openai", config={"base_url": "http://model.test/v1", "model": "m"}),
        now_us=to_us(clock.now()),
    )
    return eng, failed


def test_model_server_down_then_up_waits_and_retries_with_back_off(
    store, clock, settings, api
) -> None:  # type: ignore[no-untyped-def]
    """A model server that cannot be reached fails nothing: the fire waits, the
    endpoint is left alone during its back-off, and the turn runs once it is up."""
    calls: list = []
    up = {"now": False}

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        if not up["now"]:
            raise httpx.ConnectError("Connection refused", request=request)
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "back, on it"}}]}
        )

    eng, failed = openai_engine(store, clock, settings, handler)
    rid = api.create("stretch", session="o", in_="1m").id
    step(eng, clock, 60)
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "waiting" and "model_unreachable" in occ.error and len(calls) == 1
    second = api.create("water", session="o", in_="1s").id
    step(eng, clock, 1)  # within the 2 s back-off: not called again, and a new fire waits too
    assert len(calls) == 1 and store.reminders.history(reminder_id=rid)[0].state == "waiting"
    assert "unreachable; trying again in 1s" in store.reminders.history(reminder_id=second)[0].error
    step(eng, clock, 1.5)  # tried again, still down: the back-off doubles to 4 s
    assert len(calls) == 2
    step(eng, clock, 3)
    assert len(calls) == 2
    up["now"] = True
    step(eng, clock, 1.5)
    assert (
        outcomes(store, rid) == outcomes(store, second) == [("delivered", "o")]
        and len(calls) == 3
        and not failed
    )
    fired = [m.content for m in store.transcripts.messages("o") if m.kind == "fired"]
    assert sum(text.count("<schedule-fired ") for text in fired) == 2  # each key handed over once
    assert store.transcripts.messages("o")[-1].role == "assistant"


def test_model_server_down_for_an_hour_is_recorded_failed(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    settings = replace(settings, lease_s=7200)
    eng, failed = openai_engine(store, clock, settings, handler)
    rid = api.create("stretch", session="o", in_="1m").id
    step(eng, clock, 60)
    for _ in range(40):  # back-offs of up to 2 min, for a little over an hour
        step(eng, clock, 100)
        if failed:
            break
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "failed" and "given up" in occ.error and "model_unreachable" in occ.error
    assert len(failed) == 1


def test_openai_session_unresumable_goes_to_a_fresh_one(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    """A 400 for the old conversation (say, it outgrew the context) sends the
    delivery into a fresh openai session with the same endpoint."""
    calls: list = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        calls.append(body)
        if any(m["role"] == "assistant" for m in body["messages"]):
            return httpx.Response(400, json={"error": {"message": "context length exceeded"}})
        return httpx.Response(
            200, json={"choices": [{"message": {"role": "assistant", "content": "fresh start"}}]}
        )

    adapter = OpenAISessions(
        Reminders(store, clock=clock, settings=settings), transport=httpx.MockTransport(handler)
    )
    eng = engine(store, clock, settings, adapters=Adapters(adapter))
    store.sessions.put_session(
        Session(
            "long", adapter="openai", config={"base_url": "http://model.test/v1", "model": "m"}
        ),
        now_us=to_us(clock.now()),
    )
    from remindkit.models import Message

    store.transcripts.append_messages(
        "long",
        [Message("long", "user", "hi"), Message("long", "assistant", "hello")],
        now_us=to_us(clock.now()),
    )
    rid = api.create("x", session="long", in_="1m").id
    step(eng, clock, 60)
    [(state, to)] = outcomes(store, rid)
    assert state == "delivered" and to.startswith("long~") and len(calls) == 2
    assert store.sessions.get_session(to).config["model"] == "m"
    assert [m.role for m in store.transcripts.messages(to)] == ["user", "assistant"]


class _SeesItselfMidTurn:
    """A shared adapter during whose first turn the store thread claims the next
    occurrence (fires one look-ahead apart) and so caches the session mid-turn."""

    name = "probe"
    shared = True

    def __init__(self) -> None:
        self.during_turn: Callable[[], object] | None = None
        self.turns: list[list[str]] = []

    def can_deliver(self, session: Session) -> bool:
        return True

    def run_turn(self, session, message, fires):  # type: ignore[no-untyped-def]
        hook, self.during_turn = self.during_turn, None
        if hook is not None:
            hook()
        self.turns.append([f.key for f in fires])
        from remindkit.sessions.base import TurnResult

        return TurnResult(True)


def test_own_finished_turn_seen_in_the_cache_does_not_hold_the_next_fire(
    store, clock, settings
) -> None:  # type: ignore[no-untyped-def]
    """The fire thread routes from a cache of sessions; a copy loaded while our own
    turn ran says the session is in a turn. The fire that meets it waits, and is
    re-checked against the store at the next outcome write, not after the cache
    expires or the next housekeeping round (seconds later)."""
    settings = settings.with_limits(min_period_s=1)
    probe = _SeesItselfMidTurn()
    eng = engine(store, clock, settings, adapters=Adapters(probe))
    store.sessions.put_session(Session("p", adapter="probe"), now_us=to_us(clock.now()))
    Reminders(store, clock=clock, settings=settings).create(
        "tick", session="p", in_="2s", every="1s"
    )
    clock.advance(1)
    eng.store_step(to_us(clock.now()))  # claims the first one
    clock.advance(1)
    t = to_us(clock.now())
    probe.during_turn = lambda: eng.store_step(
        t
    )  # the store thread claims the second one meanwhile
    eng.fire_step(t)
    eng.store_step(t, flush_only=True)
    assert len(probe.turns) == 1
    clock.advance(1)
    t = to_us(clock.now())
    eng.fire_step(t)  # the fire thread goes first: the store thread holds off around a fire
    eng.store_step(t)
    clock.advance(0.1)
    eng.store_step(to_us(clock.now()))
    eng.store_step(to_us(clock.now()), flush_only=True)
    assert len(probe.turns) == 2, [(o.state, o.error) for o in store.reminders.history()]
