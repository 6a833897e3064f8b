"""The ``remindkit`` command.

Every refusal prints ``error: <code>: <message>`` on stderr and exits 1 (with
``--json``, ``{"error": {"code": ..., "message": ...}}`` on stdout), and
changes nothing. ``--db URL`` or ``REMINDKIT_DB`` picks the store; the session
defaults to ``REMINDKIT_SESSION`` (set for commands that remindkit runs), which
is also a scope that flags cannot widen (see :mod:`remindkit.cli.scope`).

Each command group lives in its own module and registers its sub-commands with
``set_defaults(func=…)``; a command's function takes a :class:`Context` and
returns the exit status. Nothing heavy is imported here: the store, the engine,
the alerts and the notebook load inside the commands that use them, so that
``remindkit remind`` and ``remindkit status --line`` start quickly.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from ..errors import CliError, RemindkitError, error_body
from .context import REMINDER_COMMANDS, Context, Parser, command_of
from .output import printable

if TYPE_CHECKING:
    from ..reminders import Reminders

# kept importable from here
__all__ = ["CliError", "build_parser", "command_of", "main", "printable"]

SIGPIPE_STATUS = 128 + 13  # what a shell reports for a command whose reader went away


# (the commands a module registers, "module:function" that registers them): main imports and
# builds only the group of the command it is given, which matters for a command run every
# second (status --line)
GROUPS: list[tuple[frozenset[str], str]] = [
    (REMINDER_COMMANDS, "reminders:add_parsers"),
    (frozenset({"export", "import"}), "backup:add_parsers"),
    (frozenset({"serve", "tray"}), "engines:add_parsers"),
    (frozenset({"status", "stats"}), "status:add_parsers"),
    (frozenset({"watch"}), "watch:add_parsers"),
    (frozenset({"session"}), "sessions:add_parser"),
    (frozenset({"chat", "demo"}), "chat:add_parsers"),
    (frozenset({"alerts"}), "alerts:add_parser"),
    (frozenset({"log"}), "log:add_parser"),
    (frozenset({"service"}), "service:add_parser"),
    (frozenset({"telegram"}), "telegram:add_parser"),
    (frozenset({"mcp"}), "mcp:add_parser"),
    (frozenset({"api", "token", "projects"}), "api:add_parsers"),
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, or only the group of ``command`` when it names one."""
    # --db and --json may come before or after the command: the sub-commands take them
    # with a suppressed default, so they do not overwrite a value given before.
    common = Parser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help="SQLAlchemy URL of the store (default: REMINDKIT_DB or a SQLite file)",
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )

    p = Parser(
        prog="remindkit", description="Durable reminders for agent sessions.", parents=[common]
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    known = command is not None and any(command in names for names, _add in GROUPS)
    for names, where in GROUPS:
        if not known or command in names:
            module, function = where.split(":")
            getattr(importlib.import_module(f".{module}", __package__), function)(sub, common)
    return p


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    stdin: TextIO | None = None,
    api: Reminders | None = None,
) -> int:
    """Run one command; its exit status. ``api``: the reminders API to use (an engine
    running handed-over commands lends its own), else one is opened when needed."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    args_list = list(sys.argv[1:] if argv is None else argv)
    if argv is None and stdout is None and api is None and "--line" in args_list:
        # status --line, run by a prompt every second: from the engines' file, nothing else
        from ..statusfile import quick_line

        quick = quick_line(args_list, os.environ, out)
        if quick is not None:
            return quick
    elif argv is None and stdout is None and api is None:
        # Claude Code's hooks, on every prompt: handed to the engine, nothing loaded here
        from .hook import hook_event

        hook = hook_event(args_list)
        if hook is not None:
            from .hook import run as run_hook

            return run_hook(hook[0], hook[1], stdin or sys.stdin, out, err)
        # the command itself, in a shell (status --line reads a small file: quicker here)
        from .handoff import try_handoff

        try:
            handed = try_handoff(args_list, out, err)
        except BrokenPipeError:
            return _reader_gone(out)
        if handed is not None:
            return handed
    want_json = "--json" in args_list
    cx: Context | None = None
    try:
        parser = build_parser(command_of(args_list))
        args = parser.parse_args(args_list)
        args.db = getattr(args, "db", None)
        args.json = getattr(args, "json", False)
        if getattr(args, "func", None) is None:
            parser.print_help(out)
            out.flush()
            return 0
        cx = Context(args, out, err, stdin or sys.stdin, api=api)
        code = int(args.func(cx))
        out.flush()
        return code
    except RemindkitError as exc:
        try:
            _print_error(exc, want_json, out, err)
        except BrokenPipeError:
            return _reader_gone(out)
        return 1
    except BrokenPipeError:
        return _reader_gone(out)
    except KeyboardInterrupt:
        return 130
    finally:
        if cx is not None:
            cx.close()


def _reader_gone(out: TextIO) -> int:
    """The reader of our output went away (``remindkit history | head -2``): end quietly,
    with the status a shell gives a command stopped by SIGPIPE. Output still buffered
    would fail again at exit, so the stream is pointed at /dev/null first."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return SIGPIPE_STATUS
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
    return SIGPIPE_STATUS


def _print_error(exc: RemindkitError, want_json: bool, out: TextIO, err: TextIO) -> None:
    if want_json:  # ASCII: a message may quote undecodable bytes from the command line
        import json

        out.write(json.dumps(error_body(exc.code, exc.message)) + "\n")
        out.flush()
    else:  # one line, whatever the message quotes from the command line (a newline, an escape)
        err.write(f"error: {exc.code}: {printable(exc.message)}\n")


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
