"""The delivery states that used to live in strings: a waiting fire stays the
user's, re-based callbacks keep their positions, and a session that keeps failing
pauses its reminder instead of being fired at forever (fake clock, real store)."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from datetime import timedelta

from remindkit.agent import ToolContext, handle_tool_call, run_reply_tags
from remindkit.chats import ChatSession
from remindkit.clock import to_us
from remindkit.models import Session
from remindkit.reminders import Reminders

from ..agent.scripted import Script
from .test_delivery import command_engine, engine, outcomes, step


def test_one_shot_due_while_busy_is_listed_and_cancellable(store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    api = Reminders(store, clock=clock, settings=settings)
    eng = engine(store, clock, settings)
    model = Script("ok")
    ChatSession(store, session="s1", model=model, engine=eng, clock=clock, settings=settings)
    store.sessions.set_session_busy("s1", True, now_us=to_us(clock.now()))
    rid = api.create("x", session="s1", in_="1s").id
    other = api.create("y", session="s1", in_="1s").id
    third = api.create("z", session="s1", in_="1s", label="zed").id
    step(eng, clock, 3)
    assert outcomes(store, rid) == [("waiting", None)]
    listed = {r.id: r for r in api.list(session="s1")}
    assert set(listed) == {
        rid,
        other,
        third,
    }  # still the user's: listed (schedule_list shows it too)
    got = listed[rid]
    assert got.state == "active" and got.delivery is not None
    assert (
        got.delivery.state == "waiting"
        and got.delivery.wait_for == "idle"
        and "busy" in got.delivery.reason
    )
    assert got.to_dict()["delivery"]["wait_for"] == "idle"
    tool = handle_tool_call(ToolContext(api, "s1"), "schedule_list", {})
    assert rid in str(tool.data)
    api.cancel([rid])  # rm, the pill's x
    assert handle_tool_call(ToolContext(api, "s1"), "schedule_delete", {"id": other}).ok
    (tag,) = run_reply_tags(api, "s1", 'Done. <cancel-schedule label="zed" />')
    assert tag.ok
    for r in (rid, other, third):
        assert outcomes(store, r) == [("cancelled", None)]
    assert api.get(rid).state == "cancelled"
    store.sessions.set_session_busy("s1", False, now_us=to_us(clock.now()))
    step(eng, clock, 1)
    step(eng, clock, 1)
    assert model.calls == []  # never delivered


def test_rebased_callback_positions_each_once_in_order(store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    """set_callback delay 5 s, repeat 4; the session busy from +6.0 to +14.6 s. The fire due
    at +10 passes during the busy time and fires one full delay after it (+19.6); positions
    1/4, 2/4, 3/4, 4/4 each once, in order (the claim made ahead for +15 is superseded)."""
    settings = replace(settings, lease_s=3600)
    api = Reminders(store, clock=clock, settings=settings)
    eng = engine(store, clock, settings)
    model = Script("ok")
    ChatSession(store, session="s1", model=model, engine=eng, clock=clock, settings=settings)
    start = clock.now()
    handle_tool_call(
        ToolContext(api, "s1"),
        "set_callback",
        {"action": "set", "message": "poll", "delay_seconds": 5, "repeat_count": 4},
    )
    seen: list[tuple[float, str]] = []
    for i in range(1, 200):  # 40 s in steps of 0.2 s, as a running engine would see them
        t = i * 0.2
        if abs(t - 6.0) < 1e-6:
            store.sessions.set_session_busy("s1", True, now_us=to_us(clock.now()))
        if abs(t - 14.6) < 1e-6:
            store.sessions.set_session_busy("s1", False, now_us=to_us(clock.now()))
        before = len(model.calls)
        step(eng, clock, 0.2)
        for call in model.calls[before:]:
            user = next(m["content"] for m in reversed(call) if m["role"] == "user")
            for pos in re.findall(r'repeat="(\d+/\d+)"', user):
                seen.append((round((clock.now() - start).total_seconds(), 1), pos))
    assert [p for _t, p in seen] == ["1/4", "2/4", "3/4", "4/4"], seen
    times = [t for t, _p in seen]
    assert times[0] == 5.0 and abs(times[1] - 19.6) < 0.3 and abs(times[2] - 24.6) < 0.3, seen


FAIL_AGENT = "import sys; sys.stderr.write('cannot resume'); sys.exit(3)"


def test_failing_session_pauses_its_reminder_and_resume_clears_it(store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    api = Reminders(store, clock=clock, settings=settings)
    eng, _failed = command_engine(store, clock, settings)
    argv = [sys.executable, "-c", FAIL_AGENT]
    store.sessions.put_session(
        Session("bad", adapter="command", config={"argv": argv}), now_us=to_us(clock.now())
    )
    rid = api.create("x", session="bad", every="1m", repeat=None).id
    step(eng, clock, 60)
    rem = api.get(rid)
    assert outcomes(store, rid)[0][0] == "failed"
    assert rem.state == "paused" and "cannot resume" in (rem.last_error or "")
    assert "same command" in (rem.last_error or "")  # no fresh_argv: the fallback would repeat it
    assert [s.id for s in store.sessions.list_sessions()] == ["bad"]  # no spurious fresh session
    sess = store.sessions.get_session("bad")
    assert sess.failures == 1 and "cannot resume" in (sess.last_error or "")
    step(eng, clock, 60)
    step(eng, clock, 60)
    assert len(store.reminders.history(reminder_id=rid)) == 1  # paused: not fired at forever
    resumed = api.resume([rid])[0]
    assert resumed.state == "active" and resumed.last_error is None


def test_fallback_none_is_a_session_setting(store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    api = Reminders(store, clock=clock, settings=settings)
    eng, _failed = command_engine(store, clock, settings)
    ok = [sys.executable, "-c", "print('fresh ok')"]
    store.sessions.put_session(
        Session(
            "b",
            adapter="command",
            fallback="none",
            config={"argv": [sys.executable, "-c", FAIL_AGENT], "fresh_argv": ok},
        ),
        now_us=to_us(clock.now()),
    )
    rid = api.create("x", session="b", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid) == [("failed", None)]
    assert "fallback is none" in (api.get(rid).last_error or "")
    assert api.get(rid).state == "failed"


def test_breaker_tries_the_fresh_session_first(store, clock, settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = replace(settings, breaker_after=2)
    api = Reminders(store, clock=clock, settings=settings)
    eng, _failed = command_engine(store, clock, settings)
    mark = tmp_path / "healthy"
    agent = f"import os, sys; sys.stdin.read(); sys.exit(0 if os.path.exists({str(mark)!r}) else 3)"
    primary = [sys.executable, "-c", agent, "primary"]
    fresh = [sys.executable, "-c", agent, "fresh"]
    store.sessions.put_session(
        Session("c", adapter="command", config={"argv": primary, "fresh_argv": fresh}),
        now_us=to_us(clock.now()),
    )
    for _ in range(2):  # both fail: the session's streak grows
        rid = api.create("x", session="c", in_="1m").id
        step(eng, clock, 60)
        assert outcomes(store, rid)[0][0] == "failed"
    assert store.sessions.get_session("c").failures == 2
    mark.write_text("")  # both would work now
    rid = api.create("third", session="c", in_="1m").id
    step(eng, clock, 60)
    [(state, to)] = outcomes(store, rid)
    assert (
        state == "delivered" and to is not None and to.startswith("c~")
    )  # breaker open: fallback first


def test_a_reminder_for_the_person_ends_once_alerted(store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    """A fire with no agent to hand it to (no session and none active, or a session with
    no adapter at all: one opened only in the web page) ends ``alerted`` once its alarm
    reached the person, and its reminder goes on (or is done) as after a delivery. One
    whose alert did not reach the person, or that asked for none, waits and says why;
    one whose session has an adapter that cannot take it here waits as ever."""
    from remindkit.alerts import NullAlerter
    from remindkit.notebook.state import pills

    api = Reminders(store, clock=clock, settings=settings)
    eng = engine(store, clock, settings, alerter=NullAlerter())  # its alarms "play"
    alone = api.create("tea", in_="1m", alarm=True).id  # no session, and none active
    page = api.create("stretch", session="page", every="1m", alarm=True).id  # no adapter
    quiet = api.create("water", session="page", in_="1m").id  # no alarm asked for
    step(eng, clock, 60)
    step(eng, clock, 1)
    for rid in (alone, page):
        (occ,) = store.reminders.history(reminder_id=rid)
        assert occ.state == "alerted" and occ.alert == "done", occ
        assert occ.error and occ.error.startswith("alerted only:"), occ
    assert api.get(alone).state == "done"  # a one-shot ends, as after a delivery
    stretch = api.get(page)
    assert stretch.state == "active" and stretch.delivery is None  # nothing waits
    assert stretch.next_fire_at == clock.now() - timedelta(seconds=1) + timedelta(minutes=1)
    assert outcomes(store, quiet) == [("waiting", None)]
    water = api.get(quiet)
    assert water.delivery is not None and "no delivery adapter" in (water.delivery.reason or "")
    # the pills say why a fire waits; the ended ones wait for nothing
    by_label = {p.label: p for p in pills(api.list(session="page"))}
    assert by_label["water"].waiting and "no delivery adapter" in by_label["water"].waiting
    assert by_label["stretch"].waiting is None
    # counted as active no more
    assert store.reminders.count_reminders(states=["active"]) == 2  # stretch, water
    step(eng, clock, 59)  # the repeating one's next fire ends so too, nothing piles up
    assert [o.state for o in store.reminders.history(reminder_id=page)] == ["alerted"] * 2
    # a session with an adapter this process cannot reach (a python session of a process
    # that is gone) keeps its fires waiting, alerted or not; and, as the most recently
    # active session with an adapter, it takes a fire of no session too
    gone = Session("py", adapter="python")
    store.sessions.put_session(gone, now_us=to_us(clock.now()))
    away = api.create("call", session="py", in_="1m", alarm=True).id
    later = api.create("tea again", in_="1m", alarm=True).id
    step(eng, clock, 60)
    for rid in (away, later):
        (occ,) = store.reminders.history(reminder_id=rid)
        assert occ.state == "waiting" and occ.alert == "done" and occ.session in ("py", None)
        assert "not registered" in (occ.error or "") or "not reachable" in (occ.error or ""), occ


def test_an_engine_with_no_alerter_reaches_no_one(store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    """An engine with no alerter (``serve --no-alerts``) records an alarm ``muted``:
    nobody heard it, so a fire for the person alone waits, and says why."""
    api = Reminders(store, clock=clock, settings=settings)
    eng = engine(store, clock, settings)  # no alerter
    rid = api.create("tea", in_="1m", alarm=True).id
    step(eng, clock, 61)
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "waiting" and occ.alert == "muted", occ
    assert "the person was not reached" in (occ.error or "")
    assert api.get(rid).state == "active"
