"""``remindkit mcp install-codex``, ``install-gemini`` and ``install-opencode``: the MCP
server entry, the hooks (opencode: a plugin) and the resume preset of an agent CLI, in a
project (or ``--user``). Idempotent, keeps what else the files hold, shows the diff;
``--service`` also keeps an engine running (``remindkit service install``), as
``install-claude-code --service`` does, else a hint says how."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

COMMANDS = {"install-codex": "codex", "install-gemini": "gemini", "install-opencode": "opencode"}
_WRITES = {
    "codex": ".codex/config.toml and .codex/hooks.json",
    "gemini": ".gemini/settings.json",
    "opencode": "opencode.json and .opencode/plugin/remindkit.js",
}
_LABELS = {"codex": "Codex", "gemini": "Gemini CLI", "opencode": "opencode"}


def add_parsers(ms: Any, common: argparse.ArgumentParser) -> None:
    for action, host in COMMANDS.items():
        p = ms.add_parser(
            action,
            parents=[common],
            help=f"write {_WRITES[host]} into a project (or --user); idempotent, shows the diff",
        )
        p.add_argument(
            "--user", action="store_true", help="the user's config instead of the project's"
        )
        p.add_argument("--project", help="the project folder (default: the working directory)")
        p.add_argument(
            "--command",
            dest="host_command",
            help="the remindkit executable the host starts (default: this one, by its absolute path)",
        )
        p.add_argument(
            f"--{host}",
            dest="host_executable",
            metavar="PATH",
            help=f"the {host} executable of the resume preset (default: {host} on PATH)",
        )
        p.add_argument(
            "--pass-env",
            metavar="NAME",
            action="append",
            default=[],
            help="one more variable of the engine's environment for the resume preset (repeat)",
        )
        p.add_argument(
            "--no-resume", action="store_true", help="no resume preset (fires wait for the CLI)"
        )
        p.add_argument(
            "--service",
            action="store_true",
            help=f"also keep an engine running (remindkit service install): fires while "
            f"{_LABELS[host]} is closed go to the resume preset",
        )
        p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")


def run(args: argparse.Namespace, out: TextIO) -> int:
    from ..mcp import identity, install
    from ..mcp.hosts import HOSTS
    from ..sessions.command import pass_env_names

    host = HOSTS[COMMANDS[args.mcp_command]]
    plan = host.plan(
        project=identity.project_dir(args.project or "."),
        user=args.user,
        command=args.host_command,
        host_executable=args.host_executable,
        resume=not args.no_resume,
        pass_env=tuple(pass_env_names(args.pass_env)) if args.pass_env else (),
    )
    for change in plan.changes:
        if not change.changed:
            out.write(f"{change.path}: up to date\n")
            continue
        out.write(change.diff())
        if not args.dry_run:
            install.write(change)
            out.write(f"{change.path}: written\n")
    for note in plan.notes:
        out.write(f"note: {note}\n")
    return keep_engine_running(args, out, _LABELS[host.NAME], resume=not args.no_resume)


def keep_engine_running(
    args: argparse.Namespace, out: TextIO, host: str, *, resume: bool = True
) -> int:
    """After an install: with ``--service``, ``remindkit service install`` (on the
    store named by ``--db``, else the default one); without it, a hint. The host's own
    remindkit server fires only while the host runs."""
    if getattr(args, "service", False):
        if args.dry_run:
            out.write("--dry-run: remindkit service install not run\n")
            return 0
        from .main import main

        db = getattr(args, "db", None)
        return main(["service", "install", *(["--db", db] if db else [])], stdout=out)
    then = " (and come back through the resume command)" if resume else " (and wait for it)"
    out.write(
        f"Reminders fire while {host} runs (its remindkit server); to have them fire while it "
        f"is closed{then}, keep an engine running: remindkit service install (or add --service)\n"
    )
    return 0
