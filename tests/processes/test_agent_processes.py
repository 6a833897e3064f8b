"""End to end through real processes: `remindkit chat` against a loopback
OpenAI-compatible server whose scripted model sets reminders with tags and tool
calls, two `remindkit serve` engines sharing the store (no turn run twice), a
`command` agent with the fresh-session fallback, a session busy from the
command line, and `remindkit demo`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from .openai_server import ScriptedOpenAI, last_user, text, tool

pytestmark = pytest.mark.processes
ROOT = Path(__file__).resolve().parents[2]


def rk(
    env: dict[str, str], *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        env=env,
        input=stdin,
        text=True,
        capture_output=True,
        timeout=timeout,
        cwd=ROOT,
    )


def wait_for(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError("timed out")


RETRY = {"store_unavailable", "conflict"}  # the codes that say "retry"


def history(env: dict[str, str], *, polling: bool = False) -> list[dict[str, Any]]:
    """``remindkit history --json``; while ``polling``, a refusal whose code says to retry
    reads as nothing yet (the next poll asks again); any other refusal fails the test."""
    got = rk(env, "history", "--json", "--limit", "500")
    rows = json.loads(got.stdout)
    if polling and isinstance(rows, dict) and rows.get("error", {}).get("code") in RETRY:
        return []
    assert isinstance(rows, list), f"history failed ({got.returncode}): {rows}\n{got.stderr}"
    return rows


def model(body: dict[str, Any]) -> Any:
    """The scripted model: sets reminders when asked, answers fired turns."""
    user = last_user(body)
    if body["messages"][-1]["role"] == "tool":
        return text("Done, reminders are set.")
    if "<schedule-fired" in user:
        return text("Reminder: " + ", ".join(p.split('"')[0] for p in user.split(' label="')[1:]))
    if "five reminders" in user:
        tags = "".join(
            f'<schedule label="r{i}" delay="{2 + i % 2}s">reminder {i}</schedule>' for i in range(5)
        )
        return text("Setting them. " + tags)
    if "use the tool" in user:
        return tool("schedule_create", {"prompt": "tool made", "after": "2s", "label": "by-tool"})
    return text("Hello.")


def test_chat_and_two_engines_run_each_fired_turn_once(env: dict[str, str], serve) -> None:  # type: ignore[no-untyped-def]
    with ScriptedOpenAI(model) as server:
        serve()
        serve()
        chat = rk(
            env,
            "chat",
            "--base-url",
            server.base_url,
            "--model",
            "scripted",
            "--session",
            "c1",
            "--api-key-env",
            "TEST_MODEL_KEY",
            "--no-engine",
            stdin="please set five reminders\nnow use the tool\n/quit\n",
        )
        assert chat.returncode == 0, chat.stderr
        assert "agent> Setting them." in chat.stdout and "<schedule" not in chat.stdout
        assert "agent> Done, reminders are set." in chat.stdout
        assert chat.stdout.count("(reminder 'r") == 5

        def all_done() -> bool:
            hist = history(env)
            return len(hist) == 6 and all(o["outcome"] == "delivered" for o in hist)

        wait_for(all_done, 30)
        keys = server.fired_keys()
        assert (
            len(keys) == 6 and len(set(keys)) == 6
        )  # every occurrence handed over once, across two engines
        assert all(r["auth"] == "Bearer sk-test-123" for r in server.requests)
        assert all(r["tools"][0]["function"]["name"] == "schedule_create" for r in server.requests)
        sessions = json.loads(rk(env, "session", "ls", "--json").stdout)
        [c1] = [s for s in sessions if s["id"] == "c1"]
        assert c1["adapter"] == "openai" and "sk-test" not in json.dumps(sessions)


def test_chat_shows_fired_turns_while_idle(env: dict[str, str]) -> None:
    with (
        ScriptedOpenAI(model) as server,
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remindkit",
                "chat",
                "--base-url",
                server.base_url,
                "--model",
                "scripted",
                "--session",
                "c2",
            ],
            env=env,
            text=True,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ) as proc,
    ):
        try:
            assert proc.stdin is not None
            proc.stdin.write("now use the tool\n")
            proc.stdin.flush()
            # idle: the reminder fires in the chat's own engine, and its turn is answered
            wait_for(
                lambda: any(o["outcome"] == "delivered" for o in history(env, polling=True)), 90
            )
            out, err = proc.communicate("/quit\n", timeout=30)
        finally:
            if proc.poll() is None:  # a failed check: the chat goes, its pipes are closed
                proc.kill()
        assert proc.returncode == 0, err
        assert "⏰ reminder fired: by-tool" in out
        assert "agent> Reminder: by-tool" in out
        assert out.index("agent> Done, reminders are set.") < out.index("⏰ reminder fired")


def test_busy_session_holds_a_fire_until_idle(env: dict[str, str], serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "agent.log"
    script = tmp_path / "agent.py"
    script.write_text(
        f"import sys\nwith open({str(log)!r}, 'a') as f:\n"
        "    f.write(str(sys.stdin.read().count('<schedule-fired ')) + '\\n')\n"
    )
    added = rk(env, "session", "add", "ext", "--command", f"{sys.executable} {script}")
    assert added.returncode == 0, added.stderr
    assert rk(env, "session", "busy", "ext").returncode == 0
    serve()
    for i in range(2):
        assert rk(env, "remind", f"r{i}", "--session", "ext", "--in", f"{1 + i}s").returncode == 0
    time.sleep(3.5)
    assert [o["outcome"] for o in history(env)] == ["waiting", "waiting"]
    assert not log.exists()
    assert rk(env, "session", "idle", "ext").returncode == 0
    wait_for(lambda: all(o["outcome"] == "delivered" for o in history(env, polling=True)))
    assert log.read_text().split() == ["2"]  # both in one turn


def test_command_agent_fresh_session_fallback(env: dict[str, str], serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    resume = f"{sys.executable} -c \"import sys; sys.stderr.write('no such session'); sys.exit(1)\" {{session}}"
    fresh = (
        f"{sys.executable} -c \"import sys; print('new conversation', sys.argv[1]); "
        f"print('<schedule label=follow delay=1s>from the fresh one</schedule>')\" {{session}}"
    )
    assert (
        rk(env, "session", "add", "old", "--command", resume, "--fresh-command", fresh).returncode
        == 0
    )
    serve()
    assert rk(env, "remind", "check back", "--session", "old", "--in", "1s").returncode == 0
    hist = wait_for(lambda: [o for o in history(env, polling=True) if o["outcome"] == "delivered"])
    fresh_id = hist[0]["delivered_to"]
    assert fresh_id.startswith("old~")
    sessions = {s["id"]: s for s in json.loads(rk(env, "session", "ls", "--json").stdout)}
    assert sessions[fresh_id]["parent_id"] == "old"
    follow = wait_for(
        lambda: [
            r for r in json.loads(rk(env, "ls", "--all", "--json").stdout) if r["label"] == "follow"
        ]
    )
    assert follow[0]["session"] == fresh_id and follow[0]["source"] == "tag"


def test_model_server_started_late_gets_the_waiting_turn(env: dict[str, str], serve) -> None:  # type: ignore[no-untyped-def]
    """The model server is not up when the reminder fires: the fire waits (not
    failed), and the engine hands it over once the server answers."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    assert (
        rk(
            env, "session", "add", "o", "--openai", "--base-url", url, "--model", "scripted"
        ).returncode
        == 0
    )
    serve(REMINDKIT_LEASE="2")  # looks for waiting fires every 0.5 s
    assert rk(env, "remind", "stretch your legs", "--session", "o", "--in", "1s").returncode == 0
    waiting = wait_for(
        lambda: [o for o in history(env, polling=True) if o["outcome"] == "waiting"], 20
    )
    assert "model_unreachable" in waiting[0]["error"]
    with ScriptedOpenAI(model, port=port) as server:
        done = wait_for(
            lambda: [o for o in history(env, polling=True) if o["outcome"] == "delivered"], 30
        )
        assert len(done) == 1 and not [o for o in history(env) if o["outcome"] == "failed"]
        assert len(server.fired_keys()) == 1


def test_demo(env: dict[str, str]) -> None:
    t = time.monotonic()
    out = rk(env, "demo", "--delay", "1", "--no-alerts")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "scripted local model" in out.stdout
    assert "⏰ reminder fired: stretch" in out.stdout
    assert "agent> [scripted local model] Your reminder is due: Stand up, stretch" in out.stdout
    assert time.monotonic() - t < 20
