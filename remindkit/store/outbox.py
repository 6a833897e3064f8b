"""The outbox: messages for remote services, stored before they are sent.

A row is written with an idempotency ``key`` (unique: writing the same reply
twice keeps the first row), a destination (``route_key`` plus the ``route``
details) and the ``payload``. A sender claims due rows with a lease
(compare-and-set on ``owner``/``lease_until``, so two processes on one store
never hold the same row), sends, and marks the row ``sent`` with the remote
id, or puts it back with ``next_attempt_at`` (back-off, or the remote's
``retry_after``), or marks it ``failed``. Rows of one route go out in id order:
a row is not claimed while an earlier row of its route is still queued.

A sender that dies between the remote's answer and :meth:`Outbox.mark_sent`
leaves the row queued; after its lease another sender sends it again. That is
the only way a row goes out twice, and it carries the same key both times.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import and_, exists, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from . import schema as t

if TYPE_CHECKING:
    from .sql import SqlStore

QUEUED = "queued"
SENT = "sent"
FAILED = "failed"
BACKOFF_FIRST_S = 1.0
BACKOFF_MAX_S = 300.0
MAX_ERROR = 500


@dataclass(frozen=True)
class OutboxItem:
    id: int
    channel: str
    key: str
    route_key: str
    route: dict[str, Any]
    session_id: str | None
    payload: dict[str, Any]
    state: str
    attempts: int
    next_attempt_at: int
    last_error: str | None
    created_at: int
    sent_at: int | None
    remote_id: str | None
    owner: str | None = None


@dataclass(frozen=True)
class NewItem:
    key: str
    route_key: str
    route: dict[str, Any]
    payload: dict[str, Any]
    session_id: str | None = None


def backoff_s(
    attempts: int, *, first: float = BACKOFF_FIRST_S, cap: float = BACKOFF_MAX_S
) -> float:
    """Seconds to wait after the ``attempts``-th failed try: 1, 2, 4 … up to ``cap``."""
    return min(cap, first * (2 ** max(0, attempts - 1)))


def _item(row: Any) -> OutboxItem:
    m = row._mapping
    return OutboxItem(
        id=m["id"],
        channel=m["channel"],
        key=m["key"],
        route_key=m["route_key"],
        route=json.loads(m["route"]),
        session_id=m["session_id"],
        payload=json.loads(m["payload"]),
        state=m["state"],
        attempts=m["attempts"],
        next_attempt_at=m["next_attempt_at"],
        last_error=m["last_error"],
        created_at=m["created_at"],
        sent_at=m["sent_at"],
        remote_id=m["remote_id"],
        owner=m["owner"],
    )


class Outbox:
    """The outbox of one store, for one channel."""

    def __init__(self, store: SqlStore, channel: str) -> None:
        self.store = store
        self.channel = channel

    def enqueue(self, items: Sequence[NewItem], *, now_us: int) -> list[OutboxItem]:
        """Write these rows in one transaction, unless their first key is there
        already (then nothing is written: the reply was queued before). Returns
        the stored rows of these keys."""
        if not items:
            return []
        try:
            with self.store.write(notify=False) as conn:
                found = conn.execute(
                    select(t.outbox.c.id).where(t.outbox.c.key == items[0].key)
                ).first()
                if found is None:
                    conn.execute(
                        insert(t.outbox),
                        [
                            {
                                "channel": self.channel,
                                "key": i.key,
                                "route_key": i.route_key,
                                "route": json.dumps(i.route, sort_keys=True),
                                "session_id": i.session_id,
                                "payload": json.dumps(i.payload),
                                "state": QUEUED,
                                "attempts": 0,
                                "next_attempt_at": now_us,
                                "created_at": now_us,
                            }
                            for i in items
                        ],
                    )
        except IntegrityError:
            pass  # another process wrote the same reply at the same moment: its rows stand
        return self.by_keys([i.key for i in items])

    def by_keys(self, keys: Sequence[str]) -> list[OutboxItem]:
        with self.store.read() as conn:
            rows = conn.execute(
                select(t.outbox).where(t.outbox.c.key.in_(list(keys))).order_by(t.outbox.c.id)
            ).all()
        return [_item(r) for r in rows]

    def get(self, key: str) -> OutboxItem | None:
        found = self.by_keys([key])
        return found[0] if found else None

    def rows(
        self,
        *,
        route_prefix: str | None = None,
        route: str | None = None,
        state: str | None = None,
        limit: int = 1000,
    ) -> list[OutboxItem]:
        stmt = select(t.outbox).where(t.outbox.c.channel == self.channel)
        if route_prefix is not None:
            stmt = stmt.where(t.outbox.c.route_key.startswith(route_prefix, autoescape=True))
        if route is not None:
            stmt = stmt.where(t.outbox.c.route_key == route)
        if state is not None:
            stmt = stmt.where(t.outbox.c.state == state)
        with self.store.read() as conn:
            rows = conn.execute(stmt.order_by(t.outbox.c.id).limit(limit)).all()
        return [_item(r) for r in rows]

    def claim(
        self,
        *,
        owner: str,
        now_us: int,
        lease_us: int,
        route_prefix: str = "",
        route: str | None = None,
        limit: int = 20,
    ) -> list[OutboxItem]:
        """Take due rows (at most one per route, the earliest queued) with a lease;
        only routes that start with ``route_prefix``, or only the route ``route``."""
        o = t.outbox
        earlier = t.outbox.alias("earlier")
        free = or_(o.c.lease_until.is_(None), o.c.lease_until < now_us)
        first_of_route = ~exists().where(
            and_(
                earlier.c.route_key == o.c.route_key,
                earlier.c.state == QUEUED,
                earlier.c.id < o.c.id,
            )
        )
        due = and_(
            o.c.channel == self.channel,
            o.c.state == QUEUED,
            o.c.next_attempt_at <= now_us,
            free,
            o.c.route_key.startswith(route_prefix, autoescape=True)
            if route is None
            else o.c.route_key == route,
            first_of_route,
        )
        with self.store.read() as conn:
            ids = [
                r[0]
                for r in conn.execute(select(o.c.id).where(due).order_by(o.c.id).limit(limit)).all()
            ]
        got: list[OutboxItem] = []
        for (
            row_id
        ) in ids:  # compare-and-set, one row at a time: a row another sender took is skipped
            with self.store.write(notify=False) as conn:
                done = conn.execute(
                    update(o)
                    .where(o.c.id == row_id, due)
                    .values(owner=owner, lease_until=now_us + lease_us, attempts=o.c.attempts + 1)
                )
                if done.rowcount == 1:
                    row = conn.execute(select(o).where(o.c.id == row_id)).one()
                    got.append(_item(row))
        return got

    def mark_sent(
        self, item: OutboxItem, *, owner: str, now_us: int, remote_id: str | None = None
    ) -> bool:
        return self._finish(
            item, owner, state=SENT, sent_at=now_us, remote_id=remote_id, lease_until=None
        )

    def retry(self, item: OutboxItem, *, owner: str, error: str, next_attempt_us: int) -> bool:
        return self._finish(
            item,
            owner,
            state=QUEUED,
            next_attempt_at=next_attempt_us,
            last_error=error[:MAX_ERROR],
            lease_until=None,
            new_owner=None,
        )

    def fail(self, item: OutboxItem, *, owner: str, error: str) -> bool:
        return self._finish(
            item, owner, state=FAILED, last_error=error[:MAX_ERROR], lease_until=None
        )

    def supersede(self, item: OutboxItem, *, by: str) -> bool:
        """A queued row whose content went out in a later row (a batch that took in
        its keys) is closed as ``failed`` with that reason, whoever holds it."""
        o = t.outbox
        with self.store.write(notify=False) as conn:
            done = conn.execute(
                update(o)
                .where(o.c.id == item.id, o.c.state == QUEUED)
                .values(
                    state=FAILED, last_error=f"superseded by {by}"[:MAX_ERROR], lease_until=None
                )
            )
        return done.rowcount == 1

    def _finish(self, item: OutboxItem, owner: str, **values: Any) -> bool:
        o = t.outbox
        if "new_owner" in values:
            values["owner"] = values.pop("new_owner")
        with self.store.write(notify=False) as conn:
            done = conn.execute(
                update(o)
                .where(o.c.id == item.id, o.c.owner == owner, o.c.state == QUEUED)
                .values(**values)
            )
        return done.rowcount == 1


__all__ = ["FAILED", "QUEUED", "SENT", "NewItem", "Outbox", "OutboxItem", "backoff_s"]
