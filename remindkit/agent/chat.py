"""A chat with a model that reminders come back to, from Python.

:class:`ChatSession` keeps the conversation in the store and runs each turn
through :class:`~remindkit.agent.loop.Conversation` (turn lease, tool calls,
tags). Where its fired turns run depends on the model:

* an OpenAI-compatible endpoint (``base_url`` + ``model``): an ``openai``
  session; any engine process (``remindkit serve``, this one) runs them;
* any other model (a :class:`~remindkit.agent.model.ChatModel`, or a function
  ``fn(messages, tools) -> str``): a ``python`` session registered with the
  engine of this process, which runs them while this process lives.

:meth:`ChatSession.entries` turns the transcript into what a person sees
(typed messages, a short marker for each fired turn, replies without tags)::

    >>> chat = ChatSession(store, base_url="http://127.0.0.1:11434/v1", model="llama3.2", engine=engine)  # doctest: +SKIP
    >>> chat.send("remind me in 5 minutes to stretch").text                                            # doctest: +SKIP
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..clock import Clock, SystemClock, now_us
from ..errors import InvalidInput
from ..models import SESSION_DELETED, Message, Session
from ..protocol.display import fired_marker, transcript_view
from ..sessions.trust import check_key_env
from ..settings import Settings
from ..store import SqlStore
from .loop import DEFAULT_SYSTEM, Conversation, TurnReply
from .model import CallableModel, ChatModel, ChatModelLike

if TYPE_CHECKING:
    from ..engine import Engine


@dataclass(frozen=True)
class Entry:
    """One line of a conversation as a person sees it."""

    seq: int
    who: str  # you | agent | fired
    text: str


class ChatSession:
    def __init__(
        self,
        store: SqlStore,
        *,
        session: str | None = None,
        base_url: str | None = None,
        model: str | ChatModel | Callable[..., Any] | None = None,
        api_key_env: str | None = None,
        engine: Engine | None = None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        system: str | None = DEFAULT_SYSTEM,
        title: str | None = None,
    ) -> None:
        self.store = store
        self.clock: Clock = clock or (engine.clock if engine is not None else SystemClock())
        self.settings = settings or store.settings
        self.id = session or f"chat-{uuid.uuid4().hex[:8]}"
        self.engine = engine
        existing = store.get_session(self.id)
        if existing is not None and existing.state == SESSION_DELETED:
            raise InvalidInput(f"session {self.id!r} was deleted; use another id", code="session_deleted")
        if base_url is not None:
            if not isinstance(model, str) or not model:
                raise InvalidInput("an OpenAI-compatible chat needs model=NAME", code="invalid_argument")
            config = dict(existing.config) if existing is not None and existing.adapter == "openai" else {}
            config.update(base_url=base_url, model=model)
            if api_key_env:
                config["api_key_env"] = check_key_env(api_key_env)
            if system != DEFAULT_SYSTEM:
                config["system"] = system or ""
            sess = store.put_session(Session(self.id, adapter="openai", config=config, title=title),
                                     now_us=now_us(self.clock))
            from ..sessions.openai import OpenAIChatModel

            chat_model: ChatModel = OpenAIChatModel.from_config(sess.config)
        else:
            if model is None or isinstance(model, str):
                raise InvalidInput("give base_url and model, or a model object or function", code="invalid_argument")
            chat_model = model if isinstance(model, ChatModelLike) else CallableModel(model)
            store.put_session(Session(self.id, adapter="python", config={}, title=title), now_us=now_us(self.clock))
        self.conversation = Conversation(store, self.id, chat_model, clock=self.clock, settings=self.settings,
                                         system=system)
        if base_url is None:
            self.attach(engine)

    @property
    def adapter(self) -> str:
        sess = self.store.get_session(self.id)
        return (sess.adapter if sess else None) or "python"

    def attach(self, engine: Engine | None) -> None:
        """Let ``engine`` deliver fired turns to this chat (python sessions)."""
        self.engine = engine
        if engine is None:
            return
        python = engine.adapters.get("python")
        if python is not None and hasattr(python, "register"):
            python.register(self.id, self.conversation)
            engine.notice_change()

    def close(self) -> None:
        if self.engine is not None:
            python = self.engine.adapters.get("python")
            if python is not None and hasattr(python, "unregister"):
                python.unregister(self.id)

    def send(self, text: str, *, wait_s: float = 600.0) -> TurnReply:
        """Run a turn with a typed message; waits while a fired turn runs."""
        return self.conversation.send(text, wait_s=wait_s)

    def messages(self, *, after_seq: int = 0) -> list[Message]:
        return self.store.messages(self.id, after_seq=after_seq)

    def entries(self, *, after_seq: int = 0) -> list[Entry]:
        return display_entries(self.messages(after_seq=after_seq))

    def last_seq(self) -> int:
        return self.store.last_seq(self.id)


def display_entries(messages: Sequence[Message]) -> list[Entry]:
    """What a person sees: typed messages, a marker per fired turn, replies
    without tags; feedback, tool traffic and empty replies are hidden."""
    return [Entry(*v) for v in transcript_view(messages, lambda m: fired_marker(m.content or ""))]


__all__ = ["ChatSession", "Entry", "display_entries"]
