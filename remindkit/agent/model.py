"""What a turn needs from a language model: one call that takes the chat so far
(OpenAI chat roles) and the tools, and returns text and/or tool calls.

:class:`ChatModel` is the protocol; :class:`CallableModel` wraps a plain Python
function. The OpenAI-compatible HTTP client is
:class:`remindkit.sessions.openai.OpenAIChatModel`; the demo's scripted model is
:class:`remindkit.agent.scripted.ScriptedModel`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ..errors import ModelError  # its error, in errors.py


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model wrote it

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Completion:
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class ChatModel(Protocol):
    name: str

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion: ...


@runtime_checkable
class ChatModelLike(Protocol):
    """Anything with ``complete`` (for isinstance checks)."""

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion: ...


class CallableModel:
    """A model from a function ``fn(messages, tools) -> str | Completion``."""

    def __init__(
        self,
        fn: Callable[[Sequence[dict[str, Any]], Sequence[dict[str, Any]]], Any],
        *,
        name: str = "python",
    ) -> None:
        self.fn = fn
        self.name = name

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion:
        out = self.fn(messages, tools)
        if isinstance(out, Completion):
            return out
        return Completion(content=None if out is None else str(out))


__all__ = ["CallableModel", "ChatModel", "ChatModelLike", "Completion", "ModelError", "ToolCall"]
