"""The one thread that writes a store's widget state in this kernel.

traitlets has no locking, so every change to a widget's synced state (and every
custom message to the browser) goes through one thread per store, the hub:

* views (panels) register with it and are refreshed from the store when a
  wake-up hint arrives (a write by any process on this machine: the tray, the
  CLI, another kernel, this kernel's engine), when something asks for it (after
  a turn, after a click), and at least every ``interval_s`` (1 s) in case a hint
  was lost;
* :meth:`Hub.post` runs a function on the hub thread (a status text, a custom
  message); click handlers (on the kernel's main thread, or a subshell thread
  in JupyterLab 4.6 with ipykernel 7) change the store and only post.

The hub thread keeps running while a cell blocks the kernel, so pills appear,
chats update and alerts play during a long cell. A hub made with
``live=False`` (tests) has no thread: ``post`` and ``refresh`` run at once.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ..store import SqlStore
from ..wakeup import Waiter

log = logging.getLogger(__name__)


class View(Protocol):
    def refresh(self) -> None:
        """Read the store and update the widget state (called on the hub thread)."""
        ...


class Hub:
    def __init__(self, store: SqlStore, *, interval_s: float = 1.0, live: bool = True) -> None:
        self.store = store
        self.interval_s = interval_s
        self.live = live
        self._views: weakref.WeakSet[Any] = weakref.WeakSet()
        self._jobs: deque[Callable[[], None]] = deque()
        self._waiters: list[threading.Event] = []  # set after the next refresh
        self._lock = threading.Lock()
        self._dirty = False
        self._stop = threading.Event()
        self._waiter = Waiter(stop=self._stop)  # pokes, the store's hints, the interval
        self._closed = False
        self._thread: threading.Thread | None = None
        self._errors: dict[int, str] = {}
        self.refreshes = 0

    # -- views ---------------------------------------------------------------------------

    def add(self, view: View) -> None:
        with self._lock:
            self._views.add(view)
        if self.live:
            self._start()
        self.refresh()

    def remove(self, view: View) -> None:
        with self._lock:
            self._views.discard(view)

    # -- asking for work -----------------------------------------------------------------

    def post(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the hub thread (at once when called there, or without a thread)."""
        if self._closed:
            return
        if not self._running() or threading.current_thread() is self._thread:
            self._call(fn)
            return
        with self._lock:
            self._jobs.append(fn)
        self._poke()

    def refresh(self) -> None:
        """Refresh every view soon (at once without a thread)."""
        if self._closed:
            return
        if not self._running():
            self._refresh_all()
            return
        with self._lock:
            self._dirty = True
        self._poke()

    def sync(self, timeout: float = 10.0) -> bool:
        """Refresh every view and wait until that is done (notebook cells, tests)."""
        if not self._running() or threading.current_thread() is self._thread:
            self._refresh_all()
            return True
        done = threading.Event()
        with self._lock:
            self._dirty = True
            self._waiters.append(done)
        self._poke()
        return done.wait(timeout)

    # -- the thread ----------------------------------------------------------------------

    def _running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="remindkit-notebook-hub", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        waiter = self._waiter
        last = 0.0

        def round_() -> None:
            nonlocal last
            if waiter.wait(max(0.0, last + self.interval_s - time.monotonic())):
                with self._lock:
                    self._dirty = True
            if self._stop.is_set():
                return
            with self._lock:
                jobs = list(self._jobs)
                self._jobs.clear()
                waiters, self._waiters = self._waiters, []
                dirty, self._dirty = self._dirty, False
            for job in jobs:
                self._call(job)
            if dirty or waiters or time.monotonic() >= last + self.interval_s:
                self._refresh_all()
                last = time.monotonic()
            for done in waiters:
                done.set()

        with waiter.listening(getattr(self.store, "wake", None)):
            waiter.loop(
                round_,
                on_error=lambda: log.exception("notebook hub round failed; going on"),
                pause=self.interval_s,
            )

    def _refresh_all(self) -> None:
        with self._lock:
            views = list(self._views)
        for view in views:
            try:
                view.refresh()
                self._errors.pop(id(view), None)
            except Exception as exc:
                text = f"{type(exc).__name__}: {exc}"
                if self._errors.get(id(view)) != text:  # say it once, not every second
                    self._errors[id(view)] = text
                    log.warning("notebook view refresh failed: %s", text)
        self.refreshes += 1

    def _call(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:
            log.exception("notebook widget update failed")

    def _poke(self) -> None:
        self._waiter.poke()  # nothing once closed: the descriptors may be someone else's by now

    def close(self) -> None:
        if self._closed:
            return
        self._stop.set()
        self._poke()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        self._thread = None
        self._closed = True
        with self._lock:
            self._views = weakref.WeakSet()
        self._waiter.close()


__all__ = ["Hub", "View"]
