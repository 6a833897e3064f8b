"""Durations: ``30s``, ``5m``, ``2h``, ``2d``, ``1w``, ``1y`` (365 days), ``1h30m`` or whole
seconds (``90``)."""

from __future__ import annotations

from ..errors import InvalidSchedule

_UNITS = {"y": 31_536_000, "w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_ORDER = "ywdhms"


def parse_duration(text: str | int) -> int:
    """Return the duration in whole seconds (at least 1).

    >>> parse_duration("1h30m")
    5400
    """
    if isinstance(text, bool):
        raise _bad(text)
    if isinstance(text, int):
        if text < 1:
            raise _bad(text)
        return text
    s = str(text).strip().lower()
    if not s or len(s) > 40 or not s.isascii():  # only 0-9 are digits ("¹".isdigit() is true)
        raise _bad(text)
    if s.isdigit():
        value = int(s)
        if value < 1:
            raise _bad(text)
        return value
    total = 0
    number = ""
    last_rank = -1
    for ch in s:
        if ch.isdigit():
            number += ch
        elif ch in _UNITS:
            rank = _ORDER.index(ch)
            if not number or rank <= last_rank:
                raise _bad(text)
            total += int(number) * _UNITS[ch]
            number = ""
            last_rank = rank
        else:
            raise _bad(text)
    if number or total < 1:
        raise _bad(text)
    return total


def format_duration(seconds: int | float) -> str:
    """Compact form used in messages and listings: ``1h30m``, ``45s``, ``2d``."""
    seconds = int(round(seconds))
    if seconds <= 0:
        return "0s"
    out = []
    for unit in "dhms":
        size = _UNITS[unit]
        if seconds >= size:
            out.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(out)


def format_countdown(seconds: float) -> str:
    """``m:ss`` (or ``h:mm:ss``) as in a status bar: ``[CB:2 2:14]``."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _bad(text: object) -> InvalidSchedule:
    return InvalidSchedule(
        f"{text!r} is not a duration; use whole seconds or units like 30s, 5m, 2h, 2d, 1w, 1y, 1h30m",
        code="invalid_duration",
    )
