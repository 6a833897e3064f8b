"""Codex CLI, Gemini CLI and opencode, as a person sets them up: ``remindkit mcp
install-<host>`` in a project, the real CLI (npm, pinned) against a scripted stand-in of
the model API it speaks, ``remindkit serve`` running.

For each host one conversation: the model is asked for a reminder and calls
``schedule_create`` through the CLI (the stand-in sees the tools the CLI listed); the
reminder's session is the CLI's own conversation id. The stand-in holds the model's next
answer while the reminder comes due, so the CLI is open, mid-turn, at the fire: the fire
must not be recorded delivered while no model request carried it. Then the CLI ends;
the fire reaches the conversation (through the resume preset, run by ``remindkit serve``
in the project folder): the stand-in sees a request that holds the fired block, the
conversation's earlier turns and the project's folder, and only then is it delivered.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import World, cli, wait_for
from .standin import Call, ModelStandin, Say, Turn

pytestmark = pytest.mark.hosts

ASK = "Please remind me to stretch, in a few seconds."
TEXT = "stretch-7c1e"  # the reminder's text: found in the fired block
DUE_S = 4


class Brain:
    """The scripted model: asked for a reminder, it calls ``schedule_create``; given the
    tool's result it answers (held until the test lets go); given a fired block it says so."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.held = threading.Event()

    def __call__(self, turn: Turn) -> Any:
        after = turn.after_last_user
        if FIRED.search(turn.last_user) or any(FIRED.search(t) for _, t in after):
            return Say("The stretch reminder is due now.")
        if ASK in turn.last_user:
            if not any(role == "tool" for role, _ in after):
                name = turn.tool("schedule_create")
                assert name, f"schedule_create is not among the tools: {turn.tools}"
                return Call(name, {"prompt": TEXT, "after": f"{DUE_S}s", "label": "stretch"})
            self.held.set()
            self.hold.wait(60)
            return Say("Reminder set.")
        return Say("ok")


FIRED = re.compile(r'<schedule-fired id="rem_[^>]*>.*?reminder_text_json: "' + TEXT, re.S)


def fired_requests(standin: ModelStandin) -> list[Turn]:
    """Model requests that carry the fired block (not the tools' descriptions of it)."""
    return [t for t in standin.seen() if any(FIRED.search(x) for r, x in t.texts if r != "system")]


def states(world: World, api: Any, session: str) -> list[str]:
    return [o.state for o in api.history(session=session)]


def converse(world: World, standin: ModelStandin, brain: Brain, start: Any) -> tuple[Any, str]:
    """Start the CLI (``start()`` returns its Popen), let it create the reminder, hold it
    mid-turn across the fire, check nothing was delivered, let it finish. Returns the
    reminders API and the reminder's session."""
    api = world.api()
    proc = start()
    try:
        wait_for(lambda: brain.held.is_set() or proc.poll() is not None, 90, "the tool's result")
        assert proc.poll() is None, proc.communicate()
        found = [r for r in _all(api) if r.text == TEXT]
        assert len(found) == 1, found
        session = found[0].session
        # the CLI is open, mid-turn, while the reminder comes due
        wait_for(lambda: states(world, api, session), 60, "the fire")
        time.sleep(1.5)  # an engine that wrongly pushed would have recorded it by now
        assert "delivered" not in states(world, api, session), states(world, api, session)
        assert not fired_requests(standin)
    finally:
        brain.hold.set()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, (out, err)
    return api, session


def _all(api: Any) -> list[Any]:
    return list(api.list(all=True))


def comes_back(world: World, standin: ModelStandin, api: Any, session: str, earlier: str) -> Turn:
    """The fire reaches the conversation: a model request holds the fired block, the
    conversation's earlier turns and the project folder, and the fire is delivered."""
    turn = wait_for(lambda: fired_requests(standin), 90, "a model request with the fired block")[0]
    assert earlier in turn.all_text(), "the resumed request lacks the conversation's earlier turns"
    wait_for(lambda: "delivered" in states(world, api, session), 60, "the fire recorded delivered")
    return turn


def in_system(turn: Turn, project: Path) -> None:
    """The resumed CLI ran in the project: its system prompt, built anew by that process,
    names the folder it runs in."""
    system = "\n".join(t for r, t in turn.texts if r == "system")
    assert str(project) in system, system[-2000:]


def codex_config(world: World, url: str) -> None:
    codex_home = world.home / ".codex"
    codex_home.mkdir()
    (codex_home / "config.toml").write_text(
        f"""model = "standin-model"
model_provider = "standin"

[model_providers.standin]
name = "stand-in"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "STANDIN_KEY"

[projects."{world.project}"]
trust_level = "trusted"
"""
    )


def test_codex(world: World, serve: Any) -> None:
    codex = cli("codex")
    brain = Brain()
    with ModelStandin(brain) as standin:
        codex_config(world, standin.url)
        world.run(["git", "init", "-q"])  # a person's project; the preset's engine runs need not be
        out = world.install("codex", "--codex", codex)
        assert "[mcp_servers.remindkit]" in out and "STANDIN_KEY" in out  # the provider's key
        assert "up to date" in world.install("codex", "--codex", codex)
        import subprocess

        def start() -> subprocess.Popen[str]:
            return subprocess.Popen(
                [codex, "exec", ASK],
                cwd=world.project,
                env=world.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

        api, session = converse(world, standin, brain, start)
        tools_turn = standin.seen()[0]
        assert "mcp__remindkit__schedule_create" in tools_turn.tools
        threads = list((world.home / ".codex" / "sessions").rglob(f"rollout-*{session}.jsonl"))
        assert threads, f"{session} is not a Codex thread id"  # taken from tools/call _meta
        turn = comes_back(world, standin, api, session, ASK)
        assert turn.api == "responses"
        # the resumed turn ran in the project: Codex records each turn's folder in the thread
        cwds = [
            json.loads(line)["payload"].get("cwd")
            for line in threads[0].read_text().splitlines()
            if json.loads(line).get("type") == "turn_context"
        ]
        assert len(cwds) >= 2 and cwds[-1] == str(world.project), cwds


def test_gemini(world: World, serve: Any) -> None:
    gemini = cli("gemini")
    brain = Brain()
    with ModelStandin(brain) as standin:
        gdir = world.home / ".gemini"
        gdir.mkdir()
        (gdir / "settings.json").write_text(
            json.dumps(
                {
                    "security": {"auth": {"selectedType": "gemini-api-key"}},
                    "model": {"name": "gemini-2.5-flash"},
                    "privacy": {"usageStatisticsEnabled": False},
                }
            )
        )
        (gdir / "trustedFolders.json").write_text(json.dumps({str(world.project): "TRUST_FOLDER"}))
        # the key where Gemini reads it itself; the base URL passed on to the preset
        (gdir / ".env").write_text(
            f"GEMINI_API_KEY=test-key\nGOOGLE_GEMINI_BASE_URL={standin.url}\n"
        )
        out = world.install("gemini", "--gemini", gemini)
        assert "BeforeAgent" in out and "AfterAgent" in out
        import subprocess

        def start() -> subprocess.Popen[str]:
            return subprocess.Popen(
                [gemini, "-p", ASK],
                cwd=world.project,
                env=world.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

        api, session = converse(world, standin, brain, start)
        first = [t for t in standin.seen() if t.tools][0]
        assert "mcp_remindkit_schedule_create" in first.tools
        assert re.fullmatch(r"[0-9a-f-]{36}", session), session  # Gemini's session, by its hooks
        comes_back(world, standin, api, session, ASK)
        # Gemini keeps a project's sessions under its folder and resumes one only from there
        chats = list((world.home / ".gemini" / "tmp").rglob(f"session-*{session[:8]}*.jsonl"))
        assert chats and any("schedule-fired" in c.read_text() for c in chats), chats


def test_opencode(world: World, serve: Any) -> None:
    opencode = cli("opencode")
    brain = Brain()
    with ModelStandin(brain) as standin:
        config = {
            "$schema": "https://opencode.ai/config.json",
            "provider": {
                "standin": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Stand-in",
                    "options": {"baseURL": f"{standin.url}/v1", "apiKey": "sk-standin"},
                    "models": {"standin-model": {"name": "Stand-in", "tool_call": True}},
                }
            },
            "model": "standin/standin-model",
            "permission": {"*": "allow"},
        }
        (world.project / "opencode.json").write_text(json.dumps(config, indent=2))
        out = world.install("opencode", "--opencode", opencode)
        assert "plugin/remindkit.js" in out
        assert (
            json.loads((world.project / "opencode.json").read_text())["provider"]
            == config["provider"]
        )
        world.env.update({"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"})
        import subprocess

        def start() -> subprocess.Popen[str]:
            return subprocess.Popen(
                [opencode, "run", ASK],
                cwd=world.project,
                env=world.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )

        api, session = converse(world, standin, brain, start)
        first = [t for t in standin.seen() if t.tools][0]
        assert "remindkit_schedule_create" in first.tools
        assert session.startswith("ses_"), session  # opencode's session, by the plugin
        turn = comes_back(world, standin, api, session, ASK)
        in_system(turn, world.project)


def test_installers_refuse_a_symlink_out_of_the_project(tmp_path: Path) -> None:
    from remindkit.errors import InvalidInput
    from remindkit.mcp.hosts import HOSTS

    project = tmp_path / "p"
    outside = tmp_path / "elsewhere"
    project.mkdir()
    outside.mkdir()
    (project / ".codex").symlink_to(outside)
    (project / ".gemini").mkdir()
    (project / ".gemini" / "settings.json").symlink_to(outside / "settings.json")
    (project / ".opencode").symlink_to(outside)
    for name in ("codex", "gemini", "opencode"):
        with pytest.raises(InvalidInput) as err:
            HOSTS[name].plan(project=project, user=False, environ={"HOME": str(tmp_path)})
        assert err.value.code == "unsafe_path", name
    assert list(outside.iterdir()) == []
