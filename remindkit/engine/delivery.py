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

The :class:`Dispatcher` decides (``decide.route``) and carries out; it composes
collaborators that know nothing of it: :class:`~.outcomes.Outcomes` (queued
outcomes, held occurrences), :class:`~.cache.SessionCache` (the sessions fires go
to), :class:`~.waiting.Waiting` (fires waiting for their session, re-bases),
:class:`~.turns.TurnRunner` (a session's turns, their fallback and outcome) and
:class:`~.lanes.Lanes` (the turn workers, the fast lane, each peer's share).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from .. import events as ev
from .. import failpoints
from ..alerts import Alerter, NullAlerter
from ..clock import Clock, now_us
from ..errors import StoreError
from ..models import (
    ALERTED,
    OCC_FAILED,
    SESSION_DELETED,
    SKIPPED,
    WAITING,
    AlertState,
    Fire,
    Session,
    WaitFor,
)
from ..sessions.base import SessionAdapter
from ..sessions.registry import Adapters
from ..settings import Settings
from ..store import SqlStore
from . import decide
from .cache import MOST_RECENT, SessionCache
from .decide import Action
from .lanes import PEER_SHARE, Lanes, Turn, TurnTimes
from .outcomes import PROMPT_FIRED, Outcomes
from .turns import TurnRunner
from .waiting import Waiting, rebase_fires
from .workers import Workers

log = logging.getLogger(__name__)


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
        # drop claims cancelled under us from the engine's hand
        forget = forget or (lambda _ids: None)
        self._closed = False
        self._alerts = None if inline else Workers(1, "remindkit-alert")
        self.outcomes = Outcomes(
            store, clock=clock, events=self.events, poke=self.poke, bursting=lambda: self.bursting
        )
        self.cache = SessionCache(store, clock=clock)
        self.waiting = Waiting(
            store, clock=clock, owner=owner, outcomes=self.outcomes, forget=forget, poke=self.poke
        )
        times = TurnTimes()
        self.turns = TurnRunner(
            store,
            clock=clock,
            owner=owner,
            settings=self.settings,
            events=self.events,
            outcomes=self.outcomes,
            cache=self.cache,
            waiting=self.waiting,
            times=times,
        )
        self.lanes = Lanes(
            self.turns.run, times=times, poke=self.poke, workers=workers, inline=inline
        )

    # -- called by the engine thread -----------------------------------------------------

    def submit(self, fires: Sequence[Fire], fired_us: int) -> None:
        """Fire these occurrences now: publish, alert, deliver."""
        self.outcomes.hold(f.occurrence_id for f in fires)
        stamped = self.outcomes.fired(fires, fired_us)
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
        burst = self.bursting
        recheck = self.waiting.take_recheck()
        self.cache.reload()  # sessions our own writes changed
        try:
            stale = self.outcomes.write(burst=burst, closed=self._closed)
        except Exception:
            self.waiting.restore_recheck(recheck)
            raise
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
        # Fresh from the store, not the cache: a copy cached while a turn ran would
        # keep saying the session is busy (the cache serves the fire thread).
        named = [sid for sid in candidates if sid is not None]
        try:
            self.cache.load(named)
        except Exception:
            log.exception("cannot load %d waiting session(s)", len(named))
            return 0
        ready: list[str | None] = []
        for sid in candidates:
            target = self.cache.resolve(sid, fresh=sid is None)
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
            now_us=now_us(self.clock),
            owner=self.owner,
            lease_us=int(self.settings.lease_s * 1e6),
            sessions=ready,
        )
        if fires:
            self.route(fires)
        return len(fires)

    def prefetch(self, session_ids: set[str | None]) -> None:
        """Load these sessions into the cache (store thread), so that firing
        (fire thread) does not wait on the database."""
        self.cache.prefetch(session_ids)

    def epoch(self) -> int:
        """A mark to take when a change is noticed (:meth:`SessionCache.epoch`)."""
        return self.cache.epoch()

    def invalidate(self, before: int | None = None) -> None:
        """Something changed in the store: reload the cached sessions
        (:meth:`SessionCache.invalidate`)."""
        self.cache.invalidate(before)

    def sooner(self) -> int | None:
        """The earliest next fire of the reminders re-based here since last asked
        (our own writes give no hint the engine acts on)."""
        return self.waiting.sooner()

    def unstick(self) -> float | None:
        """See :meth:`Lanes.unstick`."""
        return self.lanes.unstick()

    @property
    def urgent(self) -> bool:
        """Outcomes that should not wait for the next batch."""
        return self.outcomes.urgent

    @property
    def has_outcomes(self) -> bool:
        return not self.outcomes.quiet or self.waiting.pending or self.cache.stale

    @property
    def turns_idle(self) -> bool:
        """No turn is queued or running in this process."""
        return self.lanes.idle

    @property
    def bursting(self) -> bool:
        """Many fires are on their way: more outcomes wait to be written than a fire
        on its own leaves, or turns wait for a worker. (A long turn that runs alone
        is no burst.)"""
        if self.outcomes.waiting > PROMPT_FIRED:
            return True
        return self.lanes.queued or (self._alerts is not None and self._alerts.backlog > 0)

    @property
    def idle(self) -> bool:
        quiet = self.outcomes.quiet
        return quiet and self.turns_idle and (self._alerts is None or self._alerts.idle)

    def close(self, wait: bool = True) -> None:
        self._closed = True
        if self._alerts is not None:
            self._alerts.shutdown(wait=wait)
        parked = self.lanes.close(wait=wait)
        queued = [f for _s, _a, fires, _f in parked for f in fires]
        queued += self.turns.abandon([sess.id for sess, _a, _f, _first in parked])
        if queued:  # not run here after all: any engine can pick them up
            self.outcomes.finish(
                queued, WAITING, error="engine stopped before its turn", wait_for=WaitFor.IDLE
            )

    # -- routing -------------------------------------------------------------------------

    def turn_tokens(self) -> set[str]:
        return self.turns.tokens()

    def holding(self) -> set[int]:
        return self.outcomes.holding()

    def hold(self, occurrence_ids: Iterable[int]) -> None:
        """Count these claims as in hand (their leases are renewed, they are no orphans)."""
        self.outcomes.hold(occurrence_ids)

    def unhold(self, occurrence_ids: Iterable[int]) -> None:
        self.outcomes.unhold(occurrence_ids)

    def route(self, fires: Sequence[Fire]) -> None:
        """Decide (``decide.route``) and carry out what happens to these fires now."""
        self.outcomes.hold(f.occurrence_id for f in fires)
        groups: dict[str | None, list[Fire]] = defaultdict(list)
        targets: dict[str | None, Session | None] = {}
        for f in fires:
            try:
                target = self.cache.resolve(f.session)
            except StoreError as exc:  # cannot even look the session up now: it waits
                self.outcomes.finish(
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
        self.lanes.start(turns)

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
        return decide.Target(
            sess,
            our_turn=self.turns.running(sess.id),
            rebasing=self.waiting.rebasing(f.reminder_id for f in group),
            breaker_after=self.settings.breaker_after,
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
        finish = self.outcomes.finish
        if act == Action.WAIT:
            finish(fires, WAITING, error=d.reason, wait_for=d.wait_for)
            if d.wait_for == WaitFor.REBASE:
                self.waiting.hold_for_rebase(fires)
            if d.wait_for in (WaitFor.IDLE, WaitFor.REBASE) and sess is not None:
                # look again, in the store, once these are written (the cache may be stale)
                self.waiting.recheck()
                self.events.emit(ev.Waiting, sess.id, fires)
        elif act == Action.SKIP:
            finish(fires, SKIPPED, error=d.reason)
        elif act == Action.ALERTED:  # the person's alone: the alert reached them, it ends
            finish(fires, ALERTED, error=d.reason)
        elif act == Action.FAIL:
            finish(fires, OCC_FAILED, error=d.reason, pause=d.pause)
            self.events.emit(ev.Failed, sess.id if sess is not None else None, fires, d.reason)
        elif act == Action.REBASE:
            self.waiting.rebase(fires, d.reason or "re-based")
        elif act in (Action.QUEUE, Action.DELIVER):
            assert sess is not None and adapter is not None
            # our own turn runs there: these go in the next one, right after it
            if self.turns.begin_or_queue(sess.id, fires):
                turns.append((sess, adapter, fires, d.fallback_first))
        else:  # pragma: no cover - route() returns only the actions above
            raise AssertionError(f"unexpected routing decision {act}")

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

    def _busy(self, target: Session) -> bool:
        return self.turns.running(target.id) or target.busy or target.in_turn


__all__ = ["MOST_RECENT", "PEER_SHARE", "Dispatcher", "Workers", "rebase_fires"]
