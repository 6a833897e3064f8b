"""Tool calls: results, stable error codes, set_callback's plain-text answers, and
that a call sees only its own session. Runs over SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest

from remindkit.agent import ToolContext, handle_tool_call
from remindkit.clock import FakeClock
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore


@pytest.fixture
def api(store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(store, clock=clock, settings=settings)


def call(api: Reminders, name: str, args: object, session: str = "s1") -> dict:
    result = handle_tool_call(ToolContext(api, session), name, args)  # type: ignore[arg-type]
    data = json.loads(result.content)
    assert data["ok"] == result.ok
    if not result.ok:
        assert result.code == data["error"]["code"]
    return data


def test_create_returns_the_reminder(api: Reminders) -> None:
    data = call(
        api,
        "schedule_create",
        {"prompt": "Review the PR", "after": "10m", "label": "pr", "time_zone": "Europe/Berlin"},
    )
    r = data["reminder"]
    assert r["id"].startswith("rem_") and r["state"] == "active" and r["prompt"] == "Review the PR"
    assert r["target_at_utc"] == "2026-01-05T09:10:00Z"
    assert r["target_at_local"] == "2026-01-05T10:10:00+01:00" and r["time_zone"] == "Europe/Berlin"
    assert r["delivery"]["mode"] == "turn" and r["delivery"]["session"] == "s1"
    assert api.get(r["id"]).source == "tool"


def test_create_at_local_time_and_every(api: Reminders) -> None:
    at = call(api, "schedule_create", {"prompt": "x", "at": "2026-09-01T15:00:00+08:00"})
    assert at["reminder"]["target_at_utc"] == "2026-09-01T07:00:00Z"
    local = call(
        api,
        "schedule_create",
        {"prompt": "x", "at": "2026-03-01T09:00", "time_zone": "America/New_York"},
    )
    assert local["reminder"]["target_at_utc"] == "2026-03-01T14:00:00Z"
    every = call(api, "schedule_create", {"prompt": "x", "every": "10m", "repeat": 3})
    assert every["reminder"]["kind"] == "every" and every["reminder"]["remaining"] == 3


def test_create_replaces_a_live_label(api: Reminders) -> None:
    first = call(api, "schedule_create", {"prompt": "a", "after": "5m", "label": "x"})
    second = call(api, "schedule_create", {"prompt": "b", "after": "6m", "label": "x"})
    assert second["replaced"] == [first["reminder"]["id"]]


REFUSALS = [
    ({"prompt": "x", "at": "2026-09-01T15:00"}, "missing_time_zone"),  # the model names the zone
    ({"prompt": "  ", "after": "5m"}, "empty_text"),
    ({"after": "5m"}, "empty_text"),
    ({"prompt": "x"}, "missing_schedule"),
    ({"prompt": "x", "after": "5m", "at": "2026-09-01T15:00:00Z"}, "conflicting_schedule"),
    ({"prompt": "x", "every": "5m", "cron": "* * * * *"}, "conflicting_schedule"),
    ({"prompt": "x", "after": "5m", "time_zone": "Mars/Olympus"}, "unknown_time_zone"),
    ({"prompt": "x", "at": "2020-01-01T00:00:00Z"}, "time_not_future"),
    (
        {"prompt": "x", "at": "2026-03-08T02:30", "time_zone": "America/New_York"},
        "nonexistent_local_time",
    ),
    ({"prompt": "x", "every": "10s"}, "interval_too_short"),
    ({"prompt": "x", "after": "900d"}, "horizon_exceeded"),
    ({"prompt": "x", "after": "soon"}, "invalid_duration"),
    ({"prompt": "x", "after": "5m", "colour": "red"}, "invalid_argument"),
    ({"prompt": "x", "after": "5m", "alarm": "yes"}, "invalid_argument"),
    ({"prompt": 5, "after": "5m"}, "invalid_argument"),
    ({"prompt": "x", "after": "5m", "on_busy": "panic"}, "invalid_on_busy"),
    ("{not json", "invalid_argument"),
    ("[1, 2]", "invalid_argument"),
]


@pytest.mark.parametrize(
    "args, code", REFUSALS, ids=[c + f"-{i}" for i, (_, c) in enumerate(REFUSALS)]
)
def test_create_refusals_change_nothing(api: Reminders, args: object, code: str) -> None:
    data = call(api, "schedule_create", args)
    assert data["error"]["code"] == code and data["error"]["message"]
    assert api.list(all=True) == []


def test_list_in_creation_order_and_only_pending(api: Reminders, clock: FakeClock) -> None:
    ids = []
    for prompt, after in (("late", "30m"), ("early", "1m"), ("middle", "10m")):
        ids.append(
            call(api, "schedule_create", {"prompt": prompt, "after": after})["reminder"]["id"]
        )
        clock.advance(0.001)
    call(api, "schedule_delete", {"id": ids[2]})
    listed = call(api, "schedule_list", {})["reminders"]
    assert [r["id"] for r in listed] == ids[:2]
    assert call(api, "schedule_list", None)["reminders"] == listed


def test_delete_unknown_or_finished_is_not_found(api: Reminders) -> None:
    rid = call(api, "schedule_create", {"prompt": "x", "after": "5m"})["reminder"]["id"]
    assert call(api, "schedule_delete", {"id": rid})["deleted"] == rid
    before = api.get(rid)
    for target in (rid, "rem_ffffffffffff", "../etc"):
        assert call(api, "schedule_delete", {"id": target})["error"]["code"] == "schedule_not_found"
    assert api.get(rid) == before
    assert call(api, "schedule_delete", {})["error"]["code"] == "invalid_argument"


def test_a_session_sees_only_its_own(api: Reminders) -> None:
    mine = call(api, "schedule_create", {"prompt": "mine", "after": "5m"}, session="a")["reminder"][
        "id"
    ]
    call(api, "schedule_create", {"prompt": "theirs", "after": "5m"}, session="b")
    assert [r["prompt"] for r in call(api, "schedule_list", {}, session="a")["reminders"]] == [
        "mine"
    ]
    assert (
        call(api, "schedule_delete", {"id": mine}, session="b")["error"]["code"]
        == "schedule_not_found"
    )
    assert api.get(mine).state == "active"
    assert (
        handle_tool_call(ToolContext(api, "b"), "set_callback", {"action": "cancel"}).content
        == "Cancelled 0 callbacks."
    )


def test_unknown_tool(api: Reminders) -> None:
    assert call(api, "rm_rf", {})["error"]["code"] == "unknown_tool"


# -- set_callback ----------------------------------------------------------------------------------

DEPLOY = "Check the deploy job; report success or failure, then re-arm if still running."


def cb(api: Reminders, args: object, session: str = "s1") -> str:
    return handle_tool_call(ToolContext(api, session), "set_callback", args).content  # type: ignore[arg-type]


def test_callback_texts(api: Reminders, clock: FakeClock) -> None:
    assert cb(api, {"action": "list"}) == "No active callbacks"
    assert (
        cb(api, {"action": "set", "message": DEPLOY, "delay_seconds": 30, "repeat_count": 40})
        == "Callback scheduled: fires every 30s, repeats 40 times."
    )
    for slot in (1, 2):
        cb(api, {"action": "set", "message": f"filler {slot}", "delay_seconds": 60})
    assert (
        cb(
            api,
            {
                "action": "set",
                "message": "Check disk usage on /tmp",
                "delay_seconds": 60,
                "repeat_count": -1,
            },
        )
        == "Callback scheduled: fires every 60s, repeats infinitely."
    )
    for slot in (1, 2):
        assert cb(api, {"action": "cancel", "callback_id": slot}).startswith(
            f"Cancelled callback slot {slot}:"
        )
    clock.advance(18)
    assert cb(api, {"action": "list"}) == (
        "Active callbacks (2/8):\n"
        '  [0] "Check the deploy job; report success or failure, then re-arm if still..." - fires in 0m12s (40 left)\n'
        '  [3] "Check disk usage on /tmp" - fires in 0m42s (infinite)'
    )
    assert (
        cb(api, {"action": "cancel", "callback_id": 0})
        == 'Cancelled callback slot 0: "Check the deploy job; report success or failure, then r..."'
    )
    assert (
        cb(api, {"action": "cancel", "callback_id": 9})
        == "Error: callback_id 9 out of range (max 7)"
    )
    assert (
        cb(api, {"action": "cancel", "callback_id": -1})
        == "Error: callback_id -1 out of range (max 7)"
    )
    assert cb(api, {"action": "cancel", "callback_id": 0}) == "Error: callback slot 0 is not active"
    cb(api, {"action": "set", "message": "x", "delay_seconds": 5})
    assert cb(api, {"action": "cancel"}) == "Cancelled 2 callbacks."
    assert cb(api, {"action": "list"}) == "No active callbacks"


def test_callback_slots_and_limits(api: Reminders) -> None:
    for i in range(8):
        assert cb(api, {"action": "set", "message": f"m{i}", "delay_seconds": 1}).startswith(
            "Callback scheduled"
        )
    result = handle_tool_call(
        ToolContext(api, "s1"),
        "set_callback",
        {"action": "set", "message": "9th", "delay_seconds": 1},
    )
    assert (result.content, result.code) == (
        "Error: all callback slots full (max 8)",
        "callback_slots_full",
    )
    assert sorted(r.slot for r in api.list(session="s1")) == list(range(8))
    assert all(r.on_busy == "rebase" and r.source == "callback" for r in api.list(session="s1"))
    assert cb(
        api, {"action": "set", "message": "other session", "delay_seconds": 1}, session="s2"
    ).startswith("Callback")


@pytest.mark.parametrize(
    "args, text",
    [
        (
            {"action": "set", "message": "x", "delay_seconds": 0},
            "Error: delay_seconds must be between 1 and 3600",
        ),
        (
            {"action": "set", "message": "x", "delay_seconds": 3601},
            "Error: delay_seconds must be between 1 and 3600",
        ),
        (
            {"action": "set", "message": "x", "delay_seconds": "30"},
            "Error: delay_seconds must be between 1 and 3600",
        ),
        (
            {"action": "set", "message": "", "delay_seconds": 30},
            "Error: message is required for action set",
        ),
        (
            {"action": "set", "message": "x", "delay_seconds": 30, "repeat_count": -2},
            "Error: repeat_count must be a number of fires, -1 for forever, or 0 or 1 for once",
        ),
        ({"action": "explode"}, "Error: action must be set, list or cancel"),
        ({"action": "cancel", "callback_id": "0"}, "Error: callback_id must be a slot number"),
        ("nope", "Error: the arguments are not JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
    ids=[
        "delay 0",
        "delay 3601",
        "delay string",
        "no message",
        "repeat -2",
        "action",
        "id string",
        "not json",
    ],
)
def test_callback_refusals(api: Reminders, args: object, text: str) -> None:
    assert cb(api, args) == text
    assert api.list(all=True) == []


@pytest.mark.parametrize(
    "count, fires, text",
    [
        (None, 20, "Callback scheduled: fires every 30s, repeats 20 times."),
        (0, 1, "Callback scheduled: fires once in 30s."),
        (1, 1, "Callback scheduled: fires once in 30s."),
        (-1, None, "Callback scheduled: fires every 30s, repeats infinitely."),
    ],
)
def test_callback_repeat_count(
    api: Reminders, count: int | None, fires: int | None, text: str
) -> None:
    args = {"action": "set", "message": "x", "delay_seconds": 30}
    if count is not None:
        args["repeat_count"] = count
    assert cb(api, args) == text
    (rem,) = api.list(session="s1")
    assert rem.schedule.repeat == fires and rem.schedule.every_s == 30


def test_a_store_that_does_not_answer_is_persistence_uncertain_at_once(
    sqlite_url: str, clock: FakeClock, settings: Settings
) -> None:
    """Another process holds the SQLite write lock: the call says persistence_uncertain
    within STORE_WAIT_S (it waited out the 30 s busy timeout), and what it did shows in
    schedule_list once the store answers."""
    import sqlite3
    import time

    from remindkit.agent.tools import STORE_WAIT_S
    from remindkit.store import open_store

    store = open_store(sqlite_url, settings=settings)
    api = Reminders(store, clock=clock, settings=settings)
    call(api, "schedule_create", {"prompt": "warm", "after": "5m"})  # the schema exists
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        start = time.monotonic()
        data = call(api, "schedule_create", {"prompt": "Stretch", "after": "25m"})
        assert data["error"]["code"] == "persistence_uncertain", data
        assert "schedule_list" in data["error"]["message"]
        listed = call(api, "schedule_list", {})  # the model can re-list meanwhile (WAL)
        assert [r["prompt"] for r in listed["reminders"]] == ["warm"], listed
        text = handle_tool_call(
            ToolContext(api, "s1"),
            "set_callback",
            {"action": "set", "message": "poll", "delay_seconds": 30},
        )
        assert not text.ok and text.code == "persistence_uncertain", text
        assert text.content.startswith("Error: persistence_uncertain")
        took = time.monotonic() - start
        assert took < 3 * STORE_WAIT_S + 3, took
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    deadline = time.monotonic() + 30  # the calls go on and are saved once the lock is gone
    while time.monotonic() < deadline:
        prompts = {r["prompt"] for r in call(api, "schedule_list", {})["reminders"]}
        if {"Stretch", "poll"} <= prompts:
            break
        time.sleep(0.05)
    assert {"warm", "Stretch", "poll"} <= prompts, prompts
    store.close()


def test_the_callback_views_count_what_has_fired(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    """The engine claims a fire a moment before it is due (its look-ahead), and counts
    a fire that waits to be re-based: the list, the popup, the [CB] indicator (status
    --line --callbacks, from the store's summary) and the stats block show the fires
    that have happened and the next that has not."""
    from remindkit import statusfile
    from remindkit.agent.callbacks import callbacks, popup_lines
    from remindkit.cli.status import callbacks_now
    from remindkit.clock import to_us
    from remindkit.engine import Engine
    from remindkit.models import Session

    api = Reminders(store, clock=clock, settings=settings)
    eng = Engine(store, clock=clock, settings=settings, inline=True)
    store.sessions.put_session(Session("s1", adapter="python"), now_us=clock.now_us())
    eng.adapters.get("python").register("s1", lambda _m, _f: "ok")
    t0 = clock.now()
    try:
        cb(api, {"action": "set", "message": "poll", "delay_seconds": 5, "repeat_count": 3})

        def views() -> tuple[str, str, str, dict]:
            now_us = to_us(clock.now())
            listed = cb(api, {"action": "list"}).splitlines()[-1]
            popup = popup_lines(callbacks(ToolContext(api, "s1")), clock.now())[-1]
            summary = store.reports.status_summary(now_us=now_us)
            line = statusfile.render_line(
                summary, summary["all"], now_us=now_us, as_json=False, callbacks=True,
                session="s1",
            )  # fmt: skip
            return listed, popup, line, callbacks_now(api, "s1")

        eng.tick(clock.now())
        clock.advance(4.5)  # the first fire (t+5) is claimed now, not yet due
        eng.tick(clock.now())
        assert store.reminders.history(session="s1")[0].state == "claimed"
        listed, popup, line, block = views()
        assert listed.endswith("- fires in 0m00s (3 left)"), listed  # was 0m05s (2 left)
        assert popup.endswith("0m01s (3)") and line == "[CB:1 0:01]", (popup, line)
        assert block["next_fire_ms"] == to_us(t0) // 1000 + 5000 and block["remaining_s"] == 1
        clock.advance(0.5)
        eng.tick(clock.now())
        listed, popup, line, block = views()
        assert listed.endswith("- fires in 0m05s (2 left)") and popup.endswith("0m05s (2)")
        assert line == "[CB:1 0:05]" and block["remaining_s"] == 5
        # the second fire comes due while the session is busy: it waits to be re-based
        # and does not count (it fires one full delay after the turn)
        store.sessions.set_session_busy("s1", True, now_us=clock.now_us())
        clock.advance(5.5)
        eng.tick(clock.now())
        assert store.reminders.history(session="s1")[0].wait_for == "rebase"
        listed, popup, _line, _block = views()
        assert listed.endswith("(2 left)") and popup.endswith("(2)"), (listed, popup)
        store.sessions.set_session_busy("s1", False, now_us=clock.now_us())
        eng.notice_change()
        eng.tick(clock.now())
        listed, popup, line, block = views()
        assert listed.endswith("- fires in 0m05s (2 left)"), listed
        assert [o.state for o in store.reminders.history(session="s1")] == ["skipped", "delivered"]
    finally:
        eng.shutdown()
