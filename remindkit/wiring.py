"""The objects a running process is made of, put together in one place.

Every surface (the command line, the HTTP API, the MCP server, the Telegram bridge,
a notebook kernel, the tray, a chat) works with the same parts: the settings, a
clock, the store, the in-process event bus, the reminders API over the store, the
session adapters, and an engine made of them. :func:`build` fills in what is not
given, once, the same way for all of them::

    >>> graph = build()                                   # doctest: +SKIP
    >>> graph.api.add("stretch", in_="5m")                # doctest: +SKIP
    >>> engine = graph.engine(role="serve")               # doctest: +SKIP

The lower layers' constructors (:class:`~remindkit.engine.Engine`,
:class:`~remindkit.reminders.Reminders`, ...) keep their optional parameters for
tests; surfaces go through here. Nothing heavy is imported until :func:`build`
runs, so the command line can import this module cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .audit import Surface
from .clock import Clock, SystemClock
from .events import Events
from .settings import Settings

if TYPE_CHECKING:
    from .engine import Engine
    from .reminders import Reminders
    from .sessions.registry import Adapters
    from .store import SqlStore


@dataclass(frozen=True)
class Graph:
    """One process's parts. ``adapters``: when given, every engine of the graph runs
    turns through these; when ``None``, each engine gets the default set for this
    store (:func:`~remindkit.sessions.registry.default_adapters`)."""

    settings: Settings
    clock: Clock
    store: SqlStore
    events: Events
    api: Reminders
    adapters: Adapters | None = None

    def engine(
        self,
        *,
        role: str = "engine",
        alerter: Any = None,
        alert_priority: int = 0,
        can_alert: bool = True,
        inline: bool = False,
        engine_id: str | None = None,
    ) -> Engine:
        """An engine over this graph's store, clock, settings and events (not started)."""
        from .engine import Engine

        return Engine(
            self.store,
            clock=self.clock,
            settings=self.settings,
            adapters=self.adapters,
            alerter=alerter,
            events=self.events,
            engine_id=engine_id,
            role=role,
            alert_priority=alert_priority,
            can_alert=can_alert,
            inline=inline,
        )

    def for_surface(self, surface: Surface | str, *, settings: Settings | None = None) -> Graph:
        """The same parts with the reminders API of another surface (the name its
        changes are recorded under) and, when given, other settings."""
        from .reminders import Reminders

        settings = settings or self.settings
        api = Reminders(self.store, clock=self.clock, settings=settings, surface=surface)
        return replace(self, settings=settings, api=api)

    def close(self) -> None:
        self.store.close()


def settings_or_env(settings: Settings | None = None, store: SqlStore | None = None) -> Settings:
    """``settings``, else the store's, else the environment's."""
    if settings is not None:
        return settings
    if store is not None:
        return store.settings
    return Settings.from_env()


def build(
    settings: Settings | None = None,
    *,
    db: str | None = None,
    store: SqlStore | None = None,
    clock: Clock | None = None,
    events: Events | None = None,
    adapters: Adapters | None = None,
    api: Reminders | None = None,
    surface: Surface | str = Surface.API,
) -> Graph:
    """A process's graph. What is not given: the settings from ``store`` or the
    environment, the system clock, the store at ``db`` (else the configured URL)
    opened and migrated, a new event bus, and the reminders API of ``surface``.
    ``api``: an API that exists already; its store, clock and settings are the
    graph's unless given."""
    if api is not None:
        store = store or api.store
        clock = clock or api.clock
        settings = settings or api.settings
    settings = settings_or_env(settings, store)
    if store is None:
        from .store import open_store

        store = open_store(db, settings=settings)
    clock = clock or SystemClock()
    if api is None:
        from .reminders import Reminders

        api = Reminders(store, clock=clock, settings=settings, surface=surface)
    return Graph(
        settings=settings,
        clock=clock,
        store=store,
        events=events if events is not None else Events(),
        api=api,
        adapters=adapters,
    )


__all__ = ["Graph", "build", "settings_or_env"]
