"""`remindkit log` and the events in `remindkit show`; `armed` and its warning
when no engine runs, run in-process against a real SQLite file."""

from __future__ import annotations

import io
import json

import pytest

from remindkit.cli.main import main
from remindkit.clock import SystemClock, to_us
from remindkit.engine.plan import plan_fire
from remindkit.store import Outcome, open_store


@pytest.fixture
def db(tmp_path):
    return f"sqlite:///{tmp_path / 'log.db'}"


@pytest.fixture
def rk(tmp_path, monkeypatch, db):
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.delenv("REMINDKIT_DB", raising=False)
    monkeypatch.delenv("REMINDKIT_SESSION", raising=False)

    def run(*args):
        out, err = io.StringIO(), io.StringIO()
        code = main(["--db", db, *args], stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    return run


def js(rk, *args):
    code, out, err = rk(*args, "--json")
    assert code == 0, (out, err)
    return json.loads(out)


def test_log_lists_every_change_by_the_cli(rk):
    a = js(rk, "remind", "first", "--session", "s1", "--in", "5m", "--label", "x")["id"]
    b = js(rk, "remind", "second", "--session", "s2", "--every", "10m")["id"]
    assert rk("pause", b)[0] == 0
    assert rk("resume", b)[0] == 0
    assert rk("snooze", a, "2m")[0] == 0
    assert rk("rm", a)[0] == 0
    events = js(rk, "log")
    assert [(e["kind"], e["reminder_id"]) for e in events] == [
        ("created", a),
        ("created", b),
        ("paused", b),
        ("resumed", b),
        ("snoozed", a),
        ("cancelled", a),
    ]
    assert {e["surface"] for e in events} == {"cli"}
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    assert [e["kind"] for e in js(rk, "log", a)] == ["created", "snoozed", "cancelled"]
    assert [e["reminder_id"] for e in js(rk, "log", "--session", "s2")] == [b, b, b]
    newest = js(rk, "log", "--limit", "2")
    assert [e["kind"] for e in newest] == ["snoozed", "cancelled"]
    after = js(rk, "log", "--after", str(events[3]["id"]), "--limit", "1")
    assert [e["id"] for e in after] == [events[4]["id"]]
    code, out, _ = rk("log", a)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 3 and "created" in lines[0] and " cli " in lines[0] and a in lines[0]


def test_log_refuses_bad_input_with_codes(rk):
    code, out, err = rk("log", "rem_nothing")
    assert code == 1 and err.startswith("error: not_found:")
    code, out, err = rk("log", "--limit", "0")
    assert code == 1 and err.startswith("error: invalid_argument:") and "1-1000" in err
    code, out, _ = rk("log", "--limit", "5000", "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "invalid_argument"


def test_log_in_a_session_scope_shows_only_its_own(rk, monkeypatch):
    mine = js(rk, "remind", "mine", "--session", "s1", "--in", "5m")["id"]
    theirs = js(rk, "remind", "theirs", "--session", "s2", "--in", "5m")["id"]
    monkeypatch.setenv("REMINDKIT_SESSION", "s1")
    assert [e["reminder_id"] for e in js(rk, "log")] == [mine]
    code, _out, err = rk("log", theirs)
    assert code == 1 and "not_found" in err


def test_show_lists_the_reminders_events_and_log_prints_them_inert(rk, db):
    rid = js(rk, "remind", "fire me", "--session", "s1", "--in", "1s")["id"]
    store = open_store(db)
    try:
        clock = SystemClock()
        import time

        deadline = time.monotonic() + 30
        fires = []
        while not fires and time.monotonic() < deadline:  # claim it once it is due
            now = clock.now()
            fires, _n = store.claims.claim_due(
                now_us=to_us(now),
                horizon_us=to_us(now),
                owner="t",
                lease_us=30_000_000,
                limit=10,
                plan=lambda r, now=now: plan_fire(r, now),
            )
            time.sleep(0.05)
        (f,) = fires
        t = to_us(clock.now())
        # an adapter's error can carry terminal escapes: they must not reach the terminal
        store.outcomes.finish(
            [
                Outcome(
                    f.occurrence_id,
                    f.token,
                    "failed",
                    fired_at_us=t,
                    error="boom\x1b[2J\x07\nfake line",
                )
            ],
            now_us=t,
        )
    finally:
        store.close()
    data = js(rk, "show", rid)
    assert [e["kind"] for e in data["events"]] == ["created", "fired", "failed"]
    assert data["events"][-1]["detail"]["error"] == "boom\x1b[2J\x07\nfake line"
    code, out, _ = rk("show", rid)
    assert code == 0 and "events:" in out
    code, log_out, _ = rk("log", rid)
    for text in (out, log_out):
        assert "\x1b" not in text and "\x07" not in text
        failed = [ln for ln in text.splitlines() if " failed " in ln and "engine" in ln]
        assert len(failed) == 1 and "\\u001b[2J" in failed[0] and "fake line" in failed[0]


def test_remind_without_an_engine_is_not_armed_and_says_how_to_start_one(rk, db):
    code, out, err = rk("remind", "nobody fires me", "--in", "5m", "--json")
    assert code == 0 and json.loads(out)["armed"] is False
    assert (
        "no engine is running" in err
        and "remindkit serve" in err
        and "remindkit service install" in err
    )
    code, out, err = rk("remind", "plain output", "--in", "5m")
    assert code == 0 and err.startswith("warning: ") and "--db " + db in err
    status = js(rk, "status")
    assert status["armed"] is False
    code, out, _ = rk("status")
    assert "armed:    no" in out and "remindkit serve" in out
