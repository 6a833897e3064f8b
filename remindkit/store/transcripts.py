"""Transcripts: the messages of the sessions whose conversation remindkit keeps,
and the occurrence keys each fired turn took.

Appending is one write transaction that numbers the messages (``seq``, unique
per session). :meth:`Transcripts.append_fired` also takes the occurrence keys
of a delivery in the same transaction: keys another turn already took are
dropped, and when none is left nothing is appended, so the same occurrence is
never run twice in a session, whichever engine or process tries. On PostgreSQL
two writers can race for a ``seq`` or a key; the unique constraint refuses one,
which then retries and sees the other's work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlalchemy import Connection, func, insert, select
from sqlalchemy.exc import IntegrityError

from ..errors import Conflict
from ..models import Message
from . import schema as t
from .dialect import chunks
from .role import Role
from .rows import MappedRow, message_from_row, message_to_row

RETRIES = 5


class Transcripts(Role):
    """Transcripts of the sessions whose conversation remindkit keeps."""

    def append_messages(
        self, session_id: str, messages: Sequence[Message], *, now_us: int
    ) -> list[Message]:
        """Append in order (one transaction); returns them numbered."""
        if not messages:
            return []
        for attempt in range(RETRIES):
            try:
                with self.write() as conn:
                    return self._append(conn, session_id, messages, now_us)
            except IntegrityError:
                if attempt == RETRIES - 1:
                    raise Conflict(
                        "another process kept writing this transcript; retry", code="conflict"
                    ) from None
        raise AssertionError("unreachable")

    def append_fired(
        self,
        session_id: str,
        keys: Sequence[str],
        build: Callable[[list[str]], Message | None],
        *,
        now_us: int,
    ) -> tuple[Message | None, list[str]]:
        """Take the occurrence ``keys`` not taken yet in this session and append
        the message ``build(fresh_keys)`` with them, in one transaction.

        Returns (message, fresh keys); (None, []) when every key was taken
        before (a repeat delivery: nothing is appended, nothing is run)."""
        for attempt in range(RETRIES):
            try:
                with self.write() as conn:
                    taken = self._taken(conn, session_id, keys)
                    fresh = [k for k in dict.fromkeys(keys) if k not in taken]
                    if not fresh:
                        return None, []
                    msg = build(fresh)
                    if msg is None:
                        return None, []
                    (stored,) = self._append(conn, session_id, [msg], now_us)
                    conn.execute(
                        insert(t.message_keys),
                        [
                            {
                                "session_id": session_id,
                                "occurrence_key": k,
                                "message_id": stored.id,
                                "created_at": now_us,
                            }
                            for k in fresh
                        ],
                    )
                    return stored, fresh
            except IntegrityError:
                if attempt == RETRIES - 1:
                    raise Conflict(
                        "another process kept writing this transcript; retry", code="conflict"
                    ) from None
        raise AssertionError("unreachable")

    def taken_keys(self, session_id: str, keys: Sequence[str]) -> set[str]:
        with self.read() as conn:
            return self._taken(conn, session_id, keys)

    def messages(
        self,
        session_id: str,
        *,
        after_seq: int = 0,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[Message]:
        """Messages with ``seq > after_seq`` in order; ``last=N``: only the last N."""
        m = t.messages.c
        stmt = select(t.messages).where(m.session_id == session_id, m.seq > after_seq)
        if last is not None:
            stmt = stmt.order_by(m.seq.desc()).limit(last)
        else:
            stmt = stmt.order_by(m.seq)
            if limit is not None:
                stmt = stmt.limit(limit)
        with self.read() as conn:
            rows = [message_from_row(r) for r in conn.execute(stmt)]
        return sorted(rows, key=lambda x: x.seq)

    def last_seq(self, session_id: str) -> int:
        with self.read() as conn:
            return int(
                conn.execute(
                    select(func.coalesce(func.max(t.messages.c.seq), 0)).where(
                        t.messages.c.session_id == session_id
                    )
                ).scalar_one()
            )

    # -- inside a transaction ------------------------------------------------------------

    def _append(
        self, conn: Connection, session_id: str, messages: Sequence[Message], now_us: int
    ) -> list[Message]:
        m = t.messages.c
        seq = int(
            conn.execute(
                select(func.coalesce(func.max(m.seq), 0)).where(m.session_id == session_id)
            ).scalar_one()
        )
        out: list[Message] = []
        for msg in messages:
            seq += 1
            row = message_to_row(msg, session_id, seq, now_us)
            new_id = conn.execute(insert(t.messages).values(**row).returning(m.id)).scalar_one()
            out.append(message_from_row(MappedRow({**row, "id": new_id})))
        return out

    def _taken(self, conn: Connection, session_id: str, keys: Sequence[str]) -> set[str]:
        if not keys:
            return set()
        k = t.message_keys.c
        taken: set[str] = set()
        unique = list(dict.fromkeys(keys))
        for chunk in chunks(unique):
            taken.update(
                r[0]
                for r in conn.execute(
                    select(k.occurrence_key).where(
                        k.session_id == session_id, k.occurrence_key.in_(list(chunk))
                    )
                )
            )
        return taken


__all__ = ["Transcripts", "message_from_row"]
