"""The tray app: an engine that is the preferred alerter, with an icon.

:class:`TrayApp` runs:

* an :class:`~remindkit.engine.Engine` with ``role="tray"`` and alert
  priority 10, so it holds the ``alerter`` lease and other engines (``serve``,
  a notebook kernel) leave alarms and speech to it while it lives; its
  :class:`~remindkit.alerts.local.LocalAlerter` plays them;
* a refresher thread that reads the store every second, and at once when
  another process hints a change (``store.wake``) or this engine fires, and
  redraws what changed: tooltip, badge, menu (an open GTK menu is relabelled in
  place; its shape is rebuilt when it closes);
* the pystray icon on the main thread (required on macOS; fine elsewhere).

Menu clicks run on a worker thread, so a slow store never freezes the menu.
With no display, or no toolkit that works, :func:`run_tray` says so and runs
the engine headless, as ``remindkit serve`` does.

``REMINDKIT_TRAY_STATE=FILE`` makes the app write what it shows (tooltip, and
the live menu as GTK has it, open or not) to FILE as JSON after each redraw:
for tests and bug reports.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from remindkit import events as ev
from remindkit.alerts.local import LocalAlerter, default_alerter
from remindkit.alerts.notify import pystray_fallback
from remindkit.alerts.quiet import Switches
from remindkit.clock import Clock, to_us
from remindkit.errors import RemindkitError
from remindkit.models import LIVE_STATES
from remindkit.store.reports import stats_text
from remindkit.wakeup import Waiter
from remindkit.wiring import Graph

from . import backend as bk
from .icon import Badge, draw_icon
from .menu import Actions, build_menu, top_labels
from .view import View, build_view, reminder_name

log = logging.getLogger(__name__)
TRAY_PRIORITY = 10
RECENT_FIRES = 5
STATS_EVERY_S = 10.0  # the menu's fire counts are read at most this often


class TrayApp:
    def __init__(
        self,
        graph: Graph,
        *,
        alerter: LocalAlerter | None = None,
        backend: bk.Backend | None = None,
        state_path: str | Path | None = None,
        refresh_s: float = 1.0,
    ) -> None:
        graph = graph.for_surface("tray")
        self.store = graph.store
        self.settings = graph.settings
        self.clock: Clock = graph.clock
        self.api = graph.api
        self.alerter = alerter if alerter is not None else default_alerter()
        self.engine = graph.engine(alerter=self.alerter, role="tray", alert_priority=TRAY_PRIORITY)
        self.switches = Switches(self.store.coordination)
        self.backend = backend
        self.refresh_s = refresh_s
        state = state_path or os.environ.get("REMINDKIT_TRAY_STATE")
        self.state_path = Path(state) if state else None
        self.icon: Any = None
        self.view: View | None = None
        self._names: dict[str, str] = {}
        self._badge: Badge | None = None
        self._title: str | None = None
        self._menu_shape: Any = None
        self._stats_cache: tuple[int, str] | None = None
        self._engine_running = False
        self._stop = threading.Event()
        self._waiter = Waiter(stop=self._stop)  # kicks, the store's hints, the next second
        self._work = ThreadPoolExecutor(1, thread_name_prefix="remindkit-tray-action")
        self._unsubscribe = [
            self.engine.events.subscribe(kind, lambda _event: self.kick())
            for kind in (ev.Fired, ev.Delivered, ev.Failed, ev.Waiting, ev.Alerted)
        ]

    # -- what to show --------------------------------------------------------------------

    def read_view(self) -> View:
        now = self.clock.now()
        reminders = self.api.list(states=LIVE_STATES, order="next")
        fires = self.store.reminders.history(limit=RECENT_FIRES)
        for occ in fires:
            if occ.reminder_id not in self._names and all(
                r.id != occ.reminder_id for r in reminders
            ):
                rem = self.store.reminders.get_reminder(occ.reminder_id)
                self._names[occ.reminder_id] = reminder_name(rem) if rem else occ.reminder_id
        note = None
        if self.backend is not None and not self.backend.has_menu:
            note = "menu unavailable (install PyGObject)"
        return build_view(
            reminders,
            fires,
            now=now,
            paused_all=self.api.paused_all,
            muted=self.switches.muted,
            sounding=self.alerter.sounding,
            names=self._names,
            tz=self.settings.tz,
            note=note,
            stats=self._stats(to_us(now)),
            armed=self._engine_running or self.api.armed(),
        )

    def _stats(self, now_us: int) -> str | None:
        """The last day's counts, read at most every STATS_EVERY_S (a scan of the history)."""
        if self._stats_cache is None or now_us - self._stats_cache[0] >= STATS_EVERY_S * 1e6:
            try:
                data = self.store.reports.fire_stats(since_us=now_us - 86_400_000_000)
                self._stats_cache = (now_us, stats_text(data["all"]))
            except Exception as exc:  # the menu goes on without them
                log.debug("stats not read: %s", exc)
                return None if self._stats_cache is None else self._stats_cache[1]
        return self._stats_cache[1]

    def show(self, view: View) -> None:
        """Bring the icon up to date with ``view`` (GTK work happens on its loop)."""
        self.view = view
        if self.icon is None:
            self._write_state(view, None)
            return
        if self.backend is not None and self.backend.gtk:
            bk.on_ui(lambda: self._show_now(view))
        else:
            self._show_now(view)

    def _show_now(self, view: View) -> None:
        icon = self.icon
        if icon is None:
            return
        try:
            if view.tooltip != self._title:
                icon.title = view.tooltip
                self._title = view.tooltip
            if view.badge != self._badge:
                icon.icon = draw_icon(view.badge)
                self._badge = view.badge
            rebuilt = self.backend is not None and self.backend.has_menu and self._show_menu(view)
            if rebuilt and self.backend is not None and self.backend.gtk:
                bk.on_ui(lambda: self._write_state(view, icon))  # after pystray's own idle rebuild
            else:
                self._write_state(view, icon)
        except Exception:
            log.exception("tray redraw failed")

    def _show_menu(self, view: View) -> bool:
        """Update the menu; True when it was rebuilt."""
        shape = (
            tuple((e.id, e.paused) for e in view.entries),
            view.paused_all,
            view.muted,
            view.sounding,
            view.fires,
        )
        gtk = self.backend is not None and self.backend.gtk
        handle = bk.gtk_menu(self.icon) if gtk else None
        if shape != self._menu_shape:
            if gtk and bk.menu_is_open(handle):
                return False  # rebuilt once it closes; never pull a menu from under the pointer
            assert self.backend is not None
            self.icon.menu = build_menu(
                self.backend.menu_cls, self.backend.item_cls, view, self._actions()
            )
            self._menu_shape = shape
            return True
        if gtk:
            bk.relabel(handle, top_labels(view))
        else:
            self.icon.update_menu()
        return False

    def _write_state(self, view: View, icon: Any) -> None:
        if self.state_path is None:
            return
        state: dict[str, Any] = {
            "pid": os.getpid(),
            "engine": self.engine.id,
            "backend": self.backend.name if self.backend else None,
            "tooltip": view.tooltip,
            "badge": view.badge.__dict__,
            "view_menu": top_labels(view),
            "alerter": self.engine.is_alerter,
        }
        if icon is not None and self.backend is not None and self.backend.gtk:
            handle = bk.gtk_menu(icon)
            labels = bk.menu_labels(handle)
            state["menu_open"] = bk.menu_is_open(handle)
            state["menu"] = labels
            state["submenus"] = {
                lab: bk.submenu_labels(handle, i) for i, lab in enumerate(labels) if lab
            }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, default=str))
        os.replace(tmp, self.state_path)

    # -- menu actions --------------------------------------------------------------------

    def _actions(self) -> Actions:
        now = lambda: to_us(self.clock.now())  # noqa: E731
        return Actions(
            snooze=lambda rid, d: self._do(f"snooze {rid}", lambda: self.api.snooze(rid, d)),
            cancel=lambda rid: self._do(
                f"cancel {rid}", lambda: self.api.cancel([rid], reason="cancelled from the tray")
            ),
            resume=lambda rid: self._do(f"resume {rid}", lambda: self.api.resume([rid])),
            pause_all=lambda: self._do("pause all", self.api.pause_all),
            resume_all=lambda: self._do("resume all", self.api.resume_all),
            set_muted=lambda m: self._do(
                "mute" if m else "unmute", lambda: self.switches.set_muted(m, now_us=now())
            ),
            stop_sound=self.alerter.stop_sound,
            quit=self.quit,
        )

    def _do(self, what: str, fn: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                fn()
                log.info("tray: %s", what)
            except RemindkitError as exc:
                log.warning("tray: %s refused: %s", what, exc)
            except Exception:
                log.exception("tray: %s failed", what)
            self.kick()

        self._work.submit(run)

    # -- the refresher -------------------------------------------------------------------

    def kick(self) -> None:
        """Redraw soon (from any thread)."""
        self._waiter.poke()

    def _refresh_loop(self) -> None:
        """Redraw, then wait for a kick, another process's write, or the next whole
        second of the clock (so countdowns tick evenly)."""

        def round_() -> None:
            try:
                self.show(self.read_view())
            except Exception as exc:
                log.warning("tray: cannot read the store (%s)", exc)
            frac = self.clock.now().microsecond / 1e6
            self._waiter.wait(max(0.05, self.refresh_s - frac))

        with self._waiter.listening(getattr(self.store, "wake", None)):
            self._waiter.loop(
                round_,
                on_error=lambda: log.exception("tray: refresh failed; going on"),
                pause=self.refresh_s,
            )

    # -- running -------------------------------------------------------------------------

    def run(self) -> int:
        """Show the icon until Quit or a signal; the engine runs meanwhile."""
        assert self.backend is not None
        view = self.read_view()
        self.view = view
        b = self.backend
        self.icon = b.icon_cls(
            "remindkit",
            draw_icon(view.badge),
            view.tooltip,
            build_menu(b.menu_cls, b.item_cls, view, self._actions()) if b.has_menu else None,
        )
        self._title, self._badge = view.tooltip, view.badge
        if (
            self.alerter.notifier is not None
            and self.alerter.notifier.fallback is None
            and getattr(self.icon, "HAS_NOTIFICATION", False)
        ):
            self.alerter.notifier.fallback = pystray_fallback(self.icon, b.name)
        if not b.has_menu:
            log.warning("the %s tray backend has no menu; install PyGObject for one", b.name)
        self.engine.start()
        self._engine_running = True  # this app's own engine: the store is armed while it runs
        refresher = threading.Thread(
            target=self._refresh_loop, name="remindkit-tray-refresh", daemon=True
        )

        def setup(icon: Any) -> None:
            icon.visible = True

        self._install_signals(lambda: self.quit())
        refresher.start()  # not in setup: the xorg backend calls setup only once the icon docked
        try:
            self.icon.run(setup)
        except Exception as exc:
            if not self._stop.is_set():
                raise
            # GTK backends without a notification service raise at shutdown (ServiceUnknown)
            log.debug("the icon raised while stopping: %s", exc)
        finally:
            self._stop.set()
            self.kick()
            if refresher.is_alive():
                refresher.join(5)
            self.close()
        return 0

    def run_headless(self, stop: threading.Event | None = None) -> int:
        """The engine and its alerts without an icon, until ``stop`` or a signal."""
        stop = stop or self._stop

        def on_signal() -> None:
            stop.set()
            self.engine.poke()

        self._install_signals(on_signal)
        try:
            self._engine_running = True
            self.engine.run(stop)
        finally:
            self.close()
        return 0

    def quit(self) -> None:
        self._stop.set()
        if self.icon is not None:
            self.icon.stop()
        self.engine.poke()

    def close(self) -> None:
        for unsubscribe in self._unsubscribe:  # the graph's event bus outlives this app
            unsubscribe()
        self.engine.stop()
        self._work.shutdown(wait=True)
        self.alerter.close()
        self.engine.close()
        self._waiter.close()

    def _install_signals(self, handler: Callable[[], Any]) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda _s, _f: handler())


# -- entry points -------------------------------------------------------------------------


def run_tray(graph: Graph, out: TextIO, *, headless: bool = False, verbose: bool = False) -> int:
    """``remindkit tray``: the icon where a desktop is there, else the headless engine."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    backend = None
    why = "--headless"
    if not headless:
        try:
            backend = bk.load_backend()
        except bk.TrayUnavailable as exc:
            why = exc.message
    app = TrayApp(graph, backend=backend)
    if backend is None:
        out.write(
            f"remindkit tray: {why}; running headless like `remindkit serve` "
            f"(engine {app.engine.id}; alarms, speech and notifications still work)\n"
        )
        out.flush()
        return app.run_headless()
    out.write(f"remindkit tray: {backend.name} icon, engine {app.engine.id} on {graph.store.url}\n")
    out.flush()
    try:
        return app.run()
    except Exception as exc:  # the toolkit failed at run time: keep the reminders going
        out.write(
            f"remindkit tray: the {backend.name} icon failed ({type(exc).__name__}: {exc}); "
            "running headless\n"
        )
        out.flush()
        log.debug("tray failure", exc_info=True)
        headless_app = TrayApp(graph)
        return headless_app.run_headless()


def main(argv: Sequence[str] | None = None) -> int:
    """``remindkit-tray [--db URL] [--headless] [-v]``: the same as ``remindkit tray``."""
    from remindkit.cli.main import main as cli_main

    return cli_main(["tray", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
