"""Smaller holes: a long fired message, a long fresh-session id, Unicode case folds
in tag names, escape sequences from stored rows and model replies, markup in
notifications, store URLs that are not what they seem."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from remindkit.alerts.notify import pystray_fallback, summary_and_body
from remindkit.cli.main import main
from remindkit.clock import SystemClock, format_utc, to_us
from remindkit.models import Fire, Reminder, Session
from remindkit.protocol.tags import parse_tags
from remindkit.reminders import Reminders
from remindkit.schedules.spec import Schedule
from remindkit.settings import Settings
from remindkit.store import open_store
from tests.processes.conftest import Serve, wait_for
from tests.processes.openai_server import ScriptedOpenAI, text

from .attacks import record

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
NASTY = "a\x1b[2J\x1b]0;owned\x07b\x9b31m"


def cli(
    env: dict[str, str], *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=ROOT,
        input=stdin,
    )


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    e.update(
        REMINDKIT_HOME=str(tmp_path),
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'store.db'}",
        REMINDKIT_TZ="UTC",
        PYTHONUNBUFFERED="1",
    )
    return e


RECORDER = r"""
import json, sys
data = sys.stdin.read()
with open(sys.argv[2], "a") as fh:
    fh.write(json.dumps({"argv": sys.argv[1][:200], "argv_len": len(sys.argv[1]), "stdin_len": len(data)}) + "\n")
"""


def test_a_fired_message_past_128_kib_goes_on_stdin(env: dict[str, str], tmp_path: Path) -> None:
    script, seen = tmp_path / "agent.py", tmp_path / "seen.jsonl"
    script.write_text(RECORDER)
    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(env["REMINDKIT_DB"], settings=settings)
    try:
        store.sessions.put_session(
            Session(
                "c1",
                adapter="command",
                config={"argv": [sys.executable, str(script), "{message}", str(seen)]},
            ),
            now_us=to_us(SystemClock().now()),
        )
        api = Reminders(store, clock=SystemClock(), settings=settings)
        at = format_utc(SystemClock().now() + timedelta(seconds=4))
        for i in range(3):  # '<' is framed as \u003c: 6 bytes each, 142 KB in all
            api.create(f"{i}" + "<" * 7_900, session="c1", at=at)
    finally:
        store.close()
    engine = Serve(env["REMINDKIT_DB"], tmp_path, name="long")
    try:
        engine.wait_ready()
        hist = wait_for(
            lambda: (
                [
                    o
                    for o in json.loads(cli(env, "history", "--json").stdout)
                    if o["outcome"] != "claimed"
                ]
                if seen.exists()
                else []
            ),
            60,
            0.3,
        )
    finally:
        engine.stop()
    assert hist and all(o["outcome"] == "delivered" and o["delivered_to"] == "c1" for o in hist), (
        hist
    )
    got = [json.loads(line) for line in seen.read_text().splitlines()]
    assert (
        len(got) == 1
        and got[0]["stdin_len"] > 128 * 1024
        and got[0]["argv"].startswith("(the message is on stdin")
    )
    sessions = json.loads(cli(env, "session", "ls", "--json").stdout)
    assert [s["id"] for s in sessions] == ["c1"], "a fresh session was started"
    record(
        "three reminders push a command's {message} past 128 KiB (real engine)",
        "exec failed (E2BIG), a fresh session started spuriously",
        "the message goes on stdin only ({message} says so); delivered to the session",
    )


def test_a_long_session_id_gets_a_fresh_session_it_can_use(
    env: dict[str, str], tmp_path: Path
) -> None:
    sid = "s" * 199
    tag = '<schedule label="follow" delay="10m">check</schedule>'
    settings = Settings.from_env(env={}, home=tmp_path, tz="UTC")
    store = open_store(env["REMINDKIT_DB"], settings=settings)
    try:
        store.sessions.put_session(
            Session(
                sid,
                adapter="command",
                config={"argv": ["false"], "fresh_argv": [sys.executable, "-c", f"print({tag!r})"]},
            ),
            now_us=to_us(SystemClock().now()),
        )
        api = Reminders(store, clock=SystemClock(), settings=settings)
        api.create("go", session=sid, in_="1s")
        engine = Serve(env["REMINDKIT_DB"], tmp_path, name="fresh")
        try:
            engine.wait_ready()
            follow = wait_for(lambda: [r for r in api.list() if r.label == "follow"], 60, 0.3)
        finally:
            engine.stop()
        assert follow, [
            (m.kind, m.content)
            for s in store.sessions.list_sessions()
            for m in store.transcripts.messages(s.id, last=5)
        ]
        fresh = follow[0].session
        assert (
            fresh is not None and len(fresh) <= 200 and fresh.startswith("s" * 150) and "~" in fresh
        )
    finally:
        store.close()
    record(
        "fresh session of a 199-character session id",
        "id~hex passed 200 characters: every tag refused",
        "id cut to 200 characters; the fresh session's tags work",
    )


def test_unicode_case_folds_are_not_tag_names() -> None:
    assert not parse_tags('<ſchedule label="w" delay="5m">x</ſchedule>')
    assert not parse_tags('<cancel-ſchedule label="w" />')
    assert not parse_tags('<ſCHEDULE label="w" delay="5m">x</schedule>')
    tags = parse_tags('<SCHEDULE label="w" delay="5m">x</Schedule>')  # ASCII case still folds
    assert len(tags.commands) == 1
    record(
        "`<ſchedule …>` and `<cancel-ſchedule>` (long s folds to s under re.IGNORECASE)",
        "carried out / misread as a schedule",
        "not tags (re.ASCII): plain text",
    )


def _store_nasty_rows(url: str, home: Path) -> None:
    """Rows as another writer of the store could leave them (not through the API)."""
    settings = Settings.from_env(env={}, home=home, tz="UTC")
    store = open_store(url, settings=settings)
    try:
        now = SystemClock().now()
        store.sessions.put_session(Session(NASTY, adapter=NASTY, config={}), now_us=to_us(now))
        sched = Schedule("at", "UTC", first_at=now + timedelta(hours=1))
        store.reminders.import_rows(
            [
                Reminder(
                    id="rem_" + NASTY,
                    session=NASTY,
                    label=NASTY,
                    text=NASTY,
                    schedule=sched,
                    state="active",
                    next_fire_at=now + timedelta(hours=1),
                    created_at=now,
                    updated_at=now,
                )
            ],
            [],
            replace_existing=False,
        )
    finally:
        store.close()


def test_ls_and_session_ls_print_stored_rows_inert(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _store_nasty_rows(env["REMINDKIT_DB"], tmp_path)
    for key in ("REMINDKIT_HOME", "REMINDKIT_DB", "REMINDKIT_TZ"):
        monkeypatch.setenv(key, env[key])
    monkeypatch.delenv("REMINDKIT_SESSION", raising=False)
    for argv in (["ls"], ["ls", "--all"], ["session", "ls"]):
        out, err = io.StringIO(), io.StringIO()
        assert main(argv, stdout=out, stderr=err) == 0, err.getvalue()
        printed = out.getvalue()
        assert "owned" in printed and not CONTROL.search(printed), (argv, printed)
    record(
        "ESC sequences in stored ids, labels, sessions and adapters printed by `ls` / `session ls`",
        "reached the terminal (clear screen, retitle)",
        "shown escaped (\\x1b…)",
    )


def test_chat_prints_a_model_reply_inert(env: dict[str, str]) -> None:
    with ScriptedOpenAI(lambda body: text(f"line one\n{NASTY}\nline three")) as server:
        done = cli(
            env,
            "chat",
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--session",
            "c1",
            "--no-engine",
            stdin="hello\n/quit\n",
        )
    assert done.returncode == 0, done.stderr
    assert "owned" in done.stdout and "line three" in done.stdout
    assert not CONTROL.search(done.stdout), done.stdout
    record(
        "a model reply with ESC sequences in `remindkit chat` (loopback model server)",
        "reached the terminal",
        "shown escaped; line breaks kept",
    )


class _Icon:
    """The one pystray call the fallback makes: ``notify(message, title)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def notify(self, message: str, title: str) -> None:
        self.calls.append((message, title))


@pytest.mark.parametrize("backend", ["appindicator", "gtk", "xorg", "darwin"])
def test_notification_fallback_makes_markup_inert(backend: str) -> None:
    hostile = 'see <img src="file:///etc/passwd"/> <a href="http://x">here</a> & <b>now</b>\x1b[2J'
    fire = Fire(1, "rem_1", "s1", SystemClock().now(), hostile, label="x")
    icon = _Icon()
    pystray_fallback(icon, backend)(*summary_and_body(fire))
    ((message, title),) = icon.calls
    assert "\x1b" not in message and "\\x1b" in message
    if backend in ("appindicator", "gtk"):
        assert "<" not in message and "&lt;img" in message and "&amp;" in message
    else:
        assert "<img" in message  # shown as text by backends that do not parse markup
    if backend == "appindicator":
        record(
            "reminder text with <img>/<a>/<b> in the tray's notification fallback (pystray)",
            "markup handed unescaped to pystray",
            "escaped for the markup-parsing backends (gtk, appindicator)",
        )


BAD_URLS = [
    "sqlite+anything://u:pw@h/db",
    "sqlite://u:pw@h/db",
    "::::not a url",
    "mysql://u@h/db",
    "postgresql+nosuchdriver://h/db",
]


@pytest.mark.parametrize("url", BAD_URLS)
def test_a_store_url_that_is_not_one_is_refused(
    env: dict[str, str], tmp_path: Path, url: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "remindkit", "ls", "--db", url],
        env=env,
        text=True,
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 1 and done.stderr.startswith("error: invalid_store_url:"), done.stderr
    assert "Traceback" not in done.stderr and "pw" not in done.stderr
    assert list(tmp_path.glob("db*")) == [], "a file was made in the working folder"
    if url == BAD_URLS[0]:
        record(
            "`--db sqlite+anything://u:pw@h/db`",
            "silently made ./db in the working folder",
            "`invalid_store_url`, exit 1, nothing made",
        )
    if url == BAD_URLS[2]:
        record("a malformed `--db`", "a traceback", "`invalid_store_url`, exit 1")
