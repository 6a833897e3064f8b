"""Real MCP clients against ``python -m remindkit mcp``: the official SDK's stdio
client, raw JSON-RPC over pipes, the MCP Inspector, and Streamable HTTP under uvicorn."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp.client.extension import NotificationBinding  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp_types import Implementation  # noqa: E402
from pydantic import BaseModel, ConfigDict  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
START_S = 120.0  # a server's start on a loaded machine (imports, migrations)


class ChannelParams(BaseModel):
    model_config = ConfigDict(extra="allow")
    content: str
    meta: dict[str, str]


@dataclass
class Received:
    at: float  # time.time() when the client got it
    params: ChannelParams


@dataclass
class Client:
    session: ClientSession
    channel: list[Received] = field(default_factory=list)
    errlog: Path | None = None

    async def call(self, name: str, args: dict[str, Any] | None = None) -> Any:
        return await self.session.call_tool(name, args or {})

    async def wait_channel(self, n: int, timeout: float) -> list[Received]:
        import anyio

        deadline = time.monotonic() + timeout
        while len(self.channel) < n:
            if time.monotonic() > deadline:
                log = self.errlog.read_text()[-3000:] if self.errlog else ""
                raise AssertionError(
                    f"{len(self.channel)} of {n} channel events within {timeout}s\n{log}"
                )
            await anyio.sleep(0.005)
        return self.channel


def server_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REMINDKIT_", "CLAUDE_"))}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
                os.pathsep
            ),
            "REMINDKIT_HOME": str(home),
            "REMINDKIT_WAIT_CAP": "2",
            "REMINDKIT_LEASE": "3",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


class ChannelSession(ClientSession):
    """The SDK's client, declaring that it takes channel events
    (``experimental["claude/channel"]``), as a host that does declares it."""

    def _build_capabilities(self, version: str) -> Any:
        caps = super()._build_capabilities(version)
        return caps.model_copy(update={"experimental": {"claude/channel": {}}})


@asynccontextmanager
async def mcp_client(
    db: str,
    home: Path,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    channel: bool = True,
    client_name: str | None = None,
) -> AsyncIterator[Client]:
    """``python -m remindkit mcp --db DB ARGS…`` with the SDK's stdio client (declaring
    channel events unless ``channel=False``), initialized, channel events collected."""
    import anyio

    errlog = home / f"server-{time.monotonic_ns()}.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "remindkit", "mcp", "--db", db, "-v", *args],
        env=server_env(home, env),
        cwd=str(cwd or home),
    )
    got: list[Received] = []

    async def on_channel(p: ChannelParams) -> None:
        got.append(Received(time.time(), p))

    binding = NotificationBinding(
        method="notifications/claude/channel", params_type=ChannelParams, handler=on_channel
    )
    with open(errlog, "w") as err:
        async with (
            stdio_client(params, errlog=err) as (read, write),
            (ChannelSession if channel else ClientSession)(
                read,
                write,
                notification_bindings=[binding],
                client_info=Implementation(name=client_name, version="2.1.332")
                if client_name
                else None,
            ) as session,
        ):
            with anyio.fail_after(START_S):
                await session.initialize()
            yield Client(session, got, errlog)


def wait_for(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rk.db'}"
