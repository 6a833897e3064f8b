"""Configuration for MCP hosts: ``remindkit mcp install`` (snippets for Claude
Desktop, Cursor and VS Code) and ``remindkit mcp install-claude-code`` (writes the
server and the hooks into a project, or ``--user`` into the user's settings;
idempotent, shows the diff).

For a project: the server in ``.mcp.json``; the hooks, the approval of that server
(``enabledMcpjsonServers``) and ``REMINDKIT_HOME`` / ``REMINDKIT_DB`` (when set) in
``.claude/settings.local.json``, personal and not checked in (``--shared``:
``.claude/settings.json``). ``--user``: the server in ``~/.claude.json``, the hooks
in ``~/.claude/settings.json``. Commands are absolute (hooks run without ``PATH``);
no file is read or written through a symlink, nor in a folder that resolves outside
the project (or the home, for ``--user``).

The Claude Code writes are :func:`remindkit.mcp.hosts.claude_code.claude_code_changes`.
The hooks (:mod:`remindkit.mcp.hooks`) tell the server which conversation it serves
and bring the fires back into it:

* ``SessionStart`` → ``remindkit mcp hook start``: binds the session, marks it idle;
* ``UserPromptSubmit`` → ``remindkit mcp hook prompt``: marks it busy, hands in what
  came due while it sat idle;
* ``Stop`` → ``remindkit mcp hook stop``: hands in what came due during the turn,
  else marks it idle.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

SERVER_KEY = "remindkit"


def server_entry(command: str | list[str], args: list[str]) -> dict[str, Any]:
    """``{"command", "args"}``: ``command`` is one executable, or an argv list (never
    a shell line to split)."""
    argv = [command] if isinstance(command, str) else list(command)
    return {"command": argv[0], "args": [*argv[1:], *args]}


def plugin_dir() -> Path:
    """remindkit's Claude Code plugin (the MCP server, the hooks, /remind, /reminders,
    /callbacks): ``claude --plugin-dir`` it, or add the marketplace that lists it."""
    return Path(__file__).resolve().parent.parent / "claude_plugin"


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
    try:  # never through a symlink (it would read a file elsewhere into this one)
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "r", encoding="utf-8") as fh:
            text = fh.read()
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
    "SERVER_KEY",
    "Change",
    "plugin_dir",
    "server_entry",
    "snippets",
    "write",
]
