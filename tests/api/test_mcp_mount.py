"""The MCP server's tools over Streamable HTTP at ``/mcp`` of a real ``remindkit api``
process, behind its session tokens, driven by the official MCP client SDK."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from remindkit.protocol.tools import TOOL_NAMES

from .conftest import cli

pytest.importorskip("mcp")
pytestmark = pytest.mark.processes


def _token(*args: str, db: str, home: Path) -> str:
    done = cli("token", "create", *args, "--json", db=db, home=home)
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["token"])


def test_mcp_over_the_api_acts_for_the_token_session_only(api_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    db = f"sqlite:///{tmp_path / 'rk.db'}"
    alpha = _token("--project", "default", "--session", "alpha", db=db, home=tmp_path)
    beta = _token("--project", "default", "--session", "beta", db=db, home=tmp_path)
    project = _token("--project", "default", db=db, home=tmp_path)  # not a session token: no MCP
    server = api_server(db)
    url = f"{server.base_url}/mcp/"
    assert (
        httpx.post(
            url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=30
        ).status_code
        == 401
    )
    refused = httpx.post(url, json={}, headers={"Authorization": f"Bearer {project}"}, timeout=30)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"

    async def as_(token: str, text: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == list(TOOL_NAMES)
            made = await session.call_tool("schedule_create", {"prompt": text, "after": "1h"})
            assert not made.is_error, made
            listed = await session.call_tool("schedule_list", {})
            return [r["prompt"] for r in listed.structured_content["reminders"]]

    assert anyio.run(as_, alpha, "from alpha") == ["from alpha"]
    assert anyio.run(as_, beta, "from beta") == ["from beta"]  # beta sees nothing of alpha's
    # the same reminders through the HTTP API's own routes, recorded as made over MCP
    got = httpx.get(
        f"{server.base_url}/v1/projects/default/sessions/alpha/reminders",
        headers={"Authorization": f"Bearer {alpha}"},
        timeout=30,
    )
    assert got.status_code == 200 and [r["text"] for r in got.json()] == ["from alpha"]
