"""In-process events for UIs (tray, notebook) and tests: ``fired``, ``delivered``,
``failed``, ``waiting``, ``alerted``, ``written``. Subscribers run on the emitting
thread and must be quick; an exception in one is logged and never reaches the engine."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

FIRED, DELIVERED, FAILED, WAITING, ALERTED, WRITTEN = (
    "fired",
    "delivered",
    "failed",
    "waiting",
    "alerted",
    "written",  # the engine committed fire times and outcomes (their audit events are in the store)
)


class Events:
    """Subscribers are kept in tuples that are replaced, never changed, so that
    :meth:`emit` (every fire, on the engine's threads) reads them without a lock."""

    def __init__(self) -> None:
        self._subs: dict[str, tuple[Callable[..., Any], ...]] = {}
        self._lock = threading.Lock()  # for subscribe / unsubscribe only

    def subscribe(self, kind: str, fn: Callable[..., Any]) -> Callable[[], None]:
        with self._lock:
            self._subs = {**self._subs, kind: (*self._subs.get(kind, ()), fn)}

        def unsubscribe() -> None:
            with self._lock:
                fns = list(self._subs.get(kind, ()))
                if fn in fns:
                    fns.remove(fn)
                    self._subs = {**self._subs, kind: tuple(fns)}

        return unsubscribe

    def emit(self, kind: str, *args: Any, **kwargs: Any) -> None:
        """Call the subscribers of ``kind`` with the arguments, and those of ``"*"``
        with ``kind`` first."""
        subs = self._subs  # one consistent view
        exact = subs.get(kind, ())
        wildcard = subs.get("*", ())
        if not exact and not wildcard:
            return
        calls = [(fn, args) for fn in exact] + [(fn, (kind, *args)) for fn in wildcard]
        for fn, call_args in calls:
            try:
                fn(*call_args, **kwargs)
            except Exception:
                log.exception("event subscriber failed on %s", kind)
