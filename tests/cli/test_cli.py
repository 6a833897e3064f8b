"""The remindkit command, run in-process against a real SQLite file."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from remindkit.cli.main import main


@pytest.fixture
def rk(tmp_path, monkeypatch):
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.delenv("REMINDKIT_DB", raising=False)
    monkeypatch.delenv("REMINDKIT_SESSION", raising=False)

    def run(*args):
        out, err = io.StringIO(), io.StringIO()
        code = main(list(args), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    return run


def js(rk, *args):
    code, out, err = rk(*args, "--json")
    assert code == 0, (out, err)
    return json.loads(out)


ISSUE_EXAMPLES = [
    (
        "Check the deploy",
        "--session",
        "s1",
        "--label",
        "deploy",
        "--in",
        "5m",
        "--alarm",
        "--announce",
        "Deploy check",
    ),
    ("Standup summary", "--session", "s1", "--cron", "0 0 9 * * 1-5", "--tz", "Europe/Berlin"),
    ("Poll the build", "--session", "s1", "--every", "2m", "--repeat", "30"),
    ("Launch checklist", "--session", "s1", "--at", "2099-12-01T09:00:00+01:00"),
]


@pytest.mark.parametrize("args", ISSUE_EXAMPLES, ids=lambda a: a[0])
def test_remind_json_shape(rk, args):
    if args[0] == "Launch checklist":
        # within the 366-day horizon
        import datetime as dt

        when = (
            (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30))
            .replace(microsecond=0)
            .isoformat()
        )
        args = args[:-1] + (when,)
    data = js(rk, "remind", *args)
    for key in (
        "id",
        "session",
        "label",
        "text",
        "kind",
        "state",
        "next_fire_at",
        "tz",
        "repeat",
        "fired_count",
        "alarm",
        "announce",
        "last_error",
    ):
        assert key in data
    assert data["next_fire_at"].endswith("Z") and data["state"] == "active"


def test_local_time_with_zone_every_until(rk):
    import datetime as dt

    day = (dt.date.today() + dt.timedelta(days=10)).isoformat()
    data = js(
        rk,
        "remind",
        "Vendor reply?",
        "--session",
        "s1",
        "--at",
        f"{day}T09:00",
        "--tz",
        "America/New_York",
        "--every",
        "1h",
        "--until",
        f"{day}T23:00:00Z",
    )
    assert (
        data["kind"] == "every"
        and data["tz"] == "America/New_York"
        and data["until"] == f"{day}T23:00:00Z"
    )
    assert data["next_fire_local"].startswith(f"{day}T09:00:00-0")


@pytest.mark.parametrize(
    "args, code",
    [
        (("x", "--in", "5q"), "invalid_duration"),
        (("x", "--every", "10s"), "interval_too_short"),
        (("x", "--at", "2020-01-01T00:00:00Z"), "time_not_future"),
        (("x", "--in", "400d"), "horizon_exceeded"),
        (("x", "--in", "5m", "--tz", "Mars/Olympus"), "unknown_time_zone"),
        (("", "--in", "5m"), "empty_text"),
        (("x", "--in", "5m", "--at", "10:00"), "conflicting_schedule"),
        (("x", "--cron", "0 9 * * *", "--in", "5m"), "conflicting_schedule"),
        (("x",), "missing_schedule"),
        (("x", "--cron", "61 * * * *"), "invalid_cron"),
        (("x", "--cron", "* * * * * *"), "interval_too_short"),
        (("x", "--in", "5m", "--repeat", "3"), "invalid_repeat"),
        (("x", "--at", "2026-03-08T02:30", "--tz", "America/New_York"), "nonexistent_local_time"),
        (("x", "--in", "5m", "--bogus"), "invalid_argument"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_refusals(rk, args, code):
    c, out, err = rk("remind", *args, "--session", "s1")
    assert c == 1 and out == "" and err.startswith(f"error: {code}: ")
    c, out, err = rk("remind", *args, "--session", "s1", "--json")
    assert c == 1 and json.loads(out)["error"]["code"] == code
    assert js(rk, "ls") == []  # nothing was written


def test_nonexistent_local_time_next_year(rk):
    import datetime as dt

    # Find next spring-forward in New York (second Sunday of March) in the horizon.
    year = dt.date.today().year + (1 if dt.date.today().month >= 3 else 0)
    march = dt.date(year, 3, 1)
    sunday = march + dt.timedelta(days=(6 - march.weekday()) % 7 + 7)
    c, out, err = rk("remind", "x", "--at", f"{sunday}T02:30", "--tz", "America/New_York")
    assert c == 1 and "nonexistent_local_time" in err


def test_too_many_reminders(rk, monkeypatch):
    monkeypatch.setenv("REMINDKIT_MAX_PER_SESSION", "2")
    js(rk, "remind", "a", "--session", "s1", "--in", "5m")
    js(rk, "remind", "b", "--session", "s1", "--in", "5m")
    c, out, err = rk("remind", "c", "--session", "s1", "--in", "5m")
    assert c == 1 and err.startswith("error: too_many_reminders:")
    assert len(js(rk, "ls")) == 2


def test_lifecycle(rk):
    a = js(rk, "remind", "a", "--session", "s1", "--label", "deploy", "--in", "5m")
    b = js(rk, "remind", "b", "--session", "s1", "--every", "10m")
    js(rk, "remind", "c", "--session", "s2", "--in", "1h")
    assert [r["id"] for r in js(rk, "ls", "--session", "s1")] == [a["id"], b["id"]]
    paused = js(rk, "pause", b["id"])
    assert paused[0]["state"] == "paused"
    resumed = js(rk, "resume", b["id"])
    assert resumed[0]["state"] == "active" and resumed[0]["next_fire_at"]
    snoozed = js(rk, "snooze", a["id"], "10m")
    assert snoozed["next_fire_at"] > a["next_fire_at"]
    gone = js(rk, "rm", "--session", "s1", "--label", "deploy")
    assert [r["id"] for r in gone] == [a["id"]]
    c, _out, err = rk("rm", a["id"])
    assert c == 1 and "not_active" in err
    c, _out, err = rk("rm", "rem_nope")
    assert c == 1 and err.startswith("error: not_found:")
    js(rk, "rm", "--session", "s1", "--all")
    assert [r["id"] for r in js(rk, "ls")] != []  # s2's stays
    assert {r["state"] for r in js(rk, "ls", "--all")} == {"active", "cancelled"}
    assert js(rk, "pause", "--all") == {"paused_all": True}
    assert js(rk, "status")["paused_all"] is True
    js(rk, "resume", "--all")
    assert js(rk, "status")["paused_all"] is False
    assert js(rk, "history") == []


def test_export_import(rk, tmp_path):
    js(rk, "remind", "a", "--session", "s1", "--in", "5m")
    js(rk, "remind", "b", "--session", "s2", "--cron", "0 9 * * 1-5")
    code, out, _err = rk("export")
    assert code == 0
    backup = tmp_path / "backup.jsonl"
    backup.write_text(out)
    other = tmp_path / "other.db"
    assert js(rk, "import", str(backup), "--db", f"sqlite:///{other}")["imported"] == 2
    assert len(js(rk, "ls", "--db", f"sqlite:///{other}")) == 2
    c, _o, err = rk("import", str(backup), "--db", f"sqlite:///{other}")
    assert c == 1 and "already_exists" in err
    bad = tmp_path / "bad.jsonl"
    bad.write_text(out + "{not json}\n")
    c, _o, err = rk("import", str(bad), "--db", f"sqlite:///{tmp_path / 'third.db'}")
    assert c == 1 and "invalid_import" in err and f"line {len(out.splitlines()) + 1}:" in err
    assert js(rk, "ls", "--db", f"sqlite:///{tmp_path / 'third.db'}") == []


def test_sessions(rk):
    js(rk, "session", "add", "s1", "--command", "my-agent --resume {session}")
    (s,) = js(rk, "session", "ls")
    assert s["adapter"] == "command" and s["config"]["argv"] == [
        "my-agent",
        "--resume",
        "{session}",
    ]
    assert js(rk, "session", "busy", "s1")["busy"] is True
    assert js(rk, "session", "idle", "s1")["busy"] is False
    r = js(rk, "remind", "x", "--session", "s1", "--in", "5m")
    assert js(rk, "session", "rm", "s1") == {"deleted": "s1", "paused": [r["id"]]}
    c, _o, err = rk("remind", "y", "--session", "s1", "--in", "5m")
    assert c == 1 and "session_deleted" in err


def test_store_is_private(rk, tmp_path):
    js(rk, "remind", "a", "--session", "s1", "--in", "5m")
    home = tmp_path / "home"
    assert oct(home.stat().st_mode & 0o777) == "0o700"
    assert oct((home / "remindkit.db").stat().st_mode & 0o777) == "0o600"


@pytest.mark.parametrize("command", [("history",), ("ls",), ("remind", "x", "--in", "5m")])
def test_a_file_that_is_not_a_store_is_refused(rk, tmp_path, command):
    """A --db naming a file that is not a SQLite database: a refusal with its code, the
    file left as it was (no traceback, nothing written into it)."""
    bad = tmp_path / "notes.db"
    body = b"SQLite format 3\x00" + b"not a database, only its magic" * 4
    bad.write_bytes(body)
    code, out, err = rk(*command, "--db", f"sqlite:///{bad}", "--json")
    assert code == 1, (out, err)
    error = json.loads(out)["error"]
    assert error["code"] == "store_unavailable"
    assert "file is not a database" in error["message"]
    assert bad.read_bytes() == body


def test_console_script_runs(tmp_path):
    env = {"REMINDKIT_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "remindkit", "remind", "x", "--in", "1m", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout)["state"] == "active"
    proc = subprocess.run(
        [sys.executable, "-m", "remindkit", "ls", "--nope"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 1 and proc.stderr.startswith("error: invalid_argument:")


def test_global_options_before_the_command(rk, tmp_path):
    other = f"sqlite:///{tmp_path / 'before.db'}"
    code, out, _err = rk("--db", other, "--json", "remind", "x", "--in", "5m")
    assert code == 0 and json.loads(out)["state"] == "active"
    assert len(js(rk, "ls", "--db", other)) == 1
    assert js(rk, "ls") == []  # the default store was not touched
