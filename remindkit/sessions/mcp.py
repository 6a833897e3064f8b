"""``mcp`` sessions: the conversation of an MCP host (Claude Code, Claude Desktop,
Cursor, VS Code …) that runs ``remindkit mcp``.

While an MCP server of the session is connected, it registers a push function
here (:meth:`McpSessions.attach`) and holds the store lease ``mcp:<session>``;
a delivery is that push (a ``notifications/claude/channel`` event), recorded
delivered once the notification is written. While none is connected, the fires
wait and are pushed when one connects again, or, when the session names a
resume command (``config["argv"]``, as a ``command`` session:
``claude -p --resume {session}``), they are delivered through it by any engine,
in the session's project folder (``config["cwd"]``, else ``config["project"]``),
with the engine's variables that ``config["pass_env"]`` names. A resume command
that fails leaves the fires waiting (tried again with back-off, for an hour);
the fallback to a fresh conversation is the session's ``fresh_argv`` only.

Needs no MCP SDK: every engine carries this adapter, so that ``remindkit serve``
can run the resume command of a session whose server is gone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..clock import Clock, SystemClock, now_us
from ..models import Fire, Session
from .base import TurnResult
from .command import CommandSession

if TYPE_CHECKING:
    from ..agent.external import ExternalTurns
    from ..store import SqlStore

Push = Callable[[str, Sequence[Fire]], None]  # raises when the client is gone
LEASE_PREFIX = "mcp:"


class McpSessions:
    name = "mcp"
    shared = True  # a resume command may run from any engine; one turn at a time per session

    def __init__(
        self,
        store: SqlStore | None = None,
        *,
        clock: Clock | None = None,
        turns: ExternalTurns | None = None,
        remember_keys: int = 100_000,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.command = CommandSession(turns=turns, clock=self.clock)
        self._pushes: dict[str, Push] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_keys
        self._lock = threading.Lock()

    # -- the MCP server's side -----------------------------------------------------------

    def attach(self, session_id: str, push: Push) -> None:
        with self._lock:
            self._pushes[session_id] = push

    def detach(self, session_id: str) -> None:
        with self._lock:
            self._pushes.pop(session_id, None)

    def attached(self) -> list[str]:
        with self._lock:
            return list(self._pushes)

    # -- the engine's side ---------------------------------------------------------------

    def can_deliver(self, session: Session) -> bool:
        with self._lock:
            if session.id in self._pushes:
                return True
        return self._can_resume(session)

    def _can_resume(self, session: Session) -> bool:
        return (
            bool(session.config.get("argv"))
            and self.command.why_not(session) is None
            and not self._connected_elsewhere(session.id)
        )

    def local_turn(self, session: Session) -> bool:
        """A push to a client connected to this process: no store turn claim is needed
        (the session's connection lease keeps every other engine out)."""
        with self._lock:
            return session.id in self._pushes

    def why_not(self, session: Session) -> str:
        if session.config.get("argv"):
            later = self.command.why_not(session)
            if later is not None:
                return later
            return f"an MCP server of session {session.id} is connected in another process"
        return f"no MCP client of session {session.id} is connected; the fires wait until it connects again"

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        with self._lock:
            push = self._pushes.get(session.id)
        if push is None:
            if self._can_resume(session):
                return self._resume(session, message, fires)
            return TurnResult(False, error=self.why_not(session), busy=True)
        with self._lock:
            fresh = [f for f in fires if f.key not in self._seen]
            for f in fresh:
                self._seen[f.key] = None
            while len(self._seen) > self._remember:
                self._seen.popitem(last=False)
        if not fresh:
            return TurnResult(True, duplicate=True)
        if len(fresh) != len(fires):
            from ..protocol import frame_fired

            message = frame_fired(fresh)
        try:
            push(message, fresh)
        except Exception as exc:
            with self._lock:
                for f in fresh:
                    self._seen.pop(f.key, None)
            # the client went away mid-push: the fires wait for the next connection
            return TurnResult(
                False, error=f"MCP client of session {session.id} is gone: {exc}"[:300], busy=True
            )
        return TurnResult(True)

    def _resume(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        """The resume command, in the session's project folder. A failed run leaves
        the fires waiting (tried again with back-off, and pushed at once when the
        host connects again): the conversation is still there, and a fresh one is
        not the host's (its ``fresh_argv``, when given, is the fallback)."""
        config = session.config
        if not config.get("cwd") and isinstance(config.get("project"), str):
            session = replace(session, config={**config, "cwd": config["project"]})
        result = self.command.run_turn(session, message, fires)
        if result.ok or result.retry or result.busy:
            return result
        why = f"resume command failed: {result.error or 'error'}"
        if config.get("fresh_argv") and config.get("fresh_argv") != config.get("argv"):
            return replace(result, error=why)  # failed at once: the fresh command is tried
        self.command.try_later(session.id, why)
        return TurnResult(False, error=why, retry=True)

    def _connected_elsewhere(self, session_id: str) -> bool:
        if self.store is None:
            return False
        try:
            return (
                self.store.coordination.lease_holder(
                    LEASE_PREFIX + session_id, now_us=now_us(self.clock)
                )
                is not None
            )
        except Exception:
            return True  # cannot tell: leave the fires waiting rather than run the command twice


__all__ = ["LEASE_PREFIX", "McpSessions", "Push"]
