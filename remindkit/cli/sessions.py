"""``remindkit session add|ls|rm|busy|idle``."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import Forbidden, InvalidInput, NotFound
from ..models import FallbackPolicy
from .context import Context
from .inert import one_line
from .scope import env_scope, refuse_in_scope

if TYPE_CHECKING:
    from ..reminders import Reminders


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser(
        "session", parents=[common], help="sessions that fired reminders are delivered to"
    )
    ss = s.add_subparsers(dest="session_command", metavar="ACTION")
    add = ss.add_parser("add", parents=[common], help="register a session and how to deliver to it")
    add.add_argument("id")
    add.add_argument(
        "--command",
        dest="command_argv",
        metavar="ARGV",
        help="run this once per delivery ({session} and {message} are replaced; the message is also on stdin)",
    )
    add.add_argument(
        "--fresh-command",
        metavar="ARGV",
        help="with --command: how to start a new conversation ({session} is the new id), used when "
        "a turn fails at once and the delivery is re-sent into a fresh session",
    )
    add.add_argument(
        "--cwd",
        metavar="DIR",
        help="with --command: the folder it runs in (default: the engine's working folder)",
    )
    add.add_argument(
        "--pass-env",
        metavar="NAME",
        action="append",
        help="with --command: pass this variable of the engine's environment to it (repeat "
        "for more), e.g. ANTHROPIC_API_KEY; nothing else of the engine's environment is passed",
    )
    add.add_argument(
        "--openai",
        action="store_true",
        help="an OpenAI-compatible chat whose transcript remindkit keeps (needs --base-url and --model)",
    )
    add.add_argument("--base-url", help="with --openai: e.g. http://127.0.0.1:11434/v1")
    add.add_argument("--model", help="with --openai: the model name")
    add.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="with --openai: environment variable that holds the API key (default OPENAI_API_KEY); "
        "the key itself is never stored",
    )
    add.add_argument(
        "--system",
        help="with --openai: system prompt (default: remindkit's, which explains the tags)",
    )
    add.add_argument(
        "--python",
        action="store_true",
        help="a session that a live Python process registers (fires wait while none has it)",
    )
    add.add_argument(
        "--webhook",
        metavar="URL",
        help="POST fired turns to this URL, signed per Standard Webhooks (see docs/guides/telegram-webhooks.md)",
    )
    add.add_argument(
        "--secret-env",
        metavar="VAR",
        help="with --webhook: environment variable that holds the whsec_ secret "
        "(default REMINDKIT_WEBHOOK_SECRET); the secret itself is never stored",
    )
    add.add_argument(
        "--fallback",
        choices=["fresh", "none"],
        default=None,
        help="when a turn fails at once: re-send once into a fresh session (fresh, the default) or "
        "not (none); after the final failure the reminder is paused with last_error",
    )
    add.add_argument("--title")
    add.add_argument("--timeout", type=float, help="seconds a command or model turn may take")
    ss.add_parser("ls", parents=[common], help="list sessions")
    rm = ss.add_parser("rm", parents=[common], help="delete a session (its reminders are paused)")
    rm.add_argument("id")
    for name, helptext in (
        ("busy", "mark a session busy: fires wait until `idle`"),
        ("idle", "mark a session idle: waiting fires are delivered"),
    ):
        sp = ss.add_parser(name, parents=[common], help=helptext)
        sp.add_argument("id", nargs="?")
        sp.add_argument(
            "--hook",
            action="store_true",
            help="a Claude Code hook: the session is the session_id of the JSON on stdin; "
            "problems are reported on stderr and never fail the hook",
        )
    s.set_defaults(func=run_command)


def run_command(cx: Context) -> int:
    args = cx.args
    action = args.session_command
    confined = env_scope()
    if action in ("busy", "idle") and args.hook:
        return _hook_busy(args, action == "busy", cx.out)
    if action in ("busy", "idle") and args.id is None:
        raise InvalidInput(
            f"session {action} needs a session id (or --hook)", code="invalid_argument"
        )
    if action in ("busy", "idle") and confined is not None:
        if args.id != confined:  # its own session only: another's deliveries are not its to hold
            raise Forbidden(
                f"session {action} of another session is not allowed in session scope {confined!r}",
                code="forbidden",
            )
    else:
        refuse_in_scope(f"session {action or 'ls'}")
    return run(args, cx.api, cx.out)


def run(args: argparse.Namespace, api: Reminders, out: TextIO) -> int:
    from ..checks import check_printable, check_session_id
    from ..clock import format_utc, to_us
    from ..models import Session
    from ..sessions.trust import DISABLED

    store = api.store
    now_us = to_us(api.clock.now())
    action = args.session_command
    if action == "add":
        sid = check_session_id(args.id)
        assert sid is not None
        config, adapter = _adapter_config(args)
        if args.title is not None:
            check_printable(args.title, "--title", 200)
        existing = store.sessions.get_session(sid)
        if existing is not None and existing.state == "deleted":
            raise InvalidInput(
                f"session {sid!r} was deleted; use another id", code="session_deleted"
            )
        fallback = (
            FallbackPolicy(args.fallback)
            if args.fallback
            else existing.fallback
            if existing is not None
            else FallbackPolicy.FRESH
        )
        sess = store.sessions.put_session(
            Session(sid, adapter=adapter, config=config, title=args.title, fallback=fallback),
            now_us=now_us,
        )
        _emit(out, args.json, sess.to_dict(), f"session {sess.id} ({sess.adapter or 'no adapter'})")
        return 0
    if action == "ls" or action is None:
        sessions = store.sessions.list_sessions(now_us=now_us)
        if args.json:
            out.write(json.dumps([s.to_dict() for s in sessions]) + "\n")
        elif not sessions:
            out.write("no sessions\n")
        else:
            for s in sessions:
                busy = " busy" if (s.busy or s.in_turn) else ""
                failing = ""
                if s.failures:
                    breaker = (
                        " breaker open: fallback first"
                        if s.failures >= store.settings.breaker_after
                        else ""
                    )
                    failing = f"  failed {s.failures}x in a row{breaker}: {one_line(s.last_error or '')[:80]}"
                disabled = "  disabled" if s.config.get(DISABLED) else ""
                out.write(
                    f"{one_line(s.id)}  {one_line(s.adapter or '-')}  {s.state}{busy}{disabled}  "
                    f"fallback {s.fallback}  last active {format_utc(s.last_active_at)}{failing}\n"
                )
        return 0
    if action == "rm":
        check_session_id(args.id)
        from ..audit import Surface

        paused = store.sessions.delete_session(args.id, now_us=now_us, surface=Surface.CLI)
        _emit(
            out,
            args.json,
            {"deleted": args.id, "paused": paused},
            f"deleted session {args.id}; paused {len(paused)} reminder(s)",
        )
        return 0
    if action in ("busy", "idle"):
        sid = check_session_id(args.id)
        assert sid is not None
        sess = store.sessions.set_session_busy(sid, action == "busy", now_us=now_us)
        _emit(out, args.json, sess.to_dict(), f"session {sid} {action}")
        return 0
    raise NotFound(f"unknown session action {action!r}", code="invalid_argument")


def _adapter_config(args: argparse.Namespace) -> tuple[dict[str, Any], str | None]:
    """The adapter and its config from ``session add`` options (one adapter at most)."""
    from ..sessions.command import parse_argv

    chosen = [
        name
        for name, on in (
            ("command", bool(args.command_argv)),
            ("openai", args.openai),
            ("python", args.python),
            ("webhook", bool(args.webhook)),
        )
        if on
    ]
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
        if args.cwd:
            from pathlib import Path

            folder = Path(args.cwd).expanduser()
            if not folder.is_dir():
                raise InvalidInput(f"--cwd {args.cwd!r} is not a folder", code="invalid_argument")
            config["cwd"] = str(folder.resolve())
        if args.pass_env:
            from ..sessions.command import pass_env_names

            config["pass_env"] = pass_env_names(args.pass_env)
    elif args.fresh_command or args.cwd or args.pass_env:
        raise InvalidInput(
            "--fresh-command, --cwd and --pass-env go with --command", code="invalid_argument"
        )
    if args.openai:
        if not args.base_url or not args.model:
            raise InvalidInput("--openai needs --base-url and --model", code="invalid_argument")
        if not args.base_url.startswith(("http://", "https://")):
            raise InvalidInput(
                f"--base-url {args.base_url!r} is not an http(s) URL", code="invalid_argument"
            )
        config.update(base_url=args.base_url, model=args.model)
        if args.api_key_env:
            from ..sessions.trust import check_key_env

            config["api_key_env"] = check_key_env(args.api_key_env)
        if args.system is not None:
            config["system"] = args.system
    elif args.base_url or args.model or args.api_key_env or args.system is not None:
        raise InvalidInput(
            "--base-url, --model, --api-key-env and --system go with --openai",
            code="invalid_argument",
        )
    if args.webhook:
        from ..checks import check_secret_env, check_webhook_url

        config["url"] = check_webhook_url(args.webhook)
        if args.secret_env:
            if not args.secret_env.replace("_", "").isalnum() or not args.secret_env.isascii():
                raise InvalidInput(
                    f"--secret-env {args.secret_env!r} is not an environment variable name",
                    code="invalid_argument",
                )
            config["secret_env"] = check_secret_env(args.secret_env)
    elif args.secret_env:
        raise InvalidInput("--secret-env goes with --webhook", code="invalid_argument")
    if args.timeout is not None:
        if not 0 < args.timeout < math.inf:
            raise InvalidInput(
                f"--timeout {args.timeout!r} is not a positive number of seconds",
                code="invalid_argument",
            )
        config["timeout"] = args.timeout
    return config, (chosen[0] if chosen else None)


def _hook_busy(args: argparse.Namespace, busy: bool, out: TextIO) -> int:
    """``session busy|idle --hook``: UserPromptSubmit / Stop, the same as
    ``mcp hook prompt|stop`` (see :mod:`remindkit.mcp.hooks`)."""
    import io
    import sys

    from .mcp import run_hook

    stdin: object = sys.stdin
    if args.id is not None:  # the session named, not the one of the hook's input
        stdin = io.StringIO(json.dumps({"session_id": args.id}))
    return run_hook(args, "prompt" if busy else "stop", stdin, out)


def _emit(out: TextIO, as_json: bool, data: Any, text: str) -> None:
    out.write((json.dumps(data) if as_json else text) + "\n")
