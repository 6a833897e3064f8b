"""A session definition is code: attacks through imports, a shared store and a
session scope, tried against real engines (``remindkit serve``), real commands
and a real loopback model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from remindkit.clock import SystemClock, format_utc, to_us
from remindkit.models import Fire, Session
from remindkit.reminders import Reminders
from remindkit.sessions.command import command_env
from remindkit.settings import Settings
from remindkit.store import open_store
from tests.processes.conftest import Serve, wait_for
from tests.processes.openai_server import ScriptedOpenAI, text

from .attacks import record

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture
def home(tmp_path: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    url = f"sqlite:///{tmp_path / 'store.db'}"
    env.update(REMINDKIT_HOME=str(tmp_path), REMINDKIT_DB=url, REMINDKIT_TZ="UTC")
    return {"env": env, "url": url, "dir": tmp_path}


def due_now_lines(session: dict[str, Any], rid: str = "rem_attack000001") -> list[str]:
    now = SystemClock().now()
    at = format_utc(now + timedelta(seconds=1))
    return [
        json.dumps({"type": "session", "created_at": format_utc(now), **session}),
        json.dumps(
            {
                "type": "reminder",
                "id": rid,
                "session": session["id"],
                "text": "hello",
                "schedule": {"v": 1, "kind": "at", "tz": "UTC", "first_at": at, "repeat": 1},
                "state": "active",
                "next_fire_at": at,
                "created_at": format_utc(now),
            }
        ),
    ]


def history(env: dict[str, str]) -> list[dict[str, Any]]:
    out = cli(env, "history", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_imported_command_session_is_disabled_until_session_add(home: dict[str, Any]) -> None:
    env, tmp = home["env"], home["dir"]
    pwned, ok = tmp / "PWNED", tmp / "OK"
    attack = tmp / "attack.jsonl"
    attack.write_text(
        "\n".join(
            due_now_lines(
                {
                    "id": "s1",
                    "adapter": "command",
                    "config": {"argv": ["sh", "-c", f"touch {pwned}"]},
                }
            )
        )
        + "\n"
    )
    done = cli(env, "import", str(attack))
    assert done.returncode == 0, done.stderr
    assert (
        "session s1 is disabled" in done.stdout
        and "argv" in done.stdout
        and "session add" in done.stdout
    )
    engine = Serve(home["url"], tmp, name="import")
    try:
        engine.wait_ready()
        waiting = wait_for(
            lambda: [o for o in history(env) if o["outcome"] == "waiting" and o["error"]], 60, 0.3
        )
        assert waiting and "disabled" in waiting[0]["error"], history(env)
        assert not pwned.exists(), "the imported command ran"
        # the local user completes the session: the waiting fire is delivered to the new command
        added = cli(env, "session", "add", "s1", "--command", f"sh -c 'touch {ok}'")
        assert added.returncode == 0, added.stderr
        assert wait_for(
            lambda: [o for o in history(env) if o["outcome"] == "delivered"], 60, 0.3
        ), history(env)
        assert ok.exists() and not pwned.exists()
    finally:
        engine.stop()
    record(
        "import of a command session + due reminder runs argv on every engine",
        "the command ran as soon as an engine started",
        "session comes in disabled, reported; the fire waits "
        "('disabled') until `session add`; argv never ran",
    )


def test_import_with_trust_sessions_keeps_the_command(home: dict[str, Any]) -> None:
    env, tmp = home["env"], home["dir"]
    ran = tmp / "RAN"
    attack = tmp / "trusted.jsonl"
    attack.write_text(
        "\n".join(
            due_now_lines(
                {"id": "s1", "adapter": "command", "config": {"argv": ["sh", "-c", f"touch {ran}"]}}
            )
        )
        + "\n"
    )
    done = cli(env, "import", str(attack), "--trust-sessions", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["disabled"] == []
    scoped = cli(
        {**env, "REMINDKIT_SESSION": "s1"}, "import", str(attack), "--trust-sessions", "--replace"
    )
    assert scoped.returncode == 1 and "forbidden" in scoped.stderr
    engine = Serve(home["url"], tmp, name="trusted")
    try:
        engine.wait_ready()
        assert wait_for(ran.exists, 60, 0.2)
    finally:
        engine.stop()


def test_session_scope_cannot_write_a_session_definition(home: dict[str, Any]) -> None:
    env = home["env"]
    assert cli(env, "session", "add", "b", "--command", "true").returncode == 0
    scoped = cli(
        {**env, "REMINDKIT_SESSION": "a"}, "session", "add", "b", "--command", "sh -c 'echo pwned'"
    )
    assert scoped.returncode == 1 and "error: forbidden:" in scoped.stderr
    sessions = {s["id"]: s for s in json.loads(cli(env, "session", "ls", "--json").stdout)}
    assert sessions["b"]["config"]["argv"] == ["true"]
    record(
        "`session add b --command …` from an agent running under REMINDKIT_SESSION=a",
        "b's command replaced",
        "`forbidden`, exit 1; b unchanged",
    )


def test_engine_allowlist_pins_commands_and_another_engine_takes_it(home: dict[str, Any]) -> None:
    env, tmp = home["env"], home["dir"]
    ran = tmp / "RAN"
    store = open_store(home["url"], settings=Settings.from_env(env={}, home=tmp, tz="UTC"))
    try:
        now = SystemClock().now()
        store.sessions.put_session(
            Session("s1", adapter="command", config={"argv": ["sh", "-c", f"touch {ran}"]}),
            now_us=to_us(now),
        )
        Reminders(store, clock=SystemClock()).create("check", session="s1", in_="1s")
    finally:
        store.close()
    pinned = Serve(
        home["url"], tmp, name="pinned", env={"REMINDKIT_ENGINE_COMMANDS": "/usr/bin/my-agent,true"}
    )
    try:
        pinned.wait_ready()
        waiting = wait_for(
            lambda: [o for o in history(env) if o["outcome"] == "waiting" and o["error"]], 60, 0.3
        )
        assert waiting and "REMINDKIT_ENGINE_COMMANDS" in waiting[0]["error"], history(env)
        assert not ran.exists()
        other = Serve(home["url"], tmp, name="open")  # no allowlist: it may run sh
        try:
            other.wait_ready()
            assert wait_for(ran.exists, 60, 0.2)
        finally:
            other.stop()
    finally:
        pinned.stop()
    record(
        "a row written straight into a shared store names `sh -c …` (PostgreSQL: anyone with write access)",
        "every engine ran it",
        "an engine with REMINDKIT_ENGINE_COMMANDS leaves it waiting with the reason; "
        "only an engine that allows it runs it",
    )


def test_openai_key_env_allowlist_and_extra_cannot_replace_model(home: dict[str, Any]) -> None:
    env, tmp = home["env"], home["dir"]
    with ScriptedOpenAI(lambda body: text("ok")) as server:
        store = open_store(home["url"], settings=Settings.from_env(env={}, home=tmp, tz="UTC"))
        try:
            now = to_us(SystemClock().now())
            store.sessions.put_session(
                Session(
                    "steal",
                    adapter="openai",
                    config={
                        "base_url": server.base_url,
                        "model": "m",
                        "api_key_env": "AWS_SECRET_ACCESS_KEY",
                    },
                ),
                now_us=now,
            )
            store.sessions.put_session(
                Session(
                    "swap",
                    adapter="openai",
                    config={
                        "base_url": server.base_url,
                        "model": "m",
                        "extra": {"model": "evil", "messages": [], "temperature": 0.25},
                    },
                ),
                now_us=now,
            )
            api = Reminders(store, clock=SystemClock())
            api.create("a", session="steal", in_="1s")
            api.create("b", session="swap", in_="1s")
        finally:
            store.close()
        engine = Serve(
            home["url"],
            tmp,
            name="keys",
            env={"AWS_SECRET_ACCESS_KEY": "aws-secret-value", "OPENAI_API_KEY": "sk-fine"},
        )
        try:
            engine.wait_ready()
            assert wait_for(lambda: server.requests, 60, 0.2)
            waiting = wait_for(
                lambda: [o for o in history(env) if o["session"] == "steal" and o["error"]], 60, 0.3
            )
            assert waiting and "api_key_env" in waiting[0]["error"], history(env)
        finally:
            engine.stop()
        assert all(r["auth"] != "Bearer aws-secret-value" for r in server.requests)
        swapped = [r for r in server.requests if r["auth"] == "Bearer sk-fine"]
        assert swapped and all(
            r["model"] == "m" and r["messages"] and r["temperature"] == 0.25 for r in swapped
        )
    refused = cli(
        env,
        "session",
        "add",
        "x",
        "--openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--api-key-env",
        "AWS_SECRET_ACCESS_KEY",
    )
    assert refused.returncode == 1 and "key_env_not_allowed" in refused.stderr
    allowed = cli(
        {**env, "REMINDKIT_API_KEY_ENVS": "MY_KEY"},
        "session",
        "add",
        "x",
        "--openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--api-key-env",
        "MY_KEY",
    )
    assert allowed.returncode == 0, allowed.stderr
    record(
        "openai session with api_key_env=AWS_SECRET_ACCESS_KEY (loopback model server)",
        "the secret was sent as a Bearer token",
        "`key_env_not_allowed` at `session add`; a stored one waits with the reason; nothing sent",
    )
    record(
        "openai session whose config.extra sets model/messages",
        "extra replaced the request's model",
        "model, messages, tools are remindkit's; other extra keys pass",
    )


def test_command_environment_is_an_allowlist(home: dict[str, Any]) -> None:
    tmp = home["dir"]
    dump = tmp / "env.json"
    script = f"import json, os; json.dump(dict(os.environ), open({str(dump)!r}, 'w'))"
    store = open_store(home["url"], settings=Settings.from_env(env={}, home=tmp, tz="UTC"))
    try:
        store.sessions.put_session(
            Session(
                "s1",
                adapter="command",
                config={
                    "argv": [sys.executable, "-c", script],
                    "env": {"MY_AGENT_TOKEN": "given", "PASS_ME": None},
                },
            ),
            now_us=to_us(SystemClock().now()),
        )
        Reminders(store, clock=SystemClock()).create("check", session="s1", in_="1s")
    finally:
        store.close()
    engine = Serve(
        home["url"],
        tmp,
        name="env",
        env={"AWS_SECRET_ACCESS_KEY": "aws-secret-value", "PASS_ME": "passed", "LC_TIME": "C"},
    )
    try:
        engine.wait_ready()
        assert wait_for(dump.exists, 60, 0.2)
        seen = wait_for(lambda: _json_or_none(dump), 10, 0.1)
    finally:
        engine.stop()
    assert "AWS_SECRET_ACCESS_KEY" not in seen and "PYTHONUNBUFFERED" not in seen
    assert (
        seen["MY_AGENT_TOKEN"] == "given" and seen["PASS_ME"] == "passed" and seen["LC_TIME"] == "C"
    )
    assert seen["REMINDKIT_SESSION"] == "s1" and seen["REMINDKIT_OCCURRENCE_KEYS"].startswith(
        "rem_"
    )
    assert seen["REMINDKIT_DB"] == home["url"] and "PATH" in seen and "REMINDKIT_HOME" in seen
    record(
        "a command session's process sees the engine's whole environment",
        "AWS_SECRET_ACCESS_KEY and every other variable inherited",
        "PATH, HOME, LANG, LC_*, TZ, TMPDIR, USER, REMINDKIT_* it needs, what the definition names",
    )


def _json_or_none(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except ValueError:
        return None


def test_store_url_with_a_password_never_reaches_the_command() -> None:
    sess = Session("s1", adapter="command", config={"argv": ["true"]})
    fire = Fire(1, "rem_1", "s1", SystemClock().now(), "x")
    base = {"PATH": "/usr/bin", "REMINDKIT_DB": "postgresql://u:pw@db/rk", "REMINDKIT_HOME": "/h"}
    env = command_env(sess, [fire], store_url="postgresql://u:pw@db/rk", base=base)
    assert "REMINDKIT_DB" not in env and env["REMINDKIT_HOME"] == "/h"
    env = command_env(sess, [fire], store_url="postgresql://u@db/rk", base=base)
    assert env["REMINDKIT_DB"] == "postgresql://u@db/rk"


def test_engine_policy_pins_adapters_and_resolves_programs() -> None:
    from remindkit.sessions.trust import EnginePolicy

    policy = EnginePolicy.from_env(
        {
            "REMINDKIT_ENGINE_ADAPTERS": "python,command",
            "REMINDKIT_ENGINE_COMMANDS": "sh",
            "PATH": os.environ["PATH"],
        }
    )
    openai = Session(
        "o", adapter="openai", config={"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    )
    assert "REMINDKIT_ENGINE_ADAPTERS" in (policy.why_not(openai) or "")
    sh = Session(
        "c", adapter="command", config={"argv": [os.path.realpath("/bin/sh"), "-c", "true"]}
    )
    assert policy.why_not(sh) is None  # the same program, named by its path
    other = Session(
        "c", adapter="command", config={"argv": ["sh", "-c", "true"], "fresh_argv": ["python3"]}
    )
    assert "python3" in (policy.why_not(other) or "")  # the fresh-session command is pinned too
    disabled = Session(
        "d", adapter="command", config={"disabled": "imported without --trust-sessions"}
    )
    assert "disabled" in (EnginePolicy().why_not(disabled) or "")
