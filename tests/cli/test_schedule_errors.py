"""Bad cron rules and bad settings are clean refusals on every surface: the command
line (text and ``--json``, in-process and as a real process), tool calls and reply tags."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from remindkit.agent import ToolContext, handle_tool_call
from remindkit.agent.actions import run_reply_tags
from remindkit.cli.main import main
from remindkit.clock import FakeClock
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore

BAD_CRON = [
    ("0 9 * * ¹", "invalid_cron"),
    ("0 9 * * \u0663", "invalid_cron"),  # Arabic-Indic 3
    ("\u0660 9 * * *", "invalid_cron"),
    ("0 0 * * 5#9", "invalid_cron"),
    ("@reboot", "invalid_cron"),
    ("0 0 30 2 *", "no_future_fire"),
    ("0 0 31 4 *", "no_future_fire"),
]


@pytest.fixture
def rk(tmp_path, monkeypatch):
    monkeypatch.setenv("REMINDKIT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REMINDKIT_TZ", "UTC")
    for name in (
        "REMINDKIT_DB",
        "REMINDKIT_SESSION",
        "REMINDKIT_MIN_PERIOD",
        "REMINDKIT_HORIZON_DAYS",
        "REMINDKIT_LEASE",
        "REMINDKIT_WAIT_CAP",
    ):
        monkeypatch.delenv(name, raising=False)

    def run(*args):
        out, err = io.StringIO(), io.StringIO()
        code = main(list(args), stdout=out, stderr=err)
        return code, out.getvalue(), err.getvalue()

    return run


@pytest.mark.parametrize("expr, code", BAD_CRON, ids=[e for e, _ in BAD_CRON])
def test_cli_cron_refusals(rk, expr: str, code: str) -> None:
    status, out, err = rk("remind", "x", "--session", "s1", "--cron", expr)
    assert status == 1 and out == ""
    assert err.startswith(f"error: {code}: ") and err.count("\n") == 1 and "Traceback" not in err
    status, out, err = rk("remind", "x", "--session", "s1", "--cron", expr, "--json")
    assert status == 1 and err == ""
    assert json.loads(out)["error"]["code"] == code
    status, out, _ = rk("ls", "--json")
    assert status == 0 and json.loads(out) == []  # nothing was written


@pytest.mark.parametrize(
    "option, value", [("--in", "¹"), ("--in", "\u0663m"), ("--every", "\u0661\u0660m")]
)
def test_cli_durations_read_ascii_digits_only(rk, option: str, value: str) -> None:
    status, out, err = rk("remind", "x", "--session", "s1", option, value)
    assert status == 1 and err.startswith("error: invalid_duration: ") and "Traceback" not in err


def test_cli_accepts_the_new_syntax(rk) -> None:
    for expr in (
        "@daily",
        "0 0 L * *",
        "0 9 * * 5#2",
        "0 9 * * 5L",
        "*/100 * * * *",
        "0 9 * * 5/1",
        "0 0 1 * 1",
    ):
        status, out, err = rk("remind", expr, "--session", "s1", "--cron", expr, "--json")
        assert status == 0, err
        assert json.loads(out)["kind"] == "cron"


@pytest.mark.parametrize(
    "name, value",
    [
        ("REMINDKIT_MIN_PERIOD", "abc"),
        ("REMINDKIT_MIN_PERIOD", "5x"),
        ("REMINDKIT_HORIZON_DAYS", "1q"),
        ("REMINDKIT_HORIZON_DAYS", "-1"),
        ("REMINDKIT_LEASE", "¹"),
        ("REMINDKIT_WAIT_CAP", "0"),
        ("REMINDKIT_MAX_TEXT", "lots"),
    ],
)
def test_cli_bad_setting(rk, monkeypatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    status, out, err = rk("ls")
    assert status == 1 and out == ""
    assert err.startswith(f"error: invalid_setting: {name}: ") and err.count("\n") == 1
    status, out, err = rk("ls", "--json")
    assert status == 1 and err == ""
    error = json.loads(out)["error"]
    assert error["code"] == "invalid_setting" and error["message"].startswith(f"{name}: ")


def test_settings_take_cli_durations(rk, monkeypatch) -> None:
    monkeypatch.setenv("REMINDKIT_MIN_PERIOD", "5m")
    monkeypatch.setenv("REMINDKIT_HORIZON_DAYS", "2d")
    monkeypatch.setenv("REMINDKIT_LEASE", "30s")
    monkeypatch.setenv("REMINDKIT_WAIT_CAP", "1m")
    status, _, err = rk("remind", "x", "--session", "s1", "--every", "4m")
    assert status == 1 and err.startswith("error: interval_too_short: ")
    status, _, err = rk("remind", "x", "--session", "s1", "--in", "3d")
    assert status == 1 and err.startswith("error: horizon_exceeded: ")
    status, _, err = rk("remind", "x", "--session", "s1", "--every", "5m")
    assert status == 0, err
    s = Settings.from_env()
    assert (s.limits.min_period_s, s.limits.horizon_s, s.lease_s, s.wait_cap_s) == (
        300,
        172_800,
        30.0,
        60.0,
    )
    # plain numbers keep their unit: seconds, and days for the horizon
    env = {"REMINDKIT_MIN_PERIOD": "90", "REMINDKIT_HORIZON_DAYS": "1.5", "REMINDKIT_LEASE": "12.5"}
    s = Settings.from_env(env)
    assert (s.limits.min_period_s, s.limits.horizon_s, s.lease_s) == (90, 129_600, 12.5)
    # a year, as the users write it: 365 days
    assert Settings.from_env({"REMINDKIT_HORIZON_DAYS": "1y"}).limits.horizon_s == 365 * 86_400


@pytest.mark.parametrize(
    "args, env, code",
    [
        (["remind", "x", "--session", "s1", "--cron", "0 9 * * ¹"], {}, "invalid_cron"),
        (["ls"], {"REMINDKIT_MIN_PERIOD": "5 minutes"}, "invalid_setting"),
    ],
)
def test_real_process_prints_no_traceback(
    tmp_path, args: list[str], env: dict[str, str], code: str
) -> None:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("REMINDKIT_")}
    full_env.update(
        env, REMINDKIT_HOME=str(tmp_path / "home"), REMINDKIT_TZ="UTC", PYTHONIOENCODING="utf-8"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "remindkit", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {code}: ") and "Traceback" not in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "remindkit", *args, "--json"],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )
    assert proc.returncode == 1 and json.loads(proc.stdout)["error"]["code"] == code


@pytest.fixture
def api(sqlite_store: SqlStore, clock: FakeClock, settings: Settings) -> Reminders:
    return Reminders(sqlite_store, clock=clock, settings=settings)


@pytest.mark.parametrize("expr, code", BAD_CRON, ids=[e for e, _ in BAD_CRON])
def test_tool_call_and_reply_tag_refusals(api: Reminders, expr: str, code: str) -> None:
    result = handle_tool_call(
        ToolContext(api, "s1"), "schedule_create", {"prompt": "x", "cron": expr}
    )
    assert not result.ok and result.code == code
    assert json.loads(result.content)["error"]["code"] == code
    outcomes = run_reply_tags(api, "s1", f'ok <schedule label="t" cron="{expr}">x</schedule>')
    assert [(o.ok, o.code) for o in outcomes] == [(False, code)]
    assert api.list(session="s1") == []
