"""``remind``, ``ls``, ``show``, ``pause``, ``resume``, ``rm``, ``snooze``, ``history``:
flat commands, and the same commands under ``remindkit reminders …``."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import CliError
from ..models import ReminderSpec, Source
from .context import Context
from .output import history as print_history
from .output import printable, table, when
from .scope import scope, session_or_none


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    _add_commands(sub, common, flat=True)
    group = sub.add_parser(
        "reminders",
        parents=[common],
        help="the reminder commands as a group: "
        "reminders add|ls|show|pause|resume|rm|snooze|history",
    )
    inner = group.add_subparsers(dest="reminders_command", metavar="ACTION")
    _add_commands(inner, common, flat=False)
    group.set_defaults(func=ls, session=None, all=False)  # `remindkit reminders` alone lists them


def _add_commands(sub: Any, common: argparse.ArgumentParser, *, flat: bool) -> None:
    r = sub.add_parser(
        "remind" if flat else "add",
        parents=[common],
        help="set a reminder",
        aliases=["add"] if flat else ["remind"],
    )
    r.add_argument("text", help="what to remind about (handed back to the session when it fires)")
    r.add_argument("--session", help="the session it fires into (default: REMINDKIT_SESSION)")
    r.add_argument("--label", help="name; a new reminder with a live label replaces the old one")
    w = r.add_argument_group("when")
    w.add_argument("--in", dest="in_", metavar="DURATION", help="30s, 5m, 2h, 2d, 1h30m or seconds")
    w.add_argument(
        "--at", metavar="TIME", help="RFC 3339 with offset, local date-time with --tz, or HH:MM"
    )
    w.add_argument(
        "--every",
        metavar="DURATION",
        help="repeat on this fixed interval (anchored to the first fire)",
    )
    w.add_argument("--cron", metavar="EXPR", help="5 fields, or 6 with seconds first")
    w.add_argument(
        "--tz",
        "--timezone",
        dest="tz",
        help="IANA time zone (default: REMINDKIT_TZ or the local zone)",
    )
    w.add_argument(
        "--repeat", metavar="N", help="number of fires, or forever / -1 (repeating kinds)"
    )
    w.add_argument(
        "--until", metavar="TIME", help="last possible fire, inclusive (repeating kinds)"
    )
    r.add_argument("--alarm", action="store_true", help="play the alarm sound when it fires")
    r.add_argument("--announce", metavar="TEXT", help="speak this when it fires")
    r.add_argument("--urgency", default="normal", choices=["low", "normal", "critical"])
    r.add_argument(
        "--misfire",
        default="latest",
        choices=["latest", "skip", "all"],
        help="occurrences missed while nothing ran: fire the latest once (default), skip, or all (capped)",
    )
    r.add_argument(
        "--on-busy",
        default="wait",
        choices=["wait", "rebase", "skip"],
        help="when the session is busy at the due time",
    )
    r.set_defaults(func=remind)

    ls_ = sub.add_parser("ls", parents=[common], help="list reminders", aliases=["list"])
    ls_.add_argument("--session")
    ls_.add_argument("--all", action="store_true", help="include done, cancelled and failed ones")
    ls_.set_defaults(func=ls)

    show_ = sub.add_parser("show", parents=[common], help="one reminder and its recent fires")
    show_.add_argument("id")
    show_.add_argument("--session", help="only if it belongs to this session")
    show_.set_defaults(func=show)

    for name, helptext in (
        ("pause", "pause reminders (or --all: everything, persisted; with a session: its own)"),
        ("resume", "resume reminders (or --all); the count starts again from now"),
    ):
        sp = sub.add_parser(name, parents=[common], help=helptext)
        sp.add_argument("ids", nargs="*", metavar="ID")
        sp.add_argument("--all", action="store_true")
        sp.add_argument(
            "--session", help="only this session's: ids must belong to it, --all means its own"
        )
        sp.set_defaults(func=pause_resume, pausing=name == "pause", verb=name)

    rm_ = sub.add_parser(
        "rm",
        parents=[common],
        help="cancel reminders (kept in history)",
        aliases=["stop", "delete", "cancel"],
    )
    rm_.add_argument("ids", nargs="*", metavar="ID")
    rm_.add_argument("--session")
    rm_.add_argument("--label")
    rm_.add_argument("--all", action="store_true", help="every live reminder of --session")
    rm_.set_defaults(func=rm)

    sn = sub.add_parser("snooze", parents=[common], help="fire a reminder again after a duration")
    sn.add_argument("id")
    sn.add_argument("duration")
    sn.add_argument("--session", help="only if it belongs to this session")
    sn.set_defaults(func=snooze)

    h = sub.add_parser("history", parents=[common], help="fires and their outcomes")
    h.add_argument("id", nargs="?")
    h.add_argument("--session")
    h.add_argument("--limit", type=int, default=50)
    h.set_defaults(func=history)


def reminder_spec(args: argparse.Namespace) -> ReminderSpec:
    """``remind TEXT --label --in/--at/--every/--cron --tz --repeat --until …`` as the
    request the reminders API takes (it checks every value)."""
    return ReminderSpec(
        args.text,
        session=session_or_none(args),
        label=args.label,
        in_=args.in_,
        at=args.at,
        every=args.every,
        cron=args.cron,
        tz=args.tz,
        repeat=args.repeat,
        until=args.until,
        alarm=args.alarm,
        announce=args.announce,
        urgency=args.urgency,
        misfire=args.misfire,
        on_busy=args.on_busy,
        source=Source.CLI,
    )


def remind(cx: Context) -> int:
    args, api = cx.args, cx.create_api
    created = api.add(reminder_spec(args))
    rem = created.reminder
    if args.json:
        data = rem.to_dict()
        data["replaced"] = list(created.replaced)
        data["armed"] = created.armed
        cx.json(data)
    else:
        cx.out.write(f"{rem.id}  next: {when(rem, api.clock.now())}  ({rem.schedule.describe()})\n")
        for old in created.replaced:
            cx.out.write(f"replaced {old} (same label)\n")
    if not created.armed:
        cx.err.write(f"warning: {not_armed_hint(args.db)}\n")
    return 0


def not_armed_hint(db: str | None) -> str:
    """What to say when no engine runs on the store: nothing will fire until one does
    (the store URL with its password hidden: this goes to a terminal, a log, a CI page)."""
    from ..statusfile import without_password

    where = "" if not db else f" --db {printable(without_password(db))}"
    return (
        f"no engine is running on this store, so nothing fires until one starts: run `remindkit serve{where}`, "
        f"or `remindkit service install{where}` to keep one running"
    )


def ls(cx: Context) -> int:
    args = cx.args
    within = scope(args)
    api = cx.read_api
    rems = api.list(session=within, all=args.all)
    if args.json:
        cx.json([r.to_dict() for r in rems])
    else:
        table(cx.out, rems, api.clock.now())
        if api.paused_all:
            cx.out.write("(everything is paused: `remindkit resume --all`)\n")
    return 0


def show(cx: Context) -> int:
    args = cx.args
    within = scope(args)
    rem = get_in(cx, args.id, within)
    hist = cx.api.history(rem.id, limit=20)
    events = cx.api.events(rem.id, limit=50)
    if args.json:
        data = rem.to_dict()
        data["history"] = [o.to_dict() for o in hist]
        data["events"] = [e.to_dict() for e in events]
        cx.json(data)
    else:
        from .output import write_events

        for key, value in rem.to_dict().items():
            cx.out.write(f"{key:16} {printable(value)}\n")
        print_history(cx.out, hist)
        cx.out.write("events:\n")
        write_events(cx.out, events, printable)
    return 0


def rm(cx: Context) -> int:
    args = cx.args
    within = scope(args)
    if args.ids and (args.label or args.all):
        raise CliError("give ids, or --label, or --all, not several", code="invalid_argument")
    api = cx.api
    if args.ids:
        done = api.cancel(args.ids, session=within)
    elif args.label:
        done = api.cancel_label(None if within is Any else within, args.label)
    elif args.all:
        if within is Any:
            raise CliError("rm --all needs --session", code="invalid_argument")
        done = api.cancel_session(within)
    else:
        raise CliError(
            "say what to cancel: ids, --session S --label L, or --session S --all",
            code="invalid_argument",
        )
    if args.json:
        cx.json([r.to_dict() for r in done])
    else:
        for r in done:
            cx.out.write(
                f"cancelled {r.id}" + (f" ({printable(r.label)})" if r.label else "") + "\n"
            )
        if not done:
            cx.out.write("nothing to cancel\n")
    return 0


def snooze(cx: Context) -> int:
    args = cx.args
    within = scope(args)
    api = cx.api
    rem = api.snooze(args.id, args.duration, session=within)
    if args.json:
        cx.json(rem.to_dict())
    else:
        cx.out.write(f"{rem.id} snoozed; next: {when(rem, api.clock.now())}\n")
    return 0


def history(cx: Context) -> int:
    args = cx.args
    within = scope(args)
    if args.id is not None and within is not Any:
        get_in(cx, args.id, within)
    hist = cx.api.history(args.id, session=None if within is Any else within, limit=args.limit)
    if args.json:
        cx.json([o.to_dict() for o in hist])
    else:
        print_history(cx.out, hist)
    return 0


def pause_resume(cx: Context) -> int:
    args = cx.args
    pausing = args.pausing
    if args.all and args.ids:
        raise CliError("give ids or --all, not both", code="invalid_argument")
    within = scope(args)
    api = cx.api
    ids = list(args.ids)
    if args.all and within is not Any:  # a session's own: its active (or paused) reminders
        ids = [r.id for r in api.list(session=within, states=["active" if pausing else "paused"])]
        if not ids:
            if args.json:
                cx.json([])
            else:
                cx.out.write(f"nothing to {args.verb}\n")
            return 0
    elif args.all:
        (api.pause_all if pausing else api.resume_all)()
        if args.json:
            cx.json({"paused_all": pausing})
        else:
            cx.out.write("paused everything (persisted)\n" if pausing else "resumed everything\n")
        return 0
    if not ids:
        raise CliError(
            f"say which reminders to {args.verb}: ids, or --all", code="invalid_argument"
        )
    rems = api.pause(ids, session=within) if pausing else api.resume(ids, session=within)
    if args.json:
        cx.json([r.to_dict() for r in rems])
    else:
        now = api.clock.now()
        for r in rems:
            extra = "" if pausing or r.next_fire_at is None else f"; next: {when(r, now)}"
            cx.out.write(f"{r.id} {r.state}{extra}\n")
    return 0


def get_in(cx: Context, reminder_id: str, within: Any) -> Any:
    """The reminder, if it belongs to ``within`` (another session's is not found)."""
    from ..checks import check_session_id
    from ..errors import NotFound

    rem = cx.api.get(reminder_id)
    if within is not Any and rem.session != check_session_id(within):
        raise NotFound.reminder(reminder_id)
    return rem
