"""The loop against a real model: SmolLM2-135M served by llama-cpp-python, and
the ``llm`` CLI as a ``command`` agent. What is asserted is remindkit's side
(requests accepted, the fired turn reaches the model, the reply is stored, a tag
the model writes is carried out, nothing lost or doubled), never what a 135M
model says. A grammar steers the model when a tag is needed."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remindkit.agent.loop import Conversation
from remindkit.engine import Engine
from remindkit.models import FIRED_TURN, Message, Session
from remindkit.protocol.display import fired_keys
from remindkit.reminders import Reminders
from remindkit.sessions.openai import OpenAIChatModel
from remindkit.settings import Settings
from remindkit.store import open_store

pytestmark = pytest.mark.model

TAG = '<schedule label="again" delay="1h">check again</schedule>'
GRAMMAR = f'root ::= "Noted. {TAG.replace(chr(34), chr(92) + chr(34))}"'


def wait_for(check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout}s")


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    settings = Settings.from_env(
        {
            "REMINDKIT_HOME": str(tmp_path / "home"),
            "REMINDKIT_MIN_PERIOD": "1",
            "REMINDKIT_TZ": "UTC",
        }
    )
    s = open_store(f"sqlite:///{tmp_path / 'store.db'}", settings=settings)
    yield s
    s.close()


def test_a_tool_call_turn_is_accepted_by_llama_cpp_python(llama_server, store) -> None:  # type: ignore[no-untyped-def]
    """The request that was a 500 ("Input should be a valid string") before."""
    store.transcripts.append_messages(
        "t",
        [
            Message("t", "user", "what reminders do I have?"),
            Message(
                "t",
                "assistant",
                None,
                tool_calls=(
                    {
                        "id": "call_0",
                        "type": "function",
                        "function": {"name": "schedule_list", "arguments": "{}"},
                    },
                ),
            ),
            Message(
                "t",
                "tool",
                '{"ok": true, "reminders": []}',
                kind="tool_result",
                tool_call_id="call_0",
                name="schedule_list",
            ),
            Message("t", "assistant", "You have none."),
        ],
        now_us=0,
    )
    model = OpenAIChatModel(
        llama_server.base_url, "smollm2", timeout=300, limits=store.settings.model
    )
    start = time.monotonic()
    reply = Conversation(Reminders(store), "t", model).send("thanks", wait_s=5)
    print(f"\ntyped turn after a tool-call turn: {time.monotonic() - start:.1f}s")
    assert reply.ok, reply.error
    assert store.transcripts.messages("t")[-1].role == "assistant"


def test_fired_turns_reach_the_model_replies_are_stored_and_a_tag_is_carried_out(
    llama_server, store
) -> None:  # type: ignore[no-untyped-def]
    settings = store.settings
    store.sessions.put_session(
        Session(
            "m",
            adapter="openai",
            config={
                "base_url": llama_server.base_url,
                "model": "smollm2",
                "timeout": 300,
                "extra": {"grammar": GRAMMAR},
            },
        ),
        now_us=0,
    )
    api = Reminders(store, settings=settings)
    engine = Engine(store, settings=settings)
    engine.start()
    try:
        start = time.monotonic()
        ids = [
            api.create(f"stretch {i}", session="m", in_="1s", label=f"r{i}").id for i in range(2)
        ]
        wait_for(
            lambda: (
                all(
                    o.state in ("delivered", "failed")
                    for rid in ids
                    for o in store.reminders.history(reminder_id=rid)
                )
                and all(store.reminders.history(reminder_id=rid) for rid in ids)
            ),
            600,
        )
        took = time.monotonic() - start
    finally:
        engine.stop()
        engine.close()
    print(f"\ntwo fires due in 1 s, delivered to SmolLM2 through llama_cpp.server in {took:.1f}s")
    outcomes = [o for rid in ids for o in store.reminders.history(reminder_id=rid)]
    assert [o.state for o in outcomes] == ["delivered", "delivered"], [o.error for o in outcomes]
    fired = [m for m in store.transcripts.messages("m") if m.kind == FIRED_TURN]
    keys = [o.key for o in outcomes]
    for key in keys:  # each occurrence handed over exactly once
        assert sum(fired_keys(m.content or "").count(key) for m in fired) == 1
    replies = [m for m in store.transcripts.messages("m") if m.role == "assistant"]
    assert len(replies) == len(fired) and all(TAG in (m.content or "") for m in replies)
    again = [r for r in api.list(session="m") if r.label == "again"]
    assert len(again) == 1 and again[0].state == "active"  # the tag the model wrote was carried out


def test_llm_cli_as_a_command_session(llm_cli, store, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    exe, env = llm_cli
    settings = store.settings
    store.sessions.put_session(
        Session(
            "cli",
            adapter="command",
            config={"argv": [exe, "-m", "SmolLM2"], "env": env, "timeout": 300},
        ),
        now_us=0,
    )
    api = Reminders(store, settings=settings)
    engine = Engine(store, settings=settings)
    engine.start()
    try:
        start = time.monotonic()
        ids = [api.create(f"water the plants {i}", session="cli", in_="1s").id for i in range(2)]
        wait_for(
            lambda: all(
                store.reminders.history(reminder_id=rid)
                and store.reminders.history(reminder_id=rid)[0].state in ("delivered", "failed")
                for rid in ids
            ),
            600,
        )
        took = time.monotonic() - start
    finally:
        engine.stop()
        engine.close()
    print(f"\ntwo fires answered by `llm -m SmolLM2` in {took:.1f}s")
    outcomes = [o for rid in ids for o in store.reminders.history(reminder_id=rid)]
    assert [o.state for o in outcomes] == ["delivered", "delivered"], [o.error for o in outcomes]
    logs = subprocess.run(
        [exe, "logs", "--json", "-n", "0"],
        env={**_env(), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    prompts = [row["prompt"] for row in json.loads(logs.stdout or "[]")]
    for o in outcomes:  # the fired turn reached the model, once per occurrence
        assert sum(fired_keys(p).count(o.key) for p in prompts) == 1, prompts


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)
