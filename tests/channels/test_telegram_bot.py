"""`remindkit telegram` as a real process against the Bot API stand-in, with a
command agent as every thread's session."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from remindkit.settings import Settings
from remindkit.store import open_store
from remindkit.store.outbox import Outbox

from .botapi_standin import TOKEN, BotAPI

pytestmark = pytest.mark.processes
CHAT = 100


def wait_all_sent(botapi: BotAPI, url: str, n: int) -> None:
    """Wait until ``n`` outbox rows are recorded sent: a kill before that may repeat
    one (the guarantee is at most twice), which a test of something else must avoid."""
    store = open_store(url, settings=Settings.from_env(env={}))
    try:
        botapi.wait_for(
            lambda: [r.state for r in Outbox(store, "telegram").rows()] == ["sent"] * n,
            30,
            "the sent records",
        )
    finally:
        store.close()


def agent_calls(bots, kind: str) -> list[str]:
    return [line for line in Path(bots.agent_log).read_text().splitlines() if f"\t{kind}\t" in line]


def test_a_conversation_with_a_reminder_that_fires_after_a_restart(
    botapi: BotAPI, bots, sqlite_url: str, tmp_path: Path
) -> None:
    bot = bots(sqlite_url)
    botapi.user_says(CHAT, "hello there")
    botapi.wait_for(
        lambda: any("You said: hello there" in t for t in botapi.texts(CHAT)), message="the echo"
    )
    assert (CHAT, "typing") in botapi.actions
    botapi.user_says(CHAT, "remind me in 6s to stretch")
    botapi.wait_for(
        lambda: any("Sure, I will remind you." in t for t in botapi.texts(CHAT)), message="the ack"
    )
    assert all("<schedule" not in t for t in botapi.texts(CHAT)), (
        "tags are stripped from what is sent"
    )
    wait_all_sent(botapi, sqlite_url, 2)
    bot.kill()
    botapi.note("the bot is killed (SIGKILL) and started again")
    typing_before = len(botapi.actions)
    bots(sqlite_url)  # a new process: the route is in the store
    botapi.wait_for(
        lambda: any("Time's up: stretch!" in t for t in botapi.texts(CHAT)),
        message="the fired reply",
    )
    assert len(botapi.actions) > typing_before, "a typing action while the fired turn ran"
    texts = botapi.texts(CHAT)
    assert texts.count("Time's up: stretch!") == 1 and texts[:2] == [
        "You said: hello there",
        "Sure, I will remind you.",
    ]
    assert len(agent_calls(bots, "fired")) == 1
    botapi.user_says(CHAT, "/reminders")
    botapi.wait_for(
        lambda: "No reminders in this thread." in botapi.texts(CHAT), message="the empty list"
    )
    (tmp_path / "transcript.txt").write_text("\n".join(botapi.log) + "\n")
    wait_all_sent(botapi, sqlite_url, len(botapi.texts(CHAT)))
    store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path))
    try:
        sess = store.sessions.get_session(f"tg:{CHAT}")
        assert sess is not None and sess.config["route"] == {
            "bot": 4242,
            "chat": CHAT,
            "thread": None,
        }
        rows = Outbox(store, "telegram").rows()
        assert [r.remote_id for r in rows] == [str(s.message_id) for s in botapi.sent]
        assert (
            TOKEN not in (tmp_path / "bot-0.log").read_text() + (tmp_path / "bot-1.log").read_text()
        )
        dump = "".join(str(r) for r in store.sessions.list_sessions()) + "".join(
            str(r) for r in rows
        )
        assert TOKEN not in dump and TOKEN.split(":")[1] not in dump
    finally:
        store.close()


@pytest.mark.parametrize("point", ["telegram_after_turn", "telegram_before_send"])
def test_killed_between_the_reply_and_the_send_sends_once_after_restart(
    point: str, botapi: BotAPI, bots, sqlite_url: str
) -> None:
    bot = (
        bots(sqlite_url, "--allow", str(CHAT), env={"REMINDKIT_FAILPOINTS": f"{point}=kill"})
        if point == "telegram_after_turn"
        else bots(sqlite_url, "--allow", str(CHAT), env={"REMINDKIT_FAILPOINTS": f"{point}=kill@3"})
    )
    botapi.user_says(CHAT, "hi")
    if point == "telegram_before_send":
        botapi.wait_for(lambda: "You said: hi" in botapi.texts(CHAT), message="first reply")
    botapi.user_says(CHAT, "remind me in 2s to drink")
    if point == "telegram_before_send":
        botapi.wait_for(lambda: any("Sure" in t for t in botapi.texts(CHAT)), message="the ack")
    bot.proc.wait(90)  # the failpoint killed it (after the fired turn, before its reply was sent)
    assert "Time's up" not in " ".join(botapi.texts(CHAT))
    bots(sqlite_url, "--allow", str(CHAT))
    botapi.wait_for(
        lambda: any("Time's up: drink!" in t for t in botapi.texts(CHAT)), message="the fired reply"
    )
    botapi.wait_for(lambda: len(agent_calls(bots, "chat")) >= 2, message="agent calls")
    assert botapi.texts(CHAT).count("Time's up: drink!") == 1
    assert len(agent_calls(bots, "fired")) == 1, (
        "the agent answered once; the reply was not asked for again"
    )


def test_killed_between_the_send_and_its_record_sends_at_most_twice(
    botapi: BotAPI, bots, sqlite_url: str
) -> None:
    bot = bots(sqlite_url, env={"REMINDKIT_FAILPOINTS": "telegram_after_send=kill"})
    botapi.user_says(CHAT, "hi once")
    bot.proc.wait(60)
    assert botapi.texts(CHAT) == ["You said: hi once"]
    bots(sqlite_url)
    botapi.wait_for(lambda: len(botapi.texts(CHAT)) >= 2, message="the re-send after the lease")
    botapi.user_says(CHAT, "and again")
    botapi.wait_for(lambda: "You said: and again" in botapi.texts(CHAT), message="the next reply")
    assert botapi.texts(CHAT) == ["You said: hi once", "You said: hi once", "You said: and again"]
    assert len(agent_calls(bots, "chat")) == 2


def test_rate_limit_is_honoured_and_long_replies_are_split(
    botapi: BotAPI, bots, sqlite_url: str
) -> None:
    bots(sqlite_url)
    botapi.rate_limit.extend([2])
    botapi.user_says(CHAT, "long please")
    botapi.wait_for(lambda: len(botapi.texts(CHAT)) >= 3, message="three pieces")
    first_try, *rest = botapi.send_attempts
    assert rest[0] - first_try >= 1.9, "the 429's retry_after was honoured"
    pieces = botapi.texts(CHAT)
    assert all(len(p) <= 4096 for p in pieces)
    assert "\n".join(pieces).count("line ") == 120 and pieces[0].startswith("line 0000")
    assert [int(m.group(1)) for p in pieces for m in re.finditer(r"line (\d+)", p)] == list(
        range(120)
    )


def test_only_allowed_chats_get_an_agent(
    botapi: BotAPI, bots, sqlite_url: str, tmp_path: Path
) -> None:
    bots(sqlite_url, "--allow", str(CHAT))
    botapi.user_says(999, "let me in")
    botapi.user_says(CHAT, "hi")
    botapi.wait_for(lambda: botapi.texts(CHAT), message="the allowed chat's reply")
    botapi.wait_for(lambda: botapi.confirmed >= 3, message="both updates confirmed")
    assert botapi.texts(999) == []
    botapi.user_says(CHAT, "fail please")  # the agent exits 3: the chat is told, the bot goes on
    botapi.wait_for(
        lambda: any(
            t.startswith("(the agent failed: agent_failed: exit status 3")
            for t in botapi.texts(CHAT)
        ),
        message="the failure notice",
    )
    store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path))
    try:
        assert store.sessions.get_session("tg:999") is None
        assert not any(
            "let me in" in line for line in Path(bots.agent_log).read_text().splitlines()
        )
    finally:
        store.close()


def test_reminders_list_buttons_and_cancel(botapi: BotAPI, bots, sqlite_url: str) -> None:
    bots(sqlite_url)
    botapi.user_says(CHAT, "remind me in 600s to water", thread=None)
    botapi.wait_for(lambda: any("Sure" in t for t in botapi.texts(CHAT)))
    botapi.user_says(CHAT, "remind me in 900s to feed")
    botapi.wait_for(lambda: sum("Sure" in t for t in botapi.texts(CHAT)) == 2)
    botapi.user_says(CHAT, "/reminders")
    listing = botapi.wait_for(
        lambda: [s for s in botapi.sent if s.text.startswith("Reminders in this thread")]
    )[0]
    assert "water: in 9:" in listing.text or "water: in 10:00" in listing.text
    assert "feed: in 1" in listing.text
    buttons = [b for row in listing.markup["inline_keyboard"] for b in row]
    cancel = next(b for b in buttons if b["text"] == "✕ water")
    botapi.press(CHAT, listing.message_id, cancel["callback_data"])
    botapi.wait_for(lambda: botapi.answers, message="the button's answer")
    assert botapi.answers[0][1] == "Cancelled."
    botapi.wait_for(lambda: botapi.edits, message="the refreshed list")
    assert "water" not in botapi.edits[0][2] and "feed" in botapi.edits[0][2]
    botapi.user_says(CHAT, "/cancel feed")
    botapi.wait_for(lambda: "Cancelled 'feed' (1 reminder)." in botapi.texts(CHAT))
    botapi.user_says(CHAT, "/cancel feed")
    botapi.wait_for(lambda: any(t.startswith("not_found:") for t in botapi.texts(CHAT)))
    store = open_store(
        sqlite_url, settings=Settings.from_env(env={}, home=Path(sqlite_url[10:]).parent)
    )
    try:  # the ✕ and /cancel are recorded as Telegram's, not the command line's
        cancels = [e for e in store.events.events_after(0, limit=1000) if e.kind == "cancelled"]
        assert [e.surface for e in cancels] == ["telegram", "telegram"], cancels
    finally:
        store.close()


def test_a_thread_session_expires(botapi: BotAPI, bots, sqlite_url: str, tmp_path: Path) -> None:
    bots(sqlite_url, env={"REMINDKIT_TG_MAX_MESSAGES": "4"})
    botapi.user_says(CHAT, "remind me in 600s to later", thread=None)
    botapi.wait_for(lambda: any("Sure" in t for t in botapi.texts(CHAT)))
    botapi.user_says(CHAT, "second")
    botapi.wait_for(lambda: "You said: second" in botapi.texts(CHAT))
    botapi.user_says(
        CHAT, "third"
    )  # 4 messages: the session has expired; this one starts a new one
    botapi.wait_for(lambda: "You said: third" in botapi.texts(CHAT))
    store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path))
    try:
        old = store.sessions.get_session(f"tg:{CHAT}")
        new = store.sessions.get_session(f"tg:{CHAT}~2")
        assert old is not None and old.state == "deleted"
        assert new is not None and new.state == "active" and new.config["route"]["chat"] == CHAT
        [rem] = store.reminders.find_reminders(session=f"tg:{CHAT}")
        assert (
            rem.state == "cancelled"
            and rem.last_error == f"session tg:{CHAT} expired after 4 messages"
        )
        (gone,) = [e for e in store.events.events_after(0, limit=1000) if e.kind == "cancelled"]
        assert gone.surface == "telegram", gone
    finally:
        store.close()


def test_forum_topics_are_separate_sessions(botapi: BotAPI, bots, sqlite_url: str) -> None:
    bots(sqlite_url, "--allow", "-1001")
    botapi.user_says(-1001, "in topic five", thread=5)
    botapi.user_says(-1001, "in topic six", thread=6)
    botapi.wait_for(lambda: len(botapi.texts(-1001)) == 2)
    by_thread = {s.thread: s.text for s in botapi.sent}
    assert by_thread == {5: "You said: in topic five", 6: "You said: in topic six"}
    sessions = {line.split("\t")[0] for line in agent_calls(bots, "chat")}
    assert sessions == {"tg:-1001:5", "tg:-1001:6"}


@pytest.mark.postgres
def test_two_bot_processes_on_one_postgres_store_send_each_reply_once(
    botapi: BotAPI, bots, pg_schema_url: str
) -> None:
    chats = [100, 101, 102]
    allow = ["--allow", *map(str, chats)]
    first = bots(pg_schema_url, *allow)
    bots(pg_schema_url, *allow)
    for chat in chats:
        botapi.user_says(chat, f"remind me in 5s to t{chat}")
    botapi.wait_for(
        lambda: all(any("Sure" in t for t in botapi.texts(c)) for c in chats), 90, "the acks"
    )
    wait_all_sent(botapi, pg_schema_url, 3)
    first.kill()  # whichever polled, fired or sent: the other one carries on
    botapi.wait_for(
        lambda: all(f"Time's up: t{c}!" in botapi.texts(c) for c in chats), 90, "the fired replies"
    )
    for chat in chats:
        botapi.user_says(chat, f"still there {chat}?")
    botapi.wait_for(
        lambda: all(f"You said: still there {c}?" in botapi.texts(c) for c in chats),
        90,
        "the replies",
    )
    for chat in chats:
        texts = botapi.texts(chat)
        assert len(texts) == 3 and len(set(texts)) == 3, texts
    assert len(agent_calls(bots, "fired")) == 3
    assert len(agent_calls(bots, "chat")) == 6


def test_an_openai_agent_behind_the_bot(botapi: BotAPI, bots, sqlite_url: str) -> None:
    from ..processes.openai_server import ScriptedOpenAI, last_user, text

    def respond(body: dict) -> dict:
        said = last_user(body)
        if "<schedule-fired" in said:
            return text("Stretch time!")
        if "remind" in said:
            return text('OK. <schedule label="stretch" delay="3s">stand up and stretch</schedule>')
        return text("Hi from the model.")

    with ScriptedOpenAI(respond) as model:
        bots(
            sqlite_url,
            "--allow",
            str(CHAT),
            "--openai",
            "--base-url",
            model.base_url,
            "--model",
            "m",
        )
        botapi.user_says(CHAT, "hello")
        botapi.wait_for(
            lambda: "Hi from the model." in botapi.texts(CHAT), message="the model's reply"
        )
        botapi.user_says(CHAT, "remind me to stretch")
        botapi.wait_for(
            lambda: "Stretch time!" in botapi.texts(CHAT), message="the fired turn's reply"
        )
        assert botapi.texts(CHAT) == ["Hi from the model.", "OK.", "Stretch time!"]
        assert len(model.fired_keys()) == 1
        assert any(m["role"] == "system" for m in model.requests[0]["messages"]), (
            "remindkit's system prompt"
        )
