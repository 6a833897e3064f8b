"""``remindkit mcp`` (the MCP server on stdio), ``mcp bind`` (Claude Code's
SessionStart hook), ``mcp install`` and ``mcp install-claude-code``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from ..errors import InvalidInput


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    m = sub.add_parser(
        "mcp",
        parents=[common],
        help="MCP server on stdio (Claude Code, Claude Desktop, Cursor, VS Code)",
    )
    m.add_argument(
        "--session",
        help="the session this server speaks for (default: the Claude Code session bound "
        "by the SessionStart hook, else one per project)",
    )
    m.add_argument(
        "--project",
        help="the project folder (default: CLAUDE_PROJECT_DIR or the working directory)",
    )
    m.add_argument(
        "--resume-command",
        metavar="ARGV",
        help="while no client of the session is connected, deliver fires by running this "
        "({session} and {message} replaced), e.g. 'claude -p --resume {session}'",
    )
    m.add_argument(
        "--pass-env",
        metavar="NAME",
        action="append",
        help="with --resume-command: pass this variable of the engine's environment to it "
        "(repeat for more), e.g. ANTHROPIC_API_KEY",
    )
    m.add_argument(
        "--no-channel",
        action="store_true",
        help="do not declare the claude/channel capability (tools only)",
    )
    m.add_argument("-v", "--verbose", action="store_true", help="log to stderr at INFO")
    ms = m.add_subparsers(dest="mcp_command", metavar="ACTION")
    b = ms.add_parser(
        "bind",
        parents=[common],
        help="Claude Code SessionStart hook: bind this project's server to the session on stdin "
        "(the same as `mcp hook start`)",
    )
    b.add_argument("--project")
    h = ms.add_parser(
        "hook",
        parents=[common],
        help="a Claude Code hook (JSON on stdin): start (SessionStart), prompt "
        "(UserPromptSubmit), stop (Stop); see docs/guides/mcp.md",
    )
    h.add_argument("event", choices=["start", "prompt", "stop"])
    h.add_argument("--project")
    cb = ms.add_parser(
        "callbacks",
        parents=[common],
        help="a conversation's callbacks (set_callback): list, pause, resume, cancel [SLOT] "
        "(the Claude Code plugin's /callbacks)",
    )
    cb.add_argument("session", help="the conversation (Claude Code: ${CLAUDE_SESSION_ID})")
    cb.add_argument(
        "action", nargs="?", default="list", choices=["list", "pause", "resume", "cancel"]
    )
    cb.add_argument("slot", nargs="?", type=int)
    pl = ms.add_parser(
        "plugin-dir",
        parents=[common],
        help="print the folder of remindkit's Claude Code plugin (claude --plugin-dir DIR)",
    )
    pl.set_defaults(mcp_command="plugin-dir")
    ins = ms.add_parser(
        "install", parents=[common], help="print the JSON for Claude Desktop, Cursor and VS Code"
    )
    ins.add_argument(
        "--command",
        dest="host_command",
        default="remindkit",
        help="how the host starts remindkit (default: remindkit)",
    )
    cc = ms.add_parser(
        "install-claude-code",
        parents=[common],
        help="write .mcp.json and the hooks (.claude/settings.local.json) into a project (or "
        "--user); idempotent, shows the diff",
    )
    cc.add_argument(
        "--user", action="store_true", help="the user's ~/.claude.json and ~/.claude/settings.json"
    )
    cc.add_argument("--project", help="the project folder (default: the working directory)")
    cc.add_argument(
        "--shared",
        action="store_true",
        help="the hooks in .claude/settings.json (checked in), not .claude/settings.local.json",
    )
    cc.add_argument(
        "--command",
        dest="host_command",
        default=None,
        metavar="PATH",
        help="the remindkit executable Claude Code runs (one path; default: this remindkit)",
    )
    cc.add_argument(
        "--resume-command",
        metavar="ARGV",
        help="passed to the server, e.g. 'claude -p --resume {session}'",
    )
    cc.add_argument(
        "--pass-env",
        metavar="NAME",
        action="append",
        default=[],
        help="with --resume-command: an engine variable it gets (repeat), e.g. ANTHROPIC_API_KEY",
    )
    cc.add_argument(
        "--service",
        action="store_true",
        help="also keep an engine running (remindkit service install): fires while Claude Code "
        "is closed go to the resume command",
    )
    cc.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
    from .mcp_hosts import add_parsers as add_host_parsers

    add_host_parsers(ms, common)  # install-codex, install-gemini, install-opencode
    m.set_defaults(func=run_command)


def run_command(cx: Any) -> int:
    if cx.args.mcp_command == "callbacks":
        return run_callbacks(cx)
    if runs_without_store(cx.args):  # files and hooks: the store is only named
        return run_without_store(cx.args, cx.out, cx.inp)
    return run(cx.args, cx.graph, cx.out)


def run_callbacks(cx: Any) -> int:
    """``mcp callbacks SESSION [list|pause|resume|cancel [SLOT]]``: the set_callback tool's
    list and cancel, and pause / resume of the session's callbacks, for the person."""
    from ..agent.callbacks import callbacks
    from ..agent.tools import ToolContext, handle_tool_call
    from ..checks import check_session_id
    from .scope import env_scope

    sid = check_session_id(cx.args.session)
    assert sid is not None
    confined = env_scope()
    if confined is not None and sid != confined:
        raise InvalidInput(f"session {sid!r} is outside the session scope", code="forbidden")
    ctx = ToolContext(cx.api, sid)
    action = cx.args.action
    if action in ("list", "cancel"):
        args: dict[str, Any] = {"action": action}
        if cx.args.slot is not None:
            args["callback_id"] = cx.args.slot
        result = handle_tool_call(ctx, "set_callback", args)
        cx.out.write(result.content + "\n")
        return 0 if result.ok else 1
    live = [r.id for r in callbacks(ctx)]
    changed = (cx.api.pause if action == "pause" else cx.api.resume)(live, session=sid)
    n = len(changed)
    cx.out.write(f"{action.capitalize()}d {n} callback{'' if n == 1 else 's'}.\n")
    return 0


def runs_without_store(args: argparse.Namespace) -> bool:
    from .mcp_hosts import COMMANDS as HOST_COMMANDS

    return args.command == "mcp" and (
        args.mcp_command in ("bind", "hook", "install", "install-claude-code", "plugin-dir")
        or args.mcp_command in HOST_COMMANDS
    )


def run_hook(args: argparse.Namespace, event: str, stdin: Any, out: TextIO) -> int:
    """A hook reached through the parser (the quick way is :mod:`remindkit.cli.hook`)."""
    from .hook import run

    opts: dict[str, Any] = {"--json": bool(getattr(args, "json", False))}
    if getattr(args, "db", None):
        opts["--db"] = args.db
    if getattr(args, "project", None):
        opts["--project"] = args.project
    return run(event, opts, stdin if stdin is not None else sys.stdin, out, sys.stderr)


def run_without_store(args: argparse.Namespace, out: TextIO, stdin: Any = None) -> int:
    from ..mcp import identity, install

    if args.mcp_command == "install":
        out.write(install.snippets(args.host_command))
        return 0
    if args.mcp_command == "plugin-dir":
        out.write(str(install.plugin_dir()) + "\n")
        return 0
    from . import mcp_hosts

    if args.mcp_command in mcp_hosts.COMMANDS:
        return mcp_hosts.run(args, out)
    if args.mcp_command == "install-claude-code":
        project = identity.project_dir(args.project or ".")
        pass_env: list[str] = []
        if args.pass_env:
            from ..sessions.command import pass_env_names

            pass_env = pass_env_names(args.pass_env)
        from ..mcp.hosts.claude_code import claude_code_changes

        changes = claude_code_changes(
            project=project,
            user=args.user,
            command=args.host_command,
            resume_command=args.resume_command,
            pass_env=pass_env,
            shared=args.shared,
        )
        for change in changes:
            if not change.changed:
                out.write(f"{change.path}: up to date\n")
                continue
            out.write(change.diff())
            if not args.dry_run:
                install.write(change)
                out.write(f"{change.path}: written\n")
        return mcp_hosts.keep_engine_running(args, out, "Claude Code")
    # bind and hook: Claude Code's hooks (never fail the hook)
    event = "start" if args.mcp_command == "bind" else args.event
    return run_hook(args, event, stdin, out)


def run(args: argparse.Namespace, graph: Any, out: TextIO) -> int:
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        from ..mcp.server import run_stdio
    except ImportError as exc:  # the optional SDK
        raise InvalidInput(
            f"remindkit mcp needs the mcp extra: pip install 'remindkit[mcp]' ({exc})",
            code="missing_dependency",
        ) from None
    resume = None
    pass_env = None
    if args.resume_command:
        from ..sessions.command import parse_argv

        try:
            resume = parse_argv(args.resume_command)
        except ValueError as exc:
            raise InvalidInput(f"--resume-command: {exc}", code="invalid_command") from None
    if args.pass_env:
        from ..sessions.command import pass_env_names

        pass_env = pass_env_names(args.pass_env)
    session = args.session or os.environ.get("REMINDKIT_SESSION") or None
    if session is not None:
        from ..reminders import check_session_id

        check_session_id(session)
    from ..mcp import identity

    project = identity.project_dir(args.project) if args.project else identity.project_dir()
    # the conversation's hooks (and remindkit commands) are handed to this engine while no
    # other engine serves the store (remindkit.cli.handoff)
    served = None
    if os.environ.get("REMINDKIT_HANDOFF", "1") != "0":
        from .handoff import HandoffServer
        from .main import main

        served = HandoffServer(graph, main).start()
    return run_stdio(
        graph,
        also_close=served.close if served is not None else None,
        session=session,
        project=Path(project),
        resume_argv=resume,
        pass_env=pass_env,
        channel=not args.no_channel,
    )
