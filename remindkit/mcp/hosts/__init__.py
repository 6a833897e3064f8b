"""The agent CLIs beside Claude Code: Codex CLI, Gemini CLI and opencode.

Each host module has ``plan(project=…, user=…, …)`` (the files ``remindkit mcp
install-<host>`` writes: the MCP server entry, the hooks or plugin that make the session
the CLI's own conversation id, and the resume preset passed to the server) and
``preset()`` (the resume command line and the variables it needs).
:func:`session_from_meta` reads a conversation id a host sends with each tool call.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from . import codex, gemini, opencode

HOSTS: dict[str, ModuleType] = {m.NAME: m for m in (codex, gemini, opencode)}
# the MCP client names of these hosts: what their hooks print reaches the conversation
HOOK_CLIENTS: frozenset[str] = frozenset(m.MCP_CLIENT for m in HOSTS.values())


def session_from_meta(meta: Any) -> str | None:
    """The host's conversation id in a request's ``_meta`` (Codex: ``threadId``), else None."""
    return codex.session_from_meta(meta)


__all__ = ["HOOK_CLIENTS", "HOSTS", "session_from_meta"]
