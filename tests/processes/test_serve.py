"""Several `remindkit serve` processes on one store; one killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text

from remindkit.clock import SystemClock, to_us
from remindkit.reminders import Reminders
from remindkit.store import open_store

from .conftest import add_ledger_sessions, counts, read_ledger, wait_for

pytestmark = pytest.mark.processes


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("pg_schema_url")


def all_delivered(store, n):
    hist = store.reminders.history(limit=n + 10)
    return hist if len(hist) == n and {o.state for o in hist} == {"delivered"} else None


def make_api(url, settings):
    settings = settings.with_limits(per_session=None, total=None)
    store = open_store(url, settings=settings)
    return store, Reminders(store, clock=SystemClock(), settings=settings)


def burst(api, n, sessions, at):
    """``n`` reminders due together at ``at``; on a machine so busy that making them
    takes past ``at``, the rest are due a second after they are made (the deadline
    counts from the moment each is handed over, never from before)."""
    keys = set()
    for i in range(n):
        when = {"at": at}
        if datetime.fromisoformat(at) - datetime.now(timezone.utc) < timedelta(milliseconds=300):
            when = {"in_": "1s"}
        r = api.create(f"r{i}", session=sessions[i % len(sessions)], **when)
        keys.add(f"{r.id}@{r.to_dict()['next_fire_at']}")
    return keys


def test_three_engines_fire_each_occurrence_once(url, settings, serves, tmp_path):
    ledger = tmp_path / "ledger"
    store, api = make_api(url, settings)
    sessions = [f"s{i}" for i in range(8)]
    add_ledger_sessions(store, sessions, ledger, to_us(api.clock.now()))
    engines = serves(url, 3)
    due = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=3)
    expected = burst(api, 300, sessions, due.isoformat())
    got = wait_for(
        lambda: len(counts(read_ledger(ledger))) >= len(expected) and read_ledger(ledger), 40
    )
    c = counts(got)
    assert set(c) == expected, f"lost: {len(expected - set(c))}"
    assert max(c.values()) == 1, "an occurrence was delivered twice"
    pids = {pid for pid, _k in got}
    assert pids <= {e.pid for e in engines}
    hist = wait_for(lambda: all_delivered(store, 300), 10)
    assert len(hist) == 300 and {o.state for o in hist} == {"delivered"}
    store.close()


def test_sigkill_mid_burst_loses_nothing(url, settings, serves, tmp_path):
    """Deliveries are slow (a command that sleeps); the engine is killed while it
    holds claims and runs turns. Two others, started then, take its claims over
    after the lease and finish the burst."""
    ledger = tmp_path / "ledger"
    store, api = make_api(url, settings)
    sessions = [f"s{i}" for i in range(12)]
    slow = 'sleep 0.05; echo "$PPID $REMINDKIT_OCCURRENCE_KEYS" >> "$RK_LEDGER"'
    from remindkit.models import Session

    for sid in sessions:
        store.sessions.put_session(
            Session(
                sid,
                adapter="command",
                config={"argv": ["sh", "-c", slow], "env": {"RK_LEDGER": str(ledger)}},
            ),
            now_us=to_us(api.clock.now()),
        )
    (victim,) = serves(url, 1)
    due = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=3)
    expected = set()
    for k in range(4):  # a burst in four waves, 0.5 s apart
        at = (due + timedelta(milliseconds=500 * k)).isoformat()
        expected |= burst(api, 100, sessions, at)

    # Kill the victim once it has delivered something and still holds claims.
    def victim_holds_claims() -> bool:
        with store.engine.connect() as conn:
            held = conn.execute(
                text("SELECT count(*) FROM occurrences WHERE state = 'claimed' AND owner LIKE :o"),
                {"o": f"%:{victim.pid}:%"},
            ).scalar()
        return held > 0 and any(pid == victim.pid for pid, _k in read_ledger(ledger))

    assert wait_for(victim_holds_claims, 30, step=0.01), "the victim never held claims mid-burst"
    victim.kill(group=True)  # its commands die with it: the turns they ran are cut short
    killed_at = time.monotonic()
    serves(url, 2)
    got = wait_for(
        lambda: set(counts(read_ledger(ledger))) >= expected and read_ledger(ledger), 60
    ) or read_ledger(ledger)
    c = counts(got)
    lost = expected - set(c)
    assert not lost, f"lost {len(lost)} after SIGKILL: " + "; ".join(
        f"{o.key} {o.state} attempts={o.attempts} {o.error or ''}"
        for o in store.reminders.history(limit=1000)
        if o.key in lost
    )
    # Repeats are possible only for turns the victim had run but not yet recorded
    # (at-least-once): they carry the same key, their first delivery was the
    # victim's, and they come from at most a few of its turns (one per session).
    repeats = {k for k, n in c.items() if n > 1}
    first_by = {}
    for pid, k in got:
        first_by.setdefault(k, pid)
    assert all(first_by[k] == victim.pid for k in repeats)
    victim_turns = [
        line for line in ledger.read_text().splitlines() if line.startswith(f"{victim.pid} ")
    ]
    repeated_turns = [t for t in victim_turns if set(t.split(" ", 1)[1].split(",")) & repeats]
    assert len(repeated_turns) <= len(sessions)
    hist = wait_for(lambda: all_delivered(store, 400), 10) or store.reminders.history(limit=1000)
    assert len(hist) == 400 and {o.state for o in hist} == {"delivered"}
    took_over = [o for o in hist if o.attempts > 1]
    assert took_over, "the survivors should have taken over some of the victim's claims"
    assert time.monotonic() - killed_at < 60
    store.close()


def test_reminder_made_by_another_process_just_before_due(url, settings, serves, tmp_path):
    """The engine sleeps (cap 1 s here, 30 s by default); a reminder created 200 ms
    before its due time by another process still fires on time: the wake-up hint."""
    ledger = tmp_path / "ledger"
    store, api = make_api(url, settings)
    add_ledger_sessions(store, ["s1"], ledger, to_us(api.clock.now()))
    serves(url, 1, env={"REMINDKIT_WAIT_CAP": "30"})
    time.sleep(1.0)  # let it go to sleep
    late = []
    for i in range(5):
        due = datetime.now(timezone.utc) + timedelta(milliseconds=200)
        r = api.create(f"quick {i}", session="s1", at=due.isoformat())
        key = f"{r.id}@{r.to_dict()['next_fire_at']}"
        hit = wait_for(
            lambda key=key: [k for _p, k in read_ledger(ledger) if k == key], 10, step=0.005
        )
        assert hit, "not delivered"
        (occ,) = wait_for(
            lambda r=r: [
                o for o in store.reminders.history(reminder_id=r.id) if o.state == "delivered"
            ],
            5,
        )
        late.append(occ.late_ms)
        time.sleep(0.3)
    assert max(late) < 1000, (
        f"fired late: {late} ms (an engine asleep until its cap would be ~30 s late)"
    )
    store.close()


def test_sigterm_gives_claims_back(url, settings, serves, tmp_path):
    """A clean stop releases claims not yet fired, so another engine fires them on time."""
    ledger = tmp_path / "ledger"
    store, api = make_api(url, settings)
    add_ledger_sessions(store, ["s1"], ledger, to_us(api.clock.now()))
    first, second = serves(url, 2, env={"REMINDKIT_LEASE": "30"})
    due = datetime.now(timezone.utc) + timedelta(seconds=1.5)
    expected = burst(api, 20, ["s1"], due.isoformat())
    time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds() - 0.2))
    first.stop()
    second_got = wait_for(lambda: set(counts(read_ledger(ledger))) >= expected, 10)
    assert second_got, (
        "claims of a stopped engine were not given back (the 30 s lease would delay them)"
    )
    store.close()


def test_sigusr1_prints_every_threads_stack_and_goes_on(url, serves):
    """``kill -USR1`` on a stuck-looking engine shows where each thread is; it keeps running."""
    (engine,) = serves(url, 1)

    def dumped() -> bool:
        # ask again until the dump shows both loops: a signal that lands while the engine
        # is still starting them (a busy machine) shows the threads that exist by then
        os.kill(engine.pid, signal.SIGUSR1)
        text = engine.log.read_text()
        return "_store_loop" in text and "_lease_loop" in text

    assert wait_for(dumped, 30, step=0.5), engine.log.read_text()[-2000:]
    assert engine.proc.poll() is None
    assert engine.stop() == 0


def test_an_engine_killed_with_sigkill_leaves_status_at_once(url, settings, serves, tmp_path):
    """``status`` lists the engines alive: one killed with SIGKILL goes from the list at
    once (its heartbeat would count for two leases: a minute here), as ``armed`` does;
    an engine on another host (a shared PostgreSQL) is listed by its heartbeat alone."""
    store, api = make_api(url, settings)
    (engine,) = serves(url, 1, env={"REMINDKIT_LEASE": "30"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    env.update(REMINDKIT_HOME=str(tmp_path), REMINDKIT_LEASE="30")

    def status() -> dict:
        done = subprocess.run(
            [sys.executable, "-m", "remindkit", "status", "--db", url, "--json"],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    before = status()
    assert [e["pid"] for e in before["engines"]] == [engine.pid] and before["armed"], before
    engine.kill()
    after = status()
    assert after["engines"] == [] and after["armed"] is False, after
    assert api.engines() == [] and not api.armed()
    # an engine of another host: its process cannot be looked at here, its heartbeat counts
    store.coordination.heartbeat(
        engine_id="elsewhere:4242:e1", host="elsewhere", pid=4242, role="engine", priority=0,
        now_us=to_us(api.clock.now()),
    )  # fmt: skip
    assert [e["host"] for e in status()["engines"]] == ["elsewhere"]
    assert [e["id"] for e in api.engines()] == ["elsewhere:4242:e1"] and api.armed()
    store.close()
