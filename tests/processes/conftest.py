"""Real processes: `remindkit serve` engines sharing one store, a ledger of deliveries."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remindkit.models import Session

ROOT = Path(__file__).resolve().parents[2]
LEDGER_CMD = 'echo "$PPID $REMINDKIT_OCCURRENCE_KEYS" >> "$RK_LEDGER"'


class Serve:
    def __init__(
        self, url: str, home: Path, env: dict[str, str] | None = None, name: str = "e"
    ) -> None:
        self.log = home / f"serve-{name}-{time.monotonic_ns()}.log"
        full_env = dict(os.environ)
        full_env.update(
            {
                "REMINDKIT_HOME": str(home),
                "REMINDKIT_LEASE": "2",
                "REMINDKIT_WAIT_CAP": "1",
                "PYTHONUNBUFFERED": "1",
            }
        )
        full_env.update(env or {})
        self.fh = open(self.log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "remindkit", "serve", "--db", url, "--no-alerts", "-v"],
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            env=full_env,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "remindkit serve: engine" in self.log.read_text():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited: {self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError("serve did not start")

    def kill(self, *, group: bool = False) -> None:
        """SIGKILL the engine; ``group``: with the agent commands it runs (a crash of the
        whole machine or container), so no turn it started can finish on its own."""
        if group:
            os.killpg(self.proc.pid, signal.SIGKILL)
        else:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.fh.close()
        return self.proc.returncode


@pytest.fixture
def serves(tmp_path):
    started: list[Serve] = []

    def start(url: str, n: int = 1, **kw) -> list[Serve]:
        new = [Serve(url, tmp_path, name=f"{len(started) + i}", **kw) for i in range(n)]
        started.extend(new)
        for s in new:
            s.wait_ready()
        return new

    yield start
    for s in started:
        s.stop()


def add_ledger_sessions(store, ids, ledger: Path, now_us: int) -> None:
    for sid in ids:
        store.sessions.put_session(
            Session(
                sid,
                adapter="command",
                config={"argv": ["sh", "-c", LEDGER_CMD], "env": {"RK_LEDGER": str(ledger)}},
            ),
            now_us=now_us,
        )


def read_ledger(ledger: Path) -> list[tuple[int, str]]:
    out = []
    if not ledger.exists():
        return out
    for line in ledger.read_text().splitlines():
        pid, _, keys = line.partition(" ")
        out.extend((int(pid), k) for k in keys.split(",") if k)
    return out


def wait_for(predicate, timeout: float, step: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def counts(entries) -> Counter:
    return Counter(k for _pid, k in entries)


# -- `remindkit serve` processes started with `python -m remindkit` in a store of their own


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    e.update(
        REMINDKIT_HOME=str(tmp_path / "home"),
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'store.db'}",
        REMINDKIT_TZ="UTC",
        REMINDKIT_MIN_PERIOD="1",
        PYTHONUNBUFFERED="1",
        TEST_MODEL_KEY="sk-test-123",
        REMINDKIT_API_KEY_ENVS="TEST_MODEL_KEY",
    )
    e.pop("XDG_RUNTIME_DIR", None)
    return e


@pytest.fixture
def serve(env: dict[str, str]) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start(**extra: str) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [sys.executable, "-m", "remindkit", "serve", "--no-alerts"],
            env={**env, **extra},
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        procs.append(p)
        assert p.stdout is not None and "engine" in p.stdout.readline()
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
