"""``remindkit log [ID] [--session S] [--json] [--limit N]``: the audit trail.

One line per event, oldest first: when, what, by which surface, in which
session, and its detail. Everything that came from a user or an agent (ids,
labels, errors) is printed inert, as every other command prints reminder text.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..audit import READ_MAX
from .output import write_events

if TYPE_CHECKING:
    from ..reminders import Reminders


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    lg = sub.add_parser(
        "log", parents=[common], help="the audit trail: every change and outcome, oldest first"
    )
    lg.add_argument("id", nargs="?", help="only this reminder's events")
    lg.add_argument("--session", help="only this session's events")
    lg.add_argument(
        "--limit", type=int, default=50, help=f"the newest N events (1-{READ_MAX}, default 50)"
    )
    lg.add_argument(
        "--after",
        type=int,
        metavar="EVENT_ID",
        help="the first N events after this event id instead",
    )
    lg.set_defaults(func=run_command)


def run_command(cx: Any) -> int:
    from .output import printable
    from .reminders import get_in
    from .scope import scope

    return run(
        cx.args,
        cx.api,
        cx.out,
        within=scope(cx.args),
        get_in=lambda _api, rid, within: get_in(cx, rid, within),
        printable=printable,
    )


def run(
    args: argparse.Namespace,
    api: Reminders,
    out: TextIO,
    *,
    within: Any,
    get_in: Any,
    printable: Callable[[object], str],
) -> int:
    """``within``: the session the command is confined to (``--session`` or
    ``REMINDKIT_SESSION``), or ``Any``; ``get_in`` refuses a reminder outside it."""
    if args.id is not None:
        get_in(api, args.id, within)
    events = api.events(
        args.id, session=None if within is Any else within, limit=args.limit, after=args.after
    )
    if args.json:
        out.write(json.dumps([e.to_dict() for e in events], ensure_ascii=False) + "\n")
    else:
        write_events(out, events, printable)
    return 0
