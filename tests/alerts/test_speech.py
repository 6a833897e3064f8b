"""Speech: a fresh worker per utterance renders real speech; rate is honoured;
espeak-ng takes over when pyttsx3 fails; a hung speaker is killed at its timeout."""

from __future__ import annotations

import array
import math
import os
import sys
import time
import wave
from pathlib import Path
from types import SimpleNamespace

import pytest

from remindkit.alerts.alarm import AlarmPlayer
from remindkit.alerts.speak_worker import pick_voice
from remindkit.alerts.speech import Speaker

from .conftest import Capture

TEXT = "Time to check the deploy. The build should be green by now."


def pcm_stats(frames: bytes, rate: int) -> tuple[float, float]:
    """(seconds, RMS as a fraction of full scale) of 16-bit mono PCM."""
    samples = array.array("h")
    samples.frombytes(frames[: len(frames) // 2 * 2])
    if sys.byteorder == "big":
        samples.byteswap()
    if not samples:
        return 0.0, 0.0
    rms = math.sqrt(sum(s * s for s in samples) / len(samples)) / 32768
    return len(samples) / rate, rms


def wav_stats(path: Path) -> tuple[float, float]:
    with wave.open(str(path), "rb") as w:
        assert (w.getnchannels(), w.getsampwidth()) == (1, 2)
        return pcm_stats(w.readframes(w.getnframes()), w.getframerate())


@pytest.mark.audio
def test_the_worker_renders_real_speech(tmp_path: Path) -> None:
    out = tmp_path / "say.wav"
    result = Speaker(engines=["pyttsx3"]).render(TEXT, out, timeout_s=30)
    assert result.ok, result.error
    assert result.engine == "pyttsx3"
    seconds, rms = wav_stats(out)
    assert seconds > 2.0  # a dozen words
    assert rms > 0.03  # silence is 0; espeak speech sits around 0.1


@pytest.mark.audio
def test_rate_setting_changes_the_speech(tmp_path: Path) -> None:
    speaker = Speaker(engines=["pyttsx3"])
    slow, fast = tmp_path / "slow.wav", tmp_path / "fast.wav"
    assert speaker.render(TEXT, slow, rate=110, timeout_s=30).ok
    assert speaker.render(TEXT, fast, rate=330, timeout_s=30).ok
    assert wav_stats(slow)[0] > 1.8 * wav_stats(fast)[0]


@pytest.mark.audio
def test_espeak_ng_takes_over_when_pyttsx3_fails(tmp_path: Path) -> None:
    broken = [sys.executable, "-c", "import sys; sys.exit(2)"]
    out = tmp_path / "say.wav"
    result = Speaker(engines=["pyttsx3", "espeak-ng"], worker_argv=broken).render(
        TEXT, out, timeout_s=30
    )
    assert result.ok and result.engine == "espeak-ng", result
    seconds, rms = wav_stats(out)
    assert seconds > 2.0 and rms > 0.03


@pytest.mark.audio
def test_spoken_announcement_reaches_the_sound_device(alsa_capture: Capture) -> None:
    speaker = Speaker(AlarmPlayer(["simpleaudio"]), engines=["pyttsx3"], render_to_file=True)
    result = speaker.say(TEXT, voice="en", timeout_s=30)
    assert result.ok, result.error
    seconds, rms = pcm_stats(alsa_capture.read(), 22050)
    assert seconds > 2.0 and rms > 0.03


@pytest.mark.audio
def test_speech_without_a_device_fails_with_the_reason(alsa_no_device: None) -> None:
    speaker = Speaker(
        AlarmPlayer(["simpleaudio", "aplay"]), engines=["pyttsx3"], render_to_file=True
    )
    result = speaker.say("Hello", timeout_s=30)
    assert not result.ok
    assert "audio unavailable" in (result.error or "")


def test_a_hung_speaker_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    hang = [
        sys.executable,
        "-c",
        f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(120)",
    ]
    speaker = Speaker(engines=["pyttsx3", "espeak-ng"], worker_argv=hang)
    t0 = time.monotonic()
    result = speaker.say(TEXT, timeout_s=1.0)
    elapsed = time.monotonic() - t0
    assert not result.ok and result.timed_out and result.engine == "pyttsx3"
    assert 0.9 <= elapsed < 2.5
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        ("gmw/en", "gmw/en"),
        ("English (America)", "gmw/en-US"),
        ("en-us", "gmw/en-US"),
        ("de", "gmw/de"),
        ("klingon", None),
    ],
    ids=["id", "name", "id-tail", "language", "unknown"],
)
def test_pick_voice(wanted: str, expected: str | None) -> None:
    voices = [
        SimpleNamespace(id="gmw/af", name="Afrikaans", languages=["af"]),
        SimpleNamespace(id="gmw/en", name="English (Great Britain)", languages=["en-gb"]),
        SimpleNamespace(id="gmw/en-US", name="English (America)", languages=["en-us"]),
        SimpleNamespace(id="gmw/de", name="German", languages=["de"]),
    ]
    assert pick_voice(voices, wanted) == expected
