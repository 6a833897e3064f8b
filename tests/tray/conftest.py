"""Tray fixtures: a desktop (Xvfb + trayer) inside a D-Bus session with a mock
notification server, and the tray app as a real process on a SQLite store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from remindkit import Reminders, open_store
from remindkit.settings import Settings
from remindkit.store import SqlStore

from ..desktop_env import NotificationBus, XDesktop
from ..desktop_fixtures import alsa_capture, alsa_no_device

__all__ = ["alsa_capture", "alsa_no_device"]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"


class TrayProcess:
    """``remindkit tray`` in a child process; reads the state file it writes."""

    def __init__(self, folder: Path, env: dict[str, str], args: tuple[str, ...] = ()) -> None:
        self.state_path = folder / "tray-state.json"
        self.log = folder / "tray.log"
        env = {**env, "REMINDKIT_TRAY_STATE": str(self.state_path), "PYTHONUNBUFFERED": "1"}
        with self.log.open("wb") as fh:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "remindkit", "tray", "-v", *args],
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )

    def state(self) -> dict[str, Any]:
        try:
            return json.loads(self.state_path.read_text())
        except (OSError, ValueError):
            return {}

    def wait_state(
        self, predicate: Callable[[dict[str, Any]], Any], timeout: float = 10, what: str = ""
    ) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the tray exited ({self.proc.returncode}):\n{self.output()}")
            st = self.state()
            if st and predicate(st):
                return st
            time.sleep(0.05)
        raise AssertionError(
            f"timed out waiting for {what or predicate}; last state: {self.state()}\n{self.output()}"
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


@pytest.fixture
def desktop(tmp_path: Path) -> Iterator[tuple[XDesktop, NotificationBus]]:
    folder = tmp_path / "desktop"
    folder.mkdir()
    bus = NotificationBus(folder).start()
    x = XDesktop(folder)
    try:
        x.start()
        yield x, bus
    finally:
        x.stop()
        bus.stop()


@pytest.fixture
def tray_store(tmp_path: Path) -> Iterator[tuple[str, SqlStore, Reminders]]:
    url = f"sqlite:///{tmp_path / 'tray.db'}"
    store = open_store(url, settings=Settings.from_env(env={}, home=tmp_path / "home"))
    try:
        yield url, store, Reminders(store)
    finally:
        store.close()


@pytest.fixture
def start_tray(
    tmp_path: Path, tray_store: tuple[str, SqlStore, Reminders]
) -> Iterator[Callable[..., TrayProcess]]:
    trays: list[TrayProcess] = []
    url = tray_store[0]

    def start(extra_env: dict[str, str] | None = None, *args: str) -> TrayProcess:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYSTRAY_BACKEND")
        }
        env.update(
            {"REMINDKIT_DB": url, "REMINDKIT_HOME": str(tmp_path / "home"), "REMINDKIT_TZ": "UTC"}
        )
        env.update(extra_env or {})
        tray = TrayProcess(tmp_path, env, args)
        trays.append(tray)
        return tray

    yield start
    for tray in trays:
        tray.stop()


def artifact(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name
