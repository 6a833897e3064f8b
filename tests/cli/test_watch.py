"""``remindkit watch`` in a real terminal: tmux runs it in a pane, the pane shows the
reminder with a countdown that ticks, and after Ctrl-C the pane is back at the shell
prompt with no traceback and the alternate screen left."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from .conftest import Home, wait_for

pytest.importorskip("rich")
pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="needs tmux (scripts/setup --test)"
)

PROMPT = "rk-prompt$ "


class Pane:
    def __init__(self, home: Home) -> None:
        self.home = home
        self.sock = str(home.path / "tmux.sock")

    def tmux(self, *args: str) -> str:
        proc = subprocess.run(
            ["tmux", "-S", self.sock, *args],
            capture_output=True,
            text=True,
            env=self.home.env(TERM="xterm-256color", PS1=PROMPT),
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "rk")


@pytest.fixture
def pane(home: Home) -> Iterator[Pane]:
    p = Pane(home)
    p.tmux(
        "new-session",
        "-d",
        "-s",
        "rk",
        "-x",
        "150",
        "-y",
        "40",
        "bash",
        "--norc",
        "--noprofile",
        "-i",
    )
    try:
        wait_for(lambda: PROMPT.strip() in p.screen(), what="the shell prompt")
        yield p
    finally:
        subprocess.run(["tmux", "-S", p.sock, "kill-server"], capture_output=True, timeout=60)


def _countdown(screen: str) -> str | None:
    m = re.search(r"(\d+:\d\d)\W+active\W+tick-test", screen)
    return m.group(1) if m else None


def test_watch_ticks_and_leaves_the_terminal_clean(home: Home, pane: Pane) -> None:
    home.js("remind", "stretch your legs", "--session", "s1", "--label", "tick-test", "--in", "10m")
    home.js("remind", "held", "--session", "s1", "--label", "held-one", "--in", "1h")
    home.js("pause", "--session", "s1", "--all")
    home.js("resume", home.js("ls", "--all")[0]["id"])
    pane.tmux("send-keys", "-t", "rk", f"{sys.executable} -m remindkit watch", "Enter")
    first = wait_for(lambda: _countdown(pane.screen()), what="the reminder and its countdown")
    screen = pane.screen()
    assert "stretch your legs" in screen and "⏸ paused" in screen and "held-one" in screen
    assert pane.tmux("display-message", "-p", "-t", "rk", "#{alternate_on}").strip() == "1"
    second = wait_for(
        lambda: (c := _countdown(pane.screen())) != first and c, what="the countdown to tick"
    )
    assert second < first or len(second) < len(first), (first, second)
    # a change from another process shows up
    home.proc("rm", "--session", "s1", "--label", "held-one")
    wait_for(lambda: "held-one" not in pane.screen(), what="the cancelled reminder to go")
    pane.tmux("send-keys", "-t", "rk", "C-c")
    wait_for(
        lambda: pane.tmux("display-message", "-p", "-t", "rk", "#{alternate_on}").strip() == "0",
        what="the alternate screen to be left",
    )
    wait_for(
        lambda: pane.screen().rstrip().endswith(PROMPT.strip()),
        what="the shell prompt after Ctrl-C",
    )
    screen = pane.screen()
    assert "Traceback" not in screen and "KeyboardInterrupt" not in screen, screen
    pane.tmux("send-keys", "-t", "rk", "echo rc=$?", "Enter")
    wait_for(lambda: "rc=0" in pane.screen(), what="the exit status")


def test_watch_once(home: Home) -> None:
    home.js("remind", "stretch", "--session", "s1", "--label", "once-test", "--in", "10m")
    code, out, err = home.run("watch", "--once")
    assert code == 0 and "once-test" in out and "no fires yet" in out, err
    code, out, err = home.run("watch", "--once", "--session", "s2")
    assert code == 0 and "once-test" not in out and "no reminders" in out
