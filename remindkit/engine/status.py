"""Keeps the status file (:mod:`remindkit.statusfile`) current while an engine runs:
after a change or a fire lands, and at least every ``HEARTBEAT_S`` so that readers
know an engine still keeps it.

Writing it is a grouped read of the reminders and the last week's fires; it must not
cost the engine its timing. So it starts ``FIRST_DELAY_S`` after the engine (the first
overdue fires go first), and writes come at least ``MIN_GAP_S`` apart, or twenty
times as long as the last one took (a store of 100,000 reminders gets fewer writes,
never more than a twentieth of the store thread). The engine does no store work at
all just before a fire, so neither does this. A heartbeat with no change seen since
the last summary, on an engine that hears other processes' changes, writes that
summary again with a new time; the store is read again at least every
``RESUMMARY_S`` all the same (a hint may be lost; the week of fires moves on).
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any

from ..statusfile import HEARTBEAT_S, MAX_SESSIONS, VERSION, status_path, store_key, write_status
from ..store import SqlStore

log = logging.getLogger(__name__)

MIN_GAP_S = 0.2
FIRST_DELAY_S = 0.5
SHARE = 20  # a write waits this many times its own duration after the last one
BUSY_RETRY_S = 0.05  # while deliveries run, a waiting change looks again this often
RESUMMARY_S = 300.0  # a heartbeat with no change seen reads the store again at least this often


class StatusWriter:
    def __init__(self, store: SqlStore, home: Path) -> None:
        self.store = store
        self.path = status_path(home, store_key(store.url))
        self._started_us: int | None = None
        self._written_us: int | None = None
        self._gap_us = int(MIN_GAP_S * 1e6)
        self._pending = True
        # The engine hears of other processes' changes (wake-up hints): a heartbeat
        # with no change seen since the last summary then writes that summary again
        # with a new time, rather than reading the whole store (45 ms at 100,000
        # reminders, three times a minute, was most of an idle engine's CPU).
        self.hints = False
        self._summary: dict[str, Any] | None = None
        self._summarized_us = 0

    def step(self, t: int, *, changed: bool, busy: bool = False) -> int:
        """Write if a change waits (and the gap has passed) or the heartbeat is due;
        return when it wants to run next. ``busy``: a burst of fires is being
        delivered; a change waits until it is (10,000 fires would otherwise pay for
        a summary of the store every few hundred milliseconds), the heartbeat does not."""
        if changed:
            self._pending = True
        if self._started_us is None:
            self._started_us = t
        last = self._written_us
        if last is None:
            first = self._started_us + int(FIRST_DELAY_S * 1e6)
            if t < first:
                return first
        elif t - last < HEARTBEAT_S * 1e6 and (
            busy or not self._pending or t - last < self._gap_us
        ):
            if busy and self._pending:
                return t + int(BUSY_RETRY_S * 1e6)
            return last + (self._gap_us if self._pending else int(HEARTBEAT_S * 1e6))
        began = time.perf_counter()
        again = (
            not self._pending
            and self.hints
            and self._summary is not None
            and t - self._summarized_us < RESUMMARY_S * 1e6
        )
        try:
            if again:
                assert self._summary is not None
                data = dict(self._summary)
            else:
                data = self.store.reports.status_summary(now_us=t, max_sessions=MAX_SESSIONS)
                self._summary, self._summarized_us = dict(data), t
            data.update(v=VERSION, written_us=t)
            write_status(self.path, data)
        except Exception as exc:  # a full disk or a store hiccup never stops the engine
            log.warning("status file %s not written: %s", self.path, exc)
            self._summary = None
        if not again:
            took_us = int((time.perf_counter() - began) * 1e6)
            self._gap_us = min(
                max(int(MIN_GAP_S * 1e6), SHARE * took_us), int(HEARTBEAT_S * 1e6 / 2)
            )
        self._written_us = t
        self._pending = False
        return t + int(HEARTBEAT_S * 1e6)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
