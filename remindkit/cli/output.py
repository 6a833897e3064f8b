"""How reminders and fires are printed for a person: one line each, control
characters made visible, times in UTC with a countdown."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ..models import Occurrence, Reminder

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: object) -> str:
    """``text`` on one line with control characters escaped (``\\n``, ``\\x1b``): reminder
    text and echoed arguments cannot move the cursor, clear the screen or fake a line."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group(0))[1:-1], str(text))


def when(rem: Reminder, now: datetime) -> str:
    from ..clock import format_utc
    from ..schedules import format_countdown

    if rem.next_fire_at is None:
        return "-"
    left = (rem.next_fire_at - now).total_seconds()
    rel = f"in {format_countdown(left)}" if left >= 0 else f"{format_countdown(-left)} ago"
    return f"{format_utc(rem.next_fire_at)} ({rel})"


def table(out: TextIO, rems: Sequence[Reminder], now: datetime) -> None:
    if not rems:
        out.write("no reminders\n")
        return
    rows = [("ID", "STATE", "NEXT", "SCHEDULE", "SESSION", "LABEL", "TEXT")]
    for r in rems:
        text = r.text if len(r.text) <= 40 else r.text[:39] + "…"
        rows.append((r.id, r.state, when(r, now) if r.state == "active" else "-", r.schedule.describe(),
                     printable(r.session or "-"), printable(r.label or "-"), printable(text.replace("\n", " "))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1] + "\n")


def history(out: TextIO, hist: Sequence[Occurrence]) -> None:
    from ..clock import format_utc

    if not hist:
        out.write("no fires yet\n")
        return
    for o in hist:
        late = "" if o.late_ms is None else f" late {o.late_ms}ms"
        missed = f" missed {o.missed}" if o.missed else ""
        err = f" ({printable(o.error)})" if o.error and o.state != "delivered" else ""
        out.write(f"{format_utc(o.due_at)}  {o.reminder_id}  {o.state}{late}{missed}{err}\n")
