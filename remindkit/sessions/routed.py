"""``telegram`` sessions: an agent bound to a chat thread, whose replies go back
to that thread through the outbox.

A thread's session (``tg:<chat>`` or ``tg:<chat>:<thread>``) is stored with
adapter ``telegram`` and a config that holds the agent (``agent``: ``command``
or ``openai``, with that adapter's own settings) and the **route**
(``{"bot", "chat", "thread"}``). The route is stored with the session, so a
fired reminder reaches the thread whichever engine runs it and whenever: the
engine runs the turn through the agent's own adapter (occurrence keys taken
once, tags carried out), then writes the reply into the outbox under the id of
the fired message as its key; the bot process sends it.

A turn whose keys were taken before (an engine died after the agent answered,
before the reply was queued) is not run again: its reply is read from the
transcript and queued under the same key, so it is sent once.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import select

from .. import failpoints
from ..agent.model import Completion
from ..clock import Clock, SystemClock, now_us
from ..errors import ModelError
from ..models import FIRED_TURN, Fire, Session
from ..protocol.display import strip_assistant_display
from ..store import schema as t
from ..store.outbox import NewItem, Outbox
from .base import SessionAdapter, TurnResult
from .command import CommandSession

if TYPE_CHECKING:
    from ..store import SqlStore

CHANNEL = "telegram"
TEXT_LIMIT = 4096  # Telegram's limit for one message, in UTF-16 code units
AGENTS = ("command", "openai")
MAX_PIECES = 20  # a longer reply is cut here (an agent's output is not trusted to be small)


def route_key(route: dict[str, Any]) -> str:
    return f"telegram:{route['bot']}:{route['chat']}:{route.get('thread') or ''}"


def split_message(text: str, limit: int = TEXT_LIMIT) -> list[str]:
    """``text`` in pieces of at most ``limit`` UTF-16 code units (Telegram's count),
    cut at a line break, else a space, when one is in the second half of a piece."""

    def units(s: str) -> int:
        return len(s.encode("utf-16-le")) // 2

    out: list[str] = []
    rest = text
    while units(rest) > limit:
        cut, size = 0, 0
        for i, ch in enumerate(rest):
            size += 2 if ord(ch) > 0xFFFF else 1
            if size > limit:
                break
            cut = i + 1
        piece = rest[:cut]
        for sep in ("\n", " "):
            at = piece.rfind(sep)
            if at >= cut // 2:
                piece = rest[: at + 1]
                break
        out.append(piece.rstrip("\n") or piece)
        rest = rest[len(piece) :]
    if rest.strip() or not out:
        out.append(rest)
    return out


def queue_text(
    outbox: Outbox,
    route: dict[str, Any],
    *,
    key: str,
    text: str,
    session: str | None,
    now: int,
    markup: dict[str, Any] | None = None,
) -> list[Any]:
    """Queue ``text`` for the route (split at Telegram's limit; keys ``key``,
    ``key#2`` …; written together, or not at all when ``key`` is there already)."""
    pieces = split_message(text)
    if len(pieces) > MAX_PIECES:
        pieces = [
            *pieces[: MAX_PIECES - 1],
            "(the reply was longer; the rest is in the session's transcript)",
        ]
    items = []
    for n, piece in enumerate(pieces, start=1):
        payload: dict[str, Any] = {"text": piece}
        if markup is not None and n == len(pieces):
            payload["reply_markup"] = markup
        items.append(
            NewItem(
                key=key if n == 1 else f"{key}#{n}",
                route_key=route_key(route),
                route=route,
                payload=payload,
                session_id=session,
            )
        )
    return outbox.enqueue(items, now_us=now)


def fired_reply(store: SqlStore, session: str, keys: Sequence[str]) -> tuple[int, str] | None:
    """(id of the fired message that took ``keys``, the agent's reply to it for
    display), from the transcript; None when no fired message took them."""
    k = t.message_keys.c
    with store.read() as conn:
        row = conn.execute(
            select(k.message_id)
            .where(k.session_id == session, k.occurrence_key.in_(list(keys)))
            .order_by(k.message_id)
            .limit(1)
        ).first()
        if row is None:
            return None
        m = t.messages.c
        seq = conn.execute(select(m.seq).where(m.id == row[0])).scalar_one()
    texts: list[str] = []
    for msg in store.transcripts.messages(session, after_seq=seq, limit=200):
        if msg.role == "user" and (msg.kind == FIRED_TURN or not msg.hidden):
            break  # the next turn
        if msg.role == "assistant" and msg.content:
            texts.append(strip_assistant_display(msg.content).strip())
    return int(row[0]), "\n\n".join(x for x in texts if x)


class Agents(Protocol):
    """The adapters a thread's agent may be run by, found by name (the process's
    :class:`~remindkit.sessions.registry.Adapters`, which hold this one too)."""

    def get(self, name: str | None) -> SessionAdapter | None: ...


class TelegramSessions:
    """The ``telegram`` adapter: runs the thread's agent, queues its reply for the route."""

    name = "telegram"
    shared = True

    def __init__(self, store: SqlStore, agents: Agents, *, clock: Clock | None = None) -> None:
        self.store = store
        self.agents = agents
        self.clock: Clock = clock or SystemClock()
        self.outbox = Outbox(store, CHANNEL)
        # set by a bot in this process: a context manager that shows a typing action in
        # the route's chat while a fired turn runs there
        self.working: Callable[[dict[str, Any]], contextlib.AbstractContextManager[Any]] | None = (
            None
        )

    def _agent(self, session: Session) -> tuple[Any, Session] | None:
        name = session.config.get("agent")
        adapter = self.agents.get(name) if name in AGENTS else None
        if adapter is None or not isinstance(session.config.get("route"), dict):
            return None
        config = {k: v for k, v in session.config.items() if k not in ("agent", "route")}
        return adapter, replace(session, adapter=name, config=config)

    def can_deliver(self, session: Session) -> bool:
        found = self._agent(session)
        return found is not None and found[0].can_deliver(found[1])

    def why_not(self, session: Session) -> str | None:
        found = self._agent(session)
        if found is None:
            return f"session {session.id} has no agent and route"
        return getattr(found[0], "why_not", lambda _s: None)(found[1])

    def peer(self, session: Session) -> str | None:
        """The peer of the thread's agent (its model server), if it has one."""
        found = self._agent(session)
        peer = getattr(found[0], "peer", None) if found is not None else None
        return peer(found[1]) if peer is not None and found is not None else None

    def run_turn(self, session: Session, message: str, fires: Sequence[Fire]) -> TurnResult:
        found = self._agent(session)
        if found is None:
            return TurnResult(False, error=f"session {session.id} has no agent and route")
        adapter, inner = found
        working = (
            self.working(session.config["route"])
            if self.working is not None
            else contextlib.nullcontext()
        )
        with working:
            result: TurnResult = adapter.run_turn(inner, message, fires)
        if result.ok:
            failpoints.hit("telegram_after_turn")
            self.queue_fired_reply(session, fires)
        return result

    def queue_fired_reply(self, session: Session, fires: Sequence[Fire]) -> None:
        found = fired_reply(self.store, session.id, [f.key for f in fires])
        if found is None or not found[1]:
            return
        msg_id, text = found
        queue_text(
            self.outbox,
            session.config["route"],
            key=f"{session.id}:fired:{msg_id}",
            text=text,
            session=session.id,
            now=now_us(self.clock),
        )


class CommandChatModel:
    """A ``command`` agent as the model of a :class:`~remindkit.agent.loop.Conversation`:
    each call runs the command once with the user messages since its last reply
    (the agent keeps its own conversation; remindkit keeps the transcript)."""

    def __init__(self, session: Session, *, timeout: float | None = None) -> None:
        self.session = session
        self.name = f"command {session.config.get('argv', ['?'])[0]}"
        self.runner = CommandSession(timeout=timeout)

    def complete(
        self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]]
    ) -> Completion:
        pending: list[str] = []
        for m in reversed(messages):
            if m.get("role") != "user":
                break
            pending.append(str(m.get("content") or ""))
        text = "\n\n".join(reversed(pending))
        try:
            result = self.runner.run_turn(self.session, text, [])
        except (
            subprocess.SubprocessError
        ) as exc:  # pragma: no cover - run_turn turns these into results
            raise ModelError(str(exc), code="agent_failed") from None
        if not result.ok:
            raise ModelError(result.error or "the agent failed", code="agent_failed")
        return Completion(content=result.reply or "")


__all__ = [
    "CHANNEL",
    "CommandChatModel",
    "TelegramSessions",
    "fired_reply",
    "queue_text",
    "route_key",
    "split_message",
]
