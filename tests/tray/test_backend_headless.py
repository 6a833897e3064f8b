"""Choosing the backend, and the tray without a display: it says so and runs
the engine headless (never a traceback). With real processes: while the tray
runs, ``serve`` leaves alarms to it; killed, ``serve`` takes alerting over
within the tray's lease."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from remindkit import Reminders, open_store
from remindkit.alerts.config import ALARM_WAV
from remindkit.settings import Settings
from remindkit.tray.backend import TrayUnavailable, backend_order, display_problem, load_backend

from ..desktop_fixtures import Capture, wav_frames
from .conftest import ROOT


@pytest.mark.parametrize(
    ("env", "platform", "order"),
    [
        ({"DISPLAY": ":0"}, "linux", ("appindicator", "gtk", "xorg")),
        ({"DISPLAY": ":0", "PYSTRAY_BACKEND": "gtk"}, "linux", ("gtk",)),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", ("appindicator",)),
        ({}, "darwin", ("darwin",)),
        ({}, "win32", ("win32",)),
    ],
    ids=["x11", "forced", "wayland", "macos", "windows"],
)
def test_backend_order(env: dict, platform: str, order: tuple) -> None:
    assert backend_order(env, platform) == order


def test_no_display_is_said_plainly(monkeypatch: pytest.MonkeyPatch) -> None:
    assert display_problem({}, "linux") == "no display (DISPLAY and WAYLAND_DISPLAY are not set)"
    assert display_problem({}, "darwin") is None
    with pytest.raises(TrayUnavailable) as err:
        load_backend({}, "linux")
    assert err.value.code == "tray_unavailable"


def test_an_unknown_forced_backend_is_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSTRAY_BACKEND", "bogus")
    with pytest.raises(TrayUnavailable) as err:
        load_backend({"DISPLAY": ":99", "PYSTRAY_BACKEND": "bogus"}, "linux")
    assert "bogus: ImportError" in err.value.message


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DISPLAY", "WAYLAND_DISPLAY", "PYSTRAY_BACKEND")
    }
    env.update(
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'store.db'}",
        REMINDKIT_HOME=str(tmp_path / "home"),
        PYTHONUNBUFFERED="1",
        REMINDKIT_NOTIFY="0",
        **extra,
    )
    return env


def _status(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "remindkit", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    return json.loads(done.stdout)


def _wait(pred, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.processes
def test_without_a_display_the_tray_says_so_and_runs_headless(tmp_path: Path) -> None:
    env = _env(tmp_path)
    out = tmp_path / "out.txt"
    with out.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "remindkit", "tray"],
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    try:
        _wait(lambda: "no display" in out.read_text(), 15, "the no-display message")
        status = _wait(lambda: (s := _status(env))["engines"] and s, 15, "the engine")
        assert [e["role"] for e in status["engines"]] == ["tray"]
        assert status["alerter"] == status["engines"][0]["id"]
    finally:
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(15)
    text = out.read_text()
    assert rc == 0
    assert "running headless like `remindkit serve`" in text
    assert "Traceback" not in text


@pytest.mark.processes
@pytest.mark.audio
def test_serve_leaves_alarms_to_the_tray_and_takes_over_when_it_dies(
    tmp_path: Path, alsa_capture: Capture
) -> None:
    env = _env(tmp_path, REMINDKIT_LEASE="3", REMINDKIT_AUDIO="simpleaudio")
    store = open_store(
        env["REMINDKIT_DB"], settings=Settings.from_env(env={}, home=tmp_path / "home")
    )
    api = Reminders(store)
    logs = {name: tmp_path / f"{name}.log" for name in ("tray", "serve")}
    procs = {}
    for name, argv in (("tray", ["tray", "--headless", "-v"]), ("serve", ["serve", "-v"])):
        with logs[name].open("wb") as fh:
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "remindkit", *argv],
                env=env,
                stdout=fh,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
    try:
        status = _wait(lambda: len((s := _status(env))["engines"]) == 2 and s, 20, "two engines")
        roles = {e["id"]: e["role"] for e in status["engines"]}
        _wait(
            lambda: roles.get(_status(env)["alerter"]) == "tray",
            10,
            "the tray to hold the alerter lease",
        )
        time.sleep(1.2)  # serve's next look at the lease (lease/3)
        first = api.create("while the tray runs", in_="1s", alarm=True)
        _wait(
            lambda: (h := api.history(first.id)) and h[0].alert not in (None, "pending", "playing"),
            15,
            "the first alarm",
        )
        _wait(
            lambda: f"alert for {first.id}" in logs["tray"].read_text(),
            5,
            "the tray's alert log line",
        )
        assert f"alert for {first.id}" not in logs["serve"].read_text()

        procs["tray"].send_signal(signal.SIGKILL)
        procs["tray"].wait(5)
        killed = time.time()
        second = api.create("after the tray died", in_="1s", alarm=True)
        _wait(
            lambda: f"alert for {second.id}" in logs["serve"].read_text(),
            15,
            "serve to take alerting over",
        )
        # The log line comes as the alarm starts; its state is written when it has played.
        occ = _wait(
            lambda: (
                (h := api.history(second.id))
                and h[0].alert not in (None, "pending", "playing")
                and h[0]
            ),
            15,
            "the second alarm to finish",
        )
        assert occ.alert == "done" and occ.fired_at is not None
        assert occ.fired_at.timestamp() - killed < 3 + 1.5, "taken over within the tray's 3 s lease"
        assert (
            alsa_capture.read().count(wav_frames(ALARM_WAV)) == 2
        )  # once by the tray, once by serve
        assert first.id not in logs["serve"].read_text()
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(15)
        store.close()
