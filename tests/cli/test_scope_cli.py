"""Under REMINDKIT_SESSION=s1 (the scope remindkit sets for the agent commands it runs)
no flag widens the scope: another session, the store's settings and the session
definitions are refused with ``forbidden`` (exit 1), and nothing changes."""

from __future__ import annotations

import json

import pytest

from .conftest import Home


@pytest.fixture
def two(home: Home) -> dict[str, str]:
    home.js("session", "add", "s1", "--command", "agent --resume {session}")
    home.js("session", "add", "s2", "--command", "agent --resume {session}")
    mine = home.js("remind", "mine", "--session", "s1", "--label", "shared", "--in", "1h")["id"]
    theirs = home.js("remind", "theirs", "--session", "s2", "--label", "shared", "--every", "10m")[
        "id"
    ]
    (home.path / "backup.jsonl").write_text(home.run("export")[1])
    return {"MINE": mine, "THEIRS": theirs, "FILE": str(home.path / "backup.jsonl")}


FORBIDDEN = [
    ["ls", "--session", "s2"],
    ["ls", "--all", "--session", "s2"],
    ["rm", "--session", "s2", "--label", "shared"],
    ["rm", "--session", "s2", "--all"],
    ["rm", "THEIRS", "--session", "s2"],
    ["remind", "x", "--in", "5m", "--session", "s2"],
    ["reminders", "add", "x", "--in", "5m", "--session", "s2"],
    ["show", "THEIRS", "--session", "s2"],
    ["history", "--session", "s2"],
    ["snooze", "THEIRS", "5m", "--session", "s2"],
    ["pause", "THEIRS", "--session", "s2"],
    ["pause", "--all", "--session", "s2"],
    ["resume", "--all", "--session", "s2"],
    ["status", "--session", "s2"],
    ["status", "--line", "--session", "s2"],
    ["stats", "--session", "s2"],
    ["watch", "--once", "--session", "s2"],
    ["export"],
    ["import", "FILE"],
    ["import", "FILE", "--replace"],
    ["session", "ls"],
    ["session"],
    ["session", "busy", "s2"],
    ["session", "idle", "s2"],
    ["session", "rm", "s2"],
    ["session", "add", "s2", "--command", "sh -c evil"],
    ["session", "add", "s1", "--command", "sh -c evil"],
    ["alerts", "mute"],
    ["alerts", "unmute"],
    ["alerts", "quiet", "22:00-07:00"],
    ["alerts", "voice", "en"],
    ["alerts", "rate", "170"],
    ["alerts", "test"],
]


@pytest.mark.parametrize("argv", FORBIDDEN, ids=" ".join)
def test_scope_is_not_widened(home: Home, two: dict[str, str], argv: list[str]) -> None:
    argv = [two.get(a, a) for a in argv]
    before = home.snapshot()
    code, out, err = home.run(*argv, scope="s1")
    assert (
        (code, out) == (1, "") and err.startswith("error: forbidden: ") and err.count("\n") == 1
    ), (code, out, err)
    code, out, _err = home.run(*argv, "--json", scope="s1")
    assert code == 1 and json.loads(out)["error"]["code"] == "forbidden"
    assert home.snapshot() == before


def test_the_sessions_own_business_stays_allowed(home: Home, two: dict[str, str]) -> None:
    assert home.js("session", "busy", "s1", scope="s1")["busy"] is True
    assert home.js("session", "idle", "s1", scope="s1")["busy"] is False
    assert [r["id"] for r in home.js("ls", "--all", "--session", "s1", scope="s1")] == [two["MINE"]]
    status = home.js("status", scope="s1")
    assert (status["active"], status["paused"], status["session"]) == (1, 0, "s1")
    assert status["next"]["id"] == two["MINE"]
    assert home.js("status")["active"] == 2  # unscoped: every session
    assert home.js("status", "--line", scope="s1")["active"] == 1
    assert "muted" in home.js("alerts", scope="s1")  # reading the alert settings is fine
    made = home.js("remind", "again", "--in", "5m", "--label", "shared", scope="s1")
    assert made["session"] == "s1" and made["replaced"] == [two["MINE"]]
    assert home.js("pause", "--all", scope="s1")[0]["session"] == "s1"
    assert home.js("status")["paused_all"] is False


def test_unscoped_session_flag_still_narrows(home: Home, two: dict[str, str]) -> None:
    assert [r["id"] for r in home.js("ls", "--session", "s2")] == [two["THEIRS"]]
    assert home.js("session", "busy", "s2")["busy"] is True
