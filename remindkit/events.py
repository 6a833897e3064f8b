"""In-process events of an engine, for UIs (tray, notebook), the HTTP API's event feed
and tests. Each is a frozen dataclass: subscribe to its class (or to
:class:`EngineEvent` for every one) and the subscriber is called with the event::

    engine.events.subscribe(Fired, lambda e: print(e.fire.key))

The engine emits with the class and its fields, ``events.emit(Fired, fire)``: the
event is made only when someone subscribed to it (a burst fires 10,000 at once).
Subscribers run on the emitting thread and must be quick; an exception in one is
logged and never reaches the engine.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

if TYPE_CHECKING:  # names in annotations only: importing the bus stays cheap (wiring.py)
    from .models import AlertState, Fire

log = logging.getLogger(__name__)
P = ParamSpec("P")
E = TypeVar("E", bound="EngineEvent")


@dataclass(frozen=True)
class EngineEvent:
    """The base of an engine's events (subscribe to it for all of them)."""


@dataclass(frozen=True)
class Fired(EngineEvent):
    """A fire's time came: published first, before its alert and delivery."""

    fire: Fire


@dataclass(frozen=True)
class Alerted(EngineEvent):
    """A fire's alert (alarm, speech) played, or could not."""

    fire: Fire
    state: AlertState


@dataclass(frozen=True)
class Waiting(EngineEvent):
    """Fires wait for their session (busy, or its agent unreachable for now)."""

    session: str
    fires: Sequence[Fire]


@dataclass(frozen=True)
class Delivered(EngineEvent):
    """The session took the fires in a turn."""

    session: str
    fires: Sequence[Fire]
    result: Any  # the adapter's TurnResult (remindkit.sessions.base)


@dataclass(frozen=True)
class Failed(EngineEvent):
    """The fires could not be delivered (``reason`` says why); recorded failed."""

    session: str | None
    fires: Sequence[Fire]
    reason: str | None


@dataclass(frozen=True)
class Written(EngineEvent):
    """The engine committed fire times and outcomes (their audit events are in the store)."""


class Events:
    """Subscribers are kept in tuples that are replaced, never changed, so that
    :meth:`emit` (every fire, on the engine's threads) reads them without a lock."""

    def __init__(self) -> None:
        self._subs: dict[type, tuple[Callable[[Any], object], ...]] = {}
        self._lock = threading.Lock()  # for subscribe / unsubscribe only

    def subscribe(self, kind: type[E], fn: Callable[[E], object]) -> Callable[[], None]:
        """Call ``fn`` with each event of class ``kind`` (:class:`EngineEvent`: all);
        returns the function that unsubscribes."""
        with self._lock:
            self._subs = {**self._subs, kind: (*self._subs.get(kind, ()), fn)}

        def unsubscribe() -> None:
            with self._lock:
                fns = list(self._subs.get(kind, ()))
                if fn in fns:
                    fns.remove(fn)
                    self._subs = {**self._subs, kind: tuple(fns)}

        return unsubscribe

    def emit(self, kind: Callable[P, EngineEvent], /, *args: P.args, **kwargs: P.kwargs) -> None:
        """Make the event ``kind(*args, **kwargs)``, if anyone subscribed to it or to
        every event, and call them with it."""
        subs = self._subs  # one consistent view
        exact = subs.get(kind, ())  # type: ignore[call-overload]
        every = subs.get(EngineEvent, ())
        if not exact and not every:
            return
        event = kind(*args, **kwargs)
        for fn in (*exact, *every):
            try:
                fn(event)
            except Exception:
                log.exception("event subscriber failed on %s", type(event).__name__)


__all__ = [
    "Alerted",
    "Delivered",
    "EngineEvent",
    "Events",
    "Failed",
    "Fired",
    "Waiting",
    "Written",
]
