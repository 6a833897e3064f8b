"""Resume commands that work: a command (or an ``mcp`` session's resume command) runs
in the session's folder, with the engine's variables its definition names and nothing
else of the engine's environment; a failed turn keeps the tails of stdout and stderr;
the fresh-session fallback never re-runs a resume command under a made-up id."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from remindkit.agent.external import ExternalTurns
from remindkit.clock import FakeClock, to_us
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.sessions.command import CommandSession, pass_env_names
from remindkit.sessions.mcp import McpSessions
from remindkit.sessions.registry import Adapters
from remindkit.settings import Settings
from remindkit.store import SqlStore

from .test_delivery import outcomes, step

# A stand-in resume command: records its argv, working folder and environment, then
# behaves as `claude -p --resume ID` does for a session id it does not know (exit 1,
# the reason on stdout) unless told to answer.
AGENT = r"""
import json, os, sys
log = sys.argv[1]
with open(log, "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ),
                         "stdin": sys.stdin.read()}) + "\n")
mode = sys.argv[2]
if mode == "ok":
    print("done")
elif mode == "resume":
    sid = sys.argv[3]
    if "~" in sid:
        print("Error: --resume requires a valid session ID", file=sys.stderr)
        sys.exit(1)
    print("Not logged in · Please run /login")
    print("some detail on stderr", file=sys.stderr)
    sys.exit(1)
"""


@pytest.fixture
def api(store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(store, clock=clock, settings=settings)


@pytest.fixture
def agent(tmp_path: Path) -> tuple[list[str], Path]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    return [sys.executable, str(script), str(tmp_path / "calls.jsonl")], tmp_path / "calls.jsonl"


def calls(log: Path) -> list[dict]:  # type: ignore[type-arg]
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def engine_with(store: SqlStore, clock: FakeClock, settings: Settings, *, mcp: bool) -> Engine:
    turns = ExternalTurns(Reminders(store, clock=clock, settings=settings))
    adapter = (
        McpSessions(store, clock=clock, turns=turns)
        if mcp
        else CommandSession(turns=turns, clock=clock)
    )
    return Engine(store, clock=clock, settings=settings, inline=True, adapters=Adapters(adapter))


def put(store: SqlStore, clock: FakeClock, sid: str, adapter: str, **config) -> None:  # type: ignore[no-untyped-def]
    store.sessions.put_session(
        Session(sid, adapter=adapter, config=config), now_us=to_us(clock.now())
    )


def test_command_runs_in_its_folder_with_the_named_variables_only(
    store, clock, settings, api, agent, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    argv, log = agent
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/")
    monkeypatch.setenv("ENGINE_SECRET", "not for agents")
    put(
        store,
        clock,
        "s1",
        "command",
        argv=[*argv, "ok"],
        cwd=str(project),
        pass_env=["ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "NOT_SET_ANYWHERE"],
    )
    eng = engine_with(store, clock, settings, mcp=False)
    rid = api.create("check the build", session="s1", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid) == [("delivered", "s1")]
    (call,) = calls(log)
    assert call["cwd"] == str(project)
    assert call["env"]["ANTHROPIC_API_KEY"] == "sk-test-key"
    assert call["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/"
    assert "ENGINE_SECRET" not in call["env"] and "NOT_SET_ANYWHERE" not in call["env"]


def test_mcp_resume_command_runs_in_the_project(
    store, clock, settings, api, agent, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """An mcp session stored before it had a cwd runs its resume command in its project."""
    argv, log = agent
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-key")
    put(
        store,
        clock,
        "cc-1",
        "mcp",
        argv=[*argv, "ok", "{session}"],
        project=str(project),
        pass_env=["ANTHROPIC_API_KEY"],
    )
    eng = engine_with(store, clock, settings, mcp=True)
    rid = api.create("after you left", session="cc-1", in_="1m").id
    step(eng, clock, 60)
    assert outcomes(store, rid) == [("delivered", "cc-1")]
    (call,) = calls(log)
    assert call["cwd"] == str(project) and call["argv"] == ["ok", "cc-1"]
    assert call["env"]["ANTHROPIC_API_KEY"] == "sk-test-key"
    assert "<schedule-fired" in call["stdin"]


def test_failed_turn_keeps_the_tails_of_stdout_and_stderr(
    store, clock, settings, api, agent
) -> None:  # type: ignore[no-untyped-def]
    argv, _log = agent
    put(store, clock, "s1", "command", argv=[*argv, "resume", "{session}"])
    eng = engine_with(store, clock, settings, mcp=False)
    rid = api.create("x", session="s1", in_="1m").id
    step(eng, clock, 60)
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "failed"
    assert "exit status 1: some detail on stderr" in occ.error
    assert "stdout: Not logged in · Please run /login" in occ.error


def test_mcp_resume_failure_never_runs_a_made_up_id_and_stays_retryable(
    store, clock, settings, api, agent
) -> None:  # type: ignore[no-untyped-def]
    """`claude -p --resume <id>` failing is not re-run as `--resume <id>~abc123`: the fire
    waits (the conversation is still there) and the command is tried again after a
    back-off; the store holds no made-up session."""
    argv, log = agent
    put(store, clock, "cc-2", "mcp", argv=[*argv, "resume", "{session}"], project="/")
    eng = engine_with(store, clock, settings, mcp=True)
    rid = api.create("x", session="cc-2", in_="1m").id
    step(eng, clock, 60)
    assert [c["argv"] for c in calls(log)] == [["resume", "cc-2"]]
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "waiting" and occ.wait_for == "retry"
    assert "resume command failed" in occ.error and "Not logged in" in occ.error
    assert [s.id for s in store.sessions.list_sessions(now_us=to_us(clock.now()))] == ["cc-2"]
    step(eng, clock, 5)  # within the back-off: not run again
    assert len(calls(log)) == 1
    step(eng, clock, 30)
    eng.tick(clock.now())
    assert [c["argv"] for c in calls(log)] == [["resume", "cc-2"], ["resume", "cc-2"]]
    assert store.reminders.history(reminder_id=rid)[0].state == "waiting"


def test_mcp_resume_failure_goes_to_its_fresh_command(store, clock, settings, api, agent) -> None:  # type: ignore[no-untyped-def]
    argv, log = agent
    put(
        store,
        clock,
        "cc-3",
        "mcp",
        argv=[*argv, "resume", "{session}"],
        fresh_argv=[*argv, "ok", "{session}"],
        project="/",
    )
    eng = engine_with(store, clock, settings, mcp=True)
    rid = api.create("x", session="cc-3", in_="1m").id
    step(eng, clock, 60)
    got = [c["argv"] for c in calls(log)]
    assert got[0] == ["resume", "cc-3"] and got[1][0] == "ok" and got[1][1].startswith("cc-3~")
    [(state, to)] = outcomes(store, rid)
    assert state == "delivered" and to == got[1][1]


def test_command_without_fresh_command_fails_without_a_second_run(
    store, clock, settings, api, agent
) -> None:  # type: ignore[no-untyped-def]
    argv, log = agent
    put(store, clock, "s4", "command", argv=[*argv, "resume", "{session}"])
    eng = engine_with(store, clock, settings, mcp=False)
    rid = api.create("x", session="s4", in_="1m").id
    step(eng, clock, 60)
    assert [c["argv"] for c in calls(log)] == [["resume", "s4"]]
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "failed" and "a fresh session would run the same command" in occ.error


def test_timed_out_command_waits_and_is_tried_again(store, clock, settings, api, tmp_path) -> None:  # type: ignore[no-untyped-def]
    flag = tmp_path / "quick"
    slow = f"import os, sys, time; sys.stdin.read(); os.path.exists({str(flag)!r}) or time.sleep(30); print('ok')"
    put(store, clock, "s5", "command", argv=[sys.executable, "-c", slow], timeout=0.5)
    eng = engine_with(store, clock, settings, mcp=False)
    rid = api.create("x", session="s5", in_="1m").id
    step(eng, clock, 60)
    (occ,) = store.reminders.history(reminder_id=rid)
    assert occ.state == "waiting" and occ.wait_for == "retry" and "timed out" in occ.error
    flag.write_text("")
    step(eng, clock, 31)
    eng.tick(clock.now())
    assert outcomes(store, rid) == [("delivered", "s5")]


@pytest.mark.parametrize(
    "names",
    [["REMINDKIT_DB"], ["NOT A NAME"], ["A=B"], [""]],
    ids=["reserved", "space", "eq", "empty"],
)
def test_pass_env_names_are_checked(names: list[str]) -> None:
    from remindkit.errors import InvalidInput

    with pytest.raises(InvalidInput):
        pass_env_names(names)
    assert pass_env_names(["ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY", "X1"]) == [
        "ANTHROPIC_API_KEY",
        "X1",
    ]
