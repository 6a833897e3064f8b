"""``remindkit alerts``: settings shared through the store, and a test alert."""

from __future__ import annotations

import io
import json

import pytest

from remindkit.alerts.config import AlertConfig
from remindkit.alerts.quiet import Switches
from remindkit.cli.main import main
from remindkit.store import open_store

from ..desktop_fixtures import Capture, alsa_capture, wav_frames

__all__ = ["alsa_capture"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(list(argv), stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def test_settings_land_in_the_store_for_every_process(sqlite_url: str, settings) -> None:
    for argv in (("mute",), ("quiet", "22:00-07:00"), ("voice", "en-us"), ("rate", "150")):
        assert run("alerts", *argv, "--db", sqlite_url)[0] == 0
    store = open_store(sqlite_url, settings=settings)
    try:
        sw = Switches(store.coordination, env={})
        assert sw.muted and str(sw.quiet_hours) == "22:00-07:00"
        cfg = AlertConfig().with_store(store)
        assert (cfg.voice, cfg.rate) == ("en-us", 150)
    finally:
        store.close()
    rc, out, _ = run("alerts", "--db", sqlite_url, "--json")
    data = json.loads(out)
    assert (
        rc == 0 and data["muted"] and data["quiet_hours"] == "22:00-07:00" and data["rate"] == 150
    )
    assert run("alerts", "unmute", "--db", sqlite_url)[0] == 0
    assert run("alerts", "quiet", "off", "--db", sqlite_url)[0] == 0
    assert run("alerts", "rate", "default", "--db", sqlite_url)[0] == 0
    data = json.loads(run("alerts", "status", "--db", sqlite_url, "--json")[1])
    assert not data["muted"] and data["quiet_hours"] is None and data["rate"] is None


@pytest.mark.parametrize(
    ("argv", "code"),
    [(("quiet", "25:00-01:00"), "invalid_quiet_hours"), (("rate", "fast"), "invalid_argument")],
    ids=["quiet", "rate"],
)
def test_bad_settings_are_refused_with_a_code(sqlite_url: str, argv: tuple, code: str) -> None:
    rc, _out, err = run("alerts", *argv, "--db", sqlite_url)
    assert rc == 1 and err.startswith(f"error: {code}:")


@pytest.mark.audio
def test_alerts_test_plays_the_alarm_and_speaks_here(
    sqlite_url: str, alsa_capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REMINDKIT_NOTIFY", "0")
    monkeypatch.setenv("REMINDKIT_AUDIO", "simpleaudio")
    rc, out, _ = run("alerts", "test", "--db", sqlite_url, "--json")
    result = json.loads(out)
    assert rc == 0 and result["state"] == "done"
    assert result["alarm"] == "simpleaudio" and result["speech"] == "pyttsx3"
    from remindkit.alerts.config import ALARM_WAV

    played = alsa_capture.read()
    frames = wav_frames(ALARM_WAV)
    assert (
        played.startswith(frames) and len(played) > len(frames) + 22050
    )  # then a second of speech
