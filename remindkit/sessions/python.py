"""``python`` sessions: a callable (or an object with ``deliver``) registered by a
live process, such as a notebook kernel.

Only the registering process can deliver to it. While no process has it
registered, fired occurrences wait in the store and are delivered when one
registers it again. A key already taken by this process is never delivered to
it twice (at-least-once delivery, exactly-once at the adapter).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..models import Fire, Session
from .base import TurnResult

Handler = Callable[[str, Sequence[Fire]], Any]


class PythonSessions:
    name = "python"
    shared = False

    def __init__(self, *, remember_keys: int = 100_000) -> None:
        self._handlers: dict[str, Handler] = {}
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remember = remember_keys
        self._lock = threading.Lock()

    def register(self, session_id: str, handler: Handler | Any) -> None:
        fn = getattr(handler, "deliver", handler)
        if not callable(fn):
            raise TypeError("a python session needs a callable or an object with deliver(message, fires)")
        with self._lock:
            self._handlers[session_id] = fn

    def unregister(self, session_id: str) -> None:
        with self._lock:
            self._handlers.pop(session_id, None)

    def registered(self) -> list[str]:
        with self._lock:
            return list(self._handlers)

    def can_deliver(self, session: Session) -> bool:
        with self._lock:
            return session.id in self._handlers

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        with self._lock:
            fn = self._handlers.get(session.id)
            fresh = [f for f in fires if f.key not in self._seen]
            for f in fresh:
                self._seen[f.key] = None
            while len(self._seen) > self._remember:
                self._seen.popitem(last=False)
        if fn is None:
            return TurnResult(False, error=f"session {session.id} is not registered in this process")
        if not fresh:
            return TurnResult(True, reply=None)  # a repeat of keys already taken
        if len(fresh) != len(fires):
            from ..protocol import frame_fired

            message = frame_fired(fresh)
        try:
            reply = fn(message, fresh)
        except Exception as exc:
            with self._lock:
                for f in fresh:
                    self._seen.pop(f.key, None)
            return TurnResult(False, error=f"{type(exc).__name__}: {exc}")
        return TurnResult(True, reply=None if reply is None else str(reply))
