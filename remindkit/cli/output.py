"""How reminders and fires are printed for a person: one line each, control
characters made visible, times in UTC with a countdown."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TextIO

from .inert import one_line

if TYPE_CHECKING:
    from ..audit import Event
    from ..models import Occurrence, Reminder


def printable(text: object) -> str:
    """``text`` on one line with control characters escaped (``\\n``, ``\\x1b``): reminder
    text and echoed arguments cannot move the cursor, clear the screen or fake a line."""
    return one_line(text)


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
        state: str = r.state
        nxt = when(r, now) if r.state == "active" else "-"
        if r.delivery is not None:  # fired, waiting for its session: still cancellable
            state, nxt = "waiting", f"({r.delivery.wait_for or 'session'})"
        if r.last_error:
            text = f"! {r.last_error[:60]} | {text}"
        rows.append(
            (
                printable(r.id),
                printable(state),
                nxt,
                printable(r.schedule.describe()),
                printable(r.session or "-"),
                printable(r.label or "-"),
                printable(text.replace("\n", " ")),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        out.write(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
            + "  "
            + row[-1]
            + "\n"
        )


def history(out: TextIO, hist: Sequence[Occurrence]) -> None:
    from ..clock import format_utc

    if not hist:
        out.write("no fires yet\n")
        return
    for o in hist:
        late = "" if o.late_ms is None else f" late {o.late_ms}ms"
        if o.wait_ms is not None:
            late += f" waited {o.wait_ms}ms"
        if o.turn_ms is not None:
            late += f" turn {o.turn_ms}ms"
        missed = f" missed {o.missed}" if o.missed else ""
        if o.alert is not None:  # the alarm and announcement: done, muted, failed, ...
            missed += f" alert {o.alert}"
        err = f" ({printable(o.error)})" if o.error and o.state != "delivered" else ""
        out.write(f"{format_utc(o.due_at)}  {o.reminder_id}  {o.state}{late}{missed}{err}\n")


def write_events(
    out: TextIO, events: Sequence[Event], printable: Callable[[object], str] = printable
) -> None:
    if not events:
        out.write("no events\n")
        return
    from ..clock import format_utc

    for e in events:
        detail = " ".join(f"{k}={_value(v)}" for k, v in e.detail.items())
        out.write(
            printable(
                f"{e.id:>6}  {format_utc(e.at)}  {e.kind:<9}  {e.surface:<8}  "
                f"{e.reminder_id or '-'}  {e.session or '-'}  {detail}".rstrip()
            )
            + "\n"
        )


def _value(v: object) -> str:
    if isinstance(v, str):
        return v if v and " " not in v else json.dumps(v, ensure_ascii=False)
    return json.dumps(v, ensure_ascii=False)
