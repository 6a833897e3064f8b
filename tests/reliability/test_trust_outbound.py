"""Outbound requests, attacked: an imported webhook session aimed at a loopback
receiver, names that resolve to loopback, private and link-local addresses (and a
name server that answers differently the second time), receivers that drip their
answer a byte at a time beside a session that must still be served on time, and a
command session whose spawn fails for want of descriptors. Real engine processes,
real sockets on loopback; only the name server is told what to answer."""

from __future__ import annotations

import base64
import json
import os
import resource
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from remindkit.clock import SystemClock, format_utc
from remindkit.models import Session
from remindkit.reminders import Reminders
from remindkit.sessions.hosts import HostAllowlist
from remindkit.sessions.transport import BoundedTransport, deadline
from remindkit.settings import Settings
from remindkit.store import open_store
from tests.processes.conftest import Serve, wait_for

from .attacks import record
from .test_trust_runtime import cli

pytestmark = pytest.mark.reliability
ROOT = Path(__file__).resolve().parents[2]
SECRET = "whsec_" + base64.b64encode(b"thirty-two bytes of a secret key").decode()


class Receiver:
    """A webhook receiver on loopback that counts what reaches it."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.got: list[dict[str, Any]] = []
        got = self.got

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                got.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, host: str = "127.0.0.1", path: str = "/hook") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Dripper:
    """Takes the request, then sends its answer's status line one byte every
    ``every`` seconds: it never stops, so only the client can end the exchange.
    Records for each connection when it began and when the client closed it."""

    def __init__(self, every: float = 1.0) -> None:
        self.every = every
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.spans: list[list[float]] = []  # [opened, closed or 0]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            span = [time.monotonic(), 0.0]
            self.spans.append(span)
            threading.Thread(target=self._drip, args=(conn, span), daemon=True).start()

    def _drip(self, conn: socket.socket, span: list[float]) -> None:
        line = b"HTTP/1.1 200 OK" * 1000
        with conn:
            conn.settimeout(10)
            got = b""
            try:  # the whole request: its head, then the body its length names
                while b"\r\n\r\n" not in got:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                head, _, body = got.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(h.split(b":", 1)[1])
                        for h in head.split(b"\r\n")
                        if h.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(body) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    body += chunk
            except OSError:
                pass
            conn.setblocking(False)
            for i in range(len(line)):
                if self._stop.wait(self.every):
                    return
                try:
                    if conn.recv(1) == b"":
                        break  # the client closed its side
                except BlockingIOError:
                    pass
                except OSError:
                    break
                try:
                    conn.send(line[i : i + 1])
                except BlockingIOError:
                    pass
                except OSError:
                    break
        span[1] = time.monotonic()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


def store_env(tmp_path: Path, **more: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("REMINDKIT_") and k != "XDG_RUNTIME_DIR"
    }
    env.update(
        REMINDKIT_HOME=str(tmp_path / "home"),
        REMINDKIT_TZ="UTC",
        REMINDKIT_DB=f"sqlite:///{tmp_path / 'store.db'}",
    )
    env.update(more)
    return env


def export_lines(
    config: dict[str, Any], due_in_s: float = 1.0, *, sid: str = "hook", adapter: str = "webhook"
) -> list[str]:
    now = SystemClock().now()
    due = format_utc(now + timedelta(seconds=due_in_s))
    return [
        json.dumps(
            {
                "type": "session",
                "id": sid,
                "adapter": adapter,
                "config": config,
                "created_at": format_utc(now),
            }
        ),
        json.dumps(
            {
                "type": "reminder",
                "id": "rem_webhook0001",
                "session": sid,
                "text": "the fired turn, with the conversation in it",
                "schedule": {"v": 1, "kind": "at", "tz": "UTC", "first_at": due, "repeat": 1},
                "state": "active",
                "next_fire_at": due,
                "created_at": format_utc(now),
            }
        ),
    ]


def history(env: dict[str, str], rid: str) -> list[Any]:
    store = open_store(env["REMINDKIT_DB"])
    try:
        return Reminders(store).history(rid)
    finally:
        store.close()


def serve(env: dict[str, str], tmp_path: Path, name: str = "e", **more: str) -> Serve:
    engine = Serve(env["REMINDKIT_DB"], tmp_path, {**env, **more}, name=name)
    engine.wait_ready(60)
    return engine


def untrusted_import(
    env: dict[str, str], tmp_path: Path, lines: list[str], sid: str, **engine_env: str
) -> tuple[str, dict[str, Any]]:
    """Import ``lines`` (a session ``sid`` and its due reminder) without
    --trust-sessions, then run an engine until the reminder's fire waits on the disabled
    session: what the import reported, and the session's config as stored."""
    file = tmp_path / "shared.jsonl"
    file.write_text("\n".join(lines) + "\n")
    done = cli(env, "import", str(file), "--json")
    assert done.returncode == 0, done.stderr
    engine = serve(env, tmp_path, **engine_env)
    try:
        waits = wait_for(
            lambda: [o for o in history(env, "rem_webhook0001") if o.state == "waiting"], 60
        )
        assert waits and "disabled" in (waits[0].error or ""), waits
        listed = json.loads(cli(env, "session", "ls", "--json").stdout)
        [session] = [s for s in listed if s["id"] == sid]
    finally:
        engine.stop()
    return done.stdout, session["config"]


def test_an_untrusted_import_of_a_webhook_session_sends_nothing(
    tmp_path: Path, receiver: Receiver
) -> None:
    env = store_env(tmp_path)
    lines = export_lines({"url": receiver.url(), "secret_env": "AWS_SECRET_ACCESS_KEY"})
    # an engine that would sign with that variable and may reach loopback: only the
    # import's own check stands between the file and a request
    report, config = untrusted_import(
        env,
        tmp_path,
        lines,
        "hook",
        AWS_SECRET_ACCESS_KEY=SECRET,
        REMINDKIT_WEBHOOK_SECRET_ENVS="AWS_SECRET_ACCESS_KEY",
        REMINDKIT_WEBHOOK_HOSTS="127.0.0.1",
    )
    assert "url" in report and "secret_env" in report  # the import says what it left out
    assert "url" not in config and "secret_env" not in config
    assert receiver.got == []
    record(
        "`import` of a webhook session aimed at a loopback receiver, `secret_env=AWS_SECRET_ACCESS_KEY`",
        "the engine POSTed the fired turn there, signed with that key, and carried out the reply's tags",
        "`url` and `secret_env` left out, session disabled; no request",
    )


def test_an_untrusted_import_of_a_telegram_thread_sends_nothing(tmp_path: Path) -> None:
    """A shared file's Telegram thread session names the chat its replies go to (its
    ``route``), beside an agent with nothing else sensitive in it: imported without
    --trust-sessions, the route is left out and the session disabled, so a fire runs no
    turn and queues no message for that chat."""
    env = store_env(tmp_path)
    route = {"bot": "attackers_bot", "chat": 4242, "thread": None}
    config = {"agent": "openai", "model": "any", "route": route}
    lines = export_lines(config, sid="tg:4242", adapter="telegram")
    report, stored = untrusted_import(env, tmp_path, lines, "tg:4242")
    assert "route" in report  # the import says what it left out
    assert "route" not in stored and stored["model"] == "any"
    store = open_store(env["REMINDKIT_DB"])
    try:
        with store.engine.connect() as conn:
            queued = conn.exec_driver_sql("SELECT COUNT(*) FROM outbox").scalar()
    finally:
        store.close()
    assert queued == 0
    record(
        "`import` of a Telegram thread session whose `route` names another chat",
        "`route` kept (only the agent's own fields were left out): the thread's fired turns "
        "were answered into the chat the file named",
        "`route` left out, session disabled; no turn run, nothing queued for that chat",
    )


def test_the_engine_aims_webhooks_itself(tmp_path: Path, receiver: Receiver) -> None:
    """A definition the local user trusts still goes only where the engine allows."""
    env = store_env(tmp_path)
    file = tmp_path / "trusted.jsonl"
    file.write_text(
        "\n".join(export_lines({"url": receiver.url(), "secret_env": "AWS_SECRET_ACCESS_KEY"}))
        + "\n"
    )
    refused = cli(env, "import", str(file), "--trust-sessions", "--json")
    assert refused.returncode == 1 and "secret_env_not_allowed" in refused.stdout, refused.stdout
    file.write_text("\n".join(export_lines({"url": receiver.url()}, due_in_s=0)) + "\n")
    assert cli(env, "import", str(file), "--trust-sessions").returncode == 0
    engine = serve(env, tmp_path, REMINDKIT_WEBHOOK_SECRET=SECRET)  # the default list
    try:
        waits = wait_for(
            lambda: [o for o in history(env, "rem_webhook0001") if o.state == "waiting"], 60
        )
        assert "loopback" in (waits[0].error or "") and receiver.got == [], waits
    finally:
        engine.stop()
    # the same row, an engine that lists loopback: delivered (so the check above can fail)
    engine = serve(
        env,
        tmp_path,
        "allowing",
        REMINDKIT_WEBHOOK_SECRET=SECRET,
        REMINDKIT_WEBHOOK_HOSTS="127.0.0.1",
    )
    try:
        assert wait_for(
            lambda: [o for o in history(env, "rem_webhook0001") if o.state == "delivered"], 60
        )
        assert len(receiver.got) == 1
    finally:
        engine.stop()
    record(
        "a trusted webhook session at 127.0.0.1, or naming `AWS_SECRET_ACCESS_KEY`",
        "posted, signed with that key",
        "`secret_env_not_allowed`; the fire waits until the engine's `REMINDKIT_WEBHOOK_HOSTS` lists the address",
    )


class NameServer:
    """``getaddrinfo`` for the test's names: what the test says, one answer per call in turn."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, host: str, port: int, *args: Any) -> list[tuple[Any, ...]]:
        if host not in self.answers:
            return socket.getaddrinfo(host, port, *args)
        self.asked.append(host)
        turn = self.answers[host]
        addr = turn[min(len(self.asked) - 1, len(turn) - 1)]
        if ":" in addr:
            return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (addr, port, 0, 0))]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (addr, port))]


def post(url: str, allow: HostAllowlist, names: NameServer | None = None) -> httpx.Response:
    transport = BoundedTransport(allow=allow, resolver=names or socket.getaddrinfo)
    with deadline(10), httpx.Client(transport=transport, timeout=10) as client:
        return client.post(url, content=b"{}")


ADDRESSES = [
    ("loopback", "127.0.0.1"),
    ("loopback, another", "127.5.6.7"),
    ("private", "10.1.2.3"),
    ("private, 192.168", "192.168.1.1"),
    ("link-local metadata", "169.254.169.254"),
    ("IPv6 loopback", "::1"),
    ("IPv4-mapped loopback", "::ffff:127.0.0.1"),
    ("IPv4-mapped metadata", "::ffff:169.254.169.254"),
    ("NAT64 of loopback", "64:ff9b::7f00:1"),
    ("IPv6 link-local", "fe80::1"),
    ("IPv6 unique local", "fd00::1"),
    ("unspecified", "0.0.0.0"),
    ("shared (CGNAT)", "100.64.0.1"),
]


@pytest.mark.parametrize(("kind", "addr"), ADDRESSES, ids=[a[0] for a in ADDRESSES])
def test_a_name_that_resolves_to_an_internal_address_is_refused(
    receiver: Receiver, kind: str, addr: str
) -> None:
    names = NameServer({"hooks.example.com": [addr]})
    with pytest.raises(httpx.ConnectError) as refused:
        post(receiver.url("hooks.example.com"), HostAllowlist(), names)
    assert "refused" in str(refused.value) and "REMINDKIT_WEBHOOK_HOSTS" in str(refused.value)
    assert receiver.got == [] and names.asked == ["hooks.example.com"]
    if kind == ADDRESSES[0][0]:
        # listed as a network, the same address is reached: the refusal above can fail
        assert post(receiver.url("hooks.example.com"), HostAllowlist.parse("127.0.0.1"), names)
        assert len(receiver.got) == 1


def test_names_the_real_resolver_maps_to_loopback_are_refused(receiver: Receiver) -> None:
    for host in ("localhost", "127.0.0.1", "[::ffff:127.0.0.1]"):
        with pytest.raises(httpx.ConnectError, match="refused"):
            post(receiver.url(host), HostAllowlist())
    only = HostAllowlist.parse("hooks.example.com")
    with pytest.raises(httpx.ConnectError, match="not in REMINDKIT_WEBHOOK_HOSTS"):
        post(receiver.url("localhost"), only)
    assert receiver.got == []
    record(
        "a webhook URL whose name resolves to 127.0.0.1, 10/8, 169.254.169.254, ::1, ::ffff:127.0.0.1, NAT64 …",
        "posted to the internal address",
        "refused after resolution (13 kinds), unless `REMINDKIT_WEBHOOK_HOSTS` lists the network",
    )


def test_the_connection_goes_to_the_address_that_was_checked() -> None:
    """A name server that answers an allowed address first and loopback after (DNS
    rebinding): the name is resolved once, and the request reaches the address that
    was checked, never the second answer."""
    allowed = Receiver("127.0.0.2")
    trap = Receiver("127.0.0.1", allowed.port)
    try:
        names = NameServer({"rebind.example.com": ["127.0.0.2", "127.0.0.1"]})
        resp = post(allowed.url("rebind.example.com"), HostAllowlist.parse("127.0.0.2"), names)
        assert resp.status_code == 200
        assert len(allowed.got) == 1 and trap.got == [] and names.asked == ["rebind.example.com"]
        assert allowed.got[0]["headers"]["Host"] == f"rebind.example.com:{allowed.port}"
    finally:
        allowed.close()
        trap.close()
    record(
        "a name server that answers an allowed address, then 127.0.0.1 (rebinding)",
        "no check; a check before the request would resolve again",
        "resolved once; the connection goes to the address checked",
    )


def _most_at_once(spans: list[list[float]]) -> int:
    """The most of these [opened, closed] exchanges that were open at one time."""
    edges = sorted([(s[0], 1) for s in spans] + [(s[1], -1) for s in spans])
    most = now = 0
    for _at, step in edges:
        now += step
        most = max(most, now)
    return most


def test_drip_fed_receivers_are_cut_at_the_deadline_and_others_are_served(
    tmp_path: Path, receiver: Receiver
) -> None:
    """As many dripping receivers' sessions as the engine has turn workers, beside a
    normal session: the receivers' peer holds its share of the workers (half) until the
    deadline, its other turns wait for that share, and the normal fire is delivered on
    time (well within the receivers' deadline, counted from its own due time)."""
    timeout = 8.0
    dripper = Dripper(every=1.0)
    env = store_env(tmp_path)
    settings = Settings.from_env(env={}, home=tmp_path / "home", tz="UTC")
    store = open_store(env["REMINDKIT_DB"], settings=settings)
    api = Reminders(store, settings=settings)
    try:
        for i in range(8):  # as many as an engine has turn workers
            store.sessions.put_session(
                Session(f"slow{i}", adapter="webhook", config={"url": dripper.url}), now_us=0
            )
        store.sessions.put_session(
            Session("fine", adapter="webhook", config={"url": receiver.url()}), now_us=0
        )
        engine = serve(
            env,
            tmp_path,
            REMINDKIT_WEBHOOK_SECRET=SECRET,
            REMINDKIT_WEBHOOK_HOSTS="127.0.0.1",
            REMINDKIT_WEBHOOK_TIMEOUT=str(timeout),
        )
        try:
            due = SystemClock().now() + timedelta(seconds=2)
            for i in range(8):
                api.add("slow", session=f"slow{i}", at=due)
            fine = api.add("fine", session="fine", at=due + timedelta(milliseconds=500)).reminder
            done = wait_for(lambda: [o for o in api.history(fine.id) if o.state == "delivered"], 60)
            assert done, "the other session's fire was not delivered within a minute"
            assert done[0].delivered_at is not None
            late = (done[0].delivered_at - done[0].due_at).total_seconds()
            # on time: a normal webhook turn takes milliseconds; 2 s leaves room for a busy
            # machine and is far below the 8 s the dripping receivers hold their workers
            assert late < 2.0, f"delivered {late:.1f} s after due"
            assert len(receiver.got) == 1
            # every dripping exchange was ended by the engine, about at its deadline,
            # and no more than half the workers were ever held by them at once
            assert wait_for(
                lambda: len(dripper.spans) >= 8 and all(s[1] for s in dripper.spans[:8]), 60
            ), dripper.spans
            held = [s[1] - s[0] for s in dripper.spans[:8]]
            assert max(held) < timeout + 3, held
            at_once = _most_at_once(dripper.spans[:8])
            assert at_once == 4, dripper.spans
        finally:
            engine.stop()
    finally:
        dripper.close()
        store.close()
    record(
        "8 webhook receivers that send their status line a byte a second, beside a normal session",
        "each held a turn worker for ever; the other session's fire stayed claimed",
        f"each cut at its deadline (`REMINDKIT_WEBHOOK_TIMEOUT`; held {max(held):.1f} s at most); "
        f"their peer held {at_once} of the 8 turn workers at once; the other delivered "
        f"{late:.2f} s after due",
    )


def _free_below(pid: int, limit: int) -> int:
    fds = [int(n) for n in os.listdir(f"/proc/{pid}/fd")]
    return limit - sum(1 for fd in fds if fd < limit)


def test_a_spawn_short_of_descriptors_is_retried_not_failed(tmp_path: Path) -> None:
    """The engine's RLIMIT_NOFILE lowered so that no command can start (its pipes
    cannot be made: EMFILE): the fire waits; raised again, it is delivered."""
    marker = tmp_path / "ran"
    env = store_env(tmp_path)
    settings = Settings.from_env(env={}, home=tmp_path / "home", tz="UTC")
    store = open_store(env["REMINDKIT_DB"], settings=settings)
    api = Reminders(store, settings=settings)
    try:
        script = f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ok')"
        store.sessions.put_session(
            Session("agent", adapter="command", config={"argv": [sys.executable, "-c", script]}),
            now_us=0,
        )
        engine = serve(env, tmp_path)
        try:
            soft, hard = resource.prlimit(engine.pid, resource.RLIMIT_NOFILE)
            limit = 3
            while _free_below(engine.pid, limit) < 2:
                limit += 1
            resource.prlimit(engine.pid, resource.RLIMIT_NOFILE, (limit, hard))
            rem = api.add("start a command", session="agent", in_="1s").reminder
            waits = wait_for(
                lambda: [o for o in api.history(rem.id) if o.state in ("waiting", "failed")], 60
            )
            assert waits[0].state == "waiting" and "EMFILE" in (waits[0].error or ""), waits
            assert api.get(rem.id).state == "active" and not marker.exists()
            resource.prlimit(engine.pid, resource.RLIMIT_NOFILE, (soft, hard))
            assert wait_for(
                lambda: [o for o in api.history(rem.id) if o.state == "delivered"], 90
            ), engine.log.read_text()[-2000:]
            assert marker.read_text() == "ok"
            sessions = {s.id: s for s in store.sessions.list_sessions()}
            assert sessions["agent"].failures == 0 and set(sessions) == {"agent"}
        finally:
            if engine.proc.poll() is None:
                resource.prlimit(engine.pid, resource.RLIMIT_NOFILE, (soft, hard))
            engine.stop()
    finally:
        store.close()
    record(
        "an engine out of descriptors (EMFILE) when a command's fire comes due",
        "the fire recorded `failed`, the session's failure; a one-shot lost",
        "the fire waits (`EMFILE` in its reason) and is delivered once a command can start",
    )


def test_a_bot_api_that_drips_its_answer_is_cut_at_the_deadline() -> None:
    """The Telegram bot's requests: each read is answered within its timeout (a byte
    every 0.5 s), yet the call ends at its deadline, the sum of its timeouts."""
    pytest.importorskip("telegram")
    import asyncio

    from telegram.error import TimedOut

    from remindkit.channels.telegram.bot import DEADLINE_SLACK_S, BoundedRequest

    dripper = Dripper(every=0.5)
    request = BoundedRequest(
        read_timeout=1.0, write_timeout=1.0, connect_timeout=1.0, pool_timeout=1.0
    )

    async def call() -> None:
        await request.initialize()
        try:
            await request.do_request(dripper.url, "POST")
        finally:
            await request.shutdown()

    started = time.monotonic()
    try:
        with pytest.raises(TimedOut):
            asyncio.run(asyncio.wait_for(call(), 30))  # 30 s: the call on its own never ends
    finally:
        dripper.close()
    took = time.monotonic() - started
    assert took < 4 + DEADLINE_SLACK_S + 2, took
    record(
        "a Bot API endpoint (or a proxy) that sends its answer a byte every 0.5 s",
        "each read within its timeout: the call never ended",
        f"`TimedOut` at the sum of the call's timeouts ({took:.1f} s)",
    )


def test_a_model_call_goes_through_the_environments_proxy_under_its_deadline(
    monkeypatch: pytest.MonkeyPatch, receiver: Receiver
) -> None:
    """Model servers (no host list) keep working behind an HTTP proxy the environment
    names, and the deadline holds for the proxy too (one that drips is cut)."""
    import http.client
    from urllib.parse import urlsplit

    from remindkit.agent.model import ModelError
    from remindkit.sessions.bounded_http import bounded_request

    relayed: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            relayed.append(self.path)
            target = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            conn = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            conn.request("POST", target.path, body, {"content-type": "application/json"})
            got = conn.getresponse()
            data = got.read()
            self.send_response(got.status)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    dripper = Dripper(every=0.5)
    try:
        for name in ("no_proxy", "NO_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        answer = bounded_request(
            "POST", receiver.url(), name="model", timeout=10, max_bytes=1000, json={}
        )
        assert answer.status == 200 and relayed == [receiver.url()] and len(receiver.got) == 1
        monkeypatch.setenv("HTTP_PROXY", dripper.url.rsplit("/", 1)[0])
        started = time.monotonic()
        with pytest.raises(ModelError) as cut:
            bounded_request(
                "POST", receiver.url(), name="model", timeout=2, max_bytes=1000, json={}
            )
        assert cut.value.code == "model_unreachable" and time.monotonic() - started < 2 + 2
    finally:
        proxy.shutdown()
        proxy.server_close()
        dripper.close()
