"""A turn through remindkit: tool rounds, tags, feedback in the next turn,
the turn lease, fired turns taken once."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest

from remindkit.agent.loop import Conversation, SessionBusy
from remindkit.clock import FakeClock, to_us
from remindkit.models import Fire
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore

from .scripted import Script, tool_call


def conv(
    store: SqlStore, clock: FakeClock, settings: Settings, model: Script, session: str = "s1"
) -> Conversation:
    return Conversation(Reminders(store, clock=clock, settings=settings), session, model)


def test_tags_in_reply_are_carried_out(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    model = Script(
        'Sure! <schedule label="check back" delay="5m" alarm="true" announce="Check in">'
        "Ask about the meeting.</schedule>"
    )
    reply = conv(store, clock, settings, model).send("remind me in 5 minutes")
    assert reply.ok and reply.text == "Sure!"
    (rem,) = Reminders(store, clock=clock, settings=settings).list(session="s1")
    assert (rem.label, rem.text, rem.alarm, rem.announce, rem.source) == (
        "check back",
        "Ask about the meeting.",
        True,
        "Check in",
        "tag",
    )
    assert rem.next_fire_at == clock.now() + timedelta(minutes=5)
    roles = [(m.role, m.kind, m.hidden) for m in store.transcripts.messages("s1")]
    assert roles == [("user", "chat", False), ("assistant", "chat", False)]
    assert model.calls[0][0]["role"] == "system" and "<schedule" in model.calls[0][0]["content"]


def test_errors_go_back_in_the_next_turn(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    model = Script(
        '<schedule label="x" delay="5m" colour="red">t</schedule>'
        '<schedule label="y" every="5s">too often</schedule>'
        '<cancel-schedule label="nothing" />',
        "ok",
    )
    c = conv(store, clock, settings, model)
    first = c.send("go")
    assert first.ok and [o.code for o in first.tags] == [
        "unknown_attribute",
        "interval_too_short",
        "schedule_not_found",
    ]
    assert Reminders(store, clock=clock, settings=settings).list(all=True) == []
    c.send("next")
    sent = model.last_user()
    assert sent.startswith("<schedule-feedback>") and sent.endswith("next")
    codes = [
        json.loads(line.split(": ", 1)[1])["code"]
        for line in sent.splitlines()
        if line.startswith("error_json")
    ]
    assert codes == ["unknown_attribute", "interval_too_short", "schedule_not_found"]
    assert [m.kind for m in store.transcripts.messages("s1")] == [
        "chat",
        "chat",
        "feedback",
        "chat",
        "chat",
    ]


def test_tool_rounds(store: SqlStore, clock: FakeClock, settings: Settings) -> None:
    model = Script(
        tool_call("schedule_create", {"prompt": "stretch", "after": "10m", "label": "s"}, "c1"),
        lambda msgs: tool_call("schedule_list", {}, "c2"),
        "Done: I'll remind you.",
    )
    reply = conv(store, clock, settings, model).send("remind me to stretch")
    assert reply.ok and reply.text == "Done: I'll remind you."
    assert [name for name, _ in reply.tools] == ["schedule_create", "schedule_list"]
    second = model.calls[1]
    assert second[-2]["tool_calls"][0]["function"]["name"] == "schedule_create"
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "c1"
    assert json.loads(second[-1]["content"])["reminder"]["prompt"] == "stretch"
    assert model.tools[0] and model.tools[0][0]["function"]["name"] == "schedule_create"


def test_model_failure_is_a_failed_turn(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    from .scripted import fail

    reply = conv(store, clock, settings, Script(fail())).send("hi")
    assert not reply.ok and reply.instant and reply.code == "model_http_error"
    reply = conv(store, clock, settings, Script(RuntimeError("bug"))).send("hi")
    assert not reply.ok and not reply.instant and "bug" in (reply.error or "")
    assert (
        store.sessions.get_session("s1") is not None and store.sessions.get_session("s1").idle
    )  # the lease is released


def fires_for(store: SqlStore, clock: FakeClock, settings: Settings, n: int = 2) -> list[Fire]:
    api = Reminders(store, clock=clock, settings=settings)
    rems = [api.create(f"text {i}", session="s1", label=f"l{i}", in_=f"{i + 1}m") for i in range(n)]
    return [
        Fire(
            occurrence_id=i,
            reminder_id=r.id,
            session="s1",
            due_at=r.next_fire_at,
            text=r.text,
            label=r.label,
        )
        for i, r in enumerate(rems)
    ]


def test_fired_turn_runs_once_per_key(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    model = Script("Your reminder is due.")
    c = conv(store, clock, settings, model)
    fires = fires_for(store, clock, settings)
    first = c.deliver("", fires)
    assert first.ok and not first.duplicate and first.text == "Your reminder is due."
    sent = model.last_user()
    assert sent.count("<schedule-fired ") == 2 and sent.index("text 0") < sent.index("text 1")
    again = conv(store, clock, settings, model).deliver("", fires)  # another engine, same keys
    assert again.duplicate and len(model.calls) == 1
    [hidden] = [m for m in store.transcripts.messages("s1") if m.kind == "fired"]
    assert hidden.hidden and hidden.role == "user"
    partial = c.deliver("", [fires[1], *fires_for(store, clock, settings, 1)])
    assert partial.ok and model.last_user().count("<schedule-fired ") == 1  # only the new key


def test_unanswered_fired_turn_is_completed_not_repeated(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    fires = fires_for(store, clock, settings, 1)
    from .scripted import fail

    crashed = conv(store, clock, settings, Script(fail(instant=False))).deliver("", fires)
    assert not crashed.ok
    model = Script("answered")
    retry = conv(store, clock, settings, model).deliver("", fires)
    assert retry.ok and retry.text == "answered" and len(model.calls) == 1
    assert [m.kind for m in store.transcripts.messages("s1")] == ["fired", "chat"]


def test_turn_lease_makes_the_session_busy(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    model = Script("slow answer")
    model.gate = threading.Event()
    c = conv(store, clock, settings, model)
    results = []
    t = threading.Thread(target=lambda: results.append(c.send("hi")))
    t.start()
    assert model.entered.wait(5)
    sess = store.sessions.get_session("s1", now_us=to_us(clock.now()))
    assert sess is not None and sess.in_turn and not sess.idle
    with pytest.raises(SessionBusy) as info:
        conv(store, clock, settings, Script("x")).send("me too", wait_s=0)
    assert info.value.code == "session_busy"
    model.gate.set()
    t.join(5)
    assert results[0].ok
    assert store.sessions.get_session("s1", now_us=to_us(clock.now())).idle


def test_a_fired_message_is_framed_once(
    store: SqlStore, clock: FakeClock, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delivery frames the fired message; the model gets it and the transcript keeps it
    as it is (the external turns of command sessions likewise frame once)."""
    import remindkit.agent.external as external
    import remindkit.agent.loop as loop
    from remindkit.agent.external import ExternalTurns
    from remindkit.protocol import frame_fired

    calls = {"n": 0}

    def counting(fires):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        return frame_fired(fires)

    monkeypatch.setattr(loop, "frame_fired", counting)
    monkeypatch.setattr(external, "frame_fired", counting)
    model = Script("Noted.")
    c = conv(store, clock, settings, model)
    fires = fires_for(store, clock, settings)
    message = frame_fired(fires)  # as delivery makes it
    assert c.run_fired(fires, framed=message).ok
    assert calls["n"] == 0 and message in model.last_user()
    hidden = [m for m in store.transcripts.messages("s1") if m.hidden]
    assert [m.content for m in hidden] == [message]
    turns = ExternalTurns(Reminders(store, clock=clock, settings=settings))
    more = fires_for(store, clock, settings)
    handover = turns.begin("s2", more)
    assert handover is not None
    turns.end("s2", handover, "ok")
    assert calls["n"] == 1
    (kept,) = [m for m in store.transcripts.messages("s2") if m.hidden]
    assert kept.content == handover.framed


class SmallContext(Script):
    """A model with a context of ``tokens`` (counted by the high estimate)."""

    def __init__(self, tokens: int, *replies: str) -> None:
        super().__init__(*replies)
        self.tokens = tokens

    def context_tokens(self) -> int:
        return self.tokens


@pytest.mark.parametrize("context", [100_000, 4096, 3000, 30], ids=["all", "4k", "3k", "none"])
def test_tools_that_do_not_fit_a_small_context_go_least_needed_first(
    store: SqlStore, clock: FakeClock, settings: Settings, context: int
) -> None:
    from remindkit.agent.budget import estimate_tokens
    from remindkit.agent.loop import TOOL_PRIORITY
    from remindkit.protocol.tools import openai_tools

    model = SmallContext(context, "ok")
    conv(store, clock, settings, model).send("hello")
    sent = model.tools[0]
    every = openai_tools()

    def keeping(n: int) -> list[dict]:  # type: ignore[type-arg]
        return [t for t in every if t["function"]["name"] in TOOL_PRIORITY[:n]]

    # the longest prefix of the priority that fits a third of the context, in the list's order
    n = len(sent)
    assert sent == keeping(n)
    if n:
        assert estimate_tokens(json.dumps(sent)) <= context // 3
    if n < len(every):
        assert estimate_tokens(json.dumps(keeping(n + 1))) > context // 3
    if context >= 3000:
        assert sent[0]["function"]["name"] == "schedule_create"
    assert (n == len(every)) == (context == 100_000) and (n == 0) == (context == 30)


def test_turn_lease_renews_its_own_turn_alone(
    store: SqlStore, clock: FakeClock, settings: Settings
) -> None:
    """A conversation's turn lease (the store's TurnLease) renews its own turn and
    nothing else its owner holds (another session's turn under the same owner runs out)."""
    from dataclasses import replace

    from sqlalchemy import select

    from remindkit.store import schema

    settings = replace(settings, lease_s=0.3)  # renewed every 0.1 s (real time)
    now = to_us(clock.now())
    store.sessions.set_session_busy("s2", False, now_us=now)
    assert store.turns.claim_turn("s2", owner="o1", token="other", until_us=now + 1, now_us=now)
    model = Script("slow answer")
    model.gate = threading.Event()
    api = Reminders(store, clock=clock, settings=settings)
    c = Conversation(api, "s1", model, owner="o1")
    t = threading.Thread(target=lambda: c.send("hi"))
    t.start()
    assert model.entered.wait(5)
    clock.advance(10)
    later = to_us(clock.now())
    s = schema.sessions.c

    def until(sid: str) -> int:
        with store.engine.connect() as conn:
            return int(conn.execute(select(s.turn_until).where(s.id == sid)).scalar_one() or 0)

    deadline = threading.Event()
    for _ in range(100):  # renewed within a few renewal periods
        if until("s1") >= later:
            break
        deadline.wait(0.05)
    assert until("s1") == later + 300_000
    assert until("s2") == now + 1  # the owner's other turn is not renewed
    model.gate.set()
    t.join(5)
