"""``status --line`` (from the status file a running engine keeps, else from the store)
and ``stats``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from remindkit import statusfile

from .conftest import Home, wait_for

LINE = re.compile(r"⏰(\d+)(?: (\d+:\d\d(?::\d\d)?|\d+d\d+h))?( ⏸)?( !)?")


def line(home: Home, *argv: str, scope: str | None = None) -> dict:
    return home.js("status", "--line", *argv, scope=scope)


def test_line_from_the_store(home: Home) -> None:
    assert home.run("status", "--line")[1] == "⏰0\n"
    a = home.js("remind", "a", "--session", "s1", "--in", "5m")
    home.js("remind", "b", "--session", "s1", "--every", "2h")
    home.js("remind", "c", "--session", "s2", "--in", "3h")
    got = line(home)
    assert got["source"] == "store" and (got["active"], got["paused"]) == (3, 0)
    assert re.fullmatch(r"⏰3 (4:5\d|5:00)", got["line"]), got
    assert re.fullmatch(r"⏰1 (2:59:\d\d|3:00:00)", line(home, "--session", "s2")["line"])
    assert line(home, "--session", "s3")["line"] == "⏰0"
    home.js("pause", "--session", "s2", "--all")
    assert line(home, "--session", "s2")["line"] == "⏰0 ⏸"
    home.js("pause", "--all")
    assert line(home)["line"] == "⏰2 ⏸" and line(home)["paused_all"] is True
    home.js("resume", "--all")
    home.js("rm", a["id"])
    assert re.fullmatch(r"⏰1 (1:59:\d\d|2:00:00)", line(home, "--session", "s1")["line"])


def test_failed_delivery_marks_the_line(home: Home) -> None:
    home.fire_due({"ok": ["true"], "bad": ["false"]})
    assert line(home, "--session", "bad")["line"] == "⏰0 !"
    assert line(home, "--session", "ok")["line"] == "⏰0"


@pytest.fixture
def engine(home: Home) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "remindkit", "serve", "--no-alerts"],
        env=home.env(),
        cwd=home.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            lambda: list(home.path.glob("status-*.json")) or proc.poll() is not None,
            what="the engine's status file",
        )
        assert proc.poll() is None, proc.communicate()
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_line_from_the_engines_status_file(home: Home, engine: subprocess.Popen[str]) -> None:
    (path,) = home.path.glob("status-*.json")
    assert path == statusfile.status_path(home.path, f"sqlite:///{home.db}")
    assert line(home)["source"] == "file" and line(home)["line"] == "⏰0"
    made = home.proc("remind", "x", "--session", "s1", "--in", "10m", "--json")
    r = json.loads(made.stdout)
    got = wait_for(
        lambda: (g := line(home, "--session", "s1"))["active"] == 1 and g,
        what="the file to count it",
    )
    assert got["source"] == "file" and re.fullmatch(r"⏰1 (9:5\d|10:00)", got["line"]), got
    home.proc("pause", "--all")
    wait_for(lambda: line(home)["line"] == "⏰1 ⏸", what="the file to say everything is paused")
    home.proc("resume", "--all")
    home.proc("rm", r["id"])
    wait_for(lambda: line(home)["line"] == "⏰0", what="the file to drop it")
    # the fast path loads neither SQLAlchemy nor the engine
    proc = home.proc("status", "--line", "--session", "s1", PYTHONPROFILEIMPORTTIME="1")
    assert proc.returncode == 0 and proc.stdout == "⏰0\n"
    loaded = re.findall(r"\|\s+([\w.]+)$", proc.stderr, re.M)
    assert "remindkit.statusfile" in loaded
    assert not [
        m
        for m in loaded
        if m.startswith(
            (
                "sqlalchemy",
                "remindkit.engine",
                "remindkit.store",
                "remindkit.reminders",
                "remindkit.wiring",
                "remindkit.cli.handoff",
                "apscheduler",
            )
        )
    ]
    # a stopped engine takes its file away: readers go to the store
    engine.send_signal(signal.SIGINT)
    engine.communicate(timeout=60)
    assert not path.exists() and line(home)["source"] == "store"


def test_a_stale_or_broken_file_is_not_believed(home: Home) -> None:
    home.js("remind", "x", "--session", "s1", "--in", "10m")
    path = statusfile.status_path(home.path, f"sqlite:///{home.db}")
    now_us = time.time_ns() // 1000
    fake = {
        "v": 1,
        "written_us": now_us,
        "paused_all": False,
        "truncated": False,
        "sessions": {},
        "all": {"active": 7, "paused": 0, "next_us": now_us + 60_000_000, "failed": False},
    }
    statusfile.write_status(path, fake)
    assert line(home)["source"] == "file" and line(home)["active"] == 7  # a fresh file is believed
    statusfile.write_status(
        path, {**fake, "written_us": now_us - int(statusfile.STALE_S * 1e6) - 1}
    )
    assert line(home)["source"] == "store" and line(home)["active"] == 1
    path.write_text("{not json")
    assert line(home)["source"] == "store"
    statusfile.write_status(path, {**fake, "truncated": True})
    assert line(home, "--session", "s1")["source"] == "store"  # not listed in a truncated file


@pytest.mark.parametrize(
    "seconds, want",
    [
        (0.2, "0:01"),
        (59, "0:59"),
        (299.5, "5:00"),
        (3600, "1:00:00"),
        (86_400 * 2 + 3600 * 3, "2d3h"),
    ],
)
def test_line_countdown(seconds: float, want: str) -> None:
    summary = {"active": 2, "paused": 1, "next_us": int(seconds * 1e6), "failed": True}
    assert statusfile.format_line(summary, now_us=0, paused_all=False) == f"⏰2 {want} !"


def test_stats(home: Home) -> None:
    home.fire_due({"ok": ["true"], "bad": ["false"]})
    data = home.js("stats")
    assert data["sessions"]["ok"]["delivered"] == 1 and data["sessions"]["bad"]["failed"] == 1
    assert data["all"]["fires"] == 2 and data["all"]["late_max_ms"] >= 0
    for key in (
        "fires",
        "delivered",
        "failed",
        "waiting",
        "skipped",
        "late_p50_ms",
        "late_p99_ms",
        "late_max_ms",
    ):
        assert key in data["all"]
    assert list(home.js("stats", "--session", "ok")["sessions"]) == ["ok"]
    assert home.js("stats", "--since", "1h")["all"]["fires"] == 0  # they fired two hours ago
    code, out, _err = home.run("stats")
    assert (
        code == 0
        and re.search(r"^bad\s+1\s+0\s+1\s", out, re.M)
        and re.search(r"^all\s+2\s+1\s+1\s", out, re.M)
    )
    code, _out, err = home.run("stats", "--since", "soon")
    assert code == 1 and err.startswith("error: invalid_duration: ")


def test_stats_lateness_percentiles(home: Home) -> None:
    from remindkit.store.reports import _lateness

    assert _lateness([]) == {"late_p50_ms": None, "late_p99_ms": None, "late_max_ms": None}
    values = list(range(1, 101))
    assert _lateness(values) == {"late_p50_ms": 50, "late_p99_ms": 99, "late_max_ms": 100}
    assert _lateness([7]) == {"late_p50_ms": 7, "late_p99_ms": 7, "late_max_ms": 7}


def test_the_quick_path_answers_as_the_command_does(home: Home) -> None:
    """``statusfile.quick_line`` (what the command runs first) prints what the full
    command prints from a fresh file, and leaves everything else to the command."""
    import io
    import os

    home.js("remind", "x", "--session", "s1", "--in", "10m")
    path = statusfile.status_path(home.path, f"sqlite:///{home.db}")
    now_us = time.time_ns() // 1000
    entry = {"active": 2, "paused": 0, "next_us": now_us + 300_000_000, "failed": True}
    fake = {
        "v": 1,
        "written_us": now_us,
        "paused_all": False,
        "truncated": False,
        "sessions": {"s1": entry},
        "all": entry,
    }
    statusfile.write_status(path, fake)
    env = {k: v for k, v in os.environ.items() if k != "REMINDKIT_SESSION"}
    for argv in (
        ["status", "--line"],
        ["status", "--line", "--session", "s1", "--json"],
        ["--json", "status", "--session=s2", "--line"],
        ["status", "--line", "--db", f"sqlite:///{home.db}"],
    ):
        out = io.StringIO()
        assert statusfile.quick_line(argv, env, out) == 0, argv
        code, full, _ = home.run(*argv)
        assert code == 0
        if "--json" in argv:
            got, want = json.loads(out.getvalue()), json.loads(full)
            a, b = got.pop("next_in_s"), want.pop("next_in_s")
            assert (a is None and b is None) or abs(a - b) < 2
            assert got == want
        else:
            assert out.getvalue().split(" ")[0] == full.split(" ")[0] and out.getvalue().endswith(
                "!\n"
            )
    # anything else goes to the command
    for argv in (
        ["status", "--line", "--verbose"],
        ["status"],
        ["status", "--line", "--session"],
        ["status", "--line", "--db", f"sqlite:///{home.path / 'other.db'}"],  # no file for it
    ):
        assert statusfile.quick_line(argv, env, io.StringIO()) is None, argv
    assert (
        statusfile.quick_line(
            ["status", "--line"], {**env, "REMINDKIT_SESSION": "s1"}, io.StringIO()
        )
        is None
    )
