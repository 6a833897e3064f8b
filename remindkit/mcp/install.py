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
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidInput

SERVER_KEY = "remindkit"
HOOK_EVENTS = (
    ("SessionStart", "mcp hook start"),
    ("UserPromptSubmit", "mcp hook prompt"),
    ("Stop", "mcp hook stop"),
)
# the hook commands of earlier installs, replaced by the ones above
OLD_HOOK_TAILS = (
    " mcp bind",
    " session busy --hook",
    " session idle --hook",
    " mcp hook start",
    " mcp hook prompt",
    " mcp hook stop",
)


def server_entry(command: str | list[str], args: list[str]) -> dict[str, Any]:
    """``{"command", "args"}``: ``command`` is one executable, or an argv list (never
    a shell line to split)."""
    argv = [command] if isinstance(command, str) else list(command)
    return {"command": argv[0], "args": [*argv[1:], *args]}


def hooks_config(command: str | list[str] = "remindkit") -> dict[str, Any]:
    """The ``hooks`` block of Claude Code settings."""
    argv = [command] if isinstance(command, str) else list(command)
    return {
        event: [{"hooks": [{"type": "command", "command": _hook_line(argv, tail)}]}]
        for event, tail in HOOK_EVENTS
    }


def _hook_line(argv: list[str], tail: str) -> str:
    return shlex.join([*argv, *tail.split()])


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


def _with_server(path: Path, entry: dict[str, Any], *, start: str | None = None) -> Change:
    before, data = _load(path)
    if start is not None:
        data = json.loads(start) if start.strip() else {}
    servers = data.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise InvalidInput(f"{path}: mcpServers is not an object", code="invalid_argument")
    if (servers or {}).get(SERVER_KEY) == entry:
        return Change(path, before, before if start is None else start)
    data["mcpServers"] = {**(servers or {}), SERVER_KEY: entry}
    return Change(path, before, _dump(data))


def _is_ours(hook: Any) -> bool:
    line = hook.get("command") if isinstance(hook, dict) else None
    return isinstance(line, str) and "remindkit" in line and line.endswith(OLD_HOOK_TAILS)


def _with_settings(
    path: Path,
    argv: list[str],
    *,
    approve: bool,
    env: dict[str, str],
) -> Change:
    """Claude Code settings at ``path`` with remindkit's hooks (earlier remindkit hook
    lines replaced, every other hook kept), the project server approved, ``env``."""
    before, data = _load(path)
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: hooks is not an object", code="invalid_argument")
    hooks = dict(hooks or {})
    for event, tail in HOOK_EVENTS:
        groups = hooks.get(event)
        if groups is not None and not isinstance(groups, list):
            raise InvalidInput(f"{path}: hooks.{event} is not a list", code="invalid_argument")
        line = _hook_line(argv, tail)
        kept: list[Any] = []
        for g in groups or []:
            if isinstance(g, dict) and isinstance(g.get("hooks"), list):
                rest = [h for h in g["hooks"] if not _is_ours(h)]
                if rest:
                    kept.append({**g, "hooks": rest})
            else:
                kept.append(g)
        kept.append({"hooks": [{"type": "command", "command": line}]})
        hooks[event] = kept
    data["hooks"] = hooks
    if approve:
        enabled = data.get("enabledMcpjsonServers")
        if enabled is not None and not isinstance(enabled, list):
            raise InvalidInput(
                f"{path}: enabledMcpjsonServers is not a list", code="invalid_argument"
            )
        if SERVER_KEY not in (enabled or []):
            data["enabledMcpjsonServers"] = [*(enabled or []), SERVER_KEY]
    if env:
        current = data.get("env")
        if current is not None and not isinstance(current, dict):
            raise InvalidInput(f"{path}: env is not an object", code="invalid_argument")
        data["env"] = {**(current or {}), **env}
    after = _dump(data)
    if before.strip() and _same_json(before, after):
        return Change(path, before, before)
    return Change(path, before, after)


def _same_json(a: str, b: str) -> bool:
    try:
        return bool(json.loads(a) == json.loads(b))
    except ValueError:
        return False


def claude_code_changes(
    *,
    project: Path,
    user: bool,
    command: str | None = None,
    resume_command: str | None = None,
    pass_env: list[str] | tuple[str, ...] = (),
    shared: bool = False,
    home: Path | None = None,
    environ: dict[str, str] | None = None,
) -> list[Change]:
    """What ``install-claude-code`` writes (see the module's docstring): ``command`` is
    the one executable that starts remindkit (default: this ``remindkit``, by its
    absolute path)."""
    from .hosts.common import check_target, remindkit_command, remindkit_env

    if command is not None and not Path(command).expanduser().is_file():
        found = shutil.which(command)
        if found is None:
            raise InvalidInput(
                f"--command {command!r} is not an executable (give one path, not a shell line)",
                code="invalid_argument",
            )
        command = found
    argv = remindkit_command(command)
    args = ["mcp"]
    if resume_command:
        args += ["--resume-command", resume_command]
    for name in pass_env:
        args += ["--pass-env", name]
    env = remindkit_env(environ)
    entry = server_entry(argv, args)
    if env:
        entry["env"] = dict(env)
    if user:
        base = (home or Path.home()).resolve()
        return [
            _with_server(check_target(base / ".claude.json", base), entry),
            _with_settings(
                check_target(base / ".claude" / "settings.json", base), argv, approve=False, env=env
            ),
        ]
    root = project.resolve()
    settings = ".claude/settings.json" if shared else ".claude/settings.local.json"
    return [
        _with_server(check_target(root / ".mcp.json", root), entry),
        _with_settings(check_target(root / settings, root), argv, approve=True, env=env),
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
