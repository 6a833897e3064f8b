"""Claude Code's hooks over the store (remindkit.mcp.hooks), driven with a fake clock:
a fire due during a turn comes back when it ends (Stop: decision block), one due while
the conversation sits idle with the next prompt (UserPromptSubmit: additionalContext),
a channel event in the prompt is the host taking it; nothing is recorded delivered
before it is printed, a key is handed in once, re-based fires are left to the engine,
and a busy store makes the hook wait, not lose anything."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

from remindkit.agent.external import ExternalTurns
from remindkit.clock import FakeClock, to_us
from remindkit.engine import Engine
from remindkit.mcp.hooks import Hooks, channel_keys
from remindkit.mcp.server import channel_meta
from remindkit.models import Session
from remindkit.protocol import frame_fired
from remindkit.reminders import Reminders
from remindkit.sessions.mcp import HOOKS_WAY, McpSessions
from remindkit.sessions.registry import Adapters
from remindkit.settings import Settings
from remindkit.store import SqlStore

SID = "5f0c6a3e-1b2d-4c8e-9a7f-0123456789ab"


@pytest.fixture
def api(store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(store, clock=clock, settings=settings)


def connected(store: SqlStore, clock: FakeClock, settings: Settings) -> tuple[Engine, McpSessions]:
    """An engine whose mcp adapter has the session's server connected, with hooks and no
    channel (an API-key Claude Code user)."""
    mcp = McpSessions(
        store, clock=clock, turns=ExternalTurns(Reminders(store, clock=clock, settings=settings))
    )
    eng = Engine(store, clock=clock, settings=settings, inline=True, adapters=Adapters(mcp))
    store.sessions.put_session(
        Session(SID, adapter="mcp", config={"hooks": True, "host": "claude-code"}),
        now_us=to_us(clock.now()),
    )
    mcp.attach(SID, None, hooks=True)
    return eng, mcp


def fire(eng: Engine, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    eng.tick(clock.now())
    eng.notice_change()
    eng.tick(clock.now())


def history(store: SqlStore, rid: str) -> list[tuple[str, str | None]]:
    return [(o.state, o.error) for o in store.reminders.history(reminder_id=rid)]


def hooks(store: SqlStore, clock: FakeClock) -> Hooks:
    return Hooks(Reminders(store, clock=clock), owner="hook:test")


def test_fire_due_during_a_turn_comes_back_when_it_ends(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, _ = connected(store, clock, settings)
    h = hooks(store, clock)
    prompt = h.answer("prompt", {"session_id": SID, "prompt": "remind me in a minute"})
    assert prompt.out == "" and store.sessions.get_session(SID).busy
    rid = api.create("check the deploy", session=SID, in_="1m").id
    fire(eng, clock, 60)
    [(state, why)] = history(store, rid)
    assert state == "waiting" and why == HOOKS_WAY
    stop = h.answer("stop", {"session_id": SID, "stop_hook_active": False})
    block = json.loads(stop.out)
    assert block["decision"] == "block" and "check the deploy" in block["reason"]
    assert f'<schedule-fired id="{rid}"' in block["reason"]
    assert history(store, rid)[0][0] == "claimed"  # held by the hook, not yet recorded
    h.settle(stop.taken, printed=True)
    assert history(store, rid) == [("delivered", None)]
    assert store.sessions.get_session(SID).busy  # the conversation goes on with it
    again = h.answer("stop", {"session_id": SID, "stop_hook_active": True})
    assert again.out == "" and not store.sessions.get_session(SID).busy


def test_fire_due_while_idle_comes_with_the_next_prompt(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, mcp = connected(store, clock, settings)
    rid = api.create("stretch", session=SID, in_="1m", label="s").id
    fire(eng, clock, 60)
    [(state, why)] = history(store, rid)
    assert state == "waiting" and why == HOOKS_WAY
    h = hooks(store, clock)
    got = h.answer("prompt", {"session_id": SID, "prompt": "what next?"})
    context = json.loads(got.out)["hookSpecificOutput"]
    assert context["hookEventName"] == "UserPromptSubmit"
    assert '<schedule-fired id="' in context["additionalContext"]
    assert "stretch" in context["additionalContext"]
    h.settle(got.taken, printed=True)
    assert history(store, rid) == [("delivered", None)]
    # the key is taken: the same occurrence is never handed in again
    assert store.transcripts.taken_keys(SID, [got.taken.fires[0].key])
    assert h.answer("prompt", {"session_id": SID, "prompt": "and?"}).out == ""


def test_not_printed_goes_back_to_wait(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, _ = connected(store, clock, settings)
    rid = api.create("x", session=SID, in_="1m").id
    fire(eng, clock, 60)
    h = hooks(store, clock)
    got = h.answer("prompt", {"session_id": SID, "prompt": "hi"})
    assert got.out
    h.settle(got.taken, printed=False)
    assert history(store, rid)[0][0] == "waiting"
    again = h.answer("stop", {"session_id": SID})
    assert json.loads(again.out)["decision"] == "block"


def test_channel_event_in_the_prompt_is_the_host_taking_it(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    """With channels, the push starts a turn whose prompt is the channel event: its
    UserPromptSubmit hook records those fires delivered and hands in only the others."""
    eng, mcp = connected(store, clock, settings)
    pushed: list = []
    mcp.attach(SID, lambda message, fires: pushed.extend(fires), hooks=True)
    rid = api.create("pushed one", session=SID, in_="1m").id
    fire(eng, clock, 60)
    assert [f.reminder_id for f in pushed] == [rid]
    [(state, why)] = history(store, rid)
    assert state == "waiting" and "UserPromptSubmit hook" in (why or "")
    fire(eng, clock, 1)
    assert len(pushed) == 1  # pushed once, not on every look
    f = pushed[0]
    meta = channel_meta(f)
    attrs = " ".join(f'{k}="{v}"' for k, v in meta.items())
    prompt = f'<channel source="remindkit" {attrs}>\n{frame_fired([f])}\n</channel>'
    assert channel_keys(prompt) == [f.key]
    h = hooks(store, clock)
    got = h.answer("prompt", {"session_id": SID, "prompt": prompt})
    assert got.out == ""  # already in the conversation: not handed in again
    h.settle(got.taken, printed=True)
    assert history(store, rid) == [("delivered", "taken by the host from its channel event")]


def test_rebase_fires_are_left_to_the_engine(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    eng, _ = connected(store, clock, settings)
    h = hooks(store, clock)
    h.answer("prompt", {"session_id": SID, "prompt": "long job"})
    rid = api.create("poll", session=SID, every="1m", on_busy="rebase").id
    fire(eng, clock, 60)
    assert history(store, rid)[0][0] == "waiting"
    assert store.reminders.history(reminder_id=rid)[0].wait_for == "rebase"
    clock.advance(25)
    stop = h.answer("stop", {"session_id": SID})
    assert stop.out == ""  # nothing handed in: re-based one period after the turn's end
    assert store.reminders.history(reminder_id=rid)[0].state == "skipped"
    assert api.get(rid).next_fire_at == clock.now() + timedelta(minutes=1)


def test_busy_store_makes_the_hook_wait(tmp_path: Path, clock, settings, api, store) -> None:  # type: ignore[no-untyped-def]
    if store.dialect.name != "sqlite":
        pytest.skip("holds SQLite's write lock")
    eng, _ = connected(store, clock, settings)
    rid = api.create("x", session=SID, in_="1m").id
    fire(eng, clock, 60)
    path = store.url.split("sqlite:///", 1)[1]
    locker = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    locker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(1.5, lambda: locker.execute("COMMIT"))
    release.start()
    started = time.monotonic()
    h = hooks(store, clock)
    got = h.answer("stop", {"session_id": SID})
    h.settle(got.taken, printed=True)
    release.join()
    locker.close()
    assert json.loads(got.out)["decision"] == "block"
    assert history(store, rid) == [("delivered", None)]
    assert time.monotonic() - started < 30


def test_hooks_of_another_host_only_mark_the_session(store, clock, settings, api) -> None:  # type: ignore[no-untyped-def]
    """A host whose hooks run the same commands but that is not known to take what they
    print: nothing is handed in or recorded; the fire waits for its resume command. (Codex
    CLI, Gemini CLI and opencode do take it: tests/hosts/agent_clis.)"""
    eng, _ = connected(store, clock, settings)
    store.sessions.put_session(
        Session(SID, adapter="mcp", config={"hooks": True, "host": "some-mcp-host"}),
        now_us=to_us(clock.now()),
    )
    h = hooks(store, clock)
    assert h.answer("prompt", {"session_id": SID, "prompt": "go"}).out == ""
    assert store.sessions.get_session(SID).busy
    rid = api.create("x", session=SID, in_="1m").id
    fire(eng, clock, 60)
    stop = h.answer("stop", {"session_id": SID})
    assert stop.out == "" and stop.taken is None
    assert not store.sessions.get_session(SID).busy
    assert history(store, rid)[0][0] == "waiting"
