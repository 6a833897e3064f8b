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
from collections.abc import Iterable
from typing import TYPE_CHECKING

from sqlalchemy import Connection, or_, select, update

from ..clock import Clock, now_us
from ..models import CLAIMED
from . import schema as t
from .role import Role

if TYPE_CHECKING:
    from .roles import TurnStore

log = logging.getLogger(__name__)


def renew_leases(
    conn: Connection,
    *,
    owner: str,
    until_us: int,
    turn_tokens: Iterable[str] | None,
    locks_rows: bool = False,
) -> int:
    """Extend the owner's claims and session turns (:meth:`Turns.renew_leases`).
    ``locks_rows`` (PostgreSQL): the claims are locked in id order first, and a claim
    another transaction holds is left out (``SKIP LOCKED``): that is this engine's
    outcome flush finishing it, or another engine taking over one that lapsed.
    Updated in the order of the scan and waiting for each, they deadlocked with the
    outcome flush, which holds some of them and waits for the next; and a renewal
    waiting behind flushes let other claims lapse. A claim left out is renewed by the
    next renewal, a quarter lease later."""
    o, s = t.occurrences.c, t.sessions.c
    mine = (o.owner == owner, o.state == CLAIMED)
    stmt = update(t.occurrences)
    if locks_rows:
        held = t.occurrences.alias("held")
        in_order = (
            select(held.c.id)
            .where(held.c.owner == owner, held.c.state == CLAIMED)
            .order_by(held.c.id)
            .with_for_update(skip_locked=True)
        )
        stmt = stmt.where(o.id.in_(in_order))
    res = conn.execute(stmt.where(*mine).values(lease_until=until_us))
    tokens = None if turn_tokens is None else list(turn_tokens)
    if tokens is None or tokens:
        turns = update(t.sessions).where(s.turn_owner == owner)
        if tokens:
            turns = turns.where(s.turn_token.in_(tokens))
        conn.execute(turns.values(turn_until=until_us))
    return res.rowcount


class Turns(Role):
    """Session turns: the lease delivery and the agent loop both take on a session,
    and each session's streak of failed turns."""

    def claim_turn(
        self, session_id: str, *, owner: str, token: str, until_us: int, now_us: int
    ) -> bool:
        """Start a turn on an idle session (no external busy mark, no live turn)."""
        s = t.sessions.c
        with self.write(notify=False) as conn:
            res = conn.execute(
                update(t.sessions)
                .where(
                    s.id == session_id,
                    s.busy_since.is_(None),
                    or_(s.turn_token.is_(None), s.turn_until < now_us),
                )
                .values(
                    turn_owner=owner, turn_token=token, turn_until=until_us, last_active_at=now_us
                )
            )
            return res.rowcount == 1

    def release_turn(self, session_id: str, token: str, *, now_us: int) -> bool:
        s = t.sessions.c
        with self.write() as conn:
            res = conn.execute(
                update(t.sessions)
                .where(s.id == session_id, s.turn_token == token)
                .values(turn_owner=None, turn_token=None, turn_until=None, last_active_at=now_us)
            )
            return res.rowcount == 1

    def renew_turn(self, session_id: str, token: str, *, until_us: int) -> bool:
        """Extend one turn (its holder's token): False when it is no longer held."""
        s = t.sessions.c
        with self.write(notify=False) as conn:
            res = conn.execute(
                update(t.sessions)
                .where(s.id == session_id, s.turn_token == token)
                .values(turn_until=until_us)
            )
            return res.rowcount == 1

    def record_turn(self, session_id: str, *, ok: bool, error: str | None = None) -> None:
        """Keep a session's streak of failed turns (its breaker) and the last reason."""
        s = t.sessions.c
        with self.write(notify=False) as conn:
            if ok:
                conn.execute(
                    update(t.sessions).where(s.id == session_id, s.failures != 0).values(failures=0)
                )
            else:
                conn.execute(
                    update(t.sessions)
                    .where(s.id == session_id)
                    .values(failures=s.failures + 1, last_error=(error or "turn failed")[:500])
                )

    def renew_leases(
        self, *, owner: str, until_us: int, turn_tokens: Iterable[str] | None = None
    ) -> int:
        """Extend the owner's claims and session turns. ``turn_tokens``: only those
        turns (an engine renews the turns it is running, never one whose release
        failed, which must be left to expire; the agent loop renews its own)."""
        with self.write(notify=False) as conn:
            return renew_leases(
                conn,
                owner=owner,
                until_us=until_us,
                turn_tokens=turn_tokens,
                locks_rows=self.dialect.locks_rows,
            )


class TurnLease:
    """The one client of a session's turn: taken when the session is idle, renewed
    (by whoever holds ``held``: the engine's lease thread, or by a thread of its own,
    :meth:`keep_alive`: the agent loop), released when the turn ends."""

    def __init__(
        self,
        turns: TurnStore,
        session_id: str,
        *,
        owner: str,
        clock: Clock,
        lease_s: float,
        held: set[str] | None = None,
        lock: threading.Lock | None = None,
    ) -> None:
        self.turns = turns
        self.session_id = session_id
        self.owner = owner
        self.clock = clock
        self.lease_us = int(lease_s * 1e6)
        self.token = uuid.uuid4().hex
        self._held = held  # a set of tokens that someone renews (the engine's lease thread)
        self._lock = lock or threading.Lock()
        self.acquired = False
        self._renewing: tuple[threading.Event, threading.Thread] | None = None

    def try_acquire(self) -> bool:
        """Take the turn if the session is idle. Store errors propagate (the caller
        decides whether its fires wait)."""
        now = now_us(self.clock)
        got = self.turns.claim_turn(
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

    def renew(self) -> bool:
        """Extend this turn, and nothing else of its owner's. False: no longer held."""
        return self.turns.renew_turn(
            self.session_id, self.token, until_us=now_us(self.clock) + self.lease_us
        )

    def keep_alive(self, every_s: float) -> None:
        """Renew the turn every ``every_s`` from a thread of its own until it is
        released (a holder with no lease thread of its own: a long model call keeps
        the session busy everywhere)."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(every_s):
                try:
                    self.renew()
                except Exception as exc:
                    log.warning("could not renew the turn lease of %s (%s)", self.session_id, exc)

        thread = threading.Thread(
            target=renew, daemon=True, name=f"remindkit-lease-{self.session_id}"
        )
        self._renewing = (stop, thread)
        thread.start()

    def release(self) -> None:
        """End the turn (never raises: a turn that cannot be released expires)."""
        if self._renewing is not None:
            stop, thread = self._renewing
            self._renewing = None
            stop.set()
            thread.join(5)
        if not self.acquired:
            return
        self.acquired = False
        if self._held is not None:
            with self._lock:
                self._held.discard(self.token)  # released, or left to expire: no longer renewed
        try:
            self.turns.release_turn(self.session_id, self.token, now_us=now_us(self.clock))
        except Exception:
            log.exception(
                "could not release the turn of %s (its lease will expire)", self.session_id
            )


__all__ = ["TurnLease", "Turns", "renew_leases"]
