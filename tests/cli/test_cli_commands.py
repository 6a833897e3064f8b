"""The reminders group beside the flat commands, --timezone, the rm aliases, --json on
every command, a quiet end when the reader goes away, and a light start."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .conftest import ROOT, Home


def test_reminders_group_is_the_same_code(home: Home) -> None:
    a = home.js(
        "reminders",
        "add",
        "Standup",
        "--session",
        "s1",
        "--cron",
        "0 9 * * 1-5",
        "--timezone",
        "Europe/Berlin",
    )
    assert a["tz"] == "Europe/Berlin" and a["kind"] == "cron"
    b = home.js(
        "remind", "Poll", "--session", "s1", "--every", "10m", "--timezone", "America/New_York"
    )
    assert b["tz"] == "America/New_York"
    listed = home.js("reminders", "ls", "--session", "s1")
    assert (
        [r["id"] for r in listed]
        == [r["id"] for r in home.js("ls", "--session", "s1")]
        == [a["id"], b["id"]]
    )
    assert [r["id"] for r in home.js("reminders")] == [a["id"], b["id"]]  # the group alone lists
    assert home.js("reminders", "show", a["id"])["id"] == a["id"]
    assert home.js("reminders", "pause", a["id"])[0]["state"] == "paused"
    assert home.js("reminders", "resume", a["id"])[0]["state"] == "active"
    assert [r["id"] for r in home.js("reminders", "stop", a["id"])] == [a["id"]]
    assert [r["id"] for r in home.js("reminders", "delete", b["id"])] == [b["id"]]
    assert home.js("reminders", "ls") == []
    c = home.js("reminders", "add", "x", "--in", "5m")
    assert [r["id"] for r in home.js("delete", c["id"])] == [c["id"]]
    code, _out, err = home.run("reminders", "add", "x", "--in", "5m", "--timezone", "Mars/Olympus")
    assert code == 1 and err.startswith("error: unknown_time_zone: ")
    code, _out, err = home.run("reminders", "bogus")
    assert code == 1 and err.startswith("error: invalid_argument: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["ls"],
        ["list"],
        ["history"],
        ["status"],
        ["status", "--line"],
        ["stats"],
        ["session", "ls"],
        ["alerts"],
        ["reminders"],
        ["watch", "--once"],
        ["export"],
    ],
    ids=" ".join,
)
def test_json_everywhere(home: Home, argv: list[str]) -> None:
    home.js("remind", "x", "--session", "s1", "--in", "5m")
    code, out, err = home.run(*argv, "--json")
    assert code == 0, err
    for line in out.splitlines():  # one JSON value per line (export and watch write lines)
        json.loads(line)
    assert out.strip()


def _pipe(home: Home, shell: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f"set -o pipefail; {shell}"],
        capture_output=True,
        text=True,
        env=home.env(),
        cwd=home.path,
        timeout=180,
    )


def test_ends_quietly_when_the_reader_goes_away(home: Home) -> None:
    # 20 reminders of 7,000 characters: export writes ~140 kB, more than a pipe holds,
    # so the writer is still writing when `head` leaves
    for i in range(20):
        home.js("remind", f"{i} " + "x" * 7_000, "--session", "s1", "--in", "5m")
    rk = f"{sys.executable} -m remindkit"
    for cmd in (
        f"{rk} export | head -c 100 >/dev/null",
        f"{rk} ls | head -1 >/dev/null",
        f"{rk} history | head -2 >/dev/null",
        f"{rk} export --json | head -c 10 >/dev/null",
    ):
        proc = _pipe(home, cmd)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, (
            cmd,
            proc.stderr,
        )
        assert proc.stderr == "", (cmd, proc.stderr)
        assert proc.returncode in (0, 141), (cmd, proc.returncode)
    # the large one always sees the pipe close: the status a shell gives SIGPIPE
    assert _pipe(home, f"{rk} export | head -c 100 >/dev/null").returncode == 141


def test_command_line_starts_light() -> None:
    """`import remindkit` and `import remindkit.cli.main` load neither the engine, the
    alerts, the notebook, delivery, SQLAlchemy nor APScheduler."""
    code = (
        "import sys, remindkit, remindkit.cli.main\n"
        "heavy = ('remindkit.engine.core', 'remindkit.alerts', 'remindkit.notebook', 'remindkit.delivery',\n"
        "         'remindkit.store', 'sqlalchemy', 'apscheduler', 'rich', 'remindkit.tray')\n"
        "print([m for m in sys.modules if m.startswith(heavy)])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_ls_and_the_status_line_read_without_sqlalchemy(home: Home) -> None:
    """With no engine to hand them to, `ls` and `status --line` read the SQLite file
    through the driver alone (remindkit.store.lite): SQLAlchemy is not imported, and
    they print what the store says. A new store is made by the full store first."""
    fresh = home.proc("ls", "--json")
    assert fresh.returncode == 0 and json.loads(fresh.stdout) == [], fresh.stderr
    assert home.proc("remind", "soon", "--session", "s1", "--in", "5m").returncode == 0
    assert home.proc("remind", "later", "--session", "s2", "--in", "2h").returncode == 0
    code = (
        "import io, json, sys\n"
        "from remindkit.cli.main import main\n"
        "out = io.StringIO()\n"
        "assert main(['ls', '--json'], stdout=out) == 0\n"
        "rows = json.loads(out.getvalue())\n"
        "line = io.StringIO()\n"
        "assert main(['status', '--line', '--json'], stdout=line) == 0\n"
        "mine = io.StringIO()\n"
        "assert main(['ls', '--session', 's2'], stdout=mine) == 0\n"
        "print(json.dumps({'texts': [r['text'] for r in rows], 'line': json.loads(line.getvalue()),\n"
        "                  's2': mine.getvalue(),\n"
        "                  'heavy': [m for m in sys.modules if m.startswith(('sqlalchemy', 'remindkit.store.sql'))]}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=home.env(),
        cwd=home.path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["heavy"] == []
    assert got["texts"] == ["soon", "later"]
    assert got["line"]["active"] == 2 and got["line"]["source"] == "store"
    assert "later" in got["s2"] and "soon" not in got["s2"]


def test_remind_without_an_engine_creates_without_sqlalchemy(home: Home) -> None:
    """With no engine to hand it to, `remind` on a SQLite store at this schema creates
    through the driver alone (a LiteStore opened for writing): SQLAlchemy is not
    imported, refusals keep their codes, and `ls` shows what it made. A new store is
    made (and migrated) by the full store first."""
    first = home.proc("remind", "made by the full store", "--session", "s1", "--in", "5m")
    assert first.returncode == 0, first.stderr
    code = (
        "import io, json, sys\n"
        "from remindkit.cli.main import main\n"
        "out, err = io.StringIO(), io.StringIO()\n"
        "made = main(['remind', 'light', '--session', 's1', '--label', 'l', '--in', '5m', '--json'],\n"
        "            stdout=out, stderr=err)\n"
        "again = io.StringIO()\n"
        "assert main(['remind', 'lighter', '--session', 's1', '--label', 'l', '--every', '1h',\n"
        "             '--json'], stdout=again, stderr=io.StringIO()) == 0\n"
        "bad = io.StringIO()\n"
        "refused = main(['remind', 'x', '--in', '5x', '--json'], stdout=bad, stderr=io.StringIO())\n"
        "print(json.dumps({'made': made, 'rem': json.loads(out.getvalue()), 'err': err.getvalue(),\n"
        "                  'again': json.loads(again.getvalue()), 'refused': refused,\n"
        "                  'bad': json.loads(bad.getvalue()),\n"
        "                  'heavy': [m for m in sys.modules if m.startswith(('sqlalchemy', 'remindkit.store.sql'))]}))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=home.env(),
        cwd=home.path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["heavy"] == []
    assert got["made"] == 0 and got["rem"]["text"] == "light" and got["rem"]["source"] == "cli"
    assert got["rem"]["armed"] is False and "no engine is running" in got["err"]
    assert got["again"]["replaced"] == [got["rem"]["id"]]
    assert got["refused"] == 1 and got["bad"]["error"]["code"] == "invalid_duration"
    listed = json.loads(home.proc("ls", "--all", "--json").stdout)
    assert [(r["text"], r["state"]) for r in listed] == [
        ("made by the full store", "active"),
        ("light", "cancelled"),
        ("lighter", "active"),
    ]


def test_a_reminder_command_loads_no_engine(home: Home) -> None:
    """`remind` and `ls` need the store, never the engine, the alerts or the ORM (nor
    Alembic, once the store exists: the first command on a new store migrates it)."""
    assert home.proc("ls").returncode == 0
    code = (
        "import sys, io\n"
        "from remindkit.cli.main import main\n"
        "assert main(['remind', 'x', '--in', '5m'], stdout=io.StringIO()) == 0\n"
        "assert main(['ls'], stdout=io.StringIO()) == 0\n"
        "heavy = ('remindkit.engine.core', 'remindkit.alerts', 'remindkit.notebook', 'remindkit.delivery',\n"
        "         'sqlalchemy.orm', 'alembic', 'sqlalchemy.dialects.postgresql', 'apscheduler')\n"
        "print([m for m in sys.modules if m.startswith(heavy)])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=home.env(),
        cwd=home.path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
