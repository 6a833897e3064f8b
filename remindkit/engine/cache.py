"""The sessions delivery goes to, cached so that firing does not wait on the store.

The store thread loads them (:meth:`SessionCache.prefetch` as occurrences are
claimed); the fire thread reads them (:meth:`SessionCache.resolve`). A change
another process made is noticed by a wake-up hint and clears what was loaded
before it (:meth:`SessionCache.invalidate`); a change this engine made itself (a
turn ended, a fresh session) gives no hint the engine acts on: it is noted here
(:meth:`SessionCache.changed`) and loaded again on the store thread.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterable

from ..clock import Clock, now_us
from ..models import Session
from ..store import SqlStore

log = logging.getLogger(__name__)
SESSION_TTL_US = 10_000_000  # hints clear the cache sooner; this bounds a missed hint
MOST_RECENT = "\0most-recent"


class SessionCache:
    """Sessions by id (and the most recently active one), each with when it was
    loaded and an epoch that orders loads against change notices."""

    def __init__(self, store: SqlStore, *, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self._sessions: dict[str, tuple[Session | None, int, int]] = {}  # (session, at, epoch)
        self._epochs = itertools.count(1)
        self._lock = threading.Lock()
        self._reload: set[str] = set()  # changed by our own writes: to load again

    def resolve(self, session_id: str | None, *, fresh: bool = False) -> Session | None:
        """The session to deliver to (cached for a while; hints clear the cache)."""
        key = session_id if session_id is not None else MOST_RECENT
        now = now_us(self.clock)
        hit = self._sessions.get(key)
        if not fresh and hit is not None and now - hit[1] < SESSION_TTL_US:
            return hit[0]
        if session_id is None:
            sess = self.store.sessions.most_recent_session()
        else:
            sess = self.store.sessions.get_session(session_id, now_us=now)
        self._sessions[key] = (sess, now, next(self._epochs))
        return sess

    def load(self, session_ids: Iterable[str]) -> dict[str, Session]:
        """Load these sessions from the store (not the cache) and cache them."""
        named = list(session_ids)
        now = now_us(self.clock)
        found = self.store.sessions.get_sessions(named, now_us=now) if named else {}
        for sid in named:
            self._sessions[sid] = (found.get(sid), now, next(self._epochs))
        return found

    def prefetch(self, session_ids: set[str | None]) -> None:
        """Load these sessions into the cache (store thread), so that firing
        (fire thread) does not wait on the database."""
        try:
            self.load(s for s in session_ids if s is not None)
            if None in session_ids:
                self.resolve(None, fresh=True)
        except Exception:
            log.exception("cannot load %d session(s)", len(session_ids))

    def epoch(self) -> int:
        """A mark to take when a change is noticed: ``invalidate(before=mark)``
        reloads only the sessions cached before it (any thread)."""
        return next(self._epochs)

    def invalidate(self, before: int | None = None) -> None:
        """Something changed in the store: reload the cached sessions (store thread),
        or with ``before``, those loaded before that mark (a session loaded after the
        change was noticed has it already: after a burst's claim, 10,000 of them)."""
        keys = [
            k
            for k, (_s, _at, loaded) in list(self._sessions.items())
            if before is None or loaded < before
        ]
        for k in keys:
            self._sessions.pop(k, None)
        self.prefetch({None if k == MOST_RECENT else k for k in keys})

    def drop(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def changed(self, *keys: str) -> None:
        """Our own write changed these cached sessions (:data:`MOST_RECENT` for the most
        recently active): drop them, and load them again on the store thread
        (:meth:`reload`), as a hint would have had it do."""
        for k in keys:
            self._sessions.pop(k, None)
        with self._lock:
            self._reload.update(keys)

    @property
    def stale(self) -> bool:
        """Sessions changed by our own writes wait to be loaded again."""
        return bool(self._reload)

    def reload(self) -> None:
        """Load again what our own writes changed (store thread)."""
        with self._lock:
            keys, self._reload = self._reload, set()
        if keys:
            self.prefetch({None if k == MOST_RECENT else k for k in keys})


__all__ = ["MOST_RECENT", "SESSION_TTL_US", "SessionCache"]
