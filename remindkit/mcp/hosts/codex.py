"""Codex CLI (``@openai/codex``): ``remindkit mcp install-codex``.

What it writes (the project's ``.codex/``, or ``--user``: ``$CODEX_HOME``, default
``~/.codex``):

* ``config.toml``: ``[mcp_servers.remindkit]`` with the absolute command, ``required``
  (``codex exec`` waits for the server's tools instead of starting without them),
  ``default_tools_approval_mode = "approve"`` (the reminder tools run without a prompt, in
  ``codex exec`` too), and ``env`` with ``REMINDKIT_HOME`` / ``REMINDKIT_DB`` when set:
  Codex passes only a short list of variables to an MCP server;
* ``hooks.json``: ``SessionStart`` → ``remindkit mcp bind``, ``UserPromptSubmit`` →
  ``remindkit session busy --hook``, ``Stop`` → ``remindkit session idle --hook`` (Codex's
  hook JSON is Claude Code's: ``session_id`` is Codex's thread id). Codex asks once, at its
  next start, to trust new hooks ("Trust all and continue").

Codex also sends its thread id in every ``tools/call`` (``_meta.threadId``), so the
server takes the conversation from the call even where the hooks are not trusted.

The resume preset: ``codex exec --skip-git-repo-check resume {session} -`` (the message on
stdin), run in the project folder, with ``OPENAI_API_KEY``, ``CODEX_HOME`` and the
configured provider's ``env_key`` passed on.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from ...errors import InvalidInput
from ..install import Change
from .common import (
    Plan,
    Preset,
    check_target,
    executable,
    hook_line,
    remindkit_command,
    remindkit_env,
    server_args,
    with_hooks,
)

NAME = "codex"
TITLE = "Codex CLI"
SERVER_KEY = "remindkit"
# its clientInfo.name: the hooks hand fires in to it (Codex's Stop hook takes ``decision: block`` and its UserPromptSubmit hook ``additionalContext``)
MCP_CLIENT = "codex-mcp-client"
HOOK_EVENTS = (
    ("SessionStart", "mcp bind"),
    ("UserPromptSubmit", "session busy --hook"),
    ("Stop", "session idle --hook"),
)
KEY_ENV = ("OPENAI_API_KEY", "CODEX_HOME")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def codex_home(environ: dict[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


def session_from_meta(meta: Any) -> str | None:
    """Codex's thread id from a ``tools/call``'s ``_meta`` (``threadId``, or the turn
    metadata's ``thread_id``)."""
    if not isinstance(meta, dict):
        return None
    sid = meta.get("threadId")
    turn = meta.get("x-codex-turn-metadata")
    if not isinstance(sid, str) and isinstance(turn, dict):
        sid = turn.get("thread_id")
    return sid if isinstance(sid, str) and 0 < len(sid) <= 200 else None


def _load_toml(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "", {}
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}", code="invalid_argument") from None
    try:
        import tomllib
    except ImportError:  # Python 3.10: the file is edited as text, unchecked
        return text, {}
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(
            f"{path} is not TOML ({exc}); fix or move it first", code="invalid_argument"
        ) from None


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        inner = ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items())
        return "{ " + inner + " }" if inner else "{}"
    raise TypeError(f"no TOML for {value!r}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _ours(header: str) -> bool:
    parts = [p.strip().strip('"').strip("'") for p in header.split(".")]
    return parts[:2] == ["mcp_servers", SERVER_KEY]


def with_server(path: Path, entry: dict[str, Any]) -> Change:
    """``config.toml`` with ``[mcp_servers.remindkit]`` (and its sub-tables) replaced by
    ``entry``, at the end of the file; everything else kept as it was written."""
    before, data = _load_toml(path)
    servers = data.get("mcp_servers")
    if isinstance(servers, dict) and servers.get(SERVER_KEY) == entry:
        return Change(path, before, before)
    kept: list[str] = []
    skipping = False
    for line in before.splitlines(keepends=True):
        m = _HEADER.match(line)
        if m:
            skipping = _ours(m.group(1))
        if not skipping:
            kept.append(line)
    text = "".join(kept).rstrip("\n")
    block = [f"[mcp_servers.{SERVER_KEY}]"]
    block += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in entry.items()]
    after = (text + "\n\n" if text else "") + "\n".join(block) + "\n"
    if data:  # the result must still be TOML, and hold exactly our entry
        import tomllib

        parsed = tomllib.loads(after)
        assert parsed["mcp_servers"][SERVER_KEY] == entry
    return Change(path, before, after)


def provider_env_key(config: dict[str, Any]) -> str | None:
    """The variable that holds the key of the configured model provider (``env_key``)."""
    name = config.get("model_provider")
    providers = config.get("model_providers")
    if isinstance(name, str) and isinstance(providers, dict):
        provider = providers.get(name)
        if isinstance(provider, dict) and isinstance(provider.get("env_key"), str):
            return str(provider["env_key"])
    return None


def preset(codex: str | None = None, *, user_config: dict[str, Any] | None = None) -> Preset:
    names = list(KEY_ENV)
    key = provider_env_key(user_config or {})
    if key:
        names.append(key)
    argv = (executable("codex", codex), "exec", "--skip-git-repo-check", "resume", "{session}", "-")
    return Preset(argv, tuple(dict.fromkeys(names)))


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
    home = codex_home(environ)
    root = home if user else project
    folder = home if user else project / ".codex"
    _, user_config = _load_toml(home / "config.toml")
    rk = remindkit_command(command)
    the_preset = preset(host_executable, user_config=user_config) if resume else None
    entry: dict[str, Any] = {
        "command": rk[0],
        "args": [*rk[1:], *server_args(the_preset, pass_env)],
        "required": True,
        "startup_timeout_sec": 60,
        "default_tools_approval_mode": "approve",
    }
    env = remindkit_env(environ)
    if env:
        entry["env"] = env
    config = check_target(folder / "config.toml", root)
    hooks = check_target(folder / "hooks.json", root)
    changes = [
        with_server(config, entry),
        with_hooks(hooks, [(event, hook_line(rk, tail)) for event, tail in HOOK_EVENTS]),
    ]
    notes = [
        "Codex asks at its next start to trust the new hooks: choose 'Trust all and continue'.",
    ]
    if not user:
        notes.append(
            f"Codex reads {folder} only in a trusted project: trust {project} when Codex asks."
        )
    return Plan(changes, notes)


__all__ = ["HOOK_EVENTS", "NAME", "plan", "preset", "session_from_meta", "with_server"]
