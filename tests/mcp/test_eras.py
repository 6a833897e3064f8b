"""Both MCP eras on stdio, raw JSON-RPC over the server's pipes: the session is attached
on the first request of either era (no notifications/initialized needed), Claude Code is
sent to the handshake era only when it will take channel events, a line that is not
JSON-RPC gets a JSON-RPC error, the server ends at once on SIGINT, SIGTERM or a closed
stdin with its session and claims given back, and a server of its own never says
``armed`` unless an engine that outlives it runs."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from remindkit.clock import SystemClock, now_us
from remindkit.mcp.server import INSTRUCTIONS, INSTRUCTIONS_PLAIN
from remindkit.sessions.mcp import LEASE_PREFIX
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import START_S, wait_for
from .test_protocol import RawServer

pytestmark = pytest.mark.processes

VERSION = "io.modelcontextprotocol/protocolVersion"


def envelope(name: str = "modern-client", caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        VERSION: "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": name, "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps or {},
    }


def answer(line: bytes | None) -> dict[str, Any]:
    assert line is not None
    return json.loads(line)


def store_of(db: str, home: Path):  # type: ignore[no-untyped-def]
    return open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))


def holder(db: str, home: Path, sid: str) -> str | None:
    store = store_of(db, home)
    try:
        return store.coordination.lease_holder(LEASE_PREFIX + sid, now_us=now_us(SystemClock()))
    finally:
        store.close()


def session_config(db: str, home: Path, sid: str) -> dict[str, Any] | None:
    store = store_of(db, home)
    try:
        got = store.sessions.get_session(sid)
        return None if got is None else dict(got.config)
    finally:
        store.close()


def test_modern_era_attaches_on_its_first_request(db: str, home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    s = RawServer(
        db,
        home,
        "--session",
        "m1",
        "--project",
        str(project),
        "--resume-command",
        "agent {session}",
    )
    try:
        meta = envelope()
        found = answer(s.request("server/discover", {"_meta": meta})[1])["result"]
        assert "2026-07-28" in found["supportedVersions"]
        assert found["instructions"] == INSTRUCTIONS_PLAIN  # no channel on this era
        assert "experimental" not in found["capabilities"]
        wait_for(lambda: holder(db, home, "m1"), START_S, "the session attached")
        config = session_config(db, home, "m1")
        assert config is not None and config["argv"] == ["agent", "{session}"]
        assert config["cwd"] == str(project) and config["host"] == "modern-client"
        made = answer(
            s.request(
                "tools/call",
                {
                    "_meta": meta,
                    "name": "schedule_create",
                    "arguments": {"prompt": "x", "after": "1h"},
                },
            )[1]
        )
        assert made["result"]["structuredContent"]["ok"] is True
        rid, _ = s.request(
            "subscriptions/listen",
            {"_meta": meta, "notifications": {"toolsListChanged": True}},
            wait=False,
        )
        ack = json.loads(
            s.response_matching(lambda m: m.get("method", "").endswith("acknowledged"))
        )
        assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == rid
    finally:
        assert s.close_stdin_and_wait() == 0
    assert holder(db, home, "m1") is None


def test_handshake_attaches_without_initialized(db: str, home: Path) -> None:
    s = RawServer(db, home, "--session", "h1", "--resume-command", "agent {session}")
    try:
        s.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old"}},
        )
        # no notifications/initialized: the session is attached on the first request
        wait_for(lambda: holder(db, home, "h1"), START_S, "the session attached")
        assert (session_config(db, home, "h1") or {}).get("argv") == ["agent", "{session}"]
    finally:
        s.close_stdin_and_wait()


def test_a_store_locked_at_the_first_request_delays_the_attach_not_the_server(
    db: str, home: Path
) -> None:
    """Another process holds the SQLite store's write lock past the server's busy timeout
    when the client's first request comes: the session cannot be written then. The
    server answers anyway, says so on stderr, and attaches the session once the lock is
    gone (its watch retries); it never leaves the client with a closed connection."""
    import sqlite3

    s = RawServer(
        db,
        home,
        "--session",
        "lk1",
        "--resume-command",
        "agent {session}",
        env={"REMINDKIT_BUSY_TIMEOUT_MS": "200"},
    )
    lock = sqlite3.connect(db.removeprefix("sqlite:///"), isolation_level=None, timeout=60)
    try:
        # the server's engine is up (its start writes) before the lock is taken
        wait_for(
            lambda: [e for e in _engine_rows(db, home) if e.get("role") == "mcp"],
            START_S,
            "the server's engine registered",
        )
        lock.execute("BEGIN IMMEDIATE")
        try:
            s.initialize(capabilities={})
            wait_for(
                lambda: (
                    "could not attach session lk1" in s.err.read_text() or s.proc.poll() is not None
                ),
                START_S,
                "the failed attach logged",
            )
            assert s.proc.poll() is None, s.err.read_text()
            listed = answer(s.request("tools/list")[1])  # it answers while the store is locked
            assert "result" in listed, listed
        finally:
            lock.execute("ROLLBACK")
        wait_for(lambda: holder(db, home, "lk1"), START_S, "the session attached after all")
        assert (session_config(db, home, "lk1") or {}).get("argv") == ["agent", "{session}"]
        listed = answer(s.request("tools/list")[1])
        assert "result" in listed, listed
        assert any(t["name"] == "schedule_create" for t in listed["result"]["tools"])
    finally:
        lock.close()
        assert s.close_stdin_and_wait() == 0, s.err.read_text()[-3000:]


def test_lines_that_are_not_json_rpc_get_errors(db: str, home: Path) -> None:
    s = RawServer(db, home, "--session", "b1")
    try:
        s.initialize()
        assert s.proc.stdin is not None
        for raw in (
            b"this is not json\n",
            b'{"jsonrpc": "2.0", "id": 41, "method": 3}\n',
            b"[1, 2]\n",
        ):
            s.proc.stdin.write(raw)
            s.proc.stdin.flush()
        errors = [json.loads(s.response_matching(lambda m: "error" in m)) for _ in range(3)]
        codes = [(e["error"]["code"], e["id"]) for e in errors]  # in the order sent
        assert codes == [(-32700, None), (-32600, 41), (-32600, None)]
        _, line = s.request("tools/list")  # and it goes on
        assert "tools" in answer(line)["result"]
    finally:
        assert s.close_stdin_and_wait() == 0


FAKE_CLAUDE = r"""
import subprocess, sys
# a parent process named like Claude Code, with its command line: it starts the server on
# the same stdio, as Claude Code does
sys.exit(subprocess.call([sys.executable, "-m", "remindkit", "mcp", *sys.argv[sys.argv.index("--") + 1:]]))
"""


def claude_home(tmp_path: Path, *, rollout: bool) -> Path:
    """A HOME whose ~/.claude.json holds Claude Code's cached flags, as it writes them."""
    h = tmp_path / ("cc-on" if rollout else "cc-off")
    h.mkdir()
    (h / ".claude.json").write_text(
        json.dumps({"cachedGrowthBookFeatures": {"tengu_harbor": rollout}})
    )
    return h


def fake_claude(db: str, home: Path, tmp_path: Path, claude_home: Path, *flags: str) -> RawServer:
    script = tmp_path / "bin" / "claude"
    script.parent.mkdir(exist_ok=True)
    script.write_text(FAKE_CLAUDE)
    s = RawServer.__new__(RawServer)
    argv = [sys.executable, str(script), *flags, "--", "--db", db, "-v", "--session", "cc"]
    env = {"HOME": str(claude_home), "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1"}
    RawServer._start(s, home, argv, env)
    return s


@pytest.mark.parametrize("rollout", [True, False], ids=["channels-on", "channels-off"])
def test_claude_code_is_sent_to_the_handshake_only_when_it_takes_channels(
    db: str, home: Path, tmp_path: Path, rollout: bool
) -> None:
    """Claude Code skips channels on a 2026-07-28 connection: when its own checks say it
    takes this server's channel (rollout switch on, started with the server as a
    development channel), its server/discover is answered with the handshake versions and
    it connects again with initialize; otherwise the modern era is served."""
    s = fake_claude(
        db,
        home,
        tmp_path,
        claude_home(tmp_path, rollout=rollout),
        "--dangerously-load-development-channels",
        "server:remindkit",
    )
    try:
        got = answer(s.request("server/discover", {"_meta": envelope("claude-code")})[1])
        if not rollout:
            assert "result" in got and "experimental" not in got["result"]["capabilities"]
            return
        assert got["error"]["code"] == -32022
        assert "2025-11-25" in got["error"]["data"]["supported"]
        init = answer(
            s.request(
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"roots": {"listChanged": True}},
                    "clientInfo": {"name": "claude-code", "version": "2.1.332"},
                },
            )[1]
        )["result"]
        assert init["capabilities"]["experimental"] == {"claude/channel": {}}
        assert init["instructions"] == INSTRUCTIONS
        s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        s.request(
            "tools/call",
            {"name": "schedule_create", "arguments": {"prompt": "ping", "after": "1s"}},
        )
        event = json.loads(
            s.response_matching(lambda m: m.get("method") == "notifications/claude/channel", 60)
        )
        assert "ping" in event["params"]["content"]
    finally:
        s.close_stdin_and_wait()


def test_claude_code_without_the_channel_flag_stays_modern(
    db: str, home: Path, tmp_path: Path
) -> None:
    s = fake_claude(db, home, tmp_path, claude_home(tmp_path, rollout=True))
    try:
        got = answer(s.request("server/discover", {"_meta": envelope("claude-code")})[1])
        assert "result" in got and got["result"]["instructions"] == INSTRUCTIONS_PLAIN
    finally:
        s.close_stdin_and_wait()


def _engine_rows(db: str, home: Path) -> list[dict[str, Any]]:
    store = store_of(db, home)
    try:
        return store.coordination.live_engines(since_us=0)
    finally:
        store.close()


FLOOR = """
import os, signal, sys
for sig in (signal.SIGINT, signal.SIGTERM):
    signal.signal(sig, lambda *_: os._exit(0))
print("ready", flush=True)
sys.stdin.buffer.read()
os._exit(0)
"""


def _cpu_s(pid: int) -> float:
    """The CPU time all threads of ``pid`` have run so far (the scheduler's own count,
    in ns: exact, unlike /proc/PID/stat's clock ticks)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


def _end(proc: subprocess.Popen[bytes], how: str) -> tuple[float, float, int]:
    """Send ``how`` (a signal, or close stdin) and reap the process: (wall seconds from
    the signal to its exit, CPU seconds it ran meanwhile, exit code)."""
    before = _cpu_s(proc.pid)
    started = time.monotonic()
    if how == "stdin":
        assert proc.stdin is not None
        proc.stdin.close()
    else:
        proc.send_signal(getattr(signal, how))
    _pid, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime - before, proc.returncode


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "stdin"])
def test_ends_at_once_and_gives_the_session_back(db: str, home: Path, how: str) -> None:
    """Claude Code sends SIGINT, SIGTERM 100 ms later, SIGKILL 400 ms after that: the
    server leaves within 100 ms, its connection lease dropped and its engine gone from
    the store (its claims given back), so other engines take its fires at once.

    The budget is checked where a busy machine cannot move it: the CPU time the
    server's threads run from the signal to the exit (the scheduler's count), and the
    server's own exit path (from its handler to ``os._exit``, which it logs). The wall
    time from the signal to the exit is printed beside the same for a bare Python
    process given the same signal in the same run (the machine's floor)."""
    s = RawServer(db, home, "--session", "q1")
    s.initialize()
    s.request(
        "tools/call", {"name": "schedule_create", "arguments": {"prompt": "x", "after": "1h"}}
    )
    wait_for(lambda: holder(db, home, "q1") is not None, START_S, "the session attached")
    floor = subprocess.Popen(
        [sys.executable, "-c", FLOOR], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert floor.stdout is not None and floor.stdout.readline() == b"ready\n"
    wall, cpu, code = _end(s.proc, how)
    floor_wall, floor_cpu, floor_code = _end(floor, how)
    s.close_stdin_and_wait()
    for pipe in (floor.stdin, floor.stdout):
        assert pipe is not None
        pipe.close()
    line = next(ln for ln in s.err.read_text().splitlines() if "closed in" in ln)
    own = re.search(r"closed in (\d+) ms \(CPU (\d+) ms\)", line)
    assert own is not None, line
    print(
        f"{how}: exit path {own[1]} ms (CPU {own[2]} ms); signal to exit {wall * 1000:.0f} ms "
        f"wall, {cpu * 1000:.0f} ms CPU; the floor {floor_wall * 1000:.1f} ms wall, "
        f"{floor_cpu * 1000:.1f} ms CPU; load {os.getloadavg()[0]:.1f}"
    )
    assert code == 0 and floor_code == 0
    assert cpu < 0.100, f"{cpu * 1000:.0f} ms of CPU from {how} to the exit"
    assert int(own[1]) < 100, line
    assert "not finished" not in line, line  # its leases given back, not left to run out
    assert holder(db, home, "q1") is None
    assert [e for e in _engine_rows(db, home) if e.get("role") == "mcp"] == []


def test_armed_only_when_an_engine_outlives_the_server(db: str, home: Path) -> None:
    from tests.processes.conftest import Serve

    s = RawServer(db, home, "--session", "a1")
    try:
        s.initialize()
        made = answer(
            s.request(
                "tools/call",
                {"name": "schedule_create", "arguments": {"prompt": "x", "after": "1h"}},
            )[1]
        )
        assert made["result"]["structuredContent"]["armed"] is False
        text = json.loads(made["result"]["content"][0]["text"])
        assert text["armed"] is False
        engine = Serve(db, home, name="keeper")
        try:
            engine.wait_ready(START_S)
            time.sleep(2.5)  # past the server's memory of the last answer (ARMED_FRESH_S)
            again = answer(
                s.request(
                    "tools/call",
                    {"name": "schedule_create", "arguments": {"prompt": "y", "after": "1h"}},
                )[1]
            )
            assert again["result"]["structuredContent"]["armed"] is True
        finally:
            engine.stop()
    finally:
        s.close_stdin_and_wait()


def test_cwd_of_the_server_is_not_the_resume_folder_of_another_project(
    db: str, home: Path, tmp_path: Path
) -> None:
    """The project is CLAUDE_PROJECT_DIR (what Claude Code sets), not where the host
    happened to start the server."""
    project = tmp_path / "proj2"
    project.mkdir()
    s = RawServer(db, home, "--session", "p2", env={"CLAUDE_PROJECT_DIR": str(project)})
    try:
        s.initialize()
        wait_for(lambda: holder(db, home, "p2"), START_S, "the session attached")
        assert (session_config(db, home, "p2") or {}).get("cwd") == str(project)
    finally:
        s.close_stdin_and_wait()
    assert os.path.isdir(project)
