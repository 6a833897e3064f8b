"""The composition root: the objects a running process is made of, put together in
one place (``remindkit.build()``).

Every surface (the command line, the HTTP API, the MCP server, the Telegram bridge,
a notebook kernel, the tray, a chat, the demo) works with the same parts: the
settings, a clock, the store, the in-process event bus, the reminders API over the
store, the session adapters, and engines made of them. :func:`build` fills in what
is not given, once, the same way for all of them::

    >>> import remindkit as rk
    >>> graph = rk.build()                         # the configured store  # doctest: +SKIP
    >>> graph.api.create("stretch", session="s1", in_="5m")               # doctest: +SKIP
    >>> engine = graph.engine(alerter="local").start()                    # doctest: +SKIP

:meth:`Graph.engine` is the one place an engine is assembled: over the graph's
store, clock, settings and events, with session adapters whose agents act through
the graph's reminders API, and with its alerter attached (the alerter reads mute,
quiet hours and voice from the store, and snoozes through the API).

The lower layers' constructors (:class:`~remindkit.engine.Engine`,
:class:`~remindkit.reminders.Reminders`, ...) keep their optional parameters for
tests; surfaces go through here. Nothing heavy is imported until :func:`build`
runs, so the command line can import this module cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, cast

from .audit import Surface
from .clock import Clock, SystemClock
from .events import Events
from .settings import Settings

if TYPE_CHECKING:
    from .alerts import Alerter
    from .engine import Engine
    from .reminders import Reminders
    from .sessions.registry import Adapters
    from .store import SqlStore

LOCAL = "local"  # Graph.engine(alerter=LOCAL): this machine's notification, alarm and speech


@dataclass(frozen=True)
class Graph:
    """One process's parts. ``adapters``: when given, every engine of the graph runs
    turns through these; when ``None``, each engine gets the default set
    (:func:`~remindkit.sessions.registry.default_adapters`) over the graph's API."""

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
        alerter: Alerter | Literal["local"] | None = None,
        alert_priority: int = 0,
        can_alert: bool | None = None,
        inline: bool = False,
        engine_id: str | None = None,
    ) -> Engine:
        """An engine over this graph's parts (not started).

        ``alerter``: what sounds the reminders that ask for an alarm or speech:
        ``"local"`` (this machine's notification, alarm and speech, configured from
        the environment; none where they cannot load), an alerter object, or
        ``None`` (this engine leaves those reminders to an engine that alerts). An
        alerter with an ``attach(engine, api)`` method is attached to the engine
        here. ``can_alert``: whether the engine may hold the alerter lease
        (default: it has an alerter)."""
        from .engine import Engine
        from .sessions.registry import default_adapters

        chosen: Alerter | None = (
            local_alerter() if alerter == LOCAL else cast("Alerter | None", alerter)
        )
        engine = Engine(
            self.store,
            clock=self.clock,
            settings=self.settings,
            adapters=self.adapters or default_adapters(api=self.api),
            alerter=chosen,
            events=self.events,
            engine_id=engine_id,
            role=role,
            alert_priority=alert_priority,
            can_alert=chosen is not None if can_alert is None else can_alert,
            inline=inline,
        )
        attach = getattr(chosen, "attach", None)
        if attach is not None:
            # a notification's Snooze is the person's, at the desktop: the tray's surface
            attach(engine, self.reminders(Surface.TRAY))
        return engine

    def reminders(self, surface: Surface | str, *, settings: Settings | None = None) -> Reminders:
        """The reminders API over these parts as ``surface`` (the name its changes are
        recorded under), with other settings when given."""
        from .reminders import Reminders

        return Reminders(
            self.store, clock=self.clock, settings=settings or self.settings, surface=surface
        )

    def for_surface(self, surface: Surface | str, *, settings: Settings | None = None) -> Graph:
        """The same parts with the reminders API of another surface and, when given,
        other settings."""
        settings = settings or self.settings
        return replace(self, settings=settings, api=self.reminders(surface, settings=settings))

    def close(self) -> None:
        self.store.close()


def local_alerter() -> Any:
    """This machine's alerter (notification, alarm, speech: ``remindkit alerts``), or
    None where its modules cannot load."""
    try:
        from .alerts.local import default_alerter
    except ImportError:
        return None
    return default_alerter()


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
    environment (``REMINDKIT_*``), the system clock, the store at ``db`` (else the
    configured URL) opened and migrated, a new event bus, and the reminders API of
    ``surface``. ``api``: an API that exists already; its store, clock and settings
    are the graph's unless given."""
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


__all__ = ["LOCAL", "Graph", "build", "local_alerter", "settings_or_env"]
