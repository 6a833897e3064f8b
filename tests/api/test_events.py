"""The event stream (`GET /v1/events`): ids from the store's audit trail, resuming
with Last-Event-ID across a SIGKILL and restart, scoped by token, and fires made
by another server's engine on a shared PostgreSQL store."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any

import httpx
import pytest

from remindkit.client import Client
from remindkit.reminders import Reminders
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import cli, free_port, wait_for

pytestmark = [pytest.mark.api, pytest.mark.processes]


class Collector:
    """Reads ``client.events(...)`` on a thread into a list."""

    def __init__(self, client: Client, **kw: Any) -> None:
        self.items: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(client, kw), daemon=True)
        self.thread.start()

    def _run(self, client: Client, kw: dict[str, Any]) -> None:
        try:
            for item in client.events(**kw):
                self.items.append(item)
        except BaseException as exc:  # shown by the test that waits
            self.error = exc

    def kinds(self, reminder_id: str) -> list[str]:
        return [i["kind"] for i in self.items if i["reminder_id"] == reminder_id]


def test_events_in_order_and_resumed_after_a_sigkill_restart(api_server, sqlite_url, tmp_path):
    port = free_port()
    srv = api_server(sqlite_url, port=port)
    client = Client(srv.base_url)
    got = Collector(client, project="default", last_event_id=0)  # from the first event of the store
    rems = client.session("default", "s1").reminders
    first = rems.create("warm up", in_="1h")
    assert wait_for(lambda: got.kinds(first["id"]) == ["created"], 30), (got.items, got.error)
    fired = rems.create("fire me", in_="2s", alarm=True, announce="time to go")
    assert wait_for(lambda: "fired" in got.kinds(fired["id"]), 60), (got.items, got.error)
    fire = next(i for i in got.items if i["reminder_id"] == fired["id"] and i["kind"] == "fired")
    assert fire["reminder"]["alarm"] is True and fire["reminder"]["announce"] == "time to go"
    assert fire["project"] == "default" and fire["session"] == "s1"
    # the session has no delivery adapter: the fire's outcome follows it on the stream
    assert wait_for(lambda: len(got.kinds(fired["id"])) >= 3, 60), got.kinds(fired["id"])
    srv.kill()
    # changes while no server runs, through the in-process API on the same store
    store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
    try:
        api = Reminders(store, surface="cli")
        missed = [api.create(f"while down {i}", session="s1", in_="1h") for i in range(3)]
        api.cancel([missed[0].id])
    finally:
        store.close()
    api_server(sqlite_url, port=port)  # same port: the client reconnects with Last-Event-ID
    assert wait_for(
        lambda: all(got.kinds(m.id) for m in missed) and "cancelled" in got.kinds(missed[0].id), 60
    ), (got.items, got.error)
    ids = [i["id"] for i in got.items]
    assert ids == sorted(ids) and len(ids) == len(set(ids)), (
        ids
    )  # nothing twice, nothing out of order
    assert got.kinds(missed[0].id) == ["created", "cancelled"]
    # a new stream asked to resume from an id gets exactly what follows it, from the store
    start = got.items[0]["id"]
    with (
        httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http,
        http.stream("GET", "/v1/events", headers={"Last-Event-ID": str(start)}) as resp,
    ):
        assert resp.status_code == 200 and resp.headers["content-type"].startswith(
            "text/event-stream"
        )
        seen: list[int] = []
        for line in resp.iter_lines():
            if line.startswith("id:"):
                seen.append(int(line[3:].strip()))
                if seen[-1] == ids[-1]:
                    break
    assert seen == [i for i in ids if i > start]
    client.close()


def test_streams_are_scoped_by_token(api_server, sqlite_url, tmp_path):
    mine = cli(
        "token", "create", "--project", "default", "--session", "s1", db=sqlite_url, home=tmp_path
    )
    token = mine.stdout.split()[0]
    admin = cli("token", "create", "--admin", db=sqlite_url, home=tmp_path).stdout.split()[0]
    srv = api_server(sqlite_url)
    with Client(srv.base_url, token) as c1, Client(srv.base_url, admin) as root:
        got = Collector(c1, last_event_id=0)
        everything = Collector(root, last_event_id=0)
        other = root.session("default", "s2").reminders.create("someone else's", in_="1h")
        own = c1.session("default", "s1").reminders.create("my own", in_="1h")
        assert wait_for(lambda: got.kinds(own["id"]) == ["created"], 30), (got.items, got.error)
        assert wait_for(lambda: everything.kinds(own["id"]) and everything.kinds(other["id"]), 30)
        assert got.kinds(other["id"]) == []
        assert {i["session"] for i in got.items} == {"s1"}
        with httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http:
            for params in ({"project": "default", "session": "s2"}, {"project": "other"}):
                resp = http.get(
                    "/v1/events", params=params, headers={"Authorization": f"Bearer {token}"}
                )
                assert resp.status_code == 403 and resp.json()["error"]["code"] == "forbidden"
            resp = httpx.get(f"{srv.base_url}/v1/events", timeout=30)
            assert resp.status_code == 401
            resp = http.get(
                "/v1/events", headers={"Authorization": f"Bearer {admin}", "Last-Event-ID": "x"}
            )
            assert resp.status_code == 400 and resp.json()["error"]["code"] == "invalid_argument"


@pytest.mark.postgres
def test_a_stream_sees_fires_made_by_another_server_on_a_shared_postgres_store(
    api_server, pg_schema_url
):
    watcher = api_server(pg_schema_url, args=("--no-engine",))
    firer = api_server(pg_schema_url)
    with Client(watcher.base_url) as w, Client(firer.base_url) as f:
        assert w.status()["engine"] is None and f.status()["engine"] is not None
        got = Collector(w, project="default", last_event_id=0)
        warm = w.session("default", "s").reminders.create("warm up", in_="1h")
        assert wait_for(lambda: got.kinds(warm["id"]), 30), (got.items, got.error)
        rem = f.session("default", "s").reminders.create("fired by the other", in_="2s")
        assert wait_for(lambda: "fired" in got.kinds(rem["id"]), 60), (got.items, got.error)
        owners = {e["id"] for e in f.status()["engines"]}
        assert owners == {f.status()["engine"]}  # only the other server has an engine


def test_a_stream_the_client_closes_is_let_go(api_server, sqlite_url):
    """The server keeps no stream its client has left (streams are bounded per
    server, so one left behind would count against the bound for ever)."""
    srv = api_server(sqlite_url)
    client = Client(srv.base_url)
    where = httpx.URL(srv.base_url)
    with client, contextlib.ExitStack() as streams:
        for _ in range(3):
            sock = streams.enter_context(socket.create_connection((where.host, where.port), 30))
            sock.sendall(
                f"GET /v1/events HTTP/1.1\r\nHost: {where.netloc.decode()}\r\n"
                f"Authorization: Bearer {srv.credential}\r\n\r\n".encode()
            )
            assert b" 200 " in sock.recv(4096)
        assert wait_for(lambda: client.status()["streams"] == 3, 30), client.status()
        client.session("default", "s1").reminders.create("seen by the open streams", in_="1h")
        streams.close()
        assert wait_for(lambda: client.status()["streams"] == 0, 30), client.status()


@pytest.mark.postgres
def test_the_feed_listens_again_when_its_postgres_listener_is_dropped(api_server, pg_schema_url):
    """The feed thread reads the store when a PostgreSQL NOTIFY says something was
    written; with its LISTEN connection terminated (pg_terminate_backend) it listens
    again, and the streams go on getting what other processes write."""
    import psycopg

    watcher = api_server(pg_schema_url, args=("--no-engine",))
    writer = api_server(pg_schema_url, args=("--no-engine",))
    plain = pg_schema_url.replace("postgresql+psycopg://", "postgresql://").split("?")[0]

    def listeners() -> list[int]:
        with psycopg.connect(plain, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                " AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
            ).fetchall()
        return [r[0] for r in rows]

    with Client(watcher.base_url) as w, Client(writer.base_url) as other:
        got = Collector(w, project="default", last_event_id=0)
        first = other.session("default", "s").reminders.create("before", in_="1h")
        assert wait_for(lambda: got.kinds(first["id"]), 30), (got.items, got.error)
        dropped = wait_for(listeners, 30)
        assert dropped, "no LISTEN connection to drop"
        with psycopg.connect(plain, autocommit=True) as conn:
            for pid in dropped:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        for n in range(3):  # each written by the other server after the drop
            rem = other.session("default", "s").reminders.create(f"after {n}", in_="1h")
            assert wait_for(lambda rid=rem["id"]: got.kinds(rid), 30), (got.items, got.error)
        assert wait_for(lambda: set(listeners()) - set(dropped), 30)  # it listens again
    assert "Traceback" not in watcher.log.read_text(), watcher.log.read_text()[-3000:]
