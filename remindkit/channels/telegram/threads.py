"""Thread sessions of a bot: which session a chat or topic talks to now, and
their expiry. No Telegram library here: the store and the reminders API only.

The first session of a thread is ``tg:<chat>`` (``tg:<chat>:<thread>`` for a
forum topic); it expires after ``max_messages`` transcript messages or
``max_age_s`` (settings ``REMINDKIT_TG_MAX_MESSAGES``, default 50, and
``REMINDKIT_TG_MAX_AGE``, default 86400). Expiry cancels the session's live
reminders with the reason recorded, marks the session deleted, and the next
message starts ``tg:<chat>[:<thread>]~2`` (then ``~3`` …). The current session
of a route is a flag in the store, so every bot process on the store agrees.

A thread takes only a session of its own: a ``telegram`` session of the ``default``
project whose route is this bot's chat and topic
(:meth:`~remindkit.reminders.Reminders.own_session`). A session that someone else
made first under that id (with ``remind --session tg:111``, or an API token of the
``default`` project) is stepped over like an expired one: the thread goes on in the
next id.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ...clock import now_us
from ...errors import Conflict
from ...models import LIVE_STATES, SESSION_ACTIVE, Session
from ...reminders import Reminders
from ...sessions.routed import route_key

DEFAULT_MAX_MESSAGES = 50
DEFAULT_MAX_AGE_S = 86_400.0


@dataclass(frozen=True)
class Expiry:
    max_messages: int = DEFAULT_MAX_MESSAGES
    max_age_s: float = DEFAULT_MAX_AGE_S

    @classmethod
    def from_env(cls) -> Expiry:
        return cls(
            int(os.environ.get("REMINDKIT_TG_MAX_MESSAGES", DEFAULT_MAX_MESSAGES)),
            float(os.environ.get("REMINDKIT_TG_MAX_AGE", DEFAULT_MAX_AGE_S)),
        )


def base_id(chat: int, thread: int | None) -> str:
    return f"tg:{chat}" if thread is None else f"tg:{chat}:{thread}"


class Threads:
    def __init__(self, api: Reminders, *, bot: int, agent: dict[str, Any], expiry: Expiry) -> None:
        self.api = api
        self.store = api.store
        self.bot = bot
        self.agent = agent  # {"agent": "command"|"openai", ...that adapter's config}
        self.expiry = expiry

    def route(self, chat: int, thread: int | None) -> dict[str, Any]:
        return {"bot": self.bot, "chat": chat, "thread": thread}

    def _flag(self, route: dict[str, Any]) -> str:
        return f"{route_key(route)}:session"

    def ours(self, sid: str, route: dict[str, Any]) -> tuple[bool, Session | None]:
        """(whether ``sid`` is free or this thread's own, the session if it exists)."""
        try:
            sess = self.api.own_session(sid, adapter="telegram", untyped=False)
        except Conflict:
            return False, self.store.sessions.get_session(sid)
        theirs = sess.config.get("route") if sess is not None else None
        if sess is not None and not (
            isinstance(theirs, dict)
            and (theirs.get("bot"), theirs.get("chat"), theirs.get("thread") or None)
            == (route["bot"], route["chat"], route.get("thread") or None)
        ):
            return False, sess  # another bot's, chat's or topic's
        return True, sess

    def current(self, chat: int, thread: int | None) -> Session | None:
        """The live session of the thread (None: none yet, or it just expired)."""
        route = self.route(chat, thread)
        sid = self.store.coordination.get_flag(self._flag(route)) or base_id(chat, thread)
        mine, sess = self.ours(sid, route)
        if not mine or sess is None or sess.state != SESSION_ACTIVE:
            return None
        if self.expire_if_due(sess):
            return None
        return sess

    def session_for_message(self, chat: int, thread: int | None, title: str | None) -> Session:
        """The thread's session, made now when it has none (or its last one expired)."""
        sess = self.current(chat, thread)
        if sess is not None:
            return sess
        route = self.route(chat, thread)
        base = base_id(chat, thread)
        sid, n = base, 1
        while True:
            mine, existing = self.ours(sid, route)
            if existing is None and mine:
                break
            if (
                mine
                and existing is not None
                and existing.state == SESSION_ACTIVE
                and not self.expire_if_due(existing)
            ):
                return existing
            n += 1  # expired, or not this thread's: the next id
            sid = f"{base}~{n}"
        now = now_us(self.api.clock)
        config = {**self.agent, "route": route}
        sess = self.store.sessions.put_session(
            Session(sid, adapter="telegram", config=config, title=title), now_us=now
        )
        self.store.coordination.set_flag(self._flag(route), sid, now_us=now)
        return sess

    def expire_if_due(self, sess: Session) -> bool:
        now = self.api.clock.now()
        count = self.store.transcripts.last_seq(sess.id)
        age = (now - sess.created_at).total_seconds() if sess.created_at is not None else 0.0
        if count >= self.expiry.max_messages:
            why = f"session {sess.id} expired after {count} messages"
        elif age >= self.expiry.max_age_s:
            why = f"session {sess.id} expired after {age / 3600:.1f} hours"
        else:
            return False
        live = [r.id for r in self.api.list(session=sess.id, states=LIVE_STATES)]
        if live:
            self.api.cancel(live, session=sess.id, reason=why)
        self.store.sessions.delete_session(sess.id, now_us=now_us(self.api.clock))
        return True

    def sweep(self) -> list[str]:
        """Expire this bot's sessions that are due (age); returns their ids."""
        out = []
        for sess in self.store.sessions.list_sessions():
            route = sess.config.get("route")
            if (
                sess.adapter == "telegram"
                and sess.state == SESSION_ACTIVE
                and isinstance(route, dict)
                and route.get("bot") == self.bot
                and self.expire_if_due(sess)
            ):
                out.append(sess.id)
        return out
