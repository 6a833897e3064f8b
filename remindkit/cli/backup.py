"""``remindkit export`` and ``remindkit import``: every reminder and session as JSON
lines. Both reach every session, so neither runs inside a session scope."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InvalidInput
from .context import Context
from .output import printable
from .scope import refuse_in_scope


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    ex = sub.add_parser(
        "export", parents=[common], help="write every reminder and session as JSON lines"
    )
    ex.set_defaults(func=export)
    im = sub.add_parser("import", parents=[common], help="read an export (one transaction)")
    im.add_argument("file", help="path, or - for stdin")
    im.add_argument("--replace", action="store_true", help="overwrite reminders whose id exists")
    im.add_argument(
        "--trust-sessions",
        action="store_true",
        help="bring in sessions whole (argv, env, cwd, api_key_env, base_url, extra); without it "
        "such sessions come in disabled until `remindkit session add` completes them",
    )
    im.set_defaults(func=import_)


def export(cx: Context) -> int:
    refuse_in_scope("export")
    for line in cx.api.export():  # JSON lines already, with or without --json
        cx.out.write(line + "\n")
    return 0


def import_(cx: Context) -> int:
    refuse_in_scope("import")
    args = cx.args
    if args.file == "-":
        imported = cx.api.import_report(
            cx.inp, replace_existing=args.replace, trust_sessions=args.trust_sessions
        )
    else:
        try:
            with open(args.file, encoding="utf-8") as fh:
                imported = cx.api.import_report(
                    fh, replace_existing=args.replace, trust_sessions=args.trust_sessions
                )
        except OSError as exc:
            raise InvalidInput(
                f"cannot read {args.file}: {exc.strerror}", code="invalid_import"
            ) from None
    if args.json:
        cx.json(
            {
                "imported": imported.reminders,
                "sessions": imported.sessions,
                "disabled": [
                    {"session": sid, "left_out": list(keys)} for sid, keys in imported.disabled
                ],
            }
        )
    else:
        cx.out.write(f"imported {imported.reminders} reminders\n")
        for sid, keys in imported.disabled:
            cx.out.write(
                f"session {printable(sid)} is disabled: {', '.join(keys)} left out (no --trust-sessions); "
                f"complete it with `remindkit session add {printable(sid)} ...`\n"
            )
    return 0
