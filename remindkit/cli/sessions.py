"""``remindkit session add|ls|rm|busy|idle``."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ..clock import format_utc, to_us
from ..errors import InvalidInput, NotFound
from ..models import Session
from ..reminders import Reminders, check_session_id
from ..sessions.command import parse_argv


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("session", parents=[common], help="sessions that fired reminders are delivered to")
    ss = s.add_subparsers(dest="session_command", metavar="ACTION")
    add = ss.add_parser("add", parents=[common], help="register a session and how to deliver to it")
    add.add_argument("id")
    add.add_argument("--command", dest="argv", metavar="ARGV",
                     help="run this once per delivery ({session} and {message} are replaced; the message is also on stdin)")
    add.add_argument("--title")
    add.add_argument("--timeout", type=float, help="seconds a command turn may take (default 600)")
    ss.add_parser("ls", parents=[common], help="list sessions")
    rm = ss.add_parser("rm", parents=[common], help="delete a session (its reminders are paused)")
    rm.add_argument("id")
    for name, helptext in (("busy", "mark a session busy: fires wait until `idle`"),
                           ("idle", "mark a session idle: waiting fires are delivered")):
        sp = ss.add_parser(name, parents=[common], help=helptext)
        sp.add_argument("id")


def run(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    store = api.store
    now_us = to_us(api.clock.now())
    action = args.session_command
    if action == "add":
        sid = check_session_id(args.id)
        assert sid is not None
        config: dict[str, Any] = {}
        adapter = None
        if args.argv:
            try:
                config["argv"] = parse_argv(args.argv)
            except ValueError as exc:
                raise InvalidInput(f"--command: {exc}", code="invalid_command") from None
            adapter = "command"
            if args.timeout:
                config["timeout"] = args.timeout
        existing = store.get_session(sid)
        if existing is not None and existing.state == "deleted":
            raise InvalidInput(f"session {sid!r} was deleted; use another id", code="session_deleted")
        sess = store.put_session(Session(sid, adapter=adapter, config=config, title=args.title), now_us=now_us)
        _emit(out, args.json, sess.to_dict(), f"session {sess.id} ({sess.adapter or 'no adapter'})")
        return 0
    if action == "ls" or action is None:
        sessions = store.list_sessions(now_us=now_us)
        if args.json:
            out.write(json.dumps([s.to_dict() for s in sessions]) + "\n")
        elif not sessions:
            out.write("no sessions\n")
        else:
            for s in sessions:
                busy = " busy" if (s.busy or s.in_turn) else ""
                out.write(f"{s.id}  {s.adapter or '-'}  {s.state}{busy}  last active {format_utc(s.last_active_at)}\n")
        return 0
    if action == "rm":
        paused = store.delete_session(args.id, now_us=now_us)
        _emit(out, args.json, {"deleted": args.id, "paused": paused},
              f"deleted session {args.id}; paused {len(paused)} reminder(s)")
        return 0
    if action in ("busy", "idle"):
        sid = check_session_id(args.id)
        assert sid is not None
        sess = store.set_session_busy(sid, action == "busy", now_us=now_us)
        _emit(out, args.json, sess.to_dict(), f"session {sid} {action}")
        return 0
    raise NotFound(f"unknown session action {action!r}", code="invalid_argument")


def _emit(out: TextIO, as_json: bool, data: Any, text: str) -> None:
    out.write((json.dumps(data) if as_json else text) + "\n")
