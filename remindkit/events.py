"""In-process events for UIs (tray, notebook) and tests: ``fired``, ``delivered``,
``failed``, ``changed``. Subscribers run on the emitting thread and must be quick;
an exception in one is logged and never reaches the engine."""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

FIRED, DELIVERED, FAILED, WAITING, CHANGED, ALERTED = (
    "fired",
    "delivered",
    "failed",
    "waiting",
    "changed",
    "alerted",
)


class Events:
    def __init__(self) -> None:
        self._subs: dict[str, list[Callable[..., Any]]] = defaultdict(list)
        self._lock = threading.Lock()

    def subscribe(self, kind: str, fn: Callable[..., Any]) -> Callable[[], None]:
        with self._lock:
            self._subs[kind].append(fn)

        def unsubscribe() -> None:
            with self._lock:
                if fn in self._subs[kind]:
                    self._subs[kind].remove(fn)

        return unsubscribe

    def emit(self, kind: str, *args: Any, **kwargs: Any) -> None:
        """Call the subscribers of ``kind`` with the arguments, and those of ``"*"``
        with ``kind`` first."""
        with self._lock:
            exact = list(self._subs.get(kind, ()))
            wildcard = list(self._subs.get("*", ()))
        calls = [(fn, args) for fn in exact] + [(fn, (kind, *args)) for fn in wildcard]
        for fn, call_args in calls:
            try:
                fn(*call_args, **kwargs)
            except Exception:
                log.exception("event subscriber failed on %s", kind)
