"""SetCallback's own surface in ``remindkit chat``, in a real terminal (tmux runs it,
send-keys types, capture-pane reads the screen): ``/callbacks`` with its four
sub-arguments offered as you type, the popup's lines, ``pause`` with the PAUSED
title, ``resume``, ``cancel``, the ``[CB:n m:ss]`` bar, the transcript lines
``[Callback] Timer fired`` and ``[Callback] Deferred 4s — agent busy``; and the same
numbers in ``status --line --callbacks`` and the ``callbacks`` block of
``stats --json``. The agent is a scripted model server on loopback."""

from __future__ import annotations

import re
import sys
import time

import pytest

from ..processes.openai_server import ScriptedOpenAI, last_user, text, tool
from .conftest import Home, wait_for
from .test_watch import Pane, pane  # noqa: F401  (the tmux pane fixture)

pytest.importorskip("prompt_toolkit")

TIMER = {
    "action": "set",
    "message": "Check the deploy job",
    "delay_seconds": 4,
    "repeat_count": 20,
}


def agent(body):  # type: ignore[no-untyped-def]
    if body["messages"][-1]["role"] == "tool":
        return text("Timer set.")
    said = last_user(body)
    if "<schedule-fired" in said:
        return text("Checked the deploy.")
    if "slow" in said:
        time.sleep(6)  # the timer comes due during this turn
        return text("Done slowly.")
    if "timer" in said:
        return tool("set_callback", TIMER)
    return text("ok")


def cb_line(home: Home) -> str:
    return home.proc("status", "--line", "--callbacks", "--session", "cbs").stdout.strip()


def showing(where: Pane, *words: str) -> str:
    """The screen once it shows every one of ``words``."""

    def screen() -> str | None:
        shown = where.screen()
        return shown if all(w in shown for w in words) else None

    try:
        return str(wait_for(screen, what=" and ".join(map(repr, words))))
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the screen:\n{where.screen()}") from None


def test_callbacks_in_the_terminal_chat(home: Home, pane: Pane) -> None:  # noqa: F811
    with ScriptedOpenAI(agent) as model:
        db = f"sqlite:///{home.db}"
        pane.tmux(
            "send-keys", "-t", "rk",
            f"{sys.executable} -m remindkit chat --base-url {model.base_url} --model m "
            f"--session cbs --db {db}",
            "Enter",
        )  # fmt: skip
        showing(pane, "you>")

        # the commands, then the four sub-arguments, are offered as you type
        pane.tmux("send-keys", "-t", "rk", "-l", "/cal")
        wait_for(lambda: "/callbacks" in pane.screen(), what="/callbacks offered")
        pane.tmux("send-keys", "-t", "rk", "-l", "lbacks ")
        menu = showing(pane, "list", "pause", "resume", "cancel")
        pane.tmux("send-keys", "-t", "rk", "C-u")

        pane.tmux("send-keys", "-t", "rk", "-l", "set a timer")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(lambda: "agent> Timer set." in pane.screen(), what="the reply")
        bar = wait_for(
            lambda: re.search(r"\[CB:1 0:0[0-4]\]", pane.screen()), what="the [CB:1 0:0s] bar"
        )
        assert bar
        pane.tmux("send-keys", "-t", "rk", "-l", "/callbacks list")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        screen = showing(pane, " Callbacks (1 active)")
        assert re.search(r' \[0\] "Check the deploy job" +0m0[0-4]s \(20\)', screen), screen

        # the timer fires: the transcript line, its message as the next turn, the reply
        screen = showing(pane, "agent> Checked the deploy.")
        assert (
            "[Callback] Timer fired\nyou> Check the deploy job\nagent> Checked the deploy."
            in screen
        )

        # the same numbers for scripts: status --line --callbacks, stats --json
        line = cb_line(home)
        assert re.fullmatch(r"\[CB:1 0:0[0-4]\]", line), line
        block = home.js("stats", "--session", "cbs")["callbacks"]
        assert block["active_count"] == 1 and 0 <= block["remaining_s"] <= 4, block
        assert block["next_fire_ms"] > time.time() * 1000 - 1000, block

        # pause: the title says PAUSED and the bar too; resume starts it again
        pane.tmux("send-keys", "-t", "rk", "-l", "/callbacks pause")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(lambda: " Callbacks (1 active) PAUSED" in pane.screen(), what="PAUSED")
        wait_for(lambda: "[CB:1 PAUSED]" in pane.screen(), what="the paused bar")
        wait_for(lambda: cb_line(home) == "[CB:1 PAUSED]", timeout=30, what="status --line: PAUSED")
        pane.tmux("send-keys", "-t", "rk", "-l", "/callbacks resume")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(
            lambda: re.search(r"\[CB:1 0:0[0-4]\]", pane.screen().split("PAUSED")[-1]),
            what="the bar counting again",
        )

        # due while the agent is busy with a typed turn: deferred, and it says so
        pane.tmux("send-keys", "-t", "rk", "-l", "this one is slow")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(
            lambda: "[Callback] Deferred 4s — agent busy" in pane.screen(),
            timeout=30,
            what="the deferred line",
        )
        wait_for(lambda: "agent> Done slowly." in pane.screen(), what="the slow reply")

        # cancel the slot: gone from the popup and the bar
        pane.tmux("send-keys", "-t", "rk", "-l", "/callbacks cancel 0")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(
            lambda: 'Cancelled callback slot 0: "Check the deploy job"' in pane.screen(),
            what="the cancel",
        )
        pane.tmux("send-keys", "-t", "rk", "-l", "/callbacks")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(lambda: "No active callbacks" in pane.screen(), what="the empty popup")
        wait_for(lambda: cb_line(home) == "", timeout=30, what="status --line: nothing")
        pane.tmux("send-keys", "-t", "rk", "-l", "/quit")
        pane.tmux("send-keys", "-t", "rk", "Enter")
        wait_for(lambda: "rk-prompt$" in pane.screen().rstrip().splitlines()[-1], what="the shell")
        assert "Traceback" not in pane.screen(), menu
