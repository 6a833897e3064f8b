"""What a tool call acts for and what it answers (shared by the tool handlers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..reminders import Reminders


@dataclass(frozen=True)
class ToolContext:
    """The session a tool call acts for, and the API it acts through."""

    api: Reminders
    session: str


@dataclass(frozen=True)
class ToolResult:
    content: str  # what goes back to the model
    ok: bool = True
    code: str | None = None
    data: dict[str, Any] | None = field(default=None, compare=False)
