"""Mute and quiet hours: when alarms and speech stay silent.

Both live in the store's flags, so every process sharing the store (the tray,
``remindkit serve``, a notebook kernel, the CLI) sees the same switch:

=====================  ===============================  ==========================
flag                   value                            environment default
=====================  ===============================  ==========================
``alerts.muted``       ``1`` or ``0``                   ``REMINDKIT_MUTE``
``alerts.quiet``       ``22:00-07:00`` or empty (off)   ``REMINDKIT_QUIET_HOURS``
=====================  ===============================  ==========================

While muted or inside quiet hours, no sound plays and nothing is spoken;
desktop notifications are still shown. :class:`QuietHours` is pure: it is given
the local time and says whether it falls inside the window (a window whose end
is before its start runs over midnight).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime, time
from typing import TYPE_CHECKING

from ..errors import InvalidInput
from ..schedules.zones import get_zone

if TYPE_CHECKING:
    from ..store.roles import FlagStore

MUTED = "alerts.muted"
QUIET = "alerts.quiet"
_HHMM = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*$")


@dataclass(frozen=True)
class QuietHours:
    """A daily window of local wall time, ``start`` inclusive, ``end`` exclusive."""

    start: time
    end: time

    @classmethod
    def parse(cls, text: str | None) -> QuietHours | None:
        """``"22:00-07:00"`` -> a window; ``""``, ``"off"`` or None -> no window."""
        if text is None or text.strip().lower() in ("", "off", "none", "0"):
            return None
        m = _HHMM.match(text)
        if m is None:
            raise InvalidInput(
                f"quiet hours {text!r} are not HH:MM-HH:MM (e.g. 22:00-07:00) or off",
                code="invalid_quiet_hours",
            )
        h1, m1, h2, m2 = (int(g) for g in m.groups())
        if h1 > 23 or h2 > 23 or m1 > 59 or m2 > 59:
            raise InvalidInput(
                f"quiet hours {text!r} name a time that does not exist", code="invalid_quiet_hours"
            )
        if (h1, m1) == (h2, m2):
            raise InvalidInput(
                "quiet hours need an end different from their start", code="invalid_quiet_hours"
            )
        return cls(time(h1, m1), time(h2, m2))

    def contains(self, local: time) -> bool:
        if self.start < self.end:
            return self.start <= local < self.end
        return local >= self.start or local < self.end  # over midnight

    def __str__(self) -> str:
        return f"{self.start:%H:%M}-{self.end:%H:%M}"


@dataclass(frozen=True)
class Silence:
    """Whether alerts are silent now, and why (``muted`` / ``quiet hours 22:00-07:00``)."""

    silent: bool
    reason: str | None = None


def silence_at(now: datetime, *, muted: bool, quiet: QuietHours | None, tz: str | None) -> Silence:
    """Pure: are sound and speech off at ``now`` (aware) in zone ``tz``?"""
    if muted:
        return Silence(True, "muted")
    if quiet is not None:
        local = now.astimezone(get_zone(tz)) if tz else now.astimezone()
        if quiet.contains(local.time()):
            return Silence(True, f"quiet hours {quiet}")
    return Silence(False)


class Switches:
    """Reads and writes mute and quiet hours in a store's flags (``store.coordination``),
    or only the environment."""

    def __init__(
        self, flags: FlagStore | None = None, *, env: dict[str, str] | None = None
    ) -> None:
        self.flags = flags
        self.env = dict(os.environ if env is None else env)

    def _flag(self, name: str) -> str | None:
        if self.flags is None:
            return None
        return self.flags.get_flag(name)

    @property
    def muted(self) -> bool:
        value = self._flag(MUTED)
        if value is None:
            value = self.env.get("REMINDKIT_MUTE", "0")
        return value.strip().lower() in ("1", "true", "yes", "on")

    @property
    def quiet_hours(self) -> QuietHours | None:
        value = self._flag(QUIET)
        if value is None:
            value = self.env.get("REMINDKIT_QUIET_HOURS")
        try:
            return QuietHours.parse(value)
        except InvalidInput:
            return None  # a bad value in the environment must not stop the alarm path

    def set_muted(self, muted: bool, *, now_us: int) -> None:
        self._need_store().set_flag(MUTED, "1" if muted else "0", now_us=now_us)

    def set_quiet_hours(self, quiet: QuietHours | None, *, now_us: int) -> None:
        self._need_store().set_flag(QUIET, "" if quiet is None else str(quiet), now_us=now_us)

    def silence(self, now: datetime, *, tz: str | None = None) -> Silence:
        return silence_at(now, muted=self.muted, quiet=self.quiet_hours, tz=tz)

    def _need_store(self) -> FlagStore:
        if self.flags is None:
            raise InvalidInput(
                "mute and quiet hours are kept in the store; open one first",
                code="invalid_argument",
            )
        return self.flags
