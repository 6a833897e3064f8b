"""Every route and error status of `remindkit api`, through the Python client and raw
httpx, against a real server process on loopback (SQLite store)."""

from __future__ import annotations

import httpx
import pytest

from remindkit.client import Client
from remindkit.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    InvalidSchedule,
    LimitExceeded,
    NotFound,
    Unauthorized,
)
from remindkit.settings import Settings
from remindkit.store import open_store

from .conftest import cli

pytestmark = [pytest.mark.api, pytest.mark.processes]


def _err(resp: httpx.Response, status: int, code: str) -> None:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    assert body["error"]["message"]


def test_reminder_routes_and_their_statuses(api_server, sqlite_url, tmp_path):
    srv = api_server(sqlite_url)
    base = f"{srv.base_url}/v1/projects/default/sessions"
    with (
        httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http,
        Client(srv.base_url) as client,
    ):
        rems = client.session("default", "s1").reminders
        # create: 201, Location, the reminder object
        resp = http.post(
            f"{base}/s1/reminders",
            json={
                "prompt": "check the deploy",
                "name": "deploy",
                "in": "24h",
                "every": "1h",
                "alarm": True,
                "announce": "deploy",
            },
        )
        assert resp.status_code == 201, resp.text
        made = resp.json()
        assert (
            resp.headers["location"] == f"/v1/projects/default/sessions/s1/reminders/{made['id']}"
        )
        assert (made["text"], made["label"], made["kind"], made["every_s"], made["alarm"]) == (
            "check the deploy",
            "deploy",
            "every",
            3600,
            True,
        )
        second = rems.create("stretch", in_="2h")
        assert second["state"] == "active" and second["session"] == "s1"
        # list, get
        listed = http.get(f"{base}/s1/reminders")
        assert listed.status_code == 200 and [r["id"] for r in listed.json()] == [
            made["id"],
            second["id"],
        ]
        assert rems.get(made["id"])["id"] == made["id"]
        assert http.get(f"{srv.base_url}{resp.headers['location']}").json()["label"] == "deploy"
        # the same store, the same object: the in-process API sees it
        store = open_store(sqlite_url, settings=Settings.from_env(env={}, home=tmp_path / "h"))
        try:
            assert store.reminders.get_reminder(made["id"]).text == "check the deploy"
        finally:
            store.close()
        # PATCH: pause, resume, snooze, text and name, a stale version
        assert rems.update(made["id"], enabled=False)["state"] == "paused"
        assert (
            http.patch(f"{base}/s1/reminders/{made['id']}", json={"enabled": True}).json()["state"]
            == "active"
        )
        snoozed = rems.update(second["id"], snooze="10m")
        assert snoozed["state"] == "active" and snoozed["next_fire_at"] < second["next_fire_at"]
        edited = rems.update(made["id"], prompt="check the deploy again", name="deploy2")
        assert (edited["text"], edited["label"]) == ("check the deploy again", "deploy2")
        _err(
            http.patch(f"{base}/s1/reminders/{made['id']}", json={"enabled": False, "version": 1}),
            409,
            "conflict",
        )
        with pytest.raises(Conflict) as exc:
            rems.update(made["id"], name="x", version=edited["version"] - 1)
        assert exc.value.code == "conflict"
        assert rems.get(made["id"])["label"] == "deploy2"  # refused: nothing changed
        # the list shows each change, item for item as GET shows it
        assert http.get(f"{base}/s1/reminders").json() == [rems.get(made["id"]), snoozed]
        # history
        hist = http.get(f"{base}/s1/reminders/{made['id']}/history")
        assert hist.status_code == 200 and hist.json() == []
        # DELETE: 204, then it is cancelled and listed with all=true only
        assert http.delete(f"{base}/s1/reminders/{second['id']}").status_code == 204
        assert [r["id"] for r in rems.list()] == [made["id"]]
        assert {r["id"]: r["state"] for r in rems.list(all=True)}[second["id"]] == "cancelled"
        _err(http.delete(f"{base}/s1/reminders/{second['id']}"), 409, "not_active")
        rems.remove(made["id"])
        # sessions
        sess = http.get(f"{base}/s1")
        assert (
            sess.status_code == 200
            and sess.json()["id"] == "s1"
            and sess.json()["project"] == "default"
        )
        assert [s["id"] for s in client.sessions("default")] == ["s1"]
        _err(http.get(f"{base}/nobody"), 404, "session_not_found")
        assert http.get(f"{base}/nobody/reminders").json() == []
        # unknown things: 404
        _err(http.get(f"{base}/s1/reminders/rem_nothere"), 404, "not_found")
        _err(
            http.patch(f"{base}/s1/reminders/rem_nothere", json={"enabled": False}),
            404,
            "not_found",
        )
        _err(http.delete(f"{base}/s1/reminders/rem_nothere"), 404, "not_found")
        _err(http.get(f"{base}/s1/reminders/rem_nothere/history"), 404, "not_found")
        _err(http.get(f"{srv.base_url}/v1/projects/nowhere/sessions"), 404, "project_not_found")
        _err(http.get(f"{srv.base_url}/v1/nothing"), 404, "not_found")
        with pytest.raises(NotFound):
            rems.get("rem_nothere")
        # another session's reminder is not found through this one
        other = client.session("default", "s2").reminders.create("theirs", in_="1h")
        _err(http.get(f"{base}/s1/reminders/{other['id']}"), 404, "not_found")
        _err(http.delete(f"{base}/s1/reminders/{other['id']}"), 404, "not_found")
        # bad input: 400, nothing written
        before = len(rems.list(all=True))
        _err(
            http.post(f"{base}/s1/reminders", json={"prompt": "x", "in": "5 parsecs"}),
            400,
            "invalid_duration",
        )
        _err(
            http.post(f"{base}/s1/reminders", json={"prompt": "x", "every": "10s"}),
            400,
            "interval_too_short",
        )
        _err(
            http.post(f"{base}/s1/reminders", json={"prompt": "x", "cron": "61 * * * *"}),
            400,
            "invalid_cron",
        )
        _err(http.post(f"{base}/s1/reminders", json={"prompt": " ", "in": "5m"}), 400, "empty_text")
        # the messages name the body's fields, not the command line's flags
        for body, code, says in (
            ({"prompt": "x", "in": "5m", "at": "2030-01-01T00:00:00Z"}, "conflicting_schedule",
             'give either "in" or "at"'),
            ({"prompt": "x", "in": "5m", "repeat": 3}, "invalid_repeat", '"repeat" needs "every"'),
            ({"prompt": "x", "cron": "0 9 * * *", "in": "5m"}, "conflicting_schedule",
             '"cron" sets its own times'),
            ({"prompt": "x"}, "missing_schedule", 'give "in", "at", "every" or "cron"'),
        ):  # fmt: skip
            resp = http.post(f"{base}/s1/reminders", json=body)
            _err(resp, 400, code)
            said = resp.json()["error"]["message"]
            assert says in said and "--" not in said, said
        _err(
            http.post(f"{base}/s1/reminders", json={"prompt": "x", "in": "5m", "when": 1}),
            400,
            "invalid_argument",
        )
        _err(
            http.post(
                f"{base}/s1/reminders",
                content=b"{not json",
                headers={"content-type": "application/json"},
            ),
            400,
            "invalid_argument",
        )
        _err(
            http.post(f"{base}/s1/reminders", json={"prompt": "x", "in": "5m", "on_busy": "later"}),
            400,
            "invalid_on_busy",
        )
        _err(
            http.post(
                f"{srv.base_url}/v1/projects/bad%20name/sessions/s1/reminders",
                json={"prompt": "x", "in": "5m"},
            ),
            400,
            "invalid_project",
        )
        with pytest.raises(InvalidSchedule) as bad:
            rems.create("x", cron="not a cron")
        assert bad.value.code == "invalid_cron"
        with pytest.raises(InvalidInput):
            rems.create("", in_="5m")
        assert len(rems.list(all=True)) == before
        # method not allowed
        _err(http.put(f"{base}/s1/reminders"), 405, "method_not_allowed")
        # service routes
        assert http.get("/healthz").json() == {"ok": True}
        status = client.status()
        assert status["armed"] is True and status["engine"] in [e["id"] for e in status["engines"]]
        spec = http.get("/openapi.json").json()
        assert "/v1/projects/{project}/sessions/{session}/reminders/{reminder_id}" in spec["paths"]
        assert "/v1/events" in spec["paths"] or "events" not in spec.get("tags", [])
        docs = http.get("/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_limits_and_deleted_sessions(api_server, sqlite_url, tmp_path):
    srv = api_server(
        sqlite_url,
        env={
            "REMINDKIT_MAX_PER_SESSION": "3",
            "REMINDKIT_MAX_PER_PROJECT": "5",
            "REMINDKIT_MAX_TOTAL": "none",
        },
    )
    with (
        Client(srv.base_url) as client,
        httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http,
    ):
        a = client.session("default", "a").reminders
        for i in range(3):
            a.create(f"r{i}", in_="1h")
        with pytest.raises(LimitExceeded) as exc:
            a.create("one too many", in_="1h")
        assert exc.value.code == "too_many_reminders"
        b = client.session("default", "b").reminders
        b.create("b0", in_="1h")
        b.create("b1", in_="1h")
        resp = http.post(
            "/v1/projects/default/sessions/c/reminders", json={"prompt": "c0", "in": "1h"}
        )
        assert resp.status_code == 409 and resp.json()["error"]["code"] == "too_many_reminders"
        assert "project" in resp.json()["error"]["message"]
        # another project has its own count
        assert cli("projects", "create", "other", db=sqlite_url, home=tmp_path).returncode == 0
        made = client.session("other", "c").reminders.create("elsewhere", in_="1h")
        assert made["session"] == "c"  # as its project names it
        # each project is a namespace: another project's session is not found under this
        # one, not even by its id in the store
        for path in ("c", "@other%2Fc"):
            got = http.get(f"/v1/projects/default/sessions/{path}")
            assert got.status_code == 404 and got.json()["error"]["code"] == "session_not_found"
        resp = http.post(
            "/v1/projects/default/sessions/@other%2Fc/reminders", json={"prompt": "x", "in": "1h"}
        )
        assert resp.status_code == 404 and resp.json()["error"]["code"] == "session_not_found"
        # a deleted session: 409
        assert cli("session", "rm", "b", db=sqlite_url, home=tmp_path).returncode == 0
        with pytest.raises(Conflict) as gone:
            b.create("after deletion", in_="1h")
        assert gone.value.code == "session_deleted"


def test_tokens_scope_every_request(api_server, sqlite_url, tmp_path):
    made = cli(
        "token", "create", "--project", "acme", "--session", "s1", db=sqlite_url, home=tmp_path
    )
    assert made.returncode == 0, made.stderr
    session_token = made.stdout.splitlines()[0]
    assert session_token.startswith("rk_")
    ro = cli(
        "token", "create", "--project", "acme", "--read-only", db=sqlite_url, home=tmp_path
    ).stdout.split()[0]
    proj = cli("token", "create", "--project", "acme", db=sqlite_url, home=tmp_path).stdout.split()[
        0
    ]
    admin = cli("token", "create", "--admin", db=sqlite_url, home=tmp_path).stdout.split()[0]
    other = cli(
        "token", "create", "--project", "zeta", db=sqlite_url, home=tmp_path
    ).stdout.split()[0]
    listed = cli("token", "ls", "--json", db=sqlite_url, home=tmp_path)
    assert session_token not in listed.stdout and len(__import__("json").loads(listed.stdout)) == 5
    srv = api_server(sqlite_url)
    url = srv.base_url
    acme = "/v1/projects/acme/sessions"
    with httpx.Client(base_url=url, timeout=30) as http:
        # no token, an unknown one: 401
        _err(http.get(f"{acme}/s1/reminders"), 401, "unauthorized")
        _err(
            http.get(f"{acme}/s1/reminders", headers={"Authorization": "Bearer rk_wrong"}),
            401,
            "unauthorized",
        )
        _err(http.get("/v1/status"), 401, "unauthorized")
        assert http.get("/healthz").status_code == 200
    with Client(url, session_token) as mine:
        r = mine.session("acme", "s1").reminders.create("mine", in_="1h")
        assert [x["id"] for x in mine.session("acme", "s1").reminders.list()] == [r["id"]]
        for call in (
            lambda: mine.session("acme", "s2").reminders.list(),
            lambda: mine.session("acme", "s2").reminders.create("not mine", in_="1h"),
            lambda: mine.session("other", "s1").reminders.list(),
            lambda: mine.sessions("acme"),
        ):
            with pytest.raises(Forbidden) as exc:
                call()
            assert exc.value.code == "forbidden"
    with Client(url, ro) as reader:
        assert [x["id"] for x in reader.session("acme", "s1").reminders.list()] == [r["id"]]
        with pytest.raises(Forbidden) as exc:
            reader.session("acme", "s1").reminders.remove(r["id"])
        assert exc.value.code == "read_only"
    with Client(url, proj) as project_client:
        project_client.session("acme", "s2").reminders.create("another session", in_="1h")
        assert {s["id"] for s in project_client.sessions("acme")} == {"s1", "s2"}
        with pytest.raises(Forbidden):
            project_client.sessions("default")
    with Client(url, other) as zeta, pytest.raises(Forbidden):
        zeta.session("acme", "s1").reminders.list()
    with Client(url, admin) as root:
        assert root.session("default", "x").reminders.create("admin", in_="1h")["session"] == "x"
        assert len(root.session("acme", "s1").reminders.list()) == 1
    with Client(url, token="") as anonymous, pytest.raises(Unauthorized):
        anonymous.status()
    with Client(url) as own:  # the user's own client: the local credential, found in the home
        assert own.status()["scope"]["scope"] == "admin"
    # a revoked token is refused at once
    tok_id = cli("token", "ls", "--json", db=sqlite_url, home=tmp_path)
    ids = [t["id"] for t in __import__("json").loads(tok_id.stdout) if t["scope"] == "admin"]
    assert cli("token", "rm", ids[0], db=sqlite_url, home=tmp_path).returncode == 0
    with Client(url, admin) as root, pytest.raises(Unauthorized):
        root.status()


def test_another_address_than_loopback_needs_tokens(tmp_path, sqlite_url, api_server):
    refused = cli("api", "--host", "0.0.0.0", "--port", "0", db=sqlite_url, home=tmp_path)
    assert refused.returncode == 1 and "tokens_required" in refused.stderr
    token = cli(
        "token", "create", "--project", "default", db=sqlite_url, home=tmp_path
    ).stdout.split()[0]
    srv = api_server(sqlite_url, args=("--host", "0.0.0.0"))
    port = srv.base_url.rsplit(":", 1)[1]
    with Client(f"http://127.0.0.1:{port}", token) as client:
        assert client.session("default", "s").reminders.list() == []


def test_session_ids_with_slashes(api_server, sqlite_url, tmp_path):
    """An MCP host names its session after a folder ("claude-code:/home/u/proj"): every
    route reaches it, with the slashes as they are or percent-encoded (the SDK's way)."""
    srv = api_server(sqlite_url)
    sid = "claude-code:/home/u/proj"
    with (
        httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http,
        Client(srv.base_url) as client,
    ):
        rems = client.session("default", sid).reminders
        made = rems.create(prompt="look at the build", in_="1h", name="build")
        assert made["session"] == sid
        assert [r["id"] for r in rems.list()] == [made["id"]]
        raw = f"/v1/projects/default/sessions/{sid}"
        listed = http.get(raw + "/reminders")
        assert listed.status_code == 200 and [r["id"] for r in listed.json()] == [made["id"]]
        got = http.get(f"{raw}/reminders/{made['id']}")
        assert got.status_code == 200 and got.json()["session"] == sid
        assert http.get(f"{raw}/reminders/{made['id']}/history").json() == []
        sess = http.get(raw)
        assert sess.status_code == 200 and sess.json()["id"] == sid
        assert (
            http.get("/v1/projects/default/sessions/claude-code%3A%2Fhome%2Fu%2Fproj").json()["id"]
            == sid
        )
        # a prefix of the id is another session, unknown here
        _err(
            http.get("/v1/projects/default/sessions/claude-code:/home/u"), 404, "session_not_found"
        )
        _err(
            http.get(f"/v1/projects/default/sessions/claude-code:/home/u/reminders/{made['id']}"),
            404,
            "not_found",
        )
        paused = rems.update(made["id"], enabled=False)
        assert paused["state"] == "paused"
        rems.remove(made["id"])
        assert rems.list() == []


def test_a_fires_alert_reads_back_over_http(api_server, sqlite_url, tmp_path):
    """A fire's history entry carries its alert (pending, playing, done, muted, failed):
    this server runs with --no-alerts, so the alarm of a fire for the person alone (a
    session with no agent) is recorded muted, and the fire waits, saying why, rather than
    ending as alerted."""
    import time

    srv = api_server(sqlite_url)
    base = "/v1/projects/default/sessions/alone/reminders"
    with httpx.Client(base_url=srv.base_url, timeout=30, headers=srv.headers) as http:
        made = http.post(base, json={"prompt": "stand up", "in": "1s", "alarm": True})
        assert made.status_code == 201, made.text
        deadline = time.monotonic() + 60  # from the moment it is due
        fires: list = []
        while time.monotonic() < deadline:
            fires = http.get(f"{base}/{made.json()['id']}/history").json()
            if fires and fires[0].get("alert") == "muted" and fires[0]["outcome"] != "claimed":
                break  # the alert is recorded first, the outcome when the engine has routed it
            time.sleep(0.1)
    assert fires and fires[0]["alert"] == "muted", fires
    assert fires[0]["outcome"] == "waiting" and fires[0]["error"], fires
