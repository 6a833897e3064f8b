"""Where turns run: the turn workers, the fast lane, and each peer's share.

Turns of a fast adapter run in batches, one batch after another, on one worker at
a time (the lane's drainer): a burst's fast turns on several threads spend more on
the GIL passing between them than on the turns (10,000 sessions due at once:
2.8 s on eight workers, 1.0 s on one). While a turn there runs long, another
drainer takes the turns queued behind it (:meth:`Lanes.unstick`); once the
adapter's turns are slow, its queued turns get a worker each. Other turns (a
model's turn takes seconds) get a worker each.

A session runs one turn at a time; the sessions whose turns reach one peer (an
adapter's ``peer(session)``: a webhook receiver's or a model server's origin) run
at most PEER_SHARE of the turn workers at once, their other turns queued in order:
slow peers (a receiver that answers a byte a second) hold their share until their
deadline, and the other workers go on serving every other session.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from ..models import Fire, Session
from ..sessions.base import SessionAdapter
from .workers import Workers

log = logging.getLogger(__name__)
Turn = tuple[Session, SessionAdapter, list[Fire], bool]  # (session, adapter, fires, fallback first)
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
PEER_SHARE = 0.5


class TurnTimes:
    """Per adapter, its last TURN_TIMES turn times (us); the median says whether it is
    fast: one turn that waited out a stall of the machine does not flip it."""

    def __init__(self) -> None:
        self._us: dict[str, deque[float]] = {}

    def record(self, adapter: str, took_us: float) -> None:
        times = self._us.get(adapter)
        if times is None:
            times = self._us[adapter] = deque(maxlen=TURN_TIMES)
        times.append(took_us)

    def fast(self, adapter: str, *, unknown: bool = False) -> bool:
        """Whether the adapter's recent turns took under FAST_TURN_US (their median);
        ``unknown``: the answer for an adapter with no turn yet."""
        times = self._us.get(adapter)
        if not times:
            return unknown
        return statistics.median(times) < FAST_TURN_US


class Lanes:
    """Runs turns (``run``, one turn with its queued followers) on the turn workers,
    or at once when there are none (``inline``)."""

    def __init__(
        self,
        run: Callable[[Turn], None],
        *,
        times: TurnTimes,
        poke: Callable[[], None],
        workers: int = 8,
        inline: bool = False,
    ) -> None:
        self.run = run
        self.times = times
        self.poke = poke  # wakes the store thread
        self.pool = None if inline else Workers(workers, "remindkit-turn")
        if self.pool is not None:
            self.pool.prestart()  # a fire due when the engine starts does not wait for a thread
        self.share = max(1, int(workers * PEER_SHARE))
        self._lock = threading.Lock()
        self._lane: deque[deque[Turn]] = deque()
        # drainer thread -> (when its current turn began, or None between turns;
        # the rest of its batch)
        self._drainers: dict[int, tuple[float | None, deque[Turn]]] = {}
        self._starting = 0  # drainers submitted that have not begun
        self._peers: dict[str, int] = {}  # peer -> its turns running
        self._parked: dict[str, deque[Turn]] = {}  # peer -> its turns waiting for its share
        self._closed = False

    @property
    def idle(self) -> bool:
        """No turn is queued or running."""
        with self._lock:
            lane = bool(self._lane or self._drainers or self._starting or self._parked)
        return not lane and (self.pool is None or self.pool.idle)

    @property
    def queued(self) -> bool:
        """Turns wait for a worker."""
        return bool(self._lane or self._parked) or (self.pool is not None and self.pool.backlog > 0)

    def start(self, turns: Sequence[Turn]) -> None:
        """Run these turns (each in its own session). Turns of an adapter known to be
        fast go to the fast lane in batches, run one after another by one worker (see
        unstick for a turn of it that runs long): 10,000 sessions due at once cost a
        few hundred hand-offs, not 10,000, and no GIL fight among eight threads.
        Others (a model's turn takes seconds) get a worker each."""
        if self.pool is None:
            for turn in turns:
                self.run(turn)
            return
        batch: deque[Turn] = deque()
        for turn in turns:
            if self.times.fast(turn[1].name):
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
        if self.pool is None:
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
        self.pool.submit(self._drain_lane)
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
                        self.run(turn)
                    except Exception:  # run records its own failures; a bug: go on
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

    def _spill(self, rest: deque[Turn]) -> None:
        """After a slow turn in the lane (LANE_SPILL_US): the queued turns of adapters
        that are no longer fast (the median of their recent turns) get a worker each,
        so that a slow adapter's turns do not run one after another; the others stay
        queued."""
        assert self.pool is not None
        with self._lock:
            queued = [*rest, *(turn for batch in self._lane for turn in batch)]
            fast: list[Turn] = []
            slow: list[Turn] = []
            for turn in queued:
                quick = self.times.fast(turn[1].name, unknown=True)
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
        assert self.pool is not None
        peer = _peer_of(turn)
        if peer is None:
            self.pool.submit(self.run, turn)
        elif self._take(peer, turn):
            self.pool.submit(self._peer_turn, peer, turn)

    def _take(self, peer: str, turn: Turn) -> bool:
        """A place in ``peer``'s share for ``turn``, or False: it is parked."""
        with self._lock:
            running = self._peers.get(peer, 0)
            if running >= self.share:
                self._parked.setdefault(peer, deque()).append(turn)
                return False
            self._peers[peer] = running + 1
            return True

    def _give_back(self, peer: str) -> None:
        """A turn of ``peer`` ended: its place goes to the peer's next parked turn."""
        assert self.pool is not None
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
            self.pool.submit(self._peer_turn, peer, turn)

    def _peer_turn(self, peer: str, turn: Turn) -> None:
        try:
            self.run(turn)
        finally:
            self._give_back(peer)

    def close(self, wait: bool = True) -> list[Turn]:
        """Stop the workers; returns the turns still parked (not run here after all)."""
        self._closed = True
        if self.pool is not None:
            self.pool.shutdown(wait=wait)
        with self._lock:
            parked = [turn for turns in self._parked.values() for turn in turns]
            self._parked.clear()
        return parked


def _peer_of(turn: Turn) -> str | None:
    """The peer ``turn`` reaches (its adapter's ``peer(session)``), or None."""
    sess, adapter = turn[0], turn[1]
    try:
        peer = getattr(adapter, "peer", None)
        return None if peer is None else peer(sess)
    except Exception:  # an adapter's bug: the turn runs without a share
        log.exception("peer of session %s", sess.id)
        return None


__all__ = ["FAST_TURN_US", "LANE_SPILL_US", "LANE_STUCK_US", "Lanes", "Turn", "TurnTimes"]
