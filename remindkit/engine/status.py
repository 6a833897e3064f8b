"""Keeps the status file (:mod:`remindkit.statusfile`) current while an engine runs:
after a change or a fire lands, and at least every ``HEARTBEAT_S`` so that readers
know an engine still keeps it.

Writing it is a grouped read of the reminders and the last week's fires; it must not
cost the engine its timing. So it starts ``FIRST_DELAY_S`` after the engine (the first
overdue fires go first), and writes come at least ``MIN_GAP_S`` apart, or twenty
times as long as the last one took (a store of 100,000 reminders gets fewer writes,
never more than a twentieth of the store thread). The engine does no store work at
all just before a fire, so neither does this.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from ..statusfile import HEARTBEAT_S, MAX_SESSIONS, VERSION, status_path, store_key, write_status
from ..store import SqlStore

log = logging.getLogger(__name__)

MIN_GAP_S = 0.2
FIRST_DELAY_S = 0.5
SHARE = 20  # a write waits this many times its own duration after the last one
BUSY_RETRY_S = 0.05  # while deliveries run, a waiting change looks again this often


class StatusWriter:
    def __init__(self, store: SqlStore, home: Path) -> None:
        self.store = store
        self.path = status_path(home, store_key(store.url))
        self._started_us: int | None = None
        self._written_us: int | None = None
        self._gap_us = int(MIN_GAP_S * 1e6)
        self._pending = True

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
        try:
            data = self.store.reports.status_summary(now_us=t, max_sessions=MAX_SESSIONS)
            data.update(v=VERSION, written_us=t)
            write_status(self.path, data)
        except Exception as exc:  # a full disk or a store hiccup never stops the engine
            log.warning("status file %s not written: %s", self.path, exc)
        took_us = int((time.perf_counter() - began) * 1e6)
        self._gap_us = min(max(int(MIN_GAP_S * 1e6), SHARE * took_us), int(HEARTBEAT_S * 1e6 / 2))
        self._written_us = t
        self._pending = False
        return t + int(HEARTBEAT_S * 1e6)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
