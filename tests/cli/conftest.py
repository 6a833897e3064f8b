"""A remindkit home of its own for each CLI test, and ways to run the command in-process
and as a real process."""

from __future__ import annotations

import io
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from remindkit.cli.main import main
from remindkit.clock import FakeClock, to_us
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store
from remindkit.store import schema as t

ROOT = Path(__file__).resolve().parents[2]


class Home:
    """REMINDKIT_HOME in a temporary folder; ``run`` calls ``main`` in-process,
    ``proc`` runs ``python -m remindkit`` as a process."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        self.monkeypatch = monkeypatch
        self.db = path / "remindkit.db"

    def run(self, *argv: str, scope: str | None = None) -> tuple[int, str, str]:
        if scope is None:
            self.monkeypatch.delenv("REMINDKIT_SESSION", raising=False)
        else:
            self.monkeypatch.setenv("REMINDKIT_SESSION", scope)
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    def js(self, *argv: str, scope: str | None = None) -> Any:
        code, out, err = self.run(*argv, "--json", scope=scope)
        assert code == 0, (out, err)
        return json.loads(out)

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            k: v for k, v in os.environ.items() if k not in ("REMINDKIT_SESSION", "REMINDKIT_DB")
        }
        env.update(
            REMINDKIT_HOME=str(self.path),
            REMINDKIT_TZ="UTC",
            REMINDKIT_NOTIFY="0",
            REMINDKIT_AUDIO="none",
            PYTHONPATH=str(ROOT),
            **extra,
        )
        return env

    def proc(
        self, *argv: str, timeout: float = 120, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "remindkit", *argv],
            capture_output=True,
            text=True,
            env=self.env(**extra),
            timeout=timeout,
            cwd=self.path,
        )

    def store(self) -> SqlStore:
        settings = Settings.from_env()
        return open_store(settings.url, settings=settings)

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return {
                table.name: sorted(
                    conn.execute(f'SELECT * FROM "{table.name}"').fetchall(), key=repr
                )
                for table in t.metadata.sorted_tables
            }
        finally:
            conn.close()

    def fire_due(self, sessions: dict[str, list[str]], *, after_s: float = 61) -> None:
        """Make command sessions (name → argv) with a reminder each that comes due now,
        and fire them with an engine stepped by hand, two hours ago by the real clock."""
        store = self.store()
        try:
            settings = store.settings
            clock = FakeClock(datetime.now(timezone.utc) - timedelta(hours=2))
            api = Reminders(store, clock=clock, settings=settings)
            for name, argv in sessions.items():
                store.sessions.put_session(
                    Session(name, adapter="command", config={"argv": argv}),
                    now_us=to_us(clock.now()),
                )
                api.create(f"{name} check", session=name, in_="1m")
            clock.advance(after_s)
            eng = Engine(store, clock=clock, settings=settings, inline=True, can_alert=False)
            try:
                for _ in range(3):
                    eng.tick(clock.now())
                    eng.notice_change()
                    eng.tick(clock.now())
            finally:
                eng.close()
        finally:
            store.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.setenv("REMINDKIT_NOTIFY", "0")
    monkeypatch.setenv("REMINDKIT_AUDIO", "none")
    for name in ("REMINDKIT_DB", "REMINDKIT_SESSION"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "home").mkdir()
    yield Home(tmp_path / "home", monkeypatch)


def wait_for(check: Callable[[], Any], *, timeout: float = 60, what: str = "a condition") -> Any:
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)
