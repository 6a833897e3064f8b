"""``remindkit watch``: a live full-screen list of reminders (countdowns ticking, paused
ones marked) and the last fires with their outcome, drawn with Rich.

It reads the store every second, and at once when another process signals a change
(the store's wake-up hints, waited for with :class:`remindkit.wakeup.Waiter`). Ctrl-C leaves the alternate screen and ends with the
terminal as it was. Rich is imported here only (``pip install remindkit[watch]``).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from typing import Any

from ..errors import InvalidInput
from ..wakeup import Waiter
from .context import Context
from .output import printable
from .scope import scope

REFRESH_S = 1.0
LAST_FIRES = 8


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    w = sub.add_parser(
        "watch",
        parents=[common],
        help="a live full-screen list: countdowns, paused, last fires (Ctrl-C ends)",
    )
    w.add_argument("--session", help="this session's reminders only")
    w.add_argument("--once", action="store_true", help="draw one frame and end (no full screen)")
    w.set_defaults(func=watch)


def snapshot(cx: Context, within: Any) -> dict[str, Any]:
    api = cx.api
    rems = api.list(session=within, states=["active", "paused"], order="next")
    fires = api.history(None, session=None if within is Any else within, limit=LAST_FIRES)
    return {"now": api.clock.now(), "paused_all": api.paused_all, "reminders": rems, "fires": fires}


def render(snap: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from ..clock import format_utc
    from ..schedules import format_countdown

    now: datetime = snap["now"]
    title = f"remindkit · {len(snap['reminders'])} reminder(s) · {format_utc(now)}"
    if snap["paused_all"]:
        title += " · ⏸ everything paused"
    rems = Table(title=title, expand=True, title_justify="left")
    for col in ("IN", "STATE", "LABEL", "SESSION", "SCHEDULE", "TEXT"):
        rems.add_column(col, no_wrap=col != "TEXT", overflow="ellipsis")
    for r in snap["reminders"]:
        if r.state == "paused" or snap["paused_all"]:
            left = Text("⏸ paused", style="yellow")
        elif r.next_fire_at is None:
            left = Text("-")
        else:
            secs = (r.next_fire_at - now).total_seconds()
            left = Text(
                format_countdown(max(0.0, secs)), style="bold green" if secs > 60 else "bold red"
            )
        rems.add_row(
            left,
            r.state,
            Text(printable(r.label or "-")),
            Text(printable(r.session or "-")),
            Text(r.schedule.describe()),
            Text(printable(r.text)),
        )
    if not snap["reminders"]:
        rems.add_row("-", "", "", "", "", "no reminders")
    fires = Table(title="last fires", expand=True, title_justify="left")
    for col in ("DUE", "REMINDER", "OUTCOME", "LATE"):
        fires.add_column(col, no_wrap=True)
    styles = {
        "delivered": "green",
        "alerted": "cyan",
        "failed": "bold red",
        "waiting": "yellow",
        "skipped": "dim",
    }
    for o in snap["fires"]:
        fires.add_row(
            format_utc(o.due_at),
            o.reminder_id,
            Text(o.state, style=styles.get(o.state, "")),
            "-" if o.late_ms is None else f"{o.late_ms}ms",
        )
    if not snap["fires"]:
        fires.add_row("-", "", "no fires yet", "")
    return Group(rems, fires, Text("Ctrl-C to leave", style="dim"))


def watch(cx: Context) -> int:
    within = scope(cx.args)
    if cx.args.json:  # one JSON line per refresh, for scripts
        return _watch_json(cx, within)
    try:
        from rich.console import Console
        from rich.live import Live
    except ImportError:
        raise InvalidInput(
            "remindkit watch needs Rich: pip install 'remindkit[watch]'", code="invalid_argument"
        ) from None
    console = Console(file=cx.out)
    if cx.args.once:
        console.print(render(snapshot(cx, within)))
        return 0
    waiter = Waiter()
    try:
        with (
            waiter.listening(cx.api.store.wake),
            Live(
                render(snapshot(cx, within)), console=console, screen=True, auto_refresh=False
            ) as live,
        ):
            while True:
                waiter.wait(REFRESH_S)
                live.update(render(snapshot(cx, within)), refresh=True)
    except KeyboardInterrupt:
        return 0
    finally:
        waiter.close()


def _watch_json(cx: Context, within: Any) -> int:
    from ..clock import format_utc

    waiter = Waiter()
    try:
        with waiter.listening(cx.api.store.wake):
            while True:
                snap = snapshot(cx, within)
                cx.json(
                    {
                        "now": format_utc(snap["now"]),
                        "paused_all": snap["paused_all"],
                        "reminders": [r.to_dict() for r in snap["reminders"]],
                        "fires": [o.to_dict() for o in snap["fires"]],
                    }
                )
                cx.out.flush()
                if cx.args.once:
                    return 0
                waiter.wait(REFRESH_S)  # a second, or less when another process wrote
    except KeyboardInterrupt:
        return 0
    finally:
        waiter.close()
