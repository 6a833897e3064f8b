"""``remindkit session add|ls|rm|busy|idle``."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, TextIO

from ..audit import Surface
from ..clock import format_utc, to_us
from ..errors import InvalidInput, NotFound
from ..models import Session
from ..reminders import Reminders, check_printable, check_session_id
from ..sessions.command import parse_argv


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("session", parents=[common], help="sessions that fired reminders are delivered to")
    ss = s.add_subparsers(dest="session_command", metavar="ACTION")
    add = ss.add_parser("add", parents=[common], help="register a session and how to deliver to it")
    add.add_argument("id")
    add.add_argument("--command", dest="command_argv", metavar="ARGV",
                     help="run this once per delivery ({session} and {message} are replaced; the message is also on stdin)")
    add.add_argument("--fresh-command", metavar="ARGV",
                     help="with --command: how to start a new conversation ({session} is the new id), used when "
                          "a turn fails at once and the delivery is re-sent into a fresh session")
    add.add_argument("--openai", action="store_true",
                     help="an OpenAI-compatible chat whose transcript remindkit keeps (needs --base-url and --model)")
    add.add_argument("--base-url", help="with --openai: e.g. http://127.0.0.1:11434/v1")
    add.add_argument("--model", help="with --openai: the model name")
    add.add_argument("--api-key-env", metavar="VAR",
                     help="with --openai: environment variable that holds the API key (default OPENAI_API_KEY); "
                          "the key itself is never stored")
    add.add_argument("--system", help="with --openai: system prompt (default: remindkit's, which explains the tags)")
    add.add_argument("--python", action="store_true",
                     help="a session that a live Python process registers (fires wait while none has it)")
    add.add_argument("--title")
    add.add_argument("--timeout", type=float, help="seconds a command or model turn may take")
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
        config, adapter = _adapter_config(args)
        if args.title is not None:
            check_printable(args.title, "--title", 200)
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
        check_session_id(args.id)
        paused = store.delete_session(args.id, now_us=now_us, surface=Surface.CLI)
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


def _adapter_config(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    """The adapter and its config from ``session add`` options (one adapter at most)."""
    chosen = [name for name, on in (("command", bool(args.command_argv)), ("openai", args.openai), ("python", args.python)) if on]
    if len(chosen) > 1:
        raise InvalidInput(f"give one adapter, not {' and '.join(chosen)}", code="invalid_argument")
    config: dict[str, Any] = {}
    if args.command_argv:
        try:
            config["argv"] = parse_argv(args.command_argv)
            if args.fresh_command:
                config["fresh_argv"] = parse_argv(args.fresh_command)
        except ValueError as exc:
            raise InvalidInput(f"--command: {exc}", code="invalid_command") from None
    elif args.fresh_command:
        raise InvalidInput("--fresh-command goes with --command", code="invalid_argument")
    if args.openai:
        if not args.base_url or not args.model:
            raise InvalidInput("--openai needs --base-url and --model", code="invalid_argument")
        if not args.base_url.startswith(("http://", "https://")):
            raise InvalidInput(f"--base-url {args.base_url!r} is not an http(s) URL", code="invalid_argument")
        config.update(base_url=args.base_url, model=args.model)
        if args.api_key_env:
            config["api_key_env"] = args.api_key_env
        if args.system is not None:
            config["system"] = args.system
    elif args.base_url or args.model or args.api_key_env or args.system is not None:
        raise InvalidInput("--base-url, --model, --api-key-env and --system go with --openai", code="invalid_argument")
    if args.timeout is not None:
        if not 0 < args.timeout < math.inf:
            raise InvalidInput(f"--timeout {args.timeout!r} is not a positive number of seconds", code="invalid_argument")
        config["timeout"] = args.timeout
    return config, (chosen[0] if chosen else None)


def _emit(out: TextIO, as_json: bool, data: Any, text: str) -> None:
    out.write((json.dumps(data) if as_json else text) + "\n")
