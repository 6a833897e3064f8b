"""``python`` sessions: a callable (or an object with ``deliver``) registered by a
live process, such as a notebook kernel.

Only the registering process can deliver to it. While no process has it
registered, fired occurrences wait in the store and are delivered when one
registers it again. A key already taken by this process is never delivered to
it twice (at-least-once delivery, exactly-once at the adapter); with ``turns``
(an :class:`~remindkit.agent.external.ExternalTurns`) keys are also taken in
the store once the handler has returned, so no process hands a key to the
session again after a finished turn, and the tags of the returned reply are
carried out for the session.

A handler that keeps its own transcript (``owns_transcript = True``, as
:class:`~remindkit.agent.loop.Conversation`) gets the fires as they are and
does all of that itself. A handler that raises an error with code
``session_busy`` leaves the fires waiting.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..models import Fire, Session
from .base import TurnResult

if TYPE_CHECKING:
    from ..agent.external import ExternalTurns

Handler = Callable[[str, Sequence[Fire]], Any]


class PythonSessions:
    name = "python"
    shared = False

    def __init__(self, *, remember_keys: int = 100_000, turns: ExternalTurns | None = None) -> None:
        self._handlers: dict[str, tuple[Handler, bool]] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_keys
        self._lock = threading.Lock()
        self.turns = turns

    def register(self, session_id: str, handler: Handler | Any) -> None:
        fn = getattr(handler, "deliver", handler)
        if not callable(fn):
            raise TypeError(
                "a python session needs a callable or an object with deliver(message, fires)"
            )
        owns = bool(getattr(handler, "owns_transcript", False))
        with self._lock:
            self._handlers[session_id] = (fn, owns)

    def unregister(self, session_id: str) -> None:
        with self._lock:
            self._handlers.pop(session_id, None)

    def registered(self) -> list[str]:
        with self._lock:
            return list(self._handlers)

    def claims_turn(self, session: Session) -> bool:
        return False  # only this process can deliver there: no store claim

    def fresh_differs(self, session: Session) -> bool:
        return False  # a python session is one callable: a fresh one would call it again

    def can_deliver(self, session: Session) -> bool:
        with self._lock:
            return session.id in self._handlers

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        with self._lock:
            entry = self._handlers.get(session.id)
            fresh = [f for f in fires if f.key not in self._seen]
            for f in fresh:
                self._seen[f.key] = None
            while len(self._seen) > self._remember:
                self._seen.popitem(last=False)
        if entry is None:
            self._forget(fresh)
            return TurnResult(
                False, error=f"session {session.id} is not registered in this process"
            )
        fn, owns = entry
        if not fresh:
            return TurnResult(True, reply=None, duplicate=True)  # a repeat of keys already taken
        external = self.turns is not None and not owns
        handover = None
        if external:
            assert self.turns is not None
            whole = message if len(fresh) == len(fires) else None  # delivery framed these
            handover = self.turns.begin(session.id, fresh, framed=whole)
            if handover is None:
                return TurnResult(True, reply=None, duplicate=True)
            message, fresh = handover.message, list(handover.fires)
        elif len(fresh) != len(fires):
            from ..protocol import frame_fired

            message = frame_fired(fresh)
        try:
            reply = fn(message, fresh)
        except Exception as exc:
            if getattr(exc, "code", None) == "session_busy" and not external:
                self._forget(fresh)
                return TurnResult(False, error=str(exc), busy=True)
            if not external:
                self._forget(fresh)
            return TurnResult(
                False,
                error=f"{type(exc).__name__}: {exc}",
                instant=bool(getattr(exc, "instant", False)),
            )
        if isinstance(getattr(reply, "ok", None), bool) and hasattr(reply, "text"):
            # a Conversation's deliver() answers with its TurnReply rather than raising
            if not reply.ok:
                if not external:
                    self._forget(fresh)
                return TurnResult(
                    False,
                    error=f"{getattr(reply, 'code', None) or 'error'}: {reply.error}",
                    instant=bool(getattr(reply, "instant", False)),
                )
            reply = reply.text
        text = None if reply is None else str(reply)
        if handover is not None and self.turns is not None:
            self.turns.end(session.id, handover, text)
        return TurnResult(True, reply=text)

    def _forget(self, fires: Sequence[Fire]) -> None:
        with self._lock:
            for f in fires:
                self._seen.pop(f.key, None)


__all__ = ["Handler", "PythonSessions"]
