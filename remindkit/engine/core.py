"""The engine: claim what comes due, fire it on time, hand it to delivery.

:meth:`Engine.tick` is one whole step at a given moment and returns when the
next one is wanted; tests call it with a :class:`~remindkit.clock.FakeClock`.
It has two halves:

* the store step claims reminders due within the look-ahead (so the
  database's latency never adds to lateness), takes over claims whose lease ran
  out, writes outcomes, renews leases and the alerter lease;
* the fire step hands claimed occurrences whose due time has come to delivery.
  It touches no database.

:meth:`Engine.run` runs each half on a thread of its own, so that a commit
(an fsync) never delays a fire. Both threads only wait in between: until the
next due time, a wake-up hint from another process, or the cap (30 s), so a
suspend or a clock jump costs at most the cap. There is no busy polling. Claims
carry a lease that the engine renews; if it dies, another engine takes them
over when the lease ends.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import os
import select
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime

from sqlalchemy import event as sa_event

from .. import events as ev
from .. import failpoints
from ..alerts import Alerter
from ..clock import Clock, SystemClock, from_us, now_us, to_us
from ..models import Fire
from ..sessions.registry import Adapters, default_adapters
from ..settings import Settings
from ..store import SqlStore
from ..wakeup import EARLY_WAKE, SPIN, Waiter
from .collector import QuietCollector
from .delivery import Dispatcher
from .liveness import Liveness
from .plan import guarded_plan
from .status import StatusWriter

log = logging.getLogger(__name__)
ALERTER = "alerter"
SWITCH_INTERVAL = 0.0005  # seconds; lets the fire thread take the GIL promptly
# The fire thread stops sleeping long EARLY_WAKE before a due time and waits out the
# last SPIN awake (remindkit.wakeup: a sleep's wake-up can be late).
QUIET_BEFORE = 0.003  # the store thread holds off this long before a fire ...
QUIET_AFTER = 0.001  # ... until this long after it (the delivery thread runs then)
MAX_HOLD = 0.02  # but never longer than this in a row
TAKEOVER_RETRY = 1.0  # seconds before looking again at an expired lease whose owner was spared
# seconds before claiming again after a claim found nothing although the store says a
# reminder is due within the horizon: another engine holds those rows in its claim
CONTENDED_RETRY = 0.1
NEAR_FIRE_BATCH = 32  # reminders claimed at a time while a fire is within NEAR_FIRE
NEAR_FIRE = 0.05  # seconds
# seconds: how often the engine's set-up looks whether its first fires are out
HAND_OVER_POLL = 0.0002
HAND_OVER_CHUNK = 256  # fires of a burst routed first, before the rest (see _chunks_by_session)
FLUSH_INTERVAL = 0.05  # seconds between outcome writes while deliveries stream in
FLUSH_BUSY_MAX = 0.25  # ... and at most this long while turns are being handed over
HINT_GAP = 0.02  # seconds: at most one re-read of the store per this, however many hints arrive
NO_HINTS_CAP = 2.0  # seconds: the longest sleep when the store gives no wake-up hints (polling)


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
    ) -> None:
        self.store = store
        self.clock: Clock = clock or SystemClock()
        self.settings = settings or store.settings
        self.events = events or ev.Events()
        self.id = engine_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.role = role
        self.alert_priority = alert_priority
        self.can_alert = can_alert
        self.alerter = alerter  # what sounds its alerting reminders (None: a NullAlerter logs)
        self.adapters = adapters or default_adapters(
            store, clock=self.clock, settings=self.settings
        )
        self._stop = threading.Event()  # ends every loop of run()
        self._pokes = {
            "store": Waiter(stop=self._stop, hint_gap=HINT_GAP),
            "fire": Waiter(stop=self._stop),
        }
        self.dispatcher = Dispatcher(
            store,
            clock=self.clock,
            owner=self.id,
            adapters=self.adapters,
            alerter=alerter,
            events=self.events,
            settings=self.settings,
            inline=inline,
            poke=self.poke,
            forget=self._forget,
        )
        self._lock = threading.Lock()
        self._pending: list[tuple[int, int, Fire]] = []  # heap of (due_us, occurrence_id, fire)
        self._next_due_us: int | None = None
        self._next_lease_us: int | None = None
        self._known = False  # _next_due_us / _next_lease_us are current
        self._dirty = True
        self._added = False  # hinted: others only added reminders (_hinted)
        self._dirty_epoch = self.dispatcher.epoch()  # sessions cached before this are reloaded
        self._housekeeping_us = 0
        self._takeover_after_us = 0  # an expired lease was left to its live owner: not before this
        self._contended_until_us = 0  # every due row was in another engine's claim: not before
        self._lease_keeper = (
            False  # the lease thread runs (run()); tick() alone renews in housekeeping
        )
        self._orphans: set[int] = set()
        self._liveness: Liveness | None = None  # set while run() runs (real processes)
        self._flushed_us = 0
        self._poll_cap = self.settings.wait_cap_s
        self._backoff_s = 0.0
        self.status: StatusWriter | None = None  # set while run() runs: the status file
        self.leave_alerts = False
        self.is_alerter = False
        self.errors = 0
        self.fired = 0
        self._threads: list[threading.Thread] = []
        self._shut = False
        self.collector = QuietCollector(enabled=self.settings.quiet_gc)
        store.warm()  # compile the first statements now, not when an overdue fire waits on them

    # -- one whole step (tests) ----------------------------------------------------------

    def tick(self, now: datetime | None = None) -> datetime:
        """Do everything that is due at ``now``; return when the next step is wanted."""
        t = to_us(now) if now is not None else now_us(self.clock)
        store_next = self.store_step(t)
        fire_next = self.fire_step(t)
        if self.dispatcher.inline:
            self.store_step(t, flush_only=True)
        return from_us(max(t, min(store_next, fire_next)))

    # -- the store half ------------------------------------------------------------------

    def store_step(self, t: int, *, flush_only: bool = False) -> int:
        """Claims, take-overs, outcomes, leases. Returns when it wants to run next."""
        s = self.settings
        lookahead = int(s.lookahead_s * 1e6)
        changed = False  # for the status file: the set of reminders or a fire's outcome moved
        try:
            with self.store.origin(self.id):
                if flush_only:
                    self.dispatcher.flush()
                    return t + int(s.wait_cap_s * 1e6)
                if self._housekeeping_us == 0:
                    # First step: claim what is overdue before the slower bookkeeping.
                    self._alerter_status(t)
                    self._claim(t)
                    if self._lease_keeper and self._quiet_until(t) is not None:
                        # Threads run: the bookkeeping waits until the fire thread has
                        # handed the overdue fires over (see _store_round).
                        return t
                if t >= self._housekeeping_us:
                    self._housekeeping(t)
                sooner = self.dispatcher.sooner()  # re-based here (our writes give no hint)
                if sooner is not None and self._known:
                    nxt = self._next_due_us
                    self._next_due_us = sooner if nxt is None else min(nxt, sooner)
                if self._added:  # the status file's summary of the store moved
                    changed = True
                    self._added = False
                if self._dirty:
                    changed = True
                    self._dirty = False
                    self._known = False
                    self.dispatcher.invalidate(before=self._dirty_epoch)
                    self._drop_cancelled()
                    self.dispatcher.deliver_waiting()
                if not self._known:  # a read first: claiming takes the write lock
                    self._next_due_us, self._next_lease_us = self.store.claims.next_due_us(
                        leave_alerts=self.leave_alerts
                    )
                    self._known = True
                if (
                    self._next_due_us is not None
                    and self._next_due_us <= t + lookahead
                    and t >= self._contended_until_us
                ):
                    changed = True
                    self._claim(t)
                if (
                    self._next_lease_us is not None
                    and self._next_lease_us < t
                    and t >= self._takeover_after_us
                ):
                    self._take_over(t)
                # Outcomes are written in batches, at most every FLUSH_INTERVAL, so that
                # a burst of deliveries costs a few commits rather than one each.
                # While a burst of turns is being handed over, writing waits (up to
                # FLUSH_BUSY_MAX) so that it does not compete with the hand-over.
                since = t - self._flushed_us
                if (
                    self.dispatcher.inline
                    or self.dispatcher.urgent
                    or since >= int(FLUSH_BUSY_MAX * 1e6)
                    or (since >= int(FLUSH_INTERVAL * 1e6) and self.dispatcher.turns_idle)
                ):
                    changed = changed or self.dispatcher.has_outcomes
                    self.dispatcher.flush()
                    self._flushed_us = t
            self._backoff_s = 0.0
        except Exception as exc:
            self.errors += 1
            self._backoff_s = min(max(0.5, self._backoff_s * 2), s.wait_cap_s)
            self._known = False
            log.warning(
                "engine %s: store step failed (%s: %s); retrying in %.1fs",
                self.id,
                type(exc).__name__,
                exc,
                self._backoff_s,
            )
            return t + int(self._backoff_s * 1e6)
        candidates = [t + int(s.wait_cap_s * 1e6), self._housekeeping_us]
        look_again = self.dispatcher.unstick()  # a fast turn that runs long leaves its lane
        if look_again is not None:
            candidates.append(t + int((look_again - time.perf_counter()) * 1e6) + 1)
        if self.status is not None:
            candidates.append(self.status.step(t, changed=changed, busy=self.dispatcher.bursting))
        if self.dispatcher.urgent:
            candidates.append(t)
        elif self.dispatcher.has_outcomes:
            at = self._flushed_us + int(FLUSH_INTERVAL * 1e6)
            if at <= t:  # turns are still being handed over: look again shortly
                at = min(
                    self._flushed_us + int(FLUSH_BUSY_MAX * 1e6), t + int(FLUSH_INTERVAL * 1e6) // 5
                )
            candidates.append(at)
        if self._next_due_us is not None:
            candidates.append(max(self._next_due_us - lookahead, self._contended_until_us))
        if self._next_lease_us is not None:
            candidates.append(max(self._next_lease_us + 1, self._takeover_after_us))
        return max(t, min(candidates))

    def _claim(
        self,
        t: int,
        *,
        leave_alerts: bool | None = None,
        horizon_us: int | None = None,
        reread: bool = True,
    ) -> None:
        """Claim what is due by the horizon, in batches; then (``reread``) read when
        the next one is due. ``leave_alerts``/``horizon_us`` override the engine's."""
        s = self.settings
        leave = self.leave_alerts if leave_alerts is None else leave_alerts
        # Claim a window of two look-aheads each time, so that claims come in
        # batches about one look-ahead apart rather than one per fire.
        horizon = t + 2 * int(s.lookahead_s * 1e6) if horizon_us is None else horizon_us
        now = from_us(t)
        claimed = 0
        while True:
            # While a claimed fire is near, claim in small batches: a batch's Python
            # work holds the GIL between its statements, and a fire waits for it.
            limit = s.claim_batch if self._quiet_for(now_us(self.clock)) else NEAR_FIRE_BATCH
            fires, n = self.store.claims.claim_due(
                now_us=t,
                horizon_us=horizon,
                owner=self.id,
                lease_us=int(s.lease_s * 1e6),
                limit=limit,  # each reminder carries its own catch-up cap, within the engine's
                plan=lambda r: guarded_plan(r, now, catchup_max=s.catchup_max),
                leave_alerts=leave,
            )
            claimed += n
            if fires:
                failpoints.hit("after_claim_commit")
                self.dispatcher.prefetch({f.session for f in fires})
                self._push(fires)
            if n < limit:
                break
        if not reread:
            self._known = False
            return
        self._next_due_us, self._next_lease_us = self.store.claims.next_due_us(
            leave_alerts=self.leave_alerts
        )
        self._known = True
        # Nothing claimed, yet something is due by the horizon: on PostgreSQL, rows
        # another engine is claiming right now (skipped as locked, still unclaimed to
        # a reader until it commits). Trying again at once, round after round, would
        # scan those locked rows each time and take the CPU from the engine claiming
        # them (4 engines, 10,000 due at once: about 40 empty claims each).
        due_now = self._next_due_us is not None and self._next_due_us <= horizon
        self._contended_until_us = t + int(CONTENDED_RETRY * 1e6) if not claimed and due_now else 0

    def _take_over(self, t: int) -> None:
        s = self.settings
        lease = int(s.lease_s * 1e6)
        live = self._liveness

        fires = self.store.claims.reclaim_expired(
            now_us=t,
            owner=self.id,
            lease_us=lease,
            limit=s.claim_batch,
            expired_before=None if live is None else lambda who: live.expired_before(who, t, lease),
        )
        if fires:
            log.info(
                "engine %s: took over %d occurrence(s) whose lease ran out", self.id, len(fires)
            )
            self.dispatcher.prefetch({f.session for f in fires})
            self._push(fires)
        self._next_due_us, self._next_lease_us = self.store.claims.next_due_us(
            leave_alerts=self.leave_alerts
        )
        # A lease still expired now (and not because the batch was full) belongs to an
        # owner that was spared (alive, only slow to renew): look again in a while
        # rather than at once, round after round.
        if (
            len(fires) < s.claim_batch
            and self._next_lease_us is not None
            and self._next_lease_us < t
        ):
            self._takeover_after_us = t + int(TAKEOVER_RETRY * 1e6)

    def _drop_cancelled(self) -> None:
        """Forget claimed fires that another process cancelled before they were due."""
        with self._lock:
            ids = [occ_id for _due, occ_id, _f in self._pending]
        if not ids:
            return
        gone = set(ids) - set(self.store.claims.still_claimed(ids, owner=self.id))
        if gone:
            with self._lock:
                self._pending = [p for p in self._pending if p[1] not in gone]
                heapq.heapify(self._pending)

    def _forget(self, occurrence_ids: Sequence[int]) -> None:
        """Drop claimed fires that were cancelled under us (a re-base superseded them)."""
        gone = set(occurrence_ids)
        with self._lock:
            before = len(self._pending)
            self._pending = [p for p in self._pending if p[1] not in gone]
            if len(self._pending) != before:
                heapq.heapify(self._pending)

    def _push(self, fires: list[Fire]) -> None:
        if not fires:
            return
        with self._lock:
            for f in fires:
                heapq.heappush(self._pending, (to_us(f.due_at), f.occurrence_id, f))
        self._pokes["fire"].poke()

    def _housekeeping(self, t: int) -> None:
        s = self.settings
        lease = int(s.lease_s * 1e6)
        self._housekeeping_us = t + lease // 4
        if not self._lease_keeper:  # the lease thread renews on its own when run() runs
            self.store.turns.renew_leases(
                owner=self.id,
                until_us=t + lease,  # first: what we hold
                turn_tokens=self.dispatcher.turn_tokens(),
            )
        self.store.coordination.heartbeat(
            engine_id=self.id,
            host=socket.gethostname(),
            pid=os.getpid(),
            role=self.role,
            priority=self.alert_priority,
            now_us=t,
        )
        if self.alert_ready():
            holder, _prio, until = self.store.coordination.hold_lease(
                ALERTER, holder=self.id, priority=self.alert_priority, until_us=t + lease, now_us=t
            )
            self.is_alerter = holder == self.id
            self.leave_alerts = not self.is_alerter
            if (
                not self.is_alerter
            ):  # its holder may have died: look again the moment its lease ends
                self._housekeeping_us = min(self._housekeeping_us, until + 1)
        else:
            if self.is_alerter:  # it had a way to alert and lost it: another engine may alert now
                self.store.coordination.drop_lease(ALERTER, holder=self.id)
                self.is_alerter = False
            self._alerter_status(t)
        # Re-read the next due time (which also depends on leave_alerts) and the earliest
        # lease (a safety net for a missed hint); an expired lease found there is taken
        # over in this same step.
        self._known = False
        self._takeover_after_us = 0
        self._adopt_orphans(t)
        self.dispatcher.deliver_waiting()

    def _adopt_orphans(self, t: int) -> None:
        """Claims of ours that nothing in this process holds any more (a hand-over
        that failed in an unexpected way) would never be retried: another engine
        only takes over expired leases, and ours are renewed. Take them back when
        they are still orphans one round later."""
        claimed = set(self.store.claims.own_claims(owner=self.id))
        with self._lock:  # one view: fire_step moves fires from _pending to held under it
            held = {occ_id for _due, occ_id, _f in self._pending} | self.dispatcher.holding()
        orphans = claimed - held
        adopt = orphans & self._orphans
        self._orphans = orphans - adopt
        if adopt:
            fires = self.store.claims.reclaim_expired(
                now_us=t,
                owner=self.id,
                lease_us=int(self.settings.lease_s * 1e6),
                limit=len(adopt),
                ids=sorted(adopt),
            )
            log.warning(
                "engine %s: took back %d claim(s) it had lost track of", self.id, len(fires)
            )
            self._push(fires)

    def alert_ready(self) -> bool:
        """Can this engine alert now? Not without an alerter, nor while its alerter
        says it has nowhere to play (``ready()``: a notebook kernel with no panel
        shown). An engine that cannot alert never holds the alerter lease."""
        if not self.can_alert:
            return False
        ready = getattr(self.alerter, "ready", None)
        if ready is None:
            return True
        try:
            return bool(ready())
        except Exception:
            log.exception("engine %s: asking the alerter whether it can alert failed", self.id)
            return False

    def alerter_changed(self) -> None:
        """The alerter gained or lost its way to alert (from any thread): take or drop
        the alerter lease at the next store step rather than the next housekeeping."""
        self._housekeeping_us = min(self._housekeeping_us, 1)
        self.poke()

    def _alerter_status(self, t: int) -> None:
        """Leave alerting reminders to another engine that holds the alerter lease."""
        current = self.store.coordination.lease_holder(ALERTER, now_us=t)
        self.is_alerter = current is not None and current[0] == self.id
        if current is None:
            self.leave_alerts = False
        elif not self.is_alerter:
            self.leave_alerts = not self.alert_ready() or current[1] >= self.alert_priority
        else:
            self.leave_alerts = False

    # -- the fire half -------------------------------------------------------------------

    def fire_step(self, t: int) -> int:
        """Hand every claimed occurrence due by ``t`` to delivery. Returns the next due."""
        due: list[Fire] = []
        with self._lock:
            while self._pending and self._pending[0][0] <= t:
                due.append(heapq.heappop(self._pending)[2])
            nxt = self._pending[0][0] if self._pending else t + int(self.settings.wait_cap_s * 1e6)
            # In hand from the moment they leave _pending: a large batch is routed chunk by
            # chunk, and a chunk still waiting its turn here is not an orphan to take back.
            self.dispatcher.hold(f.occurrence_id for f in due)
        if due:
            self.fired += len(due)
            for chunk in _chunks_by_session(due, HAND_OVER_CHUNK):
                try:
                    self.dispatcher.submit(chunk, t)
                except Exception:  # a bug: let _adopt_orphans take these claims back
                    log.exception(
                        "engine %s: handing %d fire(s) to delivery failed", self.id, len(chunk)
                    )
                    self.dispatcher.unhold(f.occurrence_id for f in chunk)
        return nxt

    # -- threads -------------------------------------------------------------------------

    def poke(self) -> None:
        """Wake the store thread (from any thread): outcomes or work are waiting."""
        self._pokes["store"].poke()

    def notice_change(self) -> None:
        self._dirty_epoch = self.dispatcher.epoch()
        self._dirty = True
        self.poke()

    def run(self, stop: threading.Event | None = None) -> None:
        """Run both halves until ``stop`` (or :meth:`stop`) is set, then shut down."""
        if stop is not None:

            def watch() -> None:
                stop.wait()
                self._halt()

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
        self._stop.clear()
        self._shut = False
        if sys.getswitchinterval() > SWITCH_INTERVAL:
            sys.setswitchinterval(SWITCH_INTERVAL)
        timer = threading.Thread(
            target=self._fire_loop, name=f"remindkit-fire-{self.id}", daemon=True
        )
        timer.start()
        self._claim_overdue()
        try:
            self._liveness = Liveness(self.store.engine.url.render_as_string(hide_password=True))
            self._liveness.hold(self.id)
        except OSError as exc:
            log.warning(
                "engine %s: no liveness file (%s); leases alone decide take-overs", self.id, exc
            )
            self._liveness = None
        self.status = StatusWriter(self.store, self.settings.home)
        keeper = threading.Thread(
            target=self._lease_loop, name=f"remindkit-lease-{self.id}", daemon=True
        )
        self._lease_keeper = True
        keeper.start()
        log.info("engine %s started on %s", self.id, self.store.url)
        try:
            self._store_loop()
        finally:
            self._halt()
            timer.join(5)
            keeper.join(5)
            self._lease_keeper = False
            self.shutdown()

    def _claim_overdue(self) -> None:
        """Before the rest of the set-up (liveness, status, the lease thread, the
        first store step): claim what is due now, so that a fire that waited for the
        engine to start goes out first. Only reminders that need no alerter are
        claimed here (who alerts is not known yet); the first store step claims the
        rest and reads the next due time. A failure is left to that step."""
        t = now_us(self.clock)
        try:
            with self.store.origin(self.id):
                self._claim(t, leave_alerts=True, horizon_us=t, reread=False)
        except Exception as exc:
            log.warning("engine %s: claiming at start failed (%s); retrying", self.id, exc)
            return
        # The rest of the set-up is Python work that would hold the GIL the fire
        # thread needs: it waits (off the GIL) until the fires are handed over.
        held = 0
        while (
            self._quiet_until(now_us(self.clock)) is not None and held < MAX_HOLD / HAND_OVER_POLL
        ):
            select.select([], [], [], HAND_OVER_POLL)
            held += 1
        if held:
            select.select([], [], [], QUIET_AFTER)

    def _fire_loop(self) -> None:
        """Sleep (interruptibly) until a little before the next due time, then
        finish the wait precisely: a short sleep to just before it, and the last
        fraction of a millisecond awake, yielding the GIL, so that a late wake-up
        from the sleep does not make the fire late (:meth:`Waiter.wait_until`).
        Nothing that goes wrong in one round stops the loop: it logs and goes on."""
        waiter = self._pokes["fire"]
        cap = self.settings.wait_cap_s

        def round_() -> None:
            nxt = self.fire_step(now_us(self.clock))
            waiter.wait_until(nxt, self.clock, cap=cap, early=EARLY_WAKE, spin=SPIN)

        waiter.loop(round_, on_error=lambda: self._round_failed("fire"), pause=0.1)

    def _round_failed(self, which: str) -> None:
        self.errors += 1
        log.exception("engine %s: %s loop error; going on", self.id, which)

    def _lease_loop(self) -> None:
        """Renew our claims every quarter lease on a thread of its own, so that a
        long batch of work on the store thread never lets them lapse."""
        lease = self.settings.lease_s
        while not self._stop.wait(lease / 4):
            with self._lock:
                pending = bool(self._pending)
            if not (pending or self.dispatcher.holding() or self.dispatcher.turn_tokens()):
                continue  # nothing in hand (an orphaned claim is left to expire and be taken over)
            try:
                with self.store.origin(self.id):
                    self.store.turns.renew_leases(
                        owner=self.id,
                        until_us=now_us(self.clock) + int(lease * 1e6),
                        turn_tokens=self.dispatcher.turn_tokens(),
                    )
            except Exception as exc:
                log.warning("engine %s: renewing leases failed (%s); retrying", self.id, exc)

    @contextlib.contextmanager
    def _yielding_to_fires(self) -> Iterator[None]:
        """While the store thread runs, each SQL statement it is about to send waits
        out a fire that is due within QUIET_BEFORE (see _yield_to_fire)."""
        me = threading.get_ident()

        def before_statement(*_args: object) -> None:
            if threading.get_ident() == me:
                self._yield_to_fire()

        engine = self.store.engine
        sa_event.listen(engine, "before_cursor_execute", before_statement)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sa_event.remove(engine, "before_cursor_execute", before_statement)

    def _yield_to_fire(self) -> None:
        """A store round that began outside the quiet time before a fire can run into
        it: its Python work would then hold the GIL that the fire thread needs. So
        before each statement, the store thread sleeps through the fire (inside its
        transaction: other writers wait that long, a few milliseconds, for its lock).
        Bounded by MAX_HOLD, like the hold between rounds."""
        t = now_us(self.clock)
        hold = self._quiet_until(t)
        if hold is not None:
            select.select([], [], [], min(MAX_HOLD, max(0.0, (hold - t) / 1e6)))

    def _store_loop(self) -> None:
        """Store steps, each followed by a wait for its wanted time, a poke, or a hint
        of another process's write (not our own). A flood of hints costs one re-read
        per HINT_GAP, not one per datagram (the waiter's ``hint_gap``)."""
        waiter = self._pokes["store"]
        held_since: int | None = None

        def round_() -> None:
            nonlocal held_since
            held_since = self._store_round(waiter, held_since)

        with waiter.listening(self.store.wake, ignore=self.id), self._yielding_to_fires():
            self._poll_cap = (
                self.settings.wait_cap_s
                if waiter.hints
                else min(self.settings.wait_cap_s, NO_HINTS_CAP)
            )
            if self.status is not None:
                self.status.hints = waiter.hints
            waiter.loop(round_, on_error=lambda: self._round_failed("store"), pause=0.5)

    def _store_round(self, waiter: Waiter, held_since: int | None) -> int | None:
        # Stay off the GIL just before a fire: database work waits until it is out,
        # unless fires come so densely that it has waited MAX_HOLD already.
        t = now_us(self.clock)
        hold = self._quiet_until(t)
        if hold is not None and (held_since is None or t - held_since < int(MAX_HOLD * 1e6)):
            select.select([], [], [], max(0.0, (hold - t) / 1e6))
            return held_since if held_since is not None else t
        wake_at = self.store_step(now_us(self.clock))
        self._collect_garbage()
        timeout = min(max(0.0, (wake_at - now_us(self.clock)) / 1e6), self._poll_cap)
        if waiter.wait(timeout):
            self._hinted(waiter.added_due_us)
        return None

    def _hinted(self, added_due_us: int | None) -> None:
        """Another's write committed. One that only added reminders (``added_due_us``:
        the earliest first fire among them) changes nothing this engine holds: while
        it knows when its next fire is due, the earlier of the two is that, without a
        read of the store. Any other write: read again (``_dirty``)."""
        if added_due_us is not None and self._known and not self._dirty:
            nxt = self._next_due_us
            self._next_due_us = added_due_us if nxt is None else min(nxt, added_due_us)
            self._added = True
            return
        self._dirty_epoch = self.dispatcher.epoch()
        self._dirty = True

    def _collect_garbage(self) -> None:
        """Let the collector run while the next claimed fire is far enough away
        (a collection holds the GIL, so the fire thread could not fire meanwhile)."""
        if self.dispatcher.bursting:
            return  # many fires are being delivered: their turns and outcomes go first
        nxt = self._next_pending_us()
        quiet_for = None if nxt is None else (nxt - now_us(self.clock)) / 1e6
        try:
            self.collector.step(quiet_for)
        except Exception:
            log.exception("engine %s: garbage collection failed", self.id)

    def _next_pending_us(self) -> int | None:
        """When the earliest claimed fire not yet handed over is due."""
        with self._lock:
            return self._pending[0][0] if self._pending else None

    def _quiet_for(self, t: int) -> bool:
        """No claimed fire is due within NEAR_FIRE after ``t`` (one due already is
        late whatever the store thread does: a catch-up claims in full batches)."""
        nxt = self._next_pending_us()
        return nxt is None or not t < nxt <= t + int(NEAR_FIRE * 1e6)

    def _quiet_until(self, t: int) -> int | None:
        """When a fire is due within QUIET_BEFORE (or is due already and the fire
        thread has yet to take it), the moment just after it."""
        nxt = self._next_pending_us()
        if nxt is not None and nxt <= t + int(QUIET_BEFORE * 1e6):
            return max(nxt, t) + int(QUIET_AFTER * 1e6)
        return None

    def _halt(self) -> None:
        self._stop.set()
        for pipe in self._pokes.values():
            pipe.poke()

    def start(self) -> Engine:
        """Run in background threads (a notebook kernel, the tray, tests)."""
        if any(t.is_alive() for t in self._threads):
            return self
        thread = threading.Thread(target=self.run, name=f"remindkit-engine-{self.id}", daemon=True)
        self._threads = [thread]
        thread.start()
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self._halt()
        for thread in self._threads:
            thread.join(timeout)
        self._threads = []

    def shutdown(self) -> None:
        """Give back claims not yet fired, finish what runs, leave the registry.
        (``run`` does this on its way out; call it after driving ``tick`` by hand.)"""
        if self._shut:
            return
        self._shut = True
        with self._lock:
            pending = [occ_id for _, occ_id, _f in self._pending]
            self._pending.clear()
        with self.store.origin(self.id):
            deadline = time.monotonic() + 10
            while not self.dispatcher.idle and time.monotonic() < deadline:
                try:
                    self.dispatcher.flush()
                except Exception:
                    log.exception("engine %s: flush on shutdown failed", self.id)
                select.select([], [], [], 0.02)
            self.dispatcher.close(wait=False)  # turns not started yet become waiting
            with contextlib.suppress(Exception):
                self.dispatcher.flush()
            with contextlib.suppress(Exception):
                self.store.claims.release_claims(owner=self.id, ids=pending)
            with contextlib.suppress(Exception):
                self.store.coordination.drop_lease(ALERTER, holder=self.id)
            with contextlib.suppress(Exception):
                self.store.coordination.unregister_engine(self.id)
        if self._liveness is not None:
            self._liveness.release()
        if self.status is not None:  # readers ask the store until another engine writes it again
            self.status.remove()
            self.status = None
        log.info("engine %s stopped", self.id)

    def close(self) -> None:
        self.stop()
        self.shutdown()
        for pipe in self._pokes.values():
            pipe.close()


def _chunks_by_session(fires: list[Fire], size: int) -> list[list[Fire]]:
    """Split a large batch in two: about ``size`` fires first, so that delivery
    starts before all of it is routed, then the rest at once, keeping each
    session's fires together (they go in one turn). Not in many chunks: routing a
    chunk while the turns of the chunk before run makes the two threads take the
    GIL from each other every switch interval, and both go several times slower
    (10,000 sessions due at once: 0.6 s in chunks of 256, 0.37 s in two)."""
    if len(fires) <= size:
        return [fires]
    by_session: dict[str | None, list[Fire]] = {}
    for f in fires:
        by_session.setdefault(f.session, []).append(f)
    first: list[Fire] = []
    rest: list[Fire] = []
    for group in by_session.values():
        (first if len(first) < size else rest).extend(group)
    return [first, rest] if rest else [first]
