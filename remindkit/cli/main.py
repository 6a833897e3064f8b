"""The ``remindkit`` command.

Every refusal prints ``error: <code>: <message>`` on stderr and exits 1 (with
``--json``, ``{"error": {"code": ..., "message": ...}}`` on stdout), and
changes nothing. ``--db URL`` or ``REMINDKIT_DB`` picks the store; the session
defaults to ``REMINDKIT_SESSION`` (set for commands that remindkit runs).
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from ..audit import Surface
from ..clock import SystemClock, format_utc
from ..errors import InvalidInput, NotFound, RemindkitError
from ..models import Occurrence, Reminder
from ..reminders import Reminders, check_session_id
from ..schedules import format_countdown
from ..settings import Settings
from ..store import SqlStore, open_store
from . import alerts as alert_cmds
from . import api as api_cmds
from . import chat as chat_cmds
from . import log as log_cmds
from . import service as service_cmds
from . import sessions as session_cmds

_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def printable(text: object) -> str:
    """``text`` on one line with control characters escaped (``\\n``, ``\\x1b``): reminder
    text and echoed arguments cannot move the cursor, clear the screen or fake a line."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group(0))[1:-1], str(text))


class CliError(RemindkitError):
    code = "invalid_argument"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CliError(f"{message} (see {self.prog} --help)", code="invalid_argument")


def build_parser() -> argparse.ArgumentParser:
    # --db and --json may come before or after the command: the sub-commands take them
    # with a suppressed default, so they do not overwrite a value given before.
    common = _Parser(add_help=False)
    common.add_argument("--db", default=argparse.SUPPRESS,
                        help="SQLAlchemy URL of the store (default: REMINDKIT_DB or a SQLite file)")
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output")

    p = _Parser(prog="remindkit", description="Durable reminders for agent sessions.", parents=[common])
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    r = sub.add_parser("remind", parents=[common], help="set a reminder", aliases=["add"])
    r.add_argument("text", help="what to remind about (handed back to the session when it fires)")
    r.add_argument("--session", default=os.environ.get("REMINDKIT_SESSION"))
    r.add_argument("--label", help="name; a new reminder with a live label replaces the old one")
    when = r.add_argument_group("when")
    when.add_argument("--in", dest="in_", metavar="DURATION", help="30s, 5m, 2h, 2d, 1h30m or seconds")
    when.add_argument("--at", metavar="TIME", help="RFC 3339 with offset, local date-time with --tz, or HH:MM")
    when.add_argument("--every", metavar="DURATION", help="repeat on this fixed interval (anchored to the first fire)")
    when.add_argument("--cron", metavar="EXPR", help="5 fields, or 6 with seconds first")
    when.add_argument("--tz", help="IANA time zone (default: REMINDKIT_TZ or the local zone)")
    when.add_argument("--repeat", metavar="N", help="number of fires, or forever / -1 (repeating kinds)")
    when.add_argument("--until", metavar="TIME", help="last possible fire (repeating kinds)")
    r.add_argument("--alarm", action="store_true", help="play the alarm sound when it fires")
    r.add_argument("--announce", metavar="TEXT", help="speak this when it fires")
    r.add_argument("--urgency", default="normal", choices=["low", "normal", "critical"])
    r.add_argument("--misfire", default="latest", choices=["latest", "skip", "all"],
                   help="occurrences missed while nothing ran: fire the latest once (default), skip, or all (capped)")
    r.add_argument("--on-busy", default="wait", choices=["wait", "rebase", "skip"],
                   help="when the session is busy at the due time")

    ls = sub.add_parser("ls", parents=[common], help="list reminders", aliases=["list"])
    ls.add_argument("--session")
    ls.add_argument("--all", action="store_true", help="include done, cancelled and failed ones")

    show = sub.add_parser("show", parents=[common], help="one reminder and its recent fires")
    show.add_argument("id")
    show.add_argument("--session", help="only if it belongs to this session")

    for name, helptext in (("pause", "pause reminders (or --all: everything, persisted; with a session: its own)"),
                           ("resume", "resume reminders (or --all); the next fire is computed from now")):
        sp = sub.add_parser(name, parents=[common], help=helptext)
        sp.add_argument("ids", nargs="*", metavar="ID")
        sp.add_argument("--all", action="store_true")
        sp.add_argument("--session", help="only this session's: ids must belong to it, --all means its own")

    rm = sub.add_parser("rm", parents=[common], help="cancel reminders (kept in history)", aliases=["stop", "delete", "cancel"])
    rm.add_argument("ids", nargs="*", metavar="ID")
    rm.add_argument("--session")
    rm.add_argument("--label")
    rm.add_argument("--all", action="store_true", help="every live reminder of --session")

    sn = sub.add_parser("snooze", parents=[common], help="fire a reminder again after a duration")
    sn.add_argument("id")
    sn.add_argument("duration")
    sn.add_argument("--session", help="only if it belongs to this session")

    h = sub.add_parser("history", parents=[common], help="fires and their outcomes")
    h.add_argument("id", nargs="?")
    h.add_argument("--session")
    h.add_argument("--limit", type=int, default=50)

    sub.add_parser("export", parents=[common], help="write every reminder and session as JSON lines")
    im = sub.add_parser("import", parents=[common], help="read an export (one transaction)")
    im.add_argument("file", help="path, or - for stdin")
    im.add_argument("--replace", action="store_true", help="overwrite reminders whose id exists")

    sv = sub.add_parser("serve", parents=[common], help="run an engine until SIGINT/SIGTERM")
    sv.add_argument("--no-alerts", action="store_true", help="never play alarms or speech here")
    sv.add_argument("-v", "--verbose", action="store_true")

    stat = sub.add_parser("status", parents=[common], help="engines, alerter, pause state, counts")
    stat.add_argument("--session", help="the next reminder of this session only")

    tr = sub.add_parser("tray", parents=[common], help="the tray app (alarms, speech, menu); headless without a display")
    tr.add_argument("--headless", action="store_true", help="no icon: the engine and its alerts only")
    tr.add_argument("-v", "--verbose", action="store_true")

    log_cmds.add_parser(sub, common)
    service_cmds.add_parser(sub, common)
    session_cmds.add_parser(sub, common)
    chat_cmds.add_parsers(sub, common)
    alert_cmds.add_parser(sub, common)
    api_cmds.add_parsers(sub, common)
    return p


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args_list = list(sys.argv[1:] if argv is None else argv)
    want_json = "--json" in args_list
    store: SqlStore | None = None
    try:
        parser = build_parser()
        args = parser.parse_args(args_list)
        args.db = getattr(args, "db", None)
        args.json = getattr(args, "json", False)
        if args.command is None:
            parser.print_help(out)
            return 0
        if args.command == "demo":  # a store of its own unless --db is given
            return chat_cmds.run_demo_command(args, out)
        if args.command == "service":  # files and systemd; the store is only named
            return service_cmds.run(args, out)
        settings = Settings.from_env()
        store = open_store(args.db, settings=settings)
        api = Reminders(store, clock=SystemClock(), settings=settings, surface=Surface.CLI)
        return run_command(args, api, out, err)
    except RemindkitError as exc:
        _print_error(exc, want_json, out, err)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        if store is not None:
            store.close()


def _print_error(exc: RemindkitError, want_json: bool, out: TextIO, err: TextIO) -> None:
    if want_json:
        out.write(json.dumps({"error": {"code": exc.code, "message": exc.message}}) + "\n")
    else:  # one line, whatever the message quotes from the command line (a newline, an escape)
        err.write(f"error: {exc.code}: {printable(exc.message)}\n")


def run_command(args: argparse.Namespace, api: Reminders, out: TextIO, err: TextIO | None = None) -> int:
    cmd = args.command
    if cmd in ("remind", "add"):
        created = api.add(
            args.text, session=args.session, label=args.label, in_=args.in_, at=args.at, every=args.every,
            cron=args.cron, tz=args.tz, repeat=args.repeat, until=args.until, alarm=args.alarm,
            announce=args.announce, urgency=args.urgency, misfire=args.misfire, on_busy=args.on_busy,
            source="cli",
        )
        rem = created.reminder
        if args.json:
            data = rem.to_dict()
            data["replaced"] = list(created.replaced)
            data["armed"] = created.armed
            _json(out, data)
        else:
            out.write(f"{rem.id}  next: {_when(api, rem)}  ({rem.schedule.describe()})\n")
            for old in created.replaced:
                out.write(f"replaced {old} (same label)\n")
        if not created.armed:
            (err or sys.stderr).write(f"warning: {not_armed_hint(args.db)}\n")
        return 0
    if cmd in ("ls", "list"):
        rems = api.list(session=scope(args), all=args.all)
        if args.json:
            _json(out, [r.to_dict() for r in rems])
        else:
            _table(out, api, rems)
            if api.paused_all:
                out.write("(everything is paused: `remindkit resume --all`)\n")
        return 0
    if cmd == "show":
        rem = _get_in(api, args.id, scope(args))
        hist = api.history(rem.id, limit=20)
        events = api.events(rem.id, limit=50)
        if args.json:
            data = rem.to_dict()
            data["history"] = [o.to_dict() for o in hist]
            data["events"] = [e.to_dict() for e in events]
            _json(out, data)
        else:
            for key, value in rem.to_dict().items():
                out.write(f"{key:16} {printable(value)}\n")
            _history(out, hist)
            out.write("events:\n")
            log_cmds.write_events(out, events, printable)
        return 0
    if cmd in ("pause", "resume"):
        return _pause_resume(args, api, out)
    if cmd in ("rm", "stop", "delete", "cancel"):
        if args.ids and (args.label or args.all):
            raise CliError("give ids, or --label, or --all, not several", code="invalid_argument")
        if args.ids:
            done = api.cancel(args.ids, session=scope(args))
        elif args.label:
            done = api.cancel_label(None if scope(args) is Any else scope(args), args.label)
        elif args.all:
            if scope(args) is Any:
                raise CliError("rm --all needs --session", code="invalid_argument")
            done = api.cancel_session(scope(args))
        else:
            raise CliError("say what to cancel: ids, --session S --label L, or --session S --all", code="invalid_argument")
        if args.json:
            _json(out, [r.to_dict() for r in done])
        else:
            for r in done:
                out.write(f"cancelled {r.id}" + (f" ({r.label})" if r.label else "") + "\n")
            if not done:
                out.write("nothing to cancel\n")
        return 0
    if cmd == "snooze":
        rem = api.snooze(args.id, args.duration, session=scope(args))
        if args.json:
            _json(out, rem.to_dict())
        else:
            out.write(f"{rem.id} snoozed; next: {_when(api, rem)}\n")
        return 0
    if cmd == "history":
        within = scope(args)
        if args.id is not None and within is not Any:
            _get_in(api, args.id, within)
        hist = api.history(args.id, session=None if within is Any else within, limit=args.limit)
        if args.json:
            _json(out, [o.to_dict() for o in hist])
        else:
            _history(out, hist)
        return 0
    if cmd == "export":
        for line in api.export():
            out.write(line + "\n")
        return 0
    if cmd == "import":
        if args.file == "-":
            n = api.import_(sys.stdin, replace_existing=args.replace)
        else:
            try:
                with open(args.file, encoding="utf-8") as fh:
                    n = api.import_(fh, replace_existing=args.replace)
            except OSError as exc:
                raise InvalidInput(f"cannot read {args.file}: {exc.strerror}", code="invalid_import") from None
        if args.json:
            _json(out, {"imported": n})
        else:
            out.write(f"imported {n} reminders\n")
        return 0
    if cmd == "serve":
        return serve(api, out, no_alerts=args.no_alerts, verbose=args.verbose)
    if cmd == "status":
        return _status(api, out, args.json, scope(args), db=args.db)
    if cmd == "tray":
        from tray.app import run_tray

        return run_tray(api, out, headless=args.headless, verbose=args.verbose)
    if cmd == "log":
        return log_cmds.run(args, api, out, within=scope(args), get_in=_get_in, printable=printable)
    if cmd == "session":
        return session_cmds.run(args, api, out)
    if cmd == "chat":
        return chat_cmds.run_chat(args, api, out, sys.stdin)
    if cmd == "alerts":
        return alert_cmds.run(args, api, out)
    if cmd == "api":
        return api_cmds.run_api_command(args, api, out)
    if cmd == "token":
        return api_cmds.run_token(args, api, out)
    if cmd == "projects":
        return api_cmds.run_projects(args, api, out)
    raise CliError(f"unknown command {cmd!r}")


def scope(args: argparse.Namespace) -> Any:
    """The session a command is confined to: ``--session``, else ``REMINDKIT_SESSION``
    (set for the agent commands remindkit runs), else none (``Any``: every session)."""
    return getattr(args, "session", None) or os.environ.get("REMINDKIT_SESSION") or Any


def _get_in(api: Reminders, reminder_id: str, within: Any) -> Reminder:
    """The reminder, if it belongs to ``within`` (another session's is not found)."""
    rem = api.get(reminder_id)
    if within is not Any and rem.session != check_session_id(within):
        raise NotFound.reminder(reminder_id)
    return rem


def _pause_resume(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    pausing = args.command == "pause"
    if args.all and args.ids:
        raise CliError("give ids or --all, not both", code="invalid_argument")
    within = scope(args)
    if args.all and within is not Any:  # a session's own: its active (or paused) reminders
        args.ids = [r.id for r in api.list(session=within, states=["active" if pausing else "paused"])]
        if not args.ids:
            if args.json:
                _json(out, [])
            else:
                out.write(f"nothing to {args.command}\n")
            return 0
    elif args.all:
        (api.pause_all if pausing else api.resume_all)()
        if args.json:
            _json(out, {"paused_all": pausing})
        else:
            out.write("paused everything (persisted)\n" if pausing else "resumed everything\n")
        return 0
    if not args.ids:
        raise CliError(f"say which reminders to {args.command}: ids, or --all", code="invalid_argument")
    rems = api.pause(args.ids, session=within) if pausing else api.resume(args.ids, session=within)
    if args.json:
        _json(out, [r.to_dict() for r in rems])
    else:
        for r in rems:
            extra = "" if pausing or r.next_fire_at is None else f"; next: {_when(api, r)}"
            out.write(f"{r.id} {r.state}{extra}\n")
    return 0


def build_engine(api: Reminders, *, no_alerts: bool = False, role: str = "serve") -> Any:
    """The engine of a long-running process (``serve``, ``api``): the local alerter
    unless ``no_alerts``, which then also takes mute and quiet hours from the store."""
    from ..engine import Engine

    alerter = None if no_alerts else _default_alerter()
    engine = Engine(api.store, clock=api.clock, settings=api.settings, alerter=alerter, role=role,
                    can_alert=not no_alerts and alerter is not None)
    if alerter is not None and hasattr(alerter, "attach"):
        alerter.attach(engine)  # mute/quiet hours from the store; notifications for every fire
    return engine


def serve(api: Reminders, out: TextIO, *, no_alerts: bool = False, verbose: bool = False) -> int:
    """Run an engine in the foreground until SIGINT or SIGTERM."""

    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    engine = build_engine(api, no_alerts=no_alerts, role="serve")
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()
        engine.poke()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    if hasattr(signal, "SIGUSR1"):  # `kill -USR1 PID`: every thread's stack on stderr (a stuck engine)
        faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
    out.write(f"remindkit serve: engine {engine.id} on {api.store.url}; stop with Ctrl-C\n")
    out.flush()
    engine.run(stop)
    out.write("remindkit serve: stopped\n")
    return 0


def not_armed_hint(db: str | None) -> str:
    """What to say when no engine runs on the store: nothing will fire until one does."""
    where = "" if not db else f" --db {printable(db)}"
    return (f"no engine is running on this store, so nothing fires until one starts: run `remindkit serve{where}`, "
            f"or `remindkit service install{where}` to keep one running")


def _default_alerter() -> Any:
    try:
        from ..alerts.local import default_alerter
    except ImportError:
        return None
    return default_alerter()


def _status(api: Reminders, out: TextIO, as_json: bool, within: Any = Any, *, db: str | None = None) -> int:
    store = api.store
    now = api.clock.now()
    from ..clock import to_us

    engines = store.live_engines(since_us=to_us(now) - int(api.settings.lease_s * 2e6))
    holder = store.lease_holder("alerter", now_us=to_us(now))
    data = {
        "store": store.url,
        "paused_all": api.paused_all,
        "active": store.count_reminders(states=["active"]),
        "paused": store.count_reminders(states=["paused"]),
        "engines": [{"id": e["id"], "role": e["role"], "pid": e["pid"], "host": e["host"]} for e in engines],
        "alerter": holder[0] if holder else None,
        "armed": api.armed(),
        "quarantined": [{"id": rid, "reason": why} for rid, why in store.quarantined()],
    }
    nxt = api.list(session=within, states=["active"], order="next")
    data["next"] = nxt[0].to_dict() if nxt else None
    if as_json:
        _json(out, data)
    else:
        out.write(f"store:    {data['store']}\n")
        out.write(f"active:   {data['active']}   paused: {data['paused']}" + ("   (everything paused)" if data["paused_all"] else "") + "\n")
        out.write(f"engines:  {len(engines)}" + "".join(f"\n  {e['id']} ({e['role']})" for e in engines) + "\n")
        if not data["armed"]:
            out.write(f"armed:    no: {not_armed_hint(db)}\n")
        out.write(f"alerter:  {data['alerter'] or '-'}\n")
        for rid, why in store.quarantined():
            out.write(f"quarantined: {rid}: {why}\n")
        if nxt:
            out.write(f"next:     {nxt[0].label or nxt[0].id} {_when(api, nxt[0])}\n")
    return 0


# -- output helpers -------------------------------------------------------------------------


def _json(out: TextIO, data: Any) -> None:
    out.write(json.dumps(data, ensure_ascii=False, indent=None) + "\n")


def _when(api: Reminders, rem: Reminder) -> str:
    if rem.next_fire_at is None:
        return "-"
    left = (rem.next_fire_at - api.clock.now()).total_seconds()
    rel = f"in {format_countdown(left)}" if left >= 0 else f"{format_countdown(-left)} ago"
    return f"{format_utc(rem.next_fire_at)} ({rel})"


def _table(out: TextIO, api: Reminders, rems: Sequence[Reminder]) -> None:
    if not rems:
        out.write("no reminders\n")
        return
    rows = [("ID", "STATE", "NEXT", "SCHEDULE", "SESSION", "LABEL", "TEXT")]
    for r in rems:
        text = r.text if len(r.text) <= 40 else r.text[:39] + "…"
        rows.append((r.id, r.state, _when(api, r) if r.state == "active" else "-", r.schedule.describe(),
                     r.session or "-", r.label or "-", printable(text.replace("\n", " "))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1] + "\n")


def _history(out: TextIO, hist: Sequence[Occurrence]) -> None:
    if not hist:
        out.write("no fires yet\n")
        return
    for o in hist:
        late = "" if o.late_ms is None else f" late {o.late_ms}ms"
        missed = f" missed {o.missed}" if o.missed else ""
        err = f" ({printable(o.error)})" if o.error and o.state != "delivered" else ""
        out.write(f"{format_utc(o.due_at)}  {o.reminder_id}  {o.state}{late}{missed}{err}\n")


def _fromiso(text: str) -> datetime:
    return datetime.fromisoformat(text)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
