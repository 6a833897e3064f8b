"""The session scope of a command.

``REMINDKIT_SESSION`` is set by remindkit for the agent commands it runs. Under it a
command sees and changes that session's reminders only, and a flag cannot widen
that: an explicit ``--session`` naming another session is refused with
``forbidden``, as are the commands that reach beyond one session (``export``,
``import``, ``session …`` other than ``busy`` / ``idle`` of its own session,
changes to ``alerts``). Without it the command line is the person's own tool and
``--session`` only narrows what a command looks at.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..errors import Forbidden


def env_scope() -> str | None:
    return os.environ.get("REMINDKIT_SESSION") or None


def scope(args: argparse.Namespace) -> Any:
    """The session a command is confined to: ``REMINDKIT_SESSION`` when set (an explicit
    ``--session`` must name the same session), else ``--session``, else ``Any``."""
    given = getattr(args, "session", None) or None
    confined = env_scope()
    if confined is not None:
        if given is not None and given != confined:
            raise Forbidden(
                f"this command runs in session scope {confined!r}; "
                "it cannot act on another session",
                code="forbidden",
            )
        return confined
    return given if given is not None else Any


def session_or_none(args: argparse.Namespace) -> str | None:
    within = scope(args)
    return None if within is Any else within


def refuse_in_scope(what: str) -> None:
    """``what`` reaches beyond one session: refused inside a session scope."""
    confined = env_scope()
    if confined is not None:
        raise Forbidden(
            f"{what} is not allowed in session scope {confined!r} (REMINDKIT_SESSION)",
            code="forbidden",
        )
