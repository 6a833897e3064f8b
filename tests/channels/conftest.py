"""The Telegram bot as a real process against the Bot API stand-in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .botapi_standin import TOKEN, BotAPI

AGENT = Path(__file__).with_name("agent.py")


@pytest.fixture
def botapi() -> Iterator[BotAPI]:
    api = BotAPI().start()
    yield api
    api.close()


class BotProcess:
    def __init__(
        self, url: str, api: BotAPI, home: Path, *, args: list[str], env: dict[str, str], name: str
    ) -> None:
        self.log = home / f"bot-{name}.log"
        full = dict(os.environ)
        full.update(
            {
                "REMINDKIT_HOME": str(home),
                "REMINDKIT_LEASE": "3",
                "REMINDKIT_WAIT_CAP": "1",
                "PYTHONUNBUFFERED": "1",
                "TELEGRAM_BOT_TOKEN": TOKEN,
                "REMINDKIT_TZ": "UTC",
            }
        )
        full.update(env)
        self.fh = open(self.log, "a")  # noqa: SIM115
        # the agent's log on its command line: a command session's environment is an allowlist
        agent_log = env.get("RK_AGENT_LOG", str(home / "agent.log"))
        agent = [] if "--openai" in args else ["--command", f"{sys.executable} {AGENT} {agent_log}"]
        argv = [
            sys.executable,
            "-m",
            "remindkit",
            "telegram",
            "--db",
            url,
            "--api-url",
            api.url,
            "--poll-timeout",
            "2",
            *agent,
            "-v",
            *args,
        ]
        self.proc = subprocess.Popen(
            argv, stdout=self.fh, stderr=subprocess.STDOUT, env=full, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while "remindkit telegram: on" not in self.log.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the bot did not start: {self.log.read_text()}")
            time.sleep(0.05)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.fh.close()


@pytest.fixture
def bots(tmp_path: Path, botapi: BotAPI) -> Iterator[Any]:
    started: list[BotProcess] = []
    agent_log = tmp_path / "agent.log"
    agent_log.touch()

    def start(url: str, *args: str, env: dict[str, str] | None = None) -> BotProcess:
        full = {"RK_AGENT_LOG": str(agent_log), **(env or {})}
        bot = BotProcess(
            url,
            botapi,
            tmp_path,
            args=list(args) or ["--allow", "100"],
            env=full,
            name=str(len(started)),
        )
        started.append(bot)
        return bot

    start.agent_log = agent_log  # type: ignore[attr-defined]
    yield start
    for bot in started:
        bot.stop()
