"""What a person sees in a terminal: `remindkit demo` on a machine without a
sound device, the input prompt of `remindkit chat` (a real pseudo-terminal), and
both following `remindkit alerts mute` (their engines' alerter reads the store)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from remindkit.store import open_store

from ..sessions.model_server import ModelServer, text
from .conftest import wait_for

pytestmark = pytest.mark.processes
ROOT = Path(__file__).resolve().parents[2]


def base_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    env.update(
        REMINDKIT_HOME=str(tmp_path / "home"),
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'store.db'}",
        REMINDKIT_TZ="UTC",
        PYTHONUNBUFFERED="1",
    )
    return env


def test_demo_without_a_sound_device_says_so_once_and_keeps_alsa_quiet(tmp_path: Path) -> None:
    empty = tmp_path / "asound.conf"
    empty.write_text("# no devices at all\n")
    env = {
        **base_env(tmp_path),
        "ALSA_CONFIG_PATH": str(empty),
    }  # ALSA then knows no PCM, not even "default"
    out = subprocess.run(
        [sys.executable, "-m", "remindkit", "demo", "--delay", "1"],
        env=env,
        text=True,
        capture_output=True,
        timeout=180,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "ALSA lib" not in out.stderr and "ALSA lib" not in out.stdout
    assert out.stderr.count("no audio device") == 1, out.stderr
    assert "not heard: there is no audio device" in out.stdout
    assert "demo complete" in out.stdout


def read_until(fd: int, needle: bytes, timeout: float, seen: bytes = b"", count: int = 1) -> bytes:
    deadline = time.monotonic() + timeout
    while seen.count(needle) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"{needle!r} not seen in {seen!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def test_chat_shows_an_input_prompt_in_a_terminal(tmp_path: Path) -> None:
    with ModelServer("openai", lambda body: text("hello there")) as server:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remindkit",
                "chat",
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--no-engine",
                "--session",
                "t",
            ],
            # a pseudo-terminal that answers no cursor position request (prompt_toolkit asks)
            env={**base_env(tmp_path), "PROMPT_TOOLKIT_NO_CPR": "1"},
            stdin=follower,
            stdout=follower,
            stderr=follower,
            cwd=ROOT,
        )
        os.close(follower)
        try:
            first = read_until(leader, b"you>", 60)
            assert b"remindkit chat" in first
            os.write(leader, b"hi\r")
            after = read_until(leader, b"agent> hello there", 60, first)
            shown = after.count(b"you>")
            after = read_until(leader, b"you>", 30, after, count=shown + 1)  # the prompt again
            assert after.index(b"agent> hello there") < after.rindex(b"you>")
            os.write(leader, b"/quit\r")
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(leader)


def muted_env(tmp_path: Path) -> dict[str, str]:
    """A store muted with `remindkit alerts mute`, on a machine whose ALSA knows no
    device (so an alarm that is not muted fails: "not heard")."""
    empty = tmp_path / "asound.conf"
    empty.write_text("# no devices at all\n")
    env = {**base_env(tmp_path), "ALSA_CONFIG_PATH": str(empty), "REMINDKIT_NOTIFY": "0"}
    muted = subprocess.run(
        [sys.executable, "-m", "remindkit", "alerts", "mute"],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert muted.returncode == 0, muted.stderr
    return env


def test_demo_follows_a_stored_mute(tmp_path: Path) -> None:
    env = muted_env(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "remindkit", "demo", "--delay", "1", "--db", env["REMINDKIT_DB"]],
        env=env,
        text=True,
        capture_output=True,
        timeout=180,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert "🔔 alarm and speech ('Time to stretch!'): muted" in out.stdout, out.stdout
    assert "demo complete" in out.stdout


def test_chat_follows_a_stored_mute(tmp_path: Path) -> None:
    env = muted_env(tmp_path)

    def answer(body: dict[str, Any]) -> Any:
        last = str(body["messages"][-1].get("content") or "")
        if "<schedule-fired" in last:
            return text("It is time.")
        return text('Sure. <schedule label="tea" delay="1s" alarm="true">make tea</schedule>')

    with ModelServer("openai", answer) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "remindkit",
                "chat",
                "--base-url",
                server.base_url,
                "--model",
                "m",
                "--session",
                "c",
            ],
            env=env,
            text=True,
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None
        proc.stdin.write("remind me to make tea\n")
        proc.stdin.flush()
        store = open_store(env["REMINDKIT_DB"])
        try:
            # the chat's own engine fires it: alerted (muted, by the stored switch), then answered
            fire = wait_for(
                lambda: next(
                    (o for o in store.reminders.history(limit=5) if o.state == "delivered"), None
                ),
                90,
            )
            assert fire is not None and fire.alert == "muted"
        finally:
            store.close()
            out, err = proc.communicate("/quit\n", timeout=30)
        assert proc.returncode == 0, err
        assert "agent> It is time." in out
