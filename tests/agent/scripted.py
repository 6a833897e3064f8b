"""A model for tests: answers from a script and records what it was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from remindkit.agent.model import Completion, ModelError, ToolCall


class Script:
    """``replies``: Completions, strings, exceptions, or functions of the
    messages, used in order (the last one repeats)."""

    name = "script"

    def __init__(
        self, *replies: Completion | str | Exception | Callable[[list[dict]], Any]
    ) -> None:
        self.replies = list(replies)
        self.calls: list[list[dict[str, Any]]] = []
        self.tools: list[list[dict[str, Any]]] = []
        self.gate: threading.Event | None = None  # when set, each call waits for it
        self.entered = threading.Event()

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion:
        self.calls.append([dict(m) for m in messages])
        self.tools.append(list(tools))
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10), "test gate never opened"
        reply = self.replies[min(len(self.calls) - 1, len(self.replies) - 1)]
        if callable(reply) and not isinstance(reply, Completion):
            reply = reply(list(messages))
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, str):
            return Completion(reply)
        return reply

    def last_user(self, i: int = -1) -> str:
        msgs = self.calls[i]
        return next(m["content"] for m in reversed(msgs) if m["role"] == "user")


def tool_call(name: str, args: dict[str, Any], call_id: str = "call_1") -> Completion:
    return Completion(None, (ToolCall(call_id, name, json.dumps(args)),))


def fail(instant: bool = True) -> ModelError:
    return ModelError("the session cannot be resumed", code="model_http_error", instant=instant)
