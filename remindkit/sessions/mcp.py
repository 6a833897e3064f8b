"""``mcp`` sessions: the conversation of an MCP host (Claude Code, Claude Desktop,
Cursor, VS Code …) that runs ``remindkit mcp``.

A fire counts as delivered only when the host took it. While an MCP server of the
session is connected, it links the session here (:meth:`McpSessions.attach`) and
holds the store lease ``mcp:<session>``; what happens to a fire then depends on
the host:

* a host that declared it takes channel events, without Claude Code's hooks: the
  delivery is a ``notifications/claude/channel`` push, recorded delivered once it
  is written;
* Claude Code with remindkit's hooks (``hooks``): the hooks hand fires in and
  record them (:mod:`remindkit.mcp.hooks`): a fire due during a turn comes back
  when the turn ends (Stop), one due while the conversation sits idle with the next
  prompt (UserPromptSubmit). When Claude Code also takes channel events, an idle
  conversation's fires are pushed as one, which starts a turn at once; they stay
  ``waiting`` until that turn's UserPromptSubmit hook sees them in its prompt and
  records them (a push Claude Code dropped costs nothing: the next prompt brings
  them);
* a host with neither: the fires wait, and say how to reach the conversation.

While no server of the session is connected, the fires wait for one, or, when the
session names a resume command (``config["argv"]``, as a ``command`` session:
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
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..clock import Clock, SystemClock, now_us, to_us
from ..models import Fire, Session
from .base import TurnResult, fresh_argv_differs
from .command import CommandSession

if TYPE_CHECKING:
    from ..agent.external import ExternalTurns
    from ..store import SqlStore

Push = Callable[[str, Sequence[Fire]], None]  # raises when the client is gone
LEASE_PREFIX = "mcp:"
RING_HOLD_US = 30_000_000  # a push that starts a turn, with no hook seen since: pushed again after
HOOKS_WAY = (
    "the host's remindkit hooks hand it in at the end of its turn (Stop) or with the next "
    "prompt (UserPromptSubmit)"
)


@dataclass
class Link:
    """How a connected server of the session reaches its host."""

    push: Push | None = None  # the host takes channel events
    hooks: bool = False  # Claude Code's hooks run for the session (they hand fires in)
    rang_us: int = 0  # when fires were last pushed only to start a turn (hooks take them)


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
        self._links: dict[str, Link] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_keys
        self._lock = threading.Lock()

    # -- the MCP server's side -----------------------------------------------------------

    def attach(self, session_id: str, push: Push | None = None, *, hooks: bool = False) -> None:
        """A server of the session is connected here: ``push`` when its host takes
        channel events, ``hooks`` when Claude Code's hooks run for it."""
        with self._lock:
            self._links[session_id] = Link(push, hooks)

    def detach(self, session_id: str) -> None:
        with self._lock:
            self._links.pop(session_id, None)

    def attached(self) -> list[str]:
        with self._lock:
            return list(self._links)

    # -- the engine's side ---------------------------------------------------------------

    def can_deliver(self, session: Session) -> bool:
        with self._lock:
            link = self._links.get(session.id)
            if link is not None:
                if link.push is None:
                    return False
                if not link.hooks or not link.rang_us:
                    return True
                # rung: the hooks of the turn it started take the fires; ring again once
                # a hook has been through the session since (or the host never took it)
                touched = session.last_active_at is not None and (
                    to_us(session.last_active_at) > link.rang_us
                )
                return touched or now_us(self.clock) - link.rang_us >= RING_HOLD_US
        return self._can_resume(session)

    def _can_resume(self, session: Session) -> bool:
        return (
            bool(session.config.get("argv"))
            and self.command.why_not(session) is None
            and not self._connected_elsewhere(session.id)
        )

    def claims_turn(self, session: Session) -> bool:
        """A turn is claimed in the store, except a push to a client connected to this
        process (the session's connection lease keeps every other engine out)."""
        with self._lock:
            return session.id not in self._links

    def fresh_differs(self, session: Session) -> bool:
        """Its resume command needs a ``fresh_argv`` of its own."""
        return fresh_argv_differs(session)

    def why_not(self, session: Session) -> str:
        with self._lock:
            link = self._links.get(session.id)
            hooks = link.hooks if link is not None else bool(session.config.get("hooks"))
            rang = link is not None and link.rang_us > 0
        if link is None and session.config.get("argv"):
            later = self.command.why_not(session)
            if later is not None:
                return later
        if link is not None or self._connected_elsewhere(session.id):
            if hooks:
                pushed = "; it was pushed as a channel event too" if rang else ""
                return f"{HOOKS_WAY}{pushed}"
            return (
                f"the MCP client of session {session.id} is connected but takes no channel "
                "events and runs no remindkit hooks: the fire waits; install the hooks "
                "(remindkit mcp install-claude-code, or the remindkit plugin)"
            )
        return (
            f"no MCP client of session {session.id} is connected; the fires wait until it "
            "connects again (a --resume-command delivers them meanwhile)"
        )

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        with self._lock:
            link = self._links.get(session.id)
        if link is None:
            if self._can_resume(session):
                return self._resume(session, message, fires)
            return TurnResult(False, error=self.why_not(session), busy=True)
        if link.push is None:
            return TurnResult(False, error=self.why_not(session), busy=True)
        with self._lock:
            fresh = [f for f in fires if f.key not in self._seen]
            for f in fresh:
                self._seen[f.key] = None
            while len(self._seen) > self._remember:
                self._seen.popitem(last=False)
            if link.hooks:
                link.rang_us = now_us(self.clock)
        if not fresh:
            if link.hooks:  # pushed before: its hook, or the next prompt's, takes it
                return TurnResult(False, error=self.why_not(session), busy=True)
            return TurnResult(True, duplicate=True)
        if len(fresh) != len(fires):
            from ..protocol import frame_fired

            message = frame_fired(fresh)
        try:
            link.push(message, fresh)
        except Exception as exc:
            with self._lock:
                for f in fresh:
                    self._seen.pop(f.key, None)
            # the client went away mid-push: the fires wait for the next connection
            return TurnResult(
                False, error=f"MCP client of session {session.id} is gone: {exc}"[:300], busy=True
            )
        if link.hooks:  # the push starts a turn; its UserPromptSubmit hook records them
            return TurnResult(
                False,
                error="pushed to Claude Code as a channel event; recorded delivered when its "
                "UserPromptSubmit hook sees it (else the next prompt brings it)",
                busy=True,
            )
        return TurnResult(True)

    def _resume(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        """The resume command, in the session's project folder. A failed run leaves
        the fires waiting (tried again with back-off, and handed in at once when the
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


__all__ = ["LEASE_PREFIX", "Link", "McpSessions", "Push"]
