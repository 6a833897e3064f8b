"""Real engine processes for fault scenarios: start, kill, stop, freeze, and load
reminders in bulk. Engines deliver through the ledger adapter (ledger.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from remindkit.clock import SystemClock, format_utc, from_us
from remindkit.reminders import Reminders
from remindkit.store import SqlStore, open_store

ROOT = Path(__file__).resolve().parents[2]
LIBFAKETIME = next(
    (
        p
        for p in (
            "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
            "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
            "/usr/lib/faketime/libfaketime.so.1",
        )
        if os.path.exists(p)
    ),
    None,
)


class Engine:
    def __init__(
        self, url: str, folder: Path, ledger: Path, name: str, env: dict[str, str]
    ) -> None:
        self.name = name
        self.log = folder / f"engine-{name}.log"
        full = dict(os.environ)
        full.update(
            {
                "REMINDKIT_HOME": str(folder / "home"),
                "REMINDKIT_LEASE": "2",
                "REMINDKIT_WAIT_CAP": "1",
                "REMINDKIT_ADAPTERS": "tests.reliability.ledger:adapter",
                "RK_LEDGER": str(ledger),
                "PYTHONPATH": str(ROOT) + os.pathsep + full.get("PYTHONPATH", ""),
                "PYTHONUNBUFFERED": "1",
            }
        )
        full.update(env)
        self.fh = open(self.log, "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "remindkit", "serve", "--db", url, "--no-alerts", "-v"],
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            env=full,
            cwd=ROOT,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, timeout: float = 30) -> Engine:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "remindkit serve: engine" in self.text():
                return self
            if self.proc.poll() is not None:
                raise AssertionError(f"engine {self.name} exited early:\n{self.text()[-3000:]}")
            time.sleep(0.05)
        raise AssertionError(f"engine {self.name} did not start:\n{self.text()[-3000:]}")

    def diagnose(self) -> str:
        """The end of its log, with every thread's stack (``serve`` dumps them on SIGUSR1):
        for the message of a failed wait."""
        if self.alive():
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
        else:
            return f"engine {self.name} exited with {self.proc.returncode}:\n{self.text()[-4000:]}"
        return f"engine {self.name} (alive):\n{self.text()[-6000:]}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def freeze(self) -> None:
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.alive():
            self.thaw()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.fh.close()


class Cluster:
    """Engines sharing one store, plus the ledger they deliver to."""

    def __init__(self, url: str, folder: Path, settings) -> None:  # type: ignore[no-untyped-def]
        self.url = url
        self.folder = folder
        self.ledger_path = folder / "ledger.jsonl"
        self.engines: list[Engine] = []
        self.settings = settings.with_limits(per_session=None, total=None, min_period_s=1)
        self.store: SqlStore = open_store(url, settings=self.settings)
        self.api = Reminders(self.store, clock=SystemClock(), settings=self.settings)

    def start(
        self, n: int = 1, env: dict[str, str] | None = None, wait: bool = True
    ) -> list[Engine]:
        new = [
            Engine(self.url, self.folder, self.ledger_path, f"{len(self.engines) + i}", env or {})
            for i in range(n)
        ]
        self.engines.extend(new)
        if wait:
            for e in new:
                e.wait_ready()
        return new

    def load(
        self, dues_us: Sequence[int], *, sessions: int = 20, prefix: str = "r", **extra
    ) -> set[str]:  # type: ignore[no-untyped-def]
        """One-shots (or ``every_s`` repeating ones) in one import; returns the keys expected."""
        lines = [
            json.dumps(
                {
                    "type": "session",
                    "id": f"{prefix}s{j}",
                    "adapter": "ledger",
                    "created_at": "2026-01-01T00:00:00Z",
                    "last_active_at": "2026-01-01T00:00:00Z",
                }
            )
            for j in range(sessions)
        ]
        keys = set()
        for i, due in enumerate(dues_us):
            at = format_utc(from_us(due))
            rid = f"rem_{prefix}{i:08d}"
            sched = {"v": 1, "kind": "at", "tz": "UTC", "first_at": at, "repeat": 1}
            if extra.get("every_s"):
                sched = {
                    "v": 1,
                    "kind": "every",
                    "tz": "UTC",
                    "first_at": at,
                    "every_s": extra["every_s"],
                    "repeat": extra.get("repeat"),
                }
            lines.append(
                json.dumps(
                    {
                        "type": "reminder",
                        "id": rid,
                        "session": f"{prefix}s{i % sessions}",
                        "text": f"{prefix} {i}",
                        "schedule": sched,
                        "state": "active",
                        "next_fire_at": at,
                        "created_at": "2026-01-01T00:00:00Z",
                        "alarm": bool(extra.get("alarm", False)),
                        "misfire": extra.get("misfire", "latest"),
                    }
                )
            )
            if not extra.get("every_s"):
                keys.add(f"{rid}@{at}")
        self.api.import_(lines)
        return keys

    def deadlocks(self) -> int | None:
        """The deadlocks PostgreSQL has detected in this database so far (all sessions,
        ``pg_stat_database``); None on SQLite."""
        if not self.url.startswith("postgresql"):
            return None
        import psycopg
        from sqlalchemy.engine import make_url

        raw = make_url(self.url).set(drivername="postgresql").render_as_string(hide_password=False)
        with psycopg.connect(raw, autocommit=True) as conn:
            row = conn.execute(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
        assert row is not None
        return int(row[0])

    def stop_engines(self) -> None:
        """Stop every engine. A PostgreSQL backend's statistics (its deadlocks among them)
        are written when its session ends, so :meth:`deadlocks` counts theirs after this."""
        for e in self.engines:
            e.stop()

    def close(self) -> None:
        self.stop_engines()
        self.store.close()


def now_us() -> int:
    """Now, in whole milliseconds (the precision of occurrence keys)."""
    return time.time_ns() // 1_000_000 * 1000


@pytest.fixture
def cluster_factory(tmp_path, settings):  # type: ignore[no-untyped-def]
    made: list[Cluster] = []

    def make(url: str) -> Cluster:
        c = Cluster(url, tmp_path, settings)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture(params=["sqlite", "postgres"])
def any_url(request, tmp_path):  # type: ignore[no-untyped-def]
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    return request.getfixturevalue("pg_schema_url")
