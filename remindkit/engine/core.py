"""The engine: claim what comes due, fire it on time, hand it to delivery.

:meth:`Engine.tick` is one step at a given moment and returns when the next
step is wanted; tests call it with a :class:`~remindkit.clock.FakeClock`. The
thread around it (:meth:`Engine.run`) only waits: until the next due time, a
wake-up hint from another process (or this one), or the cap (30 s), so a
suspend or a clock jump costs at most the cap. There is no busy polling.

Reminders due within the look-ahead (250 ms) are claimed ahead of time, so the
database's latency does not add to lateness: at the due instant the engine
only hands the claimed occurrence to delivery. Claims carry a lease that this
engine renews; if it dies, another engine takes them over when the lease ends.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import selectors
import socket
import threading
import time
import uuid
from datetime import datetime

from .. import events as ev
from ..alerts import Alerter
from ..clock import Clock, SystemClock, from_us, now_us, to_us
from ..delivery import Dispatcher
from ..models import Fire
from ..sessions.base import Adapters
from ..settings import Settings
from ..store import SqlStore
from .plan import plan_fire

log = logging.getLogger(__name__)
ALERTER = "alerter"


class Engine:
    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock | None = None,
        settings: Settings | None = None,
        adapters: Adapters | None = None,
        alerter: Alerter | None = None,
        events: ev.Events | None = None,
        engine_id: str | None = None,
        role: str = "engine",
        alert_priority: int = 0,
        can_alert: bool = True,
        inline: bool = False,
        dispatcher_factory: type[Dispatcher] = Dispatcher,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or store.settings
        self.events = events or ev.Events()
        self.id = engine_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.role = role
        self.alert_priority = alert_priority
        self.can_alert = can_alert
        self.adapters = adapters or default_adapters()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self.dispatcher = dispatcher_factory(
            store, clock=self.clock, owner=self.id, adapters=self.adapters, alerter=alerter,
            events=self.events, settings=self.settings, inline=inline, poke=self.poke,
        )
        self._pending: list[tuple[int, int, Fire]] = []  # (due_us, occurrence_id, fire)
        self._next_due_us: int | None = None
        self._next_lease_us: int | None = None
        self._known = False  # _next_due_us / _next_lease_us are current
        self._dirty = True
        self._housekeeping_us = 0
        self._backoff_s = 0.0
        self.leave_alerts = False
        self.is_alerter = False
        self.errors = 0
        self.fired = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one step ------------------------------------------------------------------------

    def tick(self, now: datetime | None = None) -> datetime:
        """Do what is due at ``now``; return when the next step is wanted."""
        t = to_us(now) if now is not None else now_us(self.clock)
        s = self.settings
        lookahead = int(s.lookahead_s * 1e6)
        cap = int(s.wait_cap_s * 1e6)
        try:
            if t >= self._housekeeping_us:
                self._housekeeping(t)
            if self._dirty:
                self._dirty = False
                self._known = False
                self.dispatcher.invalidate()
                self.dispatcher.deliver_waiting()
            if not self._known or (self._next_due_us is not None and self._next_due_us <= t + lookahead):
                self._claim(t)
            if self._next_lease_us is not None and self._next_lease_us < t:
                self._take_over(t)
            self._fire_due(t)
            self.dispatcher.flush()
            self._backoff_s = 0.0
        except Exception as exc:
            self.errors += 1
            self._backoff_s = min(max(0.5, self._backoff_s * 2), s.wait_cap_s)
            self._known = False
            log.warning("engine %s: step failed (%s: %s); retrying in %.1fs", self.id, type(exc).__name__, exc, self._backoff_s)
            return from_us(t + int(self._backoff_s * 1e6))
        candidates = [t + cap, self._housekeeping_us]
        if self._pending:
            candidates.append(self._pending[0][0])
        if self._next_due_us is not None:
            candidates.append(self._next_due_us - lookahead)
        if self._next_lease_us is not None:
            candidates.append(self._next_lease_us + 1)
        return from_us(max(t, min(candidates)))

    def _claim(self, t: int) -> None:
        s = self.settings
        horizon = t + int(s.lookahead_s * 1e6)
        now = from_us(t)
        while True:
            fires, n = self.store.claim_due(
                now_us=t, horizon_us=horizon, owner=self.id, lease_us=int(s.lease_s * 1e6),
                limit=s.claim_batch, plan=lambda r: plan_fire(r, now, catchup_cap=s.catchup_cap),
                leave_alerts=self.leave_alerts,
            )
            for f in fires:
                heapq.heappush(self._pending, (to_us(f.due_at), f.occurrence_id, f))
            if n < s.claim_batch:
                break
        self._next_due_us, self._next_lease_us = self.store.next_due_us(leave_alerts=self.leave_alerts)
        self._known = True

    def _take_over(self, t: int) -> None:
        s = self.settings
        fires = self.store.reclaim_expired(now_us=t, owner=self.id, lease_us=int(s.lease_s * 1e6), limit=s.claim_batch)
        if fires:
            log.info("engine %s: took over %d occurrence(s) whose lease ran out", self.id, len(fires))
        for f in fires:
            heapq.heappush(self._pending, (to_us(f.due_at), f.occurrence_id, f))
        self._next_due_us, self._next_lease_us = self.store.next_due_us(leave_alerts=self.leave_alerts)

    def _fire_due(self, t: int) -> None:
        due: list[Fire] = []
        while self._pending and self._pending[0][0] <= t:
            due.append(heapq.heappop(self._pending)[2])
        if due:
            self.fired += len(due)
            self.dispatcher.submit(due, t)

    def _housekeeping(self, t: int) -> None:
        s = self.settings
        lease = int(s.lease_s * 1e6)
        self._housekeeping_us = t + lease // 3
        self.store.heartbeat(engine_id=self.id, host=socket.gethostname(), pid=os.getpid(), role=self.role,
                             priority=self.alert_priority, now_us=t)
        self.store.renew_leases(owner=self.id, until_us=t + lease)
        was = self.leave_alerts
        if self.can_alert:
            holder, _prio, until = self.store.hold_lease(
                ALERTER, holder=self.id, priority=self.alert_priority, until_us=t + lease, now_us=t
            )
            self.is_alerter = holder == self.id
            self.leave_alerts = not self.is_alerter
            if not self.is_alerter:  # its holder may have died: look again the moment its lease ends
                self._housekeeping_us = min(self._housekeeping_us, until + 1)
        else:
            self.leave_alerts = self.store.lease_holder(ALERTER, now_us=t) is not None
        if was != self.leave_alerts:
            self._known = False
        self._take_over(t)
        self.dispatcher.deliver_waiting()

    # -- the thread around it ------------------------------------------------------------

    def poke(self) -> None:
        """Wake the engine thread (from any thread)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._wake_w, b"!")

    def notice_change(self) -> None:
        self._dirty = True
        self.poke()

    def run(self, stop: threading.Event | None = None) -> None:
        """Run until ``stop`` (or :meth:`stop`) is set."""
        stop = stop or self._stop
        listener = self.store.wake.listen()
        sel = selectors.SelectSelector()  # select() keeps microseconds; epoll rounds to ms
        sel.register(self._wake_r, selectors.EVENT_READ, "poke")
        if listener is not None:
            sel.register(listener.fileno(), selectors.EVENT_READ, "hint")
        log.info("engine %s started on %s", self.id, self.store.url)
        try:
            while not stop.is_set() and not self._stop.is_set():
                wake_at = to_us(self.tick())
                timeout = (wake_at - now_us(self.clock)) / 1e6
                if timeout <= 0:
                    continue
                if timeout > self.settings.wait_cap_s:
                    timeout = self.settings.wait_cap_s
                for key, _mask in sel.select(timeout):
                    if key.data == "poke":
                        _drain_fd(self._wake_r)
                    else:
                        try:
                            assert listener is not None
                            listener.drain()
                        except Exception:
                            sel.unregister(key.fileobj)
                            listener.close()
                            listener = self.store.wake.listen()
                            if listener is not None:
                                sel.register(listener.fileno(), selectors.EVENT_READ, "hint")
                        self._dirty = True
        finally:
            sel.close()
            if listener is not None:
                listener.close()
            self.shutdown()

    def start(self) -> Engine:
        if self._thread is not None and self._thread.is_alive():
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name=f"remindkit-engine-{self.id}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        self.poke()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def shutdown(self) -> None:
        """Give back claims not yet fired, finish what runs, leave the registry.
        (``run`` does this on its way out; call it after driving ``tick`` by hand.)"""
        pending = [occ_id for _, occ_id, _f in self._pending]
        self._pending.clear()
        deadline = time.monotonic() + 10
        while not self.dispatcher.idle and time.monotonic() < deadline:
            try:
                self.dispatcher.flush()
            except Exception:
                log.exception("engine %s: flush on shutdown failed", self.id)
            time.sleep(0.02)
        with contextlib.suppress(Exception):
            self.dispatcher.flush()
        self.dispatcher.close(wait=False)
        with contextlib.suppress(Exception):
            self.store.release_claims(owner=self.id, ids=pending)
        with contextlib.suppress(Exception):
            self.store.drop_lease(ALERTER, holder=self.id)
        with contextlib.suppress(Exception):
            self.store.unregister_engine(self.id)
        log.info("engine %s stopped", self.id)

    def close(self) -> None:
        self.stop()
        for fd in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                os.close(fd)


def _drain_fd(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 4096):
                return
        except (BlockingIOError, InterruptedError):
            return


def default_adapters() -> Adapters:
    from ..sessions.command import CommandSession
    from ..sessions.python import PythonSessions

    return Adapters(CommandSession(), PythonSessions())
