"""JSON-RPC on the wire, read raw from the server's pipes: nothing but JSON-RPC on
stdout, a tool list identical byte for byte across calls and restarts, a client that
cancels or disconnects mid-call, and an end when stdin closes."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import START_S, server_env

pytestmark = pytest.mark.processes


class RawServer:
    def __init__(self, db: str, home: Path, *args: str, env: dict[str, str] | None = None) -> None:
        argv = [sys.executable, "-m", "remindkit", "mcp", "--db", db, "-v", *args]
        self._start(home, argv, env)

    def _start(self, home: Path, argv: list[str], env: dict[str, str] | None) -> None:
        self.err = home / f"raw-{time.monotonic_ns()}.log"
        self._errfh = open(self.err, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errfh,
            env=server_env(home, env),
            cwd=home,
        )
        self.lines: list[bytes] = []
        self._q: queue.Queue[bytes] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._id = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self._q.put(line)

    def send(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(obj) + "\n").encode())
        self.proc.stdin.flush()

    def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        wait: bool = True,
        timeout: float = START_S,
    ) -> tuple[int, bytes | None]:
        self._id += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self._id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self._id, (self.response(self._id, timeout) if wait else None)

    def response(self, rid: int, timeout: float) -> bytes:
        return self.response_matching(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def response_matching(self, match: Any, timeout: float = START_S) -> bytes:
        """The next line from the server whose message ``match``es (earlier ones are
        dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._q.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no matching message: {self.err.read_text()[-2000:]}"
                ) from None
            if match(json.loads(line)):
                return line

    def initialize(self, capabilities: dict[str, Any] | None = None) -> bytes:
        """The handshake, as a host that takes channel events (unless told otherwise)."""
        _, line = self.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {"experimental": {"claude/channel": {}}}
                if capabilities is None
                else capabilities,
                "clientInfo": {"name": "raw", "version": "1"},
            },
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert line is not None
        return line

    def close_stdin_and_wait(self, timeout: float = 60) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            self._reader.join(10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self._errfh.close()


def _result_bytes(line: bytes) -> bytes:
    """The raw bytes of the result member (the id differs between calls)."""
    text = line.decode()
    start = text.index('"result":')
    return text[start:].encode()


def test_stdout_is_json_rpc_only_and_tool_list_is_byte_stable(db: str, home: Path) -> None:
    a = RawServer(db, home, "--session", "raw")
    a.initialize()
    _, first = a.request("tools/list")
    _, second = a.request("tools/list")
    _, made = a.request(
        "tools/call",
        {"name": "schedule_create", "arguments": {"prompt": "print('to stdout')\n", "after": "1s"}},
    )
    assert made is not None and b'"ok":true' in made.replace(b" ", b""), made
    deadline = time.monotonic() + 60
    while not any(b"notifications/claude/channel" in line for line in a.lines):
        assert time.monotonic() < deadline, "no channel event: " + a.err.read_text()[-3000:]
        time.sleep(0.01)
    assert a.close_stdin_and_wait() == 0  # ends when stdin closes
    for line in a.lines:
        msg = json.loads(line)
        assert msg["jsonrpc"] == "2.0" and ("id" in msg or "method" in msg), line
    assert "DEBUG" in a.err.read_text()  # the logs went to stderr

    b = RawServer(db, home, "--session", "raw")
    b.initialize()
    _, third = b.request("tools/list")
    assert b.close_stdin_and_wait() == 0
    assert first is not None and second is not None and third is not None
    assert _result_bytes(first) == _result_bytes(second) == _result_bytes(third)


def test_survives_cancel_mid_call_and_ends_on_disconnect(db: str, home: Path) -> None:
    s = RawServer(db, home, "--session", "raw2")
    s.initialize()
    rid, _ = s.request("tools/call", {"name": "schedule_list", "arguments": {}}, wait=False)
    s.send(
        {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": rid, "reason": "gone"},
        }
    )
    _, line = s.request(
        "tools/call",
        {"name": "schedule_create", "arguments": {"prompt": "still here", "after": "1h"}},
    )
    assert line is not None and json.loads(line)["result"]["structuredContent"]["ok"] is True
    # the client goes away in the middle of a call: the server ends cleanly
    s.request(
        "tools/call",
        {"name": "schedule_create", "arguments": {"prompt": "half", "after": "1h"}},
        wait=False,
    )
    started = time.monotonic()
    assert s.close_stdin_and_wait() == 0
    assert time.monotonic() - started < 60
    assert "Traceback" not in s.err.read_text()


def test_sigterm_gives_the_session_back_at_once(db: str, home: Path) -> None:
    """A host that ends the server with SIGTERM: it exits and drops the session's
    connection lease, so a resume command need not wait for the lease to expire."""
    import signal

    from remindkit.clock import SystemClock, now_us
    from remindkit.sessions.mcp import LEASE_PREFIX
    from remindkit.settings import Settings
    from remindkit.store import open_store

    s = RawServer(db, home, "--session", "term")
    s.initialize()
    s.request("tools/list")
    store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
    try:
        deadline = time.monotonic() + 60
        while (
            store.coordination.lease_holder(LEASE_PREFIX + "term", now_us=now_us(SystemClock()))
            is None
        ):
            assert time.monotonic() < deadline, "the server never held its session"
            time.sleep(0.05)
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(60) == 0
        assert (
            store.coordination.lease_holder(LEASE_PREFIX + "term", now_us=now_us(SystemClock()))
            is None
        )
    finally:
        store.close()
        s.close_stdin_and_wait()
