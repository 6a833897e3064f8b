"""Claude Code: what it takes from the MCP server on stdio, and ``remindkit mcp
install-claude-code``.

What the MCP host on the other end of stdio will take.

A host declares that it takes channel events with the client capability
``experimental["claude/channel"]``. Claude Code (2.1.332) declares nothing: it
registers its handler for ``notifications/claude/channel`` only when all of its
own checks pass, and says so only in its debug log. :func:`claude_code_channel`
reads the same facts from outside, the conservative way (when in doubt: no
channel, and the hooks bring the fires):

* the connection is on the handshake era: on the 2026-07-28 revision Claude Code
  skips channels ("no unsolicited notification path"), so the server answers its
  ``server/discover`` with the handshake versions when it wants the channel;
* the user named this server for this session: ``--dangerously-load-development-channels
  server:remindkit`` (or ``plugin:remindkit@…``) on Claude Code's command line, or
  ``--channels plugin:remindkit@M`` with that plugin on the approved list
  (``tengu_harbor_ledger``, or the managed ``allowedChannelPlugins``);
* its rollout switch is on: ``tengu_harbor`` in the cached flags of its config file
  (``cachedGrowthBookFeatures`` in ``~/.claude.json``, or ``$CLAUDE_CONFIG_DIR``),
  which Claude Code reads with telemetry off only when
  ``CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF`` is set;
* it talks to Anthropic's API (not Bedrock, Vertex or Foundry), and no managed
  settings leave ``channelsEnabled`` off.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import InvalidInput
from ..install import SERVER_KEY, Change, _dump, _load, server_entry
from .common import check_target, remindkit_command, remindkit_env

CHANNEL_CAPABILITY = "claude/channel"
CLAUDE_CODE = "claude-code"  # its clientInfo.name
SERVER_NAME = "remindkit"  # the key of the server in .mcp.json, and the plugin's name
DEV_FLAG = "--dangerously-load-development-channels"
CHANNELS_FLAG = "--channels"
ROLLOUT = "tengu_harbor"
LEDGER = "tengu_harbor_ledger"
MAX_CONFIG = 32 << 20  # bytes of Claude Code's config file read at most
_PROVIDERS = ("CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_USE_FOUNDRY")
_TELEMETRY_OFF = ("DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")


def declares_channel(capabilities: Mapping[str, Any] | None) -> bool:
    experimental = (capabilities or {}).get("experimental")
    return isinstance(experimental, dict) and CHANNEL_CAPABILITY in experimental


def claude_code_channel(
    *,
    pids: Sequence[int] | None = None,
    env: Mapping[str, str] | None = None,
    name: str | None = None,
) -> str | None:
    """None when the Claude Code process among ``pids`` (default: this process's
    ancestors) will take this server's channel events; else why not."""
    env = os.environ if env is None else env
    name = name or env.get("REMINDKIT_MCP_NAME") or SERVER_NAME
    if any(_truthy(env.get(k)) for k in _PROVIDERS):
        return "Claude Code takes channel events only from Anthropic's API (not Bedrock, Vertex or Foundry)"
    managed = _managed_settings()
    if managed is not None and managed.get("channelsEnabled") is not True:
        return "managed settings leave channels off (channelsEnabled)"
    config = _claude_config(env)
    if any(_truthy(env.get(k)) for k in _TELEMETRY_OFF) and not _truthy(
        env.get("CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF")
    ):
        flags: dict[str, Any] = {}
    else:
        cached = config.get("cachedGrowthBookFeatures")
        flags = cached if isinstance(cached, dict) else {}
    if flags.get(ROLLOUT) is not True:
        return "Claude Code's channels are off for this account (its rollout switch)"
    argv = _host_argv(pids)
    if argv is None:
        return "no Claude Code process found among this server's parents"
    dev = _flag_values(argv, DEV_FLAG)
    if f"server:{name}" in dev or any(v.startswith(f"plugin:{name}@") for v in dev):
        return None
    approved = _approved(flags, managed)
    for value in _flag_values(argv, CHANNELS_FLAG):
        plugin, _, market = value.removeprefix("plugin:").partition("@")
        if value.startswith("plugin:") and plugin == name and (market, plugin) in approved:
            return None
    return f"Claude Code was not started with this server as a channel ({DEV_FLAG} server:{name})"


def _approved(flags: Mapping[str, Any], managed: Mapping[str, Any] | None) -> set[tuple[str, str]]:
    entries: list[Any] = []
    for source in (flags.get(LEDGER), (managed or {}).get("allowedChannelPlugins")):
        if isinstance(source, list):
            entries.extend(source)
    return {
        (str(e.get("marketplace")), str(e.get("plugin")))
        for e in entries
        if isinstance(e, dict) and e.get("marketplace") and e.get("plugin")
    }


def _flag_values(argv: Sequence[str], flag: str) -> list[str]:
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == flag:
            for value in argv[i + 1 :]:
                if value.startswith("-"):
                    break
                out.extend(v for v in value.replace(",", " ").split() if v)
        elif arg.startswith(flag + "="):
            out.extend(v for v in arg[len(flag) + 1 :].replace(",", " ").split() if v)
    return out


def _host_argv(pids: Sequence[int] | None) -> list[str] | None:
    """The command line of the nearest ancestor that is Claude Code."""
    from ..identity import ancestors

    chain = list(pids) if pids is not None else ancestors()[1:]
    for pid in chain:
        argv = _cmdline(pid)
        if argv and any(Path(a).name in ("claude", "claude.exe") for a in argv[:2]):
            return argv
    return None


def _cmdline(pid: int) -> list[str] | None:
    if sys.platform.startswith("linux"):
        try:
            raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    try:  # elsewhere: ps (macOS, the BSDs)
        import shlex
        import subprocess

        out = subprocess.run(
            ["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, timeout=2
        ).stdout
        return shlex.split(out) if out.strip() else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def _claude_config(env: Mapping[str, str]) -> dict[str, Any]:
    folder = env.get("CLAUDE_CONFIG_DIR")
    path = (
        Path(folder) / ".claude.json"
        if folder
        else Path(env.get("HOME") or Path.home()) / ".claude.json"
    )
    return _read_json(path)


def _managed_settings() -> dict[str, Any] | None:
    if sys.platform == "darwin":
        path = Path("/Library/Application Support/ClaudeCode/managed-settings.json")
    elif sys.platform == "win32":
        path = (
            Path(os.environ.get("PROGRAMDATA", r"C:\ProgramData"))
            / "ClaudeCode"
            / "managed-settings.json"
        )
    else:
        path = Path("/etc/claude-code/managed-settings.json")
    return _read_json(path) if path.exists() else None


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG + 1)
        if len(raw) > MAX_CONFIG:
            return {}
        data = json.loads(raw)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


# -- remindkit mcp install-claude-code (what it writes: remindkit.mcp.install) -------------

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


def _hook_line(argv: list[str], tail: str) -> str:
    return shlex.join([*argv, *tail.split()])


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


__all__ = [
    "CHANNEL_CAPABILITY",
    "CLAUDE_CODE",
    "HOOK_EVENTS",
    "claude_code_changes",
    "claude_code_channel",
    "declares_channel",
]
