"""A person's message to a session over HTTP (``POST …/messages``), against a real
``remindkit api`` and a loopback model server that streams: the reply comes in
pieces as the model writes them, its tags are carried out through the reminders
API, the session is busy during the turn (a fire due meanwhile comes after it, as
its own turn), and what cannot chat is refused with a stable code."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from remindkit.client import Client
from remindkit.errors import Conflict, Forbidden, NotFound
from remindkit.models import CHAT, FIRED_TURN
from remindkit.settings import Settings
from remindkit.store import open_store

from ..processes.openai_server import ScriptedOpenAI, last_user, text
from .conftest import cli, wait_for

pytestmark = [pytest.mark.api, pytest.mark.processes]

TAG = (
    '<schedule label="tea" delay="2s" alarm="true" announce="Tea time">the tea is ready</schedule>'
)


def add_openai(name: str, model: ScriptedOpenAI, db: str, home) -> None:  # type: ignore[no-untyped-def]
    done = cli(
        "session", "add", name, "--openai", "--base-url", model.base_url, "--model", "m",
        db=db, home=home,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def events_of(resp: httpx.Response) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    kind = ""
    for line in resp.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            out.append((kind, json.loads(line[6:])))
    return out


def test_a_message_streams_its_reply_and_carries_out_its_tags(api_server, sqlite_url, tmp_path):
    def respond(body):  # type: ignore[no-untyped-def]
        said = last_user(body)
        if "<schedule-fired" in said:
            return text("Your tea is ready now.")
        return text(f"Sure, I will tell you when the tea is ready. {TAG} Anything else?")

    with ScriptedOpenAI(respond) as model:
        model.piece_delay = 0.05
        add_openai("web", model, sqlite_url, tmp_path)
        srv = api_server(sqlite_url)
        store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
        url = f"{srv.base_url}/v1/projects/default/sessions/web/messages"
        try:
            with httpx.Client(headers=srv.headers, timeout=60) as http, http.stream(
                "POST", url, json={"text": "remind me about the tea"},
                headers={"Accept": "text/event-stream"},
            ) as resp:  # fmt: skip
                assert resp.status_code == 200, resp.read()
                assert resp.headers["content-type"].startswith("text/event-stream")
                got = events_of(resp)
            kinds = [k for k, _ in got]
            assert kinds[0] == "started" and kinds[-1] == "reply", kinds
            pieces = [d for k, d in got if k == "text"]
            assert len(pieces) >= 5, pieces  # streamed, not in one piece
            shown = ""
            for p in pieces:
                shown = shown + p["append"] if "append" in p else p["replace"]
            reply = got[-1][1]
            assert reply["ok"] and reply["text"] == shown, (reply, shown)
            assert "<schedule" not in shown and "Tea time" not in shown, shown
            assert shown.startswith("Sure, I will tell you") and shown.endswith("Anything else?")
            # the request asked the model to stream
            assert model.requests[0]["stream"] is True
            (tag,) = reply["tags"]
            assert tag["ok"] and tag["label"] == "tea"
            rem = store.reminders.get_reminder(tag["reminder"])
            assert rem.session == "web" and rem.alarm and rem.announce == "Tea time"
            # the fire wakes the agent: its fired turn is in the transcript after the typed one
            assert wait_for(
                lambda: [m for m in store.transcripts.messages("web") if m.kind == FIRED_TURN],
                30,
            )
            assert wait_for(
                lambda: store.transcripts.messages("web")[-1].content == "Your tea is ready now.",
                30,
            )
            # JSON without a stream, through the SDK
            with Client(srv.base_url) as client:
                again = client.session("default", "web").send("and one more")
                assert again["ok"] and again["text"].startswith("Sure"), again
                seen: list[str] = []
                streamed = client.session("default", "web").send("stream it", on_text=seen.append)
                assert len(seen) >= 5 and seen[-1] == streamed["text"], (seen, streamed)
                assert all(b.startswith(a) for a, b in zip(seen, seen[1:], strict=False)), seen
        finally:
            store.close()


def test_a_fire_due_during_the_persons_turn_comes_after_it(api_server, sqlite_url, tmp_path):
    """The turn holds the session: the reminder due 1 s into a 4 s reply is alerted
    on time but its fired turn starts only after the reply has been written."""

    def respond(body):  # type: ignore[no-untyped-def]
        if "<schedule-fired" in last_user(body):
            return text("That was the reminder.")
        return text("x" * 160)  # 40 pieces, 0.1 s apart

    with ScriptedOpenAI(respond) as model:
        model.piece_delay = 0.1
        add_openai("busy", model, sqlite_url, tmp_path)
        srv = api_server(sqlite_url)
        store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
        try:
            with Client(srv.base_url) as client:
                sess = client.session("default", "busy")
                sess.reminders.create("stand up", name="standup", in_="1s")
                first = time.monotonic()
                reply = sess.send("write a long reply", on_text=lambda _t: None)
                assert reply["ok"], reply
                assert time.monotonic() - first > 1.5  # the reminder came due meanwhile
                assert wait_for(lambda: len(model.requests) >= 2, 30), model.requests
                fired = model.requests[1]
                assert "<schedule-fired" in last_user(fired) and "standup" in last_user(fired)
                # the fired turn's request came after the typed turn's stream had ended,
                # with the typed turn's reply in its history
                assert any(m.get("content") == "x" * 160 for m in fired["messages"])
                assert wait_for(
                    lambda: (
                        [o.state for o in store.reminders.history(session="busy", limit=5)]
                        == ["delivered"]
                    ),
                    30,
                )
                kinds = [m.kind for m in store.transcripts.messages("busy") if m.role == "user"]
                assert kinds == [CHAT, FIRED_TURN], kinds
        finally:
            store.close()


def test_what_cannot_chat_is_refused(api_server, sqlite_url, tmp_path):
    with ScriptedOpenAI(lambda body: text("hi")) as model:
        add_openai("web", model, sqlite_url, tmp_path)
        assert cli("session", "add", "py", "--python", db=sqlite_url, home=tmp_path).returncode == 0
        made = cli(
            "token", "create", "--project", "default", "--session", "web", "--read-only",
            db=sqlite_url, home=tmp_path,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        token = (
            made.stdout.split()[-1]
            if "rk_" not in made.stdout
            else next(w for w in made.stdout.split() if w.startswith("rk_"))
        )
        srv = api_server(sqlite_url)
        with Client(srv.base_url) as client:
            with pytest.raises(NotFound) as nf:
                client.session("default", "nobody").send("hello")
            assert nf.value.code == "session_not_found"
            with pytest.raises(Conflict) as no:
                client.session("default", "py").send("hello")
            assert no.value.code == "no_agent" and "session add py" in no.value.message
        with Client(srv.base_url, token=token) as reader:
            with pytest.raises(Forbidden) as ro:
                reader.session("default", "web").send("hello")
            assert ro.value.code == "read_only"
        with httpx.Client(headers=srv.headers, timeout=30) as http:
            url = f"{srv.base_url}/v1/projects/default/sessions/web/messages"
            for body in ({}, {"text": ""}, {"text": 5}, {"text": "a", "extra": 1}):
                resp = http.post(url, json=body)
                assert resp.status_code == 400, (body, resp.text)
                assert resp.json()["error"]["code"] == "invalid_argument"
        assert model.requests == []  # nothing reached the model


def test_a_message_during_a_fired_turn_waits_for_it(api_server, sqlite_url, tmp_path):
    """The other direction of busy/idle: a message the person sends while a fired turn
    runs waits for that turn (a ``waiting`` event first), then has the session; the
    two turns are not interleaved (the person's request reaches the model only after
    the fired turn's answer), and the transcript has them one after the other."""
    fired_done: list[float] = []
    typed_at: list[float] = []

    def respond(body):  # type: ignore[no-untyped-def]
        if "<schedule-fired" in last_user(body):
            time.sleep(3)  # the fired turn takes a while
            fired_done.append(time.monotonic())
            return text("That was the reminder.")
        typed_at.append(time.monotonic())
        return text("And this is my answer to you.")

    with ScriptedOpenAI(respond) as model:
        add_openai("web", model, sqlite_url, tmp_path)
        srv = api_server(sqlite_url)
        store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
        try:
            with Client(srv.base_url) as client:
                client.session("default", "web").reminders.create("stretch", name="s", in_="1s")
            assert wait_for(
                lambda: any("<schedule-fired" in last_user(r) for r in model.requests), 30
            )
            url = f"{srv.base_url}/v1/projects/default/sessions/web/messages"
            with httpx.Client(headers=srv.headers, timeout=60) as http, http.stream(
                "POST", url, json={"text": "are you there?"},
                headers={"Accept": "text/event-stream"},
            ) as resp:  # fmt: skip
                assert resp.status_code == 200, resp.read()
                got = events_of(resp)
            kinds = [k for k, _ in got]
            assert kinds[0] == "waiting" and kinds[1] == "started" and kinds[-1] == "reply", kinds
            assert "another turn" in got[0][1]["reason"]
            assert got[-1][1]["ok"] and got[-1][1]["text"] == "And this is my answer to you."
            assert len(fired_done) == 1 and len(typed_at) == 1
            assert typed_at[0] >= fired_done[0]  # the model saw the person only after
            users = [
                (m.kind, m.content)
                for m in store.transcripts.messages("web")
                if m.role in ("user", "assistant")
            ]
            assert [k for k, _ in users] == [FIRED_TURN, CHAT, CHAT, CHAT], users
            assert users[1][1] == "That was the reminder." and users[2][1] == "are you there?"
        finally:
            store.close()


def test_busy_and_full_are_refused_as_the_code_says(sqlite_url, tmp_path):
    """``409 session_busy``: a message to a session busy past the wait (``chat_wait_s``);
    ``409 too_many_turns``: one past the server's typed turns (``chat_turns``), at once.
    A real server on loopback (uvicorn in this process, its bounds made small)."""
    import threading

    import uvicorn

    from remindkit.api.app import create_app
    from remindkit.credential import LocalCredential
    from remindkit.reminders import Reminders

    from .conftest import free_port

    release = threading.Event()

    def respond(body):  # type: ignore[no-untyped-def]
        if "hold" in last_user(body):
            release.wait(30)  # the first turn holds its session until the test lets it go
        return text("done")

    settings = Settings.from_env(env={}, home=tmp_path / "h")
    store = open_store(sqlite_url, settings=settings)
    with ScriptedOpenAI(respond) as model:
        for name in ("a", "b"):
            add_openai(name, model, sqlite_url, tmp_path)
        credential = LocalCredential(tmp_path / "h")
        app = create_app(
            Reminders(store, settings=settings), credential=credential, chat_wait_s=1.5,
            chat_turns=2,
        )  # fmt: skip
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        base = f"http://127.0.0.1:{port}/v1/projects/default/sessions"
        headers = {"Authorization": f"Bearer {credential.value}"}
        try:
            assert wait_for(lambda: server.started, 30)
            with httpx.Client(headers=headers, timeout=60) as http:
                first = threading.Thread(
                    target=lambda: http.post(f"{base}/a/messages", json={"text": "hold on"})
                )
                first.start()
                assert wait_for(lambda: len(model.requests) == 1, 30)  # the first turn runs
                with http.stream(
                    "POST", f"{base}/a/messages", json={"text": "me too"},
                    headers={"Accept": "text/event-stream"},
                ) as resp:  # fmt: skip
                    lines = resp.iter_lines()
                    assert next(lines) == "event: waiting"  # the second waits for the first
                    # ... meanwhile two turns run or wait: a third is refused at once
                    full = http.post(f"{base}/b/messages", json={"text": "hello"})
                    assert full.status_code == 409, full.text
                    assert full.json()["error"]["code"] == "too_many_turns"
                    rest = list(lines)
                (end,) = [
                    json.loads(x[6:]) for x in rest if x.startswith("data: ") and "status" in x
                ]
                assert end["status"] == 409 and end["error"]["code"] == "session_busy", rest
                busy = http.post(f"{base}/a/messages", json={"text": "and as JSON"})
                assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy"
                release.set()
                first.join(30)
                again = http.post(f"{base}/b/messages", json={"text": "hello again"})
                assert again.status_code == 200 and again.json()["text"] == "done", again.text
            assert [last_user(r) for r in model.requests] == ["hold on", "hello again"]
        finally:
            release.set()
            server.should_exit = True
            thread.join(10)
            store.close()
