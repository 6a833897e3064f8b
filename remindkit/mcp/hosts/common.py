"""What the agent-CLI installers share: the command that starts remindkit (an absolute
path, so hooks and servers work without ``PATH``), the server's arguments with a resume
preset, the variables a host does not pass on by itself, and the rule for where an
installer may write (never through a symlink, never outside the project or home it was
given)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...errors import InvalidInput
from ..install import Change, _dump, _load

# Variables of remindkit's own that a host may drop before it starts a server or a hook;
# an installer copies the ones set when it runs into the host's config.
REMINDKIT_ENV = ("REMINDKIT_HOME", "REMINDKIT_DB")


@dataclass(frozen=True)
class Preset:
    """A resume preset: the command line that delivers a fire into a conversation of the
    host while the host is closed (``{session}`` and ``{message}`` replaced; the message is
    also on stdin), and the names of the engine's variables it needs. The engine runs it in
    the session's project folder."""

    argv: tuple[str, ...]
    pass_env: tuple[str, ...] = ()

    def line(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True)
class Plan:
    """What an installer writes, and what the person still has to do."""

    changes: list[Change]
    notes: list[str] = field(default_factory=list)


def remindkit_command(explicit: str | None = None) -> list[str]:
    """How a host starts remindkit: ``explicit`` (one executable path, not split like a
    shell line), else this ``remindkit`` executable by its absolute path, else this
    Python with ``-m remindkit``."""
    if explicit:
        found = shutil.which(explicit) if os.sep not in explicit else explicit
        return [str(Path(found or explicit).expanduser().absolute())]
    me = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if me is not None and me.name == "remindkit" and me.exists():
        return [str(me.absolute())]
    found = shutil.which("remindkit")
    if found:
        return [str(Path(found).absolute())]
    return [sys.executable, "-m", "remindkit"]


def executable(name: str, explicit: str | None = None) -> str:
    """The host's own executable for its resume preset: ``explicit``, else ``name`` found
    on ``PATH`` (absolute), else the bare name."""
    if explicit:
        return str(Path(explicit).expanduser().absolute())
    found = shutil.which(name)
    return str(Path(found).absolute()) if found else name


def server_args(preset: Preset | None, extra_env: tuple[str, ...] = ()) -> list[str]:
    """``remindkit mcp`` for an agent CLI: tools only (these hosts take no channel events),
    and the resume preset with the variables it needs."""
    args = ["mcp", "--no-channel"]
    if preset is not None:
        args += ["--resume-command", preset.line()]
        for name in dict.fromkeys([*preset.pass_env, *extra_env]):
            args += ["--pass-env", name]
    return args


def remindkit_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    env = os.environ if environ is None else environ
    return {k: env[k] for k in REMINDKIT_ENV if env.get(k)}


def hook_line(command: list[str], tail: str) -> str:
    return shlex.join([*command, *tail.split()])


def _start(path: Path, start: str | None) -> tuple[str, dict[str, Any]]:
    before, data = _load(path)
    if start is not None:  # a second edit of the same file: on top of the first
        data = json.loads(start) if start.strip() else {}
    return before, data


def with_hooks(
    path: Path,
    events: list[tuple[str, str]],
    *,
    timeout: int | None = None,
    start: str | None = None,
) -> Change:
    """``path`` (a JSON file with a Claude-style ``hooks`` object: event → groups → command
    hooks) with each ``(event, command line)`` present once; the rest of the file kept."""
    before, data = _start(path, start)
    hooks = data.get("hooks")
    if hooks is not None and not isinstance(hooks, dict):
        raise InvalidInput(f"{path}: hooks is not an object", code="invalid_argument")
    hooks = dict(hooks or {})
    added = False
    for event, line in events:
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
            hook: dict[str, Any] = {"type": "command", "command": line}
            if timeout is not None:
                hook["timeout"] = timeout
            groups.append({"hooks": [hook]})
            hooks[event] = groups
            added = True
    if not added:
        return Change(path, before, before if start is None else start)
    data["hooks"] = hooks
    return Change(path, before, _dump(data))


def with_entry(
    path: Path, keys: tuple[str, ...], entry: Any, *, start: str | None = None
) -> Change:
    """``path`` (JSON) with ``entry`` at ``keys`` (objects made on the way); the rest kept."""
    before, data = _start(path, start)
    node = data
    for key in keys[:-1]:
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        if not isinstance(child, dict):
            raise InvalidInput(f"{path}: {key} is not an object", code="invalid_argument")
        node = child
    if node.get(keys[-1]) == entry:
        return Change(path, before, before if start is None else start)
    node[keys[-1]] = entry
    return Change(path, before, _dump(data))


def check_target(path: Path, root: Path) -> Path:
    """``path`` if writing it stays inside ``root``: the file is not a symlink, and no
    folder on the way resolves outside ``root``. Refused with ``unsafe_path``."""
    root = root.resolve()
    if path.is_symlink():
        raise InvalidInput(
            f"{path} is a symlink; remindkit does not write through it (replace it with the file)",
            code="unsafe_path",
        )
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    resolved = parent.resolve()
    if resolved != root and root not in resolved.parents:
        raise InvalidInput(
            f"{path.parent} resolves to {resolved}, outside {root}; remindkit does not write there",
            code="unsafe_path",
        )
    return path


__all__ = [
    "REMINDKIT_ENV",
    "Plan",
    "Preset",
    "check_target",
    "executable",
    "hook_line",
    "remindkit_command",
    "remindkit_env",
    "server_args",
    "with_entry",
    "with_hooks",
]
