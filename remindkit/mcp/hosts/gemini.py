"""Gemini CLI (``@google/gemini-cli``): ``remindkit mcp install-gemini``.

What it writes (the project's ``.gemini/settings.json``, or ``--user``:
``~/.gemini/settings.json``; ``GEMINI_CLI_HOME`` moves the home):

* ``mcpServers.remindkit``: the absolute command, ``env`` with ``REMINDKIT_HOME`` /
  ``REMINDKIT_DB`` when set, and ``trust: true`` (the reminder tools run without a
  confirmation, in ``gemini -p`` too);
* ``hooks``: ``SessionStart`` → ``remindkit mcp bind``, ``BeforeAgent`` → ``remindkit
  session busy --hook``, ``AfterAgent`` → ``remindkit session idle --hook``. Gemini's hook
  JSON carries ``session_id`` (its session UUID) and ``cwd``; ``AfterAgent`` takes
  ``{"decision": "block", "reason": …}`` as a new prompt and ``BeforeAgent`` takes
  ``hookSpecificOutput.additionalContext``, as Claude Code's ``Stop`` and
  ``UserPromptSubmit`` do.

Gemini reads a project's settings only in a trusted folder (it asks). The resume preset:
``gemini --resume {session} -p <a line>`` with the fired message on stdin (``-p`` is
appended to it), run in the project folder (Gemini keeps sessions per project), with
``GEMINI_API_KEY``, ``GOOGLE_API_KEY`` and ``GEMINI_CLI_HOME`` passed on; a key in
``~/.gemini/.env`` needs nothing passed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .common import (
    Plan,
    Preset,
    check_target,
    executable,
    hook_line,
    remindkit_command,
    remindkit_env,
    server_args,
    with_entry,
    with_hooks,
)

NAME = "gemini"
TITLE = "Gemini CLI"
SERVER_KEY = "remindkit"
# its clientInfo.name: the hooks hand fires in to it (Gemini's AfterAgent hook takes ``decision: block`` and its BeforeAgent hook ``additionalContext``)
MCP_CLIENT = "gemini-cli-mcp-client"
HOOK_EVENTS = (
    ("SessionStart", "mcp bind"),
    ("BeforeAgent", "session busy --hook"),
    ("AfterAgent", "session idle --hook"),
)
KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GEMINI_CLI_HOME")
RESUME_PROMPT = (
    "(A reminder set earlier in this conversation fired: the <schedule-fired> block above.)"
)
HOOK_TIMEOUT_MS = 30_000


def gemini_home(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("GEMINI_CLI_HOME") or Path.home()).expanduser() / ".gemini"


def preset(gemini: str | None = None) -> Preset:
    argv = (executable("gemini", gemini), "--resume", "{session}", "-p", RESUME_PROMPT)
    return Preset(argv, KEY_ENV)


def plan(
    *,
    project: Path,
    user: bool,
    command: str | None = None,
    host_executable: str | None = None,
    resume: bool = True,
    pass_env: tuple[str, ...] = (),
    environ: dict[str, str] | None = None,
) -> Plan:
    home = gemini_home(environ)
    root = home if user else project
    settings = check_target((home if user else project / ".gemini") / "settings.json", root)
    rk = remindkit_command(command)
    the_preset = preset(host_executable) if resume else None
    entry: dict[str, Any] = {
        "command": rk[0],
        "args": [*rk[1:], *server_args(the_preset, pass_env)],
        "trust": True,
    }
    env = remindkit_env(environ)
    if env:
        entry["env"] = env
    hooks = [(event, hook_line(rk, tail)) for event, tail in HOOK_EVENTS]
    server = with_entry(settings, ("mcpServers", SERVER_KEY), entry)
    # one file, two edits: the hooks are added to what the server edit left
    changes = [with_hooks(settings, hooks, timeout=HOOK_TIMEOUT_MS, start=server.after)]
    notes = (
        []
        if user
        else [f"Gemini reads {settings} only in a trusted folder: trust {project} when it asks."]
    )
    return Plan(changes, notes)


__all__ = ["HOOK_EVENTS", "NAME", "plan", "preset"]
