"""Fixtures for real desktop parts: ALSA configurations and a notification bus.

Test packages that need them import them into their ``conftest.py``.

``alsa_capture``: the default PCM is a ``file`` PCM over a ``null`` slave, so
whatever is played (by simpleaudio in this process or ``aplay`` in a child)
lands byte for byte in a file. ``alsa_no_device``: the default PCM is a sound
card that does not exist, as on a machine without audio. Both go through
``ALSA_CONFIG_PATH``, which alsa-lib rereads when it changes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
import wave
from collections.abc import Iterator
from pathlib import Path

import pytest

from .desktop_env import NotificationBus


class Capture:
    """What the default ALSA device received, over every play, in order.

    The ``file`` PCM writes into a FIFO; a reader thread appends each play to
    ``data`` and reopens the FIFO for the next one (a plain file would be
    truncated by each play). ``delay_s`` per 4 KiB paces playback, so that a
    sound takes time and can be stopped.
    """

    def __init__(self, fifo: Path, delay_s: float = 0.0) -> None:
        self.fifo = fifo
        self.delay_s = delay_s
        self.data = bytearray()
        self.plays = 0
        self.busy = False
        self.closing = False
        self.changed = time.monotonic()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self.closing:
            with open(self.fifo, "rb") as fh:  # blocks until a player opens the device
                self.busy = True
                while chunk := fh.read(4096):
                    self.data += chunk
                    self.changed = time.monotonic()
                    if self.delay_s:
                        time.sleep(self.delay_s)
                self.plays += 1
                self.busy = False
                self.changed = time.monotonic()

    def read(self, settle_s: float = 0.15) -> bytes:
        """Everything played so far, once nothing has arrived for ``settle_s``."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
            self.busy or time.monotonic() - self.changed < settle_s
        ):
            time.sleep(0.02)
        return bytes(self.data)

    @property
    def received(self) -> int:
        return len(self.data)

    def close(self) -> None:
        self.closing = True
        if not self.busy:
            with contextlib.suppress(OSError):
                fd = os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)  # wake the reader's open()
                os.close(fd)
        self.thread.join(5)


def wav_frames(path: Path) -> bytes:
    with wave.open(str(path), "rb") as w:
        return w.readframes(w.getnframes())


def _file_pcm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delay_s: float) -> Iterator[Capture]:
    if shutil.which("aplay") is None:
        pytest.fail("alsa-utils is not installed (scripts/setup installs it)")
    fifo = tmp_path / "played.raw"
    os.mkfifo(fifo)
    conf = tmp_path / "asoundrc"
    conf.write_text(
        "pcm.!default {\n"
        "  type file\n"
        "  slave.pcm { type null }\n"
        f'  file "{fifo}"\n'
        '  format "raw"\n'
        "}\n"
    )
    monkeypatch.setenv("ALSA_CONFIG_PATH", str(conf))
    cap = Capture(fifo, delay_s)
    try:
        yield cap
    finally:
        cap.close()


@pytest.fixture
def alsa_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    """The default PCM records every byte played (as fast as it comes)."""
    yield from _file_pcm(tmp_path, monkeypatch, 0.0)


@pytest.fixture
def alsa_paced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    """Like ``alsa_capture``, drained at about 18x real time for 22.05 kHz mono."""
    yield from _file_pcm(tmp_path, monkeypatch, 0.005)


@pytest.fixture
def alsa_no_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "asoundrc-none"
    conf.write_text("pcm.!default { type hw card 27 }\nctl.!default { type hw card 27 }\n")
    monkeypatch.setenv("ALSA_CONFIG_PATH", str(conf))


@pytest.fixture
def notification_bus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[NotificationBus]:
    """A private D-Bus session (dbus-run-session) with a mock notification server."""
    for tool in ("dbus-run-session", "dbus-daemon"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing (scripts/setup --test installs dbus)")
    folder = tmp_path / "bus"
    folder.mkdir()
    bus = NotificationBus(folder).start()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", bus.address)
    try:
        yield bus
    finally:
        bus.stop()
