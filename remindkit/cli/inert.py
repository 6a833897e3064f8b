"""Text from the store or a model, rendered inert for a terminal: control
characters (ESC, BEL, CR, C1 codes, line separators) are shown escaped, so a
reminder, a session id or a model's reply cannot move the cursor, clear the
screen, retitle the terminal or fake an output line."""

from __future__ import annotations

import re

_ONE_LINE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # newline and tab stay


def _escaped(m: re.Match[str]) -> str:
    return repr(m.group(0))[1:-1]


def one_line(text: object) -> str:
    """``text`` on one line (``\\n`` shown as ``\\\\n``)."""
    return _ONE_LINE.sub(_escaped, str(text))


def lines(text: object) -> str:
    """``text`` with its line breaks and tabs, every other control character escaped."""
    return _KEEP_LINES.sub(_escaped, str(text))


__all__ = ["lines", "one_line"]
