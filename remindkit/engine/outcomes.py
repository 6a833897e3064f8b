"""The outcomes of fires, queued for the store thread and written in batches.

Producers on several threads (the fire thread, turn workers, the alert worker)
queue outcomes and fire times in deques (append and popleft are atomic: nobody
waits on a lock); the store thread writes them in one transaction each
(:meth:`Outcomes.write`), with the claims' tokens: a stale token (the lease was
taken over) is refused. Until its outcome is written, an occurrence handed to
delivery is *held* (its lease is renewed, it is no orphan).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import events as ev
from .. import failpoints
from ..clock import Clock, from_us, now_us, to_us
from ..models import WAITING, Fire, OccurrenceState, Outcome, WaitFor
from ..store import SqlStore

log = logging.getLogger(__name__)
PROMPT_FIRED = 32  # fires waiting to be recorded, at most, for them to be written at once
FIRED_HOLD_US = 250_000  # in a burst, a fire's time waits this long at most for its outcome


class Outcomes:
    """Outcomes and fire times waiting to be written, and the occurrences held."""

    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock,
        events: ev.Events,
        poke: Callable[[], None],
        bursting: Callable[[], bool],
    ) -> None:
        self.store = store
        self.clock = clock
        self.events = events
        self.poke = poke  # wakes the store thread
        self._bursting = bursting  # many fires are on their way (turns queued, say)
        self._lock = threading.Lock()
        self._outcomes: deque[Outcome] = deque()
        self._fired: deque[tuple[int, str, int]] = deque()
        self._holding: set[int] = set()  # handed to delivery, outcome not yet written
        self.urgent = False  # outcomes that should not wait for the next batch

    # -- held occurrences ----------------------------------------------------------------

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

    # -- queueing (any thread) -----------------------------------------------------------

    def fired(self, fires: Sequence[Fire], fired_us: int) -> list[Fire]:
        """These fires go out now: their fire time is queued (a fire on its own is
        written at once, with its event, which event streams carry; a burst keeps its
        batches). Returns them stamped with that time."""
        fired_at = from_us(fired_us)
        stamped = [f if f.fired_at is not None else f.fired(fired_at) for f in fires]
        self._fired.extend((f.occurrence_id, f.token, fired_us) for f in stamped)
        if len(self._fired) <= PROMPT_FIRED:
            self.urgent = True
            self.poke()
        return stamped

    def finish(
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
        self.nudge(first)

    def nudge(self, first: bool = False) -> None:
        """Wake the store thread for outcomes, except in a burst: there it looks
        again on its own (within a fifth of FLUSH_INTERVAL while outcomes wait), and
        10,000 turns' wake-ups would cost as many store rounds, each taking the GIL
        from the hand-over. A batch's first outcome and urgent ones always wake it."""
        if first or self.urgent or not self._bursting():
            self.poke()

    # -- state ---------------------------------------------------------------------------

    @property
    def waiting(self) -> int:
        """Outcomes and fire times queued."""
        return len(self._outcomes) + len(self._fired)

    @property
    def quiet(self) -> bool:
        return not self._outcomes and not self._fired

    # -- writing (the store thread) ------------------------------------------------------

    def write(self, *, burst: bool, closed: bool) -> list[int]:
        """Write queued outcomes (one transaction). Returns refused (stale) ids.
        ``burst``: a fire's time may wait (FIRED_HOLD_US at most) to be written with
        its outcome, which comes soon: one write of each occurrence, not two."""
        failpoints.hit("before_flush")
        self.urgent = False
        outcomes = drain(self._outcomes)
        fired = drain(self._fired)
        ended = {o.occurrence_id for o in outcomes}
        fired = [f for f in fired if f[0] not in ended]
        if burst and not closed and fired:
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
            raise
        self.unhold(o.occurrence_id for o in outcomes)  # written (or refused): no longer ours
        for occ_id in stale:
            log.warning(
                "outcome of occurrence %s refused: its lease was taken over by another engine",
                occ_id,
            )
        return stale


def drain(items: deque[Any]) -> list[Any]:
    out = []
    while True:
        try:
            out.append(items.popleft())
        except IndexError:
            return out


__all__ = ["Outcomes", "drain"]
