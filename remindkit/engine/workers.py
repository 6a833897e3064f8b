"""A few daemon threads running queued calls: the turn workers and the alert worker."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


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


__all__ = ["Workers"]
