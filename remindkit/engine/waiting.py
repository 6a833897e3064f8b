"""Fires that wait for their session, and the re-base of a busy session's
repeating reminders once it is idle again.

A fire that waits (its session busy, unreachable, or away) is recorded
``waiting``; once it is written, delivery looks again in the store
(:meth:`Waiting.recheck`, then ``Dispatcher.deliver_waiting``). A repeating
reminder with policy ``rebase`` whose fire came due while its session was busy is
pushed forward by one full period from the moment the session is idle again
(:func:`remindkit.engine.plan.rebased`, computed here from the reminders as read,
written by the store in one transaction that holds only if none changed
meanwhile); the fire is recorded ``skipped`` (re-based) and does not count.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime

from ..clock import Clock, to_us
from ..errors import StoreError
from ..models import WAITING, Fire, WaitFor
from ..store import SqlStore
from .outcomes import Outcomes, drain
from .plan import rebase_positions, rebased

log = logging.getLogger(__name__)
REBASE_TRIES = 5  # a re-base computed from reminders that changed meanwhile is computed again


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


class Waiting:
    """What waits: reminders with a fire to re-base, and whether to look again in
    the store for waiting fires once outcomes are written."""

    def __init__(
        self,
        store: SqlStore,
        *,
        clock: Clock,
        owner: str,
        outcomes: Outcomes,
        forget: Callable[[Sequence[int]], None],
        poke: Callable[[], None],
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.outcomes = outcomes
        self.forget = forget  # drops claims cancelled under us from the engine's hand
        self.poke = poke
        self._lock = threading.Lock()
        self._rebasing: set[str] = set()  # reminders with a fire waiting to be re-based
        self._recheck = False
        # when the reminders re-based here fire next: our own write gives no hint the
        # engine acts on, so the engine asks (sooner) and takes the earlier of its next due
        self._moved: deque[int] = deque()

    def rebasing(self, reminder_ids: Iterable[str]) -> set[str]:
        """Which of these reminders have a fire waiting to be re-based (here)."""
        with self._lock:
            return {r for r in reminder_ids if r in self._rebasing}

    def hold_for_rebase(self, fires: Collection[Fire]) -> None:
        with self._lock:
            self._rebasing.update(f.reminder_id for f in fires)

    def recheck(self) -> None:
        """Look again, in the store, once the outcomes now queued are written."""
        with self._lock:
            self._recheck = True

    def take_recheck(self) -> bool:
        with self._lock:
            recheck, self._recheck = self._recheck, False
            return recheck

    def restore_recheck(self, recheck: bool) -> None:
        with self._lock:
            self._recheck = self._recheck or recheck

    @property
    def pending(self) -> bool:
        return self._recheck

    def sooner(self) -> int | None:
        """The earliest next fire of the reminders re-based here since last asked."""
        moved = drain(self._moved)
        return min(moved) if moved else None

    def rebase(self, fires: Sequence[Fire], note: str) -> None:
        """The session is idle again: each re-based reminder fires next one full
        period from now, at the position of the fire that came due during the
        turn (which is recorded skipped, not fired); its claims made ahead of time
        are cancelled in the same transaction."""
        now = self.clock.now()
        try:
            with self.store.origin(self.owner):
                stale, cancelled, moved = rebase_fires(self.store, fires, now=now, note=note)
        except StoreError as exc:
            log.warning("could not re-base %d fire(s) now (%s); they wait", len(fires), exc)
            self.outcomes.finish(
                fires,
                WAITING,
                error=f"store unavailable; waiting to retry: {exc}"[:300],
                wait_for=WaitFor.REBASE,
            )
            return
        with self._lock:
            self._rebasing.difference_update(f.reminder_id for f in fires)
        self.outcomes.unhold(f.occurrence_id for f in fires)
        for occ_id in stale:
            log.warning(
                "re-base of occurrence %s refused: its lease was taken over by another engine",
                occ_id,
            )
        if cancelled:
            self.forget(cancelled)
        if moved is not None:
            self._moved.append(moved)
        self.poke()


__all__ = ["REBASE_TRIES", "Waiting", "rebase_fires"]
