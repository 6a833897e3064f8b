"""openai sessions against loopback servers that check requests like the servers
people run (OpenAI, vLLM, llama.cpp, llama-cpp-python, Ollama), fail like them
(5xx, 429 with Retry-After, a full context) and attack like a hostile one (a
byte every second, a huge answer, hundreds of tool calls)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

import pytest

from remindkit import events as ev
from remindkit.agent.loop import Conversation
from remindkit.clock import FakeClock, to_us
from remindkit.engine import Engine
from remindkit.models import Message, Session
from remindkit.reminders import Reminders
from remindkit.sessions.openai import OpenAIChatModel, OpenAISessions
from remindkit.sessions.registry import Adapters
from remindkit.settings import ModelLimits, Settings
from remindkit.store import SqlStore

from .model_server import FLAVOURS, Behaviour, ModelServer, text, tool_calls, validate

TOOL_TURN = [
    {"role": "system", "content": "s"},
    {"role": "user", "content": "remind me"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "schedule_list", "arguments": "{}"},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "content": '{"ok": true}'},
]


@pytest.mark.parametrize(
    "flavour,status",
    [
        ("openai", None),
        ("vllm", None),
        ("llama.cpp", None),
        ("llama-cpp-python", 500),
        ("ollama", 400),
    ],
)
def test_the_checking_servers_refuse_what_the_real_ones_refuse(
    flavour: str, status: int | None
) -> None:
    """The body remindkit used to send (assistant ``content: null`` with tool calls)."""
    got = validate(flavour, {"model": "m", "messages": TOOL_TURN})
    assert (got[0] if got else None) == status
    fixed = [dict(m, content=m["content"] or "") for m in TOOL_TURN]
    assert validate(flavour, {"model": "m", "messages": fixed}) is None
    no_content = [
        {k: v for k, v in m.items() if not (k == "content" and v is None)} for m in TOOL_TURN
    ]
    assert (validate(flavour, {"model": "m", "messages": no_content}) is None) == (
        flavour in ("openai", "vllm", "llama.cpp")
    )


def scripted(body: dict[str, Any]) -> dict[str, Any]:
    """Asked to remind: a tool call first; after the tool result, or otherwise, text."""
    last = body["messages"][-1]
    if last["role"] == "user" and "remind" in last["content"]:
        return tool_calls(
            ("schedule_create", {"prompt": "stretch", "after": "10m", "label": "stretch"}),
            ("schedule_list", {}),
        )
    return text("done")


def conversation(
    store: SqlStore,
    clock: FakeClock,
    settings: Settings,
    url: str,
    session: str = "s",
    **config: Any,
) -> Conversation:
    model = OpenAIChatModel.from_config(
        {"base_url": url, "model": "m", **config}, limits=settings.model
    )
    return Conversation(Reminders(store, clock=clock, settings=settings), session, model)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_tool_call_turns_are_accepted_by_every_server(
    sqlite_store, clock, settings, flavour
) -> None:  # type: ignore[no-untyped-def]
    with ModelServer(flavour, scripted) as server:
        chat = conversation(sqlite_store, clock, settings, server.base_url)
        first = chat.send("remind me to stretch")
        second = chat.send("thanks")
    assert first.ok and second.ok, (first.error, second.error)
    seen = server.completions()
    assert [s.status for s in seen] == [200, 200, 200]
    assert any(
        m.get("tool_calls") for m in seen[-1].body["messages"]
    )  # the tool turn went back, and was taken
    assert [
        r.label for r in Reminders(sqlite_store, clock=clock, settings=settings).list(session="s")
    ] == ["stretch"]


# -- 5xx and 429: the fires wait and are tried again -------------------------------------------


def openai_engine(
    store: SqlStore, clock: FakeClock, settings: Settings, url: str
) -> tuple[Engine, list[str]]:
    eng = Engine(
        store,
        clock=clock,
        settings=settings,
        inline=True,
        adapters=Adapters(OpenAISessions(Reminders(store, clock=clock, settings=settings))),
    )
    failed: list[str] = []
    eng.events.subscribe(ev.Failed, lambda e: failed.append(e.reason))
    store.sessions.put_session(
        Session("o", adapter="openai", config={"base_url": url, "model": "m", "timeout": 30}),
        now_us=to_us(clock.now()),
    )
    return eng, failed


def step(eng: Engine, clock: FakeClock, seconds: float = 0) -> None:
    clock.advance(seconds)
    eng.tick(clock.now())
    eng.notice_change()
    eng.tick(clock.now())


@pytest.mark.parametrize(
    "status,retry_after,wait", [(503, "7", 7), (429, None, 2), (502, None, 2), (500, "30", 30)]
)
def test_5xx_and_429_wait_and_retry_honouring_retry_after(
    sqlite_store, clock, settings, status, retry_after, wait
) -> None:  # type: ignore[no-untyped-def]
    behaviour = Behaviour(status=status, status_times=1, retry_after=retry_after)
    with ModelServer("openai", lambda body: text("back"), behaviour) as server:
        eng, failed = openai_engine(sqlite_store, clock, settings, server.base_url)
        api = Reminders(sqlite_store, clock=clock, settings=settings)
        rid = api.create("stretch", session="o", in_="1m").id
        step(eng, clock, 60)
        (occ,) = sqlite_store.reminders.history(reminder_id=rid)
        assert occ.state == "waiting" and "model_unavailable" in (occ.error or "") and not failed
        step(eng, clock, wait - 0.5)  # inside the back-off (or what the server asked): left alone
        assert len(server.completions()) == 1
        step(eng, clock, 1)
        (occ,) = sqlite_store.reminders.history(reminder_id=rid)
        assert occ.state == "delivered" and [s.status for s in server.completions()] == [
            status,
            200,
        ]
        assert (
            sum(
                m.content.count("<schedule-fired ")
                for m in sqlite_store.transcripts.messages("o")
                if m.kind == "fired"
            )
            == 1
        )


# -- the context: a token budget, and an overflow answer shrinks the request once ----------------


def long_history(store: SqlStore, clock: FakeClock, session: str, turns: int, size: int) -> None:
    rows: list[Message] = []
    for i in range(turns):
        rows += [
            Message(session, "user", f"question {i} " + "q" * size),
            Message(session, "assistant", f"answer {i} " + "a" * size),
        ]
    store.transcripts.append_messages(session, rows, now_us=to_us(clock.now()))


@pytest.mark.parametrize("style", ["llama-cpp-python", "llama.cpp-400", "openai"])
def test_context_overflow_shrinks_and_retries_once(sqlite_store, clock, settings, style) -> None:  # type: ignore[no-untyped-def]
    """The server's context (2048) is smaller than the default (4096): the first
    request is refused, the second, shorter, is taken; the newest turn is in it."""
    long_history(sqlite_store, clock, "s", 20, 400)
    with ModelServer(
        "openai", lambda body: text("fine"), Behaviour(context=2048, overflow_style=style)
    ) as server:
        chat = conversation(sqlite_store, clock, settings, server.base_url)
        reply = chat.send("the newest question")
        again = chat.send("and another")
    assert reply.ok and again.ok, (reply.error, again.error)
    seen = server.completions()
    assert [s.status for s in seen] == [
        400,
        200,
        200,
    ]  # the second turn fits at once: the size was learned
    ok = seen[1].body["messages"]
    assert ok[0]["role"] == "system" and ok[-1]["content"] == "the newest question"
    assert len(json.dumps(seen[1].body)) < len(
        json.dumps(seen[0].body)
    )  # shorter: fewer turns or fewer tools
    assert (
        len(seen[1].body.get("tools", [])) < 7
    )  # in a 2,048-token context the tools take at most a third


def test_llama_decode_returned_1_is_an_overflow_too(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    long_history(sqlite_store, clock, "s", 20, 400)
    with ModelServer(
        "llama.cpp", lambda body: text("fine"), Behaviour(context=2048, overflow_style="llama.cpp")
    ) as server:
        reply = conversation(sqlite_store, clock, settings, server.base_url).send("newest")
    assert reply.ok, reply.error
    assert [s.status for s in server.completions()] == [500, 200]


def test_a_long_session_never_dies(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    """Rambling replies in a 2048-token context: every request fits, none is refused,
    and max_tokens is sent (a quarter of the context at most)."""
    with ModelServer(
        "llama-cpp-python", lambda body: text("r" * 1500), Behaviour(context=2048)
    ) as server:
        chat = conversation(sqlite_store, clock, settings, server.base_url, context_tokens=2048)
        replies = [chat.send(f"turn {i} " + "u" * 600) for i in range(25)]
    assert all(r.ok for r in replies)
    seen = server.completions()
    assert [s.status for s in seen] == [200] * 25
    assert {s.body["max_tokens"] for s in seen} == {512}
    assert seen[-1].body["messages"][-1]["content"].startswith("turn 24 ")
    assert (
        len(sqlite_store.transcripts.messages("s")) == 50
    )  # nothing is deleted from the store, only left out of requests


def test_context_and_tokens_from_the_server(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    """llama.cpp's /props tells n_ctx and /tokenize counts; each text is counted once."""
    long_history(sqlite_store, clock, "s", 30, 400)
    behaviour = Behaviour(props_n_ctx=3000, tokenize=True, context=3000)
    with ModelServer("llama.cpp", lambda body: text("fine"), behaviour) as server:
        chat = conversation(sqlite_store, clock, settings, server.base_url)
        assert chat.send("one").ok and chat.send("two").ok
    paths = [s.path for s in server.seen]
    assert paths.count("/props") == 1
    assert [s.status for s in server.completions()] == [200, 200]
    assert server.completions()[0].body["max_tokens"] == 750
    tokenized = [s.body["content"] for s in server.seen if s.path == "/tokenize"]
    assert tokenized and len(tokenized) == len(set(tokenized))  # cached


# -- bounds: a hostile model server ------------------------------------------------------------


def test_a_server_that_drips_a_byte_a_second_is_cut_at_the_deadline(
    sqlite_store, clock, settings
) -> None:  # type: ignore[no-untyped-def]
    with ModelServer(
        "openai", lambda body: text("slow " * 40), Behaviour(drip_every=1.0)
    ) as server:
        chat = conversation(sqlite_store, clock, settings, server.base_url, timeout=3)
        start = time.monotonic()
        reply = chat.send("hello")
        took = time.monotonic() - start
    assert (
        not reply.ok
        and reply.code == "model_unreachable"
        and "did not answer in 3s" in (reply.error or "")
    )
    assert took < 10, (
        took
    )  # the answer is ~250 bytes: 250 s at that pace (probes take at most a third of it)


def test_a_huge_answer_is_dropped_unread(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    settings = replace(settings, model=ModelLimits(max_response_bytes=1_000_000))
    with ModelServer("openai", behaviour=Behaviour(huge_bytes=20_000_000)) as server:
        reply = conversation(sqlite_store, clock, settings, server.base_url).send("hello")
    assert not reply.ok and reply.code == "model_response_too_large"
    assert [m.role for m in sqlite_store.transcripts.messages("s")] == ["user"]


def test_a_long_reply_is_stored_truncated_with_a_marker(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    with ModelServer("openai", lambda body: text("y" * 200_000)) as server:
        reply = conversation(sqlite_store, clock, settings, server.base_url).send("hello")
    assert reply.ok
    stored = sqlite_store.transcripts.messages("s")[-1].content or ""
    assert len(stored) < 32_100 and stored.startswith("y" * 32_000)
    assert stored.endswith("[remindkit: truncated, 168000 more characters not kept]")


def test_at_most_n_tool_calls_run_per_completion(sqlite_store, clock, settings) -> None:  # type: ignore[no-untyped-def]
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if body["messages"][-1]["role"] == "user":
            return tool_calls(
                *[
                    ("schedule_create", {"prompt": f"r{i}", "after": "10m", "label": f"l{i}"})
                    for i in range(500)
                ]
            )
        return text("done")

    with ModelServer("openai", respond) as server:
        start = time.monotonic()
        reply = conversation(sqlite_store, clock, settings, server.base_url).send("go")
        took = time.monotonic() - start
    assert reply.ok
    results = [
        json.loads(m.content or "{}")
        for m in sqlite_store.transcripts.messages("s")
        if m.role == "tool"
    ]
    assert len(results) == 500
    refused = [r for r in results if r.get("error", {}).get("code") == "too_many_tool_calls"]
    assert len(refused) == 500 - 16
    assert len(Reminders(sqlite_store, clock=clock, settings=settings).list(session="s")) == 16
    assert (
        server.completions()[-1].status == 200
    )  # every call was answered, so the follow-up is valid
    assert took < 60, took
