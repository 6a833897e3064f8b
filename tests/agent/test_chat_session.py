"""ChatSession against a loopback model server: one system prompt per session for
typed and fired turns, and what the chat shows of fires that failed or were
answered in a fallback session."""

from __future__ import annotations

from typing import Any

from remindkit.agent.loop import DEFAULT_SYSTEM
from remindkit.chats import ChatSession
from remindkit.clock import to_us
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.sessions.openai import OpenAISessions
from remindkit.sessions.registry import Adapters

from ..sessions.model_server import Behaviour, ModelServer, text


def systems(server: ModelServer) -> list[str | None]:
    return [
        next((m["content"] for m in s.body["messages"] if m["role"] == "system"), None)
        for s in server.completions()
    ]


def run_engine(store, clock, settings) -> Engine:  # type: ignore[no-untyped-def]
    return Engine(
        store,
        clock=clock,
        settings=settings,
        inline=True,
        adapters=Adapters(OpenAISessions(Reminders(store, clock=clock, settings=settings))),
    )


def fire_one(eng: Engine, api: Reminders, clock, session: str, label: str = "tea") -> str:  # type: ignore[no-untyped-def]
    rid = api.create("make tea", session=session, label=label, in_="1m").id
    clock.advance(60)
    eng.tick(clock.now())
    eng.notice_change()
    eng.tick(clock.now())
    return rid


def test_typed_and_fired_turns_send_the_sessions_one_system_prompt(
    sqlite_store, clock, settings
) -> None:  # type: ignore[no-untyped-def]
    with ModelServer("llama-cpp-python", lambda body: text("ok")) as server:
        sqlite_store.sessions.put_session(
            Session(
                "s",
                adapter="openai",
                config={"base_url": server.base_url, "model": "m", "system": "You are terse."},
            ),
            now_us=to_us(clock.now()),
        )
        chat = ChatSession(
            sqlite_store,
            session="s",
            base_url=server.base_url,
            model="m",
            clock=clock,
            settings=settings,
        )
        assert chat.send("hi").ok
        eng = run_engine(sqlite_store, clock, settings)
        fire_one(eng, Reminders(sqlite_store, clock=clock, settings=settings), clock, "s")
        assert systems(server) == ["You are terse.", "You are terse."]
        # --system replaces it, for both kinds of turn
        chat = ChatSession(
            sqlite_store,
            session="s",
            base_url=server.base_url,
            model="m",
            clock=clock,
            settings=settings,
            system="Answer in French.",
        )
        assert chat.send("encore").ok
        fire_one(
            eng, Reminders(sqlite_store, clock=clock, settings=settings), clock, "s", label="other"
        )
        assert systems(server)[2:] == ["Answer in French.", "Answer in French."]
        # a new session without one gets remindkit's default, both ways
        chat = ChatSession(
            sqlite_store,
            session="n",
            base_url=server.base_url,
            model="m",
            clock=clock,
            settings=settings,
        )
        assert chat.send("hello").ok
        fire_one(eng, Reminders(sqlite_store, clock=clock, settings=settings), clock, "n")
        assert systems(server)[4:] == [DEFAULT_SYSTEM, DEFAULT_SYSTEM]


def test_a_failed_fired_turn_shows_its_error_in_the_chat(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    behaviour = Behaviour(status=400, error_body='{"error": {"message": "bad grammar in request"}}')
    with ModelServer("openai", lambda body: text("ok"), behaviour) as server:
        chat = ChatSession(
            sqlite_store,
            session="s",
            base_url=server.base_url,
            model="m",
            clock=clock,
            settings=settings,
        )
        eng = run_engine(sqlite_store, clock, settings)
        fire_one(eng, Reminders(sqlite_store, clock=clock, settings=settings), clock, "s")
        notes = chat.delivery_notes()
    (note,) = notes
    assert (
        note.who == "failed"
        and "'tea'" in note.text
        and "HTTP 400" in note.text
        and "bad grammar" in note.text
    )
    fired = [e for e in chat.entries() if e.who == "fired"]
    assert fired and note.seq == fired[0].seq  # shown right after its fired marker


def test_a_reply_from_the_fallback_session_shows_in_the_chat_that_asked(
    sqlite_store, clock, settings
) -> None:  # type: ignore[no-untyped-def]
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        return text("Time for tea (fresh).")

    def refuse_old(body: dict[str, Any]) -> bool:
        return any(m["role"] == "assistant" for m in body["messages"])

    class Server(ModelServer):
        def _answer(self, body: dict[str, Any]) -> tuple[int, bytes, dict[str, str]]:
            if refuse_old(body):  # the old conversation cannot be resumed: 422 at once
                return 422, b'{"error": {"message": "this conversation cannot be continued"}}', {}
            return super()._answer(body)

    with Server("openai", respond) as server:
        chat = ChatSession(
            sqlite_store,
            session="s",
            base_url=server.base_url,
            model="m",
            clock=clock,
            settings=settings,
        )
        assert chat.send("hi").ok
        eng = run_engine(sqlite_store, clock, settings)
        rid = fire_one(eng, Reminders(sqlite_store, clock=clock, settings=settings), clock, "s")
    (occ,) = sqlite_store.reminders.history(reminder_id=rid)
    assert occ.state == "delivered" and occ.delivered_to.startswith("s~")
    (note,) = chat.delivery_notes()
    assert (
        note.who == "fallback"
        and note.text == f"(from fresh session {occ.delivered_to}) Time for tea (fresh)."
    )
