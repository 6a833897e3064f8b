"""Python's cyclic garbage collector, run when no fire is about to come due.

A full collection walks every object the process holds: with SQLAlchemy, pydantic
and a few thousand cached reminders loaded that takes 30 ms or more, and it holds
the GIL throughout, so a fire due meanwhile is that late (``bench/run.py``'s
lateness rows: a p99 of 7 ms and a max of 47 ms came from one such collection).
The interpreter starts one whenever enough objects have survived younger ones,
whatever the engine is about to do.

:class:`QuietCollector` moves that work to moments the engine chooses. When no
claimed fire is due within its margin, it collects what is young and then
freezes the survivors (:func:`gc.freeze`), so the collections the interpreter
starts later walk only what was made since, which is short. The first time it
only freezes: everything imported is there then, and collecting it all would cost
the most exactly when a host is starting (or quitting at once). Frozen objects are
still freed by reference counting; only a reference cycle among them waits, for
the whole collection that :class:`QuietCollector` runs (unfrozen, then frozen
again) every ``full_every_s``, again only at a quiet moment; the engine's host may also ask for a moment without
one (:meth:`QuietCollector.hold`: the HTTP API while a fire's event goes out to
its streams). While the interpreter
has run no collection since the last freeze, little is new and it does nothing (an
idle engine pays nothing for it). It changes nothing about what is collected, only
when. ``REMINDKIT_QUIET_GC=0`` turns it off.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
FREEZE_EVERY = 5.0  # seconds between freezes of what survived since the last one
FULL_EVERY = 600.0  # seconds between whole collections (cycles among frozen objects)
MIN_MARGIN = 0.05  # seconds: no collection when a fire is due sooner than this ...
MARGIN_FACTOR = 3.0  # ... or than this many times the last collection of the same kind took


class QuietCollector:
    """Collect and freeze at quiet moments; see the module's docstring."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        freeze_every_s: float = FREEZE_EVERY,
        full_every_s: float = FULL_EVERY,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.enabled = enabled
        self.freeze_every_s = freeze_every_s
        self.full_every_s = full_every_s
        self._mono = monotonic
        self._frozen_at: float | None = None
        self._full_at = monotonic()
        # seconds the last collection of each kind took (before the first: a guess on
        # the safe side, since the first walks everything made until then)
        self.took = {"young": 0.1, "full": 0.1}
        self.runs = {"young": 0, "full": 0}
        self._seen = -1  # the interpreter's collections counted at the last freeze
        self._held_until = 0.0  # no collection before this (monotonic): hold()

    def hold(self, seconds: float) -> None:
        """No collection for ``seconds`` from now (from any thread): the host has work
        that must not wait behind one, as the HTTP API's event streams right after a
        fire's commit. A collection holds the GIL for milliseconds (tens at first)."""
        self._held_until = max(self._held_until, self._mono() + seconds)

    def margin(self, kind: str) -> float:
        """The least time to the next fire that a collection of ``kind`` needs."""
        return max(MIN_MARGIN, MARGIN_FACTOR * self.took[kind])

    def step(self, quiet_for: float | None) -> str | None:
        """Collect if it is time and nothing is due within the margin. ``quiet_for``:
        seconds until the next claimed fire (None: none). Returns what it ran."""
        if not self.enabled or not gc.isenabled():
            return None  # the host turned the collector off: it decides when
        now = self._mono()
        if now < self._held_until:
            return None
        kind: str | None = None
        if now - self._full_at >= self.full_every_s:
            kind = "full"
        elif self._frozen_at is None or (
            now - self._frozen_at >= self.freeze_every_s and _collections() != self._seen
        ):
            kind = "young"  # (not while idle: no collection since the last means little new)
        if kind is None or (quiet_for is not None and quiet_for < self.margin(kind)):
            return None
        t0 = time.perf_counter()
        if self._frozen_at is None and kind == "young":
            # The first: freeze without collecting. A collection now would walk
            # everything imported (100-190 ms of CPU on a small machine) to find the
            # little garbage that importing leaves; the first whole collection frees
            # that. What it took says nothing of a collection: the guess stays.
            gc.freeze()
        else:
            if kind == "full":
                gc.unfreeze()
            gc.collect()
            gc.freeze()
            self.took[kind] = time.perf_counter() - t0
        self.runs[kind] += 1
        self._seen = _collections()
        self._frozen_at = self._mono()
        if kind == "full":
            self._full_at = self._frozen_at
        log.debug("quiet gc: %s collection in %.1f ms", kind, self.took[kind] * 1000)
        return kind


def _collections() -> int:
    """How many collections the interpreter has run, all generations."""
    return sum(g["collections"] for g in gc.get_stats())
