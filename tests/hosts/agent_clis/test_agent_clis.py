"""Codex CLI, Gemini CLI and opencode, as a person sets them up: ``remindkit mcp
install-<host>`` in a project, the real CLI (npm, pinned) against a scripted stand-in of
the model API it speaks, ``remindkit serve`` running.

``test_<host>``: one conversation. The model is asked for a reminder and calls
``schedule_create`` through the CLI (the stand-in sees the tools the CLI listed); the
reminder's session is the CLI's own conversation id. The stand-in holds the model's next
answer while the reminder comes due, so the CLI is open, mid-turn, at the fire: nothing
may be recorded delivered while no model request carried it. When the turn ends the
CLI's hooks hand the fire in (Codex's Stop and Gemini's AfterAgent hooks with
``decision: block``, opencode's plugin) and the same CLI process sends it to the model.
Given it, the model sets a second reminder; the CLI ends before that one is due, and it
reaches the conversation through the resume preset, run by ``remindkit serve`` in the
project folder: recorded delivered only after the model got it.

``test_<host>_next_prompt``: installed without a resume preset; a reminder comes due while
the conversation sits idle (no CLI open) and waits; the person's next prompt into that
conversation carries it (UserPromptSubmit / BeforeAgent hook, opencode's plugin on the
message), and only then is it delivered.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from .conftest import HERE, World, cli, codex_trust_hooks, wait_for
from .standin import ModelStandin, Say, Turn

pytestmark = pytest.mark.hosts

ASK = "Please remind me to stretch, in a few seconds."
NEXT = "Anything new for me?"
STRETCH = "stretch-7c1e"  # fires during the held turn: back at the turn's end (hooks)
WATER = "water-41b9"  # set when the stretch one comes back; fires after the CLI quit
TEA = "tea-9d02"  # fires while the conversation sits idle: back with the next prompt
DUE_S = 4
WATER_S = 6


def fired(text: str) -> re.Pattern[str]:
    return re.compile(r'<schedule-fired id="rem_[^>]*>.*?reminder_text_json: "' + text, re.S)


class Brain:
    """The scripted model, deciding from what came after its last answer: asked for a
    reminder it sets one (``hold``: its answer to the tool's result waits until the test
    lets go); given the fired stretch reminder it sets the water one (``chain``); given
    any other fired block it says so."""

    def __init__(self, *, ask: str = ASK, text: str = STRETCH, hold: bool = True) -> None:
        self.ask, self.text = ask, text
        self.hold = threading.Event()
        self.held = threading.Event()
        if not hold:
            self.hold.set()

    def __call__(self, turn: Turn) -> Any:
        if not turn.tools:  # a CLI's side request (a title): not the conversation
            return Say("Reminders")
        tail = [(r, plain(t)) for r, t in tail_of(turn)]
        done = any(role == "tool" for role, _ in tail)
        if any(fired(WATER).search(t) or fired(TEA).search(t) for _, t in tail):
            return Say("That reminder is due now.")
        if any(fired(STRETCH).search(t) for _, t in tail):
            if done:
                return Say("Water reminder set.")
            return turn.call("schedule_create", prompt=WATER, after=f"{WATER_S}s", label="water")
        if any(self.ask in t for r, t in tail if r == "user"):
            if not done:
                return turn.call("schedule_create", prompt=self.text, after=f"{DUE_S}s")
            self.held.set()
            self.hold.wait(60)
            return Say("Reminder set.")
        return Say("Nothing new.")


def tail_of(turn: Turn) -> list[tuple[str, str]]:
    """What followed the model's last text answer (this step's prompt, calls, results)."""
    idx = max((i for i, (r, _) in enumerate(turn.texts) if r == "assistant"), default=-1)
    return [(r, t) for r, t in turn.texts[idx + 1 :] if r != "system"]


def plain(text: str) -> str:
    return text.replace("&lt;", "<").replace("&gt;", ">")


def requests_with(standin: ModelStandin, text: str) -> list[Turn]:
    """Model requests whose latest step carries the fired block of ``text`` (Gemini
    escapes ``<`` and ``>`` in a hook's additionalContext: the model reads it so)."""
    return [
        t
        for t in standin.seen()
        if any(
            fired(text).search(x.replace("&lt;", "<").replace("&gt;", ">")) for _, x in tail_of(t)
        )
    ]


def occurrence(api: Any, text: str) -> Any:
    rid = [r.id for r in api.list(all=True) if r.text == text]
    found = [o for o in api.history(reminder_id=rid[0])] if rid else []
    return found[0] if found else None


def state(api: Any, text: str) -> str | None:
    occ = occurrence(api, text)
    return None if occ is None else str(occ.state)


def session_of(api: Any, text: str) -> str:
    found = [r for r in api.list(all=True) if r.text == text]
    assert len(found) == 1, found
    return str(found[0].session)


def timeline(standin: ModelStandin, api: Any) -> str:
    """What the stand-in saw and what the store says, for a failure's message."""
    lines = [f"{t.at:.3f} {t.api} {[(r, x[:120]) for r, x in tail_of(t)]}" for t in standin.seen()]
    occs = [o for text in (STRETCH, WATER, TEA) if (o := occurrence(api, text)) is not None]
    lines += [
        f"{o.reminder_id} {o.state} delivered_at={o.delivered_at} error={o.error}" for o in occs
    ]
    return "\n".join(lines)


def at(ts: datetime | None) -> float:
    assert ts is not None
    return ts.replace(tzinfo=ts.tzinfo or timezone.utc).timestamp()


def during_the_turn(world: World, standin: ModelStandin, brain: Brain, start: Callable) -> Any:
    """The CLI creates the stretch reminder and is held mid-turn across its fire (it
    waits, not delivered, not sent); let go, the turn ends and the same CLI process sends
    the fired block to the model (its hooks); then the CLI ends. Returns the API."""
    api = world.api()
    proc = start()
    try:
        wait_for(lambda: brain.held.is_set() or proc.poll() is not None, 90, "the tool's result")
        assert proc.poll() is None, proc.communicate()
        session_of(api, STRETCH)
        wait_for(lambda: state(api, STRETCH) == "waiting", 60, "the fire waiting")
        time.sleep(1.0)  # a wrong delivery (a push nobody takes) would be recorded by now
        assert state(api, STRETCH) == "waiting", timeline(standin, api)
        why = str(occurrence(api, STRETCH).error)
        assert "remindkit hooks hand it in" in why, timeline(standin, api)
        assert not requests_with(standin, STRETCH)
    finally:
        let_go = time.time()
        brain.hold.set()
    out, err = proc.communicate(timeout=90)
    ended = time.time()
    assert proc.returncode == 0, (out, err[-3000:])
    got = requests_with(standin, STRETCH)
    assert got, f"the turn ended without the fire\n{timeline(standin, api)}\n{err[-3000:]}"
    assert got[0].at < ended  # sent by this CLI process, at the end of the held turn
    assert sum(len(fired(STRETCH).findall(plain(x))) for _, x in tail_of(got[0])) == 1
    occ = occurrence(api, STRETCH)
    assert occ.state == "delivered", timeline(standin, api)
    assert let_go <= at(occ.delivered_at) <= got[0].at + 0.5  # printed to the host, then sent
    return api


def after_quitting(world: World, standin: ModelStandin, api: Any) -> Turn:
    """The water reminder, due after the CLI ended, comes back through the resume preset:
    recorded delivered only after the resumed CLI sent it to the model."""
    assert [r.text for r in api.list(all=True) if r.text == WATER], timeline(standin, api)
    assert session_of(api, WATER) == session_of(api, STRETCH)
    turn = wait_for(lambda: requests_with(standin, WATER), 90, "the resumed request")[0]
    assert ASK in turn.all_text(), "the resumed request lacks the conversation's earlier turns"
    wait_for(lambda: state(api, WATER) == "delivered", 60, "the water fire recorded delivered")
    assert at(occurrence(api, WATER).delivered_at) >= turn.at, timeline(standin, api)
    return turn


def next_prompt(
    world: World, standin: ModelStandin, first: Callable, again: Callable[[str], Any]
) -> Turn:
    """``first()`` runs the CLI that sets the tea reminder and ends; the reminder comes
    due with no CLI open and waits; ``again(session)`` sends the next prompt into the
    conversation, which carries the fired block to the model."""
    api = world.api()
    out = first()
    assert out.returncode == 0, out.stderr[-3000:]
    session = session_of(api, TEA)
    wait_for(lambda: state(api, TEA) == "waiting", 60, "the tea fire waiting")
    time.sleep(0.5)
    assert state(api, TEA) == "waiting" and not requests_with(standin, TEA)
    sent = time.time()
    out = again(session)
    assert out.returncode == 0, out.stderr[-3000:]
    got = requests_with(standin, TEA)
    assert got, f"the next prompt came without the fire\n{timeline(standin, api)}"
    assert any(NEXT in t for _, t in tail_of(got[0])), "not with the next prompt"
    occ = occurrence(api, TEA)
    assert occ.state == "delivered", timeline(standin, api)
    assert sent <= at(occ.delivered_at) <= got[0].at + 0.5
    return got[0]


def in_system(turn: Turn, project: Path) -> None:
    """The resumed CLI ran in the project: its system prompt, built anew by that process,
    names the folder it runs in."""
    system = "\n".join(t for r, t in turn.texts if r == "system")
    assert str(project) in system, system[-2000:]


def popen(world: World, argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        cwd=world.project,
        env=world.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# -- Codex CLI -----------------------------------------------------------------------------


def codex_setup(world: World, url: str, *extra: str) -> str:
    codex = cli("codex")
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
    world.run(["git", "init", "-q"])  # a person's project; the preset's engine runs need not be
    out = world.install("codex", "--codex", codex, *extra)
    assert "[mcp_servers.remindkit]" in out
    # the person trusts the new hooks once (Codex asks at its next start)
    assert codex_trust_hooks(codex, world) == ["trusted"] * 3
    return codex


def test_codex(world: World, serve: Any) -> None:
    brain = Brain()
    with ModelStandin(brain) as standin:
        codex = codex_setup(world, standin.url)
        assert "STANDIN_KEY" in (world.project / ".codex" / "config.toml").read_text()
        assert "up to date" in world.install("codex", "--codex", codex)
        api = during_the_turn(world, standin, brain, lambda: popen(world, [codex, "exec", ASK]))
        assert "mcp__remindkit__schedule_create" in standin.seen()[0].tools
        session = session_of(api, STRETCH)
        threads = list((world.home / ".codex" / "sessions").rglob(f"rollout-*{session}.jsonl"))
        assert threads, f"{session} is not a Codex thread id"
        turn = after_quitting(world, standin, api)
        assert turn.api == "responses"
        # the resumed turn ran in the project: Codex records each turn's folder in the thread
        cwds = [
            json.loads(line)["payload"].get("cwd")
            for line in threads[0].read_text().splitlines()
            if json.loads(line).get("type") == "turn_context"
        ]
        assert len(cwds) >= 2 and cwds[-1] == str(world.project), cwds


def test_codex_next_prompt(world: World, serve: Any) -> None:
    brain = Brain(ask="Remind me about tea.", text=TEA, hold=False)
    with ModelStandin(brain) as standin:
        codex = codex_setup(world, standin.url, "--no-resume")
        next_prompt(
            world,
            standin,
            lambda: world.run([codex, "exec", "Remind me about tea."]),
            lambda sid: world.run([codex, "exec", "resume", sid, NEXT]),
        )


# -- Gemini CLI ----------------------------------------------------------------------------


def gemini_setup(world: World, url: str, *extra: str) -> str:
    gemini = cli("gemini")
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
    (gdir / ".env").write_text(f"GEMINI_API_KEY=test-key\nGOOGLE_GEMINI_BASE_URL={url}\n")
    out = world.install("gemini", "--gemini", gemini, *extra)
    assert "BeforeAgent" in out and "AfterAgent" in out
    return gemini


def test_gemini(world: World, serve: Any) -> None:
    brain = Brain()
    with ModelStandin(brain) as standin:
        gemini = gemini_setup(world, standin.url)
        api = during_the_turn(world, standin, brain, lambda: popen(world, [gemini, "-p", ASK]))
        first = [t for t in standin.seen() if t.tools][0]
        assert "mcp_remindkit_schedule_create" in first.tools
        session = session_of(api, STRETCH)
        assert re.fullmatch(r"[0-9a-f-]{36}", session), session  # Gemini's session, by its hooks
        after_quitting(world, standin, api)
        # Gemini keeps a project's sessions under its folder and resumes one only from there
        chats = list((world.home / ".gemini" / "tmp").rglob(f"session-*{session[:8]}*.jsonl"))
        assert chats and any(WATER in c.read_text() for c in chats), chats


def test_gemini_next_prompt(world: World, serve: Any) -> None:
    brain = Brain(ask="Remind me about tea.", text=TEA, hold=False)
    with ModelStandin(brain) as standin:
        gemini = gemini_setup(world, standin.url, "--no-resume")
        next_prompt(
            world,
            standin,
            lambda: world.run([gemini, "-p", "Remind me about tea."]),
            lambda sid: world.run([gemini, "--resume", sid, "-p", NEXT]),
        )


# -- opencode ------------------------------------------------------------------------------


def opencode_setup(world: World, url: str, *extra: str) -> str:
    opencode = cli("opencode")
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "standin": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Stand-in",
                "options": {"baseURL": f"{url}/v1", "apiKey": "sk-standin"},
                "models": {"standin-model": {"name": "Stand-in", "tool_call": True}},
            }
        },
        "model": "standin/standin-model",
        "small_model": "standin/standin-model",
        "permission": {"*": "allow"},
    }
    (world.project / "opencode.json").write_text(json.dumps(config, indent=2))
    out = world.install("opencode", "--opencode", opencode, *extra)
    assert "plugin/remindkit.js" in out
    assert (
        json.loads((world.project / "opencode.json").read_text())["provider"]
        == (config["provider"])
    )
    world.env.update({"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"})
    opencode_deps(world.project / ".opencode")
    return opencode


def opencode_deps(folder: Path) -> None:
    """opencode installs ``@opencode-ai/plugin`` into each config folder it loads (the
    project's ``.opencode``) on its first start there, from npm (about 10 s here, before
    anything else); the tests seed the folder as that install leaves it, with the same
    pinned package (``package.json`` beside this file), so that each run starts as a
    person's later runs do."""
    version = json.loads((HERE / "package.json").read_text())["devDependencies"]
    deps = {"@opencode-ai/plugin": version["@opencode-ai/plugin"]}
    (folder / "node_modules").symlink_to(HERE / "node_modules", target_is_directory=True)
    (folder / "package.json").write_text(json.dumps({"dependencies": deps}))
    lock = {"lockfileVersion": 3, "requires": True, "packages": {"": {"dependencies": deps}}}
    (folder / "package-lock.json").write_text(json.dumps(lock))


def test_opencode(world: World, serve: Any) -> None:
    brain = Brain()
    with ModelStandin(brain) as standin:
        opencode = opencode_setup(world, standin.url)
        api = during_the_turn(world, standin, brain, lambda: popen(world, [opencode, "run", ASK]))
        first = [t for t in standin.seen() if t.tools][0]
        assert "remindkit_schedule_create" in first.tools
        assert session_of(api, STRETCH).startswith("ses_")  # opencode's session, by the plugin
        turn = after_quitting(world, standin, api)
        in_system(turn, world.project)


def test_opencode_next_prompt(world: World, serve: Any) -> None:
    brain = Brain(ask="Remind me about tea.", text=TEA, hold=False)
    with ModelStandin(brain) as standin:
        opencode = opencode_setup(world, standin.url, "--no-resume")
        next_prompt(
            world,
            standin,
            lambda: world.run([opencode, "run", "Remind me about tea."]),
            lambda sid: world.run([opencode, "run", "--session", sid, NEXT]),
        )


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
