"""A Chat Completions model on loopback for the frameworks that need one: it makes the
calls of ``drivers/_wire.STEPS`` one tool call at a time, shaped as a model held to a
strict schema shapes them (every property of the schema it was sent; where it means
nothing, ``null`` if the schema takes it, else ``""``, ``0`` or ``false``; checked
against the schema), reading each result from the conversation; then it says ``done``.
Every request's tool definitions are kept for the test to check."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from tests.processes.openai_server import ScriptedOpenAI, text, tool

from .drivers._wire import STEPS, as_result, step, strict_args


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


class StrictModel:
    def __init__(self) -> None:
        self.tools: list[list[dict[str, Any]]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.server = ScriptedOpenAI(self._answer)

    def _answer(self, body: dict[str, Any]) -> dict[str, Any] | tuple[int, str]:
        try:
            return self.respond(body)
        except Exception as exc:  # the framework shows it: the driver's stderr says why
            return 500, json.dumps({"error": {"message": f"stand-in: {exc!r}"}})

    def respond(self, body: dict[str, Any]) -> dict[str, Any]:
        sent = body.get("tools") or []
        self.tools.append(sent)
        results = [as_result(_content(m)) for m in body["messages"] if m["role"] == "tool"]
        if len(results) >= len(STEPS):
            return text("done")
        for i, result in enumerate(results):
            if result.get("ok") is False:
                raise AssertionError(f"step {i} ({STEPS[i][0]}) was refused: {result}")
        name, args = step(len(results), results)
        schema = next(t["function"]["parameters"] for t in sent if t["function"]["name"] == name)
        shaped = strict_args(schema, **args)
        jsonschema.validate(shaped, schema)  # what a model held to the schema could send
        self.calls.append((name, shaped))
        return tool(name, shaped, call_id=f"call_{len(results)}")

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def __enter__(self) -> StrictModel:
        self.server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.__exit__(*exc)


__all__ = ["StrictModel"]
