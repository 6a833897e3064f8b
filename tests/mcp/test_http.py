"""Streamable HTTP under uvicorn on loopback, behind a bearer token checked by a callable."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from remindkit.clock import SystemClock
from remindkit.mcp.http import http_app
from remindkit.protocol.tools import TOOL_NAMES
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store

uvicorn = pytest.importorskip("uvicorn")
pytestmark = pytest.mark.processes
TOKENS = {"tok-alpha": "alpha", "tok-beta": "beta"}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(request: pytest.FixtureRequest, db: str, home: Path) -> Iterator[tuple[str, SqlStore]]:
    store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
    api = Reminders(store, clock=SystemClock())
    port = _port()
    max_open = getattr(request, "param", 1000)
    app = http_app(api, TOKENS.get, allowed_hosts=[f"127.0.0.1:{port}"], max_open=max_open)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp", store
    finally:
        server.should_exit = True
        thread.join(30)
        store.close()


def test_tokens_reach_their_own_session_only(served: tuple[str, SqlStore]) -> None:
    url, store = served
    assert (
        httpx.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).status_code == 401
    )
    wrong = httpx.post(url, json={}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "unauthorized"
    assert wrong.headers["www-authenticate"].startswith("Bearer")

    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def as_(token: str) -> list[str]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == list(TOOL_NAMES)
            made = await session.call_tool(
                "schedule_create", {"prompt": f"via {token}", "after": "1h"}
            )
            assert not made.is_error
            listed = await session.call_tool("schedule_list", {})
            return [r["prompt"] for r in listed.structured_content["reminders"]]

    assert anyio.run(as_, "tok-alpha") == ["via tok-alpha"]
    assert anyio.run(as_, "tok-beta") == ["via tok-beta"]  # beta sees nothing of alpha's
    assert [r.session for r in Reminders(store).list()] == ["alpha", "beta"]


def test_a_client_that_drops_mid_call_leaves_the_server_serving(
    served: tuple[str, SqlStore],
) -> None:
    url, _store = served
    headers = {
        "Authorization": "Bearer tok-alpha",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    r = httpx.post(url, json=init, headers=headers, timeout=60)
    assert r.status_code == 200
    sid = r.headers["mcp-session-id"]
    h2 = {**headers, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
    httpx.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=h2, timeout=60
    )
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "schedule_create", "arguments": {"prompt": "dropped", "after": "1h"}},
    }
    with pytest.raises(
        httpx.TimeoutException
    ):  # the client gives up before the answer and goes away
        httpx.post(url, json=call, headers=h2, timeout=httpx.Timeout(60, read=0.001))
    again = httpx.post(url, json={**call, "id": 3}, headers=h2, timeout=60)
    assert again.status_code == 200 and '"ok":true' in again.text.replace(" ", "")


HEADERS = {
    "Authorization": "Bearer tok-alpha",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


@pytest.mark.parametrize("served", [2], indirect=True)
def test_open_requests_are_bounded(served: tuple[str, SqlStore]) -> None:
    """Held streams (a GET each) count against the bound: past it 503, and a stream
    that closes makes room."""
    url, _store = served
    sids = [httpx.post(url, json=INIT, headers=HEADERS, timeout=60) for _ in range(2)]
    assert [r.status_code for r in sids] == [200, 200]
    get = {**HEADERS, "Accept": "text/event-stream", "mcp-protocol-version": "2025-11-25"}
    with httpx.Client(timeout=60) as client:
        streams = [
            client.stream(
                "GET", url, headers={**get, "mcp-session-id": r.headers["mcp-session-id"]}
            )
            for r in sids
        ]
        held = [s.__enter__() for s in streams]
        assert [r.status_code for r in held] == [200, 200]
        refused = httpx.post(url, json=INIT, headers=HEADERS, timeout=60)
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "too_many_requests"
        streams[0].__exit__(None, None, None)
        deadline = time.monotonic() + 60
        while httpx.post(url, json=INIT, headers=HEADERS, timeout=60).status_code != 200:
            assert time.monotonic() < deadline, "a closed stream made no room"
            time.sleep(0.05)
        streams[1].__exit__(None, None, None)


def test_another_host_or_origin_is_refused(served: tuple[str, SqlStore]) -> None:
    """DNS rebinding: the app answers only to the Host and Origin it was given."""
    url, _store = served
    port = url.rsplit(":", 1)[1].split("/")[0]
    ok = httpx.post(url, json=INIT, headers=HEADERS, timeout=60)
    assert ok.status_code == 200
    rebound = httpx.post(
        url, json=INIT, headers={**HEADERS, "Host": f"rebound.example:{port}"}, timeout=60
    )
    assert rebound.status_code == 421
    page = httpx.post(
        url, json=INIT, headers={**HEADERS, "Origin": "http://rebound.example"}, timeout=60
    )
    assert page.status_code == 403
