"""langchain-mcp-adapters 0.3 (on mcp 1, the 2025-11-25 handshake) with LangChain's
``ChatOpenAI`` on a scripted loopback model, its tools bound with
``bind_tools(tools, strict=True)``: the model's tool calls are carried out with
``tool.ainvoke(tool_call)``, as LangChain's tool-calling guide does.

Two ways LangChain users hold the server:

* ``session``: ``MultiServerMCPClient.session(...)`` and ``load_mcp_tools(session)``, one
  connection for the whole conversation (``remindkit mcp`` over stdio, or ``/mcp`` over
  Streamable HTTP);
* ``per_call``: ``MultiServerMCPClient.get_tools()``, which starts a new session (over
  stdio: a new ``remindkit mcp``) for every tool call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _wire import STEPS, as_result, emit, for_era, job, wait_go
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langchain_openai import ChatOpenAI


def connection(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["transport"] == "stdio":
        command, *args = spec["command"]
        return {
            "transport": "stdio",
            "command": command,
            "args": args,
            "env": spec["env"],
            "cwd": spec["cwd"],
        }
    return {
        "transport": "streamable_http",
        "url": spec["url"],
        "headers": {"Authorization": f"Bearer {spec['token']}"},
    }


def model(spec: dict[str, Any]) -> ChatOpenAI:
    return ChatOpenAI(model="scripted", base_url=spec["model_url"], api_key="sk-test")  # type: ignore[arg-type]


def text_of(message: ToolMessage) -> str:
    content = message.content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)


async def converse(spec: dict[str, Any], tools: list[Any], era: str, steps: int) -> str | None:
    """The model's turn: tool calls carried out until it answers in text."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    emit(
        "strict_tools",
        era=era,
        tools=[convert_to_openai_tool(t, strict=True) for t in tools],
    )
    bound = model(spec).bind_tools(tools, strict=True)
    by_name = {t.name: t for t in tools}
    messages: list[Any] = [HumanMessage("Set my reminders up.")]
    first: str | None = None
    for _ in range(steps + 1):
        ai = await bound.ainvoke(messages)
        messages.append(ai)
        if not ai.tool_calls:
            emit("output", era=era, text=ai.content)
            return first
        for call in ai.tool_calls:
            answer = await by_name[call["name"]].ainvoke(call)
            messages.append(answer)
            data = as_result(text_of(answer))
            emit("called", era=era, tool=call["name"], args=call["args"], data=data)
            if first is None and "reminder" in data:
                first = data["reminder"]["id"]
    raise AssertionError("the model did not stop")


async def in_session(spec: dict[str, Any]) -> None:
    era = "legacy"
    spec = for_era(spec, era)
    client = MultiServerMCPClient({"remindkit": connection(spec)})  # type: ignore[dict-item]
    async with client.session("remindkit", auto_initialize=False) as session:
        started = await session.initialize()
        emit("connected", era=era, protocol=started.protocolVersion)
        tools = await load_mcp_tools(session)
        emit("tools", era=era, names=[t.name for t in tools])
        first = await converse(spec, tools, era, len(STEPS))
        await wait_go(era, id=first)
        emit("messages", era=era, seen=[])


async def per_call(spec: dict[str, Any]) -> None:
    """get_tools(): each call its own short session. A create, then (after the test has
    seen the fire wait) a list, each in a server of its own."""
    client = MultiServerMCPClient({"remindkit": connection(spec)})  # type: ignore[dict-item]
    tools = {t.name: t for t in await client.get_tools()}
    emit("tools", names=sorted(tools))
    made = await tools["schedule_create"].ainvoke(
        {"prompt": "fire between calls", "after": spec.get("after", "1s")}
    )
    data = as_result(made if isinstance(made, str) else json.dumps(made))
    emit("called", tool="schedule_create", data=data)
    await wait_go(id=data["reminder"]["id"])
    listed = await tools["schedule_list"].ainvoke({})
    emit(
        "called",
        tool="schedule_list",
        data=as_result(listed if isinstance(listed, str) else json.dumps(listed)),
    )


async def main() -> None:
    spec = job()
    if spec.get("mode") == "per_call":
        await per_call(spec)
    else:
        await in_session(spec)
    emit("done")


if __name__ == "__main__":
    asyncio.run(main())
