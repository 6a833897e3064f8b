"""The engine driven step by step with a fake clock (no sleeps, inline delivery)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import timedelta

import pytest

from remindkit import events as ev
from remindkit.alerts import NullAlerter
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.settings import Limits


class Recorder:
    def __init__(self):
        self.turns = []

    def __call__(self, message, fires):
        self.turns.append((message, [f.key for f in fires]))
        return "ok"


@pytest.fixture
def api(store, clock, settings):
    return Reminders(store, clock=clock, settings=settings)


@pytest.fixture
def engine(store, clock, settings):
    e = Engine(store, clock=clock, settings=settings, inline=True, alerter=NullAlerter())
    yield e
    e.shutdown()


@pytest.fixture
def agent(store, clock, engine):
    rec = Recorder()
    store.sessions.put_session(Session("s1", adapter="python"), now_us=clock.now_us())
    engine.adapters.get("python").register("s1", rec)
    return rec


def run_until(engine, clock, until):
    """Tick at every wake the engine asks for, up to ``until``."""
    engine.tick(clock.now())
    while True:
        nxt = engine.tick(clock.now())
        if nxt > until:
            clock.set(until)
            engine.tick(until)
            return
        clock.set(max(nxt, clock.now()))


def test_fires_on_time_and_delivers(api, engine, agent, clock):
    r = api.create("Check the deploy", session="s1", label="deploy", in_="5m")
    claim_at = r.next_fire_at - timedelta(
        seconds=engine.settings.lookahead_s
    )  # claim just ahead of due
    wake = engine.tick(clock.now())
    while wake < claim_at:  # housekeeping wakes every lease/3 in between
        clock.set(wake)
        wake = engine.tick(clock.now())
    assert wake == claim_at
    clock.set(wake)
    wake = engine.tick(clock.now())
    assert wake == r.next_fire_at and agent.turns == []
    clock.set(wake)
    engine.tick(clock.now())
    ((msg, keys),) = agent.turns
    assert keys == [f"{r.id}@2026-01-05T09:05:00Z"]
    assert 'label="deploy"' in msg and 'late_ms="0"' in msg and '"Check the deploy"' in msg
    (occ,) = api.history()
    assert occ.state == "delivered" and occ.late_ms == 0 and occ.delivered_to == "s1"


def test_repeat_count(api, engine, agent, clock):
    r = api.create("Poll", session="s1", every="2m", repeat=3)
    run_until(engine, clock, clock.now() + timedelta(minutes=20))
    assert len(agent.turns) == 3
    assert api.get(r.id).state == "done"
    assert [o.position for o in reversed(api.history())] == [1, 2, 3]


def test_busy_session_waits_then_one_turn_in_due_order(api, engine, agent, store, clock):
    a = api.create("first", session="s1", in_="1m")
    b = api.create("second", session="s1", in_="2m")
    store.sessions.set_session_busy("s1", True, now_us=clock.now_us())
    run_until(engine, clock, clock.now() + timedelta(minutes=3))
    assert agent.turns == []
    assert {o.state for o in api.history()} == {"waiting"}
    assert all(o.fired_at is not None for o in api.history())  # fired (alerted) on time
    store.sessions.set_session_busy("s1", False, now_us=clock.now_us())
    engine.notice_change()
    engine.tick(clock.now())
    ((msg, keys),) = agent.turns
    assert keys == [f"{a.id}@2026-01-05T09:01:00Z", f"{b.id}@2026-01-05T09:02:00Z"]
    assert msg.index("first") < msg.index("second")
    assert {o.state for o in api.history()} == {"delivered"}


def test_busy_skip_policy_is_recorded(api, engine, agent, store, clock):
    api.create("rep", session="s1", every="1m", on_busy="skip")
    store.sessions.set_session_busy("s1", True, now_us=clock.now_us())
    run_until(engine, clock, clock.now() + timedelta(minutes=2, seconds=1))
    hist = api.history()
    assert [o.state for o in hist] == ["skipped", "skipped"]
    assert "busy" in hist[0].error
    assert agent.turns == []


def test_no_session_goes_to_the_most_recent(api, engine, store, clock):
    rec_old, rec_new = Recorder(), Recorder()
    py = engine.adapters.get("python")
    store.sessions.put_session(Session("old", adapter="python"), now_us=clock.now_us())
    clock.advance(1)
    store.sessions.put_session(Session("new", adapter="python"), now_us=clock.now_us())
    py.register("old", rec_old)
    py.register("new", rec_new)
    api.create("legacy", in_="1m")
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    assert len(rec_new.turns) == 1 and rec_old.turns == []
    (occ,) = api.history()
    assert occ.delivered_to == "new"


def test_unregistered_python_session_waits_until_it_registers(api, engine, store, clock):
    store.sessions.put_session(Session("nb", adapter="python"), now_us=clock.now_us())
    api.create("later", session="nb", in_="1m")
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    (occ,) = api.history()
    assert occ.state == "waiting" and "not reachable" in occ.error
    rec = Recorder()
    engine.adapters.get("python").register("nb", rec)
    engine.notice_change()
    engine.tick(clock.now())
    assert len(rec.turns) == 1
    assert api.history()[0].state == "delivered"


def test_deleted_session_records_failure(api, engine, store, clock, agent):
    api.create("x", session="s1", in_="1m")
    engine.tick(clock.now())
    store.sessions.delete_session("s1", now_us=clock.now_us())
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    # The reminder was paused by the deletion, so nothing fired and nothing is lost.
    assert api.history() == []
    assert api.list()[0].state == "paused"


def test_command_session(api, engine, store, clock, tmp_path):
    out = tmp_path / "got.json"
    script = (
        "import json,os,sys; json.dump({'stdin': sys.stdin.read(), 'session': os.environ['REMINDKIT_SESSION'],"
        f"'keys': os.environ['REMINDKIT_OCCURRENCE_KEYS'], 'arg': sys.argv[1]}}, open({str(out)!r}, 'w'))"
    )
    store.sessions.put_session(
        Session(
            "cmd", adapter="command", config={"argv": [sys.executable, "-c", script, "{session}"]}
        ),
        now_us=clock.now_us(),
    )
    r = api.create("run the command", session="cmd", in_="1m")
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    got = json.loads(out.read_text())
    assert got["session"] == "cmd" and got["arg"] == "cmd"
    assert got["keys"] == f"{r.id}@2026-01-05T09:01:00Z"
    assert "<schedule-fired" in got["stdin"] and '"run the command"' in got["stdin"]
    assert api.history()[0].state == "delivered"


def test_failing_command_is_recorded(api, engine, store, clock):
    store.sessions.put_session(
        Session(
            "bad",
            adapter="command",
            config={"argv": [sys.executable, "-c", "import sys; sys.exit(3)"]},
        ),
        now_us=clock.now_us(),
    )
    api.create("x", session="bad", in_="1m")
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    (occ,) = api.history()
    assert occ.state == "failed" and "exit status 3" in occ.error


def test_downtime_catch_up(api, engine, agent, clock):
    one = api.create("one-shot", session="s1", in_="1m")
    rep = api.create("rep", session="s1", every="1h")
    skip = api.create("skipper", session="s1", every="1h", misfire="skip")
    clock.advance(timedelta(days=3, minutes=30))  # no engine ran
    engine.tick(clock.now())
    keys = [k for _m, ks in agent.turns for k in ks]
    assert f"{one.id}@2026-01-05T09:01:00Z" in keys
    rep_occ = [o for o in api.history() if o.reminder_id == rep.id]
    assert len(rep_occ) == 1 and rep_occ[0].missed == 71 and rep_occ[0].state == "delivered"
    skip_occ = [o for o in api.history() if o.reminder_id == skip.id]
    assert [o.state for o in skip_occ] == ["skipped"] and skip_occ[0].missed == 72


def test_global_pause(api, engine, agent, clock):
    api.create("x", session="s1", in_="1m")
    api.pause_all()
    run_until(engine, clock, clock.now() + timedelta(minutes=5))
    assert agent.turns == []
    api.resume_all()
    engine.notice_change()
    engine.tick(clock.now())
    assert len(agent.turns) == 1  # the missed one-shot fires once on resume


def test_takeover_after_lease(api, store, clock, settings, agent, engine):
    """Engine A claims ahead and dies; B delivers once A's lease ends."""
    a = Engine(store, clock=clock, settings=settings, inline=True, engine_id="A")
    r = api.create("x", session="s1", in_="1m")
    clock.set(r.next_fire_at - timedelta(seconds=0.1))
    a.tick(clock.now())  # A claims (look-ahead) ... and is never heard from again
    assert agent.turns == []
    clock.set(r.next_fire_at + timedelta(seconds=10))
    engine.tick(clock.now())
    assert agent.turns == []  # still A's lease
    clock.set(r.next_fire_at + timedelta(seconds=settings.lease_s + 1))
    engine.tick(clock.now())
    engine.tick(clock.now())
    assert len(agent.turns) == 1
    (occ,) = api.history()
    assert occ.state == "delivered" and occ.attempts == 2


def test_event_order_fired_alerted_delivered(api, engine, agent, clock):
    seen = []
    engine.events.subscribe(ev.EngineEvent, lambda e: seen.append(type(e)))
    api.create("x", session="s1", in_="1m", alarm=True, announce="Hello")
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    assert [k for k in seen if k != ev.Written] == [ev.Fired, ev.Alerted, ev.Delivered]
    assert seen[-1] == ev.Written  # the outcome is in the store after the delivery
    assert len(engine.dispatcher.alerter.played) == 1
    assert api.history()[0].alert == "done"
    # the audit trail (and the API's event stream) carries the agent's reply
    delivered = [e for e in api.store.events.recent_events() if str(e.kind) == "delivered"]
    assert [e.detail.get("reply") for e in delivered] == ["ok"]


def test_claims_it_lost_track_of_are_taken_back(api, engine, agent, clock, monkeypatch):
    """A hand-over that fails unexpectedly leaves claims nobody holds; the engine's
    own leases keep being renewed, so no other engine would take them over. They
    are adopted again after two housekeeping rounds and delivered."""
    r = api.create("x", session="s1", in_="1m")
    calls = {"n": 0}
    real = engine.dispatcher.submit

    def flaky(fires, t):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return real(fires, t)

    monkeypatch.setattr(engine.dispatcher, "submit", flaky)
    run_until(engine, clock, r.next_fire_at + timedelta(seconds=1))
    assert agent.turns == []
    run_until(engine, clock, clock.now() + timedelta(seconds=engine.settings.lease_s))
    assert len(agent.turns) == 1
    (occ,) = api.history()
    assert occ.state == "delivered" and occ.attempts == 2


def test_fires_routed_chunk_by_chunk_are_not_taken_back_as_orphans(engine, store, clock, settings):
    """Many fires due at once are routed chunk by chunk. While the first chunk's turns
    run, the store thread's housekeeping looks for claims nothing holds twice in a row:
    the chunks still waiting their turn are in hand, not orphans, so none is taken back
    and fired a second time."""
    api = Reminders(store, clock=clock, settings=replace(settings, limits=Limits(total=None)))
    sessions = [f"s{i}" for i in range(30)]
    delivered: list[str] = []
    looked = []

    def turn(message, fires):
        delivered.extend(f.key for f in fires)
        if not looked:  # the first turn: housekeeping twice, as the store thread may
            for _ in range(2):
                engine._adopt_orphans(clock.now_us())
            looked.append(len(engine._pending))
        return "ok"

    for sid in sessions:
        store.sessions.put_session(Session(sid, adapter="python"), now_us=clock.now_us())
        engine.adapters.get("python").register(sid, turn)
        for i in range(15):
            api.create(f"{sid} {i}", session=sid, in_="1m")
    run_until(engine, clock, clock.now() + timedelta(minutes=2))
    assert looked == [0], "claims in hand were taken back and queued again"
    assert len(delivered) == 450 and len(set(delivered)) == 450


def test_written_is_emitted_once_fires_and_outcomes_are_in_the_store(
    api, engine, agent, store, clock
):
    """The API server's event stream reads the store when the engine says it wrote."""
    seen = []
    engine.events.subscribe(
        ev.Written,
        lambda _e: seen.append([(o.state, o.fired_at is not None) for o in api.history()]),
    )
    r = api.create("x", session="s1", in_="1m")
    run_until(engine, clock, r.next_fire_at + timedelta(seconds=1))
    assert agent.turns and seen  # written after the fire ...
    assert seen[-1] == [("delivered", True)]  # ... and what it says is in the store when it says so


def test_a_claim_that_finds_every_due_row_taken_waits_before_the_next(store, clock, engine, api):
    """When a claim takes nothing although the store says a reminder is due (on
    PostgreSQL: another engine's claim holds those rows), the next claim waits
    CONTENDED_RETRY rather than coming at once, round after round."""
    import remindkit.engine.core as core

    api.create("due soon", session="s1", in_="10s")
    calls = []
    real = store.claims.claim_due

    def taken_elsewhere(**kw):
        calls.append(clock.now_us())
        return [], 0

    store.claims.claim_due = taken_elsewhere
    try:
        clock.advance(timedelta(seconds=10))
        engine.tick()
        engine.tick()
        assert len(calls) == 1
        clock.advance(timedelta(seconds=core.CONTENDED_RETRY))
        engine.tick()
        assert len(calls) == 2
    finally:
        store.claims.claim_due = real
    engine.tick()  # the rows come free: the next claim after the pause takes them
    clock.advance(timedelta(seconds=core.CONTENDED_RETRY))
    engine.tick()
    assert store.claims.next_due_us()[0] is None
