"""The MCP server's tools over Streamable HTTP at ``/mcp`` of a real ``remindkit api``
process, behind its session tokens, driven by the official MCP client SDK."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from remindkit.protocol.tools import TOOL_NAMES, mcp_tools

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


MODERN = "2026-07-28"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _modern(
    url: str, token: str, method: str, params: dict | None = None, **headers: str
) -> httpx.Response:
    """One 2026-07-28 request: a self-contained POST, its envelope in ``_meta``."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {
            **(params or {}),
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            },
        },
    }
    sent = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
        **headers,
    }
    if method == "tools/call":
        sent["Mcp-Name"] = params["name"]  # type: ignore[index]
    return httpx.post(url, json=body, headers=sent, timeout=60)


def _initialize(url: str, token: str, **headers: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    sent = {**ACCEPT, "Authorization": f"Bearer {token}", **headers}
    return httpx.post(url, json=body, headers=sent, timeout=60)


def _result(response: httpx.Response) -> dict:
    text = response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:"))
    return json.loads(text)["result"]


def test_mcp_answers_at_both_paths_in_both_eras(api_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """/mcp and /mcp/ (no 307), the handshake and the stateless revision; the instructions
    promise no <channel> events, no channel capability is declared, and the tool list is
    the same bytes whatever the path or call."""
    db = f"sqlite:///{tmp_path / 'rk.db'}"
    alpha = _token("--project", "default", "--session", "alpha", db=db, home=tmp_path)
    server = api_server(db)
    listed: list[str] = []
    for path in ("/mcp", "/mcp/"):
        url = server.base_url + path
        started = _initialize(url, alpha)
        assert started.status_code == 200, (path, started.status_code, started.text)
        init = _result(started)
        assert "mcp-session-id" in started.headers
        assert "<channel" not in init["instructions"] and "claude/channel" not in json.dumps(init)
        found = _modern(url, alpha, "server/discover")
        assert found.status_code == 200, found.text
        discover = _result(found)
        assert MODERN in discover["supportedVersions"]
        assert "<channel" not in discover["instructions"]
        assert "claude/channel" not in json.dumps(discover["capabilities"])
        for _ in range(2):
            got = _modern(url, alpha, "tools/list")
            assert got.status_code == 200, got.text
            listed.append(json.dumps(_result(got)["tools"], sort_keys=False))
        made = _modern(
            url,
            alpha,
            "tools/call",
            {"name": "schedule_create", "arguments": {"prompt": f"via {path}", "after": "1h"}},
        )
        assert _result(made)["structuredContent"]["ok"] is True, made.text
    assert len(set(listed)) == 1, "the tool list changed between calls or paths"
    tools = json.loads(listed[0])
    assert [(t["name"], t["inputSchema"]) for t in tools] == [
        (t["name"], t["inputSchema"]) for t in mcp_tools()
    ]
    got = httpx.get(
        f"{server.base_url}/v1/projects/default/sessions/alpha/reminders",
        headers={"Authorization": f"Bearer {alpha}"},
        timeout=30,
    )
    assert sorted(r["text"] for r in got.json()) == ["via /mcp", "via /mcp/"]


def test_mcp_session_belongs_to_the_token_that_opened_it(api_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db = f"sqlite:///{tmp_path / 'rk.db'}"
    alpha = _token("--project", "default", "--session", "alpha", db=db, home=tmp_path)
    beta = _token("--project", "default", "--session", "beta", db=db, home=tmp_path)
    server = api_server(db)
    url = f"{server.base_url}/mcp"
    sid = _initialize(url, alpha).headers["mcp-session-id"]
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "schedule_list", "arguments": {}},
    }
    common = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    other = httpx.post(url, json=call, headers={**common, "Authorization": f"Bearer {beta}"})
    assert other.status_code == 404, other.text  # as if the session did not exist
    own = httpx.post(url, json=call, headers={**common, "Authorization": f"Bearer {alpha}"})
    assert own.status_code == 200 and _result(own)["structuredContent"]["ok"] is True


@pytest.mark.parametrize("named", [False, True], ids=["address", "name"])
def test_mcp_answers_to_the_configured_host_only(api_server, tmp_path: Path, named: bool) -> None:  # type: ignore[no-untyped-def]
    """``--host`` (an address or a name) is accepted in Host and Origin (the MCP SDK's
    own check took only the loopback names); any other name (DNS rebinding, another
    site's page) is refused by the API's guard before the token is looked at."""
    import socket

    db = f"sqlite:///{tmp_path / 'rk.db'}"
    host = "127.0.0.2"
    if named:
        host = socket.gethostname()
        try:
            if not socket.gethostbyname(host).startswith("127."):
                pytest.skip(f"{host} does not resolve to a loopback address here")
        except OSError:
            pytest.skip(f"{host} does not resolve")
    alpha = _token("--project", "default", "--session", "alpha", db=db, home=tmp_path)
    server = api_server(db, args=("--host", host))
    port = server.base_url.rsplit(":", 1)[1]
    url = f"{server.base_url}/mcp/"
    ours = {"Host": f"{host}:{port}"}
    assert _initialize(url, alpha, **ours).status_code == 200
    assert _modern(url, alpha, "tools/list", **ours).status_code == 200
    same_site = {**ours, "Origin": f"http://{host}:{port}"}
    assert _initialize(url, alpha, **same_site).status_code == 200
    for headers, code in [
        ({"Host": f"rebound.example:{port}"}, "host_not_allowed"),
        ({**ours, "Origin": "http://rebound.example"}, "origin_not_allowed"),
        ({**ours, "Origin": f"http://{host}:1"}, "origin_not_allowed"),  # another port's page
    ]:
        for refused in (
            _initialize(url, alpha, **headers),
            _modern(url, alpha, "tools/list", **headers),
        ):
            assert (refused.status_code, refused.json()["error"]["code"]) == (403, code), (
                headers,
                refused.text,
            )
    assert _initialize(url, "rk_wrong", **ours).status_code == 401
