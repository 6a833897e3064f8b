"""The hook commands as Claude Code runs them (processes, JSON on stdin) beside a real
MCP server: a fire due during a turn comes back from the Stop hook, one due while idle is
pushed as a channel event to a host that takes them (and recorded when its prompt's hook
sees it) or comes with the next prompt to one that does not; the hooks are handed to the
engine that serves the store (they load no store themselves) and run on their own when
none does; the older command names do the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from remindkit.clock import SystemClock, now_us
from remindkit.mcp.server import channel_meta
from remindkit.models import Session
from remindkit.sessions.mcp import HOOKS_WAY, LEASE_PREFIX
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import mcp_client, server_env, wait_for

pytestmark = pytest.mark.processes

SID = "5f0c6a3e-1b2d-4c8e-9a7f-0123456789ab"
WAIT_S = 60.0


def history(db: str, home: Path, rid: str) -> list[Any]:
    store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
    try:
        return store.reminders.history(reminder_id=rid)
    finally:
        store.close()


def hook(
    db: str,
    home: Path,
    project: Path,
    *argv: str,
    payload: dict[str, Any],
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """A hook command as Claude Code runs it (``-X importtime``: what it loaded)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "remindkit", *argv, "--db", db],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        env=server_env(home, {"CLAUDE_PROJECT_DIR": str(project), **(env or {})}),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "remindkit mcp hook" not in proc.stderr, proc.stderr[-2000:]  # no problem reported
    return proc


def loaded_store(proc: subprocess.CompletedProcess[str]) -> bool:
    return "sqlalchemy" in proc.stderr


def channel_prompt(params: Any) -> str:
    """The prompt Claude Code builds from a channel event (as its hooks see it)."""
    attrs = " ".join(f'{k}="{v}"' for k, v in params.meta.items())
    return f'<channel source="remindkit" {attrs}>\n{params.content}\n</channel>'


@pytest.mark.parametrize("channel", [True, False], ids=["channel", "no-channel"])
def test_hooks_bring_every_fire_back(db: str, home: Path, tmp_path: Path, channel: bool) -> None:
    project = tmp_path / "proj"
    project.mkdir()

    def run(*argv: str, **payload: Any) -> subprocess.CompletedProcess[str]:
        return hook(db, home, project, *argv, payload={"session_id": SID, **payload})

    bound = run(
        "mcp", "hook", "start", cwd=str(project), hook_event_name="SessionStart", source="startup"
    )
    assert bound.stdout == ""  # SessionStart's stdout would go into the conversation

    async def main() -> None:
        async with mcp_client(
            db,
            home,
            env={"CLAUDE_PROJECT_DIR": str(project)},
            cwd=project,
            channel=channel,
            client_name="claude-code",
        ) as c:
            # -- a fire due during a turn comes back when the turn ends
            busy = await anyio.to_thread.run_sync(lambda: run("mcp", "hook", "prompt", prompt="go"))
            assert busy.stdout == ""
            created = await c.call("schedule_create", {"prompt": "during the turn", "after": "2s"})
            rid = created.structured_content["reminder"]["id"]
            assert created.structured_content["reminder"]["delivery"]["session"] == SID
            await anyio.to_thread.run_sync(
                lambda: wait_for(
                    lambda: [o for o in history(db, home, rid) if o.state == "waiting"],
                    WAIT_S,
                    "the fire waiting for the turn's end",
                )
            )
            stop = await anyio.to_thread.run_sync(lambda: run("mcp", "hook", "stop"))
            assert not loaded_store(stop), "the hook should have been handed to the server's engine"
            block = json.loads(stop.stdout)
            assert block["decision"] == "block" and "during the turn" in block["reason"]
            assert [o.state for o in history(db, home, rid)] == ["delivered"]
            assert c.channel == []  # nothing pushed for it
            done = await anyio.to_thread.run_sync(
                lambda: run("mcp", "hook", "stop", stop_hook_active=True)
            )
            assert done.stdout == ""  # nothing more: the session is idle
            # -- a fire due while the conversation sits idle
            created = await c.call("schedule_create", {"prompt": "while idle", "after": "2s"})
            rid2 = created.structured_content["reminder"]["id"]
            if channel:
                (ev,) = await c.wait_channel(1, WAIT_S)
                assert ev.params.meta == channel_meta_of(ev) and "while idle" in ev.params.content
                (occ,) = await anyio.to_thread.run_sync(
                    lambda: wait_for(
                        lambda: [o for o in history(db, home, rid2) if o.state == "waiting"],
                        WAIT_S,
                        "the pushed fire waiting for the hook",
                    )
                )
                assert "UserPromptSubmit" in (occ.error or "")
                taken = await anyio.to_thread.run_sync(
                    lambda: run("mcp", "hook", "prompt", prompt=channel_prompt(ev.params))
                )
                assert taken.stdout == ""  # it is in the conversation already
                (occ,) = history(db, home, rid2)
                assert occ.state == "delivered" and "channel event" in (occ.error or "")
            else:
                (occ,) = await anyio.to_thread.run_sync(
                    lambda: wait_for(
                        lambda: [o for o in history(db, home, rid2) if o.state == "waiting"],
                        WAIT_S,
                        "the fire waiting for the next prompt",
                    )
                )
                assert occ.error == HOOKS_WAY
                assert c.channel == []
                nxt = await anyio.to_thread.run_sync(
                    lambda: run("mcp", "hook", "prompt", prompt="next")
                )
                context = json.loads(nxt.stdout)["hookSpecificOutput"]["additionalContext"]
                assert "while idle" in context
                assert [o.state for o in history(db, home, rid2)] == ["delivered"]

    anyio.run(main)


def channel_meta_of(ev: Any) -> dict[str, str]:
    """The meta the server sends for the fire the event names (its own function)."""
    from datetime import datetime

    from remindkit.models import Fire

    meta = ev.params.meta
    due = datetime.fromisoformat(meta["due"].replace("Z", "+00:00"))
    return channel_meta(Fire(0, meta["id"], SID, due, "", label=meta["label"] or None))


def test_hooks_run_on_their_own_when_no_engine_serves(db: str, home: Path, tmp_path: Path) -> None:
    """No engine takes hand-offs (REMINDKIT_HANDOFF=0): the hook loads the store itself,
    with the same outcome; the older command names are the same hooks."""
    from tests.processes.conftest import Serve

    project = tmp_path / "proj"
    project.mkdir()
    off = {"REMINDKIT_HANDOFF": "0"}
    store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
    engine = Serve(db, home, env=off, name="fires")
    try:
        store.sessions.put_session(
            Session(SID, adapter="mcp", config={"hooks": True, "host": "claude-code"}),
            now_us=now_us(SystemClock()),
        )
        # a server of the session is connected elsewhere (its lease is held)
        until = now_us(SystemClock()) + 600_000_000
        store.coordination.hold_lease(
            LEASE_PREFIX + SID,
            holder="elsewhere",
            priority=0,
            until_us=until,
            now_us=now_us(SystemClock()),
        )
        engine.wait_ready(120)

        def run(*argv: str, **payload: Any) -> subprocess.CompletedProcess[str]:
            return hook(db, home, project, *argv, payload={"session_id": SID, **payload}, env=off)

        busy = run("session", "busy", "--hook", prompt="go")  # the older UserPromptSubmit hook
        assert busy.stdout == "" and loaded_store(busy)
        from remindkit.reminders import Reminders

        rid = Reminders(store, clock=SystemClock()).create("old names", session=SID, in_="1s").id
        wait_for(
            lambda: [o for o in store.reminders.history(reminder_id=rid) if o.state == "waiting"],
            WAIT_S,
            "the fire waiting",
        )
        stop = run("session", "idle", "--hook")  # the older Stop hook
        assert "old names" in json.loads(stop.stdout)["reason"]
        assert [o.state for o in store.reminders.history(reminder_id=rid)] == ["delivered"]
        bound = run("mcp", "bind", "--json", cwd=str(project), source="startup")
        assert json.loads(bound.stdout)["session"] == SID
    finally:
        engine.stop()
        store.close()
