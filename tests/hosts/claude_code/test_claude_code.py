"""The real Claude Code with remindkit, set up as a person sets it up, against a scripted
Messages API stand-in (which sees exactly what the model is given). Each of the three
ways back, with channels (Claude Code's rollout flag on, started with the server as a
development channel) and without (an API-key user: the hooks):

* a fire due while Claude Code sits idle: a new turn (channel), or with the next prompt;
* a fire due during a slow turn: once, when the turn ends (the Stop hook);
* a fire due after Claude Code quit: through the resume command (``claude -p --resume``)
  run by ``remindkit serve``, in the resumed conversation, in the project folder.

Nothing is recorded delivered that the model did not receive. The due→turn latency
(without the model's time: the stand-in answers at once) is printed for the report.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import pytest

from remindkit.sessions.mcp import HOOKS_WAY

from .conftest import (
    START_S,
    ClaudeCode,
    assert_delivered_only_what_the_model_saw,
    carried,
    serve,
    wait_for,
)
from .messages_api import MessagesStandIn

pytestmark = pytest.mark.hosts

TURN_S = 60.0
MODES = pytest.mark.parametrize("channels", [True, False], ids=["channels", "hooks"])


def _due(occ) -> float:  # type: ignore[no-untyped-def]
    return occ.due_at.timestamp()


def _set(cc: ClaudeCode, prompt: str, count: int = 1) -> list[str]:
    """The person asks; the model loads the tool (ToolSearch) and calls it."""
    before = {r.id for r in cc.reminders()}
    cc.type(prompt)
    made = wait_for(
        lambda: (lambda new: new if len(new) >= count else None)(
            [r.id for r in cc.reminders() if r.id not in before]
        ),
        TURN_S,
        f"{count} reminder(s) made through schedule_create",
        cc.log,
    )
    # and the model has answered the tool's result (the turn is over)
    wait_for(
        lambda: any(r.done and '"ok":true' in r.new_text() for r in cc.api.turns()),
        TURN_S,
        "the model's answer to the tool's result",
        cc.log,
    )
    return list(made)


def _answer(req) -> str:  # type: ignore[no-untyped-def]
    """What the stand-in answered to ``req`` (its reply is kept with the request)."""
    return str(getattr(req, "reply_text", ""))


def _report(name: str, lateness: list[float]) -> None:
    ms = sorted(x * 1000 for x in lateness)
    p99 = ms[min(len(ms) - 1, int(round(0.99 * (len(ms) - 1))))]
    print(
        f"\n{name}: due→turn n={len(ms)} p50 {statistics.median(ms):.0f} ms, p99 {p99:.0f} ms, "
        f"max {ms[-1]:.0f} ms; each: {' '.join(f'{x:.0f}' for x in ms)}"
    )


@MODES
def test_fire_due_while_idle(
    claude: Callable[..., ClaudeCode], api: MessagesStandIn, channels: bool
) -> None:
    cc = claude(channels=channels)
    cc.install()
    cc.start()
    # Claude Code takes channel events on the handshake era only: remindkit sends it there
    assert cc.era() == ("2025-11-25" if channels else "2026-07-28"), cc.log()
    if channels:
        rids = _set(cc, "remind me 6 times, 2s apart, starting in 3s", count=6)
        late = []
        for rid in rids:
            (req,) = wait_for(
                lambda rid=rid: carried(api, rid), TURN_S, f"the channel turn of {rid}", cc.log
            )
            (occ,) = [o for o in cc.history() if o.reminder_id == rid]
            late.append(req.at - _due(occ))
        wait_for(
            lambda: all(o.state == "delivered" for o in cc.history() if o.reminder_id in rids),
            30,
            "recorded",
        )
        assert all(len(carried(api, rid)) == 1 for rid in rids)  # each came once
        assert cc.channel_events() == 6
        _report("channel, idle", late)
    else:
        (rid,) = _set(cc, "remind me in 3s to stretch")
        occ = wait_for(
            lambda: [o for o in cc.history() if o.reminder_id == rid and o.state == "waiting"],
            TURN_S,
            "the fire waiting for the next prompt",
            cc.log,
        )[0]
        assert occ.error == HOOKS_WAY
        time.sleep(1.0)  # nothing comes by itself, and nothing is recorded delivered
        assert carried(api, rid) == [] and cc.channel_events() == 0
        assert [o.state for o in cc.history() if o.reminder_id == rid] == ["waiting"]
        cc.type("anything new?")
        (req,) = wait_for(
            lambda: carried(api, rid), TURN_S, "the next prompt carrying the fire", cc.log
        )
        assert "anything new?" in req.new_text()
        wait_for(
            lambda: [o for o in cc.history() if o.reminder_id == rid and o.state == "delivered"],
            30,
            "recorded",
        )
    assert_delivered_only_what_the_model_saw(cc)


@MODES
def test_fire_due_during_a_slow_turn_comes_once_after_it(
    claude: Callable[..., ClaudeCode], api: MessagesStandIn, channels: bool
) -> None:
    cc = claude(channels=channels)
    cc.install()
    cc.start()
    (rid,) = _set(cc, "remind me in 3s to check the build, then work slowly for 8s")
    (req,) = wait_for(lambda: carried(api, rid), TURN_S, "the fire after the turn", cc.log)
    (occ,) = [o for o in cc.history() if o.reminder_id == rid]
    slow = [r for r in api.turns() if r.done and r.at < req.at and "Working on it" in _answer(r)]
    assert slow and req.at >= slow[-1].done  # not before the slow turn ended
    assert req.at - _due(occ) > 4
    wait_for(
        lambda: [o for o in cc.history() if o.reminder_id == rid and o.state == "delivered"],
        30,
        "recorded",
    )
    time.sleep(2.0)  # room for a second delivery to show up
    assert len(carried(api, rid)) == 1 and cc.channel_events() == 0
    ended = max(r.done for r in api.turns() if r is not req and r.at < req.at)
    mode = "channels" if channels else "hooks"
    print(
        f"\nslow turn ({mode}): the model's last answer → the fired turn {(req.at - ended) * 1000:.0f} ms"
    )
    assert_delivered_only_what_the_model_saw(cc)


@MODES
def test_fire_after_quit_arrives_through_the_resume_command(
    claude: Callable[..., ClaudeCode], api: MessagesStandIn, channels: bool
) -> None:
    cc = claude(channels=channels)
    import shlex

    passed = [a for name in cc.PASSED for a in ("--pass-env", name)]
    cc.install("--resume-command", shlex.join(cc.resume_argv()), *passed)
    engine = serve(cc)
    try:
        cc.start()
        sid = cc.session_id()
        (rid,) = _set(cc, "remind me in 8s to review the notes")
        cc.quit()
        wait_for(lambda: cc.lease() is None, START_S, "the server gone with Claude Code")
        # Claude Code ended its server with SIGINT and saw it leave before its SIGTERM: it
        # polls every 50 ms ("exited cleanly") and at 100 ms sends SIGTERM if the process is
        # still there; an exit between the 50 ms poll and that check it takes without a line
        ending = cc.server_ending()
        print(f"\nClaude Code ending remindkit's server: {ending}")
        assert any("Sending SIGINT to MCP server process" in ln for ln in ending), cc.log()
        assert not any("SIGTERM" in ln or "SIGKILL" in ln for ln in ending), ending
        (req,) = wait_for(
            lambda: carried(api, rid), TURN_S, "the resumed turn carrying the fire", cc.log
        )
        # the resumed conversation: the earlier prompt is in it, and it runs in the project
        assert "remind me in 8s to review the notes" in req.all_text()
        assert f"Primary working directory: {cc.project}" in req.all_text()
        assert req.headers.get("X-Claude-Code-Session-Id") == sid
        occ = wait_for(
            lambda: [o for o in cc.history() if o.reminder_id == rid and o.state == "delivered"],
            60,
            "recorded delivered",
            lambda: engine.log.read_text()[-3000:],
        )[0]
        print(
            f"\nresume ({'channels' if channels else 'hooks'}): due → resumed turn {(req.at - _due(occ)) * 1000:.0f} ms"
        )
        assert_delivered_only_what_the_model_saw(cc)
    finally:
        engine.stop()


def test_the_plugin_brings_the_server_the_hooks_and_the_commands(
    claude: Callable[..., ClaudeCode], api: MessagesStandIn
) -> None:
    """``claude --plugin-dir`` with remindkit's plugin and nothing written into the project:
    the tools (through ToolSearch), the hooks (a fire due while idle comes with the next
    prompt), /reminders and /callbacks (their output is what the model is given)."""
    from remindkit.mcp.install import plugin_dir

    cc = claude(channels=False)
    cc.start("--plugin-dir", str(plugin_dir()))
    assert not (cc.project / ".mcp.json").exists()
    # the plugin's command, then the tool (Claude Code 2.1.332 answers a bare /remind with
    # "Unknown command"; /callbacks and /reminders resolve bare)
    (rid,) = _set(cc, "/remindkit:remind in 3s to stretch")
    wait_for(
        lambda: [o for o in cc.history() if o.reminder_id == rid and o.state == "waiting"],
        TURN_S,
        "the fire waiting for the next prompt",
        cc.log,
    )
    cc.type("anything new?")
    wait_for(lambda: carried(api, rid), TURN_S, "the next prompt carrying the fire", cc.log)
    wait_for(
        lambda: [o for o in cc.history() if o.reminder_id == rid and o.state == "delivered"],
        30,
        "recorded",
    )
    cc.type("/callbacks")
    wait_for(
        lambda: any(
            "<command-name>/remindkit:callbacks" in r.new_text()
            and "No active callbacks" in r.new_text()
            for r in api.turns()
        ),
        TURN_S,
        "/callbacks's output given to the model",
        cc.log,
    )
    (later,) = _set(cc, "remind me in 300s to stand up")
    cc.type("/reminders")
    listed = wait_for(
        lambda: [r for r in api.turns() if "<command-name>/remindkit:reminders" in r.new_text()],
        TURN_S,
        "/reminders's output given to the model",
        cc.log,
    )
    assert later in listed[0].new_text() and "stand up" in listed[0].new_text()
    assert_delivered_only_what_the_model_saw(cc)


def test_the_marketplace_lists_the_plugin(claude: Callable[..., ClaudeCode]) -> None:
    """The repository's .claude-plugin/marketplace.json, as a person adds it: Claude
    Code validates it, adds the marketplace and installs remindkit@remindkit from it."""
    import subprocess

    from .conftest import CLAUDE, ROOT

    cc = claude(channels=False)

    def run(*argv: str) -> str:
        proc = subprocess.run(
            [str(CLAUDE), "plugin", *argv],
            env=cc.env(),
            text=True,
            capture_output=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout + proc.stderr

    assert "Validation passed" in run("validate", str(ROOT))
    run("marketplace", "add", str(ROOT))
    assert "remindkit@remindkit" in run("install", "remindkit@remindkit")
    assert "remindkit@remindkit" in run("list")
