"""Keeps the status file (:mod:`remindkit.statusfile`) current while an engine runs:
after a change or a fire lands (at most every ``MIN_GAP_S``), and at least every
``HEARTBEAT_S`` so that readers know an engine still keeps it."""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from ..statusfile import HEARTBEAT_S, MAX_SESSIONS, VERSION, status_path, store_key, write_status
from ..store import SqlStore

log = logging.getLogger(__name__)

MIN_GAP_S = 0.2


class StatusWriter:
    def __init__(self, store: SqlStore, home: Path) -> None:
        self.store = store
        self.path = status_path(home, store_key(store.url))
        self._written_us: int | None = None
        self._pending = True

    def step(self, t: int, *, changed: bool) -> int:
        """Write if a change waits (and the last write is ``MIN_GAP_S`` old) or the
        heartbeat is due; return when it wants to run next."""
        if changed:
            self._pending = True
        last = self._written_us
        if last is None or (self._pending and t - last >= MIN_GAP_S * 1e6) or t - last >= HEARTBEAT_S * 1e6:
            try:
                data = self.store.status_summary(now_us=t, max_sessions=MAX_SESSIONS)
                data.update(v=VERSION, written_us=t)
                write_status(self.path, data)
            except Exception as exc:  # a full disk or a store hiccup never stops the engine
                log.warning("status file %s not written: %s", self.path, exc)
            self._written_us = last = t
            self._pending = False
        return last + int((MIN_GAP_S if self._pending else HEARTBEAT_S) * 1e6)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink()
