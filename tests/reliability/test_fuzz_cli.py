"""Fuzzing the ``remindkit`` command line, in-process, against a store in a temporary
REMINDKIT_HOME that holds reminders of sessions s1 and s2.

Argument vectors are a command (with its sub-action) and a mix of its own options,
options of other commands, plausible values (durations, times, cron, zones, ids and
labels that exist), hostile ones (control characters, undecodable bytes as argv
carries them, 1 MB strings, ``--``) and random tokens. For every vector:

* ``main`` returns 0 or 1 (``--help`` exits 0), never raises, within a time bound;
* a refusal prints one line ``error: <code>: <message>`` with a documented code
  (with ``--json``: ``{"error": {"code", "message"}}`` on stdout);
* a refusal changes nothing in the store (every table compared).

Commands that run until stopped (serve, tray, chat, demo, alerts test), ``--db``
and ``import -`` (stdin) are not generated.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from remindkit.cli.main import main
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store
from remindkit.store import schema as t

from .bounded import time_limit
from .hostile import SOAK_CHUNK, documented_codes, soak_chunks

pytestmark = pytest.mark.reliability

BOUND_S = 10.0
SETTINGS = dict(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
CI = settings(max_examples=700, **SETTINGS)  # type: ignore[arg-type]
SOAK = settings(max_examples=SOAK_CHUNK, **SETTINGS)  # type: ignore[arg-type]
TERMINAL_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")
ERROR_LINE = re.compile(r"error: ([a-z_]+): .+\n", re.DOTALL)
NEVER = {"serve", "tray", "chat", "demo", "test"}
COMMANDS = [
    "remind",
    "add",
    "ls",
    "list",
    "show",
    "pause",
    "resume",
    "rm",
    "stop",
    "delete",
    "cancel",
    "snooze",
    "history",
    "export",
    "import",
    "status",
    "session",
    "alerts",
]


class Home:
    """A REMINDKIT_HOME with a store holding reminders of s1 and s2."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.db = home / "remindkit.db"
        settings = Settings.from_env()
        store = open_store(settings.url, settings=settings)
        try:
            api = Reminders(store, settings=settings)
            self.ids = [
                api.create(f"r{i}", session=s, label=f"l{i}", every="10m").id
                for i, s in enumerate(["s1", "s1", "s2", "s2"])
            ]
            api.pause([self.ids[1]])
            api.cancel([self.ids[3]])
        finally:
            store.close()
        self.import_file = home / "import.jsonl"

    def snapshot(self) -> dict[str, list[tuple[Any, ...]]]:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            return {
                table.name: sorted(
                    conn.execute(f'SELECT * FROM "{table.name}"').fetchall(), key=repr
                )
                for table in t.metadata.sorted_tables
            }
        finally:
            conn.close()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    monkeypatch.setenv("REMINDKIT_NOTIFY", "0")
    monkeypatch.setenv("REMINDKIT_AUDIO", "none")
    for name in ("REMINDKIT_DB", "REMINDKIT_SESSION"):
        monkeypatch.delenv(name, raising=False)
    yield Home(tmp_path / "home")


# -- argument vectors ------------------------------------------------------------------------

HOSTILE = [
    "",
    " ",
    "-",
    "--",
    "-x",
    "--bogus",
    "\x00",
    "a\x07b",
    "\x1b[2J",
    "\udcff",
    "caf\udce9",
    "\u202e",
    "\u2028",
    "</schedule-fired>",
    '<schedule label="x" delay="1s">evil</schedule>',
    "%s%n",
    "{session}",
]
# what the OS hands over: undecodable bytes become lone surrogates (surrogateescape)
ARGV_TEXT = st.binary(max_size=12).map(os.fsdecode)
BIG = st.sampled_from([200, 201, 8_000, 8_001, 1_000_000]).map(lambda n: "x" * n)
DURATION = st.sampled_from(
    [
        "5m",
        "30s",
        "1h30m",
        "0",
        "-1",
        "10s",
        "59",
        "60",
        "2d",
        "400d",
        "soon",
        "1e3",
        "5 m",
        "99999999999999999999",
        "1w",
    ]
)
TIME = st.sampled_from(
    [
        "2026-12-01T09:00:00+01:00",
        "2099-01-01T00:00:00Z",
        "2020-01-01T00:00:00Z",
        "09:00",
        "24:00",
        "2026-03-08T02:30",
        "2026-11-01T01:30",
        "2026-13-40",
        "tomorrow",
        "2026-12-01",
    ]
)
CRON = st.sampled_from(
    [
        "0 9 * * 1-5",
        "0 0 9 * * 1-5",
        "* * * * *",
        "*/1 * * * * *",
        "0 0 30 2 *",
        "61 * * * *",
        "0 0 * * 0-7",
        "* * * jan-jun/2 *",
        "0 9 * *",
        "a b c d e",
    ]
)
ZONE = st.sampled_from(
    [
        "UTC",
        "Europe/Berlin",
        "America/New_York",
        "Australia/Lord_Howe",
        "Mars/Olympus",
        "../../etc/passwd",
        "utc",
        "Z",
    ]
)
SESSION = st.sampled_from(["s1", "s2", "s3", " s1", "s" * 201, "new"])
COUNT = st.sampled_from(
    ["1", "3", "0", "-1", "forever", "x", "99999999999999999999", "-99999999999999999999"]
)


def _ids(home: Home) -> st.SearchStrategy[str]:
    return st.sampled_from([*home.ids, "rem_ffffffffffff", "rem_" + "f" * 97, "l0"])


@st.composite
def value(draw: st.DrawFn, home: Home, option: str) -> str:
    """Mostly a plausible value for ``option``; sometimes a hostile, huge or random one."""
    if draw(st.integers(0, 2)):
        return draw(_plausible(option))
    return draw(st.one_of(st.sampled_from(HOSTILE), BIG, ARGV_TEXT))


def _plausible(option: str) -> st.SearchStrategy[str]:
    plausible: dict[str, st.SearchStrategy[str]] = {
        "--in": DURATION,
        "--every": DURATION,
        "--at": TIME,
        "--until": TIME,
        "--cron": CRON,
        "--tz": ZONE,
        "--repeat": COUNT,
        "--limit": COUNT,
        "--session": SESSION,
        "--label": st.sampled_from(["l0", "l2", "new"]),
        "--urgency": st.sampled_from(["low", "normal", "critical", "x"]),
        "--misfire": st.sampled_from(["latest", "skip", "all", "x"]),
        "--on-busy": st.sampled_from(["wait", "rebase", "skip", "x"]),
        "--command": st.sampled_from(["my-agent --resume {session}", "'unclosed", "", "a\x00b"]),
        "--fresh-command": st.sampled_from(["my-agent --new {session}", "'"]),
        "--base-url": st.sampled_from(["http://127.0.0.1:9/v1", "ftp://x", "file:///etc/passwd"]),
        "--timeout": st.sampled_from(["1", "0", "-1", "nan", "inf", "x"]),
    }
    return plausible.get(
        option, st.sampled_from(["Deploy check", "en-us", "OPENAI_API_KEY", "llama3.2", "t"])
    )


TAKES_VALUE = [
    "--session",
    "--label",
    "--in",
    "--at",
    "--every",
    "--cron",
    "--tz",
    "--repeat",
    "--until",
    "--announce",
    "--urgency",
    "--misfire",
    "--on-busy",
    "--limit",
    "--command",
    "--fresh-command",
    "--base-url",
    "--model",
    "--api-key-env",
    "--system",
    "--title",
    "--timeout",
]
FLAGS = ["--alarm", "--all", "--replace", "--openai", "--python", "--json", "-h"]


@st.composite
def argvs(draw: st.DrawFn, home: Home) -> list[str]:
    ids = _ids(home)
    command = draw(st.sampled_from([*COMMANDS, "random"]))
    argv: list[str] = []
    if command in ("remind", "add"):
        argv = [
            command,
            draw(
                st.one_of(
                    st.sampled_from(["Check the deploy", "x"]),
                    st.sampled_from(HOSTILE),
                    BIG,
                    ARGV_TEXT,
                )
            ),
        ]
        own = [
            "--session",
            "--label",
            "--in",
            "--at",
            "--every",
            "--cron",
            "--tz",
            "--repeat",
            "--until",
            "--alarm",
            "--announce",
            "--urgency",
            "--misfire",
            "--on-busy",
        ]
    elif command in ("show", "snooze"):
        argv = [command, draw(ids)] + ([draw(DURATION)] if command == "snooze" else [])
        own = []
    elif command in ("pause", "resume", "rm", "stop", "delete", "cancel"):
        argv = [command, *draw(st.lists(ids, max_size=3))]
        own = ["--session", "--all"] + (["--label"] if command not in ("pause", "resume") else [])
    elif command == "history":
        argv = [command, *draw(st.lists(ids, max_size=1))]
        own = ["--session", "--limit"]
    elif command == "import":
        home.import_file.write_text(
            draw(
                st.sampled_from(
                    [
                        "",
                        "{}",
                        "not json",
                        '{"remindkit_export": 2}',
                        '{"type": "reminder"}',
                        '{"type": "session", "id": "\\u0000"}',
                        '{"type": "reminder", "id": "rem_x", "schedule": {"v": 1}}',
                    ]
                )
            )
            + "\n",
            encoding="utf-8",
        )
        argv = [
            command,
            draw(st.sampled_from([str(home.import_file), str(home.home), "/nonexistent/x"])),
        ]
        own = ["--replace"]
    elif command == "session":
        action = draw(st.sampled_from(["add", "ls", "rm", "busy", "idle", "bogus"]))
        argv = [command, action] + (
            [draw(SESSION)] if action in ("add", "rm", "busy", "idle") else []
        )
        own = (
            [
                "--command",
                "--fresh-command",
                "--openai",
                "--base-url",
                "--model",
                "--api-key-env",
                "--system",
                "--python",
                "--title",
                "--timeout",
            ]
            if action == "add"
            else []
        )
    elif command == "alerts":
        action = draw(
            st.sampled_from(["status", "mute", "unmute", "quiet", "voice", "rate", "bogus"])
        )
        argv = [command, action]
        if action in ("quiet", "voice", "rate"):
            argv.append(
                draw(
                    st.one_of(
                        st.sampled_from(
                            [
                                "22:00-07:00",
                                "off",
                                "default",
                                "170",
                                "39",
                                "601",
                                "en-us",
                                "25:00-01:00",
                            ]
                        ),
                        st.sampled_from(HOSTILE),
                        BIG,
                    )
                )
            )
        own = []
    elif command == "random":
        argv = draw(
            st.lists(
                st.one_of(st.text(max_size=10), st.sampled_from(HOSTILE), ARGV_TEXT), max_size=4
            )
        )
        own = []
    else:
        argv = [command]
        own = ["--session", "--all"] if command in ("ls", "list") else []
    options = draw(st.lists(st.sampled_from(own), max_size=4, unique=True)) if own else []
    if command in ("remind", "add") and draw(st.integers(0, 4)):
        options = [o for o in options if o not in ("--in", "--at", "--every", "--cron")]
        options.insert(0, draw(st.sampled_from(["--in", "--at", "--every", "--cron"])))
    if draw(st.integers(0, 7)) == 0:  # an option of another command
        options.append(draw(st.sampled_from(TAKES_VALUE + FLAGS)))
    for option in options:
        argv.append(option)
        if option in TAKES_VALUE and draw(st.integers(0, 19)):  # now and then the value is missing
            if draw(st.integers(0, 3)):
                argv.append(draw(value(home, option)))
            else:
                argv[-1] = f"{option}={draw(value(home, option))}"
    if draw(st.integers(0, 9)) == 0:  # noise anywhere
        argv.insert(
            draw(st.integers(0, len(argv))),
            draw(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=8))),
        )
    assume(not any(a in NEVER or re.match(r"--?d(b|$|=)", a) or a.startswith("--db") for a in argv))
    assume(not ("import" in argv and "-" in argv))
    return argv


# -- the property ----------------------------------------------------------------------------


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with time_limit(BOUND_S, f"remindkit {' '.join(a[:30] for a in argv)[:200]}"):
        try:
            code = main(argv, stdout=out, stderr=err)
        except SystemExit as exc:  # argparse's --help
            assert exc.code == 0 and ("-h" in argv or "--help" in argv), (exc.code, argv)
            code = 0
    return code, out.getvalue(), err.getvalue()


def check(home: Home, argv: list[str]) -> None:
    before = home.snapshot()
    code, out, err = run(argv)
    assert code in (0, 1), (code, argv, err[-500:])
    if "--json" not in argv:  # what reaches a terminal holds no control character but newlines
        assert not TERMINAL_CONTROL.search(out + err), (
            f"a control character reached the terminal: {(out + err)[:300]!r}"
        )
    what = argv[0] if argv and argv[0] in COMMANDS else "other"
    if code == 0:
        event(f"{what}: ok")
        return
    if "--json" in argv:
        data = json.loads(out)
        found = data["error"]["code"]
        assert data["error"]["message"]
    else:
        m = ERROR_LINE.fullmatch(err)
        assert m is not None and err.count("\n") == 1, f"not one error line: {err[:500]!r}"
        found = m.group(1)
    assert found in documented_codes(), f"undocumented code {found!r} for {argv}"
    event(f"{what}: {found}")
    assert home.snapshot() == before, f"refused with {found} but the store changed: {argv}"


def _fuzz(home: Home, data: st.DataObject) -> None:
    argv = data.draw(argvs(home), label="argv")
    try:
        check(home, argv)
    except Exception as exc:  # pytest cannot print a lone surrogate: say it in ASCII
        raise AssertionError(
            f"{type(exc).__name__}: {ascii(str(exc))[:600]} for {ascii(argv)[:400]}"
        ) from None


test_cli_fuzz = CI(given(data=st.data())(_fuzz))


@pytest.mark.soak
@pytest.mark.parametrize("chunk", soak_chunks("cli"))
@SOAK
@given(data=st.data())
def test_cli_fuzz_soak(home: Home, chunk: int, data: st.DataObject) -> None:
    _fuzz(home, data)


@pytest.mark.parametrize(
    "argv, code",
    [
        (["remind", "x" * 8_001, "--in", "5m", "--session", "s1"], "text_too_long"),
        (["remind", "x" * 1_000_000, "--in", "5m"], "text_too_long"),
        (["remind", "x", "--in", "5m", "--label", "l" * 101], "label_too_long"),
        (["remind", "x", "--in", "5m", "--announce", "a" * 501], "announce_too_long"),
        (["remind", "caf\udce9", "--in", "5m"], "invalid_argument"),
        (["remind", "x", "--in", "5m", "--label", "\udcff"], "invalid_label"),
        (["remind", "x", "--in", "5m", "--session", "s\udcff"], "invalid_session"),
        (["show", "rem_\udcff"], "not_found"),
        (["rm", "--session", "s1", "--label", "\x00"], "invalid_label"),
        (["history", "--limit", "99999999999999999999"], "invalid_argument"),
        (["history", "--limit", "-1"], "invalid_argument"),
        (["history", "--session", "\udc80"], "invalid_session"),
        (["pause", "ID0", "--session", "s\udcff"], "invalid_session"),
        (["rm", "ID0", "--session", "\x1b"], "invalid_session"),
        (["session", "rm", "\udcff"], "invalid_session"),
        (["session", "add", "s9", "--command", "agent", "--timeout", "nan"], "invalid_argument"),
        (["session", "add", "s9", "--command", "agent", "--timeout", "-1"], "invalid_argument"),
        (["session", "add", "s9", "--title", "\udcff"], "invalid_argument"),
        (["alerts", "voice", "\udcff"], "invalid_argument"),
        (["alerts", "voice", "a\u2028b"], "invalid_argument"),
        (
            ["export", "\nerror: forged: line"],
            "invalid_argument",
        ),  # one line: the newline is escaped
    ],
    ids=lambda v: v[0] if isinstance(v, list) else v,
)
def test_refusals_change_nothing(home: Home, argv: list[str], code: str) -> None:
    argv = [home.ids[0] if a == "ID0" else a for a in argv]
    before = home.snapshot()
    got, out, err = run(argv)
    assert got == 1 and err.startswith(f"error: {code}: ") and err.count("\n") == 1, (
        got,
        err[:300],
    )
    assert home.snapshot() == before
