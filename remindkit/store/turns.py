"""A session's turn, claimed in the store: the one lease that delivery and the
agent loop both take, so that every engine (in any process, on any host) sees the
session busy and holds its fires back until the turn is over.

A turn is a (token, lease) on the session's row, taken only when the session is
idle (no external busy mark, no live turn). Its holder renews it (the engine's
lease thread renews the tokens in ``held``; the agent loop runs a thread of its
own) and releases it when the turn ends; a crashed holder's turn expires.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING

from ..clock import Clock, now_us

if TYPE_CHECKING:
    from .sql import SqlStore

log = logging.getLogger(__name__)


class TurnLease:
    def __init__(
        self,
        store: SqlStore,
        session_id: str,
        *,
        owner: str,
        clock: Clock,
        lease_s: float,
        held: set[str] | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.owner = owner
        self.clock = clock
        self.lease_us = int(lease_s * 1e6)
        self.token = uuid.uuid4().hex
        self._held = held  # a set of tokens that someone renews (the engine's lease thread)
        self._lock = lock or threading.Lock()
        self.acquired = False

    def try_acquire(self) -> bool:
        """Take the turn if the session is idle. Store errors propagate (the caller
        decides whether its fires wait)."""
        now = now_us(self.clock)
        got = self.store.claim_turn(
            self.session_id,
            owner=self.owner,
            token=self.token,
            until_us=now + self.lease_us,
            now_us=now,
        )
        if got:
            self.acquired = True
            if self._held is not None:
                with self._lock:
                    self._held.add(self.token)
        return got

    def renew(self) -> None:
        now = now_us(self.clock)
        self.store.renew_leases(
            owner=self.owner, until_us=now + self.lease_us, turn_tokens=[self.token]
        )

    def release(self) -> None:
        """End the turn (never raises: a turn that cannot be released expires)."""
        if not self.acquired:
            return
        self.acquired = False
        if self._held is not None:
            with self._lock:
                self._held.discard(self.token)  # released, or left to expire: no longer renewed
        try:
            self.store.release_turn(self.session_id, self.token, now_us=now_us(self.clock))
        except Exception:
            log.exception(
                "could not release the turn of %s (its lease will expire)", self.session_id
            )


__all__ = ["TurnLease"]
