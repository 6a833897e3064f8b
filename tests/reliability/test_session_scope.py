"""A tool call, a reply tag or a command scoped to session s1 cannot read, change or
cancel session s2's reminders, by id or by label.

Tool calls and tags act for the session of the conversation. On the command line
the scope is ``--session`` or, when it is not given, ``REMINDKIT_SESSION`` (which
remindkit sets for the agent commands it runs). Each attempt below is refused
or sees nothing, and s2's rows are the same afterwards.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from remindkit.agent import ToolContext, handle_tool_call
from remindkit.agent.actions import run_reply_tags
from remindkit.cli.main import main
from remindkit.clock import FakeClock
from remindkit.engine import Engine
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store

pytestmark = pytest.mark.reliability


class Two:
    """Reminders of s1 and s2, each with a label the other also uses."""

    def __init__(self, api: Reminders) -> None:
        self.api = api
        self.mine = api.create("mine", session="s1", label="shared", in_="1h")
        self.theirs = api.create("theirs", session="s2", label="shared", every="10m")
        self.their_paused = api.create("theirs, paused", session="s2", label="p", in_="2h")
        api.pause([self.their_paused.id])
        api.add(
            "their callback",
            session="s2",
            label="callback-0",
            every=30,
            on_busy="rebase",
            source="callback",
            slot=0,
            replace_label=False,
            min_period_s=1,
        )

    def rows(self, session: str) -> list[Any]:
        return sorted(
            (r.id, r.state, r.next_fire_at, r.label, r.text, r.version, r.snoozed)
            for r in self.api.list(session=session, all=True)
        )


# -- tool calls and tags ---------------------------------------------------------------------


@pytest.fixture
def two(store: SqlStore, settings: Settings) -> Iterator[Two]:
    yield Two(Reminders(store, clock=FakeClock("2026-01-05T09:00:00Z"), settings=settings))


def tool(two: Two, name: str, args: dict[str, Any]) -> Any:
    return handle_tool_call(ToolContext(two.api, "s1"), name, args)


def test_tool_calls_stay_in_their_session(two: Two) -> None:
    theirs = two.rows("s2")
    listed = json.loads(tool(two, "schedule_list", {}).content)["reminders"]
    assert [r["id"] for r in listed] == [two.mine.id]
    for rid in (two.theirs.id, two.their_paused.id, f" {two.theirs.id} "):
        result = tool(two, "schedule_delete", {"id": rid})
        assert (result.ok, result.code) == (False, "schedule_not_found")
    assert tool(two, "set_callback", {"action": "list"}).content == "No active callbacks"
    assert tool(two, "set_callback", {"action": "cancel"}).content == "Cancelled 0 callbacks."
    assert (
        tool(two, "set_callback", {"action": "cancel", "callback_id": 0}).code
        == "callback_not_active"
    )
    # the same label in s1 replaces s1's reminder only
    made = tool(two, "schedule_create", {"prompt": "again", "label": "shared", "after": "5m"})
    assert json.loads(made.content)["replaced"] == [two.mine.id]
    assert two.rows("s2") == theirs


def test_reply_tags_stay_in_their_session(two: Two) -> None:
    theirs = two.rows("s2")
    reply = (
        f'<cancel-schedule id="{two.theirs.id}"/> <cancel-schedule label="p"/> '
        '<schedule label="shared" delay="5m">replace?</schedule>'
    )
    outcomes = run_reply_tags(two.api, "s1", reply)
    assert [(o.action, o.ok, o.code) for o in outcomes] == [
        ("cancel", False, "schedule_not_found"),
        ("cancel", False, "schedule_not_found"),
        ("schedule", True, None),
    ]
    assert outcomes[2].replaced == (two.mine.id,)
    assert two.rows("s2") == theirs


# -- the command line ------------------------------------------------------------------------


class Cli:
    def __init__(self, home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.monkeypatch = monkeypatch
        settings = Settings.from_env()
        self.store = open_store(settings.url, settings=settings)
        self.two = Two(Reminders(self.store, settings=settings))
        # a fire of s2's in the history, which s1 must not read
        later = FakeClock(self.two.theirs.next_fire_at + timedelta(seconds=1))
        eng = Engine(self.store, clock=later, settings=settings, inline=True, can_alert=False)
        try:
            eng.tick(later.now())
        finally:
            eng.close()
        assert self.two.theirs.id in {o.reminder_id for o in self.store.reminders.history()}

    def run(self, *argv: str, scope: str | None = None) -> tuple[int, str, str]:
        if scope is None:
            self.monkeypatch.delenv("REMINDKIT_SESSION", raising=False)
        else:
            self.monkeypatch.setenv("REMINDKIT_SESSION", scope)
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cli]:
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.delenv("REMINDKIT_DB", raising=False)
    monkeypatch.delenv("REMINDKIT_SESSION", raising=False)
    c = Cli(tmp_path / "home", monkeypatch)
    yield c
    c.store.close()


# (argv, how it is scoped); THEIRS / PAUSED stand for s2's ids
SCOPES = [("env", []), ("flag", ["--session", "s1"]), ("both", ["--session", "s1"])]
ATTEMPTS = [
    ["rm", "THEIRS"],
    ["cancel", "THEIRS", "PAUSED"],
    ["rm", "--label", "shared"],
    ["rm", "--label", "p"],
    ["pause", "THEIRS"],
    ["resume", "PAUSED"],
    ["snooze", "THEIRS", "10m"],
    ["snooze", "PAUSED", "1m"],
    ["show", "THEIRS"],
    ["history", "THEIRS"],
    ["history"],
    ["pause", "--all"],
    ["resume", "--all"],
    ["rm", "--all"],
]


@pytest.mark.parametrize("how, flags", SCOPES, ids=[s[0] for s in SCOPES])
@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[" ".join(a) for a in ATTEMPTS])
def test_cli_calls_stay_in_their_session(
    cli: Cli, how: str, flags: list[str], attempt: list[str]
) -> None:
    two = cli.two
    names = {"THEIRS": two.theirs.id, "PAUSED": two.their_paused.id}
    argv = [names.get(a, a) for a in attempt] + flags + ["--json"]
    theirs, paused_all = two.rows("s2"), two.api.paused_all
    code, out, err = cli.run(*argv, scope="s1" if how in ("env", "both") else None)
    assert two.rows("s2") == theirs, f"{argv} changed s2's reminders"
    assert two.api.paused_all == paused_all, f"{argv} paused or resumed every session"
    data = json.loads(out)
    if code == 1:
        assert data["error"]["code"] in ("not_found", "invalid_argument"), data
    else:  # what it did or showed is s1's only
        shown = data if isinstance(data, list) else [data]
        assert all(
            r.get("session") in (None, "s1")
            for r in shown
            if isinstance(r, dict) and "session" in r
        ), data
        assert not [r[0] for r in theirs if r[0] in out], (
            f"{argv} showed s2's reminders: {out[:300]}"
        )


@pytest.mark.parametrize("how", ["env", "flag"])
def test_cli_lists_only_its_session(cli: Cli, how: str) -> None:
    argv = ["ls", "--all", "--json"] + (["--session", "s1"] if how == "flag" else [])
    code, out, _err = cli.run(*argv, scope="s1" if how == "env" else None)
    assert code == 0 and [r["id"] for r in json.loads(out)] == [cli.two.mine.id]
    code, out, _err = cli.run("status", "--json", *argv[3:], scope="s1" if how == "env" else None)
    assert code == 0 and json.loads(out)["next"]["id"] == cli.two.mine.id


def test_unscoped_cli_still_reaches_every_session(cli: Cli) -> None:
    """Without a scope the command line is the person's own tool: it can act on any reminder."""
    code, _out, _err = cli.run("pause", cli.two.theirs.id)
    assert code == 0 and cli.two.api.get(cli.two.theirs.id).state == "paused"
    code, out, _err = cli.run("ls", "--json")
    assert {r["session"] for r in json.loads(out)} == {"s1", "s2"}


def test_scoped_pause_all_is_the_sessions_own(cli: Cli) -> None:
    code, _out, _err = cli.run("pause", "--all", scope="s1")
    assert code == 0 and not cli.two.api.paused_all
    assert (
        cli.two.api.get(cli.two.mine.id).state == "paused"
        and cli.two.api.get(cli.two.theirs.id).state == "active"
    )
    code, _out, _err = cli.run("resume", "--all", "--session", "s1")
    assert code == 0 and cli.two.api.get(cli.two.mine.id).state == "active"
