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

from tests.conftest import cannot_run

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
BIN = HERE / "node_modules" / ".bin"
REMINDKIT = str(Path(sys.executable).parent / "remindkit")


def cli(name: str) -> str:
    """The CLI's executable; without it the test skips, or fails under
    ``REMINDKIT_REQUIRE_CLIENTS=1`` (scripts/test sets it: setup --test installed them)."""
    path = BIN / name
    if not path.exists():
        cannot_run(
            f"{name} is not installed at {path} (scripts/setup --test runs npm ci in {HERE})",
            "REMINDKIT_REQUIRE_CLIENTS",
        )
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


def codex_trust_hooks(codex: str, world: World) -> list[str]:
    """What Codex's "Trust all and continue" records, through Codex itself: its app
    server lists the project's hooks (``hooks/list``, with each hook's hash) and writes
    ``hooks.state.<key>.trusted_hash`` into the user's config (``config/batchWrite``).
    Returns the trust status of each hook afterwards."""
    import json

    proc = subprocess.Popen(
        [codex, "app-server"],
        cwd=world.project,
        env=world.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def call(rid: int, method: str, params: dict[str, Any]) -> Any:
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}))
        stdin.write("\n")
        stdin.flush()
        for line in stdout:
            msg = json.loads(line)
            if msg.get("id") == rid:
                assert "result" in msg, msg
                return msg["result"]
        raise AssertionError(f"codex app-server ended before answering {method}")

    try:
        call(1, "initialize", {"clientInfo": {"name": "remindkit-tests", "version": "1"}})
        stdin.write('{"jsonrpc": "2.0", "method": "initialized"}\n')
        stdin.flush()
        listed = call(2, "hooks/list", {"cwds": [str(world.project)]})["data"][0]["hooks"]
        trust = {h["key"]: {"trusted_hash": h["currentHash"]} for h in listed}
        edit = {"keyPath": "hooks.state", "mergeStrategy": "upsert", "value": trust}
        call(3, "config/batchWrite", {"edits": [edit]})
        listed = call(4, "hooks/list", {"cwds": [str(world.project)]})["data"][0]["hooks"]
        return [h["trustStatus"] for h in listed]
    finally:
        proc.kill()
        proc.wait()
        stdin.close()
        stdout.close()
