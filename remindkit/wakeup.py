"""Sleeping between rounds of work until there is something to do.

The engine's store and fire threads, the tray's refresher and a notebook kernel's
hub all loop the same way: do a round of work, then sleep until the earliest of

* a poke from this process (:meth:`Waiter.poke`, from any thread: work was
  handed over, a click asks for a redraw);
* a hint that another process changed the store (the store's ``wake``: see
  ``remindkit/store/wake.py``), while :meth:`Waiter.listening` listens (a
  hint of a write that only added reminders also says when the first of them
  fires: :func:`hint_payload`, :func:`parse_hint`);
* the deadline the round asked for;
* a stop (:meth:`Waiter.stop`, or setting the ``stop`` event it was given).

:meth:`Waiter.wait` is that sleep; :meth:`Waiter.wait_until` sleeps until a due
time and finishes the wait precisely (the engine's fires); :meth:`Waiter.loop`
runs rounds until a stop, and a round that fails never ends it. A hint only
shortens a sleep: every loop also wakes at its deadline, so a lost hint costs at
most that.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import selectors
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from .clock import Clock, now_us

log = logging.getLogger(__name__)
EARLY_WAKE = 0.002  # seconds before a due time that wait_until stops sleeping long
SPIN = 0.0004  # ... and the last stretch, which it waits out awake (a sleep's wake-up can be late)


def hint_payload(origin: str, added_due_us: int | None = None) -> str:
    """What a hint carries: the writer's origin, and for a write that only added a
    reminder, a newline and when that reminder first fires."""
    origin = origin.replace("\n", " ").encode()[:180].decode("utf-8", "ignore")
    return origin if added_due_us is None else f"{origin}\n{int(added_due_us)}"


def parse_hint(payload: str) -> tuple[str, int | None]:
    """(origin, when the reminder it added first fires, or None: anything may have
    changed). A payload of any other shape is a hint that anything may have changed."""
    origin, sep, due = payload.partition("\n")
    if not sep:
        return origin, None
    try:
        return origin, int(due)
    except ValueError:
        return origin, None


class Listener(Protocol):
    """Hints of other processes' writes, waited on by file descriptor."""

    def fileno(self) -> int: ...
    def drain(self) -> set[str]:
        """Consume pending hints; return their payloads (:func:`parse_hint`)."""
        ...

    def close(self) -> None: ...


class Wake(Protocol):
    """What a store offers for hints (``remindkit/store/wake.py``: datagram sockets
    on SQLite, LISTEN/NOTIFY on PostgreSQL, none elsewhere)."""

    def notify(self, origin: str = "", added_due_us: int | None = None) -> None: ...
    def listen(self) -> Listener | None: ...
    def close(self) -> None: ...


class Hints:
    """Hints drained in one go, folded by origin: a plain hint outweighs any that only
    added, and of those the earliest fire is kept. More than 64 origins fold into
    one plain hint from ``"*"``: "someone else wrote" is all that matters then."""

    def __init__(self) -> None:
        self.by_origin: dict[str, int | None] = {}

    def add(self, payload: str) -> None:
        by = self.by_origin
        if "*" in by:
            return
        origin, due = parse_hint(payload)
        if origin in by:
            known = by[origin]
            due = None if known is None or due is None else min(known, due)
        by[origin] = due
        if len(by) > 64:
            self.by_origin = {"*": None}

    def payloads(self) -> set[str]:
        return {hint_payload(o, due) for o, due in self.by_origin.items()}


class Waiter:
    """A self-pipe (pokes) and, while :meth:`listening`, the store's hints, waited on
    together with ``select`` (which keeps microseconds). ``stop``: an event shared
    with other loops of the same owner (set: the loops end). ``hint_gap``: after
    a hint, the next one is reported no sooner than this many seconds later (a
    flood of hints costs one re-read per gap), though a poke still wakes at once."""

    def __init__(self, *, stop: threading.Event | None = None, hint_gap: float = 0.0) -> None:
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        os.set_blocking(self.w, False)
        self.armed = False  # a byte is in the pipe already: no need to write another
        self.stop_event = stop if stop is not None else threading.Event()
        self.hint_gap = hint_gap
        self._sel: selectors.BaseSelector | None = None
        self._wake: Wake | None = None
        self._listener: Listener | None = None
        self._ignore: str | None = None
        self._retry = False  # see listening()
        self._listens = False  # the store offered a listener once (or failed to)
        self._hint_at = 0.0  # monotonic time of the last hint reported
        self.added_due_us: int | None = None  # see wait()
        self.poked = False  # see wait()
        self._closed = False

    # -- waking it -----------------------------------------------------------------------

    def poke(self) -> None:
        """End the current (or the next) wait, from any thread."""
        if self.armed or self._closed:
            return
        self.armed = True
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self.w, b"!")

    def stop(self) -> None:
        self.stop_event.set()
        self.poke()

    @property
    def stopped(self) -> bool:
        return self.stop_event.is_set()

    def drain(self) -> None:
        """Empty the pipe, then take pokes again. In this order, a poke from another
        thread while the pipe empties either leaves a byte behind (the next wait ends
        at once) or finds ``armed`` still set and is absorbed by this wake-up, whose
        round comes after it. Cleared first, ``armed`` could be set by a poke whose
        byte the reads then took: the pipe empty, every later poke skipped, and each
        wait running to its timeout (for the fire thread, up to the 30 s cap)."""
        while True:
            try:
                if not os.read(self.r, 4096):
                    break
            except (BlockingIOError, InterruptedError, OSError):
                break
        self.armed = False

    # -- hints ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def listening(
        self, wake: Wake | None, *, ignore: str | None = None, retry: bool = False
    ) -> Iterator[Waiter]:
        """Within the block, a hint from ``wake`` (another process's write; not one
        sent with origin ``ignore``) ends a wait too. Without hints (none offered,
        or listening failed) waits end at their deadlines only; with ``retry``, each
        wait first tries again to listen to a store that listens but could not now."""
        self._wake, self._ignore, self._retry = wake, ignore, retry
        self._listens = False
        self._sel = selectors.SelectSelector()
        self._sel.register(self.r, selectors.EVENT_READ, "poke")
        self._listen()
        try:
            yield self
        finally:
            self._sel.close()
            self._sel = None
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            self._wake = None

    @property
    def hints(self) -> bool:
        """Hints arrive (listening, and the store offers them)."""
        return self._listener is not None

    def _listen(self) -> None:
        self._listener = None
        if self._wake is None or self._sel is None:
            return
        try:
            listener = self._wake.listen()
        except Exception as exc:
            (log.debug if self._listens else log.warning)(
                "no wake-up hints from the store (%s); waking at deadlines only", exc
            )
            self._listens = True  # it does listen: a retry may get one later
            return
        if listener is not None:
            self._listens = True
            self._sel.register(listener.fileno(), selectors.EVENT_READ, "hint")
            self._listener = listener

    # -- waiting -------------------------------------------------------------------------

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, less when poked or hinted (hints are read
        even with no time left). Returns whether another process hinted a change;
        then :attr:`added_due_us` is set when all it did was add reminders: the
        earliest of their first fires (else None). :attr:`poked`: whether a poke
        ended it."""
        self.added_due_us = None
        self.poked = False
        if self._retry and self._listens and self._listener is None:
            self._listen()
        sel = self._sel
        if sel is None:
            if timeout <= 0:
                return False
            ready, _, _ = select.select([self.r], [], [], timeout)  # keeps microseconds
            if ready:
                self.drain()
                self.poked = True
            return False
        hinted = False
        anything = False  # a hint of another's write that may have changed anything
        for key, _mask in sel.select(max(0.0, timeout)):
            if key.data == "poke":
                self.drain()
                self.poked = True
                continue
            try:
                assert self._listener is not None
                payloads = self._listener.drain()
            except Exception:  # a dropped PostgreSQL listener: listen again (or poll)
                sel.unregister(key.fileobj)
                if self._listener is not None:
                    self._listener.close()
                self._listen()
                payloads = {""}
            for payload in payloads:
                origin, due = parse_hint(payload)
                if origin == self._ignore:
                    continue
                hinted = True
                if due is None:
                    anything = True
                elif self.added_due_us is None or due < self.added_due_us:
                    self.added_due_us = due
        if anything:
            self.added_due_us = None
        if hinted and self.hint_gap > 0:
            gap = self._hint_at + self.hint_gap - time.monotonic()
            if gap > 0:
                select.select([self.r], [], [], gap)  # a poke still ends it at once
            self._hint_at = time.monotonic()
        return hinted

    def wait_until(
        self,
        until_us: int,
        clock: Clock,
        *,
        cap: float,
        early: float = EARLY_WAKE,
        spin: float = SPIN,
    ) -> None:
        """Sleep (interruptibly, at most ``cap``) until ``early`` before ``until_us``
        on ``clock``, then finish the wait precisely: a short sleep to ``spin``
        before it, and that last stretch awake, so that a late wake-up from the
        sleep does not make the caller late. Returns early when poked."""
        left = (until_us - now_us(clock)) / 1e6
        if left > early:
            self.wait(min(left - early, cap))
        elif left > spin:
            select.select([], [], [], left - spin)  # relative, microseconds
        elif left > 0 and not wait_awake(until_us, clock, spin):
            select.select([], [], [], left)  # a clock that stands still: do not spin on it

    # -- the loop ------------------------------------------------------------------------

    def loop(
        self,
        round_: Callable[[], object],
        *,
        on_error: Callable[[], None],
        pause: float,
    ) -> None:
        """Run ``round_`` (work, then one of the waits above) until stopped. Nothing
        that goes wrong in one round ends the loop: ``on_error`` runs (within the
        ``except``, so it may log the exception) and the loop pauses ``pause``
        seconds, or less if stopped."""
        while not self.stopped:
            try:
                round_()
            except Exception:
                on_error()
                self.stop_event.wait(pause)

    def close(self) -> None:
        self._closed = True
        for fd in (self.r, self.w):
            with contextlib.suppress(OSError):
                os.close(fd)


def wait_awake(until_us: int, clock: Clock, spin: float = SPIN) -> bool:
    """Wait out the last fraction of a millisecond before ``until_us`` awake: a
    zero sleep gives the GIL and the CPU away each round without leaving the run
    queue. Bounded by ``spin`` in real time whatever the clock says (a test's clock
    may stand still). Returns whether ``until_us`` was reached."""
    give_up = time.perf_counter() + spin
    while now_us(clock) < until_us:
        if time.perf_counter() > give_up:
            return False
        time.sleep(0)
    return True


__all__ = [
    "EARLY_WAKE",
    "SPIN",
    "Hints",
    "Listener",
    "Wake",
    "Waiter",
    "hint_payload",
    "parse_hint",
    "wait_awake",
]
