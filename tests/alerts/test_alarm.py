"""The alarm: the asset, simpleaudio into an ALSA file PCM, the system-player
fallback, no device at all, stop, and a hung player."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import wave
from pathlib import Path

import pytest

from remindkit.alerts.alarm import AlarmPlayer, wav_duration
from remindkit.alerts.config import ALARM_WAV

from .conftest import Capture, wav_frames

ROOT = Path(__file__).resolve().parents[2]


def test_the_alarm_asset_is_what_the_script_makes(tmp_path: Path) -> None:
    out = tmp_path / "alarm.wav"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_alarm.py"), str(out)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == ALARM_WAV.read_bytes()
    with wave.open(str(ALARM_WAV), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 22050)
    assert 1.0 <= wav_duration(ALARM_WAV) <= 4.0


@pytest.mark.audio
def test_simpleaudio_plays_the_alarm_frames(alsa_capture: Capture) -> None:
    result = AlarmPlayer(["simpleaudio"]).play(ALARM_WAV, timeout_s=10)
    assert result.ok, result.error
    assert result.player == "simpleaudio"
    assert alsa_capture.read() == wav_frames(ALARM_WAV)


@pytest.mark.audio
def test_without_simpleaudio_the_system_player_plays_the_same_frames(
    alsa_capture: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "simpleaudio", None)  # import simpleaudio -> ImportError
    player = AlarmPlayer(["simpleaudio", "paplay", "pw-play", "aplay"])
    result = player.play(ALARM_WAV, timeout_s=10)
    assert result.ok, result.error
    assert result.player == "aplay"
    assert result.tried[0] == "simpleaudio" and result.tried[-1] == "aplay"
    frames = wav_frames(ALARM_WAV)
    played = alsa_capture.read()
    assert played[: len(frames)] == frames
    assert set(played[len(frames) :]) <= {0}  # aplay pads its last period with silence


@pytest.mark.audio
def test_simpleaudio_failing_falls_back_to_the_system_player(alsa_capture: Capture) -> None:
    class Broken:
        class WaveObject:
            @staticmethod
            def from_wave_file(_path: str) -> None:
                raise RuntimeError("Error opening PCM device. -- CODE: -2")

    sys.modules["simpleaudio"], real = Broken, sys.modules.get("simpleaudio")  # type: ignore[assignment]
    try:
        result = AlarmPlayer(["simpleaudio", "aplay"]).play(ALARM_WAV, timeout_s=10)
    finally:
        if real is None:
            sys.modules.pop("simpleaudio", None)
        else:
            sys.modules["simpleaudio"] = real
    assert result.ok and result.player == "aplay", result
    assert alsa_capture.read().startswith(wav_frames(ALARM_WAV))


@pytest.mark.audio
def test_with_no_device_every_player_fails_quickly_and_says_why(alsa_no_device: None) -> None:
    t0 = time.monotonic()
    result = AlarmPlayer(["simpleaudio", "paplay", "pw-play", "aplay"]).play(
        ALARM_WAV, timeout_s=10
    )
    assert not result.ok
    assert result.error is not None and result.error.startswith("audio unavailable")
    assert "simpleaudio:" in result.error and "aplay: exit 1" in result.error
    assert result.tried == ("simpleaudio", "paplay", "pw-play", "aplay")
    assert time.monotonic() - t0 < 5


def test_a_missing_file_is_a_failure_not_an_exception(tmp_path: Path) -> None:
    result = AlarmPlayer(["aplay"]).play(tmp_path / "nope.wav")
    assert not result.ok and "no sound file" in (result.error or "")


@pytest.mark.audio
def test_stop_ends_a_playing_alarm(alsa_paced: Capture, tmp_path: Path) -> None:
    long_wav = tmp_path / "long.wav"
    with wave.open(str(long_wav), "wb") as w:  # a minute of a quiet square wave
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(22050)
        w.writeframes((b"\x00\x10" * 25 + b"\x00\xf0" * 25) * (22050 * 60 // 50))
    player = AlarmPlayer(["simpleaudio"])
    results = []
    t = threading.Thread(target=lambda: results.append(player.play(long_wav, timeout_s=60)))
    t.start()
    deadline = time.monotonic() + 5
    while alsa_paced.received < 20_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert player.playing
    t0 = time.monotonic()
    player.stop()
    t.join(5)
    assert not t.is_alive()
    assert time.monotonic() - t0 < 1.0
    assert results[0].ok and results[0].stopped
    assert 0 < len(alsa_paced.read()) < 22050 * 2 * 60 // 2


def _fake_player(tmp_path: Path, body: str) -> Path:
    exe = tmp_path / "fake-player"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(0o755)
    return exe


def test_a_hung_player_is_killed_at_the_timeout(tmp_path: Path) -> None:
    exe = _fake_player(tmp_path, f"echo $$ > {tmp_path}/pid; exec sleep 60")
    player = AlarmPlayer(["aplay"], which=lambda _name: str(exe))
    t0 = time.monotonic()
    result = player.play(ALARM_WAV, timeout_s=0.5)
    assert time.monotonic() - t0 < 2.0
    assert not result.ok and result.timed_out
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_stop_kills_a_system_player(tmp_path: Path) -> None:
    exe = _fake_player(tmp_path, "exec sleep 60")
    player = AlarmPlayer(["aplay"], which=lambda _name: str(exe))
    threading.Timer(0.3, player.stop).start()
    t0 = time.monotonic()
    result = player.play(ALARM_WAV, timeout_s=20)
    assert time.monotonic() - t0 < 2.0
    assert result.ok and result.stopped and result.player == "aplay"
