"""Configuration for MCP hosts: ``remindkit mcp install`` (snippets for Claude
Desktop, Cursor and VS Code) and ``remindkit mcp install-claude-code`` (writes
``.mcp.json`` and the hooks into a project, or ``--user`` into the user's
settings; idempotent, shows the diff).

The Claude Code hooks make delivery idle-only and tell the server which
conversation it serves:

* ``SessionStart`` → ``remindkit mcp bind``: records the host's ``session_id``
  for the project (see :mod:`remindkit.mcp.identity`) and marks it idle;
* ``UserPromptSubmit`` → ``remindkit session busy --hook``: fires wait;
* ``Stop`` → ``remindkit session idle --hook``: waiting fires are pushed.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

SERVER_KEY = "remindkit"
HOOK_EVENTS = (
    ("SessionStart", "mcp bind"),
    ("UserPromptSubmit", "session busy --hook"),
    ("Stop", "session idle --hook"),
)


def server_entry(command: str, args: list[str]) -> dict[str, Any]:
    argv = shlex.split(command)
    return {"command": argv[0], "args": [*argv[1:], *args]}


def hooks_config(command: str = "remindkit") -> dict[str, Any]:
    """The ``hooks`` block of Claude Code settings."""
    return {
        event: [{"hooks": [{"type": "command", "command": f"{command} {tail}"}]}]
        for event, tail in HOOK_EVENTS
    }


def snippets(command: str = "remindkit") -> str:
    """JSON for hosts without hooks (fires reach them by the tray, a notebook, or a
    resume command; each gets a fixed session id)."""
    desktop = {
        "mcpServers": {SERVER_KEY: server_entry(command, ["mcp", "--session", "claude-desktop"])}
    }
    cursor = {"mcpServers": {SERVER_KEY: server_entry(command, ["mcp", "--session", "cursor"])}}
    vscode = {
        "servers": {
            SERVER_KEY: {"type": "stdio", **server_entry(command, ["mcp", "--session", "vscode"])}
        }
    }
    return "\n".join(
        [
            "# Claude Desktop: claude_desktop_config.json (Settings > Developer > Edit Config)",
            json.dumps(desktop, indent=2),
            "",
            "# Cursor: .cursor/mcp.json in the project, or ~/.cursor/mcp.json",
            json.dumps(cursor, indent=2),
            "",
            "# VS Code: .vscode/mcp.json in the workspace",
            json.dumps(vscode, indent=2),
            "",
            "# Claude Code: remindkit mcp install-claude-code  (writes .mcp.json and the hooks)",
            "",
        ]
    )


@dataclass(frozen=True)
class Change:
    path: Path
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.before.splitlines(keepends=True),
                self.after.splitlines(keepends=True),
                fromfile=f"{self.path} (before)",
                tofile=f"{self.path} (after)",
            )
        )


def _load(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", code="invalid_argument") from None
    if not text.strip():
        return text, {}
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidInput(
            f"{path} is not JSON ({exc}); fix or move it first", code="invalid_argument"
        ) from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path} does not hold a JSON object", code="invalid_argument")
    return text, data


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def _with_server(path: Path, entry: dict[str, Any]) -> Change:
    before, data = _load(path)
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: mcpServers is not an object", code="invalid_argument")
    if (servers or {}).get(SERVER_KEY) == entry:
        return Change(path, before, before)
    data["mcpServers"] = {**(servers or {}), SERVER_KEY: entry}
    return Change(path, before, _dump(data))


def _with_hooks(path: Path, command: str) -> Change:
    before, data = _load(path)
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: hooks is not an object", code="invalid_argument")
    hooks = dict(hooks or {})
    added = False
    for event, tail in HOOK_EVENTS:
        line = f"{command} {tail}"
        groups = hooks.get(event)
        if groups is not None and not isinstance(groups, list):
            raise InvalidInput(f"{path}: hooks.{event} is not a list", code="invalid_argument")
        groups = list(groups or [])
        present = any(
            isinstance(g, dict)
            and any(isinstance(h, dict) and h.get("command") == line for h in g.get("hooks") or [])
            for g in groups
        )
        if not present:
            groups.append({"hooks": [{"type": "command", "command": line}]})
            hooks[event] = groups
            added = True
    if not added:
        return Change(path, before, before)
    data["hooks"] = hooks
    return Change(path, before, _dump(data))


def claude_code_changes(
    *,
    project: Path,
    user: bool,
    command: str = "remindkit",
    resume_command: str | None = None,
    home: Path | None = None,
) -> list[Change]:
    """What ``install-claude-code`` writes: the server (project ``.mcp.json``, or the
    user's ``~/.claude.json``) and the hooks (``.claude/settings.json`` of the project,
    or ``~/.claude/settings.json``)."""
    args = ["mcp"]
    if resume_command:
        args += ["--resume-command", resume_command]
    entry = server_entry(command, args)
    if user:
        base = home or Path.home()
        return [
            _with_server(base / ".claude.json", entry),
            _with_hooks(base / ".claude" / "settings.json", command),
        ]
    return [
        _with_server(project / ".mcp.json", entry),
        _with_hooks(project / ".claude" / "settings.json", command),
    ]


def write(change: Change) -> None:
    if not change.changed:
        return
    change.path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(
        dir=change.path.parent, prefix=f".{change.path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(change.after)
        if change.path.exists():
            os.chmod(tmp, change.path.stat().st_mode & 0o7777)
        os.replace(tmp, change.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = [
    "HOOK_EVENTS",
    "Change",
    "claude_code_changes",
    "hooks_config",
    "server_entry",
    "snippets",
    "write",
]
