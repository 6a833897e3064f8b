"""A chat with a model that reminders come back to, from Python (``remindkit chat``
and ``rk.chat`` in a notebook are made of it).

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

    >>> graph = rk.build()                                                                             # doctest: +SKIP
    >>> engine = graph.engine().start()                                                                # doctest: +SKIP
    >>> chat = ChatSession(graph, base_url="http://127.0.0.1:11434/v1", model="llama3.2", engine=engine)  # doctest: +SKIP
    >>> chat.send("remind me in 5 minutes to stretch").text                                            # doctest: +SKIP
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from ..agent.loop import DEFAULT_SYSTEM, Conversation, TurnReply, session_system
from ..agent.model import CallableModel, ChatModel, ChatModelLike
from ..checks import check_key_env
from ..clock import Clock, now_us
from ..errors import InvalidInput
from ..models import DELIVERED, FEEDBACK, FIRED_TURN, OCC_FAILED, SESSION_DELETED, Message, Session
from ..protocol.display import fired_keys, fired_marker, strip_assistant_display, transcript_view
from ..settings import Settings
from ..store import SqlStore
from ..wiring import Graph, build

if TYPE_CHECKING:
    from ..engine import Engine


_SESSION_OWN = object()  # system=: the session's own prompt (config["system"], else the default)


@dataclass(frozen=True)
class Entry:
    """One line of a conversation as a person sees it."""

    seq: int
    who: str  # you | agent | fired
    text: str


class ChatSession:
    """A chat over ``graph`` (from :func:`remindkit.build`; a store alone is built
    into one with ``clock`` and ``settings``)."""

    def __init__(
        self,
        graph: Graph | SqlStore,
        *,
        session: str | None = None,
        base_url: str | None = None,
        model: str | ChatModel | Callable[..., Any] | None = None,
        api_key_env: str | None = None,
        engine: Engine | None = None,
        clock: Clock | None = None,
        settings: Settings | None = None,
        system: str | None | object = _SESSION_OWN,
        title: str | None = None,
    ) -> None:
        if not isinstance(graph, Graph):
            graph = build(
                settings,
                store=graph,
                clock=clock or (engine.clock if engine is not None else None),
            )
        store = graph.store
        self.graph = graph
        self.store = store
        self.clock: Clock = graph.clock
        self.settings = graph.settings
        self.id = session or f"chat-{uuid.uuid4().hex[:8]}"
        self.engine = engine
        existing = store.sessions.get_session(self.id)
        if existing is not None and existing.state == SESSION_DELETED:
            raise InvalidInput(
                f"session {self.id!r} was deleted; use another id", code="session_deleted"
            )
        if base_url is not None:
            if not isinstance(model, str) or not model:
                raise InvalidInput(
                    "an OpenAI-compatible chat needs model=NAME", code="invalid_argument"
                )
            config = (
                dict(existing.config)
                if existing is not None and existing.adapter == "openai"
                else {}
            )
            config.update(base_url=base_url, model=model)
            if api_key_env:
                config["api_key_env"] = check_key_env(api_key_env)
            if system is not _SESSION_OWN:
                config["system"] = system or ""  # "" or None: no system prompt
            sess = store.sessions.put_session(
                Session(self.id, adapter="openai", config=config, title=title),
                now_us=now_us(self.clock),
            )
            from ..sessions.openai import OpenAIChatModel

            chat_model: ChatModel = OpenAIChatModel.from_config(
                sess.config, limits=self.settings.model
            )
            prompt = session_system(sess)  # the one the engine uses for fired turns too
        else:
            if model is None or isinstance(model, str):
                raise InvalidInput(
                    "give base_url and model, or a model object or function",
                    code="invalid_argument",
                )
            chat_model = model if isinstance(model, ChatModelLike) else CallableModel(model)
            store.sessions.put_session(
                Session(self.id, adapter="python", config={}, title=title),
                now_us=now_us(self.clock),
            )
            prompt = DEFAULT_SYSTEM if system is _SESSION_OWN else cast("str | None", system)
        self.conversation = Conversation(graph.api, self.id, chat_model, system=prompt)
        if base_url is None:
            self.attach(engine)

    @property
    def adapter(self) -> str:
        sess = self.store.sessions.get_session(self.id)
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
        return self.store.transcripts.messages(self.id, after_seq=after_seq)

    def entries(self, *, after_seq: int = 0) -> list[Entry]:
        return display_entries(self.messages(after_seq=after_seq))

    def last_seq(self) -> int:
        return self.store.transcripts.last_seq(self.id)

    def delivery_notes(self, *, limit: int = 50) -> list[Entry]:
        """What the transcript alone does not show, for the latest ``limit`` fires
        of this session: a fired turn that failed (``who="failed"``, its error),
        and the reply to one that went to a fallback session (``who="fallback"``,
        marked as coming from that fresh session). Each is placed after the
        session's own fired turn for it."""
        notes: list[Entry] = []
        mine: list[Message] | None = None
        for occ in reversed(self.store.reminders.history(session=self.id, limit=limit)):
            if occ.session not in (self.id, None):
                continue  # a fire of another session that fell back into this one: in the transcript
            failed = occ.state == OCC_FAILED
            elsewhere = occ.state == DELIVERED and occ.delivered_to not in (None, self.id)
            if not (failed or elsewhere):
                continue
            if mine is None:
                mine = [
                    m
                    for m in self.store.transcripts.messages(self.id, last=400)
                    if m.kind == FIRED_TURN
                ]
            key = occ.key
            seq = (
                next((m.seq for m in reversed(mine) if key in fired_keys(m.content or "")), 0)
                or self.last_seq()
            )
            label = self._label(occ.reminder_id)
            if failed:
                notes.append(
                    Entry(
                        seq,
                        "failed",
                        f"⚠ reminder {label} could not be delivered: {occ.error or 'failed'}",
                    )
                )
                continue
            reply = _reply_to(self.store.transcripts.messages(str(occ.delivered_to), last=200), key)
            text = (
                f"(from fresh session {occ.delivered_to}) {reply}"
                if reply
                else (f"(reminder {label} was answered in fresh session {occ.delivered_to})")
            )
            notes.append(Entry(seq, "fallback", text))
        return notes

    def _label(self, reminder_id: str) -> str:
        try:
            rem = self.store.reminders.get_reminder(reminder_id)
        except Exception:
            rem = None
        label = getattr(rem, "label", None)
        return repr(label) if label else reminder_id


def _reply_to(messages: Sequence[Message], key: str) -> str:
    """The display text of the replies to the fired turn that carries ``key``."""
    start = next(
        (
            i
            for i, m in enumerate(messages)
            if m.kind == FIRED_TURN and key in fired_keys(m.content or "")
        ),
        None,
    )
    if start is None:
        return ""
    texts: list[str] = []
    for m in messages[start + 1 :]:
        if m.role == "user" and m.kind != FEEDBACK:
            break
        if m.role == "assistant" and m.content:
            texts.append(strip_assistant_display(m.content))
    return "\n\n".join(t for t in texts if t)


def display_entries(messages: Sequence[Message]) -> list[Entry]:
    """What a person sees: typed messages, a marker per fired turn, replies
    without tags; feedback, tool traffic and empty replies are hidden."""
    return [Entry(*v) for v in transcript_view(messages, lambda m: fired_marker(m.content or ""))]


__all__ = ["ChatSession", "Entry", "display_entries"]
