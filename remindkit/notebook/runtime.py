"""What a kernel keeps per store: an engine, the browser alerter, the widget hub.

:func:`runtime_for` gives the one :class:`KernelRuntime` of a store in this
kernel, made and started on first use and stopped when the kernel exits. Its
engine fires reminders and runs fired turns for the chats of this kernel
(``python`` sessions registered with it) and for ``openai`` sessions. It wants
the alerter lease at :data:`NOTEBOOK_ALERT_PRIORITY`: above a headless
``remindkit serve`` engine, below the tray (:data:`TRAY_ALERT_PRIORITY`). So
while the tray runs, this engine leaves alerting reminders to it (the tray
plays the alarm and speaks); when no tray runs, it alerts through the panels'
browser (:class:`~remindkit.notebook.alerts.BrowserAlerter`). While no panel is
shown it has nowhere to play, so it neither takes nor keeps the lease: a
``serve`` engine sounds those alerts instead of them being recorded ``muted``.

Needs no ipywidgets: ``rk.chat`` works in any Python process.
"""

from __future__ import annotations

import atexit
import logging
import threading

from .. import events as ev
from ..clock import Clock, now_us
from ..engine.core import ALERTER
from ..settings import Settings
from ..store import SqlStore, open_store
from ..wiring import build, settings_or_env
from .alerts import BrowserAlerter
from .hub import Hub

log = logging.getLogger(__name__)
NOTEBOOK_ALERT_PRIORITY = 5
TRAY_ALERT_PRIORITY = 10  # the tray app's priority: it is the preferred alerter


class KernelRuntime:
    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        live: bool = True,
        inline: bool = False,
    ) -> None:
        self.graph = build(settings, store=store, clock=clock, surface="notebook")
        self.store = store
        self.clock: Clock = self.graph.clock
        self.settings = self.graph.settings
        self.alerter = BrowserAlerter()
        self.hub = Hub(store, live=live)
        self.engine = self.graph.engine(  # a panel shown or gone: the alerter lease follows
            alerter=self.alerter,
            role="notebook",
            alert_priority=NOTEBOOK_ALERT_PRIORITY,
            inline=inline,
        )
        self.engine.events.subscribe(ev.EngineEvent, self._on_event)
        self._closed = False

    def start(self) -> KernelRuntime:
        self.engine.start()
        return self

    def _on_event(self, event: ev.EngineEvent) -> None:
        if isinstance(event, (ev.Fired, ev.Delivered, ev.Failed, ev.Waiting, ev.Alerted)):
            self.hub.refresh()

    def alerts_where(self) -> str:
        """Who plays alarms now: ``browser`` (this engine), ``tray``, another
        engine (its role), or ``nobody yet``."""
        try:
            holder = self.store.coordination.lease_holder(ALERTER, now_us=now_us(self.clock))
        except Exception:
            return "unknown"
        if holder is None:
            return "nobody yet"
        if holder[0] == self.engine.id:
            return "browser"
        if holder[1] >= TRAY_ALERT_PRIORITY:
            return "tray"
        return f"another engine ({holder[0]})"

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.engine.stop()
            self.engine.close()
        except Exception:
            log.exception("stopping the notebook engine failed")
        self.hub.close()


_runtimes: dict[str, KernelRuntime] = {}
_stores: dict[str, SqlStore] = {}
_lock = threading.RLock()
_exit_hook = False


def open_default_store(db: str | None = None, *, settings: Settings | None = None) -> SqlStore:
    """The store at ``db`` (or the configured default), opened once per kernel."""
    settings = settings_or_env(settings)
    url = db or settings.url
    with _lock:
        store = _stores.get(url)
        if store is None:
            store = open_store(url, settings=settings)
            _stores[url] = store
        return store


def runtime_for(
    store: SqlStore | None = None, *, db: str | None = None, settings: Settings | None = None
) -> KernelRuntime:
    """This kernel's runtime for ``store`` (by URL), started once, stopped at exit."""
    global _exit_hook
    with _lock:
        if store is None:
            store = open_default_store(db, settings=settings)
        rt = _runtimes.get(store.url)
        if rt is None:
            rt = KernelRuntime(store, settings=settings).start()
            _runtimes[store.url] = rt
            if not _exit_hook:
                atexit.register(shutdown)
                _exit_hook = True
        return rt


def shutdown() -> None:
    """Stop every engine and hub of this kernel and close the stores it opened."""
    with _lock:
        runtimes = list(_runtimes.values())
        stores = list(_stores.values())
        _runtimes.clear()
        _stores.clear()
    for rt in runtimes:
        rt.close()
    for store in stores:
        try:
            store.close()
        except Exception:
            log.exception("closing the store failed")


__all__ = [
    "NOTEBOOK_ALERT_PRIORITY",
    "TRAY_ALERT_PRIORITY",
    "KernelRuntime",
    "open_default_store",
    "runtime_for",
    "shutdown",
]
