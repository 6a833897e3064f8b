"""fastmcp's own Client against remindkit's MCP server: ``mode="legacy"`` (the initialize
handshake) and ``mode="auto"`` (its default: it probes ``server/discover`` and takes the
2026-07-28 revision), over stdio (``StdioTransport`` running ``remindkit mcp``) or
Streamable HTTP (``StreamableHttpTransport`` with the bearer token)."""

from __future__ import annotations

import asyncio
from typing import Any

from _wire import STEPS, data_of, emit, for_era, job, step, wait_go
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

ERAS = {"legacy": "legacy", "modern": "auto"}


def transport(spec: dict[str, Any]) -> Any:
    if spec["transport"] == "stdio":
        command, *args = spec["command"]
        return StdioTransport(
            command=command, args=args, env=spec["env"], cwd=spec["cwd"], keep_alive=False
        )
    return StreamableHttpTransport(spec["url"], auth=spec["token"])


async def run(spec: dict[str, Any], era: str) -> None:
    seen: list[str] = []

    async def on_message(message: Any) -> None:  # whatever the session hands up
        seen.append(type(message).__name__ + ":" + str(getattr(message, "method", ""))[:80])

    async with Client(transport(spec), mode=ERAS[era], message_handler=on_message) as client:
        emit("connected", era=era, protocol=client.protocol_version)
        tools = await client.list_tools()
        emit("tools", era=era, names=[t.name for t in tools])
        results: list[dict[str, Any]] = []
        for i in range(len(STEPS)):
            name, args = step(i, results)
            result = await client.call_tool(name, args, raise_on_error=False)
            data = data_of(result)
            results.append(data)
            emit("called", era=era, tool=name, args=args, error=result.is_error, data=data)
        await wait_go(era, id=results[0]["reminder"]["id"])
        emit("messages", era=era, seen=seen)


async def main() -> None:
    spec = job()
    await asyncio.gather(*(run(for_era(spec, era), era) for era in spec["eras"]))
    emit("done")


if __name__ == "__main__":
    asyncio.run(main())
