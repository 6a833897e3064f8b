"""``command`` sessions: an external program run once per turn.

Configured with an argv template (``remindkit session add s1 --command 'ARGV…'``);
``{session}`` and ``{message}`` in an argument are replaced. The framed message
is also written to stdin, and the environment carries ``REMINDKIT_SESSION``,
``REMINDKIT_REMINDER_IDS`` and ``REMINDKIT_OCCURRENCE_KEYS`` (the idempotency
keys, comma-separated). Exit status 0 is a delivered turn whose reply is stdout;
anything else is a failed turn (the tail of stderr is recorded).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Sequence

from ..models import Fire, Session
from .base import TurnResult

DEFAULT_TIMEOUT = 600.0


def parse_argv(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise ValueError("empty command")
    return argv


class CommandSession:
    name = "command"
    shared = True

    def __init__(self, *, timeout: float | None = None) -> None:
        self.timeout = timeout

    def can_deliver(self, session: Session) -> bool:
        return bool(session.config.get("argv"))

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        template = session.config.get("argv") or []
        argv = [str(a).replace("{session}", session.id).replace("{message}", message) for a in template]
        env = dict(os.environ)
        env.update(session.config.get("env") or {})
        env["REMINDKIT_SESSION"] = session.id
        env["REMINDKIT_REMINDER_IDS"] = ",".join(dict.fromkeys(f.reminder_id for f in fires))
        env["REMINDKIT_OCCURRENCE_KEYS"] = ",".join(f.key for f in fires)
        timeout = self.timeout or float(session.config.get("timeout") or DEFAULT_TIMEOUT)
        try:
            proc = subprocess.run(
                argv, input=message, capture_output=True, text=True, timeout=timeout, env=env,
                cwd=session.config.get("cwd") or None,
            )
        except FileNotFoundError:
            return TurnResult(False, error=f"command not found: {argv[0]}", instant=True)
        except subprocess.TimeoutExpired:
            return TurnResult(False, error=f"command timed out after {timeout:g}s")
        except OSError as exc:
            return TurnResult(False, error=f"command failed to start: {exc}", instant=True)
        if proc.returncode != 0:
            tail = (proc.stderr or "").strip()[-500:]
            return TurnResult(False, error=f"exit status {proc.returncode}: {tail}", instant=True)
        return TurnResult(True, reply=proc.stdout)
