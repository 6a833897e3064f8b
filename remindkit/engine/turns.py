"""A session's turns: run one with the fired message, decide what it means, record it.

A session runs one turn of ours at a time; fires that come for it meanwhile are
queued for the next one, right after it (a reminder's backlog as its latest fire).
A turn in a session any engine may drive (the adapter's ``claims_turn``) is
claimed in the store for the whole run (:class:`~remindkit.store.turns.TurnLease`,
renewed by the engine's lease thread). The message is framed once, for the session
and its fallback alike. What the turn's result means is decided once
(``decide.after_turn``): a turn that fails at once is re-sent once into a fresh
session of the same adapter when the session's fallback policy allows it and a
fresh session would really differ (the adapter's ``fresh_differs``), linked to the
old one by ``parent_id`` and reused by later fires of that session
(``decide.after_fallback``). A session whose breaker is open (it failed
``breaker_after`` turns in a row) is tried after its fallback, not before.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import defaultdict
from collections.abc import Sequence

from .. import events as ev
from .. import failpoints
from ..clock import Clock, now_us, to_us
from ..errors import StoreError
from ..models import DELIVERED as OCC_DELIVERED
from ..models import (
    OCC_FAILED,
    SESSION_ACTIVE,
    WAITING,
    FallbackPolicy,
    Fire,
    Session,
    WaitFor,
)
from ..protocol import frame_fired
from ..sessions.base import (
    SessionAdapter,
    TurnResult,
    claims_turn,
    fresh_differs,
    fresh_session_id,
)
from ..settings import Settings
from ..store import SqlStore
from ..store.turns import TurnLease
from . import decide
from .cache import MOST_RECENT, SessionCache
from .decide import Action
from .lanes import Turn, TurnTimes
from .outcomes import Outcomes
from .waiting import Waiting

log = logging.getLogger(__name__)
SLOW_TURN_US = 5_000  # a turn slower than this has its outcome written at once
RETRY_FOR_US = (
    3_600_000_000  # an agent that cannot be reached is tried this long after the due time
)


class TurnRunner:
    """Runs turns in sessions and records their outcomes (through ``outcomes``)."""

    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock,
        owner: str,
        settings: Settings,
        events: ev.Events,
        outcomes: Outcomes,
        cache: SessionCache,
        waiting: Waiting,
        times: TurnTimes,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.settings = settings
        self.events = events
        self.outcomes = outcomes
        self.cache = cache
        self.waiting = waiting
        self.times = times
        self._lock = threading.Lock()
        self._running: set[str] = set()  # sessions where a turn of ours runs
        self._tokens: set[str] = set()  # store turn claims we hold (renewed with our leases)
        self._queued: dict[str, list[Fire]] = defaultdict(list)  # fires for its next turn

    # -- state (any thread) --------------------------------------------------------------

    def running(self, session_id: str) -> bool:
        """A turn of ours runs in this session."""
        with self._lock:
            return session_id in self._running

    def tokens(self) -> set[str]:
        with self._lock:
            return set(self._tokens)

    def begin_or_queue(self, session_id: str, fires: Sequence[Fire]) -> bool:
        """True: no turn of ours runs in the session, and one is now ours to start;
        False: ours runs there, and these fires go in its next turn, right after it."""
        with self._lock:
            if session_id in self._running:
                self._queued[session_id].extend(fires)
                return False
            self._running.add(session_id)
            return True

    def abandon(self, session_ids: Sequence[str]) -> list[Fire]:
        """Turns that will not run here after all (the engine stops): these sessions'
        turns end, and every fire queued for a next turn is handed back."""
        with self._lock:
            for sid in session_ids:
                self._running.discard(sid)
            queued = [f for fires in self._queued.values() for f in fires]
            self._queued.clear()
        return queued

    # -- running (a turn worker, or the caller when inline) ------------------------------

    def run(self, turn: Turn) -> None:
        """Run turns in the turn's session until no more fires are queued for it. A
        shared session's turn is claimed in the store once for the whole run."""
        target, adapter, fires, fallback_first = turn
        lease = self._lease(target.id) if claims_turn(adapter, target) else None
        why = ""
        if lease is not None:
            try:
                with self._own():
                    got = lease.try_acquire()
                if not got:
                    why = f"session {target.id} is busy; waiting for it to be idle"
            except StoreError as exc:  # the store is busy or away: the fires wait, nothing fails
                log.warning("cannot start a turn in %s now (%s); the fires wait", target.id, exc)
                why = f"store unavailable; waiting to retry: {exc}"[:300]
        ended = False
        try:
            while True:
                if why:
                    self.outcomes.finish(fires, WAITING, error=why, wait_for=WaitFor.IDLE)
                else:
                    self._one_turn(target, adapter, fires, fallback_first)
                with self._lock:
                    queued = self._queued.pop(target.id, [])
                    if not queued:
                        self._running.discard(target.id)
                        ended = True
                        break
                fires = self._latest(sorted(queued, key=lambda f: (f.due_at, f.occurrence_id)))
        finally:
            if lease is not None:
                with self._own():
                    lease.release()
                self.cache.changed(target.id, MOST_RECENT)  # idle, and the most recently active
            if ended:  # fires that waited for the session are looked for once these are written
                self.waiting.recheck()
            self.outcomes.nudge()

    def _own(self) -> contextlib.AbstractContextManager[None]:
        """Writes of this engine's own (wake-up hints that the engine ignores)."""
        return self.store.origin(self.owner)

    def _latest(self, fires: list[Fire]) -> list[Fire]:
        """Fires queued behind our own turn: a reminder's backlog goes as its latest
        fire (the earlier ones are recorded superseded, in the store). When the store
        cannot be written now, they all go."""
        try:
            with self._own():
                going = self.store.waiting.supersede(fires, now_us=now_us(self.clock))
        except StoreError as exc:
            log.warning("could not supersede a backlog now (%s); its fires all go", exc)
            return fires
        if len(going) != len(fires):
            self.outcomes.unhold(
                {f.occurrence_id for f in fires} - {f.occurrence_id for f in going}
            )
        return going

    def _lease(self, session_id: str) -> TurnLease:
        return TurnLease(
            self.store.turns,
            session_id,
            owner=self.owner,
            clock=self.clock,
            lease_s=self.settings.lease_s,
            held=self._tokens,
            lock=self._lock,
        )

    def _one_turn(
        self,
        target: Session,
        adapter: SessionAdapter,
        fires: Sequence[Fire],
        fallback_first: bool = False,
    ) -> None:
        handed = now_us(self.clock)
        started = time.perf_counter()
        message = frame_fired(fires)  # framed once, for the session and its fallback alike
        finish = self.outcomes.finish
        try:
            failpoints.hit("during_delivery")
            result, took, verdict = self._deliver(target, adapter, fires, message, fallback_first)
            failpoints.hit("after_delivery_before_ack")
            done = now_us(self.clock)
            slow = done - handed > SLOW_TURN_US
            self.times.record(adapter.name, (time.perf_counter() - started) * 1e6)  # real time
            if verdict.action == Action.WAIT:
                finish(
                    fires,
                    WAITING,
                    error=(verdict.reason or "")[:500],
                    wait_for=verdict.wait_for,
                    handed_us=handed,
                )
                if verdict.wait_for == WaitFor.RETRY:
                    self.events.emit(ev.Waiting, target.id, list(fires))
            elif verdict.action == Action.DELIVERED:
                note = (
                    "already taken by an earlier turn of the session" if result.duplicate else None
                )
                finish(
                    fires,
                    OCC_DELIVERED,
                    delivered_us=done,
                    delivered_to=took,
                    error=note,
                    urgent=slow,
                    handed_us=handed,
                    reply=result.reply or None,
                )
                if target.failures and took == target.id:
                    self._record_turn(target.id, ok=True)
                self.events.emit(ev.Delivered, took, list(fires), result)
            else:
                why = verdict.reason or "turn failed"
                finish(
                    fires, OCC_FAILED, error=why, urgent=slow, handed_us=handed, pause=verdict.pause
                )
                self._record_turn(target.id, ok=False, error=why)
                self.events.emit(ev.Failed, target.id, list(fires), why)
        except StoreError as exc:  # the turn could not record itself: retry later, never fail
            log.warning("turn in %s hit a store error (%s); the fires wait", target.id, exc)
            finish(
                fires,
                WAITING,
                error=f"store unavailable; waiting to retry: {exc}"[:300],
                wait_for=WaitFor.RETRY,
            )
        except Exception as exc:  # an adapter bug must not lose the occurrence
            log.exception("delivery to %s failed", target.id)
            why = f"{type(exc).__name__}: {exc}"
            finish(fires, OCC_FAILED, error=why, pause=True)
            self.events.emit(ev.Failed, target.id, list(fires), str(exc))

    def _record_turn(self, session_id: str, *, ok: bool, error: str | None = None) -> None:
        try:
            with self._own():
                self.store.turns.record_turn(session_id, ok=ok, error=error)
        except Exception:
            log.exception("could not record the turn result of %s", session_id)
        self.cache.drop(session_id)

    def _deliver(
        self,
        target: Session,
        adapter: SessionAdapter,
        fires: Sequence[Fire],
        message: str,
        fallback_first: bool,
    ) -> tuple[TurnResult, str, decide.TurnDecision]:
        """Run the turn and decide (once: ``decide.after_turn``) what it means; when it
        failed at once and the session's fallback policy allows it and a fresh session
        would really differ (the adapter's ``fresh_differs``), re-send once into a fresh
        session (``decide.after_fallback``). A session whose breaker is open is tried
        after its fallback, not before. Returns (the result of the turn that decided,
        the session that took it, the decision)."""
        distinct = fresh_differs(adapter, target)
        tried = fallback_first and distinct
        if tried:
            fresh = self._fresh_session(target, adapter)
            if fresh is not None:
                log.info(
                    "session %s failed %d turns in a row; trying its fresh session %s first",
                    target.id,
                    target.failures,
                    fresh.id,
                )
                first = self._turn_in(fresh, adapter, fires, message)
                if first.ok:
                    return first, fresh.id, decide.after_turn(decide.TurnOutcome.of(first))
        result = adapter.run_turn(target, message, fires)
        within = now_us(self.clock) - min(to_us(f.due_at) for f in fires) < RETRY_FOR_US
        verdict = decide.after_turn(
            decide.TurnOutcome.of(
                result,
                fallback=target.fallback,
                fallback_distinct=distinct,
                fallback_tried=tried,
                within_retry=within,
                retry_hours=RETRY_FOR_US // 3_600_000_000,
            )
        )
        if verdict.action != Action.FALLBACK:
            return result, (result.session or target.id), verdict
        fresh = self._fresh_session(target, adapter)
        if fresh is None:
            return result, target.id, decide.after_fallback(target.id, result.error, None, None)
        log.warning(
            "turn in %s failed at once (%s); re-sending into fresh session %s",
            target.id,
            result.error,
            fresh.id,
        )
        second = self._turn_in(fresh, adapter, fires, message)
        after = decide.after_fallback(
            target.id, result.error, fresh.id, decide.TurnOutcome.of(second)
        )
        return second, fresh.id, after

    def _turn_in(
        self, sess: Session, adapter: SessionAdapter, fires: Sequence[Fire], message: str
    ) -> TurnResult:
        """A turn in a session other than the one the run holds (the fallback)."""
        lease = self._lease(sess.id) if claims_turn(adapter, sess) else None
        if lease is not None:
            with self._own():
                got = lease.try_acquire()
            if not got:
                return TurnResult(False, error=f"fresh session {sess.id} is busy", busy=False)
        try:
            return adapter.run_turn(sess, message, fires)
        finally:
            if lease is not None:
                with self._own():
                    lease.release()
                self.cache.changed(sess.id, MOST_RECENT)

    def _fresh_session(self, target: Session, adapter: SessionAdapter) -> Session | None:
        """The fallback session of ``target``: the one made on an earlier failure
        if it is still active, else a new one with the same adapter and config
        (a command session's ``fresh_argv`` replaces its ``argv``)."""
        for sess in self.store.sessions.list_sessions(now_us=now_us(self.clock)):
            if (
                sess.parent_id == target.id
                and sess.state == SESSION_ACTIVE
                and sess.adapter == target.adapter
                and sess.config.get("fallback_for") == target.id
                and adapter.can_deliver(sess)
            ):
                return sess
        config = dict(target.config)
        if config.get("fresh_argv"):
            config["argv"] = config["fresh_argv"]
        config["fallback_for"] = target.id
        fresh = Session(
            fresh_session_id(target.id, secrets.token_hex(3)),
            adapter=target.adapter,
            config=config,
            parent_id=target.id,
            title=f"fresh session for {target.title or target.id}",
            fallback=FallbackPolicy.NONE,
        )
        if not adapter.can_deliver(fresh):
            return None
        with self._own():
            made = self.store.sessions.put_session(fresh, now_us=now_us(self.clock))
        self.cache.changed(MOST_RECENT)
        return made


__all__ = ["RETRY_FOR_US", "SLOW_TURN_US", "TurnRunner"]
