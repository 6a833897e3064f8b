"""openai-agents 0.24: an ``Agent`` with ``mcp_servers`` (``MCPServerStdio`` running
``remindkit mcp``, or ``MCPServerStreamableHttp`` with the bearer token) and
``mcp_config={"convert_schemas_to_strict": True}``, run by ``Runner`` against a
Chat Completions model on loopback (the test's scripted stand-in, ``model_url``). On
mcp 2 it always negotiates 2026-07-28. The stand-in sees the tool definitions the SDK
sends (strict, as converted) and answers with strict-shaped calls."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _wire import as_result, emit, for_era, job, wait_go
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.items import ToolCallItem, ToolCallOutputItem
from agents.mcp import MCPServerStdio, MCPServerStreamableHttp
from openai import AsyncOpenAI


def server(spec: dict[str, Any]) -> Any:
    if spec["transport"] == "stdio":
        command, *args = spec["command"]
        return MCPServerStdio(
            params={"command": command, "args": args, "env": spec["env"], "cwd": spec["cwd"]},
            name="remindkit",
            client_session_timeout_seconds=120,
        )
    return MCPServerStreamableHttp(
        params={"url": spec["url"], "headers": {"Authorization": f"Bearer {spec['token']}"}},
        name="remindkit",
        client_session_timeout_seconds=120,
    )


async def run(spec: dict[str, Any], era: str) -> None:
    set_tracing_disabled(True)  # nothing leaves the machine
    model = OpenAIChatCompletionsModel(
        model="scripted", openai_client=AsyncOpenAI(base_url=spec["model_url"], api_key="sk-test")
    )
    async with server(spec) as mcp:
        session = getattr(mcp, "session", None)
        protocol = getattr(session, "protocol_version", None) if session else None
        emit("connected", era=era, protocol=protocol)
        agent = Agent(
            name="assistant",
            instructions="You keep the user's reminders.",
            model=model,
            mcp_servers=[mcp],
            mcp_config={"convert_schemas_to_strict": True},
        )
        tools = await agent.get_all_tools(None)  # type: ignore[arg-type]
        emit(
            "tools",
            era=era,
            names=[t.name for t in tools],
            strict={t.name: getattr(t, "strict_json_schema", None) for t in tools},
        )
        result = await Runner.run(agent, "Set my reminders up.")
        calls = [i for i in result.new_items if isinstance(i, ToolCallItem)]
        outputs = [i for i in result.new_items if isinstance(i, ToolCallOutputItem)]
        first: str | None = None
        for call, out in zip(calls, outputs, strict=True):
            raw = call.raw_item
            text = out.output if isinstance(out.output, str) else json.dumps(out.output)
            data = as_result(text)
            emit(
                "called",
                era=era,
                tool=getattr(raw, "name", None),
                args=json.loads(getattr(raw, "arguments", "{}")),
                data=data,
            )
            if first is None and isinstance(data, dict) and "reminder" in data:
                first = data["reminder"]["id"]
        emit("output", era=era, text=result.final_output)
        await wait_go(era, id=first)
        emit("messages", era=era, seen=[])


async def main() -> None:
    spec = job()
    await asyncio.gather(*(run(for_era(spec, era), era) for era in spec["eras"]))
    emit("done")


if __name__ == "__main__":
    asyncio.run(main())
