"""Codex CLI, Gemini CLI and opencode, installed from npm by ``scripts/setup --test``
(pinned in package.json beside this file), each in a HOME of its own, against the
scripted model stand-in of :mod:`.standin`, with ``remindkit serve`` as the engine that
runs their resume presets."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BIN = HERE / "node_modules" / ".bin"
REMINDKIT = str(Path(sys.executable).parent / "remindkit")


def cli(name: str) -> str:
    path = BIN / name
    if not path.exists():
        if os.environ.get("CI"):
            raise AssertionError(f"{path} is missing: scripts/setup --test installs it")
        pytest.skip(f"{name} is not installed (scripts/setup --test runs npm ci in {HERE})")
    return str(path)


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout:g} s")
        time.sleep(0.1)


@dataclass
class World:
    """A person's machine in miniature: a HOME, a project folder, remindkit's home."""

    home: Path
    project: Path
    rk_home: Path
    env: dict[str, str]

    def run(
        self, argv: list[str], *, timeout: float = 120, **kw: Any
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv,
            cwd=kw.pop("cwd", self.project),
            env={**self.env, **kw.pop("env", {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            **kw,
        )

    def install(self, host: str, *extra: str) -> str:
        out = self.run(
            [REMINDKIT, "mcp", f"install-{host}", "--project", str(self.project), *extra],
            cwd=self.home,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    def api(self) -> Any:
        from remindkit.reminders import Reminders
        from remindkit.settings import Settings
        from remindkit.store import open_store

        settings = Settings.from_env({"REMINDKIT_HOME": str(self.rk_home)})
        return Reminders(open_store(None, settings=settings), settings=settings)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    home = tmp_path / "home"
    project = tmp_path / "project"
    rk_home = tmp_path / "rk"
    for d in (home, project, rk_home):
        d.mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "TERM")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            "HOME": str(home),
            "REMINDKIT_HOME": str(rk_home),
            "REMINDKIT_WAIT_CAP": "1",
            "REMINDKIT_LEASE": "3",  # a server killed by its CLI frees the session soon
            "PYTHONPATH": str(ROOT),
            "NO_COLOR": "1",
            "STANDIN_KEY": "sk-standin",  # the key of Codex's configured provider (env_key)
        }
    )
    yield World(home, project, rk_home, env)


@pytest.fixture
def serve(world: World) -> Iterator[subprocess.Popen[str]]:
    """``remindkit serve`` in the person's environment (their HOME, their keys): the
    engine that runs resume presets once the CLI is gone."""
    log = open(world.home / "serve.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [REMINDKIT, "serve", "--no-alerts", "-v"],
        cwd=world.home,
        env={**world.env, "REMINDKIT_LEASE": "3"},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(
            lambda: "engine" in (world.home / "serve.log").read_text() or proc.poll() is not None,
            60,
            "remindkit serve",
        )
        assert proc.poll() is None, (world.home / "serve.log").read_text()
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
