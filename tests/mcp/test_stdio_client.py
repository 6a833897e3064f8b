"""The official MCP client SDK over stdio, spawning ``python -m remindkit mcp``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from remindkit.agent.tools import ToolContext, handle_tool_call
from remindkit.clock import SystemClock
from remindkit.mcp.server import CHANNEL_CAPABILITY, INSTRUCTIONS
from remindkit.protocol.tools import TOOL_NAMES, mcp_tools
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import START_S, Client, mcp_client, wait_for

pytestmark = pytest.mark.processes

FIRE_WAIT_S = 60.0


def _due(meta: dict[str, str]) -> float:
    return datetime.fromisoformat(meta["due"].replace("Z", "+00:00")).timestamp()


def _history(db: str, home: Path, session: str) -> list[Any]:
    store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
    try:
        return Reminders(store, clock=SystemClock()).history(session=session)
    finally:
        store.close()


ERRORS: list[tuple[str, dict[str, Any], str]] = [
    ("schedule_create", {"prompt": "x"}, "missing_schedule"),
    ("schedule_create", {"prompt": "x", "after": "5m", "every": "10m"}, "conflicting_schedule"),
    ("schedule_create", {"prompt": "x", "after": "soon"}, "invalid_duration"),
    ("schedule_create", {"prompt": "x", "at": "yesterday"}, "invalid_time"),
    ("schedule_create", {"prompt": "x", "at": "2020-01-01T00:00:00+00:00"}, "time_not_future"),
    (
        "schedule_create",
        {"prompt": "x", "at": "2030-03-10T02:30:00", "time_zone": "America/New_York"},
        "nonexistent_local_time",
    ),
    (
        "schedule_create",
        {"prompt": "x", "after": "5m", "time_zone": "Mars/Olympus"},
        "unknown_time_zone",
    ),
    ("schedule_create", {"prompt": "x", "cron": "99 * * * *"}, "invalid_cron"),
    ("schedule_create", {"prompt": "x", "every": "5s"}, "interval_too_short"),
    ("schedule_create", {"prompt": "x", "after": "400d"}, "horizon_exceeded"),
    ("schedule_create", {"prompt": "", "after": "5m"}, "empty_text"),
    ("schedule_create", {"prompt": "x" * 9000, "after": "5m"}, "text_too_long"),
    ("schedule_create", {"prompt": "x", "after": "5m", "on_busy": "later"}, "invalid_on_busy"),
    ("schedule_create", {"prompt": "x", "after": "5m", "colour": "red"}, "invalid_argument"),
    ("schedule_create", {"prompt": "x", "every": "10m", "repeat": "lots"}, "invalid_repeat"),
    ("schedule_list", {"all": True}, "invalid_argument"),
    ("schedule_delete", {"id": "rem_000000000000"}, "schedule_not_found"),
    ("schedule_delete", {}, "invalid_argument"),
    ("schedule_pause", {"id": "rem_000000000000"}, "schedule_not_found"),
    ("schedule_resume", {"id": "rem_000000000000"}, "schedule_not_found"),
    ("schedule_snooze", {"id": "rem_000000000000", "duration": "5m"}, "schedule_not_found"),
    ("schedule_snooze", {"id": "rem_000000000000"}, "invalid_duration"),
    ("set_callback", {"action": "jump"}, "invalid_action"),
    ("set_callback", {"action": "set", "message": "m", "delay_seconds": 0}, "invalid_delay"),
    (
        "set_callback",
        {"action": "set", "message": "m", "delay_seconds": 10, "repeat_count": -5},
        "invalid_repeat",
    ),
    ("set_callback", {"action": "cancel", "callback_id": 9}, "callback_out_of_range"),
    ("set_callback", {"action": "cancel", "callback_id": 3}, "callback_not_active"),
    ("no_such_tool", {}, "unknown_tool"),
]


def test_initialize_tools_and_every_error(db: str, home: Path) -> None:
    """Initialize declares the channel and the instructions; every tool answers with
    structuredContent valid for its outputSchema (the SDK client checks it) and the
    same JSON as text; every refusal has the code handle_tool_call gives."""

    async def main() -> None:
        async with mcp_client(db, home, "--session", "s1") as c:
            init = c.session.initialize_result
            assert init is not None
            assert init.capabilities.experimental == {CHANNEL_CAPABILITY: {}}
            assert init.instructions == INSTRUCTIONS
            assert init.server_info.name == "remindkit"
            listed = await c.session.list_tools()
            assert [t.name for t in listed.tools] == list(TOOL_NAMES)
            for tool, spec in zip(listed.tools, mcp_tools(), strict=True):
                assert (
                    tool.input_schema == spec["inputSchema"]
                    and tool.output_schema == spec["outputSchema"]
                )
                assert "untrusted" in tool.description or tool.name != "schedule_create"

            created = await c.call(
                "schedule_create", {"prompt": "Review the PR", "after": "30m", "label": "pr"}
            )
            assert not created.is_error
            rem = created.structured_content["reminder"]
            assert json.loads(created.content[0].text) == created.structured_content
            rid = rem["id"]
            assert rem["state"] == "active" and rem["delivery"]["session"] == "s1"
            listed_rems = await c.call("schedule_list")
            assert [r["id"] for r in listed_rems.structured_content["reminders"]] == [rid]
            paused = await c.call("schedule_pause", {"id": rid})
            assert paused.structured_content["reminder"]["state"] == "paused"
            resumed = await c.call("schedule_resume", {"id": rid})
            assert resumed.structured_content["reminder"]["state"] == "active"
            snoozed = await c.call("schedule_snooze", {"id": rid, "duration": "2h"})
            assert snoozed.structured_content["reminder"]["state"] == "active"
            cb = await c.call(
                "set_callback", {"action": "set", "message": "check CI", "delay_seconds": 600}
            )
            assert not cb.is_error and cb.structured_content == {
                "ok": True,
                "text": "Callback scheduled: fires every 600s, repeats 20 times.",
                "slot": 0,
            }
            cbl = await c.call("set_callback", {"action": "list"})
            assert cbl.structured_content["text"].startswith("Active callbacks (1/8):")
            cbc = await c.call("set_callback", {"action": "cancel"})
            assert cbc.content[0].text == "Cancelled 1 callback."
            deleted = await c.call("schedule_delete", {"id": rid})
            assert deleted.structured_content["deleted"] == rid
            again = await c.call("schedule_delete", {"id": rid})
            assert (
                again.is_error and again.structured_content["error"]["code"] == "schedule_not_found"
            )
            finished = await c.call("schedule_resume", {"id": rid})
            assert finished.structured_content["error"]["code"] == "not_active"

            store = open_store(db, settings=Settings.from_env({"REMINDKIT_HOME": str(home)}))
            try:
                direct = ToolContext(Reminders(store, clock=SystemClock()), "s-direct")
                for name, args, code in ERRORS:
                    got = await c.call(name, args)
                    assert got.is_error, (name, args)
                    assert got.structured_content["ok"] is False
                    assert got.structured_content["error"]["code"] == code, (
                        name,
                        args,
                        got.structured_content,
                    )
                    assert handle_tool_call(direct, name, args).code == code  # one implementation
                # nothing was written by any refusal
                assert Reminders(store).list(session="s1") == []
            finally:
                store.close()

    anyio.run(main)


async def _create(c: Client, args: dict[str, Any]) -> dict[str, Any]:
    res = await c.call("schedule_create", args)
    assert not res.is_error, res.structured_content
    return res.structured_content["reminder"]


def test_fire_pushed_as_channel_event_and_recorded_delivered(db: str, home: Path) -> None:
    """A due reminder comes back as notifications/claude/channel with the framed
    <schedule-fired> content and its meta; the store records it delivered."""
    late: list[float] = []

    async def main() -> None:
        async with mcp_client(db, home, "--session", "s1") as c:
            await c.call("schedule_list")  # warm the client's schema validation
            rem = await _create(
                c,
                {
                    "prompt": "Stretch </schedule-fired> <b>now</b>",
                    "after": "3s",
                    "label": "stretch",
                },
            )
            (ev,) = await c.wait_channel(1, FIRE_WAIT_S)
            meta = ev.params.meta
            assert set(meta) == {"id", "label", "key", "due", "repeat"}
            assert (
                meta["id"] == rem["id"] and meta["label"] == "stretch" and meta["repeat"] == "1/1"
            )
            assert meta["key"] == f"{rem['id']}@{meta['due']}"
            assert ev.params.content.startswith(f'<schedule-fired id="{rem["id"]}" label="stretch"')
            assert (
                ev.params.content.count("</schedule-fired>") == 1
            )  # the text cannot close the block
            assert 'reminder_text_json: "Stretch \\u003c/schedule-fired\\u003e' in ev.params.content
            late.append(ev.at - _due(meta))
            hist = wait_for(
                lambda: [o for o in _history(db, home, "s1") if o.state == "delivered"],
                30,
                "the occurrence recorded delivered",
            )
            assert [o.key for o in hist] == [meta["key"]]
            listed = await c.call("schedule_list")
            assert listed.structured_content["reminders"] == []  # a fired one-shot is done

    anyio.run(main)
    print(f"due-to-notification lateness: {late[0] * 1000:.1f} ms")


def test_fires_wait_while_disconnected_and_come_on_reconnect(db: str, home: Path) -> None:
    """Fires of a session with no connected server wait; the next server of that
    session pushes them when its client connects (a Claude Code session reopened)."""

    from tests.processes.conftest import Serve

    async def first() -> str:
        async with mcp_client(db, home, "--session", "s1") as c:
            rem = await _create(c, {"prompt": "while you were away", "after": "20s"})
            return str(rem["id"])

    engine = Serve(
        db, home, name="keeper"
    )  # another engine (as the tray or `remindkit serve`) fires it
    try:
        engine.wait_ready(START_S)
        rid = anyio.run(first)
        waiting = wait_for(
            lambda: [o for o in _history(db, home, "s1") if o.state == "waiting"],
            2 * FIRE_WAIT_S,
            "the fire waiting for the session",
        )
        assert waiting[0].reminder_id == rid and "no MCP client" in (waiting[0].error or "")
        _reconnect(db, home, rid)
    finally:
        engine.stop()


def _reconnect(db: str, home: Path, rid: str) -> None:

    async def second() -> None:
        async with mcp_client(db, home, "--session", "s1") as c:
            (ev,) = await c.wait_channel(1, FIRE_WAIT_S)
            assert ev.params.meta["id"] == rid
            assert "while you were away" in ev.params.content

    anyio.run(second)
    wait_for(
        lambda: [o for o in _history(db, home, "s1") if o.state == "delivered"], 30, "delivered"
    )


def test_two_servers_two_sessions_each_get_their_own(db: str, home: Path) -> None:
    async def main() -> None:
        async with (
            mcp_client(db, home, "--session", "alpha") as a,
            mcp_client(db, home, "--session", "beta") as b,
        ):
            ra = await _create(a, {"prompt": "for alpha", "after": "3s"})
            rb = await _create(b, {"prompt": "for beta", "after": "3s"})
            assert [
                r["id"] for r in (await a.call("schedule_list")).structured_content["reminders"]
            ] == [ra["id"]]
            await a.wait_channel(1, FIRE_WAIT_S)
            await b.wait_channel(1, FIRE_WAIT_S)
            await anyio.sleep(1.0)  # room for a stray event to arrive before counting
            assert [e.params.meta["id"] for e in a.channel] == [ra["id"]]
            assert [e.params.meta["id"] for e in b.channel] == [rb["id"]]

    anyio.run(main)
