"""Alert settings: the alarm file, the voice and rate of speech, timeouts.

========================  ==============================================  =================
environment               meaning                                         default
========================  ==============================================  =================
REMINDKIT_ALARM           WAV file played as the alarm                    bundled chime
REMINDKIT_AUDIO           players to try, in order (comma-separated)      platform list
REMINDKIT_VOICE           voice for ``announce`` (id, name or language)   the system's
REMINDKIT_SPEECH_RATE     words per minute                                the system's
REMINDKIT_NOTIFY          ``0`` turns desktop notifications off           on
REMINDKIT_SNOOZE          the notification's Snooze duration              10m
========================  ==============================================  =================

Voice and rate can also be set for every process in the store
(``remindkit alerts voice NAME`` / ``rate N``: flags ``alerts.voice`` and
``alerts.rate``), which wins over the environment. Mute and quiet hours are in
:mod:`remindkit.alerts.quiet`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

VOICE = "alerts.voice"
RATE = "alerts.rate"
ASSETS = Path(__file__).resolve().parent.parent / "assets"
ALARM_WAV = ASSETS / "alarm.wav"


def default_players(platform: str = sys.platform) -> tuple[str, ...]:
    """simpleaudio first, then the system players of the platform."""
    if platform.startswith("win"):
        return ("simpleaudio", "winsound")
    if platform == "darwin":
        return ("simpleaudio", "afplay")
    return ("simpleaudio", "paplay", "pw-play", "aplay")


@dataclass(frozen=True)
class AlertConfig:
    alarm_path: Path = ALARM_WAV
    players: tuple[str, ...] = default_players()
    voice: str | None = None
    rate: int | None = None
    notify: bool = True
    snooze: str = "10m"
    alarm_timeout_s: float = 15.0
    speech_timeout_s: float = 20.0
    notify_timeout_s: float = 3.0

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> AlertConfig:
        env = dict(os.environ if env is None else env)
        cfg = cls()
        if env.get("REMINDKIT_ALARM"):
            cfg = replace(cfg, alarm_path=Path(env["REMINDKIT_ALARM"]).expanduser())
        if env.get("REMINDKIT_AUDIO"):
            cfg = replace(
                cfg,
                players=tuple(p.strip() for p in env["REMINDKIT_AUDIO"].split(",") if p.strip()),
            )
        if env.get("REMINDKIT_VOICE"):
            cfg = replace(cfg, voice=env["REMINDKIT_VOICE"])
        if env.get("REMINDKIT_SPEECH_RATE"):
            cfg = replace(cfg, rate=_rate(env["REMINDKIT_SPEECH_RATE"]))
        if env.get("REMINDKIT_NOTIFY", "1").strip().lower() in ("0", "off", "no", "false"):
            cfg = replace(cfg, notify=False)
        if env.get("REMINDKIT_SNOOZE"):
            cfg = replace(cfg, snooze=env["REMINDKIT_SNOOZE"])
        return cfg

    def with_store(self, store: object | None) -> AlertConfig:
        """Voice and rate from the store's flags, where set, over the environment's."""
        if store is None:
            return self
        cfg = self
        voice = store.coordination.get_flag(VOICE)  # type: ignore[attr-defined]
        if voice:
            cfg = replace(cfg, voice=voice)
        rate = store.coordination.get_flag(RATE)  # type: ignore[attr-defined]
        if rate:
            cfg = replace(cfg, rate=_rate(rate, cfg.rate))
        return cfg


def _rate(text: str, default: int | None = None) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return default
    return value if 40 <= value <= 600 else default
