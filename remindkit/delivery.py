"""Delivery: from a fired occurrence to a turn in its session.

Order on fire (DESIGN.md): the fired event is published, then the alarm and the
announcement play (when the reminder asks and this engine alerts), then the
``<schedule-fired>`` message is delivered. Delivery never interrupts a turn:

* the target is the reminder's session, or, when it has none, the most recently
  active session;
* a session that is busy (a turn runs through remindkit, or an external agent
  marked it busy) keeps the occurrence ``waiting``, or skips it, or re-bases
  it, per the reminder's ``on_busy`` policy; waiting ones for one session go
  out together in its next idle turn, ordered by due time. Re-base (seed 003):
  when the session is idle again, a repeating reminder whose occurrence came
  due during the turn is pushed forward by one full period from then; the
  occurrence is recorded ``skipped`` (re-based) and does not count as a fire;
* a session this process cannot reach (no adapter, or a python session
  registered elsewhere) keeps it ``waiting`` until one that can picks it up;
* fallbacks (seed 000): a turn that fails at once (the session cannot be
  resumed) is re-sent once into a fresh session of the same adapter, linked to
  the old one by ``parent_id`` (and reused by later fires of that session); if
  that fails too, the occurrence is ``failed`` with both reasons and a
  ``failed`` event tells the UIs. A deleted session's occurrences are ``failed``.

Outcomes are written with the claim's token in batches by the engine thread
(:meth:`Dispatcher.flush`); a stale token (the lease was taken over) is refused.
"""

from __future__ import annotations

import logging
import queue
import secrets
import threading
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from . import events as ev
from . import failpoints
from .alerts import Alerter, NullAlerter
from .clock import Clock, from_us, now_us, to_us
from .errors import StoreError
from .models import (
    ACTIVE,
    DONE,
    OCC_FAILED,
    SESSION_ACTIVE,
    SESSION_DELETED,
    SKIPPED,
    WAITING,
    Fire,
    Reminder,
    Session,
)
from .models import DELIVERED as OCC_DELIVERED
from .protocol import frame_fired
from .sessions.base import Adapters, SessionAdapter, TurnResult
from .settings import Settings
from .store import Outcome, SqlStore

log = logging.getLogger(__name__)
SESSION_TTL_US = 10_000_000  # hints clear the cache sooner; this bounds a missed hint
MOST_RECENT = "\0most-recent"
SLOW_TURN_US = 5_000  # a turn slower than this has its outcome written at once
RETRY_FOR_US = 3_600_000_000  # an agent that cannot be reached is tried this long after the due time
REBASE_NOTE = "rebase: "  # prefix of the wait reason of a fire that came due while its session was busy


class Dispatcher:
    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock,
        owner: str,
        adapters: Adapters,
        alerter: Alerter | None = None,
        events: ev.Events | None = None,
        settings: Settings | None = None,
        inline: bool = False,
        poke: Callable[[], None] | None = None,
        workers: int = 8,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.adapters = adapters
        self.alerter: Alerter = alerter or NullAlerter()
        self.events = events or ev.Events()
        self.settings = settings or store.settings
        self.inline = inline
        self.poke = poke or (lambda: None)
        # Outcome queues are deques (append and popleft are atomic): producers on
        # several threads never wait on a lock. The lock guards turn state only.
        self._lock = threading.Lock()
        self._outcomes: deque[Outcome] = deque()
        self._fired: deque[tuple[int, str, int]] = deque()
        self._holding: set[int] = set()  # occurrence ids handed to us whose outcome is not yet written
        self._turns: set[str] = set()  # sessions where a turn of ours runs
        self._turn_tokens: set[str] = set()  # store turn claims we hold (renewed with our leases)
        self._queued: dict[str, list[Fire]] = defaultdict(list)  # fires for its next turn
        self._recheck = False
        self._sessions: dict[str, tuple[Session | None, int]] = {}
        self._pool = None if inline else Workers(workers, "remindkit-turn")
        self._alerts = None if inline else Workers(1, "remindkit-alert")
        self.urgent = False  # outcomes that should not wait for the next batch

    # -- called by the engine thread -----------------------------------------------------

    def submit(self, fires: Sequence[Fire], fired_us: int) -> None:
        """Fire these occurrences now: publish, alert, deliver."""
        with self._lock:
            self._holding.update(f.occurrence_id for f in fires)
        fired_at = from_us(fired_us)
        stamped = [f if f.fired_at is not None else replace(f, fired_at=fired_at) for f in fires]
        self._fired.extend((f.occurrence_id, f.token, fired_us) for f in stamped)
        for f in stamped:
            self.events.emit(ev.FIRED, f)
        plain = [f for f in stamped if f.alert != "pending"]
        alerting = [f for f in stamped if f.alert == "pending"]
        if plain:
            self.route(plain)
        if alerting:
            if self._alerts is None:
                self._alert_then_route(alerting)
            else:
                self._alerts.submit(self._alert_then_route, alerting)

    def flush(self) -> list[int]:
        """Write queued outcomes (one transaction). Returns refused (stale) ids."""
        failpoints.hit("before_flush")
        self.urgent = False
        outcomes = _drain(self._outcomes)
        fired = _drain(self._fired)
        with self._lock:
            recheck, self._recheck = self._recheck, False
        ended = {o.occurrence_id for o in outcomes}
        fired = [f for f in fired if f[0] not in ended]
        stale: list[int] = []
        try:
            if fired:
                self.store.mark_fired(fired)
            if outcomes:
                stale = self.store.finish(outcomes, now_us=now_us(self.clock))
        except Exception:
            self._outcomes.extendleft(reversed(outcomes))  # keep them for the next flush
            self._fired.extendleft(reversed(fired))
            with self._lock:
                self._recheck = self._recheck or recheck
            raise
        with self._lock:  # written (or refused): no longer ours to hold
            self._holding.difference_update(o.occurrence_id for o in outcomes)
        for occ_id in stale:
            log.warning("outcome of occurrence %s refused: its lease was taken over by another engine", occ_id)
        if recheck:
            self.deliver_waiting()
        return stale

    def deliver_waiting(self) -> int:
        """Pick up waiting occurrences for sessions this process can serve now."""
        try:
            candidates = self.store.waiting_sessions()
        except Exception:
            log.exception("cannot list waiting deliveries")
            return 0
        now = now_us(self.clock)
        # Fresh from the store, not the cache: a copy cached while a turn ran would
        # keep saying the session is busy (the cache serves the fire thread).
        named = [sid for sid in candidates if sid is not None]
        try:
            found = self.store.get_sessions(named, now_us=now) if named else {}
        except Exception:
            log.exception("cannot load %d waiting session(s)", len(named))
            return 0
        for name in named:
            self._sessions[name] = (found.get(name), now)
        ready: list[str | None] = []
        for sid in candidates:
            target = self._resolve(sid, fresh=sid is None)
            if target is None or target.state == SESSION_DELETED:
                if sid is not None and target is not None:
                    ready.append(sid)  # recorded as failed by route()
                continue
            adapter = self.adapters.get(target.adapter)
            if adapter is None or not adapter.can_deliver(target) or self._busy(target):
                continue
            ready.append(sid)
        if not ready:
            return 0
        fires = self.store.claim_waiting(
            now_us=now, owner=self.owner, lease_us=int(self.settings.lease_s * 1e6), sessions=ready
        )
        if fires:
            self.route(fires)
        return len(fires)

    def prefetch(self, session_ids: set[str | None]) -> None:
        """Load these sessions into the cache (store thread), so that firing
        (fire thread) does not wait on the database."""
        now = now_us(self.clock)
        try:
            named = [s for s in session_ids if s is not None]
            found = self.store.get_sessions(named, now_us=now) if named else {}
            for sid in named:
                self._sessions[sid] = (found.get(sid), now)
            if None in session_ids:
                self._resolve(None, fresh=True)
        except Exception:
            log.exception("cannot load %d session(s)", len(session_ids))

    def invalidate(self) -> None:
        """Something changed in the store: reload the cached sessions (store thread)."""
        keys = list(self._sessions)
        self._sessions.clear()
        self.prefetch({None if k == MOST_RECENT else k for k in keys})

    @property
    def has_outcomes(self) -> bool:
        return bool(self._outcomes or self._fired or self._recheck)

    @property
    def turns_idle(self) -> bool:
        """No turn is queued or running in this process."""
        return self._pool is None or self._pool.idle

    @property
    def idle(self) -> bool:
        quiet = not self._outcomes and not self._fired
        return quiet and all(p is None or p.idle for p in (self._pool, self._alerts))

    def close(self, wait: bool = True) -> None:
        for pool in (self._alerts, self._pool):
            if pool is not None:
                pool.shutdown(wait=wait)
        with self._lock:
            queued = [f for fires in self._queued.values() for f in fires]
            self._queued.clear()
        if queued:  # not run here after all: any engine can pick them up
            self._finish(queued, WAITING, error="engine stopped before its turn")

    # -- routing -------------------------------------------------------------------------

    def turn_tokens(self) -> set[str]:
        with self._lock:
            return set(self._turn_tokens)

    def holding(self) -> set[int]:
        with self._lock:
            return set(self._holding)

    def route(self, fires: Sequence[Fire]) -> None:
        with self._lock:
            self._holding.update(f.occurrence_id for f in fires)
        groups: dict[str | None, list[Fire]] = defaultdict(list)
        targets: dict[str | None, Session | None] = {}
        for f in fires:
            try:
                target = self._resolve(f.session)
            except StoreError as exc:  # cannot even look the session up now: it waits
                self._finish([f], WAITING, error=f"store unavailable; waiting to retry: {exc}"[:300])
                continue
            key = target.id if target is not None else None
            targets[key] = target
            groups[key].append(f)
        for key, group in groups.items():
            target = targets[key]
            if target is None:
                self._finish(group, WAITING, error="no session to deliver to yet")
                continue
            if target.state == SESSION_DELETED:
                self._finish(group, OCC_FAILED, error=f"session {target.id} was deleted")
                self.events.emit(ev.FAILED, target.id, group, f"session {target.id} was deleted")
                continue
            adapter = self.adapters.get(target.adapter)
            if adapter is None:
                why = "session has no delivery adapter" if target.adapter is None else f"no {target.adapter} adapter in this process"
                self._finish(group, WAITING, error=why)
                continue
            if not adapter.can_deliver(target):
                reason: str | None = getattr(adapter, "why_not", lambda _s: None)(target)
                self._finish(group, WAITING, error=reason or f"session {target.id} is not reachable from this process")
                continue
            with self._lock:
                ours = target.id in self._turns
            if not ours and (target.busy or target.in_turn):
                self._when_busy(target, group)
                continue
            if not ours:
                # Seed 003: fires that came due while the session was busy are pushed one
                # period past the end of the turn instead of firing now.
                rebased = [f for f in group if f.wait_reason and f.wait_reason.startswith(REBASE_NOTE) and f.every_s]
                if rebased:
                    self._rebase(rebased)
                    group = [f for f in group if f not in rebased]
                    if not group:
                        continue
            with self._lock:
                ours = target.id in self._turns
                if ours:  # our own turn runs there: waiting fires go in the next one, right after it
                    self._queued[target.id].extend(f for f in group if _just_waits(f))
                else:
                    self._turns.add(target.id)
            if ours:
                others = [f for f in group if not _just_waits(f)]
                if others:
                    self._when_busy(target, others)  # skipped, or waiting to be re-based
                continue
            if self._pool is None:
                self._run_turn(target, adapter, group)
            else:
                self._pool.submit(self._run_turn, target, adapter, group)

    def _when_busy(self, target: Session, group: Sequence[Fire]) -> None:
        skip = [f for f in group if f.on_busy == "skip"]
        rebase = [f for f in group if f.on_busy == "rebase" and f.every_s]
        wait = [f for f in group if f not in skip and f not in rebase]
        if skip:
            self._finish(skip, SKIPPED, error=f"session {target.id} was busy at the due time (policy: skip)")
        if rebase:
            self._finish(rebase, WAITING, error=f"{REBASE_NOTE}session {target.id} was busy at the due time; "
                         "re-based one period after its turn ends")
        if wait:
            self._finish(wait, WAITING, error=f"session {target.id} is busy; waiting for it to be idle")
        if rebase or wait:
            with self._lock:  # look again, in the store, once these are written (the cache may be stale)
                self._recheck = True
            self.events.emit(ev.WAITING, target.id, [*rebase, *wait])

    def _rebase(self, fires: Sequence[Fire]) -> None:
        """Seed 003: the session is idle again; push each re-based reminder one full
        period forward from now (its anchor moves with it) and record the
        occurrences that came due during the turn as skipped, not fired."""
        now = self.clock.now()
        counts: dict[str, int] = defaultdict(int)
        for f in fires:
            counts[f.reminder_id] += 1

        for rid, n in counts.items():
            def push(r: Reminder, n: int = n) -> Reminder | None:
                if r.state not in (ACTIVE, DONE) or not r.schedule.every_s:
                    return None
                nxt = now + timedelta(seconds=r.schedule.every_s)
                sched = replace(r.schedule, first_at=nxt)
                if sched.until is not None and nxt > sched.until:
                    return replace(r, state=DONE, next_fire_at=None, fired_count=max(0, r.fired_count - n))
                return replace(r, schedule=sched, state=ACTIVE, next_fire_at=nxt, snoozed=False,
                               fired_count=max(0, r.fired_count - n))

            try:
                self.store.modify(push, now_us=to_us(now), ids=[rid], require_all=False)
            except Exception:
                log.exception("could not re-base reminder %s", rid)
        self._finish(fires, SKIPPED, error="re-based: the session was busy when it came due (policy: rebase); "
                     "it fires again one period after the turn ended")

    def _run_turn(self, target: Session, adapter: SessionAdapter, fires: Sequence[Fire]) -> None:
        """Run turns in ``target`` until no more fires are queued for it. A shared
        session's turn is claimed in the store once for the whole run."""
        token, why = self._claim_turn(target) if adapter.shared else (None, "")
        try:
            while True:
                if adapter.shared and token is None:  # busy elsewhere, or the store is away
                    self._finish(fires, WAITING, error=why)
                else:
                    self._one_turn(target, adapter, fires)
                with self._lock:
                    queued = self._queued.pop(target.id, [])
                    if not queued:
                        self._turns.discard(target.id)
                        self._recheck = True
                        break
                fires = sorted(queued, key=lambda f: (f.due_at, f.occurrence_id))
        finally:
            if token is not None:
                with self._lock:
                    self._turn_tokens.discard(token)  # released, or left to expire: not renewed
                try:
                    self.store.release_turn(target.id, token, now_us=now_us(self.clock))
                except Exception:
                    log.exception("could not release the turn of %s (its lease will expire)", target.id)
            self.poke()

    def _claim_turn(self, target: Session) -> tuple[str | None, str]:
        """(token, "") when this engine now holds the session's turn, else (None, why)."""
        now = now_us(self.clock)
        token = uuid.uuid4().hex
        until = now + int(self.settings.lease_s * 1e6)
        try:
            got = self.store.claim_turn(target.id, owner=self.owner, token=token, until_us=until, now_us=now)
        except StoreError as exc:  # the store is busy or away: the fires wait, nothing fails
            log.warning("cannot start a turn in %s now (%s); the fires wait", target.id, exc)
            return None, f"store unavailable; waiting to retry: {exc}"[:300]
        if not got:
            return None, f"session {target.id} is busy; waiting for it to be idle"
        with self._lock:
            self._turn_tokens.add(token)
        return token, ""

    def _one_turn(self, target: Session, adapter: SessionAdapter, fires: Sequence[Fire]) -> None:
        now = now_us(self.clock)
        try:
            failpoints.hit("during_delivery")
            result = self._deliver(target, adapter, fires)
            failpoints.hit("after_delivery_before_ack")
            done = now_us(self.clock)
            slow = done - now > SLOW_TURN_US
            if result.busy:
                self._finish(fires, WAITING, error=f"session {target.id} started a turn; waiting for it to be idle")
            elif result.retry and done - min(to_us(f.due_at) for f in fires) < RETRY_FOR_US:
                self._finish(fires, WAITING, error=f"{result.error or 'agent unreachable'}; waiting to retry"[:500])
                self.events.emit(ev.WAITING, target.id, list(fires))
            elif result.ok:
                note = "already taken by an earlier turn of the session" if result.duplicate else None
                self._finish(fires, OCC_DELIVERED, delivered_us=done, delivered_to=result.session or target.id,
                             error=note, urgent=slow)
                self.events.emit(ev.DELIVERED, result.session or target.id, list(fires), result)
            else:
                why = result.error or "turn failed"
                if result.retry:
                    why = f"{why} (given up: tried for {RETRY_FOR_US // 3_600_000_000} h after the due time)"
                self._finish(fires, OCC_FAILED, error=why, urgent=slow)
                self.events.emit(ev.FAILED, target.id, list(fires), why)
        except StoreError as exc:  # the turn could not record itself: retry later, never fail
            log.warning("turn in %s hit a store error (%s); the fires wait", target.id, exc)
            self._finish(fires, WAITING, error=f"store unavailable; waiting to retry: {exc}"[:300])
        except Exception as exc:  # an adapter bug must not lose the occurrence
            log.exception("delivery to %s failed", target.id)
            self._finish(fires, OCC_FAILED, error=f"{type(exc).__name__}: {exc}")
            self.events.emit(ev.FAILED, target.id, list(fires), str(exc))

    def _deliver(self, target: Session, adapter: SessionAdapter, fires: Sequence[Fire]) -> TurnResult:
        """Run the turn; when it fails at once, re-send once into a fresh session."""
        result = adapter.run_turn(target, frame_fired(fires), fires)
        if result.ok or result.busy or not result.instant:
            return result
        fresh = self._fresh_session(target, adapter)
        if fresh is None:
            return replace(result, error=f"{result.error} (no fresh session could take it)")
        log.warning("turn in %s failed at once (%s); re-sending into fresh session %s", target.id, result.error, fresh.id)
        token = None
        now = now_us(self.clock)
        try:
            if adapter.shared:
                token = uuid.uuid4().hex
                until = now + int(self.settings.lease_s * 1e6)
                if not self.store.claim_turn(fresh.id, owner=self.owner, token=token, until_us=until, now_us=now):
                    token = None
                    return replace(result, error=f"{result.error}; fresh session {fresh.id} is busy")
                with self._lock:
                    self._turn_tokens.add(token)
            second = adapter.run_turn(fresh, frame_fired(fires), fires)
        finally:
            if token is not None:
                with self._lock:
                    self._turn_tokens.discard(token)
                try:
                    self.store.release_turn(fresh.id, token, now_us=now_us(self.clock))
                except Exception:
                    log.exception("could not release the turn of %s (its lease will expire)", fresh.id)
        if second.ok:
            return replace(second, session=fresh.id)
        return TurnResult(False, error=f"session {target.id}: {result.error}; fresh session {fresh.id}: {second.error}")

    def _fresh_session(self, target: Session, adapter: SessionAdapter) -> Session | None:
        """The fallback session of ``target``: the one made on an earlier failure
        if it is still active, else a new one with the same adapter and config
        (a command session's ``fresh_argv`` replaces its ``argv``)."""
        for sess in self.store.list_sessions(now_us=now_us(self.clock)):
            if (sess.parent_id == target.id and sess.state == SESSION_ACTIVE and sess.adapter == target.adapter
                    and sess.config.get("fallback_for") == target.id and adapter.can_deliver(sess)):
                return sess
        config = dict(target.config)
        if config.get("fresh_argv"):
            config["argv"] = config["fresh_argv"]
        config["fallback_for"] = target.id
        fresh = Session(f"{target.id}~{secrets.token_hex(3)}", adapter=target.adapter, config=config,
                        parent_id=target.id, title=f"fresh session for {target.title or target.id}")
        if not adapter.can_deliver(fresh):
            return None
        return self.store.put_session(fresh, now_us=now_us(self.clock))

    def _alert_then_route(self, fires: Sequence[Fire]) -> None:
        for f in fires:
            try:
                if not self.store.set_alert(f.occurrence_id, f.token, expect="pending", to="playing"):
                    continue  # another engine has it, or it already played
                try:
                    failpoints.hit("during_alert")
                    state = self.alerter.alert(f)
                except Exception:
                    log.exception("alerter failed for %s", f.key)
                    state = "failed"
                self.store.set_alert(f.occurrence_id, f.token, expect="playing", to=state)
                self.events.emit(ev.ALERTED, f, state)
            except Exception:
                log.exception("alert bookkeeping failed for %s; delivery goes on", f.key)
        self.route([replace(f, alert="done") for f in fires])

    # -- helpers -------------------------------------------------------------------------

    def _finish(self, fires: Sequence[Fire], state: str, *, error: str | None = None,
                delivered_us: int | None = None, delivered_to: str | None = None, urgent: bool = False) -> None:
        """Queue outcomes for the store thread. ``urgent``: write them now rather than
        with the next batch (after a slow turn, to keep the window in which a crash
        would repeat it short)."""
        self._outcomes.extend(
            Outcome(occurrence_id=f.occurrence_id, token=f.token, state=state,
                    fired_at_us=None if f.fired_at is None else to_us(f.fired_at),
                    delivered_at_us=delivered_us, delivered_to=delivered_to, error=error)
            for f in fires
        )
        if urgent:
            self.urgent = True
        self.poke()

    def _busy(self, target: Session) -> bool:
        with self._lock:
            local = target.id in self._turns
        return local or target.busy or target.in_turn

    def _resolve(self, session_id: str | None, *, fresh: bool = False) -> Session | None:
        """The session to deliver to (cached for a second; hints clear the cache)."""
        key = session_id if session_id is not None else MOST_RECENT
        now = now_us(self.clock)
        hit = self._sessions.get(key)
        if not fresh and hit is not None and now - hit[1] < SESSION_TTL_US:
            return hit[0]
        if session_id is None:
            sess = self.store.most_recent_session()
        else:
            sess = self.store.get_session(session_id, now_us=now)
        self._sessions[key] = (sess, now)
        return sess



def _drain(items: deque[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(items.popleft())
        except IndexError:
            return out


def _just_waits(fire: Fire) -> bool:
    """A fire that, when its session is busy, simply waits for the next idle turn
    (policy ``wait``, or ``rebase`` on a kind that has no period to re-base by)."""
    return fire.on_busy == "wait" or (fire.on_busy == "rebase" and not fire.every_s)


class Workers:
    """A few daemon threads running queued calls (lighter than an executor: no
    futures; delivery reports through outcomes, not return values)."""

    def __init__(self, size: int, name: str) -> None:
        self._q: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._size = size
        self._name = name
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            self._busy += 1
            if self._busy > len(self._threads) and len(self._threads) < self._size:
                t = threading.Thread(target=self._loop, name=f"{self._name}-{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
        self._q.put((fn, args))

    def _loop(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("%s: a queued call failed", self._name)
            finally:
                with self._lock:
                    self._busy -= 1

    @property
    def idle(self) -> bool:
        with self._lock:
            return self._busy == 0

    def shutdown(self, wait: bool = True, timeout: float = 10.0) -> None:
        for _ in self._threads:
            self._q.put(None)
        if wait:
            for t in self._threads:
                t.join(timeout)
