"""Alerts in the browser: the kernel engine's alerter.

When no tray holds the alerter lease, the engine in the kernel is the one that
alerts. Its :class:`BrowserAlerter` hands each
alert to the panels shown in this kernel; their browser side shows a banner,
plays the alarm through an ``<audio>`` element and speaks ``announce`` with the
speech synthesis API. While the tray holds the lease the engine leaves
alerting reminders to it and this alerter is never called.

The alarm is ``alarm.wav`` from remindkit's assets when it is there (packaged
as ``remindkit/assets/`` or, in a source checkout, ``assets/``); otherwise a
short two-tone beep generated here (:func:`beep_wav`), so a notebook always has
a sound to play.
"""

from __future__ import annotations

import base64
import functools
import logging
import math
import struct
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..clock import format_utc
from ..models import AlertState, Fire

log = logging.getLogger(__name__)
MAX_ASSET_BYTES = 2_000_000  # larger files are not inlined into the page


class AlertTarget(Protocol):
    def show_alert(self, payload: dict[str, Any]) -> None: ...


class BrowserAlerter:
    """Sends each alert to the panels of this kernel (the browser plays it).

    ``alert`` returns ``done`` once at least one panel took it, ``muted`` when no
    panel is shown (there is no page to play in), ``failed`` when every panel
    refused. It never raises and never waits for the browser (a reply from the
    page may reach the kernel only once a running cell ends)."""

    def __init__(self) -> None:
        self._targets: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.sent: list[str] = []  # occurrence keys handed to a page (for tests and status)
        self.on_change: Callable[[], None] | None = None  # called when ready() may have changed

    def add(self, target: AlertTarget) -> None:
        with self._lock:
            first = not self._targets
            self._targets.add(target)
        if first:
            self._changed()

    def discard(self, target: AlertTarget) -> None:
        with self._lock:
            had = len(self._targets) > 0
            self._targets.discard(target)
            last = had and not self._targets
        if last:
            self._changed()

    def attach(self, engine: Any, api: Any = None) -> BrowserAlerter:
        """Tell ``engine`` when a panel is shown or gone (it takes or leaves the
        alerter lease then; :meth:`remindkit.wiring.Graph.engine` attaches it so)."""
        self.on_change = engine.alerter_changed
        return self

    def ready(self) -> bool:
        """A panel is shown to play alerts in. Without one the engine leaves the
        alerter lease (and alerting reminders) to an engine that can sound them."""
        return self.targets > 0

    def _changed(self) -> None:
        if self.on_change is not None:
            try:
                self.on_change()
            except Exception:
                log.exception("telling the engine that the panels changed failed")

    @property
    def targets(self) -> int:
        with self._lock:
            return len(self._targets)

    def alert(self, fire: Fire) -> AlertState:
        with self._lock:
            targets = list(self._targets)
        if not targets:
            log.info(
                "alert for %s: no remindkit panel is shown in this kernel, nothing to play it",
                fire.key,
            )
            return AlertState.MUTED
        payload = alert_payload(fire)
        took = 0
        for target in targets:
            try:
                target.show_alert(payload)
                took += 1
            except Exception:
                log.exception("a panel could not show the alert for %s", fire.key)
        if took:
            self.sent.append(fire.key)
            return AlertState.DONE
        return AlertState.FAILED


def alert_payload(fire: Fire) -> dict[str, Any]:
    """The custom message a panel sends to its browser side."""
    return {
        "type": "alert",
        "key": fire.key,
        "id": fire.reminder_id,
        "label": fire.label or "",
        "text": fire.text,
        "alarm": bool(fire.alarm),
        "announce": fire.announce or "",
        "due": format_utc(fire.due_at),
        "urgency": fire.urgency,
    }


# -- the alarm sound -------------------------------------------------------------------


def alarm_asset(roots: Sequence[Path] | None = None) -> Path | None:
    """remindkit's ``alarm.wav``, where it is installed, or None."""
    if roots is None:
        package = Path(__file__).resolve().parents[1]
        roots = (package / "assets", package.parent / "assets")
    for root in roots:
        path = root / "alarm.wav"
        if path.is_file() and 0 < path.stat().st_size <= MAX_ASSET_BYTES:
            return path
    return None


def alarm_data_uri(roots: Sequence[Path] | None = None) -> str:
    """The alarm as a ``data:audio/wav`` URI for the page's ``<audio>`` element:
    the asset when there is one, else a generated beep."""
    path = alarm_asset(roots)
    data = path.read_bytes() if path is not None else beep_wav()
    return "data:audio/wav;base64," + base64.b64encode(data).decode("ascii")


@functools.lru_cache(maxsize=1)
def default_alarm_uri() -> str:
    """:func:`alarm_data_uri` of the installed assets, made once per kernel."""
    return alarm_data_uri()


def beep_wav(
    *,
    rate: int = 8_000,
    tones: Sequence[tuple[float, float]] = (
        (880.0, 0.16),
        (0.0, 0.06),
        (1175.0, 0.16),
        (0.0, 0.06),
        (880.0, 0.16),
        (0.0, 0.06),
        (1175.0, 0.22),
    ),
    volume: float = 0.6,
) -> bytes:
    """A small PCM WAV (8-bit mono): ``tones`` are (Hz, seconds), 0 Hz is silence.
    Each tone fades in and out over 5 ms so that it does not click."""
    samples = bytearray()
    fade = max(1, int(rate * 0.005))
    for freq, seconds in tones:
        n = int(rate * seconds)
        for i in range(n):
            if freq <= 0:
                samples.append(128)
                continue
            env = min(1.0, i / fade, (n - 1 - i) / fade)
            value = volume * env * math.sin(2 * math.pi * freq * i / rate)
            samples.append(max(0, min(255, 128 + int(round(127 * value)))))
    header = b"RIFF" + struct.pack("<I", 36 + len(samples)) + b"WAVE"
    fmt = b"fmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate, 1, 8)
    return header + fmt + b"data" + struct.pack("<I", len(samples)) + bytes(samples)


__all__ = [
    "AlertTarget",
    "BrowserAlerter",
    "alarm_asset",
    "alarm_data_uri",
    "alert_payload",
    "beep_wav",
    "default_alarm_uri",
]
