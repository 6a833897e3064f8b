"""The MCP client frameworks as real clients: each runs in its own venv (built by
``scripts/setup --test`` from ``requirements-*.txt`` beside this file), driven by a
script in ``drivers/`` the way its users drive it, against ``remindkit mcp`` (stdio)
or ``remindkit api``'s ``/mcp`` (Streamable HTTP) started from this venv.

Without a client venv its tests skip, unless ``REMINDKIT_REQUIRE_CLIENTS=1`` (as
``scripts/test`` sets once setup has built them), where they fail.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from remindkit.clock import SystemClock
from remindkit.models import Occurrence
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store

pytest.importorskip("mcp")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
DRIVERS = HERE / "drivers"
START_S = 120.0  # a driver's first event, a server's start: imports on a loaded machine
FIRE_S = 60.0  # a fire due in 1 s has an outcome
REQUIRE = os.environ.get("REMINDKIT_REQUIRE_CLIENTS") == "1"


def client_python(venv: str) -> Path:
    python = HERE / f".venv-{venv}" / "bin" / "python"
    if not python.exists():
        why = f"{python} is missing: run scripts/setup --test"
        if REQUIRE:
            pytest.fail(why)
        pytest.skip(why)
    return python


def wait_for(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def remindkit_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a remindkit process the tests start (this venv's remindkit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REMINDKIT_", "CLAUDE_"))}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "REMINDKIT_HOME": str(home),
            "REMINDKIT_WAIT_CAP": "1",
            "REMINDKIT_LEASE": "3",
            "REMINDKIT_TZ": "UTC",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra or {})
    return env


def mcp_command(db: str, session: str) -> list[str]:
    """How an MCP host starts remindkit's stdio server for one session."""
    return [sys.executable, "-m", "remindkit", "mcp", "--db", db, "--session", session]


def history(db: str, home: Path, reminder_id: str) -> list[Occurrence]:
    store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
    try:
        return list(Reminders(store, clock=SystemClock()).history(reminder_id))
    finally:
        store.close()


def fire_outcome(db: str, home: Path, reminder_id: str) -> Occurrence:
    """The fire of ``reminder_id`` once an engine has decided what became of it."""

    def decided() -> Occurrence | None:
        rows = [o for o in history(db, home, reminder_id) if o.outcome != "claimed"]
        return rows[0] if rows else None

    return wait_for(decided, FIRE_S, f"the fire of {reminder_id} to have an outcome")


@dataclass
class Driver:
    """One driver process: its events as they come, its stderr in a file."""

    proc: subprocess.Popen[str]
    log: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    _q: queue.Queue[dict[str, Any] | None] = field(default_factory=queue.Queue)
    _pending: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def start(cls, python: Path, script: str, spec: dict[str, Any], log: Path) -> Driver:
        err: IO[str] = open(log, "w")  # noqa: SIM115
        proc = subprocess.Popen(
            [str(python), str(DRIVERS / script), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=str(DRIVERS),
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(DRIVERS)},
            start_new_session=True,
        )
        err.close()
        driver = cls(proc, log)
        threading.Thread(target=driver._read, daemon=True).start()
        return driver

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._q.put(json.loads(line))
            except ValueError:
                self._q.put({"event": "stdout", "line": line})
        self._q.put(None)

    def next(
        self, name: str, timeout: float = START_S, *, era: str | None = None
    ) -> dict[str, Any]:
        """The next event ``name`` (of ``era``, when given); the others wait their turn."""

        def wanted(event: dict[str, Any]) -> bool:
            return event["event"] == name and (era is None or event.get("era") == era)

        for event in self._pending:
            if wanted(event):
                self._pending.remove(event)
                return event
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                event = self._q.get(timeout=max(left, 0.01))
            except queue.Empty:
                raise AssertionError(
                    f"no {name} within {timeout}s; stderr:\n{self.excerpt()}"
                ) from None
            if event is None:
                self.proc.wait(30)
                raise AssertionError(
                    f"the driver ended ({self.proc.returncode}) before {name}; "
                    f"stderr:\n{self.excerpt()}"
                )
            self.events.append(event)
            if wanted(event):
                return event
            self._pending.append(event)

    def go(self, era: str = "") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"go {era}\n")
        self.proc.stdin.flush()

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def excerpt(self, each: int = 3000) -> str:
        """The start of stderr (where the servers a stdio client starts say why they
        stopped) and its end (the client's own traceback)."""
        text = self.stderr()
        if len(text) <= 2 * each:
            return text
        return f"{text[:each]}\n[... {len(text) - 2 * each} characters ...]\n{text[-each:]}"

    def of(self, name: str, era: str | None = None) -> list[dict[str, Any]]:
        """The events ``name`` (of ``era``) seen so far."""
        return [
            e for e in self.events if e["event"] == name and (era is None or e.get("era") == era)
        ]

    def finish(self, timeout: float = 60) -> None:
        self.next("done", timeout)
        assert self.proc.wait(timeout) == 0, self.excerpt()

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass


@pytest.fixture
def drivers() -> Iterator[list[Driver]]:
    started: list[Driver] = []
    yield started
    for d in started:
        d.kill()


@dataclass
class Seen:
    """What one client saw in one era, and what became of the fire meanwhile."""

    era: str
    protocol: str | None
    tools: list[str]
    calls: list[dict[str, Any]]
    fire: Occurrence


def drive_eras(driver: Driver, db: str, home: Path, eras: list[str]) -> dict[str, Seen]:
    """Follow the driver through each era: its calls, then the fire it made (due 1 s
    after the first call) while it stays connected."""
    seen: dict[str, Seen] = {}
    for era in eras:  # the eras run at once: follow each in turn
        connected = driver.next("connected", era=era)
        tools = driver.next("tools", era=era)
        waiting = driver.next("await_fire", era=era)
        fire = fire_outcome(db, home, waiting["id"])
        driver.go(era)
        seen[era] = Seen(era, connected.get("protocol"), tools["names"], [], fire)
    for era in eras:
        driver.next("messages", era=era)
        seen[era].calls = driver.of("called", era)
    driver.finish()
    return seen


_LISTENING = re.compile(r"listening on (http://\S+)")


@dataclass
class ApiServer:
    proc: subprocess.Popen[bytes]
    log: Path
    db: str
    home: Path
    url: str = ""

    def token(self, session: str, project: str = "default") -> str:
        done = subprocess.run(
            [sys.executable, "-m", "remindkit", "token", "create", "--db", self.db]
            + ["--project", project, "--session", session, "--json"],
            env=remindkit_env(self.home),
            capture_output=True,
            text=True,
            timeout=START_S,
        )
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["token"])


def start_api(db: str, home: Path, *args: str) -> ApiServer:
    """``remindkit api`` on a free port, with its engine (alerts off)."""
    log = home / f"api-{time.monotonic_ns()}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "remindkit", "api", "--db", db, "--port", "0", "--no-alerts"]
            + list(args),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=remindkit_env(home),
            start_new_session=True,
        )
    server = ApiServer(proc, log, db, home)

    def ready() -> str | None:
        if proc.poll() is not None:
            raise AssertionError(f"remindkit api exited: {log.read_text()}")
        m = _LISTENING.search(log.read_text())
        return m.group(1) if m else None

    server.url = wait_for(ready, START_S, "remindkit api to listen")
    return server


def stop_api(server: ApiServer) -> None:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
        try:
            server.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.proc.pid, signal.SIGKILL)
            server.proc.wait(30)


@pytest.fixture(scope="session")
def api_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("api-home")


@pytest.fixture(scope="session")
def api(api_home: Path) -> Iterator[ApiServer]:
    """One ``remindkit api`` for every HTTP client (a token per session)."""
    db = f"sqlite:///{api_home / 'rk.db'}"
    # the first token exists before the server starts: from then on every request needs one
    first = ApiServer(None, api_home / "none.log", db, api_home)  # type: ignore[arg-type]
    first.token("warm-up")
    server = start_api(db, api_home)
    try:
        yield server
    finally:
        stop_api(server)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'rk.db'}"


PROTOCOLS = {"legacy": "2025-11-25", "modern": "2026-07-28"}
ARTIFACT = ROOT / "test-artifacts" / "mcp-clients.jsonl"


def check_seen(client: str, transport: str, seen: dict[str, Seen]) -> None:
    """The calls of every era came back as the tools answer them, and no fire was
    recorded delivered to a client that never took it: it waits, with its reason."""
    from remindkit.protocol.tools import TOOL_NAMES

    for era, s in seen.items():
        if s.protocol is not None:
            assert s.protocol == PROTOCOLS[era], (era, s.protocol)
        assert s.tools == list(TOOL_NAMES), s.tools
        data = [c["data"] for c in s.calls]
        assert [c["tool"] for c in s.calls] == [
            "schedule_create",
            "schedule_create",
            "schedule_list",
            "schedule_delete",
            "set_callback",
            "set_callback",
            "set_callback",
            "schedule_list",
        ], s.calls
        assert data[0].get("reminder", {}).get("prompt") == "fire while connected", data[0]
        assert data[1].get("reminder", {}).get("label") == "del", data[1]
        assert {r["prompt"] for r in data[2]["reminders"]} >= {"to delete"}, data[2]
        assert data[3]["deleted"] == data[1]["reminder"]["id"], data[3]
        assert "Callback scheduled: fires every 30s" in data[4]["text"], data[4]
        assert data[5]["text"].startswith("Active callbacks (1/8):"), data[5]
        assert data[6]["text"] == "Cancelled 1 callback.", data[6]
        assert "to delete" not in {r["prompt"] for r in data[7]["reminders"]}, data[7]
        fire = s.fire
        assert fire.outcome == "waiting", (era, fire.to_dict())
        assert fire.delivered_at is None and fire.error, fire.to_dict()
        ARTIFACT.parent.mkdir(exist_ok=True)
        with open(ARTIFACT, "a") as out:
            row = {
                "client": client,
                "transport": transport,
                "era": era,
                "protocol": s.protocol,
                "tools": len(s.tools),
                "calls_ok": sum(1 for d in data if d.get("ok", True)),
                "fire": fire.outcome,
                "reason": fire.error,
            }
            out.write(json.dumps(row) + "\n")


def stdio_job(db: str, home: Path, session: str, eras: list[str], **more: Any) -> dict[str, Any]:
    """A driver's job over stdio: each era runs ``remindkit mcp`` for a session of its own."""
    return {
        "transport": "stdio",
        "eras": eras,
        "command": mcp_command(db, session),
        "env": remindkit_env(home),
        "cwd": str(home),
        "per_era": {e: {"command": mcp_command(db, f"{session}-{e}")} for e in eras},
        **more,
    }


def http_job(api: ApiServer, session: str, eras: list[str], **more: Any) -> dict[str, Any]:
    """A driver's job over Streamable HTTP: each era with a session token of its own."""
    return {
        "transport": "http",
        "eras": eras,
        "url": f"{api.url}/mcp",
        "per_era": {e: {"token": api.token(f"{session}-{e}")} for e in eras},
        **more,
    }
