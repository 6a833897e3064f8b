"""A person's message to a session, over HTTP: the turn runs through the session's
adapter, the reply goes back as it is produced.

``POST …/sessions/{session}/messages`` with ``{"text"}`` runs one typed turn in
the session through its adapter's ``user_turn`` (an ``openai`` session: the
:class:`~remindkit.agent.loop.Conversation` the engine uses for its fired turns,
so tags and tool calls are carried out through the reminders API, and the
session holds its turn lease: fires due meanwhile wait, and come as their own
turn after it). With ``Accept: text/event-stream`` the answer is a stream of
server-sent events::

    event: started   {}                              the turn has the session
    event: waiting   {"reason"}                      the session is busy with another turn
    event: text      {"append": "…"} | {"replace": "…"}   the reply's display text so far
    event: tool      {"name", "ok", "code"}          a tool call carried out
    event: reply     {"ok", "text", "tags", "error"} the end: the whole reply, or why it failed
    event: error     {"error", "status"}             the end: the turn was refused (session_busy, …)

else one JSON answer, the ``reply`` event's body (``502`` with the error body when
the agent failed). A turn runs on a thread of its own and finishes even when the
client goes away (its reply is in the transcript). Bounds: one turn per session at
a time (a second waits up to ``WAIT_S`` for the first, then ``409 session_busy``),
at most ``MAX_TURNS`` turns in this server (``409 too_many_turns``), the model
call's own deadline and bytes, and at most ``STREAM_SHOWN`` characters of a reply
streamed piece by piece (the rest comes with ``reply``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

from ..errors import Conflict, RemindkitError, error_body
from ..models import SESSION_DELETED, Session
from ..protocol.streaming import DisplayStream
from .guard import status_of

log = logging.getLogger(__name__)

WAIT_S = 120.0  # a message to a session busy with another turn waits this long for it
MAX_TURNS = 16  # typed turns running (or waiting for their session) in one server
STREAM_SHOWN = 64 * 1024  # characters of a reply streamed as it comes; the rest at the end


def reply_body(reply: Any) -> dict[str, Any]:
    """What a finished turn answers (``MessageReply``)."""
    tags = [
        {
            "ok": o.ok,
            "code": o.code,
            "label": getattr(o.reminder, "label", None),
            "reminder": getattr(o.reminder, "id", None),
            "cancelled": list(o.cancelled),
        }
        for o in reply.tags
    ]
    body: dict[str, Any] = {
        "ok": bool(reply.ok),
        "text": reply.text if reply.ok else "",
        "tags": tags,
        "error": None,
    }
    if not reply.ok:
        body.update(error_body(reply.code or "turn_failed", reply.error or ""))
    return body


class ChatTurns:
    """The typed turns of one server."""

    def __init__(self, adapters: Any, *, wait_s: float = WAIT_S, max_turns: int = MAX_TURNS):
        self.adapters = adapters
        self.wait_s = wait_s
        self.max_turns = max_turns
        self._running = 0
        self._lock = threading.Lock()

    def adapter_for(self, sess: Session) -> Any:
        """The session's adapter, if it can run a typed turn here; else a refusal."""
        if sess.state == SESSION_DELETED:
            raise Conflict(f"session {sess.id!r} was deleted", code="session_deleted")
        adapter = self.adapters.get(sess.adapter)
        if adapter is None or not hasattr(adapter, "user_turn"):
            raise Conflict(
                f"session {sess.id!r} has no agent to talk to here (adapter "
                f"{sess.adapter or 'none'}); give it one: remindkit session add {sess.id} "
                "--openai --base-url URL --model NAME",
                code="no_agent",
            )
        reason = self.adapters.policy.why_not(sess)
        if reason is not None:
            raise Conflict(reason, code="agent_not_allowed")
        return adapter

    def _take(self) -> None:
        with self._lock:
            if self._running >= self.max_turns:
                raise Conflict(
                    f"this server is running {self.max_turns} turns; try again when one ends",
                    code="too_many_turns",
                )
            self._running += 1

    def _give(self) -> None:
        with self._lock:
            self._running -= 1

    def start(self, sess: Session, text: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Run the turn on a thread of its own; its events, as they come."""
        adapter = self.adapter_for(sess)
        self._take()
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        display = DisplayStream()

        def put(item: tuple[str, dict[str, Any]] | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the server's loop has closed: nobody is listening
                pass

        def on_text(piece: str) -> None:
            if len(display.raw) >= STREAM_SHOWN:
                return
            shown = display.feed(piece)
            if shown is not None:
                put(("text", {shown[0]: shown[1]}))

        def on_tool(name: str, result: Any) -> None:
            put(("tool", {"name": name, "ok": bool(result.ok), "code": result.code}))

        def work() -> None:
            try:
                if sess.in_turn:
                    put(("waiting", {"reason": "the agent is answering another turn"}))
                reply = adapter.user_turn(
                    sess,
                    text,
                    wait_s=self.wait_s,
                    on_text=on_text,
                    on_tool=on_tool,
                    on_start=lambda: put(("started", {})),
                )
                put(("reply", reply_body(reply)))
            except RemindkitError as exc:
                put(("refused", {**error_body(exc.code, exc.message), "status": status_of(exc)}))
            except Exception as exc:  # a bug is a failed turn, never a hung stream
                log.exception("the turn of %s failed", sess.id)
                put(("refused", {**error_body("turn_failed", repr(exc)[:500]), "status": 500}))
            finally:
                self._give()
                put(None)

        threading.Thread(target=work, daemon=True, name=f"remindkit-chat-{sess.id[:40]}").start()

        async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
            while True:
                item = await queue.get()
                if item is None:
                    return
                yield item

        return events()


def sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def stream_turn(events: AsyncIterator[tuple[str, dict[str, Any]]]) -> AsyncIterator[bytes]:
    """The turn's events as server-sent events; a refusal after the start is an ``error``."""
    async for kind, data in events:
        if kind == "refused":
            yield sse("error", {"error": data["error"], "status": data["status"]})
        else:
            yield sse(kind, data)


async def last_event(
    events: AsyncIterator[tuple[str, dict[str, Any]]],
) -> tuple[str, dict[str, Any]]:
    """The turn's end: ``("reply", body)`` or ``("refused", error body)``."""
    last: tuple[str, dict[str, Any]] = ("refused", error_body("turn_failed", ""))
    async for kind, data in events:
        if kind in ("reply", "refused"):
            last = (kind, data)
    return last


__all__ = ["ChatTurns", "last_event", "reply_body", "sse", "stream_turn"]
