"""`remindkit api` as a real process on a free loopback port (port 0: the server
binds, then prints the address it got). The tests run in the server's remindkit
home (``REMINDKIT_HOME``), as its user would: the SDK finds the local credential
there by itself; raw HTTP sends ``server.headers``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

_LISTENING = re.compile(r"listening on (http://\S+)")
_LOGIN = re.compile(r"open (http://\S+/login\?ticket=\S+)")


class ApiServer:
    def __init__(
        self,
        url: str,
        home: Path,
        *,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
        name: str = "api",
        port: int = 0,
        nofile: int | None = None,
    ) -> None:
        self.db = url
        self.home = home
        self.credential = ""
        self.login_url = ""
        self.log = home / f"{name}-{time.monotonic_ns()}.log"
        full = dict(os.environ)
        full.update(
            {
                "REMINDKIT_HOME": str(home),
                "REMINDKIT_LEASE": "2",
                "REMINDKIT_WAIT_CAP": "1",
                "PYTHONUNBUFFERED": "1",
                "REMINDKIT_TZ": "UTC",
            }
        )
        full.update(env or {})
        self.fh = open(self.log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remindkit",
                "api",
                "--db",
                url,
                "--port",
                str(port),
                "--no-alerts",
                *args,
            ],
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            env=full,
            start_new_session=True,
            preexec_fn=None if nofile is None else _limit_nofile(nofile),
        )
        self.base_url = ""

    def wait_ready(self, timeout: float = 60) -> ApiServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_text()
            m = _LISTENING.search(text)
            login = _LOGIN.search(text)
            if m and login:
                from remindkit.credential import load_credential

                self.base_url = m.group(1)
                self.login_url = login.group(1)
                self.credential = load_credential(self.home) or ""
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"remindkit api exited: {self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError(f"remindkit api did not start: {self.log.read_text()}")

    @property
    def headers(self) -> dict[str, str]:
        """The user's own credential, as the SDKs send it."""
        return {"Authorization": f"Bearer {self.credential}"}

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.fh.close()

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.fh.closed:
            self.fh.close()
        return self.proc.returncode


def _limit_nofile(n: int) -> Callable[[], None]:
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return limit


@pytest.fixture
def api_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[..., ApiServer]]:
    started: list[ApiServer] = []
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path))
    monkeypatch.delenv("REMINDKIT_TOKEN", raising=False)
    monkeypatch.delenv("REMINDKIT_API_URL", raising=False)

    def start(url: str, **kw) -> ApiServer:
        server = ApiServer(url, tmp_path, name=f"api{len(started)}", **kw)
        started.append(server)
        return server.wait_ready()

    yield start
    for s in started:
        s.stop()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(*args: str, db: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, REMINDKIT_HOME=str(home))
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args, "--db", db],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def wait_for(predicate, timeout: float, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()
