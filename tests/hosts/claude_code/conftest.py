"""The real Claude Code (npm, pinned in package.json / package-lock.json, installed by
``scripts/setup --test``) driven in tmux against the Messages API stand-in.

Its HOME is a folder of the test's, with what a person answers once already answered in
``~/.claude.json`` (onboarding, the API key, trust in the project, the auto-mode nudge)
and the remindkit tools allowed in ``~/.claude/settings.json``. remindkit is set up the
way a person sets it up: ``remindkit mcp install-claude-code`` in the project (or the
plugin, ``claude --plugin-dir``). Nothing leaves loopback: ``ANTHROPIC_BASE_URL`` is the
stand-in and Claude Code's non-essential traffic, telemetry and updater are off.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from remindkit.clock import SystemClock, now_us
from remindkit.mcp import identity
from remindkit.sessions.mcp import LEASE_PREFIX
from remindkit.settings import Settings
from remindkit.store import open_store

from .messages_api import MessagesStandIn, Request

ROOT = Path(__file__).resolve().parents[3]
CLAUDE = Path(__file__).resolve().parent / "node_modules" / ".bin" / "claude"
REMINDKIT = Path(sys.executable).parent / "remindkit"
KEY = "sk-ant-api03-remindkit-test-0123456789abcdefghijklmnopqrstuvwxyz"
START_S = 90.0  # Claude Code and its remindkit server starting on a loaded machine
_sockets = itertools.count(1)

pytestmark = pytest.mark.hosts


def claude_available() -> None:
    if not CLAUDE.exists() or shutil.which("tmux") is None:
        pytest.fail(
            f"Claude Code is not installed at {CLAUDE} (scripts/setup --test), or tmux is missing"
        )


def wait_for(
    cond: Callable[[], Any], timeout: float, what: str, log: Callable[[], str] | None = None
) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f}s waiting for {what}\n{log() if log else ''}"
            )
        time.sleep(0.05)


class ClaudeCode:
    """One Claude Code in a tmux session of its own (a private tmux server)."""

    def __init__(self, tmp: Path, api: MessagesStandIn, *, channels: bool) -> None:
        self.tmp = tmp
        self.api = api
        self.channels = channels
        self.home = tmp / "home"
        self.project = tmp / "project"
        self.rk_home = tmp / "rk"
        self.db = f"sqlite:///{tmp / 'rk.db'}"
        self.debug = tmp / "claude-debug.log"
        self.socket = f"rk-cc-{os.getpid()}-{next(_sockets)}"
        for d in (self.home / ".claude", self.project, self.rk_home):
            d.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "hasCompletedOnboarding": True,
            "numStartups": 5,
            "hasSeenAutoDefaultNudge": True,
            "customApiKeyResponses": {"approved": [KEY[-20:]], "rejected": []},
            "projects": {
                str(self.project): {
                    "hasTrustDialogAccepted": True,
                    "hasCompletedProjectOnboarding": True,
                    "allowedTools": [],
                }
            },
        }
        if channels:
            # Claude Code's channels are a rollout flag, off offline: turned on here the way
            # Claude Code itself keeps fetched flags, in ~/.claude.json's
            # cachedGrowthBookFeatures (tengu_harbor), which it reads with telemetry off
            # only under CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF=1 (set in env()).
            config["cachedGrowthBookFeatures"] = {"tengu_harbor": True}
        (self.home / ".claude.json").write_text(json.dumps(config))
        settings = {
            "permissions": {
                "allow": ["mcp__remindkit", "mcp__plugin_remindkit_remindkit"],
                "defaultMode": "manual",
            }
        }
        (self.home / ".claude" / "settings.json").write_text(json.dumps(settings))

    # -- environment ---------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "ANTHROPIC_API_KEY": KEY,
            "ANTHROPIC_BASE_URL": self.api.url,
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "REMINDKIT_HOME": str(self.rk_home),
            "REMINDKIT_DB": self.db,
            "REMINDKIT_LEASE": "3",
            "REMINDKIT_WAIT_CAP": "2",
            "PYTHONPATH": str(ROOT),
        }
        if self.channels:
            env["CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF"] = "1"
        return env

    def remindkit(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [str(REMINDKIT), *argv], env=self.env(), text=True, capture_output=True, timeout=120
        )
        if check:
            assert proc.returncode == 0, proc.stderr
        return proc

    def install(self, *extra: str) -> None:
        """``remindkit mcp install-claude-code`` in the project, as a person runs it."""
        self.remindkit(
            "mcp",
            "install-claude-code",
            "--project",
            str(self.project),
            "--command",
            str(REMINDKIT),
            *extra,
        )

    def resume_argv(self) -> list[str]:
        return [str(CLAUDE), "-p", "--resume", "{session}", "--output-format", "json"]

    PASSED = (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
    )

    # -- tmux ----------------------------------------------------------------------------

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, *args],
            text=True,
            capture_output=True,
            check=check,
            timeout=30,
        )

    def start(self, *flags: str) -> None:
        args = [str(CLAUDE), "--debug-file", str(self.debug), *flags]
        if self.channels:
            args += ["--dangerously-load-development-channels", "server:remindkit"]
        line = "exec env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env().items())
        line += " " + shlex.join(args)
        self.tmux(
            "new-session", "-d", "-s", "cc", "-x", "200", "-y", "50", "-c", str(self.project), line
        )
        if self.channels:
            wait_for(
                lambda: "local development" in self.screen(),
                START_S,
                "the development-channels warning",
                self.log,
            )
            self.tmux("send-keys", "-t", "cc", "Enter")
        wait_for(self._connected, START_S, "Claude Code's remindkit server connected", self.log)

    def _connected(self) -> bool:
        text = self.debug.read_text(errors="replace") if self.debug.exists() else ""
        if "Connection established" not in text or not self.session_id():
            return False
        return self.lease() is not None and "❯" in self.screen()

    def screen(self) -> str:
        got = self.tmux("capture-pane", "-p", "-t", "cc", check=False)
        return got.stdout

    def log(self) -> str:
        text = self.debug.read_text(errors="replace") if self.debug.exists() else ""
        keep = [
            line
            for line in text.splitlines()
            if "remindkit" in line or "hook" in line.lower() or "channel" in line.lower()
        ]
        return (
            "screen:\n"
            + self.screen()
            + "\ndebug (remindkit, hooks, channels):\n"
            + "\n".join(keep[-60:])
        )

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "cc", "-l", text)
        time.sleep(0.2)  # the input box takes the paste before Enter
        self.tmux("send-keys", "-t", "cc", "Enter")

    def quit(self) -> None:
        self.type("/exit")
        wait_for(
            lambda: self.tmux("has-session", "-t", "cc", check=False).returncode != 0,
            60,
            "Claude Code to exit",
            self.log,
        )

    def close(self) -> None:
        self.tmux("kill-server", check=False)

    # -- what it did ---------------------------------------------------------------------

    def session_id(self) -> str | None:
        found = identity.read_bindings(identity.bindings_file(self.rk_home, self.project.resolve()))
        return max(found, key=lambda b: b.at).session_id if found else None

    def store(self):  # type: ignore[no-untyped-def]
        return open_store(
            self.db, settings=Settings.from_env({"REMINDKIT_HOME": str(self.rk_home)})
        )

    def lease(self) -> str | None:
        sid = self.session_id()
        if sid is None:
            return None
        store = self.store()
        try:
            return store.coordination.lease_holder(LEASE_PREFIX + sid, now_us=now_us(SystemClock()))
        finally:
            store.close()

    def history(self) -> list[Any]:
        store = self.store()
        try:
            sid = self.session_id()
            return store.reminders.history(session=sid, limit=500) if sid else []
        finally:
            store.close()

    def reminders(self) -> list[Any]:
        store = self.store()
        try:
            from remindkit.reminders import Reminders

            return Reminders(store).list(session=self.session_id(), all=True)
        finally:
            store.close()

    def era(self) -> str:
        """The protocol revision Claude Code says it negotiated with remindkit."""
        import re

        text = self.debug.read_text(errors="replace") if self.debug.exists() else ""
        found = re.findall(r'"negotiatedProtocolVersion":"([0-9-]+)"', text)
        return found[-1] if found else ""

    def server_ending(self) -> list[str]:
        """Claude Code's debug lines about ending remindkit's server at its exit: it sends
        SIGINT, polls every 50 ms, then SIGTERM after 100 ms and SIGKILL 400 ms later
        ("SIGINT failed, sending SIGTERM…", "SIGTERM failed, sending SIGKILL…")."""
        text = self.debug.read_text(errors="replace") if self.debug.exists() else ""
        return [
            line
            for line in text.splitlines()
            if "remindkit" in line and "MCP server process" in line
        ]

    def channel_events(self) -> int:
        text = self.debug.read_text(errors="replace") if self.debug.exists() else ""
        return text.count("notifications/claude/channel (")


def fired_in(req: Request, rid: str) -> bool:
    """Does this request bring the fire of ``rid`` to the model as something new?"""
    return f'<schedule-fired id="{rid}"' in req.new_text()


def carried(api: MessagesStandIn, rid: str) -> list[Request]:
    return [r for r in api.turns() if fired_in(r, rid)]


def assert_delivered_only_what_the_model_saw(cc: ClaudeCode) -> None:
    """Nothing is recorded delivered that the model did not receive: every delivered
    occurrence's fired block is in a request the stand-in got."""
    seen = "\n".join(r.all_text() for r in cc.api.turns())
    for occ in cc.history():
        if occ.state == "delivered":
            assert f'<schedule-fired id="{occ.reminder_id}"' in seen, (
                f"{occ.key} recorded delivered, never sent"
            )


def serve(cc: ClaudeCode) -> Any:
    """``remindkit serve``: an engine that outlives Claude Code (its resume command runs
    there), with Claude Code's variables in its environment for ``--pass-env``."""
    from tests.processes.conftest import Serve

    engine = Serve(cc.db, cc.rk_home, env=cc.env(), name="keeper")
    engine.wait_ready(START_S)
    return engine


@pytest.fixture
def api() -> Iterator[MessagesStandIn]:
    server = MessagesStandIn().start()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def claude(
    tmp_path: Path, api: MessagesStandIn, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ClaudeCode]]:
    claude_available()
    made: list[ClaudeCode] = []

    def make(*, channels: bool) -> ClaudeCode:
        cc = ClaudeCode(tmp_path / f"cc{len(made)}", api, channels=channels)
        made.append(cc)
        return cc

    try:
        yield make
    finally:
        for cc in made:
            cc.close()
