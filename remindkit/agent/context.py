"""What a tool call acts for and what it answers (shared by the tool handlers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..audit import Surface
from ..reminders import Reminders


@dataclass(frozen=True)
class ToolContext:
    """The session a tool call acts for, the API it acts through, and the surface
    its changes are recorded under (``tool``; ``mcp`` for an MCP server)."""

    api: Reminders
    session: str
    surface: Surface = Surface.TOOL


@dataclass(frozen=True)
class ToolResult:
    content: str  # what goes back to the model
    ok: bool = True
    code: str | None = None
    data: dict[str, Any] | None = field(default=None, compare=False)


def not_given_dropped(
    args: dict[str, Any], *, keep: frozenset[str] | set[str] = frozenset()
) -> dict[str, Any]:
    """``args`` without the arguments a call did not mean to give: ``null``, and ``""``
    (what a model held to a strict schema sends for a text it must fill in). The
    names in ``keep`` stay as they are (``prompt``: an empty one is ``empty_text``)."""
    return {k: v for k, v in args.items() if k in keep or (v is not None and v != "")}
