"""``/mcp`` of a real ``remindkit api`` process, tried as one greedy or revoked token
would: one token holds at most ``McpShares.PER_TOKEN`` MCP sessions (``409
too_many_sessions`` past that, the other tokens' left alone), an idle session is ended
after ``REMINDKIT_MCP_IDLE`` while a busy one goes on, and the streams held open by a
token that is revoked, or whose project's feature is turned off, end within a second."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import httpx
import pytest

from .conftest import cli, wait_for
from .test_attacks import _ended_within
from .test_mcp_mount import ACCEPT, _initialize, _modern

pytest.importorskip("mcp")
pytestmark = [pytest.mark.api, pytest.mark.processes]
HANDSHAKE = "2025-11-25"


def _made(*args: str, db: str, home: Path) -> dict:
    done = cli("token", "create", *args, "--json", db=db, home=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _session_token(project: str, session: str, db: str, home: Path) -> dict:
    return _made("--project", project, "--session", session, db=db, home=home)


def _call(url: str, token: str, sid: str, method: str = "tools/list") -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {}}
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "mcp-session-id": sid,
        "mcp-protocol-version": HANDSHAKE,
    }
    return httpx.post(url, json=body, headers=headers, timeout=30)


def _opened(url: str, token: str) -> str:
    """A handshake-era session of ``token``, initialized as a client does."""
    got = _initialize(url, token)
    assert got.status_code == 200, got.text
    sid = got.headers["mcp-session-id"]
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    headers = {
        **ACCEPT,
        "Authorization": f"Bearer {token}",
        "mcp-session-id": sid,
        "mcp-protocol-version": HANDSHAKE,
    }
    assert httpx.post(url, json=note, headers=headers, timeout=30).status_code == 202
    return sid


def test_one_token_holds_only_its_share_of_mcp_sessions(api_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: one session token could open every MCP session of the server (10,000,
    each kept 30 idle minutes)."""
    from remindkit.api.app import McpShares

    db = f"sqlite:///{tmp_path / 'rk.db'}"
    greedy = _session_token("default", "greedy", db, tmp_path)["token"]
    other = _session_token("default", "other", db, tmp_path)["token"]
    server = api_server(db)
    url = f"{server.base_url}/mcp"
    sids = []
    for _ in range(McpShares.PER_TOKEN):
        got = _initialize(url, greedy)
        assert got.status_code == 200, (len(sids), got.text)
        sids.append(got.headers["mcp-session-id"])
    refused = _initialize(url, greedy)
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "too_many_sessions"
    # the stateless revision opens no session: the token's calls still answer
    assert _modern(url, greedy, "tools/list").status_code == 200
    assert _initialize(url, other).status_code == 200  # the other token's share is its own
    # a session ended (DELETE) gives its place back, once
    ended = httpx.delete(
        url,
        headers={
            "Authorization": f"Bearer {greedy}",
            "mcp-session-id": sids[0],
            "mcp-protocol-version": HANDSHAKE,
        },
        timeout=30,
    )
    assert ended.status_code == 200, ended.text
    assert _initialize(url, greedy).status_code == 200
    assert _initialize(url, greedy).status_code == 409


def test_an_idle_mcp_session_is_ended_and_a_busy_one_goes_on(api_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``REMINDKIT_MCP_IDLE=2``: a session with no request for 2 s is ended by the server
    (its id answers 404 afterwards), one used every half second is not."""
    db = f"sqlite:///{tmp_path / 'rk.db'}"
    token = _session_token("default", "s", db, tmp_path)["token"]
    server = api_server(db, args=("-v",), env={"REMINDKIT_MCP_IDLE": "2"})
    url = f"{server.base_url}/mcp"
    busy = _opened(url, token)
    started = time.monotonic()  # before the idle session's last request
    idle = _opened(url, token)
    answers: list[int] = []

    def ended() -> bool:
        answers.append(_call(url, token, busy).status_code)  # the busy one keeps working
        return f"Session {idle} idle timeout" in server.log.read_text()

    assert wait_for(ended, 60, step=0.5), server.log.read_text()[-3000:]
    took = time.monotonic() - started
    assert took >= 2.0, took  # not before its idle time
    assert set(answers) == {200}, answers
    gone = _call(url, token, idle)
    assert gone.status_code == 404, gone.text
    assert _call(url, token, busy).status_code == 200


def _get_stream(base_url: str, token: str, sid: str) -> socket.socket:
    """The handshake era's GET stream of session ``sid``, on a raw socket."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), 30)
    sock.sendall(
        (
            f"GET /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: text/event-stream\r\nmcp-session-id: {sid}\r\n"
            f"mcp-protocol-version: {HANDSHAKE}\r\n\r\n"
        ).encode()
    )
    return sock


def _modern_listen(base_url: str, token: str) -> socket.socket:
    """A 2026-07-28 request held open: ``subscriptions/listen``."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "subscriptions/listen",
            "params": {
                "notifications": {"toolsListChanged": True},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                },
            },
        }
    ).encode()
    sock = socket.create_connection((host, int(port)), 30)
    sock.sendall(
        (
            f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
    )
    return sock


def _status(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    head = sock.recv(4096)
    return head.split(b" ", 2)[1]


def test_held_mcp_streams_of_a_revoked_token_end(api_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Before: the token was checked only when a request began: a GET stream (and a
    held listen) opened before ``token rm``, or before the project's reminders feature
    was turned off, stayed open for as long as the client kept it."""
    db = f"sqlite:///{tmp_path / 'rk.db'}"
    assert cli("projects", "create", "p", db=db, home=tmp_path).returncode == 0
    revoked = _session_token("default", "r", db, tmp_path)
    of_p = _session_token("p", "q", db, tmp_path)["token"]
    kept = _session_token("default", "k", db, tmp_path)["token"]
    server = api_server(db)
    url = f"{server.base_url}/mcp"
    streams = {
        "revoked": _get_stream(server.base_url, revoked["token"], _opened(url, revoked["token"])),
        "disabled": _get_stream(server.base_url, of_p, _opened(url, of_p)),
        "kept": _get_stream(server.base_url, kept, _opened(url, kept)),
    }
    listen = _modern_listen(server.base_url, revoked["token"])
    for name, s in [*streams.items(), ("listen", listen)]:
        assert _status(s) == b"200", name
    try:
        for s in (listen, streams["revoked"]):  # held open: nothing ends them by itself
            assert _ended_within(s, 1.0) is None
        assert cli("token", "rm", revoked["id"], db=db, home=tmp_path).returncode == 0
        took = _ended_within(streams["revoked"], 10)
        assert took is not None and took < 2.0, took
        took = _ended_within(listen, 10)
        assert took is not None and took < 2.0, took
        off = cli(
            "projects", "features", "disable", "reminders", "--project", "p", db=db, home=tmp_path
        )
        assert off.returncode == 0, off.stderr
        took = _ended_within(streams["disabled"], 10)
        assert took is not None and took < 2.0, took
        assert _ended_within(streams["kept"], 1.5) is None  # another token's goes on
        assert _initialize(url, revoked["token"]).status_code == 401
        assert "Traceback" not in server.log.read_text(), server.log.read_text()[-3000:]
    finally:
        for s in [*streams.values(), listen]:
            s.close()
