"""``remindkit export`` and ``remindkit import``: every reminder and session as JSON
lines. Both reach every session, so neither runs inside a session scope."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import InvalidInput
from .context import Context
from .scope import refuse_in_scope


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    ex = sub.add_parser("export", parents=[common], help="write every reminder and session as JSON lines")
    ex.set_defaults(func=export)
    im = sub.add_parser("import", parents=[common], help="read an export (one transaction)")
    im.add_argument("file", help="path, or - for stdin")
    im.add_argument("--replace", action="store_true", help="overwrite reminders whose id exists")
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
        n = cx.api.import_(cx.inp, replace_existing=args.replace)
    else:
        try:
            with open(args.file, encoding="utf-8") as fh:
                n = cx.api.import_(fh, replace_existing=args.replace)
        except OSError as exc:
            raise InvalidInput(f"cannot read {args.file}: {exc.strerror}", code="invalid_import") from None
    if args.json:
        cx.json({"imported": n})
    else:
        cx.out.write(f"imported {n} reminders\n")
    return 0
