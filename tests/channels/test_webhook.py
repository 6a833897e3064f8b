"""The ``webhook`` adapter against a loopback receiver that verifies every
request with the ``standardwebhooks`` package."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from remindkit.cli.main import main
from remindkit.engine import Engine
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import SqlStore, open_store
from remindkit.store.outbox import Outbox

SECRET = "whsec_" + base64.b64encode(b"a secret of thirty-two bytes!!!!").decode()


class Receiver:
    """Verifies the signature; answers with a reply that sets another reminder."""

    def __init__(self, port: int = 0, reply: str | None = None) -> None:
        self.got: list[tuple[str, dict[str, Any]]] = []
        self.refused: list[str] = []
        self.reply = reply
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["content-length"]))
                try:
                    payload = Webhook(SECRET).verify(body, dict(self.headers))
                except WebhookVerificationError as exc:
                    receiver.refused.append(str(exc))
                    self.send_response(401)
                    self.end_headers()
                    return
                receiver.got.append((self.headers["webhook-id"], payload))
                data = json.dumps({"reply": receiver.reply} if receiver.reply else {}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RK_HOOK_SECRET", SECRET)
    # the engine's own allowlists: this variable may sign, loopback receivers may be reached
    monkeypatch.setenv("REMINDKIT_WEBHOOK_SECRET_ENVS", "RK_HOOK_SECRET")
    monkeypatch.setenv("REMINDKIT_WEBHOOK_HOSTS", "127.0.0.1")


@pytest.fixture
def live(store_url: str, tmp_path: Path, env: None) -> Iterator[tuple[SqlStore, Reminders]]:
    settings = Settings.from_env(
        env={}, home=tmp_path / "home", tz="UTC", lease_s=2.0, wait_cap_s=1.0
    )
    store = open_store(store_url, settings=settings)
    yield store, Reminders(store, settings=settings)
    store.close()


def wait_for(what: Any, timeout: float, message: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {message}")


def history_states(api: Reminders, rid: str) -> list[str]:
    return [o.state for o in api.history(rid)]


def test_a_fire_is_posted_signed_and_its_reply_is_carried_out(live, monkeypatch) -> None:
    store, api = live
    receiver = Receiver(
        reply='Noted. <schedule label="again" delay="1h">check the build</schedule>'
    )
    engine = None
    try:
        store.sessions.put_session(
            Session(
                "hook",
                adapter="webhook",
                config={"url": receiver.url, "secret_env": "RK_HOOK_SECRET"},
            ),
            now_us=0,
        )
        rem = api.add("deploy finished?", session="hook", label="deploy", in_="1s").reminder
        engine = Engine(store, settings=api.settings, can_alert=False).start()
        wait_for(lambda: "delivered" in history_states(api, rem.id), 60, "the delivery")
        [(msg_id, payload)] = receiver.got
        [occ] = api.history(rem.id)
        assert payload["keys"] == [msg_id] and payload["session"] == "hook"
        assert payload["reminders"] == [rem.id] and payload["type"] == "schedule.fired"
        assert "<schedule-fired" in payload["message"] and "deploy finished?" in payload["message"]
        again = [r for r in api.list(session="hook") if r.label == "again"]
        assert len(again) == 1 and again[0].text == "check the build"
        [row] = Outbox(store, "webhook").rows()
        assert row.state == "sent" and row.key == msg_id and row.attempts == 1
        assert occ.state == "delivered"
        assert SECRET not in json.dumps([s.to_dict() for s in store.sessions.list_sessions()])
    finally:
        if engine is not None:
            engine.stop()
        receiver.close()


def test_a_receiver_down_for_a_minute_gets_the_fire_once_it_is_back(live, monkeypatch) -> None:
    store, api = live
    monkeypatch.setenv("REMINDKIT_WEBHOOK_RETRY_WINDOW", "600")
    port = free_port()
    store.sessions.put_session(
        Session(
            "hook",
            adapter="webhook",
            config={"url": f"http://127.0.0.1:{port}/hook", "secret_env": "RK_HOOK_SECRET"},
        ),
        now_us=0,
    )
    rem = api.add("are you back?", session="hook", in_="1s").reminder
    down_until = time.monotonic() + 60
    engine = Engine(store, settings=api.settings, can_alert=False).start()
    receiver = None
    try:
        wait_for(
            lambda: (r := Outbox(store, "webhook").rows()) and r[0].attempts >= 2,
            60,
            "two failed tries",
        )
        assert history_states(api, rem.id)[0] not in (
            "delivered",
            "failed",
        )  # it waits (or is being tried)
        time.sleep(max(0.0, down_until - time.monotonic()))  # the receiver is down for a minute
        receiver = Receiver(port)
        up = time.monotonic()
        wait_for(
            lambda: "delivered" in history_states(api, rem.id),
            240,
            "the delivery after the receiver came back",
        )
        assert len(receiver.got) == 1 and time.monotonic() - up < 240
        [row] = Outbox(store, "webhook").rows()
        assert row.state == "sent" and row.attempts >= 3 and row.last_error
    finally:
        engine.stop()
        if receiver is not None:
            receiver.close()


def test_a_receiver_that_stays_down_is_failed_after_the_window(live, monkeypatch) -> None:
    store, api = live
    monkeypatch.setenv("REMINDKIT_WEBHOOK_RETRY_WINDOW", "4")
    store.sessions.put_session(
        Session(
            "hook",
            adapter="webhook",
            config={"url": f"http://127.0.0.1:{free_port()}/hook", "secret_env": "RK_HOOK_SECRET"},
        ),
        now_us=0,
    )
    rem = api.add("anyone?", session="hook", in_="1s").reminder
    engine = Engine(store, settings=api.settings, can_alert=False).start()
    try:
        wait_for(
            lambda: "failed" in history_states(api, rem.id), 90, "the failure after the window"
        )
        [occ] = api.history(rem.id)
        assert "given up after" in (occ.error or "")
        [row] = Outbox(store, "webhook").rows()
        assert row.state == "failed" and "cannot reach the receiver" in (row.last_error or "")
    finally:
        engine.stop()


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--webhook", "ftp://x"], "invalid_argument"),
        (["--secret-env", "X"], "invalid_argument"),
        (["--webhook", "http://127.0.0.1:1/h", "--secret-env", "NOT A NAME"], "invalid_argument"),
        (["--webhook", "http://127.0.0.1:1/h", "--command", "echo"], "invalid_argument"),
    ],
    ids=["scheme", "secret-alone", "bad-env-name", "two-adapters"],
)
def test_session_add_webhook_refusals(args: list[str], code: str, tmp_path: Path, capsys) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert main(["session", "add", "s", "--db", db, "--json", *args]) == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == code
    assert main(["session", "ls", "--db", db, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_session_add_webhook_stores_the_variable_name_only(tmp_path: Path, capsys, env) -> None:
    db = f"sqlite:///{tmp_path / 's.db'}"
    assert (
        main(
            [
                "session",
                "add",
                "s",
                "--db",
                db,
                "--json",
                "--webhook",
                "http://127.0.0.1:9/h",
                "--secret-env",
                "RK_HOOK_SECRET",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["adapter"] == "webhook" and out["config"] == {
        "url": "http://127.0.0.1:9/h",
        "secret_env": "RK_HOOK_SECRET",
    }


def test_fires_that_pile_up_while_the_receiver_is_down_go_out_together(live, monkeypatch) -> None:
    store, api = live
    monkeypatch.setenv("REMINDKIT_WEBHOOK_RETRY_WINDOW", "600")
    port = free_port()
    store.sessions.put_session(
        Session(
            "hook",
            adapter="webhook",
            config={"url": f"http://127.0.0.1:{port}/hook", "secret_env": "RK_HOOK_SECRET"},
        ),
        now_us=0,
    )
    first = api.add("one", session="hook", in_="1s").reminder
    engine = Engine(store, settings=api.settings, can_alert=False).start()
    receiver = None
    try:
        wait_for(lambda: Outbox(store, "webhook").rows(), 60, "the first try")
        second = api.add("two", session="hook", in_="1s").reminder
        wait_for(lambda: history_states(api, second.id), 60, "the second fire")
        receiver = Receiver(port)
        wait_for(
            lambda: all("delivered" in history_states(api, r.id) for r in (first, second)),
            120,
            "both delivered",
        )
        keys = [k for _id, payload in receiver.got for k in payload["keys"]]
        assert sorted(keys) == sorted(o.key for r in (first, second) for o in api.history(r.id))
        assert all(r.state != "queued" for r in Outbox(store, "webhook").rows())
    finally:
        engine.stop()
        if receiver is not None:
            receiver.close()
