"""pydantic-ai's Agent with an ``MCPToolset`` over a fastmcp ``Client`` (the way
pydantic-ai 2 connects MCP servers), its model a scripted ``FunctionModel`` that makes
the calls of ``_wire.STEPS`` one tool call at a time, reading each result as a model
does. ``mode="legacy"`` or ``"auto"`` (2026-07-28) on the client; stdio or Streamable
HTTP. It also reports whether pydantic-ai's OpenAI schema transformer finds each tool's
schema strict-compatible as it is."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _wire import STEPS, as_result, emit, for_era, job, step, wait_go
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

ERAS = {"legacy": "legacy", "modern": "auto"}


def transport(spec: dict[str, Any]) -> Any:
    if spec["transport"] == "stdio":
        command, *args = spec["command"]
        return StdioTransport(
            command=command, args=args, env=spec["env"], cwd=spec["cwd"], keep_alive=False
        )
    return StreamableHttpTransport(spec["url"], auth=spec["token"])


def returned(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The tool results so far, as the model reads them."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, RetryPromptPart):
                raise AssertionError(f"a tool call was refused: {part.content}")
            if isinstance(part, ToolReturnPart):
                content = part.content
                out.append(dict(content) if isinstance(content, dict) else as_result(str(content)))
    return out


def strict_compatible(tool: Any) -> bool:
    """pydantic-ai's own judgement, the one that turns strict mode on for an OpenAI model
    by itself: the schema is strict-compatible as it is, and walking it changes nothing."""
    schema = json.loads(json.dumps(tool.parameters_json_schema))
    walker = OpenAIJsonSchemaTransformer(schema, strict=None)
    return bool(walker.walk() == tool.parameters_json_schema and walker.is_strict_compatible)


async def run(spec: dict[str, Any], era: str) -> None:
    shown: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        shown.setdefault("tools", [t.name for t in info.function_tools])
        shown.setdefault("strict", {t.name: strict_compatible(t) for t in info.function_tools})
        results = returned(messages)
        if len(results) == len(STEPS):
            return ModelResponse(parts=[TextPart("done")])
        name, args = step(len(results), results)
        return ModelResponse(parts=[ToolCallPart(name, json.dumps(args))])

    client = Client(transport(spec), mode=ERAS[era])
    agent = Agent(FunctionModel(model), toolsets=[MCPToolset(client)])
    async with agent:  # the toolset's connection stays open across runs
        emit("connected", era=era, protocol=client.protocol_version)
        run = await agent.run("Set my reminders up.")
        emit("tools", era=era, names=shown["tools"], strict=shown["strict"])
        calls = [
            p
            for m in run.all_messages()
            if isinstance(m, ModelResponse)
            for p in m.parts
            if isinstance(p, ToolCallPart)
        ]
        results = returned(run.all_messages())
        for call, data in zip(calls, results, strict=True):
            emit("called", era=era, tool=call.tool_name, args=call.args_as_dict(), data=data)
        emit("output", era=era, text=run.output)
        await wait_go(era, id=results[0]["reminder"]["id"])
        emit("messages", era=era, seen=[])


async def main() -> None:
    spec = job()
    await asyncio.gather(*(run(for_era(spec, era), era) for era in spec["eras"]))
    emit("done")


if __name__ == "__main__":
    asyncio.run(main())
