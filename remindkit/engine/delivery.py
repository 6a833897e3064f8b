"""Delivery: from a fired occurrence to a turn in its session.

Order on fire: the fired event is published, then the alarm and the
announcement play (when the reminder asks and this engine alerts), then the
``<schedule-fired>`` message is delivered. Delivery never interrupts a turn:

* the target is the reminder's session, or, when it has none, the most recently
  active session;
* a session that is busy (a turn runs through remindkit, or an external agent
  marked it busy) keeps the occurrence ``waiting``, or skips it, or re-bases
  it, per the reminder's ``on_busy`` policy; waiting ones for one session go
  out together in its next idle turn, ordered by due time, a repeating
  reminder's backlog as its latest fire (``missed`` counts the others, which are
  recorded skipped: superseded). Re-base:
  when the session is idle again, a repeating reminder whose occurrence came
  due during the turn is pushed forward by one full period from then; the
  occurrence is recorded ``skipped`` (re-based) and does not count as a fire;
* a session this process cannot reach (an adapter it lacks, or a python session
  registered elsewhere) keeps it ``waiting`` until one that can picks it up;
* a fire for the person alone (no session and none active, or a session with no
  adapter at all) ends ``alerted`` once its alert reached the person; one that did
  not (no alarm asked for, or it failed) waits for a session;
* fallbacks: a turn that fails at once (the session cannot be
  resumed) is re-sent once into a fresh session of the same adapter, linked to
  the old one by ``parent_id`` (and reused by later fires of that session); if
  that fails too, the occurrence is ``failed`` with both reasons and a
  ``failed`` event tells the UIs. A deleted session's occurrences are ``failed``.

Outcomes are written with the claim's token in batches by the engine thread
(:meth:`Dispatcher.flush`); a stale token (the lease was taken over) is refused.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import secrets
import statistics
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from .. import events as ev
from .. import failpoints
from ..alerts import Alerter, NullAlerter
from ..clock import Clock, from_us, now_us, to_us
from ..errors import StoreError
from ..models import (
    ALERTED,
    OCC_FAILED,
    SESSION_ACTIVE,
    SESSION_DELETED,
    SKIPPED,
    WAITING,
    AlertState,
    FallbackPolicy,
    Fire,
    OccurrenceState,
    Outcome,
    Session,
    WaitFor,
)
from ..models import DELIVERED as OCC_DELIVERED
from ..protocol import frame_fired
from ..sessions.base import (
    SessionAdapter,
    TurnResult,
    claims_turn,
    fresh_differs,
    fresh_session_id,
)
from ..sessions.registry import Adapters
from ..settings import Settings
from ..store import SqlStore
from ..store.turns import TurnLease
from . import decide
from .decide import Action
from .plan import rebase_positions, rebased

log = logging.getLogger(__name__)
SESSION_TTL_US = 10_000_000  # hints clear the cache sooner; this bounds a missed hint
MOST_RECENT = "\0most-recent"
SLOW_TURN_US = 5_000  # a turn slower than this has its outcome written at once
PROMPT_FIRED = 32  # fires waiting to be recorded, at most, for them to be written at once
FIRED_HOLD_US = 250_000  # in a burst, a fire's time waits this long at most for its outcome
FAST_TURN_US = 1_000  # an adapter whose turns take less than this has them run in batches ...
TURN_TIMES = 15  # (the median of its last this many turns)
TURN_BATCH = 32  # ... of this many sessions, one after another on one worker
# A fast lane's turn running longer than this leaves the turns queued behind it to
# another worker (a turn can look this slow only when it really hangs: one waiting a
# few ms for the GIL must not start a second worker, and a GIL fight with it)
LANE_STUCK_US = 100_000
# ... and one that took longer than this moves the queued turns of adapters no longer
# fast to a worker each (well above what waiting for the GIL or a core costs a turn:
# moving a burst's turns to eight threads because one turn waited is what the lane avoids)
LANE_SPILL_US = 20_000
Turn = tuple[Session, SessionAdapter, list[Fire], bool]  # (session, adapter, fires, fallback first)
RETRY_FOR_US = (
    3_600_000_000  # an agent that cannot be reached is tried this long after the due time
)
# A session runs one turn at a time; the sessions whose turns reach one peer (an
# adapter's ``peer(session)``: a webhook receiver's or a model server's origin) run at
# most this share of the turn workers at once, their other turns queued in order:
# slow peers (a receiver that answers a byte a second) hold their share until their
# deadline, and the other workers go on serving every other session
PEER_SHARE = 0.5
REBASE_TRIES = 5  # a re-base computed from reminders that changed meanwhile is computed again


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
        forget: Callable[[Sequence[int]], None] | None = None,
        workers: int = 8,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.adapters = adapters
        self.alerter: Alerter = alerter or NullAlerter(
            result=AlertState.MUTED
        )  # none here: none heard
        self.events = events or ev.Events()
        self.settings = settings or store.settings
        self.inline = inline
        self.poke = poke or (lambda: None)
        self.forget = forget or (
            lambda _ids: None
        )  # drop claims cancelled under us from the engine's hand
        # Outcome queues are deques (append and popleft are atomic): producers on
        # several threads never wait on a lock. The lock guards turn state only.
        self._lock = threading.Lock()
        self._outcomes: deque[Outcome] = deque()
        self._fired: deque[tuple[int, str, int]] = deque()
        self._holding: set[int] = (
            set()
        )  # occurrence ids handed to us whose outcome is not yet written
        self._turns: set[str] = set()  # sessions where a turn of ours runs
        self._turn_tokens: set[str] = set()  # store turn claims we hold (renewed with our leases)
        self._queued: dict[str, list[Fire]] = defaultdict(list)  # fires for its next turn
        self._rebasing: set[str] = set()  # reminders with a fire waiting to be re-based
        self._recheck = False
        self._sessions: dict[
            str, tuple[Session | None, int, int]
        ] = {}  # (session, loaded at, epoch)
        self._epochs = itertools.count(
            1
        )  # orders cache loads against change notices (see invalidate)
        # adapter name -> its last TURN_TIMES turn times (us); the median says whether
        # it is fast: one turn that waited out a stall of the machine does not flip it
        self._turn_us: dict[str, deque[float]] = {}
        self._pool = None if inline else Workers(workers, "remindkit-turn")
        if self._pool is not None:
            self._pool.prestart()  # a fire that is due when the engine starts does not wait for a thread
        # Turns of a fast adapter run in batches, one batch after another, on one
        # worker at a time (the lane's drainer): a burst's fast turns on several
        # threads spend more on the GIL passing between them than on the turns
        # (10,000 sessions due at once: 2.8 s on eight workers, 1.0 s on one). While
        # a turn there runs long, another drainer takes the turns queued behind it
        # (unstick); once the adapter's turns are slow, its queued turns get a worker
        # each (_spill).
        self._lane: deque[deque[Turn]] = deque()
        # drainer thread -> (when its current turn began, or None between turns;
        # the rest of its batch)
        self._drainers: dict[int, tuple[float | None, deque[Turn]]] = {}
        self._starting = 0  # drainers submitted that have not begun
        self._alerts = None if inline else Workers(1, "remindkit-alert")
        self._share = max(1, int(workers * PEER_SHARE))
        self._peers: dict[str, int] = {}  # peer -> its turns running
        self._parked: dict[str, deque[Turn]] = {}  # peer -> its turns waiting for its share
        self.urgent = False  # outcomes that should not wait for the next batch
        self._closed = False
        # Our own writes (turns, re-bases, fresh sessions) carry the engine's hint origin,
        # so the engine does not read the store again for them; what they changed is
        # noted here instead: sessions to load again (store thread) ...
        self._reload: set[str] = set()
        # ... and when the reminders re-based here fire next (the engine's next due)
        self._moved: deque[int] = deque()

    # -- called by the engine thread -----------------------------------------------------

    def submit(self, fires: Sequence[Fire], fired_us: int) -> None:
        """Fire these occurrences now: publish, alert, deliver."""
        with self._lock:
            self._holding.update(f.occurrence_id for f in fires)
        fired_at = from_us(fired_us)
        stamped = [f if f.fired_at is not None else f.fired(fired_at) for f in fires]
        self._fired.extend((f.occurrence_id, f.token, fired_us) for f in stamped)
        if len(self._fired) <= PROMPT_FIRED:
            # A fire on its own is written (with its event, which event streams carry)
            # at once, not with the next batch of outcomes; a burst keeps its batches.
            self.urgent = True
            self.poke()
        for f in stamped:
            self.events.emit(ev.Fired, f)
        plain = [f for f in stamped if f.alert != AlertState.PENDING]
        alerting = [f for f in stamped if f.alert == AlertState.PENDING]
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
        burst = self.bursting
        outcomes = _drain(self._outcomes)
        fired = _drain(self._fired)
        with self._lock:
            recheck, self._recheck = self._recheck, False
            reload, self._reload = self._reload, set()
        if reload:
            self.prefetch({None if k == MOST_RECENT else k for k in reload})
        ended = {o.occurrence_id for o in outcomes}
        fired = [f for f in fired if f[0] not in ended]
        if burst and not self._closed and fired:
            # In a burst, a fire's time waits (FIRED_HOLD_US at most) to be written
            # with its outcome, which comes soon: one write of each occurrence, not two.
            young = now_us(self.clock) - FIRED_HOLD_US
            held = [f for f in fired if f[2] > young]
            if held:
                self._fired.extendleft(reversed(held))
                fired = [f for f in fired if f[2] <= young]
        stale: list[int] = []
        try:
            if fired or outcomes:
                stale = self.store.outcomes.finish(outcomes, fired=fired, now_us=now_us(self.clock))
                self.events.emit(ev.Written)
        except Exception:
            self._outcomes.extendleft(reversed(outcomes))  # keep them for the next flush
            self._fired.extendleft(reversed(fired))
            with self._lock:
                self._recheck = self._recheck or recheck
            raise
        with self._lock:  # written (or refused): no longer ours to hold
            self._holding.difference_update(o.occurrence_id for o in outcomes)
        for occ_id in stale:
            log.warning(
                "outcome of occurrence %s refused: its lease was taken over by another engine",
                occ_id,
            )
        if recheck:
            self.deliver_waiting()
        return stale

    def deliver_waiting(self) -> int:
        """Pick up waiting occurrences for sessions this process can serve now."""
        try:
            candidates = self.store.waiting.waiting_sessions()
        except Exception:
            log.exception("cannot list waiting deliveries")
            return 0
        now = now_us(self.clock)
        # Fresh from the store, not the cache: a copy cached while a turn ran would
        # keep saying the session is busy (the cache serves the fire thread).
        named = [sid for sid in candidates if sid is not None]
        try:
            found = self.store.sessions.get_sessions(named, now_us=now) if named else {}
        except Exception:
            log.exception("cannot load %d waiting session(s)", len(named))
            return 0
        for name in named:
            self._sessions[name] = (found.get(name), now, next(self._epochs))
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
        fires = self.store.waiting.claim_waiting(
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
            found = self.store.sessions.get_sessions(named, now_us=now) if named else {}
            for sid in named:
                self._sessions[sid] = (found.get(sid), now, next(self._epochs))
            if None in session_ids:
                self._resolve(None, fresh=True)
        except Exception:
            log.exception("cannot load %d session(s)", len(session_ids))

    def epoch(self) -> int:
        """A mark to take when a change is noticed: ``invalidate(before=mark)``
        reloads only the sessions cached before it (any thread)."""
        return next(self._epochs)

    def invalidate(self, before: int | None = None) -> None:
        """Something changed in the store: reload the cached sessions (store thread),
        or with ``before``, those loaded before that mark (a session loaded after the
        change was noticed has it already: after a burst's claim, 10,000 of them)."""
        keys = [
            k
            for k, (_s, _at, loaded) in list(self._sessions.items())
            if before is None or loaded < before
        ]
        for k in keys:
            self._sessions.pop(k, None)
        self.prefetch({None if k == MOST_RECENT else k for k in keys})

    @property
    def has_outcomes(self) -> bool:
        return bool(self._outcomes or self._fired or self._recheck or self._reload)

    @property
    def turns_idle(self) -> bool:
        """No turn is queued or running in this process."""
        with self._lock:
            lane = bool(self._lane or self._drainers or self._starting or self._parked)
        return not lane and (self._pool is None or self._pool.idle)

    @property
    def bursting(self) -> bool:
        """Many fires are on their way: more outcomes wait to be written than a fire
        on its own leaves, or turns wait for a worker. (A long turn that runs alone
        is no burst.)"""
        if len(self._outcomes) + len(self._fired) > PROMPT_FIRED:
            return True
        return bool(self._lane or self._parked) or any(
            p is not None and p.backlog > 0 for p in (self._pool, self._alerts)
        )

    @property
    def idle(self) -> bool:
        quiet = not self._outcomes and not self._fired
        return quiet and self.turns_idle and (self._alerts is None or self._alerts.idle)

    def close(self, wait: bool = True) -> None:
        self._closed = True
        for pool in (self._alerts, self._pool):
            if pool is not None:
                pool.shutdown(wait=wait)
        with self._lock:
            parked = [turn for turns in self._parked.values() for turn in turns]
            self._parked.clear()
            for sess, _adapter, _fires, _first in parked:
                self._turns.discard(sess.id)
            queued = [f for _s, _a, fires, _f in parked for f in fires]
            queued += [f for fires in self._queued.values() for f in fires]
            self._queued.clear()
        if queued:  # not run here after all: any engine can pick them up
            self._finish(
                queued, WAITING, error="engine stopped before its turn", wait_for=WaitFor.IDLE
            )

    # -- routing -------------------------------------------------------------------------

    def turn_tokens(self) -> set[str]:
        with self._lock:
            return set(self._turn_tokens)

    def holding(self) -> set[int]:
        with self._lock:
            return set(self._holding)

    def hold(self, occurrence_ids: Iterable[int]) -> None:
        """Count these claims as in hand (their leases are renewed, they are no orphans)."""
        with self._lock:
            self._holding.update(occurrence_ids)

    def unhold(self, occurrence_ids: Iterable[int]) -> None:
        with self._lock:
            self._holding.difference_update(occurrence_ids)

    def route(self, fires: Sequence[Fire]) -> None:
        """Decide (``decide.route``) and carry out what happens to these fires now."""
        with self._lock:
            self._holding.update(f.occurrence_id for f in fires)
        groups: dict[str | None, list[Fire]] = defaultdict(list)
        targets: dict[str | None, Session | None] = {}
        for f in fires:
            try:
                target = self._resolve(f.session)
            except StoreError as exc:  # cannot even look the session up now: it waits
                self._finish(
                    [f],
                    WAITING,
                    error=f"store unavailable; waiting to retry: {exc}"[:300],
                    wait_for=WaitFor.RETRY,
                )
                continue
            key = target.id if target is not None else None
            targets[key] = target
            groups[key].append(f)
        turns: list[Turn] = []
        for key, group in groups.items():
            sess = targets[key]
            adapter = self.adapters.get(sess.adapter) if sess is not None else None
            for d in decide.route(group, self._target(sess, adapter, group)):
                self._carry_out(sess, adapter, d, turns)
        self._start_turns(turns)

    def _start_turns(self, turns: list[Turn]) -> None:
        """Run these turns (each in its own session). Turns of an adapter known to be
        fast go to the fast lane in batches, run one after another by one worker (see
        unstick for a turn of it that runs long): 10,000 sessions due at once cost a
        few hundred hand-offs, not 10,000, and no GIL fight among eight threads.
        Others (a model's turn takes seconds) get a worker each."""
        if self._pool is None:
            for turn in turns:
                self._run_turn(*turn)
            return
        batch: deque[Turn] = deque()
        for turn in turns:
            if self._fast(turn[1].name):
                batch.append(turn)
                if len(batch) >= TURN_BATCH:
                    with self._lock:
                        self._lane.append(batch)
                    batch = deque()
            else:
                self._submit(turn)
        if batch:
            with self._lock:
                self._lane.append(batch)
        self.unstick()

    def unstick(self) -> float | None:
        """Start a drainer for the fast lane when turns wait there and no drainer is
        free to take them: none runs, or each is in a turn that has run longer than
        LANE_STUCK_US (the rest of such a drainer's batch goes back to the lane
        first). Returns when to look again (``time.perf_counter``), or None. Called
        as turns are queued, as a drainer leaves, and by the engine's store thread."""
        if self._pool is None:
            return None
        now = time.perf_counter()
        slow = LANE_STUCK_US / 1e6
        with self._lock:
            if self._starting:
                return None
            busy = self._drainers.values()
            if any(began is None for began, _rest in busy):
                return None  # a drainer is between turns: it takes the next batch
            late = [rest for began, rest in busy if began is not None and now - began > slow]
            if len(late) < len(busy):
                if not self._lane and not any(rest for _b, rest in busy):
                    return None
                return min(b for b, _r in busy if b is not None) + slow
            for rest in late:  # the turns queued behind a long one are taken elsewhere
                if rest:
                    self._lane.appendleft(deque(rest))
                    rest.clear()
            if not self._lane:
                return None
            self._starting += 1
        self._pool.submit(self._drain_lane)
        return None

    def _drain_lane(self) -> None:
        """Run the fast lane's batches until it is empty (a worker of the pool), each
        batch's turns in order; ``_drainers`` says when its current turn began and
        holds the rest of its batch (unstick may take it)."""
        me = threading.get_ident()
        rest: deque[Turn] = deque()
        with self._lock:
            self._starting -= 1
            self._drainers[me] = (None, rest)
        try:
            while True:
                with self._lock:
                    if not rest:
                        if not self._lane:
                            del self._drainers[me]  # under the lock: no batch is left behind
                            return
                        rest.extend(self._lane.popleft())
                    turn = rest.popleft()
                    t0 = time.perf_counter()
                    self._drainers[me] = (t0, rest)
                peer = _peer_of(turn)
                if peer is None or self._take(peer, turn):
                    try:
                        self._run_turn(*turn)
                    except Exception:  # _run_turn records its own failures; a bug: go on
                        log.exception("turn in %s failed", turn[0].id)
                    finally:
                        if peer is not None:
                            self._give_back(peer)
                with self._lock:
                    self._drainers[me] = (None, rest)
                if (time.perf_counter() - t0) * 1e6 > LANE_SPILL_US:
                    self._spill(rest)
        finally:
            with self._lock:
                self._drainers.pop(me, None)
                if rest:  # left by a failure: back to the lane
                    self._lane.appendleft(deque(rest))
            self.unstick()  # a batch queued as this drainer left is taken
            self.poke()

    def _fast(self, adapter: str, *, unknown: bool = False) -> bool:
        """Whether the adapter's recent turns took under FAST_TURN_US (their median);
        ``unknown``: the answer for an adapter with no turn yet."""
        times = self._turn_us.get(adapter)
        if not times:
            return unknown
        return statistics.median(times) < FAST_TURN_US

    def _spill(self, rest: deque[Turn]) -> None:
        """After a slow turn in the lane (LANE_SPILL_US): the queued turns of adapters
        that are no longer fast (the median of their recent turns) get a worker each,
        so that a slow adapter's turns do not run one after another; the others stay
        queued."""
        assert self._pool is not None
        with self._lock:
            queued = [*rest, *(turn for batch in self._lane for turn in batch)]
            fast: list[Turn] = []
            slow: list[Turn] = []
            for turn in queued:
                quick = self._fast(turn[1].name, unknown=True)
                (fast if quick else slow).append(turn)
            if not slow:
                return
            rest.clear()
            self._lane.clear()
            if fast:
                self._lane.append(deque(fast))
        for turn in slow:
            self._submit(turn)

    def _submit(self, turn: Turn) -> None:
        """Give ``turn`` a worker, within its peer's share (PEER_SHARE); past the share
        it waits for one of the peer's running turns to end."""
        assert self._pool is not None
        peer = _peer_of(turn)
        if peer is None:
            self._pool.submit(self._run_turn, *turn)
        elif self._take(peer, turn):
            self._pool.submit(self._peer_turn, peer, turn)

    def _take(self, peer: str, turn: Turn) -> bool:
        """A place in ``peer``'s share for ``turn``, or False: it is parked."""
        with self._lock:
            running = self._peers.get(peer, 0)
            if running >= self._share:
                self._parked.setdefault(peer, deque()).append(turn)
                return False
            self._peers[peer] = running + 1
            return True

    def _give_back(self, peer: str) -> None:
        """A turn of ``peer`` ended: its place goes to the peer's next parked turn."""
        assert self._pool is not None
        with self._lock:
            waiting = None if self._closed else self._parked.get(peer)
            turn = waiting.popleft() if waiting else None
            if waiting is not None and not waiting:
                del self._parked[peer]
            if turn is None:
                left = self._peers.get(peer, 1) - 1
                if left > 0:
                    self._peers[peer] = left
                else:
                    self._peers.pop(peer, None)
        if turn is not None:
            self._pool.submit(self._peer_turn, peer, turn)

    def _peer_turn(self, peer: str, turn: Turn) -> None:
        try:
            self._run_turn(*turn)
        finally:
            self._give_back(peer)

    def _target(
        self, sess: Session | None, adapter: SessionAdapter | None, group: Sequence[Fire]
    ) -> decide.Target:
        if sess is None:
            return decide.Target(None)
        if adapter is None:
            return decide.Target(sess, adapter=False)
        if not adapter.can_deliver(sess):
            why: str | None = getattr(adapter, "why_not", lambda _s: None)(sess)
            return decide.Target(sess, reachable=False, why_not=why)
        with self._lock:
            ours = sess.id in self._turns
            rebasing = {f.reminder_id for f in group if f.reminder_id in self._rebasing}
        return decide.Target(
            sess, our_turn=ours, rebasing=rebasing, breaker_after=self.settings.breaker_after
        )

    def _carry_out(
        self,
        sess: Session | None,
        adapter: SessionAdapter | None,
        d: decide.Decision,
        turns: list[Turn],
    ) -> None:
        fires = list(d.fires)
        act = d.action
        if act == Action.WAIT:
            self._finish(fires, WAITING, error=d.reason, wait_for=d.wait_for)
            if d.wait_for == WaitFor.REBASE:
                with self._lock:
                    self._rebasing.update(f.reminder_id for f in fires)
            if d.wait_for in (WaitFor.IDLE, WaitFor.REBASE) and sess is not None:
                with (
                    self._lock
                ):  # look again, in the store, once these are written (the cache may be stale)
                    self._recheck = True
                self.events.emit(ev.Waiting, sess.id, fires)
        elif act == Action.SKIP:
            self._finish(fires, SKIPPED, error=d.reason)
        elif act == Action.ALERTED:  # the person's alone: the alert reached them, it ends
            self._finish(fires, ALERTED, error=d.reason)
        elif act == Action.FAIL:
            self._finish(fires, OCC_FAILED, error=d.reason, pause=d.pause)
            self.events.emit(ev.Failed, sess.id if sess is not None else None, fires, d.reason)
        elif act == Action.REBASE:
            self._rebase(fires, d.reason or "re-based")
        elif act in (Action.QUEUE, Action.DELIVER):
            assert sess is not None and adapter is not None
            with self._lock:
                ours = sess.id in self._turns
                if ours:  # our own turn runs there: these go in the next one, right after it
                    self._queued[sess.id].extend(fires)
                else:
                    self._turns.add(sess.id)
            if not ours:
                turns.append((sess, adapter, fires, d.fallback_first))
        else:  # pragma: no cover - route() returns only the actions above
            raise AssertionError(f"unexpected routing decision {act}")

    def _rebase(self, fires: Sequence[Fire], note: str) -> None:
        """The session is idle again: each re-based reminder fires next one full
        period from now, at the position of the fire that came due during the
        turn (which is recorded skipped, not fired); its claims made ahead of time
        are cancelled in the same transaction."""
        now = self.clock.now()
        try:
            with self._own():
                stale, cancelled, moved = rebase_fires(self.store, fires, now=now, note=note)
        except StoreError as exc:
            log.warning("could not re-base %d fire(s) now (%s); they wait", len(fires), exc)
            self._finish(
                fires,
                WAITING,
                error=f"store unavailable; waiting to retry: {exc}"[:300],
                wait_for=WaitFor.REBASE,
            )
            return
        with self._lock:
            self._rebasing.difference_update(f.reminder_id for f in fires)
            self._holding.difference_update(f.occurrence_id for f in fires)
        for occ_id in stale:
            log.warning(
                "re-base of occurrence %s refused: its lease was taken over by another engine",
                occ_id,
            )
        if cancelled:
            self.forget(cancelled)
        if moved is not None:  # the engine takes the earlier of this and its next due
            self._moved.append(moved)
        self.poke()

    def _run_turn(
        self,
        target: Session,
        adapter: SessionAdapter,
        fires: Sequence[Fire],
        fallback_first: bool = False,
    ) -> None:
        """Run turns in ``target`` until no more fires are queued for it. A shared
        session's turn is claimed in the store once for the whole run."""
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
        try:
            while True:
                if why:
                    self._finish(fires, WAITING, error=why, wait_for=WaitFor.IDLE)
                else:
                    self._one_turn(target, adapter, fires, fallback_first)
                with self._lock:
                    queued = self._queued.pop(target.id, [])
                    if not queued:
                        self._turns.discard(target.id)
                        self._recheck = True
                        break
                fires = self._latest(sorted(queued, key=lambda f: (f.due_at, f.occurrence_id)))
        finally:
            if lease is not None:
                with self._own():
                    lease.release()
                self._changed(target.id, MOST_RECENT)  # idle, and the most recently active
            self._nudge()

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
            self.unhold({f.occurrence_id for f in fires} - {f.occurrence_id for f in going})
        return going

    def _lease(self, session_id: str) -> TurnLease:
        return TurnLease(
            self.store.turns,
            session_id,
            owner=self.owner,
            clock=self.clock,
            lease_s=self.settings.lease_s,
            held=self._turn_tokens,
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
        try:
            failpoints.hit("during_delivery")
            result, took, verdict = self._deliver(target, adapter, fires, message, fallback_first)
            failpoints.hit("after_delivery_before_ack")
            done = now_us(self.clock)
            slow = done - handed > SLOW_TURN_US
            took_us = (time.perf_counter() - started) * 1e6  # real time, whatever the clock
            times = self._turn_us.get(adapter.name)
            if times is None:
                times = self._turn_us[adapter.name] = deque(maxlen=TURN_TIMES)
            times.append(took_us)
            if verdict.action == Action.WAIT:
                self._finish(
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
                self._finish(
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
                self._finish(
                    fires, OCC_FAILED, error=why, urgent=slow, handed_us=handed, pause=verdict.pause
                )
                self._record_turn(target.id, ok=False, error=why)
                self.events.emit(ev.Failed, target.id, list(fires), why)
        except StoreError as exc:  # the turn could not record itself: retry later, never fail
            log.warning("turn in %s hit a store error (%s); the fires wait", target.id, exc)
            self._finish(
                fires,
                WAITING,
                error=f"store unavailable; waiting to retry: {exc}"[:300],
                wait_for=WaitFor.RETRY,
            )
        except Exception as exc:  # an adapter bug must not lose the occurrence
            log.exception("delivery to %s failed", target.id)
            why = f"{type(exc).__name__}: {exc}"
            self._finish(fires, OCC_FAILED, error=why, pause=True)
            self.events.emit(ev.Failed, target.id, list(fires), str(exc))

    def _record_turn(self, session_id: str, *, ok: bool, error: str | None = None) -> None:
        try:
            with self._own():
                self.store.turns.record_turn(session_id, ok=ok, error=error)
        except Exception:
            log.exception("could not record the turn result of %s", session_id)
        self._sessions.pop(session_id, None)

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
        session (``decide.after_fallback``). A session whose breaker is open (it failed
        ``breaker_after`` turns in a row) is tried after its fallback, not before.
        Returns (the result of the turn that decided, the session that took it, the
        decision)."""
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
                self._changed(sess.id, MOST_RECENT)

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
        self._changed(MOST_RECENT)
        return made

    def _alert_then_route(self, fires: Sequence[Fire]) -> None:
        # what each alert did (a fire for the person alone ends once its alert is done)
        played: dict[int, AlertState] = {}
        for f in fires:
            try:
                if not self.store.outcomes.set_alert(
                    f.occurrence_id, f.token, expect=AlertState.PENDING, to=AlertState.PLAYING
                ):
                    continue  # another engine has it, or it already played
                try:
                    failpoints.hit("during_alert")
                    state = self.alerter.alert(f)
                except Exception:
                    log.exception("alerter failed for %s", f.key)
                    state = AlertState.FAILED
                self.store.outcomes.set_alert(
                    f.occurrence_id, f.token, expect=AlertState.PLAYING, to=state
                )
                played[f.occurrence_id] = state
                self.events.emit(ev.Alerted, f, state)
            except Exception:
                log.exception("alert bookkeeping failed for %s; delivery goes on", f.key)
        self.route([replace(f, alert=played.get(f.occurrence_id, f.alert)) for f in fires])

    # -- helpers -------------------------------------------------------------------------

    def _finish(
        self,
        fires: Sequence[Fire],
        state: OccurrenceState,
        *,
        error: str | None = None,
        delivered_us: int | None = None,
        delivered_to: str | None = None,
        urgent: bool = False,
        wait_for: WaitFor | None = None,
        handed_us: int | None = None,
        pause: bool = False,
        reply: str | None = None,
    ) -> None:
        """Queue outcomes for the store thread. ``urgent``: write them now rather than
        with the next batch (after a slow turn, to keep the window in which a crash
        would repeat it short)."""
        first = not self._outcomes
        self._outcomes.extend(
            Outcome(
                occurrence_id=f.occurrence_id,
                token=f.token,
                state=state,
                fired_at_us=None if f.fired_at is None else to_us(f.fired_at),
                delivered_at_us=delivered_us,
                delivered_to=delivered_to,
                error=error,
                wait_for=wait_for if state == WAITING else None,
                handed_at_us=handed_us,
                pause=pause,
                reply=reply,
            )
            for f in fires
        )
        if urgent:
            self.urgent = True
        self._nudge(first)

    def _nudge(self, first: bool = False) -> None:
        """Wake the store thread for outcomes, except in a burst: there it looks
        again on its own (within a fifth of FLUSH_INTERVAL while outcomes wait), and
        10,000 turns' wake-ups would cost as many store rounds, each taking the GIL
        from the hand-over. A batch's first outcome and urgent ones always wake it."""
        if first or self.urgent or not self.bursting:
            self.poke()

    def _own(self) -> contextlib.AbstractContextManager[None]:
        """Writes of this engine's own (wake-up hints that the engine ignores)."""
        return self.store.origin(self.owner)

    def _changed(self, *keys: str) -> None:
        """Our own write changed these cached sessions: drop them, and load them again
        on the store thread (as a hint would have had it do)."""
        for k in keys:
            self._sessions.pop(k, None)
        with self._lock:
            self._reload.update(keys)

    def sooner(self) -> int | None:
        """The earliest next fire of the reminders re-based here since last asked."""
        moved = _drain(self._moved)
        return min(moved) if moved else None

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
            sess = self.store.sessions.most_recent_session()
        else:
            sess = self.store.sessions.get_session(session_id, now_us=now)
        self._sessions[key] = (sess, now, next(self._epochs))
        return sess


def _drain(items: deque[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(items.popleft())
        except IndexError:
            return out


def _peer_of(turn: Turn) -> str | None:
    """The peer ``turn`` reaches (its adapter's ``peer(session)``), or None."""
    sess, adapter = turn[0], turn[1]
    try:
        peer = getattr(adapter, "peer", None)
        return None if peer is None else peer(sess)
    except Exception:  # an adapter's bug: the turn runs without a share
        log.exception("peer of session %s", sess.id)
        return None


def rebase_fires(
    store: SqlStore, fires: Sequence[Fire], *, now: datetime, note: str
) -> tuple[list[int], list[int], int | None]:
    """Re-base the reminders of ``fires`` at ``now`` (:func:`~.plan.rebased`, computed
    from the reminders as read) and record the fires skipped, in one transaction that
    holds only if no reminder changed since it was read (else read and compute
    again). Returns (stale occurrence ids, cancelled claims made ahead, the earliest
    next fire of the re-based reminders)."""
    positions = rebase_positions(fires)
    for _ in range(REBASE_TRIES):
        read = store.waiting.reminders_of(positions)
        pushed = {
            rid: (rem.version, rebased(rem, now, positions[rid])) for rid, rem in read.items()
        }
        done = store.waiting.rebase(fires, now_us=to_us(now), pushed=pushed, note=note)
        if done is not None:
            nexts = [
                to_us(new.next_fire_at) for _v, new in pushed.values() if new and new.next_fire_at
            ]
            return done[0], done[1], min(nexts, default=None)
    raise StoreError(f"the reminders kept changing while being re-based ({REBASE_TRIES} tries)")


class Workers:
    """A few daemon threads running queued calls (lighter than an executor: no
    futures; delivery reports through outcomes, not return values)."""

    def __init__(self, size: int, name: str) -> None:
        self._q: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._size = size
        self._name = name
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._lock = threading.Lock()

    def prestart(self) -> None:
        """Start one thread now, before there is work."""
        with self._lock:
            if not self._threads:
                t = threading.Thread(target=self._loop, name=f"{self._name}-0", daemon=True)
                self._threads.append(t)
                t.start()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        with self._lock:
            self._busy += 1
            if self._busy > len(self._threads) and len(self._threads) < self._size:
                t = threading.Thread(
                    target=self._loop, name=f"{self._name}-{len(self._threads)}", daemon=True
                )
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

    @property
    def backlog(self) -> int:
        """Calls submitted that no worker has taken yet."""
        return self._q.qsize()

    def shutdown(self, wait: bool = True, timeout: float = 10.0) -> None:
        for _ in self._threads:
            self._q.put(None)
        if wait:
            for t in self._threads:
                t.join(timeout)
